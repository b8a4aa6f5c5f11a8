/* cuda_mmv.cu — matrix-vector products for decode: y = W·x (+ bias) (+ add) for 1..8 activation rows
 * (or W·rmsnorm(x) for one f32 row, the norm made in every block)
 * per launch row-chunk, every supported weight type (the one type switch is in cuda_types.cuh).
 *
 * Version 2 (this one): TPR = 32/64/128 threads share a row (cuda_mmv_impl.cuh), each owns
 * RPT = 2 rows and walks the row's slices (TR::ns per block, ~16-32 weights: one 16-byte or a
 * few 4/2-byte weight loads) with stride TPR; the loop is unrolled so all weight loads of a
 * thread are in flight together. Quantized weights take q8_1 activations and compute in int8
 * (dp4a) with f32 scales (TR::vdot); F32/F16/BF16 weights take f32 activations (TR::dequant8,
 * groups of 8). Batched decode (ntok > 1): NT = 8 tokens per grid.y row of blocks, TPR = 64,
 * each weight slice loaded once for all of them.
 * Version 1 (one warp per 4 rows, lanes over slices) measured 9% of the copy roofline on
 * attn_q (4096 x 2048 Q4_K, 12.3 us): one memory latency per loop trip.
 */
#include <stdlib.h>

#include "kernels/cuda_mmv_impl.cuh"
#include "kernels/cuda_types.cuh"

#define MMV_RPT 2

/* The RMSNorm of one f32 row (n % 32 == 0) times norm_w, as the q8_1 row hmoe_cuda_rmsnorm
 * would write, into shared memory: every block of a normed matvec makes the whole row itself
 * (n floats from L2), so the decode step needs no norm launch before its q|k|v product. Each
 * thread quantizes whole 32-value blocks alone (no shuffles: the prologue stays short next to
 * a block's few rows); the same products as hmoe_cu_q8_1_warp. */
__device__ void mmv_norm_q8_1(const float *__restrict__ x, const float *__restrict__ norm_w, float eps, int n,
                              uint8_t *row) {
    __shared__ float red[HMOE_MMV_THREADS / 32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    float ss = 0.0f;
    for (int i = threadIdx.x; i < n; i += HMOE_MMV_THREADS) ss += x[i] * x[i];
    ss = hmoe_warp_sum(ss);
    if (lane == 0) red[warp] = ss;
    __syncthreads();
    ss = 0.0f;
#pragma unroll
    for (int i = 0; i < HMOE_MMV_THREADS / 32; i++) ss += red[i];
    const float r = 1.0f / sqrtf(ss / (float)n + eps);
    for (int b = threadIdx.x; b < n / 32; b += HMOE_MMV_THREADS) {
        float v[32], amax = 0.0f;
        const float4 *x4 = (const float4 *)(x + 32 * b), *w4 = (const float4 *)(norm_w + 32 * b);
#pragma unroll
        for (int j = 0; j < 8; j++) {
            const float4 a = x4[j], w = w4[j];
            v[4 * j] = (a.x * r) * w.x, v[4 * j + 1] = (a.y * r) * w.y;
            v[4 * j + 2] = (a.z * r) * w.z, v[4 * j + 3] = (a.w * r) * w.w;
        }
#pragma unroll
        for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(v[j]));
        const float d = amax / 127.0f, id = amax > 0.0f ? 127.0f / amax : 0.0f;
        int sum = 0;
        uint32_t packed[8];
#pragma unroll
        for (int j = 0; j < 8; j++) {
            uint32_t p = 0;
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int q = max(-127, min(127, __float2int_rn(v[4 * j + e] * id)));
                sum += q;
                p |= (uint32_t)(uint8_t)(int8_t)q << (8 * e);
            }
            packed[j] = p;
        }
        uint4 *dst = (uint4 *)(row + 32 * b);
        dst[0] = make_uint4(packed[0], packed[1], packed[2], packed[3]);
        dst[1] = make_uint4(packed[4], packed[5], packed[6], packed[7]);
        ((float2 *)(row + n))[b] = make_float2(d, d * (float)sum);
    }
    __syncthreads();
}

/* One row group (rows (rb * G + group) * MMV_RPT .. + MMV_RPT - 1, tokens t0 .. t0 + nt - 1) of
 * y = W·x (+ bias) (+ add): each thread's weight loads of all its rows and slices in flight at once. */
template <class TR, int NT, int TPR>
__device__ __forceinline__ void mmv_q_rows(int64_t rb, const uint8_t *__restrict__ w, size_t row_bytes, int64_t nrows,
                                           int nblocks, const uint8_t *__restrict__ x, size_t x_stride, int64_t t0, int nt,
                                           float *y, int64_t y_stride, const float *add, int64_t add_stride,
                                           const float *__restrict__ bias, float (*red)[MMV_RPT * NT]) {
    constexpr int G = HMOE_MMV_THREADS / TPR;
    const int tl = threadIdx.x % TPR;
    const int ncols = nblocks * TR::blck;
    const int64_t r0 = (rb * G + threadIdx.x / TPR) * MMV_RPT;
    const uint8_t *wr[MMV_RPT];
#pragma unroll
    for (int r = 0; r < MMV_RPT; r++) wr[r] = w + (size_t)HMOE_MIN(r0 + r, nrows - 1) * row_bytes; /* clamped: in bounds, result dropped */
    float acc[MMV_RPT * NT];
#pragma unroll
    for (int i = 0; i < MMV_RPT * NT; i++) acc[i] = 0.0f;
    const int nsl = nblocks * TR::ns;
#pragma unroll 2
    for (int s = tl; s < nsl; s += TPR) {
        const int blk = s / TR::ns, sl = s % TR::ns;
#pragma unroll
        for (int t = 0; t < NT; t++) {
            if (t < nt) {
                const uint8_t *xr = x + (size_t)(t0 + t) * x_stride;
                const int8_t *aq = (const int8_t *)xr + (size_t)blk * TR::blck;
                const float2 *ad = (const float2 *)(xr + ncols) + (size_t)blk * (TR::blck / 32);
#pragma unroll
                for (int r = 0; r < MMV_RPT; r++) acc[r * NT + t] += TR::vdot(wr[r] + (size_t)blk * TR::bytes, sl, aq, ad);
            }
        }
    }
    hmoe_mmv_group_sum<TPR>(acc, red);
    if (tl == 0) {
#pragma unroll
        for (int r = 0; r < MMV_RPT; r++)
#pragma unroll
            for (int t = 0; t < NT; t++) {
                if (r0 + r < nrows && t < nt) {
                    float v = acc[r * NT + t];
                    if (bias) v += bias[r0 + r];
                    if (add) v += add[(t0 + t) * add_stride + r0 + r];
                    y[(t0 + t) * y_stride + r0 + r] = v;
                }
            }
    }
}

template <class TR, int NT, int TPR, bool NORM>
__global__ void __launch_bounds__(HMOE_MMV_THREADS) mmv_q_kernel(const uint8_t *__restrict__ w, size_t row_bytes,
                                                                 int64_t nrows, int nblocks, const uint8_t *__restrict__ x,
                                                                 size_t x_stride, int64_t ntok, float *y, int64_t y_stride,
                                                                 const float *add, int64_t add_stride,
                                                                 const float *__restrict__ bias,
                                                                 const float *__restrict__ norm_w, float norm_eps) {
    constexpr int G = HMOE_MMV_THREADS / TPR;
    __shared__ float red[HMOE_MMV_THREADS / 32][MMV_RPT * NT];
    const int64_t t0 = (int64_t)blockIdx.y * NT;
    const int nt = (int)HMOE_MIN((int64_t)NT, ntok - t0);
    if constexpr (NORM) {
        /* x is one f32 row: normalise and quantize it here (hmoe_cuda_mmv_args.norm_w); the grid
         * is capped (MMV_NORM_BLOCKS) so that fewer blocks make the row, each over several row
         * groups. An instance of its own: the prologue's registers do not weigh on the plain one. */
        extern __shared__ __align__(16) uint8_t normed_row[];
        mmv_norm_q8_1((const float *)x, norm_w, norm_eps, nblocks * TR::blck, normed_row);
        const int64_t n_row_blocks = (nrows + G * MMV_RPT - 1) / (G * MMV_RPT);
        for (int64_t rb = blockIdx.x; rb < n_row_blocks; rb += gridDim.x) {
            mmv_q_rows<TR, NT, TPR>(rb, w, row_bytes, nrows, nblocks, normed_row, x_stride, t0, nt, y, y_stride, add,
                                    add_stride, bias, red);
            if (TPR > 32) __syncthreads(); /* red is written again by the next trip */
        }
    } else {
        (void)norm_w, (void)norm_eps;
        mmv_q_rows<TR, NT, TPR>(blockIdx.x, w, row_bytes, nrows, nblocks, x, x_stride, t0, nt, y, y_stride, add,
                                add_stride, bias, red);
    }
}

template <class TR, int NT, int TPR>
__global__ void __launch_bounds__(HMOE_MMV_THREADS) mmv_f_kernel(const uint8_t *__restrict__ w, size_t row_bytes,
                                                                 int64_t nrows, int ngroups, const uint8_t *__restrict__ x,
                                                                 size_t x_stride, int64_t ntok, float *y, int64_t y_stride,
                                                                 const float *add, int64_t add_stride,
                                                                 const float *__restrict__ bias) {
    constexpr int G = HMOE_MMV_THREADS / TPR;
    __shared__ float red[HMOE_MMV_THREADS / 32][MMV_RPT * NT];
    const int tl = threadIdx.x % TPR;
    const int64_t r0 = ((int64_t)blockIdx.x * G + threadIdx.x / TPR) * MMV_RPT;
    const int64_t t0 = (int64_t)blockIdx.y * NT;
    const int nt = (int)HMOE_MIN((int64_t)NT, ntok - t0);
    const uint8_t *wr[MMV_RPT];
#pragma unroll
    for (int r = 0; r < MMV_RPT; r++) wr[r] = w + (size_t)HMOE_MIN(r0 + r, nrows - 1) * row_bytes;
    float acc[MMV_RPT * NT];
#pragma unroll
    for (int i = 0; i < MMV_RPT * NT; i++) acc[i] = 0.0f;
#pragma unroll 2
    for (int gi = tl; gi < ngroups; gi += TPR) {
        float wv[MMV_RPT][8];
#pragma unroll
        for (int r = 0; r < MMV_RPT; r++) TR::dequant8(wr[r] + (size_t)gi * TR::bytes, 0, wv[r]);
#pragma unroll
        for (int t = 0; t < NT; t++) {
            if (t < nt) {
                const float4 *xr = (const float4 *)(x + (size_t)(t0 + t) * x_stride) + 2 * gi;
                float4 a = xr[0], b = xr[1];
#pragma unroll
                for (int r = 0; r < MMV_RPT; r++)
                    acc[r * NT + t] += wv[r][0] * a.x + wv[r][1] * a.y + wv[r][2] * a.z + wv[r][3] * a.w + wv[r][4] * b.x +
                                       wv[r][5] * b.y + wv[r][6] * b.z + wv[r][7] * b.w;
            }
        }
    }
    hmoe_mmv_group_sum<TPR>(acc, red);
    if (tl == 0) {
#pragma unroll
        for (int r = 0; r < MMV_RPT; r++)
#pragma unroll
            for (int t = 0; t < NT; t++) {
                if (r0 + r < nrows && t < nt) {
                    float v = acc[r * NT + t];
                    if (bias) v += bias[r0 + r];
                    if (add) v += add[(t0 + t) * add_stride + r0 + r];
                    y[(t0 + t) * y_stride + r0 + r] = v;
                }
            }
    }
}

/* Matrices with at least this many rows (the LM head: 151936) take TPR 32 for one token: fewer,
 * longer row groups, each thread with more loads in flight and warp-only sums. H200, tg128 of the
 * synthetic 30B files: Q4_K_M 453.6 / 454.2 vs 451.4 / 449.8 with the slice-count rule (TPR 128
 * for the Q6_K head), IQ2_XXS 439.4 / 439.8 vs 438.2 / 437.6, same logits. */
#define MMV_BIG_ROWS 32768
/* Blocks of a matvec with a normed input: each makes the q8_1 row itself (2 n floats from L2),
 * so about 4 per SM of a large GPU, each over several row groups, instead of one per group. */
#define MMV_NORM_BLOCKS 512
#define MMV_BIG_TPR 32

/* Launch the right (NT, TPR) instance: one token -> TPR from the row's slice count; several
 * tokens -> NT = 8 with TPR = 64. */
template <class TR, bool F>
static void mmv_launch(const struct hmoe_cuda_mmv_args *a, int units, cudaStream_t st) {
    const uint8_t *w = (const uint8_t *)a->w, *x = (const uint8_t *)a->x;
    const int n = F ? (int)(a->ncols / 8) : (int)(a->ncols / TR::blck);
    auto grid = [&](int tpr, int nt) {
        const int64_t blocks = hmoe_cu_div_up(a->nrows, (HMOE_MMV_THREADS / tpr) * MMV_RPT);
        return dim3((unsigned)(a->norm_w ? HMOE_MIN(blocks, (int64_t)MMV_NORM_BLOCKS) : blocks),
                    (unsigned)hmoe_cu_div_up(a->ntok, nt));
    };
#define MMV_GO(NT_, TPR_)                                                                                           \
    do {                                                                                                            \
        if constexpr (F)                                                                                            \
            hmoe_cu_launch(mmv_f_kernel<TR, NT_, TPR_>, grid(TPR_, NT_), dim3(HMOE_MMV_THREADS), 0, st, w,          \
                           a->row_bytes, a->nrows, n, x, a->x_stride_bytes, a->ntok, a->y, a->y_stride, a->add,       \
                           a->add_stride, a->bias);                                                                   \
        else if constexpr (NT_ == 1) {                                                                              \
            if (a->norm_w)                                                                                          \
                hmoe_cu_launch(mmv_q_kernel<TR, 1, TPR_, true>, grid(TPR_, 1), dim3(HMOE_MMV_THREADS), smem, st, w, \
                               a->row_bytes, a->nrows, n, x, a->x_stride_bytes, a->ntok, a->y, a->y_stride, a->add,   \
                               a->add_stride, a->bias, a->norm_w, a->norm_eps);                                       \
            else                                                                                                    \
                hmoe_cu_launch(mmv_q_kernel<TR, 1, TPR_, false>, grid(TPR_, 1), dim3(HMOE_MMV_THREADS), 0, st, w,   \
                               a->row_bytes, a->nrows, n, x, a->x_stride_bytes, a->ntok, a->y, a->y_stride, a->add,   \
                               a->add_stride, a->bias, nullptr, 0.0f);                                                \
        } else                                                                                                      \
            hmoe_cu_launch(mmv_q_kernel<TR, NT_, TPR_, false>, grid(TPR_, NT_), dim3(HMOE_MMV_THREADS), 0, st, w,   \
                           a->row_bytes, a->nrows, n, x, a->x_stride_bytes, a->ntok, a->y, a->y_stride, a->add,       \
                           a->add_stride, a->bias, nullptr, 0.0f);                                                    \
    } while (0)
    const size_t smem = a->norm_w ? hmoe_cu_q8_1_row_bytes(a->ncols) : 0;
    const int tpr = a->nrows >= MMV_BIG_ROWS ? MMV_BIG_TPR : hmoe_mmv_tpr(units);
    if (a->ntok > 1)
        MMV_GO(8, 64);
    else if (tpr == 128)
        MMV_GO(1, 128);
    else if (tpr == 64)
        MMV_GO(1, 64);
    else
        MMV_GO(1, 32);
#undef MMV_GO
}

/* Greatest common divisor of a block size with 16: the row-stride alignment the type's
 * loads need when the matrix base is 16-byte aligned. */
static int align_of_bytes(int bytes) {
    int a = 16;
    while (bytes % a) a /= 2;
    return a;
}

extern "C" enum hmoe_status hmoe_cuda_mmv(const struct hmoe_cuda_mmv_args *a, void *stream, struct hmoe_err *err) {
    int blck, bytes;
    hmoe_cuda_type_geometry(a->type, &blck, &bytes);
    HMOE_CUDA_REQUIRE(err, blck > 0, "mmv: weight type %s has no GPU kernels", hmoe_type_name(a->type));
    HMOE_CUDA_REQUIRE(err, a->ncols > 0 && a->ncols % blck == 0 && a->ncols < (1 << 30),
                      "mmv: ncols %lld is not a positive multiple of the %s block (%d)", (long long)a->ncols,
                      hmoe_type_name(a->type), blck);
    HMOE_CUDA_REQUIRE(err, a->row_bytes >= (size_t)(a->ncols / blck) * (size_t)bytes && a->row_bytes % align_of_bytes(bytes) == 0,
                      "mmv: row_bytes %zu too small or misaligned for %lld %s columns", a->row_bytes,
                      (long long)a->ncols, hmoe_type_name(a->type));
    HMOE_CUDA_REQUIRE(err, hmoe_cu_aligned(a->w, 16) && hmoe_cu_aligned(a->x, 16) && a->x_stride_bytes % 16 == 0,
                      "mmv: weights and activations must be 16-byte aligned (x_stride_bytes %zu)", a->x_stride_bytes);
    HMOE_CUDA_REQUIRE(err, a->nrows >= 0 && a->ntok >= 0 && a->y && a->y_stride >= a->nrows, "mmv: bad nrows/ntok/y");
    HMOE_CUDA_REQUIRE(err, !a->add || a->add_stride >= a->nrows, "mmv: add_stride smaller than nrows");
    HMOE_CUDA_REQUIRE(err,
                      !a->norm_w || (hmoe_type_info[a->type].is_quantized && a->ntok == 1 && a->ncols % 32 == 0 &&
                                     a->ncols <= HMOE_CUDA_MMV_NORM_MAX_COLS && hmoe_cu_aligned(a->norm_w, 16)),
                      "mmv: a normed input needs quantized weights, one token, 16-byte aligned norm weights and "
                      "ncols %% 32 == 0, <= %d",
                      HMOE_CUDA_MMV_NORM_MAX_COLS);
    if (a->nrows == 0 || a->ntok == 0) return HMOE_OK;
    HMOE_CUDA_REQUIRE(err, a->ntok <= (int64_t)65535 * 8 && a->nrows < ((int64_t)1 << 36), "mmv: ntok %lld or nrows too large", (long long)a->ntok);
    cudaStream_t st = hmoe_cu_stream(stream);
    bool bad_x = false;
    hmoe_cuda_type_dispatch(a->type, [&](auto tr) {
        using TR = decltype(tr);
        if constexpr (TR::is_float) {
            if (a->x_stride_bytes < (size_t)a->ncols * sizeof(float)) { bad_x = true; return; }
            mmv_launch<TR, true>(a, (int)(a->ncols / 8), st);
        } else {
            if (a->ncols % 32 || (!a->norm_w && a->x_stride_bytes < hmoe_cu_q8_1_row_bytes(a->ncols))) { bad_x = true; return; }
            mmv_launch<TR, false>(a, (int)(a->ncols / TR::blck) * TR::ns, st);
        }
    });
    HMOE_CUDA_REQUIRE(err, !bad_x, "mmv: x_stride_bytes %zu too small for %lld columns of %s activations",
                      a->x_stride_bytes, (long long)a->ncols, hmoe_type_info[a->type].is_quantized ? "q8_1" : "f32");
    HMOE_CUDA_LAUNCH_CHECK(err, "mmv");
    return HMOE_OK;
}
