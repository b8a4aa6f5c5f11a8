/* mamba2_avx512.c — one token of the Mamba-2 scan for one head with AVX-512
 * (nemotron_h_moe.md §4; the scalar reference is hmoe_mamba2_scan's loop in mamba2.c):
 * each state row p is decayed, gets Δ x_p B added and is read against C in one pass while
 * it is in registers. N is a multiple of 16. Compiled with AVX-512 flags (Makefile).
 */
#include <immintrin.h>
#include <stddef.h>

#include "model/mamba2_impl.h"

void hmoe_mamba2_step_avx512(float *S, int P, int N, const float *x, const float *B, const float *C, float delta,
                             float decay, float D, float *y) {
    const __m512 vd = _mm512_set1_ps(decay);
    for (int p = 0; p < P; p++) {
        float *row = S + (size_t)p * N;
        const __m512 xd = _mm512_set1_ps(x[p] * delta);
        __m512 acc = _mm512_setzero_ps();
        for (int j = 0; j < N; j += 16) {
            const __m512 r = _mm512_fmadd_ps(_mm512_loadu_ps(B + j), xd, _mm512_mul_ps(_mm512_loadu_ps(row + j), vd));
            _mm512_storeu_ps(row + j, r);
            acc = _mm512_fmadd_ps(r, _mm512_loadu_ps(C + j), acc);
        }
        y[p] = _mm512_reduce_add_ps(acc) + D * x[p];
    }
}
