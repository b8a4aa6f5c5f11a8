/* api_info.c — the endpoints that do not generate: /v1/models (OpenAI list), /props
 * (llama-server's settings object), /tokenize, /detokenize and /apply-template (llama-server
 * shapes) and /metrics (Prometheus text with llama-server's metric names, plus hmoe's
 * expert-cache and VRAM figures). They run on the HTTP thread: the vocabulary is read-only
 * and the counters are atomics; the context statistics are the engine's copy after its last
 * request (the context itself belongs to the engine thread).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/server_impl.h"

int srv_api_models(struct hmoe_server *s, json_t **out) {
    *out = json_pack("{s:s, s:[{s:s, s:s, s:I, s:s, s:{s:i, s:i, s:I}}]}", "object", "list", "data", "id",
                     s->model_name, "object", "model", "created", s->started, "owned_by", "hmoe", "meta", "n_ctx_train",
                     s->model->cfg.n_ctx_train, "n_vocab", s->model->cfg.n_vocab, "size",
                     (json_int_t)s->model->weight_bytes);
    return 200;
}

int srv_api_props(struct hmoe_server *s, json_t **out) {
    const struct hmoe_sampler_params *sp = &s->p.sampling;
    const char *tmpl = s->vocab->chat_template ? s->vocab->chat_template : "";
    *out = json_pack("{s:{s:i, s:{s:i, s:f, s:i, s:f, s:f, s:f, s:i}}, s:i, s:s, s:s, s:s, s:s, s:{s:b, s:b}}",
                     "default_generation_settings", "n_ctx", hmoe_ctx_n_ctx(s->ctx), "params", "n_predict",
                     s->p.n_predict, "temperature", (double)sp->temp, "top_k", sp->top_k, "top_p", (double)sp->top_p,
                     "min_p", (double)sp->min_p, "repeat_penalty", (double)sp->repeat_penalty, "repeat_last_n",
                     sp->repeat_last_n, "total_slots", s->n_slots, "model_path", s->model_path, "chat_template", tmpl,
                     "chat_template_family", hmoe_chat_fmt_name(s->fmt), "build_info", "hmoe", "modalities",
                     "vision", 0, "audio", 0);
    return 200;
}

int srv_api_tokenize(struct hmoe_server *s, json_t *req, json_t **out, struct srv_error *e) {
    json_t *content = json_object_get(req, "content"), *as = json_object_get(req, "add_special"),
           *ps = json_object_get(req, "parse_special"), *wp = json_object_get(req, "with_pieces");
    if (!json_is_string(content)) {
        srv_error_set(e, 400, "content", "'content' must be a string");
        return 400;
    }
    if ((as && !json_is_boolean(as)) || (ps && !json_is_boolean(ps)) || (wp && !json_is_boolean(wp))) {
        srv_error_set(e, 400, NULL, "'add_special', 'parse_special' and 'with_pieces' must be booleans");
        return 400;
    }
    int32_t *ids = NULL;
    size_t n = 0;
    struct hmoe_err err = {0};
    if (hmoe_tokenize(s->vocab, json_string_value(content), json_string_length(content), json_is_true(as),
                      !ps || json_is_true(ps), &ids, &n, &err)) {
        srv_error_set(e, 500, NULL, "%s", err.msg);
        return 500;
    }
    json_t *tokens = json_array();
    for (size_t i = 0; i < n; i++) {
        if (json_is_true(wp)) {
            size_t len = 0;
            const char *piece = hmoe_token_to_piece(s->vocab, ids[i], true, &len);
            json_array_append_new(tokens, json_pack("{s:i, s:o}", "id", ids[i], "piece", srv_json_text(piece, len)));
        } else {
            json_array_append_new(tokens, json_integer(ids[i]));
        }
    }
    free(ids);
    *out = json_pack("{s:o}", "tokens", tokens);
    return 200;
}

int srv_api_detokenize(struct hmoe_server *s, json_t *req, json_t **out, struct srv_error *e) {
    json_t *tokens = json_object_get(req, "tokens");
    if (!json_is_array(tokens)) {
        srv_error_set(e, 400, "tokens", "'tokens' must be an array of token ids");
        return 400;
    }
    const size_t n = json_array_size(tokens);
    int32_t *ids = malloc((n ? n : 1) * sizeof *ids);
    if (!ids) {
        srv_error_set(e, 500, NULL, "out of memory");
        return 500;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_array_get(tokens, i);
        const long long id = json_is_integer(v) ? json_integer_value(v) : -1;
        if (id < 0 || id >= (long long)s->vocab->n_tokens) {
            free(ids);
            srv_error_set(e, 400, "tokens", "tokens[%zu] is not a token id (0 to %u)", i, s->vocab->n_tokens - 1);
            return 400;
        }
        ids[i] = (int32_t)id;
    }
    char *text = NULL;
    size_t len = 0;
    struct hmoe_err err = {0};
    enum hmoe_status st = hmoe_detokenize(s->vocab, ids, n, false, true, &text, &len, &err);
    free(ids);
    if (st) {
        srv_error_set(e, 500, NULL, "%s", err.msg);
        return 500;
    }
    *out = json_pack("{s:o}", "content", srv_json_text(text, len));
    free(text);
    return 200;
}

int srv_api_apply_template(struct hmoe_server *s, json_t *req, json_t **out, struct srv_error *e) {
    char *prompt = srv_render_chat(s, req, true, NULL, e);
    if (!prompt) return e->status;
    *out = json_pack("{s:o}", "prompt", srv_json_text(prompt, strlen(prompt)));
    free(prompt);
    return 200;
}

/* Prometheus text: one HELP / TYPE pair and one sample per metric. */
static void metric(struct srv_buf *b, const char *name, const char *type, const char *help, double v) {
    char line[512];
    const int n = snprintf(line, sizeof line, "# HELP %s %s\n# TYPE %s %s\n%s %.17g\n", name, help, name, type, name, v);
    if (n > 0) srv_buf_add(b, line, HMOE_MIN((size_t)n, sizeof line - 1));
}

char *srv_api_metrics(struct hmoe_server *s) {
    const struct srv_metrics *m = &s->m;
    struct srv_buf b = {0};
    const double pt = (double)atomic_load(&m->prompt_tokens), pus = (double)atomic_load(&m->prompt_us);
    const double gt = (double)atomic_load(&m->gen_tokens), gus = (double)atomic_load(&m->gen_us);
    pthread_mutex_lock(&s->qmu);
    const struct hmoe_ctx_stats st = s->stats;
    const int n_kv = s->n_kv_seen;
    pthread_mutex_unlock(&s->qmu);
    const int n_ctx = hmoe_ctx_n_ctx(s->ctx);
    metric(&b, "llamacpp:prompt_tokens_total", "counter", "Number of prompt tokens processed.", pt);
    metric(&b, "llamacpp:prompt_seconds_total", "counter", "Prompt process time", pus / 1e6);
    metric(&b, "llamacpp:tokens_predicted_total", "counter", "Number of generation tokens processed.", gt);
    metric(&b, "llamacpp:tokens_predicted_seconds_total", "counter", "Predict process time", gus / 1e6);
    metric(&b, "llamacpp:n_decode_total", "counter", "Total number of llama_decode() calls",
           (double)atomic_load(&m->n_decode));
    metric(&b, "llamacpp:prompt_tokens_seconds", "gauge", "Average prompt throughput in tokens/s.",
           pus > 0 ? pt * 1e6 / pus : 0);
    metric(&b, "llamacpp:predicted_tokens_seconds", "gauge", "Average generation throughput in tokens/s.",
           gus > 0 ? gt * 1e6 / gus : 0);
    metric(&b, "llamacpp:kv_cache_usage_ratio", "gauge", "KV-cache usage of the last finished request's slot. 1 means 100 percent usage.",
           n_ctx ? (double)n_kv / n_ctx : 0);
    metric(&b, "llamacpp:kv_cache_tokens", "gauge", "KV-cache tokens.", n_kv);
    metric(&b, "llamacpp:requests_processing", "gauge", "Number of requests processing.",
           atomic_load(&m->processing));
    metric(&b, "llamacpp:requests_deferred", "gauge", "Number of requests deferred (waiting in the queue).",
           atomic_load(&m->deferred));
    metric(&b, "hmoe:slots_total", "gauge", "Parallel sequences (-np), each with n_ctx / np positions.", s->n_slots);
    metric(&b, "hmoe:slots_busy", "gauge", "Slots running a request.", atomic_load(&m->processing));
    metric(&b, "hmoe:requests_ok_total", "counter", "Generation requests answered in full.",
           (double)atomic_load(&m->requests_ok));
    metric(&b, "hmoe:requests_error_total", "counter", "Generation requests refused (4xx) or failed (5xx).",
           (double)atomic_load(&m->requests_error));
    metric(&b, "hmoe:requests_cancelled_total", "counter", "Generation requests whose client went away.",
           (double)atomic_load(&m->requests_cancelled));
    metric(&b, "hmoe:requests_rejected_total", "counter", "Requests refused with 503 because the queue was full.",
           (double)atomic_load(&m->requests_rejected));
    metric(&b, "hmoe:expert_cache_hit_rate", "gauge", "Hybrid decode: expert uses found in VRAM (1 = all resident).",
           st.cache_hit_rate);
    metric(&b, "hmoe:vram_used_bytes", "gauge", "VRAM in use by the GPU backend.", (double)st.vram_used_bytes);
    metric(&b, "hmoe:cpu_expert_gbps", "gauge", "Hybrid decode: CPU expert read rate in GB/s.", st.cpu_expert_gbps);
    if (b.oom) {
        srv_buf_free(&b);
        return NULL;
    }
    return b.s;
}
