/* sched.h — the MoE feed-forward block as one call: route every token of a micro-batch,
 * group the tokens by expert so each expert's weights stream from memory once, and run
 * the SwiGLU experts (qwen3moe.md §4.4). Today everything runs on CPU threads
 * (src/sched/moe_cpu.c); the VRAM expert cache and the hybrid split plug in here later.
 *
 * Weights are views into the GGUF mapping, described by struct hmoe_mat (shape in ggml
 * order, ne0 contiguous; an expert stack {n_in, n_out, n_mat} is n_mat matrices back to
 * back, qwen3moe.md §0). Matrix products go through include/hmoe/cpu.h.
 */
#ifndef HMOE_SCHED_H
#define HMOE_SCHED_H

#include "hmoe/common.h"
#include "hmoe/types.h"

/* A weight matrix {n_in, n_out}, or a stack of n_mat of them {n_in, n_out, n_mat}. */
struct hmoe_mat {
    const void *data;  /* row 0 of matrix 0, inside the mapping */
    enum hmoe_type type;
    int64_t n_in;      /* ne0: elements per row */
    int64_t n_out;     /* ne1: rows per matrix */
    int64_t n_mat;     /* ne2: matrices (experts); 1 for a plain matrix */
    size_t row_bytes;  /* bytes of one row of n_in elements */
    size_t mat_bytes;  /* n_out * row_bytes: distance between two experts */
    const char *name;  /* tensor name, for messages (points into the gguf's tensor table) */
};

/* The weights of one MoE block (no shared expert, no biases: qwen3moe.md §2). */
struct hmoe_moe_weights {
    struct hmoe_mat router; /* ffn_gate_inp   {d, E}     F32 */
    struct hmoe_mat gate;   /* ffn_gate_exps  {d, F, E}  */
    struct hmoe_mat up;     /* ffn_up_exps    {d, F, E}  */
    struct hmoe_mat down;   /* ffn_down_exps  {F, d, E}  */
    int n_expert_used;      /* k */
};

/* Router: softmax over all n_expert logits (f32, max-subtracted, sum in double), the k
 * largest probabilities in descending order (lowest expert index first on ties), then
 * renormalised: w_i = p_i / max(sum_j p_j, 6.103515625e-5) (qwen3moe.md §4.4 steps 3-5).
 * `probs` is scratch of n_expert floats. Writes sel[k] and w[k]. */
void hmoe_sched_route(const float *logits, int n_expert, int k, float *probs, int32_t *sel, float *w);

/* CPU workspace for hmoe_sched_moe_ffn, sized once for every layer of a model and the
 * largest micro-batch, so the forward pass allocates nothing. */
struct hmoe_sched_moe;

/* `layers` are the MoE weights of all n_layer layers (their types may differ per layer);
 * max_tok is the largest micro-batch that will be passed; n_threads the OpenMP threads. */
enum hmoe_status hmoe_sched_moe_init(const struct hmoe_moe_weights *layers, int n_layer, int max_tok,
                                     int n_threads, struct hmoe_sched_moe **out, struct hmoe_err *err);
void hmoe_sched_moe_free(struct hmoe_sched_moe *s);

/* out[t] = sum_i w_i * down_e(silu(gate_e · x[t]) * (up_e · x[t])) for the k experts e
 * routed for token t (qwen3moe.md §4.4 steps 2-7). x: n_tok rows of d floats (already
 * RMS-normalised), out: n_tok rows of d floats (overwritten). The experts' partial
 * results are summed in selection order, as llama.cpp does. */
enum hmoe_status hmoe_sched_moe_ffn(struct hmoe_sched_moe *s, const struct hmoe_moe_weights *w, const float *x,
                                    int n_tok, float *out, struct hmoe_err *err);

/* Routing decisions of the last hmoe_sched_moe_ffn call: sel[t*k + i] (for tests and the
 * future expert-cache statistics). Valid until the next call. */
const int32_t *hmoe_sched_moe_last_selection(const struct hmoe_sched_moe *s);

#endif
