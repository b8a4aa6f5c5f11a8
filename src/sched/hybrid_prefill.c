/* hybrid_prefill.c — prefill of a layer whose experts live in RAM (sched.h). Micro-batches of at
 * least the break-even size stream the layer's experts to the GPU in chunks of up to 32 experts
 * through two VRAM staging buffers: the copy of chunk c+1 (second stream, waiting until the
 * buffer's previous chunk was consumed) overlaps the grouped GEMMs of chunk c (compute stream,
 * waiting for its copy). Each chunk renumbers the routed ids into the chunk (others -1), builds
 * the expert plan, runs gate/up and down, and adds its weighted share into x. Smaller batches
 * go to CPU threads (hmoe_sched_moe_ffn on the normalised rows copied back). The decode cache
 * is never touched.
 */
#include <string.h>

#include "sched/hybrid_impl.h"

/* Queue the copy of chunk c of layer il into staging buffer b (after its last reader). */
static enum hmoe_status enqueue_copy(struct hmoe_sched_hybrid *h, int il, int c, int b, struct hmoe_err *err) {
    const struct hmoe_moe_weights *w = &h->moe[il];
    const int e0 = c * h->chunk_experts, cnt = HMOE_MIN(h->E - e0, h->chunk_experts);
    enum hmoe_status st = hmoe_cuda_stream_wait_event(h->fill_stream, h->ev_used[b], err);
    uint8_t *base = h->stage[b].ptr;
    const size_t gb = (w->gate.mat_bytes * (size_t)cnt + 255) / 256 * 256;
    const size_t ub = (w->up.mat_bytes * (size_t)cnt + 255) / 256 * 256;
    const struct {
        const struct hmoe_mat *m;
        uint8_t *dst;
    } parts[3] = {{&w->gate, base}, {&w->up, base + gb}, {&w->down, base + gb + ub}};
    for (int i = 0; i < 3 && !st; i++)
        st = hmoe_cuda_memcpy_async(parts[i].dst, (const uint8_t *)parts[i].m->data + (size_t)e0 * parts[i].m->mat_bytes,
                                    parts[i].m->mat_bytes * (size_t)cnt, h->fill_stream, err);
    if (!st) st = hmoe_cuda_event_record(h->ev_copy[b], h->fill_stream, err);
    h->sg[b] = (struct hmoe_cuda_experts){.type = w->gate.type, .w = base, .row_bytes = w->gate.row_bytes,
                                          .expert_stride_bytes = w->gate.mat_bytes, .nrows = w->gate.n_out,
                                          .ncols = w->gate.n_in, .n_expert = cnt};
    h->su[b] = h->sg[b];
    h->su[b].type = w->up.type;
    h->su[b].w = base + gb;
    h->sd[b] = (struct hmoe_cuda_experts){.type = w->down.type, .w = base + gb + ub, .row_bytes = w->down.row_bytes,
                                          .expert_stride_bytes = w->down.mat_bytes, .nrows = w->down.n_out,
                                          .ncols = w->down.n_in, .n_expert = cnt};
    h->stream_bytes_total += (uint64_t)cnt * (w->gate.mat_bytes + w->up.mat_bytes + w->down.mat_bytes);
    return st;
}

static enum hmoe_status prefill_stream(struct hmoe_sched_hybrid *h, int il, int n, const struct hmoe_sched_moe_bufs *b,
                                       void *stream, struct hmoe_err *err) {
    const int k = h->k;
    const int64_t d = h->d, F = h->moe[il].gate.n_out;
    enum hmoe_status st = HMOE_OK;
    for (int c = 0; c < h->n_chunks && !st; c++) {
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
        const int cnt = (int)h->sg[buf].n_expert;
        if (!st) st = hmoe_cuda_moe_map_ids(b->ids, (int64_t)n * k, h->d_chunk_map + (size_t)c * h->E, h->E, b->ids_mapped,
                                            stream, err);
        if (!st) st = hmoe_cuda_moe_plan_build(b->ids_mapped, n, k, cnt, b->plan, stream, err);
        struct hmoe_cuda_gemm_args gu = {.w = h->sg[buf], .w_up = h->su[buf].w, .x = b->h16, .x_stride = d, .ntok = n,
                                         .plan = b->plan, .k = k, .x_gather = true, .y_f16 = b->z16, .y_stride = F};
        if (!st) st = hmoe_cuda_gemm(&gu, stream, err);
        struct hmoe_cuda_gemm_args dn = {.w = h->sd[buf], .x = b->z16, .x_stride = F, .ntok = n, .plan = b->plan,
                                         .k = k, .x_gather = false, .y_f32 = b->ye, .y_stride = d};
        if (!st) st = hmoe_cuda_gemm(&dn, stream, err);
        if (!st) st = hmoe_cuda_moe_combine(b->plan, b->ye, d, b->wts, n, k, cnt, d, b->x, d, stream, err);
        if (!st) st = hmoe_cuda_event_record(h->ev_used[buf], stream, err);
        /* Start the next chunk's copy into the other buffer: this layer's next chunk, else the
         * first chunk of the next RAM layer (it overlaps this layer's rest and the attention). */
        int nl = il, nc = c + 1;
        if (nc >= h->n_chunks) {
            nc = 0;
            for (nl = il + 1; nl < h->n_layer && !h->L[nl].ram; nl++) {}
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
    st = hmoe_cuda_memcpy_async(h->pf_dev.ptr, h->pf_out, bytes, stream, err);
    if (!st) st = hmoe_cuda_add(b->x, h->pf_dev.ptr, (int64_t)n * h->d, b->x, stream, err);
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
