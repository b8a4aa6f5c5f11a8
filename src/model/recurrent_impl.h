/* recurrent_impl.h — private to src/model: the recurrent state of a context (one sequence)
 * for the architectures with recurrent layers (Gated DeltaNet, Mamba-2), its checkpoints and
 * token history, the micro-batch scratch those layers need beyond struct hmoe_run_state
 * (sized per architecture by struct hmoe_rec_dims, which the entry's rec_dims fills; the field
 * comments give the Gated DeltaNet use), and the gated full attention that runs beside it.
 * Layouts of the state are in deltanet_impl.h. Everything is allocated by hmoe_rec_init.
 */
#ifndef HMOE_RECURRENT_IMPL_H
#define HMOE_RECURRENT_IMPL_H

#include "model/model_impl.h"

/* Saved recurrent states. A chat needs two per turn (before the generation prompt and at
 * its end); more slots only help when rewinding further back. */
#define HMOE_REC_CKPT 4

struct hmoe_rec_ckpt {
    int pos;          /* state after tokens 0..pos-1; -1 = empty slot */
    uint64_t age;     /* save order, oldest replaced first */
    float *conv, *ssm;
};

struct hmoe_rec_state {
    /* Shapes (qwen35moe.md §2). */
    int n_rec;                  /* recurrent (Gated DeltaNet) layers */
    int *slot;                  /* [n_layer] state index of a recurrent layer, -1 for attention layers */
    int n_layer_slots;          /* n_layer: entries of slot */
    int K, dim, n_k_head, n_v_head;
    int64_t key_dim, value_dim, conv_dim;
    size_t conv_floats, ssm_floats; /* per layer: (K-1)*conv_dim, Hv*dim*dim */

    /* Live state for one sequence: [n_rec][K-1][conv_dim] and [n_rec][Hv][dim][dim]. */
    float *conv, *ssm;
    int n_state;                /* tokens the live state has consumed; <= the context's n_past */
    int32_t *hist;              /* [n_ctx] token id at each position, to re-run after a rewind */
    struct hmoe_rec_ckpt ckpt[HMOE_REC_CKPT];
    uint64_t age;

    /* Micro-batch scratch (n_ub rows), shared by the sequences of a context: a sequence
     * other than 0 borrows sequence 0's (scratch_borrowed), and so does a batch view. */
    bool scratch_borrowed;
    struct hmoe_rec_dims_cols {
        int64_t qkv, y, z, alpha, beta, o, qg, sh, sh_u, d;
    } cols;                     /* row stride in floats of each scratch buffer where the per-sequence
                                   parts of a layer use it (row views, batch.c) */
    float *qkv;                 /* [n_ub][conv_dim] raw attn_qkv output (conv input) */
    float *y;                   /* [n_ub][conv_dim] conv + SiLU output, then L2-normed q, k */
    float *z;                   /* [n_ub][value_dim] attn_gate output */
    float *alpha, *beta;        /* [n_ub][Hv] -> log decay, sigmoid(beta) */
    float *o;                   /* [n_ub][value_dim] head outputs through the gated norm */
    float *qg;                  /* [n_ub][2*H*D] gated attention: per head [query | gate] */
    float *sh_g, *sh_u;         /* [n_ub][Fs] shared expert gate/up, then silu(g)*u in sh_g */
    float *sh_gamma;            /* [n_ub] shared expert gate logits */
    float *sh_out;              /* [n_ub][d] shared expert output */
    float *chunk_scratch;       /* [n_threads][hmoe_gdn_chunk_scratch_floats] */
    size_t chunk_floats;
    float *rope0_cos, *rope0_sin; /* [n_rot/2] the table at position 0: pairs of the e section */

    /* GPU backend: the live state is in VRAM (same layout as conv/ssm above, which then go
     * unused); checkpoints stay in RAM and are copied across. NULL when the CPU runs the model. */
    struct hmoe_cuda_ctx *cu;
    float *d_conv, *d_ssm;
};

/* What an architecture's recurrent layers keep per layer (the state) and need per token of
 * a micro-batch (the scratch rows below; 0 = unused). */
struct hmoe_rec_dims {
    int K;                 /* conv taps: the conv state keeps K-1 rows */
    int64_t conv_dim;      /* channels of the conv state */
    size_t ssm_floats;     /* floats of the recurrent matrices of one layer */
    int64_t qkv_cols, y_cols, z_cols, o_cols, alpha_cols, beta_cols, qg_cols, sh_cols, sh_u_cols;
    size_t chunk_floats;   /* per-thread scratch of the chunked prefill form */
    int64_t o_seq_cols;    /* row stride of o where the recurrence writes it, if not o_cols (0) */
};

/* recurrent.c */
enum hmoe_status hmoe_rec_init(struct hmoe_ctx *c, const struct hmoe_rec_dims *dm, struct hmoe_err *err);
/* The state of one more sequence: shapes and scratch from `base` (borrowed, freed with base),
 * its own live state, token history of n_ctx positions and checkpoints. */
enum hmoe_status hmoe_rec_init_seq(const struct hmoe_rec_state *base, int n_ctx, struct hmoe_rec_state **out,
                                   struct hmoe_err *err);
void hmoe_rec_free(struct hmoe_rec_state *r);
/* Forget positions >= n_keep: restore the newest checkpoint at or before n_keep, or zero. */
void hmoe_rec_truncate(struct hmoe_rec_state *r, int n_keep);
void hmoe_rec_checkpoint(struct hmoe_rec_state *r, int n_past);
/* Before decoding ids at pos0: re-run the remembered tokens from the state's position up to
 * pos0 (after a rewind), then remember ids[0..n). */
enum hmoe_status hmoe_rec_prepare(struct hmoe_ctx *c, const int32_t *ids, int n, int pos0, struct hmoe_err *err);
size_t hmoe_rec_state_bytes(const struct hmoe_rec_state *r);
/* Move the live state to the device buffers (zeroed by the caller; cu NULL: back to RAM, zeroed). */
void hmoe_rec_attach_device(struct hmoe_rec_state *r, struct hmoe_cuda_ctx *cu, float *d_conv, float *d_ssm);

/* attention_gated.c — cos/sin for partial interleaved M-RoPE of text tokens (qwen35moe.md §6):
 * the NEOX table of the first n_rot dims, pairs of the e section at position 0. */
void hmoe_model_mrope_text_table(const struct hmoe_ctx *c, int n);
/* Gated full attention of layer il for the micro-batch: rs->xn in, rs->out out (§5.1). */
void hmoe_model_gated_attention(struct hmoe_ctx *c, int il, int n);

#endif
