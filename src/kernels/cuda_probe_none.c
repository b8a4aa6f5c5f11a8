/* cuda_probe_none.c — the bandwidth probes of cuda.h in a CPU-only build: no GPU. */
#include "hmoe/cuda.h"

#if !HMOE_HAVE_CUDA
enum hmoe_status hmoe_cuda_probe_h2d_gbps(int dev, size_t bytes, double *gbps, struct hmoe_err *err) {
    (void)bytes;
    *gbps = 0;
    return HMOE_RAISE(err, HMOE_ERR_UNSUPPORTED,
                      "GPU %d requested but this hmoe was built without CUDA (rebuild with nvcc on PATH)", dev);
}
enum hmoe_status hmoe_cuda_probe_d2d_gbps(int dev, size_t bytes, double *gbps, struct hmoe_err *err) {
    (void)bytes;
    *gbps = 0;
    return HMOE_RAISE(err, HMOE_ERR_UNSUPPORTED,
                      "GPU %d requested but this hmoe was built without CUDA (rebuild with nvcc on PATH)", dev);
}
#else
/* The CUDA build gets it from cuda_probe.cu; keep the translation unit non-empty. */
typedef int hmoe_cuda_probe_none_unused;
#endif
