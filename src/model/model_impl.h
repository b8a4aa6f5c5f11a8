/* model_impl.h — private to src/model: the run state of a context and the building blocks
 * the forward passes share (RMSNorm, RoPE table, dense matmul, attention over the KV cache).
 * Sizes are fixed by hmoe_ctx_init; nothing here allocates while decoding.
 */
#ifndef HMOE_MODEL_IMPL_H
#define HMOE_MODEL_IMPL_H

#include "hmoe/arch.h"
#include "hmoe/model.h"

/* Every activation buffer of one micro-batch of up to n_ub tokens, plus the KV cache. */
struct hmoe_run_state {
    float *x;           /* [n_ub][d] residual stream */
    float *xn;          /* [n_ub][d] RMS-normalised input of the current sub-layer */
    float *q;           /* [n_ub][H*D] queries (normed + roped in place) */
    float *k;           /* [n_ub][Hkv*D] keys of this batch */
    float *v;           /* [n_ub][Hkv*Dv] values of this batch */
    float *attn;        /* [n_ub][H*Dv] attention output, heads concatenated */
    float *out;         /* [n_ub][d] sub-layer output (Wo result, MoE result) */
    float *rope_cos;    /* [n_ub][n_rot/2] per token, shared by all layers and heads */
    float *rope_sin;    /* [n_ub][n_rot/2] */
    int32_t *pos;       /* [n_ub] absolute position of each token */
    uint8_t *act;       /* [3][n_ub][act_row_bytes]: quantized matmul inputs, one slot per activation type */
    size_t act_row_bytes;
    float *att_scores;  /* [n_threads][att_tok * G][n_ctx + 32] attention scores -> probabilities (G = query heads per KV head) */
    uint8_t *att_q;     /* [n_threads][att_tok * G][att_q_bytes] queries in the K cache's dot format */
    float *att_v;       /* [n_threads][max(D, Dv)] one V row converted to f32 (row layout) or to type_v
                           (transposed); one K row in f32 during a context shift (kv_shift.c) */
    float *att_o;       /* [n_threads][att_tok * G][Dv] a token chunk's outputs before they go to attn */
    size_t att_q_bytes;
    int att_tok;        /* tokens per work item of a batch's attention (they share each K/V read) */
    uint8_t **k_cache;  /* [n_layer] -> [Hkv][n_ctx] rows of D elements in type_k (a head's keys contiguous) */
    uint8_t **v_cache;  /* [n_layer] -> transposed [Hkv][Dv][n_ctx] when v_trans, else [n_ctx][Hkv][Dv] */
    struct hmoe_sched_moe *moe; /* MoE workspace (src/sched) */
    struct hmoe_rec_state *rec; /* recurrent state and its scratch (recurrent_impl.h), NULL for attention-only models */
};

/* One sequence of a context: its share of the KV pool and its recurrent state. The selected
 * sequence's fields are mirrored in hmoe_ctx (n_past, rs.k_cache, rs.v_cache, rs.rec), which
 * every single-sequence path reads; hmoe_ctx_use_seq stores them back and loads another's. */
struct hmoe_seq {
    int n_past;
    uint8_t **k_cache, **v_cache; /* [n_layer] its cache of p.n_ctx positions in the pool (NULL: no KV layer) */
    struct hmoe_rec_state *rec;   /* its state; sequence 0's owns the micro-batch scratch the others borrow */
};

/* The rows of a batched micro-batch: segment i is sequence seq's rows row0 .. row0+n-1 at
 * positions pos0 .. pos0+n-1 (batch.c). */
struct hmoe_batch_seg {
    int seq, row0, n, pos0;
    bool logits;               /* logits of its last row */
};
struct hmoe_batch_rows {
    int n_seg;
    struct hmoe_batch_seg seg[HMOE_MAX_SEQ];
};

struct hmoe_ctx {
    const struct hmoe_model *m;
    struct hmoe_ctx_params p;  /* after defaults and capping; n_ctx is one sequence's capacity */
    int n_past;                /* positions 0 .. n_past-1 are in the KV cache */
    int cur_seq;               /* the selected sequence (mirrored fields above and in rs) */
    struct hmoe_seq *seqs;     /* [p.n_seq] */
    const struct hmoe_batch_rows *batch; /* during a batched forward: its segments; NULL otherwise */
    size_t k_row_bytes;        /* one head's K row (D elements of type_k) */
    size_t v_row_bytes;        /* one head's V row (Dv elements of type_v) */
    bool v_trans;              /* V cached transposed (types without blocks: f32, f16, bf16), so that
                                  softmax(QK) V is one cpu.h product over positions */
    size_t kv_bytes;           /* whole cache */
    struct hmoe_run_state rs;
    struct hmoe_gpu *gpu;      /* GPU backend state (gpu_impl.h), NULL on the CPU */
    struct hmoe_mtp *mtp;      /* the MTP block drafting for speculative decoding (mtp_impl.h), or NULL */
    float *keep_hidden;        /* non-NULL: hmoe_model_logits keeps every row's final normed hidden state
                                  here ([n_ub][d], the MTP block's input) */
};

/* config.c */
enum hmoe_status hmoe_model_read_config(const struct hmoe_gguf *g, const struct hmoe_model_params *p,
                                        struct hmoe_model_config *c, struct hmoe_err *err);
/* config.c — "{arch}.{suffix}" as a positive integer (an array must repeat one value) or a
 * finite float; absent: dflt, or an error naming the key when required. */
enum hmoe_status hmoe_model_cfg_int(const struct hmoe_gguf *g, const char *arch, const char *suffix, bool required,
                                    int dflt, int *out, struct hmoe_err *err);
enum hmoe_status hmoe_model_cfg_float(const struct hmoe_gguf *g, const char *arch, const char *suffix, bool required,
                                      float dflt, float *out, struct hmoe_err *err);

/* weights.c — bind the matrix (or expert stack) `name` with shape want[0..n_want) and a type
 * that has CPU kernels; bind an F32 vector of n values (absent + !required: *v = NULL, OK).
 * Errors name the tensor, its shape and what the architecture needs. */
enum hmoe_status hmoe_model_bind_mat(struct hmoe_model *md, const char *name, const int64_t *want, int n_want,
                                     struct hmoe_mat *m, struct hmoe_err *err);
enum hmoe_status hmoe_model_bind_vec(struct hmoe_model *md, const char *name, int64_t n, bool required,
                                     const float **v, struct hmoe_err *err);
/* weights.c — an F32 tensor used as plain numbers (conv taps, per-head vectors stored as
 * {1, n}) with shape want[0..n_want); absent + !required: *v = NULL, OK. */
enum hmoe_status hmoe_model_bind_f32(struct hmoe_model *md, const char *name, const int64_t *want, int n_want,
                                     bool required, const float **v, struct hmoe_err *err);
/* weights.c — Q/K/V of layer il: three tensors, or one fused attn_qkv {d, H*D + Hkv*D + Hkv*Dv}
 * whose row ranges become three views (qwen3moe.md §2); optional F32 biases either way. */
enum hmoe_status hmoe_model_bind_qkv(struct hmoe_model *md, int il, struct hmoe_layer_weights *L,
                                     struct hmoe_err *err);

/* ops.c — y = (x / sqrt(mean(x^2) + eps)) * w over n values, sum of squares in double
 * as ggml's CPU RMSNorm (qwen3moe.md §4.2). In-place allowed (y == x). */
void hmoe_model_rmsnorm(float *y, const float *x, const float *w, int64_t n, float eps);

/* ops.c — cos/sin of every rotated pair for each token position (qwen3moe.md §5 with
 * linear / YaRN scaling, §5.1-5.2), angles built as ggml does (theta *= base^(-2/n_rot)). */
void hmoe_model_rope_table(const struct hmoe_model_config *c, const int32_t *pos, int n, float *cos_out,
                           float *sin_out);

/* ops.c — NEOX rotation of one head vector of n_rot values with one token's table. */
void hmoe_model_rope_neox(float *x, int n_rot, const float *cos_t, const float *sin_t);

/* ops.c — dense products that share one input: y_j = W_j · x (+ bias_j) for every job, all
 * tokens, as one job of the cpu.h thread team (hmoe_cpu_parallel). The input is quantized
 * once per distinct activation type (at most 3). */
struct hmoe_mm_job {
    const struct hmoe_mat *w;
    float *y;              /* ntok rows, y_stride floats apart */
    size_t y_stride;
    const float *bias;     /* n_out floats or NULL */
};
void hmoe_model_matmul(struct hmoe_ctx *c, const struct hmoe_mm_job *jobs, int n_jobs, const float *x,
                       size_t x_stride, int ntok);

/* ops.c — rs.x rows 0..n-1 = token_embd rows ids[0..n-1] (qwen3moe.md §4.1; a job for n >= 4). */
void hmoe_model_embed(struct hmoe_ctx *c, const int32_t *ids, int n);

/* ops.c — for n rows of n_embd: x += add (unless add is NULL), then xn = RMSNorm(x) * w
 * (the residual add and the next sub-layer's norm; parallel over rows for n >= 4). */
void hmoe_model_add_rmsnorm(struct hmoe_ctx *c, float *x, const float *add, float *xn, const float *w, int n);

/* attention.c — write the batch's K/V rows into the cache at their positions, then causal
 * GQA attention of every query over the cache (qwen3moe.md §4.3 steps 6-9, §6). */
void hmoe_model_attention(struct hmoe_ctx *c, int il, int n);

/* batch.c — rs->pos of the micro-batch's n rows: pos0 + t, or each segment's positions. */
void hmoe_model_positions(struct hmoe_ctx *c, int n, int pos0);
/* batch.c — the last residual, final norm and LM head of the n-row micro-batch: rows of
 * `which` (hmoe_ctx_forward's meaning), or in a batch the last row of each segment that
 * wants logits, packed in segment order. */
void hmoe_model_logits(struct hmoe_ctx *c, enum hmoe_logits which, int n, float *logits);
/* batch.c — op on the micro-batch's rows with the sequence state they belong to: op(c, il, n)
 * outside a batch, else once per segment on a view of c whose row buffers start at the
 * segment's first row and whose KV cache and recurrent state are the segment's sequence's.
 * For the parts of a layer that read or write per-sequence state (attention over the cache,
 * the recurrences); everything else runs on all rows at once. */
typedef void (*hmoe_seq_op)(struct hmoe_ctx *c, int il, int n);
void hmoe_model_per_seq(struct hmoe_ctx *c, int il, int n, hmoe_seq_op op);

/* ctx.c — one micro-batch through the whole model on the context's backend: the GPU
 * (gpu_forward.c) or the architecture entry's CPU forward (recurrent.c replays with it). */
enum hmoe_status hmoe_ctx_forward(struct hmoe_ctx *c, const int32_t *ids, int n, int pos0, enum hmoe_logits which,
                                  float *logits, struct hmoe_err *err);

#endif
