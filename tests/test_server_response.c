/* test_server_response.c — the server's response writers (src/server/api_response.c) fed a
 * model answer directly, without HTTP or a model: a Qwen3 answer with a think block and a
 * tool call becomes OpenAI's message (reasoning_content, tool_calls with JSON-string
 * arguments, content null, finish_reason tool_calls), the same answer streamed in pieces
 * gives reasoning and tool-call deltas that add up to that message (the call's id, type and name
 * in its first delta, its arguments in pieces after), a completion keeps its
 * text as generated, usage and timings carry the job's counts, and a failed stream ends with
 * an error event; the same answer in Ollama's shapes (message.thinking, tool_calls with object
 * arguments, NDJSON lines, the done object in nanoseconds). Expected shapes are those of the OpenAI API reference and llama-server.
 */
#include "harness.h"
#include "server/server_impl.h"

static const char ANSWER[] = "<think>\nThe user wants the weather.\n</think>\n\n<tool_call>\n"
                             "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
static const char TOOL[] = "{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": "
                           "{\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}}}}}";

static struct srv_job *chat_job(struct hmoe_server *srv, bool stream) {
    struct srv_job *j = srv_job_new(srv, SRV_KIND_CHAT);
    snprintf(j->id, sizeof j->id, "chatcmpl-test");
    j->stream = stream;
    j->include_usage = true;
    j->n_ids = 20;
    j->n_cached = 15;
    j->n_prompt_eval = 5;
    j->n_gen = 30;
    j->prompt_ms = 10;
    j->gen_ms = 300;
    j->finish = SRV_FINISH_STOP_EOG;
    const char *tools[1] = {TOOL};
    struct hmoe_toolcall_opts to = {.tools = tools, .n_tools = 1, .id_seed = 7};
    struct hmoe_err err = {0};
    if (hmoe_toolcall_stream_new(HMOE_TOOLCALL_QWEN3_JSON, &to, &j->tcs, &err)) j->tcs = NULL;
    return j;
}

static void feed(struct srv_job *j, const char *text, size_t step) {
    const size_t n = strlen(text);
    for (size_t i = 0; i < n; i += step) srv_emit_text(j, text + i, HMOE_MIN(step, n - i));
    srv_emit_end(j);
    srv_job_complete(j);
}

static void test_chat_whole(struct hmoe_server *srv) {
    struct srv_job *j = chat_job(srv, false);
    feed(j, ANSWER, sizeof ANSWER);
    json_error_t je;
    json_t *o = json_loadb(j->body.s ? j->body.s : "", j->body.n, 0, &je);
    json_t *msg = json_object_get(json_array_get(json_object_get(o, "choices"), 0), "message");
    json_t *call = json_array_get(json_object_get(msg, "tool_calls"), 0), *fn = json_object_get(call, "function");
    const char *reasoning = json_string_value(json_object_get(msg, "reasoning_content"));
    const char *args = json_string_value(json_object_get(fn, "arguments"));
    const char *finish = json_string_value(json_object_get(json_array_get(json_object_get(o, "choices"), 0), "finish_reason"));
    t_check(o && j->http_status == 200, "chat response: a JSON object, status 200", "%s", j->body.s ? j->body.s : "");
    t_check(reasoning && strcmp(reasoning, "The user wants the weather.") == 0, "chat response: reasoning_content",
            "%s", j->body.s);
    t_check(json_is_null(json_object_get(msg, "content")), "chat response: content null beside tool calls", "%s",
            j->body.s);
    json_t *parsed = args ? json_loads(args, 0, &je) : NULL;
    t_check(json_array_size(json_object_get(msg, "tool_calls")) == 1 &&
                strcmp(json_string_value(json_object_get(fn, "name")), "get_weather") == 0 && parsed &&
                strcmp(json_string_value(json_object_get(parsed, "city")), "Paris") == 0 &&
                strcmp(json_string_value(json_object_get(call, "type")), "function") == 0 &&
                strncmp(json_string_value(json_object_get(call, "id")), "call_", 5) == 0,
            "chat response: one tool call {id call_*, type function, name, arguments as a JSON string}", "%s",
            j->body.s);
    t_check(finish && strcmp(finish, "tool_calls") == 0, "chat response: finish_reason tool_calls", "%s", j->body.s);
    json_t *u = json_object_get(o, "usage"), *t = json_object_get(o, "timings");
    t_check(json_integer_value(json_object_get(u, "prompt_tokens")) == 20 &&
                json_integer_value(json_object_get(u, "completion_tokens")) == 30 &&
                json_integer_value(json_object_get(u, "total_tokens")) == 50 &&
                json_integer_value(json_object_get(json_object_get(u, "prompt_tokens_details"), "cached_tokens")) == 15,
            "chat response: usage with prompt_tokens_details.cached_tokens", "%s", j->body.s);
    t_check(json_integer_value(json_object_get(t, "cache_n")) == 15 && json_integer_value(json_object_get(t, "prompt_n")) == 5 &&
                fabs(json_real_value(json_object_get(t, "predicted_per_second")) - 100.0) < 1e-9 &&
                fabs(json_real_value(json_object_get(t, "prompt_per_second")) - 500.0) < 1e-9,
            "chat response: timings (cache_n, prompt_n, tokens per second)", "%s", j->body.s);
    json_decref(parsed);
    json_decref(o);
    srv_job_unref(j);
}

/* The SSE events of a stream as JSON (the last one must be [DONE]). */
static json_t *sse_events(const struct srv_buf *out, bool *done) {
    json_t *a = json_array();
    *done = false;
    const char *p = out->s ? out->s : "";
    while ((p = strstr(p, "data: ")) != NULL) {
        p += 6;
        const char *end = strstr(p, "\n\n");
        if (!end) break;
        if ((size_t)(end - p) == 6 && memcmp(p, "[DONE]", 6) == 0) *done = end[2] == 0;
        else json_array_append_new(a, json_loadb(p, (size_t)(end - p), 0, NULL));
        p = end + 2;
    }
    return a;
}

static void test_chat_stream(struct hmoe_server *srv) {
    const size_t steps[] = {1, 3, 11};
    for (size_t k = 0; k < HMOE_ARRAY_LEN(steps); k++) {
        struct srv_job *j = chat_job(srv, true);
        feed(j, ANSWER, steps[k]);
        bool done;
        json_t *ev = sse_events(&j->out, &done);
        struct srv_buf reasoning = {0}, args = {0};
        int n_calls = 0, n_finish = 0, n_usage = 0, n_bad = 0;
        const char *name = "", *finish = "";
        for (size_t i = 0; i < json_array_size(ev); i++) {
            json_t *c = json_array_get(ev, i), *ch = json_array_get(json_object_get(c, "choices"), 0);
            if (!c || strcmp(json_string_value(json_object_get(c, "object")), "chat.completion.chunk") != 0) n_bad++;
            if (json_object_get(c, "usage")) n_usage++;
            if (!ch) continue;
            json_t *d = json_object_get(ch, "delta"), *r = json_object_get(d, "reasoning_content");
            if (json_is_string(r)) srv_buf_add(&reasoning, json_string_value(r), json_string_length(r));
            json_t *tc = json_array_get(json_object_get(d, "tool_calls"), 0);
            if (tc) {
                json_t *fn = json_object_get(tc, "function"), *a = json_object_get(fn, "arguments");
                /* only the first delta of the call names it */
                if (!n_calls++) {
                    name = json_string_value(json_object_get(fn, "name"));
                    if (!json_is_string(json_object_get(tc, "id")) || !json_is_string(json_object_get(tc, "type"))) n_bad++;
                } else if (json_object_get(fn, "name") || json_object_get(tc, "id")) {
                    n_bad++;
                }
                if (json_is_string(a)) srv_buf_add(&args, json_string_value(a), json_string_length(a));
                if (json_integer_value(json_object_get(tc, "index")) != 0) n_bad++;
            }
            if (json_is_string(json_object_get(d, "content")) && json_string_length(json_object_get(d, "content"))) n_bad++;
            if (json_is_string(json_object_get(ch, "finish_reason"))) {
                n_finish++;
                finish = json_string_value(json_object_get(ch, "finish_reason"));
            }
        }
        char label[128];
        snprintf(label, sizeof label, "chat stream in pieces of %zu bytes: reasoning and tool-call deltas, [DONE]",
                 steps[k]);
        srv_buf_add(&args, "", 1);
        t_check(done && n_bad == 0 && reasoning.s && strcmp(reasoning.s, "The user wants the weather.") == 0 &&
                    n_calls > 1 && name && strcmp(name, "get_weather") == 0 && strcmp(args.s, "{\"city\": \"Paris\"}") == 0 &&
                    n_finish == 1 && strcmp(finish, "tool_calls") == 0 && n_usage == 1,
                label, "done %d bad %d reasoning '%s' call deltas %d arguments '%s' finish %d '%s' usage %d: %s", done,
                n_bad, reasoning.s ? reasoning.s : "", n_calls, args.s, n_finish, finish, n_usage, j->out.s);
        srv_buf_free(&reasoning);
        srv_buf_free(&args);
        json_decref(ev);
        srv_job_unref(j);
    }
}

static void test_completion(struct hmoe_server *srv) {
    struct srv_job *j = srv_job_new(srv, SRV_KIND_COMPLETIONS);
    j->n_ids = 3;
    j->n_gen = 2;
    j->finish = SRV_FINISH_LENGTH;
    srv_emit_text(j, "  <think>kept ", 14);
    srv_emit_text(j, "\xFFtext", 5);
    srv_emit_end(j);
    srv_job_complete(j);
    json_t *o = json_loadb(j->body.s ? j->body.s : "", j->body.n, 0, NULL);
    json_t *ch = json_array_get(json_object_get(o, "choices"), 0);
    const char *text = json_string_value(json_object_get(ch, "text"));
    t_check(text && strcmp(text, "  <think>kept \xEF\xBF\xBDtext") == 0 &&
                strcmp(json_string_value(json_object_get(ch, "finish_reason")), "length") == 0 &&
                strcmp(json_string_value(json_object_get(o, "object")), "text_completion") == 0,
            "completion response: the text as generated (invalid bytes as U+FFFD), finish_reason length", "%s",
            j->body.s);
    json_decref(o);
    srv_job_unref(j);

    j = srv_job_new(srv, SRV_KIND_NATIVE);
    j->stream = true;
    srv_emit_text(j, "abc", 3);
    srv_job_fail(j, 500, "the model failed");
    bool done;
    json_t *ev = sse_events(&j->out, &done);
    json_t *last = json_array_get(ev, json_array_size(ev) - 1);
    t_check(json_array_size(ev) == 2 && !done &&
                strcmp(json_string_value(json_object_get(json_array_get(ev, 0), "content")), "abc") == 0 &&
                json_integer_value(json_object_get(json_object_get(last, "error"), "code")) == 500,
            "a stream that fails ends with an OpenAI error event", "%s", j->out.s);
    json_decref(ev);
    srv_job_unref(j);
}


/* Ollama's shapes: thinking, tool_calls with arguments as an object, the done object with
 * nanosecond statistics; streamed as NDJSON lines that add up to the same message. */
static void test_ollama(struct hmoe_server *srv, bool stream) {
    struct srv_job *j = chat_job(srv, stream);
    j->kind = SRV_KIND_OLLAMA_CHAT;
    j->t_arrive = hmoe_time_s() - 1.0; /* a second ago: total_duration >= 1e9 */
    feed(j, ANSWER, stream ? 5 : sizeof ANSWER);
    const struct srv_buf *b = stream ? &j->out : &j->body;
    const char *p = b->s ? b->s : "", *end = p + b->n;
    int lines = 0, bad_lines = 0, n_calls = 0, done_last = 0;
    struct srv_buf thinking = {0};
    json_t *last = NULL;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl) {
            bad_lines++;
            break;
        }
        json_t *o = json_loadb(p, (size_t)(nl - p), 0, NULL);
        lines++;
        if (!o || !json_is_string(json_object_get(o, "created_at")) ||
            strcmp(json_string_value(json_object_get(o, "model")) ? json_string_value(json_object_get(o, "model")) : "",
                   "test-model") != 0)
            bad_lines++;
        json_t *msg = json_object_get(o, "message"), *th = json_object_get(msg, "thinking");
        if (json_is_string(th)) srv_buf_add(&thinking, json_string_value(th), json_string_length(th));
        json_t *calls = json_object_get(msg, "tool_calls");
        for (size_t k = 0; k < json_array_size(calls); k++) {
            json_t *fn = json_object_get(json_array_get(calls, k), "function");
            json_t *city = json_object_get(json_object_get(fn, "arguments"), "city");
            if (strcmp(json_string_value(json_object_get(fn, "name")), "get_weather") == 0 && json_is_string(city) &&
                strcmp(json_string_value(city), "Paris") == 0 && json_integer_value(json_object_get(fn, "index")) == 0)
                n_calls++;
        }
        done_last = json_is_true(json_object_get(o, "done"));
        json_decref(last);
        last = o;
        p = nl + 1;
    }
    const char *name = stream ? "ollama stream: NDJSON lines, thinking and one call (arguments an object), done last"
                              : "ollama response: one object with thinking and one call (arguments an object)";
    t_check(lines >= (stream ? 3 : 1) && !bad_lines && n_calls == 1 && done_last && thinking.s &&
                strcmp(thinking.s, "The user wants the weather.") == 0 && (stream || lines == 1),
            name, "%d lines, %d bad, %d calls, thinking '%s': %.600s", lines, bad_lines, n_calls,
            thinking.s ? thinking.s : "", b->s ? b->s : "");
    const json_int_t total = json_integer_value(json_object_get(last, "total_duration"));
    t_check(strcmp(json_string_value(json_object_get(last, "done_reason")) ? json_string_value(json_object_get(last, "done_reason")) : "", "stop") == 0 &&
                json_integer_value(json_object_get(last, "eval_count")) == 30 &&
                json_integer_value(json_object_get(last, "prompt_eval_count")) == 5 &&
                json_integer_value(json_object_get(last, "eval_duration")) == 300000000 &&
                json_integer_value(json_object_get(last, "prompt_eval_duration")) == 10000000 && total >= 1000000000 &&
                llabs((long long)(json_integer_value(json_object_get(last, "load_duration")) - (total - 310000000))) <= 1,
            stream ? "ollama stream: done object in nanoseconds" : "ollama response: done object in nanoseconds",
            "%.600s", b->s ? b->s : "");
    json_decref(last);
    srv_buf_free(&thinking);
    srv_job_unref(j);
}

int main(void) {
    struct hmoe_server srv;
    memset(&srv, 0, sizeof srv);
    srv.model_name = (char *)"test-model";
    test_chat_whole(&srv);
    test_chat_stream(&srv);
    test_completion(&srv);
    test_ollama(&srv, false);
    test_ollama(&srv, true);
    return t_summary();
}
