/* mamba2_avx2.c — one token of the Mamba-2 scan for one head with AVX2 + FMA
 * (nemotron_h_moe.md §4; the scalar reference is hmoe_mamba2_scan's loop in mamba2.c):
 * each state row p is decayed, gets Δ x_p B added and is read against C in one pass while
 * it is in registers. N is a multiple of 8. Compiled with AVX2 flags (Makefile).
 */
#include <immintrin.h>
#include <stddef.h>

#include "model/mamba2_impl.h"

void hmoe_mamba2_step_avx2(float *S, int P, int N, const float *x, const float *B, const float *C, float delta,
                           float decay, float D, float *y) {
    const __m256 vd = _mm256_set1_ps(decay);
    for (int p = 0; p < P; p++) {
        float *row = S + (size_t)p * N;
        const __m256 xd = _mm256_set1_ps(x[p] * delta);
        __m256 acc = _mm256_setzero_ps();
        for (int j = 0; j < N; j += 8) {
            const __m256 r = _mm256_fmadd_ps(_mm256_loadu_ps(B + j), xd, _mm256_mul_ps(_mm256_loadu_ps(row + j), vd));
            _mm256_storeu_ps(row + j, r);
            acc = _mm256_fmadd_ps(r, _mm256_loadu_ps(C + j), acc);
        }
        const __m128 h = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
        const __m128 q = _mm_add_ps(h, _mm_movehl_ps(h, h));
        y[p] = _mm_cvtss_f32(_mm_add_ss(q, _mm_shuffle_ps(q, q, 1))) + D * x[p];
    }
}
