/* dequant_legacy.c — reference dequantizers of the 32-element "legacy" formats
 * Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 (quants.md §3), the activation format Q8_1 (§3.6, for
 * tests and debugging; llama.cpp has none) and the 2026 bit formats Q1_0, Q2_0 (§7).
 * 4-bit nibble order: low nibble of qs[j] is element j, high nibble element j+16.
 * Each scale x integer product is exact in binary32 (§0.1); Q4_1/Q5_1 round once on +m. */
#include "kernels/quant_ref_impl.h"

void hmoe_ref_dequant_q4_0(const void *src, float *dst, int64_t n) {
    const struct hmoe_block_q4_0 *b = src;
    for (int64_t i = 0; i < n / HMOE_QK_LEGACY; i++, b++, dst += HMOE_QK_LEGACY) {
        float d = hmoe_fp16_to_f32(b->d);
        for (int j = 0; j < 16; j++) {
            dst[j] = (float)((b->qs[j] & 0xF) - 8) * d;
            dst[j + 16] = (float)((b->qs[j] >> 4) - 8) * d;
        }
    }
}

void hmoe_ref_dequant_q4_1(const void *src, float *dst, int64_t n) {
    const struct hmoe_block_q4_1 *b = src;
    for (int64_t i = 0; i < n / HMOE_QK_LEGACY; i++, b++, dst += HMOE_QK_LEGACY) {
        float d = hmoe_fp16_to_f32(b->d), m = hmoe_fp16_to_f32(b->m);
        for (int j = 0; j < 16; j++) {
            dst[j] = (float)(b->qs[j] & 0xF) * d + m;
            dst[j + 16] = (float)(b->qs[j] >> 4) * d + m;
        }
    }
}

/* 5-bit quant of element e (0..31): nibble plus bit e of the u32le qh as bit 4. */
static int q5_quant(const uint8_t qs[16], const uint8_t qh[4], int e) {
    uint32_t h = hmoe_ld_u32le(qh);
    int lo4 = e < 16 ? (qs[e] & 0xF) : (qs[e - 16] >> 4);
    return lo4 | (int)(((h >> e) & 1u) << 4);
}

void hmoe_ref_dequant_q5_0(const void *src, float *dst, int64_t n) {
    const struct hmoe_block_q5_0 *b = src;
    for (int64_t i = 0; i < n / HMOE_QK_LEGACY; i++, b++, dst += HMOE_QK_LEGACY) {
        float d = hmoe_fp16_to_f32(b->d);
        for (int e = 0; e < 32; e++) dst[e] = (float)(q5_quant(b->qs, b->qh, e) - 16) * d;
    }
}

void hmoe_ref_dequant_q5_1(const void *src, float *dst, int64_t n) {
    const struct hmoe_block_q5_1 *b = src;
    for (int64_t i = 0; i < n / HMOE_QK_LEGACY; i++, b++, dst += HMOE_QK_LEGACY) {
        float d = hmoe_fp16_to_f32(b->d), m = hmoe_fp16_to_f32(b->m);
        for (int e = 0; e < 32; e++) dst[e] = (float)q5_quant(b->qs, b->qh, e) * d + m;
    }
}

void hmoe_ref_dequant_q8_0(const void *src, float *dst, int64_t n) {
    const struct hmoe_block_q8_0 *b = src;
    for (int64_t i = 0; i < n / HMOE_QK_LEGACY; i++, b++, dst += HMOE_QK_LEGACY) {
        float d = hmoe_fp16_to_f32(b->d);
        for (int e = 0; e < 32; e++) dst[e] = (float)b->qs[e] * d;
    }
}

void hmoe_ref_dequant_q8_1(const void *src, float *dst, int64_t n) {
    const struct hmoe_block_q8_1 *b = src;
    for (int64_t i = 0; i < n / HMOE_QK_LEGACY; i++, b++, dst += HMOE_QK_LEGACY) {
        float d = hmoe_fp16_to_f32(b->d);
        for (int e = 0; e < 32; e++) dst[e] = (float)b->qs[e] * d;
    }
}

void hmoe_ref_dequant_q1_0(const void *src, float *dst, int64_t n) {
    const struct hmoe_block_q1_0 *b = src;
    for (int64_t i = 0; i < n / HMOE_QK_Q1_0; i++, b++, dst += HMOE_QK_Q1_0) {
        float d = hmoe_fp16_to_f32(b->d);
        for (int j = 0; j < HMOE_QK_Q1_0; j++) dst[j] = ((b->qs[j / 8] >> (j % 8)) & 1) ? d : -d;
    }
}

void hmoe_ref_dequant_q2_0(const void *src, float *dst, int64_t n) {
    const struct hmoe_block_q2_0 *b = src;
    for (int64_t i = 0; i < n / HMOE_QK_Q2_0; i++, b++, dst += HMOE_QK_Q2_0) {
        float d = hmoe_fp16_to_f32(b->d);
        for (int j = 0; j < HMOE_QK_Q2_0; j++) dst[j] = (float)(((b->qs[j / 4] >> (2 * (j % 4))) & 3) - 1) * d;
    }
}
