/* spec.c — self-speculative decoding (model.h hmoe_spec_*): the MTP block drafts n tokens,
 * one pass of the main model over [token, drafts] gives the logits after each of them, and
 * the caller's sampler walks those rows for as long as it picks the drafts.
 *
 * A rejection rewinds the context to the first rejected position: the KV cache by its
 * length, the recurrent state from the checkpoint taken before the verification pass (the
 * accepted tokens are re-run: a Gated DeltaNet state cannot be unwound), the MTP block's KV
 * cache by its entry count. Because the sampler itself picks every token from the main
 * model's rows, with a greedy draft the rule "accept while the sampler's pick equals the
 * draft" is the standard rejection rule (a draft d is kept with probability p(d), else the
 * token comes from p without d) and needs no extra random numbers.
 */
#include <stdlib.h>
#include <string.h>

#include "model/mtp_impl.h"
#include "model/recurrent_impl.h"

struct hmoe_spec {
    struct hmoe_ctx *c;
    int n_draft;
    float *logits;                       /* [(n_draft + 1) * V] rows of the last verification pass */
    int32_t ids[HMOE_SPEC_DRAFT_MAX + 1]; /* [token, drafts] of that pass */
    int base, n_rows, cur;               /* its positions base .. base+n_rows-1; row cur was returned last */
    struct hmoe_spec_stats st;
};

enum hmoe_status hmoe_spec_init(struct hmoe_ctx *c, int n_draft, struct hmoe_spec **out, struct hmoe_err *err) {
    *out = NULL;
    if (n_draft < 1 || n_draft > HMOE_SPEC_DRAFT_MAX)
        return HMOE_RAISE(err, HMOE_ERR_ARG, "--draft-max %d is out of range (1 .. %d)", n_draft,
                          HMOE_SPEC_DRAFT_MAX);
    if (c->p.n_seq != 1)
        return HMOE_RAISE(err, HMOE_ERR_UNSUPPORTED, "--spec mtp needs one sequence per context (-np 1), not %d",
                          c->p.n_seq);
    enum hmoe_status st = hmoe_mtp_enable(c, err);
    if (st) return st;
    struct hmoe_spec *s = calloc(1, sizeof *s);
    if (!s) return HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory");
    s->c = c;
    s->n_draft = n_draft;
    s->logits = malloc((size_t)(n_draft + 1) * (size_t)c->m->cfg.n_vocab * sizeof(float));
    if (!s->logits) {
        free(s);
        return HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory for %d rows of logits", n_draft + 1);
    }
    *out = s;
    return HMOE_OK;
}

void hmoe_spec_free(struct hmoe_spec *s) {
    if (!s) return;
    free(s->logits);
    free(s);
}

int hmoe_spec_pending(const struct hmoe_spec *s, int32_t *out) {
    const int n = s->n_rows ? s->n_rows - 1 - s->cur : 0;
    if (n > 0) memcpy(out, s->ids + s->cur + 1, (size_t)n * sizeof *out);
    return n;
}

void hmoe_spec_get_stats(const struct hmoe_spec *s, struct hmoe_spec_stats *out) { *out = s->st; }
void hmoe_spec_reset_stats(struct hmoe_spec *s) { memset(&s->st, 0, sizeof s->st); }

static enum hmoe_status check_token(const struct hmoe_ctx *c, int32_t id, int pos, struct hmoe_err *err) {
    if (id < 0 || id >= c->m->cfg.n_vocab)
        return HMOE_RAISE(err, HMOE_ERR_RANGE, "token id %d is out of range: the vocabulary has %d ids", id,
                          c->m->cfg.n_vocab);
    if (pos < 0 || pos > c->n_past)
        return HMOE_RAISE(err, HMOE_ERR_ARG, "decode: position %d is past the %d positions in the KV cache", pos,
                          c->n_past);
    if (pos >= c->p.n_ctx)
        return HMOE_RAISE(err, HMOE_ERR_RANGE,
                          "context full: 1 token at position %d needs a context of %d positions but it holds %d; raise "
                          "-c/--ctx-size",
                          pos, pos + 1, c->p.n_ctx);
    return HMOE_OK;
}

/* Rewind to pos with its recurrent state current (re-running accepted tokens), then keep a
 * checkpoint there for the next rejection. */
static enum hmoe_status rewind_to(struct hmoe_spec *s, int32_t id, int pos, struct hmoe_err *err) {
    struct hmoe_ctx *c = s->c;
    const double t0 = hmoe_time_s();
    hmoe_ctx_truncate(c, pos);
    const int from = c->rs.rec->n_state;
    enum hmoe_status st = hmoe_rec_prepare(c, &id, 1, pos, err);
    if (st) return st;
    s->st.replayed += (uint64_t)(pos - from);
    hmoe_ctx_checkpoint(c);
    s->st.replay_s += hmoe_time_s() - t0;
    return HMOE_OK;
}

enum hmoe_status hmoe_spec_decode(struct hmoe_spec *s, int32_t id, int pos, const float **logits,
                                  struct hmoe_err *err) {
    struct hmoe_ctx *c = s->c;
    const size_t V = (size_t)c->m->cfg.n_vocab;
    /* The sampler picked the next draft of the last pass: its row is ready. */
    if (s->n_rows && pos == s->base + s->cur + 1 && s->cur + 1 < s->n_rows && s->ids[s->cur + 1] == id &&
        c->n_past == s->base + s->n_rows) {
        s->cur++;
        s->st.accepted++;
        *logits = s->logits + (size_t)s->cur * V;
        return HMOE_OK;
    }
    s->n_rows = 0;
    enum hmoe_status st = check_token(c, id, pos, err);
    if (st || (st = rewind_to(s, id, pos, err))) return st;
    /* no drafts for the first token (no hidden state yet) or where the context ends */
    const int k = pos > 0 ? HMOE_MIN(s->n_draft, c->p.n_ctx - pos - 1) : 0;
    s->ids[0] = id;
    if (k > 0) {
        const double t0 = hmoe_time_s();
        if ((st = hmoe_mtp_draft(c, id, k, s->ids + 1, NULL, err))) return st;
        s->st.draft_s += hmoe_time_s() - t0;
    }
    const double t1 = hmoe_time_s();
    if ((st = hmoe_ctx_decode(c, s->ids, k + 1, pos, HMOE_LOGITS_ALL, s->logits, err))) return st;
    s->st.verify_s += hmoe_time_s() - t1;
    s->st.steps++;
    s->st.drafted += (uint64_t)k;
    s->base = pos;
    s->n_rows = k + 1;
    s->cur = 0;
    *logits = s->logits;
    return HMOE_OK;
}

enum hmoe_status hmoe_spec_draft(struct hmoe_spec *s, int32_t id, int n, int32_t *out, float *logits,
                                 struct hmoe_err *err) {
    s->n_rows = 0;
    enum hmoe_status st = check_token(s->c, id, s->c->n_past, err);
    if (st) return st;
    return hmoe_mtp_draft(s->c, id, n, out, logits, err);
}
