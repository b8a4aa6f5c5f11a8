/* iq3_avx2.c — IQ3_XXS/IQ3_S × Q8_K with AVX2 (quants.md §5.4-5.5, §8.4): per 32-element chunk
 * the eight 4-byte grid entries from scalar loads (vpgatherdd measured about twice as slow on
 * Zen 5), signs from the ±1 ksigns table (IQ3_XXS) or the explicit bytes (IQ3_S), exact sums
 * with the 2s+1 chunk scales (iq_avx2_impl.h); a block is decoded once for up to 4 tokens. */
#include <immintrin.h>

#include "cpu_impl.h"
#include "hmoe/quant_blocks.h"
#include "iq_avx2_impl.h"
#include "iq_codes_impl.h"
#include "iq_tile_impl.h"
#include "kernels/iq_tables.h"

/* kind 0: IQ3_XXS, 1: IQ3_S */
static inline __attribute__((always_inline)) void iq3_row(const char *w, int64_t nb, const char *x, size_t xs,
                                                          float *out, const int T, const int kind) {
    const struct hmoe_cpu_iq_codes *C = hmoe_cpu_iq_codes();
    const int *grid = (const int *)(kind == 0 ? hmoe_iq3xxs_grid : hmoe_iq3s_grid);
    const uint64_t *ks = C->ksigns_pm1;
    const size_t bsz = kind == 0 ? sizeof(struct hmoe_block_iq3_xxs) : sizeof(struct hmoe_block_iq3_s);
    __m256d acc[4];
    for (int t = 0; t < T; t++) acc[t] = _mm256_setzero_pd();
    for (int64_t i = 0; i < nb; i++) {
        const char *b = w + (size_t)i * bsz;
        __m256i sum[4];
        for (int t = 0; t < T; t++) sum[t] = _mm256_setzero_si256();
        for (int c = 0; c < 8; c++) {
            __m256i mag, sgn, sc;
            if (kind == 0) {
                const struct hmoe_block_iq3_xxs *q = (const void *)b;
                uint32_t sw;
                __builtin_memcpy(&sw, q->qs + 64 + 4 * c, 4);
                const uint8_t *g = q->qs + 8 * c;
                mag = _mm256_setr_epi32(grid[g[0]], grid[g[1]], grid[g[2]], grid[g[3]], grid[g[4]], grid[g[5]],
                                        grid[g[6]], grid[g[7]]);
                sgn = _mm256_set_epi64x((long long)ks[(sw >> 21) & 127], (long long)ks[(sw >> 14) & 127],
                                        (long long)ks[(sw >> 7) & 127], (long long)ks[sw & 127]);
                sc = _mm256_set1_epi16((short)(2 * (sw >> 28) + 1));
            } else {
                const struct hmoe_block_iq3_s *q = (const void *)b;
                /* 9th index bit of entry j of the chunk: bit j of qh[c] */
                const uint8_t *g = q->qs + 8 * c;
                const unsigned h = q->qh[c];
                mag = _mm256_setr_epi32(grid[g[0] | (h << 8 & 256)], grid[g[1] | (h << 7 & 256)],
                                        grid[g[2] | (h << 6 & 256)], grid[g[3] | (h << 5 & 256)],
                                        grid[g[4] | (h << 4 & 256)], grid[g[5] | (h << 3 & 256)],
                                        grid[g[6] | (h << 2 & 256)], grid[g[7] | (h << 1 & 256)]);
                uint32_t s4;
                __builtin_memcpy(&s4, q->signs + 4 * c, 4);
                sgn = hmoe_iq256_signs(s4);
                sc = _mm256_set1_epi16((short)(2 * ((q->scales[c / 2] >> (4 * (c % 2))) & 15) + 1));
            }
            hmoe_iq256_dot_rows(sum, mag, sgn, sc, x, xs, i, c, T);
        }
        uint16_t dh;
        __builtin_memcpy(&dh, b, 2);
        const double dw = _cvtsh_ss(dh);
        hmoe_iq256_block_acc(acc, sum, dw, x, xs, i, T);
    }
    for (int t = 0; t < T; t++) out[t] = hmoe_iq256_hsum(acc[t], kind == 0 ? 0.25 : 1.0);
}

#define IQ3XXS_ROW(w, nb, x, xs, o, T) iq3_row(w, nb, x, xs, o, T, 0)
#define IQ3S_ROW(w, nb, x, xs, o, T) iq3_row(w, nb, x, xs, o, T, 1)
HMOE_IQ_ROW_TILES(iq3xxs256, IQ3XXS_ROW)
HMOE_IQ_DEFINE_GEMV_GEMM_ROWS(iq3_xxs_avx2, iq3xxs256, 256)
HMOE_IQ_ROW_TILES(iq3s256, IQ3S_ROW)
HMOE_IQ_DEFINE_GEMV_GEMM_ROWS(iq3_s_avx2, iq3s256, 256)
