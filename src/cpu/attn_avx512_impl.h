/* attn_avx512_impl.h — helpers shared by the AVX-512 attention kernels (attn_wsum_avx512.c,
 * attn_scores_avx512.c): 16 cache elements widened to binary32, and the sums of 16 vectors
 * in one transpose tree. Include only from files compiled with AVX-512.
 */
#ifndef HMOE_CPU_ATTN_AVX512_IMPL_H
#define HMOE_CPU_ATTN_AVX512_IMPL_H

#include <immintrin.h>

#include "hmoe/types.h"

/* 16 elements of type t (F16, BF16 or F32) at p (mask m; masked-off lanes read nothing) widened to binary32. */
static inline __attribute__((always_inline)) __m512 attn_ld16(enum hmoe_type t, const char *p, __mmask16 m) {
    if (t == HMOE_TYPE_F16) return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
    if (t == HMOE_TYPE_BF16)
        return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p)), 16));
    return _mm512_maskz_loadu_ps(m, p);
}

/* r[i] = sum of the 16 lanes of a[i], i < 16. */
static inline __attribute__((always_inline)) __m512 attn_sum16(const __m512 *a) {
    __m512 b[8], c[4];
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++) /* 128-bit lanes: [A0+A2, A1+A3, B0+B2, B1+B3] for a = 2i, b = 2i+1 */
        b[i] = _mm512_add_ps(_mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], 0x44),
                             _mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], 0xEE));
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) /* lane k: four partial sums of a[4i + k] */
        c[i] = _mm512_add_ps(_mm512_shuffle_f32x4(b[2 * i], b[2 * i + 1], 0x88),
                             _mm512_shuffle_f32x4(b[2 * i], b[2 * i + 1], 0xDD));
    /* Inside each 128-bit lane k: element j of the result = total of c[j] lane k = a[4j + k]. */
    const __m512 s01 = _mm512_add_ps(_mm512_unpacklo_ps(c[0], c[1]), _mm512_unpackhi_ps(c[0], c[1]));
    const __m512 s23 = _mm512_add_ps(_mm512_unpacklo_ps(c[2], c[3]), _mm512_unpackhi_ps(c[2], c[3]));
    const __m512d lo = _mm512_unpacklo_pd(_mm512_castps_pd(s01), _mm512_castps_pd(s23));
    const __m512d hi = _mm512_unpackhi_pd(_mm512_castps_pd(s01), _mm512_castps_pd(s23));
    const __m512 r = _mm512_add_ps(_mm512_castpd_ps(lo), _mm512_castpd_ps(hi)); /* lane k, element j: a[4j + k] */
    const __m512i idx = _mm512_set_epi32(15, 11, 7, 3, 14, 10, 6, 2, 13, 9, 5, 1, 12, 8, 4, 0);
    return _mm512_permutexvar_ps(idx, r);
}

#endif
