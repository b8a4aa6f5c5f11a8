/* qwen35moe.h — private to the qwen35moe files of src/model/arch (qwen35moe.md): what its
 * table entry (qwen35moe.c) points to — the layer binder, the recurrent state's shapes, the
 * Gated DeltaNet mixer and the CPU forward pass, and the GPU hooks (qwen35moe_gpu*.c).
 */
#ifndef HMOE_MODEL_ARCH_QWEN35MOE_H
#define HMOE_MODEL_ARCH_QWEN35MOE_H

#include "model/recurrent_impl.h"

/* qwen35moe_weights.c — one main layer (§3). */
enum hmoe_status hmoe_qwen35_bind_layer(struct hmoe_model *md, int il, struct hmoe_err *err);

/* qwen35moe_forward.c — the Gated DeltaNet shapes (§5.2). */
void hmoe_qwen35_rec_dims(const struct hmoe_model_config *c, struct hmoe_rec_dims *out);
/* qwen35moe_forward.c — Gated DeltaNet mixer of layer il: rs->xn in, rs->out out (§5.2-§5.3). */
void hmoe_qwen35_deltanet(struct hmoe_ctx *c, int il, int n);
/* qwen35moe_forward.c — routed experts + gated shared expert of layer L: rs->xn in, rs->out out (§7). */
enum hmoe_status hmoe_qwen35_ffn(struct hmoe_ctx *c, const struct hmoe_layer_weights *L, int n, struct hmoe_err *err);
/* qwen35moe_weights.c — the gated full-attention set, the experts and the shared expert of
 * file layer il into *L (a main attention layer and the MTP block share them, §3). */
enum hmoe_status hmoe_qwen35_bind_attn_ffn(struct hmoe_model *md, int il, struct hmoe_layer_weights *L,
                                           struct hmoe_err *err);
/* qwen35moe_mtp.c — the MTP block (§8), the entry's mtp hooks. */
extern const struct hmoe_arch_mtp hmoe_qwen35_mtp;
/* qwen35moe_forward.c — one micro-batch through the whole model (updates the recurrent state). */
enum hmoe_status hmoe_qwen35moe_forward(struct hmoe_ctx *c, const int32_t *ids, int n, int pos0,
                                        enum hmoe_logits which, float *logits, struct hmoe_err *err);

/* qwen35moe_gpu_init.c / qwen35moe_gpu.c — the GPU hooks of the entry (arch.h). */
enum hmoe_status hmoe_gpu_q35_check(const struct hmoe_model *m, struct hmoe_err *err);
uint64_t hmoe_gpu_q35_bytes(const struct hmoe_ctx *c);
enum hmoe_status hmoe_gpu_q35_init(struct hmoe_ctx *c, struct hmoe_err *err);
void hmoe_gpu_q35_free(struct hmoe_gpu *g, int n_layer);
void hmoe_gpu_q35_report(const struct hmoe_gpu *g, char *buf, size_t cap);
enum hmoe_status hmoe_qwen35_gpu_layer(struct hmoe_ctx *c, int il, int64_t n, bool decode, struct hmoe_err *err);

#endif
