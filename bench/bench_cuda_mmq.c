/* bench_cuda_mmq.c — prefill GEMM throughput on the GPU (cuda_mmq.cu + the MoE plan of
 * cuda_moe.cu), llm.c style: check first, then time, against a roofline measured in the run.
 *
 * Build: make bench (a CUDA build).  Run: ./build/bench/bench_cuda_mmq
 *  1. roofline: cuBLAS f16 GEMM 8192^3 (cublasGemmEx, f32 accumulate), TFLOP/s
 *  2. check: tensor-core GEMM and cuBLAS path against float64 on a small Q4_K matrix
 *  3. dense attn_q of Qwen3-30B-A3B (4096 x 2048 Q4_K) at 512 and 4096 tokens: our int8 and
 *     f16 mma.sync kernels vs dequantize-to-f16 + cuBLAS ("measure and pick")
 *  4. the MoE FFN of one layer at 512 and 4096 tokens (128 experts, top 8, 768 x 2048): top-k,
 *     plan, fused gate/up GEMM (gathered tokens), down GEMM (int8: + quantizing z), combine;
 *     Q4_K/Q6_K and the IQ2_XXS mix (IQ2_XXS gate/up, IQ3_XXS down), int8 and f16 paths.
 *     TFLOP/s counts 2*m*n*k of the useful rows. int8q: the engine's int8 pipeline (gate/up
 *     writes q8_1 rows, no quantize kernel).
 *  5. the attention products of one layer at 512 tokens (q|k Q4_K 4608 x 2048, v Q6_K 512 x 2048,
 *     o Q4_K 2048 x 4096): dequantize-to-f16 alone, dequant + cuBLAS, int8 mma
 *  6. the router of 512 tokens (F32 128 x 2048): F32 matvec vs cuBLAS FP32 GEMM
 *  Roofline also: HBM read bandwidth (a 2 GiB device copy), to put the MoE times against the
 *  weight bytes each layer must read.
 * Weights are random bytes (values do not change the time; NaNs are fine for timing).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hmoe/cuda.h"
#include "hmoe/fp16.h"
#include "hmoe/types.h"
#include "../tests/gpu_util.h"

static struct hmoe_cuda_ctx *ctx;
static void *stream;
static double g_bw = 1; /* GB/s, device copy roofline measured in this run */

static void *dmalloc(size_t bytes, struct hmoe_cuda_buf *b) {
    struct hmoe_err e = {0};
    if (hmoe_cuda_buf_alloc(ctx, bytes, b, &e) != HMOE_OK) {
        fprintf(stderr, "%s\n", e.msg);
        exit(1);
    }
    return b->ptr;
}

static void die_on(enum hmoe_status st, const struct hmoe_err *e, const char *what) {
    if (st != HMOE_OK) {
        fprintf(stderr, "%s: %s\n", what, e->msg);
        exit(1);
    }
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double time_median(void (*fn)(void *, int), void *arg, int reps) {
    double t[64];
    for (int i = 0; i < 2; i++) fn(arg, i);
    for (int i = 0; i < reps; i++) {
        struct hmoe_err e = {0};
        hmoe_cuda_timer_start(ctx, &e);
        fn(arg, i);
        die_on(hmoe_cuda_timer_stop(ctx, &t[i], &e), &e, "timer");
    }
    qsort(t, (size_t)reps, sizeof t[0], cmp_d);
    return t[reps / 2];
}

struct gemm_arg {
    struct hmoe_cuda_gemm_args a;
    uint16_t *scratch; /* non-NULL: cuBLAS path */
};
static void run_gemm(void *p, int i) {
    struct gemm_arg *g = p;
    struct hmoe_err e = {0};
    (void)i;
    die_on(g->scratch ? hmoe_cuda_gemm_cublas(ctx, &g->a, g->scratch, &e) : hmoe_cuda_gemm(&g->a, stream, &e), &e, "gemm");
}

/* Small dense check of both paths (as tests/gpu_test_moe.c). */
static int check_gemm(void) {
    const int64_t T = 70, N = 192, K = 512;
    const enum hmoe_type t = HMOE_TYPE_Q4_K;
    const size_t rb = hmoe_row_bytes(t, K);
    uint8_t *raw = malloc(rb * N);
    float *w = malloc((size_t)(N * K) * 4), *x = malloc((size_t)(T * K) * 4), *y = malloc((size_t)(T * N) * 4);
    uint16_t *x16 = malloc((size_t)(T * K) * 2);
    rng_seed(5);
    rand_blocks(t, raw, N * K);
    for (int64_t r = 0; r < N; r++) hmoe_type_info[t].dequant_ref(raw + r * rb, w + r * K, K);
    for (int64_t i = 0; i < T * K; i++) x16[i] = hmoe_f32_to_fp16(rng_normal()), x[i] = hmoe_fp16_to_f32(x16[i]);
    struct hmoe_cuda_buf bw, bx, by, bs;
    void *dw = dmalloc(rb * N, &bw), *dx = dmalloc((size_t)(T * K) * 2, &bx);
    float *dy = dmalloc((size_t)(T * N) * 4, &by);
    uint16_t *scr = dmalloc((size_t)(N * K) * 2, &bs);
    struct hmoe_err e = {0};
    die_on(hmoe_cuda_upload(ctx, dw, raw, rb * N, &e), &e, "upload");
    die_on(hmoe_cuda_upload(ctx, dx, x16, (size_t)(T * K) * 2, &e), &e, "upload");
    int ok = 1;
    for (int path = 0; path < 2 && ok; path++) {
        struct hmoe_cuda_gemm_args a = {.w = {.type = t, .w = dw, .row_bytes = rb, .nrows = N, .ncols = K, .n_expert = 1},
                                        .x = dx, .x_stride = K, .ntok = T, .y_f32 = dy, .y_stride = N};
        die_on(path ? hmoe_cuda_gemm_cublas(ctx, &a, scr, &e) : hmoe_cuda_gemm(&a, stream, &e), &e, "gemm");
        die_on(hmoe_cuda_sync(ctx, &e), &e, "sync");
        die_on(hmoe_cuda_download(ctx, y, dy, (size_t)(T * N) * 4, &e), &e, "download");
        for (int64_t tk = 0; tk < T && ok; tk++)
            for (int64_t r = 0; r < N && ok; r++) {
                double s = 0, m = 0;
                for (int64_t c = 0; c < K; c++) {
                    double p = (double)hmoe_fp16_to_f32(hmoe_f32_to_fp16(w[r * K + c])) * x[tk * K + c];
                    s += p, m += fabs(p);
                }
                if (!(fabs(y[tk * N + r] - s) <= 1e-5 * m + 1e-30)) {
                    fprintf(stderr, "%s: token %lld row %lld: %.9g, want %.9g\n", path ? "cublas" : "mmq", (long long)tk, (long long)r,
                            y[tk * N + r], s);
                    ok = 0;
                }
            }
    }
    /* int8 path: q8_1 activations quantized on the GPU, reference on those values */
    if (ok) {
        const size_t qs = hmoe_cuda_q8_1_row_bytes(K);
        struct hmoe_cuda_buf bf, bq;
        float *d_xf = dmalloc((size_t)(T * K) * 4, &bf);
        void *d_xq = dmalloc(qs * (size_t)T, &bq);
        uint8_t *xq = malloc(qs * (size_t)T);
        die_on(hmoe_cuda_upload(ctx, d_xf, x, (size_t)(T * K) * 4, &e), &e, "upload");
        die_on(hmoe_cuda_quantize_q8_1(d_xf, K, T, K, d_xq, stream, &e), &e, "quantize");
        struct hmoe_cuda_gemm_args a = {.w = {.type = t, .w = dw, .row_bytes = rb, .nrows = N, .ncols = K, .n_expert = 1},
                                        .xq = d_xq, .xq_stride_bytes = qs, .ntok = T, .y_f32 = dy, .y_stride = N};
        die_on(hmoe_cuda_gemm(&a, stream, &e), &e, "gemm int8");
        die_on(hmoe_cuda_sync(ctx, &e), &e, "sync");
        die_on(hmoe_cuda_download(ctx, y, dy, (size_t)(T * N) * 4, &e), &e, "download");
        die_on(hmoe_cuda_download(ctx, xq, d_xq, qs * (size_t)T, &e), &e, "download");
        for (int64_t tk = 0; tk < T && ok; tk++)
            for (int64_t r = 0; r < N && ok; r++) {
                double s = 0, m = 0;
                for (int64_t c = 0; c < K; c++) {
                    double p = (double)w[r * K + c] * ref_q8_1_value(xq + tk * qs, K, c);
                    s += p, m += fabs(p);
                }
                if (!(fabs(y[tk * N + r] - s) <= 1e-5 * m + 1e-30)) {
                    fprintf(stderr, "int8: token %lld row %lld: %.9g, want %.9g\n", (long long)tk, (long long)r, y[tk * N + r], s);
                    ok = 0;
                }
            }
        hmoe_cuda_buf_free(ctx, &bf), hmoe_cuda_buf_free(ctx, &bq);
        free(xq);
    }
    hmoe_cuda_buf_free(ctx, &bw), hmoe_cuda_buf_free(ctx, &bx), hmoe_cuda_buf_free(ctx, &by), hmoe_cuda_buf_free(ctx, &bs);
    free(raw), free(w), free(x), free(y), free(x16);
    return ok;
}

struct moe_arg {
    struct hmoe_cuda_experts gate, up, down;
    int64_t ntok;
    float *logits, *wts, *ye, *y, *z32;
    int32_t *ids;
    void *plan, *xq, *zq;
    uint16_t *x, *z;
    int int8;
    int step; /* 0 topk+plan, 1 gate/up, 2 down (int8: quantize z + down), 3 combine, 4 all */
};
static void run_moe(void *p, int i) {
    struct moe_arg *m = p;
    struct hmoe_err e = {0};
    (void)i;
    if (m->step == 0 || m->step == 4) {
        die_on(hmoe_cuda_moe_topk(m->logits, NULL, HMOE_CUDA_GATING_SOFTMAX, m->ntok, 128, 8, m->ids, m->wts, stream, &e), &e, "topk");
        die_on(hmoe_cuda_moe_plan_build(m->ids, m->ntok, 8, 128, m->plan, stream, &e), &e, "plan");
    }
    if (m->step == 1 || m->step == 4) {
        struct hmoe_cuda_gemm_args a = {.w = m->gate, .w_up = m->up.w, .ntok = m->ntok, .plan = m->plan, .k = 8, .x_gather = true};
        if (m->int8 == 2)
            a.xq = m->xq, a.xq_stride_bytes = hmoe_cuda_q8_1_row_bytes(2048), a.y_q8_1 = m->zq,
            a.y_q8_1_stride_bytes = hmoe_cuda_q8_1_row_bytes(768);
        else if (m->int8)
            a.xq = m->xq, a.xq_stride_bytes = hmoe_cuda_q8_1_row_bytes(2048), a.y_f32 = m->z32, a.y_stride = 768;
        else
            a.x = m->x, a.x_stride = 2048, a.y_f16 = m->z, a.y_stride = 768;
        die_on(hmoe_cuda_gemm(&a, stream, &e), &e, "gate/up");
    }
    if (m->step == 2 || m->step == 4) {
        struct hmoe_cuda_gemm_args a = {.w = m->down, .ntok = m->ntok, .plan = m->plan, .k = 8, .x_gather = false, .y_f32 = m->ye,
                                        .y_stride = 2048};
        if (m->int8) {
            if (m->int8 == 1) die_on(hmoe_cuda_quantize_q8_1(m->z32, 768, m->ntok * 8, 768, m->zq, stream, &e), &e, "quantize z");
            a.xq = m->zq, a.xq_stride_bytes = hmoe_cuda_q8_1_row_bytes(768);
        } else {
            a.x = m->z, a.x_stride = 768;
        }
        die_on(hmoe_cuda_gemm(&a, stream, &e), &e, "down");
    }
    if (m->step == 3 || m->step == 4)
        die_on(hmoe_cuda_moe_combine(m->plan, m->ye, 2048, m->wts, m->ntok, 8, 128, 2048, m->y, 2048, stream, &e), &e, "combine");
}

static void bench_moe(enum hmoe_type tgu, enum hmoe_type tdn, int64_t T, double roof, int int8) {
    struct hmoe_err e = {0};
    struct moe_arg m = {.ntok = T, .int8 = int8};
    const size_t gb = hmoe_row_bytes(tgu, 2048), db = hmoe_row_bytes(tdn, 768);
    struct hmoe_cuda_buf b[12];
    m.gate = (struct hmoe_cuda_experts){.type = tgu, .w = dmalloc(gb * 768 * 128, &b[0]), .row_bytes = gb,
                                        .expert_stride_bytes = gb * 768, .nrows = 768, .ncols = 2048, .n_expert = 128};
    m.up = m.gate;
    m.up.w = dmalloc(gb * 768 * 128, &b[1]);
    m.down = (struct hmoe_cuda_experts){.type = tdn, .w = dmalloc(db * 2048 * 128, &b[2]), .row_bytes = db,
                                        .expert_stride_bytes = db * 2048, .nrows = 2048, .ncols = 768, .n_expert = 128};
    hmoe_cuda_fill_random((void *)m.gate.w, gb * 768 * 128, 21, stream, &e);
    hmoe_cuda_fill_random((void *)m.up.w, gb * 768 * 128, 22, stream, &e);
    hmoe_cuda_fill_random((void *)m.down.w, db * 2048 * 128, 23, stream, &e);
    m.logits = dmalloc((size_t)T * 128 * 4, &b[3]);
    m.wts = dmalloc((size_t)T * 8 * 4, &b[4]);
    m.ids = dmalloc((size_t)T * 8 * 4, &b[5]);
    m.plan = dmalloc(hmoe_cuda_moe_plan_bytes(T, 8, 128), &b[6]);
    m.x = dmalloc((size_t)T * 2048 * 2, &b[7]);
    m.z = dmalloc((size_t)T * 8 * 768 * 2, &b[8]);
    m.ye = dmalloc((size_t)T * 8 * 2048 * 4, &b[9]);
    m.y = dmalloc((size_t)T * 2048 * 4, &b[10]);
    struct hmoe_cuda_buf bq[3];
    m.xq = dmalloc((size_t)T * hmoe_cuda_q8_1_row_bytes(2048), &bq[0]);
    m.zq = dmalloc((size_t)T * 8 * hmoe_cuda_q8_1_row_bytes(768), &bq[1]);
    m.z32 = dmalloc((size_t)T * 8 * 768 * 4, &bq[2]);
    /* router logits: random normal (uniform-ish routing); activations small random f16 */
    float *lg = malloc((size_t)T * 128 * 4);
    uint16_t *xh = malloc((size_t)T * 2048 * 2);
    rng_seed(77);
    for (int64_t i = 0; i < T * 128; i++) lg[i] = rng_normal();
    for (int64_t i = 0; i < T * 2048; i++) xh[i] = hmoe_f32_to_fp16(rng_normal());
    hmoe_cuda_upload(ctx, m.logits, lg, (size_t)T * 128 * 4, &e);
    hmoe_cuda_upload(ctx, m.x, xh, (size_t)T * 2048 * 2, &e);
    {
        float *xf = malloc((size_t)T * 2048 * 4);
        struct hmoe_cuda_buf bxf;
        float *d_xf = dmalloc((size_t)T * 2048 * 4, &bxf);
        for (int64_t i = 0; i < T * 2048; i++) xf[i] = hmoe_fp16_to_f32(xh[i]);
        hmoe_cuda_upload(ctx, d_xf, xf, (size_t)T * 2048 * 4, &e);
        die_on(hmoe_cuda_quantize_q8_1(d_xf, 2048, T, 2048, m.xq, stream, &e), &e, "quantize x");
        hmoe_cuda_sync(ctx, &e);
        hmoe_cuda_buf_free(ctx, &bxf);
        free(xf);
    }
    hmoe_cuda_memset(ctx, m.y, 0, (size_t)T * 2048 * 4, &e);
    free(lg), free(xh);
    if (int8 == 2) { /* zq must hold valid q8_1 rows before the down step is timed alone (plan first) */
        m.step = 0;
        run_moe(&m, 0);
        m.step = 1;
        run_moe(&m, 0);
    }
    const double rows = (double)T * 8;
    const double f_gu = 2.0 * rows * 768 * 2048 * 2, f_dn = 2.0 * rows * 2048 * 768;
    double ms[5];
    for (int s = 0; s < 5; s++) {
        m.step = s;
        ms[s] = time_median(run_moe, &m, s == 4 ? 5 : 9);
    }
    printf("  %s %s/%s %5lld tokens: topk+plan %7.1f us | gate+up %8.1f us %6.1f TFLOP/s (%4.1f%%) | down %8.1f us %6.1f TFLOP/s "
           "(%4.1f%%) | combine %6.1f us | all %8.1f us = %6.0f tok/s per MoE layer, x48 layers %6.0f tok/s\n",
           int8 == 2 ? "int8q" : int8 ? "int8 " : "f16  ", hmoe_type_name(tgu), hmoe_type_name(tdn), (long long)T, ms[0] * 1e3, ms[1] * 1e3, f_gu / (ms[1] * 1e-3) / 1e12,
           100 * f_gu / (ms[1] * 1e-3) / 1e12 / roof, ms[2] * 1e3, f_dn / (ms[2] * 1e-3) / 1e12,
           100 * f_dn / (ms[2] * 1e-3) / 1e12 / roof, ms[3] * 1e3, ms[4] * 1e3, T / (ms[4] * 1e-3), T / (ms[4] * 1e-3) / 48);
    const double wbytes = 128.0 * (2.0 * (double)gb * 768 + (double)db * 2048);
    printf("      weights read once per layer: %.1f MB -> all %.1f us = %.0f GB/s of weights (%.1f%% of the copy roofline)\n",
           wbytes / 1e6, ms[4] * 1e3, wbytes / (ms[4] * 1e-3) / 1e9, 100 * wbytes / (ms[4] * 1e-3) / 1e9 / g_bw);
    for (int i = 0; i <= 10; i++) hmoe_cuda_buf_free(ctx, &b[i]);
    for (int i = 0; i < 3; i++) hmoe_cuda_buf_free(ctx, &bq[i]);
}

/* 5. attention products of one layer at T tokens, the shapes of Qwen3-30B-A3B */
struct deq_arg {
    enum hmoe_type t;
    const void *w;
    int64_t n;
    uint16_t *dst;
};
static void run_deq(void *p, int i) {
    struct deq_arg *a = p;
    struct hmoe_err e = {0};
    (void)i;
    die_on(hmoe_cuda_dequant_f16(a->t, a->w, a->n, a->dst, stream, &e), &e, "dequant");
}
static void bench_dense_shape(const char *what, enum hmoe_type t, int64_t N, int64_t K, int64_t T) {
    struct hmoe_err err = {0};
    const size_t rb = hmoe_row_bytes(t, K);
    struct hmoe_cuda_buf bw, bx, by, bs, bq;
    struct gemm_arg g = {.a = {.w = {.type = t, .w = dmalloc(rb * N, &bw), .row_bytes = rb, .nrows = N, .ncols = K, .n_expert = 1},
                               .x = dmalloc((size_t)(T * K) * 2, &bx), .x_stride = K, .ntok = T,
                               .y_f32 = dmalloc((size_t)(T * N) * 4, &by), .y_stride = N}};
    hmoe_cuda_fill_random((void *)g.a.w.w, rb * N, 51, stream, &err);
    hmoe_cuda_fill_random((void *)g.a.x, (size_t)(T * K) * 2, 52, stream, &err);
    g.scratch = dmalloc((size_t)(N * K) * 2, &bs);
    struct deq_arg dq = {.t = t, .w = g.a.w.w, .n = N * K, .dst = g.scratch};
    const double ms_d = time_median(run_deq, &dq, 9);
    const double ms_c = time_median(run_gemm, &g, 9);
    struct gemm_arg g8 = g;
    g8.scratch = NULL;
    g8.a.x = NULL;
    g8.a.xq = dmalloc((size_t)T * hmoe_cuda_q8_1_row_bytes(K), &bq);
    g8.a.xq_stride_bytes = hmoe_cuda_q8_1_row_bytes(K);
    hmoe_cuda_fill_random((void *)g8.a.xq, (size_t)T * hmoe_cuda_q8_1_row_bytes(K), 53, stream, &err);
    const double ms_8 = time_median(run_gemm, &g8, 9);
    const double flop = 2.0 * T * N * K;
    printf("  %-6s %s %5lld x %5lld, %lld tokens: dequant f16 %7.1f us | dequant + cuBLAS %7.1f us %6.1f TFLOP/s | int8 mma %7.1f us "
           "%6.1f TFLOP/s -> %s\n",
           what, hmoe_type_name(t), (long long)N, (long long)K, (long long)T, ms_d * 1e3, ms_c * 1e3, flop / (ms_c * 1e-3) / 1e12,
           ms_8 * 1e3, flop / (ms_8 * 1e-3) / 1e12, ms_8 < ms_c ? "int8" : "cuBLAS");
    hmoe_cuda_buf_free(ctx, &bw), hmoe_cuda_buf_free(ctx, &bx), hmoe_cuda_buf_free(ctx, &by), hmoe_cuda_buf_free(ctx, &bs);
    hmoe_cuda_buf_free(ctx, &bq);
}

/* 6. router of T tokens */
struct router_arg {
    const float *w, *x;
    float *y;
    int64_t T;
    int gemm;
};
static void run_router(void *p, int i) {
    struct router_arg *r = p;
    struct hmoe_err e = {0};
    (void)i;
    if (r->gemm) {
        die_on(hmoe_cuda_gemm_f32_cublas(ctx, r->w, 128, 2048, r->x, r->T, r->y, 128, &e), &e, "router gemm");
    } else {
        struct hmoe_cuda_mmv_args m = {.type = HMOE_TYPE_F32, .w = r->w, .row_bytes = 2048 * 4, .nrows = 128, .ncols = 2048,
                                       .x = r->x, .x_stride_bytes = 2048 * 4, .ntok = r->T, .y = r->y, .y_stride = 128};
        die_on(hmoe_cuda_mmv(&m, stream, &e), &e, "router mmv");
    }
}
static void bench_router(int64_t T) {
    struct hmoe_err err = {0};
    struct hmoe_cuda_buf bw, bx, by;
    struct router_arg r = {.w = dmalloc(128 * 2048 * 4, &bw), .x = dmalloc((size_t)T * 2048 * 4, &bx), .y = dmalloc((size_t)T * 128 * 4, &by),
                           .T = T};
    hmoe_cuda_memset(ctx, (void *)r.w, 0, 128 * 2048 * 4, &err);
    hmoe_cuda_memset(ctx, (void *)r.x, 0, (size_t)T * 2048 * 4, &err);
    const double ms_v = time_median(run_router, &r, 9);
    r.gemm = 1;
    const double ms_g = time_median(run_router, &r, 9);
    printf("  router F32 128 x 2048, %lld tokens: matvec %7.1f us | cuBLAS FP32 GEMM %7.1f us (x48 layers: %.0f vs %.0f us per token)\n",
           (long long)T, ms_v * 1e3, ms_g * 1e3, 48 * ms_v * 1e3 / T, 48 * ms_g * 1e3 / T);
    hmoe_cuda_buf_free(ctx, &bw), hmoe_cuda_buf_free(ctx, &bx), hmoe_cuda_buf_free(ctx, &by);
}

int main(void) {
    struct hmoe_err err = {0};
    if (!hmoe_cuda_available() || hmoe_cuda_ctx_init(&ctx, 0, &err) != HMOE_OK) {
        printf("bench_cuda_mmq: no CUDA device (%s)\n", err.msg);
        return 0;
    }
    stream = hmoe_cuda_ctx_stream(ctx);
    struct hmoe_cuda_device_info di;
    hmoe_cuda_device_info(0, &di, &err);
    printf("device: %s, %d SMs\n", di.name, di.n_sm);

    /* 1. roofline: cuBLAS f16 GEMM 8192^3 */
    double roof;
    {
        const int64_t n = 8192;
        struct hmoe_cuda_buf bw, bx, by, bs;
        struct gemm_arg g = {.a = {.w = {.type = HMOE_TYPE_F16, .w = dmalloc((size_t)(n * n) * 2, &bw), .row_bytes = (size_t)n * 2,
                                         .nrows = n, .ncols = n, .n_expert = 1},
                                   .x = dmalloc((size_t)(n * n) * 2, &bx), .x_stride = n, .ntok = n,
                                   .y_f32 = dmalloc((size_t)(n * n) * 4, &by), .y_stride = n},
                             .scratch = dmalloc((size_t)(n * n) * 2, &bs)};
        /* random bit patterns (some Inf/NaN: they do not change the tensor cores' speed; zeros would) */
        hmoe_cuda_fill_random((void *)g.a.w.w, (size_t)(n * n) * 2, 41, stream, &err);
        hmoe_cuda_fill_random((void *)g.a.x, (size_t)(n * n) * 2, 42, stream, &err);
        const double ms = time_median(run_gemm, &g, 5);
        roof = 2.0 * n * n * n / (ms * 1e-3) / 1e12;
        printf("roofline: cuBLAS f16 GEMM 8192^3 (incl. the f16 weight copy): %.3f ms, %.0f TFLOP/s\n", ms, roof);
        hmoe_cuda_buf_free(ctx, &bw), hmoe_cuda_buf_free(ctx, &bx), hmoe_cuda_buf_free(ctx, &by), hmoe_cuda_buf_free(ctx, &bs);
    }

    {
        /* HBM: 1 GiB device copy (read + write counted), best of 5 after one untimed */
        const size_t cb = (size_t)1 << 30;
        struct hmoe_cuda_buf ba, bb;
        void *a = dmalloc(cb, &ba), *b = dmalloc(cb, &bb);
        hmoe_cuda_memset(ctx, a, 1, cb, &err);
        double best = 1e30;
        for (int i = -1; i < 5; i++) {
            double ms;
            hmoe_cuda_timer_start(ctx, &err);
            hmoe_cuda_copy(b, a, cb, stream, &err);
            die_on(hmoe_cuda_timer_stop(ctx, &ms, &err), &err, "timer");
            if (i >= 0 && ms < best) best = ms;
        }
        g_bw = 2.0 * cb / (best * 1e-3) / 1e9;
        printf("roofline: device copy 1 GiB: %.0f GB/s\n", g_bw);
        hmoe_cuda_buf_free(ctx, &ba), hmoe_cuda_buf_free(ctx, &bb);
    }
    /* 2. check */
    const int ok = check_gemm();
    printf("check: int8 and f16 tensor-core GEMMs and the cuBLAS path vs float64 (Q4_K 192 x 512, 70 tokens): %s\n", ok ? "ok" : "FAIL");
    if (!ok) return 1;

    /* 3. dense attn_q */
    printf("\ndense attn_q Q4_K 4096 x 2048:\n");
    for (int ti = 0; ti < 2; ti++) {
        const int64_t T = ti ? 4096 : 512, N = 4096, K = 2048;
        const size_t rb = hmoe_row_bytes(HMOE_TYPE_Q4_K, K);
        struct hmoe_cuda_buf bw, bx, by, bs;
        struct gemm_arg g = {.a = {.w = {.type = HMOE_TYPE_Q4_K, .w = dmalloc(rb * N, &bw), .row_bytes = rb, .nrows = N, .ncols = K,
                                         .n_expert = 1},
                                   .x = dmalloc((size_t)(T * K) * 2, &bx), .x_stride = K, .ntok = T,
                                   .y_f32 = dmalloc((size_t)(T * N) * 4, &by), .y_stride = N}};
        hmoe_cuda_fill_random((void *)g.a.w.w, rb * N, 31, stream, &err);
        hmoe_cuda_fill_random((void *)g.a.x, (size_t)(T * K) * 2, 32, stream, &err);
        const double flop = 2.0 * T * N * K;
        const double ms_q = time_median(run_gemm, &g, 9);
        struct hmoe_cuda_buf bq;
        struct gemm_arg g8 = g;
        g8.a.x = NULL;
        g8.a.xq = dmalloc((size_t)T * hmoe_cuda_q8_1_row_bytes(K), &bq);
        g8.a.xq_stride_bytes = hmoe_cuda_q8_1_row_bytes(K);
        hmoe_cuda_fill_random((void *)g8.a.xq, (size_t)T * hmoe_cuda_q8_1_row_bytes(K), 33, stream, &err);
        const double ms_8 = time_median(run_gemm, &g8, 9);
        g.scratch = dmalloc((size_t)(N * K) * 2, &bs);
        const double ms_c = time_median(run_gemm, &g, 9);
        const double best = ms_8 < ms_q ? (ms_8 < ms_c ? ms_8 : ms_c) : (ms_q < ms_c ? ms_q : ms_c);
        printf("  %5lld tokens: int8 mma %8.1f us %6.1f TFLOP/s | f16 mma %8.1f us %6.1f TFLOP/s | dequant + cuBLAS %8.1f us %6.1f "
               "TFLOP/s -> %s\n",
               (long long)T, ms_8 * 1e3, flop / (ms_8 * 1e-3) / 1e12, ms_q * 1e3, flop / (ms_q * 1e-3) / 1e12, ms_c * 1e3,
               flop / (ms_c * 1e-3) / 1e12, best == ms_8 ? "int8 mma" : best == ms_q ? "f16 mma" : "cuBLAS");
        hmoe_cuda_buf_free(ctx, &bw), hmoe_cuda_buf_free(ctx, &bx), hmoe_cuda_buf_free(ctx, &by), hmoe_cuda_buf_free(ctx, &bs);
        hmoe_cuda_buf_free(ctx, &bq);
    }

    /* 4. MoE FFN of one layer */
    printf("\nMoE FFN, one Qwen3-30B-A3B layer (128 experts, top 8, 768 x 2048), int8 kernel with staged weights:\n");
    const int quick = getenv("HMOE_BENCH_QUICK") != NULL;
    bench_moe(HMOE_TYPE_Q4_K, HMOE_TYPE_Q6_K, 512, roof, 2);
    bench_moe(HMOE_TYPE_IQ2_XXS, HMOE_TYPE_IQ3_XXS, 512, roof, 2);
    bench_moe(HMOE_TYPE_Q4_K, HMOE_TYPE_Q6_K, 4096, roof, 2);
    bench_moe(HMOE_TYPE_IQ2_XXS, HMOE_TYPE_IQ3_XXS, 4096, roof, 2);
    if (!quick) {
        bench_moe(HMOE_TYPE_Q4_K, HMOE_TYPE_Q6_K, 512, roof, 1);
        bench_moe(HMOE_TYPE_Q4_K, HMOE_TYPE_Q6_K, 512, roof, 0);
        bench_moe(HMOE_TYPE_Q4_K, HMOE_TYPE_Q6_K, 4096, roof, 0);
    }

    /* 5. attention products, 6. router */
    printf("\nattention products of one layer:\n");
    bench_dense_shape("q|k", HMOE_TYPE_Q4_K, 4608, 2048, 512);
    bench_dense_shape("v", HMOE_TYPE_Q6_K, 512, 2048, 512);
    bench_dense_shape("q|k|v", HMOE_TYPE_Q4_K, 5120, 2048, 512);
    bench_dense_shape("o", HMOE_TYPE_Q4_K, 2048, 4096, 512);
    if (!quick) bench_dense_shape("q|k", HMOE_TYPE_Q4_K, 4608, 2048, 4096);
    printf("\nrouter:\n");
    bench_router(512);
    bench_router(4096);
    hmoe_cuda_ctx_free(ctx);
    return 0;
}
