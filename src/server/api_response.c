/* api_response.c — the answer in the shapes clients parse: OpenAI chat.completion and
 * text_completion objects (whole, or as SSE chunks ending "data: [DONE]"), llama-server's
 * /completion object, usage with prompt_tokens_details.cached_tokens, llama-server's
 * `timings`, and OpenAI error bodies {"error": {"message", "type", "param", "code"}}.
 * Every function here runs with job->mu held (the engine calls them, the HTTP side reads
 * job->out and job->body).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/server_impl.h"

json_t *srv_error_json(const struct srv_error *e) {
    if (e->ollama) return json_pack("{s:s}", "error", e->msg);
    return json_pack("{s:{s:s, s:s, s:o, s:i}}", "error", "message", e->msg, "type", e->type ? e->type : "invalid_request_error",
                     "param", e->param[0] ? json_string(e->param) : json_null(), "code", e->status);
}

/* Append one SSE event "data: JSON\n\n" (steals `obj`). */
static void sse_add(struct srv_job *j, json_t *obj) {
    char *txt = obj ? json_dumps(obj, JSON_COMPACT) : NULL;
    json_decref(obj);
    if (!txt) {
        j->out.oom = true;
        return;
    }
    srv_buf_add(&j->out, "data: ", 6);
    srv_buf_add(&j->out, txt, strlen(txt));
    srv_buf_add(&j->out, "\n\n", 2);
    free(txt);
}

static const char *model_name(const struct srv_job *j) { return j->srv->model_name; }

static json_t *chunk_base(struct srv_job *j) {
    const bool chat = j->kind == SRV_KIND_CHAT;
    return json_pack("{s:s, s:s, s:I, s:s, s:s}", "id", j->id, "object", chat ? "chat.completion.chunk" : "text_completion",
                     "created", j->created, "model", model_name(j), "system_fingerprint", "hmoe");
}

/* The completions API's logprobs of token entries (chat shape, grammar_sample.c): tokens,
 * token_logprobs, top_logprobs (an object token -> logprob each) and text_offset, the byte offset of
 * each token in the generated text, counted on from *offset. */
static json_t *completions_logprobs(json_t *entries, size_t *offset) {
    json_t *tokens = json_array(), *lps = json_array(), *tops = json_array(), *offs = json_array(), *e;
    size_t i;
    json_array_foreach(entries, i, e) {
        json_array_append(tokens, json_object_get(e, "token"));
        json_array_append(lps, json_object_get(e, "logprob"));
        json_t *top = json_object(), *alt;
        size_t k;
        json_array_foreach(json_object_get(e, "top_logprobs"), k, alt)
            json_object_set(top, json_string_value(json_object_get(alt, "token")), json_object_get(alt, "logprob"));
        json_array_append_new(tops, top);
        json_array_append_new(offs, json_integer((json_int_t)*offset));
        *offset += json_array_size(json_object_get(e, "bytes"));
    }
    return json_pack("{s:o, s:o, s:o, s:o}", "tokens", tokens, "token_logprobs", lps, "top_logprobs", tops,
                     "text_offset", offs);
}

/* One content or reasoning delta. */
static void emit_piece(struct srv_job *j, const char *s, size_t n, bool reasoning) {
    if (!n) return;
    srv_buf_add(reasoning ? &j->reasoning : &j->content, s, n);
    if (!j->stream) return;
    if (srv_kind_ollama(j->kind)) {
        srv_ollama_piece(j, s, n, reasoning);
        return;
    }
    json_t *text = srv_json_text(s, n);
    if (j->kind == SRV_KIND_NATIVE) {
        sse_add(j, json_pack("{s:o, s:b, s:i}", "content", text, "stop", 0, "id_slot", 0));
        return;
    }
    json_t *c = chunk_base(j), *choice;
    if (j->kind == SRV_KIND_CHAT) {
        json_t *delta = json_object();
        if (!j->sent_role) json_object_set_new(delta, "role", json_string("assistant"));
        j->sent_role = true;
        json_object_set_new(delta, reasoning ? "reasoning_content" : "content", text);
        choice = json_pack("{s:i, s:o, s:n, s:n}", "index", 0, "delta", delta, "logprobs", "finish_reason");
        if (!reasoning && j->lp_pending && json_array_size(j->lp_pending)) { /* the tokens up to this text */
            json_object_set_new(choice, "logprobs", json_pack("{s:o}", "content", j->lp_pending));
            j->lp_pending = NULL;
        }
    } else {
        choice = json_pack("{s:i, s:o, s:n, s:n}", "index", 0, "text", text, "logprobs", "finish_reason");
        if (j->lp_pending && json_array_size(j->lp_pending)) { /* the tokens up to this text */
            json_object_set_new(choice, "logprobs", completions_logprobs(j->lp_pending, &j->lp_offset));
            json_decref(j->lp_pending);
            j->lp_pending = NULL;
        }
    }
    json_object_set_new(c, "choices", json_pack("[o]", choice));
    sse_add(j, c);
}

/* OpenAI's tool-call objects of a whole message. */
static json_t *calls_json(const struct hmoe_toolcall *calls, size_t n) {
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(a, json_pack("{s:s, s:s, s:{s:o, s:o}}", "id", calls[i].id, "type", "function", "function",
                                           "name", srv_json_text(calls[i].name, strlen(calls[i].name)), "arguments",
                                           srv_json_text(calls[i].arguments, strlen(calls[i].arguments))));
    return a;
}

/* One chunk whose delta is one piece of a call being written: the first carries the call's id,
 * type and name (and its arguments so far, often ""), later ones more of its arguments text, as
 * OpenAI streams a tool call. */
static void emit_call_piece(struct srv_job *j, const struct hmoe_toolcall_piece *p) {
    json_t *fn = json_object(), *tc = json_pack("{s:I}", "index", (json_int_t)p->index);
    if (p->id) {
        json_object_set_new(tc, "id", json_string(p->id));
        json_object_set_new(tc, "type", json_string("function"));
        json_object_set_new(fn, "name", srv_json_text(p->name, strlen(p->name)));
    }
    json_object_set_new(fn, "arguments", srv_json_text(p->args, p->args_len));
    json_object_set_new(tc, "function", fn);
    json_t *delta = json_object();
    if (!j->sent_role) json_object_set_new(delta, "role", json_string("assistant"));
    j->sent_role = true;
    json_object_set_new(delta, "tool_calls", json_pack("[o]", tc));
    json_t *c = chunk_base(j);
    json_object_set_new(c, "choices", json_pack("[{s:i, s:o, s:n, s:n}]", "index", 0, "delta", delta, "logprobs",
                                                "finish_reason"));
    sse_add(j, c);
}

static void emit_calls(struct srv_job *j, const struct hmoe_toolcall_delta *d) {
    j->n_calls += d->n_calls;
    if (!j->stream) return;
    if (srv_kind_ollama(j->kind)) { /* Ollama sends each call whole once it has closed */
        if (d->n_calls) srv_ollama_calls(j, d->calls, d->n_calls);
        return;
    }
    for (size_t i = 0; i < d->n_pieces; i++) emit_call_piece(j, &d->pieces[i]);
}

static void emit_delta(struct srv_job *j, const struct hmoe_toolcall_delta *d) {
    emit_piece(j, d->reasoning, d->reasoning_len, true);
    emit_piece(j, d->content, d->content_len, false);
    emit_calls(j, d);
}

void srv_emit_text(struct srv_job *j, const char *s, size_t n) {
    if (!j->tcs) {
        emit_piece(j, s, n, false);
        return;
    }
    struct hmoe_toolcall_delta d;
    struct hmoe_err err = {0};
    if (hmoe_toolcall_stream_feed(j->tcs, s, n, &d, &err) == HMOE_OK) emit_delta(j, &d);
    else j->out.oom = true;
}

void srv_emit_end(struct srv_job *j) {
    if (!j->tcs) return;
    if (j->forced_suffix) srv_emit_text(j, j->forced_suffix, strlen(j->forced_suffix));
    struct hmoe_toolcall_delta d;
    struct hmoe_err err = {0};
    if (hmoe_toolcall_stream_finish(j->tcs, &d, &err) == HMOE_OK) emit_delta(j, &d);
    else j->out.oom = true;
}

static const char *finish_reason(const struct srv_job *j) {
    if (j->n_calls) return "tool_calls";
    return j->finish == SRV_FINISH_LENGTH ? "length" : "stop";
}

static json_t *timings_json(const struct srv_job *j) {
    const double pps = j->prompt_ms > 0 ? j->n_prompt_eval * 1e3 / j->prompt_ms : 0;
    const double gps = j->gen_ms > 0 ? j->n_gen * 1e3 / j->gen_ms : 0;
    return json_pack("{s:i, s:i, s:f, s:f, s:f, s:i, s:f, s:f, s:f}", "cache_n", j->n_cached, "prompt_n",
                     j->n_prompt_eval, "prompt_ms", j->prompt_ms, "prompt_per_token_ms",
                     j->n_prompt_eval ? j->prompt_ms / j->n_prompt_eval : 0.0, "prompt_per_second", pps, "predicted_n",
                     j->n_gen, "predicted_ms", j->gen_ms, "predicted_per_token_ms",
                     j->n_gen ? j->gen_ms / j->n_gen : 0.0, "predicted_per_second", gps);
}

static json_t *usage_json(const struct srv_job *j) {
    return json_pack("{s:i, s:i, s:i, s:{s:i}}", "completion_tokens", j->n_gen, "prompt_tokens", j->n_ids,
                     "total_tokens", j->n_ids + j->n_gen, "prompt_tokens_details", "cached_tokens", j->n_cached);
}

static json_t *text_of(const struct srv_buf *b) { return srv_json_text(b->s ? b->s : "", b->n); }

static json_t *native_json(struct srv_job *j, bool stream_end) {
    const char *stop_type = j->finish == SRV_FINISH_STOP_WORD ? "word" : j->finish == SRV_FINISH_STOP_EOG ? "eos" : "limit";
    json_t *o = json_pack("{s:o, s:i, s:b, s:s, s:i, s:i, s:i, s:b, s:s, s:s, s:o}", "content",
                          stream_end ? json_string("") : text_of(&j->content), "id_slot", 0, "stop", 1, "model",
                          model_name(j), "tokens_predicted", j->n_gen, "tokens_evaluated", j->n_ids, "tokens_cached",
                          j->n_cached, "truncated", 0, "stop_type", stop_type, "stopping_word", j->stopping_word,
                          "timings", timings_json(j));
    if (!stream_end && j->prompt_text) json_object_set_new(o, "prompt", srv_json_text(j->prompt_text, strlen(j->prompt_text)));
    return o;
}

void srv_job_complete(struct srv_job *j) {
    if (srv_kind_ollama(j->kind)) {
        srv_ollama_complete(j);
        return;
    }
    if (j->stream) {
        if (j->kind == SRV_KIND_NATIVE) {
            sse_add(j, native_json(j, true));
            return;
        }
        json_t *c = chunk_base(j), *choice;
        if (j->kind == SRV_KIND_CHAT)
            choice = json_pack("{s:i, s:{}, s:n, s:s}", "index", 0, "delta", "logprobs", "finish_reason", finish_reason(j));
        else
            choice = json_pack("{s:i, s:s, s:n, s:s}", "index", 0, "text", "", "logprobs", "finish_reason", finish_reason(j));
        json_object_set_new(c, "choices", json_pack("[o]", choice));
        json_object_set_new(c, "timings", timings_json(j));
        sse_add(j, c);
        if (j->include_usage) {
            c = chunk_base(j);
            json_object_set_new(c, "choices", json_array());
            json_object_set_new(c, "usage", usage_json(j));
            sse_add(j, c);
        }
        srv_buf_add(&j->out, "data: [DONE]\n\n", 14);
        return;
    }
    json_t *o;
    if (j->kind == SRV_KIND_NATIVE) {
        o = native_json(j, false);
    } else if (j->kind == SRV_KIND_CHAT) {
        /* the parser's final message: its trimming of whitespace near calls is authoritative */
        struct hmoe_toolcalls tc = {0};
        struct hmoe_err err = {0};
        if (!j->tcs || hmoe_toolcall_stream_result(j->tcs, &tc, &err) != HMOE_OK) {
            memset(&tc, 0, sizeof tc);
            tc.content = strndup(j->content.s ? j->content.s : "", j->content.n);
            tc.reasoning = strndup(j->reasoning.s ? j->reasoning.s : "", j->reasoning.n);
        }
        const char *content = tc.content ? tc.content : "", *reasoning = tc.reasoning ? tc.reasoning : "";
        json_t *lp = j->lp_all ? json_pack("{s:O}", "content", j->lp_all) : json_null();
        json_t *msg = json_pack("{s:s, s:o}", "role", "assistant", "content",
                                tc.n_calls && !*content ? json_null() : srv_json_text(content, strlen(content)));
        if (*reasoning) json_object_set_new(msg, "reasoning_content", srv_json_text(reasoning, strlen(reasoning)));
        if (tc.n_calls) json_object_set_new(msg, "tool_calls", calls_json(tc.calls, tc.n_calls));
        j->n_calls = tc.n_calls;
        hmoe_toolcalls_free(&tc);
        o = json_pack("{s:s, s:s, s:I, s:s, s:s, s:[{s:i, s:o, s:o, s:s}], s:o, s:o}", "id", j->id, "object",
                      "chat.completion", "created", j->created, "model", model_name(j), "system_fingerprint", "hmoe",
                      "choices", "index", 0, "message", msg, "logprobs", lp, "finish_reason", finish_reason(j), "usage",
                      usage_json(j), "timings", timings_json(j));
    } else {
        size_t off = 0;
        json_t *lp = j->lp_all ? completions_logprobs(j->lp_all, &off) : json_null();
        o = json_pack("{s:s, s:s, s:I, s:s, s:s, s:[{s:o, s:i, s:o, s:s}], s:o, s:o}", "id", j->id, "object",
                      "text_completion", "created", j->created, "model", model_name(j), "system_fingerprint", "hmoe",
                      "choices", "text", text_of(&j->content), "index", 0, "logprobs", lp, "finish_reason",
                      finish_reason(j), "usage", usage_json(j), "timings", timings_json(j));
    }
    char *txt = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    j->body.n = 0;
    if (!txt) {
        srv_job_fail(j, 500, "out of memory writing the response");
        return;
    }
    srv_buf_add(&j->body, txt, strlen(txt));
    free(txt);
    j->http_status = 200;
}

void srv_job_fail(struct srv_job *j, int status, const char *msg) {
    struct srv_error e = {0};
    srv_error_set(&e, status, NULL, "%s", msg);
    e.ollama = srv_kind_ollama(j->kind);
    if (status >= 500) e.type = status == 503 ? "unavailable_error" : "server_error";
    json_t *o = srv_error_json(&e);
    char *txt = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    const char *body = txt ? txt : "{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\",\"param\":null,\"code\":500}}";
    if (j->stream) {
        /* headers are gone: the error is the last event of the stream (llama-server and Ollama do the same) */
        if (!e.ollama) srv_buf_add(&j->out, "data: ", 6);
        srv_buf_add(&j->out, body, strlen(body));
        srv_buf_add(&j->out, e.ollama ? "\n" : "\n\n", e.ollama ? 1 : 2);
    } else {
        j->body.n = 0;
        srv_buf_add(&j->body, body, strlen(body));
        j->http_status = status;
    }
    free(txt);
}
