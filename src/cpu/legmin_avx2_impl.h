/* legmin_avx2_impl.h — private to src/cpu: dot products of the 32-value blocks with a scale and a
 * minimum (Q4_1, Q5_1: x = d q + m, q unsigned) against Q8_1 activations (quants.md §3), with
 * AVX2. Per block: sum_e (d q_e + m) (da a_e) = d da sum_e q_e a_e + m (da sum_e a_e), the second
 * factor being the activation block's s; the integer part by vpmaddubsw (unsigned codes times
 * signed bytes, pairs at most 31 * 127 * 2) and vpmaddwd. Used mostly for the scores of q4_1 /
 * q5_1 K caches (rows of head_dim values, many rows), so the gemv takes 4 rows per pass and
 * the gemm unpacks each weight block once for up to 8 activation rows.
 * The including file defines LEGMIN_NAME (the kernel suffix), LEGMIN_BLOCK (its block struct),
 * LEGMIN_FIVE (1 for the fifth bits of Q5_1) and LEGMIN_QH(blk) (a block's qh, or NULL), and is
 * compiled with -mavx2 -mfma -mf16c.
 */
#ifndef HMOE_CPU_LEGMIN_AVX2_IMPL_H
#define HMOE_CPU_LEGMIN_AVX2_IMPL_H

#include <immintrin.h>
#include <string.h>

#include "cpu_impl.h"
#include "hmoe/quant_blocks.h"

static inline float legmin_h2f(uint16_t h) { return _cvtsh_ss(h); }

/* The 32 codes of a block as unsigned bytes in element order (low nibbles are elements 0..15,
 * high nibbles 16..31), with the fifth bits of qh (bit e of the u32le: element e) when five. */
static inline __m256i legmin_codes(const uint8_t *qs, const uint8_t *qh, int five) {
    const __m128i raw = _mm_loadu_si128((const __m128i *)qs), m4 = _mm_set1_epi8(0x0f);
    __m256i q = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(raw, 4), m4), _mm_and_si128(raw, m4));
    if (five) {
        uint32_t h;
        memcpy(&h, qh, 4);
        /* byte e gets byte e / 8 of h, then its bit e % 8 becomes 0x10 */
        const __m256i spread = _mm256_set_epi64x(0x0303030303030303LL, 0x0202020202020202LL, 0x0101010101010101LL, 0);
        const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
        __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)h), spread);
        v = _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
        q = _mm256_or_si256(q, _mm256_and_si256(v, _mm256_set1_epi8(0x10)));
    }
    return q;
}

/* 8 int32 partial sums of codes q times the activation block's bytes as floats. */
static inline __m256 legmin_dot_ps(__m256i q, const int8_t *aqs) {
    const __m256i a = _mm256_loadu_si256((const __m256i *)aqs);
    return _mm256_cvtepi32_ps(_mm256_madd_epi16(_mm256_maddubs_epi16(q, a), _mm256_set1_epi16(1)));
}

static inline float legmin_hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

#define LEGMIN_CAT2(a, b) a##b
#define LEGMIN_CAT(a, b) LEGMIN_CAT2(a, b)

/* One row against one activation row: nb blocks. */
static inline float legmin_row(const LEGMIN_BLOCK *w, const struct hmoe_block_q8_1 *a, int64_t nb) {
    __m256 acc = _mm256_setzero_ps();
    float macc = 0.0f;
    for (int64_t i = 0; i < nb; i++) {
        const __m256i q = legmin_codes(w[i].qs, LEGMIN_QH(&w[i]), LEGMIN_FIVE);
        const float da = legmin_h2f(a[i].d);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(legmin_h2f(w[i].d) * da), legmin_dot_ps(q, a[i].qs), acc);
        macc += legmin_h2f(w[i].m) * legmin_h2f(a[i].s);
    }
    return legmin_hsum(acc) + macc;
}

void LEGMIN_CAT(hmoe_cpu_gemv_, LEGMIN_NAME)(int64_t ncols, const void *w, size_t row_bytes, int64_t nrows,
                                             const void *xq, float *y) {
    const int64_t nb = ncols / 32;
    const struct hmoe_block_q8_1 *a = xq;
    int64_t r = 0;
    for (; r + 4 <= nrows; r += 4) { /* four rows per pass: four independent chains */
        const LEGMIN_BLOCK *wr[4];
        __m256 acc[4];
        float macc[4] = {0, 0, 0, 0};
        for (int j = 0; j < 4; j++) wr[j] = (const LEGMIN_BLOCK *)((const uint8_t *)w + (size_t)(r + j) * row_bytes), acc[j] = _mm256_setzero_ps();
        for (int64_t i = 0; i < nb; i++) {
            const float da = legmin_h2f(a[i].d), sa = legmin_h2f(a[i].s);
            const __m256i av = _mm256_loadu_si256((const __m256i *)a[i].qs);
            for (int j = 0; j < 4; j++) {
                const __m256i q = legmin_codes(wr[j][i].qs, LEGMIN_QH(&wr[j][i]), LEGMIN_FIVE);
                const __m256 p = _mm256_cvtepi32_ps(_mm256_madd_epi16(_mm256_maddubs_epi16(q, av), _mm256_set1_epi16(1)));
                acc[j] = _mm256_fmadd_ps(_mm256_set1_ps(legmin_h2f(wr[j][i].d) * da), p, acc[j]);
                macc[j] += legmin_h2f(wr[j][i].m) * sa;
            }
        }
        for (int j = 0; j < 4; j++) y[r + j] = legmin_hsum(acc[j]) + macc[j];
    }
    for (; r < nrows; r++) y[r] = legmin_row((const LEGMIN_BLOCK *)((const uint8_t *)w + (size_t)r * row_bytes), a, nb);
}

void LEGMIN_CAT(hmoe_cpu_gemm_, LEGMIN_NAME)(int64_t ncols, const void *w, size_t row_bytes, int64_t nrows,
                                             const void *xq, size_t xq_stride, int64_t ntok, float *y,
                                             size_t y_stride) {
    const int64_t nb = ncols / 32;
    for (int64_t r = 0; r < nrows; r++) {
        const LEGMIN_BLOCK *wr = (const LEGMIN_BLOCK *)((const uint8_t *)w + (size_t)r * row_bytes);
        for (int64_t t0 = 0; t0 < ntok; t0 += 8) { /* each weight block unpacked once for 8 rows of x */
            const int nt = (int)(ntok - t0 < 8 ? ntok - t0 : 8);
            __m256 acc[8];
            float macc[8];
            for (int t = 0; t < 8; t++) acc[t] = _mm256_setzero_ps(), macc[t] = 0.0f;
            for (int64_t i = 0; i < nb; i++) {
                const __m256i q = legmin_codes(wr[i].qs, LEGMIN_QH(&wr[i]), LEGMIN_FIVE);
                const float dw = legmin_h2f(wr[i].d), mw = legmin_h2f(wr[i].m);
                for (int t = 0; t < nt; t++) {
                    const struct hmoe_block_q8_1 *a =
                        (const struct hmoe_block_q8_1 *)((const uint8_t *)xq + (size_t)(t0 + t) * xq_stride) + i;
                    acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(dw * legmin_h2f(a->d)), legmin_dot_ps(q, a->qs), acc[t]);
                    macc[t] += mw * legmin_h2f(a->s);
                }
            }
            for (int t = 0; t < nt; t++) y[(size_t)(t0 + t) * y_stride + r] = legmin_hsum(acc[t]) + macc[t];
        }
    }
}

#endif
