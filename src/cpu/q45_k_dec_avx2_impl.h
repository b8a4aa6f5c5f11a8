/* q45_k_dec_avx2_impl.h — private to src/cpu: the Q4_K / Q5_K decode gemv (one token) for
 * 16 YMM registers, included by q45_k_avx2.c (HMOE_K45D_VNNI 0: vpmaddubsw + vpmaddwd) and
 * q45_k_avxvnni.c (HMOE_K45D_VNNI 1: VEX vpdpbusd + vpdpwssd), each compiled with its own
 * flags. The structure is the AVX-512 decode's (q45_k_avx512.c, tile_impl.h):
 *  - the activation row is prepared once per call (k45d_prep): quants copied to 32-byte
 *    aligned blocks, the pair sums bp(j) = bsums[2j] + bsums[2j+1] that the mins multiply
 *    precomputed as words in both 128-bit lanes, and d;
 *  - 4 rows per tile, each 32-byte load of qs giving two whole sub-blocks (low nibbles =
 *    sub-block 2j, high = 2j+1, quants.md §4.4), so the activations need no reordering;
 *  - VNNI: vpdpbusd of each sub-block into a zeroed register (each int32 lane sums 4
 *    products: |lane| <= 4·31·128 < 2^15, Q5_K too), vpackssdw of the two sub-blocks'
 *    sums (exact), one vpdpwssd with the two scales as words; plain AVX2: vpmaddubsw
 *    (|pair| <= 2·31·128, no saturation) and vpmaddwd with each sub-block's scale;
 *  - the 4 rows' int32 sums and mins reduced together to [IS0..IS3], [MS0..MS3] and
 *    scaled by two double FMAs per block for all 4 rows;
 *  - the streaming loop of HMOE_DEFINE_GEMV_STREAM: the first look-ahead distance requested
 *    in one burst, the block look-ahead clamped to the range, every page touched
 *    HMOE_PAGE_AHEAD_EXTRA bytes ahead (tile_impl.h says why).
 * The gemv tiles (k45t_tile) are here too, so that each includer's K45D_DEFINE builds all
 * of its kernels with its own instructions; the tiles' gemv takes the decode kernel's
 * remainder rows (nrows % 4) and rows too long for the prepared buffer.
 */
#ifndef HMOE_CPU_Q45_K_DEC_AVX2_IMPL_H
#define HMOE_CPU_Q45_K_DEC_AVX2_IMPL_H

#include <immintrin.h>
#include <stddef.h>
#include <string.h>

#include "cpu_impl.h"
#include "hmoe/quant_blocks.h"
#include "tile_impl.h"

#if HMOE_K45D_VNNI
#define K45D_DPBUSD(acc, u, s) _mm256_dpbusd_avx_epi32(acc, u, s)
#define K45D_DPWSSD(acc, a, b) _mm256_dpwssd_avx_epi32(acc, a, b)
#else
#define K45D_DPWSSD(acc, a, b) _mm256_add_epi32(acc, _mm256_madd_epi16(a, b))
#endif

struct k45d_act {
    int8_t qs[256];
    int16_t bp[16]; /* bp(0..7) in both 128-bit lanes */
    float d;
    char pad[28];
};
_Static_assert(sizeof(struct k45d_act) % 32 == 0, "prepared blocks must stay 32-byte aligned (aligned loads)");
#define K45D_BUF_BYTES (64 * 1024)
#define K45D_MAX_BLOCKS ((int64_t)(K45D_BUF_BYTES / sizeof(struct k45d_act)))

static inline void k45d_prep(struct k45d_act *dst, const char *src, int64_t nb) {
    for (int64_t i = 0; i < nb; i++) {
        const struct hmoe_block_q8_k *a = (const struct hmoe_block_q8_k *)src + i;
        struct k45d_act *d = dst + i;
        for (int k = 0; k < 8; k++)
            _mm256_store_si256((__m256i *)(d->qs + 32 * k), _mm256_loadu_si256((const __m256i *)(a->qs + 32 * k)));
        /* |bp| <= 2·16·128: the saturating pack is exact */
        const __m256i bsw = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)a->bsums), _mm256_set1_epi16(1));
        const __m128i bp = _mm_packs_epi32(_mm256_castsi256_si128(bsw), _mm256_extracti128_si256(bsw, 1));
        _mm256_store_si256((__m256i *)d->bp, _mm256_broadcastsi128_si256(bp));
        d->d = a->d;
    }
}

/* Bytes [SC0..SC7, MN0..MN7] of quants.md §4.3 from the block's first 16 bytes. */
static inline __m128i k45d_scales_mins(const void *block) {
    const __m128i v = _mm_loadu_si128((const __m128i *)block);
    const __m128i a = _mm_srlv_epi32(_mm_shuffle_epi32(v, _MM_SHUFFLE(3, 2, 3, 1)), _mm_set_epi32(4, 0, 0, 0));
    const __m128i hi2 = _mm_and_si128(_mm_srli_epi32(_mm_shuffle_epi32(v, _MM_SHUFFLE(2, 2, 1, 1)), 2),
                                      _mm_set_epi32(0x30303030, 0, 0x30303030, 0));
    const __m128i m = _mm_set_epi32(0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f);
    return _mm_or_si128(_mm_and_si128(a, m), hi2);
}

/* The 8-lane int32 sum Σ_s SC[s] · Σ_{e in s} q·a of one row's block, and its mins as
 * words [MN0..MN7] (mn). */
static inline __attribute__((always_inline)) __m256i k45d_row(const uint8_t *b, const struct k45d_act *a,
                                                              const size_t qs_off, const int has_qh,
                                                              const size_t qh_off, __m128i *mn) {
    const __m256i m4 = _mm256_set1_epi8(0x0f), b4 = _mm256_set1_epi8(0x10);
    const __m128i scmn16 = k45d_scales_mins(b);
    const __m256i scmn = _mm256_broadcastsi128_si256(scmn16);
    *mn = _mm_cvtepu8_epi16(_mm_srli_si128(scmn16, 8));
    __m256i qh = _mm256_setzero_si256();
    if (has_qh) qh = _mm256_loadu_si256((const __m256i *)(b + qh_off));
    __m256i is = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) {
        const __m256i raw = _mm256_loadu_si256((const __m256i *)(b + qs_off + 32 * j));
        __m256i lo = _mm256_and_si256(raw, m4), hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4);
        if (has_qh) { /* element 64j+l: bit 2j of qh[l]; 64j+32+l: bit 2j+1 (16-bit shifts keep bytes apart) */
            const __m256i t = _mm256_srli_epi16(qh, 2 * j);
            lo = _mm256_or_si256(lo, _mm256_and_si256(_mm256_slli_epi16(t, 4), b4));
            hi = _mm256_or_si256(hi, _mm256_and_si256(_mm256_slli_epi16(t, 3), b4));
        }
        const __m256i a_lo = _mm256_load_si256((const __m256i *)(a->qs + 64 * j));
        const __m256i a_hi = _mm256_load_si256((const __m256i *)(a->qs + 64 * j + 32));
#if HMOE_K45D_VNNI
        /* words per lane: [sums of sub-block 2j x4, of 2j+1 x4]; scales in the same layout */
        const __m256i z = _mm256_setzero_si256();
        const __m256i p = _mm256_packs_epi32(K45D_DPBUSD(z, lo, a_lo), K45D_DPBUSD(z, hi, a_hi));
        const short s0 = (short)(0xff00 | (2 * j)), s1 = (short)(0xff00 | (2 * j + 1));
        const __m256i sc = _mm256_shuffle_epi8(scmn, _mm256_setr_epi16(s0, s0, s0, s0, s1, s1, s1, s1, s0, s0, s0, s0,
                                                                       s1, s1, s1, s1));
        is = K45D_DPWSSD(is, p, sc);
#else
        const __m256i s0 = _mm256_shuffle_epi8(scmn, _mm256_set1_epi16((short)(0xff00 | (2 * j))));
        const __m256i s1 = _mm256_shuffle_epi8(scmn, _mm256_set1_epi16((short)(0xff00 | (2 * j + 1))));
        is = K45D_DPWSSD(is, _mm256_maddubs_epi16(lo, a_lo), s0);
        is = K45D_DPWSSD(is, _mm256_maddubs_epi16(hi, a_hi), s1);
#endif
    }
    return is;
}

/* ---- Row tiles (the decode's remainder rows, long rows): per 32-element sub-block, nibbles
 * (plus Q5_K's qh bit) as u8, vpmaddubsw with the int8 activations, the sub-block's 6-bit
 * scale broadcast to 16 words (vpshufb) applied by vpmaddwd + vpaddd, or one vpdpwssd with
 * VNNI; the mins use the Q8_K bsums; exact integer sums per block, scaled in double. */
/* 16 words all equal to word j of a vector holding 8 words in each 128-bit lane. */
static inline __m256i k45t_bcast_word(__m256i words, int j) {
    return _mm256_shuffle_epi8(words, _mm256_set1_epi16((short)(0x0100 + 0x0202 * j)));
}

/* out[r*T + t] = dot(weight row r at w + r*rb, activation row t); see tile_impl.h. */
static inline __attribute__((always_inline)) void k45t_tile(const char *w, size_t rb, int64_t nb, const char *x,
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
            const __m128i scmn = k45d_scales_mins(b);
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
                const __m256i slo = k45t_bcast_word(scw, 2 * p), shi = k45t_bcast_word(scw, 2 * p + 1);
#pragma GCC unroll 8
                for (int t = 0; t < T; t++) {
                    const struct hmoe_block_q8_k *a = (const struct hmoe_block_q8_k *)(x + (size_t)t * xs) + i;
                    const __m256i plo =
                        _mm256_maddubs_epi16(qlo, _mm256_loadu_si256((const __m256i *)(a->qs + 64 * p)));
                    const __m256i phi =
                        _mm256_maddubs_epi16(qhi, _mm256_loadu_si256((const __m256i *)(a->qs + 64 * p + 32)));
                    is[t] = K45D_DPWSSD(K45D_DPWSSD(is[t], plo, slo), phi, shi);
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

/* out[r] = dot(row r, x) for 4 rows at w, w + rb, ..; each block prefetched pf bytes ahead. */
static inline __attribute__((always_inline)) void k45d_gemv4(const char *w, size_t rb, int64_t nb,
                                                             const struct k45d_act *x, size_t pf, float *out,
                                                             const size_t block_bytes, const size_t qs_off,
                                                             const int has_qh, const size_t qh_off) {
    __m256d acc = _mm256_setzero_pd();
    for (int64_t i = 0; i < nb; i++) {
        const struct k45d_act *a = x + i;
        const uint8_t *b0 = (const uint8_t *)w + (size_t)i * block_bytes;
        __m256i is[4];
        __m128i mn[4];
#pragma GCC unroll 4
        for (int r = 0; r < 4; r++) {
            const uint8_t *b = b0 + (size_t)r * rb;
            hmoe_prefetch_block((const char *)b + pf, block_bytes);
            is[r] = k45d_row(b, a, qs_off, has_qh, qh_off, &mn[r]);
        }
        /* [IS0, IS1, IS2, IS3]: hadd tree, then the two 128-bit lanes added */
        const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(is[0], is[1]), _mm256_hadd_epi32(is[2], is[3]));
        const __m128i vis = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
        /* mins: rows (0, 1) and (2, 3) in the two lanes against bp, then reduced to [MS0..MS3] */
        const __m256i bp = _mm256_load_si256((const __m256i *)a->bp);
        const __m256i m01 = _mm256_madd_epi16(_mm256_set_m128i(mn[1], mn[0]), bp);
        const __m256i m23 = _mm256_madd_epi16(_mm256_set_m128i(mn[3], mn[2]), bp);
        const __m256i hm = _mm256_hadd_epi32(m01, m23);        /* lane0 [r0 r0 r2 r2], lane1 [r1 r1 r3 r3] */
        const __m256i hm2 = _mm256_hadd_epi32(hm, hm);         /* lane0 [r0 r2 ..], lane1 [r1 r3 ..] */
        const __m128i vms = _mm_unpacklo_epi32(_mm256_castsi256_si128(hm2), _mm256_extracti128_si256(hm2, 1));
        /* fp16 d, dmin of the 4 rows (both block types start with d, dmin), inserted as dwords
         * (a store + vector load of them would stall on store forwarding) */
        __m128i dd = _mm_cvtsi32_si128(*(const int *)b0);
        dd = _mm_insert_epi32(dd, *(const int *)(b0 + rb), 1);
        dd = _mm_insert_epi32(dd, *(const int *)(b0 + 2 * rb), 2);
        dd = _mm_insert_epi32(dd, *(const int *)(b0 + 3 * rb), 3);
        const __m256 f = _mm256_cvtph_ps(dd); /* d0 dmin0 d1 dmin1 .. */
        const __m256 fd = _mm256_permutevar8x32_ps(f, _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7));
        const __m256d da = _mm256_set1_pd((double)a->d);
        const __m256d d4 = _mm256_mul_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(fd)), da);
        const __m256d m4 = _mm256_mul_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(fd, 1)), da);
        acc = _mm256_fmadd_pd(_mm256_cvtepi32_pd(vis), d4, acc);
        acc = _mm256_fnmadd_pd(_mm256_cvtepi32_pd(vms), m4, acc);
    }
    double lanes[4];
    _mm256_storeu_pd(lanes, acc);
    for (int r = 0; r < 4; r++) out[r] = (float)lanes[r];
}

typedef void (*k45d_fallback_fn)(int64_t ncols, const void *w, size_t row_bytes, int64_t nrows, const void *xq,
                                 float *y);

static inline __attribute__((always_inline)) void k45d_gemv(int64_t ncols, const void *w, size_t row_bytes,
                                                            int64_t nrows, const void *xq, float *y,
                                                            k45d_fallback_fn fallback, const size_t block_bytes,
                                                            const size_t qs_off, const int has_qh,
                                                            const size_t qh_off) {
    const int64_t nb = ncols / 256;
    if (nb > K45D_MAX_BLOCKS || nrows < HMOE_TILE_GEMV_ROWS) {
        fallback(ncols, w, row_bytes, nrows, xq, y);
        return;
    }
    const size_t pf = hmoe_stream_prefetch_distance(row_bytes);
    const size_t all = (size_t)nrows * row_bytes, ahead = pf + HMOE_PAGE_AHEAD_EXTRA;
    size_t touch = (size_t)((((uintptr_t)w + 4095) & ~(uintptr_t)4095) - (uintptr_t)w);
    hmoe_prefetch_block((const char *)w, pf < all ? pf : all);
    _Alignas(32) struct k45d_act buf[K45D_BUF_BYTES / sizeof(struct k45d_act)];
    k45d_prep(buf, (const char *)xq, nb);
    int64_t r = 0;
    for (; r + HMOE_TILE_GEMV_ROWS <= nrows; r += HMOE_TILE_GEMV_ROWS) {
        touch = hmoe_page_touch((const char *)w, touch, (size_t)(r + HMOE_TILE_GEMV_ROWS) * row_bytes + ahead, all);
        const size_t left = (size_t)(nrows - r - HMOE_TILE_GEMV_ROWS) * row_bytes; /* after this tile */
        k45d_gemv4((const char *)w + (size_t)r * row_bytes, row_bytes, nb, buf, pf < left ? pf : left, y + r,
                   block_bytes, qs_off, has_qh, qh_off);
    }
    if (r < nrows) fallback(ncols, (const char *)w + (size_t)r * row_bytes, row_bytes, nrows - r, xq, y + r);
}

#define K45D_GEMV_Q4(ncols, w, rb, nrows, xq, y, fallback)                                                              \
    k45d_gemv(ncols, w, rb, nrows, xq, y, fallback, sizeof(struct hmoe_block_q4_k),                                    \
              offsetof(struct hmoe_block_q4_k, qs), 0, 0)
#define K45D_GEMV_Q5(ncols, w, rb, nrows, xq, y, fallback)                                                              \
    k45d_gemv(ncols, w, rb, nrows, xq, y, fallback, sizeof(struct hmoe_block_q5_k),                                    \
              offsetof(struct hmoe_block_q5_k, qs), 1, offsetof(struct hmoe_block_q5_k, qh))


#define K45D_Q4K_TILE(w, rb, nb, x, xs, out, R, T)                                                                     \
    k45t_tile(w, rb, nb, x, xs, out, R, T, sizeof(struct hmoe_block_q4_k), offsetof(struct hmoe_block_q4_k, qs), 0, 0)
#define K45D_Q5K_TILE(w, rb, nb, x, xs, out, R, T)                                                                     \
    k45t_tile(w, rb, nb, x, xs, out, R, T, sizeof(struct hmoe_block_q5_k), offsetof(struct hmoe_block_q5_k, qs), 1,    \
              offsetof(struct hmoe_block_q5_k, qh))

#include "q45_k_gemm_avx2_impl.h"
#include "q4_k_gemm4_avx2_impl.h"

/* hmoe_cpu_gemv_q4_k_SFX / hmoe_cpu_gemm_q4_k_SFX and the same for Q5_K: the decode kernel,
 * the tiles' own gemv for its remainder rows (.._SFX_tiles) and the prefill gemm on
 * prepared activation rows (q45_k_gemm_avx2_impl.h). */
#define K45D_DEFINE(SFX)                                                                                               \
    HMOE_GEMV_TILE_INSTANCES(q4k_##SFX, K45D_Q4K_TILE)                                                                 \
    HMOE_DEFINE_GEMV(q4_k_##SFX##_tiles, q4k_##SFX, 256)                                                               \
    HMOE_GEMM_TILE_INSTANCES(q4k_##SFX##_g, K45G_Q4K_TILE)                                                             \
    K4Q_DEFINE_GEMM(q4_k_##SFX, q4k_##SFX##_q, q4k_##SFX##_g_gemm_tiles, hmoe_cpu_gemv_q4_k_##SFX)                    \
    HMOE_GEMV_TILE_INSTANCES(q5k_##SFX, K45D_Q5K_TILE)                                                                 \
    HMOE_DEFINE_GEMV(q5_k_##SFX##_tiles, q5k_##SFX, 256)                                                               \
    HMOE_GEMM_TILE_INSTANCES(q5k_##SFX##_g, K45G_Q5K_TILE)                                                             \
    HMOE_DEFINE_GEMM_PREP(q5_k_##SFX, q5k_##SFX##_g, 256, k45g_prep, sizeof(struct k45g_act))                          \
    void hmoe_cpu_gemv_q4_k_##SFX(int64_t ncols, const void *w, size_t row_bytes, int64_t nrows, const void *xq,      \
                                  float *y) {                                                                          \
        K45D_GEMV_Q4(ncols, w, row_bytes, nrows, xq, y, hmoe_cpu_gemv_q4_k_##SFX##_tiles);                             \
    }                                                                                                                  \
    void hmoe_cpu_gemv_q5_k_##SFX(int64_t ncols, const void *w, size_t row_bytes, int64_t nrows, const void *xq,      \
                                  float *y) {                                                                          \
        K45D_GEMV_Q5(ncols, w, row_bytes, nrows, xq, y, hmoe_cpu_gemv_q5_k_##SFX##_tiles);                             \
    }
#endif
