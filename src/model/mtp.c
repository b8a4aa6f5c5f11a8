/* mtp.c — the multi-token-prediction block of a context (mtp_impl.h): a one-layer view of the
 * model bound by the architecture entry's mtp hooks (arch.h), a context of its own for the
 * block's KV cache, the lazy entries that follow the main context's passes, and drafting.
 */
#include <stdlib.h>
#include <string.h>

#include "hmoe/arch.h"
#include "model/mtp_impl.h"
#include "model/recurrent_impl.h"

void hmoe_mtp_free(struct hmoe_mtp *t) {
    if (!t) return;
    hmoe_ctx_free(t->mc);
    if (t->view) {
        t->view->gguf = NULL; /* the main model's */
        hmoe_model_free(t->view);
    }
    free(t->hid);
    free(t->tok);
    free(t->rows);
    free(t->cat);
    free(t->ids);
    free(t->logits);
    free(t->chain);
    free(t);
}

/* The view: the main model's configuration with one layer, its embedding, LM head and final
 * norm, which the entry's bind replaces by the block's own where it has them. */
static enum hmoe_status make_view(const struct hmoe_model *m, struct hmoe_model **out, struct hmoe_err *err) {
    struct hmoe_model *v = calloc(1, sizeof *v);
    if (!v) return HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory");
    *out = v;
    v->gguf = m->gguf;
    v->cfg = m->cfg;
    v->cfg.n_layer = 1;
    v->cfg.n_nextn = 0;
    v->w.token_embd = m->w.token_embd;
    v->w.output_norm = m->w.output_norm;
    v->w.output = m->w.output;
    v->w.layers = calloc(1, sizeof *v->w.layers);
    if (!v->w.layers) return HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory");
    return m->cfg.arch_entry->mtp->bind(v, m->cfg.n_layer, err);
}

enum hmoe_status hmoe_mtp_enable(struct hmoe_ctx *c, struct hmoe_err *err) {
    const struct hmoe_model *m = c->m;
    const struct hmoe_model_config *cfg = &m->cfg;
    if (c->mtp) return HMOE_OK;
    if (cfg->n_nextn < 1)
        return HMOE_RAISE(err, HMOE_ERR_UNSUPPORTED,
                          "%s: --spec mtp needs an MTP block (%s.nextn_predict_layers >= 1, blk.%d.nextn.* tensors); "
                          "this file has none",
                          m->gguf->path, cfg->arch, cfg->n_layer);
    if (!cfg->arch_entry->mtp)
        return HMOE_RAISE(err, HMOE_ERR_UNSUPPORTED, "%s: --spec mtp: hmoe does not run the MTP blocks of %s models",
                          m->gguf->path, cfg->arch);
    if (!c->rs.rec)
        return HMOE_RAISE(err, HMOE_ERR_INTERNAL, "--spec mtp: the context keeps no token history");
    struct hmoe_mtp *t = calloc(1, sizeof *t);
    if (!t) return HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory");
    enum hmoe_status st = make_view(m, &t->view, err);
    if (st) {
        hmoe_mtp_free(t);
        return st;
    }
    struct hmoe_ctx_params p = c->p;
    p.n_seq = 1;
    p.gpu = HMOE_GPU_OFF;
    p.verbose = false;
    if ((st = hmoe_ctx_init(t->view, &p, &t->mc, err))) {
        hmoe_mtp_free(t);
        return st;
    }
    const size_t ub = (size_t)c->p.n_ubatch, d = (size_t)cfg->n_embd;
    t->hid = malloc(ub * d * sizeof(float));
    t->tok = calloc((size_t)c->p.n_ctx, sizeof *t->tok);
    t->rows = malloc(ub * d * sizeof(float));
    t->cat = malloc(ub * 2 * d * sizeof(float));
    t->ids = malloc(ub * sizeof *t->ids);
    t->logits = malloc((size_t)cfg->n_vocab * sizeof(float));
    t->chain = malloc(d * sizeof(float));
    if (!t->hid || !t->tok || !t->rows || !t->cat || !t->ids || !t->logits || !t->chain) {
        hmoe_mtp_free(t);
        return HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory for the MTP block's buffers");
    }
    /* Entries start at the context's current position 0: a context that already holds
     * positions gets them from zero hidden states (mtp_impl.h). */
    c->mtp = t;
    c->keep_hidden = t->hid;
    return HMOE_OK;
}

void hmoe_mtp_kept(struct hmoe_ctx *c, int n, int pos0) {
    c->mtp->hid_pos0 = pos0;
    c->mtp->hid_n = n;
}

/* Entries n_done .. upto-1 (the last one with token tok), logits of the last into logits. */
static enum hmoe_status make_entries(struct hmoe_ctx *c, int32_t tok, int upto, float *logits, float *hout,
                                     struct hmoe_err *err) {
    struct hmoe_mtp *t = c->mtp;
    const size_t d = (size_t)c->m->cfg.n_embd;
    const int ub = t->mc->p.n_ubatch;
    const int32_t *hist = c->rs.rec->hist;
    while (t->n_done < upto) {
        const int p0 = t->n_done, m = HMOE_MIN(ub, upto - p0);
        for (int i = 0; i < m; i++) {
            const int p = p0 + i, r = p - t->hid_pos0;
            if (r >= 0 && r < t->hid_n) memcpy(t->rows + (size_t)i * d, t->hid + (size_t)r * d, d * sizeof(float));
            else memset(t->rows + (size_t)i * d, 0, d * sizeof(float));
            t->ids[i] = p + 1 == upto ? tok : hist[p + 1];
            t->tok[p] = t->ids[i];
        }
        const bool last = p0 + m == upto;
        enum hmoe_status st = c->m->cfg.arch_entry->mtp->forward(t->mc, t->rows, t->ids, m, p0, t->cat,
                                                                 last ? logits : NULL, hout, err);
        if (st) return st;
        t->n_done = p0 + m;
        t->mc->n_past = t->n_done;
    }
    return HMOE_OK;
}

/* Entries at or after upto describe positions being replaced; the one at upto-1 too when it
 * was made with another token than tok. */
static void invalidate(struct hmoe_mtp *t, int32_t tok, int upto) {
    if (t->n_done > upto) t->n_done = upto;
    if (t->n_done == upto && upto > 0 && t->tok[upto - 1] != tok) t->n_done = upto - 1;
}

enum hmoe_status hmoe_mtp_sync(struct hmoe_ctx *c, int32_t tok, int pos0, struct hmoe_err *err) {
    invalidate(c->mtp, tok, pos0);
    return make_entries(c, tok, pos0, NULL, NULL, err);
}

enum hmoe_status hmoe_mtp_draft(struct hmoe_ctx *c, int32_t tok, int n, int32_t *out, float *logits,
                                struct hmoe_err *err) {
    struct hmoe_mtp *t = c->mtp;
    const int N = c->n_past, V = c->m->cfg.n_vocab;
    if (N < 1 || n < 1 || N + n > c->p.n_ctx)
        return HMOE_RAISE(err, HMOE_ERR_ARG, "MTP draft: %d drafts after %d positions do not fit a context of %d", n, N,
                          c->p.n_ctx);
    /* The first draft is the entry of position N-1 itself (h_{N-1}, tok): made again when
     * it exists, for its logits. */
    invalidate(t, tok, N);
    if (t->n_done == N) t->n_done = N - 1;
    enum hmoe_status st = make_entries(c, tok, N, t->logits, t->chain, err);
    if (st) return st;
    out[0] = hmoe_argmax(t->logits, V);
    if (logits) memcpy(logits, t->logits, (size_t)V * sizeof(float));
    /* Chained drafts: the block's normed output and the last draft, at the next positions;
     * their entries are scratch (n_done stays N). */
    for (int i = 1; i < n; i++) {
        st = c->m->cfg.arch_entry->mtp->forward(t->mc, t->chain, &out[i - 1], 1, N + i - 1, t->cat, t->logits,
                                                 t->chain, err);
        if (st) return st;
        out[i] = hmoe_argmax(t->logits, V);
    }
    t->mc->n_past = t->n_done;
    return HMOE_OK;
}
