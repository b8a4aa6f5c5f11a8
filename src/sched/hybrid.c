/* hybrid.c — the hybrid CPU+GPU scheduler (sched.h): set-up of the expert cache (VRAM
 * slots per RAM layer, a page-locked mirror of the slot maps, mapped mailboxes), pinning of the
 * mapping's expert ranges, the routing profile, the GPU half of a decode step (publish -> cached
 * experts -> wait and add, captured in the step's graph), and between tokens the statistics and
 * the cache copies (started on a second stream after the slot maps say "not here", made visible
 * when their event has fired). hybrid_cpu.c is the CPU half, hybrid_prefill.c the prefill (its
 * split: hybrid_split.c), hybrid_xfer.c the PCIe paths of decode, hybrid_stats.c the report.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hmoe/cpu.h"
#include "sched/hybrid_impl.h"

#define CHUNK_EXPERTS HMOE_SCHED_STREAM_CHUNK_EXPERTS /* experts per streamed prefill chunk */
#define SEED_TOKENS 4       /* without a profile: seed the cache after this many decoded tokens */
#define STATIC_FRAC 0.75    /* share of each layer's slots that is the static hot set */

static size_t al256(size_t n) { return (n + 255) / 256 * 256; }

size_t hmoe_hyb_act_bytes(enum hmoe_type t, int64_t n) { return hmoe_cpu_act_bytes(t, n); }

void hmoe_hyb_act_quantize(enum hmoe_type t, const float *x, void *dst, int64_t n) {
    if (hmoe_type_info[t].vec_dot_type == HMOE_TYPE_F32) memcpy(dst, x, (size_t)n * sizeof(float));
    else hmoe_cpu_quantize_act(t, x, dst, n);
}

static uint64_t expert_bytes(const struct hmoe_moe_weights *w) {
    return (uint64_t)w->gate.mat_bytes + w->up.mat_bytes + w->down.mat_bytes;
}

uint64_t hmoe_sched_hybrid_stream_bytes(const struct hmoe_moe_weights *moe, int n_layer, int n_ub, int chunk_experts) {
    if (n_ub <= 8 || n_layer <= 0) return 0; /* only decode-sized batches: nothing to stream */
    uint64_t mx = 0;
    for (int l = 0; l < n_layer; l++) mx = HMOE_MAX(mx, expert_bytes(&moe[l]));
    const int E = (int)moe[0].gate.n_mat, c = HMOE_MIN(E, chunk_experts > 0 ? chunk_experts : CHUNK_EXPERTS);
    return 2 * ((uint64_t)c * mx + 3 * 256);
}

/* The slots of layer l as expert stacks, with the layer's activation and device biases (indexed by
 * expert: the launchers get the experts' ids beside the slots). */
static void set_pool(const struct hmoe_sched_hybrid *h, int l, struct hyb_layer *L, const struct hmoe_moe_weights *w,
                     uint8_t *base, int n) {
    const size_t gb = al256(w->gate.mat_bytes * (size_t)n), ub = al256(w->up.mat_bytes * (size_t)n);
    L->gate = (struct hmoe_cuda_experts){.type = w->gate.type, .w = base, .row_bytes = w->gate.row_bytes,
                                         .expert_stride_bytes = w->gate.mat_bytes, .nrows = w->gate.n_out,
                                         .ncols = w->gate.n_in, .n_expert = n,
                                         .bias = h->d_gate_bias ? h->d_gate_bias[l] : NULL, .act = (int)w->act};
    L->up = L->gate;
    L->up.type = w->up.type;
    L->up.w = base + gb;
    L->up.bias = h->d_up_bias ? h->d_up_bias[l] : NULL;
    L->down = (struct hmoe_cuda_experts){.type = w->down.type, .w = base + gb + ub, .row_bytes = w->down.row_bytes,
                                         .expert_stride_bytes = w->down.mat_bytes, .nrows = w->down.n_out,
                                         .ncols = w->down.n_in, .n_expert = n,
                                         .bias = h->d_down_bias ? h->d_down_bias[l] : NULL};
}

/* Copy expert e of layer l into slot s: synchronous at set-up, on the fill stream otherwise. */
static enum hmoe_status copy_expert(struct hmoe_sched_hybrid *h, int l, int e, int s, void *stream,
                                    struct hmoe_err *err) {
    const struct hmoe_moe_weights *w = &h->moe[l];
    const struct hyb_layer *L = &h->L[l];
    const struct {
        const struct hmoe_mat *m;
        const struct hmoe_cuda_experts *x;
    } parts[3] = {{&w->gate, &L->gate}, {&w->up, &L->up}, {&w->down, &L->down}};
    for (int i = 0; i < 3; i++) {
        const uint8_t *src = (const uint8_t *)parts[i].m->data + (size_t)e * parts[i].m->mat_bytes;
        uint8_t *dst = (uint8_t *)parts[i].x->w + (size_t)s * parts[i].m->mat_bytes;
        enum hmoe_status st = stream ? hmoe_cuda_memcpy_async(dst, src, parts[i].m->mat_bytes, stream, err)
                                     : hmoe_cuda_upload(h->cu, dst, src, parts[i].m->mat_bytes, err);
        if (st) return st;
    }
    h->fill_bytes += expert_bytes(w);
    return HMOE_OK;
}

/* Mirror the cache's slot map of layer l into page-locked memory and queue its upload. */
static enum hmoe_status push_map(struct hmoe_sched_hybrid *h, int l, void *stream, struct hmoe_err *err) {
    memcpy(h->map_host + (size_t)l * h->E, hmoe_sched_cache_map(h->cache, l), (size_t)h->E * sizeof(int32_t));
    return hmoe_cuda_memcpy_async(h->d_slot_of + (size_t)l * h->E, h->map_host + (size_t)l * h->E,
                                  (size_t)h->E * sizeof(int32_t), stream, err);
}

/* Fill every slot with the hottest experts by `counts` (synchronous: set-up or once after the
 * first tokens), then publish the maps. */
static enum hmoe_status seed(struct hmoe_sched_hybrid *h, const uint64_t *counts, void *stream, struct hmoe_err *err) {
    int total = 0;
    for (int l = 0; l < h->n_layer; l++) total += h->L[l].n_slots;
    struct hmoe_sched_cache_fill *f = malloc((size_t)(total + 1) * sizeof *f);
    if (!f) return HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory");
    const double frac = h->fills_per_token > 0 ? STATIC_FRAC : 1.0;
    const int n = hmoe_sched_cache_seed(h->cache, counts, frac, f, total);
    enum hmoe_status st = hmoe_cuda_sync(h->cu, err); /* nothing may read the slots meanwhile */
    for (int i = 0; i < n && !st; i++) {
        st = copy_expert(h, f[i].layer, f[i].expert, f[i].slot, NULL, err);
        if (!st) hmoe_sched_cache_commit(h->cache, &f[i]);
    }
    for (int l = 0; l < h->n_layer && !st; l++)
        if (h->L[l].n_slots) st = push_map(h, l, stream, err);
    if (!st) st = hmoe_cuda_sync(h->cu, err);
    free(f);
    h->seeded = true;
    return st;
}

/* Prefill split between CPU threads and streaming (hybrid_prefill.c, hybrid_split.c): on with
 * streaming and micro-batches of more than one token. The CPU's part: the sched params' forced
 * share of each layer's uncached experts (negative: none; experts without tokens are still
 * skipped), else (0, the default) chosen per layer after its router from measured costs. Here:
 * the routing's page-locked landing place, the CPU's mapped sum, a side stream, two sets of timing
 * events and the planner's state. */
static enum hmoe_status split_init(struct hmoe_sched_hybrid *h, const struct hmoe_sched_gpu_params *sp,
                                   struct hmoe_err *err) {
    const double x = sp->prefill_cpu_share;
    if (!(x <= 1))
        return HMOE_RAISE(err, HMOE_ERR_ARG,
                          "prefill CPU share %g: expected a share in (0, 1] of each layer's uncached experts that CPU "
                          "threads compute in a streamed prefill, 0 (planned per layer from measured times, the "
                          "default) or negative (no CPU part)",
                          x);
    h->split_share = x == 0 ? -1 : x < 0 ? 0 : x; /* here: < 0 planned, 0 none */
    h->split_on = h->stream && h->n_ub > 1;
    if (!h->split_on) return HMOE_OK;
    const size_t nk = (size_t)h->n_ub * (size_t)h->k, nd = (size_t)h->n_ub * (size_t)h->d;
    enum hmoe_status st = hmoe_cuda_host_alloc(nk * sizeof(int32_t), false, (void **)&h->sp_ids, err);
    if (!st) st = hmoe_cuda_host_alloc(nk * sizeof(float), false, (void **)&h->sp_wts, err);
    if (!st) st = hmoe_cuda_host_alloc(nd * sizeof(float), false, (void **)&h->sp_h, err);
    if (!st) st = hmoe_cuda_host_alloc(nd * sizeof(float), true, (void **)&h->sp_out, err);
    if (!st && !(h->sp_mask = calloc(2 * (size_t)h->E, 1))) st = HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory");
    if (!st && (!(h->plan_l = calloc((size_t)h->n_layer * HYB_PLAN_CLASSES, sizeof *h->plan_l)) ||
                !(h->sp_w0s = calloc((size_t)h->n_layer, sizeof *h->sp_w0s))))
        st = HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory");
    if (!st &&
        (!(h->cnt_hist = calloc((size_t)h->n_layer * (size_t)h->E, sizeof *h->cnt_hist)) ||
         !(h->cnt_tok = calloc((size_t)h->E, sizeof *h->cnt_tok)) || !(h->pf_first = calloc((size_t)h->E, sizeof *h->pf_first)) ||
         !(h->cnt_l = calloc((size_t)h->n_layer * HYB_PLAN_CLASSES, sizeof *h->cnt_l))))
        st = HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory");
    if (!st) hmoe_hyb_count_init(h);
    if (!st) st = hmoe_cuda_stream_create(&h->sp_stream, err);
    for (int i = 0; i < 2 && !st; i++) {
        for (int j = 0; j < 5 && !st; j++) st = hmoe_cuda_event_create(&h->ev_sp[i][j], err);
        if (!st) st = hmoe_cuda_event_create(&h->ev_sp_end[i], err);
    }
    return st;
}

/* Pinned host -> device bandwidth over one buffer we own anyway. */
static void probe_h2d(struct hmoe_sched_hybrid *h, void *dst, size_t bytes) {
    void *src = NULL, *e0 = NULL, *e1 = NULL, *s = hmoe_cuda_ctx_stream(h->cu);
    struct hmoe_err e = {0};
    if (!dst || bytes < ((size_t)8 << 20)) return;
    if (hmoe_cuda_host_alloc(bytes, false, &src, &e) || hmoe_cuda_event_create(&e0, &e) || hmoe_cuda_event_create(&e1, &e))
        goto out;
    double best = 0;
    for (int r = 0; r < 3; r++) {
        double ms = 0;
        if (hmoe_cuda_event_record(e0, s, &e) || hmoe_cuda_memcpy_async(dst, src, bytes, s, &e) ||
            hmoe_cuda_event_record(e1, s, &e) || hmoe_cuda_event_sync(e1, &e) || hmoe_cuda_event_elapsed_ms(e0, e1, &ms, &e))
            break;
        double gbps = (double)bytes / (ms * 1e-3) / 1e9;
        best = gbps > best ? gbps : best;
    }
    h->h2d_probe_gbps = best;
out:
    hmoe_cuda_event_destroy(e0);
    hmoe_cuda_event_destroy(e1);
    hmoe_cuda_host_free(src);
}

/* GPU %globaltimer against the host clock (cuda.h hmoe_cuda_hybrid_clock_probe): the ping with the
 * shortest round trip wins. Only between steps (the stream must be idle). On failure the handoff
 * statistics keep the previous calibration or report the offset-free round trip alone. */
#define CLK_ROUNDS 64
static void clock_calibrate(struct hmoe_sched_hybrid *h) {
    struct hmoe_cuda_clock_sync *cs = h->clk;
    struct hmoe_err e = {0};
    if (!cs || hmoe_cuda_sync(h->cu, &e)) return;
    __atomic_store_n(&cs->ping, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&cs->pong, 0, __ATOMIC_RELEASE);
    if (hmoe_cuda_hybrid_clock_probe(cs, CLK_ROUNDS, 1000, hmoe_cuda_ctx_stream(h->cu), &e)) return;
    int64_t best = INT64_MAX, off = 0;
    for (uint32_t i = 1; i <= CLK_ROUNDS; i++) {
        const uint64_t h0 = hmoe_hyb_now_ns();
        __atomic_store_n(&cs->ping, i, __ATOMIC_RELEASE);
        uint64_t h1 = h0;
        while (__atomic_load_n(&cs->pong, __ATOMIC_ACQUIRE) != i) {
            __builtin_ia32_pause();
            if ((h1 = hmoe_hyb_now_ns()) - h0 > 500000000ull) break; /* the kernel gave up or never ran */
        }
        if (__atomic_load_n(&cs->pong, __ATOMIC_ACQUIRE) != i) break;
        h1 = hmoe_hyb_now_ns();
        const uint64_t g = __atomic_load_n(&cs->gpu_ns, __ATOMIC_ACQUIRE);
        if ((int64_t)(h1 - h0) < best) {
            best = (int64_t)(h1 - h0);
            off = (int64_t)g - (int64_t)(h0 + (h1 - h0) / 2);
        }
    }
    if (hmoe_cuda_sync(h->cu, &e) || best == INT64_MAX) return;
    const uint64_t now = hmoe_hyb_now_ns();
    if (h->clk_ok && now > h->clk_at_ns)
        h->clk_drift_ppm = (double)(off - h->clk_off_ns) / (double)(now - h->clk_at_ns) * 1e6;
    h->clk_off_ns = off;
    h->clk_rtt_ns = best;
    h->clk_at_ns = now;
    h->clk_ok = true;
}

enum hmoe_status hmoe_sched_hybrid_init(const struct hmoe_sched_hybrid_params *p, struct hmoe_sched_hybrid **out,
                                        struct hmoe_err *err) {
    *out = NULL;
    const struct hmoe_moe_weights *w0 = &p->moe[0];
    for (int l = 0; l < p->n_layer; l++) {
        const struct hmoe_moe_weights *w = &p->moe[l];
        if (!p->plan->where || p->plan->where[l] != HMOE_PLACE_RAM) continue;
        /* (a layer without cache slots never meets those kernels: its experts all run on CPU threads) */
        if (p->plan->n_slots[l] > 0 &&
            (!hmoe_type_info[w->gate.type].is_quantized || !hmoe_type_info[w->down.type].is_quantized))
            return HMOE_RAISE(err, HMOE_ERR_UNSUPPORTED,
                              "experts in RAM need a quantized type for the GPU cache kernels (layer %d has %s/%s); "
                              "raise --vram-budget to hold every expert, or use --gpu off",
                              l, hmoe_type_name(w->gate.type), hmoe_type_name(w->down.type));
        if (w->n_expert_used > HMOE_CUDA_MAILBOX_MAX_K || w->gate.n_mat != w0->gate.n_mat || w->gate.n_mat > HYB_MAX_EXPERT)
            return HMOE_RAISE(err, HMOE_ERR_UNSUPPORTED, "hybrid: layer %d has an unsupported expert layout", l);
    }
    struct hmoe_sched_hybrid *h = calloc(1, sizeof *h);
    if (!h) return HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory");
    *out = h;
    h->cu = p->cu;
    h->n_layer = p->n_layer;
    h->d = p->n_embd;
    h->E = (int)w0->gate.n_mat;
    h->k = w0->n_expert_used;
    h->n_ub = p->n_ub;
    h->file_in_ram = p->file_in_ram;
    h->nt = p->n_threads > 0 ? p->n_threads : 1;
    h->sp = *p->sched;
    h->cpu_moe = p->cpu_moe;
    h->moe = malloc((size_t)p->n_layer * sizeof *h->moe);
    if (p->d_router) {
        h->d_router = malloc((size_t)p->n_layer * sizeof *h->d_router);
        if (!h->d_router) return HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory");
        memcpy(h->d_router, p->d_router, (size_t)p->n_layer * sizeof *h->d_router);
    }
    const float *const *bias_src[3] = {p->d_gate_bias, p->d_up_bias, p->d_down_bias};
    const float ***bias_dst[3] = {&h->d_gate_bias, &h->d_up_bias, &h->d_down_bias};
    for (int i = 0; i < 3; i++) {
        if (!bias_src[i]) continue;
        *bias_dst[i] = malloc((size_t)p->n_layer * sizeof **bias_dst[i]);
        if (!*bias_dst[i]) return HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory");
        memcpy(*bias_dst[i], bias_src[i], (size_t)p->n_layer * sizeof **bias_dst[i]);
    }
    h->L = calloc((size_t)p->n_layer, sizeof *h->L);
    h->counts = calloc((size_t)p->n_layer * (size_t)h->E, sizeof *h->counts);
    h->profile = calloc((size_t)p->n_layer * (size_t)h->E, sizeof *h->profile);
    if (!h->moe || !h->L || !h->counts || !h->profile) return HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory");
    memcpy(h->moe, p->moe, (size_t)p->n_layer * sizeof *h->moe);
    const size_t d = (size_t)h->d, E = (size_t)h->E, L = (size_t)h->n_layer;
    size_t pool_total = 0;
    int *slots = calloc(L, sizeof *slots);
    if (!slots) return HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory");
    for (int l = 0; l < h->n_layer; l++) {
        const struct hmoe_moe_weights *w = &h->moe[l];
        h->L[l].ram = p->plan->where[l] == HMOE_PLACE_RAM;
        if (!h->L[l].ram) continue;
        h->n_ram++;
        h->L[l].n_slots = slots[l] = p->plan->n_slots[l];
        h->F = HMOE_MAX(h->F, (int)w->gate.n_out);
        h->ag = HMOE_MAX(h->ag, hmoe_hyb_act_bytes(w->gate.type, w->gate.n_in));
        h->au = HMOE_MAX(h->au, hmoe_hyb_act_bytes(w->up.type, w->up.n_in));
        h->ad = HMOE_MAX(h->ad, hmoe_hyb_act_bytes(w->down.type, w->down.n_in));
    }
    /* per-thread / per-expert activation rows start on cache lines */
    h->ag = (h->ag + 63) / 64 * 64;
    h->au = (h->au + 63) / 64 * 64;
    h->ad = (h->ad + 63) / 64 * 64;
    enum hmoe_status st = hmoe_sched_cache_init(h->n_layer, h->E, slots, p->sched->cache_policy, &h->cache, err);
    free(slots);
    if (st) return st;

    /* VRAM cache slots, one allocation per layer. */
    for (int l = 0; l < h->n_layer && !st; l++) {
        struct hyb_layer *Ly = &h->L[l];
        if (!Ly->ram || Ly->n_slots == 0) continue;
        const struct hmoe_moe_weights *w = &h->moe[l];
        const size_t n = (size_t)Ly->n_slots;
        st = hmoe_cuda_buf_alloc(h->cu, al256(w->gate.mat_bytes * n) + al256(w->up.mat_bytes * n) +
                                            al256(w->down.mat_bytes * n), &Ly->pool, err);
        if (!st) set_pool(h, l, Ly, w, Ly->pool.ptr, Ly->n_slots);
        pool_total += Ly->pool.bytes;
    }
    /* Slot maps (all -1) and the streamed-chunk maps. */
    h->chunk_experts = HMOE_MIN(h->E, p->stream_chunk_experts > 0 ? p->stream_chunk_experts : CHUNK_EXPERTS);
    /* + 1: the split by count streams a first chunk of at most half the layer, then full chunks */
    h->n_chunks = (h->E + h->chunk_experts - 1) / h->chunk_experts + 1;
    const size_t cm_bytes = al256(L * (size_t)h->n_chunks * E * 4);
    if (!st) st = hmoe_cuda_buf_alloc(h->cu, al256(L * E * 4) + cm_bytes + al256(E * 4), &h->dev, err);
    if (!st) {
        h->d_slot_of = h->dev.ptr;
        h->d_chunk_map = (int32_t *)((uint8_t *)h->dev.ptr + al256(L * E * 4));
        h->d_bias_expert = (int32_t *)((uint8_t *)h->d_chunk_map + cm_bytes);
        st = hmoe_cuda_host_alloc(al256(L * E * 4) + cm_bytes, false, (void **)&h->map_host, err);
    }
    if (!st) {
        h->chunk_host = h->map_host + al256(L * E * 4) / 4;
        for (size_t i = 0; i < L * E; i++) h->map_host[i] = -1;
        st = hmoe_cuda_upload(h->cu, h->dev.ptr, h->map_host, al256(L * E * 4), err);
    }
    /* Mapped mailboxes and vectors. */
    const size_t mb_bytes = al256(L * sizeof(struct hmoe_cuda_mailbox));
    if (!st) st = hmoe_cuda_host_alloc(mb_bytes + 2 * al256(L * d * 4) + al256(sizeof *h->clk), true, &h->mapped, err);
    if (!st) {
        h->mb = h->mapped;
        h->h_host = (float *)((uint8_t *)h->mapped + mb_bytes);
        h->res_host = (float *)((uint8_t *)h->mapped + mb_bytes + al256(L * d * 4));
        h->clk = (struct hmoe_cuda_clock_sync *)((uint8_t *)h->mapped + mb_bytes + 2 * al256(L * d * 4));
    }
    /* CPU team buffers. */
    if (!st) {
        const size_t nt = (size_t)h->nt, k = (size_t)h->k, F = (size_t)h->F;
        h->xq_g = aligned_alloc(64, al256(nt * h->ag));
        h->xq_u = aligned_alloc(64, al256(nt * h->au));
        h->g = aligned_alloc(64, al256(k * F * 4));
        h->u = aligned_alloc(64, al256(k * F * 4));
        h->zq = aligned_alloc(64, al256(k * h->ad));
        h->tmp = aligned_alloc(64, al256(nt * d * 4));
        if (!h->xq_g || !h->xq_u || !h->g || !h->u || !h->zq || !h->tmp)
            st = HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory");
    }
    if (!st) st = hmoe_hyb_cpu_init(h, err);
    /* Streams, events, prefill staging. */
    if (!st) st = hmoe_cuda_stream_create(&h->fill_stream, err);
    if (!st) st = hmoe_cuda_event_create(&h->ev_maps, err);
    for (int i = 0; i < HYB_MAX_PENDING && !st; i++) {
        st = hmoe_cuda_event_create(&h->ev_pool[i], err);
        if (!st) h->n_ev_free++;
    }
    h->stream = p->plan->stream;
    h->stream_min = p->sched->stream_min_tokens > 0 ? p->sched->stream_min_tokens : 32;
    if (!st && h->stream) {
        uint64_t mx = 0;
        for (int l = 0; l < h->n_layer; l++) mx = HMOE_MAX(mx, expert_bytes(&h->moe[l]));
        h->chunk_bytes = (size_t)h->chunk_experts * mx + 3 * 256;
        for (int i = 0; i < 2 && !st; i++) {
            st = hmoe_cuda_buf_alloc(h->cu, h->chunk_bytes, &h->stage[i], err);
            if (!st) st = hmoe_cuda_event_create(&h->ev_copy[i], err);
            if (!st) st = hmoe_cuda_event_create(&h->ev_used[i], err);
        }
    }
    if (!st && h->n_ub > 1) {
        st = hmoe_cuda_host_alloc((size_t)h->n_ub * d * 4, false, (void **)&h->pf_h, err);
        if (!st) st = hmoe_cuda_host_alloc((size_t)h->n_ub * d * 4, false, (void **)&h->pf_out, err);
    }
    if (!st) st = split_init(h, p->sched, err);
    if (st) return st;

    /* Pin the expert ranges (copies become DMA), measure PCIe, pick the cache-copy rate. */
    if (pool_total || h->stream || hmoe_hyb_xfer_possible(p->sched)) hmoe_hyb_pin(h, p->file_base, p->file_size);
    probe_h2d(h, h->stage[0].ptr ? h->stage[0].ptr : NULL, h->stage[0].ptr ? HMOE_MIN(h->chunk_bytes, (size_t)64 << 20) : 0);
    bool all_pinned = true;
    for (int l = 0; l < h->n_layer; l++) all_pinned &= !h->L[l].ram || h->L[l].pinned;
    h->fills_per_token = p->sched->cache_fills_per_token >= 0 ? p->sched->cache_fills_per_token : all_pinned ? 8 : 0;
    if (!pool_total) h->fills_per_token = 0;
    if ((st = hmoe_hyb_xfer_init(h, err))) return st;

    /* Routing profile: seed the hot set before the first token. */
    h->profile_on = !p->sched->no_profile;
    if (h->profile_on) {
        struct hmoe_err e = {0};
        if (hmoe_sched_profile_path(p->sched->profile_dir, p->file_base, p->file_size, h->profile_path,
                                    sizeof h->profile_path, &e) != HMOE_OK) {
            h->profile_on = false;
            HMOE_INFO("routing profile off: %s", e.msg);
        } else {
            enum hmoe_status ls = hmoe_sched_profile_load(h->profile_path, h->n_layer, h->E, h->profile, &e);
            h->profile_loaded = ls == HMOE_OK;
            if (ls != HMOE_OK && ls != HMOE_ERR_NOT_FOUND) HMOE_WARN("routing profile ignored: %s", e.msg);
        }
    }
    /* Fill the cache at load so the first prompt's prefill reads those experts from VRAM and
     * streams only the rest: the profile's hot set, else (all-zero counts) experts 0..n_slots-1 of
     * each layer. Without a profile the decode still re-seeds from its first tokens' routing
     * (seeded stays false); that seed keeps the experts already in place. */
    if (pool_total) {
        st = seed(h, h->profile, hmoe_cuda_ctx_stream(h->cu), err);
        h->seeded = h->profile_loaded;
        h->load_seeded = hmoe_sched_cache_n_valid(h->cache);
        h->fill_bytes = 0; /* the statistics count copies made while running */
    }
    if (!st) st = hmoe_hyb_prefetch_upload(h, hmoe_cuda_ctx_stream(h->cu), err);
    if (!st) st = hmoe_cuda_sync(h->cu, err);
    /* the CPU expert phase is reported against the same team's read bandwidth */
    if (!st && h->n_ram && h->ram_probe_gbps == 0) h->ram_probe_gbps = hmoe_hyb_probe_ram(h);
    if (!st) clock_calibrate(h);
    return st;
}

void hmoe_sched_hybrid_free(struct hmoe_sched_hybrid *h) {
    if (!h) return;
    if (h->cu) hmoe_cuda_sync(h->cu, NULL);
    if (h->fill_stream) hmoe_cuda_stream_sync(h->fill_stream, NULL);
    if (h->profile_on && h->counts && h->profile) {
        uint64_t total = 0;
        for (size_t i = 0; i < (size_t)h->n_layer * (size_t)h->E; i++) total += h->counts[i];
        if (total) {
            for (size_t i = 0; i < (size_t)h->n_layer * (size_t)h->E; i++) h->profile[i] += h->counts[i];
            struct hmoe_err e = {0};
            if (hmoe_sched_profile_save(h->profile_path, h->n_layer, h->E, h->profile, &e))
                HMOE_WARN("routing profile not saved: %s", e.msg);
        }
    }
    hmoe_hyb_xfer_free(h);
    if (h->L) hmoe_hyb_unpin(h);
    for (int l = 0; h->L && l < h->n_layer; l++) hmoe_cuda_buf_free(h->cu, &h->L[l].pool);
    for (int i = 0; i < 2; i++) {
        hmoe_cuda_buf_free(h->cu, &h->stage[i]);
        hmoe_cuda_event_destroy(h->ev_copy[i]);
        hmoe_cuda_event_destroy(h->ev_used[i]);
    }
    for (int i = 0; i < h->n_pend; i++) hmoe_cuda_event_destroy(h->pend[i].ev);
    for (int i = 0; i < h->n_ev_free; i++) hmoe_cuda_event_destroy(h->ev_pool[i]);
    hmoe_cuda_event_destroy(h->ev_maps);
    hmoe_cuda_stream_destroy(h->fill_stream);
    hmoe_cuda_buf_free(h->cu, &h->dev);
    hmoe_cuda_host_free(h->map_host);
    hmoe_cuda_host_free(h->mapped);
    hmoe_cuda_host_free(h->pf_h);
    hmoe_cuda_host_free(h->pf_out);
    if (h->sp_stream) hmoe_cuda_stream_sync(h->sp_stream, NULL);
    for (int i = 0; i < 2; i++) {
        for (int j = 0; j < 5; j++) hmoe_cuda_event_destroy(h->ev_sp[i][j]);
        hmoe_cuda_event_destroy(h->ev_sp_end[i]);
    }
    free(h->plan_l);
    free(h->sp_w0s);
    hmoe_cuda_stream_destroy(h->sp_stream);
    hmoe_cuda_host_free(h->sp_ids);
    hmoe_cuda_host_free(h->sp_wts);
    hmoe_cuda_host_free(h->sp_h);
    hmoe_cuda_host_free(h->sp_out);
    free(h->sp_mask);
    free(h->cnt_hist);
    free(h->cnt_tok);
    free(h->pf_first);
    free(h->cnt_l);
    hmoe_sched_cache_free(h->cache);
    free(h->xq_g);
    free(h->xq_u);
    free(h->g);
    free(h->u);
    free(h->zq);
    free(h->tmp);
    hmoe_hyb_cpu_free(h);
    free(h->counts);
    free(h->profile);
    free(h->moe);
    free(h->d_router);
    free(h->d_gate_bias);
    free(h->d_up_bias);
    free(h->d_down_bias);
    free(h->L);
    free(h);
}

enum hmoe_status hmoe_sched_hybrid_enqueue_decode(struct hmoe_sched_hybrid *h, int il, const int32_t *d_ids,
                                                  const float *d_wts, const float *d_h, const void *d_hq,
                                                  size_t hq_stride, float *d_z, void *d_zq, int32_t *d_gids,
                                                  int32_t *d_nmiss, const uint32_t *d_seq, float *d_x, void *stream,
                                                  struct hmoe_err *err) {
    struct hyb_layer *L = &h->L[il];
    const int k = h->k;
    const int64_t d = h->d, F = h->moe[il].gate.n_out;
    enum hmoe_status st = hmoe_hyb_publish(h, il, d_ids, d_wts, d_h, d_gids, d_nmiss, d_seq, stream, err);
    if (st) return st;
    /* the next layer's prediction runs beside this layer's experts and the next attention */
    if ((st = hmoe_hyb_prefetch_fork(h, il, d_seq, stream, err))) return st;
    if (L->n_slots > 0) {
        /* d_gids name slots; the biases belong to the experts d_ids names */
        struct hmoe_cuda_experts gate = L->gate, up = L->up, down = L->down;
        gate.bias_ids = up.bias_ids = down.bias_ids = d_ids;
        if ((st = hmoe_cuda_moe_gate_up(&gate, &up, d_gids, k, k, d_hq, hq_stride, d_z, F, stream, err))) return st;
        if ((st = hmoe_cuda_quantize_q8_1(d_z, F, k, F, d_zq, stream, err))) return st;
        if ((st = hmoe_cuda_moe_down(&down, d_gids, d_wts, 1, k, d_zq, hmoe_cuda_q8_1_row_bytes(F), d_x, d, stream,
                                     err)))
            return st;
    }
    if (L->transfer) st = hmoe_hyb_xfer_compute(h, il, d_ids, d_wts, d_gids, d_hq, hq_stride, d_z, d_zq, d_x, stream, err);
    else st = hmoe_cuda_hybrid_wait_add(d_nmiss, d_seq, &h->mb[il], h->res_host + (size_t)il * h->d, d_x, d,
                                        HYB_TIMEOUT_MS, stream, err);
    if (!st && il == h->last_ram) st = hmoe_hyb_prefetch_join(h, stream, err);
    return st;
}

enum hmoe_status hmoe_sched_hybrid_cpu_step(struct hmoe_sched_hybrid *h, uint32_t seq, struct hmoe_err *err) {
    return hmoe_hyb_cpu_step(h, seq, err);
}

/* A side "was waiting" when it spun longer than this before it saw the other's flag: only then is
 * the time to see it handoff latency rather than lateness. The GPU's floor is one read of host
 * memory over PCIe (~1-2 us), so it gets the larger margin. */
#define HO_CPU_MIN_WAIT_NS 2000
#define HO_GPU_MIN_WAIT_NS 5000

/* Statistics of layer l's step with CPU misses from the stamps of both sides (hybrid_impl.h). */
static void account_handoff(struct hmoe_sched_hybrid *h, int l) {
    const struct hyb_layer *L = &h->L[l];
    const struct hmoe_cuda_mailbox *mb = &h->mb[l];
    if (!L->h_seen_ns || L->h_rel_ns < L->h_seen_ns) return;
    const int64_t span = (int64_t)(L->h_rel_ns - L->h_seen_ns);
    h->cpu_phases++;
    h->cpu_phase_ns += (uint64_t)span;
    h->cpu_phase_bytes += (uint64_t)mb->n_miss * expert_bytes(&h->moe[l]);
    h->cpu_ms += (double)span * 1e-6;
    const bool cpu_first = L->h_wait_ns && L->h_seen_ns - L->h_wait_ns >= HO_CPU_MIN_WAIT_NS && mb->t_pub_ns;
    const bool gpu_first = mb->gpu_wait_ns >= HO_GPU_MIN_WAIT_NS && mb->t_seen_ns;
    if (cpu_first && gpu_first) {
        h->ho_rt_ns += (int64_t)(mb->t_seen_ns - mb->t_pub_ns) - span;
        h->ho_rt_n++;
    }
    if (!h->clk_ok) return;
    if (cpu_first) {
        h->ho_in_ns += (int64_t)L->h_seen_ns + h->clk_off_ns - (int64_t)mb->t_pub_ns;
        h->ho_in_n++;
    }
    if (gpu_first) {
        h->ho_out_ns += (int64_t)mb->t_seen_ns - ((int64_t)L->h_rel_ns + h->clk_off_ns);
        h->ho_out_n++;
    }
}

enum hmoe_status hmoe_sched_hybrid_after_step(struct hmoe_sched_hybrid *h, void *stream, struct hmoe_err *err) {
    const double now = hmoe_time_s();
    if (!h->steps) h->t_first = now;
    h->t_last = now;
    h->steps++;
    hmoe_hyb_prefetch_collect(h); /* before the routing is counted: prefetched experts are cached now */
    uint64_t seen = 0;
    for (int l = 0; l < h->n_layer; l++) {
        struct hyb_layer *L = &h->L[l];
        if (!L->ram) continue;
        struct hmoe_cuda_mailbox *mb = &h->mb[l];
        if (mb->timed_out) {
            mb->timed_out = 0;
            return HMOE_RAISE(err, HMOE_ERR_DEVICE,
                              "hybrid decode: the GPU waited %d ms for the CPU's experts of layer %d and gave up",
                              HYB_TIMEOUT_MS, l);
        }
        L->uses += (uint64_t)mb->k;
        L->hits += (uint64_t)(mb->k - mb->n_miss - mb->n_xfer);
        L->xfers += (uint64_t)mb->n_xfer;
        if (L->h_seen_ns >= L->h_wait_ns && L->h_wait_ns) L->cpu_wait_ns += L->h_seen_ns - L->h_wait_ns;
        if (mb->n_miss > 0) {
            L->gpu_wait_ns += mb->gpu_wait_ns;
            L->gpu_waits++;
            account_handoff(h, l);
        }
        for (int j = 0; j < mb->k; j++)
            if (mb->ids[j] >= 0 && mb->ids[j] < h->E) h->counts[(size_t)l * h->E + (size_t)mb->ids[j]]++;
        hmoe_sched_cache_touch(h->cache, l, mb->ids, mb->k);
        seen += h->L[l].uses;
    }
    if (h->L && h->n_ram && !h->seeded) {
        bool any_slots = false;
        for (int l = 0; l < h->n_layer; l++) any_slots |= h->L[l].n_slots > 0;
        if (any_slots && h->steps >= SEED_TOKENS) {
            enum hmoe_status st = seed(h, h->counts, stream, err);
            return st ? st : hmoe_hyb_prefetch_upload(h, stream, err);
        }
    }
    /* Copies that finished: the expert becomes visible to the next step. */
    bool changed[1024] = {0};
    for (int i = 0; i < h->n_pend;) {
        if (hmoe_cuda_event_query(h->pend[i].ev) != 1) {
            i++;
            continue;
        }
        hmoe_sched_cache_commit(h->cache, &h->pend[i].f);
        if (h->pend[i].f.layer < 1024) changed[h->pend[i].f.layer] = true;
        h->ev_pool[h->n_ev_free++] = h->pend[i].ev;
        h->pend[i] = h->pend[--h->n_pend];
    }
    /* New copies: the victims disappear from the maps before the copies may start. */
    struct hmoe_sched_cache_fill f[64];
    int n = 0;
    if (h->fills_per_token > 0 && h->seeded) {
        const int room = HMOE_MIN(HMOE_MIN(h->fills_per_token, 64), HMOE_MIN(h->n_ev_free, HYB_MAX_PENDING - h->n_pend));
        n = room > 0 ? hmoe_sched_cache_plan(h->cache, f, room) : 0;
    } else {
        struct hmoe_sched_cache_fill none[1];
        hmoe_sched_cache_plan(h->cache, none, 0); /* advance the policy's clock */
    }
    for (int i = 0; i < n; i++)
        if (f[i].layer < 1024) changed[f[i].layer] = true;
    enum hmoe_status st = HMOE_OK;
    for (int l = 0; l < h->n_layer && l < 1024 && !st; l++)
        if (changed[l]) st = push_map(h, l, stream, err);
    if (!st && n) {
        st = hmoe_cuda_event_record(h->ev_maps, stream, err);
        if (!st) st = hmoe_cuda_stream_wait_event(h->fill_stream, h->ev_maps, err);
    }
    for (int i = 0; i < n && !st; i++) {
        st = copy_expert(h, f[i].layer, f[i].expert, f[i].slot, h->fill_stream, err);
        void *ev = h->ev_pool[--h->n_ev_free];
        if (!st) st = hmoe_cuda_event_record(ev, h->fill_stream, err);
        h->pend[h->n_pend++] = (struct hyb_pending){.f = f[i], .ev = ev};
        h->fills++;
    }
    (void)seen;
    if (!st) st = hmoe_hyb_prefetch_upload(h, stream, err); /* last: victims without this step's pending slots */
    return st;
}

void hmoe_sched_hybrid_reset_stats(struct hmoe_sched_hybrid *h) {
    for (int l = 0; l < h->n_layer; l++) {
        h->L[l].uses = h->L[l].hits = h->L[l].gpu_wait_ns = h->L[l].gpu_waits = h->L[l].cpu_wait_ns = 0;
        h->L[l].xfers = 0;
    }
    h->steps = h->fills = h->fill_bytes = 0;
    h->stream_experts_total = h->stream_bytes_total = 0;
    h->cpu_ms = 0;
    h->t_first = h->t_last = 0;
    h->pf_pred = h->pf_correct = h->pf_fills = h->pf_used = 0;
    memset(&h->sp_total, 0, sizeof h->sp_total); /* the measured rates stay */
    h->cpu_phases = h->cpu_phase_ns = h->cpu_phase_bytes = 0;
    h->ho_in_n = h->ho_out_n = h->ho_rt_n = 0;
    h->ho_in_ns = h->ho_out_ns = h->ho_rt_ns = 0;
    clock_calibrate(h); /* between runs: keeps the offset fresh against drift */
}
