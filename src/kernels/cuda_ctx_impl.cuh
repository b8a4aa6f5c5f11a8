/* cuda_ctx_impl.cuh — private: the layout of struct hmoe_cuda_ctx (opaque in cuda.h), shared by
 * cuda_device.cu (which owns it) and the launchers that need the cuBLAS handle (cuda_mmq.cu).
 */
#ifndef HMOE_KERNELS_CUDA_CTX_IMPL_CUH
#define HMOE_KERNELS_CUDA_CTX_IMPL_CUH

#include "kernels/cuda_impl.cuh"

struct hmoe_cuda_ctx {
    int dev;
    cudaStream_t stream;
    void *cublas;       /* cublasHandle_t, created on first use */
    void *cublas_ws;    /* its fixed workspace (device) */
    uint64_t used_bytes, peak_bytes;
    cudaEvent_t ev_start, ev_stop; /* the timer, created on first use */
};

/* The context's cuBLAS handle (bound to its stream), created on the first call. */
enum hmoe_status hmoe_cuda_ctx_cublas(struct hmoe_cuda_ctx *ctx, void **handle, struct hmoe_err *err);

#endif
