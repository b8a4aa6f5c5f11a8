/* test_quant_blocks.c — hand-built blocks dequantized against values worked out by hand
 * from quants.md, mainly for formats without llama.cpp fixtures. Each case starts from a
 * block whose elements all share one known value, sets a few bytes at the quants.md byte
 * offsets (not through hmoe's structs) and lists the changed elements as literals. Also
 * checks the structs' field offsets and sizes against the same tables. */
#include <stddef.h>
#include <stdint.h>

#include "harness.h"
#include "hmoe/common.h"
#include "hmoe/fp16.h"
#include "hmoe/quant_blocks.h"
#include "hmoe/types.h"

struct change {
    int e;
    float v;
};

/* Dequantize one block of type t and compare with "dflt everywhere except changes[]". */
static void expect_block(const char *name, enum hmoe_type t, const uint8_t *blk, float dflt, const struct change *ch,
                         int nch) {
    const struct hmoe_type_info *ti = &hmoe_type_info[t];
    float y[256], want[256];
    int n = ti->blck;
    if (!ti->dequant_ref || n > 256) {
        t_check(0, name, "no dequant_ref");
        return;
    }
    for (int e = 0; e < n; e++) want[e] = dflt;
    for (int k = 0; k < nch; k++) want[ch[k].e] = ch[k].v;
    ti->dequant_ref(blk, y, n);
    long bad = t_first_mismatch(y, want, n, 0.0, 0.0);
    t_check(bad < 0, name, "element %ld: got %.9g, want %.9g", bad, bad >= 0 ? y[bad] : 0.0f, bad >= 0 ? want[bad] : 0.0f);
}

static void put16(uint8_t *p, uint16_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

#define CASE(name, type, blk, dflt, ...)                                                                   \
    do {                                                                                                   \
        static const struct change ch_[] = {__VA_ARGS__};                                                  \
        expect_block(name, type, blk, dflt, ch_, (int)HMOE_ARRAY_LEN(ch_));                                \
    } while (0)

static void legacy_cases(void) {
    uint8_t b[64];

    /* Q4_0 (§3.1): d = 1.0; nibble 8 everywhere = 0; qs[3] = 0xA5: element 3 = 5-8, element 19 = 10-8 */
    memset(b, 0x88, sizeof b);
    put16(b, 0x3c00);
    b[2 + 3] = 0xA5;
    CASE("Q4_0 hand block: low nibble = element j, high nibble = element j+16", HMOE_TYPE_Q4_0, b, 0.0f, {3, -3.0f},
         {19, 2.0f});

    /* Q4_1 (§3.2): d = 0.5, m = -2; qs = 0 -> -2; qs[0] = 0xF1: element 0 = 0.5-2, element 16 = 7.5-2 */
    memset(b, 0, sizeof b);
    put16(b, 0x3800);
    put16(b + 2, 0xc000);
    b[4 + 0] = 0xF1;
    CASE("Q4_1 hand block: q*d + m", HMOE_TYPE_Q4_1, b, -2.0f, {0, -1.5f}, {16, 5.5f});

    /* Q5_0 (§3.3): d = 1; all quants 0 -> -16. qh bit 5 and bit 20 set (u32le 0x00100020);
     * qs[5] = 0x3F: element 5 = (15|16)-16 = 15, element 21 = 3-16; element 20 = (0|16)-16 = 0 */
    memset(b, 0, sizeof b);
    put16(b, 0x3c00);
    b[2] = 0x20;
    b[4] = 0x10;
    b[6 + 5] = 0x3F;
    CASE("Q5_0 hand block: bit e of qh is the 5th bit of element e", HMOE_TYPE_Q5_0, b, -16.0f, {5, 15.0f}, {21, -13.0f},
         {20, 0.0f});

    /* Q5_1 (§3.4): d = 0.25, m = 1; qh byte 3 = 0x80 (bit 31); qs[15] = 0x70:
     * element 15 = 0*0.25+1, element 31 = (7|16)*0.25+1 = 6.75 */
    memset(b, 0, sizeof b);
    put16(b, 0x3400);
    put16(b + 2, 0x3c00);
    b[4 + 3] = 0x80;
    b[8 + 15] = 0x70;
    CASE("Q5_1 hand block: qh bit 31 with the high nibble of qs[15]", HMOE_TYPE_Q5_1, b, 1.0f, {31, 6.75f});

    /* Q8_0 (§3.5): d = 2; qs[7] = -128 (allowed by the format), qs[30] = 127 */
    memset(b, 0, sizeof b);
    put16(b, 0x4000);
    b[2 + 7] = 0x80;
    b[2 + 30] = 0x7F;
    CASE("Q8_0 hand block: int8 quants incl. -128", HMOE_TYPE_Q8_0, b, 0.0f, {7, -256.0f}, {30, 254.0f});

    /* Q1_0 (§7): d = 0.5; clear bits -> -0.5; qs[5] = 0x81: elements 40 and 47 -> +0.5 */
    memset(b, 0, sizeof b);
    put16(b, 0x3800);
    b[2 + 5] = 0x81;
    CASE("Q1_0 hand block: bit j%8 of byte j/8", HMOE_TYPE_Q1_0, b, -0.5f, {40, 0.5f}, {47, 0.5f});

    /* Q2_0 (§7): d = 2; q = 1 everywhere -> 0; qs[3] = 0xE4 = q 0,1,2,3 for elements 12..15 */
    memset(b, 0x55, sizeof b);
    put16(b, 0x4000);
    b[2 + 3] = 0xE4;
    CASE("Q2_0 hand block: element j in bits 2(j%4) of byte j/4", HMOE_TYPE_Q2_0, b, 0.0f, {12, -2.0f}, {14, 2.0f},
         {15, 4.0f});
}

static void kquant_cases(void) {
    uint8_t b[256];

    /* Q3_K (§4.2): hmask 0..31, qs 32..95, scales 96..107, d 108..109. d = 0.5.
     * All hmask bits set (no -4), qs 0 -> q = 0. Every 6-bit scale = 33 - 32 = 1:
     * low nibbles 1 (bytes 96..103 = 0x11), high pairs 2 (bytes 104..107 = 0xAA).
     * Element 200 (h 1, s 2, l 8): qs[32+8] = 3 << 4 -> low 3; clear hmask[8] bit 6 -> q = -1;
     * sub-block 12 scale := 5 (raw 37: low nibble 5 in the high half of scales[4], high pair
     * 2 in scales[8] bits 6-7, already there) -> 0.5*5*(-1) = -2.5.
     * Element 50 (h 0, s 1, l 18): qs[18] = 2 << 2 -> q = 2; sub-block 3 scale := -32 (raw 0:
     * low nibble of scales[3] = 0, scales[11] bits 0-1 = 0) -> 0.5*(-32)*2 = -32. */
    memset(b, 0, sizeof b);
    memset(b, 0xFF, 32);
    memset(b + 96, 0x11, 8);
    memset(b + 104, 0xAA, 4);
    put16(b + 108, 0x3800);
    b[32 + 32 + 8] = 0x30;
    b[8] = (uint8_t)~(1u << 6);
    b[96 + 4] = 0x51;
    b[32 + 18] = 0x08;
    b[96 + 3] = 0x10;
    b[96 + 11] = 0xA8;
    CASE("Q3_K hand block: inverted hmask bit-plane, 6-bit signed scales", HMOE_TYPE_Q3_K, b, 0.0f, {200, -2.5f},
         {50, -32.0f});

    /* Q4_K (§4.3, §4.4): d = 1, dmin = 0.5 at 0..3, scales 4..15, qs 16..143.
     * Sub-block 5: SC[5] = (S[9] & 15) | (S[1] >> 6) << 4 = 3 | 2<<4 = 35,
     *              MN[5] = (S[9] >> 4) | (S[5] >> 6) << 4 = 1 | 1<<4 = 17 (S[1], S[5] low bits
     *              are SC[1], MN[1] = 0). Element 170 = run p 2, l 10, high nibble (170%64 = 42):
     *              qs[64+10] = 0x70 -> q 7 -> 35*7 - 0.5*17 = 236.5; others of sub-block 5 -> -8.5. */
    memset(b, 0, sizeof b);
    put16(b, 0x3c00);
    put16(b + 2, 0x3800);
    b[4 + 9] = 0x13;
    b[4 + 1] = 0x80;
    b[4 + 5] = 0x40;
    b[16 + 64 + 10] = 0x70;
    {
        struct change ch[33];
        for (int k = 0; k < 32; k++) ch[k] = (struct change){160 + k, -8.5f};
        ch[10].v = 236.5f;
        expect_block("Q4_K hand block: scale/min of sub-block 5 from S[9], S[1], S[5]", HMOE_TYPE_Q4_K, b, 0.0f, ch, 32);
    }
}

static void iquant_cases(void) {
    uint8_t b[256];

    /* IQ3_XXS (§5.4): d = 1 at 0..1, idx 2..65, words 66..97. All zero: grid[0] = 0x04040404
     * (README: first entry) -> magnitude 4, scale 1*(0.5+0)*0.5 = 0.25, no signs -> 1.0.
     * Chunk 2, group 1: idx[18] = 255 -> last entry 0x3e341c04 -> 4, 28, 52, 62 for k = 0..3;
     * idx[19] = 0 -> 4 for k = 4..7; sign index 1 -> ksigns 0x81 (k = 0 and 7 negative);
     * s = 3 -> scale 1.75. Whole chunk 2 gets scale 1.75: 4*1.75 = 7. */
    memset(b, 0, sizeof b);
    put16(b, 0x3c00);
    b[2 + 18] = 255;
    {
        uint32_t w = (1u << 7) | (3u << 28);
        for (int k = 0; k < 4; k++) b[66 + 4 * 2 + k] = (uint8_t)(w >> (8 * k));
        struct change ch[32];
        for (int k = 0; k < 32; k++) ch[k] = (struct change){64 + k, 7.0f};
        ch[8].v = -7.0f;   /* element 72: k 0, negated */
        ch[9].v = 49.0f;   /* 28 * 1.75 */
        ch[10].v = 91.0f;  /* 52 * 1.75 */
        ch[11].v = 108.5f; /* 62 * 1.75 */
        ch[15].v = -7.0f;  /* k 7, the implied parity sign */
        expect_block("IQ3_XXS hand block: two 4-value grid halves, 7-bit signs, (0.5+s)*0.5", HMOE_TYPE_IQ3_XXS, b,
                     1.0f, ch, 32);
    }

    /* IQ1_S (§5.6): d = 1 at 0..1, idx_lo 2..33, qh 34..49. All zero: iq1s_grid[0] = all -1,
     * delta +0.125, scale 1 -> -0.875. Chunk 5: qh = scale 7 (bits 12-14), delta sign (bit 15),
     * group 2 index bits 8-10 = 7 (bits 6-8) with idx_lo[22] = 0xFF -> index 2047 = all +1.
     * Scale 15: groups 0, 1, 3 -> 15*(-1-0.125) = -16.875, group 2 -> 15*(1-0.125) = 13.125. */
    memset(b, 0, sizeof b);
    put16(b, 0x3c00);
    b[2 + 4 * 5 + 2] = 0xFF;
    put16(b + 34 + 2 * 5, (uint16_t)((7u << 12) | 0x8000u | (7u << 6)));
    {
        struct change ch[32];
        for (int k = 0; k < 32; k++) ch[k] = (struct change){160 + k, k >= 16 && k < 24 ? 13.125f : -16.875f};
        expect_block("IQ1_S hand block: 11-bit index, 3-bit scale, delta sign", HMOE_TYPE_IQ1_S, b, -0.875f, ch, 32);
    }

    /* IQ1_M (§5.7): idx_lo 0..31, qh 32..47, scale words 48..55. d = fp16 0x3c00 spread as
     * nibbles 0, 0, 0xC, 0x3 over the top of W0..W3. Default (all zero otherwise): -0.875.
     * Chunk 3 uses W1 with shift 6: s_lo = 2 (bits 6-8), s_hi = 5 (bits 9-11) -> W1 = 0x0A80.
     * Group 3: qh[7] high nibble = 0xF (index bits 7, delta -), idx_lo[15] = 0xFF -> all +1.
     * Groups 0-1: 5*(-0.875) = -4.375; group 2: 11*(-0.875) = -9.625; group 3: 11*0.875 = 9.625. */
    memset(b, 0, sizeof b);
    put16(b + 48, 0x0000);
    put16(b + 50, 0x0A80);
    put16(b + 52, 0xC000);
    put16(b + 54, 0x3000);
    b[32 + 7] = 0xF0;
    b[15] = 0xFF;
    {
        struct change ch[32];
        for (int k = 0; k < 32; k++) ch[k] = (struct change){96 + k, k < 16 ? -4.375f : k < 24 ? -9.625f : 9.625f};
        expect_block("IQ1_M hand block: per-16 scales, per-group delta, d from nibbles", HMOE_TYPE_IQ1_M, b, -0.875f, ch,
                     32);
    }
    /* IQ1_M d nibble order: d_bits 0x4321 = 3.564453125 -> every element d * -0.875 */
    memset(b, 0, sizeof b);
    put16(b + 48, 0x1000);
    put16(b + 50, 0x2000);
    put16(b + 52, 0x3000);
    put16(b + 54, 0x4000);
    CASE("IQ1_M hand block: W0 holds the lowest nibble of d", HMOE_TYPE_IQ1_M, b, -3.118896484375f, {0, -3.118896484375f});

    /* IQ4_NL (§5.8): d = 0.5; code 8 (value 1) everywhere -> 0.5; qs[2] = 0x0F:
     * element 2 = 0.5*113, element 18 = 0.5*(-127) */
    memset(b, 0x88, sizeof b);
    put16(b, 0x3800);
    b[2 + 2] = 0x0F;
    CASE("IQ4_NL hand block: non-linear code book", HMOE_TYPE_IQ4_NL, b, 0.5f, {2, 56.5f}, {18, -63.5f});

    /* IQ4_XS (§5.9): d at 0..1, scales_h 2..3, scales_l 4..7, qs 8..135. d = 1, all ls = 0 ->
     * scale -32; code 8 (value 1) -> -32. Sub-block 5: ls = 42 = 0xA | 2 << 4 (high nibble of
     * scales_l[2], scales_h bits 10-11) -> scale 10; qs[16*5+3] = 0xF0: element 163 = 10*(-127),
     * element 179 = 10*113, the rest of the sub-block 10*1. */
    memset(b, 0x88, sizeof b);
    put16(b, 0x3c00);
    put16(b + 2, 0x0800);
    memset(b + 4, 0, 4);
    b[4 + 2] = 0xA0;
    b[8 + 16 * 5 + 3] = 0xF0;
    {
        struct change ch[32];
        for (int k = 0; k < 32; k++) ch[k] = (struct change){160 + k, 10.0f};
        ch[3].v = -1270.0f;
        ch[19].v = 1130.0f;
        expect_block("IQ4_XS hand block: 6-bit scale split over scales_l / scales_h", HMOE_TYPE_IQ4_XS, b, -32.0f, ch, 32);
    }
}

static void fp4_cases(void) {
    uint8_t b[64];

    /* MXFP4 (§6.1): e = 130 -> scale 2^2; code 0 -> 0; qs[1] = 0x9F: element 1 = -12*4,
     * element 17 = -1*4 */
    memset(b, 0, sizeof b);
    b[0] = 130;
    b[1 + 1] = 0x9F;
    CASE("MXFP4 hand block: doubled E2M1 codes times 2^(e-128)", HMOE_TYPE_MXFP4, b, 0.0f, {1, -48.0f}, {17, -4.0f});
    /* e = 0 -> 2^-128, a binary32 subnormal that must not be flushed */
    memset(b, 0, sizeof b);
    b[1] = 0x01;
    CASE("MXFP4 hand block: e = 0 gives subnormal 2^-128", HMOE_TYPE_MXFP4, b, 0.0f, {0, 0x1p-128f});

    /* NVFP4 (§6.2): scales d[0] = 0x38 (1.0, halved 0.5), d[1] = 0x41 ((1+1/8)*2 -> 1.125),
     * d[2] = 0x00 and d[3] = 0x7F (both 0). qs at 4..35. qs[0] = 0x05: element 0 = 6*0.5;
     * qs[8+2] = 0x7A: element 18 = -2*1.125, element 26 = 12*1.125; qs[16] = 0x77 (scale 0) -> 0. */
    memset(b, 0, sizeof b);
    b[0] = 0x38;
    b[1] = 0x41;
    b[2] = 0x00;
    b[3] = 0x7F;
    b[4 + 0] = 0x05;
    b[4 + 10] = 0x7A;
    b[4 + 16] = 0x77;
    CASE("NVFP4 hand block: per-16 UE4M3 scales, j / j+8 nibbles", HMOE_TYPE_NVFP4, b, 0.0f, {0, 3.0f}, {18, -2.25f},
         {26, 13.5f});
}

/* The byte offsets of quants.md's block tables, through hmoe's structs. */
static void offset_cases(void) {
    bool ok = offsetof(struct hmoe_block_q4_1, qs) == 4 && offsetof(struct hmoe_block_q5_0, qh) == 2 &&
              offsetof(struct hmoe_block_q5_0, qs) == 6 && offsetof(struct hmoe_block_q5_1, qh) == 4 &&
              offsetof(struct hmoe_block_q5_1, qs) == 8 && offsetof(struct hmoe_block_q8_1, qs) == 4 &&
              offsetof(struct hmoe_block_q2_k, qs) == 16 && offsetof(struct hmoe_block_q2_k, d) == 80 &&
              offsetof(struct hmoe_block_q2_k, dmin) == 82 && offsetof(struct hmoe_block_q3_k, qs) == 32 &&
              offsetof(struct hmoe_block_q3_k, scales) == 96 && offsetof(struct hmoe_block_q3_k, d) == 108 &&
              offsetof(struct hmoe_block_q4_k, scales) == 4 && offsetof(struct hmoe_block_q4_k, qs) == 16 &&
              offsetof(struct hmoe_block_q5_k, qh) == 16 && offsetof(struct hmoe_block_q5_k, qs) == 48 &&
              offsetof(struct hmoe_block_q6_k, qh) == 128 && offsetof(struct hmoe_block_q6_k, scales) == 192 &&
              offsetof(struct hmoe_block_q6_k, d) == 208 && offsetof(struct hmoe_block_q8_k, qs) == 4 &&
              offsetof(struct hmoe_block_q8_k, bsums) == 260 && offsetof(struct hmoe_block_iq2_xs, scales) == 66 &&
              offsetof(struct hmoe_block_iq2_s, qh) == 66 && offsetof(struct hmoe_block_iq2_s, scales) == 74 &&
              offsetof(struct hmoe_block_iq3_s, qh) == 66 && offsetof(struct hmoe_block_iq3_s, signs) == 74 &&
              offsetof(struct hmoe_block_iq3_s, scales) == 106 && offsetof(struct hmoe_block_iq1_s, qh) == 34 &&
              offsetof(struct hmoe_block_iq1_m, qh) == 32 && offsetof(struct hmoe_block_iq1_m, scales) == 48 &&
              offsetof(struct hmoe_block_iq4_xs, scales_h) == 2 && offsetof(struct hmoe_block_iq4_xs, scales_l) == 4 &&
              offsetof(struct hmoe_block_iq4_xs, qs) == 8 && offsetof(struct hmoe_block_mxfp4, qs) == 1 &&
              offsetof(struct hmoe_block_nvfp4, qs) == 4 && offsetof(struct hmoe_block_tq1_0, d) == 52 &&
              offsetof(struct hmoe_block_tq2_0, d) == 64;
    t_check(ok, "block struct field offsets match the quants.md tables", "an offset differs");

    /* every block type's struct size equals its type-table size */
    static const struct {
        enum hmoe_type t;
        size_t size;
    } sizes[] = {
        {HMOE_TYPE_Q4_0, sizeof(struct hmoe_block_q4_0)},       {HMOE_TYPE_Q4_1, sizeof(struct hmoe_block_q4_1)},
        {HMOE_TYPE_Q5_0, sizeof(struct hmoe_block_q5_0)},       {HMOE_TYPE_Q5_1, sizeof(struct hmoe_block_q5_1)},
        {HMOE_TYPE_Q8_0, sizeof(struct hmoe_block_q8_0)},       {HMOE_TYPE_Q8_1, sizeof(struct hmoe_block_q8_1)},
        {HMOE_TYPE_Q2_K, sizeof(struct hmoe_block_q2_k)},       {HMOE_TYPE_Q3_K, sizeof(struct hmoe_block_q3_k)},
        {HMOE_TYPE_Q4_K, sizeof(struct hmoe_block_q4_k)},       {HMOE_TYPE_Q5_K, sizeof(struct hmoe_block_q5_k)},
        {HMOE_TYPE_Q6_K, sizeof(struct hmoe_block_q6_k)},       {HMOE_TYPE_Q8_K, sizeof(struct hmoe_block_q8_k)},
        {HMOE_TYPE_IQ2_XXS, sizeof(struct hmoe_block_iq2_xxs)}, {HMOE_TYPE_IQ2_XS, sizeof(struct hmoe_block_iq2_xs)},
        {HMOE_TYPE_IQ2_S, sizeof(struct hmoe_block_iq2_s)},     {HMOE_TYPE_IQ3_XXS, sizeof(struct hmoe_block_iq3_xxs)},
        {HMOE_TYPE_IQ3_S, sizeof(struct hmoe_block_iq3_s)},     {HMOE_TYPE_IQ1_S, sizeof(struct hmoe_block_iq1_s)},
        {HMOE_TYPE_IQ1_M, sizeof(struct hmoe_block_iq1_m)},     {HMOE_TYPE_IQ4_NL, sizeof(struct hmoe_block_iq4_nl)},
        {HMOE_TYPE_IQ4_XS, sizeof(struct hmoe_block_iq4_xs)},   {HMOE_TYPE_MXFP4, sizeof(struct hmoe_block_mxfp4)},
        {HMOE_TYPE_NVFP4, sizeof(struct hmoe_block_nvfp4)},     {HMOE_TYPE_Q1_0, sizeof(struct hmoe_block_q1_0)},
        {HMOE_TYPE_Q2_0, sizeof(struct hmoe_block_q2_0)},       {HMOE_TYPE_TQ1_0, sizeof(struct hmoe_block_tq1_0)},
        {HMOE_TYPE_TQ2_0, sizeof(struct hmoe_block_tq2_0)},
    };
    int bad = -1;
    for (size_t k = 0; k < HMOE_ARRAY_LEN(sizes) && bad < 0; k++)
        if ((size_t)hmoe_type_info[sizes[k].t].type_size != sizes[k].size) bad = (int)sizes[k].t;
    t_check(bad < 0, "block struct sizes equal the type table's bytes per block", "type %d", bad);
}

int main(void) {
    legacy_cases();
    kquant_cases();
    iquant_cases();
    fp4_cases();
    offset_cases();
    return t_summary();
}
