/* q6_k_dec_avx2_impl.h — private to src/cpu: the Q6_K decode gemv (one token) for 16 YMM
 * registers, included by q6_k_avx2.c (HMOE_Q6KD_VNNI 0: vpmaddwd + vpaddd) and
 * q6_k_avxvnni.c (1: VEX vpdpwssd), each compiled with its own flags.
 * Per row and block (quants.md §4.6): the 6-bit values (unsigned 0..63) of 32 elements per
 * YMM (sub-blocks 2g and 2g+1, one per 128-bit lane) times the activations by vpmaddubsw
 * (|pair| <= 2·63·128, no saturation), then vpmaddwd with the two sub-blocks' scales. The
 * 16 scales are put once per block in the order [even | odd] (one vpshufb + one vpermq), so
 * each pair of sub-blocks takes its scales with one in-lane vpshufb. The "-32" offset is
 * applied once per block as 32·Σ scale[b]·bsums[b]. The 4 rows' sums are reduced together
 * and scaled by one double FMA per block; each 64-byte line of the tile's stream is
 * prefetched once, `pf` ahead, in the streaming loop of tile_impl.h (first look-ahead burst,
 * clamped look-ahead, page look-ahead).
 * The prefill tiles (q6k_tile) are here too, so that each includer's Q6KD_DEFINE builds all
 * of its kernels with its own instructions; the tiles' gemv takes the decode kernel's
 * remainder rows (nrows % 4).
 */
#ifndef HMOE_CPU_Q6_K_DEC_AVX2_IMPL_H
#define HMOE_CPU_Q6_K_DEC_AVX2_IMPL_H

#include <immintrin.h>

#include "cpu_impl.h"
#include "hmoe/quant_blocks.h"
#include "tile_impl.h"

#if HMOE_Q6KD_VNNI
#define Q6KD_DPWSSD(acc, a, b) _mm256_dpwssd_avx_epi32(acc, a, b)
#else
#define Q6KD_DPWSSD(acc, a, b) _mm256_add_epi32(acc, _mm256_madd_epi16(a, b))
#endif

/* ---- Prefill tiles (and the decode's remainder rows). Per 32 elements (two 16-element
 * sub-blocks, one per 128-bit lane): the 6-bit value assembled from a ql nibble and a qh
 * bit pair, vpmaddubsw with the activations, the two int8 scales (lane 0: sub-block 2g,
 * lane 1: 2g+1) applied by vpmaddwd + vpaddd or one vpdpwssd; the "-32" offset once per
 * block as 32·Σ scale[b]·bsums[b]. Double accumulation. */
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
                        is[t] = Q6KD_DPWSSD(is[t], p, s);
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

/* One row's block: 8 int32 lanes whose sum is Σ_b scale[b] · Σ_{e in b} (q - 32)·a. */
static inline __attribute__((always_inline)) __m256i q6kd_row(const struct hmoe_block_q6_k *b,
                                                              const struct hmoe_block_q8_k *a) {
    const __m256i m4 = _mm256_set1_epi8(0x0f), m30 = _mm256_set1_epi8(0x30);
    const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)b->scales));
    /* scales as words [s0 s2 .. s14 | s1 s3 .. s15]: per lane evens then odds, then qwords (0, 2 | 1, 3) */
    const __m256i eo = _mm256_shuffle_epi8(sc16, _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15,
                                                                  0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15));
    const __m256i sc_eo = _mm256_permute4x64_epi64(eo, _MM_SHUFFLE(3, 1, 2, 0));
    __m256i is = _mm256_setzero_si256();
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
            const int g = 4 * h + k; /* elements 32g..32g+31 = sub-blocks 2g (lane 0), 2g+1 (lane 1) */
            const __m256i s = _mm256_shuffle_epi8(sc_eo, _mm256_set1_epi16((short)(0x0100 + 0x0202 * g)));
            const __m256i p = _mm256_maddubs_epi16(q[k], _mm256_loadu_si256((const __m256i *)(a->qs + 32 * g)));
            is = Q6KD_DPWSSD(is, p, s);
        }
    }
    const __m256i bias = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)a->bsums), sc16);
    return _mm256_sub_epi32(is, _mm256_slli_epi32(bias, 5));
}

static inline __attribute__((always_inline)) void q6kd_gemv4(const char *w, size_t rb, int64_t nb, const char *x,
                                                             size_t pf, float *out) {
    __m256d acc = _mm256_setzero_pd();
    for (int64_t i = 0; i < nb; i++) {
        const struct hmoe_block_q8_k *a = (const struct hmoe_block_q8_k *)x + i;
        /* look-ahead: this block's share of the tile's 4·rb bytes, one prefetch per line */
        const size_t s0 = (4 * rb * (size_t)i / (size_t)nb) & ~(size_t)63, e0 = 4 * rb * (size_t)(i + 1) / (size_t)nb;
        for (size_t o = s0; o < e0; o += 64) __builtin_prefetch(w + pf + o, 0, 3);
        __m256i is[4];
#pragma GCC unroll 4
        for (int r = 0; r < 4; r++) is[r] = q6kd_row((const struct hmoe_block_q6_k *)(w + (size_t)r * rb) + i, a);
        const __m256i u = _mm256_hadd_epi32(_mm256_hadd_epi32(is[0], is[1]), _mm256_hadd_epi32(is[2], is[3]));
        const __m128i v = _mm_add_epi32(_mm256_castsi256_si128(u), _mm256_extracti128_si256(u, 1));
        /* the 4 rows' fp16 d by word inserts (no store-forwarding stall) */
        const struct hmoe_block_q6_k *b0 = (const struct hmoe_block_q6_k *)w + i;
        __m128i dd = _mm_cvtsi32_si128(b0->d);
        dd = _mm_insert_epi16(dd, ((const struct hmoe_block_q6_k *)(w + rb) + i)->d, 1);
        dd = _mm_insert_epi16(dd, ((const struct hmoe_block_q6_k *)(w + 2 * rb) + i)->d, 2);
        dd = _mm_insert_epi16(dd, ((const struct hmoe_block_q6_k *)(w + 3 * rb) + i)->d, 3);
        const __m256d sc = _mm256_mul_pd(_mm256_cvtps_pd(_mm_cvtph_ps(dd)), _mm256_set1_pd((double)a->d));
        acc = _mm256_fmadd_pd(_mm256_cvtepi32_pd(v), sc, acc);
    }
    double lanes[4];
    _mm256_storeu_pd(lanes, acc);
    for (int r = 0; r < 4; r++) out[r] = (float)lanes[r];
}

/* The streaming decode loop of HMOE_DEFINE_GEMV_STREAM with the remainder rows handed to
 * `rest` (the plain tiles). */
static inline __attribute__((always_inline)) void q6kd_gemv(int64_t ncols, const void *w, size_t row_bytes,
                                                            int64_t nrows, const void *xq, float *y,
                                                            void (*rest)(int64_t, const void *, size_t, int64_t,
                                                                         const void *, float *)) {
    const int64_t nb = ncols / 256;
    const size_t pf = hmoe_stream_prefetch_distance(row_bytes);
    const size_t all = (size_t)nrows * row_bytes, ahead = pf + HMOE_PAGE_AHEAD_EXTRA;
    size_t touch = (size_t)((((uintptr_t)w + 4095) & ~(uintptr_t)4095) - (uintptr_t)w);
    hmoe_prefetch_block((const char *)w, pf < all ? pf : all);
    int64_t r = 0;
    for (; r + HMOE_TILE_GEMV_ROWS <= nrows; r += HMOE_TILE_GEMV_ROWS) {
        touch = hmoe_page_touch((const char *)w, touch, (size_t)(r + HMOE_TILE_GEMV_ROWS) * row_bytes + ahead, all);
        const size_t left = (size_t)(nrows - r - HMOE_TILE_GEMV_ROWS) * row_bytes; /* after this tile */
        q6kd_gemv4((const char *)w + (size_t)r * row_bytes, row_bytes, nb, (const char *)xq, pf < left ? pf : left,
                   y + r);
    }
    if (r < nrows) rest(ncols, (const char *)w + (size_t)r * row_bytes, row_bytes, nrows - r, xq, y + r);
}

#include "q6_k_gemm4_avx2_impl.h"

/* hmoe_cpu_gemv_q6_k_SFX (the decode kernel), hmoe_cpu_gemv_q6_k_SFX_tiles (its remainder
 * rows), hmoe_cpu_gemm_q6_k_SFX (the 4-token group tiles of q6_k_gemm4_avx2_impl.h) and
 * hmoe_cpu_gemm_q6_k_SFX_long (the tiles, for rows too long for the group gemm). */
#define Q6KD_DEFINE(SFX)                                                                                               \
    HMOE_TILE_INSTANCES(q6k_##SFX, q6k_tile)                                                                           \
    HMOE_DEFINE_GEMV(q6_k_##SFX##_tiles, q6k_##SFX, 256)                                                               \
    HMOE_DEFINE_GEMM(q6_k_##SFX##_long, q6k_##SFX, 256)                                                                \
    Q6KG_DEFINE_GEMM(q6_k_##SFX, q6k_##SFX##_g, q6k_##SFX##_tok_tiles, hmoe_cpu_gemm_q6_k_##SFX##_long)                \
    void hmoe_cpu_gemv_q6_k_##SFX(int64_t ncols, const void *w, size_t row_bytes, int64_t nrows, const void *xq,      \
                                  float *y) {                                                                          \
        q6kd_gemv(ncols, w, row_bytes, nrows, xq, y, hmoe_cpu_gemv_q6_k_##SFX##_tiles);                                \
    }

#endif
