/* quant_ref_impl.h — private to src/kernels: declarations of the scalar reference
 * kernels registered in types.c, and the field decoders they share (§4.2 Q3_K scales,
 * §4.3 Q4_K/Q5_K scales and mins, IQ1_M's d, little-endian loads). The kernels are the
 * spec in code and the oracle for SIMD/CUDA versions. Rows must be 2-byte aligned (4 for
 * Q8_K), as GGUF's tensor alignment guarantees; n is a multiple of the block size. */
#ifndef HMOE_KERNELS_QUANT_REF_IMPL_H
#define HMOE_KERNELS_QUANT_REF_IMPL_H

#include <stdint.h>

#include "hmoe/fp16.h"
#include "hmoe/quant_blocks.h"

static inline uint16_t hmoe_ld_u16le(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }

static inline uint32_t hmoe_ld_u32le(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

/* Q4_K / Q5_K: 6-bit scale SC[j] and min MN[j] of sub-block j (0..7) from the 12 packed
 * bytes S (quants.md §4.3). For j < 4 the top two bits of S[j], S[j+4] belong to j+4. */
static inline void hmoe_kq_scale_min(const uint8_t S[12], int j, int *sc, int *mn) {
    if (j < 4) {
        *sc = S[j] & 63;
        *mn = S[j + 4] & 63;
    } else {
        *sc = (S[j + 4] & 0x0F) | ((S[j - 4] >> 6) << 4);
        *mn = (S[j + 4] >> 4) | ((S[j] >> 6) << 4);
    }
}

/* Q3_K: signed 6-bit scale (-32..31) of sub-block b (0..15) (quants.md §4.2). */
static inline int hmoe_q3k_scale(const uint8_t scales[12], int b) {
    int low4 = b < 8 ? (scales[b] & 0xF) : (scales[b - 8] >> 4);
    int hi2 = (scales[8 + (b % 4)] >> (2 * (b / 4))) & 3;
    return (low4 | (hi2 << 4)) - 32;
}

/* IQ1_M: the fp16 super-scale scattered over the top nibbles of the four u16le scale
 * words (quants.md §5.7). */
static inline float hmoe_iq1m_d(const struct hmoe_block_iq1_m *b) {
    uint16_t w0 = hmoe_ld_u16le(b->scales), w1 = hmoe_ld_u16le(b->scales + 2);
    uint16_t w2 = hmoe_ld_u16le(b->scales + 4), w3 = hmoe_ld_u16le(b->scales + 6);
    uint16_t bits = (uint16_t)((w0 >> 12) | ((w1 >> 12) << 4) | ((w2 >> 12) << 8) | ((w3 >> 12) << 12));
    return hmoe_fp16_to_f32(bits);
}

/* Round half to even for |v| < 2^22 in the default rounding mode: adding 1.5*2^23 lets
 * the FPU round the fraction away; the integer is left in the low mantissa bits. This is
 * the rounding of Q8_K (quants.md §8.3) and of the AVX2 Q8_0/Q8_1 path (§8.1). */
static inline int hmoe_nearest_int_even(float v) {
    float t = v + 12582912.0f;
    return (int)(hmoe_f32_to_bits(t) & 0x007fffffu) - 0x00400000;
}

/* Byte k of a packed grid entry (iq-tables/README.md "packed-entry convention"). */
static inline int hmoe_grid_u8(uint64_t entry, int k) { return (int)((entry >> (8 * k)) & 0xFF); }
static inline int hmoe_grid_i8(uint64_t entry, int k) { return (int)(int8_t)((entry >> (8 * k)) & 0xFF); }

/* ---- dequantizers: n elements of src -> dst (dequant_*.c) ---- */
#define HMOE_DECL_DEQUANT(t) void hmoe_ref_dequant_##t(const void *src, float *dst, int64_t n)
HMOE_DECL_DEQUANT(f32);
HMOE_DECL_DEQUANT(f16);
HMOE_DECL_DEQUANT(bf16);
HMOE_DECL_DEQUANT(q4_0);
HMOE_DECL_DEQUANT(q4_1);
HMOE_DECL_DEQUANT(q5_0);
HMOE_DECL_DEQUANT(q5_1);
HMOE_DECL_DEQUANT(q8_0);
HMOE_DECL_DEQUANT(q8_1);
HMOE_DECL_DEQUANT(q1_0);
HMOE_DECL_DEQUANT(q2_0);
HMOE_DECL_DEQUANT(q2_k);
HMOE_DECL_DEQUANT(q3_k);
HMOE_DECL_DEQUANT(q4_k);
HMOE_DECL_DEQUANT(q5_k);
HMOE_DECL_DEQUANT(q6_k);
HMOE_DECL_DEQUANT(q8_k);
HMOE_DECL_DEQUANT(iq2_xxs);
HMOE_DECL_DEQUANT(iq2_xs);
HMOE_DECL_DEQUANT(iq2_s);
HMOE_DECL_DEQUANT(iq3_xxs);
HMOE_DECL_DEQUANT(iq3_s);
HMOE_DECL_DEQUANT(iq1_s);
HMOE_DECL_DEQUANT(iq1_m);
HMOE_DECL_DEQUANT(iq4_nl);
HMOE_DECL_DEQUANT(iq4_xs);
HMOE_DECL_DEQUANT(mxfp4);
HMOE_DECL_DEQUANT(nvfp4);
#undef HMOE_DECL_DEQUANT

/* ---- activation quantizers (quant_act.c) and weight quantizers (quant_weight.c) ---- */
#define HMOE_DECL_QUANT(t) void hmoe_ref_quantize_##t(const float *src, void *dst, int64_t n)
HMOE_DECL_QUANT(f32);
HMOE_DECL_QUANT(f16);
HMOE_DECL_QUANT(bf16);
HMOE_DECL_QUANT(q8_0);
HMOE_DECL_QUANT(q8_1);
HMOE_DECL_QUANT(q8_k);
HMOE_DECL_QUANT(weight_q4_0);
HMOE_DECL_QUANT(weight_q4_1);
HMOE_DECL_QUANT(weight_q5_0);
HMOE_DECL_QUANT(weight_q5_1);
HMOE_DECL_QUANT(weight_q8_0);
HMOE_DECL_QUANT(weight_iq4_nl);
HMOE_DECL_QUANT(weight_iq4_xs);
HMOE_DECL_QUANT(weight_mxfp4);
#undef HMOE_DECL_QUANT

/* ---- dot products: weight row x activation row in the weight's vec_dot_type (vecdot_*.c) ---- */
#define HMOE_DECL_DOT(t) float hmoe_ref_vec_dot_##t(int64_t n, const void *w_row, const void *act_row)
HMOE_DECL_DOT(f32);
HMOE_DECL_DOT(f16);
HMOE_DECL_DOT(bf16);
HMOE_DECL_DOT(q4_0);
HMOE_DECL_DOT(q4_1);
HMOE_DECL_DOT(q5_0);
HMOE_DECL_DOT(q5_1);
HMOE_DECL_DOT(q8_0);
HMOE_DECL_DOT(q1_0);
HMOE_DECL_DOT(q2_0);
HMOE_DECL_DOT(q2_k);
HMOE_DECL_DOT(q3_k);
HMOE_DECL_DOT(q4_k);
HMOE_DECL_DOT(q5_k);
HMOE_DECL_DOT(q6_k);
HMOE_DECL_DOT(iq2_xxs);
HMOE_DECL_DOT(iq2_xs);
HMOE_DECL_DOT(iq2_s);
HMOE_DECL_DOT(iq3_xxs);
HMOE_DECL_DOT(iq3_s);
HMOE_DECL_DOT(iq1_s);
HMOE_DECL_DOT(iq1_m);
HMOE_DECL_DOT(iq4_nl);
HMOE_DECL_DOT(iq4_xs);
HMOE_DECL_DOT(mxfp4);
HMOE_DECL_DOT(nvfp4);
#undef HMOE_DECL_DOT

#endif
