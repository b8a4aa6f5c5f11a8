/* mxfp4_dec_avx2_impl.h — private to src/cpu: the MXFP4 decode gemv (one token) for YMM
 * registers, included by mxfp4_avx2.c (MXFP4D_VNNI 0), mxfp4_avxvnni.c (1, VEX vpdpbusd)
 * and mxfp4_avx512.c (1, EVEX vpdpbusd on YMM). Two blocks per step (quants.md §6.1):
 *  - weights: the two blocks' 16 code bytes in the two 128-bit lanes, low nibbles (elements
 *    0..15 of each block) and high nibbles (16..31) looked up by vpshufb in the table of
 *    kvalues + 12, i.e. unsigned 0..24, so no sign tricks are needed;
 *  - the activation row is prepared once per call (mxfp4d_prep) in the same order: lo =
 *    [elements 0..15 of block 2p | of 2p+1], hi = [16..31 | 16..31], with off = 12·Σa of the
 *    8 bytes that feed each int32 lane, so that Σ(u·a) - off = Σ kvalues·a exactly;
 *  - VNNI: two vpdpbusd from -off; plain AVX2: two vpmaddubsw (|pair| <= 2·24·127) added
 *    as words (<= 12192), one vpmaddwd with ones, minus off;
 *  - the 4 rows' sums reduce to [rows 0..3 of block 2p | of 2p+1] in one hadd tree and are
 *    scaled by two double FMAs; the E8M0 scale 2^(e-128) is built directly as a double
 *    ((e + 895) << 52: exact for every e, no binary32 subnormals on the way).
 * An odd block count leaves a last step whose second block is empty (its activations and
 * scale zero, its weights never read). Rows too long for the prepared buffer and the
 * remainder rows go to the tile gemv (leg32_avx2_impl.h) the includer names.
 */
#ifndef HMOE_CPU_MXFP4_DEC_AVX2_IMPL_H
#define HMOE_CPU_MXFP4_DEC_AVX2_IMPL_H

#include <immintrin.h>
#include <stdint.h>

#include "cpu_impl.h"
#include "hmoe/quant_blocks.h"
#include "kernels/iq_tables.h"
#include "tile_impl.h"

#if MXFP4D_VNNI && defined(__AVX512VL__)
#define MXFP4D_DPBUSD(acc, u, s) _mm256_dpbusd_epi32(acc, u, s)
#elif MXFP4D_VNNI
#define MXFP4D_DPBUSD(acc, u, s) _mm256_dpbusd_avx_epi32(acc, u, s)
#endif

struct mxfp4d_act {
    int8_t lo[32], hi[32];
    int32_t off[8];
    double d[2]; /* the two blocks' activation scales (0 for the empty block of an odd count) */
    char pad[16];
};
_Static_assert(sizeof(struct mxfp4d_act) % 32 == 0, "prepared steps must stay 32-byte aligned (aligned loads)");
#define MXFP4D_BUF_BYTES (64 * 1024)
#define MXFP4D_MAX_STEPS ((int64_t)(MXFP4D_BUF_BYTES / sizeof(struct mxfp4d_act)))

static inline void mxfp4d_prep(struct mxfp4d_act *dst, const char *src, int64_t nb) {
    const struct hmoe_block_q8_0 *a = (const struct hmoe_block_q8_0 *)src;
    const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
    for (int64_t p = 0; 2 * p < nb; p++) {
        struct mxfp4d_act *d = dst + p;
        const struct hmoe_block_q8_0 *a0 = a + 2 * p, *a1 = a + 2 * p + 1;
        const int pair = 2 * p + 1 < nb;
        const __m256i x0 = _mm256_loadu_si256((const __m256i *)a0->qs);
        const __m256i x1 = pair ? _mm256_loadu_si256((const __m256i *)a1->qs) : _mm256_setzero_si256();
        const __m256i lo = _mm256_permute2x128_si256(x0, x1, 0x20), hi = _mm256_permute2x128_si256(x0, x1, 0x31);
        _mm256_store_si256((__m256i *)d->lo, lo);
        _mm256_store_si256((__m256i *)d->hi, hi);
        /* Σa of each lane's 4 lo + 4 hi bytes (|a| <= 127: the word sums are exact) */
        const __m256i s16 = _mm256_add_epi16(_mm256_maddubs_epi16(ones8, lo), _mm256_maddubs_epi16(ones8, hi));
        const __m256i s32 = _mm256_madd_epi16(s16, ones16);
        _mm256_store_si256((__m256i *)d->off, _mm256_mullo_epi32(s32, _mm256_set1_epi32(12)));
        d->d[0] = _cvtsh_ss(a0->d);
        d->d[1] = pair ? _cvtsh_ss(a1->d) : 0.0;
    }
}

/* 8 int32 lanes: lanes 0-3 sum to Σ kv·a of block 2p, lanes 4-7 of block 2p+1. */
static inline __attribute__((always_inline)) __m256i mxfp4d_step(const struct hmoe_block_mxfp4 *b, int pair,
                                                                 const struct mxfp4d_act *a, __m256i tab) {
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    const __m128i q0 = _mm_loadu_si128((const __m128i *)b[0].qs);
    const __m256i raw = pair ? _mm256_inserti128_si256(_mm256_castsi128_si256(q0),
                                                       _mm_loadu_si128((const __m128i *)b[1].qs), 1)
                             : _mm256_zextsi128_si256(q0);
    const __m256i ulo = _mm256_shuffle_epi8(tab, _mm256_and_si256(raw, m4));
    const __m256i uhi = _mm256_shuffle_epi8(tab, _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4));
    const __m256i alo = _mm256_load_si256((const __m256i *)a->lo), ahi = _mm256_load_si256((const __m256i *)a->hi);
    const __m256i off = _mm256_load_si256((const __m256i *)a->off);
#if MXFP4D_VNNI
    return MXFP4D_DPBUSD(MXFP4D_DPBUSD(_mm256_sub_epi32(_mm256_setzero_si256(), off), ulo, alo), uhi, ahi);
#else
    const __m256i p = _mm256_add_epi16(_mm256_maddubs_epi16(ulo, alo), _mm256_maddubs_epi16(uhi, ahi));
    return _mm256_sub_epi32(_mm256_madd_epi16(p, _mm256_set1_epi16(1)), off);
#endif
}

/* 2^(e-128) of the same block in 4 rows rb apart, as doubles. */
static inline __m256d mxfp4d_scales4(const char *e, size_t rb) {
    __m128i v = _mm_cvtsi32_si128(*(const uint8_t *)e);
    v = _mm_insert_epi8(v, *(const uint8_t *)(e + rb), 1);
    v = _mm_insert_epi8(v, *(const uint8_t *)(e + 2 * rb), 2);
    v = _mm_insert_epi8(v, *(const uint8_t *)(e + 3 * rb), 3);
    const __m256i bits = _mm256_slli_epi64(_mm256_add_epi64(_mm256_cvtepu8_epi64(v), _mm256_set1_epi64x(895)), 52);
    return _mm256_castsi256_pd(bits);
}

static inline __attribute__((always_inline)) void mxfp4d_gemv4(const char *w, size_t rb, int64_t nb,
                                                               const struct mxfp4d_act *x, size_t pf, float *out) {
    /* kvalues + 12 (0..24) */
    const __m256i tab = _mm256_add_epi8(
        _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)hmoe_kvalues_mxfp4)), _mm256_set1_epi8(12));
    __m256d acc = _mm256_setzero_pd();
    const size_t bb = sizeof(struct hmoe_block_mxfp4);
    for (int64_t p = 0; 2 * p < nb; p++) {
        const struct mxfp4d_act *a = x + p;
        const int pair = 2 * p + 1 < nb;
        const char *b0 = w + (size_t)(2 * p) * bb;
        __m256i s[4];
#pragma GCC unroll 4
        for (int r = 0; r < 4; r++) {
            const char *b = b0 + (size_t)r * rb;
            __builtin_prefetch(b + pf, 0, 3); /* 34 bytes per step: every line of the row */
            s[r] = mxfp4d_step((const struct hmoe_block_mxfp4 *)b, pair, a, tab);
        }
        /* lane 0: [rows 0..3 of block 2p], lane 1: [rows 0..3 of block 2p+1] */
        const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(s[0], s[1]), _mm256_hadd_epi32(s[2], s[3]));
        const __m256d sc0 = _mm256_mul_pd(mxfp4d_scales4(b0, rb), _mm256_set1_pd(a->d[0]));
        acc = _mm256_fmadd_pd(_mm256_cvtepi32_pd(_mm256_castsi256_si128(h)), sc0, acc);
        if (pair) {
            const __m256d sc1 = _mm256_mul_pd(mxfp4d_scales4(b0 + bb, rb), _mm256_set1_pd(a->d[1]));
            acc = _mm256_fmadd_pd(_mm256_cvtepi32_pd(_mm256_extracti128_si256(h, 1)), sc1, acc);
        }
    }
    double lanes[4];
    _mm256_storeu_pd(lanes, acc);
    for (int r = 0; r < 4; r++) out[r] = (float)lanes[r];
}

typedef void (*mxfp4d_rest_fn)(int64_t ncols, const void *w, size_t row_bytes, int64_t nrows, const void *xq,
                               float *y);

/* The streaming decode loop of HMOE_DEFINE_GEMV_STREAM (tile_impl.h) over mxfp4d_gemv4. */
static inline __attribute__((always_inline)) void mxfp4d_gemv(int64_t ncols, const void *w, size_t row_bytes,
                                                              int64_t nrows, const void *xq, float *y,
                                                              mxfp4d_rest_fn rest) {
    const int64_t nb = ncols / 32;
    if ((nb + 1) / 2 > MXFP4D_MAX_STEPS || nrows < HMOE_TILE_GEMV_ROWS) {
        rest(ncols, w, row_bytes, nrows, xq, y);
        return;
    }
    const size_t pf = hmoe_stream_prefetch_distance(row_bytes);
    const size_t all = (size_t)nrows * row_bytes, ahead = pf + HMOE_PAGE_AHEAD_EXTRA;
    size_t touch = (size_t)((((uintptr_t)w + 4095) & ~(uintptr_t)4095) - (uintptr_t)w);
    hmoe_prefetch_block((const char *)w, pf < all ? pf : all);
    _Alignas(32) struct mxfp4d_act buf[MXFP4D_BUF_BYTES / sizeof(struct mxfp4d_act)];
    mxfp4d_prep(buf, (const char *)xq, nb);
    int64_t r = 0;
    for (; r + HMOE_TILE_GEMV_ROWS <= nrows; r += HMOE_TILE_GEMV_ROWS) {
        touch = hmoe_page_touch((const char *)w, touch, (size_t)(r + HMOE_TILE_GEMV_ROWS) * row_bytes + ahead, all);
        const size_t left = (size_t)(nrows - r - HMOE_TILE_GEMV_ROWS) * row_bytes; /* after this tile */
        mxfp4d_gemv4((const char *)w + (size_t)r * row_bytes, row_bytes, nb, buf, pf < left ? pf : left, y + r);
    }
    if (r < nrows) rest(ncols, (const char *)w + (size_t)r * row_bytes, row_bytes, nrows - r, xq, y + r);
}

/* hmoe_cpu_gemv_mxfp4_SFX over the tiles' gemv hmoe_cpu_gemv_mxfp4_SFX_tiles. */
#define MXFP4D_DEFINE(SFX)                                                                                             \
    void hmoe_cpu_gemv_mxfp4_##SFX(int64_t ncols, const void *w, size_t row_bytes, int64_t nrows, const void *xq,     \
                                   float *y) {                                                                         \
        mxfp4d_gemv(ncols, w, row_bytes, nrows, xq, y, hmoe_cpu_gemv_mxfp4_##SFX##_tiles);                             \
    }

#endif
