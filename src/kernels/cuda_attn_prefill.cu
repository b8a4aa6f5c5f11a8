/* cuda_attn_prefill.cu — causal prefill attention on tensor cores (flash-attention-2 style) over the
 * VRAM KV cache (f16 or q8_0 rows, head-major, cuda.h), and the dispatcher hmoe_cuda_attn_prefill
 * that picks it or the CUDA-core kernel of cuda_attn.cu (hmoe_cuda_attn_prefill_old, which also takes
 * every other KV type and mixed K / V types).
 * Implements qwen3moe.md §4.3 steps 7-9 (GQA head h reads kv head h / (n_head / n_head_kv), scale,
 * causal mask inclusive of the query's own position, softmax, weighted V) for a batch of tokens.
 * Relies on mma.sync m16n8k16 (f16 in, f32 accumulate), ldmatrix and cp.async: sm_80 and newer.
 *
 * A block holds BR = 16 x NW query rows (row r = token r / HB, q head hq0 + r % HB; HB = 1 by
 * default, HB = n_head / n_head_kv packs the heads that share a kv head into one block). Each warp
 * keeps its 16 rows of q (pre-scaled by scale * log2 e, f16) as A fragments in registers and an
 * f32 output accumulator; the block walks BC-position tiles of K and V from 0 to the last
 * position any of its rows may see, double-buffered in shared memory with cp.async (q8_0 tiles
 * land raw and are expanded to f16 in shared memory). Per tile: S = Q K^T on tensor cores, the
 * mask only where a tile passes the smallest position of the warp's rows, online softmax in f32
 * (base 2), P rounded to f16 and O += P V on tensor cores. Rows see key t iff t <= pos[token]
 * (capped at n_ctx - 1, as the CPU attention does), so earlier context (chat turns, micro-batches) is
 * covered; cache rows past the block's last visible position are zero-filled, never read. With a
 * sliding window (kv.window) rows also need pos - t < window, and the walk starts at the tile of
 * the block's first visible position; sink logits (kv.sinks) join each row's denominator at the end.
 */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda_impl.cuh"

namespace {

constexpr int PF_PAD = 8; /* halves of padding per shared row: ldmatrix rows land in distinct banks */

/* Positions per K/V tile by head size (registers: q D/4, o D/2, s BC/2 per lane). */
template <int D>
struct pf_tile {
    static constexpr int BC = D >= 256 ? 32 : 64;
};

__device__ __forceinline__ uint32_t pf_smem_addr(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }

/* Copy 16 (or 8 / 4) bytes global -> shared without registers; ok = false writes zeros and reads nothing. */
__device__ __forceinline__ void pf_cp16(void *dst, const void *src, bool ok) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(pf_smem_addr(dst)), "l"(src), "r"(ok ? 16 : 0)
                 : "memory");
}
template <int N>
__device__ __forceinline__ void pf_cp_small(void *dst, const void *src, bool ok) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(pf_smem_addr(dst)), "l"(src), "n"(N),
                 "r"(ok ? N : 0)
                 : "memory");
}
__device__ __forceinline__ void pf_cp_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
__device__ __forceinline__ void pf_cp_wait1() { asm volatile("cp.async.wait_group 1;\n" ::: "memory"); }

__device__ __forceinline__ void pf_ldsm4(uint32_t (&r)[4], const void *p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(pf_smem_addr(p))
                 : "memory");
}
__device__ __forceinline__ void pf_ldsm4_t(uint32_t (&r)[4], const void *p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(pf_smem_addr(p))
                 : "memory");
}
/* c += a (16x16, row) * b (16x8, col), f16 in, f32 accumulate. */
__device__ __forceinline__ void pf_mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ uint32_t pf_pack(float lo, float hi) {
    const __half2 h = __floats2half2_rn(lo, hi);
    return *(const uint32_t *)&h;
}

/* Bytes of shared memory a launch needs (dynamic part). */
template <int D, int NW, bool Q8>
constexpr size_t pf_smem_bytes() {
    constexpr int BC = pf_tile<D>::BC;
    constexpr size_t tile = (size_t)BC * (D + PF_PAD) * 2;
    constexpr size_t rb = Q8 ? (size_t)(D / 32) * 34 : (size_t)D * 2;
    return Q8 ? 2 * tile + 4 * (size_t)BC * rb : 4 * tile;
}

template <int D, int NW, bool Q8>
__global__ void __launch_bounds__(NW * 32) attn_prefill_mma_kernel(const float *__restrict__ q, int64_t q_stride,
                                                                   int64_t ntok, const int32_t *__restrict__ pos,
                                                                   struct hmoe_cuda_kv kv, int G, int HB, float qscale,
                                                                   float *out_f32, __half *out_f16, int64_t out_stride,
                                                                   int n_qtiles) {
    constexpr int BC = pf_tile<D>::BC, BR = 16 * NW, LD = D + PF_PAD, TILE = BC * LD;
    constexpr int RB = Q8 ? (D / 32) * 34 : D * 2; /* cache row bytes */
    constexpr int NT = NW * 32;
    extern __shared__ __align__(16) uint8_t pf_smem[];
    __shared__ int s_pos[BR];
    __shared__ int s_max, s_minlo;
    /* f16 cache: K[2][TILE], V[2][TILE] halves; q8_0: K[TILE], V[TILE] halves + raw K[2], raw V[2] */
    __half *sK = (__half *)pf_smem;
    __half *sV = sK + (Q8 ? 1 : 2) * TILE;
    uint8_t *raw = (uint8_t *)(sV + (Q8 ? 1 : 2) * TILE);

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int hq0 = blockIdx.x * HB, hk = hq0 / G;
    const int tpb = BR / HB;                                          /* tokens per block */
    const int64_t tok0 = (int64_t)(n_qtiles - 1 - (int)blockIdx.y) * tpb; /* longest rows first */

    if (tid == 0) s_max = -1, s_minlo = INT_MAX;
    __syncthreads();
    if (tid < BR) {
        const int64_t tok = tok0 + tid / HB;
        int p = -1;
        if (tok < ntok) p = (int)min((int64_t)pos[tok], kv.n_ctx - 1);
        if (p < 0) p = -1;
        s_pos[tid] = p;
        atomicMax(&s_max, p);
        if (p >= 0) atomicMin(&s_minlo, kv.window > 0 ? max(0, p - kv.window + 1) : 0);
    }
    __syncthreads();
    const int maxpos = s_max;
    const int W = kv.window; /* > 0: row of position p sees keys t > p - W only */

    /* this lane's two rows (fragment rows lane/4 and lane/4 + 8 of the warp's 16) */
    const int ra = warp * 16 + (lane >> 2), rb = ra + 8;
    const int pa = s_pos[ra], pb = s_pos[rb];
    int wmax = lane < 16 ? s_pos[warp * 16 + lane] : -1;
    int wmin = lane < 16 && wmax >= 0 ? wmax : INT_MAX; /* smallest valid position of the warp */
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        wmax = max(wmax, __shfl_xor_sync(0xffffffffu, wmax, o));
        wmin = min(wmin, __shfl_xor_sync(0xffffffffu, wmin, o));
    }

    /* q rows -> f16 A fragments, scale (and log2 e) folded in */
    uint32_t qf[D / 16][4];
    {
        const float *qa = pa >= 0 ? q + (tok0 + ra / HB) * q_stride + (int64_t)(hq0 + ra % HB) * D : nullptr;
        const float *qb = pb >= 0 ? q + (tok0 + rb / HB) * q_stride + (int64_t)(hq0 + rb % HB) * D : nullptr;
        const int c = 2 * (lane & 3);
#pragma unroll
        for (int kc = 0; kc < D / 16; kc++) {
            const float2 z = make_float2(0.0f, 0.0f);
            const float2 x0 = qa ? *(const float2 *)(qa + kc * 16 + c) : z, x2 = qa ? *(const float2 *)(qa + kc * 16 + 8 + c) : z;
            const float2 x1 = qb ? *(const float2 *)(qb + kc * 16 + c) : z, x3 = qb ? *(const float2 *)(qb + kc * 16 + 8 + c) : z;
            qf[kc][0] = pf_pack(x0.x * qscale, x0.y * qscale);
            qf[kc][1] = pf_pack(x1.x * qscale, x1.y * qscale);
            qf[kc][2] = pf_pack(x2.x * qscale, x2.y * qscale);
            qf[kc][3] = pf_pack(x3.x * qscale, x3.y * qscale);
        }
    }

    const uint8_t *kbase = (const uint8_t *)kv.k + (size_t)hk * (size_t)kv.n_ctx * RB;
    const uint8_t *vbase = (const uint8_t *)kv.v + (size_t)hk * (size_t)kv.n_ctx * RB;
    /* queue the copies of tile starting at t0 into buffer buf; rows past maxpos become zeros */
    auto load = [&](int t0, int buf) {
        if constexpr (!Q8) {
            constexpr int CH = D / 8; /* 16-byte chunks per row */
            __half *dk = sK + buf * TILE, *dv = sV + buf * TILE;
            for (int i = tid; i < BC * CH; i += NT) {
                const int r = i / CH, c = i % CH, t = t0 + r;
                const bool ok = t <= maxpos;
                const size_t off = ok ? (size_t)t * RB + (size_t)c * 16 : 0;
                pf_cp16(dk + r * LD + c * 8, kbase + off, ok);
                pf_cp16(dv + r * LD + c * 8, vbase + off, ok);
            }
        } else {
            constexpr int CB = RB % 16 == 0 ? 16 : RB % 8 == 0 ? 8 : 4, CH = RB / CB;
            uint8_t *dk = raw + (size_t)buf * BC * RB, *dv = raw + (size_t)(2 + buf) * BC * RB;
            for (int i = tid; i < BC * CH; i += NT) {
                const int r = i / CH, c = i % CH, t = t0 + r;
                const bool ok = t <= maxpos;
                const size_t off = ok ? (size_t)t * RB + (size_t)c * CB : 0;
                if constexpr (CB == 16) {
                    pf_cp16(dk + r * RB + c * CB, kbase + off, ok);
                    pf_cp16(dv + r * RB + c * CB, vbase + off, ok);
                } else {
                    pf_cp_small<CB>(dk + r * RB + c * CB, kbase + off, ok);
                    pf_cp_small<CB>(dv + r * RB + c * CB, vbase + off, ok);
                }
            }
        }
    };

    float o[D / 8][4];
#pragma unroll
    for (int n = 0; n < D / 8; n++) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};

    const int ntiles = maxpos < 0 ? 0 : maxpos / BC + 1;
    const int it0 = maxpos < 0 || W <= 0 ? 0 : s_minlo / BC; /* tiles before the window are never read */
    if (ntiles > it0) load(it0 * BC, it0 & 1);
    pf_cp_commit();
    for (int it = it0; it < ntiles; it++) {
        if (it + 1 < ntiles) load((it + 1) * BC, (it + 1) & 1);
        pf_cp_commit(); /* possibly empty: keeps "wait for all but the newest group" exact */
        pf_cp_wait1();
        __syncthreads();
        const __half *tk, *tv;
        if constexpr (Q8) {
            /* expand the raw q8_0 rows (d, 32 x int8 per block) to f16 rows; d * q rounded once */
            const uint8_t *rk = raw + (size_t)(it & 1) * BC * RB, *rv = raw + (size_t)(2 + (it & 1)) * BC * RB;
            for (int i = tid; i < 2 * BC * (D / 32); i += NT) {
                const int kvsel = i / (BC * (D / 32)), j = i % (BC * (D / 32));
                const int r = j / (D / 32), b = j % (D / 32);
                const uint8_t *src = (kvsel ? rv : rk) + r * RB + b * 34;
                const float d = __half2float(*(const __half *)src);
                const uint16_t *qs = (const uint16_t *)(src + 2);
                uint4 *dst = (uint4 *)((kvsel ? sV : sK) + r * LD + b * 32);
#pragma unroll
                for (int w = 0; w < 4; w++) {
                    uint32_t h[4];
#pragma unroll
                    for (int u = 0; u < 4; u++) {
                        const uint32_t two = qs[w * 4 + u];
                        h[u] = pf_pack(d * (float)(int8_t)(two & 0xff), d * (float)(int8_t)(two >> 8));
                    }
                    dst[w] = make_uint4(h[0], h[1], h[2], h[3]);
                }
            }
            __syncthreads();
            tk = sK, tv = sV;
        } else {
            tk = sK + (it & 1) * TILE, tv = sV + (it & 1) * TILE;
        }
        const int t0 = it * BC;
        if (t0 <= wmax && (W <= 0 || t0 + BC - 1 > wmin - W)) {
            float s[BC / 8][4];
#pragma unroll
            for (int j = 0; j < BC / 8; j++) s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.0f;
            /* S = Q K^T: B fragments of K rows straight from ldmatrix (rows = positions) */
#pragma unroll
            for (int kc = 0; kc < D / 16; kc++) {
#pragma unroll
                for (int j = 0; j < BC / 8; j += 2) {
                    uint32_t b[4];
                    pf_ldsm4(b, tk + (j * 8 + (lane >> 4) * 8 + (lane & 7)) * LD + kc * 16 + ((lane >> 3) & 1) * 8);
                    pf_mma(s[j], qf[kc], b[0], b[1]);
                    pf_mma(s[j + 1], qf[kc], b[2], b[3]);
                }
            }
            if (t0 + BC - 1 > wmin || (W > 0 && t0 <= wmax - W)) { /* some row cannot see the whole tile */
#pragma unroll
                for (int j = 0; j < BC / 8; j++)
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        const int t = t0 + j * 8 + 2 * (lane & 3) + (e & 1), p = e < 2 ? pa : pb;
                        if (t > p || (W > 0 && p - t >= W)) s[j][e] = -INFINITY;
                    }
            }
            /* online softmax (base 2) of rows a (e = 0, 1) and b (e = 2, 3); a row lives in 4 lanes */
            float mx[2] = {m[0], m[1]};
#pragma unroll
            for (int j = 0; j < BC / 8; j++) {
                mx[0] = fmaxf(mx[0], fmaxf(s[j][0], s[j][1]));
                mx[1] = fmaxf(mx[1], fmaxf(s[j][2], s[j][3]));
            }
            float mu[2], corr[2], sum[2] = {0.0f, 0.0f};
#pragma unroll
            for (int i = 0; i < 2; i++) {
                mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 1));
                mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 2));
                mu[i] = mx[i] == -INFINITY ? 0.0f : mx[i]; /* nothing visible yet: p = 0, corr = 0 */
                corr[i] = exp2f(m[i] - mu[i]);
                m[i] = mx[i];
            }
#pragma unroll
            for (int j = 0; j < BC / 8; j++) {
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    s[j][e] = exp2f(s[j][e] - mu[e >> 1]);
                    sum[e >> 1] += s[j][e];
                }
            }
#pragma unroll
            for (int i = 0; i < 2; i++) l[i] = l[i] * corr[i] + sum[i]; /* lane-partial; summed at the end */
#pragma unroll
            for (int n = 0; n < D / 8; n++) {
                o[n][0] *= corr[0], o[n][1] *= corr[0];
                o[n][2] *= corr[1], o[n][3] *= corr[1];
            }
            /* O += P V: the S accumulators are P's A fragments; V via transposing ldmatrix */
#pragma unroll
            for (int kk = 0; kk < BC / 16; kk++) {
                const uint32_t a[4] = {pf_pack(s[2 * kk][0], s[2 * kk][1]), pf_pack(s[2 * kk][2], s[2 * kk][3]),
                                       pf_pack(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                                       pf_pack(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
                for (int n = 0; n < D / 8; n += 2) {
                    uint32_t b[4];
                    pf_ldsm4_t(b, tv + (kk * 16 + ((lane >> 3) & 1) * 8 + (lane & 7)) * LD + n * 8 + (lane >> 4) * 8);
                    pf_mma(o[n], a, b[0], b[1]);
                    pf_mma(o[n + 1], a, b[2], b[3]);
                }
            }
        }
        __syncthreads(); /* the next iteration's copies overwrite this tile's buffer */
    }

#pragma unroll
    for (int i = 0; i < 2; i++) {
        l[i] += __shfl_xor_sync(0xffffffffu, l[i], 1);
        l[i] += __shfl_xor_sync(0xffffffffu, l[i], 2);
    }
#pragma unroll
    for (int i = 0; i < 2; i++) {
        const int r = i ? rb : ra, p = i ? pb : pa;
        if (p < 0) continue;
        float inv = l[i] > 0.0f ? 1.0f / l[i] : 0.0f;
        if (kv.sinks) { /* the head's sink logit in the denominator (base 2 like the scores) */
            const float s2 = kv.sinks[hq0 + r % HB] * 1.4426950408889634f, M = fmaxf(m[i], s2), c = exp2f(m[i] - M);
            inv = c / (l[i] * c + exp2f(s2 - M));
        }
        const int64_t base = (tok0 + r / HB) * out_stride + (int64_t)(hq0 + r % HB) * D + 2 * (lane & 3);
#pragma unroll
        for (int n = 0; n < D / 8; n++) {
            const float v0 = o[n][2 * i] * inv, v1 = o[n][2 * i + 1] * inv;
            if (out_f32) *(float2 *)(out_f32 + base + n * 8) = make_float2(v0, v1);
            if (out_f16) *(__half2 *)(out_f16 + base + n * 8) = __floats2half2_rn(v0, v1);
        }
    }
}

template <int D, int NW, bool Q8>
cudaError_t pf_launch(const float *q, int64_t q_stride, int64_t ntok, const int32_t *pos, const struct hmoe_cuda_kv *kv,
                      int G, int HB, float qscale, float *o32, __half *o16, int64_t os, int n_head, cudaStream_t st) {
    constexpr size_t smem = pf_smem_bytes<D, NW, Q8>();
    static bool attr_set = false; /* idempotent: a race only sets the same attribute twice */
    if (!attr_set) {
        const cudaError_t e = cudaFuncSetAttribute(attn_prefill_mma_kernel<D, NW, Q8>,
                                                   cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        if (e != cudaSuccess) return e;
        attr_set = true;
    }
    const int tpb = 16 * NW / HB;
    const int n_qtiles = (int)hmoe_cu_div_up(ntok, tpb);
    dim3 grid((unsigned)(n_head / HB), (unsigned)n_qtiles);
    attn_prefill_mma_kernel<D, NW, Q8><<<grid, NW * 32, smem, st>>>(q, q_stride, ntok, pos, *kv, G, HB, qscale, o32, o16,
                                                                     os, n_qtiles);
    return cudaGetLastError();
}

template <int D, bool Q8>
cudaError_t pf_launch_nw(int nw, const float *q, int64_t q_stride, int64_t ntok, const int32_t *pos,
                         const struct hmoe_cuda_kv *kv, int G, int HB, float qscale, float *o32, __half *o16, int64_t os,
                         int n_head, cudaStream_t st) {
    return nw == 8 ? pf_launch<D, 8, Q8>(q, q_stride, ntok, pos, kv, G, HB, qscale, o32, o16, os, n_head, st)
                   : pf_launch<D, 4, Q8>(q, q_stride, ntok, pos, kv, G, HB, qscale, o32, o16, os, n_head, st);
}

/* The MMA launch of the AUTO kinds: 4 warps (64 query rows per block), one head per block. */
constexpr int PF_AUTO_WARPS = 4;

/* Why the tensor-core kernel cannot take this call (NULL: it can). */
const char *pf_refusal(const float *d_q, int64_t q_stride, const struct hmoe_cuda_kv *kv, int n_head, const float *d_out_f32,
                       const uint16_t *d_out_f16, int64_t out_stride) {
    if (!kv || kv->type_k != kv->type_v || (kv->type_k != HMOE_TYPE_F16 && kv->type_k != HMOE_TYPE_Q8_0))
        return "KV cache types must be F16 or Q8_0, the same for K and V";
    const int D = kv->head_dim;
    if (D != 64 && D != 128 && D != 256) return "head_dim must be 64, 128 or 256";
    if (kv->n_head_kv <= 0 || n_head <= 0 || n_head % kv->n_head_kv) return "n_head must be a multiple of n_head_kv";
    if (!kv->k || !kv->v || kv->n_ctx <= 0 || kv->n_ctx > INT_MAX / 2) return "empty or oversized KV cache";
    if (!hmoe_cu_aligned(kv->k, 16) || !hmoe_cu_aligned(kv->v, 16)) return "KV cache must be 16-byte aligned";
    if (q_stride % 2 || out_stride % 2 || !hmoe_cu_aligned(d_q, 8) || !hmoe_cu_aligned(d_out_f32, 8) ||
        !hmoe_cu_aligned(d_out_f16, 4))
        return "q / output rows must be 8-byte aligned (even strides)";
    return nullptr;
}

} // namespace

extern "C" enum hmoe_status hmoe_cuda_attn_prefill_mma(const float *d_q, int64_t q_stride, int64_t ntok,
                                                       const int32_t *d_pos, const struct hmoe_cuda_kv *kv, int n_head,
                                                       float scale, int warps, int heads_per_block, float *d_out_f32,
                                                       uint16_t *d_out_f16, int64_t out_stride, void *stream,
                                                       struct hmoe_err *err) {
    const char *why = pf_refusal(d_q, q_stride, kv, n_head, d_out_f32, d_out_f16, out_stride);
    HMOE_CUDA_REQUIRE(err, !why, "attn_prefill_mma: %s", why);
    const int D = kv->head_dim, G = n_head / kv->n_head_kv;
    const int nw = warps == 8 ? 8 : 4, hb = heads_per_block <= 0 ? 1 : heads_per_block;
    HMOE_CUDA_REQUIRE(err, G % hb == 0 && (16 * nw) % hb == 0,
                      "attn_prefill_mma: heads per block %d must divide n_head / n_head_kv = %d and %d rows", hb, G,
                      16 * nw);
    HMOE_CUDA_REQUIRE(err, q_stride >= (int64_t)n_head * D && out_stride >= (int64_t)n_head * D && ntok >= 0 && d_pos &&
                               (d_out_f32 || d_out_f16) && hmoe_cu_div_up(ntok, 16 * nw / hb) <= 65535,
                      "attn_prefill_mma: bad strides, ntok or no output");
    if (ntok == 0) return HMOE_OK;
    cudaStream_t st = hmoe_cu_stream(stream);
    __half *o16 = (__half *)d_out_f16;
    const float qs = scale * 1.4426950408889634f; /* exp(x) = exp2(x log2 e) */
    const bool q8 = kv->type_k == HMOE_TYPE_Q8_0;
    cudaError_t e;
    switch (D) {
    case 64:
        e = q8 ? pf_launch_nw<64, true>(nw, d_q, q_stride, ntok, d_pos, kv, G, hb, qs, d_out_f32, o16, out_stride, n_head, st)
               : pf_launch_nw<64, false>(nw, d_q, q_stride, ntok, d_pos, kv, G, hb, qs, d_out_f32, o16, out_stride, n_head, st);
        break;
    case 128:
        e = q8 ? pf_launch_nw<128, true>(nw, d_q, q_stride, ntok, d_pos, kv, G, hb, qs, d_out_f32, o16, out_stride, n_head, st)
               : pf_launch_nw<128, false>(nw, d_q, q_stride, ntok, d_pos, kv, G, hb, qs, d_out_f32, o16, out_stride, n_head, st);
        break;
    default:
        e = q8 ? pf_launch_nw<256, true>(nw, d_q, q_stride, ntok, d_pos, kv, G, hb, qs, d_out_f32, o16, out_stride, n_head, st)
               : pf_launch_nw<256, false>(nw, d_q, q_stride, ntok, d_pos, kv, G, hb, qs, d_out_f32, o16, out_stride, n_head, st);
        break;
    }
    if (e != cudaSuccess)
        return HMOE_RAISE(err, HMOE_ERR_DEVICE, "attn_prefill_mma: kernel launch failed: %s", cudaGetErrorString(e));
    return HMOE_OK;
}

extern "C" enum hmoe_status hmoe_cuda_attn_prefill_with(enum hmoe_cuda_attn_prefill_kind kind, const float *d_q,
                                                        int64_t q_stride, int64_t ntok, const int32_t *d_pos,
                                                        const struct hmoe_cuda_kv *kv, int n_head, float scale,
                                                        float *d_out_f32, uint16_t *d_out_f16, int64_t out_stride,
                                                        void *stream, struct hmoe_err *err) {
    if (kind == HMOE_CUDA_ATTN_PREFILL_AUTO) {
        /* the tensor-core kernel needs sm_80 (mma.sync f16 with f32 accumulate, cp.async, ldmatrix) */
        static int cc_major = -1;
        if (cc_major < 0) {
            int dev = 0;
            cudaDeviceProp p;
            cc_major = cudaGetDevice(&dev) == cudaSuccess && cudaGetDeviceProperties(&p, dev) == cudaSuccess ? p.major : 0;
        }
        const bool ok = cc_major >= 8 && !pf_refusal(d_q, q_stride, kv, n_head, d_out_f32, d_out_f16, out_stride) &&
                        hmoe_cu_div_up(ntok, 16 * PF_AUTO_WARPS) <= 65535;
        kind = ok ? HMOE_CUDA_ATTN_PREFILL_MMA : HMOE_CUDA_ATTN_PREFILL_OLD;
    }
    if (kind == HMOE_CUDA_ATTN_PREFILL_MMA)
        return hmoe_cuda_attn_prefill_mma(d_q, q_stride, ntok, d_pos, kv, n_head, scale, PF_AUTO_WARPS, 1, d_out_f32,
                                          d_out_f16, out_stride, stream, err);
    return hmoe_cuda_attn_prefill_old(d_q, q_stride, ntok, d_pos, kv, n_head, scale, d_out_f32, d_out_f16, out_stride, stream,
                                      err);
}

extern "C" enum hmoe_status hmoe_cuda_attn_prefill(const float *d_q, int64_t q_stride, int64_t ntok, const int32_t *d_pos,
                                                   const struct hmoe_cuda_kv *kv, int n_head, float scale, float *d_out_f32,
                                                   uint16_t *d_out_f16, int64_t out_stride, void *stream,
                                                   struct hmoe_err *err) {
    return hmoe_cuda_attn_prefill_with(HMOE_CUDA_ATTN_PREFILL_AUTO, d_q, q_stride, ntok, d_pos, kv, n_head, scale, d_out_f32,
                                       d_out_f16, out_stride, stream, err);
}
