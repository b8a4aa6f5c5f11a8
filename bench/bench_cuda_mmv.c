/* bench_cuda_mmv.c — decode matvec throughput on the GPU (cuda_mmv.cu, cuda_moe.cu), llm.c style:
 * check first, then time, then compare with a roofline measured in the same run.
 *
 * Build: make bench (a CUDA build).  Run: ./build/bench/bench_cuda_mmv [--quick]
 *  1. roofline: device-to-device copy of 1 GiB, GB/s = (bytes read + written) / time
 *  2. per weight type: correctness of a 64 x 2048 matvec against float64 (tests/gpu_test_mmv
 *     bound), then y = W x over >= 1 GiB of weights (rows of 2048, random bytes: values do not
 *     change the time of these kernels), median of 20 launches: weight GB/s and % of the copy
 *  3. the decode shapes of Qwen3-30B-A3B (qwen3moe.md §9.2): 8 experts' gate+up (Q4_K, 768 x
 *     2048 each) and down (Q6_K and Q4_K, 2048 x 768) with different experts every launch,
 *     attn_q (4096 x 2048 Q4_K) over 48 layer copies, the LM head (151936 x 2048 Q6_K)
 * Times are device times between CUDA events: single launches for the >= 1 GiB matrices, and for
 * the decode shapes the per-launch time inside a CUDA graph of 64+ launches (as the decode step
 * runs), different weights each launch so the 60 MB L2 cannot serve them.
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

static void *dmalloc(size_t bytes, struct hmoe_cuda_buf *b) {
    struct hmoe_err e = {0};
    if (hmoe_cuda_buf_alloc(ctx, bytes, b, &e) != HMOE_OK) {
        fprintf(stderr, "%s\n", e.msg);
        exit(1);
    }
    return b->ptr;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median device time (ms) of `reps` runs of fn(arg, i). */
static double time_median(void (*fn)(void *, int), void *arg, int reps) {
    double t[64];
    for (int i = 0; i < 3; i++) fn(arg, i);
    for (int i = 0; i < reps; i++) {
        struct hmoe_err e = {0};
        hmoe_cuda_timer_start(ctx, &e);
        fn(arg, i);
        if (hmoe_cuda_timer_stop(ctx, &t[i], &e) != HMOE_OK) {
            fprintf(stderr, "timing failed: %s\n", e.msg);
            exit(1);
        }
    }
    qsort(t, (size_t)reps, sizeof t[0], cmp_d);
    return t[reps / 2];
}

/* Per-launch device time inside a CUDA graph: `n` calls of fn(arg, i) captured once, the graph
 * replayed 7 times (median). This is how the decode step runs (no launch latency per kernel). */
static double time_graph(void (*fn)(void *, int), void *arg, int n) {
    struct hmoe_err e = {0};
    struct hmoe_cuda_graph *g = NULL;
    if (hmoe_cuda_graph_capture_begin(ctx, &e) != HMOE_OK) goto fail;
    for (int i = 0; i < n; i++) fn(arg, i);
    if (hmoe_cuda_graph_capture_end(ctx, &g, &e) != HMOE_OK) goto fail;
    double t[7];
    for (int r = -2; r < 7; r++) {
        double ms = 0;
        if (hmoe_cuda_timer_start(ctx, &e) != HMOE_OK || hmoe_cuda_graph_launch(ctx, g, &e) != HMOE_OK ||
            hmoe_cuda_timer_stop(ctx, &ms, &e) != HMOE_OK)
            goto fail;
        if (r >= 0) t[r] = ms;
    }
    hmoe_cuda_graph_free(g);
    qsort(t, 7, sizeof t[0], cmp_d);
    return t[3] / n;
fail:
    fprintf(stderr, "graph timing failed: %s\n", e.msg);
    exit(1);
}

struct copy_arg {
    void *dst, *src;
    size_t bytes;
};
static void run_copy(void *p, int i) {
    struct copy_arg *a = p;
    struct hmoe_err e = {0};
    (void)i;
    hmoe_cuda_copy(a->dst, a->src, a->bytes, stream, &e);
}

struct mmv_arg {
    struct hmoe_cuda_mmv_args a;
    int ncopies;       /* rotate over this many weight copies */
    size_t copy_bytes;
};
static void run_mmv(void *p, int i) {
    struct mmv_arg *m = p;
    struct hmoe_cuda_mmv_args a = m->a;
    a.w = (const char *)a.w + (size_t)(i % m->ncopies) * m->copy_bytes;
    struct hmoe_err e = {0};
    if (hmoe_cuda_mmv(&a, stream, &e) != HMOE_OK) {
        fprintf(stderr, "mmv: %s\n", e.msg);
        exit(1);
    }
}

/* Correctness of the type at 64 x 2048 (and 11 tokens) before any timing. */
static int check_type(enum hmoe_type t) {
    const int64_t nrows = 64, ncols = 2048;
    const struct hmoe_type_info *ti = &hmoe_type_info[t];
    const size_t rb = hmoe_row_bytes(t, ncols), xs = ti->is_quantized ? hmoe_cuda_q8_1_row_bytes(ncols) : (size_t)ncols * 4;
    uint8_t *raw = malloc(rb * nrows), *xq = malloc(xs);
    float *x = malloc(ncols * 4), *w = malloc((size_t)ncols * 4), *y = malloc(nrows * 4);
    rng_seed(7 + (uint64_t)t);
    rand_blocks(t, raw, nrows * ncols);
    for (int64_t i = 0; i < ncols; i++) x[i] = rng_normal();
    struct hmoe_cuda_buf bw, bx, bq, by;
    void *dw = dmalloc(rb * nrows, &bw), *dx = dmalloc(ncols * 4, &bx), *dq = dmalloc(xs, &bq);
    float *dy = dmalloc(nrows * 4, &by);
    struct hmoe_err e = {0};
    int ok = hmoe_cuda_upload(ctx, dw, raw, rb * nrows, &e) == HMOE_OK && hmoe_cuda_upload(ctx, dx, x, ncols * 4, &e) == HMOE_OK;
    if (ok && ti->is_quantized) ok = hmoe_cuda_quantize_q8_1(dx, ncols, 1, ncols, dq, stream, &e) == HMOE_OK;
    struct hmoe_cuda_mmv_args a = {.type = t, .w = dw, .row_bytes = rb, .nrows = nrows, .ncols = ncols,
                                   .x = ti->is_quantized ? dq : dx, .x_stride_bytes = xs, .ntok = 1, .y = dy, .y_stride = nrows};
    ok = ok && hmoe_cuda_mmv(&a, stream, &e) == HMOE_OK && hmoe_cuda_sync(ctx, &e) == HMOE_OK &&
         hmoe_cuda_download(ctx, y, dy, nrows * 4, &e) == HMOE_OK &&
         (!ti->is_quantized || hmoe_cuda_download(ctx, xq, dq, xs, &e) == HMOE_OK);
    for (int64_t r = 0; ok && r < nrows; r++) {
        ti->dequant_ref(raw + r * rb, w, ncols);
        double s = 0, m = 0;
        for (int64_t i = 0; i < ncols; i++) {
            double a_ = ti->is_quantized ? ref_q8_1_value(xq, ncols, i) : x[i];
            s += w[i] * a_;
            m += fabs(w[i] * a_);
        }
        if (!(fabs(y[r] - s) <= 1e-5 * m + 1e-30)) {
            fprintf(stderr, "%s: row %lld: %.9g, want %.9g\n", ti->name, (long long)r, y[r], s);
            ok = 0;
        }
    }
    if (!ok && e.msg[0]) fprintf(stderr, "%s: %s\n", ti->name, e.msg);
    hmoe_cuda_buf_free(ctx, &bw), hmoe_cuda_buf_free(ctx, &bx), hmoe_cuda_buf_free(ctx, &bq), hmoe_cuda_buf_free(ctx, &by);
    free(raw), free(xq), free(x), free(w), free(y);
    return ok;
}

/* y = W x over >= target bytes of weights; returns GB/s (weights only). */
static double bench_dense(enum hmoe_type t, int64_t nrows, int64_t ncols, size_t target, double *us, size_t *bytes_out) {
    const struct hmoe_type_info *ti = &hmoe_type_info[t];
    const size_t rb = hmoe_row_bytes(t, ncols), mat = rb * (size_t)nrows;
    int ncopies = 1;
    if (nrows == 0) { /* one tall matrix of at least `target` bytes */
        nrows = (int64_t)((target + rb - 1) / rb + 15) / 16 * 16;
    } else {
        ncopies = (int)HMOE_MAX((size_t)1, (target + mat - 1) / mat); /* rotate copies so the L2 cannot hold them */
    }
    const size_t wbytes = rb * (size_t)nrows;
    const size_t xs = ti->is_quantized ? hmoe_cuda_q8_1_row_bytes(ncols) : (size_t)ncols * 4;
    struct hmoe_cuda_buf bw, bx, by;
    void *dw = dmalloc(wbytes * ncopies, &bw), *dx = dmalloc(xs, &bx);
    float *dy = dmalloc((size_t)nrows * 4, &by);
    struct hmoe_err e = {0};
    hmoe_cuda_fill_random(dw, wbytes * ncopies, 1, stream, &e);
    hmoe_cuda_fill_random(dx, xs, 2, stream, &e);
    struct mmv_arg m = {.a = {.type = t, .w = dw, .row_bytes = rb, .nrows = nrows, .ncols = ncols, .x = dx, .x_stride_bytes = xs,
                              .ntok = 1, .y = dy, .y_stride = nrows},
                        .ncopies = ncopies, .copy_bytes = wbytes};
    double ms = ncopies > 1 ? time_graph(run_mmv, &m, 2 * ncopies) : time_median(run_mmv, &m, 20);
    hmoe_cuda_buf_free(ctx, &bw), hmoe_cuda_buf_free(ctx, &bx), hmoe_cuda_buf_free(ctx, &by);
    *us = ms * 1e3;
    *bytes_out = wbytes;
    return (double)wbytes / (ms * 1e-3) / 1e9;
}

struct moe_arg {
    struct hmoe_cuda_experts gate, up, down;
    int32_t *ids;  /* [iters][8] */
    float *wts;
    void *xq, *zq;
    float *z, *y;
    int which;     /* 0 gate_up, 1 down */
};
static void run_moe(void *p, int i) {
    struct moe_arg *m = p;
    struct hmoe_err e = {0};
    const int32_t *ids = m->ids + (size_t)(i % 32) * 8;
    enum hmoe_status st = m->which == 0
        ? hmoe_cuda_moe_gate_up(&m->gate, &m->up, ids, 8, 8, m->xq, hmoe_cuda_q8_1_row_bytes(2048), m->z, 768, stream, &e)
        : hmoe_cuda_moe_down(&m->down, ids, m->wts, 1, 8, m->zq, hmoe_cuda_q8_1_row_bytes(768), m->y, 2048, stream, &e);
    if (st != HMOE_OK) {
        fprintf(stderr, "moe: %s\n", e.msg);
        exit(1);
    }
}

int main(int argc, char **argv) {
    const int quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    struct hmoe_err err = {0};
    if (!hmoe_cuda_available() || hmoe_cuda_ctx_init(&ctx, 0, &err) != HMOE_OK) {
        printf("bench_cuda_mmv: no CUDA device (%s)\n", err.msg);
        return 0;
    }
    stream = hmoe_cuda_ctx_stream(ctx);
    struct hmoe_cuda_device_info di;
    hmoe_cuda_device_info(0, &di, &err);
    printf("device: %s, %d SMs, %.1f GiB\n", di.name, di.n_sm, di.total_bytes / 1073741824.0);

    /* 1. roofline */
    const size_t cb = (size_t)1 << 30;
    struct hmoe_cuda_buf b1, b2;
    struct copy_arg ca = {.dst = dmalloc(cb, &b1), .src = dmalloc(cb, &b2), .bytes = cb};
    hmoe_cuda_fill_random(ca.src, cb, 3, stream, &err);
    const double copy_ms = time_median(run_copy, &ca, 10);
    const double roof = 2.0 * (double)cb / (copy_ms * 1e-3) / 1e9;
    printf("roofline: device-to-device copy of 1 GiB: %.3f ms, %.0f GB/s (read + write)\n\n", copy_ms, roof);
    hmoe_cuda_buf_free(ctx, &b1), hmoe_cuda_buf_free(ctx, &b2);

    /* 2. per type */
    static const enum hmoe_type types[] = {HMOE_TYPE_Q4_K, HMOE_TYPE_Q5_K, HMOE_TYPE_Q6_K, HMOE_TYPE_Q8_0, HMOE_TYPE_Q2_K,
                                           HMOE_TYPE_Q3_K, HMOE_TYPE_IQ2_XXS, HMOE_TYPE_IQ2_XS, HMOE_TYPE_IQ2_S,
                                           HMOE_TYPE_IQ3_XXS, HMOE_TYPE_IQ3_S, HMOE_TYPE_IQ4_NL, HMOE_TYPE_IQ4_XS,
                                           HMOE_TYPE_IQ1_S, HMOE_TYPE_IQ1_M, HMOE_TYPE_Q4_0, HMOE_TYPE_MXFP4,
                                           HMOE_TYPE_F16, HMOE_TYPE_BF16, HMOE_TYPE_F32};
    printf("%-8s %6s %10s %10s %8s %7s\n", "type", "check", "MiB", "us", "GB/s", "%roof");
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        const enum hmoe_type t = types[i];
        const int ok = check_type(t);
        if (!ok) {
            printf("%-8s %6s\n", hmoe_type_name(t), "FAIL");
            continue;
        }
        double us;
        size_t bytes;
        const double gbs = bench_dense(t, 0, 2048, quick ? ((size_t)256 << 20) : ((size_t)1 << 30), &us, &bytes);
        printf("%-8s %6s %10.1f %10.1f %8.0f %6.1f%%\n", hmoe_type_name(t), "ok", bytes / 1048576.0, us, gbs, 100.0 * gbs / roof);
    }

    /* 3. decode shapes of Qwen3-30B-A3B */
    printf("\nQwen3-30B-A3B decode shapes:\n");
    {
        double us;
        size_t bytes;
        double gbs = bench_dense(HMOE_TYPE_Q4_K, 4096, 2048, (size_t)256 << 20, &us, &bytes);
        printf("  (per launch inside a CUDA graph)\n");
        printf("  attn_q   Q4_K 4096 x 2048 (rotating copies)   %8.1f us %8.0f GB/s %6.1f%%\n", us, gbs, 100 * gbs / roof);
        gbs = bench_dense(HMOE_TYPE_Q4_K, 2048, 4096, (size_t)256 << 20, &us, &bytes);
        printf("  attn_out Q4_K 2048 x 4096 (rotating copies)   %8.1f us %8.0f GB/s %6.1f%%\n", us, gbs, 100 * gbs / roof);
        gbs = bench_dense(HMOE_TYPE_Q4_K, 512, 2048, (size_t)256 << 20, &us, &bytes);
        printf("  attn_k   Q4_K 512 x 2048 (rotating copies)    %8.1f us %8.0f GB/s %6.1f%%\n", us, gbs, 100 * gbs / roof);
        gbs = bench_dense(HMOE_TYPE_F32, 128, 2048, (size_t)256 << 20, &us, &bytes);
        printf("  router   F32 128 x 2048 (rotating copies)     %8.1f us %8.0f GB/s %6.1f%%\n", us, gbs, 100 * gbs / roof);
        gbs = bench_dense(HMOE_TYPE_Q6_K, 151936, 2048, 0, &us, &bytes);
        printf("  output   Q6_K 151936 x 2048                   %8.1f us %8.0f GB/s %6.1f%%\n", us, gbs, 100 * gbs / roof);
    }
    const enum hmoe_type dtypes[2] = {HMOE_TYPE_Q6_K, HMOE_TYPE_Q4_K};
    for (int v = 0; v < 2; v++) {
        struct moe_arg m;
        const size_t gb = hmoe_row_bytes(HMOE_TYPE_Q4_K, 2048), db = hmoe_row_bytes(dtypes[v], 768);
        struct hmoe_cuda_buf bg, bu, bd, bi, bwt, bx, bz, bzq, by;
        m.gate = (struct hmoe_cuda_experts){.type = HMOE_TYPE_Q4_K, .w = dmalloc(gb * 768 * 128, &bg), .row_bytes = gb,
                                            .expert_stride_bytes = gb * 768, .nrows = 768, .ncols = 2048, .n_expert = 128};
        m.up = m.gate;
        m.up.w = dmalloc(gb * 768 * 128, &bu);
        m.down = (struct hmoe_cuda_experts){.type = dtypes[v], .w = dmalloc(db * 2048 * 128, &bd), .row_bytes = db,
                                            .expert_stride_bytes = db * 2048, .nrows = 2048, .ncols = 768, .n_expert = 128};
        hmoe_cuda_fill_random((void *)m.gate.w, gb * 768 * 128, 11, stream, &err);
        hmoe_cuda_fill_random((void *)m.up.w, gb * 768 * 128, 12, stream, &err);
        hmoe_cuda_fill_random((void *)m.down.w, db * 2048 * 128, 13, stream, &err);
        int32_t ids[32 * 8];
        float wts[32 * 8];
        for (int it = 0; it < 32; it++)
            for (int j = 0; j < 8; j++) ids[it * 8 + j] = (it * 37 + j * 16 + j * j) % 128, wts[it * 8 + j] = 0.125f;
        m.ids = dmalloc(sizeof ids, &bi);
        m.wts = dmalloc(sizeof wts, &bwt);
        hmoe_cuda_upload(ctx, m.ids, ids, sizeof ids, &err);
        hmoe_cuda_upload(ctx, m.wts, wts, sizeof wts, &err);
        m.xq = dmalloc(hmoe_cuda_q8_1_row_bytes(2048), &bx);
        m.zq = dmalloc(8 * hmoe_cuda_q8_1_row_bytes(768), &bzq);
        m.z = dmalloc(8 * 768 * 4, &bz);
        m.y = dmalloc(2048 * 4, &by);
        hmoe_cuda_fill_random(m.xq, hmoe_cuda_q8_1_row_bytes(2048), 14, stream, &err);
        hmoe_cuda_fill_random(m.zq, 8 * hmoe_cuda_q8_1_row_bytes(768), 15, stream, &err);
        hmoe_cuda_memset(ctx, m.y, 0, 2048 * 4, &err);
        if (v == 0) {
            m.which = 0;
            const double ms = time_graph(run_moe, &m, 64), bytes = 2.0 * 8 * 768 * gb;
            printf("  moe gate+up Q4_K, 8 of 128 experts           %8.1f us %8.0f GB/s %6.1f%%\n", ms * 1e3, bytes / (ms * 1e-3) / 1e9,
                   100 * bytes / (ms * 1e-3) / 1e9 / roof);
        }
        m.which = 1;
        const double ms = time_graph(run_moe, &m, 64), bytes = 8.0 * 2048 * db;
        printf("  moe down %s, 8 of 128 experts + residual   %8.1f us %8.0f GB/s %6.1f%%\n", hmoe_type_name(dtypes[v]), ms * 1e3,
               bytes / (ms * 1e-3) / 1e9, 100 * bytes / (ms * 1e-3) / 1e9 / roof);
        hmoe_cuda_buf_free(ctx, &bg), hmoe_cuda_buf_free(ctx, &bu), hmoe_cuda_buf_free(ctx, &bd), hmoe_cuda_buf_free(ctx, &bi);
        hmoe_cuda_buf_free(ctx, &bwt), hmoe_cuda_buf_free(ctx, &bx), hmoe_cuda_buf_free(ctx, &bz), hmoe_cuda_buf_free(ctx, &bzq);
        hmoe_cuda_buf_free(ctx, &by);
    }
    hmoe_cuda_ctx_free(ctx);
    return 0;
}
