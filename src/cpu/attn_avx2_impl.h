/* attn_avx2_impl.h — helpers shared by the AVX2 attention kernels (attn_wsum_avx2.c,
 * attn_scores_avx2.c): 8 cache elements widened to binary32, and the sums of 8 vectors in one
 * vhaddps tree. Include only from files compiled with -mavx2 -mfma -mf16c.
 */
#ifndef HMOE_CPU_ATTN_AVX2_IMPL_H
#define HMOE_CPU_ATTN_AVX2_IMPL_H

#include <immintrin.h>

#include "hmoe/types.h"

/* 8 elements of type t (F16, BF16 or F32) at p widened to binary32. */
static inline __attribute__((always_inline)) __m256 attn_ld8(enum hmoe_type t, const char *p) {
    if (t == HMOE_TYPE_F16) return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
    if (t == HMOE_TYPE_BF16)
        return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p)), 16));
    return _mm256_loadu_ps((const float *)p);
}

/* r[i] = sum of the 8 lanes of a[i], i < 8. */
static inline __attribute__((always_inline)) __m256 attn_sum8(const __m256 *a) {
    const __m256 t0 = _mm256_hadd_ps(a[0], a[1]), t1 = _mm256_hadd_ps(a[2], a[3]);
    const __m256 t2 = _mm256_hadd_ps(a[4], a[5]), t3 = _mm256_hadd_ps(a[6], a[7]);
    const __m256 u0 = _mm256_hadd_ps(t0, t1), u1 = _mm256_hadd_ps(t2, t3); /* per 128-bit half: a[0..3] / a[4..7] */
    return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
}

#endif
