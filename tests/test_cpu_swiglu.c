/* test_cpu_swiglu.c — hmoe_cpu_swiglu (cpu.h), the gated MLP's g / (1 + e^-g) · u, on every
 * CPU path this machine has (scalar, AVX2, AVX-512), against the same formula in double
 * within 1e-6 relative (the exponential within 2 ulp, one division and one multiply, plus the
 * binary32 rounding of the inputs' product), for lengths around the 8-lane tails, gates from
 * -120 to 120 (below -88.7, e^-g is inf in binary32, with expf too, and the result ±0 where
 * the exact one is below 1e-30 in magnitude), and a NaN gate, which must stay NaN without
 * touching its neighbours.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "harness.h"
#include "hmoe/cpu.h"
#include "kernel_rng.h"

enum hmoe_cpu_path hmoe_cpu_force_path(enum hmoe_cpu_path want); /* test hook, src/cpu/cpu_impl.h */

static int swiglu_case(int64_t n, float range, int with_nan, char *detail, size_t cap) {
    float *g = malloc(sizeof(float) * (size_t)(n + 1)), *u = malloc(sizeof(float) * (size_t)n),
          *g0 = malloc(sizeof(float) * (size_t)n);
    int ok = g && u && g0;
    if (!ok) snprintf(detail, cap, "out of memory");
    for (int64_t i = 0; ok && i < n; i++) {
        g0[i] = g[i] = range * (2.0f * rng_unit() - 1.0f);
        u[i] = 4.0f * rng_unit() - 2.0f;
    }
    if (ok && with_nan) g0[n / 2] = g[n / 2] = NAN;
    if (ok) g[n] = 12345.0f; /* past the end: must stay */
    if (ok) hmoe_cpu_swiglu(g, u, n);
    for (int64_t i = 0; ok && i < n; i++) {
        const double x = g0[i], want = x / (1.0 + exp(-x)) * (double)u[i];
        const int bad = isnan(want) ? !isnan(g[i]) : !(fabs(g[i] - want) <= 1e-6 * fabs(want) + 1e-30);
        if (bad) {
            snprintf(detail, cap, "n %lld, element %lld: g %.9g u %.9g gave %.9g, want %.9g", (long long)n,
                     (long long)i, x, (double)u[i], (double)g[i], want);
            ok = 0;
        }
    }
    if (ok && g[n] != 12345.0f) snprintf(detail, cap, "n %lld: wrote past the end", (long long)n), ok = 0;
    free(g), free(u), free(g0);
    return ok;
}

int main(void) {
    const enum hmoe_cpu_path paths[] = {HMOE_CPU_SCALAR, HMOE_CPU_AVX2, HMOE_CPU_AVX512};
    static const int64_t lens[] = {1, 7, 8, 9, 31, 768, 1003};
    static const float ranges[] = {4.0f, 30.0f, 120.0f};
    for (size_t p = 0; p < HMOE_ARRAY_LEN(paths); p++) {
        const enum hmoe_cpu_path got = hmoe_cpu_force_path(paths[p]);
        if (got != paths[p]) {
            printf("[%s] swiglu ... skipped: this CPU only supports %s\n", hmoe_cpu_path_name(paths[p]),
                   hmoe_cpu_path_name(got));
            continue;
        }
        for (size_t r = 0; r < HMOE_ARRAY_LEN(ranges); r++)
            for (int nan = 0; nan < 2; nan++)
                for (size_t l = 0; l < HMOE_ARRAY_LEN(lens); l++) {
                    char name[160], detail[256] = "";
                    snprintf(name, sizeof name, "[%s] swiglu of %lld gates in +-%g%s", hmoe_cpu_path_name(paths[p]),
                             (long long)lens[l], (double)ranges[r], nan ? ", one NaN" : "");
                    t_check(swiglu_case(lens[l], ranges[r], nan, detail, sizeof detail), name, "%s", detail);
                }
    }
    return t_summary();
}
