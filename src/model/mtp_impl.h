/* mtp_impl.h — private to src/model: the multi-token-prediction block of a context (mtp.c),
 * which drafts tokens for self-speculative decoding (spec.c).
 *
 * The block has a KV cache of its own, one entry per position p of the main model: the
 * block's pass over (h_p, t_{p+1}), the main model's final normed hidden state at p and the
 * token after it. Entries are made lazily: every forward pass of the main context keeps its
 * rows' hidden states, and before the next pass (or a draft) the entries of the positions
 * now confirmed by a following token are run from them, so rejected drafts never cost a
 * block pass. A position whose hidden state is gone (a rewind past the kept rows) gets an
 * entry from a zero hidden state: drafts after it may be worse, outputs never change.
 */
#ifndef HMOE_MTP_IMPL_H
#define HMOE_MTP_IMPL_H

#include "model/model_impl.h"

struct hmoe_mtp {
    struct hmoe_model *view;  /* one-layer view: layer 0 = the block, its head and norms */
    struct hmoe_ctx *mc;      /* the block's context (its KV cache and run state) */
    float *hid;               /* [n_ub][d] main context: final normed hidden of the last pass's rows */
    int hid_pos0, hid_n;      /* positions of those rows (hid_n 0: none) */
    int32_t *tok;             /* [n_ctx] the token t_{p+1} entry p was made with */
    int n_done;               /* entries 0 .. n_done-1 are valid */
    float *rows, *cat;        /* [n_ub][d] gathered hidden rows, [n_ub][2d] the block's scratch */
    int32_t *ids;             /* [n_ub] gathered tokens */
    float *logits, *chain;    /* [V] draft logits, [d] the chained hidden state */
};

/* Attach the block to c (HMOE_ERR_UNSUPPORTED when the model has none the entry runs). */
enum hmoe_status hmoe_mtp_enable(struct hmoe_ctx *c, struct hmoe_err *err);
void hmoe_mtp_free(struct hmoe_mtp *t);
/* Before a main pass at pos0 whose first token is tok: make the entries of positions < pos0. */
enum hmoe_status hmoe_mtp_sync(struct hmoe_ctx *c, int32_t tok, int pos0, struct hmoe_err *err);
/* After it: the pass's n rows at pos0 are in t->hid. */
void hmoe_mtp_kept(struct hmoe_ctx *c, int n, int pos0);
/* n >= 1 greedy drafts after c's n_past positions and token tok (not yet decoded), chained
 * through the block; the first draft's logits into logits (NULL: not wanted). */
enum hmoe_status hmoe_mtp_draft(struct hmoe_ctx *c, int32_t tok, int n, int32_t *out, float *logits,
                                struct hmoe_err *err);

#endif
