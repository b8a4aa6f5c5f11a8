/* qwen35moe_weights.c — bind one qwen35moe main layer (qwen35moe.md §3): the gated full
 * attention set on every full_attention_interval-th layer, the Gated DeltaNet set on the
 * others, and on every layer the routed experts (split or fused gate/up, §4.6) plus the
 * gated shared expert. Shapes come from the config; a wrong one is named with what the
 * architecture needs (weights.c helpers). MTP blocks (blk.n_layer..) are bound only for
 * speculative decoding (qwen35moe_mtp.c).
 */
#include <stdint.h>
#include <stdio.h>

#include "model/arch/qwen35moe.h"

#define NAME(suffix) (snprintf(name, sizeof name, "blk.%d.%s", il, suffix), name)

/* An F32 tensor that is used as plain numbers (conv taps): shape want, type F32. */
static enum hmoe_status bind_f32(struct hmoe_model *md, const char *nm, const int64_t *want, int n_want,
                                 const float **out, struct hmoe_err *err) {
    struct hmoe_mat m;
    enum hmoe_status st = hmoe_model_bind_mat(md, nm, want, n_want, &m, err);
    if (st) return st;
    if (m.type != HMOE_TYPE_F32 || (uintptr_t)m.data % sizeof(float) != 0)
        return HMOE_RAISE(err, HMOE_ERR_UNSUPPORTED, "%s: tensor %s has type %s; hmoe expects 4-byte aligned F32",
                          md->gguf->path, nm, hmoe_type_name(m.type));
    *out = m.data;
    return HMOE_OK;
}

/* Routed experts: ffn_gate_exps + ffn_up_exps, or one ffn_gate_up_exps {d, 2F, E} whose
 * first F rows of each expert are the gate and the last F the up projection (§3, §4.6). */
static enum hmoe_status bind_experts(struct hmoe_model *md, int il, struct hmoe_layer_weights *L,
                                     struct hmoe_err *err) {
    const struct hmoe_model_config *c = &md->cfg;
    const int64_t d = c->n_embd, E = c->n_expert, F = c->n_ff_exp;
    char name[96];
    enum hmoe_status st;
    if ((st = hmoe_model_bind_mat(md, NAME("ffn_gate_inp.weight"), (int64_t[]){d, E}, 2, &L->moe.router, err)))
        return st;
    if (!hmoe_gguf_find_tensor(md->gguf, NAME("ffn_gate_exps.weight")) &&
        hmoe_gguf_find_tensor(md->gguf, NAME("ffn_gate_up_exps.weight"))) {
        struct hmoe_mat gu;
        if ((st = hmoe_model_bind_mat(md, name, (int64_t[]){d, 2 * F, E}, 3, &gu, err))) return st;
        L->moe.gate = L->moe.up = gu;
        L->moe.gate.n_out = L->moe.up.n_out = F;
        L->moe.up.data = (const uint8_t *)gu.data + (size_t)F * gu.row_bytes; /* mat_bytes stays 2F rows */
    } else {
        if ((st = hmoe_model_bind_mat(md, NAME("ffn_gate_exps.weight"), (int64_t[]){d, F, E}, 3, &L->moe.gate, err)) ||
            (st = hmoe_model_bind_mat(md, NAME("ffn_up_exps.weight"), (int64_t[]){d, F, E}, 3, &L->moe.up, err)))
            return st;
    }
    if ((st = hmoe_model_bind_mat(md, NAME("ffn_down_exps.weight"), (int64_t[]){F, d, E}, 3, &L->moe.down, err)))
        return st;
    L->moe.n_expert_used = c->n_expert_used;
    L->moe.gating = c->arch_entry->moe.gating;
    L->moe.act = c->arch_entry->moe.act;
    return HMOE_OK;
}

/* Shared expert and its sigmoid gate vector (§7). */
static enum hmoe_status bind_shexp(struct hmoe_model *md, int il, struct hmoe_shexp_weights *S,
                                   struct hmoe_err *err) {
    const struct hmoe_model_config *c = &md->cfg;
    const int64_t d = c->n_embd, Fs = c->n_ff_shexp;
    char name[96];
    enum hmoe_status st;
    const float *gv;
    if ((st = hmoe_model_bind_vec(md, NAME("ffn_gate_inp_shexp.weight"), d, true, &gv, err))) return st;
    /* The gate vector as a one-row F32 matrix, so it joins the shared expert's gate/up matmul. */
    S->gate_inp = (struct hmoe_mat){.data = gv, .type = HMOE_TYPE_F32, .n_in = d, .n_out = 1, .n_mat = 1,
                                    .row_bytes = (size_t)d * sizeof(float), .mat_bytes = (size_t)d * sizeof(float),
                                    .name = "ffn_gate_inp_shexp.weight"};
    if ((st = hmoe_model_bind_mat(md, NAME("ffn_gate_shexp.weight"), (int64_t[]){d, Fs}, 2, &S->gate, err)) ||
        (st = hmoe_model_bind_mat(md, NAME("ffn_up_shexp.weight"), (int64_t[]){d, Fs}, 2, &S->up, err)) ||
        (st = hmoe_model_bind_mat(md, NAME("ffn_down_shexp.weight"), (int64_t[]){Fs, d}, 2, &S->down, err)))
        return st;
    return HMOE_OK;
}

/* Gated full attention (§5.1): Q projection holds [query | gate] per head. */
static enum hmoe_status bind_attention(struct hmoe_model *md, int il, struct hmoe_layer_weights *L,
                                       struct hmoe_err *err) {
    const struct hmoe_model_config *c = &md->cfg;
    const int64_t d = c->n_embd, D = c->head_dim, H = c->n_head, Hkv = c->n_head_kv, Dv = c->head_dim_v;
    char name[96];
    enum hmoe_status st;
    if ((st = hmoe_model_bind_mat(md, NAME("attn_q.weight"), (int64_t[]){d, 2 * H * D}, 2, &L->attn_q, err)) ||
        (st = hmoe_model_bind_mat(md, NAME("attn_k.weight"), (int64_t[]){d, Hkv * D}, 2, &L->attn_k, err)) ||
        (st = hmoe_model_bind_mat(md, NAME("attn_v.weight"), (int64_t[]){d, Hkv * Dv}, 2, &L->attn_v, err)) ||
        (st = hmoe_model_bind_vec(md, NAME("attn_q_norm.weight"), D, true, &L->attn_q_norm, err)) ||
        (st = hmoe_model_bind_vec(md, NAME("attn_k_norm.weight"), D, true, &L->attn_k_norm, err)) ||
        (st = hmoe_model_bind_mat(md, NAME("attn_output.weight"), (int64_t[]){H * Dv, d}, 2, &L->attn_output, err)))
        return st;
    return HMOE_OK;
}

/* Gated DeltaNet (§5.2). */
static enum hmoe_status bind_gdn(struct hmoe_model *md, int il, struct hmoe_gdn_weights *G, struct hmoe_err *err) {
    const struct hmoe_model_config *c = &md->cfg;
    const int64_t d = c->n_embd, Dk = c->ssm_head_dim, Hk = c->ssm_n_k_head, Hv = c->ssm_n_v_head;
    const int64_t key_dim = Hk * Dk, value_dim = Hv * Dk, conv_dim = 2 * key_dim + value_dim;
    char name[96];
    enum hmoe_status st;
    if ((st = hmoe_model_bind_mat(md, NAME("attn_qkv.weight"), (int64_t[]){d, conv_dim}, 2, &G->qkv, err)) ||
        (st = hmoe_model_bind_mat(md, NAME("attn_gate.weight"), (int64_t[]){d, value_dim}, 2, &G->gate, err)) ||
        (st = bind_f32(md, NAME("ssm_conv1d.weight"), (int64_t[]){c->ssm_conv_kernel, conv_dim}, 2, &G->conv1d, err)) ||
        (st = hmoe_model_bind_vec(md, NAME("ssm_dt.bias"), Hv, true, &G->dt_bias, err)) ||
        (st = hmoe_model_bind_vec(md, NAME("ssm_a"), Hv, true, &G->a, err)) ||
        (st = hmoe_model_bind_mat(md, NAME("ssm_alpha.weight"), (int64_t[]){d, Hv}, 2, &G->alpha, err)) ||
        (st = hmoe_model_bind_mat(md, NAME("ssm_beta.weight"), (int64_t[]){d, Hv}, 2, &G->beta, err)) ||
        (st = hmoe_model_bind_vec(md, NAME("ssm_norm.weight"), Dk, true, &G->norm, err)) ||
        (st = hmoe_model_bind_mat(md, NAME("ssm_out.weight"), (int64_t[]){value_dim, d}, 2, &G->out, err)))
        return st;
    return HMOE_OK;
}

enum hmoe_status hmoe_qwen35_bind_attn_ffn(struct hmoe_model *md, int il, struct hmoe_layer_weights *L,
                                           struct hmoe_err *err) {
    const int64_t d = md->cfg.n_embd;
    char name[96];
    enum hmoe_status st;
    L->recurrent = false;
    if ((st = hmoe_model_bind_vec(md, NAME("attn_norm.weight"), d, true, &L->attn_norm, err)) ||
        (st = bind_attention(md, il, L, err)) ||
        (st = hmoe_model_bind_vec(md, NAME("post_attention_norm.weight"), d, true, &L->ffn_norm, err)) ||
        (st = bind_experts(md, il, L, err)))
        return st;
    return bind_shexp(md, il, &L->shexp, err);
}

enum hmoe_status hmoe_qwen35_bind_layer(struct hmoe_model *md, int il, struct hmoe_err *err) {
    const struct hmoe_model_config *c = &md->cfg;
    struct hmoe_layer_weights *L = &md->w.layers[il];
    const int64_t d = c->n_embd;
    char name[96];
    enum hmoe_status st;
    L->recurrent = (il + 1) % c->full_attn_interval != 0; /* §1: full attention iff (i+1) % interval == 0 */
    if ((st = hmoe_model_bind_vec(md, NAME("attn_norm.weight"), d, true, &L->attn_norm, err))) return st;
    st = L->recurrent ? bind_gdn(md, il, &L->gdn, err) : bind_attention(md, il, L, err);
    if (st) return st;
    /* post_attention_norm is the pre-FFN norm (§1, trap 4). */
    if ((st = hmoe_model_bind_vec(md, NAME("post_attention_norm.weight"), d, true, &L->ffn_norm, err))) return st;
    if ((st = bind_experts(md, il, L, err))) return st;
    return bind_shexp(md, il, &L->shexp, err);
}
