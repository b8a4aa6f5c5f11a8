/* hybrid_prefill.c — prefill of a layer whose experts live in RAM (sched.h). Micro-batches of at
 * least the break-even size run on the GPU: the experts already in the layer's VRAM cache slots
 * straight from there, the others streamed in chunks of up to 32 experts through two VRAM
 * staging buffers: the copy of chunk c+1 (second stream, waiting until the buffer's previous
 * chunk was consumed) overlaps the grouped GEMMs of chunk c (compute stream, waiting for its
 * copy). Each group renumbers the routed ids into its experts (others -1), builds the expert
 * plan, runs gate/up and down, and adds its weighted share into x. Smaller batches go to CPU
 * threads (hmoe_sched_moe_ffn on the normalised rows copied back). The decode cache is only read.
 */
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

static int n_chunks_of(const struct hmoe_sched_hybrid *h, int il) {
    int list[HYB_MAX_EXPERT];
    return (uncached(h, il, list) + h->chunk_experts - 1) / h->chunk_experts;
}

/* Queue the copy of chunk c of layer il's uncached experts into staging buffer b (after its last
 * reader) and of the chunk's expert map; runs of consecutive experts go as one copy per tensor. */
static enum hmoe_status enqueue_copy(struct hmoe_sched_hybrid *h, int il, int c, int b, struct hmoe_err *err) {
    const struct hmoe_moe_weights *w = &h->moe[il];
    int list[HYB_MAX_EXPERT];
    const int nu = uncached(h, il, list), first = c * h->chunk_experts;
    const int cnt = HMOE_MIN(nu - first, h->chunk_experts);
    const size_t E = (size_t)h->E, row = ((size_t)il * (size_t)h->n_chunks + (size_t)c) * E;
    int32_t *map = h->chunk_host + row;
    for (int e = 0; e < h->E; e++) map[e] = -1;
    for (int i = 0; i < cnt; i++) map[list[first + i]] = i;
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
        while (j < cnt && list[first + j] == list[first + j - 1] + 1) j++;
        const int e0 = list[first + i];
        for (int p = 0; p < 3 && !st; p++)
            st = hmoe_cuda_memcpy_async(parts[p].dst + (size_t)i * parts[p].m->mat_bytes,
                                        (const uint8_t *)parts[p].m->data + (size_t)e0 * parts[p].m->mat_bytes,
                                        parts[p].m->mat_bytes * (size_t)(j - i), h->fill_stream, err);
        i = j;
    }
    if (!st) st = hmoe_cuda_event_record(h->ev_copy[b], h->fill_stream, err);
    h->sg[b] = (struct hmoe_cuda_experts){.type = w->gate.type, .w = base, .row_bytes = w->gate.row_bytes,
                                          .expert_stride_bytes = w->gate.mat_bytes, .nrows = w->gate.n_out,
                                          .ncols = w->gate.n_in, .n_expert = HMOE_MAX(cnt, 1)};
    h->su[b] = h->sg[b];
    h->su[b].type = w->up.type;
    h->su[b].w = base + gb;
    h->sd[b] = (struct hmoe_cuda_experts){.type = w->down.type, .w = base + gb + ub, .row_bytes = w->down.row_bytes,
                                          .expert_stride_bytes = w->down.mat_bytes, .nrows = w->down.n_out,
                                          .ncols = w->down.n_in, .n_expert = HMOE_MAX(cnt, 1)};
    h->stream_experts_total += (uint64_t)cnt;
    h->stream_bytes_total += (uint64_t)cnt * (w->gate.mat_bytes + w->up.mat_bytes + w->down.mat_bytes);
    return st;
}

/* Grouped MoE of the experts in `gate/up/down` (n_expert of them), ids renumbered through d_map. */
static enum hmoe_status grouped(struct hmoe_sched_hybrid *h, int il, int n, const struct hmoe_sched_moe_bufs *b,
                                const int32_t *d_map, const struct hmoe_cuda_experts *gate, const void *up_w,
                                const struct hmoe_cuda_experts *down, void *stream, struct hmoe_err *err) {
    const int k = h->k, cnt = (int)gate->n_expert;
    const int64_t d = h->d, F = h->moe[il].gate.n_out;
    enum hmoe_status st = hmoe_cuda_moe_map_ids(b->ids, (int64_t)n * k, d_map, h->E, b->ids_mapped, stream, err);
    if (!st) st = hmoe_cuda_moe_plan_build(b->ids_mapped, n, k, cnt, b->plan, stream, err);
    struct hmoe_cuda_gemm_args gu = {.w = *gate, .w_up = up_w, .x = b->h16, .x_stride = d, .ntok = n, .plan = b->plan,
                                     .k = k, .x_gather = true, .y_f16 = b->z16, .y_stride = F};
    if (!st) st = hmoe_cuda_gemm(&gu, stream, err);
    struct hmoe_cuda_gemm_args dn = {.w = *down, .x = b->z16, .x_stride = F, .ntok = n, .plan = b->plan, .k = k,
                                     .x_gather = false, .y_f32 = b->ye, .y_stride = d};
    if (!st) st = hmoe_cuda_gemm(&dn, stream, err);
    if (!st) st = hmoe_cuda_moe_combine(b->plan, b->ye, d, b->wts, n, k, cnt, d, b->x, d, stream, err);
    return st;
}

static enum hmoe_status prefill_stream(struct hmoe_sched_hybrid *h, int il, int n, const struct hmoe_sched_moe_bufs *b,
                                       void *stream, struct hmoe_err *err) {
    const struct hyb_layer *L = &h->L[il];
    int list[HYB_MAX_EXPERT];
    const int nu = uncached(h, il, list), nch = (nu + h->chunk_experts - 1) / h->chunk_experts;
    enum hmoe_status st = HMOE_OK;
    /* the first chunk's copy is under way (or starts now) while the cached experts run */
    if (nch > 0 && !(h->pf_valid && h->pf_layer == il && h->pf_chunk == 0)) {
        h->pf_valid = true;
        h->pf_layer = il;
        h->pf_chunk = 0;
        h->pf_buf = 1 - h->last_buf;
        st = enqueue_copy(h, il, 0, h->pf_buf, err);
    }
    if (!st && L->n_slots > 0 && nu < h->E)
        st = grouped(h, il, n, b, h->d_slot_of + (size_t)il * h->E, &L->gate, L->up.w, &L->down, stream, err);
    for (int c = 0; c < nch && !st; c++) {
        int buf;
        if (h->pf_valid && h->pf_layer == il && h->pf_chunk == c) {
            buf = h->pf_buf;
        } else {
            buf = 1 - h->last_buf;
            st = enqueue_copy(h, il, c, buf, err);
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
        int nl = il, nc = c + 1;
        if (nc >= nch) {
            nc = 0;
            for (nl = il + 1; nl < h->n_layer && (!h->L[nl].ram || n_chunks_of(h, nl) == 0); nl++) {}
        }
        if (!st && nl < h->n_layer) {
            st = enqueue_copy(h, nl, nc, 1 - buf, err);
            h->pf_valid = true;
            h->pf_layer = nl;
            h->pf_chunk = nc;
            h->pf_buf = 1 - buf;
        }
    }
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
    if (h->stream && n >= h->stream_min) return prefill_stream(h, il, n, b, stream, err);
    h->pf_valid = false;
    return prefill_cpu(h, il, n, b, stream, err);
}
