/* cuda_deltanet_none.c — the qwen35moe mixer launchers of cuda.h in a CPU-only build
 * (make CUDA=0): no GPU, each answers HMOE_ERR_UNSUPPORTED. The CUDA build gets them from
 * cuda_deltanet.cu.
 */
#include "hmoe/cuda.h"

#if !HMOE_HAVE_CUDA
#define NO_CUDA(err) \
    HMOE_RAISE(err, HMOE_ERR_UNSUPPORTED, "this hmoe was built without CUDA (rebuild with nvcc on PATH for GPU support)")

enum hmoe_status hmoe_cuda_gdn_gates(float *d_alpha, float *d_beta, int64_t stride, const float *d_dt_bias,
                                     const float *d_a, int64_t ntok, int n_head, void *stream, struct hmoe_err *err) {
    (void)d_alpha, (void)d_beta, (void)stride, (void)d_dt_bias, (void)d_a, (void)ntok, (void)n_head, (void)stream;
    return NO_CUDA(err);
}
enum hmoe_status hmoe_cuda_gdn_conv(const float *d_x, int64_t x_stride, float *d_state, const float *d_w, int K,
                                    int64_t n_ch, int64_t ntok, float *d_y, int64_t y_stride, void *stream,
                                    struct hmoe_err *err) {
    (void)d_x, (void)x_stride, (void)d_state, (void)d_w, (void)K, (void)n_ch, (void)ntok, (void)d_y, (void)y_stride,
        (void)stream;
    return NO_CUDA(err);
}
enum hmoe_status hmoe_cuda_gdn_l2norm(float *d_x, int64_t stride, int64_t ntok, int n_vec, int len, int n_scaled,
                                      float scale, float eps, void *stream, struct hmoe_err *err) {
    (void)d_x, (void)stride, (void)ntok, (void)n_vec, (void)len, (void)n_scaled, (void)scale, (void)eps, (void)stream;
    return NO_CUDA(err);
}
enum hmoe_status hmoe_cuda_gdn_recurrent(const struct hmoe_cuda_gdn_args *a, void *stream, struct hmoe_err *err) {
    (void)a, (void)stream;
    return NO_CUDA(err);
}
enum hmoe_status hmoe_cuda_gdn_gated_norm(float *d_o, int64_t o_stride, const float *d_z, int64_t z_stride,
                                          const float *d_w, int64_t ntok, int n_head, int dim, float eps,
                                          void *stream, struct hmoe_err *err) {
    (void)d_o, (void)o_stride, (void)d_z, (void)z_stride, (void)d_w, (void)ntok, (void)n_head, (void)dim, (void)eps,
        (void)stream;
    return NO_CUDA(err);
}
enum hmoe_status hmoe_cuda_qg_split(const float *d_qg, int64_t qg_stride, int64_t ntok, int n_head, int head_dim,
                                    float *d_q, int64_t q_stride, void *stream, struct hmoe_err *err) {
    (void)d_qg, (void)qg_stride, (void)ntok, (void)n_head, (void)head_dim, (void)d_q, (void)q_stride, (void)stream;
    return NO_CUDA(err);
}
enum hmoe_status hmoe_cuda_sigmoid_gate(float *d_o, int64_t o_stride, const float *d_qg, int64_t qg_stride,
                                        int64_t ntok, int n_head, int head_dim, void *stream, struct hmoe_err *err) {
    (void)d_o, (void)o_stride, (void)d_qg, (void)qg_stride, (void)ntok, (void)n_head, (void)head_dim, (void)stream;
    return NO_CUDA(err);
}
enum hmoe_status hmoe_cuda_gated_add(float *d_x, int64_t x_stride, const float *d_s, int64_t s_stride,
                                     const float *d_gamma, int64_t gamma_stride, int64_t ntok, int64_t n, void *stream,
                                     struct hmoe_err *err) {
    (void)d_x, (void)x_stride, (void)d_s, (void)s_stride, (void)d_gamma, (void)gamma_stride, (void)ntok, (void)n,
        (void)stream;
    return NO_CUDA(err);
}
#else
/* The CUDA build gets them from cuda_deltanet.cu; keep the translation unit non-empty. */
typedef int hmoe_cuda_deltanet_none_unused;
#endif
