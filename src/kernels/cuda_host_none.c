/* cuda_host_none.c — the host-memory, stream/event and hybrid-handoff parts of cuda.h in a
 * CPU-only build (make CUDA=0): page-locked memory degrades to plain zeroed memory (so CPU code
 * that shares such buffers still runs), everything that needs a device answers
 * HMOE_ERR_UNSUPPORTED. The CUDA build gets these from cuda_host.cu / cuda_hybrid.cu.
 */
#include <stdlib.h>

#include "hmoe/cuda.h"

#if !HMOE_HAVE_CUDA
#define NO_CUDA(err) \
    HMOE_RAISE(err, HMOE_ERR_UNSUPPORTED, "this hmoe was built without CUDA (rebuild with nvcc on PATH for GPU support)")

enum hmoe_status hmoe_cuda_host_alloc(size_t bytes, bool mapped, void **out, struct hmoe_err *err) {
    (void)mapped;
    *out = calloc(1, bytes ? bytes : 1);
    if (!*out) return HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory (%zu bytes)", bytes);
    return HMOE_OK;
}
void hmoe_cuda_host_free(void *p) { free(p); }
enum hmoe_status hmoe_cuda_host_alloc_uninit(size_t bytes, uint8_t **out, struct hmoe_err *err) {
    *out = malloc(bytes ? bytes : 1);
    if (!*out) return HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory (%zu bytes)", bytes);
    return HMOE_OK;
}
enum hmoe_status hmoe_cuda_host_register(void *p, size_t bytes, bool read_only, struct hmoe_err *err) {
    (void)p, (void)bytes, (void)read_only;
    return NO_CUDA(err);
}
void hmoe_cuda_host_unregister(void *p) { (void)p; }
enum hmoe_status hmoe_cuda_memcpy_async(void *dst, const void *src, size_t bytes, void *stream, struct hmoe_err *err) {
    (void)dst, (void)src, (void)bytes, (void)stream;
    return NO_CUDA(err);
}
enum hmoe_status hmoe_cuda_stream_create(void **out, struct hmoe_err *err) {
    *out = NULL;
    return NO_CUDA(err);
}
void hmoe_cuda_stream_destroy(void *stream) { (void)stream; }
enum hmoe_status hmoe_cuda_stream_sync(void *stream, struct hmoe_err *err) {
    (void)stream;
    return NO_CUDA(err);
}
enum hmoe_status hmoe_cuda_event_create(void **out, struct hmoe_err *err) {
    *out = NULL;
    return NO_CUDA(err);
}
void hmoe_cuda_event_destroy(void *ev) { (void)ev; }
enum hmoe_status hmoe_cuda_event_record(void *ev, void *stream, struct hmoe_err *err) {
    (void)ev, (void)stream;
    return NO_CUDA(err);
}
enum hmoe_status hmoe_cuda_stream_wait_event(void *stream, void *ev, struct hmoe_err *err) {
    (void)stream, (void)ev;
    return NO_CUDA(err);
}
int hmoe_cuda_event_query(void *ev) {
    (void)ev;
    return -1;
}
enum hmoe_status hmoe_cuda_event_sync(void *ev, struct hmoe_err *err) {
    (void)ev;
    return NO_CUDA(err);
}
enum hmoe_status hmoe_cuda_launch_host_fn(void *stream, hmoe_cuda_host_fn fn, void *arg, struct hmoe_err *err) {
    (void)stream, (void)fn, (void)arg;
    return NO_CUDA(err);
}
enum hmoe_status hmoe_cuda_event_elapsed_ms(void *start, void *stop, double *ms, struct hmoe_err *err) {
    (void)start, (void)stop;
    *ms = 0;
    return NO_CUDA(err);
}
enum hmoe_status hmoe_cuda_hybrid_publish(const int32_t *d_ids, const float *d_wts, int k, const float *d_h, int64_t n,
                                          const int32_t *d_slot_of, int n_expert, const uint32_t *d_seq,
                                          int32_t *d_gids, int32_t *d_nmiss, struct hmoe_cuda_mailbox *mb,
                                          float *h_host, void *stream, struct hmoe_err *err) {
    (void)d_ids, (void)d_wts, (void)k, (void)d_h, (void)n, (void)d_slot_of, (void)n_expert, (void)d_seq, (void)d_gids,
        (void)d_nmiss, (void)mb, (void)h_host, (void)stream;
    return NO_CUDA(err);
}
enum hmoe_status hmoe_cuda_hybrid_clock_probe(struct hmoe_cuda_clock_sync *cs, int n_rounds, int timeout_ms,
                                              void *stream, struct hmoe_err *err) {
    (void)cs, (void)n_rounds, (void)timeout_ms, (void)stream;
    return NO_CUDA(err);
}
enum hmoe_status hmoe_cuda_hybrid_wait_add(const int32_t *d_nmiss, const uint32_t *d_seq, struct hmoe_cuda_mailbox *mb,
                                           const float *res_host, float *d_x, int64_t n, int timeout_ms, void *stream,
                                           struct hmoe_err *err) {
    (void)d_nmiss, (void)d_seq, (void)mb, (void)res_host, (void)d_x, (void)n, (void)timeout_ms, (void)stream;
    return NO_CUDA(err);
}
enum hmoe_status hmoe_cuda_moe_invert_map(const int32_t *d_map, int n_expert, int32_t *d_inv, int n_inv, void *stream,
                                          struct hmoe_err *err) {
    (void)d_map, (void)n_expert, (void)d_inv, (void)n_inv, (void)stream;
    return NO_CUDA(err);
}
enum hmoe_status hmoe_cuda_moe_map_ids(const int32_t *d_ids, int64_t n, const int32_t *d_map, int n_expert,
                                       int32_t *d_out, void *stream, struct hmoe_err *err) {
    (void)d_ids, (void)n, (void)d_map, (void)n_expert, (void)d_out, (void)stream;
    return NO_CUDA(err);
}
enum hmoe_status hmoe_cuda_hybrid_publish_ex(const int32_t *d_ids, const float *d_wts, int k, const float *d_h,
                                             int64_t n, const int32_t *d_slot_of, int n_expert, const uint32_t *d_seq,
                                             int32_t *d_gids, int32_t *d_nmiss, struct hmoe_cuda_mailbox *mb,
                                             float *h_host, const struct hmoe_cuda_publish_opts *o, void *stream,
                                             struct hmoe_err *err) {
    (void)o;
    return hmoe_cuda_hybrid_publish(d_ids, d_wts, k, d_h, n, d_slot_of, n_expert, d_seq, d_gids, d_nmiss, mb, h_host,
                                    stream, err);
}
enum hmoe_status hmoe_cuda_hybrid_xfer_copy(const int32_t *d_ids, const int32_t *d_gids, int k, int n_expert,
                                            const struct hmoe_cuda_expert_src *src, uint8_t *const dst[3], void *stream,
                                            struct hmoe_err *err) {
    (void)d_ids, (void)d_gids, (void)k, (void)n_expert, (void)src, (void)dst, (void)stream;
    return NO_CUDA(err);
}
enum hmoe_status hmoe_cuda_hybrid_prefetch_plan(const struct hmoe_cuda_prefetch_args *a, void *stream,
                                                struct hmoe_err *err) {
    (void)a, (void)stream;
    return NO_CUDA(err);
}
enum hmoe_status hmoe_cuda_hybrid_prefetch_copy(const int32_t *d_queue, const struct hmoe_cuda_expert_src *src,
                                                uint8_t *const dst[3], int32_t *map, unsigned int *counter,
                                                void *stream, struct hmoe_err *err) {
    (void)d_queue, (void)src, (void)dst, (void)map, (void)counter, (void)stream;
    return NO_CUDA(err);
}
void *hmoe_cuda_host_device_ptr(void *p) {
    (void)p;
    return NULL;
}
#else
typedef int hmoe_cuda_host_none_unused;
#endif
