/* grammar_sample.c — response_format read into a JSON grammar, and sampling under it.
 *
 * The sampler first draws as usual; when the grammar accepts that token (the common case with a
 * real model) it is taken. Otherwise every token of the vocabulary is tried, the refused ones
 * get -inf, and the sampler draws again from the same distribution restricted to the allowed
 * tokens — as llama.cpp applies its grammars. A token is allowed when its bytes continue the
 * JSON and the shortest completion after it still fits in the tokens left (the distance the
 * matcher reports, in bytes, each a single-byte token), so max_tokens ends the answer with
 * whole JSON; once the value is complete the next token is the end of generation. Tokens
 * that are not plain text (control and user-defined tokens such as <think>, end-of-generation
 * tokens) are never allowed.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "server/server_impl.h"

bool srv_grammar_from_request(struct hmoe_server *s, json_t *req, struct srv_gen_params *gp, struct srv_error *e) {
    json_t *rf = json_object_get(req, "response_format"), *schema = NULL;
    json_t *native = json_object_get(req, "json_schema"); /* llama-server's /completion field */
    bool on = false;
    if (rf && !json_is_null(rf)) {
        json_t *t = json_object_get(rf, "type");
        if (!json_is_object(rf) || !json_is_string(t)) {
            srv_error_set(e, 400, "response_format", "'response_format' must be an object with a string 'type'");
            return false;
        }
        const char *type = json_string_value(t);
        if (strcmp(type, "json_object") == 0) {
            on = true;
            schema = json_object_get(rf, "schema"); /* llama-server accepts a schema here too */
        } else if (strcmp(type, "json_schema") == 0) {
            json_t *js = json_object_get(rf, "json_schema");
            schema = json_is_object(js) ? json_object_get(js, "schema") : NULL;
            if (!json_is_object(schema) && !json_is_boolean(schema)) {
                srv_error_set(e, 400, "response_format", "response_format json_schema needs "
                              "{\"json_schema\": {\"name\": ..., \"schema\": {...}}}");
                return false;
            }
            on = true;
        } else if (strcmp(type, "text") != 0) {
            srv_error_set(e, 400, "response_format", "response_format type '%.40s' is not one of text, json_object, "
                          "json_schema", type);
            return false;
        }
    }
    if (!on && native && !json_is_null(native)) {
        if (!json_is_object(native)) {
            srv_error_set(e, 400, "json_schema", "'json_schema' must be a JSON schema object");
            return false;
        }
        on = true;
        schema = native;
    }
    if (!on) return true;
    if (schema && json_is_null(schema)) schema = NULL;
    if (!(gp->grammar = srv_json_matcher_new(schema, e))) return false;
    if (!(gp->grammar_logits = malloc((size_t)s->model->cfg.n_vocab * sizeof *gp->grammar_logits))) {
        srv_error_set(e, 500, NULL, "out of memory");
        return false;
    }
    gp->ignore_eos = false; /* the end of the JSON is the end of the answer */
    return true;
}

void srv_grammar_free(struct srv_gen_params *gp) {
    srv_json_matcher_free(gp->grammar);
    srv_call_matcher_free(gp->call);
    gp->call = NULL;
    free(gp->grammar_logits);
    gp->grammar = NULL;
    gp->grammar_logits = NULL;
}

/* The job's grammar: the JSON one, or a forced call's. */
static int g_try(const struct srv_gen_params *gp, const char *s, size_t n) {
    return gp->call ? srv_call_matcher_try(gp->call, s, n) : srv_json_matcher_try(gp->grammar, s, n);
}

static int g_dist(const struct srv_gen_params *gp) {
    return gp->call ? srv_call_matcher_dist(gp->call) : srv_json_matcher_dist(gp->grammar);
}

static void g_feed(struct srv_gen_params *gp, const char *s, size_t n) {
    if (gp->call) srv_call_matcher_feed(gp->call, s, n);
    else srv_json_matcher_feed(gp->grammar, s, n);
}

/* Whether token `id` may come next with `budget` tokens after it. */
static bool token_fits(const struct srv_gen_params *gp, const struct hmoe_vocab *v, int32_t id, int budget) {
    /* an end-of-generation token is never text of the answer, even one that is a plain byte (a
     * byte-level vocabulary's default end token) */
    if (id < 0 || (uint32_t)id >= v->n_tokens || !(v->attr[id] & (HMOE_TOKEN_NORMAL | HMOE_TOKEN_BYTE)) ||
        !v->piece_len[id] || hmoe_vocab_is_eog(v, id))
        return false;
    const int d = g_try(gp, v->piece[id], v->piece_len[id]);
    return d >= 0 && d <= budget;
}

static int32_t sample_token(struct hmoe_server *s, struct srv_job *j, struct hmoe_sampler *smp, const float *logits,
                            int left) {
    struct srv_gen_params *gp = &j->gp;
    if (!gp->grammar && !gp->call) return hmoe_sampler_sample(smp, logits);
    const struct hmoe_vocab *v = s->vocab;
    if (gp->call && srv_call_matcher_forced(gp->call) >= 0) { /* a header token of the call: no choice */
        const int32_t id = srv_call_matcher_forced(gp->call);
        srv_call_matcher_take_forced(gp->call);
        return id;
    }
    if (g_dist(gp) == 0) return gp->call ? srv_call_matcher_end(gp->call) : v->n_eog ? v->eog_ids[0] : -1;
    int32_t id = hmoe_sampler_sample(smp, logits);
    if (!token_fits(gp, v, id, left - 1)) {
        const int n_vocab = HMOE_MIN(s->model->cfg.n_vocab, (int)v->n_tokens);
        float *x = gp->grammar_logits;
        int n_ok = 0, best = -1;
        for (int i = 0; i < s->model->cfg.n_vocab; i++) {
            const bool ok = i < n_vocab && token_fits(gp, v, i, left - 1);
            x[i] = ok ? logits[i] : -INFINITY;
            if (ok && (best < 0 || logits[i] > logits[best])) best = i;
            n_ok += ok;
        }
        if (!n_ok) return -1;
        id = hmoe_sampler_sample(smp, x);
        if (!token_fits(gp, v, id, left - 1)) id = best; /* rounding at the end of the draw picked a -inf one */
    }
    g_feed(gp, v->piece[id], v->piece_len[id]);
    return id;
}

/* OpenAI's logprob entry of one token: {token, logprob, bytes}; the log-softmax of the logits the
 * sampler saw (penalties applied, before temperature, truncation and the grammar). */
static json_t *lp_token(const struct hmoe_vocab *v, int32_t id, float logprob) {
    const char *p = (uint32_t)id < v->n_tokens ? v->piece[id] : "";
    const size_t n = (uint32_t)id < v->n_tokens ? v->piece_len[id] : 0;
    json_t *bytes = json_array();
    for (size_t i = 0; i < n; i++) json_array_append_new(bytes, json_integer((unsigned char)p[i]));
    return json_pack("{s:o, s:f, s:o}", "token", srv_json_text(p, n), "logprob", (double)logprob, "bytes", bytes);
}

static void record_logprobs(struct hmoe_server *s, struct srv_job *j, const float *logits, int32_t id) {
    const int n_vocab = s->model->cfg.n_vocab, k = j->gp.top_logprobs;
    if (k < 0 || id < 0 || hmoe_vocab_is_eog(s->vocab, id)) return;
    float mx = -INFINITY;
    for (int i = 0; i < n_vocab; i++) mx = logits[i] > mx ? logits[i] : mx;
    double sum = 0;
    for (int i = 0; i < n_vocab; i++) sum += exp((double)logits[i] - mx);
    const float lse = mx + (float)log(sum);
    json_t *e = lp_token(s->vocab, id, logits[id] - lse), *top = json_array();
    int32_t best[20];
    for (int r = 0; r < k && r < 20; r++) { /* the k most likely, in order (k <= 20) */
        best[r] = -1;
        for (int i = 0; i < n_vocab; i++) {
            bool taken = false;
            for (int q = 0; q < r && !taken; q++) taken = best[q] == i;
            if (!taken && (best[r] < 0 || logits[i] > logits[best[r]])) best[r] = i;
        }
        json_array_append_new(top, lp_token(s->vocab, best[r], logits[best[r]] - lse));
    }
    json_object_set_new(e, "top_logprobs", top);
    if (!j->lp_all) j->lp_all = json_array();
    if (!j->lp_pending) j->lp_pending = json_array();
    json_array_append(j->lp_all, e);
    json_array_append_new(j->lp_pending, e);
}

int32_t srv_sample(struct hmoe_server *s, struct srv_job *j, struct hmoe_sampler *smp, const float *logits, int left) {
    const int32_t id = sample_token(s, j, smp, logits, left);
    record_logprobs(s, j, logits, id);
    return id;
}
