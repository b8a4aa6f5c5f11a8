/* swiglu_avx2.c — hmoe_cpu_swiglu (cpu.h) 8 elements at a time with AVX2 + FMA:
 * g / (1 + e^-g) · u with exp_avx2_impl.h's exp8 (within 2 ulp of expf) in place of expf,
 * one division and one multiply, the last n % 8 by the same vectors on a zero-padded copy.
 * e^-g is taken at min(-g, 89): above that it is inf in binary32 either way, and g / inf = -0
 * as with expf; NaN stays NaN (vminps returns its second operand, -g, when that is NaN).
 * Compiled with -mavx2 -mfma -mf16c (Makefile); only called after the run-time check.
 */
#include <immintrin.h>
#include <string.h>

#include "cpu_impl.h"
#include "exp_avx2_impl.h"

static inline __m256 swiglu8(__m256 g, __m256 u) {
    const __m256 e = exp8(_mm256_min_ps(_mm256_set1_ps(89.0f), _mm256_sub_ps(_mm256_setzero_ps(), g)));
    return _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(_mm256_set1_ps(1.0f), e)), u);
}

void hmoe_cpu_swiglu_avx2(float *g, const float *u, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(g + i, swiglu8(_mm256_loadu_ps(g + i), _mm256_loadu_ps(u + i)));
    if (i < n) {
        _Alignas(32) float gt[8] = {0}, ut[8] = {0};
        memcpy(gt, g + i, sizeof(float) * (size_t)(n - i));
        memcpy(ut, u + i, sizeof(float) * (size_t)(n - i));
        _mm256_store_ps(gt, swiglu8(_mm256_load_ps(gt), _mm256_load_ps(ut)));
        memcpy(g + i, gt, sizeof(float) * (size_t)(n - i));
    }
}
