/* quant_act.c — reference activation quantizers, the vec_dot_type conversions of
 * quants.md §8: F32 (copy), F16 / BF16 (round to nearest even), Q8_0 / Q8_1 (§8.1, §8.2,
 * llama.cpp's x86 path) and Q8_K (§8.3). They must reproduce llama.cpp's bytes exactly
 * (fixtures/kernels/<TYPE>.json `x_quant_hex`): every matmul quantizes its input first. */
#include <math.h>
#include <string.h>

#include "kernels/quant_ref_impl.h"

void hmoe_ref_quantize_f32(const float *src, void *dst, int64_t n) { memcpy(dst, src, (size_t)n * sizeof(float)); }

void hmoe_ref_quantize_f16(const float *src, void *dst, int64_t n) {
    uint8_t *p = dst;
    for (int64_t i = 0; i < n; i++) {
        uint16_t h = hmoe_f32_to_fp16(src[i]);
        p[2 * i] = (uint8_t)h;
        p[2 * i + 1] = (uint8_t)(h >> 8);
    }
}

void hmoe_ref_quantize_bf16(const float *src, void *dst, int64_t n) {
    uint8_t *p = dst;
    for (int64_t i = 0; i < n; i++) {
        uint16_t h = hmoe_f32_to_bf16(src[i]);
        p[2 * i] = (uint8_t)h;
        p[2 * i + 1] = (uint8_t)(h >> 8);
    }
}

/* One block of 32 the Q8_0 AVX2 way; returns the unrounded d and the quants' sum.
 * This is llama.cpp's AVX2 path, not its portable reference: multiplier 127/amax (not
 * 1/d) and round half to EVEN (not roundf's ties-away), quants.md §8.1. Q8_0.json
 * confirms the multiplier: with 1/fp16(d) 7 of its 768 quants come out one off. Its
 * vectors hold no exact ties, so tests/test_quant_props.c pins ties-to-even on hand-made
 * input. (Q8_K below is the same routine on every CPU.) */
static float q8_block(const float *x, int8_t qs[32], int *sum) {
    float amax = 0.0f;
    for (int j = 0; j < 32; j++) {
        float a = fabsf(x[j]);
        if (a > amax) amax = a;
    }
    float d = amax / 127.0f;
    float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    int s = 0;
    for (int j = 0; j < 32; j++) {
        int q = hmoe_nearest_int_even(x[j] * id);
        qs[j] = (int8_t)(q > 127 ? 127 : q < -128 ? -128 : q); /* saturating pack, as the SIMD code */
        s += qs[j];
    }
    *sum = s;
    return d;
}

void hmoe_ref_quantize_q8_0(const float *src, void *dst, int64_t n) {
    struct hmoe_block_q8_0 *y = dst;
    for (int64_t i = 0; i < n / HMOE_QK_LEGACY; i++, y++, src += HMOE_QK_LEGACY) {
        int sum;
        float d = q8_block(src, y->qs, &sum);
        y->d = hmoe_f32_to_fp16(d);
    }
}

void hmoe_ref_quantize_q8_1(const float *src, void *dst, int64_t n) {
    struct hmoe_block_q8_1 *y = dst;
    for (int64_t i = 0; i < n / HMOE_QK_LEGACY; i++, y++, src += HMOE_QK_LEGACY) {
        int sum;
        float d = q8_block(src, y->qs, &sum);
        y->d = hmoe_f32_to_fp16(d);
        y->s = hmoe_f32_to_fp16(d * (float)sum); /* unrounded d (§8.2) */
    }
}

void hmoe_ref_quantize_q8_k(const float *src, void *dst, int64_t n) {
    struct hmoe_block_q8_k *y = dst;
    for (int64_t i = 0; i < n / HMOE_QK_K; i++, y++, src += HMOE_QK_K) {
        float amax = 0.0f, xmax = 0.0f; /* xmax keeps its sign; first one wins ties */
        for (int j = 0; j < HMOE_QK_K; j++) {
            float a = fabsf(src[j]);
            if (a > amax) {
                amax = a;
                xmax = src[j];
            }
        }
        if (amax == 0.0f) {
            memset(y, 0, sizeof *y); /* llama.cpp leaves bsums unwritten; zeros are the sum */
            continue;
        }
        float iscale = -127.0f / xmax;
        for (int j = 0; j < HMOE_QK_K; j++) {
            int q = hmoe_nearest_int_even(iscale * src[j]);
            y->qs[j] = (int8_t)(q < 127 ? q : 127);
        }
        for (int b = 0; b < 16; b++) {
            int s = 0;
            for (int j = 0; j < 16; j++) s += y->qs[16 * b + j];
            y->bsums[b] = (int16_t)s;
        }
        y->d = 1.0f / iscale;
    }
}
