/* cuda_device.cu — device discovery for the CUDA backend (cuda.h). Compiled only when
 * the build has nvcc; src/kernels/cuda_none.c provides the CPU-only answers. */
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>

extern "C" {
#include "hmoe/cuda.h"
}

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
