/* bench_cuda_attn.c — causal prefill attention of one Qwen3-30B-A3B layer (32 q heads over 4 kv
 * heads, head_dim 128; qwen3moe.md §4.3) over n = 512 / 4096 / 8192 tokens from position 0:
 * the tensor-core kernel (cuda_attn_prefill.cu; 4 or 8 warps per block, 1 or 8 heads per
 * block) against the CUDA-core one (hmoe_cuda_attn_prefill_old), f16 and q8_0 caches.
 * Correctness first: at n = 512 every variant's output against the CUDA-core kernel's (f32
 * exact up to rounding): the largest difference must stay under 2e-2 (f16 q / probabilities;
 * gpu_test_attn_prefill.c holds the rigorous bound), else the run stops.
 * Reported: device time (median of 5 after one warm-up), TFLOP/s (4 * head_dim * n_head *
 * n(n+1)/2 FLOP: 2 per multiply-add of S = QK^T and of O = PV over the visible keys), us per
 * token, and the ratio to a roofline measured in the same run: cuBLAS f16 GEMM (f32
 * accumulate) of 8192 x 4096 x 4096 through hmoe_cuda_gemm_cublas.
 * Build: make bench (CUDA build). Run: ./build/bench/bench_cuda_attn [n ...]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hmoe/cuda.h"
#include "hmoe/fp16.h"
#include "hmoe/types.h"

enum { NH = 32, NKV = 4, HD = 128 };

static struct hmoe_cuda_ctx *ctx;
static void *stream;

static void check(enum hmoe_status st, const struct hmoe_err *err, const char *what) {
    if (st != HMOE_OK) {
        printf("bench_cuda_attn: %s: %s\n", what, err->msg);
        exit(1);
    }
}

static void *dmalloc(size_t bytes) {
    struct hmoe_cuda_buf b;
    struct hmoe_err e = {0};
    check(hmoe_cuda_buf_alloc(ctx, bytes, &b, &e), &e, "alloc");
    return b.ptr;
}

static uint64_t g_rng = 88172645463325252ull;
static double rnd_normal(void) {
    double u[2];
    for (int i = 0; i < 2; i++) {
        g_rng ^= g_rng << 13, g_rng ^= g_rng >> 7, g_rng ^= g_rng << 17;
        u[i] = ((g_rng >> 11) + 0.5) * (1.0 / 9007199254740992.0);
    }
    return sqrt(-2 * log(u[0])) * cos(6.283185307179586 * u[1]);
}

static int cmp_d(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

struct variant {
    const char *name;
    int kind; /* 0 old, 1 mma */
    int warps, hb;
};

static enum hmoe_status run(const struct variant *v, const float *q, int64_t n, const int32_t *pos,
                            const struct hmoe_cuda_kv *kv, float *out, uint16_t *out16, struct hmoe_err *err) {
    const float scale = 1.0f / sqrtf((float)HD);
    const int64_t s = (int64_t)NH * HD;
    if (v->kind == 0) return hmoe_cuda_attn_prefill_old(q, s, n, pos, kv, NH, scale, out, out16, s, stream, err);
    return hmoe_cuda_attn_prefill_mma(q, s, n, pos, kv, NH, scale, v->warps, v->hb, out, out16, s, stream, err);
}

int main(int argc, char **argv) {
    int64_t ns[8] = {512, 4096, 8192};
    int nn = 3;
    if (argc > 1) {
        nn = 0;
        for (int i = 1; i < argc && nn < 8; i++) ns[nn++] = atoll(argv[i]);
    }
    int64_t nmax = 512;
    for (int i = 0; i < nn; i++) nmax = ns[i] > nmax ? ns[i] : nmax;
    struct hmoe_err err = {0};
    if (!hmoe_cuda_available() || hmoe_cuda_ctx_init(&ctx, 0, &err) != HMOE_OK) {
        printf("bench_cuda_attn: no CUDA device (%s)\n", err.msg);
        return 0;
    }
    stream = hmoe_cuda_ctx_stream(ctx);

    /* roofline: cuBLAS f16 GEMM, Y[8192 x 4096] = X[8192 x 4096] W[4096 x 4096]^T */
    double roof_tflops = 0;
    {
        const int64_t M = 8192, K = 4096, N = 4096;
        uint16_t *x = dmalloc((size_t)M * K * 2), *w = dmalloc((size_t)N * K * 2), *scr = dmalloc((size_t)N * K * 2);
        float *y = dmalloc((size_t)M * N * 4);
        check(hmoe_cuda_memset(ctx, x, 0x3c, (size_t)M * K * 2, &err), &err, "memset"); /* 0x3c3c: ~1.06 */
        check(hmoe_cuda_memset(ctx, w, 0x20, (size_t)N * K * 2, &err), &err, "memset"); /* 0x2020: ~0.008 */
        const struct hmoe_cuda_gemm_args g = {
            .w = {.type = HMOE_TYPE_F16, .w = w, .row_bytes = (size_t)K * 2, .expert_stride_bytes = 0, .nrows = N, .ncols = K,
                  .n_expert = 1},
            .x = x, .x_stride = K, .ntok = M, .y_f32 = y, .y_stride = N};
        double t[6];
        for (int i = 0; i < 6; i++) {
            check(hmoe_cuda_timer_start(ctx, &err), &err, "timer");
            check(hmoe_cuda_gemm_cublas(ctx, &g, scr, &err), &err, "cublas gemm");
            check(hmoe_cuda_timer_stop(ctx, &t[i], &err), &err, "timer");
        }
        qsort(t + 1, 5, sizeof(double), cmp_d);
        roof_tflops = 2.0 * M * N * K / (t[3] * 1e-3) / 1e12;
        printf("roofline: cuBLAS f16 GEMM 8192x4096x4096 (incl. the f16 copy of W): %.3f ms = %.1f TFLOP/s\n", t[3],
               roof_tflops);
    }

    const int64_t n_ctx = nmax + 64;
    const int64_t qn = nmax * NH * HD;
    float *hq = malloc((size_t)qn * 4);
    for (int64_t i = 0; i < qn; i++) hq[i] = (float)(rnd_normal() * 2.0);
    float *q = dmalloc((size_t)qn * 4), *out = dmalloc((size_t)qn * 4), *ref = dmalloc((size_t)qn * 4);
    uint16_t *out16 = dmalloc((size_t)qn * 2);
    check(hmoe_cuda_upload(ctx, q, hq, (size_t)qn * 4, &err), &err, "upload");
    int32_t *hpos = malloc((size_t)nmax * 4), *pos = dmalloc((size_t)nmax * 4);
    for (int64_t i = 0; i < nmax; i++) hpos[i] = (int32_t)i;
    check(hmoe_cuda_upload(ctx, pos, hpos, (size_t)nmax * 4, &err), &err, "upload");
    float *h512 = malloc((size_t)512 * NH * HD * 4), *r512 = malloc((size_t)512 * NH * HD * 4);

    static const struct variant vars[] = {{"old (CUDA cores)", 0, 4, 1}, {"mma 4 warps", 1, 4, 1}, {"mma 8 warps", 1, 8, 1},
                                          {"mma 4 warps, 8 heads/block", 1, 4, 8}, {"mma 8 warps, 8 heads/block", 1, 8, 8}};
    const int nv = (int)(sizeof vars / sizeof vars[0]);
    for (int ti = 0; ti < 2; ti++) {
        const enum hmoe_type type = ti ? HMOE_TYPE_Q8_0 : HMOE_TYPE_F16;
        /* cache: random normal rows encoded with the type table's quantizer */
        const size_t rb = hmoe_row_bytes(type, HD), nrow = (size_t)NKV * (size_t)n_ctx;
        uint8_t *hk = malloc(rb * nrow), *hv = malloc(rb * nrow);
        float tmp[HD];
        for (size_t r = 0; r < nrow; r++) {
            for (int i = 0; i < HD; i++) tmp[i] = (float)rnd_normal();
            hmoe_type_info[type].quantize_ref(tmp, hk + r * rb, HD);
            for (int i = 0; i < HD; i++) tmp[i] = (float)rnd_normal();
            hmoe_type_info[type].quantize_ref(tmp, hv + r * rb, HD);
        }
        struct hmoe_cuda_kv kv = {.type_k = type, .type_v = type, .k = dmalloc(rb * nrow), .v = dmalloc(rb * nrow), .n_ctx = n_ctx,
                                  .n_head_kv = NKV, .head_dim = HD};
        check(hmoe_cuda_upload(ctx, kv.k, hk, rb * nrow, &err), &err, "upload");
        check(hmoe_cuda_upload(ctx, kv.v, hv, rb * nrow, &err), &err, "upload");
        free(hk), free(hv);

        /* correctness at n = 512 against the CUDA-core kernel */
        check(run(&vars[0], q, 512, pos, &kv, ref, NULL, &err), &err, "old kernel");
        check(hmoe_cuda_sync(ctx, &err), &err, "sync");
        check(hmoe_cuda_download(ctx, r512, ref, (size_t)512 * NH * HD * 4, &err), &err, "download");
        for (int v = 1; v < nv; v++) {
            check(run(&vars[v], q, 512, pos, &kv, out, out16, &err), &err, vars[v].name);
            check(hmoe_cuda_sync(ctx, &err), &err, "sync");
            check(hmoe_cuda_download(ctx, h512, out, (size_t)512 * NH * HD * 4, &err), &err, "download");
            double md = 0;
            for (int64_t i = 0; i < 512 * NH * HD; i++) {
                const double d = fabs((double)h512[i] - r512[i]);
                md = d > md || d != d ? d : md;
            }
            printf("check %s cache, n 512, %s vs old: max |diff| %.3g %s\n", hmoe_type_name(type), vars[v].name, md,
                   md <= 2e-2 ? "ok" : "FAIL");
            if (!(md <= 2e-2)) return 1;
        }

        for (int i = 0; i < nn; i++) {
            const int64_t n = ns[i];
            const double flop = 4.0 * HD * NH * (double)n * (double)(n + 1) / 2.0;
            for (int v = 0; v < nv; v++) {
                double t[6];
                for (int r = 0; r < 6; r++) {
                    check(hmoe_cuda_timer_start(ctx, &err), &err, "timer");
                    check(run(&vars[v], q, n, pos, &kv, out, n > 256 ? out16 : NULL, &err), &err, vars[v].name);
                    check(hmoe_cuda_timer_stop(ctx, &t[r], &err), &err, "timer");
                }
                qsort(t + 1, 5, sizeof(double), cmp_d);
                const double tf = flop / (t[3] * 1e-3) / 1e12;
                printf("%-5s n %5lld  %-28s %9.3f ms  %7.2f us/token/layer  %6.1f TFLOP/s  %5.1f %% of cuBLAS\n",
                       hmoe_type_name(type), (long long)n, vars[v].name, t[3], t[3] * 1e3 / (double)n, tf,
                       100.0 * tf / roof_tflops);
            }
        }
    }
    free(hq), free(hpos), free(h512), free(r512);
    hmoe_cuda_ctx_free(ctx);
    return 0;
}
