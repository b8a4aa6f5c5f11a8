/* cuda_norm_rope.cu — RMSNorm (optionally after the residual add, emitting f32 / f16 / q8_1),
 * per-head Q/K RMSNorm + NEOX RoPE + KV-cache store in one kernel, SwiGLU and adds.
 * Implements qwen3moe.md §4.2 (eps inside the sqrt of the mean of squares, (x*r)*w), §4.3
 * steps 4-6 and §5 (NEOX pairs (i, i + n_rot/2), theta_i = p * base^(-2i/n_rot), linear and
 * YaRN scaling; the angle is formed in double, which §5 recommends for long contexts).
 *
 * Shape: rmsnorm one 256-thread block per row, the row held in registers so x and w are read
 * once (not again after the reduction), q8_1 blocks quantized by whole warps; qk-norm-rope one
 * warp per head, the head vector staged in shared memory for the rotation partner, the angle in
 * double reduced mod 2 pi before sincosf (cheaper than a double pow and sincos per pair).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda_rope_impl.cuh"

#define NORM_THREADS 256

__device__ __forceinline__ float block_sum(float v, float *red) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = hmoe_warp_sum(v);
    __syncthreads(); /* red may still be read from an earlier call */
    if (lane == 0) red[warp] = v;
    __syncthreads();
    float s = 0.0f;
    for (int i = 0; i < (int)(blockDim.x >> 5); i++) s += red[i];
    return s;
}

#define NORM_MAXPT 16 /* values per thread kept in registers: rows up to 4096 */

__global__ void __launch_bounds__(NORM_THREADS) rmsnorm_kernel(struct hmoe_cuda_rmsnorm_args a) {
    __shared__ float red[NORM_THREADS / 32];
    const int64_t row = blockIdx.x;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    float *x = a.x + row * a.x_stride;
    const float *add = a.add ? a.add + row * a.add_stride : nullptr;
    uint8_t *qrow = a.out_q8_1 ? (uint8_t *)a.out_q8_1 + row * hmoe_cu_q8_1_row_bytes(a.n) : nullptr;
    if (a.n <= NORM_THREADS * NORM_MAXPT) {
        /* one read of x (and add, w): element tid + 256j; with n % 32 == 0 that is lane `lane` of
         * the 32-block warp + 8j, so the q8_1 blocks are quantized by whole warps */
        float xv[NORM_MAXPT], wv[NORM_MAXPT], av[NORM_MAXPT], ss = 0.0f;
        /* all loads first (no store in between), so they are in flight together */
#pragma unroll
        for (int j = 0; j < NORM_MAXPT; j++) {
            const int64_t i = tid + (int64_t)NORM_THREADS * j;
            const bool in = i < a.n;
            xv[j] = in ? x[i] : 0.0f;
            wv[j] = in ? a.w[i] : 0.0f;
            av[j] = in && add ? add[i] : 0.0f;
        }
#pragma unroll
        for (int j = 0; j < NORM_MAXPT; j++) {
            const int64_t i = tid + (int64_t)NORM_THREADS * j;
            if (add) {
                xv[j] += av[j];
                if (i < a.n) x[i] = xv[j];
            }
            ss += xv[j] * xv[j];
        }
        ss = block_sum(ss, red);
        const float r = 1.0f / sqrtf(ss / (float)a.n + a.eps);
#pragma unroll
        for (int j = 0; j < NORM_MAXPT; j++) {
            const int64_t i = tid + (int64_t)NORM_THREADS * j;
            if (a.n % 32 == 0 ? (32 * (warp + 8 * (int64_t)j) < a.n) : (i < a.n)) { /* warp-uniform when n % 32 == 0 */
                const float h = (xv[j] * r) * wv[j];
                if (a.out_f32) a.out_f32[row * a.n + i] = h;
                if (a.out_f16) ((__half *)a.out_f16)[row * a.n + i] = __float2half_rn(h);
                if (qrow) {
                    const int64_t b = warp + 8 * (int64_t)j;
                    hmoe_cu_q8_1_warp(h, (int8_t *)qrow + 32 * b, (float2 *)(qrow + a.n) + b);
                }
            }
        }
        return;
    }
    float ss = 0.0f;
    for (int64_t i = tid; i < a.n; i += blockDim.x) {
        float v = x[i];
        if (add) {
            v += add[i];
            x[i] = v;
        }
        ss += v * v;
    }
    ss = block_sum(ss, red);
    const float r = 1.0f / sqrtf(ss / (float)a.n + a.eps);
    if (a.n % 32 == 0) {
        for (int64_t b = warp; b < a.n / 32; b += blockDim.x >> 5) {
            const int64_t i = 32 * b + lane;
            float h = (x[i] * r) * a.w[i];
            if (a.out_f32) a.out_f32[row * a.n + i] = h;
            if (a.out_f16) ((__half *)a.out_f16)[row * a.n + i] = __float2half_rn(h);
            if (qrow) hmoe_cu_q8_1_warp(h, (int8_t *)qrow + 32 * b, (float2 *)(qrow + a.n) + b);
        }
    } else {
        for (int64_t i = tid; i < a.n; i += blockDim.x) {
            float h = (x[i] * r) * a.w[i];
            if (a.out_f32) a.out_f32[row * a.n + i] = h;
            if (a.out_f16) ((__half *)a.out_f16)[row * a.n + i] = __float2half_rn(h);
        }
    }
}

/* One row without a residual add (the decode step's attention-input norm): the row is
 * split over n/128 blocks of 4 warps. Every block sums the squares of the whole row (8 KB from L2
 * for n = 2048) and normalises and quantizes only its own 128 values, so the q8_1 blocks are made
 * in parallel instead of 8 in series per warp (one block per row: 6-7 us under ncu on the H200).
 * An add is not taken: blocks would race on the x they write and the others read. */
#define NORM1_WARPS 4
__global__ void __launch_bounds__(NORM1_WARPS * 32) rmsnorm1_kernel(struct hmoe_cuda_rmsnorm_args a) {
    __shared__ float red[NORM1_WARPS];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const float4 *x4 = (const float4 *)a.x;
    float ss = 0.0f;
    for (int64_t i = tid; i < a.n / 4; i += NORM1_WARPS * 32) {
        const float4 v = x4[i];
        ss += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
    }
    ss = hmoe_warp_sum(ss);
    if (lane == 0) red[warp] = ss;
    __syncthreads();
    ss = 0.0f;
    for (int i = 0; i < NORM1_WARPS; i++) ss += red[i];
    const float r = 1.0f / sqrtf(ss / (float)a.n + a.eps);
    const int64_t b = (int64_t)blockIdx.x * NORM1_WARPS + warp; /* this warp's 32-value q8_1 block */
    const int64_t i = 32 * b + lane;
    const float h = (a.x[i] * r) * a.w[i];
    if (a.out_f32) a.out_f32[i] = h;
    if (a.out_f16) ((__half *)a.out_f16)[i] = __float2half_rn(h);
    if (a.out_q8_1) {
        uint8_t *q = (uint8_t *)a.out_q8_1;
        hmoe_cu_q8_1_warp(h, (int8_t *)q + 32 * b, (float2 *)(q + a.n) + b);
    }
}

extern "C" enum hmoe_status hmoe_cuda_rmsnorm(const struct hmoe_cuda_rmsnorm_args *a, void *stream,
                                              struct hmoe_err *err) {
    HMOE_CUDA_REQUIRE(err, a->n > 0 && a->nrows >= 0 && a->x_stride >= a->n && a->w,
                      "rmsnorm: bad shape (n %lld, nrows %lld, x_stride %lld) or no weights", (long long)a->n,
                      (long long)a->nrows, (long long)a->x_stride);
    HMOE_CUDA_REQUIRE(err, !a->add || a->add_stride >= a->n, "rmsnorm: add_stride smaller than n");
    HMOE_CUDA_REQUIRE(err, !a->out_q8_1 || (a->n % 32 == 0 && hmoe_cu_aligned(a->out_q8_1, 16)),
                      "rmsnorm: q8_1 output needs n %% 32 == 0 and a 16-byte aligned buffer");
    HMOE_CUDA_REQUIRE(err, a->nrows <= 0x7fffffff, "rmsnorm: too many rows");
    if (a->nrows == 0) return HMOE_OK;
    if (a->nrows == 1 && !a->add && a->n % (32 * NORM1_WARPS) == 0 && hmoe_cu_aligned(a->x, 16)) {
        hmoe_cu_launch(rmsnorm1_kernel, dim3((unsigned)(a->n / (32 * NORM1_WARPS))), dim3(32 * NORM1_WARPS), 0,
                       hmoe_cu_stream(stream), *a);
        HMOE_CUDA_LAUNCH_CHECK(err, "rmsnorm");
        return HMOE_OK;
    }
    hmoe_cu_launch(rmsnorm_kernel, dim3((unsigned)a->nrows), dim3(NORM_THREADS), 0, hmoe_cu_stream(stream), *a);
    HMOE_CUDA_LAUNCH_CHECK(err, "rmsnorm");
    return HMOE_OK;
}

/* ---------------------------------------------------------------------------------------- */

extern "C" void hmoe_cuda_rope_yarn_corr(struct hmoe_cuda_rope *r, int n_ctx_orig, float beta_fast, float beta_slow) {
    /* corr(beta) = n_rot * ln(n_ctx_orig / (beta * 2 pi)) / (2 ln base)   (qwen3moe.md §5.2) */
    const double two_pi = 6.283185307179586;
    double lb = 2.0 * log((double)r->freq_base);
    double lo = floor(r->n_rot * log(n_ctx_orig / (beta_fast * two_pi)) / lb);
    double hi = ceil(r->n_rot * log(n_ctx_orig / (beta_slow * two_pi)) / lb);
    r->corr_low = (float)fmax(0.0, lo);
    r->corr_high = (float)fmin((double)(r->n_rot - 1), hi);
    r->ext_factor = 1.0f;
    r->mscale = (float)(1.0 + 0.1 * log(1.0 / (double)r->freq_scale));
}

#define QKR_WARPS 4
#define QKR_MAXD HMOE_QKR_MAXD

__global__ void __launch_bounds__(QKR_WARPS * 32) qk_norm_rope_kernel(struct hmoe_cuda_qkv_args a) {
    __shared__ float sh[QKR_WARPS][QKR_MAXD];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int head = blockIdx.x * QKR_WARPS + warp;
    const int64_t t = blockIdx.y;
    if (head >= a.n_head + a.n_head_kv) return;
    const bool is_q = head < a.n_head;
    const int h = is_q ? head : head - a.n_head;
    const int D = a.head_dim, nj = D / 32;
    const int pos = a.pos[t];
    const float *src = is_q ? a.q + t * a.q_stride + (int64_t)h * D : a.k + t * a.kv_stride + (int64_t)h * D;
    float v[HMOE_QKR_MAXJ];
    hmoe_cu_warp_norm_rope(src, D, is_q ? a.q_norm : a.k_norm, a.eps, a.rope, pos, sh[warp], v);
    if (is_q) {
        float *dst = a.q + t * a.q_stride + (int64_t)h * D;
#pragma unroll
        for (int j = 0; j < HMOE_QKR_MAXJ; j++)
            if (j < nj) dst[lane + 32 * j] = v[j];
    } else {
        hmoe_cu_store_cache_row(a.kv, false, h, pos, v, true);
        const float *vs = a.v + t * a.kv_stride + (int64_t)h * D;
#pragma unroll
        for (int j = 0; j < HMOE_QKR_MAXJ; j++)
            if (j < nj) v[j] = vs[lane + 32 * j];
        hmoe_cu_store_cache_row(a.kv, true, h, pos, v, true);
    }
}

extern "C" enum hmoe_status hmoe_cuda_qk_norm_rope_store(const struct hmoe_cuda_qkv_args *a, void *stream,
                                                         struct hmoe_err *err) {
    const int D = a->head_dim;
    HMOE_CUDA_REQUIRE(err, D >= 32 && D <= QKR_MAXD && D % 32 == 0, "qk_norm_rope: head_dim %d not a multiple of 32 in [32, %d]", D, QKR_MAXD);
    HMOE_CUDA_REQUIRE(err, a->n_head > 0 && a->n_head_kv > 0 && a->n_head % a->n_head_kv == 0,
                      "qk_norm_rope: n_head %d must be a positive multiple of n_head_kv %d", a->n_head, a->n_head_kv);
    HMOE_CUDA_REQUIRE(err, a->rope.n_rot >= 0 && a->rope.n_rot % 2 == 0 && a->rope.n_rot <= D,
                      "qk_norm_rope: n_rot %d must be even and <= head_dim %d", a->rope.n_rot, D);
    HMOE_CUDA_REQUIRE(err, hmoe_cu_kv_type_ok(a->kv.type_k) && hmoe_cu_kv_type_ok(a->kv.type_v),
                      "qk_norm_rope: KV cache types %s / %s (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 or IQ4_NL)",
                      hmoe_type_name(a->kv.type_k), hmoe_type_name(a->kv.type_v));
    HMOE_CUDA_REQUIRE(err, a->kv.head_dim == D && a->kv.n_head_kv == a->n_head_kv && a->kv.k && a->kv.v,
                      "qk_norm_rope: KV cache shape does not match the heads");
    HMOE_CUDA_REQUIRE(err, a->q_stride >= (int64_t)a->n_head * D && a->kv_stride >= (int64_t)a->n_head_kv * D &&
                               a->ntok >= 0 && a->ntok <= 65535 && a->pos,
                      "qk_norm_rope: bad strides, ntok (<= 65535) or no positions");
    if (a->ntok == 0) return HMOE_OK;
    dim3 grid((unsigned)hmoe_cu_div_up(a->n_head + a->n_head_kv, QKR_WARPS), (unsigned)a->ntok);
    hmoe_cu_launch(qk_norm_rope_kernel, grid, dim3(QKR_WARPS * 32), 0, hmoe_cu_stream(stream), *a);
    HMOE_CUDA_LAUNCH_CHECK(err, "qk_norm_rope");
    return HMOE_OK;
}

/* ---------------------------------------------------------------------------------------- */

__global__ void swiglu_kernel(const float *g, const float *u, int64_t in_stride, int64_t nrows, int64_t n, float *z,
                              int64_t z_stride) {
    const int64_t total = nrows * n;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = i / n, c = i % n;
        const float gv = g[r * in_stride + c];
        z[r * z_stride + c] = gv / (1.0f + expf(-gv)) * u[r * in_stride + c];
    }
}

extern "C" enum hmoe_status hmoe_cuda_swiglu(const float *d_g, const float *d_u, int64_t in_stride, int64_t nrows,
                                             int64_t n, float *d_z, int64_t z_stride, void *stream,
                                             struct hmoe_err *err) {
    HMOE_CUDA_REQUIRE(err, n > 0 && nrows >= 0 && in_stride >= n && z_stride >= n, "swiglu: bad shape");
    if (nrows == 0) return HMOE_OK;
    const int64_t blocks = HMOE_MIN(hmoe_cu_div_up(nrows * n, 256), (int64_t)1 << 20);
    swiglu_kernel<<<(unsigned)blocks, 256, 0, hmoe_cu_stream(stream)>>>(d_g, d_u, in_stride, nrows, n, d_z, z_stride);
    HMOE_CUDA_LAUNCH_CHECK(err, "swiglu");
    return HMOE_OK;
}

__global__ void add_kernel(const float *a, const float *b, int64_t n, float *y) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        y[i] = a[i] + b[i];
}

extern "C" enum hmoe_status hmoe_cuda_add(const float *d_a, const float *d_b, int64_t n, float *d_y, void *stream,
                                          struct hmoe_err *err) {
    HMOE_CUDA_REQUIRE(err, n >= 0, "add: negative count");
    if (n == 0) return HMOE_OK;
    const int64_t blocks = HMOE_MIN(hmoe_cu_div_up(n, 256), (int64_t)1 << 20);
    add_kernel<<<(unsigned)blocks, 256, 0, hmoe_cu_stream(stream)>>>(d_a, d_b, n, d_y);
    HMOE_CUDA_LAUNCH_CHECK(err, "add");
    return HMOE_OK;
}

/* One block per row. */
__global__ void add_bias_kernel(float *y, int64_t stride, const float *__restrict__ b, int64_t n) {
    float *row = y + (int64_t)blockIdx.x * stride;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) row[i] += b[i];
}

extern "C" enum hmoe_status hmoe_cuda_add_bias(float *d_y, int64_t stride, const float *d_b, int64_t ntok, int64_t n,
                                               void *stream, struct hmoe_err *err) {
    HMOE_CUDA_REQUIRE(err, ntok >= 0 && ntok <= 0x7fffffff && n >= 0 && stride >= n && (ntok == 0 || (d_y && d_b)),
                      "add_bias: bad shape or NULL buffer");
    if (ntok == 0 || n == 0) return HMOE_OK;
    add_bias_kernel<<<(unsigned)ntok, 256, 0, hmoe_cu_stream(stream)>>>(d_y, stride, d_b, n);
    HMOE_CUDA_LAUNCH_CHECK(err, "add_bias");
    return HMOE_OK;
}
