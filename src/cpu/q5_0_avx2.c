/* q5_0_avx2.c — Q5_0 × Q8_0 dot products with AVX2 (quants.md §3, §8.4; the hot type of
 * Nemotron-3 files, whose 2688-wide rows cannot hold K-quant blocks). A block's 32 weights
 * are rebuilt as signed bytes: the low nibbles (elements 0-15 in the low nibbles of qs,
 * 16-31 in the high ones), the 5th bit from qh spread to one byte per element (each byte
 * lane picks its qh byte with vpshufb and tests its bit), minus 16. Then as Q8_0: |w| (u8)
 * times the activations carrying w's sign, vpmaddubsw + vpmaddwd give the exact int32 block
 * sum, scaled by dw·da and accumulated in double as the reference does.
 */
#include <immintrin.h>
#include <string.h>

#include "cpu_impl.h"
#include "hmoe/quant_blocks.h"
#include "tile_impl.h"

/* The 32 weights of one block as int8 in -16..15. */
static inline __attribute__((always_inline)) __m256i q50_unpack(const struct hmoe_block_q5_0 *b) {
    const __m128i qs = _mm_loadu_si128((const __m128i *)b->qs);
    const __m128i lo4 = _mm_set1_epi8(0x0F);
    const __m256i nib = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(qs, 4), lo4), _mm_and_si128(qs, lo4));
    uint32_t qh;
    memcpy(&qh, b->qh, sizeof qh);
    const __m256i spread = _mm256_shuffle_epi8(
        _mm256_set1_epi32((int)qh), _mm256_set_epi64x(0x0303030303030303ll, 0x0202020202020202ll,
                                                      0x0101010101010101ll, 0x0000000000000000ll));
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    const __m256i high = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit), _mm256_set1_epi8(0x10));
    return _mm256_sub_epi8(_mm256_or_si256(nib, high), _mm256_set1_epi8(16));
}

/* out[r*T + t] = dot(weight row r at w + r*rb, activation row t); see tile_impl.h. */
static inline __attribute__((always_inline)) void q50_tile(const char *w, size_t rb, int64_t nb, const char *x,
                                                           size_t xs, float *out, const int R, const int T) {
    __m256d acc[HMOE_TILE_MAX_TOK];
    for (int k = 0; k < R * T; k++) acc[k] = _mm256_setzero_pd();
    const __m256i ones = _mm256_set1_epi16(1);
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
                const __m256i dot = _mm256_madd_epi16(_mm256_maddubs_epi16(aq, sa), ones);
                const __m128i d4 = _mm_add_epi32(_mm256_castsi256_si128(dot), _mm256_extracti128_si256(dot, 1));
                acc[r * T + t] = _mm256_fmadd_pd(_mm256_cvtepi32_pd(d4), _mm256_set1_pd(dw * (double)_cvtsh_ss(a->d)),
                                                 acc[r * T + t]);
            }
        }
    }
    for (int k = 0; k < R * T; k++) {
        __m128d s = _mm_add_pd(_mm256_castpd256_pd128(acc[k]), _mm256_extractf128_pd(acc[k], 1));
        out[k] = (float)(_mm_cvtsd_f64(s) + _mm_cvtsd_f64(_mm_unpackhi_pd(s, s)));
    }
}

HMOE_TILE_INSTANCES(q50256, q50_tile)
HMOE_DEFINE_GEMV_GEMM(q5_0_avx2, q50256, 32)
