/* iq2_avx2.c — IQ2_XXS, IQ2_XS and IQ2_S × Q8_K dot products with AVX2 (quants.md §5.1-5.3,
 * §8.4). Per 32-element chunk the four grid entries (8 magnitude bytes each) are broadcast
 * loads merged by vpblendd; the signs are prepared for a batch of blocks in vector registers
 * (the 7-bit fields to bytes, the implied eighth sign by a nibble parity lookup, or the explicit
 * IQ2_S bytes) and expanded per chunk without general-register work (iq_avx2_impl.h); the
 * IQ2_XXS chunk scales are prepared with them and the IQ2_XS / IQ2_S ones come from one vector
 * per block; iq_avx2_impl.h does the exact integer sums; each block is decoded once for up to
 * 4 tokens.
 */
#include <immintrin.h>

#include "cpu_impl.h"
#include "hmoe/quant_blocks.h"
#include "iq_avx2_impl.h"
#include "iq_tile_impl.h"
#include "kernels/iq_tables.h"

/* Words 0-7 = 2·lo + 1, words 8-15 = 2·hi + 1 of scale byte c: a vpshufb of the block's
 * [lo scales | hi scales] vector picks chunk c's word in each 128-bit lane. */
static inline __m256i xs_scales(const uint8_t *sc) {
    const __m128i w = _mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)sc));
    const __m128i one = _mm_set1_epi16(1), m = _mm_set1_epi16(0x1e);
    const __m128i lo = _mm_or_si128(_mm_and_si128(_mm_slli_epi16(w, 1), m), one);
    const __m128i hi = _mm_or_si128(_mm_and_si128(_mm_srli_epi16(w, 3), m), one);
    return _mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1);
}

/* IQ2_XXS sign bytes of the 8 chunks (dword order c0 c1 c4 c5 | c2 c3 c6 c7, as
 * hmoe_iq256_sign_store takes them) from the sign words w (same order): the four 7-bit fields
 * moved to one byte each (adding the bits above a field to themselves shifts them up by one),
 * then the parity bit. */
static inline __m256i xxs_sign_bytes(__m256i w) {
    w = _mm256_add_epi32(w, _mm256_and_si256(w, _mm256_set1_epi32((int)0xffffff80u)));
    w = _mm256_add_epi32(w, _mm256_and_si256(w, _mm256_set1_epi32((int)0xffff8000u)));
    w = _mm256_add_epi32(w, _mm256_and_si256(w, _mm256_set1_epi32((int)0xff800000u)));
    return hmoe_iq256_sign_parity(_mm256_and_si256(w, _mm256_set1_epi8(0x7f)));
}

/* IQ2_XS: the sign field (bits 9-15 of each group's u16) as bytes, same order, with parity. */
static inline __m256i xs_sign_bytes(__m256i v0, __m256i v1) {
    return hmoe_iq256_sign_parity(_mm256_packus_epi16(_mm256_srli_epi16(v0, 9), _mm256_srli_epi16(v1, 9)));
}

/* Dword position of chunk c in the order c0 c1 c4 c5 c2 c3 c6 c7. */
#define XXS_POS(c) ((c) == 2 || (c) == 3 ? (c) + 2 : (c) == 4 || (c) == 5 ? (c) - 2 : (c))

static inline __m256i pick_word(__m256i v, int c) {
    return _mm256_shuffle_epi8(v, _mm256_set1_epi16((short)(0x0100 * (2 * c + 1) + 2 * c)));
}

/* The four grid entries of a chunk: each a broadcast load (no shuffle-port work), merged by
 * three vpblendd. vpgatherdq measured slower here (Intel, AVX-512 class core): its four
 * element loads cost as much issue and port time as these and it adds the index widening. */
static inline __m256i grid4(const uint64_t *grid, unsigned i0, unsigned i1, unsigned i2, unsigned i3) {
    const __m256i g0 = _mm256_set1_epi64x((long long)grid[i0]), g1 = _mm256_set1_epi64x((long long)grid[i1]);
    const __m256i g2 = _mm256_set1_epi64x((long long)grid[i2]), g3 = _mm256_set1_epi64x((long long)grid[i3]);
    return _mm256_blend_epi32(_mm256_blend_epi32(g0, g1, 0x0c), _mm256_blend_epi32(g2, g3, 0xc0), 0xf0);
}

/* Blocks whose sign sources (and IQ2_XXS scales) are prepared ahead of their dot products. */
#define IQ2_BATCH 8

/* Per block of a batch: the sign sources and, for IQ2_XXS, each chunk's 2s + 1 in both words
 * of dword XXS_POS(c) (a broadcast load then gives vpmaddwd its operand). */
struct iq2_prep {
    _Alignas(32) uint64_t st[IQ2_BATCH][8];
    _Alignas(32) uint32_t sc[IQ2_BATCH][8];
};

/* kind 0: IQ2_XXS, 1: IQ2_XS, 2: IQ2_S */
static inline __attribute__((always_inline)) void iq2_prepare(const uint8_t *q, uint64_t st[8], uint32_t sc[8],
                                                              const int kind) {
    if (kind == 2) {
        /* explicit sign bytes, chunk c = dword c: into the order c0 c1 c4 c5 | c2 c3 c6 c7 */
        hmoe_iq256_sign_store(_mm256_permute4x64_epi64(_mm256_loadu_si256((const __m256i *)(q + 32)), 0xd8), st);
        return;
    }
    const __m256i v0 = _mm256_loadu_si256((const __m256i *)q), v1 = _mm256_loadu_si256((const __m256i *)(q + 32));
    if (kind == 1) {
        hmoe_iq256_sign_store(xs_sign_bytes(v0, v1), st);
        return;
    }
    /* odd dwords of the chunks' qwords: the sign words, order c0 c1 c4 c5 | c2 c3 c6 c7 */
    const __m256i w = _mm256_castps_si256(_mm256_shuffle_ps(_mm256_castsi256_ps(v0), _mm256_castsi256_ps(v1), 0xdd));
    const __m256i s = _mm256_or_si256(_mm256_slli_epi32(_mm256_srli_epi32(w, 28), 1), _mm256_set1_epi32(1));
    _mm256_store_si256((__m256i *)sc, _mm256_or_si256(s, _mm256_slli_epi32(s, 16)));
    hmoe_iq256_sign_store(xxs_sign_bytes(w), st);
}

static inline __attribute__((always_inline)) void iq2_row(const char *w, int64_t nb, const char *x, size_t xs,
                                                          float *out, const int T, const int kind) {
    const uint64_t *grid = kind == 0 ? hmoe_iq2xxs_grid : kind == 1 ? hmoe_iq2xs_grid : hmoe_iq2s_grid;
    const size_t bsz = kind == 0   ? sizeof(struct hmoe_block_iq2_xxs)
                       : kind == 1 ? sizeof(struct hmoe_block_iq2_xs)
                                   : sizeof(struct hmoe_block_iq2_s);
    struct iq2_prep P;
    __m256d acc[4];
    for (int t = 0; t < T; t++) acc[t] = _mm256_setzero_pd();
    for (int64_t i0 = 0; i0 < nb; i0 += IQ2_BATCH) {
        const int64_t i1 = i0 + IQ2_BATCH < nb ? i0 + IQ2_BATCH : nb;
        /* a batch's preparation first: independent work that overlaps, where inside the block
         * loop its long dependency chain stalls the dot products */
        for (int64_t i = i0; i < i1; i++)
            iq2_prepare((const uint8_t *)w + (size_t)i * bsz + 2, P.st[i - i0], P.sc[i - i0], kind);
        /* the loads below then read memory instead of being rebuilt from registers */
        __asm__ volatile("" : : "r"(&P) : "memory");
        for (int64_t i = i0; i < i1; i++) {
            const char *b = w + (size_t)i * bsz;
            const uint8_t *q = (const uint8_t *)b + 2;
            const uint64_t *st = P.st[i - i0];
            __m256i sum[4];
            for (int t = 0; t < T; t++) sum[t] = _mm256_setzero_si256();
            const __m256i scv = kind == 0 ? _mm256_setzero_si256() : xs_scales(q + (kind == 1 ? 64 : 72));
#pragma GCC unroll 8
            for (int c = 0; c < 8; c++) {
                __m256i mag, sc;
                if (kind == 0) {
                    const uint8_t *g = q + 8 * c;
                    mag = grid4(grid, g[0], g[1], g[2], g[3]);
                    sc = _mm256_set1_epi32((int)P.sc[i - i0][XXS_POS(c)]);
                } else if (kind == 1) {
                    uint16_t v[4];
                    __builtin_memcpy(v, q + 8 * c, 8);
                    mag = grid4(grid, v[0] & 511u, v[1] & 511u, v[2] & 511u, v[3] & 511u);
                    sc = pick_word(scv, c);
                } else {
                    /* index bits 8-9 of group g: bits 2g, 2g + 1 of qh[c] */
                    const uint8_t *g = q + 4 * c;
                    const unsigned h = q[64 + c];
                    mag = grid4(grid, g[0] | (h & 3) << 8, g[1] | (h >> 2 & 3) << 8, g[2] | (h >> 4 & 3) << 8,
                                g[3] | (h >> 6 & 3) << 8);
                    sc = pick_word(scv, c);
                }
                const __m256i sgn = hmoe_iq256_sign_expand(st + c);
                hmoe_iq256_dot_rows(sum, mag, sgn, sc, x, xs, i, c, T);
            }
            uint16_t dh;
            __builtin_memcpy(&dh, b, 2);
            const double dw = _cvtsh_ss(dh);
            hmoe_iq256_block_acc(acc, sum, dw, x, xs, i, T);
        }
    }
    for (int t = 0; t < T; t++) out[t] = hmoe_iq256_hsum(acc[t], 0.125);
}

#define IQ2XXS_ROW(w, nb, x, xs, o, T) iq2_row(w, nb, x, xs, o, T, 0)
#define IQ2XS_ROW(w, nb, x, xs, o, T) iq2_row(w, nb, x, xs, o, T, 1)
#define IQ2S_ROW(w, nb, x, xs, o, T) iq2_row(w, nb, x, xs, o, T, 2)
HMOE_IQ_ROW_TILES(iq2xxs256, IQ2XXS_ROW)
HMOE_IQ_DEFINE_GEMV_GEMM_ROWS(iq2_xxs_avx2, iq2xxs256, 256)
HMOE_IQ_ROW_TILES(iq2xs256, IQ2XS_ROW)
HMOE_IQ_DEFINE_GEMV_GEMM_ROWS(iq2_xs_avx2, iq2xs256, 256)
HMOE_IQ_ROW_TILES(iq2s256, IQ2S_ROW)
HMOE_IQ_DEFINE_GEMV_GEMM_ROWS(iq2_s_avx2, iq2s256, 256)
