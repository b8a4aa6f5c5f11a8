/* q45_k_avx2.c — Q4_K and Q5_K × Q8_K dot products with AVX2 (quants.md §4.3-§4.5, §8.4).
 * Per 32-element sub-block: nibbles (plus Q5_K's qh bit) as u8, vpmaddubsw with the int8
 * activations, vpmaddwd with the sub-block's 6-bit scale broadcast to 16 words (vpshufb
 * from the unpacked scales), int32 adds; the mins use the Q8_K bsums. Exact integer sums
 * per block, scaled and accumulated in double like the AVX-512 version (q45_k_avx512.c).
 * Decode (one token) has its own 4-row kernel on a prepared activation row
 * (q45_k_dec_avx2_impl.h; its AVX-VNNI twin is q45_k_avxvnni.c).
 * Compiled with -mavx2 -mfma -mf16c (Makefile); only called after the run-time check.
 */
#include <immintrin.h>
#include <stddef.h>

#include "cpu_impl.h"
#include "hmoe/quant_blocks.h"
#include "tile_impl.h"
#define HMOE_K45D_VNNI 0
#include "q45_k_dec_avx2_impl.h"

/* Bytes [SC0..SC7, MN0..MN7] of §4.3 from the block's first 16 bytes (see
 * k45_scales_mins in q45_k_avx512.c for the word form). */
static inline __m128i k45_scales_mins(const void *block) {
    const __m128i v = _mm_loadu_si128((const __m128i *)block);
    const __m128i a = _mm_srlv_epi32(_mm_shuffle_epi32(v, _MM_SHUFFLE(3, 2, 3, 1)), _mm_set_epi32(4, 0, 0, 0));
    const __m128i hi2 = _mm_and_si128(_mm_srli_epi32(_mm_shuffle_epi32(v, _MM_SHUFFLE(2, 2, 1, 1)), 2),
                                      _mm_set_epi32(0x30303030, 0, 0x30303030, 0));
    const __m128i m = _mm_set_epi32(0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f);
    return _mm_or_si128(_mm_and_si128(a, m), hi2);
}

/* 16 words all equal to word j of a vector holding 8 words in each 128-bit lane. */
static inline __m256i bcast_word(__m256i words, int j) {
    return _mm256_shuffle_epi8(words, _mm256_set1_epi16((short)(0x0100 + 0x0202 * j)));
}

/* out[r*T + t] = dot(weight row r at w + r*rb, activation row t); see tile_impl.h. */
static inline __attribute__((always_inline)) void k45_tile(const char *w, size_t rb, int64_t nb, const char *x,
                                                           size_t xs, float *out, const int R, const int T,
                                                           const size_t block_bytes, const size_t qs_off,
                                                           const int has_qh, const size_t qh_off) {
    __m256d acc[HMOE_TILE_MAX_TOK];
    for (int k = 0; k < R * T; k++) acc[k] = _mm256_setzero_pd();
    const __m256i m4 = _mm256_set1_epi8(0x0f), b4 = _mm256_set1_epi8(0x10);
    const __m128i dup_mins = _mm_set_epi8(15, 15, 14, 14, 13, 13, 12, 12, 11, 11, 10, 10, 9, 9, 8, 8);
    for (int64_t i = 0; i < nb; i++) {
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            const uint8_t *b = (const uint8_t *)w + (size_t)r * rb + (size_t)i * block_bytes;
            if (T == 1) hmoe_prefetch_block((const char *)b + hmoe_prefetch_distance(rb, R), block_bytes);
            const __m128i scmn = k45_scales_mins(b);
            const __m256i scw = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(scmn));  /* SC0..SC7 words, both lanes */
            const __m256i mn = _mm256_cvtepu8_epi16(_mm_shuffle_epi8(scmn, dup_mins)); /* MN0,MN0,MN1,MN1,... */
            __m256i qh = _mm256_setzero_si256();
            if (has_qh) qh = _mm256_loadu_si256((const __m256i *)(b + qh_off));
            const struct hmoe_block_q4_k *hdr = (const struct hmoe_block_q4_k *)b; /* d, dmin: same offsets in Q5_K */
            const double d = _cvtsh_ss(hdr->d), dmin = _cvtsh_ss(hdr->dmin);
            __m256i is[HMOE_TILE_MAX_TOK];
            for (int t = 0; t < T; t++) is[t] = _mm256_setzero_si256();
#pragma GCC unroll 4
            for (int p = 0; p < 4; p++) {
                const __m256i raw = _mm256_loadu_si256((const __m256i *)(b + qs_off + 32 * p));
                __m256i qlo = _mm256_and_si256(raw, m4), qhi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4);
                if (has_qh) { /* element 64p+l: bit 2p of qh[l]; 64p+32+l: bit 2p+1 */
                    const __m256i bl = _mm256_set1_epi8((char)(1 << (2 * p))),
                                  bh = _mm256_set1_epi8((char)(2 << (2 * p)));
                    qlo = _mm256_or_si256(qlo, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, bl), bl), b4));
                    qhi = _mm256_or_si256(qhi, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, bh), bh), b4));
                }
                const __m256i slo = bcast_word(scw, 2 * p), shi = bcast_word(scw, 2 * p + 1);
#pragma GCC unroll 8
                for (int t = 0; t < T; t++) {
                    const struct hmoe_block_q8_k *a = (const struct hmoe_block_q8_k *)(x + (size_t)t * xs) + i;
                    const __m256i plo =
                        _mm256_maddubs_epi16(qlo, _mm256_loadu_si256((const __m256i *)(a->qs + 64 * p)));
                    const __m256i phi =
                        _mm256_maddubs_epi16(qhi, _mm256_loadu_si256((const __m256i *)(a->qs + 64 * p + 32)));
                    is[t] = _mm256_add_epi32(
                        is[t], _mm256_add_epi32(_mm256_madd_epi16(plo, slo), _mm256_madd_epi16(phi, shi)));
                }
            }
#pragma GCC unroll 8
            for (int t = 0; t < T; t++) {
                const struct hmoe_block_q8_k *a = (const struct hmoe_block_q8_k *)(x + (size_t)t * xs) + i;
                const __m256i ms = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)a->bsums), mn);
                const __m128i is4 = _mm_add_epi32(_mm256_castsi256_si128(is[t]), _mm256_extracti128_si256(is[t], 1));
                const __m128i ms4 = _mm_add_epi32(_mm256_castsi256_si128(ms), _mm256_extracti128_si256(ms, 1));
                const double da = a->d;
                acc[r * T + t] = _mm256_fmadd_pd(_mm256_cvtepi32_pd(is4), _mm256_set1_pd(d * da), acc[r * T + t]);
                acc[r * T + t] = _mm256_fmadd_pd(_mm256_cvtepi32_pd(ms4), _mm256_set1_pd(-dmin * da), acc[r * T + t]);
            }
        }
    }
    for (int k = 0; k < R * T; k++) {
        __m128d s = _mm_add_pd(_mm256_castpd256_pd128(acc[k]), _mm256_extractf128_pd(acc[k], 1));
        out[k] = (float)(_mm_cvtsd_f64(s) + _mm_cvtsd_f64(_mm_unpackhi_pd(s, s)));
    }
}

#define Q4K_TILE(w, rb, nb, x, xs, out, R, T)                                                                          \
    k45_tile(w, rb, nb, x, xs, out, R, T, sizeof(struct hmoe_block_q4_k), offsetof(struct hmoe_block_q4_k, qs), 0, 0)
#define Q5K_TILE(w, rb, nb, x, xs, out, R, T)                                                                          \
    k45_tile(w, rb, nb, x, xs, out, R, T, sizeof(struct hmoe_block_q5_k), offsetof(struct hmoe_block_q5_k, qs), 1,     \
             offsetof(struct hmoe_block_q5_k, qh))

/* The tiles' gemv (hmoe_cpu_gemv_q4_k_avx2_tiles, ..): the decode kernels' remainder rows
 * and rows too long for their prepared buffer, here and in q45_k_avxvnni.c. */
HMOE_TILE_INSTANCES(q4k256, Q4K_TILE)
HMOE_DEFINE_GEMV(q4_k_avx2_tiles, q4k256, 256)
HMOE_DEFINE_GEMM(q4_k_avx2, q4k256, 256)
HMOE_TILE_INSTANCES(q5k256, Q5K_TILE)
HMOE_DEFINE_GEMV(q5_k_avx2_tiles, q5k256, 256)
HMOE_DEFINE_GEMM(q5_k_avx2, q5k256, 256)

/* Decode: the 4-row kernel on a prepared activation row (q45_k_dec_avx2_impl.h). */
void hmoe_cpu_gemv_q4_k_avx2(int64_t ncols, const void *w, size_t row_bytes, int64_t nrows, const void *xq,
                             float *y) {
    K45D_GEMV_Q4(ncols, w, row_bytes, nrows, xq, y, hmoe_cpu_gemv_q4_k_avx2_tiles);
}
void hmoe_cpu_gemv_q5_k_avx2(int64_t ncols, const void *w, size_t row_bytes, int64_t nrows, const void *xq,
                             float *y) {
    K45D_GEMV_Q5(ncols, w, row_bytes, nrows, xq, y, hmoe_cpu_gemv_q5_k_avx2_tiles);
}
