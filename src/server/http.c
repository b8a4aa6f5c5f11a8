/* http.c — libmicrohttpd glue: the access handler reads the body (up to the limit), checks
 * the API key, routes to an endpoint and answers. A generation request is queued for the
 * engine; its connection is suspended while it waits (non-stream) or while the stream has
 * no new bytes, and the engine resumes it — no HTTP thread ever blocks on the model, so a
 * few threads serve every connection. libmicrohttpd reports the end of each request
 * (completed or the client gone), which releases the job and cancels it if still running.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/server_impl.h"

/* Per-request state (libmicrohttpd's con_cls). */
struct srv_req {
    struct srv_buf body;
    bool too_big;
    struct srv_job *job;
};

static enum MHD_Result send_bytes(struct MHD_Connection *c, int status, const char *ctype, const char *p, size_t n,
                                  const char *retry_after) {
    struct MHD_Response *r = MHD_create_response_from_buffer(n, (void *)p, MHD_RESPMEM_MUST_COPY);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
    MHD_add_response_header(r, "Access-Control-Allow-Origin", "*");
    if (retry_after) MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, retry_after);
    if (status == 401) MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
    const enum MHD_Result ret = MHD_queue_response(c, (unsigned)status, r);
    MHD_destroy_response(r);
    return ret;
}

/* Steals `o`. */
static enum MHD_Result send_json(struct MHD_Connection *c, int status, json_t *o) {
    char *txt = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (!txt) return send_bytes(c, 500, "application/json", "{\"error\":{\"message\":\"out of memory\",\"type\":"
                                "\"server_error\",\"param\":null,\"code\":500}}", 82, NULL);
    const enum MHD_Result ret = send_bytes(c, status, "application/json; charset=utf-8", txt, strlen(txt), NULL);
    free(txt);
    return ret;
}

static enum MHD_Result send_error(struct MHD_Connection *c, const struct srv_error *e, const char *retry_after) {
    json_t *o = srv_error_json(e);
    char *txt = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    const enum MHD_Result ret = send_bytes(c, e->status, "application/json; charset=utf-8", txt ? txt : "{}",
                                           txt ? strlen(txt) : 2, retry_after);
    free(txt);
    return ret;
}

static enum MHD_Result send_simple_error(struct MHD_Connection *c, int status, const char *type, const char *msg) {
    struct srv_error e = {0};
    srv_error_set(&e, status, NULL, "%s", msg);
    if (type) e.type = type;
    return send_error(c, &e, status == 503 ? "1" : NULL);
}

/* Constant time in the key's length whatever the client sends. */
static bool key_matches(const char *given, const char *key) {
    const size_t lg = strlen(given), lk = strlen(key);
    unsigned diff = (unsigned)(lg ^ lk);
    for (size_t i = 0; i < lk; i++) diff |= (unsigned char)(i < lg ? given[i] : 0) ^ (unsigned char)key[i];
    return diff == 0;
}

static bool authorized(struct hmoe_server *s, struct MHD_Connection *c) {
    if (!s->p.api_key) return true;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (!h || strncmp(h, "Bearer ", 7) != 0) return false;
    h += 7;
    while (*h == ' ') h++;
    return key_matches(h, s->p.api_key);
}

/* The answer of a finished non-stream job. */
static enum MHD_Result send_job_body(struct MHD_Connection *c, struct srv_job *j) {
    return send_bytes(c, j->http_status, "application/json; charset=utf-8", j->body.s ? j->body.s : "", j->body.n,
                      NULL);
}

static ssize_t stream_reader(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    struct srv_job *j = cls;
    pthread_mutex_lock(&j->mu);
    ssize_t n = 0;
    const size_t avail = j->out.n - j->out_sent;
    if (avail) {
        n = (ssize_t)HMOE_MIN(avail, max);
        memcpy(buf, j->out.s + j->out_sent, (size_t)n);
        j->out_sent += (size_t)n;
        if (j->out_sent == j->out.n) j->out_sent = j->out.n = 0;
    } else if (j->state == SRV_JOB_DONE) {
        n = MHD_CONTENT_READER_END_OF_STREAM;
    } else {
        j->suspended = true;
        MHD_suspend_connection(j->conn);
    }
    pthread_mutex_unlock(&j->mu);
    return n;
}

static void stream_release(void *cls) { srv_job_unref(cls); }

static enum MHD_Result start_generation(struct hmoe_server *s, struct MHD_Connection *c, struct srv_req *r,
                                        enum srv_kind kind) {
    struct srv_error e = {.ollama = srv_kind_ollama(kind)};
    json_t *req = srv_parse_body(r->body.s, r->body.n, &e);
    if (!req) return send_error(c, &e, NULL);
    if (srv_kind_ollama(kind)) { /* Ollama's request read into the OpenAI one */
        bool load_only = false;
        json_t *conv = srv_ollama_request(req, kind, &load_only, &e);
        if (conv && load_only) {
            json_decref(conv);
            conv = srv_ollama_load_reply(s, kind, req);
            json_decref(req);
            return send_json(c, 200, conv);
        }
        json_decref(req);
        if (!(req = conv)) return send_error(c, &e, NULL);
    }
    struct srv_job *j = srv_request_job(s, kind, req, &e);
    json_decref(req);
    if (!j) {
        atomic_fetch_add(&s->m.requests_error, 1);
        return send_error(c, &e, NULL);
    }
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    j->fd = ci ? ci->connect_fd : -1;
    j->conn = c;
    r->job = j;
    if (!srv_engine_submit(s, j)) {
        atomic_fetch_add(&s->m.requests_rejected, 1);
        return send_simple_error(c, 503, "unavailable_error",
                                 atomic_load(&s->stopping) ? "the server is shutting down"
                                 : "the server is busy: its request queue is full (--queue); retry later");
    }
    if (!j->stream) {
        pthread_mutex_lock(&j->mu);
        const bool done = j->state == SRV_JOB_DONE;
        if (!done) {
            j->suspended = true;
            MHD_suspend_connection(c);
        }
        pthread_mutex_unlock(&j->mu);
        return done ? send_job_body(c, j) : MHD_YES;
    }
    pthread_mutex_lock(&j->mu);
    j->refs++; /* the response's reference, dropped by stream_release */
    pthread_mutex_unlock(&j->mu);
    struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, stream_reader, j,
                                                                  stream_release);
    if (!resp) {
        srv_job_unref(j);
        return MHD_NO;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
                            srv_kind_ollama(kind) ? "application/x-ndjson" : "text/event-stream");
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    MHD_add_response_header(resp, "Access-Control-Allow-Origin", "*");
    const enum MHD_Result ret = MHD_queue_response(c, 200, resp);
    MHD_destroy_response(resp);
    return ret;
}

/* A non-stream job resumed by the engine: answer when it is done. */
static enum MHD_Result resume_generation(struct MHD_Connection *c, struct srv_job *j) {
    pthread_mutex_lock(&j->mu);
    const bool done = j->state == SRV_JOB_DONE;
    if (!done) {
        j->suspended = true;
        MHD_suspend_connection(c);
    }
    pthread_mutex_unlock(&j->mu);
    return done ? send_job_body(c, j) : MHD_YES;
}

/* An endpoint with a JSON request and reply, answered on this thread. */
typedef int (*json_endpoint)(struct hmoe_server *s, json_t *req, json_t **out, struct srv_error *e);
static enum MHD_Result run_json_endpoint(struct hmoe_server *s, struct MHD_Connection *c, struct srv_req *r,
                                         json_endpoint fn) {
    struct srv_error e = {.ollama = fn == srv_ollama_show};
    json_t *req = srv_parse_body(r->body.s, r->body.n, &e), *out = NULL;
    if (!req) return send_error(c, &e, NULL);
    const int status = fn(s, req, &out, &e);
    json_decref(req);
    return status == 200 ? send_json(c, 200, out) : send_error(c, &e, NULL);
}

struct route {
    const char *path, *method;
    int id;
};
enum { R_HEALTH, R_MODELS, R_PROPS, R_METRICS, R_CHAT, R_COMPL, R_NATIVE, R_TOKENIZE, R_DETOKENIZE, R_TEMPLATE,
       R_ROOT, R_OLLAMA_CHAT, R_OLLAMA_GENERATE, R_OLLAMA_TAGS, R_OLLAMA_PS, R_OLLAMA_SHOW, R_OLLAMA_VERSION };
static const struct route routes[] = {
    {"/health", "GET", R_HEALTH},          {"/v1/health", "GET", R_HEALTH},
    {"/v1/models", "GET", R_MODELS},       {"/models", "GET", R_MODELS},
    {"/props", "GET", R_PROPS},            {"/metrics", "GET", R_METRICS},
    {"/v1/chat/completions", "POST", R_CHAT}, {"/chat/completions", "POST", R_CHAT},
    {"/v1/completions", "POST", R_COMPL},  {"/completions", "POST", R_COMPL},
    {"/completion", "POST", R_NATIVE},     {"/tokenize", "POST", R_TOKENIZE},
    {"/detokenize", "POST", R_DETOKENIZE}, {"/apply-template", "POST", R_TEMPLATE},
    {"/", "GET", R_ROOT},                  {"/", "HEAD", R_ROOT},
    {"/api/chat", "POST", R_OLLAMA_CHAT},  {"/api/generate", "POST", R_OLLAMA_GENERATE},
    {"/api/tags", "GET", R_OLLAMA_TAGS},   {"/api/ps", "GET", R_OLLAMA_PS},
    {"/api/show", "POST", R_OLLAMA_SHOW},  {"/api/version", "GET", R_OLLAMA_VERSION},
};

static enum MHD_Result dispatch(struct hmoe_server *s, struct MHD_Connection *c, const char *url, const char *method,
                                struct srv_req *r) {
    const struct route *rt = NULL;
    bool path_known = false;
    for (size_t i = 0; i < HMOE_ARRAY_LEN(routes); i++)
        if (strcmp(url, routes[i].path) == 0) {
            path_known = true;
            if (strcmp(method, routes[i].method) == 0) rt = &routes[i];
        }
    if (!rt) {
        char msg[160];
        snprintf(msg, sizeof msg, path_known ? "method %.16s is not allowed on %.80s" : "no endpoint %.16s %.80s",
                 method, url);
        return send_simple_error(c, path_known ? 405 : 404, path_known ? "invalid_request_error" : "not_found_error", msg);
    }
    const bool ready = atomic_load(&s->ready);
    if (rt->id == R_ROOT) return send_bytes(c, 200, "text/plain; charset=utf-8", "Ollama is running", 17, NULL);
    if (rt->id == R_HEALTH)
        return ready ? send_json(c, 200, json_pack("{s:s}", "status", "ok"))
                     : send_json(c, 503, json_pack("{s:s}", "status", "loading model"));
    if (!ready) return send_simple_error(c, 503, "unavailable_error", "Loading model");
    json_t *out = NULL;
    if (rt->id == R_OLLAMA_VERSION) {
        const int status = srv_ollama_version(s, &out);
        return send_json(c, status, out);
    }
    switch (rt->id) {
    case R_MODELS: {
        const int status = srv_api_models(s, &out);
        return send_json(c, status, out);
    }
    case R_PROPS: {
        const int status = srv_api_props(s, &out);
        return send_json(c, status, out);
    }
    case R_METRICS: {
        char *txt = srv_api_metrics(s);
        if (!txt) return send_simple_error(c, 500, "server_error", "out of memory");
        const enum MHD_Result ret = send_bytes(c, 200, "text/plain; version=0.0.4", txt, strlen(txt), NULL);
        free(txt);
        return ret;
    }
    case R_CHAT: return start_generation(s, c, r, SRV_KIND_CHAT);
    case R_COMPL: return start_generation(s, c, r, SRV_KIND_COMPLETIONS);
    case R_NATIVE: return start_generation(s, c, r, SRV_KIND_NATIVE);
    case R_TOKENIZE: return run_json_endpoint(s, c, r, srv_api_tokenize);
    case R_DETOKENIZE: return run_json_endpoint(s, c, r, srv_api_detokenize);
    case R_TEMPLATE: return run_json_endpoint(s, c, r, srv_api_apply_template);
    case R_OLLAMA_CHAT: return start_generation(s, c, r, SRV_KIND_OLLAMA_CHAT);
    case R_OLLAMA_GENERATE: return start_generation(s, c, r, SRV_KIND_OLLAMA_GENERATE);
    case R_OLLAMA_TAGS: {
        const int status = srv_ollama_tags(s, &out);
        return send_json(c, status, out);
    }
    case R_OLLAMA_PS: {
        const int status = srv_ollama_ps(s, &out);
        return send_json(c, status, out);
    }
    case R_OLLAMA_SHOW: return run_json_endpoint(s, c, r, srv_ollama_show);
    case R_ROOT: case R_OLLAMA_VERSION: case R_HEALTH: break;
    }
    return send_simple_error(c, 500, "server_error", "unrouted endpoint");
}

enum MHD_Result srv_http_handler(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                 const char *version, const char *upload, size_t *upload_size, void **con_cls) {
    (void)version;
    struct hmoe_server *s = cls;
    struct srv_req *r = *con_cls;
    if (!r) {
        if (!(r = calloc(1, sizeof *r))) return MHD_NO;
        *con_cls = r;
        /* /health and CORS preflights (browsers send them without credentials) need no key */
        const bool open = strcmp(url, "/health") == 0 || strcmp(url, "/v1/health") == 0 || strcmp(url, "/") == 0 ||
                          strcmp(url, "/api/version") == 0 || strcmp(method, "OPTIONS") == 0;
        if (!open && !authorized(s, c))
            return send_simple_error(c, 401, "authentication_error",
                                     "invalid or missing API key: send the header 'Authorization: Bearer KEY'");
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (cl && strtoull(cl, NULL, 10) > s->p.body_max) r->too_big = true;
        if (r->too_big) {
            char msg[128];
            snprintf(msg, sizeof msg, "the request body is over the server's limit of %zu bytes", s->p.body_max);
            return send_simple_error(c, 413, "invalid_request_error", msg);
        }
        return MHD_YES;
    }
    if (r->job) return resume_generation(c, r->job);
    if (*upload_size) {
        if (r->too_big || r->body.n + *upload_size > s->p.body_max) r->too_big = true;
        else srv_buf_add(&r->body, upload, *upload_size);
        *upload_size = 0;
        return MHD_YES;
    }
    if (r->too_big || r->body.oom) {
        char msg[128];
        snprintf(msg, sizeof msg, "the request body is over the server's limit of %zu bytes", s->p.body_max);
        return send_simple_error(c, 413, "invalid_request_error", msg);
    }
    if (strcmp(method, "OPTIONS") == 0) { /* CORS preflight of browser clients */
        struct MHD_Response *resp = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
        if (!resp) return MHD_NO;
        MHD_add_response_header(resp, "Access-Control-Allow-Origin", "*");
        MHD_add_response_header(resp, "Access-Control-Allow-Methods", "GET, POST, OPTIONS");
        MHD_add_response_header(resp, "Access-Control-Allow-Headers", "Authorization, Content-Type");
        const enum MHD_Result ret = MHD_queue_response(c, 204, resp);
        MHD_destroy_response(resp);
        return ret;
    }
    return dispatch(s, c, url, method, r);
}

void srv_http_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe) {
    (void)cls, (void)c, (void)toe;
    struct srv_req *r = *con_cls;
    if (!r) return;
    if (r->job) {
        pthread_mutex_lock(&r->job->mu);
        r->job->released = true;
        if (r->job->state != SRV_JOB_DONE) r->job->cancelled = true;
        pthread_mutex_unlock(&r->job->mu);
        srv_job_unref(r->job);
    }
    srv_buf_free(&r->body);
    free(r);
    *con_cls = NULL;
}
