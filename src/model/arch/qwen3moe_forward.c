/* qwen3moe_forward.c — the Qwen3-MoE forward pass for one micro-batch, top to bottom as
 * qwen3moe.md §3-§4 writes it: embedding; per layer RMSNorm -> Q/K/V -> per-head Q/K
 * RMSNorm -> NEOX RoPE -> causal GQA attention over the KV cache -> Wo -> residual ->
 * RMSNorm -> MoE (one call into src/sched) -> residual; final RMSNorm and LM head for the
 * rows whose logits are wanted. Buffers are the context's run state (model_impl.h).
 * Threads: every matmul, the attention and the MoE phases are jobs of the cpu.h thread team
 * (hmoe_cpu_parallel); the small per-token steps between them run on the calling thread for
 * a decoded token (a job would cost more than the work) and as jobs over tokens in prefill.
 */
#include <string.h>

#include "hmoe/cpu.h"
#include "model/arch/qwen3moe.h"

struct row_call {
    struct hmoe_ctx *c;
    const struct hmoe_layer_weights *L;
};

/* One token's per-head Q/K RMSNorm (weights shared by all heads), then RoPE with its angles. */
static void task_qk_norm_rope(void *arg, int64_t t, int tid) {
    (void)tid;
    const struct row_call *a = arg;
    const struct hmoe_model_config *cfg = &a->c->m->cfg;
    const struct hmoe_run_state *rs = &a->c->rs;
    const int64_t H = cfg->n_head, Hkv = cfg->n_head_kv, D = cfg->head_dim, half = cfg->n_rot / 2;
    const float *co = rs->rope_cos + t * half, *si = rs->rope_sin + t * half;
    for (int64_t j = 0; j < H; j++) {
        float *qh = rs->q + (t * H + j) * D;
        hmoe_model_rmsnorm(qh, qh, a->L->attn_q_norm, D, cfg->rms_eps);
        hmoe_model_rope_neox(qh, cfg->n_rot, co, si);
    }
    for (int64_t j = 0; j < Hkv; j++) {
        float *kh = rs->k + (t * Hkv + j) * D;
        hmoe_model_rmsnorm(kh, kh, a->L->attn_k_norm, D, cfg->rms_eps);
        hmoe_model_rope_neox(kh, cfg->n_rot, co, si);
    }
}

enum hmoe_status hmoe_qwen3moe_forward(struct hmoe_ctx *c, const int32_t *ids, int n, int pos0,
                                       enum hmoe_logits which, float *logits, struct hmoe_err *err) {
    const struct hmoe_model_config *cfg = &c->m->cfg;
    const struct hmoe_model_weights *w = &c->m->w;
    struct hmoe_run_state *rs = &c->rs;
    const int64_t d = cfg->n_embd, H = cfg->n_head, Hkv = cfg->n_head_kv, D = cfg->head_dim, Dv = cfg->head_dim_v;
    const int nt_rows = n >= 4 ? c->p.n_threads : 1; /* per-token steps: a job only for a batch */
    struct row_call rc = {.c = c};

    hmoe_model_positions(c, n, pos0);
    hmoe_model_rope_table(cfg, rs->pos, n, rs->rope_cos, rs->rope_sin);
    hmoe_model_embed(c, ids, n);

    for (int il = 0; il < cfg->n_layer; il++) {
        const struct hmoe_layer_weights *L = &w->layers[il];
        rc.L = L;

        /* Self-attention (§4.3); the previous layer's MoE output joins the residual here. */
        hmoe_model_add_rmsnorm(c, rs->x, il > 0 ? rs->out : NULL, rs->xn, L->attn_norm, n);
        const struct hmoe_mm_job qkv[3] = {
            {&L->attn_q, rs->q, (size_t)(H * D), L->attn_q_bias},
            {&L->attn_k, rs->k, (size_t)(Hkv * D), L->attn_k_bias},
            {&L->attn_v, rs->v, (size_t)(Hkv * Dv), L->attn_v_bias},
        };
        hmoe_model_matmul(c, qkv, 3, rs->xn, (size_t)d, n);
        hmoe_cpu_parallel(nt_rows, n, task_qk_norm_rope, &rc);
        hmoe_model_attention(c, il, n);
        const struct hmoe_mm_job wo = {&L->attn_output, rs->out, (size_t)d, NULL};
        hmoe_model_matmul(c, &wo, 1, rs->attn, (size_t)(H * Dv), n);

        /* MoE feed-forward (§4.4): routing, grouping and experts live in src/sched. */
        hmoe_model_add_rmsnorm(c, rs->x, rs->out, rs->xn, L->ffn_norm, n);
        enum hmoe_status st = hmoe_sched_moe_ffn(rs->moe, &L->moe, rs->xn, n, rs->out, err);
        if (st) return st;
    }

    /* Output (§4.5): last residual, final RMSNorm and the LM head, only for the rows asked for
     * (the residual of the other rows is never read again). */
    hmoe_model_logits(c, which, n, logits);
    return HMOE_OK;
}
