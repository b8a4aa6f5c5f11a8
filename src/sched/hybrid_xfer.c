/* hybrid_xfer.c — the two decode-time paths that move expert weights over PCIe during a token
 * (sched.h), both reading the page-locked GGUF mapping from kernels (cuda.h):
 *  --moe-miss transfer|auto: a layer's missed experts are copied into k scratch slots and computed
 *    by the GPU (no CPU handoff); selection j goes to scratch slot j + 1. Slot 0 is all zeros and
 *    stands for every selection that is not transferred (a hit): the expert kernels read the
 *    weights of whatever slot an id names, even with weight 0, and 0 x (stale bytes read as scales:
 *    Inf/NaN) is NaN (NaN router logits -> top-k ids of 0x7fffffff -> a copy far outside the
 *    mapping; stacks() says why slot 0 and not slot k).
 *    auto decides at start from rates measured then: the CPU team's RAM read rate (times the
 *    efficiency its expert phase reaches) against this kernel's own zero-copy read rate from the
 *    pinned experts (not the copy engines' DMA rate). The CPU computes concurrently with the GPU's
 *    hits, a transfer is serial, so auto only transfers when the kernel reads faster than the CPU
 *    would (on the H200 host: 47 GB/s against 59-74, so cpu).
 *  --prefetch on: after layer L's publish, a side stream forked from the step's graph applies
 *    layer L+1's router to L's normalised state, and copies up to prefetch_max predicted but
 *    uncached experts into L+1's dynamic slots (victims from the host's policy). A per-layer lock
 *    and "closed" word make the device-side map change atomic with respect to L+1's publish: a
 *    prediction that comes too late does nothing. The branch joins the step after the last RAM
 *    layer, so every copy is complete when the token ends; the host then records the copies in the
 *    cache bookkeeping and counts how many predictions the router confirmed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched/hybrid_impl.h"

#define CPU_EXPERT_EFF 0.75 /* CPU expert phase / RAM read probe, measured on the H200 host (73 %) */
#define PF_MAX_DEFAULT 2

static size_t al256(size_t n) { return (n + 255) / 256 * 256; }

static uint64_t expert_bytes(const struct hmoe_moe_weights *w) {
    return (uint64_t)w->gate.mat_bytes + w->up.mat_bytes + w->down.mat_bytes;
}

/* The transfer scratch as layer w's gate, up and down stacks of k + 1 slots. Matrix p has a region
 * of (k + 1) x xfer_max[p] bytes (the largest such matrix of the transfer layers); layer w's stack
 * starts xfer_max[p] - its matrix bytes into it, so its slot 0 lies inside the region's first
 * xfer_max[p] bytes and its slots 1..k start at region + xfer_max[p] whatever the layer's type.
 * Those first bytes are zeroed once and never written: slot 0 is the zero expert of every layer.
 * (Layers differ in type, e.g. Q4_K_M's down is Q4_K or Q6_K: a zero slot at index k moves with
 * the stride and lay inside another layer's slots, and 0 x its Q6_K bytes read as Q4_K scales was
 * NaN.) */
static void stacks(const struct hmoe_sched_hybrid *h, const struct hmoe_moe_weights *w, struct hmoe_cuda_experts *g,
                   struct hmoe_cuda_experts *u, struct hmoe_cuda_experts *dn) {
    const size_t n = (size_t)h->k + 1;
    uint8_t *r0 = h->xfer_buf.ptr, *r1 = r0 + al256(h->xfer_max[0] * n), *r2 = r1 + al256(h->xfer_max[1] * n);
    *g = (struct hmoe_cuda_experts){.type = w->gate.type, .w = r0 + (h->xfer_max[0] - w->gate.mat_bytes),
                                    .row_bytes = w->gate.row_bytes, .expert_stride_bytes = w->gate.mat_bytes,
                                    .nrows = w->gate.n_out, .ncols = w->gate.n_in, .n_expert = (int64_t)n};
    *u = *g;
    u->type = w->up.type;
    u->w = r1 + (h->xfer_max[1] - w->up.mat_bytes);
    *dn = (struct hmoe_cuda_experts){.type = w->down.type, .w = r2 + (h->xfer_max[2] - w->down.mat_bytes),
                                     .row_bytes = w->down.row_bytes, .expert_stride_bytes = w->down.mat_bytes,
                                     .nrows = w->down.n_out, .ncols = w->down.n_in, .n_expert = (int64_t)n};
}

/* Where the copy of the missed selection j goes: slot j + 1 (dst[p] + j * bytes). */
static void slot1(const struct hmoe_cuda_experts *g, const struct hmoe_cuda_experts *u,
                  const struct hmoe_cuda_experts *dn, uint8_t *dst[3]) {
    dst[0] = (uint8_t *)g->w + g->expert_stride_bytes;
    dst[1] = (uint8_t *)u->w + u->expert_stride_bytes;
    dst[2] = (uint8_t *)dn->w + dn->expert_stride_bytes;
}

/* Experts a transfer can compute: quantized, without biases (the hits' selections name the zero
 * expert of slot 0 there, whose product must stay zero). */
static bool quantized(const struct hmoe_moe_weights *w) {
    return hmoe_type_info[w->gate.type].is_quantized && hmoe_type_info[w->down.type].is_quantized && !w->gate_bias &&
           !w->up_bias && !w->down_bias;
}

/* auto pins nothing by itself: it uses what the cache / streaming pinned anyway (pinning can be
 * slow, and on the H200 VM some files' pins never return) */
bool hmoe_hyb_xfer_possible(const struct hmoe_sched_gpu_params *sp) {
    return sp->moe_miss == HMOE_MOE_MISS_TRANSFER || sp->prefetch;
}

/* The transfer copy kernel's own read rate from page-locked host memory (zero-copy: SMs read over
 * PCIe), GB/s: k experts of layer l into the scratch, best of 3 after a warm-up; 0 on failure. The
 * copy engines' DMA rate (h2d_probe_gbps) is not the rate this path gets. */
static double probe_xfer(struct hmoe_sched_hybrid *h, int l) {
    struct hmoe_err e = {0};
    void *s = hmoe_cuda_ctx_stream(h->cu), *e0 = NULL, *e1 = NULL;
    const int k = h->k;
    int32_t ids[2 * 32];
    for (int j = 0; j < k; j++) ids[j] = j % h->E, ids[k + j] = -1; /* all missed */
    int32_t *d_ids = (int32_t *)((uint8_t *)h->xfer_buf.ptr + h->xfer_buf.bytes - 512);
    struct hmoe_cuda_experts g, u, dn;
    uint8_t *dst[3];
    stacks(h, &h->moe[l], &g, &u, &dn);
    slot1(&g, &u, &dn, dst);
    double best = 0;
    if (hmoe_cuda_upload(h->cu, d_ids, ids, (size_t)2 * k * 4, &e) || hmoe_cuda_event_create(&e0, &e) ||
        hmoe_cuda_event_create(&e1, &e))
        goto out;
    for (int r = 0; r < 4; r++) {
        double ms = 0;
        if (hmoe_cuda_event_record(e0, s, &e) ||
            hmoe_cuda_hybrid_xfer_copy(d_ids, d_ids + k, k, h->E, &h->L[l].src, dst, s, &e) ||
            hmoe_cuda_event_record(e1, s, &e) || hmoe_cuda_event_sync(e1, &e) || hmoe_cuda_event_elapsed_ms(e0, e1, &ms, &e))
            break;
        const double gbps = ms > 0 ? (double)k * (double)expert_bytes(&h->moe[l]) / (ms * 1e-3) / 1e9 : 0;
        if (r > 0) best = HMOE_MAX(best, gbps); /* r = 0: warm-up */
    }
out:
    hmoe_cuda_event_destroy(e0);
    hmoe_cuda_event_destroy(e1);
    return best; /* (slots 1..k only: slot 0 stays zero) */
}

enum hmoe_status hmoe_hyb_xfer_init(struct hmoe_sched_hybrid *h, struct hmoe_err *err) {
    const enum hmoe_moe_miss mode = h->sp.moe_miss;
    enum hmoe_status st = HMOE_OK;
    /* --- per-layer miss policy ------------------------------------------------------------- */
    if (mode != HMOE_MOE_MISS_CPU) {
        int unable = 0, n_can = 0, first = -1;
        size_t need = 0;
        for (int l = 0; l < h->n_layer; l++) {
            struct hyb_layer *L = &h->L[l];
            if (!L->ram) continue;
            const bool can = L->src_ok && quantized(&h->moe[l]);
            unable += !can;
            if (!can) continue;
            n_can++;
            if (first < 0) first = l;
            const struct hmoe_moe_weights *w = &h->moe[l];
            h->xfer_max[0] = HMOE_MAX(h->xfer_max[0], w->gate.mat_bytes);
            h->xfer_max[1] = HMOE_MAX(h->xfer_max[1], w->up.mat_bytes);
            h->xfer_max[2] = HMOE_MAX(h->xfer_max[2], w->down.mat_bytes);
        }
        /* three regions of k + 1 slots (stacks()), then 256 bytes each: the step's slot ids, the probe's
         * ids and gids; all zero, and the zero slots stay so */
        for (int p = 0; p < 3; p++) need += al256(h->xfer_max[p] * ((size_t)h->k + 1));
        if (n_can) {
            st = hmoe_cuda_buf_alloc(h->cu, need + 3 * 256, &h->xfer_buf, err);
            if (!st) st = hmoe_cuda_memset(h->cu, h->xfer_buf.ptr, 0, h->xfer_buf.bytes, err);
            if (st) return st;
            h->d_xfer_gids = (int32_t *)((uint8_t *)h->xfer_buf.ptr + need);
        }
        bool pcie_wins = mode == HMOE_MOE_MISS_TRANSFER;
        double cpu_gbps = 0;
        if (mode == HMOE_MOE_MISS_AUTO && n_can) {
            h->ram_probe_gbps = hmoe_hyb_probe_ram(h);
            h->xfer_probe_gbps = probe_xfer(h, first);
            cpu_gbps = h->ram_probe_gbps * CPU_EXPERT_EFF;
            /* no CPU rate (under 64 MB pinned: the probe needs a resident range that large) -> stay on
             * the CPU, the default: a transfer must have measured faster */
            pcie_wins = h->ram_probe_gbps > 0 && h->xfer_probe_gbps > cpu_gbps;
        }
        for (int l = 0; l < h->n_layer; l++) {
            struct hyb_layer *L = &h->L[l];
            if (!L->ram) continue;
            L->transfer = pcie_wins && L->src_ok && quantized(&h->moe[l]);
            h->n_transfer += L->transfer;
        }
        if (mode == HMOE_MOE_MISS_AUTO && !n_can)
            snprintf(h->miss_why, sizeof h->miss_why,
                     "auto = cpu for %d RAM layers: no layer's experts are page-locked, quantized and without "
                     "biases (a transfer reads them from kernels)", h->n_ram);
        else if (mode == HMOE_MOE_MISS_AUTO)
            snprintf(h->miss_why, sizeof h->miss_why,
                     "auto = %s for %d of %d RAM layers: CPU reads %.1f GB/s x %.2f (its expert-phase efficiency) = "
                     "%.1f GB/s vs the transfer kernel's zero-copy read %.1f GB/s (DMA host->device %.1f GB/s)%s",
                     h->n_transfer ? "transfer" : "cpu", h->n_transfer ? h->n_transfer : h->n_ram, h->n_ram,
                     h->ram_probe_gbps, CPU_EXPERT_EFF, cpu_gbps, h->xfer_probe_gbps, h->h2d_probe_gbps,
                     h->n_transfer ? "" : "; the CPU also overlaps the GPU's hits, a transfer does not");
        else
            snprintf(h->miss_why, sizeof h->miss_why, "transfer for %d of %d RAM layers%s", h->n_transfer, h->n_ram,
                     unable ? " (the others are not page-locked or not quantized: CPU)" : "");
        if (!h->n_transfer) hmoe_cuda_buf_free(h->cu, &h->xfer_buf); /* (auto chose the CPU) */
        if (!h->n_transfer) h->d_xfer_gids = NULL;
    } else {
        snprintf(h->miss_why, sizeof h->miss_why, "cpu");
    }

    /* --- next-layer prefetch --------------------------------------------------------------- */
    h->last_ram = -1;
    for (int l = 0; l < h->n_layer; l++)
        if (h->L[l].ram) h->last_ram = l;
    if (!h->sp.prefetch) return HMOE_OK;
    const char *why = NULL;
    int n_targets = 0;
    for (int l = 1; l < h->n_layer; l++) {
        struct hyb_layer *L = &h->L[l];
        L->pf_target = L->ram && h->L[l - 1].ram && L->n_slots > 0 && L->src_ok && h->d_router && h->d_router[l];
        n_targets += L->pf_target;
    }
    if (!h->d_router) why = "no router pointers";
    else if (!n_targets) why = "no RAM layer with dynamic cache slots, page-locked experts and a RAM layer before it";
    if (why) {
        snprintf(h->notes + strlen(h->notes), sizeof h->notes - strlen(h->notes), "prefetch off: %s; ", why);
        return HMOE_OK;
    }
    h->prefetch = true;
    h->pf_max = h->sp.prefetch_max > 0 ? HMOE_MIN(h->sp.prefetch_max, HMOE_CUDA_PREFETCH_MAX) : PF_MAX_DEFAULT;
    h->pf_cand = h->pf_max + h->k;
    const size_t L = (size_t)h->n_layer, d = (size_t)h->d, E = (size_t)h->E, C = (size_t)h->pf_cand;
    const size_t o_lock = 0, o_closed = al256(L * 4), o_snap = o_closed + al256(L * 4), o_log = o_snap + al256(L * d * 4),
                 o_queue = o_log + al256(E * 4), o_cnt = o_queue + al256((1 + 2 * HMOE_CUDA_PREFETCH_MAX) * 4),
                 o_cand = o_cnt + 256, total = o_cand + al256(L * 2 * C * 4);
    st = hmoe_cuda_buf_alloc(h->cu, total, &h->pref_buf, err);
    if (!st) st = hmoe_cuda_memset(h->cu, h->pref_buf.ptr, 0, total, err);
    if (st) return st;
    uint8_t *b = h->pref_buf.ptr;
    h->d_lock = (int32_t *)(b + o_lock);
    h->d_closed = (int32_t *)(b + o_closed);
    h->d_snap = (float *)(b + o_snap);
    h->d_pf_logits = (float *)(b + o_log);
    h->d_queue = (int32_t *)(b + o_queue);
    h->d_pf_counter = (unsigned int *)(b + o_cnt);
    h->d_cand = (int32_t *)(b + o_cand);
    st = hmoe_cuda_host_alloc(L * 2 * C * 4, false, (void **)&h->cand_host, err);
    if (!st) st = hmoe_cuda_host_alloc(L * sizeof *h->pf_rec, true, (void **)&h->pf_rec, err);
    if (!st) st = hmoe_cuda_stream_create(&h->pf_stream, err);
    if (!st) st = hmoe_cuda_event_create(&h->ev_join, err);
    if (!st && !(h->ev_fork = calloc(L, sizeof *h->ev_fork))) st = HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory");
    for (int l = 0; l < h->n_layer && !st; l++)
        if (h->L[l].pf_target) st = hmoe_cuda_event_create(&h->ev_fork[l], err);
    if (!st) {
        for (size_t i = 0; i < L * 2 * C; i++) h->cand_host[i] = -1; /* empty lists until the first upload */
        st = hmoe_cuda_upload(h->cu, h->d_cand, h->cand_host, L * 2 * C * 4, err);
    }
    return st;
}

void hmoe_hyb_xfer_free(struct hmoe_sched_hybrid *h) {
    if (h->pf_stream) hmoe_cuda_stream_sync(h->pf_stream, NULL);
    for (int l = 0; h->ev_fork && l < h->n_layer; l++) hmoe_cuda_event_destroy(h->ev_fork[l]);
    free(h->ev_fork);
    hmoe_cuda_event_destroy(h->ev_join);
    hmoe_cuda_stream_destroy(h->pf_stream);
    hmoe_cuda_host_free(h->cand_host);
    hmoe_cuda_host_free(h->pf_rec);
    hmoe_cuda_buf_free(h->cu, &h->pref_buf);
    hmoe_cuda_buf_free(h->cu, &h->xfer_buf);
}

enum hmoe_status hmoe_hyb_publish(struct hmoe_sched_hybrid *h, int il, const int32_t *d_ids, const float *d_wts,
                                  const float *d_h, int32_t *d_gids, int32_t *d_nmiss, const uint32_t *d_seq,
                                  void *stream, struct hmoe_err *err) {
    struct hmoe_cuda_publish_opts o = {0};
    const struct hyb_layer *L = &h->L[il];
    if (L->transfer) {
        o.transfer = true;
        o.xfer_gids = h->d_xfer_gids;
    }
    if (h->prefetch && L->pf_target) {
        o.lock = h->d_lock + il;
        o.closed = h->d_closed + il;
    }
    if (h->prefetch && il + 1 < h->n_layer && h->L[il + 1].pf_target) o.h_snap = h->d_snap + (size_t)il * h->d;
    return hmoe_cuda_hybrid_publish_ex(d_ids, d_wts, h->k, d_h, h->d, h->d_slot_of + (size_t)il * h->E, h->E, d_seq,
                                       d_gids, d_nmiss, &h->mb[il], h->h_host + (size_t)il * h->d, &o, stream, err);
}

enum hmoe_status hmoe_hyb_xfer_compute(struct hmoe_sched_hybrid *h, int il, const int32_t *d_ids, const float *d_wts,
                                       const int32_t *d_gids, const void *d_hq, size_t hq_stride, float *d_z,
                                       void *d_zq, float *d_x, void *stream, struct hmoe_err *err) {
    const struct hmoe_moe_weights *w = &h->moe[il];
    const int k = h->k;
    const int64_t d = h->d, F = w->gate.n_out;
    struct hmoe_cuda_experts g, u, dn;
    uint8_t *dst[3];
    stacks(h, w, &g, &u, &dn); /* slot 0: zeros, named by the selections not transferred */
    slot1(&g, &u, &dn, dst);
    enum hmoe_status st = hmoe_cuda_hybrid_xfer_copy(d_ids, d_gids, k, h->E, &h->L[il].src, dst, stream, err);
    if (!st) st = hmoe_cuda_moe_gate_up(&g, &u, h->d_xfer_gids, k, k, d_hq, hq_stride, d_z, F, stream, err);
    if (!st) st = hmoe_cuda_quantize_q8_1(d_z, F, k, F, d_zq, stream, err);
    if (!st)
        st = hmoe_cuda_moe_down(&dn, h->d_xfer_gids, d_wts, 1, k, d_zq, hmoe_cuda_q8_1_row_bytes(F), d_x, d, stream, err);
    return st;
}

enum hmoe_status hmoe_hyb_prefetch_fork(struct hmoe_sched_hybrid *h, int il, const uint32_t *d_seq, void *stream,
                                        struct hmoe_err *err) {
    const int t = il + 1;
    if (!h->prefetch || t >= h->n_layer || !h->L[t].pf_target) return HMOE_OK;
    struct hyb_layer *T = &h->L[t];
    void *ps = h->pf_stream;
    enum hmoe_status st = hmoe_cuda_event_record(h->ev_fork[t], stream, err);
    if (!st) st = hmoe_cuda_stream_wait_event(ps, h->ev_fork[t], err);
    const struct hmoe_cuda_mmv_args r = {.type = HMOE_TYPE_F32, .w = h->d_router[t], .row_bytes = (size_t)h->d * 4,
                                         .nrows = h->E, .ncols = h->d, .x = h->d_snap + (size_t)il * h->d,
                                         .x_stride_bytes = (size_t)h->d * 4, .ntok = 1, .y = h->d_pf_logits,
                                         .y_stride = h->E};
    if (!st) st = hmoe_cuda_mmv(&r, ps, err);
    const size_t C = (size_t)h->pf_cand;
    const struct hmoe_cuda_prefetch_args a = {.logits = h->d_pf_logits, .n_expert = h->E, .k = h->k,
                                              .max_fill = h->pf_max, .map = h->d_slot_of + (size_t)t * h->E,
                                              .cand_slot = h->d_cand + (size_t)t * 2 * C,
                                              .cand_expert = h->d_cand + (size_t)t * 2 * C + C, .n_cand = (int)C,
                                              .lock = h->d_lock + t, .closed = h->d_closed + t, .seq = d_seq,
                                              .rec = &h->pf_rec[t], .d_queue = h->d_queue};
    if (!st) st = hmoe_cuda_hybrid_prefetch_plan(&a, ps, err);
    uint8_t *const dst[3] = {(uint8_t *)T->gate.w, (uint8_t *)T->up.w, (uint8_t *)T->down.w};
    if (!st)
        st = hmoe_cuda_hybrid_prefetch_copy(h->d_queue, &T->src, dst, h->d_slot_of + (size_t)t * h->E, h->d_pf_counter,
                                            ps, err);
    if (!st) h->pf_forked = true;
    return st;
}

enum hmoe_status hmoe_hyb_prefetch_join(struct hmoe_sched_hybrid *h, void *stream, struct hmoe_err *err) {
    if (!h->pf_forked) return HMOE_OK;
    h->pf_forked = false;
    enum hmoe_status st = hmoe_cuda_event_record(h->ev_join, h->pf_stream, err);
    if (!st) st = hmoe_cuda_stream_wait_event(stream, h->ev_join, err);
    return st;
}

/* Whether the router chose expert e in this step (each prediction counts once, even if the ids
 * repeat, as they do when the logits are NaN). */
static bool chosen(const struct hmoe_cuda_mailbox *mb, int e) {
    for (int j = 0; j < mb->k && j < HMOE_CUDA_MAILBOX_MAX_K; j++)
        if (mb->ids[j] == e) return true;
    return false;
}

void hmoe_hyb_prefetch_collect(struct hmoe_sched_hybrid *h) {
    if (!h->prefetch) return;
    for (int t = 0; t < h->n_layer; t++) {
        if (!h->L[t].pf_target) continue;
        const struct hmoe_cuda_prefetch_rec *r = &h->pf_rec[t];
        const struct hmoe_cuda_mailbox *mb = &h->mb[t];
        if (__atomic_load_n(&r->seq, __ATOMIC_ACQUIRE) != mb->gpu_seq || mb->gpu_seq == 0) continue; /* none this step */
        for (int i = 0; i < r->n_fill && i < HMOE_CUDA_PREFETCH_MAX; i++) {
            hmoe_sched_cache_install(h->cache, t, r->expert[i], r->slot[i]);
            h->pf_fills++;
            h->pf_used += chosen(mb, r->expert[i]);
        }
        for (int i = 0; i < r->n_pred && i < HMOE_CUDA_MAILBOX_MAX_K; i++) {
            h->pf_pred++;
            h->pf_correct += chosen(mb, r->pred[i]);
        }
    }
}

enum hmoe_status hmoe_hyb_prefetch_upload(struct hmoe_sched_hybrid *h, void *stream, struct hmoe_err *err) {
    if (!h->prefetch) return HMOE_OK;
    const size_t C = (size_t)h->pf_cand;
    for (int t = 0; t < h->n_layer; t++) {
        if (!h->L[t].pf_target) continue;
        int32_t *slots = h->cand_host + (size_t)t * 2 * C, *experts = slots + C;
        const int n = hmoe_sched_cache_victims(h->cache, t, slots, experts, (int)C);
        for (size_t i = (size_t)n; i < C; i++) slots[i] = experts[i] = -1;
    }
    return hmoe_cuda_memcpy_async(h->d_cand, h->cand_host, (size_t)h->n_layer * 2 * C * 4, stream, err);
}
