/* server.h — `hmoe serve`: an OpenAI-compatible (and llama-server compatible) HTTP server.
 *
 * Layer: cli -> server -> model / text. The HTTP side is libmicrohttpd (a thread pool with a
 * connection limit, idle timeouts and a request-body limit); requests are JSON read with
 * jansson. One engine thread owns the model context and runs one request at a time from a
 * bounded FIFO queue (beyond it: 503 with Retry-After). The server listens before the model
 * is loaded so that /health can answer 503 {"status":"loading model"} during the load.
 *
 * Life cycle: hmoe_server_start (binds, starts the HTTP threads) -> hmoe_server_set_model
 * (starts the engine; /health turns 200) -> hmoe_server_stop (stops accepting, cancels the
 * running request, joins every thread) -> hmoe_server_free.
 */
#ifndef HMOE_SERVER_H
#define HMOE_SERVER_H

#include <stddef.h>

#include "hmoe/common.h"
#include "hmoe/model.h"
#include "hmoe/text.h"

struct hmoe_server_params {
    const char *host;        /* address to bind (default "127.0.0.1"; "0.0.0.0" for every interface) */
    int port;                /* TCP port (default 8080; 0 = any free port, see hmoe_server_port) */
    const char *alias;       /* model name reported by /v1/models and in responses (default: file name) */
    const char *api_key;     /* when set, every endpoint but /health needs "Authorization: Bearer KEY" */
    int queue_max;           /* requests waiting behind the running ones (default 16) */
    int prefill_chunk;       /* prompt tokens a slot runs per step beside the others' tokens (0: -ub) */
    size_t body_max;         /* request body limit in bytes (default 16 MiB) */
    int http_threads;        /* libmicrohttpd thread pool size (default 4) */
    int conn_max;            /* open connections at most (default 64) */
    int idle_timeout_s;      /* a connection idle this long (headers included) is closed (default 30) */
    bool enable_thinking;    /* default of chat_template_kwargs.enable_thinking (--reasoning on|off) */
    bool parse_reasoning;    /* <think>...</think> into reasoning_content (--reasoning-format, default on) */
    int n_predict;           /* default max tokens of a request (-n; -1 = until the context is full) */
    struct hmoe_sampler_params sampling; /* defaults of requests that leave a field out */
    bool seed_given;         /* sampling.seed is fixed (-s); else each request draws one */
};
void hmoe_server_params_default(struct hmoe_server_params *p);

struct hmoe_server;

/* Bind and start answering (every endpoint but /health says the model is loading). */
enum hmoe_status hmoe_server_start(const struct hmoe_server_params *p, struct hmoe_server **out,
                                   struct hmoe_err *err);
/* The port bound (the real one when params.port was 0). */
int hmoe_server_port(const struct hmoe_server *s);
/* Hand over the loaded model: the server uses (never frees) model, ctx, vocab and the chat
 * format until hmoe_server_stop returns; `model_path` names it in /props and /v1/models. */
struct hmoe_chat_fmt;
enum hmoe_status hmoe_server_set_model(struct hmoe_server *s, const struct hmoe_model *model, struct hmoe_ctx *ctx,
                                       const struct hmoe_vocab *vocab, const struct hmoe_chat_fmt *fmt,
                                       const char *model_path, struct hmoe_err *err);
/* Before hmoe_server_set_model: decode with this speculative decoder of ctx (--spec mtp; a
 * context of one sequence), which the server uses but never frees. */
void hmoe_server_set_spec(struct hmoe_server *s, struct hmoe_spec *spec);
/* Stop accepting connections, cancel the running and queued requests, join every thread. */
void hmoe_server_stop(struct hmoe_server *s);
void hmoe_server_free(struct hmoe_server *s);

#endif
