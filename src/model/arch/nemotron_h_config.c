/* nemotron_h_config.c — the nemotron_h_moe / nemotron_h table entry and the keys of its files
 * (nemotron_h_moe.md §2): MTP blocks, the per-layer head_count_kv / feed_forward_length
 * arrays (they decide the layer kinds, §1), the optional expert keys, the Mamba-2 sizes and
 * the relations the forward pass relies on. Every failure names the file and the key.
 */
#include <stdio.h>
#include <string.h>

#include "model/arch/nemotron_h.h"

/* Layer il's value of "{arch}.{suffix}": an array entry, or a scalar for every layer. */
static enum hmoe_status layer_value(const struct hmoe_gguf *g, const struct hmoe_model_config *c, const char *suffix,
                                    int il, int dflt, int *out, struct hmoe_err *err) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", c->arch, suffix);
    const struct hmoe_gguf_kv *kv = hmoe_gguf_find_kv(g, key);
    int64_t v = dflt;
    if (kv && kv->type == HMOE_GGUF_ARRAY) {
        const uint64_t want = (uint64_t)(c->n_layer + c->n_nextn);
        if (kv->arr_type == HMOE_GGUF_STRING || kv->arr_type == HMOE_GGUF_ARRAY || kv->arr_n != want)
            return HMOE_RAISE(err, HMOE_ERR_FORMAT, "%s: key '%s' must be an array of %llu integers (one per block)",
                              g->path, key, (unsigned long long)want);
        v = hmoe_gguf_arr_i64(kv, (uint64_t)il);
    } else if (kv) {
        enum hmoe_status st = hmoe_gguf_get_i64(g, key, &v, err);
        if (st) return st;
    }
    if (v < 0 || v > (1 << 24))
        return HMOE_RAISE(err, HMOE_ERR_FORMAT, "%s: key '%s' = %lld at layer %d is out of range (0..16777216)",
                          g->path, key, (long long)v, il);
    *out = (int)v;
    return HMOE_OK;
}

enum hmoe_status hmoe_nemotron_layer_meta(const struct hmoe_gguf *g, const struct hmoe_model_config *c, int il,
                                          int *n_kv, int *n_ff, struct hmoe_err *err) {
    enum hmoe_status st = layer_value(g, c, "attention.head_count_kv", il, c->n_head, n_kv, err);
    return st ? st : layer_value(g, c, "feed_forward_length", il, 0, n_ff, err);
}

enum hmoe_nemotron_kind hmoe_nemotron_kind_of(int n_kv, int n_ff) {
    return n_ff > 0 ? HMOE_NEMOTRON_FFN : n_kv > 0 ? HMOE_NEMOTRON_ATTN : HMOE_NEMOTRON_MAMBA;
}

/* MTP blocks after the main layers (§8): counted in block_count and in both arrays. */
static enum hmoe_status read_nextn(const struct hmoe_gguf *g, struct hmoe_model_config *c, struct hmoe_err *err) {
    char key[128];
    snprintf(key, sizeof key, "%s.nextn_predict_layers", c->arch);
    if (!hmoe_gguf_find_kv(g, key)) return HMOE_OK;
    int64_t v;
    enum hmoe_status st = hmoe_gguf_get_i64(g, key, &v, err);
    if (st) return st;
    if (v < 0 || v >= c->n_layer)
        return HMOE_RAISE(err, HMOE_ERR_FORMAT, "%s: %s = %lld must be below block_count %d", g->path, key,
                          (long long)v, c->n_layer);
    c->n_nextn = (int)v;
    c->n_layer -= c->n_nextn;
    return HMOE_OK;
}

/* Attention layers must agree on Hkv; the FFN layers give the widest dense width. */
static enum hmoe_status read_layers(const struct hmoe_gguf *g, struct hmoe_model_config *c, struct hmoe_err *err) {
    int n_attn = 0, n_ffn = 0;
    for (int il = 0; il < c->n_layer; il++) {
        int hkv, ff;
        enum hmoe_status st = hmoe_nemotron_layer_meta(g, c, il, &hkv, &ff, err);
        if (st) return st;
        const enum hmoe_nemotron_kind kind = hmoe_nemotron_kind_of(hkv, ff);
        if (kind == HMOE_NEMOTRON_ATTN) {
            if (n_attn++ && hkv != c->n_head_kv)
                return HMOE_RAISE(err, HMOE_ERR_UNSUPPORTED,
                                  "%s: %s.attention.head_count_kv is %d at layer %d but %d at an earlier attention "
                                  "layer; hmoe needs one value for every attention layer",
                                  g->path, c->arch, hkv, il, c->n_head_kv);
            c->n_head_kv = hkv;
        } else if (kind == HMOE_NEMOTRON_FFN) {
            n_ffn++;
            if (ff > c->n_ff_dense) c->n_ff_dense = ff;
        }
    }
    if (n_attn == 0) c->n_head_kv = c->n_head; /* sizes only: no layer has a KV cache */
    if (n_ffn == 0) c->n_ff_dense = 0;
    return HMOE_OK;
}

/* Routed + shared experts (§2, §6.1); a nemotron_h file has none. */
static enum hmoe_status read_experts(const struct hmoe_gguf *g, struct hmoe_model_config *c, struct hmoe_err *err) {
    const char *a = c->arch;
    enum hmoe_status st;
    if ((st = hmoe_model_cfg_int(g, a, "expert_count", strcmp(a, "nemotron_h_moe") == 0, 0, &c->n_expert, err)))
        return st;
    if (c->n_expert == 0) {
        c->n_ff_exp = 0;
        return HMOE_OK;
    }
    if ((st = hmoe_model_cfg_int(g, a, "expert_used_count", true, 0, &c->n_expert_used, err)) ||
        (st = hmoe_model_cfg_int(g, a, "expert_feed_forward_length", false,
                                 c->n_ff_dense / (c->n_expert_used ? c->n_expert_used : 1), &c->n_ff_exp, err)) ||
        (st = hmoe_model_cfg_int(g, a, "expert_shared_feed_forward_length", false, 0, &c->n_ff_shexp, err)) ||
        (st = hmoe_model_cfg_float(g, a, "expert_weights_scale", false, 0.0f, &c->exp_w_scale, err)) ||
        (st = hmoe_model_cfg_int(g, a, "expert_group_count", false, 1, &c->exp_n_group, err)) ||
        (st = hmoe_model_cfg_int(g, a, "expert_group_used_count", false, c->exp_n_group, &c->exp_n_group_used, err)) ||
        (st = hmoe_model_cfg_int(g, a, "moe_latent_size", false, 0, &c->moe_latent, err)))
        return st;
    char key[128];
    snprintf(key, sizeof key, "%s.expert_weights_norm", a);
    c->exp_w_norm = false;
    if (hmoe_gguf_find_kv(g, key) && (st = hmoe_gguf_get_bool(g, key, &c->exp_w_norm, err))) return st;
    if (c->exp_n_group > 1 && (c->n_expert % c->exp_n_group != 0 || c->exp_n_group > 256 ||
                               c->exp_n_group_used > c->exp_n_group))
        return HMOE_RAISE(err, HMOE_ERR_FORMAT,
                          "%s: expert_group_count %d / expert_group_used_count %d do not split %d experts", g->path,
                          c->exp_n_group, c->exp_n_group_used, c->n_expert);
    /* The dense FFN width array holds the expert width at MoE layers (§2); nothing dense runs. */
    c->n_ff_dense = 0;
    return HMOE_OK;
}

/* Mamba-2 sizes (§2 derived values and asserts). */
static enum hmoe_status read_ssm(const struct hmoe_gguf *g, struct hmoe_model_config *c, struct hmoe_err *err) {
    const char *a = c->arch;
    enum hmoe_status st;
    if ((st = hmoe_model_cfg_int(g, a, "ssm.conv_kernel", true, 0, &c->ssm_conv_kernel, err)) ||
        (st = hmoe_model_cfg_int(g, a, "ssm.inner_size", true, 0, &c->ssm_d_inner, err)) ||
        (st = hmoe_model_cfg_int(g, a, "ssm.state_size", true, 0, &c->ssm_d_state, err)) ||
        (st = hmoe_model_cfg_int(g, a, "ssm.time_step_rank", true, 0, &c->ssm_n_head, err)) ||
        (st = hmoe_model_cfg_int(g, a, "ssm.group_count", true, 0, &c->ssm_n_group, err)))
        return st;
    if (c->ssm_d_inner % c->ssm_n_head || c->ssm_d_inner % c->ssm_n_group || c->ssm_n_head % c->ssm_n_group)
        return HMOE_RAISE(err, HMOE_ERR_FORMAT,
                          "%s: ssm.inner_size %d, ssm.time_step_rank %d (heads) and ssm.group_count %d must divide "
                          "evenly (inner by heads and groups, heads by groups)",
                          g->path, c->ssm_d_inner, c->ssm_n_head, c->ssm_n_group);
    if (c->ssm_conv_kernel < 2 || c->ssm_conv_kernel > 16)
        return HMOE_RAISE(err, HMOE_ERR_UNSUPPORTED, "%s: ssm.conv_kernel %d is out of range (2..16)", g->path,
                          c->ssm_conv_kernel);
    return HMOE_OK;
}

enum hmoe_status hmoe_nemotron_read_config(const struct hmoe_gguf *g, struct hmoe_model_config *c,
                                           struct hmoe_err *err) {
    enum hmoe_status st;
    if ((st = read_nextn(g, c, err)) || (st = read_layers(g, c, err)) || (st = read_experts(g, c, err)) ||
        (st = read_ssm(g, c, err)))
        return st;
    if (c->head_dim_v != c->head_dim)
        return HMOE_RAISE(err, HMOE_ERR_FORMAT, "%s: attention.value_length %d differs from key_length %d (§2: equal)",
                          g->path, c->head_dim_v, c->head_dim);
    /* No RoPE anywhere (§5): rope.dimension_count is junk (d/H, may exceed key_length). */
    c->n_rot = 0;
    return HMOE_OK;
}

/* The GPU layer step runs its own router and ungated experts (the shared FFN of gpu_forward.c
 * is softmax + SwiGLU); the fused launchers assume that FFN, so they stay off. */
static const struct hmoe_arch_gpu nemotron_h_gpu = {
    .check = hmoe_gpu_nem_check,
    .vram_bytes = hmoe_gpu_nem_bytes,
    .init = hmoe_gpu_nem_init,
    .free = hmoe_gpu_nem_free,
    .report = hmoe_gpu_nem_report,
    .layer = hmoe_nemotron_gpu_layer,
    .fused_decode = false,
    .own_experts = true,
};

/* One entry for both names: nemotron_h is the same graph with dense FFN layers instead of
 * MoE ones (§6.3), told apart by the layer kinds. */
const struct hmoe_arch hmoe_arch_nemotron_h = {
    .names = {"nemotron_h_moe", "nemotron_h"},
    .summary = "Nemotron-H: Mamba-2 + attention + (latent) sigmoid-routed ReLU² experts or dense FFN",
    .doc = "nemotron_h_moe.md",
    .own_layer_keys = true,
    .read_config = hmoe_nemotron_read_config,
    .bind_layer = hmoe_nemotron_bind_layer,
    .forward_cpu = hmoe_nemotron_forward,
    .rec_dims = hmoe_nemotron_rec_dims,
    .gpu = &nemotron_h_gpu,
    .moe = {.gating = HMOE_MOE_SIGMOID, .act = HMOE_MOE_RELU2, .shared_expert = true, .latent = true},
    .chat_family = HMOE_CHAT_TEMPLATE_UNKNOWN, /* its files carry the Nemotron-3 template */
    .tokenizer_pre = "pixtral",
};
