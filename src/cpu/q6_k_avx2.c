/* q6_k_avx2.c — Q6_K × Q8_K dot products with AVX2 (quants.md §4.6, §8.4). Per 32
 * elements (two 16-element sub-blocks, one per 128-bit lane): the 6-bit value assembled
 * from a ql nibble and a qh bit pair (unsigned 0..63), vpmaddubsw with the activations,
 * vpmaddwd with the two int8 scales (lane 0: sub-block 2g, lane 1: 2g+1); the "-32"
 * offset is applied once per block as 32·Σ scale[b]·bsums[b]. Double accumulation.
 * Decode (one token) has its own 4-row streaming kernel (q6_k_dec_avx2_impl.h; its AVX-VNNI
 * twin is q6_k_avxvnni.c); these tiles serve prefill and the remainder rows.
 */
#include <immintrin.h>

#include "cpu_impl.h"
#include "hmoe/quant_blocks.h"
#include "tile_impl.h"
#define HMOE_Q6KD_VNNI 0
#include "q6_k_dec_avx2_impl.h"

/* out[r*T + t] = dot(weight row r at w + r*rb, activation row t); see tile_impl.h. */
static inline __attribute__((always_inline)) void q6k_tile(const char *w, size_t rb, int64_t nb, const char *x,
                                                           size_t xs, float *out, const int R, const int T) {
    __m256d acc[HMOE_TILE_MAX_TOK];
    for (int k = 0; k < R * T; k++) acc[k] = _mm256_setzero_pd();
    const __m256i m4 = _mm256_set1_epi8(0x0f), m30 = _mm256_set1_epi8(0x30);
    /* after vpermd puts dword g (= scales 2g, 2g+1 as words) in both lanes: lane 0 repeats word 0, lane 1 word 1 */
    const __m256i pick =
        _mm256_set_epi8(3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0);
    for (int64_t i = 0; i < nb; i++) {
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            const struct hmoe_block_q6_k *b = (const struct hmoe_block_q6_k *)(w + (size_t)r * rb) + i;
            if (T == 1) hmoe_prefetch_block((const char *)b + hmoe_prefetch_distance(rb, R), sizeof *b);
            const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)b->scales));
            const double d = _cvtsh_ss(b->d);
            __m256i is[HMOE_TILE_MAX_TOK];
            for (int t = 0; t < T; t++) is[t] = _mm256_setzero_si256();
#pragma GCC unroll 2
            for (int h = 0; h < 2; h++) {
                const __m256i ql0 = _mm256_loadu_si256((const __m256i *)(b->ql + 64 * h));
                const __m256i ql1 = _mm256_loadu_si256((const __m256i *)(b->ql + 64 * h + 32));
                const __m256i qh = _mm256_loadu_si256((const __m256i *)(b->qh + 32 * h));
                __m256i q[4];
                q[0] = _mm256_or_si256(_mm256_and_si256(ql0, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), m30));
                q[1] = _mm256_or_si256(_mm256_and_si256(ql1, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), m30));
                q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4), _mm256_and_si256(qh, m30));
                q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4),
                                       _mm256_and_si256(_mm256_srli_epi16(qh, 2), m30));
#pragma GCC unroll 4
                for (int k = 0; k < 4; k++) {
                    const int g = 4 * h + k; /* elements 32g..32g+31 = sub-blocks 2g, 2g+1 */
                    const __m256i s =
                        _mm256_shuffle_epi8(_mm256_permutevar8x32_epi32(sc16, _mm256_set1_epi32(g)), pick);
#pragma GCC unroll 8
                    for (int t = 0; t < T; t++) {
                        const struct hmoe_block_q8_k *a = (const struct hmoe_block_q8_k *)(x + (size_t)t * xs) + i;
                        const __m256i p =
                            _mm256_maddubs_epi16(q[k], _mm256_loadu_si256((const __m256i *)(a->qs + 32 * g)));
                        is[t] = _mm256_add_epi32(is[t], _mm256_madd_epi16(p, s));
                    }
                }
            }
#pragma GCC unroll 8
            for (int t = 0; t < T; t++) {
                const struct hmoe_block_q8_k *a = (const struct hmoe_block_q8_k *)(x + (size_t)t * xs) + i;
                const __m256i bias = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)a->bsums), sc16);
                const __m256i v = _mm256_sub_epi32(is[t], _mm256_slli_epi32(bias, 5));
                const __m128i v4 = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
                acc[r * T + t] =
                    _mm256_fmadd_pd(_mm256_cvtepi32_pd(v4), _mm256_set1_pd(d * (double)a->d), acc[r * T + t]);
            }
        }
    }
    for (int k = 0; k < R * T; k++) {
        __m128d s = _mm_add_pd(_mm256_castpd256_pd128(acc[k]), _mm256_extractf128_pd(acc[k], 1));
        out[k] = (float)(_mm_cvtsd_f64(s) + _mm_cvtsd_f64(_mm_unpackhi_pd(s, s)));
    }
}

HMOE_TILE_INSTANCES(q6k256, q6k_tile)
HMOE_DEFINE_GEMV(q6_k_avx2_tiles, q6k256, 256)
HMOE_DEFINE_GEMM(q6_k_avx2, q6k256, 256)

/* Decode: the 4-row streaming kernel of q6_k_dec_avx2_impl.h. */
void hmoe_cpu_gemv_q6_k_avx2(int64_t ncols, const void *w, size_t row_bytes, int64_t nrows, const void *xq,
                             float *y) {
    q6kd_gemv(ncols, w, row_bytes, nrows, xq, y, hmoe_cpu_gemv_q6_k_avx2_tiles);
}
