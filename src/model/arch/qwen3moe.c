/* qwen3moe.c — the qwen3moe table entry (qwen3moe.md): attention with per-head Q/K RMSNorm
 * and NEOX RoPE over the whole head, a softmax-routed SwiGLU MoE block in every layer, no
 * shared expert. Every key it reads is in the common set (config.c); the one relation of its
 * own is checked here. On the GPU it runs the backend's plain attention + MoE layer step.
 */
#include "model/arch/qwen3moe.h"
#include "model/gpu_impl.h"

/* qwen3moe rotates the whole head (§5); a partial rotation is another architecture. */
static enum hmoe_status read_config(const struct hmoe_gguf *g, struct hmoe_model_config *c, struct hmoe_err *err) {
    if (c->n_rot != c->head_dim)
        return HMOE_RAISE(err, HMOE_ERR_UNSUPPORTED,
                          "%s: rope.dimension_count %d differs from key_length %d; %s rotates the whole head", g->path,
                          c->n_rot, c->head_dim, c->arch);
    return HMOE_OK;
}

static const struct hmoe_arch_gpu qwen3moe_gpu = {
    .layer = hmoe_gpu_layer_attn_moe,
    .fused_decode = true,
};

const struct hmoe_arch hmoe_arch_qwen3moe = {
    .names = {"qwen3moe"},
    .summary = "Qwen3-MoE: attention + routed SwiGLU experts",
    .doc = "qwen3moe.md",
    .read_config = read_config,
    .bind_layer = hmoe_qwen3moe_bind_layer,
    .forward_cpu = hmoe_qwen3moe_forward,
    .gpu = &qwen3moe_gpu,
    .moe = {.gating = HMOE_MOE_SOFTMAX, .act = HMOE_MOE_SWIGLU},
    .chat_family = HMOE_CHAT_TEMPLATE_UNKNOWN, /* its files carry the Qwen3 template */
    .tokenizer_pre = "qwen2",
};
