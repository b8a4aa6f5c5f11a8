/* cuda_dequant.cu — dequantize a tensor of any supported type to f32 or f16 on the GPU.
 *
 * Version 1 (this one): one thread per group of 8 elements, the group decoded by the type's
 * dequant8 (cuda_types.cuh), written as two 16-byte f32 stores or one 16-byte f16 store.
 * f32 output is bit-identical to the type table's dequant_ref (quants.md §0.1: only exact
 * products and one final rounding; no half arithmetic, no flush-to-zero). Used by the tests,
 * the cuBLAS GEMM path (f16 weights) and the embedding lookup.
 */
#include "kernels/cuda_types.cuh"

template <class TR, bool F16>
__global__ void __launch_bounds__(256) dequant_kernel(const uint8_t *__restrict__ src, int64_t ngroups,
                                                      void *__restrict__ dst) {
    constexpr int gpb = TR::blck / 8; /* groups per block */
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < ngroups; i += (int64_t)gridDim.x * blockDim.x) {
        float y[8];
        TR::dequant8(src + (i / gpb) * TR::bytes, (int)(i % gpb), y);
        if (F16) {
            uint4 h;
            h.x = (uint32_t)hmoe_cu_f2h(y[0]) | ((uint32_t)hmoe_cu_f2h(y[1]) << 16);
            h.y = (uint32_t)hmoe_cu_f2h(y[2]) | ((uint32_t)hmoe_cu_f2h(y[3]) << 16);
            h.z = (uint32_t)hmoe_cu_f2h(y[4]) | ((uint32_t)hmoe_cu_f2h(y[5]) << 16);
            h.w = (uint32_t)hmoe_cu_f2h(y[6]) | ((uint32_t)hmoe_cu_f2h(y[7]) << 16);
            ((uint4 *)dst)[i] = h;
        } else {
            float4 *o = (float4 *)dst + 2 * i;
            o[0] = make_float4(y[0], y[1], y[2], y[3]);
            o[1] = make_float4(y[4], y[5], y[6], y[7]);
        }
    }
}

static enum hmoe_status dequant_launch(enum hmoe_type type, const void *src, int64_t n, void *dst, bool f16,
                                       void *stream, struct hmoe_err *err) {
    int blck, bytes;
    hmoe_cuda_type_geometry(type, &blck, &bytes);
    HMOE_CUDA_REQUIRE(err, blck > 0, "dequant: type %s has no GPU kernels", hmoe_type_name(type));
    HMOE_CUDA_REQUIRE(err, n >= 0 && n % blck == 0, "dequant: %lld elements is not a whole number of %s blocks (%d)",
                      (long long)n, hmoe_type_name(type), blck);
    HMOE_CUDA_REQUIRE(err, hmoe_cu_aligned(dst, 16), "dequant: output must be 16-byte aligned");
    if (n == 0) return HMOE_OK;
    const int64_t ngroups = n / 8;
    const int threads = 256;
    const int64_t blocks = HMOE_MIN(hmoe_cu_div_up(ngroups, threads), (int64_t)65535 * 8);
    hmoe_cuda_type_dispatch(type, [&](auto tr) {
        using TR = decltype(tr);
        if (f16)
            dequant_kernel<TR, true><<<(unsigned)blocks, threads, 0, hmoe_cu_stream(stream)>>>((const uint8_t *)src, ngroups, dst);
        else
            dequant_kernel<TR, false><<<(unsigned)blocks, threads, 0, hmoe_cu_stream(stream)>>>((const uint8_t *)src, ngroups, dst);
    });
    HMOE_CUDA_LAUNCH_CHECK(err, "dequant");
    return HMOE_OK;
}

extern "C" enum hmoe_status hmoe_cuda_dequant_f32(enum hmoe_type type, const void *d_src, int64_t n, float *d_dst,
                                                  void *stream, struct hmoe_err *err) {
    return dequant_launch(type, d_src, n, d_dst, false, stream, err);
}

extern "C" enum hmoe_status hmoe_cuda_dequant_f16(enum hmoe_type type, const void *d_src, int64_t n,
                                                  uint16_t *d_dst, void *stream, struct hmoe_err *err) {
    return dequant_launch(type, d_src, n, d_dst, true, stream, err);
}

extern "C" bool hmoe_cuda_type_supported(enum hmoe_type type) {
    int blck, bytes;
    hmoe_cuda_type_geometry(type, &blck, &bytes);
    return blck > 0;
}
