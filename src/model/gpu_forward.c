/* gpu_forward.c — the forward pass on the GPU with cuda.h launchers: embedding rows looked up
 * on the CPU into page-locked staging; each layer by the architecture entry's gpu->layer (the
 * plain step here, hmoe_gpu_layer_attn_moe, is qwen3moe.md §3-§4: RMSNorm -> q|k|v -> per-head
 * Q/K RMSNorm + NEOX RoPE + KV store -> attention -> Wo + residual -> RMSNorm -> router + top-k
 * on the device -> experts -> residual); final RMSNorm and LM head. A single-token step is captured once into a CUDA graph (position, sequence
 * number and expert ids live in device memory) and replayed: one launch and one device->host
 * copy of the logits per token. Micro-batches run eagerly: dense products through cuBLAS or the
 * int8 tensor-core GEMM, experts grouped by expert (plan + grouped GEMM + combine). Layers whose
 * experts live in RAM hand their MoE to the hybrid scheduler (sched.h). Each sequence of a
 * context has its own KV region and decode graph; a batched step of several sequences
 * (hmoe_gpu_forward_batch) runs eagerly with attention per sequence.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/gpu_impl.h"

#define SMALL_TOKENS 8  /* up to this many tokens: matvec kernels (no GEMM tiles to fill) */
#define CUBLAS_MIN_TOKENS 64

#define TRY(call)                               \
    do {                                        \
        enum hmoe_status st_ = (call);          \
        if (st_ != HMOE_OK) return st_;         \
    } while (0)

/* Optional profile (HMOE_GPU_PROFILE=1, eager steps only): an event opens each interval. */
enum { P_NORM, P_QKV, P_ROPE, P_ATTN, P_WO, P_ROUTER, P_EXPERTS, P_HYBRID, P_HEAD, P_COPY, P_COUNT };
static const char *const prof_names[P_COUNT] = {"rmsnorm", "q|k|v", "qk-norm+rope+store", "attention", "o + residual",
                                                "router + top-k", "experts", "hybrid (RAM layers)", "final norm + LM head",
                                                "host<->device copies"};
static void prof(struct hmoe_gpu *g, int cls) {
    if (!g->prof_on || g->prof_n >= HMOE_GPU_PROF_EVENTS) return;
    if (hmoe_cuda_event_record(g->prof_ev[g->prof_n], g->stream, NULL) == HMOE_OK) g->prof_cls[g->prof_n++] = cls;
}
static void prof_collect(struct hmoe_gpu *g, int n_tokens) {
    if (!g->prof_on) return;
    prof(g, P_COPY);
    if (g->prof_n > 0) hmoe_cuda_event_sync(g->prof_ev[g->prof_n - 1], NULL);
    for (int i = 0; i + 1 < g->prof_n; i++) {
        double ms = 0;
        if (hmoe_cuda_event_elapsed_ms(g->prof_ev[i], g->prof_ev[i + 1], &ms, NULL) == HMOE_OK) g->prof_ms[g->prof_cls[i]] += ms;
    }
    g->prof_n = 0;
    g->prof_tokens += (uint64_t)n_tokens;
}
const char *hmoe_gpu_prof_name(int cls) { return cls >= 0 && cls < P_COUNT ? prof_names[cls] : NULL; }

static bool q8_gemm_type(enum hmoe_type t) { return hmoe_type_info[t].is_quantized && t != HMOE_TYPE_IQ1_M; }

/* y (n rows, y_stride floats apart) = W · x (+ W->bias) (+ add, which may be y). Picks the
 * kernel: float weights always take the f32 matvec; a few tokens the q8_1 matvec; many tokens
 * cuBLAS (weights dequantized to f16; the bias a launch of its own) or the int8 tensor-core GEMM. */
static enum hmoe_status dense(struct hmoe_gpu *g, const struct hmoe_gpu_mat *W, int64_t n, const struct hmoe_gpu_act *a,
                              float *y, int64_t y_stride, const float *add, struct hmoe_err *err) {
    const bool fl = !hmoe_type_info[W->type].is_quantized;
    const bool gemm_ok = W->ncols % 64 == 0 && W->nrows % 2 == 0 && y_stride % 2 == 0 && a->h;
    if (fl || n <= SMALL_TOKENS || !gemm_ok) {
        struct hmoe_cuda_mmv_args m = {.type = W->type, .w = W->w, .row_bytes = W->row_bytes, .nrows = W->nrows,
                                       .ncols = W->ncols, .x = fl ? (const void *)a->f : a->q,
                                       .x_stride_bytes = fl ? (size_t)a->f_stride * 4 : a->q_stride, .ntok = n, .y = y,
                                       .y_stride = y_stride, .add = add, .add_stride = y_stride, .bias = W->bias};
        return hmoe_cuda_mmv(&m, g->stream, err);
    }
    struct hmoe_cuda_gemm_args ga = {.w = {.type = W->type, .w = W->w, .row_bytes = W->row_bytes, .nrows = W->nrows,
                                           .ncols = W->ncols, .n_expert = 1, .bias = W->bias},
                                     .ntok = n, .y_f32 = y, .y_stride = y_stride, .add = add, .add_stride = y_stride};
    if (n >= CUBLAS_MIN_TOKENS && (size_t)(W->nrows * W->ncols) <= g->cublas_scratch_halves && (!add || add == y)) {
        ga.x = a->h;
        ga.x_stride = a->h_stride;
        ga.w.bias = NULL;
        TRY(hmoe_cuda_gemm_cublas(g->cu, &ga, g->cublas_scratch, err));
        return W->bias ? hmoe_cuda_add_bias(y, y_stride, W->bias, n, W->nrows, g->stream, err) : HMOE_OK;
    }
    if (q8_gemm_type(W->type)) {
        ga.xq = a->q;
        ga.xq_stride_bytes = a->q_stride;
    } else {
        ga.x = a->h;
        ga.x_stride = a->h_stride;
    }
    return hmoe_cuda_gemm(&ga, g->stream, err);
}

/* y = W · rmsnorm(x) (+ W->bias) for one f32 residual row x: the matvec normalises and
 * quantizes x in every block (cuda.h hmoe_cuda_mmv_args.norm_w), no norm launch before it. */
static enum hmoe_status dense_normed(struct hmoe_gpu *g, const struct hmoe_gpu_mat *W, const float *x,
                                     const float *norm_w, float eps, float *y, struct hmoe_err *err) {
    struct hmoe_cuda_mmv_args m = {.type = W->type, .w = W->w, .row_bytes = W->row_bytes, .nrows = W->nrows,
                                   .ncols = W->ncols, .x = x, .x_stride_bytes = (size_t)W->ncols * 4, .ntok = 1,
                                   .y = y, .y_stride = W->nrows, .bias = W->bias, .norm_w = norm_w, .norm_eps = eps};
    return hmoe_cuda_mmv(&m, g->stream, err);
}

/* Experts of n tokens whose ids/wts are already routed, weights in `gate/up/down` (resident or a
 * staging copy), added into x. Matvec kernels for a few tokens with quantized experts, else
 * grouped by expert. */
static enum hmoe_status experts(struct hmoe_ctx *c, const struct hmoe_cuda_experts *gate,
                                const struct hmoe_cuda_experts *up, const struct hmoe_cuda_experts *down, int64_t n,
                                struct hmoe_err *err) {
    struct hmoe_gpu *g = c->gpu;
    const struct hmoe_model_config *cfg = &c->m->cfg;
    const int64_t d = cfg->n_embd, F = cfg->n_ff_exp;
    const int k = cfg->n_expert_used, E = cfg->n_expert;
    const bool quant = hmoe_type_info[gate->type].is_quantized && hmoe_type_info[down->type].is_quantized;
    if (quant && n <= SMALL_TOKENS) {
        const size_t qd = hmoe_cuda_q8_1_row_bytes(d), qf = hmoe_cuda_q8_1_row_bytes(F);
        TRY(hmoe_cuda_moe_gate_up(gate, up, g->ids, n * k, k, g->hq, qd, g->z, F, g->stream, err));
        TRY(hmoe_cuda_quantize_q8_1(g->z, F, n * k, F, g->zq, g->stream, err));
        return hmoe_cuda_moe_down(down, g->ids, g->wts, n, k, g->zq, qf, g->x, d, g->stream, err);
    }
    TRY(hmoe_cuda_moe_plan_build(g->ids, n, k, E, g->plan, g->stream, err));
    if (quant && q8_gemm_type(gate->type) && q8_gemm_type(down->type) && F % 32 == 0) {
        /* int8 path: q8_1 rows of h (the RMSNorm wrote them) -> gate/up -> q8_1 z (in the f16
         * z buffer: a q8_1 row of F takes 1.25 F bytes <= 2 F) -> down -> combine */
        const size_t qd = hmoe_cuda_q8_1_row_bytes(d), qf = hmoe_cuda_q8_1_row_bytes(F);
        struct hmoe_cuda_gemm_args gu = {.w = *gate, .w_up = up->w, .up_bias = up->bias, .xq = g->hq, .xq_stride_bytes = qd, .ntok = n,
                                         .plan = g->plan, .k = k, .x_gather = true, .y_q8_1 = g->z16,
                                         .y_q8_1_stride_bytes = qf};
        TRY(hmoe_cuda_gemm(&gu, g->stream, err));
        struct hmoe_cuda_gemm_args dn = {.w = *down, .xq = g->z16, .xq_stride_bytes = qf, .ntok = n, .plan = g->plan,
                                         .k = k, .x_gather = false, .y_f32 = g->ye, .y_stride = d};
        TRY(hmoe_cuda_gemm(&dn, g->stream, err));
        return hmoe_cuda_moe_combine(g->plan, g->ye, d, g->wts, n, k, E, d, g->x, d, g->stream, err);
    }
    struct hmoe_cuda_gemm_args gu = {.w = *gate, .w_up = up->w, .up_bias = up->bias, .x = g->h16, .x_stride = d, .ntok = n, .plan = g->plan,
                                     .k = k, .x_gather = true, .y_f16 = g->z16, .y_stride = F};
    TRY(hmoe_cuda_gemm(&gu, g->stream, err));
    struct hmoe_cuda_gemm_args dn = {.w = *down, .x = g->z16, .x_stride = F, .ntok = n, .plan = g->plan, .k = k,
                                     .x_gather = false, .y_f32 = g->ye, .y_stride = d};
    TRY(hmoe_cuda_gemm(&dn, g->stream, err));
    return hmoe_cuda_moe_combine(g->plan, g->ye, d, g->wts, n, k, E, d, g->x, d, g->stream, err);
}

static struct hmoe_cuda_rope rope_params(const struct hmoe_model_config *cfg) {
    struct hmoe_cuda_rope r = {.n_rot = cfg->n_rot, .freq_base = cfg->rope_freq_base,
                               .freq_scale = cfg->rope_freq_scale, .mscale = cfg->rope_attn_factor};
    if (cfg->rope_scaling == HMOE_ROPE_SCALING_YARN) {
        /* yarn_corr sets mscale to YaRN's 1 + 0.1 ln(1 / freq_scale); the attention factor
         * multiplies it, as in the CPU rope table (ops.c) */
        hmoe_cuda_rope_yarn_corr(&r, cfg->rope_n_ctx_orig, 32.0f, 1.0f);
        r.mscale *= cfg->rope_attn_factor;
    }
    return r;
}

/* MoE half of a fused single-token layer (resident quantized experts): RMSNorm + router + top-k
 * in one launch, then gate/up, quantize, down + residual (the next RMSNorm is the next layer's own
 * launch). Quantizing z in gate/up's last blocks and the next RMSNorm in down's last block measure
 * slower on the H200 (one counter serialises hundreds of blocks: 404 -> 361 tok/s), so those stay
 * separate launches. */
static enum hmoe_status moe_fused(struct hmoe_ctx *c, int il, struct hmoe_err *err) {
    struct hmoe_gpu *g = c->gpu;
    struct hmoe_gpu_layer *L = &g->L[il];
    const struct hmoe_model_config *cfg = &c->m->cfg;
    const int64_t d = cfg->n_embd, F = cfg->n_ff_exp;
    const int k = cfg->n_expert_used, E = cfg->n_expert;
    const size_t qd = hmoe_cuda_q8_1_row_bytes(d), qf = hmoe_cuda_q8_1_row_bytes(F);
    prof(g, P_ROUTER);
    const struct hmoe_cuda_router_norm_args ra = {.x = g->x, .norm_w = L->ffn_norm, .eps = cfg->rms_eps, .n = d,
                                                  .router = L->router, .router_bias = L->router_bias,
                                                  .gating = (int)c->m->w.layers[il].moe.gating, .n_expert = E, .k = k, .logits = g->rlog,
                                                  .ids = g->ids, .weights = g->wts, .counter = g->counter + GPU_CNT_ROUTER,
                                                  .out_f32 = g->hf, .out_q8_1 = g->hq};
    TRY(hmoe_cuda_moe_router_norm_topk(&ra, g->stream, err));
    prof(g, P_EXPERTS);
    TRY(hmoe_cuda_moe_gate_up(&L->gate, &L->up, g->ids, k, k, g->hq, qd, g->z, F, g->stream, err));
    TRY(hmoe_cuda_quantize_q8_1(g->z, F, k, F, g->zq, g->stream, err));
    return hmoe_cuda_moe_down(&L->down, g->ids, g->wts, 1, k, g->zq, qf, g->x, d, g->stream, err);
}

/* One layer for n tokens whose residual rows are in g->x. decode: the single-token step (graph). */
enum hmoe_status hmoe_gpu_layer_attn_moe(struct hmoe_ctx *c, int il, int64_t n, bool decode, struct hmoe_err *err) {
    struct hmoe_gpu *g = c->gpu;
    struct hmoe_gpu_layer *L = &g->L[il];
    const struct hmoe_model_config *cfg = &c->m->cfg;
    const int64_t d = cfg->n_embd, H = cfg->n_head, Hkv = cfg->n_head_kv, D = cfg->head_dim;
    const int64_t nq = H * D, nk = Hkv * D, nqkv = nq + 2 * nk, no = H * D;
    const int32_t *d_pos = g->step + 2;
    void *s = g->stream;

    /* fused single-token step (gpu_impl.h): fewer launches, same products */
    const bool fused = decode && n == 1 && g->fused_decode;

    /* Self-attention (§4.3). HMOE_GPU_NORM_IN_QKV: the fused step with quantized q|k|v normalises
     * inside their matvecs (no norm launch; each of their blocks makes the normed row itself). */
    const bool norm_in_qkv = fused && g->norm_in_qkv && hmoe_type_info[L->wq.type].is_quantized && hmoe_type_info[L->wk.type].is_quantized &&
                             hmoe_type_info[L->wv.type].is_quantized && d % 32 == 0 && d <= HMOE_CUDA_MMV_NORM_MAX_COLS;
    prof(g, P_NORM);
    if (!norm_in_qkv) {
        struct hmoe_cuda_rmsnorm_args n1 = {.x = g->x, .x_stride = d, .w = L->attn_norm, .eps = cfg->rms_eps, .nrows = n,
                                            .n = d, .out_f32 = g->hf, .out_f16 = n > SMALL_TOKENS ? g->h16 : NULL,
                                            .out_q8_1 = g->hq};
        TRY(hmoe_cuda_rmsnorm(&n1, s, err));
    }
    prof(g, P_QKV);
    const struct hmoe_gpu_act ah = {g->hf, d, g->hq, hmoe_cuda_q8_1_row_bytes(d), n > SMALL_TOKENS ? g->h16 : NULL, d};
#define QKV_PRODUCT(W_, Y_)                                                                                      \
    (norm_in_qkv ? dense_normed(g, (W_), g->x, L->attn_norm, cfg->rms_eps, (Y_), err)                           \
                 : dense(g, (W_), n, &ah, (Y_), nqkv, NULL, err))
    /* (the biases come with the projections: one fused product needs them for all its rows;
     * dense_normed writes one row, so its y_stride need not be nqkv) */
    const bool bias_rows = !L->wq.bias || (L->wk.bias && (L->qkv_fused != 3 || L->wv.bias));
    if (L->qkv_fused && bias_rows) {
        struct hmoe_gpu_mat w = L->wq;
        w.nrows = nq + nk + (L->qkv_fused == 3 ? nk : 0);
        TRY(QKV_PRODUCT(&w, g->qkv));
        if (L->qkv_fused == 2) TRY(QKV_PRODUCT(&L->wv, g->qkv + nq + nk));
    } else {
        TRY(QKV_PRODUCT(&L->wq, g->qkv));
        TRY(QKV_PRODUCT(&L->wk, g->qkv + nq));
        TRY(QKV_PRODUCT(&L->wv, g->qkv + nq + nk));
    }
#undef QKV_PRODUCT
    prof(g, P_ROPE);
    const struct hmoe_cuda_kv kv = hmoe_gpu_kv_view(g, L, c->cur_seq);
    struct hmoe_cuda_qkv_args qa = {.q = g->qkv, .k = g->qkv + nq, .v = g->qkv + nq + nk, .q_stride = nqkv,
                                    .kv_stride = nqkv, .ntok = n, .n_head = (int)H, .n_head_kv = (int)Hkv,
                                    .head_dim = (int)D, .q_norm = L->q_norm, .k_norm = L->k_norm, .eps = cfg->rms_eps,
                                    .pos = d_pos, .rope = rope_params(cfg), .kv = kv};
    const float scale = 1.0f / sqrtf((float)D);
    const bool wo_float = !hmoe_type_info[L->wo.type].is_quantized;
    const size_t qo = hmoe_cuda_q8_1_row_bytes(no);
    /* fused: QK-norm, RoPE and the KV store inside the attention launch */
    if (!fused && !c->batch) TRY(hmoe_cuda_qk_norm_rope_store(&qa, s, err));
    prof(g, P_ATTN);
    if (c->batch) {
        /* Rows of several sequences: QK-norm + RoPE + store and attention per segment over its
         * sequence's KV (the single-token kernel for a decode row, the prefill kernel for a
         * chunk), f32 out; then the forms the o projection reads, for all rows at once. */
        for (int i = 0; i < c->batch->n_seg; i++) {
            const struct hmoe_batch_seg *sg = &c->batch->seg[i];
            const int64_t r0 = sg->row0;
            struct hmoe_cuda_qkv_args sa = qa;
            sa.kv = hmoe_gpu_kv_view(g, L, sg->seq);
            sa.q = g->qkv + r0 * nqkv;
            sa.k = sa.q + nq;
            sa.v = sa.q + nq + nk;
            sa.ntok = sg->n;
            sa.pos = d_pos + r0;
            TRY(hmoe_cuda_qk_norm_rope_store(&sa, s, err));
            if (sg->n == 1)
                TRY(hmoe_cuda_attn_decode(sa.q, &sa.kv, sa.pos, (int)H, scale, 0, g->attn_scratch, g->o + r0 * no,
                                          NULL, s, err));
            else
                TRY(hmoe_cuda_attn_prefill(sa.q, nqkv, sg->n, sa.pos, &sa.kv, (int)H, scale, g->o + r0 * no, NULL, no,
                                           s, err));
        }
        if (n > SMALL_TOKENS) TRY(hmoe_cuda_convert_f16(g->o, n * no, g->o16, s, err));
        if (!wo_float) TRY(hmoe_cuda_quantize_q8_1(g->o, no, n, no, g->oq, s, err));
    } else if (fused) {
        TRY(hmoe_cuda_attn_decode_qkv(&qa, scale, 0, g->attn_scratch, g->counter + GPU_CNT_ATTN, wo_float ? g->o : NULL,
                                      wo_float ? NULL : g->oq, s, err));
    } else if (n == 1) {
        TRY(hmoe_cuda_attn_decode(g->qkv, &kv, d_pos, (int)H, scale, 0, g->attn_scratch, wo_float ? g->o : NULL,
                                  wo_float ? NULL : g->oq, s, err));
    } else {
        TRY(hmoe_cuda_attn_prefill(g->qkv, nqkv, n, d_pos, &kv, (int)H, scale, g->o,
                                   n > SMALL_TOKENS ? g->o16 : NULL, no, s, err));
        if (!wo_float) TRY(hmoe_cuda_quantize_q8_1(g->o, no, n, no, g->oq, s, err));
    }
    prof(g, P_WO);
    const struct hmoe_gpu_act ao = {g->o, no, g->oq, qo, n > SMALL_TOKENS ? g->o16 : NULL, no};
    TRY(dense(g, &L->wo, n, &ao, g->x, d, g->x, err));
    return hmoe_gpu_ffn(c, il, n, decode, err);
}

enum hmoe_status hmoe_gpu_ffn(struct hmoe_ctx *c, int il, int64_t n, bool decode, struct hmoe_err *err) {
    struct hmoe_gpu *g = c->gpu;
    struct hmoe_gpu_layer *L = &g->L[il];
    const struct hmoe_model_config *cfg = &c->m->cfg;
    const int64_t d = cfg->n_embd;
    const int k = cfg->n_expert_used, E = cfg->n_expert;
    const int gating = (int)c->m->w.layers[il].moe.gating;
    const bool f16 = n > SMALL_TOKENS || !hmoe_type_info[L->gate.type].is_quantized;
    const uint32_t *d_seq = (const uint32_t *)g->step;
    void *s = g->stream;
    prof(g, P_NORM);

    /* MoE feed-forward (§4.4): router and top-k on the device. */
    const bool fused = decode && n == 1 && g->fused_decode;
    if (fused) return moe_fused(c, il, err);
    struct hmoe_cuda_rmsnorm_args n2 = {.x = g->x, .x_stride = d, .w = L->ffn_norm, .eps = cfg->rms_eps, .nrows = n,
                                        .n = d, .out_f32 = g->hf, .out_f16 = f16 ? g->h16 : NULL, .out_q8_1 = g->hq};
    TRY(hmoe_cuda_rmsnorm(&n2, s, err));
    prof(g, P_ROUTER);
    if (n == 1) {
        TRY(hmoe_cuda_moe_router_topk(L->router, L->router_bias, gating, g->hf, d, E, k, g->rlog, g->ids, g->wts,
                                      g->counter, s, err));
    } else {
        if (n > SMALL_TOKENS) {
            /* many tokens: one FP32 GEMM (the matvec re-reads the router weights per token) */
            TRY(hmoe_cuda_gemm_f32_cublas(g->cu, L->router, E, d, g->hf, n, g->rlog, E, err));
        } else {
            struct hmoe_cuda_mmv_args r = {.type = HMOE_TYPE_F32, .w = L->router, .row_bytes = (size_t)d * 4, .nrows = E,
                                           .ncols = d, .x = g->hf, .x_stride_bytes = (size_t)d * 4, .ntok = n, .y = g->rlog,
                                           .y_stride = E};
            TRY(hmoe_cuda_mmv(&r, s, err));
        }
        TRY(hmoe_cuda_moe_topk(g->rlog, L->router_bias, gating, n, E, k, g->ids, g->wts, s, err));
    }
    prof(g, L->resident ? P_EXPERTS : P_HYBRID);
    if (L->resident) return experts(c, &L->gate, &L->up, &L->down, n, err);
    if (!decode) {
        /* Prefill of a layer whose experts live in RAM: streamed to the GPU or run by CPU threads. */
        if (!f16) TRY(hmoe_cuda_convert_f16(g->hf, n * d, g->h16, s, err));
        const struct hmoe_sched_moe_bufs b = {.ids = g->ids, .wts = g->wts, .hf = g->hf, .h16 = g->h16, .x = g->x,
                                              .plan = g->plan, .ids_mapped = g->ids_mapped, .z16 = g->z16, .ye = g->ye};
        return hmoe_sched_hybrid_prefill(g->hyb, il, (int)n, &b, s, err);
    }
    /* Decode step of a RAM layer: cached experts on the GPU, the rest on CPU threads meanwhile. */
    return hmoe_sched_hybrid_enqueue_decode(g->hyb, il, g->ids, g->wts, g->hf, g->hq, hmoe_cuda_q8_1_row_bytes(d), g->z,
                                            g->zq, g->gids, g->nmiss + il, d_seq, g->x, s, err);
}

/* Final RMSNorm and LM head for rows [t0, t0 + rows) of x into g->logits. */
static enum hmoe_status head(struct hmoe_ctx *c, int64_t t0, int64_t rows, struct hmoe_err *err) {
    struct hmoe_gpu *g = c->gpu;
    prof(g, P_HEAD);
    const int64_t d = c->m->cfg.n_embd, V = c->m->cfg.n_vocab;
    const size_t qd = hmoe_cuda_q8_1_row_bytes(d);
    struct hmoe_cuda_rmsnorm_args nf = {.x = g->x + t0 * d, .x_stride = d, .w = g->out_norm, .eps = c->m->cfg.rms_eps,
                                        .nrows = rows, .n = d, .out_f32 = g->hf,
                                        .out_f16 = rows > SMALL_TOKENS ? g->h16 : NULL, .out_q8_1 = g->hq};
    TRY(hmoe_cuda_rmsnorm(&nf, g->stream, err));
    const struct hmoe_gpu_act a = {g->hf, d, g->hq, qd, rows > SMALL_TOKENS ? g->h16 : NULL, d};
    /* never cuBLAS here: its f16 copy of the LM head would not fit the scratch */
    return dense(g, &g->out, rows, &a, g->logits, V, NULL, err);
}

/* --spec mtp (model_impl.h keep_hidden): every row's final normed hidden state to the host,
 * for the MTP block (which runs on the CPU). */
static enum hmoe_status keep_hidden(struct hmoe_ctx *c, int64_t n, struct hmoe_err *err) {
    struct hmoe_gpu *g = c->gpu;
    const int64_t d = c->m->cfg.n_embd;
    struct hmoe_cuda_rmsnorm_args nf = {.x = g->x, .x_stride = d, .w = g->out_norm, .eps = c->m->cfg.rms_eps,
                                        .nrows = n, .n = d, .out_f32 = g->hf, .out_q8_1 = g->hq};
    TRY(hmoe_cuda_rmsnorm(&nf, g->stream, err));
    TRY(hmoe_cuda_memcpy_async(c->keep_hidden, g->hf, (size_t)(n * d) * 4, g->stream, err));
    return hmoe_cuda_sync(g->cu, err);
}

/* Every operation of a single-token step, on g->stream (captured once into the graph). */
static enum hmoe_status decode_step(struct hmoe_ctx *c, struct hmoe_err *err) {
    struct hmoe_gpu *g = c->gpu;
    const struct hmoe_model_config *cfg = &c->m->cfg;
    TRY(hmoe_cuda_memcpy_async(g->x, g->emb_host, (size_t)cfg->n_embd * 4, g->stream, err));
    TRY(hmoe_cuda_memcpy_async(g->step, g->step_host, 3 * sizeof(int32_t), g->stream, err));
    enum hmoe_status st = HMOE_OK;
    for (int il = 0; il < cfg->n_layer && !st; il++) st = cfg->arch_entry->gpu->layer(c, il, 1, true, err);
    if (!st) st = head(c, 0, 1, err);
    if (st) return st;
    return hmoe_cuda_memcpy_async(g->logits_host, g->logits, (size_t)cfg->n_vocab * 4, g->stream, err);
}

static void embed_rows(struct hmoe_ctx *c, const int32_t *ids, int n) {
    const struct hmoe_mat *te = &c->m->w.token_embd;
    const hmoe_dequant_row_fn row = hmoe_type_info[te->type].dequant_ref;
    const int64_t d = c->m->cfg.n_embd;
    float *dst = c->gpu->emb_host;
#pragma omp parallel for if (n >= 16) num_threads(c->p.n_threads)
    for (int t = 0; t < n; t++) row((const uint8_t *)te->data + (size_t)ids[t] * te->row_bytes, dst + t * d, d);
}

static enum hmoe_status forward_decode(struct hmoe_ctx *c, int32_t id, int pos, enum hmoe_logits which, float *logits,
                                       struct hmoe_err *err) {
    struct hmoe_gpu *g = c->gpu;
    embed_rows(c, &id, 1);
    g->seq++;
    if (g->seq == 0) g->seq = 1; /* 0 means "never written" in the mailboxes */
    g->step_host[0] = (int32_t)g->seq;
    g->step_host[2] = pos;
    const bool eager = g->no_graph;
    struct hmoe_cuda_graph **graph = &g->graphs[c->cur_seq];
    if (!*graph && !eager) {
        TRY(hmoe_cuda_graph_capture_begin(g->cu, err));
        const bool prof_was = g->prof_on;
        g->prof_on = false; /* events of a capture cannot be timed */
        enum hmoe_status st = decode_step(c, err);
        g->prof_on = prof_was;
        struct hmoe_cuda_graph *gr = NULL;
        struct hmoe_err e2 = {0};
        enum hmoe_status st2 = hmoe_cuda_graph_capture_end(g->cu, &gr, st ? &e2 : err);
        if (st) {
            hmoe_cuda_graph_free(gr);
            return st;
        }
        if (st2) return st2;
        *graph = gr;
    }
    if (g->ev0) TRY(hmoe_cuda_event_record(g->ev0, g->stream, err));
    if (eager) TRY(decode_step(c, err));
    else TRY(hmoe_cuda_graph_launch(g->cu, *graph, err));
    if (eager) prof_collect(g, 1);
    if (g->ev1) TRY(hmoe_cuda_event_record(g->ev1, g->stream, err));
    enum hmoe_status st = g->hyb ? hmoe_sched_hybrid_cpu_step(g->hyb, g->seq, err) : HMOE_OK;
    enum hmoe_status st2 = hmoe_cuda_sync(g->cu, st ? NULL : err);
    if (st) return st;
    if (st2) return st2;
    g->n_steps++;
    if (g->ev1) {
        double ms = 0;
        if (hmoe_cuda_event_elapsed_ms(g->ev0, g->ev1, &ms, NULL) == HMOE_OK) {
            g->gpu_ms_sum += ms;
            g->n_timed++;
        }
    }
    if (g->hyb) TRY(hmoe_sched_hybrid_after_step(g->hyb, g->stream, err));
    if (which != HMOE_LOGITS_NONE) memcpy(logits, g->logits_host, (size_t)c->m->cfg.n_vocab * sizeof(float));
    if (c->keep_hidden) TRY(keep_hidden(c, 1, err)); /* x holds the step's final residual */
    return HMOE_OK;
}

enum hmoe_status hmoe_gpu_forward(struct hmoe_ctx *c, const int32_t *ids, int n, int pos0,
                                           enum hmoe_logits which, float *logits, struct hmoe_err *err) {
    struct hmoe_gpu *g = c->gpu;
    const struct hmoe_model_config *cfg = &c->m->cfg;
    const int64_t d = cfg->n_embd, V = cfg->n_vocab;
    if (n < 1 || n > g->n_ub) return HMOE_RAISE(err, HMOE_ERR_INTERNAL, "GPU forward: %d tokens in a %d-token buffer", n, g->n_ub);
    if (n == 1) return forward_decode(c, ids[0], pos0, which, logits, err);

    TRY(hmoe_cuda_sync(g->cu, err)); /* the staging buffers are free again */
    embed_rows(c, ids, n);
    for (int t = 0; t < n; t++) g->step_host[2 + t] = pos0 + t;
    TRY(hmoe_cuda_memcpy_async(g->x, g->emb_host, (size_t)n * (size_t)d * 4, g->stream, err));
    TRY(hmoe_cuda_memcpy_async(g->step, g->step_host, (size_t)(2 + n) * sizeof(int32_t), g->stream, err));
    for (int il = 0; il < cfg->n_layer; il++) TRY(cfg->arch_entry->gpu->layer(c, il, n, false, err));
    if (c->keep_hidden) TRY(keep_hidden(c, n, err));

    if (which == HMOE_LOGITS_NONE) {
        prof_collect(g, n);
        return HMOE_OK;
    }
    const int64_t t_first = which == HMOE_LOGITS_ALL ? 0 : n - 1;
    for (int64_t t0 = t_first; t0 < n; t0 += g->logit_rows) {
        const int64_t rows = HMOE_MIN((int64_t)g->logit_rows, n - t0);
        TRY(head(c, t0, rows, err));
        TRY(hmoe_cuda_memcpy_async(g->logits_host, g->logits, (size_t)(rows * V) * 4, g->stream, err));
        TRY(hmoe_cuda_sync(g->cu, err));
        memcpy(logits + (which == HMOE_LOGITS_ALL ? t0 * V : 0), g->logits_host, (size_t)(rows * V) * sizeof(float));
    }
    prof_collect(g, n);
    return HMOE_OK;
}

enum hmoe_status hmoe_gpu_forward_batch(struct hmoe_ctx *c, const int32_t *ids, int n, float *logits,
                                        struct hmoe_err *err) {
    struct hmoe_gpu *g = c->gpu;
    const struct hmoe_model_config *cfg = &c->m->cfg;
    const struct hmoe_batch_rows *br = c->batch;
    const int64_t d = cfg->n_embd, V = cfg->n_vocab;
    if (n < 1 || n > g->n_ub || !br)
        return HMOE_RAISE(err, HMOE_ERR_INTERNAL, "GPU batch: %d rows in a %d-row buffer", n, g->n_ub);
    TRY(hmoe_cuda_sync(g->cu, err)); /* the staging buffers are free again */
    embed_rows(c, ids, n);
    for (int i = 0; i < br->n_seg; i++)
        for (int t = 0; t < br->seg[i].n; t++) g->step_host[2 + br->seg[i].row0 + t] = br->seg[i].pos0 + t;
    TRY(hmoe_cuda_memcpy_async(g->x, g->emb_host, (size_t)n * (size_t)d * 4, g->stream, err));
    TRY(hmoe_cuda_memcpy_async(g->step, g->step_host, (size_t)(2 + n) * sizeof(int32_t), g->stream, err));
    /* eager, decode false: the multi-token paths (grouped experts; RAM layers by the prefill route,
     * each missed expert read once for all rows) */
    for (int il = 0; il < cfg->n_layer; il++) TRY(cfg->arch_entry->gpu->layer(c, il, n, false, err));
    /* The last row of each segment that wants logits, gathered to the front of x (row k from a
     * row >= k, in order: no source is overwritten before it is read). */
    int rows = 0;
    for (int i = 0; i < br->n_seg; i++) {
        if (!br->seg[i].logits) continue;
        const int64_t r = br->seg[i].row0 + br->seg[i].n - 1;
        if (r != rows)
            TRY(hmoe_cuda_memcpy_async(g->x + rows * d, g->x + r * d, (size_t)d * 4, g->stream, err));
        rows++;
    }
    for (int64_t t0 = 0; t0 < rows; t0 += g->logit_rows) {
        const int64_t m = HMOE_MIN((int64_t)g->logit_rows, rows - t0);
        TRY(head(c, t0, m, err));
        TRY(hmoe_cuda_memcpy_async(g->logits_host, g->logits, (size_t)(m * V) * 4, g->stream, err));
        TRY(hmoe_cuda_sync(g->cu, err));
        memcpy(logits + t0 * V, g->logits_host, (size_t)(m * V) * sizeof(float));
    }
    prof_collect(g, n);
    return HMOE_OK;
}

struct hmoe_cuda_kv hmoe_gpu_kv_view(const struct hmoe_gpu *g, const struct hmoe_gpu_layer *L, int seq) {
    struct hmoe_cuda_kv kv = L->kv;
    const size_t off = (size_t)seq * g->kv_seq_stride;
    if (kv.k) kv.k = (uint8_t *)kv.k + off;
    if (kv.v) kv.v = (uint8_t *)kv.v + off;
    return kv;
}

/* For the architectures' layer steps (gpu_impl.h). */
enum hmoe_status hmoe_gpu_dense(struct hmoe_gpu *g, const struct hmoe_gpu_mat *W, int64_t n, const struct hmoe_gpu_act *a,
                                float *y, int64_t y_stride, const float *add, struct hmoe_err *err) {
    return dense(g, W, n, a, y, y_stride, add, err);
}
struct hmoe_cuda_rope hmoe_gpu_rope_params(const struct hmoe_model_config *cfg) { return rope_params(cfg); }
