/* qwen35moe.c — the qwen35moe table entry (qwen35moe.md): Gated DeltaNet on three of every
 * four layers, gated full attention with partial M-RoPE on the others, routed SwiGLU experts
 * plus a sigmoid-gated shared expert in every layer, recurrent state per context; and the keys
 * it reads beyond the common set (§1-§2: MTP blocks, layer pattern, shared expert, DeltaNet
 * sizes, RoPE sections).
 */
#include <stdio.h>

#include "model/arch/qwen35moe.h"

/* qwen35moe.md §1-§2: MTP blocks, layer pattern, shared expert, Gated DeltaNet sizes and
 * the M-RoPE sections (required; text-only tokens make them plain partial NEOX, §6). */
static enum hmoe_status read_config(const struct hmoe_gguf *g, struct hmoe_model_config *c, struct hmoe_err *err) {
    const char *a = c->arch;
    char key[128];
    enum hmoe_status st;
    snprintf(key, sizeof key, "%s.nextn_predict_layers", a);
    const struct hmoe_gguf_kv *kv = hmoe_gguf_find_kv(g, key);
    if (kv) {
        int64_t v;
        if ((st = hmoe_gguf_get_i64(g, key, &v, err))) return st;
        if (v < 0 || v >= c->n_layer)
            return HMOE_RAISE(err, HMOE_ERR_FORMAT, "%s: %s = %lld must be below block_count %d", g->path, key,
                              (long long)v, c->n_layer);
        c->n_nextn = (int)v;
    }
    c->n_layer -= c->n_nextn; /* MTP blocks are appended after the main layers (§1, §8) */
    if ((st = hmoe_model_cfg_int(g, a, "full_attention_interval", false, 4, &c->full_attn_interval, err)) ||
        (st = hmoe_model_cfg_int(g, a, "expert_shared_feed_forward_length", true, 0, &c->n_ff_shexp, err)) ||
        (st = hmoe_model_cfg_int(g, a, "ssm.conv_kernel", true, 0, &c->ssm_conv_kernel, err)) ||
        (st = hmoe_model_cfg_int(g, a, "ssm.state_size", true, 0, &c->ssm_head_dim, err)) ||
        (st = hmoe_model_cfg_int(g, a, "ssm.group_count", true, 0, &c->ssm_n_k_head, err)) ||
        (st = hmoe_model_cfg_int(g, a, "ssm.time_step_rank", true, 0, &c->ssm_n_v_head, err)))
        return st;
    int inner = 0;
    if ((st = hmoe_model_cfg_int(g, a, "ssm.inner_size", true, 0, &inner, err))) return st;
    if (inner != c->ssm_n_v_head * c->ssm_head_dim)
        return HMOE_RAISE(err, HMOE_ERR_UNSUPPORTED,
                          "%s: ssm.inner_size %d is not time_step_rank %d x state_size %d; hmoe (like llama.cpp) "
                          "needs the value head size to equal the key head size",
                          g->path, inner, c->ssm_n_v_head, c->ssm_head_dim);
    if (c->ssm_n_v_head % c->ssm_n_k_head != 0)
        return HMOE_RAISE(err, HMOE_ERR_FORMAT, "%s: ssm.time_step_rank %d is not a multiple of ssm.group_count %d",
                          g->path, c->ssm_n_v_head, c->ssm_n_k_head);
    if (c->ssm_conv_kernel < 2 || c->ssm_conv_kernel > 16)
        return HMOE_RAISE(err, HMOE_ERR_UNSUPPORTED, "%s: ssm.conv_kernel %d is out of range (2..16)", g->path,
                          c->ssm_conv_kernel);
    if (c->head_dim_v != c->head_dim)
        return HMOE_RAISE(err, HMOE_ERR_UNSUPPORTED,
                          "%s: attention.value_length %d differs from key_length %d; the output gate of %s needs them "
                          "equal",
                          g->path, c->head_dim_v, c->head_dim, a);
    snprintf(key, sizeof key, "%s.attention.recurrent_layers", a);
    if (hmoe_gguf_find_kv(g, key))
        return HMOE_RAISE(err, HMOE_ERR_UNSUPPORTED,
                          "%s: %s (an explicit layer pattern) is not supported yet; hmoe uses full_attention_interval",
                          g->path, key);
    snprintf(key, sizeof key, "%s.rope.dimension_sections", a);
    kv = hmoe_gguf_find_kv(g, key);
    if (!kv) return HMOE_RAISE(err, HMOE_ERR_NOT_FOUND, "%s: required metadata key '%s' is missing", g->path, key);
    if (kv->type != HMOE_GGUF_ARRAY || kv->arr_n < 3 || kv->arr_n > 4 || kv->arr_type == HMOE_GGUF_STRING ||
        kv->arr_type == HMOE_GGUF_ARRAY)
        return HMOE_RAISE(err, HMOE_ERR_FORMAT, "%s: '%s' must be an array of 3 or 4 integers", g->path, key);
    int pairs = 0;
    for (uint64_t i = 0; i < kv->arr_n; i++) {
        int64_t v = hmoe_gguf_arr_i64(kv, i);
        if (v < 0 || v > 4096)
            return HMOE_RAISE(err, HMOE_ERR_FORMAT, "%s: '%s'[%llu] = %lld is out of range", g->path, key,
                              (unsigned long long)i, (long long)v);
        c->rope_sections[i] = (int)v;
        pairs += (int)v;
    }
    if (pairs > c->n_rot / 2)
        return HMOE_RAISE(err, HMOE_ERR_FORMAT, "%s: '%s' covers %d rotation pairs but rope.dimension_count %d has %d",
                          g->path, key, pairs, c->n_rot, c->n_rot / 2);
    return HMOE_OK;
}

static const struct hmoe_arch_gpu qwen35moe_gpu = {
    .check = hmoe_gpu_q35_check,
    .vram_bytes = hmoe_gpu_q35_bytes,
    .init = hmoe_gpu_q35_init,
    .free = hmoe_gpu_q35_free,
    .report = hmoe_gpu_q35_report,
    .layer = hmoe_qwen35_gpu_layer,
    /* the shared expert is added after the routed ones, which the fused next-norm would skip */
    .fused_decode = false,
};

const struct hmoe_arch hmoe_arch_qwen35moe = {
    .names = {"qwen35moe"},
    .summary = "Qwen3.5/3.6 MoE: Gated DeltaNet + gated attention, routed + shared experts",
    .doc = "qwen35moe.md",
    .read_config = read_config,
    .bind_layer = hmoe_qwen35_bind_layer,
    .forward_cpu = hmoe_qwen35moe_forward,
    .rec_dims = hmoe_qwen35_rec_dims,
    .gpu = &qwen35moe_gpu,
    .mtp = &hmoe_qwen35_mtp,
    .moe = {.gating = HMOE_MOE_SOFTMAX, .act = HMOE_MOE_SWIGLU, .shared_expert = true},
    .chat_family = HMOE_CHAT_TEMPLATE_QWEN35,
    .tokenizer_pre = "qwen35",
};
