/* batch.c — several sequences of one context in one step (model.h hmoe_ctx_decode_batch).
 *
 * The rows of all sequences' shares are concatenated into micro-batches; the architecture's
 * forward pass runs once per micro-batch, so every dense matmul, the router and the MoE
 * (which groups rows by expert, src/sched) see all rows together and read each weight once.
 * Only two kinds of work depend on which sequence a row belongs to, and the forward passes
 * reach both through this file: the positions (hmoe_model_positions) and the layer parts
 * that read or write a sequence's state — attention over its KV cache, the Gated DeltaNet
 * and Mamba-2 recurrences — which run per segment on a row view (hmoe_model_per_seq). The
 * LM head runs on the rows whose logits are wanted (hmoe_model_logits).
 */
#include <stdlib.h>
#include <string.h>

#include "model/gpu_impl.h"
#include "model/recurrent_impl.h"

void hmoe_model_positions(struct hmoe_ctx *c, int n, int pos0) {
    int32_t *pos = c->rs.pos;
    if (!c->batch) {
        for (int t = 0; t < n; t++) pos[t] = pos0 + t;
        return;
    }
    for (int i = 0; i < c->batch->n_seg; i++) {
        const struct hmoe_batch_seg *sg = &c->batch->seg[i];
        for (int t = 0; t < sg->n; t++) pos[sg->row0 + t] = sg->pos0 + t;
    }
}

void hmoe_model_logits(struct hmoe_ctx *c, enum hmoe_logits which, int n, float *logits) {
    const struct hmoe_model_config *cfg = &c->m->cfg;
    const struct hmoe_model_weights *w = &c->m->w;
    struct hmoe_run_state *rs = &c->rs;
    const size_t d = (size_t)cfg->n_embd;
    if (c->keep_hidden && !c->batch) {
        /* Every row's final norm is kept (the MTP block reads them); the head runs on the
         * wanted rows. */
        hmoe_model_add_rmsnorm(c, rs->x, rs->out, rs->xn, w->output_norm, n);
        memcpy(c->keep_hidden, rs->xn, (size_t)n * d * sizeof(float));
        if (which == HMOE_LOGITS_NONE) return;
        const int t1 = which == HMOE_LOGITS_ALL ? 0 : n - 1;
        const struct hmoe_mm_job head = {&w->output, logits, (size_t)cfg->n_vocab, NULL};
        hmoe_model_matmul(c, &head, 1, rs->xn + (size_t)t1 * d, d, n - t1);
        return;
    }
    if (which == HMOE_LOGITS_NONE) return;
    int t0 = which == HMOE_LOGITS_ALL ? 0 : n - 1, rows = n - t0;
    if (c->batch) {
        /* Gather each wanted segment's last row to the front (row k from row >= k, in order,
         * so no source is overwritten before it is read). */
        t0 = 0;
        rows = 0;
        for (int i = 0; i < c->batch->n_seg; i++) {
            const struct hmoe_batch_seg *sg = &c->batch->seg[i];
            if (!sg->logits) continue;
            const size_t r = (size_t)(sg->row0 + sg->n - 1);
            if (r != (size_t)rows) {
                memcpy(rs->x + (size_t)rows * d, rs->x + r * d, d * sizeof(float));
                memcpy(rs->out + (size_t)rows * d, rs->out + r * d, d * sizeof(float));
            }
            rows++;
        }
        if (rows == 0) return;
    }
    hmoe_model_add_rmsnorm(c, rs->x + (size_t)t0 * d, rs->out + (size_t)t0 * d, rs->xn + (size_t)t0 * d,
                           w->output_norm, rows);
    const struct hmoe_mm_job head = {&w->output, logits, (size_t)cfg->n_vocab, NULL};
    hmoe_model_matmul(c, &head, 1, rs->xn + (size_t)t0 * d, d, rows);
}

/* A recurrent state whose scratch rows start at row r0 (the state arrays are the sequence's). */
static void rec_row_view(struct hmoe_rec_state *v, const struct hmoe_rec_state *seq, int r0) {
    *v = *seq;
    const size_t r = (size_t)r0;
    v->qkv += r * (size_t)v->cols.qkv;
    v->y += r * (size_t)v->cols.y;
    v->z += r * (size_t)v->cols.z;
    v->alpha += r * (size_t)v->cols.alpha;
    v->beta += r * (size_t)v->cols.beta;
    v->o += r * (size_t)v->cols.o;
    v->qg += r * (size_t)v->cols.qg;
    v->sh_g += r * (size_t)v->cols.sh;
    v->sh_u += r * (size_t)v->cols.sh_u;
    v->sh_gamma += r;
    v->sh_out += r * (size_t)v->cols.d;
}

/* A view of c for one segment: row buffers from its first row, its sequence's state. */
static void seg_view(const struct hmoe_ctx *c, const struct hmoe_batch_seg *sg, struct hmoe_ctx *v,
                     struct hmoe_rec_state *rv) {
    const struct hmoe_model_config *cfg = &c->m->cfg;
    const struct hmoe_seq *q = &c->seqs[sg->seq];
    const size_t r = (size_t)sg->row0, d = (size_t)cfg->n_embd, H = (size_t)cfg->n_head,
                 Hkv = (size_t)cfg->n_head_kv, D = (size_t)cfg->head_dim, Dv = (size_t)cfg->head_dim_v,
                 half = (size_t)HMOE_MAX(1, cfg->n_rot / 2);
    *v = *c;
    v->batch = NULL;
    v->cur_seq = sg->seq;
    v->n_past = q->n_past;
    struct hmoe_run_state *rs = &v->rs;
    rs->x += r * d;
    rs->xn += r * d;
    rs->out += r * d;
    rs->q += r * H * D;
    rs->k += r * Hkv * D;
    rs->v += r * Hkv * Dv;
    rs->attn += r * H * Dv;
    rs->rope_cos += r * half;
    rs->rope_sin += r * half;
    rs->pos += r;
    rs->k_cache = q->k_cache;
    rs->v_cache = q->v_cache;
    rs->rec = NULL;
    if (q->rec) {
        rec_row_view(rv, q->rec, sg->row0);
        rs->rec = rv;
    }
}

void hmoe_model_per_seq(struct hmoe_ctx *c, int il, int n, hmoe_seq_op op) {
    if (!c->batch) {
        op(c, il, n);
        return;
    }
    for (int i = 0; i < c->batch->n_seg; i++) {
        struct hmoe_ctx v;
        struct hmoe_rec_state rv;
        seg_view(c, &c->batch->seg[i], &v, &rv);
        op(&v, il, c->batch->seg[i].n);
    }
}

/* Checks of one share, with hmoe_ctx_decode's messages naming the sequence. */
static enum hmoe_status check_share(const struct hmoe_ctx *c, const struct hmoe_seq_tokens *t, const bool *seen,
                                    struct hmoe_err *err) {
    const int V = c->m->cfg.n_vocab;
    if (t->seq < 0 || t->seq >= c->p.n_seq)
        return HMOE_RAISE(err, HMOE_ERR_RANGE, "batch: sequence %d does not exist: the context holds %d (-np)", t->seq,
                          c->p.n_seq);
    if (seen[t->seq]) return HMOE_RAISE(err, HMOE_ERR_ARG, "batch: sequence %d appears twice in one step", t->seq);
    if (t->n <= 0 || !t->ids) return HMOE_RAISE(err, HMOE_ERR_ARG, "batch: sequence %d has no tokens", t->seq);
    const int n_past = t->seq == c->cur_seq ? c->n_past : c->seqs[t->seq].n_past;
    if (t->pos0 < 0 || t->pos0 > n_past)
        return HMOE_RAISE(err, HMOE_ERR_ARG, "batch: position %d of sequence %d is past its %d cached positions",
                          t->pos0, t->seq, n_past);
    if ((int64_t)t->pos0 + t->n > c->p.n_ctx)
        return HMOE_RAISE(err, HMOE_ERR_RANGE,
                          "context full: sequence %d needs %lld positions but each of the %d sequences holds %d; raise "
                          "-c/--ctx-size (the total of all sequences)",
                          t->seq, (long long)t->pos0 + t->n, c->p.n_seq, c->p.n_ctx);
    for (int i = 0; i < t->n; i++)
        if (t->ids[i] < 0 || t->ids[i] >= V)
            return HMOE_RAISE(err, HMOE_ERR_RANGE,
                              "token id %d (at index %d of sequence %d) is out of range: the vocabulary has %d ids",
                              t->ids[i], i, t->seq, V);
    return HMOE_OK;
}

/* One share on the GPU goes through hmoe_ctx_decode on its sequence: a decode token takes that
 * sequence's captured graph. */
static enum hmoe_status decode_one(struct hmoe_ctx *c, const struct hmoe_seq_tokens *t, float *logits,
                                   struct hmoe_err *err) {
    const int cur = c->cur_seq;
    enum hmoe_status st = hmoe_ctx_use_seq(c, t->seq, err);
    if (!st)
        st = hmoe_ctx_decode(c, t->ids, t->n, t->pos0, t->logits ? HMOE_LOGITS_LAST : HMOE_LOGITS_NONE, logits, err);
    enum hmoe_status st2 = hmoe_ctx_use_seq(c, cur, st ? NULL : err);
    return st ? st : st2;
}

enum hmoe_status hmoe_ctx_decode_batch(struct hmoe_ctx *c, const struct hmoe_seq_tokens *seqs, int n_seqs,
                                       float *logits_out, struct hmoe_err *err) {
    const size_t V = (size_t)c->m->cfg.n_vocab;
    if (n_seqs <= 0 || !seqs) return HMOE_RAISE(err, HMOE_ERR_ARG, "batch: no sequences given");
    if (n_seqs > c->p.n_seq)
        return HMOE_RAISE(err, HMOE_ERR_ARG, "batch: %d shares for a context of %d sequences", n_seqs, c->p.n_seq);
    bool seen[HMOE_MAX_SEQ] = {0};
    int n_logits = 0;
    for (int i = 0; i < n_seqs; i++) {
        enum hmoe_status st = check_share(c, &seqs[i], seen, err);
        if (st) return st;
        seen[seqs[i].seq] = true;
        n_logits += seqs[i].logits;
    }
    if (n_logits && !logits_out)
        return HMOE_RAISE(err, HMOE_ERR_ARG, "batch: logits requested but no output buffer given");
    if (c->gpu && n_seqs == 1) return decode_one(c, &seqs[0], logits_out, err);

    /* Every sequence rewound to its pos0 and its recurrent state replayed up to it (each alone,
     * as hmoe_ctx_decode would), then the shares' rows stepped together. */
    const int cur = c->cur_seq;
    enum hmoe_status st = HMOE_OK;
    for (int i = 0; i < n_seqs && !st; i++) {
        st = hmoe_ctx_use_seq(c, seqs[i].seq, err);
        if (st) break;
        hmoe_ctx_truncate(c, seqs[i].pos0);
        if (c->rs.rec) st = hmoe_rec_prepare(c, seqs[i].ids, seqs[i].n, seqs[i].pos0, err);
    }
    if (!st) st = hmoe_ctx_use_seq(c, cur, err);
    if (st) return st;
    c->seqs[cur].n_past = c->n_past;

    int done[HMOE_MAX_SEQ] = {0}; /* tokens of share i already run */
    int32_t *ids = malloc((size_t)c->p.n_ubatch * sizeof *ids);
    if (!ids) return HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory");
    struct hmoe_batch_rows br;
    float *lo = logits_out;
    for (int first = 0; first < n_seqs && !st;) {
        /* Fill one micro-batch from the shares in order, the last one possibly in part. */
        br.n_seg = 0;
        int rows = 0, n_want = 0;
        for (int i = first; i < n_seqs && rows < c->p.n_ubatch; i++) {
            const struct hmoe_seq_tokens *t = &seqs[i];
            const int take = HMOE_MIN(t->n - done[i], c->p.n_ubatch - rows);
            if (take <= 0) continue;
            struct hmoe_batch_seg *sg = &br.seg[br.n_seg++];
            *sg = (struct hmoe_batch_seg){.seq = t->seq, .row0 = rows, .n = take, .pos0 = t->pos0 + done[i],
                                          .logits = t->logits && done[i] + take == t->n};
            memcpy(ids + rows, t->ids + done[i], (size_t)take * sizeof *ids);
            rows += take;
            n_want += sg->logits;
        }
        c->batch = &br;
        st = c->gpu ? hmoe_gpu_forward_batch(c, ids, rows, lo, err)
                    : c->m->cfg.arch_entry->forward_cpu(c, ids, rows, 0, n_want ? HMOE_LOGITS_LAST : HMOE_LOGITS_NONE,
                                                        lo, err);
        c->batch = NULL;
        if (st) break;
        lo += (size_t)n_want * V;
        for (int k = 0, i = first; k < br.n_seg; i++) {
            if (seqs[i].n - done[i] <= 0) continue;
            const struct hmoe_batch_seg *sg = &br.seg[k++];
            struct hmoe_seq *q = &c->seqs[sg->seq];
            done[i] += sg->n;
            q->n_past = sg->pos0 + sg->n;
            if (q->rec) q->rec->n_state = q->n_past;
        }
        while (first < n_seqs && done[first] == seqs[first].n) first++;
    }
    free(ids);
    c->n_past = c->seqs[cur].n_past;
    return st;
}
