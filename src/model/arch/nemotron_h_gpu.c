/* nemotron_h_gpu.c — one nemotron_h / nemotron_h_moe layer on the GPU (nemotron_h_moe.md §1),
 * the same steps as nemotron_h.c with cuda.h launchers: RMSNorm (attn_norm, every kind) -> one
 * mixer, added into the residual:
 *  - Mamba-2 (§4): ssm_in, causal conv + bias + SiLU with its state, the selective scan with the
 *    state in VRAM, gate + grouped RMSNorm, ssm_out;
 *  - attention without positions (§5): q|k|v, KV store without RoPE, attention, o;
 *  - MoE (§6.1): router + sigmoid top-k with the selection bias on the device, optional latent
 *    down projection, ungated ReLU² experts (F32 / F16 or quantized: matvec kernels for a few tokens,
 *    grouped GEMMs for many; layers kept in RAM: on CPU threads), latent up projection, then the
 *    shared expert;
 *  - dense ReLU² MLP (§6.3).
 * The embedding, LM head, micro-batching and the captured decode graph are gpu_forward.c's,
 * which calls this per layer (the entry's gpu->layer).
 */
#include <math.h>

#include "model/arch/nemotron_h_gpu.h"

#define SMALL_TOKENS 8 /* as gpu_forward.c: up to this many tokens the matvec kernels, no f16 copies */

#define TRY(call)                               \
    do {                                        \
        enum hmoe_status st_ = (call);          \
        if (st_ != HMOE_OK) return st_;         \
    } while (0)

static size_t q8_row(int64_t n) { return hmoe_cuda_q8_1_row_bytes((n + 31) / 32 * 32); }

/* Rows of `cols` floats at x (contiguous) in the forms a product with weights of type t wants:
 * q8_1 when t is quantized, f16 when a GEMM may take it. */
static enum hmoe_status act_of(struct hmoe_gpu *g, enum hmoe_type t, float *x, int64_t cols, int64_t n, void *xq,
                               uint16_t *x16, struct hmoe_gpu_act *out, struct hmoe_err *err) {
    if (hmoe_type_info[t].is_quantized) TRY(hmoe_cuda_quantize_q8_1(x, cols, n, cols, xq, g->stream, err));
    if (n > SMALL_TOKENS) TRY(hmoe_cuda_convert_f16(x, n * cols, x16, g->stream, err));
    *out = (struct hmoe_gpu_act){x, cols, xq, q8_row(cols), n > SMALL_TOKENS ? x16 : NULL, cols};
    return HMOE_OK;
}

static struct hmoe_gpu_act normed(struct hmoe_gpu *g, int64_t d, int64_t n) {
    return (struct hmoe_gpu_act){g->hf, d, g->hq, hmoe_cuda_q8_1_row_bytes(d), n > SMALL_TOKENS ? g->h16 : NULL, d};
}

/* Mamba-2 mixer (§4): normed g->hf/hq/h16 in, added into g->x. */
static enum hmoe_status mamba(struct hmoe_ctx *c, int il, int64_t n, struct hmoe_err *err) {
    struct hmoe_gpu *g = c->gpu;
    struct hmoe_gpu_nem *N = g->arch_state;
    const struct hmoe_gpu_nem_layer *L = &N->L[il];
    const struct hmoe_model_config *cfg = &c->m->cfg;
    const int64_t d = cfg->n_embd, di = cfg->ssm_d_inner, H = cfg->ssm_n_head, G = cfg->ssm_n_group,
                  Ns = cfg->ssm_d_state, cd = di + 2 * G * Ns, dip = N->dip;
    void *s = g->stream;
    const struct hmoe_gpu_act ah = normed(g, d, n);
    TRY(hmoe_gpu_dense(g, &L->in, n, &ah, N->proj, dip, NULL, err)); /* [z | x B C | dt] */
    TRY(hmoe_cuda_mamba2_conv(N->proj + di, dip, L->conv_state, L->conv_w, L->conv_b, cfg->ssm_conv_kernel, cd, n, N->y,
                              cd, s, err));
    const struct hmoe_cuda_mamba2_scan_args sa = {.S = L->ssm, .n_head = (int)H, .P = (int)(di / H), .N = (int)Ns,
                                                  .n_group = (int)G, .ntok = n, .x = N->y, .x_stride = cd,
                                                  .B = N->y + di, .C = N->y + di + G * Ns, .bc_stride = cd,
                                                  .dt = N->proj + di + cd, .dt_stride = dip, .dt_bias = L->dt_bias,
                                                  .A = L->a, .D = L->d, .y = N->o, .y_stride = di};
    TRY(hmoe_cuda_mamba2_scan(&sa, s, err));
    TRY(hmoe_cuda_mamba2_gated_norm(N->o, di, N->proj, dip, L->norm, n, (int)G, (int)(di / G), cfg->rms_eps, s, err));
    struct hmoe_gpu_act ao;
    TRY(act_of(g, L->out.type, N->o, di, n, N->oq, N->o16, &ao, err));
    return hmoe_gpu_dense(g, &L->out, n, &ao, g->x, d, g->x, err);
}

/* Attention without positions (§5): normed input in, added into g->x. K is cached as projected. */
static enum hmoe_status attention(struct hmoe_ctx *c, int il, int64_t n, struct hmoe_err *err) {
    struct hmoe_gpu *g = c->gpu;
    struct hmoe_gpu_layer *L = &g->L[il];
    const struct hmoe_model_config *cfg = &c->m->cfg;
    const int64_t d = cfg->n_embd, H = cfg->n_head, Hkv = cfg->n_head_kv, D = cfg->head_dim;
    const int64_t nq = H * D, nk = Hkv * D, nqkv = nq + 2 * nk;
    const int32_t *d_pos = g->step + 2;
    void *s = g->stream;
    const struct hmoe_gpu_act ah = normed(g, d, n);
    if (L->qkv_fused) {
        struct hmoe_gpu_mat w = L->wq;
        w.nrows = nq + nk + (L->qkv_fused == 3 ? nk : 0);
        TRY(hmoe_gpu_dense(g, &w, n, &ah, g->qkv, nqkv, NULL, err));
        if (L->qkv_fused == 2) TRY(hmoe_gpu_dense(g, &L->wv, n, &ah, g->qkv + nq + nk, nqkv, NULL, err));
    } else {
        TRY(hmoe_gpu_dense(g, &L->wq, n, &ah, g->qkv, nqkv, NULL, err));
        TRY(hmoe_gpu_dense(g, &L->wk, n, &ah, g->qkv + nq, nqkv, NULL, err));
        TRY(hmoe_gpu_dense(g, &L->wv, n, &ah, g->qkv + nq + nk, nqkv, NULL, err));
    }
    /* n_rot 0: no rotation, no QK-norm; the launcher only stores K and V. */
    const struct hmoe_cuda_qkv_args qa = {.q = g->qkv, .k = g->qkv + nq, .v = g->qkv + nq + nk, .q_stride = nqkv,
                                          .kv_stride = nqkv, .ntok = n, .n_head = (int)H, .n_head_kv = (int)Hkv,
                                          .head_dim = (int)D, .eps = cfg->rms_eps, .pos = d_pos,
                                          .rope = {.n_rot = 0, .freq_base = 1.0f, .freq_scale = 1.0f, .mscale = 1.0f},
                                          .kv = L->kv};
    TRY(hmoe_cuda_qk_norm_rope_store(&qa, s, err));
    const float scale = 1.0f / sqrtf((float)D); /* key_length, not d / H (§5) */
    const bool wo_float = !hmoe_type_info[L->wo.type].is_quantized;
    if (n == 1) {
        TRY(hmoe_cuda_attn_decode(g->qkv, &L->kv, d_pos, (int)H, scale, 0, g->attn_scratch, wo_float ? g->o : NULL,
                                  wo_float ? NULL : g->oq, s, err));
    } else {
        TRY(hmoe_cuda_attn_prefill(g->qkv, nqkv, n, d_pos, &L->kv, (int)H, scale, g->o, n > SMALL_TOKENS ? g->o16 : NULL,
                                   nq, s, err));
        if (!wo_float) TRY(hmoe_cuda_quantize_q8_1(g->o, nq, n, nq, g->oq, s, err));
    }
    const struct hmoe_gpu_act ao = {g->o, nq, g->oq, hmoe_cuda_q8_1_row_bytes(nq), n > SMALL_TOKENS ? g->o16 : NULL, nq};
    return hmoe_gpu_dense(g, &L->wo, n, &ao, g->x, d, g->x, err);
}

/* up -> ReLU² -> down of the normed input, added into g->x (shared expert, dense MLP). */
static enum hmoe_status relu2_mlp(struct hmoe_ctx *c, const struct hmoe_gpu_nem_layer *L, int64_t n,
                                  struct hmoe_err *err) {
    struct hmoe_gpu *g = c->gpu;
    struct hmoe_gpu_nem *N = g->arch_state;
    const int64_t d = c->m->cfg.n_embd, F = L->ff_up.nrows;
    const struct hmoe_gpu_act ah = normed(g, d, n);
    TRY(hmoe_gpu_dense(g, &L->ff_up, n, &ah, N->ff, F, NULL, err));
    TRY(hmoe_cuda_relu2(N->ff, F, n, F, g->stream, err));
    struct hmoe_gpu_act az;
    TRY(act_of(g, L->ff_down.type, N->ff, F, n, N->ffq, N->ff16, &az, err));
    return hmoe_gpu_dense(g, &L->ff_down, n, &az, g->x, d, g->x, err);
}

static bool q8_gemm_type(enum hmoe_type t) { return hmoe_type_info[t].is_quantized && t != HMOE_TYPE_IQ1_M; }

/* --- streamed prefill of RAM layers (hmoe_gpu_nem.stage) -------------------------------- */

/* Whether a micro-batch of n tokens streams the RAM layers' stacks (--stream-min) rather than
 * leaving their experts to the CPU threads. */
static bool streams(const struct hmoe_ctx *c, int64_t n) {
    const struct hmoe_gpu_nem *N = c->gpu->arch_state;
    const int stream_min = c->p.sched.stream_min_tokens > 0 ? c->p.sched.stream_min_tokens : 32;
    return N->n_stage > 0 && n > SMALL_TOKENS && n >= stream_min;
}

/* The first layer from il on whose routed experts live in RAM, or -1. */
static int next_ram_layer(const struct hmoe_ctx *c, int il) {
    for (int l = il < 0 ? 0 : il; l < c->m->cfg.n_layer; l++)
        if (c->m->w.layers[l].moe.up.data && !c->gpu->L[l].resident) return l;
    return -1;
}

/* Layer l's expert views: inside its page-locked range when it has one (HMOE_PIN=copy: the
 * copy), else the mapping's. */
static const struct hmoe_moe_weights *ram_experts(const struct hmoe_ctx *c, int l) {
    const struct hmoe_gpu_nem *N = c->gpu->arch_state;
    const struct hmoe_moe_weights *p = hmoe_sched_pinned_layer(N->pinned, l);
    return p ? p : &c->m->w.layers[l].moe;
}

static int stage_holding(const struct hmoe_gpu_nem *N, int l) {
    for (int b = 0; b < N->n_stage; b++)
        if (N->stage_layer[b] == l) return b;
    return -1;
}

/* Where layer l's up and down stacks start in staging buffer b. */
static void stage_ptrs(const struct hmoe_ctx *c, int l, int b, const uint8_t **up_w, const uint8_t **down_w) {
    const struct hmoe_gpu_nem *N = c->gpu->arch_state;
    const struct hmoe_mat *u = &c->m->w.layers[l].moe.up;
    const size_t ub_al = (u->mat_bytes * (size_t)u->n_mat + 255) & ~(size_t)255;
    *up_w = N->stage[b].ptr;
    *down_w = (const uint8_t *)N->stage[b].ptr + ub_al;
}

/* Layer l's up and down stacks into buffer b: ahead on the copy stream once the kernels reading
 * the buffer's previous layer are done (a DMA from the page-locked range), or on the compute
 * stream, after any copy still landing in the buffer. */
static enum hmoe_status stage_copy(struct hmoe_ctx *c, int l, int b, bool ahead, struct hmoe_err *err) {
    struct hmoe_gpu *g = c->gpu;
    struct hmoe_gpu_nem *N = g->arch_state;
    const struct hmoe_moe_weights *X = ram_experts(c, l);
    const size_t ub = X->up.mat_bytes * (size_t)X->up.n_mat, db = X->down.mat_bytes * (size_t)X->down.n_mat;
    const size_t ub_al = (ub + 255) & ~(size_t)255;
    if (ub_al + db > N->stage[b].bytes)
        return HMOE_RAISE(err, HMOE_ERR_INTERNAL, "layer %d: %zu expert bytes, staging buffer %zu", l, ub_al + db,
                          N->stage[b].bytes);
    void *s = ahead ? N->copy_stream : g->stream;
    if (ahead) TRY(hmoe_cuda_stream_wait_event(s, N->ev_free[b], err));
    else if (N->ev_copied[b]) TRY(hmoe_cuda_stream_wait_event(s, N->ev_copied[b], err));
    uint8_t *base = N->stage[b].ptr;
    N->stage_layer[b] = -1; /* (a failed copy leaves the buffer holding nothing) */
    TRY(hmoe_cuda_memcpy_async(base, X->up.data, ub, s, err));
    TRY(hmoe_cuda_memcpy_async(base + ub_al, X->down.data, db, s, err));
    if (ahead) TRY(hmoe_cuda_event_record(N->ev_copied[b], s, err));
    N->stage_layer[b] = l;
    N->bytes_staged += ub + db;
    N->n_copies++;
    N->n_staged_async += ahead;
    return HMOE_OK;
}

/* At every layer of a streamed micro-batch: the next RAM layers from il on (as many as there are
 * buffers) that are page-locked and not staged yet start copying into buffers holding none of
 * them; a layer that is not page-locked is copied when it is used. */
static enum hmoe_status stage_ahead(struct hmoe_ctx *c, int il, struct hmoe_err *err) {
    struct hmoe_gpu_nem *N = c->gpu->arch_state;
    if (!N->copy_stream) return HMOE_OK;
    int want[2], nw = 0;
    for (int l = next_ram_layer(c, il); l >= 0 && nw < N->n_stage; l = next_ram_layer(c, l + 1)) want[nw++] = l;
    for (int i = 0; i < nw; i++) {
        if (stage_holding(N, want[i]) >= 0 || !hmoe_sched_pinned_layer(N->pinned, want[i])) continue;
        int b = -1; /* a buffer holding none of the wanted layers: one exists, since want[i] is in none */
        for (int x = 0; x < N->n_stage && b < 0; x++) {
            bool needed = false;
            for (int j = 0; j < nw; j++) needed |= N->stage_layer[x] == want[j];
            if (!needed) b = x;
        }
        if (b >= 0) TRY(stage_copy(c, want[i], b, true, err));
    }
    return HMOE_OK;
}

/* RAM layer il's stacks for this micro-batch's kernels: the buffer holding them (the compute
 * stream waits for their copy) or, when none does, copied now into a buffer that does not hold
 * the next RAM layer. Writes the buffer and where the stacks start. */
static enum hmoe_status stage_use(struct hmoe_ctx *c, int il, int *buf, const uint8_t **up_w, const uint8_t **down_w,
                                  struct hmoe_err *err) {
    struct hmoe_gpu *g = c->gpu;
    struct hmoe_gpu_nem *N = g->arch_state;
    int b = stage_holding(N, il);
    if (b < 0) {
        const int next = next_ram_layer(c, il + 1);
        b = N->n_stage > 1 && N->stage_layer[0] == next && next >= 0 ? 1 : 0;
        TRY(stage_copy(c, il, b, false, err));
    } else if (N->ev_copied[b]) {
        TRY(hmoe_cuda_stream_wait_event(g->stream, N->ev_copied[b], err));
    }
    N->n_staged++;
    *buf = b;
    stage_ptrs(c, il, b, up_w, down_w);
    return HMOE_OK;
}

/* The routed experts of n routed tokens (g->ids / g->wts), input rows `in` of width m, the
 * weighted sum added into y (rows y_stride apart). up_w / down_w: the stacks (resident or staged). */
static enum hmoe_status experts(struct hmoe_ctx *c, int il, int64_t n, const struct hmoe_gpu_act *in, float *y,
                                int64_t y_stride, const uint8_t *up_w, const uint8_t *down_w, struct hmoe_err *err) {
    struct hmoe_gpu *g = c->gpu;
    struct hmoe_gpu_nem *N = g->arch_state;
    const struct hmoe_gpu_layer *GL = &g->L[il];
    const struct hmoe_model_config *cfg = &c->m->cfg;
    /* gpu_init.c lays the up stack out after the (empty) gate stack with the gate's shape: the
     * shape here comes from the file's up tensor */
    const struct hmoe_mat *Xu = &c->m->w.layers[il].moe.up;
    const struct hmoe_cuda_experts upx = {.type = Xu->type, .w = up_w, .row_bytes = Xu->row_bytes,
                                          .expert_stride_bytes = Xu->mat_bytes, .nrows = Xu->n_out, .ncols = Xu->n_in,
                                          .n_expert = Xu->n_mat};
    struct hmoe_cuda_experts downx = GL->down;
    downx.w = down_w;
    const struct hmoe_cuda_experts *up = &upx, *down = &downx;
    const int64_t F = up->nrows, m = up->ncols;
    const int k = cfg->n_expert_used, E = cfg->n_expert;
    void *s = g->stream;
    if (!hmoe_type_info[up->type].is_quantized) { /* F32 / F16 experts: the float kernels, any width */
        TRY(hmoe_cuda_moe_f32_up_relu2(up, g->ids, n * k, k, in->f, in->f_stride, N->ez, F, s, err));
        return hmoe_cuda_moe_f32_down(down, g->ids, g->wts, n, k, N->ez, F, y, y_stride, s, err);
    }
    const size_t qm = q8_row(m), qf = q8_row(F);
    const bool gemm = n > SMALL_TOKENS && m % 64 == 0 && F % 64 == 0 && F % 2 == 0 && down->nrows % 2 == 0 && in->h;
    if (!gemm) {
        TRY(hmoe_cuda_moe_up_relu2(up, g->ids, n * k, k, in->q, qm, N->ez, F, s, err));
        TRY(hmoe_cuda_quantize_q8_1(N->ez, F, n * k, F, N->ezq, s, err));
        return hmoe_cuda_moe_down(down, g->ids, g->wts, n, k, N->ezq, qf, y, y_stride, s, err);
    }
    /* grouped by expert: plan rows in expert order, up -> ReLU² -> down -> weighted combine */
    TRY(hmoe_cuda_moe_plan_build(g->ids, n, k, E, g->plan, s, err));
    const bool int8 = q8_gemm_type(up->type) && q8_gemm_type(down->type);
    struct hmoe_cuda_gemm_args gu = {.w = *up, .ntok = n, .plan = g->plan, .k = k, .x_gather = true, .y_f32 = N->ez,
                                     .y_stride = F};
    if (int8) gu.xq = in->q, gu.xq_stride_bytes = qm;
    else gu.x = in->h, gu.x_stride = m;
    TRY(hmoe_cuda_gemm(&gu, s, err));
    TRY(hmoe_cuda_relu2(N->ez, F, n * k, F, s, err));
    struct hmoe_cuda_gemm_args dn = {.w = *down, .ntok = n, .plan = g->plan, .k = k, .x_gather = false, .y_f32 = g->ye,
                                     .y_stride = m};
    if (int8) {
        TRY(hmoe_cuda_quantize_q8_1(N->ez, F, n * k, F, N->ezq, s, err));
        dn.xq = N->ezq, dn.xq_stride_bytes = qf;
    } else {
        TRY(hmoe_cuda_convert_f16(N->ez, n * k * F, N->ez16, s, err));
        dn.x = N->ez16, dn.x_stride = F;
    }
    TRY(hmoe_cuda_gemm(&dn, s, err));
    return hmoe_cuda_moe_combine(g->plan, g->ye, m, g->wts, n, k, E, m, y, y_stride, s, err);
}

/* Routed experts of a layer kept in RAM (-cmoe, -ncmoe, a VRAM budget below the experts): the
 * normed rows (and the latent rows) go to the host, the CPU scheduler routes and runs them on its
 * threads (src/sched, the CPU path's kernels), the sum comes back: added into g->x, or written to
 * lat_out for the latent up projection. Synchronous copies: such steps run eagerly (no graph). */
static enum hmoe_status experts_on_cpu(struct hmoe_ctx *c, int il, int64_t n, bool latent, struct hmoe_err *err) {
    struct hmoe_gpu *g = c->gpu;
    struct hmoe_gpu_nem *N = g->arch_state;
    struct hmoe_run_state *rs = &c->rs;
    const struct hmoe_moe_weights *X = ram_experts(c, il);
    const int64_t d = c->m->cfg.n_embd, m = N->m;
    const double t0 = hmoe_time_s();
    TRY(hmoe_cuda_download(g->cu, rs->xn, g->hf, (size_t)(n * d) * sizeof(float), err));
    if (latent) TRY(hmoe_cuda_download(g->cu, rs->rec->z, N->lat, (size_t)(n * m) * sizeof(float), err));
    const double t1 = hmoe_time_s();
    if (latent) TRY(hmoe_sched_moe_ffn_split(rs->moe, X, rs->xn, rs->rec->z, (int)n, rs->rec->o, err));
    else TRY(hmoe_sched_moe_ffn(rs->moe, X, rs->xn, (int)n, rs->out, err));
    const double t2 = hmoe_time_s();
    enum hmoe_status st = latent ? hmoe_cuda_upload(g->cu, N->lat_out, rs->rec->o, (size_t)(n * m) * sizeof(float), err)
                                 : hmoe_cuda_upload(g->cu, g->ye, rs->out, (size_t)(n * d) * sizeof(float), err);
    N->t_wait += t1 - t0, N->t_cpu += t2 - t1, N->t_up += hmoe_time_s() - t2;
    N->n_cpu_calls++, N->n_cpu_tokens += (uint64_t)n;
    if (st || latent) return st;
    return hmoe_cuda_add(g->x, g->ye, n * d, g->x, g->stream, err);
}

/* MoE layer (§6.1 steps 1-12): router on the full normed input, sigmoid top-k, routed experts
 * (in the latent space when the file has the projections), then the shared expert. */
static enum hmoe_status moe(struct hmoe_ctx *c, int il, int64_t n, struct hmoe_err *err) {
    struct hmoe_gpu *g = c->gpu;
    struct hmoe_gpu_nem *N = g->arch_state;
    const struct hmoe_gpu_nem_layer *L = &N->L[il];
    const struct hmoe_gpu_layer *GL = &g->L[il];
    const struct hmoe_model_config *cfg = &c->m->cfg;
    const int64_t d = cfg->n_embd, m = N->m;
    const int k = cfg->n_expert_used, E = cfg->n_expert;
    void *s = g->stream;
    const struct hmoe_gpu_act ah = normed(g, d, n);
    /* experts in RAM: a large micro-batch streams the layer's stacks to the GPU (--stream-min),
     * others leave routing and experts to the CPU threads */
    const bool streamed = !GL->resident && streams(c, n);
    const uint8_t *up_w = GL->up.w, *down_w = GL->down.w;
    int buf = -1;
    if (streamed) TRY(stage_use(c, il, &buf, &up_w, &down_w, err));
    if (!GL->resident && !streamed) {
        if (L->lat_down.w) {
            struct hmoe_gpu_act ao;
            TRY(hmoe_gpu_dense(g, &L->lat_down, n, &ah, N->lat, m, NULL, err));
            TRY(experts_on_cpu(c, il, n, true, err));
            TRY(act_of(g, L->lat_up.type, N->lat_out, m, n, N->latq, N->lat16, &ao, err));
            TRY(hmoe_gpu_dense(g, &L->lat_up, n, &ao, g->x, d, g->x, err));
        } else {
            TRY(experts_on_cpu(c, il, n, false, err));
        }
        return L->has_ff ? relu2_mlp(c, L, n, err) : HMOE_OK;
    }
    if (n > SMALL_TOKENS) {
        TRY(hmoe_cuda_gemm_f32_cublas(g->cu, GL->router, E, d, g->hf, n, g->rlog, E, err));
    } else {
        const struct hmoe_cuda_mmv_args r = {.type = HMOE_TYPE_F32, .w = GL->router, .row_bytes = (size_t)d * 4, .nrows = E,
                                             .ncols = d, .x = g->hf, .x_stride_bytes = (size_t)d * 4, .ntok = n,
                                             .y = g->rlog, .y_stride = E};
        TRY(hmoe_cuda_mmv(&r, s, err));
    }
    const struct hmoe_cuda_topk_sigmoid_args ta = {.logits = g->rlog, .logits_stride = E, .ntok = n, .n_expert = E, .k = k,
                                                   .sel_bias = L->sel_bias, .renorm = cfg->exp_w_norm,
                                                   .scale = cfg->exp_w_scale, .ids = g->ids, .weights = g->wts};
    TRY(hmoe_cuda_moe_topk_sigmoid(&ta, s, err));
    if (L->lat_down.w) {
        struct hmoe_gpu_act al;
        TRY(hmoe_gpu_dense(g, &L->lat_down, n, &ah, N->lat, m, NULL, err));
        TRY(act_of(g, GL->up.type, N->lat, m, n, N->latq, N->lat16, &al, err));
        TRY(hmoe_cuda_copy(N->lat_out, N->zeros, (size_t)(n * m) * sizeof(float), s, err));
        TRY(experts(c, il, n, &al, N->lat_out, m, up_w, down_w, err));
        if (buf >= 0 && N->ev_free[buf]) TRY(hmoe_cuda_event_record(N->ev_free[buf], s, err));
        struct hmoe_gpu_act ao;
        TRY(act_of(g, L->lat_up.type, N->lat_out, m, n, N->latq, N->lat16, &ao, err));
        TRY(hmoe_gpu_dense(g, &L->lat_up, n, &ao, g->x, d, g->x, err));
    } else {
        TRY(experts(c, il, n, &ah, g->x, d, up_w, down_w, err));
        if (buf >= 0 && N->ev_free[buf]) TRY(hmoe_cuda_event_record(N->ev_free[buf], s, err));
    }
    return L->has_ff ? relu2_mlp(c, L, n, err) : HMOE_OK;
}

enum hmoe_status hmoe_nemotron_gpu_layer(struct hmoe_ctx *c, int il, int64_t n, bool decode, struct hmoe_err *err) {
    (void)decode; /* every step is capture-safe: the decode graph records the same launches */
    struct hmoe_gpu *g = c->gpu;
    struct hmoe_gpu_nem *N = g->arch_state;
    const struct hmoe_layer_weights *W = &c->m->w.layers[il];
    const struct hmoe_model_config *cfg = &c->m->cfg;
    const int64_t d = cfg->n_embd;
    const struct hmoe_cuda_rmsnorm_args n1 = {.x = g->x, .x_stride = d, .w = g->L[il].attn_norm, .eps = cfg->rms_eps,
                                              .nrows = n, .n = d, .out_f32 = g->hf,
                                              .out_f16 = n > SMALL_TOKENS ? g->h16 : NULL, .out_q8_1 = g->hq};
    TRY(hmoe_cuda_rmsnorm(&n1, g->stream, err));
    if (streams(c, n)) TRY(stage_ahead(c, il, err)); /* the next RAM layers' copies overlap this layer */
    if (W->recurrent) return mamba(c, il, n, err);
    if (!W->ffn_only) return attention(c, il, n, err);
    if (W->moe.up.data) return moe(c, il, n, err);
    return relu2_mlp(c, &N->L[il], n, err);
}
