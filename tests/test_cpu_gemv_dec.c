/* test_cpu_gemv_dec.c — the decode gemv (one token) of the K-quants whose AVX-512 and AVX2
 * paths have their own 4-row streaming kernels (Q4_K, Q5_K: prepared activation row, packed
 * 16-bit sums; Q6_K: per-line look-ahead), on every kernel set this CPU has (scalar,
 * avx2-novnni, avx2+vnni, avx512), against the type table's vec_dot_ref (1e-5 rel or 1e-6
 * abs, as test_cpu_kernels.c):
 *   - every block count 1..12, 16, 170 / 204 (the largest rows whose prepared activations fit
 *     the AVX-512 / AVX2 kernel's buffer) and 171 / 205 (their fallback kernels), rows not a
 *     multiple of 4, row ranges starting off the tile grid (r0 = 1, 2, 3);
 *   - extreme blocks: every quant at its maximum, scales and mins 63, activations all +127
 *     or all -128, so the 4-product lane sums sit at the 16-bit packing bound.
 */
#include <stddef.h>
#include <stdint.h>

#include "harness.h"
#include "kernel_rng.h"
#include "hmoe/cpu.h"
#include "hmoe/fp16.h"
#include "hmoe/quant_blocks.h"

#include "kernel_sets.h"

/* Random blocks with finite fp16 scales (d, dmin of Q4_K/Q5_K; d of Q6_K) in 1e-4..1e-1. */
static void fill_blocks(enum hmoe_type t, uint8_t *w, size_t n_blocks) {
    const size_t bs = (size_t)hmoe_type_info[t].type_size;
    for (size_t i = 0; i < n_blocks * bs; i++) w[i] = (uint8_t)rng_u64();
    for (size_t b = 0; b < n_blocks; b++) {
        uint8_t *blk = w + b * bs;
        for (int f = 0; f < 2; f++) {
            float mag = powf(10.0f, -4.0f + 3.0f * rng_unit());
            uint16_t h = hmoe_f32_to_fp16(rng_u64() & 1 ? -mag : mag);
            size_t off = t == HMOE_TYPE_Q6_K ? offsetof(struct hmoe_block_q6_k, d)
                                              : (f ? offsetof(struct hmoe_block_q4_k, dmin)
                                                   : offsetof(struct hmoe_block_q4_k, d));
            memcpy(blk + off, &h, 2);
            if (t == HMOE_TYPE_Q6_K) break;
        }
    }
}

/* Every quant at its maximum and every scale / min at 63 (Q6_K: scales +127 or -128). */
static void fill_extreme(enum hmoe_type t, uint8_t *w, size_t n_blocks, int neg_scales) {
    const size_t bs = (size_t)hmoe_type_info[t].type_size;
    memset(w, 0xff, n_blocks * bs);
    const uint16_t one = hmoe_f32_to_fp16(1.0f), half = hmoe_f32_to_fp16(0.5f);
    for (size_t b = 0; b < n_blocks; b++) {
        uint8_t *blk = w + b * bs;
        if (t == HMOE_TYPE_Q6_K) {
            memcpy(blk + offsetof(struct hmoe_block_q6_k, d), &one, 2);
            memset(blk + offsetof(struct hmoe_block_q6_k, scales), neg_scales ? 0x80 : 0x7f, 16);
        } else {
            memcpy(blk + offsetof(struct hmoe_block_q4_k, d), &one, 2);
            memcpy(blk + offsetof(struct hmoe_block_q4_k, dmin), &half, 2);
        }
    }
}

/* One Q8_K activation row with every quant = q (bsums to match), d = 1/64. */
static void fill_act_const(uint8_t *xq, int64_t nb, int q) {
    for (int64_t i = 0; i < nb; i++) {
        struct hmoe_block_q8_k *a = (struct hmoe_block_q8_k *)xq + i;
        a->d = 1.0f / 64.0f;
        memset(a->qs, (int8_t)q, sizeof a->qs);
        for (int j = 0; j < 16; j++) a->bsums[j] = (int16_t)(16 * q);
    }
}

/* gemv over [r0, r1) against vec_dot_ref; returns 0 and fills detail on the first mismatch. */
static int gemv_matches(enum hmoe_type t, int64_t nb, const uint8_t *w, int64_t r0, int64_t r1, const uint8_t *xq,
                        char *detail, size_t cap) {
    const struct hmoe_type_info *ti = &hmoe_type_info[t];
    const int64_t ncols = nb * 256;
    const size_t rb = hmoe_row_bytes(t, ncols);
    float *y = malloc(sizeof(float) * (size_t)(r1 - r0 + 1));
    y[r1 - r0] = 12345.0f; /* guard: gemv writes exactly r1 - r0 outputs */
    hmoe_cpu_gemv(t, ncols, w, rb, r0, r1, xq, y);
    int ok = y[r1 - r0] == 12345.0f;
    if (!ok) snprintf(detail, cap, "nb %lld rows [%lld, %lld): wrote past its range", (long long)nb, (long long)r0,
                      (long long)r1);
    for (int64_t r = r0; r < r1 && ok; r++) {
        float want = ti->vec_dot_ref(ncols, w + (size_t)r * rb, xq);
        if (!close_enough(y[r - r0], want)) {
            snprintf(detail, cap, "nb %lld rows [%lld, %lld) row %lld: %.9g vs ref %.9g", (long long)nb, (long long)r0,
                     (long long)r1, (long long)r, y[r - r0], want);
            ok = 0;
        }
    }
    free(y);
    return ok;
}

static void check_type(enum hmoe_type t, const char *pn) {
    const char *tn = hmoe_type_info[t].name;
    const int64_t nbs[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 16, 170, 171, 204, 205};
    const int64_t ranges[][2] = {{0, 1}, {0, 4}, {0, 5}, {1, 4}, {2, 9}, {3, 12}, {1, 14}, {0, 37}, {3, 40}};
    const int64_t max_rows = 40;
    char name[160], detail[200] = "";
    int ok = 1;
    for (size_t k = 0; k < HMOE_ARRAY_LEN(nbs) && ok; k++) {
        const int64_t nb = nbs[k], ncols = nb * 256;
        const size_t rb = hmoe_row_bytes(t, ncols);
        uint8_t *w = malloc(rb * (size_t)max_rows), *xq = malloc(hmoe_cpu_act_bytes(t, ncols));
        float *x = malloc(sizeof(float) * (size_t)ncols);
        fill_blocks(t, w, (size_t)(nb * max_rows));
        rng_acts(x, ncols);
        hmoe_type_info[HMOE_TYPE_Q8_K].quantize_ref(x, xq, ncols);
        for (size_t q = 0; q < HMOE_ARRAY_LEN(ranges) && ok; q++)
            ok = gemv_matches(t, nb, w, ranges[q][0], ranges[q][1], xq, detail, sizeof detail);
        free(w), free(xq), free(x);
    }
    snprintf(name, sizeof name, "[%s] %s decode gemv: block counts 1..12/16/170/171/204/205, ranges off the 4-row grid", pn, tn);
    t_check(ok, name, "%s", detail);

    ok = 1;
    for (int neg = 0; neg < 2 && ok; neg++)
        for (int s = 0; s < 2 && ok; s++) {
            const int64_t nb = 9, ncols = nb * 256, rows = 13;
            const size_t rb = hmoe_row_bytes(t, ncols);
            uint8_t *w = malloc(rb * (size_t)rows), *xq = malloc(hmoe_cpu_act_bytes(t, ncols));
            fill_extreme(t, w, (size_t)(nb * rows), neg);
            fill_act_const(xq, nb, s ? -128 : 127);
            ok = gemv_matches(t, nb, w, 1, rows, xq, detail, sizeof detail);
            free(w), free(xq);
        }
    snprintf(name, sizeof name, "[%s] %s decode gemv: maximal quants and scales x activations +127 / -128 exact", pn,
             tn);
    t_check(ok, name, "%s", detail);
}

int main(void) {
    const enum hmoe_type types[] = {HMOE_TYPE_Q4_K, HMOE_TYPE_Q5_K, HMOE_TYPE_Q6_K};
    for (size_t k = 0; k < HMOE_ARRAY_LEN(kernel_sets); k++) {
        if (!select_kernel_set(k, "decode gemv")) continue;
        for (size_t j = 0; j < HMOE_ARRAY_LEN(types); j++) check_type(types[j], kernel_sets[k].name);
    }
    hmoe_cpu_init();
    return t_summary();
}
