/* test_iq_tables.c — the generated codebooks (src/kernels/iq_tables.c) against the
 * checksums of ../shared/docs/iq-tables/README.md (sum mod 2^64, first, last entry), the
 * ksigns parity property and the derived-table relations stated there. */
#include <stdint.h>

#include "harness.h"
#include "hmoe/common.h"
#include "kernels/iq_tables.h"

struct table_sum {
    const char *name;
    const void *data;
    int elem;         /* 1 = uint8, -1 = int8, 4 = uint32, 8 = uint64 */
    int count;
    uint64_t sum;     /* int8 tables: the signed sum, stored two's complement */
    uint64_t first, last;
};

static uint64_t entry(const struct table_sum *t, int i) {
    switch (t->elem) {
    case 1: return ((const uint8_t *)t->data)[i];
    case -1: return (uint64_t)(int64_t)((const int8_t *)t->data)[i];
    case 4: return ((const uint32_t *)t->data)[i];
    default: return ((const uint64_t *)t->data)[i];
    }
}

int main(void) {
    /* values copied from iq-tables/README.md "Checksums" */
    const struct table_sum sums[] = {
        {"iq2xxs_grid", hmoe_iq2xxs_grid, 8, 256, 0x8b267e217ce24363ULL, 0x0808080808080808ULL, 0x2b2b2b1908081908ULL},
        {"iq2xs_grid", hmoe_iq2xs_grid, 8, 512, 0x2a14e555100396a1ULL, 0x0808080808080808ULL, 0x2b2b2b2b2b2b2b2bULL},
        {"iq2s_grid", hmoe_iq2s_grid, 8, 1024, 0x75fe5f6cc209e3f2ULL, 0x0808080808080808ULL, 0x2b2b2b2b2b2b2b2bULL},
        {"iq3xxs_grid", hmoe_iq3xxs_grid, 4, 256, 0x193a8b433aULL, 0x04040404ULL, 0x3e341c04ULL},
        {"iq3s_grid", hmoe_iq3s_grid, 4, 512, 0xc68949e56ULL, 0x01010101ULL, 0x0f0f0101ULL},
        {"iq1s_grid", hmoe_iq1s_grid, 8, 2048, 0x69564f615572510cULL, 0xffffffffffffffffULL, 0x0101010101010101ULL},
        {"iq1s_grid_gpu", hmoe_iq1s_grid_gpu, 4, 2048, 0x87f793f99cULL, 0x00000000ULL, 0x22222222ULL},
        {"ksigns_iq2xs", hmoe_ksigns_iq2xs, 1, 128, 16320, 0, 255},
        {"ksigns64", hmoe_ksigns64, 8, 128, 0xffffffffffffffc0ULL, 0, 0xffffffffffffffffULL},
        {"kmask_iq2xs", hmoe_kmask_iq2xs, 1, 8, 255, 1, 128},
        {"kvalues_iq4nl", hmoe_kvalues_iq4nl, -1, 16, (uint64_t)-94, (uint64_t)-127, 113},
        {"kvalues_mxfp4", hmoe_kvalues_mxfp4, -1, 16, 0, 0, (uint64_t)-12},
    };
    const int counts[] = {HMOE_IQ2XXS_GRID_COUNT, HMOE_IQ2XS_GRID_COUNT, HMOE_IQ2S_GRID_COUNT, HMOE_IQ3XXS_GRID_COUNT,
                          HMOE_IQ3S_GRID_COUNT, HMOE_IQ1S_GRID_COUNT, HMOE_IQ1S_GRID_GPU_COUNT, HMOE_KSIGNS_IQ2XS_COUNT,
                          HMOE_KSIGNS64_COUNT, HMOE_KMASK_IQ2XS_COUNT, HMOE_KVALUES_IQ4NL_COUNT, HMOE_KVALUES_MXFP4_COUNT};
    for (size_t k = 0; k < HMOE_ARRAY_LEN(sums); k++) {
        const struct table_sum *t = &sums[k];
        uint64_t s = 0;
        for (int i = 0; i < t->count; i++) s += entry(t, i);
        char name[96];
        snprintf(name, sizeof name, "%s: count, sum, first, last as in iq-tables/README.md", t->name);
        t_check(counts[k] == t->count && s == t->sum && entry(t, 0) == t->first && entry(t, t->count - 1) == t->last, name,
                "count %d, sum 0x%llx (want 0x%llx), first 0x%llx, last 0x%llx", counts[k], (unsigned long long)s,
                (unsigned long long)t->sum, (unsigned long long)entry(t, 0), (unsigned long long)entry(t, t->count - 1));
    }

    /* ksigns_iq2xs[i] = i with bit 7 set iff i has an odd number of set bits */
    int bad = -1;
    for (int i = 0; i < 128 && bad < 0; i++) {
        int ones = 0;
        for (int b = 0; b < 7; b++) ones += (i >> b) & 1;
        if (hmoe_ksigns_iq2xs[i] != (uint8_t)(i | ((ones & 1) << 7))) bad = i;
    }
    t_check(bad < 0, "ksigns_iq2xs parity: even number of minus signs in every mask", "entry %d is wrong", bad);

    /* ksigns64 expands each mask bit k to byte 0xff */
    bad = -1;
    for (int i = 0; i < 128 && bad < 0; i++)
        for (int b = 0; b < 8; b++)
            if (((hmoe_ksigns64[i] >> (8 * b)) & 0xFF) != (((hmoe_ksigns_iq2xs[i] >> b) & 1) ? 0xFFu : 0u)) bad = i;
    t_check(bad < 0, "ksigns64 is the byte expansion of ksigns_iq2xs", "entry %d is wrong", bad);

    /* iq1s_grid_gpu packs value+1 of iq1s_grid: k < 4 at bits 8k, k >= 4 at bits 8(k-4)+4 */
    bad = -1;
    for (int i = 0; i < 2048 && bad < 0; i++)
        for (int k = 0; k < 8; k++) {
            int v = (int8_t)((hmoe_iq1s_grid[i] >> (8 * k)) & 0xFF);
            int shift = k < 4 ? 8 * k : 8 * (k - 4) + 4;
            if ((int)((hmoe_iq1s_grid_gpu[i] >> shift) & 0xF) != v + 1) bad = i;
        }
    t_check(bad < 0, "iq1s_grid_gpu is the 4-bit repacking of iq1s_grid", "entry %d is wrong", bad);
    return t_summary();
}
