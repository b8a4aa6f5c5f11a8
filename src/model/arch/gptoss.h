/* gptoss.h — private to src/model: the gpt-oss architecture (gpt-oss.md): its extra
 * hyper-parameters, its layer tensors and its forward pass for one micro-batch. The shared
 * pieces it calls (attention with sinks and a sliding window, the MoE block with top-k
 * softmax gating and the clamped SwiGLU, RMSNorm, YaRN RoPE) live in model_impl.h and sched.h.
 */
#ifndef HMOE_MODEL_ARCH_GPTOSS_H
#define HMOE_MODEL_ARCH_GPTOSS_H

#include "model/model_impl.h"

/* gptoss.c — the keys beyond the common set: the sliding window (required), its layer
 * period, the SWA RoPE base (must equal the full layers'), the whole head rotated. */
enum hmoe_status hmoe_gptoss_read_config(const struct hmoe_gguf *g, struct hmoe_model_config *c,
                                         struct hmoe_err *err);

/* gptoss.c — one layer's tensors with their biases, sinks and MoE block kind. */
enum hmoe_status hmoe_gptoss_bind_layer(struct hmoe_model *md, int il, struct hmoe_err *err);

/* gptoss_forward.c — one micro-batch through the whole model. */
enum hmoe_status hmoe_gptoss_forward(struct hmoe_ctx *c, const int32_t *ids, int n, int pos0, enum hmoe_logits which,
                                     float *logits, struct hmoe_err *err);

#endif
