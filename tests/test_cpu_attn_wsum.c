/* test_cpu_attn_wsum.c — hmoe_cpu_attn_wsum (cpu.h), the attention's weighted sum over a
 * transposed V cache, on every CPU path this machine has: o[h][e] = Σ_p prob[h][p]·V(e, p)
 * for f32 / f16 / bf16 V against a double-precision sum of the type table's reference
 * dequantization (types.h), within 1e-5 of Σ|prob·V| (binary32 sums). Shapes cover tails
 * of positions and rows (not multiples of 16), the 512-position block boundary, one head,
 * and a row stride longer than the row; the positions past n_pos hold NaN, which must never
 * reach the result (the kernel reads no position at or past n_pos).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "harness.h"
#include "hmoe/cpu.h"
#include "kernel_rng.h"

enum hmoe_cpu_path hmoe_cpu_force_path(enum hmoe_cpu_path want); /* test hook, src/cpu/cpu_impl.h */

/* One case; returns 1 when every output is within tolerance. */
static int run_case(enum hmoe_type vt, int64_t n_pos, int64_t n_rows, int n_h, char *detail, size_t cap) {
    const struct hmoe_type_info *ti = &hmoe_type_info[vt];
    const int64_t stride_pos = n_pos + 9; /* 9 NaN positions after each row */
    const size_t es = ti->type_size, row_bytes = (size_t)stride_pos * es;
    float *vf = malloc((size_t)(n_rows * stride_pos) * sizeof(float));
    float *vd = malloc((size_t)stride_pos * sizeof(float));
    char *v = malloc((size_t)n_rows * row_bytes);
    const size_t p_stride = (size_t)n_pos + 3, o_stride = (size_t)n_rows + 5;
    float *prob = malloc((size_t)n_h * p_stride * sizeof(float));
    float *o = malloc((size_t)n_h * o_stride * sizeof(float));
    int ok = vf && vd && v && prob && o;
    if (!ok) snprintf(detail, cap, "out of memory");
    for (int64_t e = 0; ok && e < n_rows; e++) {
        float *r = vf + e * stride_pos;
        rng_acts(r, n_pos);
        for (int64_t p = n_pos; p < stride_pos; p++) r[p] = NAN;
        ti->quantize_ref(r, v + (size_t)e * row_bytes, stride_pos); /* f32 copy / f16 / bf16 rounding */
    }
    for (size_t i = 0; ok && i < (size_t)n_h * p_stride; i++) prob[i] = rng_unit();
    for (size_t i = 0; ok && i < (size_t)n_h * o_stride; i++) o[i] = -12345.0f; /* untouched past n_rows */
    if (ok) hmoe_cpu_attn_wsum(vt, n_pos, v, row_bytes, n_rows, prob, p_stride, n_h, o, o_stride);
    for (int64_t e = 0; ok && e < n_rows; e++) {
        ti->dequant_ref(v + (size_t)e * row_bytes, vd, n_pos);
        for (int h = 0; ok && h < n_h; h++) {
            double want = 0.0, mag = 0.0;
            for (int64_t p = 0; p < n_pos; p++) {
                const double t = (double)prob[(size_t)h * p_stride + (size_t)p] * (double)vd[p];
                want += t;
                mag += fabs(t);
            }
            const float got = o[(size_t)h * o_stride + (size_t)e];
            if (!(fabs((double)got - want) <= 1e-6 + 1e-5 * mag)) {
                snprintf(detail, cap, "head %d row %lld: got %.9g, want %.9g (sum of |terms| %.3g)", h, (long long)e,
                         got, want, mag);
                ok = 0;
            }
        }
    }
    for (int h = 0; ok && h < n_h; h++)
        for (size_t e = (size_t)n_rows; e < o_stride; e++)
            if (o[(size_t)h * o_stride + e] != -12345.0f) {
                snprintf(detail, cap, "head %d: wrote past the %lld rows (column %zu)", h, (long long)n_rows, e);
                ok = 0;
                break;
            }
    free(vf);
    free(vd);
    free(v);
    free(prob);
    free(o);
    return ok;
}

int main(void) {
    const enum hmoe_cpu_path paths[] = {HMOE_CPU_SCALAR, HMOE_CPU_AVX2, HMOE_CPU_AVX512};
    const enum hmoe_type types[] = {HMOE_TYPE_F32, HMOE_TYPE_F16, HMOE_TYPE_BF16};
    /* (positions, rows, heads): decode at a few lengths, tails, the block boundary */
    static const int64_t shapes[][3] = {{1, 128, 8}, {15, 17, 3}, {16, 16, 1}, {17, 128, 8}, {80, 128, 8},
                                        {511, 33, 2}, {512, 16, 2}, {513, 31, 4}, {1100, 20, 5}, {7, 3, 6}};
    for (size_t p = 0; p < HMOE_ARRAY_LEN(paths); p++) {
        const enum hmoe_cpu_path got = hmoe_cpu_force_path(paths[p]);
        if (got != paths[p]) {
            printf("[%s] attn_wsum ... skipped: this CPU only supports %s\n", hmoe_cpu_path_name(paths[p]),
                   hmoe_cpu_path_name(got));
            continue;
        }
        for (size_t t = 0; t < HMOE_ARRAY_LEN(types); t++)
            for (size_t s = 0; s < HMOE_ARRAY_LEN(shapes); s++) {
                char name[160], detail[256] = "";
                snprintf(name, sizeof name, "[%s] attn_wsum %s: %lld positions x %lld rows, %lld heads",
                         hmoe_cpu_path_name(paths[p]), hmoe_type_name(types[t]), (long long)shapes[s][0],
                         (long long)shapes[s][1], (long long)shapes[s][2]);
                t_check(run_case(types[t], shapes[s][0], shapes[s][1], (int)shapes[s][2], detail, sizeof detail), name,
                        "%s", detail);
            }
    }
    return t_summary();
}
