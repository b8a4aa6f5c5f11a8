/* iq_codes_impl.h — private to src/cpu: the I-quant grids (quants.md §5, iq-tables/) as small
 * per-element codes for byte-permute lookups — IQ2 grids hold only {8, 25, 43} (2 bits × 8
 * elements), IQ3 grids 8 values (3 bits × 4) — split into a lo and a hi byte per entry, plus
 * the sign and IQ4_NL tables the SIMD kernels use. Built once (iq_codes.c). */
#ifndef HMOE_CPU_IQ_CODES_IMPL_H
#define HMOE_CPU_IQ_CODES_IMPL_H

#include <stdint.h>

/* One grid as codes: element k of entry i has code ((lo|hi<<8)[i] >> (bits*k)) & mask,
 * and magnitude values[code]. values[] is ascending; unused slots repeat the last value. */
struct hmoe_cpu_iq_codebook {
    _Alignas(64) uint8_t lo[1024];
    _Alignas(64) uint8_t hi[1024];
    _Alignas(64) uint8_t perm_mag[64]; /* vpermb table: byte i = values[code in bits 4-5 (IQ2) / 3-5 (IQ3) of i] */
    /* IQ2 only: the vgf2p8affineqb matrix that, with the constant HMOE_IQ2_GF_BIAS, maps a
     * byte with an element's code in bits 4-5 to 64 + values[code] (the magnitudes are an
     * affine function of the code bits over GF(2); iq_codes.c checks it) */
    uint64_t gf_mag;
    uint8_t values[8];
    int count; /* grid entries */
    int bits;  /* bits per element code: 2 (IQ2 grids, 8 elements) or 3 (IQ3 grids, 4 elements) */
};

/* 64 + values[0] of every IQ2 codebook (the smallest IQ2 grid magnitude is 8): an immediate
 * of vgf2p8affineqb, so a constant; iq_codes.c sets ok = 0 if a grid disagrees. */
#define HMOE_IQ2_GF_BIAS 72

struct hmoe_cpu_iq_codes {
    struct hmoe_cpu_iq_codebook iq2xxs, iq2xs, iq2s, iq3xxs, iq3s;
    _Alignas(64) uint8_t ksigns[128]; /* ksigns_iq2xs, 64-byte aligned for vector loads */
    uint64_t ksigns_pm1[128];         /* ksigns as 8 bytes of +1 / -1 (vpsignb operands) */
    uint64_t signs_pm1[256];          /* an explicit sign byte as 8 bytes of +1 / -1 */
    /* IQ1_S / IQ1_M: entry (s << 11) | i = the 8 bytes 8·grid_k + (s ? -1 : +1) of iq1s_grid[i],
     * i.e. 8× (grid + delta) with the ±0.125 shift folded in (quants.md §5.6-5.7) */
    uint64_t iq1_grid8d[4096];
    _Alignas(64) uint8_t iq4nl_u8[64]; /* byte i = kvalues_iq4nl[i & 15] + 128 (vpermb ignores bits 4-5) */
    int ok;                            /* 0 if a grid did not fit its code width (a bad table) */
};

/* The tables, built on first use (thread-safe). Never NULL; check ->ok once in tests. */
const struct hmoe_cpu_iq_codes *hmoe_cpu_iq_codes(void);

#endif
