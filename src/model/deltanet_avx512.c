/* deltanet_avx512.c — one token of the Gated DeltaNet recurrence for one value head with
 * AVX-512 (qwen35moe.md §5.2; the scalar reference is step_ref in deltanet.c). Row r of the
 * [dim][dim] state is independent of the others: decay it and read u = row . k in one pass,
 * then write row += beta (v_r - u) k and read o_r = row . q in a second pass while the row
 * is still in L1. dim is a multiple of 16. Compiled with AVX-512 flags (Makefile).
 */
#include <immintrin.h>
#include <stddef.h>

void hmoe_gdn_step_avx512(float *S, int dim, const float *q, const float *k, const float *v, float decay, float beta,
                          float *o);

void hmoe_gdn_step_avx512(float *S, int dim, const float *q, const float *k, const float *v, float decay, float beta,
                          float *o) {
    const __m512 vd = _mm512_set1_ps(decay);
    for (int r = 0; r < dim; r++) {
        float *row = S + (size_t)r * dim;
        __m512 u = _mm512_setzero_ps();
        for (int c = 0; c < dim; c += 16) {
            const __m512 x = _mm512_mul_ps(_mm512_loadu_ps(row + c), vd);
            _mm512_storeu_ps(row + c, x);
            u = _mm512_fmadd_ps(x, _mm512_loadu_ps(k + c), u);
        }
        const __m512 dl = _mm512_set1_ps(beta * (v[r] - _mm512_reduce_add_ps(u)));
        __m512 acc = _mm512_setzero_ps();
        for (int c = 0; c < dim; c += 16) {
            const __m512 x = _mm512_fmadd_ps(dl, _mm512_loadu_ps(k + c), _mm512_loadu_ps(row + c));
            _mm512_storeu_ps(row + c, x);
            acc = _mm512_fmadd_ps(x, _mm512_loadu_ps(q + c), acc);
        }
        o[r] = _mm512_reduce_add_ps(acc);
    }
}
