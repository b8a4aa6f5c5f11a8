/* quant_weight.c — simple reference WEIGHT quantizers for Q4_0, Q4_1, Q5_0, Q5_1, Q8_0,
 * IQ4_NL, IQ4_XS, MXFP4 (quants.md §3, §5.8, §5.9, §6.1): one scale from the block's
 * extreme value, rounded to its stored precision, then the nearest code for each element.
 * No search, no importance matrix, so not llama-quantize's output: for tests and synthetic
 * models. Exact for inputs already on the format's grid (tests rely on that). */
#include <math.h>
#include <string.h>

#include "kernels/iq_tables.h"
#include "kernels/quant_ref_impl.h"

/* Element with the largest |x| (first one on ties), with its sign. */
static float signed_absmax(const float *x, int n) {
    float amax = 0.0f, xmax = 0.0f;
    for (int j = 0; j < n; j++)
        if (fabsf(x[j]) > amax) {
            amax = fabsf(x[j]);
            xmax = x[j];
        }
    return xmax;
}

static int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/* Symmetric quant: q = round(x / d) + bias, clamped to 0..qmax; d == 0 gives the bias. */
static int quant_sym(float x, float d, int bias, int qmax) {
    if (d == 0.0f) return bias;
    return clampi(hmoe_nearest_int_even(x / d) + bias, 0, qmax);
}

/* Nearest value of a 16-entry code book to t (first one on ties). */
static int nearest_code(const int8_t book[16], float t) {
    int best = 0;
    float best_err = fabsf(t - (float)book[0]);
    for (int c = 1; c < 16; c++) {
        float err = fabsf(t - (float)book[c]);
        if (err < best_err) {
            best_err = err;
            best = c;
        }
    }
    return best;
}

/* Pack 32 codes 0..15 in Q4_0 nibble order: element j low, element j+16 high. */
static void pack_nibbles(const int q[32], uint8_t qs[16]) {
    for (int j = 0; j < 16; j++) qs[j] = (uint8_t)(q[j] | (q[j + 16] << 4));
}

void hmoe_ref_quantize_weight_q4_0(const float *src, void *dst, int64_t n) {
    struct hmoe_block_q4_0 *y = dst;
    for (int64_t i = 0; i < n / 32; i++, y++, src += 32) {
        y->d = hmoe_f32_to_fp16(signed_absmax(src, 32) / -8.0f); /* extreme -> -8 */
        float d = hmoe_fp16_to_f32(y->d);
        int q[32];
        for (int j = 0; j < 32; j++) q[j] = quant_sym(src[j], d, 8, 15);
        pack_nibbles(q, y->qs);
    }
}

void hmoe_ref_quantize_weight_q5_0(const float *src, void *dst, int64_t n) {
    struct hmoe_block_q5_0 *y = dst;
    for (int64_t i = 0; i < n / 32; i++, y++, src += 32) {
        y->d = hmoe_f32_to_fp16(signed_absmax(src, 32) / -16.0f); /* extreme -> -16 */
        float d = hmoe_fp16_to_f32(y->d);
        int q[32], lo[32];
        uint32_t h = 0;
        for (int j = 0; j < 32; j++) {
            q[j] = quant_sym(src[j], d, 16, 31);
            lo[j] = q[j] & 0xF;
            h |= (uint32_t)(q[j] >> 4) << j;
        }
        pack_nibbles(lo, y->qs);
        for (int k = 0; k < 4; k++) y->qh[k] = (uint8_t)(h >> (8 * k));
    }
}

void hmoe_ref_quantize_weight_q8_0(const float *src, void *dst, int64_t n) {
    struct hmoe_block_q8_0 *y = dst;
    for (int64_t i = 0; i < n / 32; i++, y++, src += 32) {
        y->d = hmoe_f32_to_fp16(fabsf(signed_absmax(src, 32)) / 127.0f);
        float d = hmoe_fp16_to_f32(y->d);
        for (int j = 0; j < 32; j++) y->qs[j] = (int8_t)(quant_sym(src[j], d, 127, 254) - 127);
    }
}

/* Affine types: m = block minimum, d = range / qmax; q = round((x - m) / d). */
static void affine_block(const float *x, int qmax, uint16_t *d16, uint16_t *m16, int q[32]) {
    float mn = x[0], mx = x[0];
    for (int j = 1; j < 32; j++) {
        mn = x[j] < mn ? x[j] : mn;
        mx = x[j] > mx ? x[j] : mx;
    }
    *d16 = hmoe_f32_to_fp16((mx - mn) / (float)qmax);
    *m16 = hmoe_f32_to_fp16(mn);
    float d = hmoe_fp16_to_f32(*d16), m = hmoe_fp16_to_f32(*m16);
    for (int j = 0; j < 32; j++) q[j] = d == 0.0f ? 0 : clampi(hmoe_nearest_int_even((x[j] - m) / d), 0, qmax);
}

void hmoe_ref_quantize_weight_q4_1(const float *src, void *dst, int64_t n) {
    struct hmoe_block_q4_1 *y = dst;
    for (int64_t i = 0; i < n / 32; i++, y++, src += 32) {
        int q[32];
        affine_block(src, 15, &y->d, &y->m, q);
        pack_nibbles(q, y->qs);
    }
}

void hmoe_ref_quantize_weight_q5_1(const float *src, void *dst, int64_t n) {
    struct hmoe_block_q5_1 *y = dst;
    for (int64_t i = 0; i < n / 32; i++, y++, src += 32) {
        int q[32], lo[32];
        uint32_t h = 0;
        affine_block(src, 31, &y->d, &y->m, q);
        for (int j = 0; j < 32; j++) {
            lo[j] = q[j] & 0xF;
            h |= (uint32_t)(q[j] >> 4) << j;
        }
        pack_nibbles(lo, y->qs);
        for (int k = 0; k < 4; k++) y->qh[k] = (uint8_t)(h >> (8 * k));
    }
}

/* Codes of 32 values for a stored scale; scale 0 picks code 8 (value 1, i.e. 0 * 1). */
static void iq4_codes(const float *x, float scale, int q[32]) {
    for (int j = 0; j < 32; j++) q[j] = scale == 0.0f ? 8 : nearest_code(hmoe_kvalues_iq4nl, x[j] / scale);
}

void hmoe_ref_quantize_weight_iq4_nl(const float *src, void *dst, int64_t n) {
    struct hmoe_block_iq4_nl *y = dst;
    for (int64_t i = 0; i < n / 32; i++, y++, src += 32) {
        y->d = hmoe_f32_to_fp16(signed_absmax(src, 32) / -127.0f); /* extreme -> code 0 (-127) */
        int q[32];
        iq4_codes(src, hmoe_fp16_to_f32(y->d), q);
        pack_nibbles(q, y->qs);
    }
}

/* IQ4_XS: each sub-block wants scale_j = (its extreme) / -127; the fp16 d is set so the
 * largest |scale_j| becomes the 6-bit value -32, the others round to ls - 32 in -32..31. */
void hmoe_ref_quantize_weight_iq4_xs(const float *src, void *dst, int64_t n) {
    struct hmoe_block_iq4_xs *y = dst;
    for (int64_t i = 0; i < n / HMOE_QK_K; i++, y++, src += HMOE_QK_K) {
        float want[8], smax = 0.0f;
        for (int ib = 0; ib < 8; ib++) {
            want[ib] = signed_absmax(src + 32 * ib, 32) / -127.0f;
            if (fabsf(want[ib]) > fabsf(smax)) smax = want[ib];
        }
        y->d = hmoe_f32_to_fp16(smax / -32.0f);
        float d = hmoe_fp16_to_f32(y->d);
        memset(y->scales_l, 0, sizeof y->scales_l);
        y->scales_h = 0;
        for (int ib = 0; ib < 8; ib++) {
            int ls = quant_sym(want[ib], d, 32, 63);
            y->scales_l[ib / 2] |= (uint8_t)((ls & 0xF) << (4 * (ib % 2)));
            y->scales_h |= (uint16_t)((ls >> 4) << (2 * ib));
            int q[32];
            iq4_codes(src + 32 * ib, d * (float)(ls - 32), q);
            pack_nibbles(q, y->qs + 16 * ib);
        }
    }
}

/* MXFP4: the smallest power-of-two scale 2^(e-128) with 12 * scale >= amax (12 is the
 * largest doubled E2M1 value), then the nearest code. */
void hmoe_ref_quantize_weight_mxfp4(const float *src, void *dst, int64_t n) {
    struct hmoe_block_mxfp4 *y = dst;
    for (int64_t i = 0; i < n / 32; i++, y++, src += 32) {
        float amax = fabsf(signed_absmax(src, 32));
        int e = 0;
        while (e < 254 && 12.0f * hmoe_e8m0_to_f32_half((uint8_t)e) < amax) e++;
        y->e = (uint8_t)e;
        float scale = hmoe_e8m0_to_f32_half(y->e);
        int q[32];
        for (int j = 0; j < 32; j++) q[j] = nearest_code(hmoe_kvalues_mxfp4, src[j] / scale);
        pack_nibbles(q, y->qs);
    }
}
