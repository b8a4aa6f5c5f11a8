/* qwen3moe.h — private to the qwen3moe files of src/model/arch (qwen3moe.md): the layer
 * binder and the CPU forward pass its table entry (qwen3moe.c) points to.
 */
#ifndef HMOE_MODEL_ARCH_QWEN3MOE_H
#define HMOE_MODEL_ARCH_QWEN3MOE_H

#include "model/model_impl.h"

/* qwen3moe_weights.c — one main layer: attention (split or fused Q/K/V), Q/K norms, router
 * and the three expert stacks (§2). */
enum hmoe_status hmoe_qwen3moe_bind_layer(struct hmoe_model *md, int il, struct hmoe_err *err);

/* qwen3moe_forward.c — one micro-batch through the whole model. */
enum hmoe_status hmoe_qwen3moe_forward(struct hmoe_ctx *c, const int32_t *ids, int n, int pos0,
                                       enum hmoe_logits which, float *logits, struct hmoe_err *err);

#endif
