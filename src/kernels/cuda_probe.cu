/* cuda_probe.cu — the bandwidth probes of cuda.h: host-to-device from a pinned host buffer
 * and device-to-device, each one untimed copy, then the best of a few timed copies measured
 * with CUDA events. Used by `hmoe bench` as the PCIe and HBM rooflines;
 * src/kernels/cuda_probe_none.c answers in CPU builds.
 */
#include <cuda_runtime.h>

extern "C" {
#include "hmoe/cuda.h"
}
extern "C" void hmoe_cu_mem_baseline(int dev); /* cuda_mem.cu */

/* The best of 5 timed copies of `bytes` from src to dst (after one untimed), in ms. */
static cudaError_t best_copy_ms(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind, float *best_ms) {
    cudaEvent_t start = NULL, stop = NULL;
    *best_ms = 0;
    cudaError_t e = cudaEventCreate(&start);
    if (e == cudaSuccess) e = cudaEventCreate(&stop);
    if (e == cudaSuccess) e = cudaMemcpy(dst, src, bytes, kind); /* untimed */
    for (int i = 0; i < 5 && e == cudaSuccess; i++) {
        float ms = 0;
        e = cudaEventRecord(start);
        if (e == cudaSuccess) e = cudaMemcpyAsync(dst, src, bytes, kind);
        if (e == cudaSuccess) e = cudaEventRecord(stop);
        if (e == cudaSuccess) e = cudaEventSynchronize(stop);
        if (e == cudaSuccess) e = cudaEventElapsedTime(&ms, start, stop);
        if (e == cudaSuccess && (*best_ms == 0 || ms < *best_ms)) *best_ms = ms;
    }
    if (start) cudaEventDestroy(start);
    if (stop) cudaEventDestroy(stop);
    return e;
}

extern "C" enum hmoe_status hmoe_cuda_probe_h2d_gbps(int dev, size_t bytes, double *gbps, struct hmoe_err *err) {
    *gbps = 0;
    void *host = NULL, *device = NULL;
    float best_ms = 0;
    hmoe_cu_mem_baseline(dev); /* before this call creates the context */
    cudaError_t e = cudaSetDevice(dev);
    if (e == cudaSuccess) e = cudaMallocHost(&host, bytes);
    if (e == cudaSuccess) e = cudaMalloc(&device, bytes);
    if (e == cudaSuccess) e = cudaMemset(device, 0, bytes);
    if (e == cudaSuccess) e = best_copy_ms(device, host, bytes, cudaMemcpyHostToDevice, &best_ms);
    if (device) cudaFree(device);
    if (host) cudaFreeHost(host);
    if (e != cudaSuccess) {
        cudaGetLastError();
        return HMOE_RAISE(err, HMOE_ERR_DEVICE, "CUDA device %d: host-to-device probe of %zu bytes: %s", dev, bytes,
                          cudaGetErrorString(e));
    }
    *gbps = best_ms > 0 ? (double)bytes / (best_ms * 1e-3) / 1e9 : 0;
    return HMOE_OK;
}

/* Read + write bytes per second: a device-to-device copy moves each byte twice. */
extern "C" enum hmoe_status hmoe_cuda_probe_d2d_gbps(int dev, size_t bytes, double *gbps, struct hmoe_err *err) {
    *gbps = 0;
    void *src = NULL, *dst = NULL;
    float best_ms = 0;
    cudaError_t e = cudaSetDevice(dev);
    if (e == cudaSuccess) e = cudaMalloc(&src, bytes);
    if (e == cudaSuccess) e = cudaMalloc(&dst, bytes);
    if (e == cudaSuccess) e = cudaMemset(src, 1, bytes);
    if (e == cudaSuccess) e = best_copy_ms(dst, src, bytes, cudaMemcpyDeviceToDevice, &best_ms);
    if (dst) cudaFree(dst);
    if (src) cudaFree(src);
    if (e != cudaSuccess) {
        cudaGetLastError();
        return HMOE_RAISE(err, HMOE_ERR_DEVICE, "CUDA device %d: device-to-device probe of %zu bytes: %s", dev, bytes,
                          cudaGetErrorString(e));
    }
    *gbps = best_ms > 0 ? 2.0 * (double)bytes / (best_ms * 1e-3) / 1e9 : 0;
    return HMOE_OK;
}
