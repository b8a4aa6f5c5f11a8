/* vecdot_iquants.c — reference dot products of the 256-element I-quants with Q8_K
 * activations (quants.md §8.3, table of §8.4): IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S,
 * IQ1_S, IQ1_M, IQ4_XS. Integer sums per sub-block as llama.cpp forms them (signed grid
 * magnitudes times quants, times the odd integer 2s+1 or ls-32); the constant factors
 * (0.125, 0.25, the ±0.125 IQ1 shift) and the block scales are applied in double. */
#include "kernels/iq_tables.h"
#include "kernels/quant_ref_impl.h"

/* Σ_k ±mag_k · a_k over one group of 8, signs from an 8-bit mask (bit k set = negative). */
static int signed_group_sum(const int mag[8], uint8_t signs, const int8_t *a) {
    int s = 0;
    for (int k = 0; k < 8; k++) s += ((signs >> k) & 1) ? -mag[k] * a[k] : mag[k] * a[k];
    return s;
}

static void grid8(uint64_t entry, int mag[8]) {
    for (int k = 0; k < 8; k++) mag[k] = hmoe_grid_u8(entry, k);
}

static void grid4x2(uint32_t first, uint32_t second, int mag[8]) {
    for (int k = 0; k < 4; k++) {
        mag[k] = hmoe_grid_u8(first, k);
        mag[k + 4] = hmoe_grid_u8(second, k);
    }
}

float hmoe_ref_vec_dot_iq2_xxs(int64_t n, const void *w_row, const void *act_row) {
    const struct hmoe_block_iq2_xxs *w = w_row;
    const struct hmoe_block_q8_k *a = act_row;
    double sum = 0.0;
    for (int64_t i = 0; i < n / HMOE_QK_K; i++) {
        int bsum = 0;
        for (int ib = 0; ib < 8; ib++) {
            const uint8_t *c = w[i].qs + 8 * ib;
            uint32_t sw = hmoe_ld_u32le(c + 4);
            int sumi = 0;
            for (int g = 0; g < 4; g++) {
                int mag[8];
                grid8(hmoe_iq2xxs_grid[c[g]], mag);
                sumi += signed_group_sum(mag, hmoe_ksigns_iq2xs[(sw >> (7 * g)) & 127], a[i].qs + 32 * ib + 8 * g);
            }
            bsum += (2 * (int)(sw >> 28) + 1) * sumi;
        }
        sum += 0.125 * hmoe_fp16_to_f32(w[i].d) * a[i].d * bsum;
    }
    return (float)sum;
}

float hmoe_ref_vec_dot_iq2_xs(int64_t n, const void *w_row, const void *act_row) {
    const struct hmoe_block_iq2_xs *w = w_row;
    const struct hmoe_block_q8_k *a = act_row;
    double sum = 0.0;
    for (int64_t i = 0; i < n / HMOE_QK_K; i++) {
        int bsum = 0;
        for (int ib = 0; ib < 8; ib++) {
            for (int g = 0; g < 4; g++) {
                uint16_t v = w[i].qs[4 * ib + g];
                int s = g < 2 ? (w[i].scales[ib] & 0xF) : (w[i].scales[ib] >> 4);
                int mag[8];
                grid8(hmoe_iq2xs_grid[v & 511], mag);
                bsum += (2 * s + 1) * signed_group_sum(mag, hmoe_ksigns_iq2xs[v >> 9], a[i].qs + 32 * ib + 8 * g);
            }
        }
        sum += 0.125 * hmoe_fp16_to_f32(w[i].d) * a[i].d * bsum;
    }
    return (float)sum;
}

float hmoe_ref_vec_dot_iq2_s(int64_t n, const void *w_row, const void *act_row) {
    const struct hmoe_block_iq2_s *w = w_row;
    const struct hmoe_block_q8_k *a = act_row;
    double sum = 0.0;
    for (int64_t i = 0; i < n / HMOE_QK_K; i++) {
        int bsum = 0;
        for (int ib = 0; ib < 8; ib++) {
            for (int g = 0; g < 4; g++) {
                int index = w[i].qs[4 * ib + g] | (((w[i].qh[ib] >> (2 * g)) & 3) << 8);
                int s = g < 2 ? (w[i].scales[ib] & 0xF) : (w[i].scales[ib] >> 4);
                int mag[8];
                grid8(hmoe_iq2s_grid[index], mag);
                bsum += (2 * s + 1) * signed_group_sum(mag, w[i].qs[32 + 4 * ib + g], a[i].qs + 32 * ib + 8 * g);
            }
        }
        sum += 0.125 * hmoe_fp16_to_f32(w[i].d) * a[i].d * bsum;
    }
    return (float)sum;
}

float hmoe_ref_vec_dot_iq3_xxs(int64_t n, const void *w_row, const void *act_row) {
    const struct hmoe_block_iq3_xxs *w = w_row;
    const struct hmoe_block_q8_k *a = act_row;
    double sum = 0.0;
    for (int64_t i = 0; i < n / HMOE_QK_K; i++) {
        int bsum = 0;
        for (int ib = 0; ib < 8; ib++) {
            uint32_t sw = hmoe_ld_u32le(w[i].qs + 64 + 4 * ib);
            int sumi = 0;
            for (int g = 0; g < 4; g++) {
                int mag[8];
                grid4x2(hmoe_iq3xxs_grid[w[i].qs[8 * ib + 2 * g]], hmoe_iq3xxs_grid[w[i].qs[8 * ib + 2 * g + 1]], mag);
                sumi += signed_group_sum(mag, hmoe_ksigns_iq2xs[(sw >> (7 * g)) & 127], a[i].qs + 32 * ib + 8 * g);
            }
            bsum += (2 * (int)(sw >> 28) + 1) * sumi;
        }
        sum += 0.25 * hmoe_fp16_to_f32(w[i].d) * a[i].d * bsum;
    }
    return (float)sum;
}

float hmoe_ref_vec_dot_iq3_s(int64_t n, const void *w_row, const void *act_row) {
    const struct hmoe_block_iq3_s *w = w_row;
    const struct hmoe_block_q8_k *a = act_row;
    double sum = 0.0;
    for (int64_t i = 0; i < n / HMOE_QK_K; i++) {
        int bsum = 0;
        for (int ib = 0; ib < 8; ib++) {
            int s = (w[i].scales[ib / 2] >> (4 * (ib % 2))) & 0xF;
            int sumi = 0;
            for (int g = 0; g < 4; g++) {
                int i1 = w[i].qs[8 * ib + 2 * g] | (((w[i].qh[ib] >> (2 * g)) & 1) << 8);
                int i2 = w[i].qs[8 * ib + 2 * g + 1] | (((w[i].qh[ib] >> (2 * g + 1)) & 1) << 8);
                int mag[8];
                grid4x2(hmoe_iq3s_grid[i1], hmoe_iq3s_grid[i2], mag);
                sumi += signed_group_sum(mag, w[i].signs[4 * ib + g], a[i].qs + 32 * ib + 8 * g);
            }
            bsum += (2 * s + 1) * sumi;
        }
        sum += (double)hmoe_fp16_to_f32(w[i].d) * a[i].d * bsum;
    }
    return (float)sum;
}

/* IQ1_S: d·da·(Σ_ib ls·Σ grid·a + 0.125·Σ_ib ls·δ·(bsums[2ib] + bsums[2ib+1])). */
float hmoe_ref_vec_dot_iq1_s(int64_t n, const void *w_row, const void *act_row) {
    const struct hmoe_block_iq1_s *w = w_row;
    const struct hmoe_block_q8_k *a = act_row;
    double sum = 0.0;
    for (int64_t i = 0; i < n / HMOE_QK_K; i++) {
        int sumi = 0, sumi_delta = 0;
        for (int ib = 0; ib < 8; ib++) {
            uint16_t h = w[i].qh[ib];
            int ls = 2 * ((h >> 12) & 7) + 1, delta = (h & 0x8000) ? -1 : 1, lsum = 0;
            for (int g = 0; g < 4; g++) {
                uint64_t grid = hmoe_iq1s_grid[w[i].qs[4 * ib + g] | (((h >> (3 * g)) & 7) << 8)];
                for (int k = 0; k < 8; k++) lsum += hmoe_grid_i8(grid, k) * a[i].qs[32 * ib + 8 * g + k];
            }
            sumi += ls * lsum;
            sumi_delta += ls * delta * (a[i].bsums[2 * ib] + a[i].bsums[2 * ib + 1]);
        }
        sum += (double)hmoe_fp16_to_f32(w[i].d) * a[i].d * (sumi + 0.125 * sumi_delta);
    }
    return (float)sum;
}

/* IQ1_M: as IQ1_S, but the scale is per 16 elements and δ per group of 8, multiplying
 * that group's own Σa. */
float hmoe_ref_vec_dot_iq1_m(int64_t n, const void *w_row, const void *act_row) {
    const struct hmoe_block_iq1_m *w = w_row;
    const struct hmoe_block_q8_k *a = act_row;
    double sum = 0.0;
    for (int64_t i = 0; i < n / HMOE_QK_K; i++) {
        int sumi = 0, sumi_delta = 0;
        for (int ib = 0; ib < 8; ib++) {
            uint16_t sw = hmoe_ld_u16le(w[i].scales + 2 * (ib / 2));
            int sh = 6 * (ib % 2);
            for (int g = 0; g < 4; g++) {
                int ls = 2 * ((sw >> (sh + (g < 2 ? 0 : 3))) & 7) + 1;
                int nib = (w[i].qh[2 * ib + g / 2] >> (4 * (g % 2))) & 0xF;
                uint64_t grid = hmoe_iq1s_grid[w[i].qs[4 * ib + g] | ((nib & 7) << 8)];
                const int8_t *q = a[i].qs + 32 * ib + 8 * g;
                int gsum = 0, asum = 0;
                for (int k = 0; k < 8; k++) {
                    gsum += hmoe_grid_i8(grid, k) * q[k];
                    asum += q[k];
                }
                sumi += ls * gsum;
                sumi_delta += ls * ((nib & 8) ? -asum : asum);
            }
        }
        sum += (double)hmoe_iq1m_d(&w[i]) * a[i].d * (sumi + 0.125 * sumi_delta);
    }
    return (float)sum;
}

float hmoe_ref_vec_dot_iq4_xs(int64_t n, const void *w_row, const void *act_row) {
    const struct hmoe_block_iq4_xs *w = w_row;
    const struct hmoe_block_q8_k *a = act_row;
    double sum = 0.0;
    for (int64_t i = 0; i < n / HMOE_QK_K; i++) {
        int bsum = 0;
        for (int ib = 0; ib < 8; ib++) {
            int ls = ((w[i].scales_l[ib / 2] >> (4 * (ib % 2))) & 0xF) | (((w[i].scales_h >> (2 * ib)) & 3) << 4);
            const uint8_t *qs = w[i].qs + 16 * ib;
            const int8_t *q = a[i].qs + 32 * ib;
            int sumi = 0;
            for (int j = 0; j < 16; j++)
                sumi += hmoe_kvalues_iq4nl[qs[j] & 0xF] * q[j] + hmoe_kvalues_iq4nl[qs[j] >> 4] * q[j + 16];
            bsum += (ls - 32) * sumi;
        }
        sum += (double)hmoe_fp16_to_f32(w[i].d) * a[i].d * bsum;
    }
    return (float)sum;
}
