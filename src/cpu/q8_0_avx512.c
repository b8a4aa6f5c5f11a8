/* q8_0_avx512.c — Q8_0 × Q8_0 dot products with AVX-512VL + VNNI (quants.md §3.5, §8.4).
 * Per 32-element block: vpdpbusd needs an unsigned operand, so it multiplies |w| (as u8;
 * -128 becomes 128, which the format allows) by the activations carrying w's sign
 * (vpsignb; the activations are -127..127, so negating them cannot overflow). The exact
 * int32 block sum is scaled by dw·da and accumulated in double, as the reference does.
 */
#include <immintrin.h>

#include "cpu_impl.h"
#include "hmoe/quant_blocks.h"
#include "tile_impl.h"

/* out[r*T + t] = dot(weight row r at w + r*rb, activation row t); see tile_impl.h. */
static inline __attribute__((always_inline)) void q80_tile(const char *w, size_t rb, int64_t nb, const char *x,
                                                           size_t xs, float *out, const int R, const int T) {
    __m512d acc[HMOE_TILE_MAX_TOK];
    for (int k = 0; k < R * T; k++) acc[k] = _mm512_setzero_pd();
    for (int64_t i = 0; i < nb; i++) {
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            const struct hmoe_block_q8_0 *b = (const struct hmoe_block_q8_0 *)(w + (size_t)r * rb) + i;
            if (T == 1 && i % 2 == 0)
                hmoe_prefetch_block((const char *)b + hmoe_prefetch_distance(rb, R), 2 * sizeof *b);
            const __m256i q = _mm256_loadu_si256((const __m256i *)b->qs);
            const __m256i aq = _mm256_abs_epi8(q);
            const double dw = _cvtsh_ss(b->d);
#pragma GCC unroll 8
            for (int t = 0; t < T; t++) {
                const struct hmoe_block_q8_0 *a = (const struct hmoe_block_q8_0 *)(x + (size_t)t * xs) + i;
                const __m256i sa = _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)a->qs), q);
                const __m256i dot = _mm256_dpbusd_epi32(_mm256_setzero_si256(), aq, sa);
                acc[r * T + t] = _mm512_fmadd_pd(_mm512_cvtepi32_pd(dot), _mm512_set1_pd(dw * (double)_cvtsh_ss(a->d)),
                                                 acc[r * T + t]);
            }
        }
    }
    for (int k = 0; k < R * T; k++) out[k] = (float)_mm512_reduce_add_pd(acc[k]);
}

HMOE_TILE_INSTANCES(q80512, q80_tile)
HMOE_DEFINE_GEMV_GEMM(q8_0_avx512, q80512, 32)
