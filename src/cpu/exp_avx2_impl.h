/* exp_avx2_impl.h — private to src/cpu: e^x of 8 binary32 lanes with AVX2 + FMA, shared by
 * the softmax (softmax_avx2.c) and the SwiGLU (swiglu_avx2.c); include only from files
 * compiled with -mavx2 -mfma. exp(x) = 2^n·e^r with n = round(x·log2 e), r = x - n·ln 2 in
 * two parts (|r| <= ln2/2), e^r by its degree-6 Taylor polynomial (truncation < 1.3e-7
 * relative); 2^n is applied as two exact powers of two 2^(n/2) and 2^(n - n/2), each a normal
 * binary32, so the one rounding is the last multiply (denormal results as vscalefps gives
 * them). Inputs below -104 are taken as -104 (e^-104 is 0 in binary32 either way); NaN stays
 * NaN. Inputs must be at most 89 (e^89 = inf in binary32; larger ones would overflow n).
 */
#ifndef HMOE_CPU_EXP_AVX2_IMPL_H
#define HMOE_CPU_EXP_AVX2_IMPL_H

#include <immintrin.h>

static inline __m256 pow2i(__m256i n) { /* 2^n for -126 <= n <= 127 */
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n, _mm256_set1_epi32(127)), 23));
}

static inline __m256 exp8(__m256 x) {
    x = _mm256_max_ps(_mm256_set1_ps(-104.0f), x); /* max(a, NaN) = NaN: NaN passes */
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145751953125f), x); /* ln2 high part: 0x3f317200 */
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.428606765330187045e-06f), r); /* ln2 - high part */
    __m256 p = _mm256_set1_ps(1.0f / 720.0f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    /* n in [-150, 128] here (NaN lanes: any n, p is NaN): halves in [-75, 64] */
    const __m256i ni = _mm256_cvtps_epi32(n), n1 = _mm256_srai_epi32(ni, 1), n2 = _mm256_sub_epi32(ni, n1);
    return _mm256_mul_ps(_mm256_mul_ps(p, pow2i(n1)), pow2i(n2));
}

#endif
