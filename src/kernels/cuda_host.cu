/* cuda_host.cu — page-locked host memory, pinning of existing ranges, asynchronous copies,
 * extra streams and events (cuda.h "Host memory, streams and events"). Thin wrappers: each
 * turns a CUDA error into an hmoe_err that names the call. Used by the GPU forward pass
 * (graph-captured copies from pinned buffers) and the hybrid scheduler (background expert
 * copies on a second stream, mapped mailboxes).
 */
#include "kernels/cuda_impl.cuh"

extern "C" enum hmoe_status hmoe_cuda_host_alloc(size_t bytes, bool mapped, void **out, struct hmoe_err *err) {
    *out = NULL;
    if (bytes == 0) bytes = 1;
    void *p = NULL;
    cudaError_t e = cudaHostAlloc(&p, bytes, mapped ? cudaHostAllocMapped : cudaHostAllocDefault);
    if (e != cudaSuccess) {
        cudaGetLastError();
        return HMOE_RAISE(err, HMOE_ERR_DEVICE, "cannot allocate %zu MiB of page-locked host memory: %s", bytes >> 20,
                          cudaGetErrorString(e));
    }
    if (mapped) {
        void *dp = NULL;
        e = cudaHostGetDevicePointer(&dp, p, 0);
        if (e != cudaSuccess || dp != p) {
            cudaGetLastError();
            cudaFreeHost(p);
            return HMOE_RAISE(err, HMOE_ERR_DEVICE,
                              "mapped host memory is not addressable at the same pointer on the device (%s); this GPU "
                              "needs unified addressing",
                              e != cudaSuccess ? cudaGetErrorString(e) : "different address");
        }
    }
    memset(p, 0, bytes);
    *out = p;
    return HMOE_OK;
}

extern "C" enum hmoe_status hmoe_cuda_host_alloc_uninit(size_t bytes, uint8_t **out, struct hmoe_err *err) {
    *out = NULL;
    void *p = NULL;
    /* portable + mapped: kernels read it at the host address (transfer / prefetch copies) */
    cudaError_t e = cudaHostAlloc(&p, bytes ? bytes : 1, cudaHostAllocPortable | cudaHostAllocMapped);
    if (e != cudaSuccess) {
        cudaGetLastError();
        return HMOE_RAISE(err, HMOE_ERR_DEVICE, "cannot allocate %zu MiB of page-locked host memory: %s", bytes >> 20,
                          cudaGetErrorString(e));
    }
    *out = (uint8_t *)p;
    return HMOE_OK;
}

extern "C" void hmoe_cuda_host_free(void *p) {
    if (p) cudaFreeHost(p);
}

extern "C" enum hmoe_status hmoe_cuda_host_register(void *p, size_t bytes, bool read_only, struct hmoe_err *err) {
    /* mapped: kernels may read it (transfer / prefetch copies); read-only: the mapping is PROT_READ */
    unsigned flags = cudaHostRegisterPortable | cudaHostRegisterMapped | (read_only ? cudaHostRegisterReadOnly : 0);
    cudaError_t e = cudaHostRegister(p, bytes, flags);
    if (e != cudaSuccess) {
        cudaGetLastError();
        return HMOE_RAISE(err, HMOE_ERR_DEVICE, "cannot page-lock %zu MiB of host memory: %s", bytes >> 20,
                          cudaGetErrorString(e));
    }
    return HMOE_OK;
}

extern "C" void *hmoe_cuda_host_device_ptr(void *p) {
    void *dp = NULL;
    if (!p || cudaHostGetDevicePointer(&dp, p, 0) != cudaSuccess) {
        cudaGetLastError();
        return NULL;
    }
    return dp;
}

extern "C" void hmoe_cuda_host_unregister(void *p) {
    if (p && cudaHostUnregister(p) != cudaSuccess) cudaGetLastError();
}

extern "C" enum hmoe_status hmoe_cuda_memcpy_async(void *dst, const void *src, size_t bytes, void *stream,
                                                   struct hmoe_err *err) {
    if (bytes == 0) return HMOE_OK;
    HMOE_CUDA_TRY(err, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, hmoe_cu_stream(stream)));
    return HMOE_OK;
}

extern "C" enum hmoe_status hmoe_cuda_stream_create(void **out, struct hmoe_err *err) {
    cudaStream_t s = NULL;
    *out = NULL;
    HMOE_CUDA_TRY(err, cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    *out = (void *)s;
    return HMOE_OK;
}

extern "C" void hmoe_cuda_stream_destroy(void *stream) {
    if (stream) cudaStreamDestroy((cudaStream_t)stream);
}

extern "C" enum hmoe_status hmoe_cuda_stream_sync(void *stream, struct hmoe_err *err) {
    HMOE_CUDA_TRY(err, cudaStreamSynchronize(hmoe_cu_stream(stream)));
    return HMOE_OK;
}

extern "C" enum hmoe_status hmoe_cuda_event_create(void **out, struct hmoe_err *err) {
    cudaEvent_t e = NULL;
    *out = NULL;
    HMOE_CUDA_TRY(err, cudaEventCreate(&e));
    *out = (void *)e;
    return HMOE_OK;
}

extern "C" void hmoe_cuda_event_destroy(void *ev) {
    if (ev) cudaEventDestroy((cudaEvent_t)ev);
}

extern "C" enum hmoe_status hmoe_cuda_event_record(void *ev, void *stream, struct hmoe_err *err) {
    HMOE_CUDA_TRY(err, cudaEventRecord((cudaEvent_t)ev, hmoe_cu_stream(stream)));
    return HMOE_OK;
}

extern "C" enum hmoe_status hmoe_cuda_stream_wait_event(void *stream, void *ev, struct hmoe_err *err) {
    HMOE_CUDA_TRY(err, cudaStreamWaitEvent(hmoe_cu_stream(stream), (cudaEvent_t)ev, 0));
    return HMOE_OK;
}

extern "C" int hmoe_cuda_event_query(void *ev) {
    cudaError_t e = cudaEventQuery((cudaEvent_t)ev);
    if (e == cudaSuccess) return 1;
    if (e == cudaErrorNotReady) return 0;
    return -1;
}

extern "C" enum hmoe_status hmoe_cuda_event_sync(void *ev, struct hmoe_err *err) {
    HMOE_CUDA_TRY(err, cudaEventSynchronize((cudaEvent_t)ev));
    return HMOE_OK;
}

extern "C" enum hmoe_status hmoe_cuda_launch_host_fn(void *stream, hmoe_cuda_host_fn fn, void *arg,
                                                     struct hmoe_err *err) {
    HMOE_CUDA_TRY(err, cudaLaunchHostFunc(hmoe_cu_stream(stream), (cudaHostFn_t)fn, arg));
    return HMOE_OK;
}

extern "C" enum hmoe_status hmoe_cuda_event_elapsed_ms(void *start, void *stop, double *ms, struct hmoe_err *err) {
    float f = 0.0f;
    HMOE_CUDA_TRY(err, cudaEventElapsedTime(&f, (cudaEvent_t)start, (cudaEvent_t)stop));
    *ms = f;
    return HMOE_OK;
}
