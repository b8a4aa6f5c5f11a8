/* dequant_kquants.c — reference dequantizers of the 256-element K-quants Q2_K, Q3_K,
 * Q4_K, Q5_K, Q6_K (quants.md §4.1-§4.6) and of the activation format Q8_K (§4.7).
 * Written per element e with the index split of the spec (h = e/128, s or k =
 * (e%128)/32, l = e%32; bit-plane high bits = bit e/32 of byte e%32), so each line can
 * be checked against the document. Products are exact; the "- dmin*min" is the one
 * rounding (§0.1). */
#include "kernels/quant_ref_impl.h"

void hmoe_ref_dequant_q2_k(const void *src, float *dst, int64_t n) {
    const struct hmoe_block_q2_k *b = src;
    for (int64_t i = 0; i < n / HMOE_QK_K; i++, b++, dst += HMOE_QK_K) {
        float d = hmoe_fp16_to_f32(b->d), dmin = hmoe_fp16_to_f32(b->dmin);
        for (int e = 0; e < HMOE_QK_K; e++) {
            int h = e / 128, s = (e % 128) / 32, l = e % 32, sb = e / 16;
            int q = (b->qs[32 * h + l] >> (2 * s)) & 3;
            dst[e] = (d * (float)(b->scales[sb] & 0xF)) * (float)q - dmin * (float)(b->scales[sb] >> 4);
        }
    }
}

void hmoe_ref_dequant_q3_k(const void *src, float *dst, int64_t n) {
    const struct hmoe_block_q3_k *b = src;
    for (int64_t i = 0; i < n / HMOE_QK_K; i++, b++, dst += HMOE_QK_K) {
        float d = hmoe_fp16_to_f32(b->d);
        for (int e = 0; e < HMOE_QK_K; e++) {
            int h = e / 128, s = (e % 128) / 32, l = e % 32;
            int low = (b->qs[32 * h + l] >> (2 * s)) & 3;
            int high = (b->hmask[e % 32] >> (e / 32)) & 1;
            int q = low - (high ? 0 : 4); /* inverted: a set bit means "no -4" */
            dst[e] = (d * (float)hmoe_q3k_scale(b->scales, e / 16)) * (float)q;
        }
    }
}

/* Q4_K / Q5_K nibble of element e: run p = e/64 of 32 bytes, low nibble for the first
 * 32 elements of the run, high nibble for the next 32. */
static int kq_nibble(const uint8_t qs[128], int e) {
    uint8_t byte = qs[32 * (e / 64) + e % 32];
    return (e % 64 < 32) ? (byte & 0xF) : (byte >> 4);
}

void hmoe_ref_dequant_q4_k(const void *src, float *dst, int64_t n) {
    const struct hmoe_block_q4_k *b = src;
    for (int64_t i = 0; i < n / HMOE_QK_K; i++, b++, dst += HMOE_QK_K) {
        float d = hmoe_fp16_to_f32(b->d), dmin = hmoe_fp16_to_f32(b->dmin);
        for (int e = 0; e < HMOE_QK_K; e++) {
            int sc, mn;
            hmoe_kq_scale_min(b->scales, e / 32, &sc, &mn);
            dst[e] = (d * (float)sc) * (float)kq_nibble(b->qs, e) - dmin * (float)mn;
        }
    }
}

void hmoe_ref_dequant_q5_k(const void *src, float *dst, int64_t n) {
    const struct hmoe_block_q5_k *b = src;
    for (int64_t i = 0; i < n / HMOE_QK_K; i++, b++, dst += HMOE_QK_K) {
        float d = hmoe_fp16_to_f32(b->d), dmin = hmoe_fp16_to_f32(b->dmin);
        for (int e = 0; e < HMOE_QK_K; e++) {
            int sc, mn;
            hmoe_kq_scale_min(b->scales, e / 32, &sc, &mn);
            int q = kq_nibble(b->qs, e) + 16 * ((b->qh[e % 32] >> (e / 32)) & 1);
            dst[e] = (d * (float)sc) * (float)q - dmin * (float)mn;
        }
    }
}

void hmoe_ref_dequant_q6_k(const void *src, float *dst, int64_t n) {
    const struct hmoe_block_q6_k *b = src;
    for (int64_t i = 0; i < n / HMOE_QK_K; i++, b++, dst += HMOE_QK_K) {
        float d = hmoe_fp16_to_f32(b->d);
        for (int e = 0; e < HMOE_QK_K; e++) {
            int h = e / 128, k = (e % 128) / 32, l = e % 32;
            uint8_t lbyte = b->ql[64 * h + 32 * (k % 2) + l];
            int low4 = k < 2 ? (lbyte & 0xF) : (lbyte >> 4);
            int hi2 = (b->qh[32 * h + l] >> (2 * k)) & 3;
            int q = (low4 | (hi2 << 4)) - 32;
            dst[e] = (d * (float)b->scales[e / 16]) * (float)q; /* scales are int8 */
        }
    }
}

void hmoe_ref_dequant_q8_k(const void *src, float *dst, int64_t n) {
    const struct hmoe_block_q8_k *b = src;
    for (int64_t i = 0; i < n / HMOE_QK_K; i++, b++, dst += HMOE_QK_K)
        for (int e = 0; e < HMOE_QK_K; e++) dst[e] = b->d * (float)b->qs[e];
}
