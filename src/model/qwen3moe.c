/* qwen3moe.c — the Qwen3-MoE forward pass for one micro-batch, top to bottom as
 * qwen3moe.md §3-§4 writes it: embedding; per layer RMSNorm -> Q/K/V -> per-head Q/K
 * RMSNorm -> NEOX RoPE -> causal GQA attention over the KV cache -> Wo -> residual ->
 * RMSNorm -> MoE (one call into src/sched) -> residual; final RMSNorm and LM head for the
 * rows whose logits are wanted. Buffers are the context's run state (model_impl.h).
 */
#include <string.h>

#include "model/model_impl.h"

enum hmoe_status hmoe_qwen3moe_forward(struct hmoe_ctx *c, const int32_t *ids, int n, int pos0,
                                       enum hmoe_logits which, float *logits, struct hmoe_err *err) {
    const struct hmoe_model_config *cfg = &c->m->cfg;
    const struct hmoe_model_weights *w = &c->m->w;
    struct hmoe_run_state *rs = &c->rs;
    const int64_t d = cfg->n_embd, H = cfg->n_head, Hkv = cfg->n_head_kv, D = cfg->head_dim, Dv = cfg->head_dim_v;
    const int64_t nq = H * D, nk = Hkv * D, nv = Hkv * Dv, half = cfg->n_rot / 2;
    const float eps = cfg->rms_eps;
    const bool par = n >= 4; /* tiny loops stay serial for one-token decode */

    for (int t = 0; t < n; t++) rs->pos[t] = pos0 + t;
    hmoe_model_rope_table(cfg, rs->pos, n, rs->rope_cos, rs->rope_sin);

    /* Embedding: row id of token_embd, dequantized; no scaling (§4.1). */
    const hmoe_dequant_row_fn embd_row = hmoe_type_info[w->token_embd.type].dequant_ref;
#pragma omp parallel for if (par) num_threads(c->p.n_threads)
    for (int t = 0; t < n; t++)
        embd_row((const uint8_t *)w->token_embd.data + (size_t)ids[t] * w->token_embd.row_bytes, rs->x + t * d, d);

    for (int il = 0; il < cfg->n_layer; il++) {
        const struct hmoe_layer_weights *L = &w->layers[il];

        /* Self-attention (§4.3). */
        for (int t = 0; t < n; t++) hmoe_model_rmsnorm(rs->xn + t * d, rs->x + t * d, L->attn_norm, d, eps);
        const struct hmoe_mm_job qkv[3] = {
            {&L->attn_q, rs->q, (size_t)nq, L->attn_q_bias},
            {&L->attn_k, rs->k, (size_t)nk, L->attn_k_bias},
            {&L->attn_v, rs->v, (size_t)nv, L->attn_v_bias},
        };
        hmoe_model_matmul(c, qkv, 3, rs->xn, (size_t)d, n);
        /* Per-head Q/K RMSNorm (weights shared by all heads), then RoPE with the token's angles. */
#pragma omp parallel for if (par) num_threads(c->p.n_threads)
        for (int t = 0; t < n; t++) {
            const float *co = rs->rope_cos + t * half, *si = rs->rope_sin + t * half;
            for (int64_t j = 0; j < H; j++) {
                float *qh = rs->q + t * nq + j * D;
                hmoe_model_rmsnorm(qh, qh, L->attn_q_norm, D, eps);
                hmoe_model_rope_neox(qh, cfg->n_rot, co, si);
            }
            for (int64_t j = 0; j < Hkv; j++) {
                float *kh = rs->k + t * nk + j * D;
                hmoe_model_rmsnorm(kh, kh, L->attn_k_norm, D, eps);
                hmoe_model_rope_neox(kh, cfg->n_rot, co, si);
            }
        }
        hmoe_model_attention(c, il, n);
        const struct hmoe_mm_job wo = {&L->attn_output, rs->out, (size_t)d, NULL};
        hmoe_model_matmul(c, &wo, 1, rs->attn, (size_t)(H * Dv), n);
        for (int64_t i = 0; i < n * d; i++) rs->x[i] += rs->out[i];

        /* MoE feed-forward (§4.4): routing, grouping and experts live in src/sched. */
        for (int t = 0; t < n; t++) hmoe_model_rmsnorm(rs->xn + t * d, rs->x + t * d, L->ffn_norm, d, eps);
        enum hmoe_status st = hmoe_sched_moe_ffn(rs->moe, &L->moe, rs->xn, n, rs->out, err);
        if (st) return st;
        for (int64_t i = 0; i < n * d; i++) rs->x[i] += rs->out[i];
    }

    /* Output (§4.5): final RMSNorm and the LM head, only for the rows asked for. */
    if (which == HMOE_LOGITS_NONE) return HMOE_OK;
    const int t0 = which == HMOE_LOGITS_ALL ? 0 : n - 1;
    for (int t = t0; t < n; t++) hmoe_model_rmsnorm(rs->xn + t * d, rs->x + t * d, w->output_norm, d, eps);
    const struct hmoe_mm_job head = {&w->output, logits, (size_t)cfg->n_vocab, NULL};
    hmoe_model_matmul(c, &head, 1, rs->xn + t0 * d, (size_t)d, n - t0);
    return HMOE_OK;
}
