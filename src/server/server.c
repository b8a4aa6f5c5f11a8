/* server.c — the server's life cycle: bind and start libmicrohttpd (thread pool, connection
 * limit, idle timeout, header memory limit), take the model once it is loaded, and stop in
 * the order that leaves no connection suspended: stop accepting, let the engine cancel
 * the running request and answer the queued ones (which resumes their connections), then
 * stop the HTTP threads.
 */
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "server/server_impl.h"

void hmoe_server_params_default(struct hmoe_server_params *p) {
    memset(p, 0, sizeof *p);
    p->host = "127.0.0.1";
    p->port = 8080;
    p->queue_max = 16;
    p->body_max = 16u << 20;
    p->http_threads = 4;
    p->conn_max = 64;
    p->idle_timeout_s = 30;
    p->enable_thinking = true;
    p->parse_reasoning = true;
    p->n_predict = -1;
    hmoe_sampler_params_default(&p->sampling);
}

enum hmoe_status hmoe_server_start(const struct hmoe_server_params *p, struct hmoe_server **out,
                                   struct hmoe_err *err) {
    *out = NULL;
    if (p->port < 0 || p->port > 65535)
        return HMOE_RAISE(err, HMOE_ERR_ARG, "--port %d is not a TCP port (0 to 65535)", p->port);
    if (p->queue_max < 0) return HMOE_RAISE(err, HMOE_ERR_ARG, "--queue must be 0 or more");
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV},
                    *ai = NULL;
    char port[16];
    snprintf(port, sizeof port, "%d", p->port);
    const int gai = getaddrinfo(p->host, port, &hints, &ai);
    if (gai) return HMOE_RAISE(err, HMOE_ERR_ARG, "--host %s: %s", p->host, gai_strerror(gai));
    struct hmoe_server *s = calloc(1, sizeof *s);
    if (!s) {
        freeaddrinfo(ai);
        return HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory");
    }
    s->p = *p;
    s->host_copy = strdup(p->host);
    s->key_copy = p->api_key ? strdup(p->api_key) : NULL;
    s->alias_copy = p->alias ? strdup(p->alias) : NULL;
    s->p.host = s->host_copy;
    s->p.api_key = s->key_copy;
    s->p.alias = s->alias_copy;
    s->started = (long long)time(NULL);
    pthread_mutex_init(&s->qmu, NULL);
    pthread_cond_init(&s->qcv, NULL);
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO | MHD_ALLOW_SUSPEND_RESUME;
    if (ai->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
    s->mhd = MHD_start_daemon(flags, (uint16_t)p->port, NULL, NULL, srv_http_handler, s,
                              MHD_OPTION_SOCK_ADDR, ai->ai_addr,
                              MHD_OPTION_THREAD_POOL_SIZE, (unsigned)HMOE_MAX(p->http_threads, 1),
                              MHD_OPTION_CONNECTION_LIMIT, (unsigned)HMOE_MAX(p->conn_max, 1),
                              MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)HMOE_MAX(p->idle_timeout_s, 1),
                              MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(64 << 10),
                              MHD_OPTION_LISTENING_ADDRESS_REUSE, 1u,
                              MHD_OPTION_NOTIFY_COMPLETED, srv_http_completed, s,
                              MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!s->mhd) {
        hmoe_server_free(s);
        return HMOE_RAISE(err, HMOE_ERR_IO, "cannot listen on %s:%d (in use, or not an address of this machine?); "
                          "choose another with --host / --port", p->host, p->port);
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->mhd, MHD_DAEMON_INFO_BIND_PORT);
    s->port = di ? di->port : p->port;
    *out = s;
    return HMOE_OK;
}

int hmoe_server_port(const struct hmoe_server *s) { return s->port; }

void hmoe_server_set_spec(struct hmoe_server *s, struct hmoe_spec *spec) { s->spec = spec; }

enum hmoe_status hmoe_server_set_model(struct hmoe_server *s, const struct hmoe_model *model, struct hmoe_ctx *ctx,
                                       const struct hmoe_vocab *vocab, const struct hmoe_chat_fmt *fmt,
                                       const char *model_path, struct hmoe_err *err) {
    s->model = model;
    s->ctx = ctx;
    s->vocab = vocab;
    s->fmt = fmt;
    s->model_path = strdup(model_path);
    const char *base = strrchr(model_path, '/');
    s->model_name = strdup(s->p.alias ? s->p.alias : base ? base + 1 : model_path);
    if (!s->model_path || !s->model_name) return HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory");
    enum hmoe_status st = srv_engine_start(s, err);
    if (st) return st;
    atomic_store(&s->ready, true);
    return HMOE_OK;
}

void hmoe_server_stop(struct hmoe_server *s) {
    if (!s) return;
    if (s->mhd) MHD_quiesce_daemon(s->mhd);
    srv_engine_stop(s);
    if (s->mhd) MHD_stop_daemon(s->mhd);
    s->mhd = NULL;
}

void hmoe_server_free(struct hmoe_server *s) {
    if (!s) return;
    hmoe_server_stop(s);
    pthread_mutex_destroy(&s->qmu);
    pthread_cond_destroy(&s->qcv);
    free(s->host_copy);
    free(s->key_copy);
    free(s->alias_copy);
    free(s->model_path);
    free(s->model_name);
    free(s);
}
