/* qwen35moe.c — the Qwen3.5/3.6 MoE forward pass for one micro-batch (qwen35moe.md §1):
 * embedding; per layer RMSNorm -> Gated DeltaNet (3 of every 4 layers, below) or gated full
 * attention (attention_gated.c) -> residual -> RMSNorm -> routed MoE (src/sched, routing as
 * qwen3moe) + sigmoid-gated shared expert (§7) -> residual; final RMSNorm and LM head.
 * The DeltaNet mixer here does the projections and threading; the math is deltanet.c's.
 */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "model/deltanet_impl.h"
#include "model/qwen35_impl.h"

/* Prefill of at least this many tokens per head uses the chunked form (§5.3). On CPUs the
 * token-by-token recurrence does the same arithmetic in one cache-resident pass per token
 * and measured faster (bench/bench_deltanet.c), so the chunked form is off by default;
 * HMOE_GDN_CHUNKED=1 turns it on (for testing and for comparing with the GPU port). */
static int chunked_min_tokens(void) {
    static int v = -1;
    if (v < 0) {
        const char *e = getenv("HMOE_GDN_CHUNKED");
        v = e && *e == '1' ? HMOE_GDN_CHUNK / 4 : 1 << 30;
    }
    return v;
}

void hmoe_qwen35_deltanet(struct hmoe_ctx *c, int il, int n) {
    const struct hmoe_model_config *cfg = &c->m->cfg;
    const struct hmoe_gdn_weights *G = &c->m->w.layers[il].gdn;
    struct hmoe_run_state *rs = &c->rs;
    struct hmoe_rec_state *r = rs->rec;
    const int64_t d = cfg->n_embd, Hv = r->n_v_head, Hk = r->n_k_head, dim = r->dim;
    const int64_t kd = r->key_dim, vd = r->value_dim, cd = r->conv_dim;
    const float eps = cfg->rms_eps, q_scale = 1.0f / sqrtf((float)dim);
    float *conv_state = r->conv + (size_t)r->slot[il] * r->conv_floats;
    float *S = r->ssm + (size_t)r->slot[il] * r->ssm_floats;
    const bool par = n >= 4;

    /* Projections that share the normed input: qkv (conv input), z, alpha, beta. */
    const struct hmoe_mm_job jobs[4] = {
        {&G->qkv, r->qkv, (size_t)cd, NULL},
        {&G->gate, r->z, (size_t)vd, NULL},
        {&G->alpha, r->alpha, (size_t)Hv, NULL},
        {&G->beta, r->beta, (size_t)Hv, NULL},
    };
    hmoe_model_matmul(c, jobs, 4, rs->xn, (size_t)d, n);
    hmoe_gdn_gates(r->alpha, r->beta, (size_t)Hv, G->dt_bias, G->a, n, (int)Hv);

    /* Causal conv over time, split by channels; then L2 norm per (token, q/k head). */
    const int64_t cchunk = 256;
#pragma omp parallel for if (par) num_threads(c->p.n_threads) schedule(static)
    for (int64_t c0 = 0; c0 < cd; c0 += cchunk)
        hmoe_gdn_conv(r->qkv, (size_t)cd, conv_state, G->conv1d, r->K, cd, c0, HMOE_MIN(cd, c0 + cchunk), n, r->y,
                      (size_t)cd);
#pragma omp parallel for if (par) num_threads(c->p.n_threads) schedule(static)
    for (int64_t i = 0; i < n * 2 * Hk; i++) {
        const int64_t t = i / (2 * Hk), j = i % (2 * Hk); /* j < Hk: q head j, else k head j - Hk */
        hmoe_gdn_l2norm(r->y + t * cd + j * dim, (int)dim, eps, j < Hk ? q_scale : 1.0f);
    }

    /* The recurrence per value head (independent heads, sequential tokens), then each
     * head's output through the gated RMSNorm. Value head h reads q/k head h mod Hk (§4.5). */
    const bool chunked = n >= chunked_min_tokens();
#pragma omp parallel for num_threads(c->p.n_threads) schedule(dynamic, 1)
    for (int64_t h = 0; h < Hv; h++) {
        const int64_t g = h % Hk;
        const float *q = r->y + g * dim, *k = r->y + kd + g * dim, *v = r->y + 2 * kd + h * dim;
        float *Sh = S + (size_t)h * (size_t)(dim * dim), *o = r->o + h * dim;
        if (chunked)
            hmoe_gdn_chunked(Sh, (int)dim, n, q, k, (size_t)cd, v, (size_t)cd, r->alpha + h, r->beta + h, (size_t)Hv, o,
                             (size_t)vd, r->chunk_scratch + (size_t)omp_get_thread_num() * r->chunk_floats);
        else
            hmoe_gdn_recurrent(Sh, (int)dim, n, q, k, (size_t)cd, v, (size_t)cd, r->alpha + h, r->beta + h, (size_t)Hv,
                               o, (size_t)vd);
        for (int t = 0; t < n; t++) hmoe_gdn_gated_norm(o + (size_t)t * vd, r->z + (size_t)t * vd + h * dim, G->norm, (int)dim, eps);
    }
    const struct hmoe_mm_job wo = {&G->out, rs->out, (size_t)d, NULL};
    hmoe_model_matmul(c, &wo, 1, r->o, (size_t)vd, n);
}

/* Routed experts + sigmoid-gated shared expert of the normed rs->xn into rs->out (§7). */
static enum hmoe_status ffn(struct hmoe_ctx *c, const struct hmoe_layer_weights *L, int n, struct hmoe_err *err) {
    const struct hmoe_model_config *cfg = &c->m->cfg;
    struct hmoe_run_state *rs = &c->rs;
    struct hmoe_rec_state *r = rs->rec;
    const int64_t d = cfg->n_embd, Fs = cfg->n_ff_shexp;
    enum hmoe_status st = hmoe_sched_moe_ffn(rs->moe, &L->moe, rs->xn, n, rs->out, err);
    if (st) return st;
    const struct hmoe_mm_job up[3] = {
        {&L->shexp.gate, r->sh_g, (size_t)Fs, NULL},
        {&L->shexp.up, r->sh_u, (size_t)Fs, NULL},
        {&L->shexp.gate_inp, r->sh_gamma, 1, NULL},
    };
    hmoe_model_matmul(c, up, 3, rs->xn, (size_t)d, n);
    for (int64_t i = 0; i < n * Fs; i++) r->sh_g[i] = r->sh_g[i] / (1.0f + expf(-r->sh_g[i])) * r->sh_u[i];
    const struct hmoe_mm_job down = {&L->shexp.down, r->sh_out, (size_t)d, NULL};
    hmoe_model_matmul(c, &down, 1, r->sh_g, (size_t)Fs, n);
    for (int t = 0; t < n; t++) {
        const float gamma = 1.0f / (1.0f + expf(-r->sh_gamma[t]));
        float *o = rs->out + (size_t)t * d;
        const float *s = r->sh_out + (size_t)t * d;
        for (int64_t j = 0; j < d; j++) o[j] += gamma * s[j];
    }
    return HMOE_OK;
}

enum hmoe_status hmoe_qwen35moe_forward(struct hmoe_ctx *c, const int32_t *ids, int n, int pos0,
                                        enum hmoe_logits which, float *logits, struct hmoe_err *err) {
    const struct hmoe_model_config *cfg = &c->m->cfg;
    const struct hmoe_model_weights *w = &c->m->w;
    struct hmoe_run_state *rs = &c->rs;
    const int64_t d = cfg->n_embd;
    const float eps = cfg->rms_eps;
    const bool par = n >= 4;

    for (int t = 0; t < n; t++) rs->pos[t] = pos0 + t;
    hmoe_qwen35_rope_table(c, n);
    const hmoe_dequant_row_fn embd_row = hmoe_type_info[w->token_embd.type].dequant_ref;
#pragma omp parallel for if (par) num_threads(c->p.n_threads)
    for (int t = 0; t < n; t++)
        embd_row((const uint8_t *)w->token_embd.data + (size_t)ids[t] * w->token_embd.row_bytes, rs->x + t * d, d);

    for (int il = 0; il < cfg->n_layer; il++) {
        const struct hmoe_layer_weights *L = &w->layers[il];
        for (int t = 0; t < n; t++) hmoe_model_rmsnorm(rs->xn + t * d, rs->x + t * d, L->attn_norm, d, eps);
        if (L->recurrent) hmoe_qwen35_deltanet(c, il, n);
        else hmoe_qwen35_attention(c, il, n);
        for (int64_t i = 0; i < n * d; i++) rs->x[i] += rs->out[i];
        /* post_attention_norm, the pre-FFN norm (trap 4). */
        for (int t = 0; t < n; t++) hmoe_model_rmsnorm(rs->xn + t * d, rs->x + t * d, L->ffn_norm, d, eps);
        enum hmoe_status st = ffn(c, L, n, err);
        if (st) return st;
        for (int64_t i = 0; i < n * d; i++) rs->x[i] += rs->out[i];
    }

    if (which == HMOE_LOGITS_NONE) return HMOE_OK;
    const int t0 = which == HMOE_LOGITS_ALL ? 0 : n - 1;
    for (int t = t0; t < n; t++) hmoe_model_rmsnorm(rs->xn + t * d, rs->x + t * d, w->output_norm, d, eps);
    const struct hmoe_mm_job head = {&w->output, logits, (size_t)cfg->n_vocab, NULL};
    hmoe_model_matmul(c, &head, 1, rs->xn + t0 * d, (size_t)d, n - t0);
    return HMOE_OK;
}
