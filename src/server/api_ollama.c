/* api_ollama.c — Ollama's API (many clients speak only it): /api/chat and /api/generate read
 * into the OpenAI-shaped request the rest of the server already checks (messages, tools,
 * options -> sampling fields, format -> response_format, think -> enable_thinking), and the
 * endpoints clients call first: /api/tags, /api/ps, /api/show, /api/version and "GET /"
 * ("Ollama is running"). The answers are written by api_ollama_reply.c.
 *
 * Where Ollama and this server differ: any model name is accepted (one model is loaded; the
 * answer names it), `keep_alive` is accepted and has no effect (the model stays loaded),
 * `images` are refused (text models only), options this engine has no use for (num_ctx,
 * num_gpu, num_thread, mirostat, ...) are ignored with a note on the server's log.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "server/server_impl.h"

/* The version clients see: they gate features (tools, think) on it. */
#define SRV_OLLAMA_VERSION "0.12.6"

void srv_ollama_time(char *out, size_t size) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char day[32];
    strftime(day, sizeof day, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out, size, "%s.%09ldZ", day, (long)ts.tv_nsec);
}

/* options{} -> the request fields read by read_gen_params (Ollama name, server name). */
static const char *const option_map[][2] = {
    {"temperature", "temperature"},   {"top_p", "top_p"},
    {"top_k", "top_k"},               {"min_p", "min_p"},
    {"seed", "seed"},                 {"num_predict", "n_predict"},
    {"stop", "stop"},                 {"repeat_penalty", "repeat_penalty"},
    {"repeat_last_n", "repeat_last_n"}, {"presence_penalty", "presence_penalty"},
    {"frequency_penalty", "frequency_penalty"},
};

static bool copy_options(json_t *opts, json_t *out, struct srv_error *e) {
    if (!opts || json_is_null(opts)) return true;
    if (!json_is_object(opts)) {
        srv_error_set(e, 400, "options", "'options' must be an object");
        return false;
    }
    const char *key;
    json_t *v;
    char ignored[256] = "";
    size_t n_ign = 0;
    json_object_foreach(opts, key, v) {
        size_t k = 0;
        while (k < HMOE_ARRAY_LEN(option_map) && strcmp(key, option_map[k][0]) != 0) k++;
        if (k == HMOE_ARRAY_LEN(option_map)) {
            n_ign += (size_t)snprintf(ignored + n_ign, n_ign < sizeof ignored ? sizeof ignored - n_ign : 0, "%s%.40s",
                                      n_ign ? ", " : "", key);
            if (n_ign >= sizeof ignored) n_ign = sizeof ignored - 1;
            continue;
        }
        /* num_predict -2 is Ollama's "fill the context", -1 "no limit": both are n_predict -1 here */
        if (k == 5 && json_is_integer(v) && json_integer_value(v) == -2) v = json_integer(-1);
        else json_incref(v);
        json_object_set_new(out, option_map[k][1], v);
    }
    if (n_ign) fprintf(stderr, "hmoe serve: Ollama options ignored (no effect in this server): %s\n", ignored);
    return true;
}

static bool no_images(json_t *holder, const char *param, struct srv_error *e) {
    json_t *im = json_object_get(holder, "images");
    if (im && !json_is_null(im) && !(json_is_array(im) && json_array_size(im) == 0)) {
        srv_error_set(e, 400, param, "'%s' is not supported: this server runs text-only models", param);
        return false;
    }
    return true;
}

/* Ollama messages -> OpenAI messages: thinking -> reasoning_content, tool_calls kept (their
 * arguments are objects, which the chat reader accepts), images refused. */
static json_t *convert_messages(json_t *msgs, struct srv_error *e) {
    if (!json_is_array(msgs)) {
        srv_error_set(e, 400, "messages", "'messages' must be an array of {\"role\", \"content\"} objects");
        return NULL;
    }
    json_t *out = json_array();
    for (size_t i = 0; i < json_array_size(msgs); i++) {
        json_t *m = json_array_get(msgs, i);
        char param[64];
        snprintf(param, sizeof param, "messages[%zu].images", i);
        if (json_is_object(m) && !no_images(m, param, e)) {
            json_decref(out);
            return NULL;
        }
        json_t *c = json_is_object(m) ? json_deep_copy(m) : json_incref(m);
        if (json_is_object(c)) {
            json_t *th = json_object_get(c, "thinking");
            if (json_is_string(th)) json_object_set(c, "reasoning_content", th);
            json_object_del(c, "thinking");
            json_object_del(c, "images");
        }
        json_array_append_new(out, c);
    }
    return out;
}

/* format: "json", a JSON schema object, or absent / "" */
static bool convert_format(json_t *fmt, json_t *out, struct srv_error *e) {
    if (!fmt || json_is_null(fmt) || (json_is_string(fmt) && json_string_length(fmt) == 0)) return true;
    if (json_is_string(fmt) && strcmp(json_string_value(fmt), "json") == 0) {
        json_object_set_new(out, "response_format", json_pack("{s:s}", "type", "json_object"));
        return true;
    }
    if (json_is_object(fmt)) {
        json_object_set_new(out, "response_format",
                            json_pack("{s:s, s:{s:s, s:O}}", "type", "json_schema", "json_schema", "name", "format",
                                      "schema", fmt));
        return true;
    }
    srv_error_set(e, 400, "format", "'format' must be \"json\" or a JSON schema object");
    return false;
}

/* think: true / false, or gpt-oss's "low" / "medium" / "high" (reasoning effort, thinking on). */
static bool convert_think(json_t *think, json_t *out, struct srv_error *e) {
    if (!think || json_is_null(think)) return true;
    json_t *kw = json_object();
    json_object_set_new(out, "chat_template_kwargs", kw);
    if (json_is_boolean(think)) {
        json_object_set_new(kw, "enable_thinking", json_boolean(json_is_true(think)));
        return true;
    }
    const char *s = json_is_string(think) ? json_string_value(think) : "";
    if (strcmp(s, "low") == 0 || strcmp(s, "medium") == 0 || strcmp(s, "high") == 0) {
        json_object_set_new(kw, "enable_thinking", json_true());
        json_object_set_new(out, "reasoning_effort", json_string(s));
        return true;
    }
    srv_error_set(e, 400, "think", "'think' must be true, false, \"low\", \"medium\" or \"high\"");
    return false;
}

static bool check_common(json_t *req, struct srv_error *e) {
    json_t *model = json_object_get(req, "model"), *ka = json_object_get(req, "keep_alive");
    if (model && !json_is_null(model) && !json_is_string(model)) {
        srv_error_set(e, 400, "model", "'model' must be a string");
        return false;
    }
    if (ka && !json_is_null(ka) && !json_is_string(ka) && !json_is_number(ka)) {
        srv_error_set(e, 400, "keep_alive", "'keep_alive' must be a duration string (\"5m\") or a number of seconds");
        return false;
    }
    return true;
}

/* Copy a scalar member under the same name when present. */
static void keep_field(json_t *from, json_t *to, const char *key) {
    json_t *v = json_object_get(from, key);
    if (v) json_object_set(to, key, v);
}

json_t *srv_ollama_request(json_t *req, enum srv_kind kind, bool *load_only, struct srv_error *e) {
    e->ollama = true;
    *load_only = false;
    if (!check_common(req, e)) return NULL;
    json_t *out = json_object();
    json_t *stream = json_object_get(req, "stream");
    if (stream && !json_is_null(stream) && !json_is_boolean(stream)) {
        srv_error_set(e, 400, "stream", "'stream' must be true or false");
        goto fail;
    }
    /* Ollama streams unless told not to */
    json_object_set_new(out, "stream", json_boolean(!stream || json_is_null(stream) || json_is_true(stream)));
    if (!copy_options(json_object_get(req, "options"), out, e) || !convert_format(json_object_get(req, "format"), out, e) ||
        !convert_think(json_object_get(req, "think"), out, e))
        goto fail;
    keep_field(req, out, "tools");
    if (kind == SRV_KIND_OLLAMA_CHAT) {
        json_t *msgs = convert_messages(json_object_get(req, "messages"), e);
        if (!msgs) goto fail;
        *load_only = json_array_size(msgs) == 0;
        json_object_set_new(out, "messages", msgs);
        return out;
    }
    /* /api/generate */
    json_t *prompt = json_object_get(req, "prompt"), *system = json_object_get(req, "system");
    json_t *raw = json_object_get(req, "raw"), *suffix = json_object_get(req, "suffix"),
           *tmpl = json_object_get(req, "template");
    if (!no_images(req, "images", e)) goto fail;
    if ((prompt && !json_is_null(prompt) && !json_is_string(prompt)) || (system && !json_is_null(system) && !json_is_string(system))) {
        srv_error_set(e, 400, json_is_string(prompt) || !prompt ? "system" : "prompt", "'prompt' and 'system' must be strings");
        goto fail;
    }
    if (raw && !json_is_null(raw) && !json_is_boolean(raw)) {
        srv_error_set(e, 400, "raw", "'raw' must be true or false");
        goto fail;
    }
    if (json_is_string(suffix) && json_string_length(suffix)) {
        srv_error_set(e, 400, "suffix", "'suffix' (fill-in-the-middle) is not supported by this server");
        goto fail;
    }
    if (json_is_string(tmpl) && json_string_length(tmpl)) {
        srv_error_set(e, 400, "template", "'template' (a Go template) is not supported: this server renders with the "
                      "model's chat template (start it with --chat-template-file to change it)");
        goto fail;
    }
    if (!json_is_string(prompt) || json_string_length(prompt) == 0) {
        *load_only = true;
        return out;
    }
    if (json_is_true(raw)) {
        json_object_set(out, "prompt", prompt);
        return out;
    }
    json_t *msgs = json_array();
    if (json_is_string(system) && json_string_length(system))
        json_array_append_new(msgs, json_pack("{s:s, s:O}", "role", "system", "content", system));
    json_array_append_new(msgs, json_pack("{s:s, s:O}", "role", "user", "content", prompt));
    json_object_set_new(out, "messages", msgs);
    return out;
fail:
    json_decref(out);
    return NULL;
}

/* --- the endpoints that do not generate ------------------------------------------------- */

/* general.architecture, the parameter count and the type holding most of the weight bytes
 * (the quantization Ollama shows, e.g. Q4_K for a Q4_K_M file). */
static json_t *details_json(struct hmoe_server *s, uint64_t *n_params) {
    const struct hmoe_gguf *g = s->model->gguf;
    uint64_t bytes_of[64] = {0}, params = 0;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        params += g->tensors[i].n_elements;
        if ((unsigned)g->tensors[i].type < HMOE_ARRAY_LEN(bytes_of)) bytes_of[g->tensors[i].type] += g->tensors[i].n_bytes;
    }
    unsigned top = 0;
    for (unsigned t = 1; t < HMOE_ARRAY_LEN(bytes_of); t++)
        if (bytes_of[t] > bytes_of[top]) top = t;
    char psize[32];
    if (params >= 1000000000ull) snprintf(psize, sizeof psize, "%.1fB", (double)params / 1e9);
    else snprintf(psize, sizeof psize, "%.1fM", (double)params / 1e6);
    *n_params = params;
    const char *arch = s->model->cfg.arch;
    return json_pack("{s:s, s:s, s:s, s:[s], s:s, s:s}", "parent_model", "", "format", "gguf", "family", arch,
                     "families", arch, "parameter_size", psize, "quantization_level", hmoe_type_name(top));
}

/* An identifier of the file (path, size, modification time) in Ollama's 64-hex digest form;
 * not its SHA-256, which would mean reading the whole file. */
static void file_digest(const char *path, const struct stat *st, char out[65]) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (const char *p = path; *p; p++) h = (h ^ (unsigned char)*p) * 0x100000001b3ull;
    h = (h ^ (uint64_t)st->st_size) * 0x100000001b3ull;
    h = (h ^ (uint64_t)st->st_mtime) * 0x100000001b3ull;
    for (int k = 0; k < 4; k++) {
        h ^= h >> 33, h *= 0xff51afd7ed558ccdull, h ^= h >> 33;
        snprintf(out + 16 * k, 17, "%016llx", (unsigned long long)h);
    }
}

static json_t *model_entry(struct hmoe_server *s, bool running) {
    struct stat st = {0};
    stat(s->model_path, &st);
    char digest[65], mtime[40];
    file_digest(s->model_path, &st, digest);
    struct tm tm;
    gmtime_r(&st.st_mtime, &tm);
    strftime(mtime, sizeof mtime, "%Y-%m-%dT%H:%M:%SZ", &tm);
    uint64_t n_params;
    json_t *o = json_pack("{s:s, s:s, s:I, s:s, s:o}", "name", s->model_name, "model", s->model_name, "size",
                          (json_int_t)st.st_size, "digest", digest, "details", details_json(s, &n_params));
    if (!running) {
        json_object_set_new(o, "modified_at", json_string(mtime));
        return o;
    }
    pthread_mutex_lock(&s->qmu);
    const uint64_t vram = s->stats.vram_used_bytes;
    pthread_mutex_unlock(&s->qmu);
    /* the model never unloads: Ollama shows keep_alive -1 as this far-off time */
    json_object_set_new(o, "expires_at", json_string("2318-01-01T00:00:00Z"));
    json_object_set_new(o, "size_vram", json_integer((json_int_t)vram));
    json_object_set_new(o, "context_length", json_integer(hmoe_ctx_n_ctx(s->ctx)));
    return o;
}

int srv_ollama_tags(struct hmoe_server *s, json_t **out) {
    *out = json_pack("{s:[o]}", "models", model_entry(s, false));
    return 200;
}

int srv_ollama_ps(struct hmoe_server *s, json_t **out) {
    *out = json_pack("{s:[o]}", "models", model_entry(s, true));
    return 200;
}

int srv_ollama_version(struct hmoe_server *s, json_t **out) {
    (void)s;
    *out = json_pack("{s:s}", "version", SRV_OLLAMA_VERSION);
    return 200;
}

int srv_ollama_show(struct hmoe_server *s, json_t *req, json_t **out, struct srv_error *e) {
    e->ollama = true;
    json_t *model = json_object_get(req, "model"), *name = json_object_get(req, "name");
    if ((model && !json_is_string(model)) || (name && !json_is_string(name))) {
        srv_error_set(e, 400, "model", "'model' must be a string");
        return 400;
    }
    uint64_t n_params;
    json_t *details = details_json(s, &n_params);
    const struct hmoe_model_config *c = &s->model->cfg;
    char key[96];
    json_t *info = json_pack("{s:s, s:I}", "general.architecture", c->arch, "general.parameter_count", (json_int_t)n_params);
    snprintf(key, sizeof key, "%s.context_length", c->arch);
    json_object_set_new(info, key, json_integer(c->n_ctx_train));
    snprintf(key, sizeof key, "%s.embedding_length", c->arch);
    json_object_set_new(info, key, json_integer(c->n_embd));
    snprintf(key, sizeof key, "%s.block_count", c->arch);
    json_object_set_new(info, key, json_integer(c->n_layer));
    const char *tmpl = s->vocab->chat_template ? s->vocab->chat_template : "";
    json_t *caps = json_pack("[s]", "completion");
    if (strstr(tmpl, "tools")) json_array_append_new(caps, json_string("tools"));
    if (strstr(tmpl, "<think>") || strstr(tmpl, "reasoning_content")) json_array_append_new(caps, json_string("thinking"));
    char params[64];
    snprintf(params, sizeof params, "num_ctx                        %d", hmoe_ctx_n_ctx(s->ctx));
    *out = json_pack("{s:s, s:s, s:s, s:o, s:o, s:o}", "modelfile", "", "parameters", params, "template", tmpl,
                     "details", details, "model_info", info, "capabilities", caps);
    return 200;
}
