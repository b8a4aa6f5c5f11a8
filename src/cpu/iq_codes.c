/* iq_codes.c — builds iq_codes_impl.h's tables from the generated grids (kernels/iq_tables.h,
 * quants.md §5) once, under pthread_once; plain C, runs on any CPU. Each grid's distinct byte
 * values are collected and sorted, so no magnitude is hard-coded; a grid with more values
 * than its code width holds sets ok = 0 (tests/test_iq_codes.c checks every element). */
#include "iq_codes_impl.h"

#include <pthread.h>
#include <string.h>

#include "kernels/iq_tables.h"

static struct hmoe_cpu_iq_codes codes;
static pthread_once_t codes_once = PTHREAD_ONCE_INIT;

/* Element k of entry i of a grid with `elems` bytes per entry (8: uint64, 4: uint32). */
static unsigned grid_byte(const void *grid, int elems, int i, int k) {
    uint64_t e = elems == 8 ? ((const uint64_t *)grid)[i] : ((const uint32_t *)grid)[i];
    return (unsigned)(e >> (8 * k)) & 0xff;
}

/* vgf2p8affineqb computes output bit i as the parity of (byte 7 - i of the matrix) & x, xor
 * bit i of the immediate. With values below 64, 64 + v is 64 ^ v, so 64 + values[c] for
 * c = c0 + 2·c1 is BIAS ^ c0·(v0 ^ v1) ^ c1·(v0 ^ v2): exact for the three codes 0-2 and,
 * when a fourth value is used, only if v3 = v0 ^ v1 ^ v2. */
static int gf_matrix(struct hmoe_cpu_iq_codebook *cb, int nval) {
    const unsigned v0 = cb->values[0], m0 = v0 ^ cb->values[1], m1 = v0 ^ cb->values[2];
    if ((64 ^ v0) != HMOE_IQ2_GF_BIAS || cb->values[nval - 1] >= 64) return 0;
    if (nval == 4 && cb->values[3] != (v0 ^ m0 ^ m1)) return 0;
    uint64_t a = 0;
    for (int i = 0; i < 8; i++) {
        const unsigned row = ((m0 >> i) & 1) << 4 | ((m1 >> i) & 1) << 5; /* reads code bits 4 and 5 */
        a |= (uint64_t)row << (8 * (7 - i));
    }
    cb->gf_mag = a;
    return 1;
}

static int build(struct hmoe_cpu_iq_codebook *cb, const void *grid, int count, int elems) {
    const int bits = elems == 8 ? 2 : 3, nval_max = 1 << bits;
    int seen[256] = {0}, nval = 0;
    for (int i = 0; i < count; i++)
        for (int k = 0; k < elems; k++) seen[grid_byte(grid, elems, i, k)] = 1;
    int code_of[256];
    for (int v = 0; v < 256; v++)
        if (seen[v]) {
            if (nval == nval_max) return 0;
            code_of[v] = nval;
            cb->values[nval++] = (uint8_t)v;
        }
    if (nval == 0) return 0;
    for (int c = nval; c < 8; c++) cb->values[c] = cb->values[nval - 1];
    /* the kernels move an element's code to the top of vpermb's 6 index bits */
    for (int i = 0; i < 64; i++) cb->perm_mag[i] = cb->values[(i >> (6 - bits)) & (nval_max - 1)];
    cb->count = count;
    cb->bits = bits;
    if (bits == 2 && !gf_matrix(cb, nval)) return 0;
    for (int i = 0; i < count; i++) {
        unsigned w = 0;
        for (int k = 0; k < elems; k++) w |= (unsigned)code_of[grid_byte(grid, elems, i, k)] << (bits * k);
        /* IQ2: elements 0-3 in lo, 4-7 in hi (8 bits each); IQ3: 0-1 in lo, 2-3 in hi (6 bits each) */
        const int half = bits * elems / 2;
        cb->lo[i] = (uint8_t)(w & ((1u << half) - 1));
        cb->hi[i] = (uint8_t)(w >> half);
    }
    return 1;
}

static void build_all(void) {
    int ok = 1;
    ok &= build(&codes.iq2xxs, hmoe_iq2xxs_grid, HMOE_IQ2XXS_GRID_COUNT, 8);
    ok &= build(&codes.iq2xs, hmoe_iq2xs_grid, HMOE_IQ2XS_GRID_COUNT, 8);
    ok &= build(&codes.iq2s, hmoe_iq2s_grid, HMOE_IQ2S_GRID_COUNT, 8);
    ok &= build(&codes.iq3xxs, hmoe_iq3xxs_grid, HMOE_IQ3XXS_GRID_COUNT, 4);
    ok &= build(&codes.iq3s, hmoe_iq3s_grid, HMOE_IQ3S_GRID_COUNT, 4);
    memcpy(codes.ksigns, hmoe_ksigns_iq2xs, sizeof codes.ksigns);
    for (int i = 0; i < 256; i++) {
        uint64_t v = 0;
        for (int k = 0; k < 8; k++) v |= (uint64_t)((i >> k) & 1 ? 0xff : 0x01) << (8 * k);
        codes.signs_pm1[i] = v;
    }
    for (int i = 0; i < 128; i++) codes.ksigns_pm1[i] = codes.signs_pm1[hmoe_ksigns_iq2xs[i]];
    for (int i = 0; i < 4096; i++) {
        uint64_t v = 0;
        for (int k = 0; k < 8; k++) {
            const int g = (int8_t)(hmoe_iq1s_grid[i & 2047] >> (8 * k)); /* -1, 0, +1 */
            v |= (uint64_t)(uint8_t)(8 * g + (i >> 11 ? -1 : 1)) << (8 * k);
        }
        codes.iq1_grid8d[i] = v;
    }
    for (int i = 0; i < 64; i++) codes.iq4nl_u8[i] = (uint8_t)(hmoe_kvalues_iq4nl[i & 15] + 128);

    codes.ok = ok;
}

const struct hmoe_cpu_iq_codes *hmoe_cpu_iq_codes(void) {
    pthread_once(&codes_once, build_all);
    return &codes;
}
