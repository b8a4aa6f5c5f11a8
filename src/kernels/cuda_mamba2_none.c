/* cuda_mamba2_none.c — the Mamba-2 and ungated-expert launchers of cuda.h in a CPU-only build
 * (make CUDA=0): no GPU, each answers HMOE_ERR_UNSUPPORTED. The CUDA build gets them from
 * cuda_mamba2.cu and cuda_moe_ungated.cu.
 */
#include "hmoe/cuda.h"

#if !HMOE_HAVE_CUDA
#define NO_CUDA(err) \
    HMOE_RAISE(err, HMOE_ERR_UNSUPPORTED, "this hmoe was built without CUDA (rebuild with nvcc on PATH for GPU support)")

enum hmoe_status hmoe_cuda_mamba2_conv(const float *d_x, int64_t x_stride, float *d_state, const float *d_w,
                                       const float *d_bias, int K, int64_t n_ch, int64_t ntok, float *d_y,
                                       int64_t y_stride, void *stream, struct hmoe_err *err) {
    (void)d_x, (void)x_stride, (void)d_state, (void)d_w, (void)d_bias, (void)K, (void)n_ch, (void)ntok, (void)d_y,
        (void)y_stride, (void)stream;
    return NO_CUDA(err);
}
enum hmoe_status hmoe_cuda_mamba2_scan(const struct hmoe_cuda_mamba2_scan_args *a, void *stream, struct hmoe_err *err) {
    (void)a, (void)stream;
    return NO_CUDA(err);
}
enum hmoe_status hmoe_cuda_mamba2_gated_norm(float *d_y, int64_t y_stride, const float *d_z, int64_t z_stride,
                                             const float *d_w, int64_t ntok, int n_group, int group_size, float eps,
                                             void *stream, struct hmoe_err *err) {
    (void)d_y, (void)y_stride, (void)d_z, (void)z_stride, (void)d_w, (void)ntok, (void)n_group, (void)group_size,
        (void)eps, (void)stream;
    return NO_CUDA(err);
}
enum hmoe_status hmoe_cuda_relu2(float *d_x, int64_t stride, int64_t nrows, int64_t n, void *stream,
                                 struct hmoe_err *err) {
    (void)d_x, (void)stride, (void)nrows, (void)n, (void)stream;
    return NO_CUDA(err);
}
enum hmoe_status hmoe_cuda_moe_topk_sigmoid(const struct hmoe_cuda_topk_sigmoid_args *a, void *stream,
                                            struct hmoe_err *err) {
    (void)a, (void)stream;
    return NO_CUDA(err);
}
enum hmoe_status hmoe_cuda_moe_up_relu2(const struct hmoe_cuda_experts *up, const int32_t *d_ids, int64_t nslot, int k,
                                        const void *d_x, size_t x_stride_bytes, float *d_z, int64_t z_stride,
                                        void *stream, struct hmoe_err *err) {
    (void)up, (void)d_ids, (void)nslot, (void)k, (void)d_x, (void)x_stride_bytes, (void)d_z, (void)z_stride, (void)stream;
    return NO_CUDA(err);
}
enum hmoe_status hmoe_cuda_moe_f32_up_relu2(const struct hmoe_cuda_experts *up, const int32_t *d_ids, int64_t nslot,
                                            int k, const float *d_x, int64_t x_stride, float *d_z, int64_t z_stride,
                                            void *stream, struct hmoe_err *err) {
    (void)up, (void)d_ids, (void)nslot, (void)k, (void)d_x, (void)x_stride, (void)d_z, (void)z_stride, (void)stream;
    return NO_CUDA(err);
}
enum hmoe_status hmoe_cuda_moe_f32_down(const struct hmoe_cuda_experts *down, const int32_t *d_ids,
                                        const float *d_weights, int64_t ntok, int k, const float *d_z, int64_t z_stride,
                                        float *d_y, int64_t y_stride, void *stream, struct hmoe_err *err) {
    (void)down, (void)d_ids, (void)d_weights, (void)ntok, (void)k, (void)d_z, (void)z_stride, (void)d_y, (void)y_stride,
        (void)stream;
    return NO_CUDA(err);
}
#endif
