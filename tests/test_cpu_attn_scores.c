/* test_cpu_attn_scores.c — hmoe_cpu_attn_scores and hmoe_cpu_softmax_scaled (cpu.h), the
 * attention's scores and softmax, on every CPU path this machine has (scalar, AVX2, AVX-512).
 * Scores: s[h][p] = K row p · query h for f32 / f16 / bf16 / q8_0 K (queries in the K type's
 * activation format, from hmoe_cpu_quantize_act) against a double-precision sum of the type
 * table's reference dequantization of both, within 1e-6 + 1e-5 of Σ|k·q| (binary32 sums);
 * shapes cover head_dim tails (not a multiple of 16 or of 8), odd position counts, head counts that
 * are not a multiple of 8 and more than 8, one head, and a K row stride longer than the row
 * (the bytes between rows hold NaN, which must not reach a score); scores are written only
 * for h < n_h, p < n_pos.
 * Softmax: against expf one at a time with the sum in double (the definition), within 4e-7
 * relative per element (exp within 2 ulp plus the sum's rounding), for lengths around the
 * 16-lane tails, very negative scores (exponentials that underflow to 0) and equal scores, without
 * and with a sink logit (hmoe_cpu_softmax_scaled_sink: in the maximum and the denominator only).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "hmoe/cpu.h"
#include "kernel_rng.h"

enum hmoe_cpu_path hmoe_cpu_force_path(enum hmoe_cpu_path want); /* test hook, src/cpu/cpu_impl.h */

static int scores_case(enum hmoe_type kt, int64_t D, int64_t n_pos, int n_h, char *detail, size_t cap) {
    const struct hmoe_type_info *ti = &hmoe_type_info[kt];
    const enum hmoe_type qt = ti->vec_dot_type;
    const size_t row = hmoe_row_bytes(kt, D), k_stride = row + 64; /* 64 NaN bytes after each row */
    const size_t q_row = hmoe_cpu_act_bytes(kt, D), q_stride = q_row + 32;
    const size_t s_stride = (size_t)n_pos + 7;
    uint8_t *k = malloc((size_t)n_pos * k_stride), *q = malloc((size_t)n_h * q_stride);
    float *kf = malloc((size_t)D * sizeof(float)), *qf = malloc((size_t)n_h * (size_t)D * sizeof(float));
    float *s = malloc((size_t)(n_h + 1) * s_stride * sizeof(float));
    int ok = k && q && kf && qf && s;
    if (!ok) snprintf(detail, cap, "out of memory");
    memset(k, 0xff, ok ? (size_t)n_pos * k_stride : 0); /* 0xffff.. is NaN in f32 / f16 / bf16 */
    for (int64_t p = 0; ok && p < n_pos; p++) {
        rng_acts(kf, D);
        ti->quantize_ref(kf, k + (size_t)p * k_stride, D);
    }
    for (int h = 0; ok && h < n_h; h++) {
        rng_acts(qf + (size_t)h * D, D);
        hmoe_cpu_quantize_act(kt, qf + (size_t)h * D, q + (size_t)h * q_stride, D);
    }
    for (size_t i = 0; ok && i < (size_t)(n_h + 1) * s_stride; i++) s[i] = -12345.0f;
    if (ok) hmoe_cpu_attn_scores(kt, D, k, k_stride, n_pos, q, q_stride, n_h, s, s_stride);
    for (int h = 0; ok && h < n_h; h++) {
        hmoe_type_info[qt].dequant_ref(q + (size_t)h * q_stride, qf, D);
        for (int64_t p = 0; ok && p < n_pos; p++) {
            ti->dequant_ref(k + (size_t)p * k_stride, kf, D);
            double want = 0.0, mag = 0.0;
            for (int64_t d = 0; d < D; d++) {
                want += (double)kf[d] * (double)qf[d];
                mag += fabs((double)kf[d] * (double)qf[d]);
            }
            const float got = s[(size_t)h * s_stride + (size_t)p];
            if (!(fabs((double)got - want) <= 1e-6 + 1e-5 * mag)) {
                snprintf(detail, cap, "head %d position %lld: got %.9g, want %.9g (sum of |terms| %.3g)", h,
                         (long long)p, got, want, mag);
                ok = 0;
            }
        }
        for (size_t p = (size_t)n_pos; ok && p < s_stride; p++)
            if (s[(size_t)h * s_stride + p] != -12345.0f) {
                snprintf(detail, cap, "head %d: wrote past position %lld", h, (long long)n_pos);
                ok = 0;
            }
    }
    for (size_t p = 0; ok && p < s_stride; p++)
        if (s[(size_t)n_h * s_stride + p] != -12345.0f) {
            snprintf(detail, cap, "wrote a row for head %d of %d", n_h, n_h);
            ok = 0;
        }
    free(k);
    free(q);
    free(kf);
    free(qf);
    free(s);
    return ok;
}

/* The definition, one exponential at a time; sink (-inf: none) joins the maximum and the sum. */
static void softmax_ref(float *s, int64_t n, float scale, float sink) {
    float mx = sink;
    for (int64_t i = 0; i < n; i++) mx = fmaxf(mx, s[i] * scale);
    double sum = sink == -INFINITY ? 0.0 : (double)expf(sink - mx);
    for (int64_t i = 0; i < n; i++) {
        s[i] = expf(s[i] * scale - mx);
        sum += s[i];
    }
    for (int64_t i = 0; i < n; i++) s[i] *= (float)(1.0 / sum);
}

static int softmax_case(int64_t n, int kind, float sink, char *detail, size_t cap) {
    float *a = malloc((size_t)(n + 16) * sizeof(float)), *b = malloc((size_t)n * sizeof(float));
    if (!a || !b) {
        snprintf(detail, cap, "out of memory");
        free(a);
        free(b);
        return 0;
    }
    for (int64_t i = 0; i < n; i++)
        a[i] = kind == 0 ? 12.0f * rng_normal() : kind == 1 ? (i % 5 ? -1000.0f : 3.0f) : 0.25f;
    for (int i = 0; i < 16; i++) a[n + i] = 777.0f; /* past the end: untouched */
    memcpy(b, a, (size_t)n * sizeof(float));
    const float scale = 0.088388347648f; /* 1/sqrt(128) */
    if (sink == -INFINITY) hmoe_cpu_softmax_scaled(a, n, scale);
    else hmoe_cpu_softmax_scaled_sink(a, n, scale, sink);
    softmax_ref(b, n, scale, sink);
    int ok = 1;
    for (int64_t i = 0; ok && i < n; i++)
        if (!(fabsf(a[i] - b[i]) <= 4e-7f * b[i] + 1e-30f)) {
            snprintf(detail, cap, "element %lld: got %.9g, want %.9g", (long long)i, a[i], b[i]);
            ok = 0;
        }
    for (int i = 0; ok && i < 16; i++)
        if (a[n + i] != 777.0f) {
            snprintf(detail, cap, "wrote past the %lld scores", (long long)n);
            ok = 0;
        }
    free(a);
    free(b);
    return ok;
}

int main(void) {
    const enum hmoe_cpu_path paths[] = {HMOE_CPU_SCALAR, HMOE_CPU_AVX2, HMOE_CPU_AVX512};
    const enum hmoe_type types[] = {HMOE_TYPE_F32, HMOE_TYPE_F16, HMOE_TYPE_BF16, HMOE_TYPE_Q8_0};
    /* (head_dim, positions, heads) */
    static const int64_t shapes[][3] = {{128, 1, 8}, {128, 27, 8}, {128, 64, 1}, {128, 33, 16}, {64, 17, 3},
                                        {256, 40, 9}, {96, 5, 4}, {80, 300, 8}, {512, 9, 2}, {576, 7, 3},
                                        {100, 13, 5}, {36, 8, 8}, {7, 3, 2}};
    for (size_t p = 0; p < HMOE_ARRAY_LEN(paths); p++) {
        const enum hmoe_cpu_path got = hmoe_cpu_force_path(paths[p]);
        if (got != paths[p]) {
            printf("[%s] attn_scores ... skipped: this CPU only supports %s\n", hmoe_cpu_path_name(paths[p]),
                   hmoe_cpu_path_name(got));
            continue;
        }
        for (size_t t = 0; t < HMOE_ARRAY_LEN(types); t++)
            for (size_t s = 0; s < HMOE_ARRAY_LEN(shapes); s++) {
                if (types[t] == HMOE_TYPE_Q8_0 && shapes[s][0] % 32) continue; /* q8_0 rows are whole blocks */
                char name[160], detail[256] = "";
                snprintf(name, sizeof name, "[%s] attn_scores %s: head_dim %lld, %lld positions, %lld heads",
                         hmoe_cpu_path_name(paths[p]), hmoe_type_name(types[t]), (long long)shapes[s][0],
                         (long long)shapes[s][1], (long long)shapes[s][2]);
                t_check(scores_case(types[t], shapes[s][0], shapes[s][1], (int)shapes[s][2], detail, sizeof detail),
                        name, "%s", detail);
            }
        static const int64_t lens[] = {1, 15, 16, 17, 100, 4000};
        static const char *const kinds[] = {"random", "underflowing", "equal"};
        /* sinks: none, below every score, near them, above them all (gpt-oss's learned logits) */
        static const float sinks[] = {-INFINITY, -30.0f, 0.5f, 40.0f};
        for (size_t k = 0; k < HMOE_ARRAY_LEN(sinks); k++)
            for (int kind = 0; kind < 3; kind++)
                for (size_t l = 0; l < HMOE_ARRAY_LEN(lens); l++) {
                    char name[160], detail[256] = "";
                    char sk[32] = "";
                    if (sinks[k] != -INFINITY) snprintf(sk, sizeof sk, ", sink %g", (double)sinks[k]);
                    snprintf(name, sizeof name, "[%s] softmax of %lld %s scores%s", hmoe_cpu_path_name(paths[p]),
                             (long long)lens[l], kinds[kind], sk);
                    t_check(softmax_case(lens[l], kind, sinks[k], detail, sizeof detail), name, "%s", detail);
                }
    }
    return t_summary();
}
