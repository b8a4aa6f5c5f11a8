/* gpu_init.c — set up the GPU backend of a context (gpu_impl.h): decide placement under the
 * VRAM budget (src/sched: which layers keep their experts in VRAM), upload the weights once
 * (attention matrices as stored, q|k|v back to back when their types match so one matvec
 * serves all three; norms and router F32; resident expert stacks as stored), allocate the KV
 * cache (K and V each in any GPU cache type, cuda.h layout) and every activation buffer for the
 * largest micro-batch, and write the VRAM report. Experts of layers kept in RAM belong to the hybrid scheduler
 * (src/sched/hybrid.c). Relies on cuda.h; qwen3moe.md §2 for the tensors.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/gpu_impl.h"

static void fused_decode_setup(struct hmoe_ctx *c);

/* The launchers take sched.h's gating / activation values as they are. */
_Static_assert(HMOE_CUDA_GATING_SOFTMAX == HMOE_MOE_SOFTMAX && HMOE_CUDA_GATING_TOPK_SOFTMAX == HMOE_MOE_TOPK_SOFTMAX &&
                   HMOE_CUDA_ACT_SWIGLU == HMOE_MOE_SWIGLU && HMOE_CUDA_ACT_SWIGLU_OAI == HMOE_MOE_SWIGLU_OAI,
               "cuda.h and sched.h gating / activation values differ");

#define GPU_SMALL_TOKENS 8  /* micro-batches up to this size use the matvec kernels */
#define GPU_LOGIT_ROWS 32   /* LM-head rows per chunk when every row's logits are wanted */
/* Loaded on first use and so not measurable before the plan: the code of the kernels (lazy
 * module loading), cuBLAS's kernels, the decode graph. The measured peak after a run (-v,
 * bench json vram_device_peak_mib) shows what they took. */
#define GPU_RUNTIME_RESERVE ((uint64_t)256 << 20)

static size_t align256(size_t n) { return (n + 255) / 256 * 256; }

static void gmat_set(struct hmoe_gpu_mat *g, const struct hmoe_mat *m, const void *dev) {
    g->type = m->type;
    g->w = dev;
    g->row_bytes = m->row_bytes;
    g->nrows = m->n_out;
    g->ncols = m->n_in;
    g->bias = NULL;
}

static size_t mat_bytes(const struct hmoe_mat *m) { return (size_t)m->n_out * m->row_bytes; }

/* Rules the GPU kernels need that the CPU path does not (checked before anything is uploaded). */
static enum hmoe_status check_model(const struct hmoe_model *m, const struct hmoe_ctx_params *p, struct hmoe_err *err) {
    const struct hmoe_model_config *cfg = &m->cfg;
    /* The router and expert kernels (cuda_moe.cu, cuda_mmq.cu, the hybrid scheduler) route by
     * softmax top-k (over all experts or over the chosen ones, router bias optional) to SwiGLU or
     * clamped-SwiGLU experts (biases optional) on the layer's own width. */
    const struct hmoe_arch_moe *am = &cfg->arch_entry->moe;
    const struct hmoe_arch_gpu *ag = cfg->arch_entry->gpu;
    if (!ag->own_experts && ((am->gating != HMOE_MOE_SOFTMAX && am->gating != HMOE_MOE_TOPK_SOFTMAX) ||
                             (am->act != HMOE_MOE_SWIGLU && am->act != HMOE_MOE_SWIGLU_OAI) || am->latent))
        return HMOE_RAISE(err, HMOE_ERR_UNSUPPORTED,
                          "the GPU expert kernels route by softmax top-k to gated SwiGLU experts without a latent "
                          "projection, which %s does not use; use --gpu off",
                          cfg->arch);
    if (!hmoe_cuda_kv_type_ok(p->type_k) || !hmoe_cuda_kv_type_ok(p->type_v))
        return HMOE_RAISE(err, HMOE_ERR_UNSUPPORTED,
                          "the GPU KV cache takes f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1 or iq4_nl for K and V "
                          "(asked: -ctk %s -ctv %s); use one of those or --gpu off",
                          hmoe_type_name(p->type_k), hmoe_type_name(p->type_v));
    if (cfg->head_dim_v != cfg->head_dim || (cfg->head_dim != 32 && cfg->head_dim != 64 && cfg->head_dim != 128 &&
                                             cfg->head_dim != 256) ||
        cfg->n_head / cfg->n_head_kv > 16)
        return HMOE_RAISE(err, HMOE_ERR_UNSUPPORTED,
                          "GPU attention needs head_dim in {32,64,128,256} equal for K and V and at most 16 query heads "
                          "per KV head (model: %d/%d, %d/%d); use --gpu off",
                          cfg->head_dim, cfg->head_dim_v, cfg->n_head, cfg->n_head_kv);
    /* (experts all in RAM with --cpu-moe never meet the GPU expert kernels) */
    if (cfg->n_embd % 64 || (cfg->n_ff_exp % 32 && !p->sched.cpu_moe) || cfg->n_expert > 256 || cfg->n_expert_used > HMOE_CUDA_MAILBOX_MAX_K)
        return HMOE_RAISE(err, HMOE_ERR_UNSUPPORTED,
                          "GPU path needs n_embd %% 64 == 0, expert FFN %% 32 == 0, at most 256 experts and 32 used "
                          "(model: %d, %d, %d, %d); use --gpu off",
                          cfg->n_embd, cfg->n_ff_exp, cfg->n_expert, cfg->n_expert_used);
    if (ag->check) {
        enum hmoe_status st = ag->check(m, err);
        if (st) return st;
    }
    const struct hmoe_mat *mats[2] = {&m->w.output, NULL};
    if (!hmoe_cuda_type_supported(mats[0]->type))
        return HMOE_RAISE(err, HMOE_ERR_UNSUPPORTED, "tensor %s: type %s has no GPU kernels; use --gpu off", mats[0]->name,
                          hmoe_type_name(mats[0]->type));
    for (int il = 0; il < cfg->n_layer; il++) {
        const struct hmoe_layer_weights *L = &m->w.layers[il];
        const struct hmoe_mat *all[] = {&L->attn_q, &L->attn_k, &L->attn_v, &L->attn_output,
                                        &L->moe.gate, &L->moe.up, &L->moe.down};
        for (size_t i = 0; i < HMOE_ARRAY_LEN(all); i++)
            if (!hmoe_cuda_type_supported(all[i]->type))
                return HMOE_RAISE(err, HMOE_ERR_UNSUPPORTED, "tensor %s: type %s has no GPU kernels; use --gpu off",
                                  all[i]->name, hmoe_type_name(all[i]->type));
        if (!L->attn_q_bias != !L->attn_k_bias || !L->attn_q_bias != !L->attn_v_bias)
            return HMOE_RAISE(err, HMOE_ERR_UNSUPPORTED,
                              "layer %d has a bias on only some of Q, K and V, which the GPU path does not apply; use "
                              "--gpu off",
                              il);
        if (!L->moe.gate_bias != !L->moe.up_bias)
            return HMOE_RAISE(err, HMOE_ERR_UNSUPPORTED,
                              "layer %d has a bias on only one of the gate and up experts; use --gpu off", il);
        if (L->moe.router.type != HMOE_TYPE_F32)
            return HMOE_RAISE(err, HMOE_ERR_UNSUPPORTED, "tensor %s: the GPU router needs F32 (file has %s); use --gpu off",
                              L->moe.router.name, hmoe_type_name(L->moe.router.type));
        if (ag->own_experts) continue; /* its check covers the experts */
        if (L->moe.gate.type != L->moe.up.type || L->moe.gate.row_bytes != L->moe.up.row_bytes ||
            L->moe.gate.mat_bytes != L->moe.up.mat_bytes || L->moe.gate.mat_bytes % 16 || L->moe.down.mat_bytes % 16)
            return HMOE_RAISE(err, HMOE_ERR_UNSUPPORTED,
                              "layer %d: the GPU expert kernels need gate and up in one type (%s vs %s) and 16-byte "
                              "aligned experts; use --gpu off",
                              il, hmoe_type_name(L->moe.gate.type), hmoe_type_name(L->moe.up.type));
    }
    return HMOE_OK;
}

/* The optional F32 vectors of a layer that upload_layer places after the norms and the router:
 * q|k|v bias (one vector, the layout of g->qkv rows), o bias, sink logits, router bias, and the
 * expert biases (kept in VRAM for every layer: the GPU computes the cached experts of RAM layers
 * too). NULL sources take no space. */
struct layer_vec {
    const float **dst;
    const float *src[3]; /* pieces placed back to back */
    size_t n[3];
};
static int layer_bias_vecs(const struct hmoe_model *m, int il, struct hmoe_gpu_layer *T, struct layer_vec *v) {
    const struct hmoe_layer_weights *W = &m->w.layers[il];
    const struct hmoe_model_config *c = &m->cfg;
    const size_t d = (size_t)c->n_embd, E = (size_t)c->n_expert, nq = (size_t)c->n_head * c->head_dim,
                 nk = (size_t)c->n_head_kv * c->head_dim, F = (size_t)W->moe.gate.n_out;
    int n = 0;
    v[n++] = (struct layer_vec){&T->qkv_bias, {W->attn_q_bias, W->attn_k_bias, W->attn_v_bias}, {nq, nk, nk}};
    v[n++] = (struct layer_vec){&T->o_bias, {W->attn_output_bias}, {d}};
    v[n++] = (struct layer_vec){&T->sinks, {W->attn_sinks}, {(size_t)c->n_head}};
    v[n++] = (struct layer_vec){&T->router_bias, {W->moe.router_bias}, {E}};
    v[n++] = (struct layer_vec){&T->gate_bias, {W->moe.gate_bias}, {E * F}};
    v[n++] = (struct layer_vec){&T->up_bias, {W->moe.up_bias}, {E * F}};
    v[n++] = (struct layer_vec){&T->down_bias, {W->moe.down_bias}, {E * d}};
    return n;
}
#define LAYER_BIAS_VECS 7

static size_t layer_vec_bytes(const struct layer_vec *v) {
    size_t n = 0;
    for (int i = 0; i < 3 && v->src[i]; i++) n += v->n[i];
    return align256(n * 4);
}

/* Bytes of the attention block of one layer as laid out in attn_buf (with the F32 vectors). */
static size_t layer_attn_bytes(const struct hmoe_model *m, int il) {
    const struct hmoe_layer_weights *L = &m->w.layers[il];
    const size_t d = (size_t)m->cfg.n_embd, D = (size_t)m->cfg.head_dim, E = (size_t)m->cfg.n_expert;
    struct layer_vec bv[LAYER_BIAS_VECS];
    struct hmoe_gpu_layer sizes_only; /* layer_bias_vecs names its fields; nothing is written */
    size_t bias = 0;
    for (int i = 0, n = layer_bias_vecs(m, il, &sizes_only, bv); i < n; i++) bias += layer_vec_bytes(&bv[i]);
    return align256(mat_bytes(&L->attn_q) + mat_bytes(&L->attn_k) + mat_bytes(&L->attn_v) + 32) +
           align256(mat_bytes(&L->attn_output)) + 2 * align256(d * 4) + 2 * align256(D * 4) + align256(E * d * 4) + bias;
}

static uint64_t layer_expert_bytes(const struct hmoe_layer_weights *L) {
    return (uint64_t)L->moe.gate.mat_bytes + L->moe.up.mat_bytes + L->moe.down.mat_bytes;
}

static enum hmoe_status upload(struct hmoe_gpu *g, void *dst, const void *src, size_t bytes, struct hmoe_err *err) {
    if (!src || !bytes) return HMOE_OK; /* recurrent (DeltaNet) layers have no q/k/v/o */
    return hmoe_cuda_upload(g->cu, dst, src, bytes, err);
}

static enum hmoe_status upload_layer(struct hmoe_ctx *c, int il, struct hmoe_err *err) {
    struct hmoe_gpu *g = c->gpu;
    const struct hmoe_model *m = c->m;
    const struct hmoe_layer_weights *W = &m->w.layers[il];
    struct hmoe_gpu_layer *L = &g->L[il];
    const size_t d = (size_t)m->cfg.n_embd, D = (size_t)m->cfg.head_dim, E = (size_t)m->cfg.n_expert;
    enum hmoe_status st = hmoe_cuda_buf_alloc(g->cu, layer_attn_bytes(m, il), &L->attn_buf, err);
    if (st) return st;
    uint8_t *p = L->attn_buf.ptr;
    const size_t bq = mat_bytes(&W->attn_q), bk = mat_bytes(&W->attn_k), bv = mat_bytes(&W->attn_v);
    /* q, k, v back to back (16-byte aligned starts): when types (and so row sizes) agree and no
     * padding was needed, the rows of all three are one matrix and one matvec serves them. */
    const size_t ok = (bq + 15) / 16 * 16, ov = (ok + bk + 15) / 16 * 16;
    gmat_set(&L->wq, &W->attn_q, p);
    gmat_set(&L->wk, &W->attn_k, p + ok);
    gmat_set(&L->wv, &W->attn_v, p + ov);
    const bool qk = W->attn_q.type == W->attn_k.type && W->attn_q.row_bytes == W->attn_k.row_bytes && ok == bq;
    const bool qkv = qk && W->attn_v.type == W->attn_q.type && W->attn_v.row_bytes == W->attn_q.row_bytes &&
                     ov == bq + bk;
    L->qkv_fused = qkv ? 3 : qk ? 2 : 0;
    if ((st = upload(g, (void *)L->wq.w, W->attn_q.data, bq, err)) || (st = upload(g, (void *)L->wk.w, W->attn_k.data, bk, err)) ||
        (st = upload(g, (void *)L->wv.w, W->attn_v.data, bv, err)))
        return st;
    p += align256(bq + bk + bv + 32);
    gmat_set(&L->wo, &W->attn_output, p);
    if ((st = upload(g, p, W->attn_output.data, mat_bytes(&W->attn_output), err))) return st;
    p += align256(mat_bytes(&W->attn_output));
    const struct {
        const float **dst;
        const float *src;
        size_t n;
    } vecs[] = {{&L->attn_norm, W->attn_norm, d}, {&L->ffn_norm, W->ffn_norm, d}, {&L->q_norm, W->attn_q_norm, D},
                {&L->k_norm, W->attn_k_norm, D}, {&L->router, (const float *)W->moe.router.data, E * d}};
    for (size_t i = 0; i < HMOE_ARRAY_LEN(vecs); i++) {
        *vecs[i].dst = vecs[i].src ? (const float *)p : NULL;
        if ((st = upload(g, p, vecs[i].src, vecs[i].n * 4, err))) return st;
        p += align256(vecs[i].n * 4);
    }
    struct layer_vec bvec[LAYER_BIAS_VECS];
    for (int i = 0, n = layer_bias_vecs(m, il, L, bvec); i < n; i++) {
        const struct layer_vec *v = &bvec[i];
        *v->dst = v->src[0] ? (const float *)p : NULL;
        size_t off = 0;
        for (int j = 0; j < 3 && v->src[j]; j++) {
            if ((st = upload(g, p + off * 4, v->src[j], v->n[j] * 4, err))) return st;
            off += v->n[j];
        }
        p += layer_vec_bytes(v);
    }
    /* The projections add their biases themselves (one launch less each). The q|k|v vector
     * holds its pieces back to back up to the first one missing. */
    const size_t nq = (size_t)m->cfg.n_head * D, nk = (size_t)m->cfg.n_head_kv * D;
    L->wq.bias = W->attn_q_bias ? L->qkv_bias : NULL;
    L->wk.bias = L->wq.bias && W->attn_k_bias ? L->qkv_bias + nq : NULL;
    L->wv.bias = L->wk.bias && W->attn_v_bias ? L->qkv_bias + nq + nk : NULL;
    L->wo.bias = L->o_bias;
    if ((size_t)(p - (uint8_t *)L->attn_buf.ptr) > L->attn_buf.bytes)
        return HMOE_RAISE(err, HMOE_ERR_INTERNAL, "layer %d: attention buffer layout overflow", il);

    /* KV cache: K and V of n_ctx positions, head-major (cuda.h), for each of the n_seq sequences
     * back to back (sequence s: K and V at s * kv_seq_stride, hmoe_gpu_kv_view); none for
     * recurrent layers. L->kv is sequence 0's. */
    const size_t kbytes = hmoe_cuda_kv_bytes(c->p.type_k, c->p.n_ctx, m->cfg.n_head_kv, m->cfg.head_dim);
    const size_t vbytes = hmoe_cuda_kv_bytes(c->p.type_v, c->p.n_ctx, m->cfg.n_head_kv, m->cfg.head_dim);
    g->kv_seq_stride = align256(kbytes) + align256(vbytes);
    if (!W->recurrent) {
        if ((st = hmoe_cuda_buf_alloc(g->cu, (size_t)c->p.n_seq * g->kv_seq_stride, &L->kv_buf, err))) return st;
        L->kv = (struct hmoe_cuda_kv){.type_k = c->p.type_k, .type_v = c->p.type_v, .k = L->kv_buf.ptr,
                                      .v = (uint8_t *)L->kv_buf.ptr + align256(kbytes),
                                      .n_ctx = c->p.n_ctx, .n_head_kv = m->cfg.n_head_kv, .head_dim = m->cfg.head_dim,
                                      .window = W->attn_window, .sinks = L->sinks};
        if ((st = hmoe_cuda_memset(g->cu, L->kv_buf.ptr, 0, L->kv_buf.bytes, err))) return st;
    }

    /* Expert stacks of resident layers, as stored. */
    const struct hmoe_moe_weights *X = &W->moe;
    L->gate = (struct hmoe_cuda_experts){.type = X->gate.type, .row_bytes = X->gate.row_bytes,
                                         .expert_stride_bytes = X->gate.mat_bytes, .nrows = X->gate.n_out,
                                         .ncols = X->gate.n_in, .n_expert = X->gate.n_mat, .bias = L->gate_bias,
                                         .act = (int)X->act};
    L->up = L->gate;
    L->up.type = X->up.type;
    L->up.bias = L->up_bias;
    L->down = (struct hmoe_cuda_experts){.type = X->down.type, .row_bytes = X->down.row_bytes,
                                         .expert_stride_bytes = X->down.mat_bytes, .nrows = X->down.n_out,
                                         .ncols = X->down.n_in, .n_expert = X->down.n_mat, .bias = L->down_bias};
    if (!L->resident) return HMOE_OK;
    const size_t gb = X->gate.mat_bytes * (size_t)X->gate.n_mat, ub = X->up.mat_bytes * (size_t)X->up.n_mat,
                 db = X->down.mat_bytes * (size_t)X->down.n_mat;
    if ((st = hmoe_cuda_buf_alloc(g->cu, align256(gb) + align256(ub) + align256(db), &L->exp_buf, err))) return st;
    uint8_t *e = L->exp_buf.ptr;
    L->gate.w = e;
    L->up.w = e + align256(gb);
    L->down.w = e + align256(gb) + align256(ub);
    if ((st = upload(g, (void *)L->gate.w, X->gate.data, gb, err)) || (st = upload(g, (void *)L->up.w, X->up.data, ub, err)) ||
        (st = upload(g, (void *)L->down.w, X->down.data, db, err)))
        return st;
    return HMOE_OK;
}

/* Activation buffers: one allocation carved into the pieces of gpu_impl.h (base 0: sizes only). */
static uintptr_t carve(uintptr_t *p, size_t bytes) {
    uintptr_t r = *p;
    *p += align256(bytes);
    return r;
}

static size_t act_layout(struct hmoe_ctx *c, uint8_t *base) {
    struct hmoe_gpu *g = c->gpu;
    const struct hmoe_model_config *cfg = &c->m->cfg;
    const size_t ub = (size_t)g->n_ub, d = (size_t)cfg->n_embd, H = (size_t)cfg->n_head, Hkv = (size_t)cfg->n_head_kv,
                 D = (size_t)cfg->head_dim, E = (size_t)cfg->n_expert, k = (size_t)cfg->n_expert_used,
                 F = (size_t)cfg->n_ff_exp, V = (size_t)cfg->n_vocab, L = (size_t)cfg->n_layer;
    const size_t nqkv = (H + 2 * Hkv) * D, no = H * D, sm = (size_t)HMOE_MIN(g->n_ub, GPU_SMALL_TOKENS);
    const size_t big = ub > GPU_SMALL_TOKENS ? ub : 0; /* rows of the grouped-GEMM buffers */
    uintptr_t p = (uintptr_t)base;
#define PIECE(field, type, bytes) g->field = (type)carve(&p, (bytes))
    PIECE(x, float *, ub * d * 4);
    PIECE(hf, float *, ub * d * 4);
    PIECE(h16, uint16_t *, ub * d * 2);
    PIECE(hq, void *, ub * hmoe_cuda_q8_1_row_bytes((int64_t)d));
    PIECE(qkv, float *, ub * nqkv * 4);
    PIECE(o, float *, ub * no * 4);
    PIECE(o16, uint16_t *, ub * no * 2);
    PIECE(oq, void *, ub * hmoe_cuda_q8_1_row_bytes((int64_t)no));
    PIECE(rlog, float *, ub * E * 4);
    PIECE(ids, int32_t *, ub * k * 4);
    PIECE(wts, float *, ub * k * 4);
    PIECE(gids, int32_t *, HMOE_CUDA_MAILBOX_MAX_K * 4);
    PIECE(ids_mapped, int32_t *, ub * k * 4);
    PIECE(nmiss, int32_t *, L * 4);
    PIECE(plan, void *, hmoe_cuda_moe_plan_bytes((int64_t)ub, (int)k, (int)E));
    PIECE(z16, uint16_t *, HMOE_MAX(big, sm) * k * F * 2);
    PIECE(z, float *, sm * k * F * 4);
    PIECE(zq, void *, sm * k * hmoe_cuda_q8_1_row_bytes((int64_t)F));
    PIECE(ye, float *, HMOE_MAX(big, sm) * k * d * 4);
    PIECE(attn_scratch, void *, hmoe_cuda_attn_decode_scratch_bytes((int)H, (int)D, 64));
    PIECE(logits, float *, (size_t)g->logit_rows * V * 4);
    PIECE(step, int32_t *, (2 + ub) * 4);
    PIECE(counter, unsigned int *, GPU_COUNTERS * 4);
    PIECE(cublas_scratch, uint16_t *, g->cublas_scratch_halves * 2);
#undef PIECE
    return (size_t)(p - (uintptr_t)base);
}

static size_t max_dense_halves(const struct hmoe_model *m) {
    size_t mx = 0;
    for (int il = 0; il < m->cfg.n_layer; il++) {
        const struct hmoe_layer_weights *L = &m->w.layers[il];
        const struct hmoe_mat *all[] = {&L->attn_q, &L->attn_k, &L->attn_v, &L->attn_output};
        for (size_t i = 0; i < HMOE_ARRAY_LEN(all); i++)
            mx = HMOE_MAX(mx, (size_t)all[i]->n_out * (size_t)all[i]->n_in);
        /* q|k|v fused into one product */
        mx = HMOE_MAX(mx, (size_t)(L->attn_q.n_out + L->attn_k.n_out + L->attn_v.n_out) * (size_t)L->attn_q.n_in);
        /* recurrent mixers: DeltaNet q|k|v|z|alpha|beta as one product, ssm_out; shared gate|up, down */
        mx = HMOE_MAX(mx, (size_t)(L->gdn.qkv.n_out + L->gdn.gate.n_out + L->gdn.alpha.n_out + L->gdn.beta.n_out) *
                              (size_t)L->gdn.qkv.n_in);
        mx = HMOE_MAX(mx, (size_t)L->gdn.out.n_out * (size_t)L->gdn.out.n_in);
        mx = HMOE_MAX(mx, (size_t)(L->shexp.gate.n_out + L->shexp.up.n_out) * (size_t)L->shexp.gate.n_in);
        mx = HMOE_MAX(mx, (size_t)L->shexp.down.n_out * (size_t)L->shexp.down.n_in);
    }
    return mx;
}

void hmoe_gpu_free(struct hmoe_gpu *g, int n_layer) {
    if (!g) return;
    if (g->cu) hmoe_cuda_sync(g->cu, NULL);
    hmoe_sched_hybrid_free(g->hyb);
    if (g->arch_state && g->arch_free) g->arch_free(g, n_layer);
    for (int i = 0; i < HMOE_MAX_SEQ; i++) hmoe_cuda_graph_free(g->graphs[i]);
    for (int il = 0; g->L && il < n_layer; il++) {
        hmoe_cuda_buf_free(g->cu, &g->L[il].attn_buf);
        hmoe_cuda_buf_free(g->cu, &g->L[il].exp_buf);
        hmoe_cuda_buf_free(g->cu, &g->L[il].kv_buf);
    }
    free(g->L);
    free(g->moe);
    hmoe_cuda_buf_free(g->cu, &g->head_buf);
    hmoe_cuda_buf_free(g->cu, &g->act_buf);
    hmoe_cuda_host_free(g->emb_host);
    hmoe_cuda_host_free(g->step_host);
    hmoe_cuda_host_free(g->logits_host);
    hmoe_cuda_event_destroy(g->ev0);
    hmoe_cuda_event_destroy(g->ev1);
    for (int i = 0; g->prof_ev && i < HMOE_GPU_PROF_EVENTS; i++) hmoe_cuda_event_destroy(g->prof_ev[i]);
    free(g->prof_ev);
    free(g->prof_cls);
    hmoe_cuda_ctx_free(g->cu);
    free(g->report);
    free(g);
}

enum hmoe_status hmoe_gpu_init(struct hmoe_ctx *c, struct hmoe_err *err) {
    const struct hmoe_model *m = c->m;
    const struct hmoe_model_config *cfg = &m->cfg;
    enum hmoe_status st = check_model(m, &c->p, err);
    if (st) return st;
    struct hmoe_gpu *g = calloc(1, sizeof *g);
    if (!g) return HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory");
    c->gpu = g;
    g->L = calloc((size_t)cfg->n_layer, sizeof *g->L);
    if (!g->L) return HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory");
    if ((st = hmoe_cuda_ctx_init(&g->cu, c->p.gpu_device, err))) return st;
    g->stream = hmoe_cuda_ctx_stream(g->cu);
    g->n_ub = c->p.n_ubatch;
    g->logit_rows = HMOE_MIN(g->n_ub, GPU_LOGIT_ROWS);
    g->no_graph = getenv("HMOE_NO_GRAPH") != NULL; /* debugging: every kernel launched from the host */
    /* opt-in: measured on the H200 tg128 -3 % for Qwen3-30B-A3B, +1 % for gpt-oss-20b (README) */
    g->norm_in_qkv = getenv("HMOE_GPU_NORM_IN_QKV") && strcmp(getenv("HMOE_GPU_NORM_IN_QKV"), "0") != 0;
    g->cublas_scratch_halves = g->n_ub > GPU_SMALL_TOKENS ? max_dense_halves(m) : 0;

    /* The budget is what the process takes on the device as nvidia-smi counts it: the context and
     * the cuBLAS handle are measured here, what is loaded on first use (kernel code, graphs,
     * cuBLAS kernels) is a reserve, and every allocation is counted in whole 2 MiB granules. */
    const uint64_t MiB = (uint64_t)1 << 20;
    if (g->n_ub > GPU_SMALL_TOKENS && (st = hmoe_cuda_ctx_cublas_init(g->cu, err))) return st;
    struct hmoe_cuda_device_mem dm;
    hmoe_cuda_ctx_device_mem(g->cu, &dm);
    struct hmoe_cuda_device_info di;
    if ((st = hmoe_cuda_device_info(c->p.gpu_device, &di, err))) return st;
    g->bytes_context = dm.context;
    g->context_measured = dm.context_measured;
    g->bytes_cublas = dm.cublas ? hmoe_cuda_alloc_cost(dm.cublas) : 0;
    g->bytes_reserve = GPU_RUNTIME_RESERVE;
    /* The card's share for this process: what it holds now plus what is free. The default leaves
     * max(1 GiB, 4 % of the card) for the driver, the display and other programs; an explicit
     * budget above the share is planned at the share (the driver would page or fail beyond it). */
    const uint64_t share = dm.used_now + di.free_bytes;
    const uint64_t headroom = HMOE_MAX(1024 * MiB, di.total_bytes / 25);
    const uint64_t dflt = share > headroom + 2048 * MiB ? share - headroom : share / 2;
    g->budget_bytes = c->p.sched.vram_budget_mib > 0 ? (uint64_t)c->p.sched.vram_budget_mib * MiB : dflt;
    if (c->p.sched.vram_budget_mib > 0 && g->budget_bytes > share - HMOE_MIN(share / 8, 256 * MiB)) {
        const uint64_t cap = share - HMOE_MIN(share / 8, 256 * MiB);
        HMOE_WARN("--vram-budget %lld MiB is more than GPU %d can give this process (%.0f MiB free + %.0f MiB held): "
                  "planning for %.0f MiB",
                  (long long)c->p.sched.vram_budget_mib, c->p.gpu_device, (double)di.free_bytes / MiB,
                  (double)dm.used_now / MiB, (double)cap / MiB);
        g->budget_bytes = cap;
    }

    /* What must live on the GPU whatever happens to the experts (each buffer in whole granules). */
    uint64_t attn = 0;
    for (int il = 0; il < cfg->n_layer; il++) attn += hmoe_cuda_alloc_cost(layer_attn_bytes(m, il));
    const uint64_t head = align256((size_t)cfg->n_embd * 4) + align256(mat_bytes(&m->w.output));
    int n_kv_layers = 0;
    for (int il = 0; il < cfg->n_layer; il++) n_kv_layers += !m->w.layers[il].recurrent;
    const uint64_t kv = (uint64_t)n_kv_layers *
                        hmoe_cuda_alloc_cost((size_t)c->p.n_seq *
                                             (align256(hmoe_cuda_kv_bytes(c->p.type_k, c->p.n_ctx, cfg->n_head_kv,
                                                                          cfg->head_dim)) +
                                              align256(hmoe_cuda_kv_bytes(c->p.type_v, c->p.n_ctx, cfg->n_head_kv,
                                                                          cfg->head_dim))));
    const uint64_t arch_vram = cfg->arch_entry->gpu->vram_bytes ? cfg->arch_entry->gpu->vram_bytes(c) : 0;
    const uint64_t act = hmoe_cuda_alloc_cost(act_layout(c, NULL)) +
                         (arch_vram ? hmoe_cuda_alloc_cost(arch_vram) + 4 * HMOE_CUDA_ALLOC_GRANULE : 0); /* mixers, state */
    /* one expert buffer per layer (resident stack or cache slots) and the scheduler's three shared
     * buffers, each rounded up to a granule */
    g->bytes_pad = (uint64_t)(cfg->n_layer + 3) * HMOE_CUDA_ALLOC_GRANULE;
    const uint64_t overhead = g->bytes_context + g->bytes_cublas + g->bytes_reserve + g->bytes_pad;
    g->bytes_attn = attn;
    g->bytes_head = head;
    g->bytes_kv = kv;
    g->act_bytes_total = act;
    if (overhead + attn + hmoe_cuda_alloc_cost(head) + kv + act > g->budget_bytes)
        return HMOE_RAISE(err, HMOE_ERR_RANGE,
                          "VRAM budget %.0f MiB is below the %.0f MiB the GPU needs without any expert: CUDA context "
                          "%.0f%s, cuBLAS %.0f, reserve %.0f, attention + norms + router %.0f, LM head %.0f, KV cache "
                          "%.0f (K %s, V %s, -c %d), buffers %.0f MiB; raise --vram-budget, lower -c/--ctx-size or -ub, or "
                          "use --gpu off",
                          (double)g->budget_bytes / MiB, (double)(overhead + attn + hmoe_cuda_alloc_cost(head) + kv + act) / MiB,
                          (double)g->bytes_context / MiB, g->context_measured ? "" : " (estimated)",
                          (double)g->bytes_cublas / MiB, (double)g->bytes_reserve / MiB, (double)attn / MiB,
                          (double)hmoe_cuda_alloc_cost(head) / MiB, (double)kv / MiB, hmoe_type_name(c->p.type_k),
                          hmoe_type_name(c->p.type_v), c->p.n_ctx, (double)act / MiB);

    uint64_t *eb = malloc((size_t)cfg->n_layer * sizeof *eb);
    g->moe = malloc((size_t)cfg->n_layer * sizeof *g->moe);
    if (!eb || !g->moe) {
        free(eb);
        return HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory");
    }
    for (int il = 0; il < cfg->n_layer; il++) {
        eb[il] = layer_expert_bytes(&m->w.layers[il]);
        g->moe[il] = m->w.layers[il].moe;
    }
    struct hmoe_sched_override *ot = NULL;
    int n_ot = c->p.sched.n_override_tensor;
    if (n_ot > 0) {
        ot = calloc((size_t)n_ot, sizeof *ot);
        if (!ot) {
            free(eb);
            return HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory");
        }
        for (int i = 0; i < n_ot && !st; i++) st = hmoe_sched_override_parse(c->p.sched.override_tensor[i], &ot[i], err);
    }
    struct hmoe_sched_plan plan = {0};
    /* A large ubatch at a small budget may leave no room for two 32-expert staging chunks: rather than
     * giving up streaming (prefill of RAM layers on CPU threads, ~20x slower on the H200), halve the
     * chunk down to 4 experts (more, smaller copy/compute steps of the same bytes). */
    int chunk = c->p.sched.stream_chunk_experts > 0 ? c->p.sched.stream_chunk_experts : HMOE_SCHED_STREAM_CHUNK_EXPERTS;
    struct hmoe_sched_place_req req = {0};
    /* An entry that streams whole RAM layers wants two staging buffers (the next layer's stacks
     * copy while this one computes), or one where the budget leaves no room for two. */
    int stage_bufs = 2;
    while (!st) {
        /* (a model without experts places zero bytes per layer) */
        req = (struct hmoe_sched_place_req){.n_layer = cfg->n_layer, .n_expert = HMOE_MAX(cfg->n_expert, 1), .expert_bytes = eb,
                                           .fixed_bytes = overhead + attn + hmoe_cuda_alloc_cost(head) + kv + act,
                                           .stream_bytes = cfg->n_ff_exp % 32 ? 0 /* not GEMM-able: prefill on CPU threads */
                                                           : hmoe_sched_hybrid_stream_bytes(g->moe, cfg->n_layer, g->n_ub, chunk),
                                           .budget_bytes = g->budget_bytes, .cpu_moe = c->p.sched.cpu_moe,
                                           .n_cpu_moe = c->p.sched.n_cpu_moe, .ot = ot, .n_ot = n_ot,
                                           .whole_layers = cfg->arch_entry->gpu->own_experts};
        if (req.whole_layers) { /* its prefill streams one RAM layer's whole stacks at a time */
            uint64_t widest = 0;
            for (int il = 0; il < cfg->n_layer; il++) widest = HMOE_MAX(widest, eb[il]);
            req.stream_bytes = g->n_ub > 8 && widest ? (widest * (uint64_t)cfg->n_expert + 3 * 256) * stage_bufs : 0;
        }
        st = hmoe_sched_place(&req, &plan, err);
        if (st || plan.stream || req.stream_bytes == 0 || (chunk <= 4 && !req.whole_layers) ||
            (req.whole_layers && stage_bufs == 1))
            break;
        bool ram = false;
        for (int il = 0; il < cfg->n_layer; il++) ram |= plan.where[il] == HMOE_PLACE_RAM;
        if (!ram) break;
        hmoe_sched_plan_free(&plan);
        plan = (struct hmoe_sched_plan){0};
        if (req.whole_layers) stage_bufs = 1;
        else chunk /= 2;
    }
    bool any_ram = false;
    for (int il = 0; !st && il < cfg->n_layer; il++) {
        g->L[il].resident = plan.where[il] == HMOE_PLACE_GPU;
        any_ram |= !g->L[il].resident && eb[il] > 0; /* layers without experts have nothing in RAM */
        if (g->L[il].resident) g->bytes_experts += eb[il] * (uint64_t)cfg->n_expert;
        if (!g->L[il].resident) g->cache_slots = plan.n_slots[il];
    }
    /* What the KV cache at -c costs the expert cache: the same plan without it. */
    if (!st && any_ram && !plan.explicit_placement) {
        struct hmoe_sched_place_req no_kv = req;
        no_kv.fixed_bytes -= kv;
        struct hmoe_sched_plan p2 = {0};
        struct hmoe_err e2 = {0};
        if (hmoe_sched_place(&no_kv, &p2, &e2) == HMOE_OK) {
            for (int il = 0; il < cfg->n_layer; il++)
                if (p2.where[il] == HMOE_PLACE_RAM) g->slots_kv_cost = p2.n_slots[il] - g->cache_slots;
        }
        hmoe_sched_plan_free(&p2);
    }
    for (int i = 0; i < n_ot; i++) hmoe_sched_override_free(&ot[i]);
    free(ot);
    if (st) {
        free(eb);
        return st;
    }
    g->bytes_cache = plan.cache_bytes;
    g->bytes_stream = plan.stream ? req.stream_bytes : 0;
    g->stream_bufs = plan.stream && req.whole_layers ? stage_bufs : 0;
    g->plan_bytes = plan.total_bytes;
    HMOE_INFO("VRAM plan for GPU %d (budget %.0f MiB, %.0f MiB free on the device): CUDA context %.0f MiB%s, cuBLAS "
              "%.0f MiB, reserve for code and graphs loaded on first use %.0f MiB, allocator rounding %.0f MiB",
              c->p.gpu_device, (double)g->budget_bytes / MiB, (double)di.free_bytes / MiB,
              (double)g->bytes_context / MiB, g->context_measured ? " (measured)" : " (estimated: NVML unavailable)",
              (double)g->bytes_cublas / MiB, (double)g->bytes_reserve / MiB, (double)g->bytes_pad / MiB);
    HMOE_INFO("VRAM plan: attention + norms + router %.0f MiB, LM head %.0f MiB, KV cache %.0f MiB (K %s, V %s, -c %d), "
              "buffers %.0f MiB (%d-token ubatch), resident experts %.0f MiB, expert cache %.0f MiB (%d slots per RAM "
              "layer), prefill streaming %.0f MiB: %.0f MiB planned",
              (double)attn / MiB, (double)hmoe_cuda_alloc_cost(head) / MiB, (double)kv / MiB,
              hmoe_type_name(c->p.type_k), hmoe_type_name(c->p.type_v), c->p.n_ctx, (double)act / MiB, g->n_ub,
              (double)g->bytes_experts / MiB,
              (double)g->bytes_cache / MiB, g->cache_slots, (double)g->bytes_stream / MiB, (double)g->plan_bytes / MiB);
    if (g->slots_kv_cost > 0)
        HMOE_INFO("VRAM plan: the KV cache of -c %d takes %d expert-cache slots per RAM layer (%d without it): the "
                  "expert cache shrinks first as -c grows",
                  c->p.n_ctx, g->slots_kv_cost, g->cache_slots + g->slots_kv_cost);

    /* Upload, then activations and staging. */
    for (int il = 0; il < cfg->n_layer && !st; il++) st = upload_layer(c, il, err);
    g->arch_free = cfg->arch_entry->gpu->free;
    if (!st && cfg->arch_entry->gpu->init) st = cfg->arch_entry->gpu->init(c, err);
    if (!st) st = hmoe_cuda_buf_alloc(g->cu, (size_t)head, &g->head_buf, err);
    if (!st) {
        g->out_norm = g->head_buf.ptr;
        gmat_set(&g->out, &m->w.output, (uint8_t *)g->head_buf.ptr + align256((size_t)cfg->n_embd * 4));
        st = upload(g, g->head_buf.ptr, m->w.output_norm, (size_t)cfg->n_embd * 4, err);
        if (!st) st = upload(g, (void *)g->out.w, m->w.output.data, mat_bytes(&m->w.output), err);
    }
    if (!st) st = hmoe_cuda_buf_alloc(g->cu, act_layout(c, NULL), &g->act_buf, err);
    if (!st) {
        act_layout(c, g->act_buf.ptr);
        st = hmoe_cuda_memset(g->cu, g->act_buf.ptr, 0, g->act_buf.bytes, err);
    }
    if (!st) st = hmoe_cuda_host_alloc((size_t)g->n_ub * (size_t)cfg->n_embd * 4, false, (void **)&g->emb_host, err);
    if (!st) st = hmoe_cuda_host_alloc((size_t)(2 + g->n_ub) * 4, false, (void **)&g->step_host, err);
    if (!st)
        st = hmoe_cuda_host_alloc((size_t)g->logit_rows * (size_t)cfg->n_vocab * 4, false, (void **)&g->logits_host, err);
    if (!st && c->p.verbose) {
        st = hmoe_cuda_event_create(&g->ev0, err);
        if (!st) st = hmoe_cuda_event_create(&g->ev1, err);
    }
    if (!st && getenv("HMOE_GPU_PROFILE")) {
        g->prof_ev = calloc(HMOE_GPU_PROF_EVENTS, sizeof *g->prof_ev);
        g->prof_cls = calloc(HMOE_GPU_PROF_EVENTS, sizeof *g->prof_cls);
        if (!g->prof_ev || !g->prof_cls) st = HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory");
        for (int i = 0; i < HMOE_GPU_PROF_EVENTS && !st; i++) st = hmoe_cuda_event_create(&g->prof_ev[i], err);
        g->prof_on = !st;
    }
    if (!st && any_ram && !cfg->arch_entry->gpu->own_experts) { /* an entry with its own experts runs RAM layers itself */
        /* the routers on the device, for the next-layer prefetch */
        /* the routers on the device, for the next-layer prefetch; the expert biases, for the GPU's share */
        const size_t nl = (size_t)cfg->n_layer;
        const float **routers = malloc(4 * nl * sizeof *routers);
        if (!routers) st = HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory");
        const float **gb = routers + nl, **ub = gb + nl, **db = ub + nl;
        bool biased = false;
        for (int il = 0; il < cfg->n_layer && !st; il++) {
            routers[il] = g->L[il].router;
            gb[il] = g->L[il].gate_bias, ub[il] = g->L[il].up_bias, db[il] = g->L[il].down_bias;
            biased |= gb[il] || db[il];
        }
        struct hmoe_sched_hybrid_params hp = {.cu = g->cu, .moe = g->moe, .n_layer = cfg->n_layer,
                                              .n_embd = cfg->n_embd, .n_ub = g->n_ub, .n_threads = c->p.n_threads,
                                              .plan = &plan, .sched = &c->p.sched, .file_base = m->gguf->base,
                                              .file_size = m->gguf->file_size, .file_in_ram = m->gguf->in_ram, .cpu_moe = c->rs.moe,
                                              .d_router = routers, .stream_chunk_experts = chunk,
                                              .d_gate_bias = biased ? gb : NULL, .d_up_bias = biased ? ub : NULL,
                                              .d_down_bias = biased ? db : NULL};
        if (!st) st = hmoe_sched_hybrid_init(&hp, &g->hyb, err);
        free(routers);
    }
    if (!st && !any_ram) fused_decode_setup(c);
    if (!st) st = hmoe_cuda_sync(g->cu, err);
    if (!st) hmoe_sched_plan_describe(&plan, eb, g->plan_text, sizeof g->plan_text);
    free(eb);
    hmoe_sched_plan_free(&plan);
    return st;
}

/* The fused single-token step (gpu_forward.c moe_fused, attn_decode_qkv) where its launchers'
 * shape rules hold: every expert resident and quantized, n_embd and n_ff_exp multiples of 32,
 * n_embd <= 4096, the counters of gpu_impl.h large enough. Elsewhere the step launches one
 * kernel per operation. */
static void fused_decode_setup(struct hmoe_ctx *c) {
    struct hmoe_gpu *g = c->gpu;
    const struct hmoe_model_config *cfg = &c->m->cfg;
    /* The entry says whether the fused launchers compute its layer (a shared expert added after
     * the routed ones would be skipped by the next-norm fusion). */
    bool ok = cfg->arch_entry->gpu->fused_decode && cfg->n_embd % 32 == 0 && cfg->n_embd <= 4096 &&
              cfg->n_ff_exp % 32 == 0 && cfg->n_head <= GPU_CNT_ATTN_MAX &&
              cfg->n_expert_used <= 32 /* the router top-k */ && cfg->n_expert <= 512;
    for (int il = 0; il < cfg->n_layer && ok; il++) {
        const struct hmoe_gpu_layer *L = &g->L[il];
        /* (q|k|v biases come with their products, before the fused attention ropes q and k) */
        ok = L->resident && hmoe_type_info[L->gate.type].is_quantized && hmoe_type_info[L->down.type].is_quantized;
    }
    g->fused_decode = ok;
}

/* --- report --------------------------------------------------------------------------- */

static void rappend(struct hmoe_gpu *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void rappend(struct hmoe_gpu *g, const char *fmt, ...) {
    size_t len = g->report ? strlen(g->report) : 0;
    va_list ap;
    va_start(ap, fmt);
    const int need = vsnprintf(NULL, 0, fmt, ap); /* the report grows to hold every line whole */
    va_end(ap);
    if (need < 0) return;
    if (!g->report || g->report_cap - len <= (size_t)need) {
        size_t cap = g->report_cap ? g->report_cap : 8192;
        while (cap - len <= (size_t)need) cap *= 2;
        char *r = realloc(g->report, cap);
        if (!r) return;
        if (!g->report) r[0] = 0;
        g->report = r;
        g->report_cap = cap;
    }
    va_start(ap, fmt);
    vsnprintf(g->report + len, g->report_cap - len, fmt, ap);
    va_end(ap);
}

const char *hmoe_gpu_report(struct hmoe_ctx *c) {
    struct hmoe_gpu *g = c->gpu;
    if (!g) return "";
    if (g->report) g->report[0] = 0;
    const double MiB = 1048576.0;
    struct hmoe_cuda_device_info di;
    struct hmoe_err e = {0};
    const char *dev = hmoe_cuda_device_info(c->p.gpu_device, &di, &e) == HMOE_OK ? di.name : "?";
    rappend(g, "GPU %d (%s): backend %s, VRAM budget %.0f MiB\n", c->p.gpu_device, dev, hmoe_ctx_backend(c),
            (double)g->budget_bytes / MiB);
    rappend(g, "  attention weights + norms + router  %9.1f MiB\n", (double)g->bytes_attn / MiB);
    rappend(g, "  resident experts                    %9.1f MiB\n", (double)g->bytes_experts / MiB);
    rappend(g, "  output norm + LM head               %9.1f MiB\n", (double)g->bytes_head / MiB);
    rappend(g, "  KV cache (K %s, V %s, %d positions) %9.1f MiB\n", hmoe_type_name(c->p.type_k),
            hmoe_type_name(c->p.type_v), c->p.n_ctx, (double)g->bytes_kv / MiB);
    rappend(g, "  activation buffers (%d-token ubatch) %8.1f MiB\n", g->n_ub, (double)g->act_buf.bytes / MiB);
    if (g->arch_state && c->m->cfg.arch_entry->gpu->report) {
        char line[4096];
        c->m->cfg.arch_entry->gpu->report(g, line, sizeof line);
        rappend(g, "%s", line);
    }
    rappend(g, "%s", g->plan_text);
    if (g->hyb) {
        char *buf = malloc(65536);
        if (buf) {
            hmoe_sched_hybrid_report(g->hyb, buf, 65536);
            rappend(g, "%s", buf);
            free(buf);
        }
    }
    struct hmoe_cuda_device_mem dm;
    hmoe_cuda_ctx_device_mem(g->cu, &dm);
    rappend(g, "  buffers allocated now %.1f MiB, peak %.1f MiB (in 2 MiB granules)\n",
            (double)hmoe_cuda_ctx_used_bytes(g->cu) / MiB, (double)hmoe_cuda_ctx_peak_bytes(g->cu) / MiB);
    rappend(g, "  the process on the device (as nvidia-smi counts it): now %.0f MiB, measured peak %.0f MiB of the "
            "%.0f MiB planned and the %.0f MiB budget (context %.0f MiB%s, cuBLAS %.0f MiB)\n",
            (double)dm.used_now / MiB, (double)dm.peak / MiB, (double)g->plan_bytes / MiB, (double)g->budget_bytes / MiB,
            (double)dm.context / MiB, dm.context_measured ? "" : " estimated", (double)dm.cublas / MiB);
    if (g->n_timed)
        rappend(g, "  decode: %llu steps, GPU %.3f ms/token (device time of the step graph)\n",
                (unsigned long long)g->n_steps, g->gpu_ms_sum / (double)g->n_timed);
    if (g->prof_on && g->prof_tokens) {
        double total = 0;
        for (int i = 0; hmoe_gpu_prof_name(i); i++) total += g->prof_ms[i];
        rappend(g, "  profile of eager steps (%llu tokens, %.3f ms device time, us/token):",
                (unsigned long long)g->prof_tokens, total);
        for (int i = 0; hmoe_gpu_prof_name(i); i++)
            if (g->prof_ms[i] > 0)
                rappend(g, " %s %.2f;", hmoe_gpu_prof_name(i), 1e3 * g->prof_ms[i] / (double)g->prof_tokens);
        rappend(g, "\n");
    }
    return g->report ? g->report : "";
}
