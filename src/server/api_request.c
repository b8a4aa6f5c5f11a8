/* api_request.c — a generation request (OpenAI chat / completions, llama-server /completion)
 * read from untrusted JSON into a job: every field is type- and range-checked and a bad one
 * is a 400 naming it (OpenAI's "param"); the conversation is rendered with the model's chat
 * template and tokenized here, on the HTTP thread, so that a prompt longer than the
 * context is refused before it is queued. Where OpenAI and llama-server differ, field
 * names of both are read (max_tokens, max_completion_tokens, n_predict).
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hmoe/json.h"
#include "server/server_impl.h"

void srv_error_set(struct srv_error *e, int status, const char *param, const char *fmt, ...) {
    e->status = status; /* e->ollama, set by the Ollama reader, is kept */
    e->type = status == 401 ? "authentication_error" : status == 404 ? "not_found_error" : "invalid_request_error";
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
}

json_t *srv_parse_body(const char *body, size_t len, struct srv_error *e) {
    json_error_t je;
    if (!len) {
        srv_error_set(e, 400, NULL, "the request body is empty; send a JSON object");
        return NULL;
    }
    json_t *j = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
    if (!j) {
        srv_error_set(e, 400, NULL, "the request body is not valid JSON: %s (line %d, column %d)", je.text, je.line,
                      je.column);
        return NULL;
    }
    if (!json_is_object(j)) {
        json_decref(j);
        srv_error_set(e, 400, NULL, "the request body must be a JSON object");
        return NULL;
    }
    return j;
}

/* A numeric member in [lo, hi]; absent or null keeps *out. */
static bool get_number(json_t *req, const char *key, double lo, double hi, double *out, struct srv_error *e) {
    json_t *v = json_object_get(req, key);
    if (!v || json_is_null(v)) return true;
    if (!json_is_number(v)) {
        srv_error_set(e, 400, key, "'%s' must be a number", key);
        return false;
    }
    const double d = json_number_value(v);
    if (!isfinite(d) || d < lo || d > hi) {
        srv_error_set(e, 400, key, "'%s' is %g but must be between %g and %g", key, d, lo, hi);
        return false;
    }
    *out = d;
    return true;
}

static bool get_int(json_t *req, const char *key, long long lo, long long hi, long long *out, struct srv_error *e) {
    json_t *v = json_object_get(req, key);
    if (!v || json_is_null(v)) return true;
    if (!json_is_integer(v)) {
        srv_error_set(e, 400, key, "'%s' must be an integer", key);
        return false;
    }
    const long long x = json_integer_value(v);
    if (x < lo || x > hi) {
        srv_error_set(e, 400, key, "'%s' is %lld but must be between %lld and %lld", key, x, lo, hi);
        return false;
    }
    *out = x;
    return true;
}

static bool get_bool(json_t *req, const char *key, bool *out, struct srv_error *e) {
    json_t *v = json_object_get(req, key);
    if (!v || json_is_null(v)) return true;
    if (!json_is_boolean(v)) {
        srv_error_set(e, 400, key, "'%s' must be true or false", key);
        return false;
    }
    *out = json_is_true(v);
    return true;
}

static bool get_float(json_t *req, const char *key, double lo, double hi, float *out, struct srv_error *e) {
    double d = *out;
    if (!get_number(req, key, lo, hi, &d, e)) return false;
    *out = (float)d;
    return true;
}

static bool read_stop(json_t *req, struct srv_gen_params *gp, struct srv_error *e) {
    json_t *v = json_object_get(req, "stop");
    if (!v || json_is_null(v)) return true;
    json_t *one[1] = {v};
    const size_t n = json_is_array(v) ? json_array_size(v) : 1;
    if (!json_is_array(v) && !json_is_string(v)) {
        srv_error_set(e, 400, "stop", "'stop' must be a string or an array of strings");
        return false;
    }
    if (n > SRV_MAX_STOP) {
        srv_error_set(e, 400, "stop", "'stop' has %zu strings; at most %d are accepted", n, SRV_MAX_STOP);
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *s = json_is_array(v) ? json_array_get(v, i) : one[0];
        if (!json_is_string(s) || json_string_length(s) == 0 || json_string_length(s) > SRV_MAX_STOP_LEN ||
            strlen(json_string_value(s)) != json_string_length(s)) {
            srv_error_set(e, 400, "stop", "'stop' entry %zu must be a non-empty string of at most %d bytes", i,
                          SRV_MAX_STOP_LEN);
            return false;
        }
        if (!(gp->stop[gp->n_stop] = strdup(json_string_value(s)))) {
            srv_error_set(e, 500, NULL, "out of memory");
            return false;
        }
        gp->n_stop++;
    }
    return true;
}

/* Sampling and length fields shared by every generation endpoint. */
static bool read_gen_params(struct hmoe_server *s, json_t *req, struct srv_gen_params *gp, struct srv_error *e) {
    const struct hmoe_server_params *p = &s->p;
    gp->sp = p->sampling;
    gp->n_predict = p->n_predict;
    gp->cache_prompt = true;
    long long seed = -1, n_pred = gp->n_predict, top_k = gp->sp.top_k, last_n = gp->sp.repeat_last_n, n = 1;
    const long long max_tok = 1LL << 31;
    if (!get_float(req, "temperature", 0, 100, &gp->sp.temp, e) || !get_float(req, "top_p", 0, 1, &gp->sp.top_p, e) ||
        !get_float(req, "min_p", 0, 1, &gp->sp.min_p, e) ||
        !get_float(req, "repeat_penalty", 1e-6, 100, &gp->sp.repeat_penalty, e) ||
        !get_float(req, "presence_penalty", -2, 2, &gp->presence_penalty, e) ||
        !get_float(req, "frequency_penalty", -2, 2, &gp->frequency_penalty, e) ||
        !get_int(req, "top_k", 0, s->model->cfg.n_vocab, &top_k, e) ||
        !get_int(req, "repeat_last_n", -1, max_tok, &last_n, e) || !get_int(req, "seed", -1, INT64_MAX, &seed, e) ||
        !get_int(req, "max_tokens", 0, max_tok, &n_pred, e) ||
        !get_int(req, "max_completion_tokens", 0, max_tok, &n_pred, e) ||
        !get_int(req, "n_predict", -1, max_tok, &n_pred, e) || !get_int(req, "n", 1, 1000000, &n, e) ||
        !get_bool(req, "cache_prompt", &gp->cache_prompt, e) || !get_bool(req, "ignore_eos", &gp->ignore_eos, e) ||
        !read_stop(req, gp, e))
        return false;
    if (n != 1) {
        srv_error_set(e, 400, "n", "'n' is %lld: this server returns one choice per request (n = 1)", n);
        return false;
    }
    bool logprobs = false;
    long long top_lp = -1;
    gp->logprobs_n = json_is_integer(json_object_get(req, "logprobs"));
    if (gp->logprobs_n) { /* the completions API's form: logprobs N, the N most likely per token */
        if (!get_int(req, "logprobs", 0, 20, &top_lp, e)) return false;
        gp->top_logprobs = (int)top_lp;
    } else {
        if (!get_bool(req, "logprobs", &logprobs, e) || !get_int(req, "top_logprobs", 0, 20, &top_lp, e)) return false;
        if (top_lp >= 0 && !logprobs) {
            srv_error_set(e, 400, "top_logprobs", "'top_logprobs' needs 'logprobs': true");
            return false;
        }
        gp->top_logprobs = logprobs ? (int)HMOE_MAX(top_lp, 0) : -1;
    }
    json_t *g = json_object_get(req, "grammar"); /* llama-server's GBNF field */
    if (g && !json_is_null(g) && !(json_is_string(g) && json_string_length(g) == 0)) {
        srv_error_set(e, 400, "grammar", "'grammar' (GBNF) is not supported: use response_format json_object or "
                      "json_schema (or /completion's json_schema)");
        return false;
    }
    if (!srv_grammar_from_request(s, req, gp, e)) return false;
    gp->sp.top_k = (int)top_k;
    gp->sp.repeat_last_n = (int)last_n;
    gp->n_predict = (int)n_pred;
    if (seed >= 0) gp->sp.seed = (uint64_t)seed;
    else if (!p->seed_given) gp->sp.seed = (uint64_t)time(NULL) * 0x9E3779B97F4A7C15ull ^ (uint64_t)(uintptr_t)gp;
    return true;
}

/* A request id: prefix + 24 letters and digits. */
static void make_id(char *out, size_t size, const char *prefix) {
    static atomic_ullong counter;
    uint64_t x = (uint64_t)time(NULL) ^ (atomic_fetch_add(&counter, 1) + 1) * 0x9E3779B97F4A7C15ull;
    static const char az[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    size_t o = (size_t)snprintf(out, size, "%s", prefix);
    for (int i = 0; i < 24 && o + 1 < size; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        out[o++] = az[x % 62];
    }
    out[o] = 0;
}

/* prompt: a string, a list of token ids, or a list holding one of those. */
static bool read_prompt(struct hmoe_server *s, json_t *req, struct srv_job *j, struct srv_error *e) {
    json_t *p = json_object_get(req, "prompt");
    if (json_is_array(p) && json_array_size(p) == 1 && !json_is_integer(json_array_get(p, 0)))
        p = json_array_get(p, 0);
    if (json_is_string(p)) {
        const char *txt = json_string_value(p);
        const size_t len = json_string_length(p);
        struct hmoe_err err = {0};
        size_t n = 0;
        if (hmoe_tokenize(s->vocab, txt, len, true, true, &j->ids, &n, &err)) {
            srv_error_set(e, 500, NULL, "%s", err.msg);
            return false;
        }
        j->n_ids = (int)n;
        if (j->kind == SRV_KIND_NATIVE && !(j->prompt_text = strndup(txt, len))) {
            srv_error_set(e, 500, NULL, "out of memory");
            return false;
        }
        return true;
    }
    if (!json_is_array(p)) {
        srv_error_set(e, 400, "prompt", "'prompt' must be a string or an array of token ids");
        return false;
    }
    const size_t n = json_array_size(p);
    if (n > (size_t)hmoe_ctx_n_ctx(s->ctx)) {
        srv_error_set(e, 400, "prompt", "the prompt is %zu tokens but the context holds %d (-c)", n,
                      hmoe_ctx_n_ctx(s->ctx));
        return false;
    }
    j->ids = malloc((n ? n : 1) * sizeof *j->ids);
    if (!j->ids) {
        srv_error_set(e, 500, NULL, "out of memory");
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_array_get(p, i);
        const long long id = json_is_integer(v) ? json_integer_value(v) : -1;
        if (id < 0 || id >= s->model->cfg.n_vocab) {
            srv_error_set(e, 400, "prompt", "prompt entry %zu is not a token id (0 to %d)", i, s->model->cfg.n_vocab - 1);
            return false;
        }
        j->ids[i] = (int32_t)id;
    }
    j->n_ids = (int)n;
    return true;
}

struct srv_job *srv_request_job(struct hmoe_server *s, enum srv_kind kind, json_t *req, struct srv_error *e) {
    struct srv_job *j = srv_job_new(s, kind);
    if (!j) {
        srv_error_set(e, 500, NULL, "out of memory");
        return NULL;
    }
    make_id(j->id, sizeof j->id, kind == SRV_KIND_CHAT ? "chatcmpl-" : "cmpl-");
    j->created = (long long)time(NULL);
    j->t_arrive = hmoe_time_s();
    bool parse_reasoning = s->p.parse_reasoning;
    json_t *so = json_object_get(req, "stream_options");
    if (!get_bool(req, "stream", &j->stream, e) || !read_gen_params(s, req, &j->gp, e)) goto fail;
    if (so && !json_is_null(so)) {
        if (!json_is_object(so)) {
            srv_error_set(e, 400, "stream_options", "'stream_options' must be an object");
            goto fail;
        }
        if (!get_bool(so, "include_usage", &j->include_usage, e)) goto fail;
    }
    if (j->gp.top_logprobs >= 0 && kind != (j->gp.logprobs_n ? SRV_KIND_COMPLETIONS : SRV_KIND_CHAT)) {
        srv_error_set(e, 400, "logprobs", kind == SRV_KIND_CHAT ? "'logprobs' must be true or false here (with "
                      "'top_logprobs' 0 to 20)" : kind == SRV_KIND_COMPLETIONS ? "'logprobs' must be an integer 0 to "
                      "20 here (the alternatives per token)" : "'logprobs' is served by /v1/chat/completions and "
                      "/v1/completions only");
        goto fail;
    }
    if (kind == SRV_KIND_CHAT || (srv_kind_ollama(kind) && json_object_get(req, "messages"))) {
        json_t *rfmt = json_object_get(req, "reasoning_format");
        if (rfmt && !json_is_null(rfmt)) {
            if (!json_is_string(rfmt)) {
                srv_error_set(e, 400, "reasoning_format", "'reasoning_format' must be a string");
                goto fail;
            }
            parse_reasoning = strcmp(json_string_value(rfmt), "none") != 0;
        }
        char *prompt = srv_render_chat(s, req, parse_reasoning, &j->tcs, e);
        if (!prompt) goto fail;
        if (!srv_tool_choice(s, req, j, &prompt, e)) {
            free(prompt);
            goto fail;
        }
        struct hmoe_err err = {0};
        size_t n = 0;
        enum hmoe_status st = hmoe_tokenize(s->vocab, prompt, strlen(prompt), true, true, &j->ids, &n, &err);
        free(prompt);
        if (st) {
            srv_error_set(e, 500, NULL, "%s", err.msg);
            goto fail;
        }
        j->n_ids = (int)n;
    } else if (!read_prompt(s, req, j, e)) {
        goto fail;
    }
    const int n_ctx = hmoe_ctx_n_ctx(s->ctx);
    if (j->n_ids == 0) {
        srv_error_set(e, 400, kind == SRV_KIND_CHAT ? "messages" : "prompt", "the prompt is empty (no tokens)");
        goto fail;
    }
    if (j->n_ids >= n_ctx) {
        srv_error_set(e, 400, kind == SRV_KIND_CHAT ? "messages" : "prompt",
                      "the prompt is %d tokens but the context holds %d: shorten it or start the server with a larger "
                      "-c (this model allows up to %d)", j->n_ids, n_ctx, s->model->cfg.n_ctx_train);
        goto fail;
    }
    /* max_tokens is capped by the room the context has left */
    if (j->gp.n_predict < 0 || j->gp.n_predict > n_ctx - j->n_ids) j->gp.n_predict = n_ctx - j->n_ids;
    if (j->gp.call && j->gp.n_predict < srv_call_matcher_dist(j->gp.call)) {
        srv_error_set(e, 400, "max_tokens", "max_tokens is %d but the shortest call tool_choice allows takes %d "
                      "tokens: raise max_tokens", j->gp.n_predict, srv_call_matcher_dist(j->gp.call));
        goto fail;
    }
    if (j->gp.grammar && j->gp.n_predict < srv_json_matcher_dist(j->gp.grammar)) {
        srv_error_set(e, 400, "max_tokens", "max_tokens is %d but the shortest JSON answer the schema allows takes %d "
                      "tokens: raise max_tokens", j->gp.n_predict, srv_json_matcher_dist(j->gp.grammar));
        goto fail;
    }
    return j;
fail:
    srv_job_unref(j);
    return NULL;
}
