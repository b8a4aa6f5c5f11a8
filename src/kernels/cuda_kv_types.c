/* cuda_kv_types.c — which types the GPU KV cache takes and how big a layer's K or V tensor is
 * (cuda.h), in every build: the VRAM plan and the --gpu checks ask before any device exists.
 * The list matches the codecs of cuda_kv_codec.cuh; a row is head_dim elements in the type's
 * GGUF block layout, as the CPU cache holds it. */
#include "hmoe/cuda.h"
#include "hmoe/types.h"

bool hmoe_cuda_kv_type_ok(enum hmoe_type t) {
    switch (t) {
    case HMOE_TYPE_F32:
    case HMOE_TYPE_F16:
    case HMOE_TYPE_BF16:
    case HMOE_TYPE_Q8_0:
    case HMOE_TYPE_Q4_0:
    case HMOE_TYPE_Q4_1:
    case HMOE_TYPE_Q5_0:
    case HMOE_TYPE_Q5_1:
    case HMOE_TYPE_IQ4_NL: return true;
    default: return false;
    }
}

size_t hmoe_cuda_kv_bytes(enum hmoe_type type, int64_t n_ctx, int n_head_kv, int head_dim) {
    if (!hmoe_cuda_kv_type_ok(type) || head_dim <= 0 || head_dim % 32 || n_head_kv <= 0 || n_ctx <= 0) return 0;
    return hmoe_row_bytes(type, head_dim) * (size_t)n_head_kv * (size_t)n_ctx;
}
