/* gpu_util.h — helpers shared by the tests/gpu_test_*.c programs: a seeded random generator,
 * random quant blocks with sane scales (every fp16 / E8M0 scale field replaced by a finite,
 * moderately sized value, subnormal fp16 scales included: quants.md §0.1), the reference q8_1
 * quantizer of cuda.h's activation format, the "skipped: no CUDA device" rule, and small device
 * buffer wrappers. Header-only, C11 (also compiles as C++ for tools/).
 */
#ifndef HMOE_TEST_GPU_UTIL_H
#define HMOE_TEST_GPU_UTIL_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hmoe/cpu.h"
#include "hmoe/cuda.h"
#include "hmoe/fp16.h"
#include "hmoe/types.h"

/* ---- xorshift64*: deterministic, seeded per test ---- */
static uint64_t g_rng = 0x9e3779b97f4a7c15ull;
static inline void rng_seed(uint64_t s) { g_rng = s ? s : 1; }
static inline uint64_t rng_u64(void) {
    g_rng ^= g_rng >> 12;
    g_rng ^= g_rng << 25;
    g_rng ^= g_rng >> 27;
    return g_rng * 0x2545f4914f6cdd1dull;
}
static inline uint32_t rng_u32(void) { return (uint32_t)(rng_u64() >> 32); }
/* uniform in [0, 1) */
static inline double rng_unif(void) { return (double)(rng_u64() >> 11) * (1.0 / 9007199254740992.0); }
/* standard normal (Box-Muller) */
static inline float rng_normal(void) {
    double u = rng_unif(), v = rng_unif();
    if (u < 1e-300) u = 1e-300;
    return (float)(sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v));
}

/* A sane fp16 scale: magnitude 2^-16 .. 2^-2 (so some are fp16 subnormals), random sign when
 * `sign` (K-quant dmin / Q4_1 m may be negative in files). */
static inline uint16_t rand_scale_f16(int sign) {
    float mag = ldexpf(1.0f + (float)rng_unif(), -(int)(2 + rng_u32() % 15));
    if (sign && (rng_u32() & 1)) mag = -mag;
    return hmoe_f32_to_fp16(mag);
}

static inline void put_u16(uint8_t *p, uint16_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

/* Fill n elements of `type` (whole blocks) with random bytes, then make every scale field sane. */
static inline void rand_blocks(enum hmoe_type type, uint8_t *dst, int64_t n) {
    const struct hmoe_type_info *ti = &hmoe_type_info[type];
    size_t bytes = hmoe_row_bytes(type, n);
    for (size_t i = 0; i < bytes; i++) dst[i] = (uint8_t)rng_u32();
    int64_t nb = n / ti->blck;
    for (int64_t b = 0; b < nb; b++) {
        uint8_t *p = dst + (size_t)b * (size_t)ti->type_size;
        switch (type) { /* test data only: where each format keeps its scale fields (quants.md) */
        case HMOE_TYPE_F32: {
            float v = rng_normal();
            memcpy(p, &v, 4);
            break;
        }
        case HMOE_TYPE_F16: put_u16(p, hmoe_f32_to_fp16(rng_normal())); break;
        case HMOE_TYPE_BF16: put_u16(p, hmoe_f32_to_bf16(rng_normal())); break;
        case HMOE_TYPE_Q4_1:
        case HMOE_TYPE_Q5_1:
        case HMOE_TYPE_Q4_K:
        case HMOE_TYPE_Q5_K:
            put_u16(p, rand_scale_f16(0));
            put_u16(p + 2, rand_scale_f16(1));
            break;
        case HMOE_TYPE_Q2_K:
            put_u16(p + 80, rand_scale_f16(0));
            put_u16(p + 82, rand_scale_f16(1));
            break;
        case HMOE_TYPE_Q3_K: put_u16(p + 108, rand_scale_f16(1)); break;
        case HMOE_TYPE_Q6_K: put_u16(p + 208, rand_scale_f16(1)); break;
        case HMOE_TYPE_IQ1_M: { /* d is spread over the top nibbles of the four scale words */
            uint16_t d = rand_scale_f16(0);
            for (int w = 0; w < 4; w++) p[48 + 2 * w + 1] = (uint8_t)((p[48 + 2 * w + 1] & 0x0f) | (((d >> (4 * w)) & 0xf) << 4));
            break;
        }
        case HMOE_TYPE_MXFP4: p[0] = (uint8_t)(rng_u32() % 8 == 0 ? rng_u32() % 2 : 110 + rng_u32() % 24); break;
        default: put_u16(p, rand_scale_f16(1)); break; /* fp16 d at byte 0 */
        }
    }
}

/* The q8_1 row format of cuda.h: quants, then {d, s} pairs. One row of n (n % 32 == 0). */
static inline size_t ref_q8_1_row_bytes(int64_t n) { return (size_t)((n + 8 * (n / 32) + 15) / 16 * 16); }
static inline void ref_quantize_q8_1(const float *x, int64_t n, uint8_t *row) {
    memset(row, 0, ref_q8_1_row_bytes(n));
    int8_t *qs = (int8_t *)row;
    float *ds = (float *)(row + n);
    for (int64_t b = 0; b < n / 32; b++) {
        float amax = 0.0f;
        for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[32 * b + j]));
        float d = amax / 127.0f, id = amax > 0.0f ? 127.0f / amax : 0.0f;
        int sum = 0;
        for (int j = 0; j < 32; j++) {
            int q = (int)nearbyintf(x[32 * b + j] * id); /* round half to even, as __float2int_rn */
            q = q > 127 ? 127 : q < -127 ? -127 : q;
            qs[32 * b + j] = (int8_t)q;
            sum += q;
        }
        ds[2 * b] = d;
        ds[2 * b + 1] = d * (float)sum;
    }
}
/* Dequantized value of element i of a q8_1 row. */
static inline double ref_q8_1_value(const uint8_t *row, int64_t n, int64_t i) {
    const float *ds = (const float *)(row + n);
    return (double)ds[2 * (i / 32)] * (double)((const int8_t *)row)[i];
}

/* ---- device side (needs harness.h included first for t_check) ---- */
#ifdef HMOE_TEST_HARNESS_H
static struct hmoe_cuda_ctx *g_ctx;
static void *g_stream;
#define GPU_MAX_BUFS 4096
static struct hmoe_cuda_buf g_bufs[GPU_MAX_BUFS];
static int g_nbufs;

/* Open device 0, or print "<prog> ... skipped: no CUDA device" and return 0 (the case is not
 * counted, so a CPU-only machine ends with "0 passed, 0 failed"). */
static inline int gpu_open_or_skip(const char *prog) {
    struct hmoe_err err = {0};
    if (!hmoe_cuda_available() || hmoe_cuda_ctx_init(&g_ctx, 0, &err) != HMOE_OK) {
        printf("%s ... skipped: no CUDA device%s%s\n", prog, err.msg[0] ? " (" : "", err.msg[0] ? err.msg : "");
        if (err.msg[0]) printf(")\n");
        return 0;
    }
    g_stream = hmoe_cuda_ctx_stream(g_ctx);
    return 1;
}
static inline void gpu_close(void) {
    for (int i = 0; i < g_nbufs; i++) hmoe_cuda_buf_free(g_ctx, &g_bufs[i]);
    g_nbufs = 0;
    hmoe_cuda_ctx_free(g_ctx);
    g_ctx = NULL;
}
/* Free every buffer allocated so far (between test groups). */
static inline void gpu_free_all(void) {
    for (int i = 0; i < g_nbufs; i++) hmoe_cuda_buf_free(g_ctx, &g_bufs[i]);
    g_nbufs = 0;
}
/* How far a stored cache element i of a row of type t (bytes row) may be from the exact value x:
 * a bit more than half a rounding step of the type (a GPU f32 result and a float64 reference may
 * round to neighbouring codes). Block types: the step from the block's fp16 scale (IQ4_NL: its
 * widest code gap, 24 scale units). Q4_0 / Q5_0 map the block's extreme to -8 / -16 steps, so
 * values of the other sign beyond 7 / 15 steps are clamped there: that excess is allowed too. */
static inline double kv_store_tol(enum hmoe_type t, const uint8_t *row, int i, double x) {
    if (t == HMOE_TYPE_F32) return fabs(x) * 1e-6;
    if (t == HMOE_TYPE_F16) return ldexp(fabs(x), -11);
    if (t == HMOE_TYPE_BF16) return ldexp(fabs(x), -8);
    const uint8_t *blk = row + (size_t)hmoe_type_info[t].type_size * (size_t)(i / 32);
    const double d = hmoe_fp16_to_f32((uint16_t)(blk[0] | (blk[1] << 8)));
    double tol = 0.6 * fabs(d) * (t == HMOE_TYPE_IQ4_NL ? 24.0 : 1.0);
    const double top = t == HMOE_TYPE_Q4_0 ? 7.0 : t == HMOE_TYPE_Q5_0 ? 15.0 : 0.0;
    if (top > 0 && d != 0 && x / d > top) tol += (x / d - top) * fabs(d);
    return tol;
}

/* Device allocation that dies loudly: a test cannot go on without its buffers. The memory is
 * filled with 0xff bytes (NaN floats) so unwritten outputs are caught. */
static inline void *dalloc(size_t bytes) {
    struct hmoe_err err = {0};
    if (g_nbufs == GPU_MAX_BUFS || hmoe_cuda_buf_alloc(g_ctx, bytes ? bytes : 16, &g_bufs[g_nbufs], &err) != HMOE_OK) {
        printf("device allocation of %zu bytes ... FAIL: %s\n", bytes, err.msg);
        exit(1);
    }
    hmoe_cuda_memset(g_ctx, g_bufs[g_nbufs].ptr, 0xff, bytes ? bytes : 16, &err);
    return g_bufs[g_nbufs++].ptr;
}
static inline void *dup_dev(const void *h, size_t bytes) {
    void *d = dalloc(bytes);
    struct hmoe_err err = {0};
    if (hmoe_cuda_upload(g_ctx, d, h, bytes, &err) != HMOE_OK) {
        printf("upload ... FAIL: %s\n", err.msg);
        exit(1);
    }
    return d;
}
static inline void *to_dev(void *d, const void *h, size_t bytes) {
    struct hmoe_err err = {0};
    if (hmoe_cuda_upload(g_ctx, d, h, bytes, &err) != HMOE_OK) {
        printf("upload ... FAIL: %s\n", err.msg);
        exit(1);
    }
    return d;
}
/* Wait for the stream and copy back; returns 0 and records a failed case on a device error. */
static inline int from_dev(void *h, const void *d, size_t bytes, const char *name) {
    struct hmoe_err err = {0};
    if (hmoe_cuda_sync(g_ctx, &err) != HMOE_OK || hmoe_cuda_download(g_ctx, h, d, bytes, &err) != HMOE_OK) {
        t_check(0, name, "device error: %s", err.msg);
        return 0;
    }
    return 1;
}
/* A launcher's status: on failure record the case as failed with the library's message. */
static inline int launched(enum hmoe_status st, const struct hmoe_err *err, const char *name) {
    if (st != HMOE_OK) t_check(0, name, "launch refused: %s", err->msg);
    return st == HMOE_OK;
}

/* Quantized expert weights on the device with their dequantized values (row-major
 * [E][nrows][ncols]) for the expert and GEMM tests. */
struct gpu_experts {
    enum hmoe_type t;
    int64_t E, nrows, ncols;
    size_t rb;
    uint8_t *raw;
    float *w;
    struct hmoe_cuda_experts dev;
};
static inline void gpu_experts_make(struct gpu_experts *x, enum hmoe_type t, int64_t E, int64_t nrows, int64_t ncols) {
    x->t = t, x->E = E, x->nrows = nrows, x->ncols = ncols;
    x->rb = hmoe_row_bytes(t, ncols);
    const size_t total = x->rb * (size_t)(nrows * E);
    x->raw = malloc(total);
    rand_blocks(t, x->raw, ncols * nrows * E);
    x->w = malloc((size_t)(E * nrows * ncols) * 4);
    for (int64_t r = 0; r < E * nrows; r++) hmoe_type_info[t].dequant_ref(x->raw + r * x->rb, x->w + r * ncols, ncols);
    x->dev = (struct hmoe_cuda_experts){.type = t, .w = dup_dev(x->raw, total), .row_bytes = x->rb,
                                        .expert_stride_bytes = x->rb * (size_t)nrows, .nrows = nrows, .ncols = ncols, .n_expert = E};
}
static inline void gpu_experts_free(struct gpu_experts *x) { free(x->raw), free(x->w); }
static inline const float *gpu_experts_row(const struct gpu_experts *x, int e, int64_t r) {
    return x->w + ((size_t)e * x->nrows + r) * x->ncols;
}
/* Sum and sum of |products| of a weight row with a q8_1 row (the tolerance scales with the latter). */
static inline void ref_dot_q8_1(const float *w, const uint8_t *q, int64_t n, double *s, double *mag) {
    *s = 0, *mag = 0;
    for (int64_t i = 0; i < n; i++) {
        double p = (double)w[i] * ref_q8_1_value(q, n, i);
        *s += p;
        *mag += fabs(p);
    }
}

/* The down GEMM of an expert plan: ye[r][c] (plan row r, output c) against the q8_1 reference dot of
 * row c of expert ids[rows[r]] with q8_1 row r of zq (zs bytes apart). 1 when all agree, else 0 and why. */
static inline int check_plan_down(const struct gpu_experts *down, const int32_t *ids, const int32_t *rows, int64_t nrows,
                                  int64_t d, int64_t F, const uint8_t *zq, size_t zs, const float *ye, char *why,
                                  size_t why_len) {
    for (int64_t r = 0; r < nrows; r++) {
        const int e = ids[rows[r]];
        for (int64_t c = 0; c < d; c++) {
            double s, m;
            ref_dot_q8_1(gpu_experts_row(down, e, c), zq + (size_t)r * zs, F, &s, &m);
            if (!(fabs(ye[r * d + c] - s) <= 1e-5 * m + 1e-30)) {
                snprintf(why, why_len, "plan row %lld col %lld: %.9g, want %.9g", (long long)r, (long long)c, ye[r * d + c], s);
                return 0;
            }
        }
    }
    return 1;
}

/* A KV cache in VRAM (K rows in type tk, V rows in tv, [h][pos]) with random rows for positions
 * < nan_from and all-ones bytes after (NaN in every float type and as an fp16 block scale), and
 * its decoded values. Rows are encoded by the CPU cache store (hmoe_cpu_attn_kv_store), so a GPU
 * kernel reading them sees what the CPU attention sees. */
struct gpu_kv_cache {
    int Hkv, D;
    int64_t n_ctx;
    enum hmoe_type type, type_v; /* type: K (and V when both are the same) */
    float *kd, *vd; /* decoded values [h][pos][D] */
    struct hmoe_cuda_kv kv;
};
static inline size_t gpu_kv_row_bytes(enum hmoe_type t, int D) { return hmoe_row_bytes(t, D); }
/* Encode n floats as the CPU cache stores them and decode them back into dec (the reader's view). */
static inline void gpu_kv_encode(enum hmoe_type t, const float *src, uint8_t *dst, float *dec, int n) {
    hmoe_cpu_attn_kv_store(t, src, dst, n);
    hmoe_type_info[t].dequant_ref(dst, dec, n);
}
static inline void gpu_kv_cache_init2(struct gpu_kv_cache *c, int Hkv, int D, int64_t n_ctx, enum hmoe_type tk,
                                      enum hmoe_type tv, int64_t nan_from) {
    hmoe_cpu_init();
    c->Hkv = Hkv, c->D = D, c->n_ctx = n_ctx, c->type = tk, c->type_v = tv;
    const size_t rbk = gpu_kv_row_bytes(tk, D), rbv = gpu_kv_row_bytes(tv, D), nrow = (size_t)Hkv * (size_t)n_ctx;
    uint8_t *kr = malloc(rbk * nrow), *vr = malloc(rbv * nrow);
    float *tmp = malloc((size_t)D * 4);
    c->kd = malloc(nrow * (size_t)D * 4);
    c->vd = malloc(nrow * (size_t)D * 4);
    for (size_t r = 0; r < nrow; r++) {
        if ((int64_t)(r % (size_t)n_ctx) >= nan_from) {
            memset(kr + r * rbk, 0xff, rbk), memset(vr + r * rbv, 0xff, rbv);
            continue;
        }
        for (int i = 0; i < D; i++) tmp[i] = rng_normal();
        gpu_kv_encode(tk, tmp, kr + r * rbk, c->kd + r * D, D);
        for (int i = 0; i < D; i++) tmp[i] = rng_normal();
        gpu_kv_encode(tv, tmp, vr + r * rbv, c->vd + r * D, D);
    }
    c->kv = (struct hmoe_cuda_kv){.type_k = tk, .type_v = tv, .k = dup_dev(kr, rbk * nrow), .v = dup_dev(vr, rbv * nrow),
                                  .n_ctx = n_ctx, .n_head_kv = Hkv, .head_dim = D};
    free(kr), free(vr), free(tmp);
}
static inline void gpu_kv_cache_init(struct gpu_kv_cache *c, int Hkv, int D, int64_t n_ctx, enum hmoe_type t,
                                     int64_t nan_from) {
    gpu_kv_cache_init2(c, Hkv, D, n_ctx, t, t, nan_from);
}
static inline void gpu_kv_cache_free(struct gpu_kv_cache *c) {
    free(c->kd), free(c->vd);
    gpu_free_all();
}
#endif

#endif
