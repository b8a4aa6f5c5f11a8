/* cuda_device.cu — device discovery, the context (device, stream, cuBLAS handle) and device
 * memory with byte accounting for the CUDA backend (cuda.h). Compiled only when the build has
 * nvcc; src/kernels/cuda_none.c provides the CPU-only answers.
 * The cuBLAS handle is created on first use (hmoe_cuda_ctx_cublas) so programs that never run
 * a cuBLAS GEMM do not pay its start-up time or memory.
 */
#include <cublas_v2.h>
#include <stdio.h>
#include <stdlib.h>

#include "kernels/cuda_ctx_impl.cuh"

extern "C" bool hmoe_cuda_available(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError(); /* clear the sticky "no device" error */
        return false;
    }
    return n > 0;
}

extern "C" enum hmoe_status hmoe_cuda_device_info(int dev, struct hmoe_cuda_device_info *out, struct hmoe_err *err) {
    cudaDeviceProp prop;
    cudaError_t e = cudaGetDeviceProperties(&prop, dev);
    if (e != cudaSuccess)
        return HMOE_RAISE(err, HMOE_ERR_DEVICE, "CUDA device %d: %s", dev, cudaGetErrorString(e));
    memset(out, 0, sizeof *out);
    hmoe_cu_mem_baseline(dev); /* before cudaSetDevice creates the context */
    snprintf(out->name, sizeof out->name, "%s", prop.name);
    out->cc_major = prop.major;
    out->cc_minor = prop.minor;
    out->n_sm = prop.multiProcessorCount;
    size_t free_b = 0, total_b = 0;
    e = cudaSetDevice(dev);
    if (e == cudaSuccess) e = cudaMemGetInfo(&free_b, &total_b);
    if (e != cudaSuccess)
        return HMOE_RAISE(err, HMOE_ERR_DEVICE, "CUDA device %d: %s", dev, cudaGetErrorString(e));
    out->total_bytes = total_b;
    out->free_bytes = free_b;
    return HMOE_OK;
}

extern "C" enum hmoe_status hmoe_cuda_ctx_init(struct hmoe_cuda_ctx **out, int dev, struct hmoe_err *err) {
    *out = NULL;
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
        cudaGetLastError();
        return HMOE_RAISE(err, HMOE_ERR_DEVICE, "no CUDA device found (is the NVIDIA driver loaded?)");
    }
    if (dev < 0 || dev >= n)
        return HMOE_RAISE(err, HMOE_ERR_ARG, "GPU %d requested but only %d CUDA device(s) exist", dev, n);
    struct hmoe_cuda_ctx *c = (struct hmoe_cuda_ctx *)calloc(1, sizeof *c);
    if (!c) return HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of host memory for the CUDA context");
    c->dev = dev;
    hmoe_cu_mem_baseline(dev);
    cudaError_t e = cudaSetDevice(dev);
    if (e == cudaSuccess) e = cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking);
    if (e != cudaSuccess) {
        free(c);
        return HMOE_RAISE(err, HMOE_ERR_DEVICE, "CUDA device %d: cannot create a stream: %s", dev, cudaGetErrorString(e));
    }
    hmoe_cu_mem_ctx_start(c);
    *out = c;
    return HMOE_OK;
}

extern "C" void hmoe_cuda_ctx_free(struct hmoe_cuda_ctx *ctx) {
    if (!ctx) return;
    cudaSetDevice(ctx->dev);
    if (ctx->cublas) cublasDestroy((cublasHandle_t)ctx->cublas);
    if (ctx->cublas_ws) cudaFree(ctx->cublas_ws);
    if (ctx->ev_start) cudaEventDestroy(ctx->ev_start);
    if (ctx->ev_stop) cudaEventDestroy(ctx->ev_stop);
    if (ctx->stream) cudaStreamDestroy(ctx->stream);
    free(ctx);
}

extern "C" void *hmoe_cuda_ctx_stream(const struct hmoe_cuda_ctx *ctx) { return (void *)ctx->stream; }
extern "C" int hmoe_cuda_ctx_device(const struct hmoe_cuda_ctx *ctx) { return ctx ? ctx->dev : -1; }
extern "C" void hmoe_cuda_use_device(int dev) {
    if (dev >= 0 && cudaSetDevice(dev) != cudaSuccess) cudaGetLastError();
}
extern "C" uint64_t hmoe_cuda_ctx_used_bytes(const struct hmoe_cuda_ctx *ctx) { return ctx->used_bytes; }
extern "C" uint64_t hmoe_cuda_ctx_peak_bytes(const struct hmoe_cuda_ctx *ctx) { return ctx->peak_bytes; }

enum hmoe_status hmoe_cuda_ctx_cublas(struct hmoe_cuda_ctx *ctx, void **handle, struct hmoe_err *err) {
    if (!ctx->cublas) {
        cudaSetDevice(ctx->dev);
        const uint64_t before = hmoe_cuda_ctx_sample(ctx);
        cublasHandle_t h;
        if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS)
            return HMOE_RAISE(err, HMOE_ERR_DEVICE, "cuBLAS: cannot create a handle (out of device memory?)");
        /* A fixed workspace keeps cuBLAS from allocating inside a graph capture. */
        const size_t ws_bytes = (size_t)32 << 20;
        if (hmoe_cu_alloc_should_fail() || cudaMalloc(&ctx->cublas_ws, ws_bytes) != cudaSuccess) {
            cublasDestroy(h);
            cudaGetLastError();
            ctx->cublas_ws = NULL;
            return HMOE_RAISE(err, HMOE_ERR_DEVICE,
                              "GPU %d: cuBLAS cannot allocate its 32 MiB workspace (out of device memory, %llu MiB "
                              "held by hmoe): lower --vram-budget or -c/--ctx-size",
                              ctx->dev, (unsigned long long)(ctx->used_bytes >> 20));
        }
        cublasSetStream(h, ctx->stream);
        cublasSetWorkspace(h, ctx->cublas_ws, ws_bytes);
        cublasSetMathMode(h, CUBLAS_DEFAULT_MATH); /* no TF32 for f32 GEMMs */
        ctx->cublas = (void *)h;
        const uint64_t after = hmoe_cuda_ctx_sample(ctx);
        ctx->cublas_bytes = after > before ? after - before : ws_bytes;
    }
    *handle = ctx->cublas;
    return HMOE_OK;
}

extern "C" enum hmoe_status hmoe_cuda_ctx_cublas_init(struct hmoe_cuda_ctx *ctx, struct hmoe_err *err) {
    void *h = NULL;
    return hmoe_cuda_ctx_cublas(ctx, &h, err);
}

extern "C" enum hmoe_status hmoe_cuda_buf_alloc(struct hmoe_cuda_ctx *ctx, size_t bytes, struct hmoe_cuda_buf *out,
                                                struct hmoe_err *err) {
    out->ptr = NULL;
    out->bytes = 0;
    if (bytes == 0) return HMOE_OK;
    /* whole 16-byte words: kernels may read a 17-byte MXFP4 block through the aligned words
     * around it (cuda_impl.cuh hmoe_cu_ld_block17) */
    bytes = (bytes + 15) & ~(size_t)15;
    cudaSetDevice(ctx->dev);
    void *p = NULL;
    cudaError_t e = hmoe_cu_alloc_should_fail() ? cudaErrorMemoryAllocation : cudaMalloc(&p, bytes);
    if (e != cudaSuccess) {
        cudaGetLastError();
        size_t free_b = 0, total_b = 0;
        cudaMemGetInfo(&free_b, &total_b);
        return HMOE_RAISE(err, HMOE_ERR_DEVICE,
                          "GPU %d: cannot allocate %zu MiB (%s); %zu MiB free of %zu MiB, %llu MiB held by hmoe: "
                          "lower --vram-budget or -c/--ctx-size",
                          ctx->dev, bytes >> 20, cudaGetErrorString(e), free_b >> 20, total_b >> 20,
                          (unsigned long long)(ctx->used_bytes >> 20));
    }
    out->ptr = p;
    out->bytes = bytes;
    ctx->used_bytes += hmoe_cuda_alloc_cost(bytes);
    if (ctx->used_bytes > ctx->peak_bytes) ctx->peak_bytes = ctx->used_bytes;
    hmoe_cuda_ctx_sample(ctx);
    return HMOE_OK;
}

extern "C" void hmoe_cuda_buf_free(struct hmoe_cuda_ctx *ctx, struct hmoe_cuda_buf *buf) {
    if (!buf || !buf->ptr) return;
    cudaFree(buf->ptr);
    ctx->used_bytes -= hmoe_cuda_alloc_cost(buf->bytes);
    buf->ptr = NULL;
    buf->bytes = 0;
}

extern "C" enum hmoe_status hmoe_cuda_upload(struct hmoe_cuda_ctx *ctx, void *d_dst, const void *src, size_t bytes,
                                             struct hmoe_err *err) {
    if (bytes == 0) return HMOE_OK;
    HMOE_CUDA_TRY(err, cudaMemcpyAsync(d_dst, src, bytes, cudaMemcpyHostToDevice, ctx->stream));
    HMOE_CUDA_TRY(err, cudaStreamSynchronize(ctx->stream));
    return HMOE_OK;
}

extern "C" enum hmoe_status hmoe_cuda_download(struct hmoe_cuda_ctx *ctx, void *dst, const void *d_src, size_t bytes,
                                               struct hmoe_err *err) {
    if (bytes == 0) return HMOE_OK;
    HMOE_CUDA_TRY(err, cudaMemcpyAsync(dst, d_src, bytes, cudaMemcpyDeviceToHost, ctx->stream));
    HMOE_CUDA_TRY(err, cudaStreamSynchronize(ctx->stream));
    return HMOE_OK;
}

extern "C" enum hmoe_status hmoe_cuda_memset(struct hmoe_cuda_ctx *ctx, void *d_dst, int byte, size_t bytes,
                                             struct hmoe_err *err) {
    if (bytes == 0) return HMOE_OK;
    HMOE_CUDA_TRY(err, cudaMemsetAsync(d_dst, byte, bytes, ctx->stream));
    return HMOE_OK;
}

extern "C" enum hmoe_status hmoe_cuda_sync(struct hmoe_cuda_ctx *ctx, struct hmoe_err *err) {
    HMOE_CUDA_TRY(err, cudaStreamSynchronize(ctx->stream));
    HMOE_CUDA_TRY(err, cudaGetLastError());
    return HMOE_OK;
}

extern "C" enum hmoe_status hmoe_cuda_copy(void *d_dst, const void *d_src, size_t bytes, void *stream,
                                           struct hmoe_err *err) {
    if (bytes == 0) return HMOE_OK;
    HMOE_CUDA_TRY(err, cudaMemcpyAsync(d_dst, d_src, bytes, cudaMemcpyDeviceToDevice, hmoe_cu_stream(stream)));
    return HMOE_OK;
}

/* splitmix64 of the word index: cheap, stateless, different per seed. */
__global__ void fill_random_kernel(uint64_t *p, size_t nwords, uint64_t seed) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < nwords; i += (size_t)gridDim.x * blockDim.x) {
        uint64_t z = seed + (i + 1) * 0x9e3779b97f4a7c15ull;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        p[i] = z ^ (z >> 31);
    }
}

extern "C" enum hmoe_status hmoe_cuda_fill_random(void *d_dst, size_t bytes, uint64_t seed, void *stream,
                                                  struct hmoe_err *err) {
    HMOE_CUDA_REQUIRE(err, hmoe_cu_aligned(d_dst, 8) && bytes % 8 == 0, "fill_random: needs 8-byte aligned whole words");
    if (bytes == 0) return HMOE_OK;
    fill_random_kernel<<<1024, 256, 0, hmoe_cu_stream(stream)>>>((uint64_t *)d_dst, bytes / 8, seed);
    HMOE_CUDA_LAUNCH_CHECK(err, "fill_random");
    return HMOE_OK;
}

extern "C" enum hmoe_status hmoe_cuda_timer_start(struct hmoe_cuda_ctx *ctx, struct hmoe_err *err) {
    if (!ctx->ev_start) {
        HMOE_CUDA_TRY(err, cudaEventCreate(&ctx->ev_start));
        HMOE_CUDA_TRY(err, cudaEventCreate(&ctx->ev_stop));
    }
    HMOE_CUDA_TRY(err, cudaEventRecord(ctx->ev_start, ctx->stream));
    return HMOE_OK;
}

extern "C" enum hmoe_status hmoe_cuda_timer_stop(struct hmoe_cuda_ctx *ctx, double *ms, struct hmoe_err *err) {
    HMOE_CUDA_REQUIRE(err, ctx->ev_start, "timer_stop without timer_start");
    HMOE_CUDA_TRY(err, cudaEventRecord(ctx->ev_stop, ctx->stream));
    HMOE_CUDA_TRY(err, cudaEventSynchronize(ctx->ev_stop));
    float f = 0.0f;
    HMOE_CUDA_TRY(err, cudaEventElapsedTime(&f, ctx->ev_start, ctx->ev_stop));
    *ms = f;
    return HMOE_OK;
}

struct hmoe_cuda_graph {
    cudaGraph_t graph;
    cudaGraphExec_t exec;
};

extern "C" enum hmoe_status hmoe_cuda_graph_capture_begin(struct hmoe_cuda_ctx *ctx, struct hmoe_err *err) {
    HMOE_CUDA_TRY(err, cudaStreamBeginCapture(ctx->stream, cudaStreamCaptureModeThreadLocal));
    return HMOE_OK;
}

extern "C" enum hmoe_status hmoe_cuda_graph_capture_end(struct hmoe_cuda_ctx *ctx, struct hmoe_cuda_graph **out,
                                                        struct hmoe_err *err) {
    *out = NULL;
    cudaGraph_t g = NULL;
    cudaError_t e = cudaStreamEndCapture(ctx->stream, &g);
    if (e != cudaSuccess) {
        cudaGetLastError();
        return HMOE_RAISE(err, HMOE_ERR_DEVICE, "graph capture failed: %s (a launch in the captured region was not capturable)",
                          cudaGetErrorString(e));
    }
    struct hmoe_cuda_graph *gr = (struct hmoe_cuda_graph *)calloc(1, sizeof *gr);
    if (!gr) {
        cudaGraphDestroy(g);
        return HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of host memory for a CUDA graph");
    }
    gr->graph = g;
    e = hmoe_cu_alloc_should_fail() ? cudaErrorMemoryAllocation : cudaGraphInstantiate(&gr->exec, g, 0);
    if (e != cudaSuccess) {
        cudaGetLastError();
        cudaGraphDestroy(g);
        free(gr);
        return HMOE_RAISE(err, HMOE_ERR_DEVICE,
                          "GPU %d: the decode graph cannot be instantiated (%s; %llu MiB held by hmoe): lower "
                          "--vram-budget or -c/--ctx-size",
                          ctx->dev, cudaGetErrorString(e), (unsigned long long)(ctx->used_bytes >> 20));
    }
    hmoe_cuda_ctx_sample(ctx);
    *out = gr;
    return HMOE_OK;
}

extern "C" enum hmoe_status hmoe_cuda_graph_launch(struct hmoe_cuda_ctx *ctx, struct hmoe_cuda_graph *g,
                                                   struct hmoe_err *err) {
    HMOE_CUDA_TRY(err, cudaGraphLaunch(g->exec, ctx->stream));
    return HMOE_OK;
}

extern "C" void hmoe_cuda_graph_free(struct hmoe_cuda_graph *g) {
    if (!g) return;
    cudaGraphExecDestroy(g->exec);
    cudaGraphDestroy(g->graph);
    free(g);
}

