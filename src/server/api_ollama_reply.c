/* api_ollama_reply.c — answers in Ollama's shapes: NDJSON streaming (one JSON object per line,
 * "done": false chunks carrying message.content / message.thinking / message.tool_calls for
 * /api/chat, response / thinking for /api/generate), then the final "done": true object with
 * done_reason and the statistics in nanoseconds (total_duration, load_duration — here the time
 * the request waited before its prompt was evaluated —, prompt_eval_count / _duration,
 * eval_count / _duration). Without streaming the final object carries the whole answer.
 * Tool-call arguments are JSON objects (Ollama's form), not OpenAI's JSON strings.
 * Every function runs with job->mu held, as the OpenAI writers in api_response.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/server_impl.h"

static void ndjson_add(struct srv_buf *b, json_t *obj) {
    char *txt = obj ? json_dumps(obj, JSON_COMPACT) : NULL;
    json_decref(obj);
    if (!txt) {
        b->oom = true;
        return;
    }
    srv_buf_add(b, txt, strlen(txt));
    srv_buf_add(b, "\n", 1);
    free(txt);
}

static json_t *chunk_base(const struct srv_job *j) {
    char at[48];
    srv_ollama_time(at, sizeof at);
    return json_pack("{s:s, s:s}", "model", j->srv->model_name, "created_at", at);
}

/* arguments JSON text -> an object (text that is not an object becomes {}, which Ollama's
 * clients can decode; the chat parser only returns calls whose arguments parsed). */
static json_t *args_object(const char *txt) {
    json_t *a = json_loads(txt ? txt : "", JSON_DECODE_ANY, NULL);
    if (json_is_object(a)) return a;
    json_decref(a);
    return json_object();
}

static json_t *calls_json(const struct hmoe_toolcall *calls, size_t n, size_t first) {
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(a, json_pack("{s:s, s:{s:i, s:o, s:o}}", "id", calls[i].id, "function", "index",
                                           (int)(first + i), "name", srv_json_text(calls[i].name, strlen(calls[i].name)),
                                           "arguments", args_object(calls[i].arguments)));
    return a;
}

void srv_ollama_piece(struct srv_job *j, const char *s, size_t n, bool reasoning) {
    if (!j->stream) return;
    json_t *c = chunk_base(j), *text = srv_json_text(s, n);
    if (j->kind == SRV_KIND_OLLAMA_CHAT) {
        json_t *msg = json_pack("{s:s}", "role", "assistant");
        json_object_set_new(msg, "content", reasoning ? json_string("") : json_incref(text));
        if (reasoning) json_object_set(msg, "thinking", text);
        json_object_set_new(c, "message", msg);
    } else {
        json_object_set_new(c, "response", reasoning ? json_string("") : json_incref(text));
        if (reasoning) json_object_set(c, "thinking", text);
    }
    json_decref(text);
    json_object_set_new(c, "done", json_false());
    ndjson_add(&j->out, c);
}

void srv_ollama_calls(struct srv_job *j, const struct hmoe_toolcall *calls, size_t n) {
    if (!j->stream || j->kind != SRV_KIND_OLLAMA_CHAT) return;
    json_t *c = chunk_base(j);
    json_object_set_new(c, "message", json_pack("{s:s, s:s, s:o}", "role", "assistant", "content", "", "tool_calls",
                                                calls_json(calls, n, j->n_calls - n)));
    json_object_set_new(c, "done", json_false());
    ndjson_add(&j->out, c);
}

static json_int_t ns(double ms) { return (json_int_t)(ms * 1e6); }

void srv_ollama_complete(struct srv_job *j) {
    const double total_ms = (hmoe_time_s() - j->t_arrive) * 1e3;
    const double load_ms = HMOE_MAX(0.0, total_ms - j->prompt_ms - j->gen_ms);
    json_t *o = chunk_base(j);
    const bool chat = j->kind == SRV_KIND_OLLAMA_CHAT;
    struct hmoe_toolcalls tc = {0};
    if (!j->stream) {
        struct hmoe_err err = {0};
        if (!j->tcs || hmoe_toolcall_stream_result(j->tcs, &tc, &err) != HMOE_OK) {
            memset(&tc, 0, sizeof tc);
            tc.content = strndup(j->content.s ? j->content.s : "", j->content.n);
            tc.reasoning = strndup(j->reasoning.s ? j->reasoning.s : "", j->reasoning.n);
        }
        j->n_calls = tc.n_calls;
    }
    const char *content = tc.content ? tc.content : "", *reasoning = tc.reasoning ? tc.reasoning : "";
    if (chat) {
        json_t *msg = json_pack("{s:s, s:o}", "role", "assistant", "content", srv_json_text(content, strlen(content)));
        if (*reasoning) json_object_set_new(msg, "thinking", srv_json_text(reasoning, strlen(reasoning)));
        if (tc.n_calls) json_object_set_new(msg, "tool_calls", calls_json(tc.calls, tc.n_calls, 0));
        json_object_set_new(o, "message", msg);
    } else {
        json_object_set_new(o, "response", srv_json_text(content, strlen(content)));
        if (*reasoning) json_object_set_new(o, "thinking", srv_json_text(reasoning, strlen(reasoning)));
    }
    hmoe_toolcalls_free(&tc);
    json_t *stats = json_pack("{s:b, s:s, s:I, s:I, s:i, s:I, s:i, s:I}", "done", 1, "done_reason",
                              j->finish == SRV_FINISH_LENGTH ? "length" : "stop", "total_duration", ns(total_ms),
                              "load_duration", ns(load_ms), "prompt_eval_count", j->n_prompt_eval,
                              "prompt_eval_duration", ns(j->prompt_ms), "eval_count", j->n_gen, "eval_duration",
                              ns(j->gen_ms));
    json_object_update(o, stats);
    json_decref(stats);
    if (j->stream) {
        ndjson_add(&j->out, o);
        return;
    }
    j->body.n = 0;
    ndjson_add(&j->body, o);
    if (j->body.oom) srv_job_fail(j, 500, "out of memory writing the response");
    else j->http_status = 200;
}

json_t *srv_ollama_load_reply(struct hmoe_server *s, enum srv_kind kind, json_t *req) {
    json_t *ka = json_object_get(req, "keep_alive");
    const bool unload = (json_is_number(ka) && json_number_value(ka) == 0) ||
                        (json_is_string(ka) && (strcmp(json_string_value(ka), "0") == 0 ||
                                                strcmp(json_string_value(ka), "0s") == 0));
    char at[48];
    srv_ollama_time(at, sizeof at);
    json_t *o = json_pack("{s:s, s:s}", "model", s->model_name, "created_at", at);
    if (kind == SRV_KIND_OLLAMA_CHAT) json_object_set_new(o, "message", json_pack("{s:s, s:s}", "role", "assistant", "content", ""));
    else json_object_set_new(o, "response", json_string(""));
    /* the model stays loaded either way: "unload" only answers what was asked */
    json_object_set_new(o, "done", json_true());
    json_object_set_new(o, "done_reason", json_string(unload ? "unload" : "load"));
    return o;
}
