/* hybrid_prefill.c — prefill of a layer whose experts live in RAM (sched.h). Micro-batches of at
 * least the break-even size run on the GPU: the experts already in the layer's VRAM cache slots
 * straight from there, the others streamed in chunks of up to 32 experts through two VRAM
 * staging buffers: the copy of chunk c+1 (second stream, waiting until the buffer's previous
 * chunk was consumed) overlaps the grouped GEMMs of chunk c (compute stream, waiting for its
 * copy). Each group renumbers the routed ids into its experts (others -1), builds the expert
 * plan, runs gate/up and down, and adds its weighted share into x. Smaller batches go to CPU
 * threads (hmoe_sched_moe_ffn on the normalised rows copied back). The decode cache is only read.
 * Split (the default with streaming and micro-batches of more than one token): a layer's first
 * chunk (half its uncached experts, at most a chunk: those with the most tokens in earlier
 * micro-batches) is prefetched during the previous layer; after the router the host reads the
 * routed ids (side stream, polled) while the GPU runs the cached group and that chunk, counts
 * tokens per expert and, for the other uncached experts, skips those without tokens, gives CPU
 * threads the lightest (hybrid_split.c decides, from measured costs) and streams the rest
 * heaviest first. The CPU computes its experts from the GPU's routing (rows, ids, weights copied
 * to page-locked memory; never re-routed, so a token keeps exactly its k experts) in a host
 * function queued on the side stream, so the calling thread never waits for it and keeps queueing
 * the next layers' copies (a job on the calling thread starved the copy engine: pp512 3-12 %
 * lower); the GPU waits for the job's event after its own groups and adds the sum straight from
 * mapped host memory.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched/hybrid_impl.h"

/* Experts of layer il without a VRAM cache slot, ascending: the ones a prefill must stream. */
static int uncached(const struct hmoe_sched_hybrid *h, int il, int *list) {
    const int32_t *map = hmoe_sched_cache_map(h->cache, il);
    int n = 0;
    for (int e = 0; e < h->E; e++)
        if (!h->L[il].n_slots || map[e] < 0) list[n++] = e;
    return n;
}

/* Queue the copy of the cnt experts list[0..cnt) (ascending: runs of consecutive experts go as
 * one copy per tensor) of layer il as its chunk c into staging buffer b (after its last reader),
 * and of the chunk's expert map. */
static enum hmoe_status enqueue_copy_list(struct hmoe_sched_hybrid *h, int il, int c, int b, const int *list, int cnt,
                                          struct hmoe_err *err) {
    const struct hmoe_moe_weights *w = &h->moe[il];
    const size_t E = (size_t)h->E, row = ((size_t)il * (size_t)h->n_chunks + (size_t)c) * E;
    int32_t *map = h->chunk_host + row;
    for (int e = 0; e < h->E; e++) map[e] = -1;
    for (int i = 0; i < cnt; i++) map[list[i]] = i;
    enum hmoe_status st = hmoe_cuda_stream_wait_event(h->fill_stream, h->ev_used[b], err);
    if (!st) st = hmoe_cuda_memcpy_async(h->d_chunk_map + row, map, E * sizeof(int32_t), h->fill_stream, err);
    uint8_t *base = h->stage[b].ptr;
    const size_t gb = (w->gate.mat_bytes * (size_t)cnt + 255) / 256 * 256;
    const size_t ub = (w->up.mat_bytes * (size_t)cnt + 255) / 256 * 256;
    const struct {
        const struct hmoe_mat *m;
        uint8_t *dst;
    } parts[3] = {{&w->gate, base}, {&w->up, base + gb}, {&w->down, base + gb + ub}};
    for (int i = 0; i < cnt && !st;) {
        int j = i + 1;
        while (j < cnt && list[j] == list[j - 1] + 1) j++;
        const int e0 = list[i];
        for (int p = 0; p < 3 && !st; p++)
            st = hmoe_cuda_memcpy_async(parts[p].dst + (size_t)i * parts[p].m->mat_bytes,
                                        (const uint8_t *)parts[p].m->data + (size_t)e0 * parts[p].m->mat_bytes,
                                        parts[p].m->mat_bytes * (size_t)(j - i), h->fill_stream, err);
        i = j;
    }
    if (!st) st = hmoe_cuda_event_record(h->ev_copy[b], h->fill_stream, err);
    h->sg[b] = (struct hmoe_cuda_experts){.type = w->gate.type, .w = base, .row_bytes = w->gate.row_bytes,
                                          .expert_stride_bytes = w->gate.mat_bytes, .nrows = w->gate.n_out,
                                          .ncols = w->gate.n_in, .n_expert = HMOE_MAX(cnt, 1),
                                          .bias = h->d_gate_bias ? h->d_gate_bias[il] : NULL, .act = (int)w->act};
    h->su[b] = h->sg[b];
    h->su[b].type = w->up.type;
    h->su[b].w = base + gb;
    h->sd[b] = (struct hmoe_cuda_experts){.type = w->down.type, .w = base + gb + ub, .row_bytes = w->down.row_bytes,
                                          .expert_stride_bytes = w->down.mat_bytes, .nrows = w->down.n_out,
                                          .ncols = w->down.n_in, .n_expert = HMOE_MAX(cnt, 1),
                                          .bias = h->d_down_bias ? h->d_down_bias[il] : NULL};
    h->stream_experts_total += (uint64_t)cnt;
    h->stream_bytes_total += (uint64_t)cnt * (w->gate.mat_bytes + w->up.mat_bytes + w->down.mat_bytes);
    return st;
}

/* Chunk c of the nu uncached experts list[] (ascending) of layer il into staging buffer b. */
static enum hmoe_status enqueue_chunk(struct hmoe_sched_hybrid *h, int il, int c, int b, const int *list, int nu,
                                      struct hmoe_err *err) {
    const int first = c * h->chunk_experts;
    return enqueue_copy_list(h, il, c, b, list + first, HMOE_MIN(nu - first, h->chunk_experts), err);
}

static void sort_ints(int *a, int n) {
    for (int i = 1; i < n; i++) {
        const int v = a[i];
        int j = i - 1;
        while (j >= 0 && a[j] > v) a[j + 1] = a[j], j--;
        a[j + 1] = v;
    }
}

/* Count mode: the first chunk of layer il, copied before its routing is known: the uncached
 * experts list[] with the most tokens in earlier micro-batches (by index while there is no
 * history), ascending, into first; returns how many: those with tokens in the last micro-batches
 * (history >= COUNT_HIST_USED), at least COUNT_FIRST_MIN (its copies, ~0.05 ms each at 512 tokens,
 * cover the host's round trip after the router), at most a chunk and half the layer (the other half
 * is left to the counts). The H200's first call prefetched half the layer: at 14 GiB nearly all
 * of those 14 had no tokens (the synthetic file routes to low ids; the cache holds the low ids). */
#define COUNT_FIRST_MIN 8
#define COUNT_HIST_USED 0.5f
static int predict_first(const struct hmoe_sched_hybrid *h, int il, const int *list, int nu, int *first) {
    const float *hist = h->cnt_hist + (size_t)il * (size_t)h->E;
    int hot = 0;
    for (int j = 0; j < nu; j++) hot += hist[list[j]] >= COUNT_HIST_USED;
    const int n0 = HMOE_MIN(HMOE_MIN(h->chunk_experts, (nu + 1) / 2), HMOE_MAX(COUNT_FIRST_MIN, hot));
    uint8_t taken[HYB_MAX_EXPERT] = {0};
    for (int i = 0; i < n0; i++) {
        int best = -1;
        for (int j = 0; j < nu; j++)
            if (!taken[j] && (best < 0 || hist[list[j]] > hist[list[best]])) best = j;
        taken[best] = 1;
        first[i] = list[best];
    }
    sort_ints(first, n0);
    return n0;
}

/* Grouped MoE of the experts in `gate/up/down` (n_expert of them), ids renumbered through d_map. */
static enum hmoe_status grouped(struct hmoe_sched_hybrid *h, int il, int n, const struct hmoe_sched_moe_bufs *b,
                                const int32_t *d_map, const struct hmoe_cuda_experts *gate, const void *up_w,
                                const struct hmoe_cuda_experts *down, void *stream, struct hmoe_err *err) {
    const int k = h->k, cnt = (int)gate->n_expert;
    const int64_t d = h->d, F = h->moe[il].gate.n_out;
    enum hmoe_status st = hmoe_cuda_moe_map_ids(b->ids, (int64_t)n * k, d_map, h->E, b->ids_mapped, stream, err);
    if (!st) st = hmoe_cuda_moe_plan_build(b->ids_mapped, n, k, cnt, b->plan, stream, err);
    /* biased experts: the stack's index -> expert, for the bias rows */
    const bool biased = gate->bias || down->bias;
    if (!st && biased) st = hmoe_cuda_moe_invert_map(d_map, h->E, h->d_bias_expert, cnt, stream, err);
    const int32_t *be = biased ? h->d_bias_expert : NULL;
    const float *ub = h->d_up_bias && gate->bias ? h->d_up_bias[il] : NULL;
    struct hmoe_cuda_gemm_args gu = {.w = *gate, .w_up = up_w, .up_bias = ub, .bias_expert = be, .x = b->h16,
                                     .x_stride = d, .ntok = n, .plan = b->plan, .k = k, .x_gather = true,
                                     .y_f16 = b->z16, .y_stride = F};
    if (!st) st = hmoe_cuda_gemm(&gu, stream, err);
    struct hmoe_cuda_gemm_args dn = {.w = *down, .bias_expert = be, .x = b->z16, .x_stride = F, .ntok = n,
                                     .plan = b->plan, .k = k, .x_gather = false, .y_f32 = b->ye, .y_stride = d};
    if (!st) st = hmoe_cuda_gemm(&dn, stream, err);
    if (!st) st = hmoe_cuda_moe_combine(b->plan, b->ye, d, b->wts, n, k, cnt, d, b->x, d, stream, err);
    return st;
}

/* Start the copy of the first chunk of the next RAM layer after il that streams anything into
 * buffer `buf`: with the split the experts predicted heaviest (predict_first), else its first
 * uncached ones. */
static enum hmoe_status prefetch_next_layer(struct hmoe_sched_hybrid *h, int il, int buf, struct hmoe_err *err) {
    int list[HYB_MAX_EXPERT];
    for (int nl = il + 1; nl < h->n_layer; nl++) {
        if (!h->L[nl].ram) continue;
        const int nu = uncached(h, nl, list);
        if (nu <= 0) continue;
        enum hmoe_status st;
        if (h->split_on) {
            h->pf_n0 = predict_first(h, nl, list, nu, h->pf_first);
            st = enqueue_copy_list(h, nl, 0, buf, h->pf_first, h->pf_n0, err);
        } else {
            st = enqueue_chunk(h, nl, 0, buf, list, nu, err);
        }
        h->pf_valid = true;
        h->pf_layer = nl;
        h->pf_chunk = 0;
        h->pf_buf = buf;
        return st;
    }
    return HMOE_OK;
}

/* The CPU job (a host function on the side stream, after the routing's copy): the layer's
 * experts of the set's mask for the GPU's routing, into the mapped sum. No CUDA calls here. */
static void cpu_job(void *arg) {
    struct hyb_split_job *j = arg;
    struct hmoe_sched_hybrid *h = j->h;
    j->err = (struct hmoe_err){0};
    j->t0_ns = hmoe_hyb_now_ns();
    j->st = hmoe_sched_moe_ffn_subset(h->cpu_moe, &h->moe[j->il], h->sp_h, j->n, h->sp_ids, h->sp_wts, j->mask, h->sp_out,
                                      &j->err);
    j->t1_ns = hmoe_hyb_now_ns();
}

/* Count mode: the layer's CPU part, experts cpu[0..nc), as the CPU job on the side stream (the rows,
 * ids and weights are already on their way there). */
static enum hmoe_status queue_count_cpu(struct hmoe_sched_hybrid *h, int il, int n, const int *cpu, int nc, void **ev,
                                        struct hmoe_err *err) {
    const int set = h->sp_set;
    uint8_t *mask = h->sp_mask + (size_t)set * (size_t)h->E;
    memset(mask, 0, (size_t)h->E);
    for (int i = 0; i < nc; i++) mask[cpu[i]] = 1;
    h->sp_job[set] = (struct hyb_split_job){.h = h, .il = il, .n = n, .mask = mask};
    enum hmoe_status st = hmoe_cuda_launch_host_fn(h->sp_stream, cpu_job, &h->sp_job[set], err);
    if (!st) st = hmoe_cuda_event_record(ev[4], h->sp_stream, err);
    return st;
}

/* A streamed layer without the split: a layer whose experts are all cached (its cached group
 * only), or every uncached expert streamed when the split is off (one-token micro-batches given a
 * --stream-min of 1). */
static enum hmoe_status prefill_stream(struct hmoe_sched_hybrid *h, int il, int n, const struct hmoe_sched_moe_bufs *b,
                                       void *stream, struct hmoe_err *err) {
    const struct hyb_layer *L = &h->L[il];
    int list[HYB_MAX_EXPERT];
    const int nu = uncached(h, il, list);
    const bool pre = h->pf_valid && h->pf_layer == il && h->pf_chunk == 0;
    const int nch = (nu + h->chunk_experts - 1) / h->chunk_experts;
    enum hmoe_status st = HMOE_OK;
    /* the first chunk's copy is under way (or starts now) while the cached experts run */
    if (nch > 0 && !pre) {
        h->pf_valid = true;
        h->pf_layer = il;
        h->pf_chunk = 0;
        h->pf_buf = 1 - h->last_buf;
        st = enqueue_chunk(h, il, 0, h->pf_buf, list, nu, err);
    }
    if (!st && L->n_slots > 0 && nu < h->E)
        st = grouped(h, il, n, b, h->d_slot_of + (size_t)il * h->E, &L->gate, L->up.w, &L->down, stream, err);
    for (int c = 0; c < nch && !st; c++) {
        int buf;
        if (h->pf_valid && h->pf_layer == il && h->pf_chunk == c) {
            buf = h->pf_buf;
        } else {
            buf = 1 - h->last_buf;
            st = enqueue_chunk(h, il, c, buf, list, nu, err);
        }
        h->pf_valid = false;
        h->last_buf = buf;
        if (!st) st = hmoe_cuda_stream_wait_event(stream, h->ev_copy[buf], err);
        const size_t row = ((size_t)il * (size_t)h->n_chunks + (size_t)c) * (size_t)h->E;
        if (!st) st = grouped(h, il, n, b, h->d_chunk_map + row, &h->sg[buf], h->su[buf].w, &h->sd[buf], stream, err);
        if (!st) st = hmoe_cuda_event_record(h->ev_used[buf], stream, err);
        /* Start the next chunk's copy into the other buffer: this layer's next chunk, else the
         * first chunk of the next RAM layer that streams anything (it overlaps this layer's rest
         * and the next attention). */
        if (st) break;
        if (c + 1 < nch) {
            st = enqueue_chunk(h, il, c + 1, 1 - buf, list, nu, err);
            h->pf_valid = true;
            h->pf_layer = il;
            h->pf_chunk = c + 1;
            h->pf_buf = 1 - buf;
        } else {
            st = prefetch_next_layer(h, il, 1 - buf, err);
        }
    }
    if (!st && h->split_on && il == h->last_ram) st = hmoe_hyb_split_end_batch(h, n, err);
    return st;
}

/* The split (split_on): a streamed RAM layer's first chunk (the experts predicted
 * heaviest, prefetched during the previous layer) and its cached group are queued before the
 * routing is known; the routed ids then come to the host (the copy engine still copies that
 * chunk), which counts tokens per expert: the other uncached experts without tokens are skipped,
 * CPU threads take the lightest by the cost model, the GPU streams the rest heaviest first. */
static enum hmoe_status prefill_count(struct hmoe_sched_hybrid *h, int il, int n, const struct hmoe_sched_moe_bufs *b,
                                      void *stream, struct hmoe_err *err) {
    const struct hyb_layer *L = &h->L[il];
    const int E = h->E, ce = h->chunk_experts;
    int list[HYB_MAX_EXPERT], first[HYB_MAX_EXPERT], cand[HYB_MAX_EXPERT], cpu[HYB_MAX_EXPERT], gpu[HYB_MAX_EXPERT];
    const int nu = uncached(h, il, list);
    h->sp_set ^= 1;
    /* the layer before the previous one used this set: its groups and CPU job are done or about
     * to be (this also keeps the calling thread at most two split layers ahead) */
    enum hmoe_status st = hmoe_hyb_split_collect(h, h->sp_set, err);
    void **ev = h->ev_sp[h->sp_set];
    void *s = h->sp_stream;
    const size_t nk = (size_t)n * (size_t)h->k;
    /* the routing and rows to the host on the side stream, ids first (the host waits for them) */
    if (!st) st = hmoe_cuda_event_record(ev[0], stream, err);
    if (!st) st = hmoe_cuda_stream_wait_event(s, ev[0], err);
    if (!st) st = hmoe_cuda_memcpy_async(h->sp_ids, b->ids, nk * sizeof(int32_t), s, err);
    if (!st) st = hmoe_cuda_event_record(ev[1], s, err);
    /* (no CPU part with a forced share of 0: the rows stay on the device) */
    if (!st && h->split_share != 0) st = hmoe_cuda_memcpy_async(h->sp_wts, b->wts, nk * sizeof(float), s, err);
    if (!st && h->split_share != 0)
        st = hmoe_cuda_memcpy_async(h->sp_h, b->hf, (size_t)n * (size_t)h->d * sizeof(float), s, err);
    /* the first chunk: prefetched, or its copy starts now */
    int n0;
    if (h->pf_valid && h->pf_layer == il && h->pf_chunk == 0) {
        n0 = h->pf_n0;
        memcpy(first, h->pf_first, (size_t)n0 * sizeof *first);
    } else {
        n0 = predict_first(h, il, list, nu, first);
        h->pf_buf = 1 - h->last_buf;
        if (!st) st = enqueue_copy_list(h, il, 0, h->pf_buf, first, n0, err);
    }
    h->pf_valid = false;
    const int buf0 = h->pf_buf;
    if (!st && L->n_slots > 0 && nu < E)
        st = grouped(h, il, n, b, h->d_slot_of + (size_t)il * E, &L->gate, L->up.w, &L->down, stream, err);
    if (!st) st = hmoe_cuda_event_record(ev[2], stream, err);
    if (!st && n0 > 0) {
        h->last_buf = buf0;
        st = hmoe_cuda_stream_wait_event(stream, h->ev_copy[buf0], err);
        if (!st) st = grouped(h, il, n, b, h->d_chunk_map + (size_t)il * (size_t)h->n_chunks * (size_t)E, &h->sg[buf0],
                              h->su[buf0].w, &h->sd[buf0], stream, err);
        if (!st) st = hmoe_cuda_event_record(h->ev_used[buf0], stream, err);
    }
    /* the host waits for the routed ids (polling: no spinning core beside the CPU team) */
    if (!st) st = hmoe_hyb_wait_event(ev[1], err);
    if (st) return st;
    /* the copy engine ran dry while the host waited: the first chunk was too small for the trip */
    const bool idle = n0 > 0 && hmoe_cuda_event_query(h->ev_copy[buf0]) > 0;
    memset(h->cnt_tok, 0, (size_t)E * sizeof *h->cnt_tok);
    for (size_t i = 0; i < nk; i++)
        if (h->sp_ids[i] >= 0 && h->sp_ids[i] < E) h->cnt_tok[h->sp_ids[i]]++;
    float *hist = h->cnt_hist + (size_t)il * (size_t)E;
    for (int e = 0; e < E; e++) hist[e] = 0.5f * hist[e] + (float)h->cnt_tok[e];
    /* candidates: the uncached experts not in the first chunk */
    uint8_t in0[HYB_MAX_EXPERT] = {0};
    for (int i = 0; i < n0; i++) in0[first[i]] = 1;
    int m = 0;
    for (int i = 0; i < nu; i++)
        if (!in0[list[i]]) cand[m++] = list[i];
    struct hmoe_sched_count_split cs;
    hmoe_hyb_split_decide(h, il, n, nu, n0, cand, m, cpu, gpu, &cs);
    if (cs.n_cpu > 0) st = queue_count_cpu(h, il, n, cpu, cs.n_cpu, ev, err);
    /* the rest streams in chunks behind the first one, the next layer's first chunk behind them */
    int buf = buf0;
    for (int at = 0, ch = 1; at < cs.n_gpu && !st; at += ce, ch++) {
        const int cnt = HMOE_MIN(ce, cs.n_gpu - at);
        int part[HYB_MAX_EXPERT];
        memcpy(part, gpu + at, (size_t)cnt * sizeof *part);
        sort_ints(part, cnt);
        buf = 1 - h->last_buf;
        st = enqueue_copy_list(h, il, ch, buf, part, cnt, err);
        h->last_buf = buf;
        const size_t row = ((size_t)il * (size_t)h->n_chunks + (size_t)ch) * (size_t)E;
        if (!st) st = hmoe_cuda_stream_wait_event(stream, h->ev_copy[buf], err);
        if (!st) st = grouped(h, il, n, b, h->d_chunk_map + row, &h->sg[buf], h->su[buf].w, &h->sd[buf], stream, err);
        if (!st) st = hmoe_cuda_event_record(h->ev_used[buf], stream, err);
    }
    if (!st) st = prefetch_next_layer(h, il, 1 - h->last_buf, err);
    if (!st) st = hmoe_cuda_event_record(ev[3], stream, err);
    /* after its own groups the GPU waits for the CPU's sum and adds it from mapped memory */
    if (!st && cs.n_cpu > 0) st = hmoe_cuda_stream_wait_event(stream, ev[4], err);
    if (!st && cs.n_cpu > 0) st = hmoe_cuda_add(b->x, h->sp_out, (int64_t)n * h->d, b->x, stream, err);
    if (!st && cs.n_cpu > 0) st = hmoe_cuda_event_record(h->ev_sp_end[h->sp_set], stream, err);
    if (st) return st;
    hmoe_hyb_split_record(h, il, n, nu, n0, first, &cs, cpu, gpu, idle);
    if (il == h->last_ram) st = hmoe_hyb_split_end_batch(h, n, err);
    return st;
}

static enum hmoe_status prefill_cpu(struct hmoe_sched_hybrid *h, int il, int n, const struct hmoe_sched_moe_bufs *b,
                                    void *stream, struct hmoe_err *err) {
    const size_t bytes = (size_t)n * (size_t)h->d * sizeof(float);
    enum hmoe_status st = hmoe_cuda_memcpy_async(h->pf_h, b->hf, bytes, stream, err);
    if (!st) st = hmoe_cuda_stream_sync(stream, err);
    if (!st) st = hmoe_sched_moe_ffn(h->cpu_moe, &h->moe[il], h->pf_h, n, h->pf_out, err);
    if (st) return st;
    const int32_t *sel = hmoe_sched_moe_last_selection(h->cpu_moe);
    for (int i = 0; i < n * h->k; i++)
        if (sel[i] >= 0 && sel[i] < h->E) h->counts[(size_t)il * h->E + (size_t)sel[i]]++;
    /* b->ye ([n*k][d] floats) is free between layers: the result's landing place on the device */
    st = hmoe_cuda_memcpy_async(b->ye, h->pf_out, bytes, stream, err);
    if (!st) st = hmoe_cuda_add(b->x, b->ye, (int64_t)n * h->d, b->x, stream, err);
    return st;
}

enum hmoe_status hmoe_sched_hybrid_prefill(struct hmoe_sched_hybrid *h, int il, int n, const struct hmoe_sched_moe_bufs *b,
                                           void *stream, struct hmoe_err *err) {
    if (n > h->n_ub || !h->pf_h)
        return HMOE_RAISE(err, HMOE_ERR_INTERNAL, "hybrid prefill: %d tokens exceed the %d-token buffers", n, h->n_ub);
    if (h->stream && n >= h->stream_min) {
        if (h->split_on) {
            int list[HYB_MAX_EXPERT];
            if (uncached(h, il, list) > 0) return prefill_count(h, il, n, b, stream, err);
        }
        return prefill_stream(h, il, n, b, stream, err);
    }
    h->pf_valid = false;
    return prefill_cpu(h, il, n, b, stream, err);
}
