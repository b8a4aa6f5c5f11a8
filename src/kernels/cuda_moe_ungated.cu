/* cuda_moe_ungated.cu — the MoE pieces of cuda.h for sigmoid-routed, ungated experts
 * (nemotron_h_moe.md §6.1): the sigmoid top-k with a selection bias, optional renormalisation
 * and scale; the decode up projection with the squared ReLU (no gate matrix: the SwiGLU kernel
 * of cuda_moe.cu reads gate and up together); and expert products for expert tensors kept as
 * F32 or F16 (any width, f32 activations), up + ReLU² per slot and down weighted per token.
 *
 *  topk_sigmoid  one warp per token: k rounds of a warp arg-max over p + bias (ties -> lower index)
 *  up_relu2      as cuda_moe.cu's gate_up: 32 threads per row, 2 rows each, q8_1 activations
 *  f32 experts   one warp per output row and slot (up) or token (down, the k experts summed in
 *                slot order in that warp: deterministic)
 */
#include <math.h>

#include "kernels/cuda_mmv_impl.cuh"
#include "kernels/cuda_types.cuh"

/* ------------------------------------------------ router ------------------------------------------------ */

#define SIG_MAXV 16 /* values per lane: n_expert <= 512 */

__global__ void moe_topk_sigmoid_kernel(struct hmoe_cuda_topk_sigmoid_args a) {
    const int64_t t = (int64_t)blockIdx.x * (blockDim.x / 32) + (threadIdx.x >> 5);
    if (t >= a.ntok) return;
    const int lane = threadIdx.x & 31, E = a.n_expert, k = a.k;
    const float *lg = a.logits + t * a.logits_stride;
    float p[SIG_MAXV], sc[SIG_MAXV];
#pragma unroll
    for (int i = 0; i < SIG_MAXV; i++) {
        const int e = lane + 32 * i;
        p[i] = e < E ? 1.0f / (1.0f + expf(-lg[e])) : 0.0f;
        sc[i] = e < E ? p[i] + (a.sel_bias ? a.sel_bias[e] : 0.0f) : -INFINITY;
    }
    uint32_t taken = 0;
    float sel_p = 0.0f;
    int sel_i = 0;
    for (int j = 0; j < k; j++) {
        float bv = -INFINITY;
        int bi = 0x7fffffff;
#pragma unroll
        for (int i = 0; i < SIG_MAXV; i++) {
            const int e = lane + 32 * i;
            if (e < E && !((taken >> i) & 1) && (sc[i] > bv || bi == 0x7fffffff)) {
                bv = sc[i];
                bi = e;
            }
        }
        float bp = 0.0f;
#pragma unroll
        for (int i = 0; i < SIG_MAXV; i++)
            if (lane + 32 * i == bi) bp = p[i];
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
            const float ov = __shfl_xor_sync(0xffffffffu, bv, o), op = __shfl_xor_sync(0xffffffffu, bp, o);
            const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
            if (ov > bv || (ov == bv && oi < bi) || (bi == 0x7fffffff && oi != 0x7fffffff)) {
                bv = ov;
                bi = oi;
                bp = op;
            }
        }
        if (bi == 0x7fffffff) bi = 0, bp = 0.0f; /* only NaN scores: a broken router; stay in range */
        if ((bi & 31) == lane) taken |= 1u << (bi >> 5);
        if (lane == j) sel_p = bp, sel_i = bi;
    }
    float w = lane < k ? sel_p : 0.0f;
    if (a.renorm) w /= fmaxf(hmoe_warp_sum(w), 6.103515625e-5f);
    if (a.scale != 0.0f && a.scale != 1.0f) w *= a.scale;
    if (lane < k) {
        a.ids[t * k + lane] = sel_i;
        a.weights[t * k + lane] = w;
    }
}

extern "C" enum hmoe_status hmoe_cuda_moe_topk_sigmoid(const struct hmoe_cuda_topk_sigmoid_args *a, void *stream,
                                                       struct hmoe_err *err) {
    HMOE_CUDA_REQUIRE(err, a->n_expert > 0 && a->n_expert <= 32 * SIG_MAXV, "moe_topk_sigmoid: n_expert %d not in 1..%d",
                      a->n_expert, 32 * SIG_MAXV);
    HMOE_CUDA_REQUIRE(err, a->k >= 1 && a->k <= a->n_expert && a->k <= 32, "moe_topk_sigmoid: k %d not in 1..min(n_expert, 32)",
                      a->k);
    HMOE_CUDA_REQUIRE(err, a->ntok >= 0 && a->ntok < ((int64_t)1 << 31) && a->logits_stride >= a->n_expert && a->logits &&
                               a->ids && a->weights,
                      "moe_topk_sigmoid: bad ntok / logits_stride or NULL buffer");
    if (a->ntok == 0) return HMOE_OK;
    moe_topk_sigmoid_kernel<<<(unsigned)hmoe_cu_div_up(a->ntok, 4), 128, 0, hmoe_cu_stream(stream)>>>(*a);
    HMOE_CUDA_LAUNCH_CHECK(err, "moe_topk_sigmoid");
    return HMOE_OK;
}

/* -------------------------------------------- decode up + ReLU² -------------------------------------------- */

#define UR_TPR 32
#define UR_RPT 2

template <class TR>
__global__ void __launch_bounds__(HMOE_MMV_THREADS) moe_up_relu2_kernel(struct hmoe_cuda_experts u,
                                                                        const int32_t *__restrict__ ids, int k,
                                                                        const uint8_t *__restrict__ x, size_t x_stride,
                                                                        float *__restrict__ z, int64_t z_stride) {
    constexpr int G = HMOE_MMV_THREADS / UR_TPR;
    __shared__ float red[HMOE_MMV_THREADS / 32][UR_RPT];
    const int tl = threadIdx.x % UR_TPR;
    const int64_t slot = blockIdx.y;
    const int64_t r0 = ((int64_t)blockIdx.x * G + threadIdx.x / UR_TPR) * UR_RPT;
    const int e = ids[slot];
    const bool ok = e >= 0 && e < u.n_expert;
    const int nblocks = (int)(u.ncols / TR::blck);
    const uint8_t *xr = x + (size_t)(slot / k) * x_stride;
    const uint8_t *uw = (const uint8_t *)u.w + (size_t)(ok ? e : 0) * u.expert_stride_bytes;
    const uint8_t *ur[UR_RPT];
#pragma unroll
    for (int r = 0; r < UR_RPT; r++) ur[r] = uw + (size_t)HMOE_MIN(r0 + r, u.nrows - 1) * u.row_bytes;
    float acc[UR_RPT];
#pragma unroll
    for (int r = 0; r < UR_RPT; r++) acc[r] = 0.0f;
    const int nsl = nblocks * TR::ns;
#pragma unroll 2
    for (int s = tl; s < nsl; s += UR_TPR) {
        const int blk = s / TR::ns, sl = s % TR::ns;
        const int8_t *aq = (const int8_t *)xr + (size_t)blk * TR::blck;
        const float2 *ad = (const float2 *)(xr + u.ncols) + (size_t)blk * (TR::blck / 32);
#pragma unroll
        for (int r = 0; r < UR_RPT; r++) acc[r] += TR::vdot(ur[r] + (size_t)blk * TR::bytes, sl, aq, ad);
    }
    hmoe_mmv_group_sum<UR_TPR>(acc, red);
    if (tl == 0) {
        float *zr = z + slot * z_stride;
#pragma unroll
        for (int r = 0; r < UR_RPT; r++) {
            if (r0 + r >= u.nrows) continue;
            const float v = acc[r];
            zr[r0 + r] = ok && v > 0.0f ? v * v : 0.0f; /* a bad expert id gives zeros */
        }
    }
}

extern "C" enum hmoe_status hmoe_cuda_moe_up_relu2(const struct hmoe_cuda_experts *up, const int32_t *d_ids,
                                                   int64_t nslot, int k, const void *d_x, size_t x_stride_bytes,
                                                   float *d_z, int64_t z_stride, void *stream, struct hmoe_err *err) {
    int blck = 0, bytes = 0;
    hmoe_cuda_type_geometry(up->type, &blck, &bytes);
    HMOE_CUDA_REQUIRE(err, blck > 0 && hmoe_type_info[up->type].is_quantized,
                      "moe_up_relu2: expert type %s must be quantized with GPU kernels", hmoe_type_name(up->type));
    HMOE_CUDA_REQUIRE(err, up->ncols > 0 && up->ncols % blck == 0 && up->ncols % 32 == 0 && up->nrows > 0 &&
                               up->n_expert > 0 && up->row_bytes >= (size_t)(up->ncols / blck) * (size_t)bytes &&
                               up->expert_stride_bytes >= up->row_bytes * (size_t)up->nrows &&
                               up->expert_stride_bytes % 16 == 0 && hmoe_cu_aligned(up->w, 16),
                      "moe_up_relu2: up (%s, %lld x %lld): ncols must be a multiple of 32 and the block, 16-byte "
                      "aligned experts",
                      hmoe_type_name(up->type), (long long)up->nrows, (long long)up->ncols);
    HMOE_CUDA_REQUIRE(err, k >= 1 && nslot >= 0 && nslot <= 65535 && z_stride >= up->nrows && d_ids && d_z,
                      "moe_up_relu2: bad k, nslot (<= 65535) or z_stride");
    HMOE_CUDA_REQUIRE(err, hmoe_cu_aligned(d_x, 16) && x_stride_bytes % 16 == 0 &&
                               x_stride_bytes >= hmoe_cu_q8_1_row_bytes(up->ncols),
                      "moe_up_relu2: activations must be 16-byte aligned q8_1 rows of %lld values", (long long)up->ncols);
    if (nslot == 0) return HMOE_OK;
    dim3 grid((unsigned)hmoe_cu_div_up(up->nrows, (HMOE_MMV_THREADS / UR_TPR) * UR_RPT), (unsigned)nslot);
    hmoe_cuda_type_dispatch(up->type, [&](auto tr) {
        using TR = decltype(tr);
        if constexpr (!TR::is_float)
            hmoe_cu_launch(moe_up_relu2_kernel<TR>, grid, dim3(HMOE_MMV_THREADS), 0, hmoe_cu_stream(stream), *up, d_ids, k,
                           (const uint8_t *)d_x, x_stride_bytes, d_z, z_stride);
    });
    HMOE_CUDA_LAUNCH_CHECK(err, "moe_up_relu2");
    return HMOE_OK;
}

/* -------------------------------------------- F32 / F16 experts -------------------------------------------- */

/* relu2 != 0: z[s][r] = relu(W_{ids[s]}[r] · x[s / k])^2 for slots s; else (down) y[t][r] +=
 * sum_j w[t k + j] W_{ids[t k + j]}[r] · x[t k + j] for tokens t. One warp per (row, slot or token). */
__global__ void moe_f32_kernel(struct hmoe_cuda_experts W, const int32_t *__restrict__ ids, const float *__restrict__ wts,
                               int k, const float *__restrict__ x, int64_t x_stride, float *y, int64_t y_stride, int relu2,
                               int64_t nrow_units) {
    const int64_t unit = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const int lane = threadIdx.x & 31;
    if (unit >= nrow_units) return;
    const int64_t r = unit % W.nrows, q = unit / W.nrows; /* q: slot (up) or token (down) */
    const int nj = relu2 ? 1 : k;
    float out = 0.0f;
    for (int j = 0; j < nj; j++) {
        const int64_t s = relu2 ? q : q * k + j;
        const int e = ids[s];
        if (e < 0 || e >= W.n_expert) continue;
        const uint8_t *wr = (const uint8_t *)W.w + (size_t)e * W.expert_stride_bytes + (size_t)r * W.row_bytes;
        const float *xr = x + (relu2 ? s / k : s) * x_stride;
        float acc = 0.0f;
        if (W.type == HMOE_TYPE_F16)
            for (int64_t c = lane; c < W.ncols; c += 32) acc += hmoe_cu_h2f(((const uint16_t *)wr)[c]) * xr[c];
        else
            for (int64_t c = lane; c < W.ncols; c += 32) acc += ((const float *)wr)[c] * xr[c];
        acc = hmoe_warp_sum(acc);
        out += relu2 ? (acc > 0.0f ? acc * acc : 0.0f) : wts[s] * acc;
    }
    if (lane == 0) {
        if (relu2) y[q * y_stride + r] = out;
        else y[q * y_stride + r] += out;
    }
}

static const char *f32_check(const struct hmoe_cuda_experts *W) {
    if (W->type != HMOE_TYPE_F32 && W->type != HMOE_TYPE_F16) return "weights must be F32 or F16";
    const size_t es = W->type == HMOE_TYPE_F32 ? 4 : 2;
    if (W->ncols <= 0 || W->nrows <= 0 || W->n_expert <= 0 || W->row_bytes < (size_t)W->ncols * es || W->row_bytes % es ||
        W->expert_stride_bytes < W->row_bytes * (size_t)W->nrows || W->expert_stride_bytes % es || !W->w)
        return "bad shape or strides";
    return nullptr;
}

extern "C" enum hmoe_status hmoe_cuda_moe_f32_up_relu2(const struct hmoe_cuda_experts *up, const int32_t *d_ids,
                                                       int64_t nslot, int k, const float *d_x, int64_t x_stride,
                                                       float *d_z, int64_t z_stride, void *stream, struct hmoe_err *err) {
    const char *why = f32_check(up);
    HMOE_CUDA_REQUIRE(err, !why, "moe_f32_up_relu2: %s", why);
    HMOE_CUDA_REQUIRE(err, k >= 1 && nslot >= 0 && x_stride >= up->ncols && z_stride >= up->nrows && d_ids && d_x && d_z,
                      "moe_f32_up_relu2: bad k, nslot or strides");
    const int64_t units = nslot * up->nrows;
    if (units == 0) return HMOE_OK;
    moe_f32_kernel<<<(unsigned)hmoe_cu_div_up(units, 4), 128, 0, hmoe_cu_stream(stream)>>>(*up, d_ids, NULL, k, d_x, x_stride,
                                                                                          d_z, z_stride, 1, units);
    HMOE_CUDA_LAUNCH_CHECK(err, "moe_f32_up_relu2");
    return HMOE_OK;
}

extern "C" enum hmoe_status hmoe_cuda_moe_f32_down(const struct hmoe_cuda_experts *down, const int32_t *d_ids,
                                                   const float *d_weights, int64_t ntok, int k, const float *d_z,
                                                   int64_t z_stride, float *d_y, int64_t y_stride, void *stream,
                                                   struct hmoe_err *err) {
    const char *why = f32_check(down);
    HMOE_CUDA_REQUIRE(err, !why, "moe_f32_down: %s", why);
    HMOE_CUDA_REQUIRE(err, k >= 1 && ntok >= 0 && z_stride >= down->ncols && y_stride >= down->nrows && d_ids && d_weights &&
                               d_z && d_y,
                      "moe_f32_down: bad k, ntok or strides");
    const int64_t units = ntok * down->nrows;
    if (units == 0) return HMOE_OK;
    moe_f32_kernel<<<(unsigned)hmoe_cu_div_up(units, 4), 128, 0, hmoe_cu_stream(stream)>>>(*down, d_ids, d_weights, k, d_z,
                                                                                          z_stride, d_y, y_stride, 0, units);
    HMOE_CUDA_LAUNCH_CHECK(err, "moe_f32_down");
    return HMOE_OK;
}
