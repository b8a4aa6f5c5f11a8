/* test_fp16.c — hmoe/fp16.h against independent definitions: every fp16 value decoded
 * with ldexp, round-to-nearest-even checked at every tie between fp16 neighbours, random
 * floats against the CPU's own F16C converter (when present), bf16 rounding by nearest
 * neighbour search, and the E8M0 / UE4M3 scale decodings of quants.md §0.2. */
#include <stdbool.h>
#include <stdint.h>

#include "harness.h"
#include "hmoe/fp16.h"

/* IEEE binary16 by its definition. */
static double fp16_by_definition(uint16_t h) {
    int sign = h >> 15, exp = (h >> 10) & 31, man = h & 1023;
    double v = exp == 0 ? ldexp(man, -24) : ldexp(1024 + man, exp - 25);
    return sign ? -v : v;
}

static uint32_t bits(float f) { return hmoe_f32_to_bits(f); }

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
/* The CPU's own converter (vcvtps2ph, round to nearest even) as an independent oracle. */
__attribute__((target("f16c"))) static uint16_t f16c_convert(float f) { return (uint16_t)_cvtss_sh(f, 0); }
static bool have_f16c(void) {
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29));
}
#else
static uint16_t f16c_convert(float f) { return hmoe_f32_to_fp16(f); }
static bool have_f16c(void) { return false; }
#endif

/* xorshift64*: reproducible random bits */
static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;
static uint32_t rnd32(void) {
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (uint32_t)((rng_state * 0x2545F4914F6CDD1DULL) >> 32);
}

int main(void) {
    /* fp16 -> f32: all 65536 inputs */
    long bad = -1;
    for (uint32_t h = 0; h < 65536 && bad < 0; h++) {
        float f = hmoe_fp16_to_f32((uint16_t)h);
        int exp = (h >> 10) & 31;
        if (exp == 31) {
            bool ok = (h & 1023) ? (f != f && (bits(f) & 0x80000000u) == ((h & 0x8000u) << 16) &&
                                    ((bits(f) >> 13) & 1023) == (h & 1023))
                                 : (isinf(f) && (f < 0) == (h >> 15));
            if (!ok) bad = (long)h;
        } else if ((double)f != fp16_by_definition((uint16_t)h) || (signbit(f) != 0) != (h >> 15 != 0)) {
            bad = (long)h;
        }
    }
    t_check(bad < 0, "fp16 -> f32 exact for all 65536 values (subnormals, inf, nan payload)", "h = 0x%04lx", bad);

    /* f32 -> fp16 round trip of every non-NaN fp16 */
    bad = -1;
    for (uint32_t h = 0; h < 65536 && bad < 0; h++) {
        if (((h >> 10) & 31) == 31 && (h & 1023)) continue;
        if (hmoe_f32_to_fp16(hmoe_fp16_to_f32((uint16_t)h)) != h) bad = (long)h;
    }
    t_check(bad < 0, "f32 -> fp16 returns every fp16 value unchanged", "h = 0x%04lx", bad);

    /* ties: the midpoint of two neighbours goes to the even one, a hair off goes to the nearer */
    bad = -1;
    for (uint32_t h = 0; h < 0x7bff && bad < 0; h++) {
        double lo = fp16_by_definition((uint16_t)h), hi = fp16_by_definition((uint16_t)(h + 1));
        float mid = (float)((lo + hi) / 2); /* exact: 12 significant bits */
        uint16_t even = (h & 1) ? (uint16_t)(h + 1) : (uint16_t)h;
        float below = nextafterf(mid, 0.0f), above = nextafterf(mid, INFINITY);
        if (hmoe_f32_to_fp16(mid) != even || hmoe_f32_to_fp16(-mid) != (even | 0x8000) ||
            hmoe_f32_to_fp16(below) != h || hmoe_f32_to_fp16(above) != h + 1)
            bad = (long)h;
    }
    t_check(bad < 0, "f32 -> fp16 rounds ties to even between every pair of neighbours", "between 0x%04lx and +1", bad);

    t_check(hmoe_f32_to_fp16(65519.99f) == 0x7bff && hmoe_f32_to_fp16(65520.0f) == 0x7c00 &&
                hmoe_f32_to_fp16(1e10f) == 0x7c00 && hmoe_f32_to_fp16(-INFINITY) == 0xfc00 &&
                hmoe_f32_to_fp16(0x1p-25f) == 0 && hmoe_f32_to_fp16(nextafterf(0x1p-25f, 1)) == 1 &&
                hmoe_f32_to_fp16(-0x1p-140f) == 0x8000 && hmoe_f32_to_fp16(-0.0f) == 0x8000 &&
                (hmoe_f32_to_fp16(NAN) & 0x7e00) == 0x7e00,
            "f32 -> fp16 edge cases: overflow, tiny, signed zero, nan", "wrong");

    if (have_f16c()) {
        bad = -1;
        uint32_t u = 0;
        for (long i = 0; i < 4000000 && bad < 0; i++) {
            u = rnd32();
            float f = hmoe_f32_from_bits(u);
            if (f != f) continue; /* NaN payload handling is checked above */
            if (hmoe_f32_to_fp16(f) != f16c_convert(f)) bad = i;
        }
        t_check(bad < 0, "f32 -> fp16 equals the CPU's F16C conversion on 4M random floats", "input 0x%08x: 0x%04x vs 0x%04x",
                u, hmoe_f32_to_fp16(hmoe_f32_from_bits(u)), f16c_convert(hmoe_f32_from_bits(u)));
    }

    /* bf16: decoding is the high half; encoding is the nearest bf16, ties to even */
    bad = -1;
    uint32_t u = 0;
    for (long i = 0; i < 2000000 && bad < 0; i++) {
        u = i < 16 ? (0x3f800000u + 0x8000u * (uint32_t)i) : rnd32(); /* starts with exact ties */
        float f = hmoe_f32_from_bits(u);
        if (f != f || isinf(f)) continue;
        uint16_t r = hmoe_f32_to_bf16(f);
        uint16_t t = (uint16_t)(u >> 16); /* truncation, and the next one away from zero */
        /* past the largest finite bf16 the next value up is Inf, which IEEE rounding treats
         * as 2^128 for the purpose of choosing (overflow happens at max + half an ulp) */
        double up = ((t + 1) & 0x7fff) == 0x7f80 ? copysign(ldexp(1.0, 128), f) : hmoe_bf16_to_f32((uint16_t)(t + 1));
        double d0 = fabs((double)f - hmoe_bf16_to_f32(t)), d1 = fabs((double)f - up);
        uint16_t want = d0 < d1 ? t : d1 < d0 ? (uint16_t)(t + 1) : ((t & 1) ? (uint16_t)(t + 1) : t);
        if (r != want) bad = i;
    }
    t_check(bad < 0, "f32 -> bf16 is the nearest bf16, ties to even (2M floats)", "input 0x%08x", u);
    t_check(hmoe_bf16_to_f32(0x3f80) == 1.0f && hmoe_bf16_to_f32(0xc049) == -3.140625f &&
                hmoe_f32_to_bf16(INFINITY) == 0x7f80 && hmoe_f32_to_bf16(hmoe_f32_from_bits(0x7f7fffffu)) == 0x7f80 &&
                hmoe_f32_to_bf16(hmoe_f32_from_bits(0x7f800001u)) == 0x7fc0 &&
                hmoe_f32_to_bf16(hmoe_f32_from_bits(0xff812345u)) == 0xffc1 && hmoe_f32_to_bf16(0x1p-130f) == 0x0008,
            "bf16 edge cases: decode, inf, overflow, signalling nan made quiet, subnormal kept", "wrong");

    /* E8M0: 2^(e-128) for every byte (quants.md §0.2), subnormal bit patterns for 0 and 1 */
    bad = -1;
    for (int e = 0; e < 256 && bad < 0; e++)
        if ((double)hmoe_e8m0_to_f32_half((uint8_t)e) != ldexp(1.0, e - 128)) bad = e;
    t_check(bad < 0 && bits(hmoe_e8m0_to_f32_half(0)) == 0x00200000u && bits(hmoe_e8m0_to_f32_half(1)) == 0x00400000u,
            "E8M0 decodes to 2^(e-128) for all 256 bytes", "e = %ld", bad);

    /* UE4M3 (halved): 0 for 0x00 / 0x7F, M*2^-9 for E = 0, (1+M/8)*2^(E-7) otherwise; bit 7 ignored */
    bad = -1;
    for (int x = 0; x < 256 && bad < 0; x++) {
        int E = (x >> 3) & 15, M = x & 7;
        double want = (x == 0x00 || x == 0x7f) ? 0.0 : E == 0 ? ldexp(M, -9) : ldexp(8 + M, E - 10);
        if ((double)hmoe_ue4m3_to_f32_half((uint8_t)x) != want * 0.5) bad = x;
    }
    t_check(bad < 0, "UE4M3 decodes to half its E4M3 value for all 256 bytes", "x = 0x%02lx", bad);
    return t_summary();
}
