/* gpu_impl.h — private to src/model: the state of the GPU backend of a context (weights
 * uploaded once, KV cache and activation buffers in VRAM, page-locked staging, the captured
 * decode graph) and the functions of gpu_init.c / gpu_forward.c. Buffers are sized once for
 * the largest micro-batch; decoding allocates nothing. Layout of the per-step parameter block:
 * step[0] = sequence number of the decode step (hybrid mailboxes), step[1] unused,
 * step[2 + t] = position of token t.
 */
#ifndef HMOE_MODEL_GPU_IMPL_H
#define HMOE_MODEL_GPU_IMPL_H

#include "hmoe/cuda.h"
#include "model/model_impl.h"

/* A dense matrix in VRAM. */
struct hmoe_gpu_mat {
    enum hmoe_type type;
    const void *w;
    size_t row_bytes;
    int64_t nrows, ncols;
    const float *bias;                 /* optional device F32 [nrows]: added by every product (hmoe_gpu_dense) */
};

struct hmoe_gpu_layer {
    struct hmoe_cuda_buf attn_buf;     /* q|k|v|o weights and the layer's F32 vectors, one allocation */
    struct hmoe_gpu_mat wq, wk, wv, wo;
    int qkv_fused;                     /* 3: one matvec for q|k|v, 2: q|k fused + v, 0: three */
    const float *attn_norm, *ffn_norm, *q_norm, *k_norm, *router; /* device, F32 */
    struct hmoe_cuda_buf exp_buf;      /* resident experts (gate|up|down), or none */
    struct hmoe_cuda_experts gate, up, down; /* resident experts (w = NULL when the layer is in RAM) */
    bool resident;                     /* all experts of this layer on the GPU */
    struct hmoe_cuda_buf kv_buf;
    struct hmoe_cuda_kv kv;            /* window and sinks of the layer's attention included */
    /* optional F32 vectors in attn_buf (device; NULL: none) */
    const float *qkv_bias;             /* [nq + nk + nv]: the layout of g->qkv rows */
    const float *o_bias, *sinks, *router_bias; /* [d], [n_head], [E] */
    const float *gate_bias, *up_bias, *down_bias; /* [E][F], [E][F], [E][d]: every layer (RAM layers' cached experts) */
};

struct hmoe_sched_hybrid;

/* Inputs of a product in every form a kernel may want: f32 rows, q8_1 rows, f16 rows. */
struct hmoe_gpu_act {
    const float *f;
    int64_t f_stride;   /* floats */
    const void *q;
    size_t q_stride;    /* bytes */
    const uint16_t *h;
    int64_t h_stride;   /* halves */
};

struct hmoe_gpu {
    struct hmoe_cuda_ctx *cu;
    void *stream;
    int n_ub;                          /* micro-batch capacity */
    int logit_rows;                    /* LM-head rows per chunk in prefill (LOGITS_ALL) */
    struct hmoe_gpu_layer *L;          /* [n_layer] */
    struct hmoe_cuda_buf head_buf;     /* output norm + LM head */
    const float *out_norm;
    struct hmoe_gpu_mat out;
    /* activations (device) */
    struct hmoe_cuda_buf act_buf;      /* everything below, one allocation */
    float *x;                          /* [n_ub][d] residual stream */
    float *hf;                         /* [n_ub][d] normalised, f32 */
    uint16_t *h16;                     /* [n_ub][d] normalised, f16 */
    void *hq;                          /* [n_ub] q8_1 rows of d */
    float *qkv;                        /* [n_ub][nq + nk + nv] */
    float *o;                          /* [n_ub][H*Dv] attention output f32 */
    uint16_t *o16;                     /* [n_ub][H*Dv] f16 */
    void *oq;                          /* [n_ub] q8_1 rows of H*Dv */
    float *rlog;                       /* [n_ub][E] router logits */
    int32_t *ids;                      /* [n_ub][k] */
    float *wts;                        /* [n_ub][k] */
    int32_t *gids;                     /* [k] hybrid: expert ids mapped to cache slots */
    int32_t *ids_mapped;               /* [n_ub][k] hybrid prefill: ids renumbered into a streamed chunk */
    int32_t *nmiss;                    /* [n_layer] hybrid: misses of the current token per layer */
    void *plan;                        /* expert plan of n_ub tokens */
    uint16_t *z16;                     /* [n_ub*k][F] gate/up output f16 (grouped path) */
    float *z;                          /* [small*k][F] gate/up output f32 (matvec path) */
    void *zq;                          /* [small*k] q8_1 rows of F */
    float *ye;                         /* [n_ub*k][d] per-expert down outputs (grouped path) */
    void *attn_scratch;
    float *logits;                     /* [logit_rows][V] */
    int32_t *step;                     /* [2 + n_ub] see the header comment */
    unsigned int *counter;             /* [GPU_COUNTERS] last-block counters of the decode kernels */
    uint16_t *cublas_scratch;          /* largest dense matrix as f16 */
    size_t cublas_scratch_halves;
    size_t act_bytes_total;
    /* page-locked host staging */
    float *emb_host;                   /* [n_ub][d] embedding rows (the CPU looks them up) */
    int32_t *step_host;                /* [2 + n_ub] */
    float *logits_host;                /* [logit_rows][V] */
    size_t kv_seq_stride;              /* bytes between two sequences' K|V regions in a layer's kv_buf */
    /* decode graphs, one per sequence (the KV pointers are baked in): captured on the sequence's
     * first single-token step, replayed after */
    struct hmoe_cuda_graph *graphs[HMOE_MAX_SEQ];
    uint32_t seq;                      /* decode steps so far (the mailbox sequence number) */
    bool fused_decode;                 /* single-token steps use the fused launchers (gpu_init.c) */
    bool norm_in_qkv;                  /* HMOE_GPU_NORM_IN_QKV=1: the fused step's q|k|v matvecs normalise their input */
    bool no_graph;                     /* HMOE_NO_GRAPH at init: decode steps launched from the host */
    struct hmoe_sched_hybrid *hyb;     /* NULL when every expert is resident */
    void *arch_state;                  /* the architecture's own weights and state (its entry's gpu->init), or NULL */
    void (*arch_free)(struct hmoe_gpu *g, int n_layer); /* the entry's gpu->free, for arch_state */
    struct hmoe_moe_weights *moe;      /* [n_layer] the MoE weight views handed to the scheduler */
    char plan_text[4096];              /* placement, for the report */
    /* accounting for the report */
    uint64_t bytes_attn, bytes_experts, bytes_head, bytes_kv, budget_bytes;
    /* the VRAM plan as nvidia-smi counts it (gpu_init.c): context, cuBLAS, the reserve for what is
     * loaded on first use, the expert cache, the streaming buffer, allocator rounding, the total */
    uint64_t bytes_context, bytes_cublas, bytes_reserve, bytes_cache, bytes_stream, bytes_pad, plan_bytes;
    int stream_bufs;                   /* an entry with its own experts: staging buffers in bytes_stream */
    bool context_measured;
    int cache_slots;      /* per RAM layer (automatic placement) */
    int slots_kv_cost;    /* cache slots per layer that the KV cache at -c takes */
    void *ev0, *ev1;                   /* step timing (verbose) */
    double gpu_ms_sum;
    uint64_t n_steps, n_timed;
    char *report;
    size_t report_cap;
    /* HMOE_GPU_PROFILE=1: device time per operation class of eager (not graph-captured) steps */
    bool prof_on;
    int prof_n;
    void **prof_ev;                    /* [HMOE_GPU_PROF_EVENTS] */
    int *prof_cls;                     /* class of the interval that starts at each event */
    double prof_ms[16];
    uint64_t prof_tokens;
};
#define HMOE_GPU_PROF_EVENTS 4096
/* Regions of g->counter (zeroed once; every kernel leaves its counters at zero). */
#define GPU_CNT_ROUTER 0         /* router (+ top-k) */
#define GPU_CNT_ATTN 64          /* [n_head] decode attention */
#define GPU_CNT_ATTN_MAX 192
#define GPU_COUNTERS 256

/* gpu_init.c */
enum hmoe_status hmoe_gpu_init(struct hmoe_ctx *c, struct hmoe_err *err);
void hmoe_gpu_free(struct hmoe_gpu *g, int n_layer);
const char *hmoe_gpu_report(struct hmoe_ctx *c);

/* gpu_forward.c — one micro-batch through the whole model on the GPU, each layer by the
 * architecture entry's gpu->layer. */
const char *hmoe_gpu_prof_name(int cls); /* NULL past the last class */
/* Pieces the architectures' layer steps call: y = W·x (+ add) with the kernel picked by shape
 * and type; the FFN of layer il (post-attention RMSNorm of g->x into g->hf/h16/hq, router,
 * routed experts resident / cached / on CPU threads, added into g->x); RoPE parameters of the
 * config; the plain layer (RMSNorm -> q|k|v (+ bias) -> QK-norm + RoPE -> attention (the layer's
 * window and sinks) -> Wo (+ bias) -> FFN). */
enum hmoe_status hmoe_gpu_dense(struct hmoe_gpu *g, const struct hmoe_gpu_mat *W, int64_t n, const struct hmoe_gpu_act *a,
                                float *y, int64_t y_stride, const float *add, struct hmoe_err *err);
enum hmoe_status hmoe_gpu_ffn(struct hmoe_ctx *c, int il, int64_t n, bool decode, struct hmoe_err *err);
struct hmoe_cuda_rope hmoe_gpu_rope_params(const struct hmoe_model_config *cfg);
enum hmoe_status hmoe_gpu_layer_attn_moe(struct hmoe_ctx *c, int il, int64_t n, bool decode, struct hmoe_err *err);

enum hmoe_status hmoe_gpu_forward(struct hmoe_ctx *c, const int32_t *ids, int n, int pos0,
                                           enum hmoe_logits which, float *logits, struct hmoe_err *err);
/* One micro-batch of c->batch's segments (rows of several sequences, model_impl.h) through the
 * model: every product on all n rows, attention per segment over its sequence's KV; the logits
 * of the segments that want them, in segment order, into logits. */
enum hmoe_status hmoe_gpu_forward_batch(struct hmoe_ctx *c, const int32_t *ids, int n, float *logits,
                                        struct hmoe_err *err);
/* Layer L's KV cache of sequence seq. */
struct hmoe_cuda_kv hmoe_gpu_kv_view(const struct hmoe_gpu *g, const struct hmoe_gpu_layer *L, int seq);

#endif
