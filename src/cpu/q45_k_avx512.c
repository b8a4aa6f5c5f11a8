/* q45_k_avx512.c — Q4_K and Q5_K × Q8_K dot products with AVX-512BW + VNNI (quants.md
 * §4.3-§4.5, §8.4); the two formats share the scale/min packing and the nibble order.
 * Per 64 elements: one 32-byte load of quant bytes broadcast to both halves of a zmm, low
 * nibbles kept in the lower half and high nibbles shifted into the upper half (= elements
 * 64p..64p+63 in order); for Q5_K the qh bit of each element is tested (vptestmb) and 16
 * OR-ed in. vpmaddubsw with the int8 activations, vpdpwssd with the 6-bit scales; the mins
 * use the Q8_K bsums. Exact integer sums per block, then scaled and accumulated in double.
 * Compiled with -mavx512* (Makefile); only called after cpu_dispatch.c checked the CPU.
 */
#include <immintrin.h>
#include <stddef.h>

#include "cpu_impl.h"
#include "hmoe/quant_blocks.h"
#include "tile_impl.h"

/* The 8 scales and 8 mins of §4.3 as 16 int16 [SC0..SC7, MN0..MN7], computed in vector
 * registers from the block's first 16 bytes (d, dmin, then the 12 scale bytes as words
 * U0, U1, U2; quants.md §4.3's word form): dwords [U0 & 3f.., U2 & 0f.. | (U0 >> 2) & 30..,
 * U1 & 3f.., (U2 >> 4) & 0f.. | (U1 >> 2) & 30..]. */
static inline __m256i k45_scales_mins(const void *block) {
    const __m128i v = _mm_loadu_si128((const __m128i *)block);
    const __m128i a = _mm_srlv_epi32(_mm_shuffle_epi32(v, _MM_SHUFFLE(3, 2, 3, 1)), _mm_set_epi32(4, 0, 0, 0));
    const __m128i hi2 = _mm_and_si128(_mm_srli_epi32(_mm_shuffle_epi32(v, _MM_SHUFFLE(2, 2, 1, 1)), 2),
                                      _mm_set_epi32(0x30303030, 0, 0x30303030, 0));
    const __m128i m = _mm_set_epi32(0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f);
    return _mm256_cvtepu8_epi16(_mm_ternarylogic_epi32(a, m, hi2, 0xEA)); /* (a & m) | hi2 */
}

/* out[r*T + t] = dot(weight row r (nb blocks at w + r*rb), activation row t). R, T and the
 * layout arguments are constants after inlining, so acc[] lives in registers and loops
 * unroll. Both block types start with d, dmin, scales[12]; qs_off / qh_off locate the quants. */
static inline __attribute__((always_inline)) void k45_tile(const char *w, size_t rb, int64_t nb, const char *x,
                                                           size_t xs, float *out, const int R, const int T,
                                                           const size_t block_bytes, const size_t qs_off,
                                                           const int has_qh, const size_t qh_off) {
    /* Accumulate in double, as the references do: the scale and min terms of a row cancel
     * heavily, and float sums of them lose ~eps·Σ|terms| (up to 1e-4 relative). */
    __m512d acc[HMOE_TILE_MAX_TOK];
    for (int k = 0; k < R * T; k++) acc[k] = _mm512_setzero_pd();
    const __m512i m4 = _mm512_set1_epi8(0x0f), b4 = _mm512_set1_epi8(0x10);
    /* shift 0 for the lower 16 words (low nibbles), 4 for the upper 16 (high nibbles) */
    const __m512i shift = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(4), 1);
    /* Q5_K: chunk p tests bit 2p of qh[l] in its lower half and bit 2p+1 in its upper half */
    const __m512i bit0 = _mm512_inserti64x4(_mm512_set1_epi8(1), _mm256_set1_epi8(2), 1);
    /* vpermw indices into [SC0..SC7, MN0..MN7]: chunk p gets SC[2p] in its lower 16 words
     * and SC[2p+1] in its upper 16; the mins vector repeats MN[j] twice so that vpmaddwd
     * pairs it with bsums[2j] and bsums[2j+1]. */
    const __m512i ix0 = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(1), 1);
    const __m512i two = _mm512_set1_epi16(2);
    const __m512i ix1 = _mm512_add_epi16(ix0, two), ix2 = _mm512_add_epi16(ix1, two);
    const __m512i ix3 = _mm512_add_epi16(ix2, two);
    const __m256i ixm = _mm256_set_epi16(15, 15, 14, 14, 13, 13, 12, 12, 11, 11, 10, 10, 9, 9, 8, 8);
    for (int64_t i = 0; i < nb; i++) {
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            const uint8_t *b = (const uint8_t *)w + (size_t)r * rb + (size_t)i * block_bytes;
            if (T == 1) hmoe_prefetch_block((const char *)b + R * rb, block_bytes);
            const __m256i scmn16 = k45_scales_mins(b);
            const __m512i scmn = _mm512_castsi256_si512(scmn16);
            const __m512i s0 = _mm512_permutexvar_epi16(ix0, scmn), s1 = _mm512_permutexvar_epi16(ix1, scmn);
            const __m512i s2 = _mm512_permutexvar_epi16(ix2, scmn), s3 = _mm512_permutexvar_epi16(ix3, scmn);
            const __m256i mn = _mm256_permutexvar_epi16(ixm, scmn16);
            __m512i q[4];
            __m512i qh = _mm512_setzero_si512();
            if (has_qh) qh = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(b + qh_off)));
#pragma GCC unroll 4
            for (int p = 0; p < 4; p++) {
                __m512i raw = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(b + qs_off + 32 * p)));
                q[p] = _mm512_and_si512(_mm512_srlv_epi16(raw, shift), m4);
                if (has_qh) {
                    __mmask64 hbit = _mm512_test_epi8_mask(qh, _mm512_slli_epi16(bit0, 2 * p));
                    q[p] = _mm512_mask_add_epi8(q[p], hbit, q[p], b4);
                }
            }
            const struct hmoe_block_q4_k *hdr = (const struct hmoe_block_q4_k *)b; /* d, dmin: same offsets in Q5_K */
            const double d = _cvtsh_ss(hdr->d), dmin = _cvtsh_ss(hdr->dmin);
#pragma GCC unroll 8
            for (int t = 0; t < T; t++) {
                const struct hmoe_block_q8_k *a = (const struct hmoe_block_q8_k *)(x + (size_t)t * xs) + i;
                __m512i is = _mm512_madd_epi16(_mm512_maddubs_epi16(q[0], _mm512_loadu_si512(a->qs)), s0);
                is = _mm512_dpwssd_epi32(is, _mm512_maddubs_epi16(q[1], _mm512_loadu_si512(a->qs + 64)), s1);
                is = _mm512_dpwssd_epi32(is, _mm512_maddubs_epi16(q[2], _mm512_loadu_si512(a->qs + 128)), s2);
                is = _mm512_dpwssd_epi32(is, _mm512_maddubs_epi16(q[3], _mm512_loadu_si512(a->qs + 192)), s3);
                /* fold the 16 lanes to 8; mins: MN[j] * (bsums[2j] + bsums[2j+1]) */
                const __m256i is8 = _mm256_add_epi32(_mm512_castsi512_si256(is), _mm512_extracti64x4_epi64(is, 1));
                const __m256i ms8 = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)a->bsums), mn);
                const double da = a->d;
                acc[r * T + t] = _mm512_fmadd_pd(_mm512_cvtepi32_pd(is8), _mm512_set1_pd(d * da), acc[r * T + t]);
                acc[r * T + t] = _mm512_fmadd_pd(_mm512_cvtepi32_pd(ms8), _mm512_set1_pd(-dmin * da), acc[r * T + t]);
            }
        }
    }
    for (int k = 0; k < R * T; k++) out[k] = (float)_mm512_reduce_add_pd(acc[k]);
}

#define Q4K_TILE(w, rb, nb, x, xs, out, R, T)                                                                          \
    k45_tile(w, rb, nb, x, xs, out, R, T, sizeof(struct hmoe_block_q4_k), offsetof(struct hmoe_block_q4_k, qs), 0, 0)
#define Q5K_TILE(w, rb, nb, x, xs, out, R, T)                                                                          \
    k45_tile(w, rb, nb, x, xs, out, R, T, sizeof(struct hmoe_block_q5_k), offsetof(struct hmoe_block_q5_k, qs), 1,     \
             offsetof(struct hmoe_block_q5_k, qh))

HMOE_TILE_INSTANCES(q4k512, Q4K_TILE)
HMOE_DEFINE_GEMV_GEMM(q4_k_avx512, q4k512, 256)
HMOE_TILE_INSTANCES(q5k512, Q5K_TILE)
HMOE_DEFINE_GEMV_GEMM(q5_k_avx512, q5k512, 256)
