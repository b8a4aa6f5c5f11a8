/* cuda_none.c — the cuda.h API in a CPU-only build (make CUDA=0): no GPU, clear errors.
 * Every function of cuda.h exists here so callers need no #if; each answers
 * HMOE_ERR_UNSUPPORTED (or false / 0 / a size that needs no device). */
#include <string.h>

#include "hmoe/cuda.h"

#if !HMOE_HAVE_CUDA
#define NO_CUDA(err) \
    HMOE_RAISE(err, HMOE_ERR_UNSUPPORTED, "this hmoe was built without CUDA (rebuild with nvcc on PATH for GPU support)")

bool hmoe_cuda_available(void) { return false; }

enum hmoe_status hmoe_cuda_device_info(int dev, struct hmoe_cuda_device_info *out, struct hmoe_err *err) {
    (void)out;
    return HMOE_RAISE(err, HMOE_ERR_UNSUPPORTED,
                      "GPU %d requested but this hmoe was built without CUDA (rebuild with nvcc on PATH)", dev);
}

enum hmoe_status hmoe_cuda_ctx_init(struct hmoe_cuda_ctx **out, int dev, struct hmoe_err *err) {
    (void)dev;
    *out = 0;
    return NO_CUDA(err);
}
void hmoe_cuda_ctx_free(struct hmoe_cuda_ctx *ctx) { (void)ctx; }
void *hmoe_cuda_ctx_stream(const struct hmoe_cuda_ctx *ctx) { (void)ctx; return 0; }
uint64_t hmoe_cuda_ctx_used_bytes(const struct hmoe_cuda_ctx *ctx) { (void)ctx; return 0; }
int hmoe_cuda_ctx_device(const struct hmoe_cuda_ctx *ctx) { (void)ctx; return -1; }
void hmoe_cuda_use_device(int dev) { (void)dev; }
uint64_t hmoe_cuda_ctx_peak_bytes(const struct hmoe_cuda_ctx *ctx) { (void)ctx; return 0; }

enum hmoe_status hmoe_cuda_buf_alloc(struct hmoe_cuda_ctx *ctx, size_t bytes, struct hmoe_cuda_buf *out,
                                     struct hmoe_err *err) {
    (void)ctx, (void)bytes;
    out->ptr = 0;
    out->bytes = 0;
    return NO_CUDA(err);
}
void hmoe_cuda_buf_free(struct hmoe_cuda_ctx *ctx, struct hmoe_cuda_buf *buf) { (void)ctx, (void)buf; }

void hmoe_cuda_ctx_device_mem(struct hmoe_cuda_ctx *ctx, struct hmoe_cuda_device_mem *out) {
    (void)ctx;
    memset(out, 0, sizeof *out);
}
uint64_t hmoe_cuda_ctx_sample(struct hmoe_cuda_ctx *ctx) { (void)ctx; return 0; }
enum hmoe_status hmoe_cuda_ctx_cublas_init(struct hmoe_cuda_ctx *ctx, struct hmoe_err *err) {
    (void)ctx;
    return NO_CUDA(err);
}
void hmoe_cuda_fail_alloc_at(int n) { (void)n; }
int hmoe_cuda_alloc_calls(void) { return 0; }

enum hmoe_status hmoe_cuda_upload(struct hmoe_cuda_ctx *ctx, void *d_dst, const void *src, size_t bytes,
                                  struct hmoe_err *err) {
    (void)ctx, (void)d_dst, (void)src, (void)bytes;
    return NO_CUDA(err);
}
enum hmoe_status hmoe_cuda_download(struct hmoe_cuda_ctx *ctx, void *dst, const void *d_src, size_t bytes,
                                    struct hmoe_err *err) {
    (void)ctx, (void)dst, (void)d_src, (void)bytes;
    return NO_CUDA(err);
}
enum hmoe_status hmoe_cuda_memset(struct hmoe_cuda_ctx *ctx, void *d_dst, int byte, size_t bytes,
                                  struct hmoe_err *err) {
    (void)ctx, (void)d_dst, (void)byte, (void)bytes;
    return NO_CUDA(err);
}
enum hmoe_status hmoe_cuda_sync(struct hmoe_cuda_ctx *ctx, struct hmoe_err *err) {
    (void)ctx;
    return NO_CUDA(err);
}

enum hmoe_status hmoe_cuda_copy(void *d_dst, const void *d_src, size_t bytes, void *stream, struct hmoe_err *err) {
    (void)d_dst, (void)d_src, (void)bytes, (void)stream;
    return NO_CUDA(err);
}
enum hmoe_status hmoe_cuda_fill_random(void *d_dst, size_t bytes, uint64_t seed, void *stream, struct hmoe_err *err) {
    (void)d_dst, (void)bytes, (void)seed, (void)stream;
    return NO_CUDA(err);
}
enum hmoe_status hmoe_cuda_timer_start(struct hmoe_cuda_ctx *ctx, struct hmoe_err *err) {
    (void)ctx;
    return NO_CUDA(err);
}
enum hmoe_status hmoe_cuda_timer_stop(struct hmoe_cuda_ctx *ctx, double *ms, struct hmoe_err *err) {
    (void)ctx;
    *ms = 0.0;
    return NO_CUDA(err);
}
enum hmoe_status hmoe_cuda_graph_capture_begin(struct hmoe_cuda_ctx *ctx, struct hmoe_err *err) {
    (void)ctx;
    return NO_CUDA(err);
}
enum hmoe_status hmoe_cuda_graph_capture_end(struct hmoe_cuda_ctx *ctx, struct hmoe_cuda_graph **out,
                                             struct hmoe_err *err) {
    (void)ctx;
    *out = 0;
    return NO_CUDA(err);
}
enum hmoe_status hmoe_cuda_graph_launch(struct hmoe_cuda_ctx *ctx, struct hmoe_cuda_graph *g, struct hmoe_err *err) {
    (void)ctx, (void)g;
    return NO_CUDA(err);
}
void hmoe_cuda_graph_free(struct hmoe_cuda_graph *g) { (void)g; }

bool hmoe_cuda_type_supported(enum hmoe_type type) { (void)type; return false; }

enum hmoe_status hmoe_cuda_dequant_f32(enum hmoe_type type, const void *d_src, int64_t n, float *d_dst, void *stream,
                                       struct hmoe_err *err) {
    (void)type, (void)d_src, (void)n, (void)d_dst, (void)stream;
    return NO_CUDA(err);
}
enum hmoe_status hmoe_cuda_dequant_f16(enum hmoe_type type, const void *d_src, int64_t n, uint16_t *d_dst,
                                       void *stream, struct hmoe_err *err) {
    (void)type, (void)d_src, (void)n, (void)d_dst, (void)stream;
    return NO_CUDA(err);
}

/* Pure arithmetic, the same in both builds (cuda.h states the layout). */
size_t hmoe_cuda_q8_1_row_bytes(int64_t ncols) { return (size_t)((ncols + 8 * (ncols / 32) + 15) / 16 * 16); }

enum hmoe_status hmoe_cuda_quantize_q8_1(const float *d_x, int64_t x_stride, int64_t nrows, int64_t ncols, void *d_xq,
                                         void *stream, struct hmoe_err *err) {
    (void)d_x, (void)x_stride, (void)nrows, (void)ncols, (void)d_xq, (void)stream;
    return NO_CUDA(err);
}
enum hmoe_status hmoe_cuda_convert_f16(const float *d_x, int64_t n, uint16_t *d_y, void *stream,
                                       struct hmoe_err *err) {
    (void)d_x, (void)n, (void)d_y, (void)stream;
    return NO_CUDA(err);
}

enum hmoe_status hmoe_cuda_mmv(const struct hmoe_cuda_mmv_args *a, void *stream, struct hmoe_err *err) {
    (void)a, (void)stream;
    return NO_CUDA(err);
}

enum hmoe_status hmoe_cuda_moe_topk(const float *d_logits, const float *d_bias, int gating, int64_t ntok, int n_expert,
                                    int k, int32_t *d_ids, float *d_weights, void *stream, struct hmoe_err *err) {
    (void)d_logits, (void)d_bias, (void)gating, (void)ntok, (void)n_expert, (void)k, (void)d_ids, (void)d_weights,
        (void)stream;
    return NO_CUDA(err);
}
enum hmoe_status hmoe_cuda_moe_router_topk(const float *d_w, const float *d_bias, int gating, const float *d_x,
                                           int64_t ncols, int n_expert, int k, float *d_logits, int32_t *d_ids,
                                           float *d_weights, unsigned int *d_counter, void *stream,
                                           struct hmoe_err *err) {
    (void)d_w, (void)d_bias, (void)gating, (void)d_x, (void)ncols, (void)n_expert, (void)k, (void)d_logits, (void)d_ids,
        (void)d_weights, (void)d_counter, (void)stream;
    return NO_CUDA(err);
}
enum hmoe_status hmoe_cuda_moe_gate_up(const struct hmoe_cuda_experts *gate, const struct hmoe_cuda_experts *up,
                                       const int32_t *d_ids, int64_t nslot, int k, const void *d_x,
                                       size_t x_stride_bytes, float *d_z, int64_t z_stride, void *stream,
                                       struct hmoe_err *err) {
    (void)gate, (void)up, (void)d_ids, (void)nslot, (void)k, (void)d_x, (void)x_stride_bytes, (void)d_z,
        (void)z_stride, (void)stream;
    return NO_CUDA(err);
}
enum hmoe_status hmoe_cuda_moe_down(const struct hmoe_cuda_experts *down, const int32_t *d_ids,
                                    const float *d_weights, int64_t ntok, int k, const void *d_zq,
                                    size_t zq_stride_bytes, float *d_y, int64_t y_stride, void *stream,
                                    struct hmoe_err *err) {
    (void)down, (void)d_ids, (void)d_weights, (void)ntok, (void)k, (void)d_zq, (void)zq_stride_bytes, (void)d_y,
        (void)y_stride, (void)stream;
    return NO_CUDA(err);
}
size_t hmoe_cuda_moe_plan_bytes(int64_t ntok, int k, int n_expert) {
    size_t nrows = (size_t)(ntok * k), n = 4 + (size_t)n_expert + 1 + 2 * nrows;
    n = (n + 3) / 4 * 4;
    return (n + 4 * ((nrows + HMOE_CUDA_MOE_TILE - 1) / HMOE_CUDA_MOE_TILE + (size_t)n_expert)) * sizeof(int32_t);
}
enum hmoe_status hmoe_cuda_moe_plan_build(const int32_t *d_ids, int64_t ntok, int k, int n_expert, void *d_plan,
                                          void *stream, struct hmoe_err *err) {
    (void)d_ids, (void)ntok, (void)k, (void)n_expert, (void)d_plan, (void)stream;
    return NO_CUDA(err);
}
enum hmoe_status hmoe_cuda_moe_combine(const void *d_plan, const float *d_ye, int64_t ye_stride,
                                       const float *d_weights, int64_t ntok, int k, int n_expert, int64_t ncols,
                                       float *d_y, int64_t y_stride, void *stream, struct hmoe_err *err) {
    (void)d_plan, (void)d_ye, (void)ye_stride, (void)d_weights, (void)ntok, (void)k, (void)n_expert, (void)ncols,
        (void)d_y, (void)y_stride, (void)stream;
    return NO_CUDA(err);
}

enum hmoe_status hmoe_cuda_gemm(const struct hmoe_cuda_gemm_args *a, void *stream, struct hmoe_err *err) {
    (void)a, (void)stream;
    return NO_CUDA(err);
}
enum hmoe_status hmoe_cuda_gemm_cublas(struct hmoe_cuda_ctx *ctx, const struct hmoe_cuda_gemm_args *a,
                                       uint16_t *d_scratch, struct hmoe_err *err) {
    (void)ctx, (void)a, (void)d_scratch;
    return NO_CUDA(err);
}
enum hmoe_status hmoe_cuda_gemm_f32_cublas(struct hmoe_cuda_ctx *ctx, const float *d_w, int64_t nrows, int64_t ncols,
                                           const float *d_x, int64_t ntok, float *d_y, int64_t y_stride,
                                           struct hmoe_err *err) {
    (void)ctx, (void)d_w, (void)nrows, (void)ncols, (void)d_x, (void)ntok, (void)d_y, (void)y_stride;
    return NO_CUDA(err);
}

enum hmoe_status hmoe_cuda_rmsnorm(const struct hmoe_cuda_rmsnorm_args *a, void *stream, struct hmoe_err *err) {
    (void)a, (void)stream;
    return NO_CUDA(err);
}
void hmoe_cuda_rope_yarn_corr(struct hmoe_cuda_rope *r, int n_ctx_orig, float beta_fast, float beta_slow) {
    (void)r, (void)n_ctx_orig, (void)beta_fast, (void)beta_slow;
}
enum hmoe_status hmoe_cuda_qk_norm_rope_store(const struct hmoe_cuda_qkv_args *a, void *stream,
                                              struct hmoe_err *err) {
    (void)a, (void)stream;
    return NO_CUDA(err);
}
enum hmoe_status hmoe_cuda_swiglu(const float *d_g, const float *d_u, int64_t in_stride, int64_t nrows, int64_t n,
                                  float *d_z, int64_t z_stride, void *stream, struct hmoe_err *err) {
    (void)d_g, (void)d_u, (void)in_stride, (void)nrows, (void)n, (void)d_z, (void)z_stride, (void)stream;
    return NO_CUDA(err);
}
enum hmoe_status hmoe_cuda_add_bias(float *d_y, int64_t stride, const float *d_b, int64_t ntok, int64_t n, void *stream,
                                    struct hmoe_err *err) {
    (void)d_y, (void)stride, (void)d_b, (void)ntok, (void)n, (void)stream;
    return NO_CUDA(err);
}
enum hmoe_status hmoe_cuda_add(const float *d_a, const float *d_b, int64_t n, float *d_y, void *stream,
                               struct hmoe_err *err) {
    (void)d_a, (void)d_b, (void)n, (void)d_y, (void)stream;
    return NO_CUDA(err);
}

size_t hmoe_cuda_attn_decode_scratch_bytes(int n_head, int head_dim, int n_split) {
    if (n_split <= 0) n_split = 64;
    return (size_t)n_head * (size_t)n_split * (size_t)(head_dim + 2) * sizeof(float);
}
enum hmoe_status hmoe_cuda_attn_decode(const float *d_q, const struct hmoe_cuda_kv *kv, const int32_t *d_pos,
                                       int n_head, float scale, int n_split, void *d_scratch, float *d_out,
                                       void *d_out_q8_1, void *stream, struct hmoe_err *err) {
    (void)d_q, (void)kv, (void)d_pos, (void)n_head, (void)scale, (void)n_split, (void)d_scratch, (void)d_out,
        (void)d_out_q8_1, (void)stream;
    return NO_CUDA(err);
}
enum hmoe_status hmoe_cuda_attn_prefill(const float *d_q, int64_t q_stride, int64_t ntok, const int32_t *d_pos,
                                        const struct hmoe_cuda_kv *kv, int n_head, float scale, float *d_out_f32,
                                        uint16_t *d_out_f16, int64_t out_stride, void *stream,
                                        struct hmoe_err *err) {
    (void)d_q, (void)q_stride, (void)ntok, (void)d_pos, (void)kv, (void)n_head, (void)scale, (void)d_out_f32,
        (void)d_out_f16, (void)out_stride, (void)stream;
    return NO_CUDA(err);
}
enum hmoe_status hmoe_cuda_attn_prefill_with(enum hmoe_cuda_attn_prefill_kind kind, const float *d_q, int64_t q_stride,
                                             int64_t ntok, const int32_t *d_pos, const struct hmoe_cuda_kv *kv, int n_head,
                                             float scale, float *d_out_f32, uint16_t *d_out_f16, int64_t out_stride,
                                             void *stream, struct hmoe_err *err) {
    (void)kind;
    return hmoe_cuda_attn_prefill(d_q, q_stride, ntok, d_pos, kv, n_head, scale, d_out_f32, d_out_f16, out_stride, stream,
                                  err);
}
enum hmoe_status hmoe_cuda_attn_prefill_old(const float *d_q, int64_t q_stride, int64_t ntok, const int32_t *d_pos,
                                            const struct hmoe_cuda_kv *kv, int n_head, float scale, float *d_out_f32,
                                            uint16_t *d_out_f16, int64_t out_stride, void *stream, struct hmoe_err *err) {
    return hmoe_cuda_attn_prefill(d_q, q_stride, ntok, d_pos, kv, n_head, scale, d_out_f32, d_out_f16, out_stride, stream,
                                  err);
}
enum hmoe_status hmoe_cuda_attn_prefill_mma(const float *d_q, int64_t q_stride, int64_t ntok, const int32_t *d_pos,
                                            const struct hmoe_cuda_kv *kv, int n_head, float scale, int warps,
                                            int heads_per_block, float *d_out_f32, uint16_t *d_out_f16,
                                            int64_t out_stride, void *stream, struct hmoe_err *err) {
    (void)warps, (void)heads_per_block;
    return hmoe_cuda_attn_prefill(d_q, q_stride, ntok, d_pos, kv, n_head, scale, d_out_f32, d_out_f16, out_stride, stream,
                                  err);
}
enum hmoe_status hmoe_cuda_attn_decode_fused(const float *d_q, const struct hmoe_cuda_kv *kv, const int32_t *d_pos,
                                             int n_head, float scale, int max_split, void *d_scratch,
                                             unsigned int *d_counters, float *d_out, void *d_out_q8_1, void *stream,
                                             struct hmoe_err *err) {
    (void)d_q, (void)kv, (void)d_pos, (void)n_head, (void)scale, (void)max_split, (void)d_scratch, (void)d_counters,
        (void)d_out, (void)d_out_q8_1, (void)stream;
    return NO_CUDA(err);
}
enum hmoe_status hmoe_cuda_attn_decode_qkv(const struct hmoe_cuda_qkv_args *a, float scale, int max_split,
                                           void *d_scratch, unsigned int *d_counters, float *d_out, void *d_out_q8_1,
                                           void *stream, struct hmoe_err *err) {
    (void)a, (void)scale, (void)max_split, (void)d_scratch, (void)d_counters, (void)d_out, (void)d_out_q8_1, (void)stream;
    return NO_CUDA(err);
}
enum hmoe_status hmoe_cuda_moe_router_norm_topk(const struct hmoe_cuda_router_norm_args *a, void *stream,
                                                struct hmoe_err *err) {
    (void)a, (void)stream;
    return NO_CUDA(err);
}
#else
/* The CUDA build gets these from the .cu files; keep the translation unit non-empty. */
typedef int hmoe_cuda_none_unused;
#endif
