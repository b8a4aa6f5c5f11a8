/* nemotron_h_weights.c — bind one nemotron_h / nemotron_h_moe main layer (nemotron_h_moe.md
 * §3): every layer has attn_norm as its pre-norm, then the tensors of its one mixer: Mamba-2,
 * attention without RoPE (split or fused Q/K/V, optional biases), or the FFN: routed ungated
 * ReLU² experts with a sigmoid router, selection bias, optional latent projections and the
 * shared expert, or a dense ReLU² MLP when the file has no experts. Shapes come from the
 * config; a wrong one is named with what the architecture needs (weights.c helpers). MTP
 * blocks (blk.n_layer..) are never bound.
 */
#include <stdint.h>
#include <stdio.h>

#include "model/arch/nemotron_h.h"

#define NAME(suffix) (snprintf(name, sizeof name, "blk.%d.%s", il, suffix), name)

static enum hmoe_status bind_mamba(struct hmoe_model *md, int il, struct hmoe_mamba2_weights *M,
                                   struct hmoe_err *err) {
    const struct hmoe_model_config *c = &md->cfg;
    const int64_t d = c->n_embd, di = c->ssm_d_inner, H = c->ssm_n_head, G = c->ssm_n_group,
                  conv_dim = di + 2 * G * c->ssm_d_state, d_in_proj = di + conv_dim + H;
    char name[96];
    enum hmoe_status st;
    if ((st = hmoe_model_bind_mat(md, NAME("ssm_in.weight"), (int64_t[]){d, d_in_proj}, 2, &M->in, err)) ||
        (st = hmoe_model_bind_f32(md, NAME("ssm_conv1d.weight"), (int64_t[]){c->ssm_conv_kernel, conv_dim}, 2, true,
                                  &M->conv1d, err)) ||
        (st = hmoe_model_bind_vec(md, NAME("ssm_conv1d.bias"), conv_dim, false, &M->conv_bias, err)) ||
        (st = hmoe_model_bind_vec(md, NAME("ssm_dt.bias"), H, true, &M->dt_bias, err)) ||
        (st = hmoe_model_bind_f32(md, NAME("ssm_a"), (int64_t[]){1, H}, 2, true, &M->a, err)) ||
        (st = hmoe_model_bind_f32(md, NAME("ssm_d"), (int64_t[]){1, H}, 2, true, &M->d, err)) ||
        (st = hmoe_model_bind_f32(md, NAME("ssm_norm.weight"), (int64_t[]){di / G, G}, 2, true, &M->norm, err)) ||
        (st = hmoe_model_bind_mat(md, NAME("ssm_out.weight"), (int64_t[]){di, d}, 2, &M->out, err)))
        return st;
    return HMOE_OK;
}

/* Q/K/V as three tensors or one fused attn_qkv {d, (H + 2 Hkv) D} split into row ranges. */
static enum hmoe_status bind_attention(struct hmoe_model *md, int il, struct hmoe_layer_weights *L,
                                       struct hmoe_err *err) {
    const struct hmoe_model_config *c = &md->cfg;
    const int64_t d = c->n_embd, nq = (int64_t)c->n_head * c->head_dim, nk = (int64_t)c->n_head_kv * c->head_dim;
    char name[96];
    enum hmoe_status st;
    if (hmoe_gguf_find_tensor(md->gguf, NAME("attn_qkv.weight"))) {
        struct hmoe_mat fused;
        const float *bias;
        if ((st = hmoe_model_bind_mat(md, name, (int64_t[]){d, nq + 2 * nk}, 2, &fused, err)) ||
            (st = hmoe_model_bind_vec(md, NAME("attn_qkv.bias"), nq + 2 * nk, false, &bias, err)))
            return st;
        L->attn_q = L->attn_k = L->attn_v = fused;
        L->attn_q.n_out = nq;
        L->attn_k.n_out = L->attn_v.n_out = nk;
        L->attn_k.data = (const uint8_t *)fused.data + (size_t)nq * fused.row_bytes;
        L->attn_v.data = (const uint8_t *)fused.data + (size_t)(nq + nk) * fused.row_bytes;
        if (bias) L->attn_q_bias = bias, L->attn_k_bias = bias + nq, L->attn_v_bias = bias + nq + nk;
    } else {
        if ((st = hmoe_model_bind_mat(md, NAME("attn_q.weight"), (int64_t[]){d, nq}, 2, &L->attn_q, err)) ||
            (st = hmoe_model_bind_mat(md, NAME("attn_k.weight"), (int64_t[]){d, nk}, 2, &L->attn_k, err)) ||
            (st = hmoe_model_bind_mat(md, NAME("attn_v.weight"), (int64_t[]){d, nk}, 2, &L->attn_v, err)) ||
            (st = hmoe_model_bind_vec(md, NAME("attn_q.bias"), nq, false, &L->attn_q_bias, err)) ||
            (st = hmoe_model_bind_vec(md, NAME("attn_k.bias"), nk, false, &L->attn_k_bias, err)) ||
            (st = hmoe_model_bind_vec(md, NAME("attn_v.bias"), nk, false, &L->attn_v_bias, err)))
            return st;
    }
    if ((st = hmoe_model_bind_mat(md, NAME("attn_output.weight"), (int64_t[]){nq, d}, 2, &L->attn_output, err)) ||
        (st = hmoe_model_bind_vec(md, NAME("attn_output.bias"), d, false, &L->attn_output_bias, err)))
        return st;
    return HMOE_OK;
}

/* Routed experts (§6.1; m = moe_latent_size or d), then the shared expert on the full d. */
static enum hmoe_status bind_moe(struct hmoe_model *md, int il, struct hmoe_layer_weights *L, struct hmoe_err *err) {
    const struct hmoe_model_config *c = &md->cfg;
    const int64_t d = c->n_embd, E = c->n_expert, F = c->n_ff_exp, Fs = c->n_ff_shexp,
                  m = c->moe_latent ? c->moe_latent : d;
    char name[96];
    enum hmoe_status st;
    struct hmoe_moe_weights *W = &L->moe;
    if ((st = hmoe_model_bind_mat(md, NAME("ffn_gate_inp.weight"), (int64_t[]){d, E}, 2, &W->router, err)) ||
        (st = hmoe_model_bind_vec(md, NAME("exp_probs_b.bias"), E, false, &W->sel_bias, err)) ||
        (st = hmoe_model_bind_mat(md, NAME("ffn_up_exps.weight"), (int64_t[]){m, F, E}, 3, &W->up, err)) ||
        (st = hmoe_model_bind_mat(md, NAME("ffn_down_exps.weight"), (int64_t[]){F, m, E}, 3, &W->down, err)))
        return st;
    if (hmoe_gguf_find_tensor(md->gguf, NAME("ffn_gate_exps.weight")))
        return HMOE_RAISE(err, HMOE_ERR_UNSUPPORTED,
                          "%s: %s: %s experts are ungated (up/down only, nemotron_h_moe.md §3); this file is not a "
                          "valid %s conversion",
                          md->gguf->path, name, c->arch, c->arch);
    W->n_expert_used = c->n_expert_used;
    W->gating = c->arch_entry->moe.gating;
    W->act = c->arch_entry->moe.act;
    W->no_renorm = !c->exp_w_norm;
    W->w_scale = c->exp_w_scale;
    W->n_group = c->exp_n_group;
    W->n_group_used = c->exp_n_group_used;
    if (c->moe_latent &&
        ((st = hmoe_model_bind_mat(md, NAME("ffn_latent_down.weight"), (int64_t[]){d, m}, 2, &L->latent_down, err)) ||
         (st = hmoe_model_bind_mat(md, NAME("ffn_latent_up.weight"), (int64_t[]){m, d}, 2, &L->latent_up, err))))
        return st;
    if (Fs > 0 &&
        ((st = hmoe_model_bind_mat(md, NAME("ffn_up_shexp.weight"), (int64_t[]){d, Fs}, 2, &L->shexp.up, err)) ||
         (st = hmoe_model_bind_mat(md, NAME("ffn_down_shexp.weight"), (int64_t[]){Fs, d}, 2, &L->shexp.down, err))))
        return st;
    return HMOE_OK;
}

/* Dense ReLU² MLP of width ff (§6.3), optional biases. */
static enum hmoe_status bind_dense(struct hmoe_model *md, int il, int64_t ff, struct hmoe_layer_weights *L,
                                   struct hmoe_err *err) {
    const int64_t d = md->cfg.n_embd;
    char name[96];
    enum hmoe_status st;
    if ((st = hmoe_model_bind_mat(md, NAME("ffn_up.weight"), (int64_t[]){d, ff}, 2, &L->ffn_up, err)) ||
        (st = hmoe_model_bind_mat(md, NAME("ffn_down.weight"), (int64_t[]){ff, d}, 2, &L->ffn_down, err)) ||
        (st = hmoe_model_bind_vec(md, NAME("ffn_up.bias"), ff, false, &L->ffn_up_bias, err)) ||
        (st = hmoe_model_bind_vec(md, NAME("ffn_down.bias"), d, false, &L->ffn_down_bias, err)))
        return st;
    return HMOE_OK;
}

enum hmoe_status hmoe_nemotron_bind_layer(struct hmoe_model *md, int il, struct hmoe_err *err) {
    const struct hmoe_model_config *c = &md->cfg;
    struct hmoe_layer_weights *L = &md->w.layers[il];
    char name[96];
    int n_kv, n_ff;
    enum hmoe_status st = hmoe_nemotron_layer_meta(md->gguf, c, il, &n_kv, &n_ff, err);
    if (st) return st;
    if ((st = hmoe_model_bind_vec(md, NAME("attn_norm.weight"), c->n_embd, true, &L->attn_norm, err))) return st;
    switch (hmoe_nemotron_kind_of(n_kv, n_ff)) {
    case HMOE_NEMOTRON_MAMBA: L->recurrent = true; return bind_mamba(md, il, &L->mamba, err);
    case HMOE_NEMOTRON_ATTN: return bind_attention(md, il, L, err);
    case HMOE_NEMOTRON_FFN: L->ffn_only = true; return c->n_expert > 0 ? bind_moe(md, il, L, err) : bind_dense(md, il, n_ff, L, err);
    }
    return HMOE_OK;
}
