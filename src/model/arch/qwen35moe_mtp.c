/* qwen35moe_mtp.c — the qwen35moe multi-token-prediction block (qwen35moe.md §8): bound from
 * file layer n_layer into a one-layer view of the model, and its forward pass. The block
 * joins RMSNorm(embed(token)) * enorm and RMSNorm(hidden) * hnorm, projects the pair back to
 * d (eh_proj, embedding half first), runs one gated full-attention layer with the routed +
 * shared experts (§5.1, §7) over its own KV cache, and ends with its own final norm
 * (shared_head_norm, else output_norm) and the LM head (shared_head_head, else output).
 */
#include <stdio.h>
#include <string.h>

#include "model/arch/qwen35moe.h"

#define NAME(suffix) (snprintf(name, sizeof name, "blk.%d.%s", il, suffix), name)

static enum hmoe_status mtp_bind(struct hmoe_model *v, int il, struct hmoe_err *err) {
    const int64_t d = v->cfg.n_embd, V = v->cfg.n_vocab;
    struct hmoe_layer_weights *L = &v->w.layers[0];
    struct hmoe_nextn_weights *N = &L->nextn;
    char name[96];
    enum hmoe_status st;
    if ((st = hmoe_qwen35_bind_attn_ffn(v, il, L, err)) ||
        (st = hmoe_model_bind_mat(v, NAME("nextn.eh_proj.weight"), (int64_t[]){2 * d, d}, 2, &N->eh_proj, err)) ||
        (st = hmoe_model_bind_vec(v, NAME("nextn.enorm.weight"), d, true, &N->enorm, err)) ||
        (st = hmoe_model_bind_vec(v, NAME("nextn.hnorm.weight"), d, true, &N->hnorm, err)))
        return st;
    /* Optional own embedding, LM head and final norm (35B-A3B ships only the norm, §3). */
    const float *head_norm = NULL;
    if ((st = hmoe_model_bind_vec(v, NAME("nextn.shared_head_norm.weight"), d, false, &head_norm, err))) return st;
    if (head_norm) v->w.output_norm = head_norm;
    if (hmoe_gguf_find_tensor(v->gguf, NAME("nextn.embed_tokens.weight")) &&
        (st = hmoe_model_bind_mat(v, name, (int64_t[]){d, V}, 2, &v->w.token_embd, err)))
        return st;
    if (hmoe_gguf_find_tensor(v->gguf, NAME("nextn.shared_head_head.weight")) &&
        (st = hmoe_model_bind_mat(v, name, (int64_t[]){d, V}, 2, &v->w.output, err)))
        return st;
    return HMOE_OK;
}

static enum hmoe_status mtp_forward(struct hmoe_ctx *mc, const float *hidden, const int32_t *ids, int n, int pos0,
                                    float *cat, float *logits, float *hidden_out, struct hmoe_err *err) {
    const struct hmoe_model_config *cfg = &mc->m->cfg;
    const struct hmoe_layer_weights *L = &mc->m->w.layers[0];
    const struct hmoe_nextn_weights *N = &L->nextn;
    struct hmoe_run_state *rs = &mc->rs;
    const size_t d = (size_t)cfg->n_embd;

    hmoe_model_positions(mc, n, pos0);
    hmoe_model_mrope_text_table(mc, n);
    hmoe_model_embed(mc, ids, n);
    for (int t = 0; t < n; t++) {
        hmoe_model_rmsnorm(cat + (size_t)t * 2 * d, rs->x + (size_t)t * d, N->enorm, (int64_t)d, cfg->rms_eps);
        hmoe_model_rmsnorm(cat + (size_t)t * 2 * d + d, hidden + (size_t)t * d, N->hnorm, (int64_t)d, cfg->rms_eps);
    }
    const struct hmoe_mm_job proj = {&N->eh_proj, rs->x, d, NULL};
    hmoe_model_matmul(mc, &proj, 1, cat, 2 * d, n);

    hmoe_model_add_rmsnorm(mc, rs->x, NULL, rs->xn, L->attn_norm, n);
    hmoe_model_gated_attention(mc, 0, n);
    hmoe_model_add_rmsnorm(mc, rs->x, rs->out, rs->xn, L->ffn_norm, n);
    enum hmoe_status st = hmoe_qwen35_ffn(mc, L, n, err);
    if (st || !logits) return st;
    hmoe_model_logits(mc, HMOE_LOGITS_LAST, n, logits); /* the block's final norm -> rs->xn row n-1 */
    if (hidden_out) memcpy(hidden_out, rs->xn + (size_t)(n - 1) * d, d * sizeof(float));
    return HMOE_OK;
}

const struct hmoe_arch_mtp hmoe_qwen35_mtp = {.bind = mtp_bind, .forward = mtp_forward};
