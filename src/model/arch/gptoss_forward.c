/* gptoss_forward.c — the gpt-oss forward pass for one micro-batch (gpt-oss.md on top of
 * qwen3moe.md §3-§4): embedding; per layer RMSNorm -> Q/K/V with biases -> NEOX RoPE with
 * YaRN (no Q/K norm) -> GQA attention over the KV cache with the layer's sink logits and,
 * on windowed layers, the sliding window -> Wo + bias -> residual -> post_attention_norm ->
 * MoE (top-k of the biased router logits, softmax over the k, clamped SwiGLU experts with
 * biases; one call into src/sched) -> residual; final RMSNorm and the untied LM head.
 * Threads as in qwen3moe_forward.c: matmuls, attention and MoE are jobs of the cpu.h thread team,
 * the per-token RoPE a job only for a batch.
 */
#include "hmoe/cpu.h"
#include "model/arch/gptoss.h"

/* One token's Q and K heads rotated with its angles. */
static void task_rope(void *arg, int64_t t, int tid) {
    (void)tid;
    const struct hmoe_ctx *c = arg;
    const struct hmoe_model_config *cfg = &c->m->cfg;
    const struct hmoe_run_state *rs = &c->rs;
    const int64_t H = cfg->n_head, Hkv = cfg->n_head_kv, D = cfg->head_dim, half = cfg->n_rot / 2;
    const float *co = rs->rope_cos + t * half, *si = rs->rope_sin + t * half;
    for (int64_t j = 0; j < H; j++) hmoe_model_rope_neox(rs->q + (t * H + j) * D, cfg->n_rot, co, si);
    for (int64_t j = 0; j < Hkv; j++) hmoe_model_rope_neox(rs->k + (t * Hkv + j) * D, cfg->n_rot, co, si);
}

enum hmoe_status hmoe_gptoss_forward(struct hmoe_ctx *c, const int32_t *ids, int n, int pos0, enum hmoe_logits which,
                                     float *logits, struct hmoe_err *err) {
    const struct hmoe_model_config *cfg = &c->m->cfg;
    const struct hmoe_model_weights *w = &c->m->w;
    struct hmoe_run_state *rs = &c->rs;
    const int64_t d = cfg->n_embd, H = cfg->n_head, Hkv = cfg->n_head_kv, D = cfg->head_dim, Dv = cfg->head_dim_v;

    hmoe_model_positions(c, n, pos0);
    hmoe_model_rope_table(cfg, rs->pos, n, rs->rope_cos, rs->rope_sin);
    hmoe_model_embed(c, ids, n);

    for (int il = 0; il < cfg->n_layer; il++) {
        const struct hmoe_layer_weights *L = &w->layers[il];
        /* Self-attention; the previous layer's MoE output joins the residual here. */
        hmoe_model_add_rmsnorm(c, rs->x, il > 0 ? rs->out : NULL, rs->xn, L->attn_norm, n);
        const struct hmoe_mm_job qkv[3] = {
            {&L->attn_q, rs->q, (size_t)(H * D), L->attn_q_bias},
            {&L->attn_k, rs->k, (size_t)(Hkv * D), L->attn_k_bias},
            {&L->attn_v, rs->v, (size_t)(Hkv * Dv), L->attn_v_bias},
        };
        hmoe_model_matmul(c, qkv, 3, rs->xn, (size_t)d, n);
        hmoe_cpu_parallel(n >= 4 ? c->p.n_threads : 1, n, task_rope, c);
        hmoe_model_attention(c, il, n); /* sinks and window come from L */
        const struct hmoe_mm_job wo = {&L->attn_output, rs->out, (size_t)d, L->attn_output_bias};
        hmoe_model_matmul(c, &wo, 1, rs->attn, (size_t)(H * Dv), n);

        /* MoE feed-forward: post_attention_norm is the pre-FFN norm (gpt-oss.md, trap 1). */
        hmoe_model_add_rmsnorm(c, rs->x, rs->out, rs->xn, L->ffn_norm, n);
        enum hmoe_status st = hmoe_sched_moe_ffn(rs->moe, &L->moe, rs->xn, n, rs->out, err);
        if (st) return st;
    }

    hmoe_model_logits(c, which, n, logits);
    return HMOE_OK;
}
