/* nemotron_h.h — private to the nemotron_h / nemotron_h_moe files of src/model/arch
 * (nemotron_h_moe.md): the layer kinds, the per-layer metadata they come from, the binding of
 * one layer's tensors and the forward pass of a micro-batch.
 */
#ifndef HMOE_MODEL_ARCH_NEMOTRON_H_H
#define HMOE_MODEL_ARCH_NEMOTRON_H_H

#include "model/model_impl.h"
#include "model/recurrent_impl.h"

/* One block per layer, one mixer per block (§1): the kind follows from the layer's
 * head_count_kv and feed_forward_length entries. */
enum hmoe_nemotron_kind {
    HMOE_NEMOTRON_MAMBA = 0, /* 0, 0 */
    HMOE_NEMOTRON_ATTN = 1,  /* > 0, 0 */
    HMOE_NEMOTRON_FFN = 2,   /* any, > 0: MoE + shared expert with experts, else dense ReLU² */
};

/* Layer il's entries of the two arrays (a scalar key counts for every layer; an absent
 * head_count_kv means head_count, an absent feed_forward_length 0). */
enum hmoe_status hmoe_nemotron_layer_meta(const struct hmoe_gguf *g, const struct hmoe_model_config *c, int il,
                                          int *n_kv, int *n_ff, struct hmoe_err *err);
enum hmoe_nemotron_kind hmoe_nemotron_kind_of(int n_kv, int n_ff);

/* nemotron_h_config.c — the keys beyond the common set (nemotron_h_moe.md §2). */
enum hmoe_status hmoe_nemotron_read_config(const struct hmoe_gguf *g, struct hmoe_model_config *c,
                                           struct hmoe_err *err);

/* nemotron_h_weights.c — bind the tensors of main layer il for its kind (§3). */
enum hmoe_status hmoe_nemotron_bind_layer(struct hmoe_model *md, int il, struct hmoe_err *err);

/* nemotron_h_mamba.c — the recurrent state's shapes: conv (K-1) x conv_dim and n_head x P x N
 * per Mamba layer, and the micro-batch scratch of the mixers and FFN layers. */
void hmoe_nemotron_rec_dims(const struct hmoe_model_config *c, struct hmoe_rec_dims *out);

/* nemotron_h_mamba.c — the Mamba-2 mixer of layer il for the micro-batch: rs->xn in, rs->out out. */
void hmoe_nemotron_mamba(struct hmoe_ctx *c, int il, int n);

/* nemotron_h.c — one micro-batch through the whole model. */
enum hmoe_status hmoe_nemotron_forward(struct hmoe_ctx *c, const int32_t *ids, int n, int pos0, enum hmoe_logits which,
                                       float *logits, struct hmoe_err *err);

/* nemotron_h_gpu_init.c — the entry's GPU hooks (arch.h): checks of what the kernels take, VRAM of
 * the architecture's own buffers, upload + state, free, the report line. */
struct hmoe_gpu;
enum hmoe_status hmoe_gpu_nem_check(const struct hmoe_model *m, struct hmoe_err *err);
uint64_t hmoe_gpu_nem_bytes(const struct hmoe_ctx *c);
enum hmoe_status hmoe_gpu_nem_init(struct hmoe_ctx *c, struct hmoe_err *err);
void hmoe_gpu_nem_free(struct hmoe_gpu *g, int n_layer);
void hmoe_gpu_nem_report(const struct hmoe_gpu *g, char *buf, size_t cap);
/* nemotron_h_gpu.c — one layer for n tokens on the GPU (the entry's gpu->layer). */
enum hmoe_status hmoe_nemotron_gpu_layer(struct hmoe_ctx *c, int il, int64_t n, bool decode, struct hmoe_err *err);

#endif
