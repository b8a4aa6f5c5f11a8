/* q23_k_avx512.c — Q2_K and Q3_K × Q8_K dot products with AVX-512BW + VNNI (quants.md §4.1,
 * §4.2, §8.4). Both store 2-bit planes: byte qs[32h + l] holds elements 128h + 32s + l in
 * bits 2s..2s+1, so one 32-byte load broadcast to both zmm halves and shifted by
 * (2·2j, 2·(2j+1)) gives 64 elements in order. Q3_K adds its inverted high bit from hmask
 * (bit 4h+s of hmask[l]) as +4, making every value unsigned (0..7) for vpmaddubsw; the -4
 * comes back once per block through the bsums, like Q2_K's mins. Sub-blocks are 16 elements
 * (one 128-bit lane); vpdpwssd applies their scales. Double accumulation per block.
 */
#include <immintrin.h>
#include <string.h>

#include "cpu_impl.h"
#include "hmoe/quant_blocks.h"
#include "tile_impl.h"

/* Q3_K's sixteen 6-bit scales (§4.2) as unsigned bytes 0..63, sub-block order: for
 * b = 4m + k the low 4 bits are byte k of [U0, U1, U0 >> 4, U1 >> 4][m] & 0x0f and the
 * high 2 bits byte k of (U2 >> 2m) & 3, with U0..U2 the 12 scale bytes as 32-bit words. */
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

/* Shared body. has_hmask = 0: Q2_K (scale nibble, min nibble, d, dmin); 1: Q3_K. */
static inline __attribute__((always_inline)) void q23_tile(const char *w, size_t rb, int64_t nb, const char *x,
                                                           size_t xs, float *out, const int R, const int T,
                                                           const int is_q3) {
    __m512d acc[HMOE_TILE_MAX_TOK];
    for (int k = 0; k < R * T; k++) acc[k] = _mm512_setzero_pd();
    const __m512i m3 = _mm512_set1_epi8(3), four = _mm512_set1_epi8(4);
    /* chunk c = 2h + j: lower half plane s = 2j, upper half s = 2j + 1 */
    const __m512i sh0 = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1);
    const __m512i sh1 = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(6), 1);
    const __m512i bit0 = _mm512_inserti64x4(_mm512_set1_epi8(1), _mm256_set1_epi8(2), 1);
    /* vpermw: chunk c (sub-blocks 4c..4c+3) repeats scale 4c + k/8 in word k */
    const __m512i ix0 = _mm512_set_epi16(3, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0,
                                         0, 0, 0, 0, 0, 0);
    const __m512i fourw = _mm512_set1_epi16(4);
    const __m512i ix1 = _mm512_add_epi16(ix0, fourw), ix2 = _mm512_add_epi16(ix1, fourw);
    const __m512i ix3 = _mm512_add_epi16(ix2, fourw);
    for (int64_t i = 0; i < nb; i++) {
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            const uint8_t *qs;
            __m256i sc16, mn16 = _mm256_setzero_si256();
            double d, dmin = 0;
            __m512i hm = _mm512_setzero_si512();
            if (is_q3) {
                const struct hmoe_block_q3_k *b = (const struct hmoe_block_q3_k *)(w + (size_t)r * rb) + i;
                if (T == 1) hmoe_prefetch_block((const char *)b + hmoe_prefetch_distance(rb, R), sizeof *b);
                qs = b->qs;
                sc16 = _mm256_sub_epi16(_mm256_cvtepu8_epi16(q3k_scales(b->scales)), _mm256_set1_epi16(32));
                hm = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)b->hmask));
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
            const __m512i sc = _mm512_castsi256_si512(sc16);
            const __m512i s0 = _mm512_permutexvar_epi16(ix0, sc), s1 = _mm512_permutexvar_epi16(ix1, sc);
            const __m512i s2 = _mm512_permutexvar_epi16(ix2, sc), s3 = _mm512_permutexvar_epi16(ix3, sc);
            __m512i q[4];
#pragma GCC unroll 2
            for (int h = 0; h < 2; h++) {
                const __m512i raw = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(qs + 32 * h)));
                q[2 * h] = _mm512_and_si512(_mm512_srlv_epi16(raw, sh0), m3);
                q[2 * h + 1] = _mm512_and_si512(_mm512_srlv_epi16(raw, sh1), m3);
                if (is_q3) { /* element 128h + 32s + l: bit 4h + s of hmask[l] set means "+4" */
                    const __mmask64 k0 = _mm512_test_epi8_mask(hm, _mm512_slli_epi16(bit0, 4 * h));
                    const __mmask64 k1 = _mm512_test_epi8_mask(hm, _mm512_slli_epi16(bit0, 4 * h + 2));
                    q[2 * h] = _mm512_mask_add_epi8(q[2 * h], k0, q[2 * h], four);
                    q[2 * h + 1] = _mm512_mask_add_epi8(q[2 * h + 1], k1, q[2 * h + 1], four);
                }
            }
#pragma GCC unroll 8
            for (int t = 0; t < T; t++) {
                const struct hmoe_block_q8_k *a = (const struct hmoe_block_q8_k *)(x + (size_t)t * xs) + i;
                __m512i is = _mm512_madd_epi16(_mm512_maddubs_epi16(q[0], _mm512_loadu_si512(a->qs)), s0);
                is = _mm512_dpwssd_epi32(is, _mm512_maddubs_epi16(q[1], _mm512_loadu_si512(a->qs + 64)), s1);
                is = _mm512_dpwssd_epi32(is, _mm512_maddubs_epi16(q[2], _mm512_loadu_si512(a->qs + 128)), s2);
                is = _mm512_dpwssd_epi32(is, _mm512_maddubs_epi16(q[3], _mm512_loadu_si512(a->qs + 192)), s3);
                const __m256i bs = _mm256_loadu_si256((const __m256i *)a->bsums);
                __m256i is8 = _mm256_add_epi32(_mm512_castsi512_si256(is), _mm512_extracti64x4_epi64(is, 1));
                const double da = a->d;
                if (is_q3) { /* Σ sc·(u - 4)·a = Σ sc·u·a - 4·Σ sc[b]·bsums[b] */
                    is8 = _mm256_sub_epi32(is8, _mm256_slli_epi32(_mm256_madd_epi16(bs, sc16), 2));
                    acc[r * T + t] = _mm512_fmadd_pd(_mm512_cvtepi32_pd(is8), _mm512_set1_pd(d * da), acc[r * T + t]);
                } else {
                    const __m256i ms8 = _mm256_madd_epi16(bs, mn16);
                    acc[r * T + t] = _mm512_fmadd_pd(_mm512_cvtepi32_pd(is8), _mm512_set1_pd(d * da), acc[r * T + t]);
                    acc[r * T + t] =
                        _mm512_fmadd_pd(_mm512_cvtepi32_pd(ms8), _mm512_set1_pd(-dmin * da), acc[r * T + t]);
                }
            }
        }
    }
    for (int k = 0; k < R * T; k++) out[k] = (float)_mm512_reduce_add_pd(acc[k]);
}

#define Q2K_TILE(w, rb, nb, x, xs, out, R, T) q23_tile(w, rb, nb, x, xs, out, R, T, 0)
#define Q3K_TILE(w, rb, nb, x, xs, out, R, T) q23_tile(w, rb, nb, x, xs, out, R, T, 1)

HMOE_TILE_INSTANCES(q2k512, Q2K_TILE)
HMOE_DEFINE_GEMV_GEMM(q2_k_avx512, q2k512, 256)
HMOE_TILE_INSTANCES(q3k512, Q3K_TILE)
HMOE_DEFINE_GEMV_GEMM(q3_k_avx512, q3k512, 256)
