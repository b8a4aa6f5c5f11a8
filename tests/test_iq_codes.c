/* test_iq_codes.c — the code tables the SIMD I-quant kernels look up (src/cpu/iq_codes.c,
 * iq_codes_impl.h) against the grids they re-encode (kernels/iq_tables.c, themselves
 * checked against ../shared/docs/iq-tables by test_iq_tables): every element of every grid
 * entry decoded back from its lo/hi codes and values[], the vpermb magnitude table, the
 * ±1 sign tables against ksigns_iq2xs / the explicit sign bits, and the IQ4_NL table.
 */
#include <stdint.h>

#include "cpu/iq_codes_impl.h"
#include "harness.h"
#include "kernels/iq_tables.h"

static unsigned grid_byte(const void *grid, int elems, int i, int k) {
    uint64_t e = elems == 8 ? ((const uint64_t *)grid)[i] : ((const uint32_t *)grid)[i];
    return (unsigned)(e >> (8 * k)) & 0xff;
}

static void check_book(const char *name, const struct hmoe_cpu_iq_codebook *cb, const void *grid, int count,
                       int elems) {
    char what[96];
    int bad = -1, bad_k = 0;
    unsigned got = 0, want = 0;
    const int bits = elems == 8 ? 2 : 3;
    for (int i = 0; i < count && bad < 0; i++) {
        const unsigned w = cb->lo[i] | (unsigned)cb->hi[i] << (bits * elems / 2);
        for (int k = 0; k < elems && bad < 0; k++) {
            got = cb->values[(w >> (bits * k)) & ((1u << bits) - 1)];
            want = grid_byte(grid, elems, i, k);
            if (got != want) bad = i, bad_k = k;
        }
    }
    snprintf(what, sizeof what, "%s: lo/hi codes decode to every grid element", name);
    t_check(bad < 0 && cb->count == count && cb->bits == bits, what, "entry %d element %d: %u, grid has %u", bad, bad_k,
            got, want);
    int pbad = -1;
    for (int i = 0; i < 64; i++)
        if (cb->perm_mag[i] != cb->values[(i >> (6 - bits)) & ((1 << bits) - 1)]) pbad = i;
    snprintf(what, sizeof what, "%s: vpermb magnitude table", name);
    t_check(pbad < 0, what, "byte %d", pbad);
    if (bits != 2) return;
    /* vgf2p8affineqb(x, gf_mag, BIAS) for every byte x whose code (bits 4-5) a grid uses */
    int gbad = -1;
    unsigned gout = 0;
    for (unsigned x = 0; x < 256 && gbad < 0; x++) {
        const unsigned code = (x >> 4) & 3;
        int used = 0;
        for (int i = 0; i < count && !used; i++)
            for (int k = 0; k < elems; k++)
                if (((cb->lo[i] | (unsigned)cb->hi[i] << 8) >> (2 * k) & 3) == code) used = 1;
        if (!used) continue;
        gout = 0;
        for (int i = 0; i < 8; i++) {
            const unsigned row = (unsigned)(cb->gf_mag >> (8 * (7 - i))) & 0xff;
            gout |= ((unsigned)__builtin_parity(row & x) ^ ((HMOE_IQ2_GF_BIAS >> i) & 1)) << i;
        }
        if (gout != 64u + cb->values[code]) gbad = (int)x;
    }
    snprintf(what, sizeof what, "%s: GF(2) affine magnitude map gives 64 + magnitude", name);
    t_check(gbad < 0, what, "byte 0x%02x: %u", gbad, gout);
}

int main(void) {
    const struct hmoe_cpu_iq_codes *C = hmoe_cpu_iq_codes();
    t_check(C->ok, "every grid fits its code width", "a grid has more distinct values than 2^bits");
    check_book("iq2xxs", &C->iq2xxs, hmoe_iq2xxs_grid, HMOE_IQ2XXS_GRID_COUNT, 8);
    check_book("iq2xs", &C->iq2xs, hmoe_iq2xs_grid, HMOE_IQ2XS_GRID_COUNT, 8);
    check_book("iq2s", &C->iq2s, hmoe_iq2s_grid, HMOE_IQ2S_GRID_COUNT, 8);
    check_book("iq3xxs", &C->iq3xxs, hmoe_iq3xxs_grid, HMOE_IQ3XXS_GRID_COUNT, 4);
    check_book("iq3s", &C->iq3s, hmoe_iq3s_grid, HMOE_IQ3S_GRID_COUNT, 4);

    int sbad = -1;
    for (int i = 0; i < 256 && sbad < 0; i++)
        for (int k = 0; k < 8; k++) {
            const int8_t v = (int8_t)(C->signs_pm1[i] >> (8 * k));
            if (v != ((i >> k) & 1 ? -1 : 1)) sbad = i;
        }
    t_check(sbad < 0, "signs_pm1: bit k of the byte -> -1 in byte k, else +1", "sign byte %d", sbad);
    int kbad = -1;
    for (int i = 0; i < 128; i++)
        if (C->ksigns[i] != hmoe_ksigns_iq2xs[i] || C->ksigns_pm1[i] != C->signs_pm1[hmoe_ksigns_iq2xs[i]]) kbad = i;
    t_check(kbad < 0, "ksigns copy and ksigns_pm1 follow ksigns_iq2xs", "field %d", kbad);
    int nbad = -1;
    for (int i = 0; i < 64; i++) {
        const int v = hmoe_kvalues_iq4nl[i & 15];
        if (C->iq4nl_u8[i] != (uint8_t)(v + 128)) nbad = i;
    }
    t_check(nbad < 0, "iq4nl vpermb table: kvalues + 128", "byte %d", nbad);
    return t_summary();
}
