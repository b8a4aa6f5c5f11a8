/* cuda_attn.cu — attention over the VRAM KV cache (rows in any cache type of cuda_kv_codec.cuh,
 * K and V types independent, head-major, cuda.h):
 * decode (flash-decoding: the cache split in ranges done in parallel, then combined) and
 * prefill (causal), both with GQA (q head h uses kv head h / (n_head / n_head_kv),
 * qwen3moe.md §4.3 steps 7-9) and an online softmax in f32.
 *
 * Version 1 (CUDA cores): a warp carries R query rows of one kv head through tiles of 32 cache
 * positions. Scores: lane = position, the lane reads its whole K row (16-byte loads) and dots it
 * with the R pre-scaled q rows held in shared memory (broadcast reads). Values: lane = dims
 * lane + 32j, the probabilities of the tile go through shared memory. Decode: 4 warps of a block
 * take alternate tiles of the block's range and merge in shared memory; a second kernel merges
 * the ranges. Prefill: a block takes TQ tokens x G heads = 4 warps x R rows; each warp walks the
 * cache up to the last position its rows may see (hmoe_cuda_attn_prefill_old; the tensor-core
 * prefill and the dispatcher are in cuda_attn_prefill.cu).
 * Version 2 decode (attn_decode1_kernel, one launch): one block per query head and cache range,
 * ranges cut from the length at run time (one range up to 128 positions, else the last block of a
 * head merges them), optionally with the QK-norm + RoPE + KV store of the new token inside: 11.1
 * us per layer on the H200 at depth 65 against 19.4 + 3.4 for two kernels + the store kernel.
 * The block first asks L2 for its K/V rows (prefetch), and the RoPE angles (double precision) are
 * computed by the whole block at once into shared memory instead of n_rot/64 in series by every
 * lane of warps 0 and 1; same results. H200, depth 65: 8.7 us per layer (11.1 without), ~2.2 us
 * less per layer in the decode step.
 */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <type_traits>

#include "kernels/cuda_rope_impl.cuh"

#define ATTN_WARPS 4

/* Rows of q one warp carries for head size D (registers: R * D / 32 accumulators per lane). */
template <int D>
struct attn_rows {
    static constexpr int value = (2048 / D) > 16 ? 16 : (2048 / D);
};

/* Online-softmax state of R rows, o distributed over lanes (dims lane*D/32 .. +D/32-1). KT / VT:
 * the K and V codecs (cuda_kv_codec.cuh), HMOE_KV_ANY = chosen per tile from the run-time types
 * (fewer loads in flight there: one kernel holds the loops of every type). */
template <int D, int R, int KT, int VT>
struct attn_warp_state {
    float m[R], l[R], o[R][D / 32];

    __device__ __forceinline__ void init() {
#pragma unroll
        for (int r = 0; r < R; r++) {
            m[r] = -INFINITY;
            l[r] = 0.0f;
#pragma unroll
            for (int j = 0; j < D / 32; j++) o[r][j] = 0.0f;
        }
    }

    /* s[r] = q row r . K row krow (the lane's position), 8 dims per step (16-byte loads for F16) */
    template <typename KC>
    __device__ __forceinline__ void scores(const uint8_t *krow, const float *qs, float (&s)[R]) {
        constexpr int KU = KT == HMOE_KV_ANY ? 2 : D <= 128 ? D / 8 : 16; /* K loads in flight per lane */
#pragma unroll(KU)
        for (int c = 0; c < D; c += 8) {
            float kf[8];
            KC::template load<8>(krow, c, kf);
#pragma unroll
            for (int r = 0; r < R; r++) {
                const float4 *qp = (const float4 *)(qs + r * D + c);
                float4 a = qp[0], b = qp[1];
                s[r] += a.x * kf[0] + a.y * kf[1] + a.z * kf[2] + a.w * kf[3] + b.x * kf[4] + b.y * kf[5] +
                        b.z * kf[6] + b.w * kf[7];
            }
        }
    }

    /* o += p V over the tile's nvalid rows: lane owns dims lane*(D/32) .. +D/32-1 (one 2..16-byte
     * load per row for F16); VB rows of V are loaded before they are used, so the loads overlap */
    template <typename VC>
    __device__ __forceinline__ void values(const uint8_t *vbase, int t0, int nvalid, const float *sp) {
        const int lane = threadIdx.x & 31;
        constexpr int DL = D / 32, VB = VT == HMOE_KV_ANY ? 4 : DL <= 4 ? 16 : 8;
        constexpr size_t rb = (size_t)(D / 32) * VC::BB;
        for (int tb = 0; tb < nvalid; tb += VB) {
            float vv[VB][DL];
#pragma unroll
            for (int u = 0; u < VB; u++) {
                if (tb + u < nvalid) {
                    VC::template load<DL>(vbase + (size_t)(t0 + tb + u) * rb, lane * DL, vv[u]);
                } else {
#pragma unroll
                    for (int j = 0; j < DL; j++) vv[u][j] = 0.0f;
                }
            }
#pragma unroll
            for (int u = 0; u < VB; u++) {
#pragma unroll
                for (int r = 0; r < R; r++) {
                    const float pr = (tb + u < nvalid) ? sp[r * 32 + tb + u] : 0.0f;
#pragma unroll
                    for (int j = 0; j < DL; j++) o[r][j] += pr * vv[u][j];
                }
            }
        }
    }

    /* One tile: cache positions t0 .. t0+nvalid-1 (nvalid <= 32). qs: R rows of D floats
     * (already multiplied by the softmax scale); rowpos[r]: last position row r may see (-1 =
     * none); sp: this warp's R x 32 floats of scratch. kbase/vbase: row 0 of this kv head, rows
     * in the types tk / tv. window > 0: row r sees only t > rowpos[r] - window (the sliding window). */
    __device__ __forceinline__ void tile(const uint8_t *kbase, const uint8_t *vbase, int tk, int tv, int t0, int nvalid,
                                         const float *qs, const int (&rowpos)[R], float *sp, int window = 0) {
        const int lane = threadIdx.x & 31;
        const int t = t0 + lane;
        float s[R];
#pragma unroll
        for (int r = 0; r < R; r++) s[r] = 0.0f;
        if (lane < nvalid)
            kv_with<KT>(tk, [&](auto kc) {
                using KC = decltype(kc);
                scores<KC>(kbase + (size_t)t * ((size_t)(D / 32) * KC::BB), qs, s);
            });
#pragma unroll
        for (int r = 0; r < R; r++) {
            const float sv = (lane < nvalid && t <= rowpos[r] && (window <= 0 || rowpos[r] - t < window)) ? s[r]
                                                                                                         : -INFINITY;
            const float m_new = fmaxf(m[r], hmoe_warp_max(sv));
            float p, corr;
            if (m_new == -INFINITY) { /* nothing visible yet for this row */
                p = 0.0f;
                corr = 1.0f;
            } else {
                p = sv == -INFINITY ? 0.0f : expf(sv - m_new);
                corr = expf(m[r] - m_new); /* m[r] = -inf gives 0: o and l are still 0 */
            }
            l[r] = l[r] * corr + hmoe_warp_sum(p);
            m[r] = m_new;
#pragma unroll
            for (int j = 0; j < D / 32; j++) o[r][j] *= corr;
            sp[r * 32 + lane] = p;
        }
        __syncwarp();
        kv_with<VT>(tv, [&](auto vc) { values<decltype(vc)>(vbase, t0, nvalid, sp); });
        __syncwarp();
    }
};

/* Bytes of one cache row of D elements in codec T (HMOE_KV_ANY: the run-time type t). */
template <int T>
__device__ __forceinline__ size_t attn_row_bytes(int t, int D) {
    if constexpr (T == HMOE_KV_ANY) return hmoe_cu_kv_row_bytes(t, D);
    else return (size_t)(D / 32) * kv_codec<T>::BB;
}

/* The K and V bases of kv head hk. */
template <int KT>
__device__ __forceinline__ const uint8_t *attn_kbase(const struct hmoe_cuda_kv &kv, int hk) {
    return (const uint8_t *)kv.k + (size_t)hk * kv.n_ctx * attn_row_bytes<KT>(kv.type_k, kv.head_dim);
}
template <int VT>
__device__ __forceinline__ const uint8_t *attn_vbase(const struct hmoe_cuda_kv &kv, int hk) {
    return (const uint8_t *)kv.v + (size_t)hk * kv.n_ctx * attn_row_bytes<VT>(kv.type_v, kv.head_dim);
}

/* ------------------------------------------------ decode ------------------------------------------------ */

/* Block (kv head hk, split s): rows = the G query heads of hk; partial results (max, sum,
 * unnormalised o) to scratch[(h_q * n_split + s) * (D + 2)]. */
template <int D, int R, int KT, int VT>
__global__ void __launch_bounds__(ATTN_WARPS * 32) attn_decode_kernel(const float *__restrict__ q,
                                                                      struct hmoe_cuda_kv kv, const int32_t *pos_p,
                                                                      int G, float scale, int n_split,
                                                                      float *__restrict__ scratch) {
    __shared__ __align__(16) float smem[(ATTN_WARPS * R * D > R * D + ATTN_WARPS * R * 32) ? ATTN_WARPS * R * D
                                                                                            : R * D + ATTN_WARPS * R * 32];
    __shared__ float sm_m[ATTN_WARPS][R], sm_l[ATTN_WARPS][R];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int hk = blockIdx.x, split = blockIdx.y;
    const int L = (int)min((int64_t)pos_p[0] + 1, kv.n_ctx);
    const int lo = kv.window > 0 ? max(0, L - kv.window) : 0; /* first position the window sees */
    int chunk = (L - lo + n_split - 1) / n_split;
    chunk = max(32, (chunk + 31) / 32 * 32);
    const int begin = lo + split * chunk, end = min(L, begin + chunk);

    float *qs = smem, *sp = smem + R * D + warp * R * 32;
    for (int i = threadIdx.x; i < R * D; i += blockDim.x) {
        const int r = i / D;
        qs[i] = r < G ? q[(size_t)(hk * G + r) * D + (i % D)] * scale : 0.0f;
    }
    __syncthreads();

    attn_warp_state<D, R, KT, VT> st;
    st.init();
    int rowpos[R];
#pragma unroll
    for (int r = 0; r < R; r++) rowpos[r] = r < G ? L - 1 : -1;
    const uint8_t *kbase = attn_kbase<KT>(kv, hk), *vbase = attn_vbase<VT>(kv, hk);
    for (int t0 = begin + 32 * warp; t0 < end; t0 += 32 * ATTN_WARPS)
        st.tile(kbase, vbase, kv.type_k, kv.type_v, t0, min(32, end - t0), qs, rowpos, sp);

    /* merge the four warps: q and p scratch are dead now, reuse smem for the o rows */
    __syncthreads();
    if (lane == 0) {
#pragma unroll
        for (int r = 0; r < R; r++) sm_m[warp][r] = st.m[r], sm_l[warp][r] = st.l[r];
    }
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int j = 0; j < D / 32; j++) smem[(warp * R + r) * D + lane * (D / 32) + j] = st.o[r][j];
    __syncthreads();
    for (int i = threadIdx.x; i < G * D; i += blockDim.x) {
        const int r = i / D, d = i % D;
        float M = -INFINITY;
        for (int w = 0; w < ATTN_WARPS; w++) M = fmaxf(M, sm_m[w][r]);
        float Ls = 0.0f, O = 0.0f;
        if (M != -INFINITY) {
            for (int w = 0; w < ATTN_WARPS; w++) {
                const float c = expf(sm_m[w][r] - M);
                Ls += sm_l[w][r] * c;
                O += smem[(w * R + r) * D + d] * c;
            }
        }
        float *dst = scratch + ((size_t)(hk * G + r) * n_split + split) * (D + 2);
        dst[2 + d] = O;
        if (d == 0) dst[0] = M, dst[1] = Ls;
    }
}

/* One block of 128 threads per q head: merge the n_split partial results. Splits are spread over
 * the threads for the max and the weights (one memory round), then each thread sums its dims
 * over the splits. Optionally also writes the head's part of the q8_1 row of all heads (the
 * input of the o projection), saving a quantize launch. */
template <int D>
__global__ void __launch_bounds__(128) attn_decode_combine_kernel(const float *__restrict__ scratch, int n_split,
                                                                  float *__restrict__ out, uint8_t *__restrict__ out_q,
                                                                  int n_head, const float *__restrict__ sinks) {
    __shared__ float wsp[1024];
    __shared__ float red[4];
    const int h = blockIdx.x, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const float *src = scratch + (size_t)h * n_split * (D + 2);
    float m = -INFINITY;
    for (int s = tid; s < n_split; s += 128) m = fmaxf(m, src[(size_t)s * (D + 2)]);
    m = hmoe_warp_max(m);
    if (lane == 0) red[warp] = m;
    __syncthreads();
    /* a sink logit joins the max and the denominator, with no value row */
    const float sink = sinks ? sinks[h] : -INFINITY;
    const float M = fmaxf(fmaxf(fmaxf(red[0], red[1]), fmaxf(red[2], red[3])), sink);
    __syncthreads();
    float ls = 0.0f;
    for (int s = tid; s < n_split; s += 128) {
        const float *ps = src + (size_t)s * (D + 2);
        const float c = M == -INFINITY ? 0.0f : expf(ps[0] - M); /* an empty split has ps[0] = -inf: c = 0 */
        wsp[s] = c;
        ls += c * ps[1];
    }
    ls = hmoe_warp_sum(ls);
    if (lane == 0) red[warp] = ls;
    __syncthreads();
    const float L = red[0] + red[1] + red[2] + red[3] + (sinks ? expf(sink - M) : 0.0f);
    const float inv = L > 0.0f ? 1.0f / L : 0.0f;
    const int nq = n_head * D; /* q8_1 row of all heads */
#pragma unroll
    for (int d0 = 0; d0 < D; d0 += 128) {
        const int d = d0 + tid;
        float o = 0.0f;
        if (d < D) {
#pragma unroll 8
            for (int s = 0; s < n_split; s++) o += wsp[s] * src[(size_t)s * (D + 2) + 2 + d];
            o *= inv;
            if (out) out[(size_t)h * D + d] = o;
        }
        if (out_q && d0 + warp * 32 < D) { /* whole warps inside the head: D % 32 == 0 */
            const int col = h * D + d0 + warp * 32;
            hmoe_cu_q8_1_warp(o, (int8_t *)out_q + col, (float2 *)(out_q + nq) + col / 32);
        }
    }
}

/* Decode helpers. */

/* Ask L2 for the K and V rows [t0, t1) of one kv head (every 128-byte line of each row), spread
 * over the block's threads: issued first, the HBM fetches overlap the QK-norm + RoPE prologue and
 * the V loads after the softmax hit L2. */
__device__ __forceinline__ void attn_prefetch_rows(const uint8_t *kbase, const uint8_t *vbase, size_t rbk, size_t rbv,
                                                   int t0, int t1) {
    for (int t = t0 + (int)threadIdx.x; t < t1; t += (int)blockDim.x) {
        const uint8_t *kr = kbase + (size_t)t * rbk, *vr = vbase + (size_t)t * rbv;
        for (size_t off = 0; off < rbk; off += 128) asm volatile("prefetch.global.L2 [%0];" ::"l"(kr + off));
        for (size_t off = 0; off < rbv; off += 128) asm volatile("prefetch.global.L2 [%0];" ::"l"(vr + off));
        if (rbk % 128) asm volatile("prefetch.global.L2 [%0];" ::"l"(kr + rbk - 1));
        if (rbv % 128) asm volatile("prefetch.global.L2 [%0];" ::"l"(vr + rbv - 1));
    }
}

/* hmoe_cu_warp_norm_rope with the rotation factors already in shared memory (cs[i], sn[i] =
 * cos, sin of pair i's angle times mscale, computed by the whole block at once: one double
 * angle per thread instead of n_rot/64 in series per lane) and v[] already loaded. Same
 * arithmetic, same results. */
__device__ __forceinline__ void attn_warp_norm_rope_tab(float (&v)[HMOE_QKR_MAXJ], int D, const float *nw, float eps,
                                                        const float *cs, const float *sn, int half, float *s) {
    const int lane = threadIdx.x & 31, nj = D / 32;
    if (nw) {
        float ss = 0.0f;
#pragma unroll
        for (int j = 0; j < HMOE_QKR_MAXJ; j++) ss += v[j] * v[j];
        ss = hmoe_warp_sum(ss);
        const float r = 1.0f / sqrtf(ss / (float)D + eps);
#pragma unroll
        for (int j = 0; j < HMOE_QKR_MAXJ; j++)
            if (j < nj) v[j] = (v[j] * r) * nw[lane + 32 * j];
    }
#pragma unroll
    for (int j = 0; j < HMOE_QKR_MAXJ; j++)
        if (j < nj) s[lane + 32 * j] = v[j];
    __syncwarp();
    for (int i = lane; i < half; i += 32) {
        const float c = cs[i], sf = sn[i];
        const float x0 = s[i], x1 = s[i + half];
        s[i] = x0 * c - x1 * sf;
        s[i + half] = x0 * sf + x1 * c;
    }
    __syncwarp();
#pragma unroll
    for (int j = 0; j < HMOE_QKR_MAXJ; j++)
        if (j < nj) v[j] = s[lane + 32 * j];
    __syncwarp();
}

/* Thread i < n_rot/2 of the block: the rotation factors of pair i at pos (as hmoe_cu_warp_norm_rope). */
__device__ __forceinline__ void attn_rope_table(const struct hmoe_cuda_rope &rp, int pos, float *cs, float *sn) {
    const int i = (int)threadIdx.x;
    if (i < rp.n_rot / 2) {
        const double th = hmoe_cu_rope_theta(rp, i, pos);
        const double rd = th - 6.283185307179586 * rint(th * 0.15915494309189535);
        float s_, c_;
        sincosf((float)rd, &s_, &c_);
        cs[i] = c_ * rp.mscale;
        sn[i] = s_ * rp.mscale;
    }
}

/* O / Ls of one online-softmax state (max M) with an optional sink logit (-inf: none) in the
 * denominator: O c / (Ls c + exp(sink - M')) with M' = max(M, sink), c = exp(M - M'). */
__device__ __forceinline__ float attn_normalise(float M, float Ls, float O, float sink) {
    if (sink == -INFINITY) return Ls > 0.0f ? O / Ls : 0.0f;
    const float Mx = fmaxf(M, sink), c = M == -INFINITY ? 0.0f : expf(M - Mx);
    const float den = Ls * c + expf(sink - Mx);
    return den > 0.0f ? O * c / den : 0.0f;
}

/* Fused decode (hmoe_cuda_attn_decode_fused): block (q head h, range s) of a grid n_head x
 * max_split; the ranges are cut from the length at run time (>= 128 positions each), blocks past
 * the last range exit. One query row per block: a short dependency chain per warp (blocks that
 * carried the G rows of a kv head: G times the work in series behind each load), and the G blocks
 * of a kv head read the same K/V rows, mostly from L2. One range: the block normalises and
 * writes the result itself. Several: each writes its partial (max, sum, o) and the last block of
 * head h to finish merges them. Output f32 and/or q8_1 (warps cover 32 dims of the head).
 * QKR (hmoe_cuda_attn_decode_qkv): q is the raw projection; warp 0 normalises and rotates the
 * block's q head; in the range holding the new position warp 1 does the same for k of kv head hk,
 * rounds k and the raw v to what the cache holds, and the first block of the kv group stores them;
 * the new position is then taken from shared memory, not from the cache (nobody reads it from
 * global memory in this launch). */
template <int D, int KT, int VT, bool QKR>
__global__ void __launch_bounds__(ATTN_WARPS * 32) attn_decode1_kernel(const float *__restrict__ q,
                                                                       struct hmoe_cuda_kv kv, const int32_t *pos_p,
                                                                       int G, float scale, float *scratch,
                                                                       unsigned int *counters, float *out,
                                                                       uint8_t *out_q, int n_head,
                                                                       struct hmoe_cuda_qkv_args qa) {
    constexpr int R = 1;
    __shared__ __align__(16) float smem[(ATTN_WARPS * R * D > R * D + ATTN_WARPS * R * 32) ? ATTN_WARPS * R * D
                                                                                            : R * D + ATTN_WARPS * R * 32];
    __shared__ float sm_m[ATTN_WARPS], sm_l[ATTN_WARPS];
    __shared__ float s_new[QKR ? 2 : 1][QKR ? D : 1], s_rot[QKR ? 2 : 1][QKR ? D : 1]; /* new k, v; rope scratch */
    __shared__ float s_cs[QKR ? D / 2 : 1], s_sn[QKR ? D / 2 : 1];                     /* rotation factors */
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int h = blockIdx.x, hk = h / G, split = blockIdx.y, max_split = gridDim.y;
    const int L = (int)min((int64_t)pos_p[0] + 1, kv.n_ctx);
    const int lo = kv.window > 0 ? max(0, L - kv.window) : 0; /* first position the window sees */
    int chunk = (L - lo + max_split - 1) / max_split;
    chunk = max(128, (chunk + 31) / 32 * 32);
    const int S = (L - lo + chunk - 1) / chunk;
    if (split >= S) return; /* the whole block: no barrier has been reached yet */
    const int begin = lo + split * chunk, end = min(L, begin + chunk);
    const int pos = pos_p[0];
    const bool has_new = QKR && split == S - 1 && pos < kv.n_ctx; /* this range ends at the new position */
    const int cache_end = has_new ? end - 1 : end;

    float *qs = smem, *sp = smem + R * D + warp * R * 32;
    const uint8_t *kbase = attn_kbase<KT>(kv, hk), *vbase = attn_vbase<VT>(kv, hk);
    attn_prefetch_rows(kbase, vbase, attn_row_bytes<KT>(kv.type_k, D), attn_row_bytes<VT>(kv.type_v, D), begin, cache_end);
    if constexpr (QKR) {
        float v[HMOE_QKR_MAXJ];
        /* loads of q (warp 0) / k (warp 1) first, the angles by the whole block meanwhile */
        const int nj = D / 32;
        const bool kw = warp == 1 && has_new;
        if (warp == 0 || kw) {
            const float *src = warp == 0 ? q + (size_t)h * D : qa.k + (size_t)hk * D;
#pragma unroll
            for (int j = 0; j < HMOE_QKR_MAXJ; j++) v[j] = j < nj ? src[lane + 32 * j] : 0.0f;
        }
        attn_rope_table(qa.rope, pos, s_cs, s_sn);
        __syncthreads();
        const int half = qa.rope.n_rot / 2;
        if (warp == 0) {
            attn_warp_norm_rope_tab(v, D, qa.q_norm, qa.eps, s_cs, s_sn, half, s_rot[0]);
#pragma unroll
            for (int j = 0; j < D / 32; j++) qs[lane + 32 * j] = v[j] * scale;
        } else if (kw) {
            const bool store = h % G == 0;
            attn_warp_norm_rope_tab(v, D, qa.k_norm, qa.eps, s_cs, s_sn, half, s_rot[1]);
            hmoe_cu_store_cache_row<KT>(kv, false, hk, pos, v, store);
#pragma unroll
            for (int j = 0; j < D / 32; j++) s_new[0][lane + 32 * j] = v[j];
#pragma unroll
            for (int j = 0; j < D / 32; j++) v[j] = qa.v[(size_t)hk * D + lane + 32 * j];
            hmoe_cu_store_cache_row<VT>(kv, true, hk, pos, v, store);
#pragma unroll
            for (int j = 0; j < D / 32; j++) s_new[1][lane + 32 * j] = v[j];
        }
    } else {
        for (int i = threadIdx.x; i < D; i += blockDim.x) qs[i] = q[(size_t)h * D + i] * scale;
    }
    __syncthreads();

    attn_warp_state<D, R, KT, VT> st;
    st.init();
    const int rowpos[R] = {L - 1};
    for (int t0 = begin + 32 * warp; t0 < cache_end; t0 += 32 * ATTN_WARPS)
        st.tile(kbase, vbase, kv.type_k, kv.type_v, t0, min(32, cache_end - t0), qs, rowpos, sp);
    if (QKR && has_new && warp == 0) { /* the new position, from shared memory (online softmax step) */
        constexpr int DL = D / 32;
        float sc = 0.0f;
#pragma unroll
        for (int j = 0; j < DL; j++) sc += qs[lane * DL + j] * s_new[0][lane * DL + j];
        sc = hmoe_warp_sum(sc);
        const float m_new = fmaxf(st.m[0], sc);
        const float corr = expf(st.m[0] - m_new), p = expf(sc - m_new); /* m = -inf (no earlier tile): corr 0 */
        st.l[0] = st.l[0] * corr + p;
        st.m[0] = m_new;
#pragma unroll
        for (int j = 0; j < DL; j++) st.o[0][j] = st.o[0][j] * corr + p * s_new[1][lane * DL + j];
    }

    __syncthreads();
    if (lane == 0) sm_m[warp] = st.m[0], sm_l[warp] = st.l[0];
#pragma unroll
    for (int j = 0; j < D / 32; j++) smem[warp * D + lane * (D / 32) + j] = st.o[0][j];
    __syncthreads();
    const int nq = n_head * D; /* q8_1 row of all heads */
    for (int d0 = 0; d0 < D; d0 += ATTN_WARPS * 32) {
        const int d = d0 + threadIdx.x;
        if (d0 + warp * 32 >= D) continue; /* warp-uniform: D % 32 == 0 */
        float M = -INFINITY;
        for (int w = 0; w < ATTN_WARPS; w++) M = fmaxf(M, sm_m[w]);
        float Ls = 0.0f, O = 0.0f;
        if (M != -INFINITY) {
            for (int w = 0; w < ATTN_WARPS; w++) {
                const float c = expf(sm_m[w] - M);
                Ls += sm_l[w] * c;
                O += smem[w * D + d] * c;
            }
        }
        if (S == 1) {
            const float o = attn_normalise(M, Ls, O, kv.sinks ? kv.sinks[h] : -INFINITY);
            const int col = h * D + d;
            if (out) out[col] = o;
            if (out_q) hmoe_cu_q8_1_warp(o, (int8_t *)out_q + (col & ~31), (float2 *)(out_q + nq) + col / 32);
        } else {
            float *dst = scratch + ((size_t)h * max_split + split) * (D + 2);
            dst[2 + d] = O;
            if (d == 0) dst[0] = M, dst[1] = Ls;
        }
    }
    if (S == 1 || !hmoe_cu_last_block(counters + h, (unsigned)S)) return;
    /* last range of head h done: merge the S partials */
    const float *src = scratch + (size_t)h * max_split * (D + 2);
    for (int d0 = 0; d0 < D; d0 += ATTN_WARPS * 32) {
        const int d = d0 + threadIdx.x;
        if (d0 + warp * 32 >= D) continue;
        float M = -INFINITY;
        for (int sp_ = 0; sp_ < S; sp_++) M = fmaxf(M, __ldcg(src + (size_t)sp_ * (D + 2)));
        const float sink = kv.sinks ? kv.sinks[h] : -INFINITY;
        M = fmaxf(M, sink); /* the sink joins the max and the denominator (attn_decode_combine_kernel) */
        float Ls = 0.0f, O = 0.0f;
        if (M != -INFINITY) {
#pragma unroll 8
            for (int sp_ = 0; sp_ < S; sp_++) {
                const float *ps = src + (size_t)sp_ * (D + 2);
                const float c = expf(__ldcg(ps) - M);
                Ls += c * __ldcg(ps + 1);
                O += c * __ldcg(ps + 2 + d);
            }
            if (kv.sinks) Ls += expf(sink - M);
        }
        const float o = Ls > 0.0f ? O / Ls : 0.0f;
        const int col = h * D + d;
        if (out) out[col] = o;
        if (out_q) hmoe_cu_q8_1_warp(o, (int8_t *)out_q + (col & ~31), (float2 *)(out_q + nq) + col / 32);
    }
}

template <int D, int KT, int VT>
static void decode1_launch(const float *q, const struct hmoe_cuda_kv *kv, const int32_t *pos, int G, float scale,
                           int max_split, float *scratch, unsigned int *cnt, float *out, uint8_t *out_q, int n_head,
                           const struct hmoe_cuda_qkv_args *qa, cudaStream_t st) {
    const dim3 grid((unsigned)n_head, (unsigned)max_split), blk(ATTN_WARPS * 32);
    if (qa)
        hmoe_cu_launch(attn_decode1_kernel<D, KT, VT, true>, grid, blk, 0, st, q, *kv, pos, G, scale, scratch, cnt, out,
                       out_q, n_head, *qa);
    else
        hmoe_cu_launch(attn_decode1_kernel<D, KT, VT, false>, grid, blk, 0, st, q, *kv, pos, G, scale, scratch, cnt, out,
                       out_q, n_head, hmoe_cuda_qkv_args{});
}

/* f(D, KT, VT) as std::integral_constant values for the cache's head size and types: the F16 and
 * Q8_0 caches (K and V alike) get kernels of their own, every other pair the run-time codec. */
template <typename F>
static void attn_dispatch(const struct hmoe_cuda_kv *kv, F &&f) {
    using F16 = std::integral_constant<int, HMOE_TYPE_F16>;
    using Q80 = std::integral_constant<int, HMOE_TYPE_Q8_0>;
    using ANY = std::integral_constant<int, HMOE_KV_ANY>;
    auto by_type = [&](auto d) {
        if (kv->type_k == HMOE_TYPE_F16 && kv->type_v == HMOE_TYPE_F16) f(d, F16{}, F16{});
        else if (kv->type_k == HMOE_TYPE_Q8_0 && kv->type_v == HMOE_TYPE_Q8_0) f(d, Q80{}, Q80{});
        else f(d, ANY{}, ANY{});
    };
    switch (kv->head_dim) {
    case 32: by_type(std::integral_constant<int, 32>{}); break;
    case 64: by_type(std::integral_constant<int, 64>{}); break;
    case 128: by_type(std::integral_constant<int, 128>{}); break;
    default: by_type(std::integral_constant<int, 256>{}); break;
    }
}

extern "C" size_t hmoe_cuda_attn_decode_scratch_bytes(int n_head, int head_dim, int n_split) {
    if (n_split <= 0) n_split = 64;
    return (size_t)n_head * (size_t)n_split * (size_t)(head_dim + 2) * sizeof(float);
}

static const char *attn_check(const struct hmoe_cuda_kv *kv, int n_head, int *G) {
    if (!hmoe_cu_kv_type_ok(kv->type_k) || !hmoe_cu_kv_type_ok(kv->type_v))
        return "KV cache types must be F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 or IQ4_NL";
    const int D = kv->head_dim;
    if (D != 32 && D != 64 && D != 128 && D != 256) return "head_dim must be 32, 64, 128 or 256";
    if (kv->n_head_kv <= 0 || n_head <= 0 || n_head % kv->n_head_kv) return "n_head must be a multiple of n_head_kv";
    *G = n_head / kv->n_head_kv;
    if (*G > 16 || *G * D > 2048) return "n_head / n_head_kv must be <= 16 and <= 2048 / head_dim";
    if (!kv->k || !kv->v || kv->n_ctx <= 0) return "empty KV cache";
    if (!hmoe_cu_aligned(kv->k, 16) || !hmoe_cu_aligned(kv->v, 16)) return "KV cache must be 16-byte aligned";
    return nullptr;
}

template <int D, int KT, int VT>
static void decode_launch(const float *q, const struct hmoe_cuda_kv *kv, const int32_t *pos, int G, float scale,
                          int n_split, float *scratch, float *out, uint8_t *out_q, int n_head, cudaStream_t st) {
    dim3 grid((unsigned)kv->n_head_kv, (unsigned)n_split);
    if (G <= 4)
        attn_decode_kernel<D, (4 < attn_rows<D>::value ? 4 : attn_rows<D>::value), KT, VT><<<grid, ATTN_WARPS * 32, 0, st>>>(
            q, *kv, pos, G, scale, n_split, scratch);
    else if (G <= 8)
        attn_decode_kernel<D, (8 < attn_rows<D>::value ? 8 : attn_rows<D>::value), KT, VT><<<grid, ATTN_WARPS * 32, 0, st>>>(
            q, *kv, pos, G, scale, n_split, scratch);
    else
        attn_decode_kernel<D, attn_rows<D>::value, KT, VT><<<grid, ATTN_WARPS * 32, 0, st>>>(q, *kv, pos, G, scale,
                                                                                            n_split, scratch);
    attn_decode_combine_kernel<D><<<(unsigned)n_head, 128, 0, st>>>(scratch, n_split, out, out_q, n_head, kv->sinks);
}

extern "C" enum hmoe_status hmoe_cuda_attn_decode(const float *d_q, const struct hmoe_cuda_kv *kv,
                                                  const int32_t *d_pos, int n_head, float scale, int n_split,
                                                  void *d_scratch, float *d_out, void *d_out_q8_1, void *stream,
                                                  struct hmoe_err *err) {
    int G = 0;
    const char *why = attn_check(kv, n_head, &G);
    HMOE_CUDA_REQUIRE(err, !why, "attn_decode: %s", why);
    if (n_split <= 0) n_split = 64;
    HMOE_CUDA_REQUIRE(err, n_split <= 1024 && d_q && d_pos && d_scratch && (d_out || d_out_q8_1),
                      "attn_decode: n_split %d > 1024 or NULL buffer", n_split);
    HMOE_CUDA_REQUIRE(err, !d_out_q8_1 || hmoe_cu_aligned(d_out_q8_1, 16), "attn_decode: q8_1 output must be 16-byte aligned");
    uint8_t *oq = (uint8_t *)d_out_q8_1;
    cudaStream_t st = hmoe_cu_stream(stream);
    float *scr = (float *)d_scratch;
    attn_dispatch(kv, [&](auto d, auto kt, auto vt) {
        decode_launch<decltype(d)::value, decltype(kt)::value, decltype(vt)::value>(d_q, kv, d_pos, G, scale, n_split, scr,
                                                                                    d_out, oq, n_head, st);
    });
    HMOE_CUDA_LAUNCH_CHECK(err, "attn_decode");
    return HMOE_OK;
}

static enum hmoe_status decode_fused(const float *d_q, const struct hmoe_cuda_kv *kv, const int32_t *d_pos, int n_head,
                                     float scale, int max_split, void *d_scratch, unsigned int *d_counters, float *d_out,
                                     void *d_out_q8_1, const struct hmoe_cuda_qkv_args *qa, cudaStream_t st,
                                     struct hmoe_err *err) {
    int G = 0;
    const char *why = attn_check(kv, n_head, &G);
    HMOE_CUDA_REQUIRE(err, !why, "attn_decode_fused: %s", why);
    if (max_split <= 0) max_split = 32;
    HMOE_CUDA_REQUIRE(err, max_split <= 1024 && d_q && d_pos && d_scratch && d_counters && (d_out || d_out_q8_1),
                      "attn_decode_fused: max_split %d > 1024 or NULL buffer", max_split);
    HMOE_CUDA_REQUIRE(err, !d_out_q8_1 || hmoe_cu_aligned(d_out_q8_1, 16), "attn_decode_fused: q8_1 output must be 16-byte aligned");
    uint8_t *oq = (uint8_t *)d_out_q8_1;
    float *scr = (float *)d_scratch;
    unsigned int *c = d_counters;
    attn_dispatch(kv, [&](auto d, auto kt, auto vt) {
        decode1_launch<decltype(d)::value, decltype(kt)::value, decltype(vt)::value>(d_q, kv, d_pos, G, scale, max_split, scr,
                                                                                     c, d_out, oq, n_head, qa, st);
    });
    HMOE_CUDA_LAUNCH_CHECK(err, "attn_decode_fused");
    return HMOE_OK;
}

extern "C" enum hmoe_status hmoe_cuda_attn_decode_fused(const float *d_q, const struct hmoe_cuda_kv *kv,
                                                        const int32_t *d_pos, int n_head, float scale, int max_split,
                                                        void *d_scratch, unsigned int *d_counters, float *d_out,
                                                        void *d_out_q8_1, void *stream, struct hmoe_err *err) {
    return decode_fused(d_q, kv, d_pos, n_head, scale, max_split, d_scratch, d_counters, d_out, d_out_q8_1, nullptr,
                        hmoe_cu_stream(stream), err);
}

extern "C" enum hmoe_status hmoe_cuda_attn_decode_qkv(const struct hmoe_cuda_qkv_args *a, float scale, int max_split,
                                                      void *d_scratch, unsigned int *d_counters, float *d_out,
                                                      void *d_out_q8_1, void *stream, struct hmoe_err *err) {
    const int D = a->head_dim;
    HMOE_CUDA_REQUIRE(err, a->ntok == 1 && a->q && a->k && a->v && a->pos, "attn_decode_qkv: one token, q, k, v and pos needed");
    HMOE_CUDA_REQUIRE(err, a->n_head_kv == a->kv.n_head_kv && D == a->kv.head_dim,
                      "attn_decode_qkv: KV cache shape does not match the heads");
    HMOE_CUDA_REQUIRE(err, a->rope.n_rot >= 0 && a->rope.n_rot % 2 == 0 && a->rope.n_rot <= D,
                      "attn_decode_qkv: n_rot %d must be even and <= head_dim %d", a->rope.n_rot, D);
    return decode_fused(a->q, &a->kv, a->pos, a->n_head, scale, max_split, d_scratch, d_counters, d_out, d_out_q8_1, a,
                        hmoe_cu_stream(stream), err);
}

/* ------------------------------------------------ prefill ------------------------------------------------ */

/* Block (kv head hk, token tile): rows r = token_in_tile * G + g, warp w owns rows [wR, wR+R). */
template <int D, int R, int KT, int VT>
__global__ void __launch_bounds__(ATTN_WARPS * 32) attn_prefill_kernel(const float *__restrict__ q, int64_t q_stride,
                                                                       int64_t ntok, const int32_t *__restrict__ pos,
                                                                       struct hmoe_cuda_kv kv, int G, float scale,
                                                                       float *out_f32, __half *out_f16,
                                                                       int64_t out_stride) {
    /* (kv.window: each row sees its last kv.window positions; kv.sinks: one more logit per head
     * in the denominator, applied when the rows are written) */
    __shared__ __align__(16) float smem[ATTN_WARPS * R * (D + 32)];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int hk = blockIdx.x;
    const int tq = (ATTN_WARPS * R) / G; /* tokens per block */
    const int64_t tok0 = (int64_t)blockIdx.y * tq;
    float *qs = smem + warp * R * (D + 32), *sp = qs + R * D;

    int rowpos[R];
    int maxpos = -1, minlo = INT_MAX;
#pragma unroll
    for (int r = 0; r < R; r++) {
        const int row = warp * R + r;
        const int64_t tok = tok0 + row / G;
        rowpos[r] = (row < tq * G && tok < ntok) ? (int)min((int64_t)pos[tok], kv.n_ctx - 1) : -1;
        maxpos = max(maxpos, rowpos[r]);
        if (rowpos[r] >= 0) minlo = min(minlo, kv.window > 0 ? max(0, rowpos[r] - kv.window + 1) : 0);
    }
    if (minlo == INT_MAX) minlo = 0;
    for (int i = lane; i < R * D; i += 32) {
        const int r = i / D, row = warp * R + r;
        const int64_t tok = tok0 + row / G;
        const int hq = hk * G + row % G;
        qs[i] = row < tq * G && tok < ntok ? q[tok * q_stride + (int64_t)hq * D + (i % D)] * scale : 0.0f;
    }
    __syncwarp();

    attn_warp_state<D, R, KT, VT> st;
    st.init();
    const uint8_t *kbase = attn_kbase<KT>(kv, hk), *vbase = attn_vbase<VT>(kv, hk);
    for (int t0 = minlo / 32 * 32; t0 <= maxpos; t0 += 32)
        st.tile(kbase, vbase, kv.type_k, kv.type_v, t0, min(32, maxpos + 1 - t0), qs, rowpos, sp, kv.window);

#pragma unroll
    for (int r = 0; r < R; r++) {
        if (rowpos[r] < 0) continue;
        const int row = warp * R + r;
        const int64_t tok = tok0 + row / G;
        const int hq = hk * G + row % G;
        float inv = st.l[r] > 0.0f ? 1.0f / st.l[r] : 0.0f;
        if (kv.sinks) { /* o = sum p v / (sum p + exp(sink)), all relative to max(m, sink) */
            const float sink = kv.sinks[hq], M = fmaxf(st.m[r], sink), c = expf(st.m[r] - M);
            inv = c / (st.l[r] * c + expf(sink - M));
        }
#pragma unroll
        for (int j = 0; j < D / 32; j++) {
            const float v = st.o[r][j] * inv;
            const int64_t idx = tok * out_stride + (int64_t)hq * D + lane * (D / 32) + j;
            if (out_f32) out_f32[idx] = v;
            if (out_f16) out_f16[idx] = __float2half_rn(v);
        }
    }
}

template <int D, int KT, int VT>
static void prefill_launch(const float *q, int64_t q_stride, int64_t ntok, const int32_t *pos,
                           const struct hmoe_cuda_kv *kv, int G, float scale, float *o32, __half *o16, int64_t os,
                           cudaStream_t st) {
    constexpr int R = attn_rows<D>::value;
    const int tq = (ATTN_WARPS * R) / G;
    dim3 grid((unsigned)kv->n_head_kv, (unsigned)hmoe_cu_div_up(ntok, tq));
    attn_prefill_kernel<D, R, KT, VT><<<grid, ATTN_WARPS * 32, 0, st>>>(q, q_stride, ntok, pos, *kv, G, scale, o32, o16, os);
}

extern "C" enum hmoe_status hmoe_cuda_attn_prefill_old(const float *d_q, int64_t q_stride, int64_t ntok,
                                                   const int32_t *d_pos, const struct hmoe_cuda_kv *kv, int n_head,
                                                   float scale, float *d_out_f32, uint16_t *d_out_f16,
                                                   int64_t out_stride, void *stream, struct hmoe_err *err) {
    int G = 0;
    const char *why = attn_check(kv, n_head, &G);
    HMOE_CUDA_REQUIRE(err, !why, "attn_prefill: %s", why);
    const int D = kv->head_dim;
    HMOE_CUDA_REQUIRE(err, (ATTN_WARPS * (2048 / D > 16 ? 16 : 2048 / D)) % G == 0,
                      "attn_prefill: n_head / n_head_kv = %d must divide the block's %d rows", G,
                      ATTN_WARPS * (2048 / D > 16 ? 16 : 2048 / D));
    HMOE_CUDA_REQUIRE(err, q_stride >= (int64_t)n_head * D && out_stride >= (int64_t)n_head * D && ntok >= 0 && d_pos &&
                               (d_out_f32 || d_out_f16),
                      "attn_prefill: bad strides, ntok or no output");
    if (ntok == 0) return HMOE_OK;
    cudaStream_t st = hmoe_cu_stream(stream);
    __half *o16 = (__half *)d_out_f16;
    attn_dispatch(kv, [&](auto d, auto kt, auto vt) {
        prefill_launch<decltype(d)::value, decltype(kt)::value, decltype(vt)::value>(d_q, q_stride, ntok, d_pos, kv, G, scale,
                                                                                     d_out_f32, o16, out_stride, st);
    });
    HMOE_CUDA_LAUNCH_CHECK(err, "attn_prefill");
    return HMOE_OK;
}
