/* iq_codes_impl.h — private to src/cpu: the I-quant grids (quants.md §5, iq-tables/)
 * re-encoded for byte-permute lookups. Every IQ2 grid holds only the magnitudes
 * {8, 25, 43} and every IQ3 grid only 8 values, so a grid entry shrinks to small
 * per-element codes: 2 bits × 8 elements (IQ2) or 3 bits × 4 elements (IQ3), split into a
 * "lo" byte (first half of the elements) and a "hi" byte (second half). A 256..1024-entry
 * byte table is what vpermi2b (128 bytes per lookup) and the AVX2 scalar loads index.
 */
#ifndef HMOE_CPU_IQ_CODES_IMPL_H
#define HMOE_CPU_IQ_CODES_IMPL_H

#include <stdint.h>

/* One grid as codes: element k of entry i has code ((lo|hi<<8)[i] >> (bits*k)) & mask,
 * and magnitude values[code]. values[] is ascending; unused slots repeat the last value. */
struct hmoe_cpu_iq_codebook {
    _Alignas(64) uint8_t lo[1024];
    _Alignas(64) uint8_t hi[1024];
    _Alignas(64) uint8_t perm_mag[64]; /* vpermb table: byte i = values[code in bits 4-5 (IQ2) / 3-5 (IQ3) of i] */
    uint8_t values[8];
    int count; /* grid entries */
    int bits;  /* bits per element code: 2 (IQ2 grids, 8 elements) or 3 (IQ3 grids, 4 elements) */
};

struct hmoe_cpu_iq_codes {
    struct hmoe_cpu_iq_codebook iq2xxs, iq2xs, iq2s, iq3xxs, iq3s;
    _Alignas(64) uint8_t ksigns[128]; /* ksigns_iq2xs, 64-byte aligned for vector loads */
    uint64_t ksigns_pm1[128];          /* ksigns as 8 bytes of +1 / -1 (vpsignb operands) */
    uint64_t signs_pm1[256];           /* an explicit sign byte as 8 bytes of +1 / -1 */
    _Alignas(64) uint8_t iq4nl_u8[64]; /* byte i = kvalues_iq4nl[i & 15] + 128 (vpermb ignores bits 4-5) */
    int ok;                           /* 0 if a grid did not fit its code width (a bad table) */
};

/* The tables, built on first use (thread-safe). Never NULL; check ->ok once in tests. */
const struct hmoe_cpu_iq_codes *hmoe_cpu_iq_codes(void);

#endif
