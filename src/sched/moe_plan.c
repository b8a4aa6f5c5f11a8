/* moe_plan.c — the work items of a decoded token's experts (sched.h, hmoe_sched_moe_plan_decode):
 * pure arithmetic on the shapes, so tests check the layout the engine runs.
 * Why items of about equal bytes: the team claims items in order, so a job ends within one item
 * of even on its threads, and an item's time is its weight bytes (decode streams every byte once).
 * Sized from the call's total bytes over n_threads × per_thread, an item is a few hundred KB on 16
 * threads (6 Nemotron experts: 41 MB in ~90 items) and whole matrices on 2 (the longest runs, each
 * item starting its stream cold). The down rows of the job's last nt × item bytes are cut `tail`
 * times finer, so the threads that run out of work first pick up short items and all end close
 * together.
 */
#include "hmoe/sched.h"

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* Rows per item for `rows` rows of `row_bytes` each, about `target` bytes an item, a multiple of
 * `step` (the last item takes the rest); at least one step, at most all rows. */
static int64_t chunk_for(int64_t rows, size_t row_bytes, uint64_t target, int64_t step) {
    const uint64_t bytes = (uint64_t)rows * row_bytes;
    int64_t n = (int64_t)((bytes + target - 1) / target);
    if (n < 1) n = 1;
    int64_t c = ceil_div(ceil_div(rows, n), step) * step;
    return c < rows ? c : rows;
}

int hmoe_sched_moe_plan_max_items(int64_t d, int64_t F, int n_active) {
    return n_active * (int)(ceil_div(F, 16) + ceil_div(d, 16));
}

static int add_items(struct hmoe_sched_moe_item *items, int n, int max, int a, bool down, int64_t r0, int64_t r1,
                     size_t row_bytes) {
    if (n < 0 || n >= max) return -1;
    items[n] = (struct hmoe_sched_moe_item){
        .a = a, .down = down, .r0 = (int32_t)r0, .r1 = (int32_t)r1, .bytes = (uint64_t)(r1 - r0) * row_bytes};
    return n + 1;
}

int hmoe_sched_moe_plan_decode(const struct hmoe_sched_moe_shape *sh, struct hmoe_sched_moe_item *items, int max,
                               int *gu_per_expert) {
    *gu_per_expert = 0;
    if (sh->n_active <= 0) return 0;
    const int nt = sh->n_threads > 0 ? sh->n_threads : 1, per = sh->per_thread > 0 ? sh->per_thread : 1;
    const int tail = sh->tail > 0 ? sh->tail : 1;
    const uint64_t per_expert = (uint64_t)sh->F * sh->hidden_row_bytes + (uint64_t)sh->d * sh->down_row_bytes;
    uint64_t target = per_expert * (uint64_t)sh->n_active / ((uint64_t)nt * (uint64_t)per);
    if (target < 1) target = 1;
    /* gate/up rows on whole activation blocks of the down matrix: each item quantizes its z rows */
    const int64_t step_f = sh->qb > 16 ? sh->qb : 16;
    const int64_t chunk_f = chunk_for(sh->F, sh->hidden_row_bytes, target, step_f);
    const int64_t chunk_d = chunk_for(sh->d, sh->down_row_bytes, target, 16);
    const int64_t chunk_t = chunk_for(sh->d, sh->down_row_bytes, (target + (uint64_t)tail - 1) / (uint64_t)tail, 16);
    int n = 0;
    for (int a = 0; a < sh->n_active; a++)
        for (int64_t r0 = 0; r0 < sh->F; r0 += chunk_f)
            n = add_items(items, n, max, a, false, r0, r0 + chunk_f < sh->F ? r0 + chunk_f : sh->F, sh->hidden_row_bytes);
    /* The down rows: chunk_d rows an item until the rest of the job is down to one item per
     * thread's worth (nt * target bytes), then chunk_t: with greedy claiming the threads end as
     * far apart as the items they claim last, and the short ones fill the gaps the long ones left. */
    const uint64_t tail_bytes = (uint64_t)nt * target, dn_bytes = (uint64_t)sh->d * sh->down_row_bytes;
    for (int a = 0; a < sh->n_active; a++)
        for (int64_t r0 = 0; r0 < sh->d;) {
            const uint64_t left = (uint64_t)(sh->n_active - 1 - a) * dn_bytes + (uint64_t)(sh->d - r0) * sh->down_row_bytes;
            const int64_t c = left <= tail_bytes ? chunk_t : chunk_d;
            const int64_t r1 = r0 + c < sh->d ? r0 + c : sh->d;
            n = add_items(items, n, max, a, true, r0, r1, sh->down_row_bytes);
            r0 = r1;
        }
    *gu_per_expert = (int)ceil_div(sh->F, chunk_f);
    return n;
}
