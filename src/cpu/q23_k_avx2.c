/* q23_k_avx2.c — Q2_K and Q3_K × Q8_K dot products with AVX2 (quants.md §4.1, §4.2, §8.4).
 * Per 32 elements (plane s of half h: elements 128h + 32s + l, two 16-element sub-blocks,
 * one per 128-bit lane): the 2-bit values (+4 where Q3_K's hmask bit is set, so they stay
 * unsigned), vpmaddubsw, vpmaddwd with the two sub-block scales. Q2_K's mins and Q3_K's -4
 * come back once per block through the Q8_K bsums. Double accumulation per block.
 */
#include <immintrin.h>
#include <string.h>

#include "cpu_impl.h"
#include "hmoe/quant_blocks.h"
#include "tile_impl.h"

/* Q3_K's sixteen 6-bit scales as unsigned bytes (see q3k_scales in q23_k_avx512.c). */
static inline __m128i q3k_scales(const uint8_t *s12) {
    uint32_t u[3];
    memcpy(u, s12, 12);
    const __m128i lo = _mm_and_si128(
        _mm_srlv_epi32(_mm_setr_epi32((int)u[0], (int)u[1], (int)u[0], (int)u[1]), _mm_setr_epi32(0, 0, 4, 4)),
        _mm_set1_epi32(0x0f0f0f0f));
    const __m128i hi = _mm_and_si128(_mm_srlv_epi32(_mm_set1_epi32((int)u[2]), _mm_setr_epi32(0, 2, 4, 6)),
                                     _mm_set1_epi32(0x03030303));
    return _mm_or_si128(lo, _mm_slli_epi32(hi, 4));
}

static inline __attribute__((always_inline)) void q23_tile(const char *w, size_t rb, int64_t nb, const char *x,
                                                           size_t xs, float *out, const int R, const int T,
                                                           const int is_q3) {
    __m256d acc[HMOE_TILE_MAX_TOK];
    for (int k = 0; k < R * T; k++) acc[k] = _mm256_setzero_pd();
    const __m256i m3 = _mm256_set1_epi8(3), four = _mm256_set1_epi8(4);
    /* after vpermd puts dword g (= scale words 2g, 2g+1) in both lanes: lane 0 repeats word 0, lane 1 word 1 */
    const __m256i pick =
        _mm256_set_epi8(3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0);
    for (int64_t i = 0; i < nb; i++) {
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            const uint8_t *qs;
            __m256i sc16, mn16 = _mm256_setzero_si256(), hm = _mm256_setzero_si256();
            double d, dmin = 0;
            if (is_q3) {
                const struct hmoe_block_q3_k *b = (const struct hmoe_block_q3_k *)(w + (size_t)r * rb) + i;
                if (T == 1) hmoe_prefetch_block((const char *)b + hmoe_prefetch_distance(rb, R), sizeof *b);
                qs = b->qs;
                sc16 = _mm256_sub_epi16(_mm256_cvtepu8_epi16(q3k_scales(b->scales)), _mm256_set1_epi16(32));
                hm = _mm256_loadu_si256((const __m256i *)b->hmask);
                d = _cvtsh_ss(b->d);
            } else {
                const struct hmoe_block_q2_k *b = (const struct hmoe_block_q2_k *)(w + (size_t)r * rb) + i;
                if (T == 1) hmoe_prefetch_block((const char *)b + hmoe_prefetch_distance(rb, R), sizeof *b);
                qs = b->qs;
                const __m128i s = _mm_loadu_si128((const __m128i *)b->scales);
                sc16 = _mm256_cvtepu8_epi16(_mm_and_si128(s, _mm_set1_epi8(0x0f)));
                mn16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(s, 4), _mm_set1_epi8(0x0f)));
                d = _cvtsh_ss(b->d);
                dmin = _cvtsh_ss(b->dmin);
            }
            __m256i is[HMOE_TILE_MAX_TOK];
            for (int t = 0; t < T; t++) is[t] = _mm256_setzero_si256();
#pragma GCC unroll 2
            for (int h = 0; h < 2; h++) {
                const __m256i raw = _mm256_loadu_si256((const __m256i *)(qs + 32 * h));
#pragma GCC unroll 4
                for (int s = 0; s < 4; s++) {
                    const int g = 4 * h + s; /* elements 32g..32g+31 = sub-blocks 2g, 2g+1 */
                    __m256i q = _mm256_and_si256(_mm256_srli_epi16(raw, 2 * s), m3);
                    if (is_q3) {
                        const __m256i bit = _mm256_set1_epi8((char)(1 << g));
                        q = _mm256_add_epi8(q,
                                            _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(hm, bit), bit), four));
                    }
                    const __m256i sv =
                        _mm256_shuffle_epi8(_mm256_permutevar8x32_epi32(sc16, _mm256_set1_epi32(g)), pick);
#pragma GCC unroll 8
                    for (int t = 0; t < T; t++) {
                        const struct hmoe_block_q8_k *a = (const struct hmoe_block_q8_k *)(x + (size_t)t * xs) + i;
                        const __m256i p =
                            _mm256_maddubs_epi16(q, _mm256_loadu_si256((const __m256i *)(a->qs + 32 * g)));
                        is[t] = _mm256_add_epi32(is[t], _mm256_madd_epi16(p, sv));
                    }
                }
            }
#pragma GCC unroll 8
            for (int t = 0; t < T; t++) {
                const struct hmoe_block_q8_k *a = (const struct hmoe_block_q8_k *)(x + (size_t)t * xs) + i;
                const __m256i bs = _mm256_loadu_si256((const __m256i *)a->bsums);
                const double da = a->d;
                __m256i v = is[t];
                if (is_q3) v = _mm256_sub_epi32(v, _mm256_slli_epi32(_mm256_madd_epi16(bs, sc16), 2));
                const __m128i v4 = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
                acc[r * T + t] = _mm256_fmadd_pd(_mm256_cvtepi32_pd(v4), _mm256_set1_pd(d * da), acc[r * T + t]);
                if (!is_q3) {
                    const __m256i ms = _mm256_madd_epi16(bs, mn16);
                    const __m128i m4 = _mm_add_epi32(_mm256_castsi256_si128(ms), _mm256_extracti128_si256(ms, 1));
                    acc[r * T + t] =
                        _mm256_fmadd_pd(_mm256_cvtepi32_pd(m4), _mm256_set1_pd(-dmin * da), acc[r * T + t]);
                }
            }
        }
    }
    for (int k = 0; k < R * T; k++) {
        __m128d s = _mm_add_pd(_mm256_castpd256_pd128(acc[k]), _mm256_extractf128_pd(acc[k], 1));
        out[k] = (float)(_mm_cvtsd_f64(s) + _mm_cvtsd_f64(_mm_unpackhi_pd(s, s)));
    }
}

#define Q2K_TILE(w, rb, nb, x, xs, out, R, T) q23_tile(w, rb, nb, x, xs, out, R, T, 0)
#define Q3K_TILE(w, rb, nb, x, xs, out, R, T) q23_tile(w, rb, nb, x, xs, out, R, T, 1)

HMOE_TILE_INSTANCES(q2k256, Q2K_TILE)
HMOE_DEFINE_GEMV_GEMM(q2_k_avx2, q2k256, 256)
HMOE_TILE_INSTANCES(q3k256, Q3K_TILE)
HMOE_DEFINE_GEMV_GEMM(q3_k_avx2, q3k256, 256)
