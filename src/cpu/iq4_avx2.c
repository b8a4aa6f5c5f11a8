/* iq4_avx2.c — IQ4_XS × Q8_K with AVX2 (quants.md §5.8, §8.4): the 16 kvalues are one vpshufb
 * table over [low nibbles | high nibbles] of a 16-byte code group; vpmaddubsw takes |v| with
 * the sign moved onto the activations (|v|·|a|·2 ≤ 32258); sub-blocks are scaled by ls - 32
 * (vpmaddwd). IQ4_XS decode has its own 4-row kernel (iq4_xs_dec_avx2_impl.h; AVX-VNNI twin
 * iq4_xs_avxvnni.c). IQ4_NL, a 32-element block type with Q8_0 activations, is iq4_nl_avx2.c. */
#include <immintrin.h>

#include "cpu_impl.h"
#include "hmoe/quant_blocks.h"
#include "iq_avx2_impl.h"
#include "iq_tile_impl.h"
#include "kernels/iq_tables.h"
#define IQ4D_VNNI 0
#include "iq4_xs_dec_avx2_impl.h"

/* 32 signed kvalues of a 16-byte code group: [low nibbles | high nibbles]. */
static inline __m256i iq4_values(const uint8_t *qs, __m256i tab) {
    const __m128i q = _mm_loadu_si128((const __m128i *)qs);
    const __m256i n = _mm256_inserti128_si256(_mm256_castsi128_si256(q), _mm_srli_epi16(q, 4), 1);
    return _mm256_shuffle_epi8(tab, _mm256_and_si256(n, _mm256_set1_epi8(15)));
}

/* Σ pairs of v·a as 16 int16 (v, a signed; |v|·|a|·2 fits). */
static inline __m256i iq4_pairs(__m256i v, const int8_t *a) {
    const __m256i av = _mm256_loadu_si256((const __m256i *)a);
    return _mm256_maddubs_epi16(_mm256_sign_epi8(v, v), _mm256_sign_epi8(av, v));
}

static inline __m256i kv_table(void) {
    return _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)hmoe_kvalues_iq4nl));
}

static inline __attribute__((always_inline)) void iq4xs_row(const char *w, int64_t nb, const char *x, size_t xs,
                                                            float *out, const int T) {
    const __m256i tab = kv_table();
    __m256d acc[4];
    for (int t = 0; t < T; t++) acc[t] = _mm256_setzero_pd();
    for (int64_t i = 0; i < nb; i++) {
        const struct hmoe_block_iq4_xs *b = (const struct hmoe_block_iq4_xs *)w + i;
        __m256i sum[4];
        for (int t = 0; t < T; t++) sum[t] = _mm256_setzero_si256();
        for (int c = 0; c < 8; c++) {
            const int ls = ((b->scales_l[c / 2] >> (4 * (c % 2))) & 15) | (((b->scales_h >> (2 * c)) & 3) << 4);
            const __m256i sc = _mm256_set1_epi16((short)(ls - 32));
            const __m256i v = iq4_values(b->qs + 16 * c, tab);
#pragma GCC unroll 4
            for (int t = 0; t < T; t++) {
                const struct hmoe_block_q8_k *a = (const struct hmoe_block_q8_k *)(x + (size_t)t * xs) + i;
                sum[t] = _mm256_add_epi32(sum[t], _mm256_madd_epi16(iq4_pairs(v, a->qs + 32 * c), sc));
            }
        }
        const double dw = _cvtsh_ss(b->d);
        hmoe_iq256_block_acc(acc, sum, dw, x, xs, i, T);
    }
    for (int t = 0; t < T; t++) out[t] = hmoe_iq256_hsum(acc[t], 1.0);
}

#define IQ4XS_ROW(w, nb, x, xs, o, T) iq4xs_row(w, nb, x, xs, o, T)
HMOE_IQ_ROW_TILES(iq4xs256, IQ4XS_ROW)
HMOE_IQ_DEFINE_GEMV_GEMM_ROWS2(iq4_xs_avx2_tiles, iq4_xs_avx2, iq4xs256, 256)

/* IQ4_XS decode: the 4-row kernel on a prepared activation row (iq4_xs_dec_avx2_impl.h). */
void hmoe_cpu_gemv_iq4_xs_avx2(int64_t ncols, const void *w, size_t row_bytes, int64_t nrows, const void *xq,
                               float *y) {
    iq4d_gemv(ncols, w, row_bytes, nrows, xq, y, hmoe_cpu_gemv_iq4_xs_avx2_tiles);
}
