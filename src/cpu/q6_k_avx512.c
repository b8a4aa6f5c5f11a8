/* q6_k_avx512.c — Q6_K × Q8_K dot products with AVX-512BW + VNNI (quants.md §4.6, §8.4).
 * Each block's quants are unpacked to bytes by q6_k_unpack_impl.h (one 64-byte ql load per
 * 128-element half, the qh bits merged in by vpternlog).
 * The 6-bit values stay unsigned (0..63) for vpmaddubsw; the "-32" offset is applied once
 * per block as 32·Σ scale[b]·bsums[b]. vpdpwssd multiplies by the int8 sub-block scales.
 * Exact integer sums per block, scaled and accumulated in double (as in q45_k_avx512.c).
 */
#include <immintrin.h>

#include "cpu_impl.h"
#include "hmoe/quant_blocks.h"
#include "q6_k_unpack_impl.h"
#include "tile_impl.h"

/* out[r*T + t] = dot(weight row r at w + r*rb, activation row t); see tile_impl.h. */
static inline __attribute__((always_inline)) void q6k_tile(const char *w, size_t rb, int64_t nb, const char *x,
                                                           size_t xs, float *out, const int R, const int T) {
    __m512d acc[HMOE_TILE_MAX_TOK];
    for (int k = 0; k < R * T; k++) acc[k] = _mm512_setzero_pd();
    const struct q6k_unpack_consts qc = q6k_unpack_consts();
    /* vpermw indices: chunk c (64 elements = sub-blocks 4c..4c+3) repeats scale 4c+k/8 in word k */
    const __m512i ix0 = _mm512_set_epi16(3, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0,
                                         0, 0, 0, 0, 0, 0);
    const __m512i four = _mm512_set1_epi16(4);
    const __m512i ix1 = _mm512_add_epi16(ix0, four), ix2 = _mm512_add_epi16(ix1, four);
    const __m512i ix3 = _mm512_add_epi16(ix2, four);
    for (int64_t i = 0; i < nb; i++) {
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            const struct hmoe_block_q6_k *b = (const struct hmoe_block_q6_k *)(w + (size_t)r * rb) + i;
            if (T == 1) hmoe_prefetch_block((const char *)b + hmoe_prefetch_distance(rb, R), sizeof *b);
            const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)b->scales));
            const __m512i sc = _mm512_castsi256_si512(sc16);
            const __m512i s0 = _mm512_permutexvar_epi16(ix0, sc), s1 = _mm512_permutexvar_epi16(ix1, sc);
            const __m512i s2 = _mm512_permutexvar_epi16(ix2, sc), s3 = _mm512_permutexvar_epi16(ix3, sc);
            __m512i q[4];
            q6k_unpack(b, &qc, q);
            const double d = _cvtsh_ss(b->d);
#pragma GCC unroll 8
            for (int t = 0; t < T; t++) {
                const struct hmoe_block_q8_k *a = (const struct hmoe_block_q8_k *)(x + (size_t)t * xs) + i;
                __m512i is = _mm512_madd_epi16(_mm512_maddubs_epi16(q[0], _mm512_loadu_si512(a->qs)), s0);
                is = _mm512_dpwssd_epi32(is, _mm512_maddubs_epi16(q[1], _mm512_loadu_si512(a->qs + 64)), s1);
                is = _mm512_dpwssd_epi32(is, _mm512_maddubs_epi16(q[2], _mm512_loadu_si512(a->qs + 128)), s2);
                is = _mm512_dpwssd_epi32(is, _mm512_maddubs_epi16(q[3], _mm512_loadu_si512(a->qs + 192)), s3);
                /* Σ scale·(q-32)·a = Σ scale·q·a - 32·Σ scale[b]·bsums[b] */
                const __m256i bias = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)a->bsums), sc16);
                __m256i is8 = _mm256_add_epi32(_mm512_castsi512_si256(is), _mm512_extracti64x4_epi64(is, 1));
                is8 = _mm256_sub_epi32(is8, _mm256_slli_epi32(bias, 5));
                acc[r * T + t] =
                    _mm512_fmadd_pd(_mm512_cvtepi32_pd(is8), _mm512_set1_pd(d * (double)a->d), acc[r * T + t]);
            }
        }
    }
    for (int k = 0; k < R * T; k++) out[k] = (float)_mm512_reduce_add_pd(acc[k]);
}

/* Decode path (one token, 4 rows): as the tile, but the 4 rows' int32 sums are reduced
 * together (vphaddd tree) and scaled by [d0..d3]·da with one double FMA per block, fewer
 * instructions per block so decode keeps up with RAM (see k45_gemv4 in q45_k_avx512.c). */
static inline __attribute__((always_inline)) void q6k_gemv4(const char *w, size_t rb, int64_t nb, const char *x,
                                                            size_t pf, float *out) {
    __m256d acc = _mm256_setzero_pd();
    const struct q6k_unpack_consts qc = q6k_unpack_consts();
    const __m512i ix0 = _mm512_set_epi16(3, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0,
                                         0, 0, 0, 0, 0, 0);
    const __m512i four = _mm512_set1_epi16(4);
    const __m512i ix1 = _mm512_add_epi16(ix0, four), ix2 = _mm512_add_epi16(ix1, four);
    const __m512i ix3 = _mm512_add_epi16(ix2, four);
    for (int64_t i = 0; i < nb; i++) {
        const struct hmoe_block_q8_k *a = (const struct hmoe_block_q8_k *)x + i;
        const __m512i a0 = _mm512_loadu_si512(a->qs), a1 = _mm512_loadu_si512(a->qs + 64);
        const __m512i a2 = _mm512_loadu_si512(a->qs + 128), a3 = _mm512_loadu_si512(a->qs + 192);
        const __m256i bs = _mm256_loadu_si256((const __m256i *)a->bsums);
        __m256i is8[4];
        uint16_t dd[8] = {0};
        /* look-ahead: this block's share of the tile's 4·rb bytes, pf ahead, one prefetch per
         * line (a block is 210 bytes, so per-row prefetches of 4 lines each repeat lines) */
        const size_t s0 = (4 * rb * (size_t)i / (size_t)nb) & ~(size_t)63, e0 = 4 * rb * (size_t)(i + 1) / (size_t)nb;
        for (size_t o = s0; o < e0; o += 64) __builtin_prefetch(w + pf + o, 0, 3);
#pragma GCC unroll 4
        for (int r = 0; r < 4; r++) {
            const struct hmoe_block_q6_k *b = (const struct hmoe_block_q6_k *)(w + (size_t)r * rb) + i;
            const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)b->scales));
            const __m512i sc = _mm512_castsi256_si512(sc16);
            __m512i q[4];
            q6k_unpack(b, &qc, q);
            __m512i is = _mm512_madd_epi16(_mm512_maddubs_epi16(q[0], a0), _mm512_permutexvar_epi16(ix0, sc));
            is = _mm512_dpwssd_epi32(is, _mm512_maddubs_epi16(q[1], a1), _mm512_permutexvar_epi16(ix1, sc));
            is = _mm512_dpwssd_epi32(is, _mm512_maddubs_epi16(q[2], a2), _mm512_permutexvar_epi16(ix2, sc));
            is = _mm512_dpwssd_epi32(is, _mm512_maddubs_epi16(q[3], a3), _mm512_permutexvar_epi16(ix3, sc));
            const __m256i bias = _mm256_madd_epi16(bs, sc16);
            is8[r] = _mm256_sub_epi32(_mm256_add_epi32(_mm512_castsi512_si256(is), _mm512_extracti64x4_epi64(is, 1)),
                                      _mm256_slli_epi32(bias, 5));
            dd[r] = b->d;
        }
        /* [IS0, IS1, IS2, IS3] */
        const __m256i u = _mm256_hadd_epi32(_mm256_hadd_epi32(is8[0], is8[1]), _mm256_hadd_epi32(is8[2], is8[3]));
        const __m128i v = _mm_add_epi32(_mm256_castsi256_si128(u), _mm256_extracti128_si256(u, 1));
        const __m256d sc = _mm256_cvtps_pd(_mm_cvtph_ps(_mm_loadl_epi64((const __m128i *)dd)));
        acc = _mm256_fmadd_pd(_mm256_cvtepi32_pd(v), _mm256_mul_pd(sc, _mm256_set1_pd((double)a->d)), acc);
    }
    double lanes[4];
    _mm256_storeu_pd(lanes, acc);
    for (int r = 0; r < 4; r++) out[r] = (float)lanes[r];
}

static inline __attribute__((always_inline)) void q6k_body(const char *w, size_t rb, int64_t nb, const char *x,
                                                           size_t xs, float *out, const int R, const int T) {
    if (R == 4 && T == 1)
        q6k_gemv4(w, rb, nb, x, hmoe_prefetch_distance(rb, 4), out);
    else
        q6k_tile(w, rb, nb, x, xs, out, R, T);
}

/* The decode tile with the look-ahead chosen by the caller (HMOE_DEFINE_GEMV_STREAM). */
static void q6k512_stream4(const char *w, size_t rb, int64_t nb, const char *x, size_t pf, float *out) {
    q6k_gemv4(w, rb, nb, x, pf, out);
}

HMOE_TILE_INSTANCES(q6k512, q6k_body)
HMOE_DEFINE_GEMV_STREAM(q6_k_avx512, q6k512, q6k512_stream4, 256)
HMOE_DEFINE_GEMM(q6_k_avx512, q6k512, 256)
