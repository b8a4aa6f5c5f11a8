/* iq1_avx2.c — IQ1_S and IQ1_M × Q8_K with AVX2 (quants.md §5.6-5.7, §8.4), also the kernels
 * of the AVX-512 path (2048-entry grids are too large for vpermi2b lookups). grid + delta
 * with delta = ±1/8 is taken ×8, 8·g ± 1 in -9..9, from iq_codes' iq1_grid8d (one u64 load
 * per group, the delta sign selecting the table half), so Σ(8g + δ)·a with the 2s+1 scales
 * is one exact vpmaddubsw / vpmaddwd chain and the block total is d·da/8 in double, equal
 * to the reference's d·da·(sumi + 0.125·sumi_delta). */
#include <immintrin.h>

#include "cpu_impl.h"
#include "hmoe/quant_blocks.h"
#include "iq_avx2_impl.h"
#include "iq_codes_impl.h"
#include "iq_tile_impl.h"

/* Σ pairs (8g + δ)·a as int16 (|v| ≤ 9, never 0), times the scale words, into sum. */
static inline __m256i iq1_dot32(__m256i sum, __m256i v, __m256i sc16, const int8_t *a) {
    const __m256i av = _mm256_loadu_si256((const __m256i *)a);
    return _mm256_add_epi32(
        sum, _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_sign_epi8(v, v), _mm256_sign_epi8(av, v)), sc16));
}

/* kind 0: IQ1_S, 1: IQ1_M */
static inline __attribute__((always_inline)) void iq1_row(const char *w, int64_t nb, const char *x, size_t xs,
                                                          float *out, const int T, const int kind) {
    const uint64_t *g8 = hmoe_cpu_iq_codes()->iq1_grid8d;
    const size_t bsz = kind == 0 ? sizeof(struct hmoe_block_iq1_s) : sizeof(struct hmoe_block_iq1_m);
    __m256d acc[4];
    for (int t = 0; t < T; t++) acc[t] = _mm256_setzero_pd();
    for (int64_t i = 0; i < nb; i++) {
        const char *b = w + (size_t)i * bsz;
        __m256i sum[4];
        for (int t = 0; t < T; t++) sum[t] = _mm256_setzero_si256();
        uint16_t dh;
        uint16_t sw[4] = {0, 0, 0, 0};
        if (kind == 0) {
            __builtin_memcpy(&dh, b, 2);
        } else {
            __builtin_memcpy(sw, ((const struct hmoe_block_iq1_m *)(const void *)b)->scales, 8);
            dh = (uint16_t)((sw[0] >> 12) | ((sw[1] >> 12) << 4) | ((sw[2] >> 12) << 8) | ((sw[3] >> 12) << 12));
        }
#pragma GCC unroll 8
        for (int c = 0; c < 8; c++) {
            __m256i v, sc;
            if (kind == 0) {
                const struct hmoe_block_iq1_s *s = (const void *)b;
                const unsigned h = s->qh[c], sd = (h >> 15) << 11; /* delta sign: table half */
                const uint8_t *q = s->qs + 4 * c;
                v = _mm256_set_epi64x(
                    (long long)g8[q[3] | ((h >> 9) & 7) << 8 | sd], (long long)g8[q[2] | ((h >> 6) & 7) << 8 | sd],
                    (long long)g8[q[1] | ((h >> 3) & 7) << 8 | sd], (long long)g8[q[0] | (h & 7) << 8 | sd]);
                sc = _mm256_set1_epi16((short)(2 * ((h >> 12) & 7) + 1));
            } else {
                const struct hmoe_block_iq1_m *m = (const void *)b;
                const uint8_t *q = m->qs + 4 * c;
                const unsigned h0 = m->qh[2 * c], h1 = m->qh[2 * c + 1]; /* nibble: index bits 8-10, delta sign */
                v = _mm256_set_epi64x((long long)g8[q[3] | (h1 >> 4) << 8], (long long)g8[q[2] | (h1 & 15) << 8],
                                      (long long)g8[q[1] | (h0 >> 4) << 8], (long long)g8[q[0] | (h0 & 15) << 8]);
                const unsigned s6 = sw[c / 2] >> (6 * (c % 2)); /* groups 0-1: bits 0-2, groups 2-3: bits 3-5 */
                sc = _mm256_setr_m128i(_mm_set1_epi16((short)(2 * (s6 & 7) + 1)),
                                       _mm_set1_epi16((short)(2 * ((s6 >> 3) & 7) + 1)));
            }
#pragma GCC unroll 4
            for (int t = 0; t < T; t++) {
                const struct hmoe_block_q8_k *a = (const struct hmoe_block_q8_k *)(x + (size_t)t * xs) + i;
                sum[t] = iq1_dot32(sum[t], v, sc, a->qs + 32 * c);
            }
        }
        const double dw = _cvtsh_ss(dh);
        hmoe_iq256_block_acc(acc, sum, dw, x, xs, i, T);
    }
    for (int t = 0; t < T; t++) out[t] = hmoe_iq256_hsum(acc[t], 0.125);
}

#define IQ1S_ROW(w, nb, x, xs, o, T) iq1_row(w, nb, x, xs, o, T, 0)
#define IQ1M_ROW(w, nb, x, xs, o, T) iq1_row(w, nb, x, xs, o, T, 1)
HMOE_IQ_ROW_TILES(iq1s256, IQ1S_ROW)
HMOE_IQ_DEFINE_GEMV_GEMM_ROWS(iq1_s_avx2, iq1s256, 256)
HMOE_IQ_ROW_TILES(iq1m256, IQ1M_ROW)
HMOE_IQ_DEFINE_GEMV_GEMM_ROWS(iq1_m_avx2, iq1m256, 256)
