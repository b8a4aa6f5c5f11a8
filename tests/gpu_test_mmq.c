/* gpu_test_mmq.c — the prefill GEMM additions of src/kernels/cuda_mmq.cu against float64 CPU
 * references built from the type table's dequant_ref (quants.md) and the q8_1 reference
 * quantizer of tests/gpu_util.h:
 *  - int8 GEMM with weights staged in shared memory (version 3) on rows whose bytes start at
 *    every address modulo 16 (Q6_K / IQ3_XXS / IQ2_XXS / Q3_K rows of 768 columns), dense and
 *    through an expert plan (32- and 64-row tiles);
 *  - the fused gate/up GEMM writing q8_1 rows (y_q8_1): each value within half a quantization
 *    step of silu(g)*u, the scale equal to max|z|/127 and the sum field consistent;
 *  - the FP32 router GEMM through cuBLAS (no TF32: errors at the FP32 level);
 *  - argument checks.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "hmoe/cuda.h"
#include "hmoe/types.h"
#include "gpu_util.h"

static double silu(double g) { return g / (1.0 + exp(-g)); }

/* Dense int8 GEMM: y = W · x for rows of `ncols` whose starts fall on many addresses mod 16. */
static void test_dense(enum hmoe_type t, int64_t ntok, int64_t nrows, int64_t ncols) {
    char name[200], why[200] = "";
    snprintf(name, sizeof name, "int8 staged GEMM %s %lld x %lld, %lld tokens (row bytes %zu)", hmoe_type_name(t), (long long)nrows,
             (long long)ncols, (long long)ntok, hmoe_row_bytes(t, ncols));
    struct gpu_experts w;
    gpu_experts_make(&w, t, 1, nrows, ncols);
    const size_t qs = hmoe_cuda_q8_1_row_bytes(ncols);
    float *x = malloc((size_t)(ntok * ncols) * 4), *y = malloc((size_t)(ntok * nrows) * 4);
    uint8_t *xq = malloc(qs * (size_t)ntok);
    for (int64_t i = 0; i < ntok * ncols; i++) x[i] = rng_normal();
    float *d_x = dup_dev(x, (size_t)(ntok * ncols) * 4), *d_y = dalloc((size_t)(ntok * nrows) * 4);
    void *d_xq = dalloc(qs * (size_t)ntok);
    struct hmoe_err err = {0};
    struct hmoe_cuda_gemm_args a = {.w = w.dev, .xq = d_xq, .xq_stride_bytes = qs, .ntok = ntok, .y_f32 = d_y, .y_stride = nrows};
    if (!launched(hmoe_cuda_quantize_q8_1(d_x, ncols, ntok, ncols, d_xq, g_stream, &err), &err, name) ||
        !launched(hmoe_cuda_gemm(&a, g_stream, &err), &err, name) || !from_dev(xq, d_xq, qs * (size_t)ntok, name) ||
        !from_dev(y, d_y, (size_t)(ntok * nrows) * 4, name))
        goto out;
    int ok = 1;
    for (int64_t tk = 0; tk < ntok && ok; tk++)
        for (int64_t r = 0; r < nrows && ok; r++) {
            double s, m;
            ref_dot_q8_1(gpu_experts_row(&w, 0, r), xq + tk * qs, ncols, &s, &m);
            if (!(fabs(y[tk * nrows + r] - s) <= 1e-5 * m + 1e-30)) {
                snprintf(why, sizeof why, "token %lld row %lld: %.9g, want %.9g", (long long)tk, (long long)r, y[tk * nrows + r], s);
                ok = 0;
            }
        }
    t_check(ok, name, "%s", why);
out:
    gpu_experts_free(&w);
    free(x), free(y), free(xq);
    gpu_free_all();
}

/* Plan path: gate/up with q8_1 output, then down over those rows, against float64. */
static void test_moe_q8out(enum hmoe_type tgu, enum hmoe_type tdn, int ntok, int E, int k, int64_t d, int64_t F) {
    char name[220], why[256] = "";
    const int64_t nrows = (int64_t)ntok * k;
    struct gpu_experts gate, up, down;
    gpu_experts_make(&gate, tgu, E, F, d);
    gpu_experts_make(&up, tgu, E, F, d);
    gpu_experts_make(&down, tdn, E, d, F);
    const size_t xs = hmoe_cuda_q8_1_row_bytes(d), zs = hmoe_cuda_q8_1_row_bytes(F) + 16; /* a wider stride than needed */
    float *lg = malloc((size_t)ntok * E * 4), *x = malloc((size_t)(ntok * d) * 4), *ye = malloc((size_t)(nrows * d) * 4);
    uint8_t *xq = malloc(xs * (size_t)ntok), *zq = malloc(zs * (size_t)nrows);
    int32_t *ids = malloc((size_t)nrows * 4);
    const size_t pb = hmoe_cuda_moe_plan_bytes(ntok, k, E);
    int32_t *plan = malloc(pb);
    double *zref = malloc((size_t)F * sizeof(double)), *ztol = malloc((size_t)F * sizeof(double));
    for (int64_t i = 0; i < (int64_t)ntok * E; i++) lg[i] = rng_normal();
    for (int64_t i = 0; i < ntok * d; i++) x[i] = 0.05f * rng_normal();
    float *d_lg = dup_dev(lg, (size_t)ntok * E * 4), *d_w = dalloc((size_t)nrows * 4), *d_x = dup_dev(x, (size_t)(ntok * d) * 4);
    float *d_ye = dalloc((size_t)(nrows * d) * 4);
    int32_t *d_ids = dalloc((size_t)nrows * 4);
    void *d_plan = dalloc(pb), *d_xq = dalloc(xs * (size_t)ntok), *d_zq = dalloc(zs * (size_t)nrows);
    struct hmoe_err err = {0};
    snprintf(name, sizeof name, "int8 gate/up %s -> q8_1 rows, %d tokens x %d of %d experts, %lld -> %lld", hmoe_type_name(tgu), ntok, k,
             E, (long long)d, (long long)F);
    struct hmoe_cuda_gemm_args ga = {.w = gate.dev, .w_up = up.dev.w, .xq = d_xq, .xq_stride_bytes = xs, .ntok = ntok, .plan = d_plan,
                                     .k = k, .x_gather = true, .y_q8_1 = d_zq, .y_q8_1_stride_bytes = zs};
    if (!launched(hmoe_cuda_moe_topk(d_lg, NULL, HMOE_CUDA_GATING_SOFTMAX, ntok, E, k, d_ids, d_w, g_stream, &err), &err, name) ||
        !launched(hmoe_cuda_moe_plan_build(d_ids, ntok, k, E, d_plan, g_stream, &err), &err, name) ||
        !launched(hmoe_cuda_quantize_q8_1(d_x, d, ntok, d, d_xq, g_stream, &err), &err, name) ||
        !launched(hmoe_cuda_gemm(&ga, g_stream, &err), &err, name) || !from_dev(ids, d_ids, (size_t)nrows * 4, name) ||
        !from_dev(plan, d_plan, pb, name) || !from_dev(xq, d_xq, xs * (size_t)ntok, name) ||
        !from_dev(zq, d_zq, zs * (size_t)nrows, name))
        goto out;
    const int32_t *rows = plan + 4 + E + 1;
    int ok = 1;
    for (int64_t r = 0; r < nrows && ok; r++) {
        const int slot = rows[r], e = ids[slot];
        const uint8_t *zr = zq + (size_t)r * zs;
        for (int64_t f = 0; f < F; f++) {
            double g, gm, u, um;
            ref_dot_q8_1(gpu_experts_row(&gate, e, f), xq + (size_t)(slot / k) * xs, d, &g, &gm);
            ref_dot_q8_1(gpu_experts_row(&up, e, f), xq + (size_t)(slot / k) * xs, d, &u, &um);
            zref[f] = silu(g) * u;
            /* error bound of the f32 product before quantizing (as gpu_test_moe's int8 gate/up) */
            ztol[f] = 1.2 * fabs(u) * 1e-5 * gm + fabs(silu(g)) * 1e-5 * um + 1e-6 * fabs(zref[f]) + 1e-30;
        }
        for (int64_t b = 0; b < F / 32 && ok; b++) {
            double amax = 0, tmax = 0;
            for (int i = 0; i < 32; i++) amax = fmax(amax, fabs(zref[32 * b + i])), tmax = fmax(tmax, ztol[32 * b + i]);
            float ds[2];
            memcpy(ds, zr + F + 8 * b, 8);
            const double dref = amax / 127.0;
            int sum = 0;
            for (int i = 0; i < 32; i++) sum += (int8_t)zr[32 * b + i];
            if (!(fabs(ds[0] - dref) <= 1e-4 * dref + tmax / 127.0 + 1e-30) || !(fabs(ds[1] - ds[0] * (double)sum) <= 1e-6 * fabs(ds[0]) * 32 * 127)) {
                snprintf(why, sizeof why, "plan row %lld block %lld: d %.9g s %.9g, want d %.9g s %.9g", (long long)r, (long long)b, ds[0],
                         ds[1], dref, ds[0] * (double)sum);
                ok = 0;
                break;
            }
            for (int i = 0; i < 32 && ok; i++) {
                const double v = (double)(int8_t)zr[32 * b + i] * ds[0], ref = zref[32 * b + i];
                if (!(fabs(v - ref) <= 0.5 * ds[0] * 1.001 + ztol[32 * b + i] + 1e-4 * dref + 1e-30)) {
                    snprintf(why, sizeof why, "plan row %lld (expert %d) col %lld: %d x %.6g = %.9g, want %.9g", (long long)r, e,
                             (long long)(32 * b + i), (int8_t)zr[32 * b + i], ds[0], v, ref);
                    ok = 0;
                }
            }
        }
    }
    t_check(ok, name, "%s", why);
    snprintf(name, sizeof name, "int8 down %s over those q8_1 rows (%lld -> %lld)", hmoe_type_name(tdn), (long long)F, (long long)d);
    struct hmoe_cuda_gemm_args da = {.w = down.dev, .xq = d_zq, .xq_stride_bytes = zs, .ntok = ntok, .plan = d_plan, .k = k,
                                     .x_gather = false, .y_f32 = d_ye, .y_stride = d};
    if (!launched(hmoe_cuda_gemm(&da, g_stream, &err), &err, name) || !from_dev(ye, d_ye, (size_t)(nrows * d) * 4, name)) goto out;
    ok = check_plan_down(&down, ids, rows, nrows, d, F, zq, zs, ye, why, sizeof why);
    t_check(ok, name, "%s", why);
out:
    gpu_experts_free(&gate), gpu_experts_free(&up), gpu_experts_free(&down);
    free(lg), free(x), free(ye), free(xq), free(zq), free(ids), free(plan), free(zref), free(ztol);
    gpu_free_all();
}

/* Router logits of many tokens: FP32 GEMM through cuBLAS vs float64. */
static void test_router_gemm(int64_t E, int64_t d, int64_t ntok) {
    char name[160], why[200] = "";
    snprintf(name, sizeof name, "router FP32 GEMM (cuBLAS) %lld experts x %lld, %lld tokens", (long long)E, (long long)d, (long long)ntok);
    const int64_t ys = E + 3;
    float *w = malloc((size_t)(E * d) * 4), *x = malloc((size_t)(ntok * d) * 4), *y = malloc((size_t)(ntok * ys) * 4);
    for (int64_t i = 0; i < E * d; i++) w[i] = 0.02f * rng_normal();
    for (int64_t i = 0; i < ntok * d; i++) x[i] = rng_normal();
    float *d_w = dup_dev(w, (size_t)(E * d) * 4), *d_x = dup_dev(x, (size_t)(ntok * d) * 4), *d_y = dalloc((size_t)(ntok * ys) * 4);
    struct hmoe_err err = {0};
    if (!launched(hmoe_cuda_gemm_f32_cublas(g_ctx, d_w, E, d, d_x, ntok, d_y, ys, &err), &err, name) ||
        !from_dev(y, d_y, (size_t)(ntok * ys) * 4, name))
        goto out;
    int ok = 1;
    for (int64_t t = 0; t < ntok && ok; t++)
        for (int64_t e = 0; e < E && ok; e++) {
            double s = 0, m = 0;
            for (int64_t c = 0; c < d; c++) s += (double)w[e * d + c] * x[t * d + c], m += fabs((double)w[e * d + c] * x[t * d + c]);
            /* FP32 accumulation: a few ulps of the magnitude; TF32 (10-bit mantissa) would miss by ~1e-3 */
            if (!(fabs(y[t * ys + e] - s) <= 2e-6 * m + 1e-30)) {
                snprintf(why, sizeof why, "token %lld expert %lld: %.9g, want %.9g (|sum| %.3g)", (long long)t, (long long)e, y[t * ys + e], s, m);
                ok = 0;
            }
        }
    t_check(ok, name, "%s", why);
out:
    free(w), free(x), free(y);
    gpu_free_all();
}

static void test_bad_args(void) {
    struct hmoe_err err = {0};
    void *d = dalloc(1 << 16);
    struct hmoe_cuda_experts g = {.type = HMOE_TYPE_Q4_K, .w = d, .row_bytes = 144, .expert_stride_bytes = 144 * 32, .nrows = 32,
                                  .ncols = 256, .n_expert = 1};
    struct hmoe_cuda_gemm_args a = {.w = g, .x = d, .x_stride = 256, .ntok = 1, .y_q8_1 = d, .y_q8_1_stride_bytes = 512};
    enum hmoe_status st = hmoe_cuda_gemm(&a, g_stream, &err);
    t_check(st == HMOE_ERR_ARG, "gemm refuses q8_1 output on the f16 path", "status %d: %s", st, err.msg);
    a = (struct hmoe_cuda_gemm_args){.w = g, .xq = d, .xq_stride_bytes = 512, .ntok = 1, .y_q8_1 = d, .y_q8_1_stride_bytes = 32};
    st = hmoe_cuda_gemm(&a, g_stream, &err);
    t_check(st == HMOE_ERR_ARG, "gemm refuses a q8_1 output stride below the row size", "status %d: %s", st, err.msg);
    a.y_q8_1_stride_bytes = 512, a.y_f32 = d, a.y_stride = 32;
    st = hmoe_cuda_gemm(&a, g_stream, &err);
    t_check(st == HMOE_ERR_ARG, "gemm refuses q8_1 and f32 outputs together", "status %d: %s", st, err.msg);
    a.y_f32 = NULL;
    a.w.nrows = 16, a.w.expert_stride_bytes = 144 * 16;
    st = hmoe_cuda_gemm(&a, g_stream, &err);
    t_check(st == HMOE_ERR_ARG, "gemm refuses q8_1 output of 16 rows (needs multiples of 32)", "status %d: %s", st, err.msg);
    st = hmoe_cuda_gemm_f32_cublas(g_ctx, d, 8, 64, d, 4, d, 4, &err);
    t_check(st == HMOE_ERR_ARG, "router GEMM refuses y_stride < rows", "status %d: %s", st, err.msg);
    gpu_free_all();
}

int main(void) {
    if (!gpu_open_or_skip("gpu_test_mmq")) return t_summary();
    rng_seed(1234);
    /* row bytes 630 / 294 / 198 / 330 / 432: starts on many addresses mod 16 */
    test_dense(HMOE_TYPE_Q6_K, 40, 96, 768);
    test_dense(HMOE_TYPE_Q6_K, 100, 64, 768);
    test_dense(HMOE_TYPE_IQ3_XXS, 40, 64, 768);
    test_dense(HMOE_TYPE_IQ2_XXS, 70, 64, 768);
    test_dense(HMOE_TYPE_Q3_K, 33, 32, 768);
    test_dense(HMOE_TYPE_Q4_K, 17, 160, 768);
    test_dense(HMOE_TYPE_Q8_0, 20, 64, 1280);
    test_dense(HMOE_TYPE_IQ4_XS, 20, 64, 768);
    test_moe_q8out(HMOE_TYPE_Q4_K, HMOE_TYPE_Q6_K, 96, 16, 4, 512, 256);    /* 24 rows per expert: 32-row tiles */
    test_moe_q8out(HMOE_TYPE_IQ2_XXS, HMOE_TYPE_IQ3_XXS, 64, 16, 4, 512, 256);
    test_moe_q8out(HMOE_TYPE_Q4_K, HMOE_TYPE_Q6_K, 400, 8, 2, 256, 768);   /* 100 rows per expert: 64-row tiles */
    test_router_gemm(128, 2048, 100);
    test_router_gemm(16, 256, 7);
    test_bad_args();
    gpu_close();
    return t_summary();
}
