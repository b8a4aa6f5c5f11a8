/* vecdot_float.c — reference dot products of the plain float types: F32 x F32,
 * F16 x F16 and BF16 x BF16 (quants.md §8.4: activations were already rounded to the
 * weight's type by quant_act.c). Products of two fp16/bf16 values are exact; the sum is
 * kept in double, so this is at least as accurate as llama.cpp's f32 accumulation. */
#include "kernels/quant_ref_impl.h"

float hmoe_ref_vec_dot_f32(int64_t n, const void *w_row, const void *act_row) {
    const float *w = w_row, *a = act_row;
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) sum += (double)w[i] * (double)a[i];
    return (float)sum;
}

float hmoe_ref_vec_dot_f16(int64_t n, const void *w_row, const void *act_row) {
    const uint8_t *w = w_row, *a = act_row;
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++)
        sum += (double)hmoe_fp16_to_f32(hmoe_ld_u16le(w + 2 * i)) * (double)hmoe_fp16_to_f32(hmoe_ld_u16le(a + 2 * i));
    return (float)sum;
}

float hmoe_ref_vec_dot_bf16(int64_t n, const void *w_row, const void *act_row) {
    const uint8_t *w = w_row, *a = act_row;
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++)
        sum += (double)hmoe_bf16_to_f32(hmoe_ld_u16le(w + 2 * i)) * (double)hmoe_bf16_to_f32(hmoe_ld_u16le(a + 2 * i));
    return (float)sum;
}
