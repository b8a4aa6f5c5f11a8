/* iq2_avx2.c — IQ2_XXS, IQ2_XS and IQ2_S × Q8_K dot products with AVX2 (quants.md §5.1-5.3,
 * §8.4). Per 32-element chunk the four grid entries (8 magnitude bytes each) come from
 * scalar loads, the signs from the precomputed ±1 tables of iq_codes_impl.h (ksigns
 * fields) or from the explicit IQ2_S bytes, the scales from one vector per block (IQ2_XXS
 * included: a per-chunk general-register broadcast cost more), and iq_avx2_impl.h does the
 * exact integer sums; each block is decoded once for up to 4 tokens.
 */
#include <immintrin.h>

#include "cpu_impl.h"
#include "hmoe/quant_blocks.h"
#include "iq_avx2_impl.h"
#include "iq_codes_impl.h"
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

/* IQ2_XXS scales (top nibble s of chunk c's qword): 2s + 1 in word (c & 1)·4 + (c >> 2) of
 * both lanes of *z01 (chunks 0, 1, 4, 5) or *z23 (chunks 2, 3, 6, 7), for pick_word. */
static inline void xxs_scales(const uint8_t *qs, __m256i *z01, __m256i *z23) {
    const __m256i v0 = _mm256_loadu_si256((const __m256i *)qs), v1 = _mm256_loadu_si256((const __m256i *)(qs + 32));
    /* qword c (0-3): word 0 = s_c, word 1 = s_(c+4) */
    const __m256i x = _mm256_or_si256(_mm256_srli_epi64(v0, 60), _mm256_slli_epi64(_mm256_srli_epi64(v1, 60), 16));
    const __m256i w = _mm256_or_si256(_mm256_slli_epi16(x, 1), _mm256_set1_epi16(1));
    const __m256i y = _mm256_permute4x64_epi64(w, 0x4e); /* lanes swapped */
    *z01 = _mm256_blend_epi32(w, y, 0xf0);
    *z23 = _mm256_blend_epi32(y, w, 0xf0);
}

static inline __m256i pick_word(__m256i v, int c) {
    return _mm256_shuffle_epi8(v, _mm256_set1_epi16((short)(0x0100 * (2 * c + 1) + 2 * c)));
}

/* kind 0: IQ2_XXS, 1: IQ2_XS, 2: IQ2_S */
static inline __attribute__((always_inline)) void iq2_row(const char *w, int64_t nb, const char *x, size_t xs,
                                                          float *out, const int T, const int kind) {
    const struct hmoe_cpu_iq_codes *C = hmoe_cpu_iq_codes();
    const uint64_t *grid = kind == 0 ? hmoe_iq2xxs_grid : kind == 1 ? hmoe_iq2xs_grid : hmoe_iq2s_grid;
    const uint64_t *ks = C->ksigns_pm1;
    const size_t bsz = kind == 0   ? sizeof(struct hmoe_block_iq2_xxs)
                       : kind == 1 ? sizeof(struct hmoe_block_iq2_xs)
                                   : sizeof(struct hmoe_block_iq2_s);
    __m256d acc[4];
    for (int t = 0; t < T; t++) acc[t] = _mm256_setzero_pd();
    for (int64_t i = 0; i < nb; i++) {
        const char *b = w + (size_t)i * bsz;
        __m256i sum[4];
        for (int t = 0; t < T; t++) sum[t] = _mm256_setzero_si256();
        __m256i scv = _mm256_setzero_si256(), z01 = scv, z23 = scv;
        if (kind != 0)
            scv = xs_scales((const uint8_t *)b + (kind == 1 ? 66 : 74));
        else
            xxs_scales((const uint8_t *)b + 2, &z01, &z23);
#pragma GCC unroll 8
        for (int c = 0; c < 8; c++) {
            __m256i mag, sgn, sc;
            if (kind == 0) {
                const uint8_t *q = (const uint8_t *)b + 2 + 8 * c;
                uint32_t sw;
                __builtin_memcpy(&sw, q + 4, 4);
                mag = _mm256_set_epi64x((long long)grid[q[3]], (long long)grid[q[2]], (long long)grid[q[1]],
                                        (long long)grid[q[0]]);
                sgn = _mm256_set_epi64x((long long)ks[(sw >> 21) & 127], (long long)ks[(sw >> 14) & 127],
                                        (long long)ks[(sw >> 7) & 127], (long long)ks[sw & 127]);
                sc = pick_word(c & 2 ? z23 : z01, (c & 1) * 4 + (c >> 2));
            } else if (kind == 1) {
                uint16_t v[4];
                __builtin_memcpy(v, b + 2 + 8 * c, 8);
                mag = _mm256_set_epi64x((long long)grid[v[3] & 511], (long long)grid[v[2] & 511],
                                        (long long)grid[v[1] & 511], (long long)grid[v[0] & 511]);
                sgn = _mm256_set_epi64x((long long)ks[v[3] >> 9], (long long)ks[v[2] >> 9], (long long)ks[v[1] >> 9],
                                        (long long)ks[v[0] >> 9]);
                sc = pick_word(scv, c);
            } else {
                const struct hmoe_block_iq2_s *s = (const void *)b;
                const uint8_t *q = s->qs + 4 * c;
                const unsigned h = s->qh[c];
                mag = _mm256_set_epi64x(
                    (long long)grid[q[3] | (h >> 6 & 3) << 8], (long long)grid[q[2] | (h >> 4 & 3) << 8],
                    (long long)grid[q[1] | (h >> 2 & 3) << 8], (long long)grid[q[0] | (h & 3) << 8]);
                uint32_t s4;
                __builtin_memcpy(&s4, s->qs + 32 + 4 * c, 4);
                sgn = hmoe_iq256_signs(s4);
                sc = pick_word(scv, c);
            }
#pragma GCC unroll 4
            for (int t = 0; t < T; t++) {
                const struct hmoe_block_q8_k *a = (const struct hmoe_block_q8_k *)(x + (size_t)t * xs) + i;
                sum[t] = hmoe_iq256_dot32(sum[t], mag, sgn, sc, a->qs + 32 * c);
            }
        }
        uint16_t dh;
        __builtin_memcpy(&dh, b, 2);
        const double dw = _cvtsh_ss(dh);
#pragma GCC unroll 4
        for (int t = 0; t < T; t++) {
            const struct hmoe_block_q8_k *a = (const struct hmoe_block_q8_k *)(x + (size_t)t * xs) + i;
            acc[t] = hmoe_iq256_acc(acc[t], sum[t], dw * (double)a->d);
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
