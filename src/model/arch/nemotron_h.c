/* nemotron_h.c — the nemotron_h / nemotron_h_moe forward pass for one micro-batch
 * (nemotron_h_moe.md §1): embedding; per layer ONE pre-norm block x += Mixer(RMSNorm(x) *
 * attn_norm) whose mixer is Mamba-2 (nemotron_h_mamba.c), attention without positions (the
 * shared KV-cache attention, no RoPE, scale 1/sqrt(key_length)) or the FFN: routed ungated
 * ReLU² experts through src/sched (sigmoid router with selection bias, optional latent
 * projections) plus the shared expert, or a dense ReLU² MLP; final RMSNorm and LM head.
 */
#include "hmoe/cpu.h"
#include "model/arch/nemotron_h.h"

/* h = relu(h)^2 over n values (§6.2). */
static void relu2(float *h, int64_t n) {
    for (int64_t i = 0; i < n; i++) h[i] = h[i] > 0.0f ? h[i] * h[i] : 0.0f;
}

static void attention(struct hmoe_ctx *c, const struct hmoe_layer_weights *L, int il, int n) {
    const struct hmoe_model_config *cfg = &c->m->cfg;
    struct hmoe_run_state *rs = &c->rs;
    const int64_t d = cfg->n_embd, nq = (int64_t)cfg->n_head * cfg->head_dim, nk = (int64_t)cfg->n_head_kv * cfg->head_dim;
    const struct hmoe_mm_job qkv[3] = {
        {&L->attn_q, rs->q, (size_t)nq, L->attn_q_bias},
        {&L->attn_k, rs->k, (size_t)nk, L->attn_k_bias},
        {&L->attn_v, rs->v, (size_t)nk, L->attn_v_bias},
    };
    hmoe_model_matmul(c, qkv, 3, rs->xn, (size_t)d, n);
    hmoe_model_attention(c, il, n); /* K cached as projected: position enters only through the mask */
    const struct hmoe_mm_job wo = {&L->attn_output, rs->out, (size_t)d, L->attn_output_bias};
    hmoe_model_matmul(c, &wo, 1, rs->attn, (size_t)nq, n);
}

/* Routed experts (+ latent projections) and the shared expert, §6.1 steps 1-12. */
static enum hmoe_status moe(struct hmoe_ctx *c, const struct hmoe_layer_weights *L, int n, struct hmoe_err *err) {
    const struct hmoe_model_config *cfg = &c->m->cfg;
    struct hmoe_run_state *rs = &c->rs;
    struct hmoe_rec_state *r = rs->rec;
    const int64_t d = cfg->n_embd, Fs = cfg->n_ff_shexp, m = cfg->moe_latent;
    enum hmoe_status st;
    if (m) {
        /* Router on the full d-vector, experts in the latent space, the sum back to d. */
        const struct hmoe_mm_job down = {&L->latent_down, r->z, (size_t)m, NULL};
        hmoe_model_matmul(c, &down, 1, rs->xn, (size_t)d, n);
        if ((st = hmoe_sched_moe_ffn_split(rs->moe, &L->moe, rs->xn, r->z, n, r->o, err))) return st;
        const struct hmoe_mm_job up = {&L->latent_up, rs->out, (size_t)d, NULL};
        hmoe_model_matmul(c, &up, 1, r->o, (size_t)m, n);
    } else if ((st = hmoe_sched_moe_ffn(rs->moe, &L->moe, rs->xn, n, rs->out, err))) {
        return st;
    }
    if (Fs == 0) return HMOE_OK;
    const struct hmoe_mm_job up = {&L->shexp.up, r->sh_g, (size_t)Fs, NULL};
    hmoe_model_matmul(c, &up, 1, rs->xn, (size_t)d, n);
    relu2(r->sh_g, (int64_t)n * Fs);
    const struct hmoe_mm_job down = {&L->shexp.down, r->sh_out, (size_t)d, NULL};
    hmoe_model_matmul(c, &down, 1, r->sh_g, (size_t)Fs, n);
    for (int64_t i = 0; i < (int64_t)n * d; i++) rs->out[i] += r->sh_out[i];
    return HMOE_OK;
}

/* Dense ReLU² MLP (§6.3). */
static void dense(struct hmoe_ctx *c, const struct hmoe_layer_weights *L, int n) {
    struct hmoe_run_state *rs = &c->rs;
    const int64_t d = c->m->cfg.n_embd, F = L->ffn_up.n_out;
    const struct hmoe_mm_job up = {&L->ffn_up, rs->rec->sh_g, (size_t)F, L->ffn_up_bias};
    hmoe_model_matmul(c, &up, 1, rs->xn, (size_t)d, n);
    relu2(rs->rec->sh_g, (int64_t)n * F);
    const struct hmoe_mm_job down = {&L->ffn_down, rs->out, (size_t)d, L->ffn_down_bias};
    hmoe_model_matmul(c, &down, 1, rs->rec->sh_g, (size_t)F, n);
}

enum hmoe_status hmoe_nemotron_forward(struct hmoe_ctx *c, const int32_t *ids, int n, int pos0, enum hmoe_logits which,
                                       float *logits, struct hmoe_err *err) {
    const struct hmoe_model_config *cfg = &c->m->cfg;
    const struct hmoe_model_weights *w = &c->m->w;
    struct hmoe_run_state *rs = &c->rs;

    hmoe_model_positions(c, n, pos0);
    hmoe_model_embed(c, ids, n);
    for (int il = 0; il < cfg->n_layer; il++) {
        const struct hmoe_layer_weights *L = &w->layers[il];
        /* The previous layer's mixer output joins the residual here. */
        hmoe_model_add_rmsnorm(c, rs->x, il > 0 ? rs->out : NULL, rs->xn, L->attn_norm, n);
        if (L->recurrent) {
            hmoe_nemotron_mamba(c, il, n);
        } else if (!L->ffn_only) {
            attention(c, L, il, n);
        } else if (L->moe.router.data) {
            enum hmoe_status st = moe(c, L, n, err);
            if (st) return st;
        } else {
            dense(c, L, n);
        }
    }
    hmoe_model_logits(c, which, n, logits);
    return HMOE_OK;
}
