/* dequant_iquants.c — reference dequantizers of the codebook formats IQ2_XXS, IQ2_XS,
 * IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M, IQ4_NL, IQ4_XS (quants.md §5) using the generated
 * tables of kernels/iq_tables.h. Layout per block: 8 chunks ib of 32 elements, each 4
 * groups g of 8; element k of a group is element 32ib + 8g + k. Note the four sub-scale
 * formulas (§5 intro); all of them give exact products (§0.1). */
#include "kernels/iq_tables.h"
#include "kernels/quant_ref_impl.h"

/* Bit k of a sign mask set -> negative. */
static float signed_mag(uint8_t signs, int k, float v) { return ((signs >> k) & 1) ? -v : v; }

void hmoe_ref_dequant_iq2_xxs(const void *src, float *dst, int64_t n) {
    const struct hmoe_block_iq2_xxs *b = src;
    for (int64_t i = 0; i < n / HMOE_QK_K; i++, b++, dst += HMOE_QK_K) {
        float d = hmoe_fp16_to_f32(b->d);
        for (int ib = 0; ib < 8; ib++) {
            const uint8_t *c = b->qs + 8 * ib;
            uint32_t w = hmoe_ld_u32le(c + 4);
            float scale = d * (0.5f + (float)(w >> 28)) * 0.25f;
            for (int g = 0; g < 4; g++) {
                uint64_t grid = hmoe_iq2xxs_grid[c[g]];
                uint8_t signs = hmoe_ksigns_iq2xs[(w >> (7 * g)) & 127];
                for (int k = 0; k < 8; k++)
                    dst[32 * ib + 8 * g + k] = signed_mag(signs, k, scale * (float)hmoe_grid_u8(grid, k));
            }
        }
    }
}

void hmoe_ref_dequant_iq2_xs(const void *src, float *dst, int64_t n) {
    const struct hmoe_block_iq2_xs *b = src;
    for (int64_t i = 0; i < n / HMOE_QK_K; i++, b++, dst += HMOE_QK_K) {
        float d = hmoe_fp16_to_f32(b->d);
        for (int ib = 0; ib < 8; ib++) {
            for (int g = 0; g < 4; g++) {
                uint16_t v = b->qs[4 * ib + g];
                int s = g < 2 ? (b->scales[ib] & 0xF) : (b->scales[ib] >> 4);
                float scale = d * (0.5f + (float)s) * 0.25f;
                uint64_t grid = hmoe_iq2xs_grid[v & 511];
                uint8_t signs = hmoe_ksigns_iq2xs[v >> 9];
                for (int k = 0; k < 8; k++)
                    dst[32 * ib + 8 * g + k] = signed_mag(signs, k, scale * (float)hmoe_grid_u8(grid, k));
            }
        }
    }
}

void hmoe_ref_dequant_iq2_s(const void *src, float *dst, int64_t n) {
    const struct hmoe_block_iq2_s *b = src;
    for (int64_t i = 0; i < n / HMOE_QK_K; i++, b++, dst += HMOE_QK_K) {
        float d = hmoe_fp16_to_f32(b->d);
        const uint8_t *idx_lo = b->qs, *sgn = b->qs + 32;
        for (int ib = 0; ib < 8; ib++) {
            for (int g = 0; g < 4; g++) {
                int index = idx_lo[4 * ib + g] | (((b->qh[ib] >> (2 * g)) & 3) << 8);
                int s = g < 2 ? (b->scales[ib] & 0xF) : (b->scales[ib] >> 4);
                float scale = d * (0.5f + (float)s) * 0.25f;
                uint64_t grid = hmoe_iq2s_grid[index];
                for (int k = 0; k < 8; k++)
                    dst[32 * ib + 8 * g + k] = signed_mag(sgn[4 * ib + g], k, scale * (float)hmoe_grid_u8(grid, k));
            }
        }
    }
}

void hmoe_ref_dequant_iq3_xxs(const void *src, float *dst, int64_t n) {
    const struct hmoe_block_iq3_xxs *b = src;
    for (int64_t i = 0; i < n / HMOE_QK_K; i++, b++, dst += HMOE_QK_K) {
        float d = hmoe_fp16_to_f32(b->d);
        const uint8_t *idx = b->qs;
        for (int ib = 0; ib < 8; ib++) {
            uint32_t w = hmoe_ld_u32le(b->qs + 64 + 4 * ib);
            float scale = d * (0.5f + (float)(w >> 28)) * 0.5f;
            for (int g = 0; g < 4; g++) {
                uint8_t signs = hmoe_ksigns_iq2xs[(w >> (7 * g)) & 127];
                uint32_t first = hmoe_iq3xxs_grid[idx[8 * ib + 2 * g]];
                uint32_t second = hmoe_iq3xxs_grid[idx[8 * ib + 2 * g + 1]];
                for (int k = 0; k < 8; k++) {
                    int mag = k < 4 ? hmoe_grid_u8(first, k) : hmoe_grid_u8(second, k - 4);
                    dst[32 * ib + 8 * g + k] = signed_mag(signs, k, scale * (float)mag);
                }
            }
        }
    }
}

void hmoe_ref_dequant_iq3_s(const void *src, float *dst, int64_t n) {
    const struct hmoe_block_iq3_s *b = src;
    for (int64_t i = 0; i < n / HMOE_QK_K; i++, b++, dst += HMOE_QK_K) {
        float d = hmoe_fp16_to_f32(b->d);
        for (int ib = 0; ib < 8; ib++) {
            int s = (b->scales[ib / 2] >> (4 * (ib % 2))) & 0xF;
            float scale = d * (float)(1 + 2 * s);
            for (int g = 0; g < 4; g++) {
                int i1 = b->qs[8 * ib + 2 * g] | (((b->qh[ib] >> (2 * g)) & 1) << 8);
                int i2 = b->qs[8 * ib + 2 * g + 1] | (((b->qh[ib] >> (2 * g + 1)) & 1) << 8);
                for (int k = 0; k < 8; k++) {
                    int mag = k < 4 ? hmoe_grid_u8(hmoe_iq3s_grid[i1], k) : hmoe_grid_u8(hmoe_iq3s_grid[i2], k - 4);
                    dst[32 * ib + 8 * g + k] = signed_mag(b->signs[4 * ib + g], k, scale * (float)mag);
                }
            }
        }
    }
}

void hmoe_ref_dequant_iq1_s(const void *src, float *dst, int64_t n) {
    const struct hmoe_block_iq1_s *b = src;
    for (int64_t i = 0; i < n / HMOE_QK_K; i++, b++, dst += HMOE_QK_K) {
        float d = hmoe_fp16_to_f32(b->d);
        for (int ib = 0; ib < 8; ib++) {
            uint16_t h = b->qh[ib];
            float scale = d * (float)(2 * ((h >> 12) & 7) + 1);
            float delta = (h & 0x8000) ? -0.125f : 0.125f;
            for (int g = 0; g < 4; g++) {
                int index = b->qs[4 * ib + g] | (((h >> (3 * g)) & 7) << 8);
                uint64_t grid = hmoe_iq1s_grid[index];
                for (int k = 0; k < 8; k++)
                    dst[32 * ib + 8 * g + k] = scale * ((float)hmoe_grid_i8(grid, k) + delta);
            }
        }
    }
}

void hmoe_ref_dequant_iq1_m(const void *src, float *dst, int64_t n) {
    const struct hmoe_block_iq1_m *b = src;
    for (int64_t i = 0; i < n / HMOE_QK_K; i++, b++, dst += HMOE_QK_K) {
        float d = hmoe_iq1m_d(b);
        for (int ib = 0; ib < 8; ib++) {
            uint16_t w = hmoe_ld_u16le(b->scales + 2 * (ib / 2));
            int sh = 6 * (ib % 2);
            int s_lo = (w >> sh) & 7, s_hi = (w >> (sh + 3)) & 7;
            for (int g = 0; g < 4; g++) {
                int nib = (b->qh[2 * ib + g / 2] >> (4 * (g % 2))) & 0xF;
                int index = b->qs[4 * ib + g] | ((nib & 7) << 8);
                float delta = (nib & 8) ? -0.125f : 0.125f;
                float scale = d * (float)(2 * (g < 2 ? s_lo : s_hi) + 1);
                uint64_t grid = hmoe_iq1s_grid[index];
                for (int k = 0; k < 8; k++)
                    dst[32 * ib + 8 * g + k] = scale * ((float)hmoe_grid_i8(grid, k) + delta);
            }
        }
    }
}

void hmoe_ref_dequant_iq4_nl(const void *src, float *dst, int64_t n) {
    const struct hmoe_block_iq4_nl *b = src;
    for (int64_t i = 0; i < n / HMOE_QK_LEGACY; i++, b++, dst += HMOE_QK_LEGACY) {
        float d = hmoe_fp16_to_f32(b->d);
        for (int j = 0; j < 16; j++) {
            dst[j] = d * (float)hmoe_kvalues_iq4nl[b->qs[j] & 0xF];
            dst[j + 16] = d * (float)hmoe_kvalues_iq4nl[b->qs[j] >> 4];
        }
    }
}

void hmoe_ref_dequant_iq4_xs(const void *src, float *dst, int64_t n) {
    const struct hmoe_block_iq4_xs *b = src;
    for (int64_t i = 0; i < n / HMOE_QK_K; i++, b++, dst += HMOE_QK_K) {
        float d = hmoe_fp16_to_f32(b->d);
        for (int ib = 0; ib < 8; ib++) {
            int ls = ((b->scales_l[ib / 2] >> (4 * (ib % 2))) & 0xF) | (((b->scales_h >> (2 * ib)) & 3) << 4);
            float scale = d * (float)(ls - 32);
            const uint8_t *qs = b->qs + 16 * ib;
            for (int j = 0; j < 16; j++) {
                dst[32 * ib + j] = scale * (float)hmoe_kvalues_iq4nl[qs[j] & 0xF];
                dst[32 * ib + 16 + j] = scale * (float)hmoe_kvalues_iq4nl[qs[j] >> 4];
            }
        }
    }
}
