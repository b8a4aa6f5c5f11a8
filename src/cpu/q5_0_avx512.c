/* q5_0_avx512.c — Q5_0 × Q8_0 dot products with AVX-512VL/BW + VNNI (quants.md §3, §8.4; the
 * hot type of Nemotron-3 files). The 5th bits of a block are a 32-bit mask: a masked byte
 * move puts 0x10 where they are set, OR the low nibbles (elements 0-15 low, 16-31 high),
 * minus 16. Then as Q8_0: vpdpbusd of |w| (u8) with the activations carrying w's sign; the
 * exact int32 block sum is scaled by dw·da and accumulated in double, as the reference does.
 */
#include <immintrin.h>
#include <string.h>

#include "cpu_impl.h"
#include "hmoe/quant_blocks.h"
#include "tile_impl.h"

static inline __attribute__((always_inline)) __m256i q50_unpack(const struct hmoe_block_q5_0 *b) {
    const __m128i qs = _mm_loadu_si128((const __m128i *)b->qs);
    const __m128i lo4 = _mm_set1_epi8(0x0F);
    const __m256i nib = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(qs, 4), lo4), _mm_and_si128(qs, lo4));
    uint32_t qh;
    memcpy(&qh, b->qh, sizeof qh);
    const __m256i high = _mm256_maskz_mov_epi8((__mmask32)qh, _mm256_set1_epi8(0x10));
    return _mm256_sub_epi8(_mm256_or_si256(nib, high), _mm256_set1_epi8(16));
}

/* out[r*T + t] = dot(weight row r at w + r*rb, activation row t); see tile_impl.h. */
static inline __attribute__((always_inline)) void q50_tile(const char *w, size_t rb, int64_t nb, const char *x,
                                                           size_t xs, float *out, const int R, const int T) {
    __m512d acc[HMOE_TILE_MAX_TOK];
    for (int k = 0; k < R * T; k++) acc[k] = _mm512_setzero_pd();
    for (int64_t i = 0; i < nb; i++) {
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            const struct hmoe_block_q5_0 *b = (const struct hmoe_block_q5_0 *)(w + (size_t)r * rb) + i;
            if (T == 1 && i % 2 == 0)
                hmoe_prefetch_block((const char *)b + hmoe_prefetch_distance(rb, R), 2 * sizeof *b);
            const __m256i q = q50_unpack(b);
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

HMOE_TILE_INSTANCES(q50512, q50_tile)
HMOE_DEFINE_GEMV_GEMM(q5_0_avx512, q50512, 32)
