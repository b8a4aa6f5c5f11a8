/* cuda_quant_act.cu — activations for the integer dot products: f32 rows -> q8_1 rows
 * (cuda.h: per 32 values d = amax/127, q = round-half-even(x * 127/amax), s = d * sum(q);
 * the CUDA-style activation of quants.md §8.5 with f32 scale and sum), and f32 -> f16.
 *
 * Shape: one warp per 32-value block, lane = element; amax and sum by warp shuffles;
 * the quants are stored as one byte per lane (32 contiguous bytes per warp).
 * The rounding matches tests/gpu_util.h ref_quantize_q8_1 exactly (single IEEE multiply).
 */
#include "kernels/cuda_impl.cuh"

__global__ void quantize_q8_1_kernel(const float *__restrict__ x, int64_t x_stride, int64_t nrows, int64_t ncols,
                                     uint8_t *__restrict__ xq, size_t row_bytes) {
    const int64_t nblk = ncols / 32, total = nrows * nblk;
    const int64_t warps = (int64_t)gridDim.x * (blockDim.x / 32);
    for (int64_t w = (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32; w < total; w += warps) {
        const int64_t r = w / nblk, b = w % nblk;
        float v = x[r * x_stride + 32 * b + (threadIdx.x & 31)];
        uint8_t *row = xq + r * row_bytes;
        hmoe_cu_q8_1_warp(v, (int8_t *)row + 32 * b, (float2 *)(row + ncols) + b);
    }
}

extern "C" size_t hmoe_cuda_q8_1_row_bytes(int64_t ncols) { return hmoe_cu_q8_1_row_bytes(ncols); }

extern "C" enum hmoe_status hmoe_cuda_quantize_q8_1(const float *d_x, int64_t x_stride, int64_t nrows, int64_t ncols,
                                                    void *d_xq, void *stream, struct hmoe_err *err) {
    HMOE_CUDA_REQUIRE(err, ncols > 0 && ncols % 32 == 0, "quantize_q8_1: ncols %lld is not a positive multiple of 32",
                      (long long)ncols);
    HMOE_CUDA_REQUIRE(err, nrows >= 0 && x_stride >= ncols, "quantize_q8_1: bad nrows / x_stride");
    HMOE_CUDA_REQUIRE(err, hmoe_cu_aligned(d_xq, 16), "quantize_q8_1: output must be 16-byte aligned");
    if (nrows == 0) return HMOE_OK;
    const int64_t total = nrows * (ncols / 32);
    const int threads = 256;
    const int64_t blocks = HMOE_MIN(hmoe_cu_div_up(total, threads / 32), (int64_t)1 << 20);
    hmoe_cu_launch(quantize_q8_1_kernel, dim3((unsigned)blocks), dim3(threads), 0, hmoe_cu_stream(stream), d_x, x_stride,
                   nrows, ncols, (uint8_t *)d_xq, hmoe_cu_q8_1_row_bytes(ncols));
    HMOE_CUDA_LAUNCH_CHECK(err, "quantize_q8_1");
    return HMOE_OK;
}

__global__ void convert_f16_kernel(const float *__restrict__ x, int64_t n, __half *__restrict__ y) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        y[i] = __float2half_rn(x[i]);
}

extern "C" enum hmoe_status hmoe_cuda_convert_f16(const float *d_x, int64_t n, uint16_t *d_y, void *stream,
                                                  struct hmoe_err *err) {
    HMOE_CUDA_REQUIRE(err, n >= 0, "convert_f16: negative count");
    if (n == 0) return HMOE_OK;
    const int threads = 256;
    const int64_t blocks = HMOE_MIN(hmoe_cu_div_up(n, threads), (int64_t)1 << 20);
    convert_f16_kernel<<<(unsigned)blocks, threads, 0, hmoe_cu_stream(stream)>>>(d_x, n, (__half *)d_y);
    HMOE_CUDA_LAUNCH_CHECK(err, "convert_f16");
    return HMOE_OK;
}
