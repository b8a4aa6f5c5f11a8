/* cuda_types.cuh — the GPU's view of every weight type: one traits struct per type and the one
 * type -> kernel switch (hmoe_cuda_type_dispatch) that every .cu file goes through, row for row
 * with the CPU table hmoe_type_info[] (house style 5). Private to src/kernels.
 *
 * Per type:
 *   blck, bytes  elements and bytes of one block (bytes = sizeof the quant_blocks.h struct; the
 *                float types use a "block" of 8 elements so every kernel can work in groups of 8)
 *   ns           slices per block in the matvec: one lane computes one slice (~16-32 weights)
 *   dequant8(b, g, y)    elements 8g..8g+7 of block b as f32, bit-identical to dequant_ref:
 *                        same formulas as src/kernels/dequant_*.c (quants.md §3-§6); every
 *                        scale x quant product is exact (§0.1), so FMA contraction is harmless
 *   vdot(b, s, aq, ad)   slice s of block b dotted with q8_1 activations (aq = int8 quants of the
 *                        block's first element, ad = its {d, s} pairs per 32): integer sums with
 *                        dp4a, then the scales in f32 (the table of quants.md §8.4, with the
 *                        CUDA-style q8_1 of §8.5)
 *   q8 (bool) + q8chunk(b, c, q, sc, of)   (int8 tensor-core GEMM, cuda_mmq.cu) elements
 *                        32c..32c+31 of block b as 32 int8 codes q[] (8 words) with one scale and
 *                        offset per 16: value_e = sc[e/16] * q_e + of[e/16]. Exact in exact
 *                        arithmetic (same products as dequant8); q8 = false for IQ1_M (offsets
 *                        per 8) and the float types, which use the f16 GEMM instead;
 *                        q8_sub16: the two halves may differ; q8_offset: of[] may be non-zero
 * Everything is __host__ __device__ so tools can check it on a CPU against the references.
 */
#ifndef HMOE_KERNELS_CUDA_TYPES_CUH
#define HMOE_KERNELS_CUDA_TYPES_CUH

#include "kernels/cuda_impl.cuh"
#include "kernels/iq_tables.h"

/* Codebooks: device copies made from the generated data macros (each .cu gets its own copy;
 * they are read through the L1 cache with lane-divergent indices, which __constant__ memory
 * would serialise). On the host the arrays of iq_tables.c. */
static __device__ const uint64_t hmoe_d_iq2xxs_grid[HMOE_IQ2XXS_GRID_COUNT] = {HMOE_IQ2XXS_GRID_DATA};
static __device__ const uint64_t hmoe_d_iq2xs_grid[HMOE_IQ2XS_GRID_COUNT] = {HMOE_IQ2XS_GRID_DATA};
static __device__ const uint64_t hmoe_d_iq2s_grid[HMOE_IQ2S_GRID_COUNT] = {HMOE_IQ2S_GRID_DATA};
static __device__ const uint32_t hmoe_d_iq3xxs_grid[HMOE_IQ3XXS_GRID_COUNT] = {HMOE_IQ3XXS_GRID_DATA};
static __device__ const uint32_t hmoe_d_iq3s_grid[HMOE_IQ3S_GRID_COUNT] = {HMOE_IQ3S_GRID_DATA};
static __device__ const uint64_t hmoe_d_iq1s_grid[HMOE_IQ1S_GRID_COUNT] = {HMOE_IQ1S_GRID_DATA};

#ifdef __CUDA_ARCH__
#define HMOE_GRID(name, i) __ldg(&hmoe_d_##name[i])
#else
#define HMOE_GRID(name, i) (hmoe_##name[i])
#endif

/* The 16-entry int8 tables as four packed words for hmoe_cu_lut16. */
HMOE_HD void hmoe_cu_table16(const int8_t *kv, uint32_t t[4]) {
HMOE_UNROLL
    for (int i = 0; i < 4; i++)
        t[i] = (uint32_t)(uint8_t)kv[4 * i] | ((uint32_t)(uint8_t)kv[4 * i + 1] << 8) |
               ((uint32_t)(uint8_t)kv[4 * i + 2] << 16) | ((uint32_t)(uint8_t)kv[4 * i + 3] << 24);
}
HMOE_HD void hmoe_cu_iq4nl_words(uint32_t t[4]) {
    constexpr int8_t kv[16] = {HMOE_KVALUES_IQ4NL_DATA};
    hmoe_cu_table16(kv, t);
}
HMOE_HD void hmoe_cu_mxfp4_words(uint32_t t[4]) {
    constexpr int8_t kv[16] = {HMOE_KVALUES_MXFP4_DATA};
    hmoe_cu_table16(kv, t);
}
static __device__ const int8_t hmoe_d_kvalues_iq4nl[16] = {HMOE_KVALUES_IQ4NL_DATA};
static __device__ const int8_t hmoe_d_kvalues_mxfp4[16] = {HMOE_KVALUES_MXFP4_DATA};
HMOE_HD int hmoe_cu_iq4nl_value(int q) { return HMOE_GRID(kvalues_iq4nl, q); }
HMOE_HD int hmoe_cu_mxfp4_value(int q) { return HMOE_GRID(kvalues_mxfp4, q); }

/* Byte k (0..7) of an 8-byte little-endian value held as two words. */
HMOE_HD uint32_t hmoe_cu_byte8(uint32_t w0, uint32_t w1, int k) { return ((k < 4 ? w0 : w1) >> (8 * (k & 3))) & 0xffu; }

/* Q4_K / Q5_K 6-bit scale and min of sub-block j from the 12 packed bytes at S (quants.md §4.3). */
HMOE_HD void hmoe_cu_kq_scale_min(const uint8_t *S, int j, int *sc, int *mn) {
    if (j < 4) {
        *sc = (int)(hmoe_cu_ld_u8(S + j) & 63);
        *mn = (int)(hmoe_cu_ld_u8(S + j + 4) & 63);
    } else {
        uint32_t hi = hmoe_cu_ld_u8(S + j + 4);
        *sc = (int)((hi & 0x0f) | ((hmoe_cu_ld_u8(S + j - 4) >> 6) << 4));
        *mn = (int)((hi >> 4) | ((hmoe_cu_ld_u8(S + j) >> 6) << 4));
    }
}

/* Q3_K signed 6-bit scale of sub-block sb (quants.md §4.2); S = the 12 scale bytes. */
HMOE_HD int hmoe_cu_q3k_scale(const uint8_t *S, int sb) {
    int low4 = sb < 8 ? (int)(hmoe_cu_ld_u8(S + sb) & 0xf) : (int)(hmoe_cu_ld_u8(S + sb - 8) >> 4);
    int hi2 = (int)((hmoe_cu_ld_u8(S + 8 + (sb % 4)) >> (2 * (sb / 4))) & 3);
    return (low4 | (hi2 << 4)) - 32;
}

/* The implied eighth sign of IQ2_XXS / IQ2_XS / IQ3_XXS (quants.md §5): ksigns_iq2xs[i7]. */
HMOE_HD uint32_t hmoe_cu_ksigns(uint32_t i7) { return i7 | ((uint32_t)(hmoe_cu_popc(i7) & 1) << 7); }

HMOE_HD float hmoe_cu_signed(uint32_t signs, int k, float v) { return ((signs >> k) & 1) ? -v : v; }

#define HMOE_ONES 0x01010101

/* ================================= float types ================================= */

struct hmoe_tq_f32 {
    static constexpr bool q8_offset = false;
    static constexpr bool q8 = false;
    static constexpr bool q8_sub16 = false;
    HMOE_HD static void q8chunk(const uint8_t *, int, uint32_t *, float *, float *) {}
    static constexpr enum hmoe_type type = HMOE_TYPE_F32;
    static constexpr int blck = 8, bytes = 32, ns = 1;
    static constexpr bool is_float = true;
    HMOE_HD static void dequant8(const uint8_t *b, int, float *y) {
HMOE_UNROLL
        for (int i = 0; i < 8; i++) y[i] = hmoe_cu_bits_f(hmoe_cu_ld_u32a4(b + 4 * i));
    }
    HMOE_HD static float vdot(const uint8_t *, int, const int8_t *, const float2 *) { return 0.0f; }
};

struct hmoe_tq_f16 {
    static constexpr bool q8_offset = false;
    static constexpr bool q8 = false;
    static constexpr bool q8_sub16 = false;
    HMOE_HD static void q8chunk(const uint8_t *, int, uint32_t *, float *, float *) {}
    static constexpr enum hmoe_type type = HMOE_TYPE_F16;
    static constexpr int blck = 8, bytes = 16, ns = 1;
    static constexpr bool is_float = true;
    HMOE_HD static void dequant8(const uint8_t *b, int, float *y) {
HMOE_UNROLL
        for (int i = 0; i < 8; i++) y[i] = hmoe_cu_h2f((uint16_t)hmoe_cu_ld_u16(b + 2 * i));
    }
    HMOE_HD static float vdot(const uint8_t *, int, const int8_t *, const float2 *) { return 0.0f; }
};

struct hmoe_tq_bf16 {
    static constexpr bool q8_offset = false;
    static constexpr bool q8 = false;
    static constexpr bool q8_sub16 = false;
    HMOE_HD static void q8chunk(const uint8_t *, int, uint32_t *, float *, float *) {}
    static constexpr enum hmoe_type type = HMOE_TYPE_BF16;
    static constexpr int blck = 8, bytes = 16, ns = 1;
    static constexpr bool is_float = true;
    HMOE_HD static void dequant8(const uint8_t *b, int, float *y) {
HMOE_UNROLL
        for (int i = 0; i < 8; i++) y[i] = hmoe_cu_bits_f(hmoe_cu_ld_u16(b + 2 * i) << 16);
    }
    HMOE_HD static float vdot(const uint8_t *, int, const int8_t *, const float2 *) { return 0.0f; }
};

/* ============================ 32-element legacy formats ============================ */

/* The 8 quant bytes of group g of a Q4_0-style nibble block (qs at `qs`, 2-byte aligned):
 * groups 0,1 are the low nibbles of bytes 0-7 / 8-15, groups 2,3 the high nibbles. */
HMOE_HD void hmoe_cu_nib_group(const uint8_t *qs, int g, int q[8]) {
    uint32_t w0 = hmoe_cu_ld_u32a2(qs + 8 * (g & 1)), w1 = hmoe_cu_ld_u32a2(qs + 8 * (g & 1) + 4);
    int sh = g < 2 ? 0 : 4;
HMOE_UNROLL
    for (int i = 0; i < 8; i++) q[i] = (int)((hmoe_cu_byte8(w0, w1, i) >> sh) & 0xf);
}

struct hmoe_tq_q4_0 {
    static constexpr bool q8_offset = false;
    static constexpr bool q8 = true;
    static constexpr bool q8_sub16 = false;
    HMOE_HD static void q8chunk(const uint8_t *b, int, uint32_t *q, float *sc, float *of) {
        const float d = hmoe_cu_h2f((uint16_t)hmoe_cu_ld_u16(b));
        HMOE_UNROLL
        for (int i = 0; i < 4; i++) {
            const uint32_t w = hmoe_cu_ld_u32a2(b + 2 + 4 * i);
            q[i] = hmoe_cu_vsub4(w & 0x0f0f0f0f, 0x08080808);
            q[4 + i] = hmoe_cu_vsub4((w >> 4) & 0x0f0f0f0f, 0x08080808);
        }
        sc[0] = sc[1] = d, of[0] = of[1] = 0.0f;
    }
    static constexpr enum hmoe_type type = HMOE_TYPE_Q4_0;
    static constexpr int blck = HMOE_QK_LEGACY, bytes = sizeof(struct hmoe_block_q4_0), ns = 1;
    static constexpr bool is_float = false;
    HMOE_HD static void dequant8(const uint8_t *b, int g, float *y) {
        float d = hmoe_cu_h2f((uint16_t)hmoe_cu_ld_u16(b));
        int q[8];
        hmoe_cu_nib_group(b + 2, g, q);
HMOE_UNROLL
        for (int i = 0; i < 8; i++) y[i] = (float)(q[i] - 8) * d;
    }
    HMOE_HD static float vdot(const uint8_t *b, int, const int8_t *aq, const float2 *ad) {
        float d = hmoe_cu_h2f((uint16_t)hmoe_cu_ld_u16(b));
        int sumi = 0;
HMOE_UNROLL
        for (int i = 0; i < 4; i++) {
            uint32_t q = hmoe_cu_ld_u32a2(b + 2 + 4 * i);
            sumi = hmoe_cu_dp4a((int)(q & 0x0f0f0f0f), hmoe_cu_act1(aq, 4 * i), sumi);
            sumi = hmoe_cu_dp4a((int)((q >> 4) & 0x0f0f0f0f), hmoe_cu_act1(aq, 16 + 4 * i), sumi);
        }
        float2 a = ad[0];
        return d * (a.x * (float)sumi - 8.0f * a.y);
    }
};

struct hmoe_tq_q4_1 {
    static constexpr bool q8 = true;
    static constexpr bool q8_offset = true;
    static constexpr bool q8_sub16 = false;
    HMOE_HD static void q8chunk(const uint8_t *b, int, uint32_t *q, float *sc, float *of) {
        const float d = hmoe_cu_h2f((uint16_t)hmoe_cu_ld_u16(b)), m = hmoe_cu_h2f((uint16_t)hmoe_cu_ld_u16(b + 2));
        HMOE_UNROLL
        for (int i = 0; i < 4; i++) {
            const uint32_t w = hmoe_cu_ld_u32a4(b + 4 + 4 * i);
            q[i] = w & 0x0f0f0f0f, q[4 + i] = (w >> 4) & 0x0f0f0f0f;
        }
        sc[0] = sc[1] = d, of[0] = of[1] = m;
    }
    static constexpr enum hmoe_type type = HMOE_TYPE_Q4_1;
    static constexpr int blck = HMOE_QK_LEGACY, bytes = sizeof(struct hmoe_block_q4_1), ns = 1;
    static constexpr bool is_float = false;
    HMOE_HD static void dequant8(const uint8_t *b, int g, float *y) {
        float d = hmoe_cu_h2f((uint16_t)hmoe_cu_ld_u16(b)), m = hmoe_cu_h2f((uint16_t)hmoe_cu_ld_u16(b + 2));
        int q[8];
        hmoe_cu_nib_group(b + 4, g, q);
HMOE_UNROLL
        for (int i = 0; i < 8; i++) y[i] = (float)q[i] * d + m;
    }
    HMOE_HD static float vdot(const uint8_t *b, int, const int8_t *aq, const float2 *ad) {
        float d = hmoe_cu_h2f((uint16_t)hmoe_cu_ld_u16(b)), m = hmoe_cu_h2f((uint16_t)hmoe_cu_ld_u16(b + 2));
        int sumi = 0;
HMOE_UNROLL
        for (int i = 0; i < 4; i++) {
            uint32_t q = hmoe_cu_ld_u32a4(b + 4 + 4 * i);
            sumi = hmoe_cu_dp4a((int)(q & 0x0f0f0f0f), hmoe_cu_act1(aq, 4 * i), sumi);
            sumi = hmoe_cu_dp4a((int)((q >> 4) & 0x0f0f0f0f), hmoe_cu_act1(aq, 16 + 4 * i), sumi);
        }
        float2 a = ad[0];
        return d * a.x * (float)sumi + m * a.y;
    }
};

/* Q5_0 / Q5_1: the 5-bit quants of group g: nibble + bit e of the u32le qh as bit 4. */
HMOE_HD void hmoe_cu_q5_group(const uint8_t *qh, const uint8_t *qs, int g, int q[8]) {
    uint32_t h = hmoe_cu_ld_u32a2(qh);
    int nib[8];
    hmoe_cu_nib_group(qs, g, nib);
HMOE_UNROLL
    for (int i = 0; i < 8; i++) q[i] = nib[i] | (int)(((h >> (8 * g + i)) & 1u) << 4);
}
/* Sum of the 32 products of a Q5 block: nibbles plus high bits, activations of the block. */
HMOE_HD int hmoe_cu_q5_sumi(const uint8_t *qs, uint32_t h, const int8_t *aq, bool qs_a4) {
    int sumi = 0;
HMOE_UNROLL
    for (int i = 0; i < 4; i++) {
        uint32_t q = qs_a4 ? hmoe_cu_ld_u32a4(qs + 4 * i) : hmoe_cu_ld_u32a2(qs + 4 * i);
        uint32_t lo = (q & 0x0f0f0f0f) | (hmoe_cu_spread4((h >> (4 * i)) & 0xf) << 4);
        uint32_t hi = ((q >> 4) & 0x0f0f0f0f) | (hmoe_cu_spread4((h >> (16 + 4 * i)) & 0xf) << 4);
        sumi = hmoe_cu_dp4a((int)lo, hmoe_cu_act1(aq, 4 * i), sumi);
        sumi = hmoe_cu_dp4a((int)hi, hmoe_cu_act1(aq, 16 + 4 * i), sumi);
    }
    return sumi;
}

struct hmoe_tq_q5_0 {
    static constexpr bool q8_offset = false;
    static constexpr bool q8 = true;
    static constexpr bool q8_sub16 = false;
    HMOE_HD static void q8chunk(const uint8_t *b, int, uint32_t *q, float *sc, float *of) {
        const float d = hmoe_cu_h2f((uint16_t)hmoe_cu_ld_u16(b));
        const uint32_t h = hmoe_cu_ld_u32a2(b + 2);
        HMOE_UNROLL
        for (int i = 0; i < 4; i++) {
            const uint32_t w = hmoe_cu_ld_u32a2(b + 6 + 4 * i);
            q[i] = hmoe_cu_vsub4((w & 0x0f0f0f0f) | (hmoe_cu_spread4((h >> (4 * i)) & 0xf) << 4), 0x10101010);
            q[4 + i] = hmoe_cu_vsub4(((w >> 4) & 0x0f0f0f0f) | (hmoe_cu_spread4((h >> (16 + 4 * i)) & 0xf) << 4), 0x10101010);
        }
        sc[0] = sc[1] = d, of[0] = of[1] = 0.0f;
    }
    static constexpr enum hmoe_type type = HMOE_TYPE_Q5_0;
    static constexpr int blck = HMOE_QK_LEGACY, bytes = sizeof(struct hmoe_block_q5_0), ns = 1;
    static constexpr bool is_float = false;
    HMOE_HD static void dequant8(const uint8_t *b, int g, float *y) {
        float d = hmoe_cu_h2f((uint16_t)hmoe_cu_ld_u16(b));
        int q[8];
        hmoe_cu_q5_group(b + 2, b + 6, g, q);
HMOE_UNROLL
        for (int i = 0; i < 8; i++) y[i] = (float)(q[i] - 16) * d;
    }
    HMOE_HD static float vdot(const uint8_t *b, int, const int8_t *aq, const float2 *ad) {
        float d = hmoe_cu_h2f((uint16_t)hmoe_cu_ld_u16(b));
        int sumi = hmoe_cu_q5_sumi(b + 6, hmoe_cu_ld_u32a2(b + 2), aq, false);
        float2 a = ad[0];
        return d * (a.x * (float)sumi - 16.0f * a.y);
    }
};

struct hmoe_tq_q5_1 {
    static constexpr bool q8 = true;
    static constexpr bool q8_offset = true;
    static constexpr bool q8_sub16 = false;
    HMOE_HD static void q8chunk(const uint8_t *b, int, uint32_t *q, float *sc, float *of) {
        const float d = hmoe_cu_h2f((uint16_t)hmoe_cu_ld_u16(b)), m = hmoe_cu_h2f((uint16_t)hmoe_cu_ld_u16(b + 2));
        const uint32_t h = hmoe_cu_ld_u32a4(b + 4);
        HMOE_UNROLL
        for (int i = 0; i < 4; i++) {
            const uint32_t w = hmoe_cu_ld_u32a4(b + 8 + 4 * i);
            q[i] = (w & 0x0f0f0f0f) | (hmoe_cu_spread4((h >> (4 * i)) & 0xf) << 4);
            q[4 + i] = ((w >> 4) & 0x0f0f0f0f) | (hmoe_cu_spread4((h >> (16 + 4 * i)) & 0xf) << 4);
        }
        sc[0] = sc[1] = d, of[0] = of[1] = m;
    }
    static constexpr enum hmoe_type type = HMOE_TYPE_Q5_1;
    static constexpr int blck = HMOE_QK_LEGACY, bytes = sizeof(struct hmoe_block_q5_1), ns = 1;
    static constexpr bool is_float = false;
    HMOE_HD static void dequant8(const uint8_t *b, int g, float *y) {
        float d = hmoe_cu_h2f((uint16_t)hmoe_cu_ld_u16(b)), m = hmoe_cu_h2f((uint16_t)hmoe_cu_ld_u16(b + 2));
        int q[8];
        hmoe_cu_q5_group(b + 4, b + 8, g, q);
HMOE_UNROLL
        for (int i = 0; i < 8; i++) y[i] = (float)q[i] * d + m;
    }
    HMOE_HD static float vdot(const uint8_t *b, int, const int8_t *aq, const float2 *ad) {
        float d = hmoe_cu_h2f((uint16_t)hmoe_cu_ld_u16(b)), m = hmoe_cu_h2f((uint16_t)hmoe_cu_ld_u16(b + 2));
        int sumi = hmoe_cu_q5_sumi(b + 8, hmoe_cu_ld_u32a4(b + 4), aq, true);
        float2 a = ad[0];
        return d * a.x * (float)sumi + m * a.y;
    }
};

struct hmoe_tq_q8_0 {
    static constexpr bool q8_offset = false;
    static constexpr bool q8 = true;
    static constexpr bool q8_sub16 = false;
    HMOE_HD static void q8chunk(const uint8_t *b, int, uint32_t *q, float *sc, float *of) {
        const float d = hmoe_cu_h2f((uint16_t)hmoe_cu_ld_u16(b));
        HMOE_UNROLL
        for (int i = 0; i < 8; i++) q[i] = hmoe_cu_ld_u32a2(b + 2 + 4 * i);
        sc[0] = sc[1] = d, of[0] = of[1] = 0.0f;
    }
    static constexpr enum hmoe_type type = HMOE_TYPE_Q8_0;
    static constexpr int blck = HMOE_QK_LEGACY, bytes = sizeof(struct hmoe_block_q8_0), ns = 1;
    static constexpr bool is_float = false;
    HMOE_HD static void dequant8(const uint8_t *b, int g, float *y) {
        float d = hmoe_cu_h2f((uint16_t)hmoe_cu_ld_u16(b));
        uint32_t w0 = hmoe_cu_ld_u32a2(b + 2 + 8 * g), w1 = hmoe_cu_ld_u32a2(b + 6 + 8 * g);
HMOE_UNROLL
        for (int i = 0; i < 8; i++) y[i] = (float)(int8_t)hmoe_cu_byte8(w0, w1, i) * d;
    }
    HMOE_HD static float vdot(const uint8_t *b, int, const int8_t *aq, const float2 *ad) {
        float d = hmoe_cu_h2f((uint16_t)hmoe_cu_ld_u16(b));
        int sumi = 0;
HMOE_UNROLL
        for (int i = 0; i < 8; i++) sumi = hmoe_cu_dp4a((int)hmoe_cu_ld_u32a2(b + 2 + 4 * i), hmoe_cu_act1(aq, 4 * i), sumi);
        return d * ad[0].x * (float)sumi;
    }
};

struct hmoe_tq_iq4_nl {
    static constexpr bool q8_offset = false;
    static constexpr bool q8 = true;
    static constexpr bool q8_sub16 = false;
    HMOE_HD static void q8chunk(const uint8_t *b, int, uint32_t *q, float *sc, float *of) {
        const float d = hmoe_cu_h2f((uint16_t)hmoe_cu_ld_u16(b));
        uint32_t t[4];
        hmoe_cu_iq4nl_words(t);
        HMOE_UNROLL
        for (int i = 0; i < 4; i++) {
            const uint32_t w = hmoe_cu_ld_u32a2(b + 2 + 4 * i);
            q[i] = hmoe_cu_lut16(w & 0x0f0f0f0f, t), q[4 + i] = hmoe_cu_lut16((w >> 4) & 0x0f0f0f0f, t);
        }
        sc[0] = sc[1] = d, of[0] = of[1] = 0.0f;
    }
    static constexpr enum hmoe_type type = HMOE_TYPE_IQ4_NL;
    static constexpr int blck = HMOE_QK_LEGACY, bytes = sizeof(struct hmoe_block_iq4_nl), ns = 1;
    static constexpr bool is_float = false;
    HMOE_HD static void dequant8(const uint8_t *b, int g, float *y) {
        float d = hmoe_cu_h2f((uint16_t)hmoe_cu_ld_u16(b));
        int q[8];
        hmoe_cu_nib_group(b + 2, g, q);
HMOE_UNROLL
        for (int i = 0; i < 8; i++) y[i] = d * (float)hmoe_cu_iq4nl_value(q[i]);
    }
    HMOE_HD static float vdot(const uint8_t *b, int, const int8_t *aq, const float2 *ad) {
        float d = hmoe_cu_h2f((uint16_t)hmoe_cu_ld_u16(b));
        uint32_t t[4];
        hmoe_cu_iq4nl_words(t);
        int sumi = 0;
HMOE_UNROLL
        for (int i = 0; i < 4; i++) {
            uint32_t q = hmoe_cu_ld_u32a2(b + 2 + 4 * i);
            sumi = hmoe_cu_dp4a((int)hmoe_cu_lut16(q & 0x0f0f0f0f, t), hmoe_cu_act1(aq, 4 * i), sumi);
            sumi = hmoe_cu_dp4a((int)hmoe_cu_lut16((q >> 4) & 0x0f0f0f0f, t), hmoe_cu_act1(aq, 16 + 4 * i), sumi);
        }
        return d * ad[0].x * (float)sumi;
    }
};

/* MXFP4 scale byte decoded the ggml way, 2^(e-128) (fp16.h hmoe_e8m0_to_f32_half, quants.md §0.2). */
HMOE_HD float hmoe_cu_e8m0_half(uint32_t e) {
    return hmoe_cu_bits_f(e < 2 ? (0x00200000u << e) : ((e - 1) << 23));
}

struct hmoe_tq_mxfp4 {
    static constexpr bool q8_offset = false;
    static constexpr bool q8 = true;
    static constexpr bool q8_sub16 = false;
    HMOE_HD static void q8chunk(const uint8_t *b, int, uint32_t *q, float *sc, float *of) {
        uint32_t e, w[4], t[4];
        hmoe_cu_ld_block17(b, &e, w);
        const float scale = hmoe_cu_e8m0_half(e);
        hmoe_cu_mxfp4_words(t);
        HMOE_UNROLL
        for (int i = 0; i < 4; i++) q[i] = hmoe_cu_lut16(w[i] & 0x0f0f0f0f, t), q[4 + i] = hmoe_cu_lut16((w[i] >> 4) & 0x0f0f0f0f, t);
        sc[0] = sc[1] = scale, of[0] = of[1] = 0.0f;
    }
    static constexpr enum hmoe_type type = HMOE_TYPE_MXFP4;
    static constexpr int blck = HMOE_QK_LEGACY, bytes = sizeof(struct hmoe_block_mxfp4), ns = 1;
    static constexpr bool is_float = false;
    HMOE_HD static void dequant8(const uint8_t *b, int g, float *y) {
        float scale = hmoe_cu_e8m0_half(hmoe_cu_ld_u8(b));
        int sh = g < 2 ? 0 : 4;
HMOE_UNROLL
        for (int i = 0; i < 8; i++) {
            int q = (int)((hmoe_cu_ld_u8(b + 1 + 8 * (g & 1) + i) >> sh) & 0xf);
            y[i] = (float)hmoe_cu_mxfp4_value(q) * scale;
        }
    }
    HMOE_HD static float vdot(const uint8_t *b, int, const int8_t *aq, const float2 *ad) {
        uint32_t e, w[4], t[4];
        hmoe_cu_ld_block17(b, &e, w);
        const float scale = hmoe_cu_e8m0_half(e);
        hmoe_cu_mxfp4_words(t);
        int sumi = 0;
HMOE_UNROLL
        for (int i = 0; i < 4; i++) {
            const uint32_t q = w[i];
            sumi = hmoe_cu_dp4a((int)hmoe_cu_lut16(q & 0x0f0f0f0f, t), hmoe_cu_act1(aq, 4 * i), sumi);
            sumi = hmoe_cu_dp4a((int)hmoe_cu_lut16((q >> 4) & 0x0f0f0f0f, t), hmoe_cu_act1(aq, 16 + 4 * i), sumi);
        }
        return scale * ad[0].x * (float)sumi;
    }
};

/* ===================================== K-quants ===================================== */

/* Q2_K, 84 bytes: scales[16] @0, qs[64] @16, d @80, dmin @82 (quants.md §4.1).
 * vdot slice s: half h = s/4, lanes l0 = 8(s%4) .. +7, all four 2-bit planes -> 32 weights. */
struct hmoe_tq_q2_k {
    static constexpr bool q8 = true;
    static constexpr bool q8_offset = true;
    static constexpr bool q8_sub16 = true;
    HMOE_HD static void q8chunk(const uint8_t *b, int c, uint32_t *q, float *sc, float *of) {
        const int h = c / 4, sh = 2 * (c % 4);
        const float d = hmoe_cu_h2f((uint16_t)hmoe_cu_ld_u16(b + 80)), dmin = hmoe_cu_h2f((uint16_t)hmoe_cu_ld_u16(b + 82));
        HMOE_UNROLL
        for (int i = 0; i < 8; i++) q[i] = (hmoe_cu_ld_u32a4(b + 16 + 32 * h + 4 * i) >> sh) & 0x03030303;
        HMOE_UNROLL
        for (int i = 0; i < 2; i++) {
            const uint32_t s8 = hmoe_cu_ld_u8(b + 2 * c + i);
            sc[i] = d * (float)(s8 & 0xf), of[i] = -(dmin * (float)(s8 >> 4));
        }
    }
    static constexpr enum hmoe_type type = HMOE_TYPE_Q2_K;
    static constexpr int blck = HMOE_QK_K, bytes = sizeof(struct hmoe_block_q2_k), ns = 8;
    static constexpr bool is_float = false;
    HMOE_HD static void dequant8(const uint8_t *b, int g, float *y) {
        float d = hmoe_cu_h2f((uint16_t)hmoe_cu_ld_u16(b + 80)), dmin = hmoe_cu_h2f((uint16_t)hmoe_cu_ld_u16(b + 82));
        int e0 = 8 * g, h = e0 / 128, s = (e0 % 128) / 32, l0 = e0 % 32;
        uint32_t sc = hmoe_cu_ld_u8(b + e0 / 16);
        uint32_t w0 = hmoe_cu_ld_u32a4(b + 16 + 32 * h + l0), w1 = hmoe_cu_ld_u32a4(b + 20 + 32 * h + l0);
HMOE_UNROLL
        for (int i = 0; i < 8; i++) {
            int q = (int)((hmoe_cu_byte8(w0, w1, i) >> (2 * s)) & 3);
            y[i] = (d * (float)(sc & 0xF)) * (float)q - dmin * (float)(sc >> 4);
        }
    }
    HMOE_HD static float vdot(const uint8_t *b, int sl, const int8_t *aq, const float2 *ad) {
        const int h = sl / 4, l0 = 8 * (sl % 4);
        float d = hmoe_cu_h2f((uint16_t)hmoe_cu_ld_u16(b + 80)), dmin = hmoe_cu_h2f((uint16_t)hmoe_cu_ld_u16(b + 82));
        uint32_t q0 = hmoe_cu_ld_u32a4(b + 16 + 32 * h + l0), q1 = hmoe_cu_ld_u32a4(b + 20 + 32 * h + l0);
        uint32_t sw0 = hmoe_cu_ld_u32a4(b + 8 * h), sw1 = hmoe_cu_ld_u32a4(b + 8 * h + 4);
        float acc_d = 0.0f, acc_m = 0.0f;
HMOE_UNROLL
        for (int s = 0; s < 4; s++) {
            int a[2];
            hmoe_cu_act2(aq, 128 * h + 32 * s + l0, a);
            int v0 = (int)((q0 >> (2 * s)) & 0x03030303), v1 = (int)((q1 >> (2 * s)) & 0x03030303);
            int sumi = hmoe_cu_dp4a(v0, a[0], hmoe_cu_dp4a(v1, a[1], 0));
            int suma = hmoe_cu_dp4a(HMOE_ONES, a[0], hmoe_cu_dp4a(HMOE_ONES, a[1], 0));
            uint32_t sc = hmoe_cu_byte8(sw0, sw1, 2 * s + (l0 >= 16));
            float da = ad[4 * h + s].x;
            acc_d += da * (float)((int)(sc & 0xf) * sumi);
            acc_m += da * (float)((int)(sc >> 4) * suma);
        }
        return d * acc_d - dmin * acc_m;
    }
};

/* Q3_K, 110 bytes: hmask[32] @0, qs[64] @32, scales[12] @96, d @108 (quants.md §4.2). Slices as Q2_K. */
struct hmoe_tq_q3_k {
    static constexpr bool q8_offset = false;
    static constexpr bool q8 = true;
    static constexpr bool q8_sub16 = true;
    HMOE_HD static void q8chunk(const uint8_t *b, int c, uint32_t *q, float *sc, float *of) {
        const int h = c / 4, sh = 2 * (c % 4);
        const float d = hmoe_cu_h2f((uint16_t)hmoe_cu_ld_u16(b + 108));
        HMOE_UNROLL
        for (int i = 0; i < 8; i++) {
            const uint32_t lo = (hmoe_cu_ld_u32a2(b + 32 + 32 * h + 4 * i) >> sh) & 0x03030303;
            const uint32_t hi = (hmoe_cu_ld_u32a2(b + 4 * i) >> c) & 0x01010101;
            q[i] = hmoe_cu_vsub4(lo | (hi << 2), 0x04040404);
        }
        HMOE_UNROLL
        for (int i = 0; i < 2; i++) sc[i] = d * (float)hmoe_cu_q3k_scale(b + 96, 2 * c + i), of[i] = 0.0f;
    }
    static constexpr enum hmoe_type type = HMOE_TYPE_Q3_K;
    static constexpr int blck = HMOE_QK_K, bytes = sizeof(struct hmoe_block_q3_k), ns = 8;
    static constexpr bool is_float = false;
    HMOE_HD static void dequant8(const uint8_t *b, int g, float *y) {
        float d = hmoe_cu_h2f((uint16_t)hmoe_cu_ld_u16(b + 108));
        int e0 = 8 * g, h = e0 / 128, s = (e0 % 128) / 32, l0 = e0 % 32;
        float scale = d * (float)hmoe_cu_q3k_scale(b + 96, e0 / 16);
        uint32_t w0 = hmoe_cu_ld_u32a2(b + 32 + 32 * h + l0), w1 = hmoe_cu_ld_u32a2(b + 36 + 32 * h + l0);
        uint32_t m0 = hmoe_cu_ld_u32a2(b + l0), m1 = hmoe_cu_ld_u32a2(b + l0 + 4);
HMOE_UNROLL
        for (int i = 0; i < 8; i++) {
            int low = (int)((hmoe_cu_byte8(w0, w1, i) >> (2 * s)) & 3);
            int high = (int)((hmoe_cu_byte8(m0, m1, i) >> (e0 / 32)) & 1);
            int q = low - (high ? 0 : 4);
            y[i] = scale * (float)q;
        }
    }
    HMOE_HD static float vdot(const uint8_t *b, int sl, const int8_t *aq, const float2 *ad) {
        const int h = sl / 4, l0 = 8 * (sl % 4);
        float d = hmoe_cu_h2f((uint16_t)hmoe_cu_ld_u16(b + 108));
        uint32_t q0 = hmoe_cu_ld_u32a2(b + 32 + 32 * h + l0), q1 = hmoe_cu_ld_u32a2(b + 36 + 32 * h + l0);
        uint32_t m0 = hmoe_cu_ld_u32a2(b + l0), m1 = hmoe_cu_ld_u32a2(b + l0 + 4);
        float acc = 0.0f;
HMOE_UNROLL
        for (int s = 0; s < 4; s++) {
            int a[2];
            hmoe_cu_act2(aq, 128 * h + 32 * s + l0, a);
            int bit = 4 * h + s;
            int v0 = (int)(((q0 >> (2 * s)) & 0x03030303) | (((m0 >> bit) & 0x01010101) << 2));
            int v1 = (int)(((q1 >> (2 * s)) & 0x03030303) | (((m1 >> bit) & 0x01010101) << 2));
            int sumi = hmoe_cu_dp4a(v0, a[0], hmoe_cu_dp4a(v1, a[1], 0));
            int suma = hmoe_cu_dp4a(HMOE_ONES, a[0], hmoe_cu_dp4a(HMOE_ONES, a[1], 0));
            int sc = hmoe_cu_q3k_scale(b + 96, 8 * h + 2 * s + (l0 >= 16));
            acc += ad[4 * h + s].x * (float)(sc * (sumi - 4 * suma));
        }
        return d * acc;
    }
};

/* Q4_K / Q5_K vdot slice s: run p = s/2 of 32 quant bytes, half hh = s%2 (16 bytes): low
 * nibbles are elements 64p+16hh.. of sub-block 2p, high nibbles 64p+32+16hh.. of sub-block 2p+1. */
HMOE_HD float hmoe_cu_kq45_vdot(const uint8_t *b, int sl, const int8_t *aq, const float2 *ad, const uint8_t *qs,
                               const uint8_t *qh) {
    const int p = sl / 2, hh = sl % 2;
    const uint32_t dd = hmoe_cu_ld_u32a4(b);
    float d = hmoe_cu_h2f((uint16_t)(dd & 0xffff)), dmin = hmoe_cu_h2f((uint16_t)(dd >> 16));
    uint32_t q[4];
    hmoe_cu_ld_u128(qs + 32 * p + 16 * hh, q);
    uint32_t hb[4] = {0, 0, 0, 0};
    if (qh) hmoe_cu_ld_u128(qh + 16 * hh, hb);
    int alo[4], ahi[4];
    hmoe_cu_act4(aq, 64 * p + 16 * hh, alo);
    hmoe_cu_act4(aq, 64 * p + 32 + 16 * hh, ahi);
    int s0 = 0, s1 = 0, m0 = 0, m1 = 0;
HMOE_UNROLL
    for (int i = 0; i < 4; i++) {
        uint32_t v0 = (q[i] & 0x0f0f0f0f) | (((hb[i] >> (2 * p)) & 0x01010101) << 4);
        uint32_t v1 = ((q[i] >> 4) & 0x0f0f0f0f) | (((hb[i] >> (2 * p + 1)) & 0x01010101) << 4);
        s0 = hmoe_cu_dp4a((int)v0, alo[i], s0);
        s1 = hmoe_cu_dp4a((int)v1, ahi[i], s1);
        m0 = hmoe_cu_dp4a(HMOE_ONES, alo[i], m0);
        m1 = hmoe_cu_dp4a(HMOE_ONES, ahi[i], m1);
    }
    /* the 8 scales and mins of §4.3 from three words (the word-wise form of the same packing) */
    const uint32_t u0 = hmoe_cu_ld_u32a4(b + 4), u1 = hmoe_cu_ld_u32a4(b + 8), u2 = hmoe_cu_ld_u32a4(b + 12);
    const uint32_t scw = p < 2 ? (u0 & 0x3f3f3f3f) : ((u2 & 0x0f0f0f0f) | (((u0 >> 6) & 0x03030303) << 4));
    const uint32_t mnw = p < 2 ? (u1 & 0x3f3f3f3f) : (((u2 >> 4) & 0x0f0f0f0f) | (((u1 >> 6) & 0x03030303) << 4));
    const int sh = 16 * (p & 1);
    const int sc0 = (int)((scw >> sh) & 0xff), sc1 = (int)((scw >> (sh + 8)) & 0xff);
    const int mn0 = (int)((mnw >> sh) & 0xff), mn1 = (int)((mnw >> (sh + 8)) & 0xff);
    float da0 = ad[2 * p].x, da1 = ad[2 * p + 1].x;
    return d * (da0 * (float)(sc0 * s0) + da1 * (float)(sc1 * s1)) -
           dmin * (da0 * (float)(mn0 * m0) + da1 * (float)(mn1 * m1));
}

/* Q4_K, 144 bytes: d @0, dmin @2, scales[12] @4, qs[128] @16 (quants.md §4.4). */
struct hmoe_tq_q4_k {
    static constexpr bool q8 = true;
    static constexpr bool q8_offset = true;
    static constexpr bool q8_sub16 = false;
    HMOE_HD static void q8chunk(const uint8_t *b, int c, uint32_t *q, float *sc, float *of) {
        const float d = hmoe_cu_h2f((uint16_t)hmoe_cu_ld_u16(b)), dmin = hmoe_cu_h2f((uint16_t)hmoe_cu_ld_u16(b + 2));
        const int sh = 4 * (c % 2);
        HMOE_UNROLL
        for (int i = 0; i < 8; i++) q[i] = (hmoe_cu_ld_u32a4(b + 16 + 32 * (c / 2) + 4 * i) >> sh) & 0x0f0f0f0f;
        int s_, m_;
        hmoe_cu_kq_scale_min(b + 4, c, &s_, &m_);
        sc[0] = sc[1] = d * (float)s_, of[0] = of[1] = -(dmin * (float)m_);
    }
    static constexpr enum hmoe_type type = HMOE_TYPE_Q4_K;
    static constexpr int blck = HMOE_QK_K, bytes = sizeof(struct hmoe_block_q4_k), ns = 8;
    static constexpr bool is_float = false;
    HMOE_HD static void dequant8(const uint8_t *b, int g, float *y) {
        float d = hmoe_cu_h2f((uint16_t)hmoe_cu_ld_u16(b)), dmin = hmoe_cu_h2f((uint16_t)hmoe_cu_ld_u16(b + 2));
        int e0 = 8 * g, p = e0 / 64, l0 = e0 % 32, sh = (e0 % 64) < 32 ? 0 : 4;
        int sc, mn;
        hmoe_cu_kq_scale_min(b + 4, e0 / 32, &sc, &mn);
        uint32_t w0 = hmoe_cu_ld_u32a4(b + 16 + 32 * p + l0), w1 = hmoe_cu_ld_u32a4(b + 20 + 32 * p + l0);
HMOE_UNROLL
        for (int i = 0; i < 8; i++) {
            int q = (int)((hmoe_cu_byte8(w0, w1, i) >> sh) & 0xf);
            y[i] = (d * (float)sc) * (float)q - dmin * (float)mn;
        }
    }
    HMOE_HD static float vdot(const uint8_t *b, int sl, const int8_t *aq, const float2 *ad) {
        return hmoe_cu_kq45_vdot(b, sl, aq, ad, b + 16, nullptr);
    }
};

/* Q5_K, 176 bytes: d @0, dmin @2, scales[12] @4, qh[32] @16, qs[128] @48 (quants.md §4.5). */
struct hmoe_tq_q5_k {
    static constexpr bool q8 = true;
    static constexpr bool q8_offset = true;
    static constexpr bool q8_sub16 = false;
    HMOE_HD static void q8chunk(const uint8_t *b, int c, uint32_t *q, float *sc, float *of) {
        const float d = hmoe_cu_h2f((uint16_t)hmoe_cu_ld_u16(b)), dmin = hmoe_cu_h2f((uint16_t)hmoe_cu_ld_u16(b + 2));
        const int sh = 4 * (c % 2);
        HMOE_UNROLL
        for (int i = 0; i < 8; i++)
            q[i] = ((hmoe_cu_ld_u32a4(b + 48 + 32 * (c / 2) + 4 * i) >> sh) & 0x0f0f0f0f) |
                   (((hmoe_cu_ld_u32a4(b + 16 + 4 * i) >> c) & 0x01010101) << 4);
        int s_, m_;
        hmoe_cu_kq_scale_min(b + 4, c, &s_, &m_);
        sc[0] = sc[1] = d * (float)s_, of[0] = of[1] = -(dmin * (float)m_);
    }
    static constexpr enum hmoe_type type = HMOE_TYPE_Q5_K;
    static constexpr int blck = HMOE_QK_K, bytes = sizeof(struct hmoe_block_q5_k), ns = 8;
    static constexpr bool is_float = false;
    HMOE_HD static void dequant8(const uint8_t *b, int g, float *y) {
        float d = hmoe_cu_h2f((uint16_t)hmoe_cu_ld_u16(b)), dmin = hmoe_cu_h2f((uint16_t)hmoe_cu_ld_u16(b + 2));
        int e0 = 8 * g, p = e0 / 64, l0 = e0 % 32, sh = (e0 % 64) < 32 ? 0 : 4;
        int sc, mn;
        hmoe_cu_kq_scale_min(b + 4, e0 / 32, &sc, &mn);
        uint32_t w0 = hmoe_cu_ld_u32a4(b + 48 + 32 * p + l0), w1 = hmoe_cu_ld_u32a4(b + 52 + 32 * p + l0);
        uint32_t h0 = hmoe_cu_ld_u32a4(b + 16 + l0), h1 = hmoe_cu_ld_u32a4(b + 20 + l0);
HMOE_UNROLL
        for (int i = 0; i < 8; i++) {
            int q = (int)((hmoe_cu_byte8(w0, w1, i) >> sh) & 0xf) + 16 * (int)((hmoe_cu_byte8(h0, h1, i) >> (e0 / 32)) & 1);
            y[i] = (d * (float)sc) * (float)q - dmin * (float)mn;
        }
    }
    HMOE_HD static float vdot(const uint8_t *b, int sl, const int8_t *aq, const float2 *ad) {
        return hmoe_cu_kq45_vdot(b, sl, aq, ad, b + 48, b + 16);
    }
};

/* Q6_K, 210 bytes: ql[128] @0, qh[64] @128, scales[16] (int8) @192, d @208 (quants.md §4.6).
 * vdot slice s: half h = s/4, lanes l0 = 8(s%4)..+7, all four quarters k -> 32 weights. */
struct hmoe_tq_q6_k {
    static constexpr bool q8_offset = false;
    static constexpr bool q8 = true;
    static constexpr bool q8_sub16 = true;
    HMOE_HD static void q8chunk(const uint8_t *b, int c, uint32_t *q, float *sc, float *of) {
        const int h = c / 4, k = c % 4;
        const float d = hmoe_cu_h2f((uint16_t)hmoe_cu_ld_u16(b + 208));
        HMOE_UNROLL
        for (int i = 0; i < 8; i++) {
            const uint32_t lo = (hmoe_cu_ld_u32a2(b + 64 * h + 32 * (k % 2) + 4 * i) >> (k < 2 ? 0 : 4)) & 0x0f0f0f0f;
            const uint32_t hi = ((hmoe_cu_ld_u32a2(b + 128 + 32 * h + 4 * i) >> (2 * k)) & 0x03030303) << 4;
            q[i] = hmoe_cu_vsub4(lo | hi, 0x20202020);
        }
        HMOE_UNROLL
        for (int i = 0; i < 2; i++) sc[i] = d * (float)(int8_t)hmoe_cu_ld_u8(b + 192 + 2 * c + i), of[i] = 0.0f;
    }
    static constexpr enum hmoe_type type = HMOE_TYPE_Q6_K;
    static constexpr int blck = HMOE_QK_K, bytes = sizeof(struct hmoe_block_q6_k), ns = 8;
    static constexpr bool is_float = false;
    HMOE_HD static void dequant8(const uint8_t *b, int g, float *y) {
        float d = hmoe_cu_h2f((uint16_t)hmoe_cu_ld_u16(b + 208));
        int e0 = 8 * g, h = e0 / 128, k = (e0 % 128) / 32, l0 = e0 % 32;
        float scale = d * (float)(int8_t)hmoe_cu_ld_u8(b + 192 + e0 / 16);
        const uint8_t *ql = b + 64 * h + 32 * (k % 2) + l0, *qh = b + 128 + 32 * h + l0;
        uint32_t w0 = hmoe_cu_ld_u32a2(ql), w1 = hmoe_cu_ld_u32a2(ql + 4);
        uint32_t h0 = hmoe_cu_ld_u32a2(qh), h1 = hmoe_cu_ld_u32a2(qh + 4);
HMOE_UNROLL
        for (int i = 0; i < 8; i++) {
            int low4 = (int)((hmoe_cu_byte8(w0, w1, i) >> (k < 2 ? 0 : 4)) & 0xf);
            int hi2 = (int)((hmoe_cu_byte8(h0, h1, i) >> (2 * k)) & 3);
            y[i] = scale * (float)((low4 | (hi2 << 4)) - 32);
        }
    }
    HMOE_HD static float vdot(const uint8_t *b, int sl, const int8_t *aq, const float2 *ad) {
        const int h = sl / 4, l0 = 8 * (sl % 4);
        float d = hmoe_cu_h2f((uint16_t)hmoe_cu_ld_u16(b + 208));
        uint32_t ql[2][2], qh[2];
        ql[0][0] = hmoe_cu_ld_u32a2(b + 64 * h + l0), ql[0][1] = hmoe_cu_ld_u32a2(b + 64 * h + l0 + 4);
        ql[1][0] = hmoe_cu_ld_u32a2(b + 64 * h + 32 + l0), ql[1][1] = hmoe_cu_ld_u32a2(b + 64 * h + 36 + l0);
        qh[0] = hmoe_cu_ld_u32a2(b + 128 + 32 * h + l0), qh[1] = hmoe_cu_ld_u32a2(b + 132 + 32 * h + l0);
        float acc = 0.0f;
HMOE_UNROLL
        for (int k = 0; k < 4; k++) {
            int a[2];
            hmoe_cu_act2(aq, 128 * h + 32 * k + l0, a);
            int sumi = 0;
HMOE_UNROLL
            for (int w = 0; w < 2; w++) {
                uint32_t low = (ql[k % 2][w] >> (k < 2 ? 0 : 4)) & 0x0f0f0f0f;
                uint32_t hi = ((qh[w] >> (2 * k)) & 0x03030303) << 4;
                sumi = hmoe_cu_dp4a((int)hmoe_cu_vsub4(low | hi, 0x20202020), a[w], sumi);
            }
            int sc = (int)(int8_t)hmoe_cu_ld_u8(b + 192 + 8 * h + 2 * k + (l0 >= 16));
            acc += ad[4 * h + k].x * (float)(sc * sumi);
        }
        return d * acc;
    }
};

/* ============================== I-quants (quants.md §5) ==============================
 * Eight chunks ib of 32 elements (4 groups g of 8); vdot slice = chunk. */

/* IQ2_XXS, 66 bytes: d @0, chunk ib @2+8ib: 4 grid indices, u32le signs + scale. */
struct hmoe_tq_iq2_xxs {
    static constexpr bool q8_offset = false;
    static constexpr bool q8 = true;
    static constexpr bool q8_sub16 = false;
    HMOE_HD static void q8chunk(const uint8_t *b, int ib, uint32_t *q, float *sc, float *of) {
        const float d = hmoe_cu_h2f((uint16_t)hmoe_cu_ld_u16(b));
        const uint32_t idx = hmoe_cu_ld_u32a2(b + 2 + 8 * ib), w = hmoe_cu_ld_u32a2(b + 6 + 8 * ib);
        HMOE_UNROLL
        for (int g = 0; g < 4; g++) {
            const uint64_t grid = HMOE_GRID(iq2xxs_grid, (idx >> (8 * g)) & 0xff);
            uint32_t lo = (uint32_t)grid, hi = (uint32_t)(grid >> 32);
            hmoe_cu_apply_signs(hmoe_cu_ksigns((w >> (7 * g)) & 127), &lo, &hi);
            q[2 * g] = lo, q[2 * g + 1] = hi;
        }
        sc[0] = sc[1] = d * (0.5f + (float)(w >> 28)) * 0.25f, of[0] = of[1] = 0.0f;
    }
    static constexpr enum hmoe_type type = HMOE_TYPE_IQ2_XXS;
    static constexpr int blck = HMOE_QK_K, bytes = sizeof(struct hmoe_block_iq2_xxs), ns = 8;
    static constexpr bool is_float = false;
    HMOE_HD static void dequant8(const uint8_t *b, int gg, float *y) {
        int ib = gg / 4, g = gg % 4;
        float d = hmoe_cu_h2f((uint16_t)hmoe_cu_ld_u16(b));
        uint32_t w = hmoe_cu_ld_u32a2(b + 6 + 8 * ib);
        float scale = d * (0.5f + (float)(w >> 28)) * 0.25f;
        uint64_t grid = HMOE_GRID(iq2xxs_grid, hmoe_cu_ld_u8(b + 2 + 8 * ib + g));
        uint32_t signs = hmoe_cu_ksigns((w >> (7 * g)) & 127);
HMOE_UNROLL
        for (int k = 0; k < 8; k++) y[k] = hmoe_cu_signed(signs, k, scale * (float)((grid >> (8 * k)) & 0xff));
    }
    HMOE_HD static float vdot(const uint8_t *b, int ib, const int8_t *aq, const float2 *ad) {
        float d = hmoe_cu_h2f((uint16_t)hmoe_cu_ld_u16(b));
        uint32_t idx = hmoe_cu_ld_u32a2(b + 2 + 8 * ib), w = hmoe_cu_ld_u32a2(b + 6 + 8 * ib);
        int sumi = 0;
HMOE_UNROLL
        for (int g = 0; g < 4; g++) {
            uint64_t grid = HMOE_GRID(iq2xxs_grid, (idx >> (8 * g)) & 0xff);
            uint32_t lo = (uint32_t)grid, hi = (uint32_t)(grid >> 32);
            hmoe_cu_apply_signs(hmoe_cu_ksigns((w >> (7 * g)) & 127), &lo, &hi);
            int a[2];
            hmoe_cu_act2(aq, 32 * ib + 8 * g, a);
            sumi = hmoe_cu_dp4a((int)lo, a[0], hmoe_cu_dp4a((int)hi, a[1], sumi));
        }
        return d * 0.125f * (float)(2 * (int)(w >> 28) + 1) * ad[ib].x * (float)sumi;
    }
};

/* IQ2_XS, 74 bytes: d @0, qs[32] u16 @2 (9-bit grid index, 7-bit sign index), scales[8] @66. */
struct hmoe_tq_iq2_xs {
    static constexpr bool q8_offset = false;
    static constexpr bool q8 = true;
    static constexpr bool q8_sub16 = true;
    HMOE_HD static void q8chunk(const uint8_t *b, int ib, uint32_t *q, float *sc, float *of) {
        const float d = hmoe_cu_h2f((uint16_t)hmoe_cu_ld_u16(b));
        const uint32_t v01 = hmoe_cu_ld_u32a2(b + 2 + 8 * ib), v23 = hmoe_cu_ld_u32a2(b + 6 + 8 * ib);
        const uint32_t s8 = hmoe_cu_ld_u8(b + 66 + ib);
        HMOE_UNROLL
        for (int g = 0; g < 4; g++) {
            const uint32_t v = ((g < 2 ? v01 : v23) >> (16 * (g & 1))) & 0xffff;
            const uint64_t grid = HMOE_GRID(iq2xs_grid, v & 511);
            uint32_t lo = (uint32_t)grid, hi = (uint32_t)(grid >> 32);
            hmoe_cu_apply_signs(hmoe_cu_ksigns(v >> 9), &lo, &hi);
            q[2 * g] = lo, q[2 * g + 1] = hi;
        }
        sc[0] = d * (0.5f + (float)(s8 & 0xf)) * 0.25f, sc[1] = d * (0.5f + (float)(s8 >> 4)) * 0.25f;
        of[0] = of[1] = 0.0f;
    }
    static constexpr enum hmoe_type type = HMOE_TYPE_IQ2_XS;
    static constexpr int blck = HMOE_QK_K, bytes = sizeof(struct hmoe_block_iq2_xs), ns = 8;
    static constexpr bool is_float = false;
    HMOE_HD static void dequant8(const uint8_t *b, int gg, float *y) {
        int ib = gg / 4, g = gg % 4;
        float d = hmoe_cu_h2f((uint16_t)hmoe_cu_ld_u16(b));
        uint32_t v = hmoe_cu_ld_u16(b + 2 + 2 * gg);
        uint32_t sc = hmoe_cu_ld_u8(b + 66 + ib);
        int s = (int)(g < 2 ? (sc & 0xf) : (sc >> 4));
        float scale = d * (0.5f + (float)s) * 0.25f;
        uint64_t grid = HMOE_GRID(iq2xs_grid, v & 511);
        uint32_t signs = hmoe_cu_ksigns(v >> 9);
HMOE_UNROLL
        for (int k = 0; k < 8; k++) y[k] = hmoe_cu_signed(signs, k, scale * (float)((grid >> (8 * k)) & 0xff));
    }
    HMOE_HD static float vdot(const uint8_t *b, int ib, const int8_t *aq, const float2 *ad) {
        float d = hmoe_cu_h2f((uint16_t)hmoe_cu_ld_u16(b));
        uint32_t v01 = hmoe_cu_ld_u32a2(b + 2 + 8 * ib), v23 = hmoe_cu_ld_u32a2(b + 6 + 8 * ib);
        uint32_t sc = hmoe_cu_ld_u8(b + 66 + ib);
        int sum[2] = {0, 0};
HMOE_UNROLL
        for (int g = 0; g < 4; g++) {
            uint32_t v = ((g < 2 ? v01 : v23) >> (16 * (g & 1))) & 0xffff;
            uint64_t grid = HMOE_GRID(iq2xs_grid, v & 511);
            uint32_t lo = (uint32_t)grid, hi = (uint32_t)(grid >> 32);
            hmoe_cu_apply_signs(hmoe_cu_ksigns(v >> 9), &lo, &hi);
            int a[2];
            hmoe_cu_act2(aq, 32 * ib + 8 * g, a);
            sum[g / 2] = hmoe_cu_dp4a((int)lo, a[0], hmoe_cu_dp4a((int)hi, a[1], sum[g / 2]));
        }
        int isum = (2 * (int)(sc & 0xf) + 1) * sum[0] + (2 * (int)(sc >> 4) + 1) * sum[1];
        return d * 0.125f * ad[ib].x * (float)isum;
    }
};

/* IQ2_S, 82 bytes: d @0, idx_lo[32] @2, sgn[32] @34, qh[8] @66, scales[8] @74. */
struct hmoe_tq_iq2_s {
    static constexpr bool q8_offset = false;
    static constexpr bool q8 = true;
    static constexpr bool q8_sub16 = true;
    HMOE_HD static void q8chunk(const uint8_t *b, int ib, uint32_t *q, float *sc, float *of) {
        const float d = hmoe_cu_h2f((uint16_t)hmoe_cu_ld_u16(b));
        const uint32_t idx = hmoe_cu_ld_u32a2(b + 2 + 4 * ib), sgn = hmoe_cu_ld_u32a2(b + 34 + 4 * ib);
        const uint32_t qh = hmoe_cu_ld_u8(b + 66 + ib), s8 = hmoe_cu_ld_u8(b + 74 + ib);
        HMOE_UNROLL
        for (int g = 0; g < 4; g++) {
            const uint64_t grid = HMOE_GRID(iq2s_grid, ((idx >> (8 * g)) & 0xff) | (((qh >> (2 * g)) & 3) << 8));
            uint32_t lo = (uint32_t)grid, hi = (uint32_t)(grid >> 32);
            hmoe_cu_apply_signs((sgn >> (8 * g)) & 0xff, &lo, &hi);
            q[2 * g] = lo, q[2 * g + 1] = hi;
        }
        sc[0] = d * (0.5f + (float)(s8 & 0xf)) * 0.25f, sc[1] = d * (0.5f + (float)(s8 >> 4)) * 0.25f;
        of[0] = of[1] = 0.0f;
    }
    static constexpr enum hmoe_type type = HMOE_TYPE_IQ2_S;
    static constexpr int blck = HMOE_QK_K, bytes = sizeof(struct hmoe_block_iq2_s), ns = 8;
    static constexpr bool is_float = false;
    HMOE_HD static void dequant8(const uint8_t *b, int gg, float *y) {
        int ib = gg / 4, g = gg % 4;
        float d = hmoe_cu_h2f((uint16_t)hmoe_cu_ld_u16(b));
        uint32_t qh = hmoe_cu_ld_u8(b + 66 + ib), sc = hmoe_cu_ld_u8(b + 74 + ib);
        uint32_t index = hmoe_cu_ld_u8(b + 2 + gg) | (((qh >> (2 * g)) & 3) << 8);
        int s = (int)(g < 2 ? (sc & 0xf) : (sc >> 4));
        float scale = d * (0.5f + (float)s) * 0.25f;
        uint64_t grid = HMOE_GRID(iq2s_grid, index);
        uint32_t signs = hmoe_cu_ld_u8(b + 34 + gg);
HMOE_UNROLL
        for (int k = 0; k < 8; k++) y[k] = hmoe_cu_signed(signs, k, scale * (float)((grid >> (8 * k)) & 0xff));
    }
    HMOE_HD static float vdot(const uint8_t *b, int ib, const int8_t *aq, const float2 *ad) {
        float d = hmoe_cu_h2f((uint16_t)hmoe_cu_ld_u16(b));
        uint32_t idx = hmoe_cu_ld_u32a2(b + 2 + 4 * ib), sgn = hmoe_cu_ld_u32a2(b + 34 + 4 * ib);
        uint32_t qh = hmoe_cu_ld_u8(b + 66 + ib), sc = hmoe_cu_ld_u8(b + 74 + ib);
        int sum[2] = {0, 0};
HMOE_UNROLL
        for (int g = 0; g < 4; g++) {
            uint32_t index = ((idx >> (8 * g)) & 0xff) | (((qh >> (2 * g)) & 3) << 8);
            uint64_t grid = HMOE_GRID(iq2s_grid, index);
            uint32_t lo = (uint32_t)grid, hi = (uint32_t)(grid >> 32);
            hmoe_cu_apply_signs((sgn >> (8 * g)) & 0xff, &lo, &hi);
            int a[2];
            hmoe_cu_act2(aq, 32 * ib + 8 * g, a);
            sum[g / 2] = hmoe_cu_dp4a((int)lo, a[0], hmoe_cu_dp4a((int)hi, a[1], sum[g / 2]));
        }
        int isum = (2 * (int)(sc & 0xf) + 1) * sum[0] + (2 * (int)(sc >> 4) + 1) * sum[1];
        return d * 0.125f * ad[ib].x * (float)isum;
    }
};

/* IQ3_XXS, 98 bytes: d @0, idx[64] @2 (two 4-value grid entries per group), 8 x u32le @66. */
struct hmoe_tq_iq3_xxs {
    static constexpr bool q8_offset = false;
    static constexpr bool q8 = true;
    static constexpr bool q8_sub16 = false;
    HMOE_HD static void q8chunk(const uint8_t *b, int ib, uint32_t *q, float *sc, float *of) {
        const float d = hmoe_cu_h2f((uint16_t)hmoe_cu_ld_u16(b));
        const uint32_t i0 = hmoe_cu_ld_u32a2(b + 2 + 8 * ib), i1 = hmoe_cu_ld_u32a2(b + 6 + 8 * ib);
        const uint32_t w = hmoe_cu_ld_u32a2(b + 66 + 4 * ib);
        HMOE_UNROLL
        for (int g = 0; g < 4; g++) {
            uint32_t lo = HMOE_GRID(iq3xxs_grid, hmoe_cu_byte8(i0, i1, 2 * g));
            uint32_t hi = HMOE_GRID(iq3xxs_grid, hmoe_cu_byte8(i0, i1, 2 * g + 1));
            hmoe_cu_apply_signs(hmoe_cu_ksigns((w >> (7 * g)) & 127), &lo, &hi);
            q[2 * g] = lo, q[2 * g + 1] = hi;
        }
        sc[0] = sc[1] = d * (0.5f + (float)(w >> 28)) * 0.5f, of[0] = of[1] = 0.0f;
    }
    static constexpr enum hmoe_type type = HMOE_TYPE_IQ3_XXS;
    static constexpr int blck = HMOE_QK_K, bytes = sizeof(struct hmoe_block_iq3_xxs), ns = 8;
    static constexpr bool is_float = false;
    HMOE_HD static void dequant8(const uint8_t *b, int gg, float *y) {
        int ib = gg / 4, g = gg % 4;
        float d = hmoe_cu_h2f((uint16_t)hmoe_cu_ld_u16(b));
        uint32_t w = hmoe_cu_ld_u32a2(b + 66 + 4 * ib);
        float scale = d * (0.5f + (float)(w >> 28)) * 0.5f;
        uint32_t signs = hmoe_cu_ksigns((w >> (7 * g)) & 127);
        uint32_t first = HMOE_GRID(iq3xxs_grid, hmoe_cu_ld_u8(b + 2 + 8 * ib + 2 * g));
        uint32_t second = HMOE_GRID(iq3xxs_grid, hmoe_cu_ld_u8(b + 2 + 8 * ib + 2 * g + 1));
HMOE_UNROLL
        for (int k = 0; k < 8; k++) {
            uint32_t mag = ((k < 4 ? first : second) >> (8 * (k & 3))) & 0xff;
            y[k] = hmoe_cu_signed(signs, k, scale * (float)mag);
        }
    }
    HMOE_HD static float vdot(const uint8_t *b, int ib, const int8_t *aq, const float2 *ad) {
        float d = hmoe_cu_h2f((uint16_t)hmoe_cu_ld_u16(b));
        uint32_t i0 = hmoe_cu_ld_u32a2(b + 2 + 8 * ib), i1 = hmoe_cu_ld_u32a2(b + 6 + 8 * ib);
        uint32_t w = hmoe_cu_ld_u32a2(b + 66 + 4 * ib);
        int sumi = 0;
HMOE_UNROLL
        for (int g = 0; g < 4; g++) {
            uint32_t lo = HMOE_GRID(iq3xxs_grid, hmoe_cu_byte8(i0, i1, 2 * g));
            uint32_t hi = HMOE_GRID(iq3xxs_grid, hmoe_cu_byte8(i0, i1, 2 * g + 1));
            hmoe_cu_apply_signs(hmoe_cu_ksigns((w >> (7 * g)) & 127), &lo, &hi);
            int a[2];
            hmoe_cu_act2(aq, 32 * ib + 8 * g, a);
            sumi = hmoe_cu_dp4a((int)lo, a[0], hmoe_cu_dp4a((int)hi, a[1], sumi));
        }
        return d * 0.25f * (float)(2 * (int)(w >> 28) + 1) * ad[ib].x * (float)sumi;
    }
};

/* IQ3_S, 110 bytes: d @0, qs[64] @2, qh[8] @66, signs[32] @74, scales[4] @106. */
struct hmoe_tq_iq3_s {
    static constexpr bool q8_offset = false;
    static constexpr bool q8 = true;
    static constexpr bool q8_sub16 = false;
    HMOE_HD static void q8chunk(const uint8_t *b, int ib, uint32_t *q, float *sc, float *of) {
        const float d = hmoe_cu_h2f((uint16_t)hmoe_cu_ld_u16(b));
        const uint32_t q0 = hmoe_cu_ld_u32a2(b + 2 + 8 * ib), q1 = hmoe_cu_ld_u32a2(b + 6 + 8 * ib);
        const uint32_t qh = hmoe_cu_ld_u8(b + 66 + ib), sgn = hmoe_cu_ld_u32a2(b + 74 + 4 * ib);
        const int s4 = (int)((hmoe_cu_ld_u8(b + 106 + ib / 2) >> (4 * (ib % 2))) & 0xf);
        HMOE_UNROLL
        for (int g = 0; g < 4; g++) {
            uint32_t lo = HMOE_GRID(iq3s_grid, hmoe_cu_byte8(q0, q1, 2 * g) | (((qh >> (2 * g)) & 1) << 8));
            uint32_t hi = HMOE_GRID(iq3s_grid, hmoe_cu_byte8(q0, q1, 2 * g + 1) | (((qh >> (2 * g + 1)) & 1) << 8));
            hmoe_cu_apply_signs((sgn >> (8 * g)) & 0xff, &lo, &hi);
            q[2 * g] = lo, q[2 * g + 1] = hi;
        }
        sc[0] = sc[1] = d * (float)(1 + 2 * s4), of[0] = of[1] = 0.0f;
    }
    static constexpr enum hmoe_type type = HMOE_TYPE_IQ3_S;
    static constexpr int blck = HMOE_QK_K, bytes = sizeof(struct hmoe_block_iq3_s), ns = 8;
    static constexpr bool is_float = false;
    HMOE_HD static void dequant8(const uint8_t *b, int gg, float *y) {
        int ib = gg / 4, g = gg % 4;
        float d = hmoe_cu_h2f((uint16_t)hmoe_cu_ld_u16(b));
        int s = (int)((hmoe_cu_ld_u8(b + 106 + ib / 2) >> (4 * (ib % 2))) & 0xf);
        float scale = d * (float)(1 + 2 * s);
        uint32_t qh = hmoe_cu_ld_u8(b + 66 + ib);
        uint32_t i1 = hmoe_cu_ld_u8(b + 2 + 8 * ib + 2 * g) | (((qh >> (2 * g)) & 1) << 8);
        uint32_t i2 = hmoe_cu_ld_u8(b + 2 + 8 * ib + 2 * g + 1) | (((qh >> (2 * g + 1)) & 1) << 8);
        uint32_t first = HMOE_GRID(iq3s_grid, i1), second = HMOE_GRID(iq3s_grid, i2);
        uint32_t signs = hmoe_cu_ld_u8(b + 74 + gg);
HMOE_UNROLL
        for (int k = 0; k < 8; k++) {
            uint32_t mag = ((k < 4 ? first : second) >> (8 * (k & 3))) & 0xff;
            y[k] = hmoe_cu_signed(signs, k, scale * (float)mag);
        }
    }
    HMOE_HD static float vdot(const uint8_t *b, int ib, const int8_t *aq, const float2 *ad) {
        float d = hmoe_cu_h2f((uint16_t)hmoe_cu_ld_u16(b));
        uint32_t q0 = hmoe_cu_ld_u32a2(b + 2 + 8 * ib), q1 = hmoe_cu_ld_u32a2(b + 6 + 8 * ib);
        uint32_t qh = hmoe_cu_ld_u8(b + 66 + ib), sgn = hmoe_cu_ld_u32a2(b + 74 + 4 * ib);
        int s = (int)((hmoe_cu_ld_u8(b + 106 + ib / 2) >> (4 * (ib % 2))) & 0xf);
        int sumi = 0;
HMOE_UNROLL
        for (int g = 0; g < 4; g++) {
            uint32_t i1 = hmoe_cu_byte8(q0, q1, 2 * g) | (((qh >> (2 * g)) & 1) << 8);
            uint32_t i2 = hmoe_cu_byte8(q0, q1, 2 * g + 1) | (((qh >> (2 * g + 1)) & 1) << 8);
            uint32_t lo = HMOE_GRID(iq3s_grid, i1), hi = HMOE_GRID(iq3s_grid, i2);
            hmoe_cu_apply_signs((sgn >> (8 * g)) & 0xff, &lo, &hi);
            int a[2];
            hmoe_cu_act2(aq, 32 * ib + 8 * g, a);
            sumi = hmoe_cu_dp4a((int)lo, a[0], hmoe_cu_dp4a((int)hi, a[1], sumi));
        }
        return d * (float)(1 + 2 * s) * ad[ib].x * (float)sumi;
    }
};

/* IQ1_S, 50 bytes: d @0, idx_lo[32] @2, qh[8] u16 @34 (index bits, 3-bit scale, delta sign). */
struct hmoe_tq_iq1_s {
    static constexpr bool q8 = true;
    static constexpr bool q8_offset = true;
    static constexpr bool q8_sub16 = false;
    HMOE_HD static void q8chunk(const uint8_t *b, int ib, uint32_t *q, float *sc, float *of) {
        const float d = hmoe_cu_h2f((uint16_t)hmoe_cu_ld_u16(b));
        const uint32_t idx = hmoe_cu_ld_u32a2(b + 2 + 4 * ib), h = hmoe_cu_ld_u16(b + 34 + 2 * ib);
        HMOE_UNROLL
        for (int g = 0; g < 4; g++) {
            const uint64_t grid = HMOE_GRID(iq1s_grid, ((idx >> (8 * g)) & 0xff) | (((h >> (3 * g)) & 7) << 8));
            q[2 * g] = (uint32_t)grid, q[2 * g + 1] = (uint32_t)(grid >> 32);
        }
        const float scale = d * (float)(2 * (int)((h >> 12) & 7) + 1);
        sc[0] = sc[1] = scale, of[0] = of[1] = scale * ((h & 0x8000) ? -0.125f : 0.125f);
    }
    static constexpr enum hmoe_type type = HMOE_TYPE_IQ1_S;
    static constexpr int blck = HMOE_QK_K, bytes = sizeof(struct hmoe_block_iq1_s), ns = 8;
    static constexpr bool is_float = false;
    HMOE_HD static void dequant8(const uint8_t *b, int gg, float *y) {
        int ib = gg / 4, g = gg % 4;
        float d = hmoe_cu_h2f((uint16_t)hmoe_cu_ld_u16(b));
        uint32_t h = hmoe_cu_ld_u16(b + 34 + 2 * ib);
        float scale = d * (float)(2 * (int)((h >> 12) & 7) + 1);
        float delta = (h & 0x8000) ? -0.125f : 0.125f;
        uint32_t index = hmoe_cu_ld_u8(b + 2 + gg) | (((h >> (3 * g)) & 7) << 8);
        uint64_t grid = HMOE_GRID(iq1s_grid, index);
HMOE_UNROLL
        for (int k = 0; k < 8; k++) y[k] = scale * ((float)(int8_t)((grid >> (8 * k)) & 0xff) + delta);
    }
    HMOE_HD static float vdot(const uint8_t *b, int ib, const int8_t *aq, const float2 *ad) {
        float d = hmoe_cu_h2f((uint16_t)hmoe_cu_ld_u16(b));
        uint32_t idx = hmoe_cu_ld_u32a2(b + 2 + 4 * ib), h = hmoe_cu_ld_u16(b + 34 + 2 * ib);
        int sumi = 0;
HMOE_UNROLL
        for (int g = 0; g < 4; g++) {
            uint64_t grid = HMOE_GRID(iq1s_grid, ((idx >> (8 * g)) & 0xff) | (((h >> (3 * g)) & 7) << 8));
            int a[2];
            hmoe_cu_act2(aq, 32 * ib + 8 * g, a);
            sumi = hmoe_cu_dp4a((int)(uint32_t)grid, a[0], hmoe_cu_dp4a((int)(uint32_t)(grid >> 32), a[1], sumi));
        }
        float delta = (h & 0x8000) ? -0.125f : 0.125f;
        float2 a = ad[ib];
        return d * (float)(2 * (int)((h >> 12) & 7) + 1) * (a.x * (float)sumi + delta * a.y);
    }
};

/* IQ1_M, 56 bytes: idx_lo[32] @0, qh[16] @32 (a nibble per group), scales[8] @48 (four u16le:
 * 3-bit sub-scales, the fp16 d spread over the top nibbles). */
HMOE_HD float hmoe_cu_iq1m_d(const uint8_t *b) {
    uint32_t w0 = hmoe_cu_ld_u16(b + 48), w1 = hmoe_cu_ld_u16(b + 50), w2 = hmoe_cu_ld_u16(b + 52),
             w3 = hmoe_cu_ld_u16(b + 54);
    return hmoe_cu_h2f((uint16_t)((w0 >> 12) | ((w1 >> 12) << 4) | ((w2 >> 12) << 8) | ((w3 >> 12) << 12)));
}
struct hmoe_tq_iq1_m {
    static constexpr bool q8_offset = false;
    static constexpr bool q8 = false;
    static constexpr bool q8_sub16 = false;
    HMOE_HD static void q8chunk(const uint8_t *, int, uint32_t *, float *, float *) {}
    static constexpr enum hmoe_type type = HMOE_TYPE_IQ1_M;
    static constexpr int blck = HMOE_QK_K, bytes = sizeof(struct hmoe_block_iq1_m), ns = 8;
    static constexpr bool is_float = false;
    HMOE_HD static void dequant8(const uint8_t *b, int gg, float *y) {
        int ib = gg / 4, g = gg % 4;
        float d = hmoe_cu_iq1m_d(b);
        uint32_t w = hmoe_cu_ld_u16(b + 48 + 2 * (ib / 2));
        int sh = 6 * (ib % 2);
        int s = (int)((w >> (sh + (g < 2 ? 0 : 3))) & 7);
        uint32_t nib = (hmoe_cu_ld_u8(b + 32 + 2 * ib + g / 2) >> (4 * (g % 2))) & 0xf;
        uint32_t index = hmoe_cu_ld_u8(b + gg) | ((nib & 7) << 8);
        float delta = (nib & 8) ? -0.125f : 0.125f;
        float scale = d * (float)(2 * s + 1);
        uint64_t grid = HMOE_GRID(iq1s_grid, index);
HMOE_UNROLL
        for (int k = 0; k < 8; k++) y[k] = scale * ((float)(int8_t)((grid >> (8 * k)) & 0xff) + delta);
    }
    HMOE_HD static float vdot(const uint8_t *b, int ib, const int8_t *aq, const float2 *ad) {
        float d = hmoe_cu_iq1m_d(b);
        uint32_t idx = hmoe_cu_ld_u32a4(b + 4 * ib), qh = hmoe_cu_ld_u16(b + 32 + 2 * ib);
        uint32_t w = hmoe_cu_ld_u16(b + 48 + 2 * (ib / 2));
        int sh = 6 * (ib % 2);
        float acc[2] = {0.0f, 0.0f};
HMOE_UNROLL
        for (int g = 0; g < 4; g++) {
            uint32_t nib = (qh >> (4 * g)) & 0xf;
            uint64_t grid = HMOE_GRID(iq1s_grid, ((idx >> (8 * g)) & 0xff) | ((nib & 7) << 8));
            int a[2];
            hmoe_cu_act2(aq, 32 * ib + 8 * g, a);
            int sumi = hmoe_cu_dp4a((int)(uint32_t)grid, a[0], hmoe_cu_dp4a((int)(uint32_t)(grid >> 32), a[1], 0));
            int suma = hmoe_cu_dp4a(HMOE_ONES, a[0], hmoe_cu_dp4a(HMOE_ONES, a[1], 0));
            acc[g / 2] += (float)sumi + ((nib & 8) ? -0.125f : 0.125f) * (float)suma;
        }
        int s_lo = (int)((w >> sh) & 7), s_hi = (int)((w >> (sh + 3)) & 7);
        return d * ad[ib].x * ((float)(2 * s_lo + 1) * acc[0] + (float)(2 * s_hi + 1) * acc[1]);
    }
};

/* IQ4_XS, 136 bytes: d @0, scales_h u16 @2, scales_l[4] @4, qs[128] @8 (16 per sub-block). */
struct hmoe_tq_iq4_xs {
    static constexpr bool q8_offset = false;
    static constexpr bool q8 = true;
    static constexpr bool q8_sub16 = false;
    HMOE_HD static void q8chunk(const uint8_t *b, int ib, uint32_t *q, float *sc, float *of) {
        const float d = hmoe_cu_h2f((uint16_t)hmoe_cu_ld_u16(b));
        uint32_t t[4];
        hmoe_cu_iq4nl_words(t);
        HMOE_UNROLL
        for (int i = 0; i < 4; i++) {
            const uint32_t w = hmoe_cu_ld_u32a4(b + 8 + 16 * ib + 4 * i);
            q[i] = hmoe_cu_lut16(w & 0x0f0f0f0f, t), q[4 + i] = hmoe_cu_lut16((w >> 4) & 0x0f0f0f0f, t);
        }
        sc[0] = sc[1] = d * (float)(ls(b, ib) - 32), of[0] = of[1] = 0.0f;
    }
    static constexpr enum hmoe_type type = HMOE_TYPE_IQ4_XS;
    static constexpr int blck = HMOE_QK_K, bytes = sizeof(struct hmoe_block_iq4_xs), ns = 8;
    static constexpr bool is_float = false;
    HMOE_HD static int ls(const uint8_t *b, int ib) {
        uint32_t sl = hmoe_cu_ld_u8(b + 4 + ib / 2), sh = hmoe_cu_ld_u16(b + 2);
        return (int)(((sl >> (4 * (ib % 2))) & 0xf) | (((sh >> (2 * ib)) & 3) << 4));
    }
    HMOE_HD static void dequant8(const uint8_t *b, int gg, float *y) {
        int ib = gg / 4, g = gg % 4;
        float d = hmoe_cu_h2f((uint16_t)hmoe_cu_ld_u16(b));
        float scale = d * (float)(ls(b, ib) - 32);
        int q[8];
        hmoe_cu_nib_group(b + 8 + 16 * ib, g, q);
HMOE_UNROLL
        for (int i = 0; i < 8; i++) y[i] = scale * (float)hmoe_cu_iq4nl_value(q[i]);
    }
    HMOE_HD static float vdot(const uint8_t *b, int ib, const int8_t *aq, const float2 *ad) {
        float d = hmoe_cu_h2f((uint16_t)hmoe_cu_ld_u16(b));
        uint32_t t[4];
        hmoe_cu_iq4nl_words(t);
        int alo[4], ahi[4];
        hmoe_cu_act4(aq, 32 * ib, alo);
        hmoe_cu_act4(aq, 32 * ib + 16, ahi);
        int sumi = 0;
HMOE_UNROLL
        for (int i = 0; i < 4; i++) {
            uint32_t q = hmoe_cu_ld_u32a4(b + 8 + 16 * ib + 4 * i);
            sumi = hmoe_cu_dp4a((int)hmoe_cu_lut16(q & 0x0f0f0f0f, t), alo[i], sumi);
            sumi = hmoe_cu_dp4a((int)hmoe_cu_lut16((q >> 4) & 0x0f0f0f0f, t), ahi[i], sumi);
        }
        return d * (float)(ls(b, ib) - 32) * ad[ib].x * (float)sumi;
    }
};

/* ============================== the one type switch ============================== */

/* Call f(traits{}) for a supported type and return true; false for any other id. Every
 * launcher goes through here, so adding a type is one traits struct and one line below. */
template <class F>
static bool hmoe_cuda_type_dispatch(enum hmoe_type t, F &&f) {
    switch (t) {
    case HMOE_TYPE_F32: f(hmoe_tq_f32{}); return true;
    case HMOE_TYPE_F16: f(hmoe_tq_f16{}); return true;
    case HMOE_TYPE_BF16: f(hmoe_tq_bf16{}); return true;
    case HMOE_TYPE_Q4_0: f(hmoe_tq_q4_0{}); return true;
    case HMOE_TYPE_Q4_1: f(hmoe_tq_q4_1{}); return true;
    case HMOE_TYPE_Q5_0: f(hmoe_tq_q5_0{}); return true;
    case HMOE_TYPE_Q5_1: f(hmoe_tq_q5_1{}); return true;
    case HMOE_TYPE_Q8_0: f(hmoe_tq_q8_0{}); return true;
    case HMOE_TYPE_Q2_K: f(hmoe_tq_q2_k{}); return true;
    case HMOE_TYPE_Q3_K: f(hmoe_tq_q3_k{}); return true;
    case HMOE_TYPE_Q4_K: f(hmoe_tq_q4_k{}); return true;
    case HMOE_TYPE_Q5_K: f(hmoe_tq_q5_k{}); return true;
    case HMOE_TYPE_Q6_K: f(hmoe_tq_q6_k{}); return true;
    case HMOE_TYPE_IQ2_XXS: f(hmoe_tq_iq2_xxs{}); return true;
    case HMOE_TYPE_IQ2_XS: f(hmoe_tq_iq2_xs{}); return true;
    case HMOE_TYPE_IQ2_S: f(hmoe_tq_iq2_s{}); return true;
    case HMOE_TYPE_IQ3_XXS: f(hmoe_tq_iq3_xxs{}); return true;
    case HMOE_TYPE_IQ3_S: f(hmoe_tq_iq3_s{}); return true;
    case HMOE_TYPE_IQ1_S: f(hmoe_tq_iq1_s{}); return true;
    case HMOE_TYPE_IQ1_M: f(hmoe_tq_iq1_m{}); return true;
    case HMOE_TYPE_IQ4_NL: f(hmoe_tq_iq4_nl{}); return true;
    case HMOE_TYPE_IQ4_XS: f(hmoe_tq_iq4_xs{}); return true;
    case HMOE_TYPE_MXFP4: f(hmoe_tq_mxfp4{}); return true;
    default: return false;
    }
}

/* Elements and bytes of a "block" as the GPU kernels count them (8-element groups for the
 * float types); {0, 0} for unsupported ids. */
static inline void hmoe_cuda_type_geometry(enum hmoe_type t, int *blck, int *bytes) {
    *blck = 0, *bytes = 0;
    hmoe_cuda_type_dispatch(t, [&](auto tr) {
        using TR = decltype(tr);
        *blck = TR::blck, *bytes = TR::bytes;
    });
}

#endif
