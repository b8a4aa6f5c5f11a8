/* cuda_none.c — the cuda.h API in a CPU-only build (make CUDA=0): no GPU, clear errors. */
#include "hmoe/cuda.h"

#if !HMOE_HAVE_CUDA
bool hmoe_cuda_available(void) { return false; }

enum hmoe_status hmoe_cuda_device_info(int dev, struct hmoe_cuda_device_info *out, struct hmoe_err *err) {
    (void)out;
    return HMOE_RAISE(err, HMOE_ERR_UNSUPPORTED,
                      "GPU %d requested but this hmoe was built without CUDA (rebuild with nvcc on PATH)", dev);
}
#else
/* The CUDA build gets these from cuda_device.cu; keep the translation unit non-empty. */
typedef int hmoe_cuda_none_unused;
#endif
