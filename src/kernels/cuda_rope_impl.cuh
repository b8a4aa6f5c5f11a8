/* cuda_rope_impl.cuh — private to src/kernels: the per-head pieces of qwen3moe.md §4.3 steps 4-6
 * and §5 shared by the QK-norm + RoPE + KV-store kernel (cuda_norm_rope.cu) and the fused decode
 * attention (cuda_attn.cu): the rotation angle, one warp normalising and rotating one head, and
 * the store of a head's row into the cache in its K or V type (with the values a reader of the cache
 * gets back, so a kernel can use the new row without reading it again).
 */
#ifndef HMOE_KERNELS_CUDA_ROPE_IMPL_CUH
#define HMOE_KERNELS_CUDA_ROPE_IMPL_CUH

#include "kernels/cuda_impl.cuh"
#include "kernels/cuda_kv_codec.cuh"

#define HMOE_QKR_MAXD 256
#define HMOE_QKR_MAXJ (HMOE_QKR_MAXD / 32)

/* Rotation angle of pair i at position pos (qwen3moe.md §5, §5.1, §5.2). */
__device__ __forceinline__ double hmoe_cu_rope_theta(const struct hmoe_cuda_rope &rp, int i, int pos) {
    double th_extrap = (double)pos * exp2(-2.0 * (double)i / (double)rp.n_rot * log2((double)rp.freq_base));
    double th_interp = (double)rp.freq_scale * th_extrap;
    if (rp.ext_factor == 0.0f) return th_interp;
    double y = ((double)i - rp.corr_low) / fmax(0.001, (double)rp.corr_high - rp.corr_low);
    double ramp = (1.0 - fmin(1.0, fmax(0.0, y))) * rp.ext_factor;
    return th_interp * (1.0 - ramp) + th_extrap * ramp;
}

/* One warp: v[j] (dim lane + 32 j, j < D/32) = the head src (D floats) RMS-normalised with
 * weights nw (none when NULL) and rotated with NEOX RoPE at pos; s: D floats of the warp's shared
 * scratch (the rotation partner lives in another lane). */
__device__ __forceinline__ void hmoe_cu_warp_norm_rope(const float *src, int D, const float *nw, float eps,
                                                       const struct hmoe_cuda_rope &rp, int pos, float *s,
                                                       float (&v)[HMOE_QKR_MAXJ]) {
    const int lane = threadIdx.x & 31, nj = D / 32;
    float ss = 0.0f;
#pragma unroll
    for (int j = 0; j < HMOE_QKR_MAXJ; j++) {
        v[j] = j < nj ? src[lane + 32 * j] : 0.0f;
        ss += v[j] * v[j];
    }
    if (nw) {
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
    const int half = rp.n_rot / 2;
    for (int i = lane; i < half; i += 32) {
        /* angle in double (large positions), reduced to [-pi, pi] in double, then f32 sin/cos */
        const double th = hmoe_cu_rope_theta(rp, i, pos);
        const double rd = th - 6.283185307179586 * rint(th * 0.15915494309189535);
        float sn, cs;
        sincosf((float)rd, &sn, &cs);
        const float c = cs * rp.mscale, sf = sn * rp.mscale;
        const float x0 = s[i], x1 = s[i + half];
        s[i] = x0 * c - x1 * sf;
        s[i + half] = x0 * sf + x1 * c;
    }
    __syncwarp();
#pragma unroll
    for (int j = 0; j < HMOE_QKR_MAXJ; j++)
        if (j < nj) v[j] = s[lane + 32 * j];
    __syncwarp(); /* s may be reused by the caller */
}

/* One warp stores the row of kv head h at pos (v[j] = dim lane + 32 j) into the V cache (is_v) or
 * the K cache, in that tensor's type (cuda_kv_codec.cuh), when `store`; either way v[j] becomes
 * the value a reader of the cache decodes. T: the tensor's codec when the caller's kernel is built
 * for one (only that store in the code: the fused decode step keeps its F16 registers and latency),
 * HMOE_KV_ANY to switch on the run-time type. */
template <int T = HMOE_KV_ANY>
__device__ __forceinline__ void hmoe_cu_store_cache_row(const struct hmoe_cuda_kv &kv, bool is_v, int h, int pos,
                                                        float (&v)[HMOE_QKR_MAXJ], bool store) {
    const int nj = kv.head_dim / 32;
    uint8_t *base = (uint8_t *)(is_v ? kv.v : kv.k);
    kv_with<T>(is_v ? kv.type_v : kv.type_k, [&](auto c) {
        using C = decltype(c);
        uint8_t *row = base + ((size_t)h * kv.n_ctx + pos) * (size_t)nj * C::BB;
#pragma unroll
        for (int j = 0; j < HMOE_QKR_MAXJ; j++)
            if (j < nj) v[j] = C::store(v[j], row + (size_t)j * C::BB, store);
    });
}

#endif
