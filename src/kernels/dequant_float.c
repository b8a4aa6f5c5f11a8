/* dequant_float.c — reference "dequantizers" of the plain float types F32, F16, BF16
 * (quants.md §2, §0.2). Exact conversions through hmoe/fp16.h; F16 keeps subnormals,
 * Inf and NaN. */
#include <string.h>

#include "kernels/quant_ref_impl.h"

void hmoe_ref_dequant_f32(const void *src, float *dst, int64_t n) { memcpy(dst, src, (size_t)n * sizeof(float)); }

void hmoe_ref_dequant_f16(const void *src, float *dst, int64_t n) {
    const uint8_t *p = src;
    for (int64_t i = 0; i < n; i++) dst[i] = hmoe_fp16_to_f32(hmoe_ld_u16le(p + 2 * i));
}

void hmoe_ref_dequant_bf16(const void *src, float *dst, int64_t n) {
    const uint8_t *p = src;
    for (int64_t i = 0; i < n; i++) dst[i] = hmoe_bf16_to_f32(hmoe_ld_u16le(p + 2 * i));
}
