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

void srv_emit(struct srv_job *j, const char *s, size_t n, bool reasoning) {
    srv_buf_add(reasoning ? &j->reasoning : &j->content, s, n);
    if (!j->stream) return;
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
    } else {
        choice = json_pack("{s:i, s:o, s:n, s:n}", "index", 0, "text", text, "logprobs", "finish_reason");
    }
    json_object_set_new(c, "choices", json_pack("[o]", choice));
    sse_add(j, c);
}

static const char *finish_reason(const struct srv_job *j) {
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
        json_t *msg = json_pack("{s:s, s:o}", "role", "assistant", "content", text_of(&j->content));
        if (j->reasoning.n) json_object_set_new(msg, "reasoning_content", text_of(&j->reasoning));
        o = json_pack("{s:s, s:s, s:I, s:s, s:s, s:[{s:i, s:o, s:n, s:s}], s:o, s:o}", "id", j->id, "object",
                      "chat.completion", "created", j->created, "model", model_name(j), "system_fingerprint", "hmoe",
                      "choices", "index", 0, "message", msg, "logprobs", "finish_reason", finish_reason(j), "usage",
                      usage_json(j), "timings", timings_json(j));
    } else {
        o = json_pack("{s:s, s:s, s:I, s:s, s:s, s:[{s:o, s:i, s:n, s:s}], s:o, s:o}", "id", j->id, "object",
                      "text_completion", "created", j->created, "model", model_name(j), "system_fingerprint", "hmoe",
                      "choices", "text", text_of(&j->content), "index", 0, "logprobs", "finish_reason", finish_reason(j),
                      "usage", usage_json(j), "timings", timings_json(j));
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
    if (status >= 500) e.type = status == 503 ? "unavailable_error" : "server_error";
    json_t *o = srv_error_json(&e);
    char *txt = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    const char *body = txt ? txt : "{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\",\"param\":null,\"code\":500}}";
    if (j->stream) {
        /* headers are gone: the error is the last event of the stream (llama-server does the same) */
        srv_buf_add(&j->out, "data: ", 6);
        srv_buf_add(&j->out, body, strlen(body));
        srv_buf_add(&j->out, "\n\n", 2);
    } else {
        j->body.n = 0;
        srv_buf_add(&j->body, body, strlen(body));
        j->http_status = status;
    }
    free(txt);
}
