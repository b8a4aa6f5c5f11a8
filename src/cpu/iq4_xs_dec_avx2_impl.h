/* iq4_xs_dec_avx2_impl.h — private to src/cpu: the IQ4_XS decode gemv (one token) for 16
 * YMM registers, included by iq4_avx2.c (IQ4D_VNNI 0) and iq4_xs_avxvnni.c (1, VEX vpdpbusd).
 * Per row and block (quants.md §5.9): one 32-byte load of qs holds sub-blocks 2p (lane 0)
 * and 2p+1 (lane 1); their low nibbles are elements 0..15 of each, the high nibbles 16..31.
 *  - the activation row is prepared once per call (iq4d_prep) in that order: lo(p) =
 *    [elements 0..15 of sub-block 2p | of 2p+1], hi(p) = [16..31 | 16..31], with the VNNI
 *    offsets off(p) = 128·Σa of the 8 bytes that feed each int32 lane;
 *  - the 8 sub-block scales ls - 32 are unpacked once per block in vector registers;
 *  - VNNI: the codes looked up in kvalues + 128 (unsigned), two vpdpbusd from -off(p) give
 *    the exact Σ kvalue·a per lane (|.| <= 8·127·127), one vpmulld applies the scales;
 *    plain AVX2: |kvalue| and the activations carrying its sign (vpsignb), vpmaddubsw
 *    (|pair| <= 2·127·127) and vpmaddwd with the scales as words;
 *  - the 4 rows' sums reduce to [IS0..IS3] and are scaled by one double FMA per block, in the
 *    streaming loop of tile_impl.h (first look-ahead burst, clamped look-ahead, page look-ahead).
 * Rows too long for the prepared buffer and the remainder rows go to the row tiles' gemv
 * (iq4_avx2.c, hmoe_cpu_gemv_iq4_xs_avx2_tiles).
 */
#ifndef HMOE_CPU_IQ4_XS_DEC_AVX2_IMPL_H
#define HMOE_CPU_IQ4_XS_DEC_AVX2_IMPL_H

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "cpu_impl.h"
#include "hmoe/quant_blocks.h"
#include "kernels/iq_tables.h"
#include "tile_impl.h"

struct iq4d_act {
    int8_t lo[4][32], hi[4][32];
    int32_t off[4][8];
    double d;
    char pad[24];
};
_Static_assert(sizeof(struct iq4d_act) % 32 == 0, "prepared blocks must stay 32-byte aligned (aligned loads)");
#define IQ4D_BUF_BYTES (64 * 1024)
#define IQ4D_MAX_BLOCKS ((int64_t)(IQ4D_BUF_BYTES / sizeof(struct iq4d_act)))

static inline void iq4d_prep(struct iq4d_act *dst, const char *src, int64_t nb) {
    const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
    for (int64_t i = 0; i < nb; i++) {
        const struct hmoe_block_q8_k *a = (const struct hmoe_block_q8_k *)src + i;
        struct iq4d_act *d = dst + i;
        for (int p = 0; p < 4; p++) {
            const __m256i x0 = _mm256_loadu_si256((const __m256i *)(a->qs + 64 * p));
            const __m256i x1 = _mm256_loadu_si256((const __m256i *)(a->qs + 64 * p + 32));
            const __m256i lo = _mm256_permute2x128_si256(x0, x1, 0x20), hi = _mm256_permute2x128_si256(x0, x1, 0x31);
            _mm256_store_si256((__m256i *)d->lo[p], lo);
            _mm256_store_si256((__m256i *)d->hi[p], hi);
            const __m256i s16 = _mm256_add_epi16(_mm256_maddubs_epi16(ones8, lo), _mm256_maddubs_epi16(ones8, hi));
            _mm256_store_si256((__m256i *)d->off[p], _mm256_slli_epi32(_mm256_madd_epi16(s16, ones16), 7));
        }
        d->d = a->d;
    }
}

/* ls - 32 of the 8 sub-blocks as int32 lanes; with IQ4D_VNNI 0 each lane holds it in both words. */
static inline __m256i iq4d_scales(const struct hmoe_block_iq4_xs *b) {
    uint32_t l;
    memcpy(&l, b->scales_l, 4);
    const __m256i lo = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32((int)l), _mm256_setr_epi32(0, 4, 8, 12, 16,
                                                                                                    20, 24, 28)),
                                        _mm256_set1_epi32(15));
    const __m256i hi = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(b->scales_h),
                                                          _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14)),
                                        _mm256_set1_epi32(3));
    const __m256i sc = _mm256_sub_epi32(_mm256_or_si256(lo, _mm256_slli_epi32(hi, 4)), _mm256_set1_epi32(32));
#if IQ4D_VNNI
    return sc;
#else
    return _mm256_or_si256(_mm256_and_si256(sc, _mm256_set1_epi32(0xffff)), _mm256_slli_epi32(sc, 16));
#endif
}

/* One row's block: 8 int32 lanes whose sum is Σ_c (ls_c - 32) · Σ_{e in c} kvalue·a. */
static inline __attribute__((always_inline)) __m256i iq4d_row(const struct hmoe_block_iq4_xs *b,
                                                              const struct iq4d_act *a, __m256i tab) {
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    const __m256i sc = iq4d_scales(b);
    __m256i is = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int p = 0; p < 4; p++) {
        const __m256i raw = _mm256_loadu_si256((const __m256i *)(b->qs + 32 * p));
        const __m256i vlo = _mm256_shuffle_epi8(tab, _mm256_and_si256(raw, m4));
        const __m256i vhi = _mm256_shuffle_epi8(tab, _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4));
        const __m256i alo = _mm256_load_si256((const __m256i *)a->lo[p]);
        const __m256i ahi = _mm256_load_si256((const __m256i *)a->hi[p]);
        /* scales of sub-blocks 2p (lane 0) and 2p+1 (lane 1) */
        const __m256i scp = _mm256_permutevar8x32_epi32(sc, _mm256_setr_epi32(2 * p, 2 * p, 2 * p, 2 * p, 2 * p + 1,
                                                                              2 * p + 1, 2 * p + 1, 2 * p + 1));
#if IQ4D_VNNI
        const __m256i neg = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_load_si256((const __m256i *)a->off[p]));
        const __m256i s = _mm256_dpbusd_avx_epi32(_mm256_dpbusd_avx_epi32(neg, vlo, alo), vhi, ahi);
        is = _mm256_add_epi32(is, _mm256_mullo_epi32(s, scp));
#else
        const __m256i plo = _mm256_maddubs_epi16(_mm256_sign_epi8(vlo, vlo), _mm256_sign_epi8(alo, vlo));
        const __m256i phi = _mm256_maddubs_epi16(_mm256_sign_epi8(vhi, vhi), _mm256_sign_epi8(ahi, vhi));
        is = _mm256_add_epi32(is, _mm256_add_epi32(_mm256_madd_epi16(plo, scp), _mm256_madd_epi16(phi, scp)));
#endif
    }
    return is;
}

static inline __attribute__((always_inline)) void iq4d_gemv4(const char *w, size_t rb, int64_t nb,
                                                             const struct iq4d_act *x, size_t pf, float *out) {
#if IQ4D_VNNI
    const __m256i tab = _mm256_xor_si256(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)hmoe_kvalues_iq4nl)),
                                         _mm256_set1_epi8((char)0x80)); /* kvalue + 128 as u8 */
#else
    const __m256i tab = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)hmoe_kvalues_iq4nl));
#endif
    __m256d acc = _mm256_setzero_pd();
    const size_t bb = sizeof(struct hmoe_block_iq4_xs);
    for (int64_t i = 0; i < nb; i++) {
        const struct iq4d_act *a = x + i;
        const char *b0 = w + (size_t)i * bb;
        __m256i is[4];
#pragma GCC unroll 4
        for (int r = 0; r < 4; r++) {
            const char *b = b0 + (size_t)r * rb;
            hmoe_prefetch_block(b + pf, bb);
            is[r] = iq4d_row((const struct hmoe_block_iq4_xs *)b, a, tab);
        }
        const __m256i u = _mm256_hadd_epi32(_mm256_hadd_epi32(is[0], is[1]), _mm256_hadd_epi32(is[2], is[3]));
        const __m128i v = _mm_add_epi32(_mm256_castsi256_si128(u), _mm256_extracti128_si256(u, 1));
        /* the 4 rows' fp16 d by word inserts (no store-forwarding stall) */
        __m128i dd = _mm_cvtsi32_si128(*(const uint16_t *)b0);
        dd = _mm_insert_epi16(dd, *(const uint16_t *)(b0 + rb), 1);
        dd = _mm_insert_epi16(dd, *(const uint16_t *)(b0 + 2 * rb), 2);
        dd = _mm_insert_epi16(dd, *(const uint16_t *)(b0 + 3 * rb), 3);
        const __m256d sc = _mm256_mul_pd(_mm256_cvtps_pd(_mm_cvtph_ps(dd)), _mm256_set1_pd(a->d));
        acc = _mm256_fmadd_pd(_mm256_cvtepi32_pd(v), sc, acc);
    }
    double lanes[4];
    _mm256_storeu_pd(lanes, acc);
    for (int r = 0; r < 4; r++) out[r] = (float)lanes[r];
}

typedef void (*iq4d_rest_fn)(int64_t ncols, const void *w, size_t row_bytes, int64_t nrows, const void *xq, float *y);

static inline __attribute__((always_inline)) void iq4d_gemv(int64_t ncols, const void *w, size_t row_bytes,
                                                            int64_t nrows, const void *xq, float *y, iq4d_rest_fn rest) {
    const int64_t nb = ncols / 256;
    if (nb > IQ4D_MAX_BLOCKS || nrows < HMOE_TILE_GEMV_ROWS) {
        rest(ncols, w, row_bytes, nrows, xq, y);
        return;
    }
    const size_t pf = hmoe_stream_prefetch_distance(row_bytes);
    const size_t all = (size_t)nrows * row_bytes, ahead = pf + HMOE_PAGE_AHEAD_EXTRA;
    size_t touch = (size_t)((((uintptr_t)w + 4095) & ~(uintptr_t)4095) - (uintptr_t)w);
    hmoe_prefetch_block((const char *)w, pf < all ? pf : all);
    _Alignas(32) struct iq4d_act buf[IQ4D_BUF_BYTES / sizeof(struct iq4d_act)];
    iq4d_prep(buf, (const char *)xq, nb);
    int64_t r = 0;
    for (; r + HMOE_TILE_GEMV_ROWS <= nrows; r += HMOE_TILE_GEMV_ROWS) {
        touch = hmoe_page_touch((const char *)w, touch, (size_t)(r + HMOE_TILE_GEMV_ROWS) * row_bytes + ahead, all);
        const size_t left = (size_t)(nrows - r - HMOE_TILE_GEMV_ROWS) * row_bytes; /* after this tile */
        iq4d_gemv4((const char *)w + (size_t)r * row_bytes, row_bytes, nb, buf, pf < left ? pf : left, y + r);
    }
    if (r < nrows) rest(ncols, (const char *)w + (size_t)r * row_bytes, row_bytes, nrows - r, xq, y + r);
}

#endif
