/* cuda_mmq.cu — matrix-matrix products for prefill: Y = X·W^T with X f16 activations (tokens
 * as rows, gathered through an expert plan for MoE layers) and W any supported weight type,
 * dequantized tile by tile to f16 in shared memory, multiplied on the tensor cores
 * (mma.sync.m16n8k16, f16 x f16 -> f32). Plus the cuBLAS alternative for dense matrices.
 *
 * Version 2 (int8, below mmq8_kernel) is the fast path for quantized weights; version 1 (f16)
 * serves the float types and IQ1_M.
 * Shape: 128 threads, tile BM tokens x BN features x 64 (K), warp tile 32x32
 * (2 x 4 mma tiles); (BM, BN) = (64, 64) or (32, 128), picked from the tokens per tile. The
 * weight tile is dequantized by TR::dequant8 (the bit-exact f32 values rounded once to f16).
 * Fused epilogues: + residual (f32 out), silu(gate)*up (gate/up fused: two weight tiles share the
 * X tile), f16 output for the next GEMM. Single-buffered; occupancy hides the latency.
 * Measured against cuBLAS (dequantize to f16 + cublasGemmEx) in bench/bench_cuda_mmq.c.
 * The int8 path stages weights (RAW): the weight bytes of 256 K-elements per row are first copied
 * to shared memory with coalesced 16-byte cp.async (double-buffered, the next 256 in flight while
 * the current ones are used), then unpacked from there. Unpacking straight from global memory
 * (4-byte loads touching 16 rows per warp instruction) is bound by L1 wavefronts at ~250 GB/s of
 * weights; it remains the fallback where the staged tiles do not fit shared memory or K is not a
 * multiple of 256.
 * Optional q8_1 output (the gate/up product feeding the int8 down GEMM without an f16 trip).
 */
#include <cublas_v2.h>
#include <stdlib.h>
#include <string.h>

/* The block decoders of cuda_types.cuh read through __ldg (ld.global.nc), which is wrong for
 * shared memory; version 3 decodes blocks staged there. In this file (only) their loads become
 * plain generic loads: __ldg is renamed after the CUDA headers (included first by nvcc) have
 * declared it, so cuda_impl.cuh / cuda_types.cuh stay shared unchanged with the other kernels. */
template <class T>
__device__ __forceinline__ T hmoe_mmq_ld_generic(const T *p) {
    return *p;
}
#define __ldg hmoe_mmq_ld_generic

#include "kernels/cuda_ctx_impl.cuh"
#include "kernels/cuda_moe_impl.cuh"
#include "kernels/cuda_types.cuh"

#define MMQ_BK 64
#define MMQ_PAD 8 /* halves: row stride 144 bytes -> the fragment loads hit 32 distinct banks */
#define MMQ_LDS (MMQ_BK + MMQ_PAD)

struct mmq_params {
    const uint8_t *w, *w_up;
    size_t row_bytes, expert_stride;
    int n, kdim;                 /* features (weight rows per expert), K */
    const __half *x;
    int64_t x_stride;
    const uint8_t *xq;           /* q8_1 rows (int8 path) */
    size_t xq_stride;
    int64_t ntok;                /* dense: tokens; plan: plan rows */
    const int32_t *rows;         /* plan: plan row -> slot; NULL for dense */
    const int32_t *tiles;        /* plan tiles, NULL for dense */
    const int32_t *ntiles;       /* device count of plan tiles */
    int k;                       /* experts per token (plan) */
    bool x_gather;
    float *y32;
    __half *y16;
    int64_t y_stride;
    const float *add;
    int64_t add_stride;
    uint8_t *yq;                 /* q8_1 output rows (int8 path), yq_stride bytes apart */
    size_t yq_stride;
    const float *bias, *bias_up; /* optional [expert][n]: added to the products (gate/up: each its own) */
    const int32_t *bias_expert;  /* optional: the tile's expert x takes bias rows bias_expert[x] (-1: none) */
    int act;                     /* gate/up: HMOE_CUDA_ACT_* */
};

/* Epilogue of one output pair (cols col, col + 1 of the tile's expert): the biases, then the
 * gate/up activation. */
template <bool GATEUP>
__device__ __forceinline__ void mmq_epi_pair(const struct mmq_params &p, int expert, int col, float &v0, float &v1,
                                             float u0, float u1) {
    const int be = p.bias_expert ? p.bias_expert[expert] : expert;
    if (p.bias && col < p.n && be >= 0) {
        const float *b = p.bias + (size_t)be * p.n + col;
        v0 += b[0], v1 += b[1];
        if (GATEUP) {
            const float *bu = p.bias_up + (size_t)be * p.n + col;
            u0 += bu[0], u1 += bu[1];
        }
    }
    if (GATEUP) {
        v0 = hmoe_cu_glu(p.act, v0, u0);
        v1 = hmoe_cu_glu(p.act, v1, u1);
    }
}

__device__ __forceinline__ void mma_16816(float (&c)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

__device__ __forceinline__ uint32_t pack_h2(float a, float b) {
    __half2 h = __floats2half2_rn(a, b);
    return *(uint32_t *)&h;
}

/* Dequantize the BN x 64 weight tile starting at feature n0, column k0 into Bs. */
template <class TR, int BN>
__device__ __forceinline__ void mmq_load_w(const uint8_t *w, size_t row_bytes, int n, int n0, int k0,
                                           __half (*Bs)[MMQ_LDS]) {
    const int tid = threadIdx.x, kg = tid % 8;
    const int kel = k0 + 8 * kg; /* first element of this thread's group */
    const int kb = kel / TR::blck, gi = (kel % TR::blck) / 8;
#pragma unroll
    for (int i = 0; i < BN / 16; i++) {
        const int row = tid / 8 + 16 * i;
        uint4 h = make_uint4(0, 0, 0, 0);
        if (n0 + row < n) {
            float y[8];
            TR::dequant8(w + (size_t)(n0 + row) * row_bytes + (size_t)kb * TR::bytes, gi, y);
            h.x = pack_h2(y[0], y[1]), h.y = pack_h2(y[2], y[3]), h.z = pack_h2(y[4], y[5]), h.w = pack_h2(y[6], y[7]);
        }
        *(uint4 *)&Bs[row][8 * kg] = h;
    }
}

template <class TR, int BM, int BN, bool GATEUP>
__global__ void __launch_bounds__(128) mmq_kernel(struct mmq_params p) {
    __shared__ __align__(16) __half As[BM][MMQ_LDS];
    __shared__ __align__(16) __half Bs[BN][MMQ_LDS];
    __shared__ __align__(16) __half Bu[GATEUP ? BN : 1][MMQ_LDS];
    constexpr int WN = BN / 32; /* warps along N */
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wm = warp / WN, wn = warp % WN;
    const int n0 = blockIdx.x * BN;

    /* which rows of X / Y this block owns */
    int expert = 0;
    int64_t r_begin, r_end;
    if (p.tiles) {
        constexpr int SUB = HMOE_CUDA_MOE_TILE / BM;
        const int ti = blockIdx.y / SUB, sub = blockIdx.y % SUB;
        if (ti >= *p.ntiles) return;
        const int32_t *tl = p.tiles + 4 * ti;
        expert = tl[0];
        r_begin = tl[1] + sub * BM;
        r_end = tl[1] + HMOE_MIN(tl[2], (sub + 1) * BM);
        if (r_begin >= r_end) return;
    } else {
        r_begin = (int64_t)blockIdx.y * BM;
        r_end = HMOE_MIN(p.ntok, r_begin + BM);
    }
    const uint8_t *w = p.w + (size_t)expert * p.expert_stride;
    const uint8_t *wu = GATEUP ? p.w_up + (size_t)expert * p.expert_stride : nullptr;

    /* X rows this thread copies: row tid/8 + 16i, 16-byte column chunk tid%8 */
    constexpr int AR = BM / 16;
    const __half *xrow[AR];
#pragma unroll
    for (int i = 0; i < AR; i++) {
        const int64_t r = r_begin + tid / 8 + 16 * i;
        xrow[i] = nullptr;
        if (r < r_end) {
            const int64_t src = (p.rows && p.x_gather) ? p.rows[r] / p.k : r;
            xrow[i] = p.x + src * p.x_stride;
        }
    }

    float acc[2][4][4], accu[GATEUP ? 2 : 1][4][4];
#pragma unroll
    for (int a = 0; a < 2; a++)
#pragma unroll
        for (int b = 0; b < 4; b++)
#pragma unroll
            for (int c = 0; c < 4; c++) {
                acc[a][b][c] = 0.0f;
                if (GATEUP) accu[a][b][c] = 0.0f;
            }

    for (int k0 = 0; k0 < p.kdim; k0 += MMQ_BK) {
#pragma unroll
        for (int i = 0; i < AR; i++) {
            uint4 v = make_uint4(0, 0, 0, 0);
            if (xrow[i]) v = *(const uint4 *)(xrow[i] + k0 + 8 * (tid % 8));
            *(uint4 *)&As[tid / 8 + 16 * i][8 * (tid % 8)] = v;
        }
        mmq_load_w<TR, BN>(w, p.row_bytes, p.n, n0, k0, Bs);
        if (GATEUP) mmq_load_w<TR, BN>(wu, p.row_bytes, p.n, n0, k0, Bu);
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < MMQ_BK; kk += 16) {
            const int c = kk + 2 * (lane & 3);
            uint32_t af[2][4];
#pragma unroll
            for (int mi = 0; mi < 2; mi++) {
                const int r = wm * 32 + mi * 16 + (lane >> 2);
                af[mi][0] = *(const uint32_t *)&As[r][c];
                af[mi][1] = *(const uint32_t *)&As[r + 8][c];
                af[mi][2] = *(const uint32_t *)&As[r][c + 8];
                af[mi][3] = *(const uint32_t *)&As[r + 8][c + 8];
            }
#pragma unroll
            for (int ni = 0; ni < 4; ni++) {
                const int nr = wn * 32 + ni * 8 + (lane >> 2);
                uint32_t bf[2] = {*(const uint32_t *)&Bs[nr][c], *(const uint32_t *)&Bs[nr][c + 8]};
#pragma unroll
                for (int mi = 0; mi < 2; mi++) mma_16816(acc[mi][ni], af[mi], bf);
                if (GATEUP) {
                    uint32_t bu[2] = {*(const uint32_t *)&Bu[nr][c], *(const uint32_t *)&Bu[nr][c + 8]};
#pragma unroll
                    for (int mi = 0; mi < 2; mi++) mma_16816(accu[GATEUP ? mi : 0][ni], af[mi], bu);
                }
            }
        }
        __syncthreads();
    }

    /* epilogue: c0,c1 -> (row g, cols 2t, 2t+1), c2,c3 -> (row g+8, same cols) */
#pragma unroll
    for (int mi = 0; mi < 2; mi++)
#pragma unroll
        for (int half = 0; half < 2; half++) {
            const int64_t r = r_begin + wm * 32 + mi * 16 + (lane >> 2) + 8 * half;
            if (r >= r_end) continue;
#pragma unroll
            for (int ni = 0; ni < 4; ni++) {
                const int col = n0 + wn * 32 + ni * 8 + 2 * (lane & 3);
                if (col >= p.n) continue; /* p.n is even, so col + 1 < n too */
                float v0 = acc[mi][ni][2 * half], v1 = acc[mi][ni][2 * half + 1];
                mmq_epi_pair<GATEUP>(p, expert, col, v0, v1, accu[GATEUP ? mi : 0][ni][2 * half],
                                     accu[GATEUP ? mi : 0][ni][2 * half + 1]);
                if (p.y32) {
                    if (p.add) {
                        const float2 a = *(const float2 *)(p.add + r * p.add_stride + col);
                        v0 += a.x, v1 += a.y;
                    }
                    *(float2 *)(p.y32 + r * p.y_stride + col) = make_float2(v0, v1);
                } else {
                    *(__half2 *)(p.y16 + r * p.y_stride + col) = __floats2half2_rn(v0, v1);
                }
            }
        }
}

/* ------------------------------------------------------------------------------------------
 * int8 path, unpacking from global memory: tile BM tokens x BN features x 64, the weight tile unpacked by
 * TR::q8chunk to int8 codes + per-16 scale/offset, activations q8_1 (int8 + per-32 scale).
 * Per 32 (or 16 for TR::q8_sub16) of K: C = mma.sync s8 (exact int32), then in f32
 *   acc += C * (d_a * scale_w) + offset_w * (d_a * sum of the activation quants)
 * (the offset term carries the K-quant mins, quants.md §8.4). Measured v1 (f16 dequant) at 27
 * TFLOP/s on the 512-token expert GEMMs: dequantizing every weight to f16 per token tile was the
 * bottleneck; unpacking to int8 is a few integer ops per 4 weights.
 * ------------------------------------------------------------------------------------------ */
#define MMQ8_BK 64
#define MMQ8_LDS 80 /* bytes per shared row: 20 words, so the 8 fragment rows hit distinct banks */

__device__ __forceinline__ void mma_s8_k32(int (&c)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
    asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
__device__ __forceinline__ void mma_s8_k16(int (&c)[4], uint32_t a0, uint32_t a1, uint32_t b0) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};\n"
                 : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
                 : "r"(a0), "r"(a1), "r"(b0));
}

/* Raw staging (version 3): 256 K-elements of each weight row (one K-quant super-block, eight
 * 32-blocks) as the 16-byte aligned chunks that cover them. A row's bytes start at an address
 * aligned to AL (the power of two dividing the block size: row_bytes and the expert stride are
 * multiples of it, gemm_prepare), so NCH chunks always suffice and the staged copy keeps the
 * address modulo 16, i.e. every alignment the block decoders rely on. */
#define MMQ8_RAW_K 256
template <class TR>
struct mmq8_raw {
    static constexpr int RB = MMQ8_RAW_K / TR::blck * TR::bytes; /* bytes of one row's 256 elements */
    static constexpr int AL = TR::bytes % 16 == 0 ? 16 : TR::bytes % 8 == 0 ? 8 : TR::bytes % 4 == 0 ? 4 : TR::bytes % 2 == 0 ? 2 : 1;
    static constexpr int NCH = (RB + (16 - AL) + 15) / 16;
    static constexpr int RS = 16 * NCH; /* shared bytes per row */
};

__device__ __forceinline__ void mmq_cp_async16(void *smem, const void *gmem) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const unsigned sa = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(sa), "l"(gmem));
#else
    *(int4 *)smem = *(const int4 *)gmem;
#endif
}
__device__ __forceinline__ void mmq_cp_async_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;\n" ::);
#endif
}
__device__ __forceinline__ void mmq_cp_async_wait_all() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_all;\n" ::: "memory");
#endif
}

/* Copy rows n0..n0+BN-1 (those < n), elements kg..kg+255, of w into dst (RS bytes per row).
 * Consecutive threads take consecutive chunks of a row: coalesced. Only chunks holding needed
 * bytes are read, so nothing past the last row's bytes rounded up to 16 is touched. */
template <class TR, int BN>
__device__ __forceinline__ void mmq8_stage(const uint8_t *w, size_t row_bytes, int n, int n0, int kg, uint8_t *dst) {
    using G = mmq8_raw<TR>;
    const size_t off = (size_t)(kg / TR::blck) * TR::bytes;
    for (int u = threadIdx.x; u < BN * G::NCH; u += 128) {
        const int f = u / G::NCH, ch = u % G::NCH;
        if (n0 + f >= n) continue;
        const uint8_t *s = w + (size_t)(n0 + f) * row_bytes + off;
        const uint8_t *c = (const uint8_t *)((uintptr_t)s & ~(uintptr_t)15) + 16 * ch;
        if (c < s + G::RB) mmq_cp_async16(dst + f * G::RS + 16 * ch, c);
    }
}

/* The BN x 64 weight tile from feature n0, column k0: int8 codes and per-16 scale / offset.
 * RAW: from the rows staged in `raw` (elements kg..kg+255), else straight from global memory. */
template <class TR, int BN, bool RAW>
__device__ __forceinline__ void mmq8_load_w(const uint8_t *w, size_t row_bytes, int n, int n0, int k0,
                                            const uint8_t *raw, int kg, int8_t (*Bs)[MMQ8_LDS], float (*Bsc)[4],
                                            float (*Bof)[4]) {
#pragma unroll
    for (int i = 0; i < BN / 64; i++) {
        const int u = threadIdx.x + 128 * i, f = u / 2, c2 = u % 2;
        const int kel = k0 + 32 * c2;
        uint32_t q[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        float sc[2] = {0.0f, 0.0f}, of[2] = {0.0f, 0.0f};
        if (n0 + f < n) {
            const uint8_t *b;
            if constexpr (RAW) {
                const size_t go = (size_t)(n0 + f) * row_bytes + (size_t)(kg / TR::blck) * TR::bytes;
                b = raw + f * mmq8_raw<TR>::RS + (((uintptr_t)w + go) & 15) + (size_t)((kel - kg) / TR::blck) * TR::bytes;
            } else {
                b = w + (size_t)(n0 + f) * row_bytes + (size_t)(kel / TR::blck) * TR::bytes;
            }
            TR::q8chunk(b, (kel % TR::blck) / 32, q, sc, of);
        }
        uint4 *dst = (uint4 *)&Bs[f][32 * c2];
        dst[0] = make_uint4(q[0], q[1], q[2], q[3]);
        dst[1] = make_uint4(q[4], q[5], q[6], q[7]);
        Bsc[f][2 * c2] = sc[0], Bsc[f][2 * c2 + 1] = sc[1];
        if (TR::q8_offset) Bof[f][2 * c2] = of[0], Bof[f][2 * c2 + 1] = of[1];
    }
}

/* Dynamic shared memory of the RAW kernel: two stages of one or two (gate/up) staged tiles. */
template <class TR, int BN, bool GATEUP>
static constexpr size_t mmq8_raw_smem_bytes() {
    return (size_t)2 * (GATEUP ? 2 : 1) * BN * mmq8_raw<TR>::RS;
}

/* acc[mi][ni] += C * (d_a * s_w) (+ o_w * d_a * suma) for one 16 or 32 slice of K. */
template <bool OFF>
__device__ __forceinline__ void mmq8_scale(float (&acc)[4], const int (&c)[4], float da_lo, float da_hi, float sa_lo,
                                           float sa_hi, float s0, float s1, float o0, float o1) {
    acc[0] += (float)c[0] * (da_lo * s0);
    acc[1] += (float)c[1] * (da_lo * s1);
    acc[2] += (float)c[2] * (da_hi * s0);
    acc[3] += (float)c[3] * (da_hi * s1);
    if (OFF) {
        acc[0] += o0 * sa_lo, acc[1] += o1 * sa_lo;
        acc[2] += o0 * sa_hi, acc[3] += o1 * sa_hi;
    }
}

template <class TR, int BM, int BN, bool GATEUP, bool RAW>
__global__ void __launch_bounds__(128) mmq8_kernel(struct mmq_params p) {
    constexpr bool OFF = TR::q8_offset;
    __shared__ __align__(16) int8_t As[BM][MMQ8_LDS];
    __shared__ float Ad[BM][2], Asum[BM][4]; /* d per 32, d * sum(q) per 16 */
    __shared__ __align__(16) int8_t Bs[BN][MMQ8_LDS];
    __shared__ float Bsc[BN][4], Bof[OFF ? BN : 1][4];
    __shared__ __align__(16) int8_t Bu[GATEUP ? BN : 1][MMQ8_LDS];
    __shared__ float Busc[GATEUP ? BN : 1][4], Buof[GATEUP && OFF ? BN : 1][4];
    extern __shared__ __align__(16) uint8_t mmq8_dyn[]; /* RAW: [stage][gate, up][BN][RS] */
    constexpr int WN = BN / 32;
    constexpr size_t RAW_TILE = (size_t)BN * mmq8_raw<TR>::RS, RAW_STAGE = (GATEUP ? 2 : 1) * RAW_TILE;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wm = warp / WN, wn = warp % WN, g = lane >> 2, t4 = lane & 3;
    const int n0 = blockIdx.x * BN;

    int expert = 0;
    int64_t r_begin, r_end;
    if (p.tiles) {
        constexpr int SUB = HMOE_CUDA_MOE_TILE / BM;
        const int ti = blockIdx.y / SUB, sub = blockIdx.y % SUB;
        if (ti >= *p.ntiles) return;
        const int32_t *tl = p.tiles + 4 * ti;
        expert = tl[0];
        r_begin = tl[1] + sub * BM;
        r_end = tl[1] + HMOE_MIN(tl[2], (sub + 1) * BM);
        if (r_begin >= r_end) return;
    } else {
        r_begin = (int64_t)blockIdx.y * BM;
        r_end = HMOE_MIN(p.ntok, r_begin + BM);
    }
    const uint8_t *w = p.w + (size_t)expert * p.expert_stride;
    const uint8_t *wu = GATEUP ? p.w_up + (size_t)expert * p.expert_stride : nullptr;

    /* q8_1 rows this thread copies: row (tid + 128i) / 4, 16-byte chunk tid % 4 */
    constexpr int AR = BM / 32;
    const uint8_t *xrow[AR];
#pragma unroll
    for (int i = 0; i < AR; i++) {
        const int64_t r = r_begin + (tid + 128 * i) / 4;
        xrow[i] = nullptr;
        if (r < r_end) {
            const int64_t src = (p.rows && p.x_gather) ? p.rows[r] / p.k : r;
            xrow[i] = p.xq + (size_t)src * p.xq_stride;
        }
    }

    float acc[2][4][4], accu[GATEUP ? 2 : 1][4][4];
#pragma unroll
    for (int a = 0; a < 2; a++)
#pragma unroll
        for (int b = 0; b < 4; b++)
#pragma unroll
            for (int c = 0; c < 4; c++) {
                acc[a][b][c] = 0.0f;
                if (GATEUP) accu[a][b][c] = 0.0f;
            }

    /* activation registers: 16 bytes of q8_1 quants and their d per copied row chunk */
    int4 av[AR];
    float ad[AR];
    auto load_a = [&](int kk) {
#pragma unroll
        for (int i = 0; i < AR; i++) {
            const int ch = tid % 4;
            av[i] = make_int4(0, 0, 0, 0);
            ad[i] = 0.0f;
            if (xrow[i] && kk < p.kdim) {
                av[i] = *(const int4 *)(xrow[i] + kk + 16 * ch);
                ad[i] = ((const float2 *)(xrow[i] + p.kdim))[(kk + 16 * ch) / 32].x;
            }
        }
    };
    if constexpr (RAW) {
        load_a(0);
        mmq8_stage<TR, BN>(w, p.row_bytes, p.n, n0, 0, mmq8_dyn);
        if (GATEUP) mmq8_stage<TR, BN>(wu, p.row_bytes, p.n, n0, 0, mmq8_dyn + RAW_TILE);
        mmq_cp_async_commit();
    }
    for (int k0 = 0; k0 < p.kdim; k0 += MMQ8_BK) {
        const int kg = k0 / MMQ8_RAW_K * MMQ8_RAW_K;
        const uint8_t *raw = RAW ? mmq8_dyn + (size_t)((k0 / MMQ8_RAW_K) & 1) * RAW_STAGE : nullptr;
        if (RAW && k0 == kg) {
            /* this group's copies have landed (each thread waits for its own, the barrier for all);
             * every thread is past the previous group, so the other stage can be refilled */
            mmq_cp_async_wait_all();
            __syncthreads();
            if (kg + MMQ8_RAW_K < p.kdim) {
                uint8_t *nxt = mmq8_dyn + (size_t)(((k0 / MMQ8_RAW_K) + 1) & 1) * RAW_STAGE;
                mmq8_stage<TR, BN>(w, p.row_bytes, p.n, n0, kg + MMQ8_RAW_K, nxt);
                if (GATEUP) mmq8_stage<TR, BN>(wu, p.row_bytes, p.n, n0, kg + MMQ8_RAW_K, nxt + RAW_TILE);
                mmq_cp_async_commit();
            }
        }
        if constexpr (!RAW) load_a(k0);
#pragma unroll
        for (int i = 0; i < AR; i++) {
            const int row = (tid + 128 * i) / 4, ch = tid % 4;
            const int4 v = av[i];
            const float d = ad[i];
            *(int4 *)&As[row][16 * ch] = v;
            if (ch % 2 == 0) Ad[row][ch / 2] = d;
            if (OFF) {
                const int s = hmoe_cu_dp4a(HMOE_ONES, v.x, hmoe_cu_dp4a(HMOE_ONES, v.y, hmoe_cu_dp4a(HMOE_ONES, v.z, hmoe_cu_dp4a(HMOE_ONES, v.w, 0))));
                Asum[row][ch] = d * (float)s;
            }
        }
        mmq8_load_w<TR, BN, RAW>(w, p.row_bytes, p.n, n0, k0, raw, kg, Bs, Bsc, Bof);
        if (GATEUP) mmq8_load_w<TR, BN, RAW>(wu, p.row_bytes, p.n, n0, k0, RAW ? raw + RAW_TILE : nullptr, kg, Bu, Busc, Buof);
        if constexpr (RAW) load_a(k0 + MMQ8_BK); /* next step's activations: in flight during the products */
        __syncthreads();
#pragma unroll
        for (int c2 = 0; c2 < 2; c2++) {
#pragma unroll
            for (int mi = 0; mi < 2; mi++) {
                const int r = wm * 32 + mi * 16 + g;
                const float da_lo = Ad[r][c2], da_hi = Ad[r + 8][c2];
                uint32_t af[4];
                af[0] = *(const uint32_t *)&As[r][32 * c2 + 4 * t4];
                af[1] = *(const uint32_t *)&As[r + 8][32 * c2 + 4 * t4];
                af[2] = *(const uint32_t *)&As[r][32 * c2 + 16 + 4 * t4];
                af[3] = *(const uint32_t *)&As[r + 8][32 * c2 + 16 + 4 * t4];
#pragma unroll
                for (int ni = 0; ni < 4; ni++) {
                    const int nr = wn * 32 + ni * 8 + g;  /* B row of this lane's fragment */
                    const int nc = wn * 32 + ni * 8 + 2 * t4; /* the two C columns of this lane */
#pragma unroll
                    for (int mat = 0; mat < (GATEUP ? 2 : 1); mat++) {
                        int8_t (*B)[MMQ8_LDS] = mat ? Bu : Bs;
                        float (*Sc)[4] = mat ? Busc : Bsc;
                        float (*Of)[4] = mat ? Buof : Bof;
                        float (&A)[4] = mat ? accu[GATEUP ? mi : 0][ni] : acc[mi][ni];
                        if (!TR::q8_sub16) {
                            const uint32_t bf[2] = {*(const uint32_t *)&B[nr][32 * c2 + 4 * t4],
                                                    *(const uint32_t *)&B[nr][32 * c2 + 16 + 4 * t4]};
                            int c[4] = {0, 0, 0, 0};
                            mma_s8_k32(c, af, bf);
                            mmq8_scale<OFF>(A, c, da_lo, da_hi,
                                            OFF ? Asum[r][2 * c2] + Asum[r][2 * c2 + 1] : 0.0f,
                                            OFF ? Asum[r + 8][2 * c2] + Asum[r + 8][2 * c2 + 1] : 0.0f, Sc[nc][2 * c2],
                                            Sc[nc + 1][2 * c2], OFF ? Of[nc][2 * c2] : 0.0f, OFF ? Of[nc + 1][2 * c2] : 0.0f);
                        } else {
#pragma unroll
                            for (int hh = 0; hh < 2; hh++) {
                                const int kc = 32 * c2 + 16 * hh;
                                int c[4] = {0, 0, 0, 0};
                                mma_s8_k16(c, af[2 * hh], af[2 * hh + 1], *(const uint32_t *)&B[nr][kc + 4 * t4]);
                                mmq8_scale<OFF>(A, c, da_lo, da_hi, OFF ? Asum[r][2 * c2 + hh] : 0.0f,
                                                OFF ? Asum[r + 8][2 * c2 + hh] : 0.0f, Sc[nc][2 * c2 + hh], Sc[nc + 1][2 * c2 + hh],
                                                OFF ? Of[nc][2 * c2 + hh] : 0.0f, OFF ? Of[nc + 1][2 * c2 + hh] : 0.0f);
                            }
                        }
                    }
                }
            }
        }
        __syncthreads();
    }

#pragma unroll
    for (int mi = 0; mi < 2; mi++)
#pragma unroll
        for (int half = 0; half < 2; half++) {
            const int64_t r = r_begin + wm * 32 + mi * 16 + g + 8 * half;
            float v[4][2];
#pragma unroll
            for (int ni = 0; ni < 4; ni++) {
                v[ni][0] = acc[mi][ni][2 * half], v[ni][1] = acc[mi][ni][2 * half + 1];
                mmq_epi_pair<GATEUP>(p, expert, n0 + wn * 32 + ni * 8 + 2 * t4, v[ni][0], v[ni][1],
                                     accu[GATEUP ? mi : 0][ni][2 * half], accu[GATEUP ? mi : 0][ni][2 * half + 1]);
            }
            if (p.yq) {
                /* q8_1 of the 32 columns wn*32.. of row r: held by the 4 lanes of this quad (8 each);
                 * same formulas as hmoe_cu_q8_1_warp. All lanes shuffle; only rows < r_end store. */
                float amax = 0.0f;
#pragma unroll
                for (int ni = 0; ni < 4; ni++) amax = fmaxf(amax, fmaxf(fabsf(v[ni][0]), fabsf(v[ni][1])));
                amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 1));
                amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 2));
                const float d = amax / 127.0f, id = amax > 0.0f ? 127.0f / amax : 0.0f;
                int qv[4][2], sum = 0;
#pragma unroll
                for (int ni = 0; ni < 4; ni++)
#pragma unroll
                    for (int j = 0; j < 2; j++) {
                        qv[ni][j] = max(-127, min(127, __float2int_rn(v[ni][j] * id)));
                        sum += qv[ni][j];
                    }
                sum += __shfl_xor_sync(0xffffffffu, sum, 1);
                sum += __shfl_xor_sync(0xffffffffu, sum, 2);
                const int cb = n0 + wn * 32; /* first column of this warp's 32 (p.n % 32 == 0) */
                if (r < r_end && cb < p.n) {
                    uint8_t *row = p.yq + (size_t)r * p.yq_stride;
#pragma unroll
                    for (int ni = 0; ni < 4; ni++)
                        *(uint16_t *)(row + cb + ni * 8 + 2 * t4) = (uint16_t)((qv[ni][0] & 0xff) | ((qv[ni][1] & 0xff) << 8));
                    if (t4 == 0) ((float2 *)(row + p.n))[cb / 32] = make_float2(d, d * (float)sum);
                }
                continue;
            }
            if (r >= r_end) continue;
#pragma unroll
            for (int ni = 0; ni < 4; ni++) {
                const int col = n0 + wn * 32 + ni * 8 + 2 * t4;
                if (col >= p.n) continue;
                float v0 = v[ni][0], v1 = v[ni][1];
                if (p.y32) {
                    if (p.add) {
                        const float2 a = *(const float2 *)(p.add + r * p.add_stride + col);
                        v0 += a.x, v1 += a.y;
                    }
                    *(float2 *)(p.y32 + r * p.y_stride + col) = make_float2(v0, v1);
                } else {
                    *(__half2 *)(p.y16 + r * p.y_stride + col) = __floats2half2_rn(v0, v1);
                }
            }
        }
}

/* Shared shape checks of both GEMM paths; fills the kernel parameters. */
static const char *gemm_prepare(const struct hmoe_cuda_gemm_args *a, struct mmq_params *p, int *blck) {
    int bytes;
    hmoe_cuda_type_geometry(a->w.type, blck, &bytes);
    if (*blck == 0) return "weight type has no GPU kernels";
    if (a->w.ncols <= 0 || a->w.ncols % MMQ_BK || a->w.ncols % *blck || a->w.ncols >= (1 << 30))
        return "ncols must be a positive multiple of 64 and of the block size";
    int al = 16;
    while (bytes % al) al /= 2;
    if (a->w.row_bytes < (size_t)(a->w.ncols / *blck) * (size_t)bytes || a->w.row_bytes % al) return "row_bytes too small or misaligned";
    if (a->w.nrows <= 0 || a->w.nrows % 2 || a->w.nrows >= (1 << 30)) return "nrows must be positive and even";
    if (!hmoe_cu_aligned(a->w.w, 16) || (a->w_up && !hmoe_cu_aligned(a->w_up, 16))) return "weights must be 16-byte aligned";
    if ((a->x == NULL) == (a->xq == NULL)) return "exactly one of x (f16) / xq (q8_1)";
    if (a->x && (!hmoe_cu_aligned(a->x, 16) || a->x_stride % 8 || a->x_stride < a->w.ncols)) return "x must be 16-byte aligned f16 rows, x_stride a multiple of 8 >= ncols";
    if (a->xq && (!hmoe_cu_aligned(a->xq, 16) || a->xq_stride_bytes % 16 || a->xq_stride_bytes < hmoe_cu_q8_1_row_bytes(a->w.ncols)))
        return "xq must be 16-byte aligned q8_1 rows, xq_stride_bytes a multiple of 16 >= the q8_1 row size";
    if ((a->y_f32 != NULL) + (a->y_f16 != NULL) + (a->y_q8_1 != NULL) != 1) return "exactly one of y_f32 / y_f16 / y_q8_1";
    if (a->y_q8_1) {
        if (!a->xq) return "y_q8_1 needs the int8 path (xq)";
        if (a->w.nrows % 32 || !hmoe_cu_aligned(a->y_q8_1, 16) || a->y_q8_1_stride_bytes % 16 ||
            a->y_q8_1_stride_bytes < hmoe_cu_q8_1_row_bytes(a->w.nrows))
            return "y_q8_1 needs nrows % 32 == 0, 16-byte aligned rows, y_q8_1_stride_bytes a multiple of 16 >= the q8_1 row size";
    } else if (a->y_stride < a->w.nrows || a->y_stride % 2) {
        return "y_stride must be even and >= nrows";
    }
    if (a->add && (!a->y_f32 || a->add_stride < a->w.nrows || a->add_stride % 2)) return "add needs y_f32 and an even add_stride >= nrows";
    if (a->up_bias && (!a->w_up || !a->w.bias)) return "up_bias needs the fused gate/up with a gate bias (w.bias)";
    if (a->w_up && a->w.bias && !a->up_bias) return "a fused gate/up with a gate bias needs up_bias";
    if (a->w_up && a->w.act != HMOE_CUDA_ACT_SWIGLU && a->w.act != HMOE_CUDA_ACT_SWIGLU_OAI) return "unknown activation";
    if (a->plan) {
        if (a->k < 1 || a->w.n_expert < 1) return "plan needs k >= 1 and n_expert >= 1";
        if (a->w.expert_stride_bytes < a->w.row_bytes * (size_t)a->w.nrows || a->w.expert_stride_bytes % 16) return "expert_stride_bytes too small or not a multiple of 16";
    }
    memset(p, 0, sizeof *p);
    p->w = (const uint8_t *)a->w.w;
    p->w_up = (const uint8_t *)a->w_up;
    p->row_bytes = a->w.row_bytes;
    p->expert_stride = a->plan ? a->w.expert_stride_bytes : 0;
    p->n = (int)a->w.nrows;
    p->kdim = (int)a->w.ncols;
    p->x = (const __half *)a->x;
    p->x_stride = a->x_stride;
    p->xq = (const uint8_t *)a->xq;
    p->xq_stride = a->xq_stride_bytes;
    p->k = a->k;
    p->x_gather = a->x_gather;
    p->y32 = a->y_f32;
    p->y16 = (__half *)a->y_f16;
    p->y_stride = a->y_stride;
    p->add = a->add;
    p->add_stride = a->add_stride;
    p->yq = (uint8_t *)a->y_q8_1;
    p->yq_stride = a->y_q8_1_stride_bytes;
    p->bias = a->w.bias;
    p->bias_up = a->up_bias;
    p->bias_expert = a->plan ? a->bias_expert : NULL;
    p->act = a->w.act;
    return NULL;
}

/* The staged kernel where its shared memory fits the device (the opt-in limit per block: 227 KiB
 * on sm_90, ~99 KiB on sm_86/89/120, where the widest staged tiles do not fit), else the one that
 * unpacks from global memory.
 * Decided once per instantiation (one device type per process). */
template <class TR, int BM, int BN, bool GATEUP>
static void mmq8_launch_raw(const struct mmq_params &p, dim3 grid, cudaStream_t st) {
    constexpr size_t dyn = mmq8_raw_smem_bytes<TR, BN, GATEUP>();
    static int ok = -1;
    if (ok < 0) {
        int dev = 0, optin = 0;
        cudaFuncAttributes fa;
        ok = cudaGetDevice(&dev) == cudaSuccess &&
             cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) == cudaSuccess &&
             cudaFuncGetAttributes(&fa, mmq8_kernel<TR, BM, BN, GATEUP, true>) == cudaSuccess &&
             fa.sharedSizeBytes + dyn <= (size_t)optin &&
             cudaFuncSetAttribute(mmq8_kernel<TR, BM, BN, GATEUP, true>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)dyn) ==
                 cudaSuccess;
        cudaGetLastError(); /* a refused query must not surface as the launch's error */
    }
    if (ok)
        mmq8_kernel<TR, BM, BN, GATEUP, true><<<grid, 128, dyn, st>>>(p);
    else
        mmq8_kernel<TR, BM, BN, GATEUP, false><<<grid, 128, 0, st>>>(p);
}

template <class TR, bool GATEUP, bool INT8>
static void mmq_launch(const struct mmq_params &p, bool small, bool raw, unsigned gy_plan_tiles, cudaStream_t st) {
    if (small) {
        dim3 grid((unsigned)hmoe_cu_div_up(p.n, 128),
                  p.tiles ? gy_plan_tiles * (HMOE_CUDA_MOE_TILE / 32) : (unsigned)hmoe_cu_div_up(p.ntok, 32));
        if constexpr (INT8) {
            if (raw)
                mmq8_launch_raw<TR, 32, 128, GATEUP>(p, grid, st);
            else
                mmq8_kernel<TR, 32, 128, GATEUP, false><<<grid, 128, 0, st>>>(p);
        } else {
            mmq_kernel<TR, 32, 128, GATEUP><<<grid, 128, 0, st>>>(p);
        }
    } else {
        dim3 grid((unsigned)hmoe_cu_div_up(p.n, 64),
                  p.tiles ? gy_plan_tiles * (HMOE_CUDA_MOE_TILE / 64) : (unsigned)hmoe_cu_div_up(p.ntok, 64));
        if constexpr (INT8) {
            if (raw)
                mmq8_launch_raw<TR, 64, 64, GATEUP>(p, grid, st);
            else
                mmq8_kernel<TR, 64, 64, GATEUP, false><<<grid, 128, 0, st>>>(p);
        } else {
            mmq_kernel<TR, 64, 64, GATEUP><<<grid, 128, 0, st>>>(p);
        }
    }
}

extern "C" enum hmoe_status hmoe_cuda_gemm(const struct hmoe_cuda_gemm_args *a, void *stream, struct hmoe_err *err) {
    struct mmq_params p;
    int blck;
    const char *why = gemm_prepare(a, &p, &blck);
    HMOE_CUDA_REQUIRE(err, !why, "gemm (%s, %lld x %lld): %s", hmoe_type_name(a->w.type), (long long)a->w.nrows,
                      (long long)a->w.ncols, why);
    HMOE_CUDA_REQUIRE(err, a->ntok >= 0, "gemm: negative ntok");
    if (a->ntok == 0) return HMOE_OK;
    unsigned plan_tiles = 0;
    bool small;
    if (a->plan) {
        const int64_t nrows = a->ntok * a->k;
        struct hmoe_moe_plan_view pv = hmoe_moe_plan_map((void *)a->plan, nrows, (int)a->w.n_expert);
        p.rows = pv.rows;
        p.tiles = pv.tiles;
        p.ntiles = pv.hdr;
        p.ntok = nrows;
        const int64_t mt = hmoe_moe_plan_max_tiles(nrows, (int)a->w.n_expert);
        HMOE_CUDA_REQUIRE(err, mt * 2 <= 65535, "gemm: %lld plan tiles exceed the grid limit", (long long)mt);
        plan_tiles = (unsigned)mt;
        /* fewer than ~24 rows per expert: 32-row tiles; else 64-row tiles, which read each
         * expert's weights once up to 64 rows (H200, pp512 = 32 rows per expert: Q4_K_M 11678
         * vs 10827 tok/s, IQ2_XXS 13571 vs 12674 with 32-row tiles) */
        small = nrows < 24 * a->w.n_expert;
    } else {
        p.ntok = a->ntok;
        HMOE_CUDA_REQUIRE(err, hmoe_cu_div_up(a->ntok, 32) <= 65535, "gemm: too many tokens");
        small = a->ntok < 64;
    }
    cudaStream_t st = hmoe_cu_stream(stream);
    /* staged weights (version 3): whole 256-element groups, and the 16-byte chunks of the last
     * row must stay inside the matrix (experts: the stride is a multiple of 16, checked above) */
    const bool raw = a->w.ncols % MMQ8_RAW_K == 0 &&
                     (a->plan || ((size_t)a->w.nrows * a->w.row_bytes) % 16 == 0);
    bool no_int8 = false;
    hmoe_cuda_type_dispatch(a->w.type, [&](auto tr) {
        using TR = decltype(tr);
        if (a->xq) {
            if constexpr (TR::q8) {
                if (a->w_up)
                    mmq_launch<TR, true, true>(p, small, raw, plan_tiles, st);
                else
                    mmq_launch<TR, false, true>(p, small, raw, plan_tiles, st);
            } else {
                no_int8 = true;
            }
        } else if (a->w_up) {
            mmq_launch<TR, true, false>(p, small, false, plan_tiles, st);
        } else {
            mmq_launch<TR, false, false>(p, small, false, plan_tiles, st);
        }
    });
    HMOE_CUDA_REQUIRE(err, !no_int8, "gemm: %s has no int8 path (its offsets are per 8 or it is a float type): pass f16 x",
                      hmoe_type_name(a->w.type));
    HMOE_CUDA_LAUNCH_CHECK(err, "gemm");
    return HMOE_OK;
}

extern "C" enum hmoe_status hmoe_cuda_gemm_cublas(struct hmoe_cuda_ctx *ctx, const struct hmoe_cuda_gemm_args *a,
                                                  uint16_t *d_scratch, struct hmoe_err *err) {
    struct mmq_params p;
    int blck;
    const char *why = gemm_prepare(a, &p, &blck);
    HMOE_CUDA_REQUIRE(err, !why, "gemm_cublas (%s): %s", hmoe_type_name(a->w.type), why);
    HMOE_CUDA_REQUIRE(err, !a->plan && !a->w_up && !a->w.bias && a->x && a->y_f32 &&
                               (!a->add || (a->add == a->y_f32 && a->add_stride == a->y_stride)),
                      "gemm_cublas: dense without bias, f16 x, f32 output only (add only in place)");
    HMOE_CUDA_REQUIRE(err, d_scratch && hmoe_cu_aligned(d_scratch, 16), "gemm_cublas: scratch must be 16-byte aligned");
    if (a->ntok == 0) return HMOE_OK;
    enum hmoe_status st = hmoe_cuda_dequant_f16(a->w.type, a->w.w, a->w.nrows * a->w.ncols, d_scratch, ctx->stream, err);
    if (st != HMOE_OK) return st;
    void *h;
    st = hmoe_cuda_ctx_cublas(ctx, &h, err);
    if (st != HMOE_OK) return st;
    /* column-major view: Y^T (N x T) = W (N x K, row-major = K x N col-major, transposed) * X^T (K x T) */
    const float alpha = 1.0f, beta = a->add ? 1.0f : 0.0f;
    cublasStatus_t cs = cublasGemmEx((cublasHandle_t)h, CUBLAS_OP_T, CUBLAS_OP_N, (int)a->w.nrows, (int)a->ntok,
                                     (int)a->w.ncols, &alpha, d_scratch, CUDA_R_16F, (int)a->w.ncols, a->x, CUDA_R_16F,
                                     (int)a->x_stride, &beta, a->y_f32, CUDA_R_32F, (int)a->y_stride, CUBLAS_COMPUTE_32F,
                                     CUBLAS_GEMM_DEFAULT);
    if (cs != CUBLAS_STATUS_SUCCESS) return HMOE_RAISE(err, HMOE_ERR_DEVICE, "gemm_cublas: cublasGemmEx failed (status %d)", (int)cs);
    return HMOE_OK;
}

extern "C" enum hmoe_status hmoe_cuda_gemm_f32_cublas(struct hmoe_cuda_ctx *ctx, const float *d_w, int64_t nrows,
                                                      int64_t ncols, const float *d_x, int64_t ntok, float *d_y,
                                                      int64_t y_stride, struct hmoe_err *err) {
    HMOE_CUDA_REQUIRE(err, d_w && d_x && d_y && nrows > 0 && ncols > 0 && ntok >= 0 && y_stride >= nrows &&
                               nrows < INT32_MAX && ncols < INT32_MAX && ntok < INT32_MAX && y_stride < INT32_MAX,
                      "gemm_f32_cublas: bad shape (%lld x %lld, %lld tokens, y_stride %lld)", (long long)nrows,
                      (long long)ncols, (long long)ntok, (long long)y_stride);
    if (ntok == 0) return HMOE_OK;
    void *h;
    enum hmoe_status st = hmoe_cuda_ctx_cublas(ctx, &h, err);
    if (st != HMOE_OK) return st;
    /* column-major: Y^T (nrows x ntok) = W^T (W row-major nrows x ncols) * X^T; PEDANTIC keeps
     * cuBLAS off TF32 and reduced-precision reductions whatever the math mode or environment */
    const float alpha = 1.0f, beta = 0.0f;
    cublasStatus_t cs = cublasGemmEx((cublasHandle_t)h, CUBLAS_OP_T, CUBLAS_OP_N, (int)nrows, (int)ntok, (int)ncols, &alpha,
                                     d_w, CUDA_R_32F, (int)ncols, d_x, CUDA_R_32F, (int)ncols, &beta, d_y, CUDA_R_32F,
                                     (int)y_stride, CUBLAS_COMPUTE_32F_PEDANTIC, CUBLAS_GEMM_DEFAULT);
    if (cs != CUBLAS_STATUS_SUCCESS) return HMOE_RAISE(err, HMOE_ERR_DEVICE, "gemm_f32_cublas: cublasGemmEx failed (status %d)", (int)cs);
    return HMOE_OK;
}
