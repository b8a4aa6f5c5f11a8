/* test_sched_moe_plan.c — the work items of a decoded token's experts (sched.h,
 * hmoe_sched_moe_plan_decode) on the expert shapes of Nemotron-3-Nano (Q5_0 / Q8_0), Qwen3-30B,
 * gpt-oss-20b and Qwen3.5-35B for 1..32 threads:
 *   - the items tile each active expert's gate/up rows [0, F) and down rows [0, d) in order, gate/up
 *     chunks start on whole activation blocks (qb), bytes = rows × row bytes, all gate/up items
 *     come before the down items, gate/up items per expert as reported;
 *   - the team's in-order claiming, simulated with equal thread speeds (an item's time is its bytes;
 *     a down item starts only when its expert's gate/up items are done), ends within 8 % of the
 *     even share (total bytes / threads) — worked out here, not taken from the planner.
 * The Nemotron 16-thread layout is printed per thread (items and KB) as the even-split record.
 */
#include "harness.h"

#include "hmoe/sched.h"
#include "hmoe/types.h"

struct shape {
    const char *name;
    int64_t d, F;
    int k;
    bool gated;
    enum hmoe_type up, down;
};

/* Simulated end of the job per thread (bytes as time); returns the latest. */
static double simulate(const struct hmoe_sched_moe_item *it, int n, int nt, int n_active, int gu_per, double *t_end,
                       int *t_items) {
    double done_at[64] = {0}; /* when each expert's last gate/up item ends */
    int gu_left[64];
    for (int a = 0; a < n_active; a++) gu_left[a] = gu_per;
    for (int t = 0; t < nt; t++) t_end[t] = 0, t_items[t] = 0;
    for (int i = 0; i < n; i++) {
        int t = 0; /* the thread free first claims the next item */
        for (int u = 1; u < nt; u++)
            if (t_end[u] < t_end[t]) t = u;
        double start = t_end[t];
        if (it[i].down && done_at[it[i].a] > start) start = done_at[it[i].a];
        t_end[t] = start + (double)it[i].bytes;
        t_items[t]++;
        if (!it[i].down && --gu_left[it[i].a] == 0) done_at[it[i].a] = t_end[t];
    }
    double mx = 0;
    for (int t = 0; t < nt; t++) mx = t_end[t] > mx ? t_end[t] : mx;
    return mx;
}

static void check_shape(const struct shape *sp, int nt) {
    const enum hmoe_type act = hmoe_type_info[sp->down].vec_dot_type;
    struct hmoe_sched_moe_shape sh = {.d = sp->d, .F = sp->F, .qb = hmoe_type_info[act].blck,
                                      .hidden_row_bytes = hmoe_row_bytes(sp->up, sp->d) * (sp->gated ? 2 : 1),
                                      .down_row_bytes = hmoe_row_bytes(sp->down, sp->F), .n_active = sp->k,
                                      .n_threads = nt, .per_thread = 4, .tail = 4};
    const int max = hmoe_sched_moe_plan_max_items(sp->d, sp->F, sp->k);
    struct hmoe_sched_moe_item *it = calloc((size_t)max, sizeof *it);
    int gu = 0;
    const int n = hmoe_sched_moe_plan_decode(&sh, it, max, &gu);
    char name[160], why[256] = "";
    snprintf(name, sizeof name, "plan %s, %d threads: %d items tile every expert's rows", sp->name, nt, n);
    bool ok = n > 0;
    int i = 0;
    uint64_t total = 0;
    for (int pass = 0; pass < 2 && ok; pass++) {
        for (int a = 0; a < sp->k && ok; a++) {
            const int64_t rows = pass ? sp->d : sp->F;
            const size_t rb = pass ? sh.down_row_bytes : sh.hidden_row_bytes;
            int64_t at = 0;
            int count = 0;
            while (ok && at < rows) {
                if (i >= n || it[i].a != a || it[i].down != (pass == 1) || it[i].r0 != at || it[i].r1 <= it[i].r0 ||
                    it[i].r1 > rows || it[i].bytes != (uint64_t)(it[i].r1 - it[i].r0) * rb ||
                    (pass == 0 && it[i].r0 % sh.qb != 0)) {
                    snprintf(why, sizeof why, "item %d (expert %d, %s, rows %d..%d) where %s rows of expert %d from %lld "
                             "were due", i, i < n ? it[i].a : -1, i < n && it[i].down ? "down" : "gate/up",
                             i < n ? it[i].r0 : -1, i < n ? it[i].r1 : -1, pass ? "down" : "gate/up", a, (long long)at);
                    ok = false;
                    break;
                }
                at = it[i].r1;
                total += it[i].bytes;
                i++, count++;
            }
            if (ok && pass == 0 && count != gu) {
                snprintf(why, sizeof why, "expert %d has %d gate/up items, the plan says %d", a, count, gu);
                ok = false;
            }
        }
    }
    if (ok && i != n) snprintf(why, sizeof why, "%d items left over", n - i), ok = false;
    t_check(ok, name, "%s", why);
    if (!ok) {
        free(it);
        return;
    }
    double t_end[64];
    int t_items[64];
    const double end = simulate(it, n, nt, sp->k, gu, t_end, t_items), even = (double)total / nt;
    snprintf(name, sizeof name, "plan %s, %d threads: simulated end within 8%% of the even share", sp->name, nt);
    t_check(end <= 1.08 * even, name, "last thread ends at %.0f KB, the even share is %.0f KB (%.3f)", end / 1e3,
            even / 1e3, end / even);
    if (nt == 16 && !strncmp(sp->name, "nemotron", 8)) {
        printf("  %s on 16 threads: %d items (%d gate/up per expert), %.2f MB; per thread items/KB:", sp->name, n, gu,
               total / 1e6);
        for (int t = 0; t < nt; t++) printf(" %d/%.0f", t_items[t], t_end[t] / 1e3);
        printf("\n");
    }
    free(it);
}

int main(void) {
    const struct shape shapes[] = {
        {"nemotron Q5_0/Q5_0", 2688, 1856, 6, false, HMOE_TYPE_Q5_0, HMOE_TYPE_Q5_0},
        {"nemotron Q5_0/Q8_0", 2688, 1856, 6, false, HMOE_TYPE_Q5_0, HMOE_TYPE_Q8_0},
        {"qwen3 Q4_K/Q6_K", 2048, 768, 8, true, HMOE_TYPE_Q4_K, HMOE_TYPE_Q6_K},
        {"gpt-oss MXFP4", 2880, 2880, 4, true, HMOE_TYPE_MXFP4, HMOE_TYPE_MXFP4},
        {"qwen35 Q4_K/Q6_K", 2048, 512, 8, true, HMOE_TYPE_Q4_K, HMOE_TYPE_Q6_K},
    };
    const int threads[] = {1, 2, 3, 4, 6, 8, 12, 16};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (size_t t = 0; t < sizeof threads / sizeof threads[0]; t++) check_shape(&shapes[s], threads[t]);

    /* a call without active experts has no items; a buffer too small is refused */
    struct hmoe_sched_moe_shape sh = {.d = 64, .F = 64, .qb = 32, .hidden_row_bytes = 72, .down_row_bytes = 72,
                                      .n_active = 0, .n_threads = 4, .per_thread = 4, .tail = 4};
    struct hmoe_sched_moe_item few[4];
    int gu = -1;
    t_check(hmoe_sched_moe_plan_decode(&sh, few, 4, &gu) == 0 && gu == 0, "plan: no active experts, no items", "got %d items", gu);
    sh.n_active = 2, sh.n_threads = 64;
    t_check(hmoe_sched_moe_plan_decode(&sh, few, 1, &gu) == -1, "plan: too small an item buffer is refused", "it was filled");
    return t_summary();
}
