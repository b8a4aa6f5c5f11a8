/* fp16.h — exact scalar conversions between binary32 and the small float encodings
 * ggml stores: IEEE binary16 (fp16), bfloat16, E8M0 (MXFP4 scale) and UE4M3 (NVFP4 scale).
 *
 * Plain bit manipulation, no F16C and no FP environment dependence, so the results are
 * the same in every build (also with flush-to-zero set) and the header is usable from
 * C11 and from CUDA host code. Implements quants.md §0.2; fp16 subnormals are kept
 * (§0.1: K-quant scales are often fp16 subnormals).
 */
#ifndef HMOE_FP16_H
#define HMOE_FP16_H

#include <stdint.h>
#include <string.h>

static inline float hmoe_f32_from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline uint32_t hmoe_f32_to_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* fp16 -> binary32, exact for every input (subnormals normalised, Inf kept, NaN payload
 * kept in the top mantissa bits, as vcvtph2ps does). */
static inline float hmoe_fp16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    if (exp == 0x1f) return hmoe_f32_from_bits(sign | 0x7f800000u | (man << 13));
    if (exp != 0) return hmoe_f32_from_bits(sign | ((exp + 112u) << 23) | (man << 13));
    /* zero or subnormal: man * 2^-24, exact in binary32 (10-bit integer times a power of two) */
    float mag = (float)man * (1.0f / 16777216.0f);
    return sign ? -mag : mag;
}

/* binary32 -> fp16, round to nearest even (what F16C's vcvtps2ph with imm 0 and CUDA's
 * __float2half_rn do). Overflow gives Inf, tiny values round into the subnormal range or
 * to a signed zero, NaN stays a quiet NaN with the top payload bits. */
static inline uint16_t hmoe_f32_to_fp16(float f) {
    uint32_t x = hmoe_f32_to_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
    /* 65520 = halfway between 65504 (largest fp16) and 65536; the tie goes to the even
     * neighbour 65536, which is Inf. */
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);
    if (ax >= 0x38800000u) { /* >= 2^-14: normal fp16. Round off 13 mantissa bits, rebias 127 -> 15. */
        uint32_t r = ax + 0x0fffu + ((ax >> 13) & 1u);
        return (uint16_t)(sign | ((r - 0x38000000u) >> 13));
    }
    /* Subnormal fp16: result = round(|f| * 2^24) as an integer 0..1024 (1024 is the smallest
     * normal, whose bit pattern follows on directly). |f| = m * 2^(e-150). */
    uint32_t e = ax >> 23;
    if (e == 0) return sign; /* binary32 subnormal: far below 2^-25 */
    uint32_t m = (ax & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126u - e; /* >= 14 here */
    if (shift >= 25) return sign; /* m * 2^-shift < 0.5 */
    uint32_t q = m >> shift, rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (q & 1u))) q++;
    return (uint16_t)(sign | q);
}

/* bf16 -> binary32: the 16 bits are the high half (quants.md §0.2). */
static inline float hmoe_bf16_to_f32(uint16_t h) { return hmoe_f32_from_bits((uint32_t)h << 16); }

/* binary32 -> bf16 as ggml's scalar converter does: round to nearest even on the dropped
 * 16 bits (overflow rounds to Inf); NaN is truncated and forced quiet (bit 6 set) so a
 * signalling NaN cannot turn into Inf. Subnormals are kept (not flushed). */
static inline uint16_t hmoe_f32_to_bf16(float f) {
    uint32_t u = hmoe_f32_to_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

/* E8M0 scale byte of MXFP4 decoded the ggml way: 2^(e-128), half the OCP value, because
 * ggml's FP4 code table is doubled. e = 0, 1 give binary32 subnormals; 0xFF is not special. */
static inline float hmoe_e8m0_to_f32_half(uint8_t e) {
    uint32_t bits = e < 2 ? (0x00200000u << e) : ((uint32_t)(e - 1) << 23);
    return hmoe_f32_from_bits(bits);
}

/* UE4M3 scale byte of NVFP4, halved as ggml does (quants.md §0.2). Bit 7 is ignored;
 * 0x00 and 0x7F decode to 0. */
static inline float hmoe_ue4m3_to_f32_half(uint8_t x) {
    if (x == 0x00 || x == 0x7f) return 0.0f;
    uint32_t E = (x >> 3) & 0xfu, M = x & 7u;
    float v;
    if (E == 0) v = (float)M * (1.0f / 512.0f);
    else v = (1.0f + (float)M / 8.0f) * hmoe_f32_from_bits((E - 7u + 127u) << 23);
    return v * 0.5f;
}

#endif
