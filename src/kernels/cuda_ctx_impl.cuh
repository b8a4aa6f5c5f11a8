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
    uint64_t used_bytes, peak_bytes; /* allocations rounded to HMOE_CUDA_ALLOC_GRANULE */
    uint64_t free_before;             /* device free bytes before this process's context */
    uint64_t context_bytes;           /* what the context took (measured or the estimate) */
    bool context_measured;
    uint64_t cublas_bytes;            /* the cuBLAS handle and workspace, measured at creation */
    uint64_t dev_peak;                /* highest own use sampled (cuda_mem.cu) */
    cudaEvent_t ev_start, ev_stop; /* the timer, created on first use */
};

/* The context's cuBLAS handle (bound to its stream), created on the first call. */
enum hmoe_status hmoe_cuda_ctx_cublas(struct hmoe_cuda_ctx *ctx, void **handle, struct hmoe_err *err);

/* cuda_mem.cu: the free bytes before the first context (call before anything that may create
 * one), the context's cost at ctx_init, and the fault hook's check (true: fail this allocation). */
extern "C" void hmoe_cu_mem_baseline(int dev);
extern "C" void hmoe_cu_mem_ctx_start(struct hmoe_cuda_ctx *ctx);
extern "C" bool hmoe_cu_alloc_should_fail(void);

#endif
