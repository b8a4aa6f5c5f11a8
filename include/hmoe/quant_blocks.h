/* quant_blocks.h — the byte layout of every ggml block format, one struct per type,
 * each pinned to its size from quants.md §1 (field meanings: §3-§8). Shared by C and CUDA:
 * only sized-integer members, fp16 fields as uint16_t (see hmoe/fp16.h), unaligned
 * multi-byte fields as byte arrays (read with memcpy, little-endian). Blocks are packed
 * back to back, so a block pointer is only 1- or 2-byte aligned: never cast it wider. */
#ifndef HMOE_QUANT_BLOCKS_H
#define HMOE_QUANT_BLOCKS_H

#include <stdint.h>

#ifdef __cplusplus
#define HMOE_BLOCK_SIZE_CHECK(type, bytes) static_assert(sizeof(type) == (bytes), "wrong size of " #type)
#else
#define HMOE_BLOCK_SIZE_CHECK(type, bytes) _Static_assert(sizeof(type) == (bytes), "wrong size of " #type)
#endif

/* Elements per block. */
#define HMOE_QK_LEGACY 32 /* Q4_0 .. Q8_1, IQ4_NL, MXFP4 */
#define HMOE_QK_K 256     /* K-quants, 256-element I-quants, Q8_K, TQ* */
#define HMOE_QK_NVFP4 64
#define HMOE_QK_Q1_0 128
#define HMOE_QK_Q2_0 64

/* ---- 32-element legacy formats (quants.md §3). 4-bit ones: low nibble of qs[j] is
 * element j, high nibble element j+16. ---- */

struct hmoe_block_q4_0 {
    uint16_t d;      /* fp16 scale */
    uint8_t qs[16];  /* q - 8, q in -8..7 */
};
HMOE_BLOCK_SIZE_CHECK(struct hmoe_block_q4_0, 18);

struct hmoe_block_q4_1 {
    uint16_t d;      /* fp16 scale */
    uint16_t m;      /* fp16 offset (block minimum) */
    uint8_t qs[16];  /* q in 0..15 */
};
HMOE_BLOCK_SIZE_CHECK(struct hmoe_block_q4_1, 20);

struct hmoe_block_q5_0 {
    uint16_t d;      /* fp16 scale */
    uint8_t qh[4];   /* u32le: bit e = 5th bit of element e */
    uint8_t qs[16];  /* low 4 bits */
};
HMOE_BLOCK_SIZE_CHECK(struct hmoe_block_q5_0, 22);

struct hmoe_block_q5_1 {
    uint16_t d;      /* fp16 scale */
    uint16_t m;      /* fp16 offset */
    uint8_t qh[4];   /* u32le: bit e = 5th bit of element e */
    uint8_t qs[16];  /* low 4 bits */
};
HMOE_BLOCK_SIZE_CHECK(struct hmoe_block_q5_1, 24);

struct hmoe_block_q8_0 {
    uint16_t d;      /* fp16 scale */
    int8_t qs[32];
};
HMOE_BLOCK_SIZE_CHECK(struct hmoe_block_q8_0, 34);

/* Activation format only (partner of Q4_1/Q5_1, §8.2). */
struct hmoe_block_q8_1 {
    uint16_t d;      /* fp16 scale */
    uint16_t s;      /* fp16 of d * sum(qs), d unrounded */
    int8_t qs[32];
};
HMOE_BLOCK_SIZE_CHECK(struct hmoe_block_q8_1, 36);

/* ---- K-quants, 256-element super-blocks (quants.md §4) ---- */

struct hmoe_block_q2_k {
    uint8_t scales[16]; /* per 16 elements: low nibble scale, high nibble min */
    uint8_t qs[64];     /* 2-bit quants, 128-half / 32-lane / shift layout */
    uint16_t d;         /* fp16, multiplies the scales */
    uint16_t dmin;      /* fp16, multiplies the mins */
};
HMOE_BLOCK_SIZE_CHECK(struct hmoe_block_q2_k, 84);

struct hmoe_block_q3_k {
    uint8_t hmask[32];  /* 3rd bit, bit-plane layout; SET means "no -4" */
    uint8_t qs[64];     /* low 2 bits, as Q2_K */
    uint8_t scales[12]; /* sixteen 6-bit scales, offset 32 */
    uint16_t d;         /* fp16 */
};
HMOE_BLOCK_SIZE_CHECK(struct hmoe_block_q3_k, 110);

struct hmoe_block_q4_k {
    uint16_t d;         /* fp16, multiplies the 6-bit scales */
    uint16_t dmin;      /* fp16, multiplies the 6-bit mins */
    uint8_t scales[12]; /* packing of §4.3 */
    uint8_t qs[128];    /* run p of 32 bytes: elements 64p.. (low nibble), 64p+32.. (high) */
};
HMOE_BLOCK_SIZE_CHECK(struct hmoe_block_q4_k, 144);

struct hmoe_block_q5_k {
    uint16_t d;
    uint16_t dmin;
    uint8_t scales[12]; /* packing of §4.3 */
    uint8_t qh[32];     /* 5th bit, bit-plane layout */
    uint8_t qs[128];    /* low 4 bits, as Q4_K */
};
HMOE_BLOCK_SIZE_CHECK(struct hmoe_block_q5_k, 176);

struct hmoe_block_q6_k {
    uint8_t ql[128];    /* low 4 bits */
    uint8_t qh[64];     /* high 2 bits */
    int8_t scales[16];  /* signed, per 16 elements */
    uint16_t d;         /* fp16 */
};
HMOE_BLOCK_SIZE_CHECK(struct hmoe_block_q6_k, 210);

/* Activation format only (§4.7, §8.3). */
struct hmoe_block_q8_k {
    float d;            /* binary32 (may be negative), not fp16 */
    int8_t qs[256];     /* -127..127 */
    int16_t bsums[16];  /* sum of qs[16b .. 16b+15] */
};
HMOE_BLOCK_SIZE_CHECK(struct hmoe_block_q8_k, 292);

/* ---- I-quants (quants.md §5). 8 chunks of 32 elements, each 4 groups of 8. ---- */

struct hmoe_block_iq2_xxs {
    uint16_t d;         /* fp16 */
    uint8_t qs[64];     /* chunk ib = bytes 8ib..8ib+7: 4 grid indices, then u32le signs+scale */
};
HMOE_BLOCK_SIZE_CHECK(struct hmoe_block_iq2_xxs, 66);

struct hmoe_block_iq2_xs {
    uint16_t d;         /* fp16 */
    uint16_t qs[32];    /* per group: bits 0-8 grid index, bits 9-15 sign index */
    uint8_t scales[8];  /* per chunk: low nibble groups 0-1, high nibble groups 2-3 */
};
HMOE_BLOCK_SIZE_CHECK(struct hmoe_block_iq2_xs, 74);

struct hmoe_block_iq2_s {
    uint16_t d;         /* fp16 */
    uint8_t qs[64];     /* [0..31] low 8 index bits per group, [32..63] explicit sign byte per group */
    uint8_t qh[8];      /* per chunk: bits 2g..2g+1 = index bits 8-9 of group g */
    uint8_t scales[8];  /* as IQ2_XS */
};
HMOE_BLOCK_SIZE_CHECK(struct hmoe_block_iq2_s, 82);

struct hmoe_block_iq3_xxs {
    uint16_t d;         /* fp16 */
    uint8_t qs[96];     /* [0..63] grid indices (2 per group); [64..95] 8 x u32le: 4 sign indices + scale */
};
HMOE_BLOCK_SIZE_CHECK(struct hmoe_block_iq3_xxs, 98);

struct hmoe_block_iq3_s {
    uint16_t d;         /* fp16 */
    uint8_t qs[64];     /* low 8 bits of the grid indices, 2 per group */
    uint8_t qh[8];      /* per chunk: bit 2g / 2g+1 = 9th bit of the group's first / second index */
    uint8_t signs[32];  /* explicit sign byte per group */
    uint8_t scales[4];  /* 4-bit scale per chunk: low nibble even ib, high nibble odd ib */
};
HMOE_BLOCK_SIZE_CHECK(struct hmoe_block_iq3_s, 110);

struct hmoe_block_iq1_s {
    uint16_t d;         /* fp16 */
    uint8_t qs[32];     /* low 8 index bits per group */
    uint16_t qh[8];     /* per chunk: index bits 8-10 per group, 3-bit scale (12-14), delta sign (15) */
};
HMOE_BLOCK_SIZE_CHECK(struct hmoe_block_iq1_s, 50);

struct hmoe_block_iq1_m {
    uint8_t qs[32];     /* low 8 index bits per group */
    uint8_t qh[16];     /* 4-bit field per group: index bits 8-10, delta sign (bit 3) */
    uint8_t scales[8];  /* 4 x u16le: 3-bit sub-scales in bits 0-11, fp16 d scattered over bits 12-15 */
};
HMOE_BLOCK_SIZE_CHECK(struct hmoe_block_iq1_m, 56);

struct hmoe_block_iq4_nl {
    uint16_t d;         /* fp16 */
    uint8_t qs[16];     /* codes into kvalues_iq4nl, Q4_0 nibble order */
};
HMOE_BLOCK_SIZE_CHECK(struct hmoe_block_iq4_nl, 18);

struct hmoe_block_iq4_xs {
    uint16_t d;          /* fp16 */
    uint16_t scales_h;   /* bits 2ib..2ib+1: high 2 bits of sub-block ib's scale */
    uint8_t scales_l[4]; /* low 4 bits: sub-block ib in scales_l[ib/2], nibble ib%2 */
    uint8_t qs[128];     /* sub-block ib: qs[16ib..16ib+15], Q4_0 nibble order inside */
};
HMOE_BLOCK_SIZE_CHECK(struct hmoe_block_iq4_xs, 136);

/* ---- Microscaling FP4 (quants.md §6) ---- */

struct hmoe_block_mxfp4 {
    uint8_t e;          /* E8M0 shared exponent, decoded as 2^(e-128) */
    uint8_t qs[16];     /* E2M1 codes, Q4_0 nibble order */
};
HMOE_BLOCK_SIZE_CHECK(struct hmoe_block_mxfp4, 17);

struct hmoe_block_nvfp4 {
    uint8_t d[4];       /* UE4M3 scale per 16-element sub-block */
    uint8_t qs[32];     /* sub-block s: qs[8s+j] low nibble = element 16s+j, high = 16s+8+j */
};
HMOE_BLOCK_SIZE_CHECK(struct hmoe_block_nvfp4, 36);

/* ---- Other ids (quants.md §7) ---- */

struct hmoe_block_q1_0 {
    uint16_t d;         /* fp16 */
    uint8_t qs[16];     /* bit j%8 of byte j/8: set -> +d, clear -> -d */
};
HMOE_BLOCK_SIZE_CHECK(struct hmoe_block_q1_0, 18);

struct hmoe_block_q2_0 {
    uint16_t d;         /* fp16 */
    uint8_t qs[16];     /* element j = bits 2(j%4).. of byte j/4, value (q - 1) * d */
};
HMOE_BLOCK_SIZE_CHECK(struct hmoe_block_q2_0, 18);

/* Ternary formats: sizes only (quants.md §7 does not give their element order, so hmoe
 * has no kernels for them; the loader can still size and reject them). */
struct hmoe_block_tq1_0 {
    uint8_t qs[48];     /* base-3 packed */
    uint8_t qh[4];
    uint16_t d;         /* fp16 */
};
HMOE_BLOCK_SIZE_CHECK(struct hmoe_block_tq1_0, 54);

struct hmoe_block_tq2_0 {
    uint8_t qs[64];     /* 2-bit */
    uint16_t d;         /* fp16 */
};
HMOE_BLOCK_SIZE_CHECK(struct hmoe_block_tq2_0, 66);

#endif
