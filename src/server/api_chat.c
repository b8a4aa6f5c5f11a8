/* api_chat.c — an OpenAI `messages` array (roles system / developer / user / assistant /
 * tool; content a string, null, or an array of {"type": "text"} parts) plus `tools` and
 * `tool_choice`, checked and rendered with the model's chat template (src/text). developer
 * is rendered as system, as llama-server does; text parts are joined with "\n".
 * Tool definitions and non-string tool-call arguments go to the template in the HF tojson
 * form (", " and ": "), through the same writer `hmoe template` uses. The answer's parser
 * (reasoning, and tool calls in the template's format) is set up here from the same tools.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hmoe/json.h"
#include "server/server_impl.h"

/* Strings the rendered messages point at, freed together. */
struct owned {
    char **v;
    size_t n, cap;
};
static char *keep(struct owned *o, char *s) {
    if (!s) return NULL;
    if (o->n == o->cap) {
        const size_t cap = o->cap ? o->cap * 2 : 16;
        char **v = realloc(o->v, cap * sizeof *v);
        if (!v) {
            free(s);
            return NULL;
        }
        o->v = v;
        o->cap = cap;
    }
    return o->v[o->n++] = s;
}
static void owned_free(struct owned *o) {
    for (size_t i = 0; i < o->n; i++) free(o->v[i]);
    free(o->v);
}

/* jansson value -> HF tojson text (via hmoe's JSON DOM, which keeps numbers as written). */
static char *hf_tojson(json_t *v) {
    char *txt = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    if (!txt) return NULL;
    struct hmoe_err err = {0};
    struct hmoe_json *dom = hmoe_json_parse(txt, strlen(txt), &err);
    free(txt);
    if (!dom) return NULL;
    char *out = hmoe_json_to_hf_string(dom);
    hmoe_json_free(dom);
    return out;
}

static bool nul_free(json_t *s) { return strlen(json_string_value(s)) == json_string_length(s); }

/* content: string, null (-> ""), or text parts joined by "\n". */
static const char *read_content(json_t *m, size_t i, struct owned *o, struct srv_error *e) {
    json_t *c = json_object_get(m, "content");
    char param[64];
    snprintf(param, sizeof param, "messages[%zu].content", i);
    if (!c || json_is_null(c)) return "";
    if (json_is_string(c)) {
        if (!nul_free(c)) {
            srv_error_set(e, 400, param, "message %zu: content contains a NUL character", i);
            return NULL;
        }
        return json_string_value(c);
    }
    if (!json_is_array(c)) {
        srv_error_set(e, 400, param, "message %zu: content must be a string or an array of text parts", i);
        return NULL;
    }
    struct srv_buf b = {0};
    for (size_t k = 0; k < json_array_size(c); k++) {
        json_t *part = json_array_get(c, k), *type = json_object_get(part, "type"), *text = json_object_get(part, "text");
        if (!json_is_object(part) || !json_is_string(type) || strcmp(json_string_value(type), "text") != 0 ||
            !json_is_string(text) || !nul_free(text)) {
            srv_buf_free(&b);
            srv_error_set(e, 400, param, "message %zu: content part %zu must be {\"type\": \"text\", \"text\": \"...\"} "
                          "(this server reads text only)", i, k);
            return NULL;
        }
        if (k) srv_buf_add(&b, "\n", 1);
        srv_buf_add(&b, json_string_value(text), json_string_length(text));
    }
    if (b.oom) {
        srv_buf_free(&b);
        srv_error_set(e, 500, NULL, "out of memory");
        return NULL;
    }
    return keep(o, b.s ? b.s : strdup(""));
}

static bool read_tool_calls(json_t *m, size_t i, struct hmoe_chat_msg *out, struct hmoe_chat_tool_call *calls,
                            size_t *n_calls, struct owned *o, struct srv_error *e) {
    json_t *tc = json_object_get(m, "tool_calls");
    char param[64];
    snprintf(param, sizeof param, "messages[%zu].tool_calls", i);
    if (!tc || json_is_null(tc)) return true;
    if (!json_is_array(tc)) {
        srv_error_set(e, 400, param, "message %zu: tool_calls must be an array", i);
        return false;
    }
    out->tool_calls = calls + *n_calls;
    for (size_t k = 0; k < json_array_size(tc); k++) {
        json_t *call = json_array_get(tc, k), *fn = json_object_get(call, "function");
        json_t *name = json_object_get(fn, "name"), *args = json_object_get(fn, "arguments");
        if (!json_is_object(fn) || !json_is_string(name) || !nul_free(name) || !args) {
            srv_error_set(e, 400, param, "message %zu: tool call %zu needs {\"function\": {\"name\": \"...\", "
                          "\"arguments\": ...}}", i, k);
            return false;
        }
        struct hmoe_chat_tool_call *d = &calls[(*n_calls)++];
        d->name = json_string_value(name);
        if (json_is_string(args) && nul_free(args)) d->arguments = json_string_value(args);
        else if (!(d->arguments = keep(o, hf_tojson(args)))) {
            srv_error_set(e, 500, NULL, "out of memory");
            return false;
        }
        out->n_tool_calls++;
    }
    return true;
}

char *srv_render_chat(struct hmoe_server *s, json_t *req, bool parse_reasoning, struct hmoe_toolcall_stream **tcs,
                      struct srv_error *e) {
    json_t *msgs = json_object_get(req, "messages"), *tools = json_object_get(req, "tools");
    json_t *choice = json_object_get(req, "tool_choice");
    if (!json_is_array(msgs) || json_array_size(msgs) == 0) {
        srv_error_set(e, 400, "messages", "'messages' must be a non-empty array of {\"role\", \"content\"} objects");
        return NULL;
    }
    if (tools && !json_is_null(tools) && !json_is_array(tools)) {
        srv_error_set(e, 400, "tools", "'tools' must be an array of tool definitions");
        return NULL;
    }
    bool use_tools = json_is_array(tools) && json_array_size(tools) > 0;
    if (choice && !json_is_null(choice)) {
        const char *c = json_is_string(choice) ? json_string_value(choice) : NULL;
        if (c && strcmp(c, "none") == 0) use_tools = false;
        else if (c ? strcmp(c, "auto") != 0 && strcmp(c, "required") != 0 : !json_is_object(choice)) {
            srv_error_set(e, 400, "tool_choice", "tool_choice must be \"auto\", \"none\", \"required\" or "
                          "{\"type\": \"function\", \"function\": {\"name\": \"...\"}}");
            return NULL;
        } /* required / a named function: forced after rendering (tool_choice.c) */
    }
    const size_t n = json_array_size(msgs);
    size_t n_calls = 0, n_tools = use_tools ? json_array_size(tools) : 0;
    for (size_t i = 0; i < n; i++) n_calls += json_array_size(json_object_get(json_array_get(msgs, i), "tool_calls"));
    struct hmoe_chat_msg *m = calloc(n, sizeof *m);
    struct hmoe_chat_tool_call *calls = calloc(n_calls ? n_calls : 1, sizeof *calls);
    const char **tool_txt = calloc(n_tools ? n_tools : 1, sizeof *tool_txt);
    struct owned o = {0};
    char *out = NULL;
    n_calls = 0;
    if (!m || !calls || !tool_txt) {
        srv_error_set(e, 500, NULL, "out of memory");
        goto done;
    }
    for (size_t k = 0; k < n_tools; k++) {
        json_t *t = json_array_get(tools, k), *fn = json_object_get(t, "function");
        if (!json_is_object(t) || !json_is_string(json_object_get(fn, "name"))) {
            srv_error_set(e, 400, "tools", "tool %zu must be {\"type\": \"function\", \"function\": {\"name\": ...}}", k);
            goto done;
        }
        if (!(tool_txt[k] = keep(&o, hf_tojson(t)))) {
            srv_error_set(e, 500, NULL, "out of memory");
            goto done;
        }
    }
    bool seen_call = false;
    for (size_t i = 0; i < n; i++) {
        json_t *msg = json_array_get(msgs, i), *role = json_object_get(msg, "role");
        char param[64];
        snprintf(param, sizeof param, "messages[%zu].role", i);
        if (!json_is_object(msg) || !json_is_string(role)) {
            srv_error_set(e, 400, param, "message %zu must be an object with a string 'role'", i);
            goto done;
        }
        const char *r = json_string_value(role);
        if (strcmp(r, "developer") == 0) r = "system";
        if (strcmp(r, "system") && strcmp(r, "user") && strcmp(r, "assistant") && strcmp(r, "tool")) {
            srv_error_set(e, 400, param, "message %zu: unknown role '%.40s' (expected system, developer, user, "
                          "assistant or tool)", i, r);
            goto done;
        }
        m[i].role = r;
        if (!(m[i].content = read_content(msg, i, &o, e))) goto done;
        json_t *rc = json_object_get(msg, "reasoning_content");
        if (json_is_string(rc) && nul_free(rc)) m[i].reasoning_content = json_string_value(rc);
        if (!read_tool_calls(msg, i, &m[i], calls, &n_calls, &o, e)) goto done;
        if (m[i].n_tool_calls && strcmp(r, "assistant") != 0) {
            srv_error_set(e, 400, param, "message %zu: only assistant messages carry tool_calls", i);
            goto done;
        }
        seen_call |= m[i].n_tool_calls > 0;
        if (strcmp(r, "tool") == 0 && !seen_call) {
            srv_error_set(e, 400, param, "message %zu: a tool message must answer an earlier assistant tool call", i);
            goto done;
        }
    }
    /* a JSON answer (response_format) or a forced tool call (tool_choice) starts at once: no
     * reasoning first, which the grammar would forbid */
    json_t *rf_type = json_object_get(json_object_get(req, "response_format"), "type");
    const bool forced = use_tools && choice && (json_is_object(choice) ||
                                               (json_is_string(choice) && strcmp(json_string_value(choice), "required") == 0));
    const bool constrained = forced || (json_is_string(rf_type) && strncmp(json_string_value(rf_type), "json_", 5) == 0);
    bool think = s->p.enable_thinking;
    json_t *kw = json_object_get(req, "chat_template_kwargs"), *effort = json_object_get(req, "reasoning_effort");
    if (kw && !json_is_null(kw)) {
        json_t *et = json_object_get(kw, "enable_thinking");
        if (!json_is_object(kw) || (et && !json_is_boolean(et))) {
            srv_error_set(e, 400, "chat_template_kwargs", "'chat_template_kwargs' must be an object; enable_thinking a "
                          "boolean");
            goto done;
        }
        if (et) think = json_is_true(et);
    }
    if (effort && !json_is_null(effort) && !json_is_string(effort)) {
        srv_error_set(e, 400, "reasoning_effort", "'reasoning_effort' must be a string (\"low\", \"medium\", \"high\")");
        goto done;
    }
    /* every chat_template_kwargs key goes to the template, and reasoning_effort as the variable of
     * that name (a kwargs member of the same name wins) */
    json_t *vars = json_is_object(kw) ? json_copy(kw) : json_object();
    if (json_is_string(effort) && !json_object_get(vars, "reasoning_effort"))
        json_object_set(vars, "reasoning_effort", effort);
    if (constrained) {
        think = false;
        if (json_object_get(vars, "enable_thinking")) json_object_set_new(vars, "enable_thinking", json_false());
    }
    struct hmoe_json *kwargs = NULL;
    if (json_object_size(vars)) {
        char *txt = json_dumps(vars, JSON_COMPACT);
        struct hmoe_err kerr = {0};
        kwargs = txt ? hmoe_json_parse(txt, strlen(txt), &kerr) : NULL;
        free(txt);
        if (!kwargs) {
            json_decref(vars);
            srv_error_set(e, 500, NULL, "out of memory");
            goto done;
        }
    }
    json_decref(vars);
    struct hmoe_chat_opts co = {.add_generation_prompt = true, .enable_thinking = think, .tools = tool_txt,
                                .n_tools = n_tools, .kwargs = kwargs};
    struct hmoe_err err = {0};
    const enum hmoe_status rst = hmoe_chat_fmt_render(s->fmt, m, n, &co, &out, &err);
    hmoe_json_free(kwargs);
    if (rst) {
        srv_error_set(e, 400, "messages", "%s", err.msg);
        out = NULL;
        goto done;
    }
    if (tcs) {
        /* tools off (none given, or tool_choice none): calls stay content, reasoning is still split */
        const enum hmoe_toolcall_format fmt =
            use_tools ? hmoe_toolcall_format_for(hmoe_chat_fmt_family(s->fmt), s->vocab->chat_template) : HMOE_TOOLCALL_NONE;
        struct hmoe_toolcall_opts to = {.tools = tool_txt, .n_tools = n_tools,
                                        .in_think = !constrained && hmoe_toolcall_prompt_in_think(out, strlen(out)),
                                        .think_in_content = !parse_reasoning};
        if (hmoe_toolcall_stream_new(fmt, &to, tcs, &err)) {
            srv_error_set(e, 500, NULL, "%s", err.msg);
            free(out);
            out = NULL;
        }
    }
done:
    owned_free(&o);
    free(m);
    free(calls);
    free(tool_txt);
    return out;
}
