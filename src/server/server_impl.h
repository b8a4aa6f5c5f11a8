/* server_impl.h — private to src/server: the server, a request (job) and the pieces that
 * pass one between the HTTP threads (http.c), the request readers and response writers
 * (api_*.c) and the engine thread (engine.c).
 *
 * Ownership: a job is reference counted (the HTTP side holds one reference until
 * libmicrohttpd reports the request completed, the engine one while it is queued or
 * running). Every field below "state" is guarded by job->mu.
 */
#ifndef HMOE_SERVER_IMPL_H
#define HMOE_SERVER_IMPL_H

#include <jansson.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>

#include "hmoe/server.h"

#define SRV_MAX_STOP 16        /* stop strings per request */
#define SRV_MAX_STOP_LEN 256   /* bytes per stop string */
#define SRV_JSON_MAX_NEST 32   /* containers nested in a constrained JSON answer (and schema levels) */
#define SRV_JSON_MAX_FRAMES (2 * SRV_JSON_MAX_NEST + 4)
#define SRV_JSON_MAX_WS 8      /* whitespace bytes in a row in a constrained JSON answer */

/* A growable byte buffer; `oom` set on the first failed allocation (appends become no-ops). */
struct srv_buf {
    char *s;
    size_t n, cap;
    bool oom;
};
void srv_buf_add(struct srv_buf *b, const char *p, size_t n);
void srv_buf_free(struct srv_buf *b);

enum srv_kind {
    SRV_KIND_CHAT,        /* POST /v1/chat/completions */
    SRV_KIND_COMPLETIONS, /* POST /v1/completions */
    SRV_KIND_NATIVE,      /* POST /completion (llama-server's own shape) */
    SRV_KIND_OLLAMA_CHAT, /* POST /api/chat */
    SRV_KIND_OLLAMA_GENERATE, /* POST /api/generate */
};
static inline bool srv_kind_ollama(enum srv_kind k) { return k == SRV_KIND_OLLAMA_CHAT || k == SRV_KIND_OLLAMA_GENERATE; }

enum srv_job_state { SRV_JOB_QUEUED, SRV_JOB_RUNNING, SRV_JOB_DONE };

/* Why generation ended (finish_reason / stop_type). */
enum srv_finish { SRV_FINISH_NONE, SRV_FINISH_STOP_EOG, SRV_FINISH_STOP_WORD, SRV_FINISH_LENGTH };

struct srv_gen_params {
    struct hmoe_sampler_params sp; /* repeat_penalty applied by the engine with the two below */
    float presence_penalty, frequency_penalty;
    int n_predict;                 /* -1: until the context is full */
    char *stop[SRV_MAX_STOP];
    int n_stop;
    bool ignore_eos;
    bool cache_prompt;
    struct srv_json_matcher *grammar; /* response_format or a forced tool call json_object / json_schema: constrains sampling */
    struct srv_call_matcher *call; /* a forced tool call in the harmony or XML format (grammar_call.c) */
    float *grammar_logits;         /* [n_vocab] scratch: the logits with the tokens the grammar refuses at -inf */
    int top_logprobs;              /* logprobs: alternatives per token (0..20), -1: logprobs off */
    bool logprobs_n;               /* asked as the completions API's integer `logprobs` (its answer shape) */
};

struct hmoe_server;

struct srv_job {
    pthread_mutex_t mu;
    int refs;
    struct hmoe_server *srv;
    enum srv_kind kind;
    bool stream, include_usage;
    char id[48];
    long long created;
    double t_arrive;               /* hmoe_time_s() when the request was read (Ollama's total_duration) */
    int32_t *ids;                  /* the prompt */
    int n_ids;
    char *prompt_text;             /* /completion echoes it; NULL elsewhere */
    struct srv_gen_params gp;
    struct hmoe_toolcall_stream *tcs; /* chat: reasoning and tool calls out of the text (src/text) */
    const char *forced_suffix;     /* a forced tool call: its closing tag, fed to the parser at the end */
    json_t *lp_all, *lp_pending;   /* logprobs: every token's entry; those not yet in a stream chunk */
    size_t lp_offset;              /* completions logprobs streamed: bytes of text their tokens spelled so far */
    /* state */
    enum srv_job_state state;
    bool cancelled;                /* the client went away, or the server stops */
    struct MHD_Connection *conn;
    int fd;                        /* the client's socket, peeked for a hang-up while generating */
    bool suspended, released;      /* connection suspended by us / request completed by MHD */
    struct srv_buf out;            /* stream: SSE bytes not yet handed to MHD */
    size_t out_sent;
    struct srv_buf content, reasoning; /* the whole answer (non-stream and final usage) */
    bool sent_role;
    size_t n_calls;                /* tool calls sent (stream) */
    int n_cached, n_prompt_eval, n_gen;
    double prompt_ms, gen_ms;
    enum srv_finish finish;
    char stopping_word[SRV_MAX_STOP_LEN + 1];
    int http_status;               /* non-stream: status of `body` */
    struct srv_buf body;           /* non-stream: the response */
    struct srv_job *next;          /* queue link */
};

struct srv_metrics {
    atomic_ullong prompt_tokens, prompt_us, gen_tokens, gen_us, n_decode;
    atomic_ullong requests_ok, requests_error, requests_cancelled, requests_rejected;
    atomic_int processing, deferred;
};

struct hmoe_server {
    struct hmoe_server_params p;
    char *host_copy, *alias_copy, *key_copy;
    struct MHD_Daemon *mhd;
    int port;
    atomic_bool ready, stopping;
    /* the model, set once by hmoe_server_set_model */
    const struct hmoe_model *model;
    struct hmoe_ctx *ctx;
    struct hmoe_spec *spec;          /* --spec mtp (one slot), or NULL */
    const struct hmoe_vocab *vocab;
    const struct hmoe_chat_fmt *fmt; /* the model's chat format: its Jinja template or a built-in one */
    char *model_path, *model_name;
    long long started;
    /* queue and engine */
    pthread_mutex_t qmu;
    pthread_cond_t qcv;
    struct srv_job *q_head, *q_tail;
    int q_len;
    pthread_t engine;
    bool engine_started;
    struct srv_slot *slots;        /* [n_slots] one per sequence of the context (engine.c) */
    int n_slots, rr;               /* rr: the slot that comes first in the next step */
    uint64_t slot_clock;           /* requests placed on slots so far */
    int prefill_chunk;             /* prompt tokens a slot runs per step */
    float *logits, *logits_pen;    /* [n_slots][n_vocab] of a step; [n_vocab] with the penalties applied */
    int *pen_count;                /* [n_vocab] scratch for the penalties */
    struct srv_metrics m;
    struct hmoe_ctx_stats stats;   /* the context's statistics after the last job (under qmu) */
    int n_kv_seen;                 /* tokens in the KV cache of the last finished request's slot (under qmu) */
};

/* --- jobs and the engine (engine.c) --- */
struct srv_job *srv_job_new(struct hmoe_server *s, enum srv_kind kind);
void srv_job_unref(struct srv_job *j);
/* Queue a job; false when the queue is full (the caller answers 503). */
bool srv_engine_submit(struct hmoe_server *s, struct srv_job *j);
enum hmoe_status srv_engine_start(struct hmoe_server *s, struct hmoe_err *err);
void srv_engine_stop(struct hmoe_server *s);
/* Wake the HTTP side of a job (caller holds j->mu). */
void srv_job_wake(struct srv_job *j);

/* --- the JSON grammar (grammar_json.c) and constrained sampling (grammar_sample.c) --- */
struct srv_error;
struct srv_json_matcher;
/* Compile a schema (json_schema subset: type, properties, required, enum, items,
 * additionalProperties, annotations), or NULL for json_object (any object). NULL and *e
 * (400 naming the keyword or field) when the schema is not supported. */
struct srv_json_matcher *srv_json_matcher_new(json_t *schema, struct srv_error *e);
void srv_json_matcher_free(struct srv_json_matcher *m);
/* Bytes at least still needed to finish the value after s[0..n) (0: complete), or -1 when s
 * cannot continue the answer; the matcher is unchanged. */
int srv_json_matcher_try(const struct srv_json_matcher *m, const char *s, size_t n);
/* Append s[0..n) to the answer; false (and no change) when the grammar refuses it. */
bool srv_json_matcher_feed(struct srv_json_matcher *m, const char *s, size_t n);
int srv_json_matcher_dist(const struct srv_json_matcher *m);
/* A forced call (harmony, or the XML form of Qwen3.5) to one of the functions in `tools` (only
 * `want` when not NULL); NULL and *e when one cannot be forced. */
struct srv_call_matcher;
struct srv_call_matcher *srv_call_matcher_new(const struct hmoe_vocab *v, enum hmoe_toolcall_format fmt, json_t *tools,
                                              const char *want, struct srv_error *e);
void srv_call_matcher_free(struct srv_call_matcher *m);
/* As srv_json_matcher_try / _feed / _dist, over the call's text. */
int srv_call_matcher_try(const struct srv_call_matcher *m, const char *s, size_t n);
bool srv_call_matcher_feed(struct srv_call_matcher *m, const char *s, size_t n);
int srv_call_matcher_dist(const struct srv_call_matcher *m);
/* The token the call must continue with (harmony's header tokens), or -1; take it with _take_forced. */
int32_t srv_call_matcher_forced(const struct srv_call_matcher *m);
void srv_call_matcher_take_forced(struct srv_call_matcher *m);
/* The end-of-generation token once the call is complete (-1: none in the vocabulary). */
int32_t srv_call_matcher_end(const struct srv_call_matcher *m);
/* What no choice is left in at the start (the name when one tool can be called, forced tokens
 * after it): appended to `out` as text and taken, so the prompt carries it. */
bool srv_call_matcher_lead(struct srv_call_matcher *m, const struct hmoe_vocab *v, struct srv_buf *out);
/* The response_format of a request (or Ollama's format, already translated) into gp->grammar;
 * false and *e on a bad or unsupported one. */
bool srv_grammar_from_request(struct hmoe_server *s, json_t *req, struct srv_gen_params *gp, struct srv_error *e);
void srv_grammar_free(struct srv_gen_params *gp);
/* The next token: the sampler's choice, or with a grammar the sampler's choice among the
 * tokens that keep the answer valid JSON finishable within `left` tokens (this one
 * included); an end-of-generation token once the value is complete; -1 when no token fits. */
struct srv_job;
int32_t srv_sample(struct hmoe_server *s, struct srv_job *j, struct hmoe_sampler *smp, const float *logits, int left);

/* --- text pipeline (textfilter.c) --- */
/* Index of the first complete match of a stop string in s[0..n) (its number in *which), or
 * n when none; *keep gets how many trailing bytes could still start one. */
size_t srv_stop_scan(const struct srv_gen_params *gp, const char *s, size_t n, int *which, size_t *keep);
/* A JSON string of s[0..n) with every byte that is not well-formed UTF-8 replaced by U+FFFD. */
json_t *srv_json_text(const char *s, size_t n);

/* --- request readers (api_request.c) --- */
/* A client error: HTTP status, OpenAI error type and the field at fault. */
struct srv_error {
    int status;
    const char *type;              /* "invalid_request_error", "authentication_error", ... */
    char param[64];
    char msg[512];
    bool ollama;                   /* an Ollama endpoint: the body is Ollama's {"error": "..."} */
};
void srv_error_set(struct srv_error *e, int status, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Parse a request body into a JSON object (errors: 400 with the position). */
json_t *srv_parse_body(const char *body, size_t len, struct srv_error *e);
/* Build the job of a generation request; NULL and *e on a bad request. */
struct srv_job *srv_request_job(struct hmoe_server *s, enum srv_kind kind, json_t *req, struct srv_error *e);
/* messages (+tools) rendered with the model's template: a malloc'd prompt, or NULL and *e. With
 * `tcs`, also the parser of the answer (tool-call format of the template when tools are on). */
char *srv_render_chat(struct hmoe_server *s, json_t *req, bool parse_reasoning, struct hmoe_toolcall_stream **tcs,
                      struct srv_error *e);

/* tool_choice "required" / a named function (tool_choice.c): the prompt ends inside the call syntax,
 * the grammar constrains the call; true when nothing is forced or all is set; false and *e. */
bool srv_tool_choice(struct hmoe_server *s, json_t *req, struct srv_job *j, char **prompt, struct srv_error *e);

/* --- response writers (api_response.c) --- */
json_t *srv_error_json(const struct srv_error *e);
/* Generated text (after the stop strings): through the chat parser when there is one, then out. */
void srv_emit_text(struct srv_job *j, const char *s, size_t n);
/* End of the text: what the chat parser held back. */
void srv_emit_end(struct srv_job *j);
void srv_job_complete(struct srv_job *j);  /* final chunks, or the whole body (caller holds j->mu) */
void srv_job_fail(struct srv_job *j, int status, const char *msg); /* caller holds j->mu */

/* --- libmicrohttpd callbacks (http.c) --- */
enum MHD_Result srv_http_handler(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                 const char *version, const char *upload, size_t *upload_size, void **con_cls);
void srv_http_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe);

/* --- the other endpoints (api_info.c): status and a JSON reply, or a text reply --- */
int srv_api_models(struct hmoe_server *s, json_t **out);
int srv_api_props(struct hmoe_server *s, json_t **out);
int srv_api_tokenize(struct hmoe_server *s, json_t *req, json_t **out, struct srv_error *e);
int srv_api_detokenize(struct hmoe_server *s, json_t *req, json_t **out, struct srv_error *e);
int srv_api_apply_template(struct hmoe_server *s, json_t *req, json_t **out, struct srv_error *e);
char *srv_api_metrics(struct hmoe_server *s);

/* --- Ollama's API (api_ollama.c: requests and the info endpoints; api_ollama_reply.c: answers) --- */
/* An /api/chat or /api/generate body as the OpenAI-shaped request srv_request_job reads, or
 * NULL and *e. *load_only: no messages / no prompt (Ollama's "load the model" request). */
json_t *srv_ollama_request(json_t *req, enum srv_kind kind, bool *load_only, struct srv_error *e);
/* The answer to a load-only request (done_reason "load", or "unload" for keep_alive 0). */
json_t *srv_ollama_load_reply(struct hmoe_server *s, enum srv_kind kind, json_t *req);
int srv_ollama_tags(struct hmoe_server *s, json_t **out);
int srv_ollama_ps(struct hmoe_server *s, json_t **out);
int srv_ollama_version(struct hmoe_server *s, json_t **out);
int srv_ollama_show(struct hmoe_server *s, json_t *req, json_t **out, struct srv_error *e);
/* RFC 3339 UTC time with nanoseconds, as Ollama's created_at. */
void srv_ollama_time(char *out, size_t size);
/* The answer writers (caller holds j->mu), called by api_response.c for Ollama jobs. */
void srv_ollama_piece(struct srv_job *j, const char *s, size_t n, bool reasoning);
void srv_ollama_calls(struct srv_job *j, const struct hmoe_toolcall *calls, size_t n);
void srv_ollama_complete(struct srv_job *j);

#endif
