/* cuda_moe.cu — the MoE block on the GPU (qwen3moe.md §4.4): router top-k with softmax and
 * renormalisation, decode expert kernels that read the chosen expert ids from device memory
 * (no host round trip, graph-capturable), and the prefill grouping (plan) + combine around the
 * grouped GEMM of cuda_mmq.cu.
 *
 *  topk       one warp per token; k rounds of a warp arg-max (ties -> lower expert index);
 *             router_topk fuses the decode router matvec with it (the last block done runs a
 *             one-pass rank top-k with all 128 threads of that block, moe_topk_block)
 *  gate_up    32 threads per row of gate AND up of one slot's expert, 2 rows each: act(g + bg, u + bu)
 *             (silu(g) * u or the clamped swiglu-oai; biases optional, by expert id)
 *  down       128 threads per output row walk the (slot, slice) pairs of all k experts of the
 *             token, so each output is sum_j w_j * (dot_j + optional bias_j) plus the residual, written once
 *             (one warp per 4 rows: 17 / 28 us for the Qwen3-30B shapes, latency bound)
 *  plan       one 1024-thread block: per-warp expert counts, prefix sums, then a stable scatter
 *             (warp match_any ranks) -> rows of an expert in slot order; tiles of <= 64 rows
 *  combine    one block per token: y += sum_j w_j * ye[plan row of slot j]
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda_mmv_impl.cuh"
#include "kernels/cuda_moe_impl.cuh"
#include "kernels/cuda_types.cuh"

/* ------------------------------------------------ router ------------------------------------------------ */

#define TOPK_MAXV 16 /* values per lane: n_expert <= 512 */

static bool gating_ok(int gating) { return gating == HMOE_CUDA_GATING_SOFTMAX || gating == HMOE_CUDA_GATING_TOPK_SOFTMAX; }

/* The routing weight of lane j < k's chosen logit sel_v (gmax: the largest logit; se: the sum of
 * exp(logit - gmax) over all experts, warp-summed), by the gating rule (cuda.h). All lanes call it. */
__device__ __forceinline__ float moe_route_weight(int gating, int k, float sel_v, float gmax, float se) {
    const int lane = threadIdx.x & 31;
    if (gating == HMOE_CUDA_GATING_TOPK_SOFTMAX) { /* softmax over the k chosen only, no renormalisation */
        const float e = lane < k ? expf(sel_v - gmax) : 0.0f;
        return e / hmoe_warp_sum(e);
    }
    const float p = lane < k ? expf(sel_v - gmax) / se : 0.0f;
    const float ps = hmoe_warp_sum(p);
    return p / fmaxf(ps, 6.103515625e-5f);
}

/* Top-k of one token's logits (+ bias) by one warp (all 32 lanes call it). */
__device__ void moe_topk_warp(const float *lg, const float *bias, int gating, int E, int k, int32_t *ids,
                              float *weights) {
    const int lane = threadIdx.x & 31;
    float v[TOPK_MAXV];
#pragma unroll
    for (int i = 0; i < TOPK_MAXV; i++)
        v[i] = (lane + 32 * i < E) ? __ldcg(lg + lane + 32 * i) + (bias ? bias[lane + 32 * i] : 0.0f) : -INFINITY;
    uint32_t taken = 0;
    float sel_v = 0.0f, gmax = 0.0f;
    int sel_i = 0;
    for (int j = 0; j < k; j++) {
        /* best untaken value of this lane: the first (lowest index) among equals */
        float bv = -INFINITY;
        int bi = 0x7fffffff;
#pragma unroll
        for (int i = 0; i < TOPK_MAXV; i++) {
            const int idx = lane + 32 * i;
            if (idx < E && !((taken >> i) & 1) && (v[i] > bv || bi == 0x7fffffff)) {
                bv = v[i];
                bi = idx;
            }
        }
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
            const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
            const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
            if (ov > bv || (ov == bv && oi < bi)) {
                bv = ov;
                bi = oi;
            }
        }
        if ((bi & 31) == lane) taken |= 1u << (bi >> 5);
        if (j == 0) gmax = bv;
        if (lane == j) sel_v = bv, sel_i = bi;
    }
    /* softmax over all experts, then renormalise over the chosen ones (or over the chosen only) */
    float se = 0.0f;
#pragma unroll
    for (int i = 0; i < TOPK_MAXV; i++)
        if (lane + 32 * i < E) se += expf(v[i] - gmax);
    se = hmoe_warp_sum(se);
    const float wt = moe_route_weight(gating, k, sel_v, gmax, se);
    if (lane < k) {
        ids[lane] = sel_i;
        weights[lane] = wt;
    }
}

/* The same top-k by a whole block of 128 threads (the last block of the decode router): the
 * logits go to shared memory, every thread ranks its own entries against all E in one pass
 * (rank = entries with a larger value, or an equal value and a lower index: the order of
 * moe_topk_warp), and the entries of rank < k are the chosen ones, in order. No k serial rounds
 * of warp arg-max: 2.2 us less per layer on the H200. The softmax
 * sums run in warp 0 in moe_topk_warp's order, so ids and weights are bit-identical to it. */
__device__ void moe_topk_block(const float *lg, const float *bias, int gating, int E, int k, int32_t *ids,
                               float *weights) {
    __shared__ __align__(16) float s_lg[32 * TOPK_MAXV];
    __shared__ float s_sel_v[32];
    __shared__ int s_sel_i[32];
    const int tid = threadIdx.x, lane = tid & 31;
    for (int i = tid; i < E; i += blockDim.x) s_lg[i] = __ldcg(lg + i) + (bias ? bias[i] : 0.0f);
    if (tid < 32) s_sel_v[tid] = -INFINITY, s_sel_i[tid] = 0; /* NaN logits leave ranks unfilled: ids stay in range */
    __syncthreads();
    for (int i = tid; i < E; i += blockDim.x) {
        const float v = s_lg[i];
        int r0 = 0, r1 = 0, j = 0;
        for (; j + 1 < E; j += 2) { /* two independent counters */
            const float a = s_lg[j], b = s_lg[j + 1];
            r0 += (a > v) || (a == v && j < i);
            r1 += (b > v) || (b == v && j + 1 < i);
        }
        if (j < E) r0 += (s_lg[j] > v) || (s_lg[j] == v && j < i);
        const int rank = r0 + r1;
        if (rank < k) s_sel_v[rank] = v, s_sel_i[rank] = i;
    }
    __syncthreads();
    if (tid >= 32) return;
    const float gmax = s_sel_v[0];
    float se = 0.0f;
#pragma unroll
    for (int i = 0; i < TOPK_MAXV; i++)
        if (lane + 32 * i < E) se += expf(s_lg[lane + 32 * i] - gmax);
    se = hmoe_warp_sum(se);
    const float wt = moe_route_weight(gating, k, lane < k ? s_sel_v[lane] : 0.0f, gmax, se);
    if (lane < k) {
        ids[lane] = s_sel_i[lane];
        weights[lane] = wt;
    }
}

__global__ void moe_topk_kernel(const float *__restrict__ logits, const float *__restrict__ bias, int gating, int64_t ntok,
                                int E, int k, int32_t *__restrict__ ids, float *__restrict__ weights) {
    const int64_t t = (int64_t)blockIdx.x * (blockDim.x / 32) + (threadIdx.x >> 5);
    if (t >= ntok) return;
    moe_topk_warp(logits + t * E, bias, gating, E, k, ids + t * k, weights + t * k);
}

/* Decode router in one launch: block b computes logits 2b, 2b+1 (F32 rows, 128 threads per
 * row, f32 activations); the last block to finish (device counter; it resets it for the next
 * launch, so graphs replay) reads all logits back through L2 and runs the top-k. */
__global__ void __launch_bounds__(128) moe_router_topk_kernel(const float *__restrict__ w, const float *__restrict__ bias,
                                                              int gating, const float *__restrict__ x, int ncols, int E,
                                                              int k, float *logits, int32_t *ids, float *weights,
                                                              unsigned int *counter) {
    __shared__ float red[4][2];
    __shared__ bool last;
    const int tid = threadIdx.x;
    const int r0 = 2 * blockIdx.x;
    float acc[2] = {0.0f, 0.0f};
    for (int c = 4 * tid; c < ncols; c += 4 * 128) {
        const float4 xv = *(const float4 *)(x + c);
#pragma unroll
        for (int r = 0; r < 2; r++) {
            if (r0 + r < E) {
                const float4 wv = __ldg((const float4 *)(w + (size_t)(r0 + r) * ncols + c));
                acc[r] += wv.x * xv.x + wv.y * xv.y + wv.z * xv.z + wv.w * xv.w;
            }
        }
    }
    hmoe_mmv_group_sum<128>(acc, red);
    if (tid == 0) {
        for (int r = 0; r < 2; r++)
            if (r0 + r < E) logits[r0 + r] = acc[r];
        __threadfence();
        last = atomicAdd(counter, 1u) == gridDim.x - 1;
    }
    __syncthreads();
    if (!last) return;
    __threadfence();
    if (tid == 0) *counter = 0;
    moe_topk_block(logits, bias, gating, E, k, ids, weights); /* L2 loads (__ldcg): the other blocks' fenced writes */
}

/* Decode RMSNorm + router + top-k in one launch: block b normalises the residual row itself
 * (x and the norm weights are 2 x n floats from L2; the router rows it multiplies are loaded
 * first, before the wait for the previous kernel, since weights never change), computes logits
 * 2b and 2b+1, writes its share of the normalised row (q8_1 blocks b*4 + warp, ...), and the last
 * block runs the top-k. h = (x * r) * w as in rmsnorm_kernel (qwen3moe.md §4.2). */
#define RN_MAXV 8 /* float4 per thread: n <= 128 * 4 * 8 = 4096 */
__global__ void __launch_bounds__(128) moe_router_norm_topk_kernel(struct hmoe_cuda_router_norm_args a) {
    __shared__ float red[4][2];
    __shared__ float s_ss[4];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int r0 = 2 * blockIdx.x;
    const int n = (int)a.n, nv = (n + 511) / 512; /* float4 j of this thread: column 4 tid + 512 j, if < n */
    float4 wv[2][RN_MAXV], xv[RN_MAXV], nw[RN_MAXV];
#pragma unroll
    for (int j = 0; j < RN_MAXV; j++)
#pragma unroll
        for (int r = 0; r < 2; r++)
            if (j < nv && 4 * tid + 512 * j < n && r0 + r < a.n_expert)
                wv[r][j] = __ldg((const float4 *)(a.router + (size_t)(r0 + r) * n + 4 * tid + 512 * j));
    float ss = 0.0f;
#pragma unroll
    for (int j = 0; j < RN_MAXV; j++) {
        xv[j] = nw[j] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (j < nv && 4 * tid + 512 * j < n) {
            xv[j] = *(const float4 *)(a.x + 4 * tid + 512 * j);
            nw[j] = __ldg((const float4 *)(a.norm_w + 4 * tid + 512 * j));
            ss += xv[j].x * xv[j].x + xv[j].y * xv[j].y + xv[j].z * xv[j].z + xv[j].w * xv[j].w;
        }
    }
    ss = hmoe_warp_sum(ss);
    if (lane == 0) s_ss[warp] = ss;
    __syncthreads();
    const float rs = 1.0f / sqrtf((s_ss[0] + s_ss[1] + s_ss[2] + s_ss[3]) / (float)n + a.eps);
    float acc[2] = {0.0f, 0.0f};
#pragma unroll
    for (int j = 0; j < RN_MAXV; j++) {
        if (j < nv && 4 * tid + 512 * j < n) {
            const float4 h = make_float4((xv[j].x * rs) * nw[j].x, (xv[j].y * rs) * nw[j].y, (xv[j].z * rs) * nw[j].z,
                                         (xv[j].w * rs) * nw[j].w);
#pragma unroll
            for (int r = 0; r < 2; r++)
                if (r0 + r < a.n_expert) acc[r] += wv[r][j].x * h.x + wv[r][j].y * h.y + wv[r][j].z * h.z + wv[r][j].w * h.w;
        }
    }
    /* this block's share of the normalised row: q8_1 block qb, lane = value */
    uint8_t *q = (uint8_t *)a.out_q8_1;
    for (int qb = blockIdx.x * 4 + warp; qb < n / 32; qb += gridDim.x * 4) {
        const int i = 32 * qb + lane;
        const float h = (a.x[i] * rs) * a.norm_w[i];
        if (a.out_f32) a.out_f32[i] = h;
        if (q) hmoe_cu_q8_1_warp(h, (int8_t *)q + 32 * qb, (float2 *)(q + n) + qb);
    }
    hmoe_mmv_group_sum<128>(acc, red);
    if (tid == 0)
        for (int r = 0; r < 2; r++)
            if (r0 + r < a.n_expert) a.logits[r0 + r] = acc[r];
    if (!hmoe_cu_last_block(a.counter, gridDim.x)) return;
    moe_topk_block(a.logits, a.router_bias, a.gating, a.n_expert, a.k, a.ids, a.weights); /* L2 loads (__ldcg) */
}

extern "C" enum hmoe_status hmoe_cuda_moe_router_norm_topk(const struct hmoe_cuda_router_norm_args *a, void *stream,
                                                           struct hmoe_err *err) {
    HMOE_CUDA_REQUIRE(err, a->n_expert > 0 && a->n_expert <= 32 * TOPK_MAXV && a->k >= 1 && a->k <= a->n_expert && a->k <= 32,
                      "moe_router_norm_topk: n_expert %d / k %d out of range", a->n_expert, a->k);
    HMOE_CUDA_REQUIRE(err, gating_ok(a->gating), "moe_router_norm_topk: unknown gating rule %d", a->gating);
    HMOE_CUDA_REQUIRE(err, a->n > 0 && a->n % 32 == 0 && a->n <= 512 * RN_MAXV,
                      "moe_router_norm_topk: n %lld must be a multiple of 32 up to %d", (long long)a->n, 512 * RN_MAXV);
    HMOE_CUDA_REQUIRE(err, a->x && a->norm_w && a->router && a->logits && a->ids && a->weights && a->counter &&
                               hmoe_cu_aligned(a->x, 16) && hmoe_cu_aligned(a->norm_w, 16) && hmoe_cu_aligned(a->router, 16),
                      "moe_router_norm_topk: NULL or misaligned (16 bytes) buffer");
    HMOE_CUDA_REQUIRE(err, !a->out_q8_1 || hmoe_cu_aligned(a->out_q8_1, 16), "moe_router_norm_topk: q8_1 output must be 16-byte aligned");
    hmoe_cu_launch(moe_router_norm_topk_kernel, dim3((unsigned)hmoe_cu_div_up(a->n_expert, 2)), dim3(128), 0,
                   hmoe_cu_stream(stream), *a);
    HMOE_CUDA_LAUNCH_CHECK(err, "moe_router_norm_topk");
    return HMOE_OK;
}

extern "C" enum hmoe_status hmoe_cuda_moe_topk(const float *d_logits, const float *d_bias, int gating, int64_t ntok,
                                               int n_expert, int k, int32_t *d_ids, float *d_weights, void *stream,
                                               struct hmoe_err *err) {
    HMOE_CUDA_REQUIRE(err, gating_ok(gating), "moe_topk: unknown gating rule %d", gating);
    HMOE_CUDA_REQUIRE(err, n_expert > 0 && n_expert <= 32 * TOPK_MAXV, "moe_topk: n_expert %d not in 1..%d", n_expert,
                      32 * TOPK_MAXV);
    HMOE_CUDA_REQUIRE(err, k >= 1 && k <= n_expert && k <= 32, "moe_topk: k %d not in 1..min(n_expert, 32)", k);
    HMOE_CUDA_REQUIRE(err, ntok >= 0 && ntok < ((int64_t)1 << 31), "moe_topk: bad ntok");
    if (ntok == 0) return HMOE_OK;
    moe_topk_kernel<<<(unsigned)hmoe_cu_div_up(ntok, 4), 128, 0, hmoe_cu_stream(stream)>>>(d_logits, d_bias, gating, ntok,
                                                                                           n_expert, k, d_ids, d_weights);
    HMOE_CUDA_LAUNCH_CHECK(err, "moe_topk");
    return HMOE_OK;
}

extern "C" enum hmoe_status hmoe_cuda_moe_router_topk(const float *d_w, const float *d_bias, int gating, const float *d_x,
                                                      int64_t ncols, int n_expert, int k, float *d_logits, int32_t *d_ids,
                                                      float *d_weights, unsigned int *d_counter, void *stream,
                                                      struct hmoe_err *err) {
    HMOE_CUDA_REQUIRE(err, gating_ok(gating), "moe_router_topk: unknown gating rule %d", gating);
    HMOE_CUDA_REQUIRE(err, n_expert > 0 && n_expert <= 32 * TOPK_MAXV && k >= 1 && k <= n_expert && k <= 32,
                      "moe_router_topk: n_expert %d / k %d out of range", n_expert, k);
    HMOE_CUDA_REQUIRE(err, ncols > 0 && ncols % 4 == 0 && ncols < (1 << 30) && hmoe_cu_aligned(d_w, 16) && hmoe_cu_aligned(d_x, 16),
                      "moe_router_topk: ncols must be a multiple of 4, w and x 16-byte aligned");
    HMOE_CUDA_REQUIRE(err, d_counter && d_logits && d_ids && d_weights, "moe_router_topk: NULL buffer");
    hmoe_cu_launch(moe_router_topk_kernel, dim3((unsigned)hmoe_cu_div_up(n_expert, 2)), dim3(128), 0,
                   hmoe_cu_stream(stream), d_w, d_bias, gating, d_x, (int)ncols, n_expert, k, d_logits, d_ids, d_weights,
                   d_counter);
    HMOE_CUDA_LAUNCH_CHECK(err, "moe_router_topk");
    return HMOE_OK;
}

/* -------------------------------------------- decode experts -------------------------------------------- */

/* gate_up: TPR = 32 threads per row pair (gate row f, up row f), RPT = 2 pairs per thread.
 * down: TPR = 128 threads per output row walk the (expert slot, slice) pairs of all k experts,
 * RPT = 2 rows per thread. Layout and reduction: cuda_mmv_impl.cuh. */
#define MOE_GU_TPR 32  /* H200: 32 beats 64 by 21 / 41 us per token (Q4_K_M / IQ2 mix) */
#define MOE_DN_TPR 128 /* 64: no measurable difference */
#define MOE_RPT 2

template <class TR, int TPR>
__global__ void __launch_bounds__(HMOE_MMV_THREADS) moe_gate_up_kernel(struct hmoe_cuda_experts g, const uint8_t *__restrict__ upw,
                                                                       const float *__restrict__ ub,
                                                                       const int32_t *__restrict__ ids, int k,
                                                                       const uint8_t *__restrict__ x, size_t x_stride,
                                                                       float *__restrict__ z, int64_t z_stride) {
    constexpr int G = HMOE_MMV_THREADS / TPR;
    __shared__ float red[HMOE_MMV_THREADS / 32][2 * MOE_RPT];
    const int tl = threadIdx.x % TPR;
    const int64_t slot = blockIdx.y;
    const int64_t r0 = ((int64_t)blockIdx.x * G + threadIdx.x / TPR) * MOE_RPT;
    const int e = ids[slot];
    const bool ok = e >= 0 && e < g.n_expert;
    const int be = !ok ? 0 : g.bias_ids ? g.bias_ids[slot] : e; /* the expert whose biases apply */
    const int nblocks = (int)(g.ncols / TR::blck);
    const uint8_t *xr = x + (size_t)(slot / k) * x_stride;
    const uint8_t *gw = (const uint8_t *)g.w + (size_t)(ok ? e : 0) * g.expert_stride_bytes;
    const uint8_t *uw = upw + (size_t)(ok ? e : 0) * g.expert_stride_bytes;
    const uint8_t *gr[MOE_RPT], *ur[MOE_RPT];
#pragma unroll
    for (int r = 0; r < MOE_RPT; r++) {
        const size_t off = (size_t)HMOE_MIN(r0 + r, g.nrows - 1) * g.row_bytes;
        gr[r] = gw + off;
        ur[r] = uw + off;
    }
    float acc[2 * MOE_RPT]; /* gate rows, then up rows */
#pragma unroll
    for (int i = 0; i < 2 * MOE_RPT; i++) acc[i] = 0.0f;
    const int nsl = nblocks * TR::ns;
#pragma unroll 2
    for (int s = tl; s < nsl; s += TPR) {
        const int blk = s / TR::ns, sl = s % TR::ns;
        const int8_t *aq = (const int8_t *)xr + (size_t)blk * TR::blck;
        const float2 *ad = (const float2 *)(xr + g.ncols) + (size_t)blk * (TR::blck / 32);
#pragma unroll
        for (int r = 0; r < MOE_RPT; r++) {
            acc[r] += TR::vdot(gr[r] + (size_t)blk * TR::bytes, sl, aq, ad);
            acc[MOE_RPT + r] += TR::vdot(ur[r] + (size_t)blk * TR::bytes, sl, aq, ad);
        }
    }
    hmoe_mmv_group_sum<TPR>(acc, red);
    if (tl == 0) {
        float *zr = z + slot * z_stride;
#pragma unroll
        for (int r = 0; r < MOE_RPT; r++) {
            if (r0 + r >= g.nrows) continue;
            float gv = acc[r], uv = acc[MOE_RPT + r];
            if (g.bias) gv += g.bias[(size_t)be * g.nrows + r0 + r], uv += ub[(size_t)be * g.nrows + r0 + r];
            zr[r0 + r] = ok ? hmoe_cu_glu(g.act, gv, uv) : 0.0f; /* a bad expert id gives zeros */
        }
    }
}

template <class TR, int TPR>
__global__ void __launch_bounds__(HMOE_MMV_THREADS) moe_down_kernel(struct hmoe_cuda_experts dn,
                                                                    const int32_t *__restrict__ ids,
                                                                    const float *__restrict__ wts, int k,
                                                                    const uint8_t *__restrict__ zq, size_t zq_stride,
                                                                    float *y, int64_t y_stride) {
    constexpr int G = HMOE_MMV_THREADS / TPR;
    __shared__ const uint8_t *s_w[32];
    __shared__ float s_wt[32];
    __shared__ int s_be[32]; /* expert of slot j for the bias */
    __shared__ float red[HMOE_MMV_THREADS / 32][MOE_RPT];
    const int tl = threadIdx.x % TPR;
    const int64_t t = blockIdx.y;
    if (threadIdx.x < k) {
        const int e = ids[t * k + threadIdx.x];
        const bool ok = e >= 0 && e < dn.n_expert;
        s_w[threadIdx.x] = (const uint8_t *)dn.w + (size_t)(ok ? e : 0) * dn.expert_stride_bytes;
        s_wt[threadIdx.x] = ok ? wts[t * k + threadIdx.x] : 0.0f;
        s_be[threadIdx.x] = !ok ? -1 : dn.bias_ids ? dn.bias_ids[t * k + threadIdx.x] : e;
    }
    __syncthreads();
    const int64_t r0 = ((int64_t)blockIdx.x * G + threadIdx.x / TPR) * MOE_RPT;
    const int nblocks = (int)(dn.ncols / TR::blck);
    const int nsl = nblocks * TR::ns;
    size_t roff[MOE_RPT];
#pragma unroll
    for (int r = 0; r < MOE_RPT; r++) roff[r] = (size_t)HMOE_MIN(r0 + r, dn.nrows - 1) * dn.row_bytes;
    float acc[MOE_RPT];
#pragma unroll
    for (int r = 0; r < MOE_RPT; r++) acc[r] = 0.0f;
#pragma unroll 2
    for (int idx = tl; idx < k * nsl; idx += TPR) {
        const int j = idx / nsl, s = idx % nsl;
        const int blk = s / TR::ns, sl = s % TR::ns;
        const uint8_t *xr = zq + (size_t)(t * k + j) * zq_stride;
        const int8_t *aq = (const int8_t *)xr + (size_t)blk * TR::blck;
        const float2 *ad = (const float2 *)(xr + dn.ncols) + (size_t)blk * (TR::blck / 32);
        const uint8_t *wb = s_w[j] + (size_t)blk * TR::bytes;
        const float wj = s_wt[j];
#pragma unroll
        for (int r = 0; r < MOE_RPT; r++) acc[r] += wj * TR::vdot(wb + roff[r], sl, aq, ad);
    }
    hmoe_mmv_group_sum<TPR>(acc, red);
    if (tl == 0) {
#pragma unroll
        for (int r = 0; r < MOE_RPT; r++) {
            if (r0 + r >= dn.nrows) continue;
            if (dn.bias) /* each expert's bias is inside its weighted output, summed in slot order */
                for (int j = 0; j < k; j++)
                    if (s_be[j] >= 0) acc[r] += s_wt[j] * dn.bias[(size_t)s_be[j] * dn.nrows + r0 + r];
            y[t * y_stride + r0 + r] += acc[r];
        }
    }
}

static const char *experts_check(const struct hmoe_cuda_experts *x, int *blck) {
    int bytes;
    hmoe_cuda_type_geometry(x->type, blck, &bytes);
    if (*blck == 0 || !hmoe_type_info[x->type].is_quantized) return "expert weights must be a quantized type with GPU kernels";
    if (x->ncols <= 0 || x->ncols % *blck || x->ncols % 32 || x->ncols >= (1 << 30)) return "ncols must be a positive multiple of the block size and of 32";
    int a = 16;
    while (bytes % a) a /= 2;
    if (x->row_bytes < (size_t)(x->ncols / *blck) * (size_t)bytes || x->row_bytes % a) return "row_bytes too small or misaligned";
    if (x->expert_stride_bytes < x->row_bytes * (size_t)x->nrows || x->expert_stride_bytes % 16) return "expert_stride_bytes too small or not a multiple of 16";
    if (!hmoe_cu_aligned(x->w, 16)) return "weights must be 16-byte aligned";
    if (x->nrows <= 0 || x->n_expert <= 0) return "empty expert tensor";
    return nullptr;
}

extern "C" enum hmoe_status hmoe_cuda_moe_gate_up(const struct hmoe_cuda_experts *gate, const struct hmoe_cuda_experts *up,
                                                  const int32_t *d_ids, int64_t nslot, int k, const void *d_x,
                                                  size_t x_stride_bytes, float *d_z, int64_t z_stride, void *stream,
                                                  struct hmoe_err *err) {
    int blck;
    const char *why = experts_check(gate, &blck);
    HMOE_CUDA_REQUIRE(err, !why, "moe_gate_up: gate (%s): %s", hmoe_type_name(gate->type), why);
    HMOE_CUDA_REQUIRE(err, up->type == gate->type && up->nrows == gate->nrows && up->ncols == gate->ncols &&
                               up->row_bytes == gate->row_bytes && up->expert_stride_bytes == gate->expert_stride_bytes &&
                               up->n_expert == gate->n_expert && hmoe_cu_aligned(up->w, 16),
                      "moe_gate_up: up (%s) must have gate's type (%s) and shape", hmoe_type_name(up->type),
                      hmoe_type_name(gate->type));
    HMOE_CUDA_REQUIRE(err, k >= 1 && nslot >= 0 && nslot <= 65535 && z_stride >= gate->nrows,
                      "moe_gate_up: bad k, nslot (<= 65535) or z_stride");
    HMOE_CUDA_REQUIRE(err, (gate->act == HMOE_CUDA_ACT_SWIGLU || gate->act == HMOE_CUDA_ACT_SWIGLU_OAI) &&
                               !gate->bias == !up->bias,
                      "moe_gate_up: unknown activation %d, or only one of gate / up has a bias", gate->act);
    HMOE_CUDA_REQUIRE(err, hmoe_cu_aligned(d_x, 16) && x_stride_bytes % 16 == 0 &&
                               x_stride_bytes >= hmoe_cu_q8_1_row_bytes(gate->ncols),
                      "moe_gate_up: activations must be 16-byte aligned q8_1 rows of %lld values", (long long)gate->ncols);
    if (nslot == 0) return HMOE_OK;
    dim3 grid((unsigned)hmoe_cu_div_up(gate->nrows, (HMOE_MMV_THREADS / MOE_GU_TPR) * MOE_RPT), (unsigned)nslot);
    hmoe_cuda_type_dispatch(gate->type, [&](auto tr) {
        using TR = decltype(tr);
        if constexpr (!TR::is_float)
            hmoe_cu_launch(moe_gate_up_kernel<TR, MOE_GU_TPR>, grid, dim3(HMOE_MMV_THREADS), 0, hmoe_cu_stream(stream),
                           *gate, (const uint8_t *)up->w, up->bias, d_ids, k, (const uint8_t *)d_x, x_stride_bytes, d_z,
                           z_stride);
    });
    HMOE_CUDA_LAUNCH_CHECK(err, "moe_gate_up");
    return HMOE_OK;
}

extern "C" enum hmoe_status hmoe_cuda_moe_down(const struct hmoe_cuda_experts *down, const int32_t *d_ids,
                                               const float *d_weights, int64_t ntok, int k, const void *d_zq,
                                               size_t zq_stride_bytes, float *d_y, int64_t y_stride, void *stream,
                                               struct hmoe_err *err) {
    int blck;
    const char *why = experts_check(down, &blck);
    HMOE_CUDA_REQUIRE(err, !why, "moe_down (%s): %s", hmoe_type_name(down->type), why);
    HMOE_CUDA_REQUIRE(err, k >= 1 && k <= 32 && ntok >= 0 && ntok <= 65535 && y_stride >= down->nrows,
                      "moe_down: bad k (1..32), ntok (<= 65535) or y_stride");
    HMOE_CUDA_REQUIRE(err, hmoe_cu_aligned(d_zq, 16) && zq_stride_bytes % 16 == 0 &&
                               zq_stride_bytes >= hmoe_cu_q8_1_row_bytes(down->ncols),
                      "moe_down: activations must be 16-byte aligned q8_1 rows of %lld values", (long long)down->ncols);
    if (ntok == 0) return HMOE_OK;
    dim3 grid((unsigned)hmoe_cu_div_up(down->nrows, (HMOE_MMV_THREADS / MOE_DN_TPR) * MOE_RPT), (unsigned)ntok);
    hmoe_cuda_type_dispatch(down->type, [&](auto tr) {
        using TR = decltype(tr);
        if constexpr (!TR::is_float)
            hmoe_cu_launch(moe_down_kernel<TR, MOE_DN_TPR>, grid, dim3(HMOE_MMV_THREADS), 0, hmoe_cu_stream(stream), *down,
                           d_ids, d_weights, k, (const uint8_t *)d_zq, zq_stride_bytes, d_y, y_stride);
    });
    HMOE_CUDA_LAUNCH_CHECK(err, "moe_down");
    return HMOE_OK;
}

/* ------------------------------------------------ prefill plan ------------------------------------------------ */

#define PLAN_THREADS 1024
#define PLAN_WARPS (PLAN_THREADS / 32)
#define PLAN_MAX_EXPERT 256

__global__ void __launch_bounds__(PLAN_THREADS) moe_plan_kernel(const int32_t *__restrict__ ids, int64_t nrows, int E,
                                                                int32_t *plan) {
    __shared__ int32_t cnt[PLAN_WARPS][PLAN_MAX_EXPERT]; /* per-warp counts, then per-warp start rows */
    __shared__ int32_t tile_start[PLAN_MAX_EXPERT + 1];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    struct hmoe_moe_plan_view pv = hmoe_moe_plan_map(plan, nrows, E);
    for (int i = threadIdx.x; i < PLAN_WARPS * PLAN_MAX_EXPERT; i += blockDim.x) (&cnt[0][0])[i] = 0;
    __syncthreads();
    /* warp w owns the contiguous slots [w*seg, (w+1)*seg) */
    const int64_t seg = (nrows + PLAN_WARPS - 1) / PLAN_WARPS;
    const int64_t s0 = warp * seg, s1 = HMOE_MIN(nrows, s0 + seg);
    for (int64_t s = s0 + lane; s < s1; s += 32) {
        const int e = ids[s];
        if (e >= 0 && e < E) atomicAdd(&cnt[warp][e], 1);
    }
    __syncthreads();
    /* thread e: expert totals, then per-warp start offsets (needs the exclusive scan over experts) */
    __shared__ int32_t total[PLAN_MAX_EXPERT];
    for (int e = threadIdx.x; e < E; e += blockDim.x) {
        int s = 0;
        for (int w = 0; w < PLAN_WARPS; w++) s += cnt[w][e];
        total[e] = s;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        int32_t run = 0, trun = 0;
        for (int e = 0; e < E; e++) {
            pv.offsets[e] = run;
            tile_start[e] = trun;
            run += total[e];
            trun += (total[e] + HMOE_CUDA_MOE_TILE - 1) / HMOE_CUDA_MOE_TILE;
        }
        pv.offsets[E] = run;
        tile_start[E] = trun;
        pv.hdr[0] = trun;
        pv.hdr[1] = E;
        pv.hdr[2] = (int32_t)nrows;
        pv.hdr[3] = (int32_t)hmoe_moe_plan_max_tiles(nrows, E);
    }
    __syncthreads();
    for (int e = threadIdx.x; e < E; e += blockDim.x) {
        int32_t run = pv.offsets[e];
        for (int w = 0; w < PLAN_WARPS; w++) {
            const int32_t c = cnt[w][e];
            cnt[w][e] = run;
            run += c;
        }
        const int nt = tile_start[e + 1] - tile_start[e];
        for (int i = 0; i < nt; i++) {
            int32_t *tl = pv.tiles + 4 * (size_t)(tile_start[e] + i);
            tl[0] = e;
            tl[1] = pv.offsets[e] + i * HMOE_CUDA_MOE_TILE;
            tl[2] = min(HMOE_CUDA_MOE_TILE, total[e] - i * HMOE_CUDA_MOE_TILE);
            tl[3] = 0;
        }
    }
    __syncthreads();
    /* stable scatter: each warp walks its slots in order, 32 at a time */
    for (int64_t base = s0; base < s1; base += 32) {
        const int64_t s = base + lane;
        const bool valid = s < s1;
        const int e = valid ? ids[s] : -1;
        const bool ok = valid && e >= 0 && e < E;
        const unsigned active = __ballot_sync(0xffffffffu, ok);
        const unsigned same = __match_any_sync(0xffffffffu, ok ? e : -1) & active;
        if (ok) {
            const int rank = __popc(same & ((1u << lane) - 1));
            const int row = cnt[warp][e] + rank;
            pv.rows[row] = (int32_t)s;
            pv.row_of_slot[s] = row;
        } else if (valid) {
            pv.row_of_slot[s] = -1;
        }
        __syncwarp();
        if (ok && __ffs(same) - 1 == lane) cnt[warp][e] += __popc(same);
        __syncwarp();
    }
}

extern "C" size_t hmoe_cuda_moe_plan_bytes(int64_t ntok, int k, int n_expert) {
    return hmoe_moe_plan_ints(ntok * k, n_expert) * sizeof(int32_t);
}

extern "C" enum hmoe_status hmoe_cuda_moe_plan_build(const int32_t *d_ids, int64_t ntok, int k, int n_expert,
                                                     void *d_plan, void *stream, struct hmoe_err *err) {
    HMOE_CUDA_REQUIRE(err, n_expert > 0 && n_expert <= PLAN_MAX_EXPERT, "moe_plan: n_expert %d not in 1..%d", n_expert,
                      PLAN_MAX_EXPERT);
    HMOE_CUDA_REQUIRE(err, k >= 1 && ntok >= 0 && ntok * k < ((int64_t)1 << 30), "moe_plan: bad k or ntok");
    HMOE_CUDA_REQUIRE(err, hmoe_cu_aligned(d_plan, 16), "moe_plan: plan buffer must be 16-byte aligned");
    moe_plan_kernel<<<1, PLAN_THREADS, 0, hmoe_cu_stream(stream)>>>(d_ids, ntok * k, n_expert, (int32_t *)d_plan);
    HMOE_CUDA_LAUNCH_CHECK(err, "moe_plan");
    return HMOE_OK;
}

/* ------------------------------------------------ combine ------------------------------------------------ */

__global__ void moe_combine_kernel(const int32_t *__restrict__ row_of_slot, const float *__restrict__ ye, int64_t ye_stride,
                                   const float *__restrict__ wts, int k, int64_t ncols, float *y, int64_t y_stride) {
    const int64_t t = blockIdx.x;
    for (int64_t c = threadIdx.x; c < ncols; c += blockDim.x) {
        float acc = 0.0f;
        for (int j = 0; j < k; j++) {
            const int32_t row = row_of_slot[t * k + j];
            if (row >= 0) acc += wts[t * k + j] * ye[(int64_t)row * ye_stride + c];
        }
        y[t * y_stride + c] += acc;
    }
}

extern "C" enum hmoe_status hmoe_cuda_moe_combine(const void *d_plan, const float *d_ye, int64_t ye_stride,
                                                  const float *d_weights, int64_t ntok, int k, int n_expert,
                                                  int64_t ncols, float *d_y, int64_t y_stride, void *stream,
                                                  struct hmoe_err *err) {
    HMOE_CUDA_REQUIRE(err, k >= 1 && ntok >= 0 && ntok <= 0x7fffffff && ncols > 0 && ye_stride >= ncols && y_stride >= ncols,
                      "moe_combine: bad shape");
    if (ntok == 0) return HMOE_OK;
    struct hmoe_moe_plan_view pv = hmoe_moe_plan_map((void *)d_plan, ntok * k, n_expert);
    moe_combine_kernel<<<(unsigned)ntok, 256, 0, hmoe_cu_stream(stream)>>>(pv.row_of_slot, d_ye, ye_stride, d_weights, k,
                                                                         ncols, d_y, y_stride);
    HMOE_CUDA_LAUNCH_CHECK(err, "moe_combine");
    return HMOE_OK;
}
