/* hybrid_prefill.c — prefill of a layer whose experts live in RAM (sched.h). Micro-batches of at
 * least the break-even size run on the GPU: the experts already in the layer's VRAM cache slots
 * straight from there, the others streamed in chunks of up to 32 experts through two VRAM
 * staging buffers: the copy of chunk c+1 (second stream, waiting until the buffer's previous
 * chunk was consumed) overlaps the grouped GEMMs of chunk c (compute stream, waiting for its
 * copy). Each group renumbers the routed ids into its experts (others -1), builds the expert
 * plan, runs gate/up and down, and adds its weighted share into x. Smaller batches go to CPU
 * threads (hmoe_sched_moe_ffn on the normalised rows copied back). The decode cache is only read.
 * Split (issue #6): CPU threads compute the LAST n_cpu uncached experts of a streamed layer at the
 * same time, from the GPU's routing (rows, ids, weights copied to page-locked memory on a side
 * stream; never re-routed, so a token keeps exactly its k experts). The CPU job is a host function
 * queued on that side stream, so the calling thread never waits for it and keeps queueing the next
 * layers' copies (a first version ran the job on the calling thread: the copy engine then starved
 * and pp512 fell by 3-12 %, bench/gpu_results.md); the GPU waits for the job's event after its own
 * groups and adds the sum straight from mapped host memory. n_cpu: HMOE_PREFILL_CPU_SHARE, else
 * from rates measured with events (CPU ms per expert, GPU ms per streamed / cached expert) so that
 * both sides finish together (HMOE_PREFILL_CPU_SHARE=auto; off unless set, see hybrid.c). A
 * layer's n_cpu is fixed when its first chunk is prefetched.
 */
#include <math.h>
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

#define SPLIT_EWMA 0.3      /* weight of a new sample in the measured rates */
#define SPLIT_PROBE_DIV 32  /* before the CPU was measured it takes nu / 32 experts (at least 1) */
#define SPLIT_MIN_GAIN 1.25 /* split only when the GPU time it saves beats copying the result back by this */

static void ewma(double *r, double sample) { *r = *r > 0 ? (1 - SPLIT_EWMA) * *r + SPLIT_EWMA * sample : sample; }

static uint64_t expert_bytes(const struct hmoe_moe_weights *w) {
    return (uint64_t)w->gate.mat_bytes + w->up.mat_bytes + w->down.mat_bytes;
}

/* How many of layer il's nu uncached experts the CPU computes for a micro-batch of n tokens:
 * the forced share, else the n_cpu at which CPU (rows copied back, then n_cpu experts) and GPU
 * (cached group, then nu - n_cpu streamed experts) finish together, and none when the GPU time it
 * saves does not pay for copying the result back. */
static int plan_cpu(const struct hmoe_sched_hybrid *h, int il, int n, int nu) {
    if (!h->split_on || nu <= 0) return 0;
    if (h->split_share >= 0) return HMOE_MIN(nu, (int)lround(h->split_share * nu));
    if (!(h->r_cpu_ms > 0)) return HMOE_MAX(1, nu / SPLIT_PROBE_DIV); /* measure the CPU once */
    const double gbps = h->h2d_probe_gbps > 1 ? h->h2d_probe_gbps : 20.0;
    const double tc = h->r_cpu_ms * (double)n / h->r_cpu_tok; /* compute-bound: time per expert ~ tokens */
    /* streaming is PCIe-bound: an expert costs at least its copy at the probed rate, whatever the
     * events say (they see chunk 0, copied during the layer before, as free; the first H200 run
     * measured 0.038 ms per expert against the copy's 0.056) */
    const double tg = HMOE_MAX(h->r_gpu_ms, (double)expert_bytes(&h->moe[il]) / (gbps * 1e6));
    const double cached = h->r_cached_ms * (double)(h->E - nu), d2h = h->r_d2h_ms_tok * n;
    const double back_ms = (double)n * (double)h->d * 4.0 / (gbps * 1e6);
    int nc = (int)floor((cached + nu * tg - d2h) / (tc + tg));
    nc = HMOE_MAX(0, HMOE_MIN(nu, nc));
    return nc * tg > SPLIT_MIN_GAIN * back_ms ? nc : 0;
}

/* Queue the copy of chunk c of the ns streamed experts of layer il (its first ns uncached ones)
 * into staging buffer b (after its last reader) and of the chunk's expert map; runs of
 * consecutive experts go as one copy per tensor. */
static enum hmoe_status enqueue_copy(struct hmoe_sched_hybrid *h, int il, int c, int b, int ns, struct hmoe_err *err) {
    const struct hmoe_moe_weights *w = &h->moe[il];
    int list[HYB_MAX_EXPERT];
    uncached(h, il, list);
    const int nu = ns, first = c * h->chunk_experts;
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

/* Start the copy of the first chunk of the next RAM layer after il that streams anything into
 * buffer `buf`, fixing that layer's CPU part now (the chunk's experts depend on it). */
static enum hmoe_status prefetch_next_layer(struct hmoe_sched_hybrid *h, int il, int n, int buf, struct hmoe_err *err) {
    int list[HYB_MAX_EXPERT];
    for (int nl = il + 1; nl < h->n_layer; nl++) {
        if (!h->L[nl].ram) continue;
        const int nu = uncached(h, nl, list), ncpu = plan_cpu(h, nl, n, nu);
        if (nu - ncpu <= 0) continue;
        enum hmoe_status st = enqueue_copy(h, nl, 0, buf, nu - ncpu, err);
        h->pf_valid = true;
        h->pf_layer = nl;
        h->pf_chunk = 0;
        h->pf_buf = buf;
        h->pf_ncpu = ncpu;
        return st;
    }
    return HMOE_OK;
}

static void acc_add(struct hyb_split_acc *a, const struct hyb_split_acc *b) {
    a->batches += b->batches;
    a->layers += b->layers;
    a->gpu_layers += b->gpu_layers;
    a->nc += b->nc;
    a->ns += b->ns;
    a->ncached += b->ncached;
    a->cpu_ms += b->cpu_ms;
    a->gpu_ms += b->gpu_ms;
    a->gpu_stream_ms += b->gpu_stream_ms;
}

/* Read the timings of an earlier layer recorded in event set `set` (waiting for its GPU groups
 * and its CPU job) into the rates and the micro-batch's statistics, and pass on the CPU job's
 * failure. An unreadable event only loses the sample: a device error surfaces at the next sync. */
static enum hmoe_status collect(struct hmoe_sched_hybrid *h, int set, struct hmoe_err *err) {
    struct hyb_split_meas *m = &h->sp_meas[set];
    if (!m->pending) return HMOE_OK;
    m->pending = false;
    void **ev = h->ev_sp[set];
    enum hmoe_status st = hmoe_cuda_event_sync(ev[3], err);
    if (!st && m->nc > 0) st = hmoe_cuda_event_sync(ev[4], err);
    if (st) return st;
    if (m->nc > 0 && h->sp_job[set].st) {
        *err = h->sp_job[set].err;
        return h->sp_job[set].st;
    }
    struct hmoe_err e = {0};
    double cached_ms = 0, stream_ms = 0, d2h_ms = 0, cpu_ms = 0;
    if (hmoe_cuda_event_elapsed_ms(ev[0], ev[2], &cached_ms, &e) || hmoe_cuda_event_elapsed_ms(ev[2], ev[3], &stream_ms, &e))
        return HMOE_OK;
    if (m->nc > 0 && !hmoe_cuda_event_elapsed_ms(ev[0], ev[1], &d2h_ms, &e) &&
        !hmoe_cuda_event_elapsed_ms(ev[1], ev[4], &cpu_ms, &e)) {
        ewma(&h->r_d2h_ms_tok, d2h_ms / m->n);
        if (h->r_cpu_tok > 0) h->r_cpu_ms *= m->n / h->r_cpu_tok; /* the estimate at this batch size */
        ewma(&h->r_cpu_ms, cpu_ms / m->nc);
        h->r_cpu_tok = m->n;
        h->sp_batch.cpu_ms += cpu_ms;
    }
    if (m->ns > 0) ewma(&h->r_gpu_ms, stream_ms / m->ns);
    if (m->ncached > 0) ewma(&h->r_cached_ms, cached_ms / m->ncached);
    h->sp_batch.gpu_layers++;
    h->sp_batch.gpu_ms += cached_ms + stream_ms;
    h->sp_batch.gpu_stream_ms += stream_ms;
    return HMOE_OK;
}

/* The last RAM layer of a micro-batch: read the outstanding timings, log the batch's split (-v). */
static enum hmoe_status end_batch(struct hmoe_sched_hybrid *h, int n, struct hmoe_err *err) {
    enum hmoe_status st = collect(h, 1 - h->sp_set, err);
    if (!st) st = collect(h, h->sp_set, err);
    struct hyb_split_acc *a = &h->sp_batch;
    if (!st && a->layers) {
        const double L = (double)a->layers, G = a->gpu_layers ? (double)a->gpu_layers : 1.0;
        a->batches = 1;
        HMOE_INFO("hybrid prefill of %d tokens, %llu RAM layers: per layer %.1f experts on CPU threads / %.1f streamed / "
                  "%.1f cached; CPU %.2f ms, GPU %.2f ms (streamed part %.2f); rates CPU %.3f ms/expert, streamed "
                  "%.3f ms/expert (%s)",
                  n, (unsigned long long)a->layers, (double)a->nc / L, (double)a->ns / L, (double)a->ncached / L,
                  a->cpu_ms / L, a->gpu_ms / G, a->gpu_stream_ms / G, h->r_cpu_ms * n / (h->r_cpu_tok > 0 ? h->r_cpu_tok : n),
                  h->r_gpu_ms, h->split_share >= 0 ? "forced share" : "adaptive");
        acc_add(&h->sp_total, a);
    }
    memset(a, 0, sizeof *a);
    return st;
}

/* The CPU job (a host function on the side stream, after the routing's copy): the layer's
 * experts of the set's mask for the GPU's routing, into the mapped sum. No CUDA calls here. */
static void cpu_job(void *arg) {
    struct hyb_split_job *j = arg;
    struct hmoe_sched_hybrid *h = j->h;
    j->err = (struct hmoe_err){0};
    j->st = hmoe_sched_moe_ffn_subset(h->cpu_moe, &h->moe[j->il], h->sp_h, j->n, h->sp_ids, h->sp_wts, j->mask, h->sp_out,
                                      &j->err);
}

/* Queue the CPU part of a split layer on the side stream: the rows and routing to the host once
 * the router is done (event ev[0]), then the job computing the experts list[ns..nu). */
static enum hmoe_status queue_cpu_part(struct hmoe_sched_hybrid *h, int il, int n, const int *list, int ns, int nu,
                                       const struct hmoe_sched_moe_bufs *b, void **ev, struct hmoe_err *err) {
    const int set = h->sp_set;
    uint8_t *mask = h->sp_mask + (size_t)set * (size_t)h->E;
    memset(mask, 0, (size_t)h->E);
    for (int i = ns; i < nu; i++) mask[list[i]] = 1;
    h->sp_job[set] = (struct hyb_split_job){.h = h, .il = il, .n = n, .mask = mask};
    const size_t nk = (size_t)n * (size_t)h->k;
    void *s = h->sp_stream;
    enum hmoe_status st = hmoe_cuda_stream_wait_event(s, ev[0], err);
    if (!st) st = hmoe_cuda_memcpy_async(h->sp_h, b->hf, (size_t)n * (size_t)h->d * sizeof(float), s, err);
    if (!st) st = hmoe_cuda_memcpy_async(h->sp_ids, b->ids, nk * sizeof(int32_t), s, err);
    if (!st) st = hmoe_cuda_memcpy_async(h->sp_wts, b->wts, nk * sizeof(float), s, err);
    if (!st) st = hmoe_cuda_event_record(ev[1], s, err);
    if (!st) st = hmoe_cuda_launch_host_fn(s, cpu_job, &h->sp_job[set], err);
    if (!st) st = hmoe_cuda_event_record(ev[4], s, err);
    return st;
}

static enum hmoe_status prefill_stream(struct hmoe_sched_hybrid *h, int il, int n, const struct hmoe_sched_moe_bufs *b,
                                       void *stream, struct hmoe_err *err) {
    const struct hyb_layer *L = &h->L[il];
    int list[HYB_MAX_EXPERT];
    const int nu = uncached(h, il, list);
    const bool pre = h->pf_valid && h->pf_layer == il && h->pf_chunk == 0;
    const int ncpu = pre ? h->pf_ncpu : plan_cpu(h, il, n, nu), ns = nu - ncpu;
    const int nch = (ns + h->chunk_experts - 1) / h->chunk_experts;
    const bool timed = h->split_on && nu > 0;
    enum hmoe_status st = HMOE_OK;
    void **ev = NULL;
    if (timed) {
        h->sp_set ^= 1;
        /* the layer before the previous one used this set: its groups and CPU job are done or
         * about to be (this also keeps the calling thread at most two split layers ahead) */
        st = collect(h, h->sp_set, err);
        ev = h->ev_sp[h->sp_set];
        if (!st) st = hmoe_cuda_event_record(ev[0], stream, err);
    }
    /* the CPU's part runs beside the GPU's groups */
    if (!st && ncpu > 0) st = queue_cpu_part(h, il, n, list, ns, nu, b, ev, err);
    /* the first chunk's copy is under way (or starts now) while the cached experts run */
    if (!st && nch > 0 && !pre) {
        h->pf_valid = true;
        h->pf_layer = il;
        h->pf_chunk = 0;
        h->pf_buf = 1 - h->last_buf;
        h->pf_ncpu = ncpu;
        st = enqueue_copy(h, il, 0, h->pf_buf, ns, err);
    }
    if (!st && L->n_slots > 0 && nu < h->E)
        st = grouped(h, il, n, b, h->d_slot_of + (size_t)il * h->E, &L->gate, L->up.w, &L->down, stream, err);
    if (!st && timed) st = hmoe_cuda_event_record(ev[2], stream, err);
    for (int c = 0; c < nch && !st; c++) {
        int buf;
        if (h->pf_valid && h->pf_layer == il && h->pf_chunk == c) {
            buf = h->pf_buf;
        } else {
            buf = 1 - h->last_buf;
            st = enqueue_copy(h, il, c, buf, ns, err);
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
            st = enqueue_copy(h, il, c + 1, 1 - buf, ns, err);
            h->pf_valid = true;
            h->pf_layer = il;
            h->pf_chunk = c + 1;
            h->pf_buf = 1 - buf;
        } else {
            st = prefetch_next_layer(h, il, n, 1 - buf, err);
        }
    }
    /* a layer the CPU takes whole still lets the next streaming layer's first chunk start now */
    if (!st && nch == 0 && ncpu > 0 && !h->pf_valid) st = prefetch_next_layer(h, il, n, 1 - h->last_buf, err);
    if (!st && timed) st = hmoe_cuda_event_record(ev[3], stream, err);
    /* after its own groups the GPU waits for the CPU's sum and adds it from mapped memory */
    if (!st && ncpu > 0) st = hmoe_cuda_stream_wait_event(stream, ev[4], err);
    if (!st && ncpu > 0) st = hmoe_cuda_add(b->x, h->sp_out, (int64_t)n * h->d, b->x, stream, err);
    if (st) return st;
    if (timed) {
        h->sp_meas[h->sp_set] = (struct hyb_split_meas){.pending = true, .n = n, .ns = ns, .nc = ncpu, .ncached = h->E - nu};
        struct hyb_split_acc *a = &h->sp_batch;
        a->layers++;
        a->nc += (uint64_t)ncpu;
        a->ns += (uint64_t)ns;
        a->ncached += (uint64_t)(h->E - nu);
    }
    if (h->split_on && il == h->last_ram) st = end_batch(h, n, err);
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
