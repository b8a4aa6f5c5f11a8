/* cuda.h — the GPU backend as seen from C (the .cu files in src/kernels). Every function exists in
 * every build: without CUDA (make CUDA=0) they report that no GPU is available. */
#ifndef HMOE_CUDA_H
#define HMOE_CUDA_H

#include "hmoe/common.h"

struct hmoe_cuda_device_info {
    char name[256];
    int cc_major, cc_minor;     /* compute capability */
    int n_sm;
    uint64_t total_bytes;       /* device memory */
    uint64_t free_bytes;        /* free right now */
};

/* True when this build has CUDA and at least one device answers. */
bool hmoe_cuda_available(void);

/* Properties of device `dev`. HMOE_ERR_DEVICE with the CUDA message on failure,
 * HMOE_ERR_UNSUPPORTED in a CPU-only build. */
enum hmoe_status hmoe_cuda_device_info(int dev, struct hmoe_cuda_device_info *out, struct hmoe_err *err);

/* Host-to-device copy bandwidth of device `dev` from pinned host memory in GB/s (1e9 B/s):
 * best of several copies of `bytes` after one untimed copy (src/kernels/cuda_probe.cu).
 * The PCIe roofline `hmoe bench` reports expert streaming against. HMOE_ERR_UNSUPPORTED in
 * a CPU-only build. */
enum hmoe_status hmoe_cuda_probe_h2d_gbps(int dev, size_t bytes, double *gbps, struct hmoe_err *err);

#endif
