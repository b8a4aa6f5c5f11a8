/* template_harmony.c — the gpt-oss "harmony" chat format (chat-templates.md §3), rendered the
 * way the model's Jinja template does under the trim_blocks / lstrip_blocks settings of HF
 * chat templates, byte for byte (fixtures/chat/gpt-oss-renders.jsonl):
 *   - a system message of its own: identity, knowledge cutoff, today's date, reasoning
 *     effort, the valid channels, and a pointer to the commentary channel when tools exist;
 *   - a developer message with "# Instructions" (a leading system/developer message) and the
 *     tools as a TypeScript "namespace functions", with the template's exact whitespace;
 *   - user turns, final-channel assistant answers (reasoning dropped from history), tool calls
 *     to=functions.NAME on the commentary channel ending in <|call|>, tool results addressed
 *     from functions.NAME to=assistant, and the "<|start|>assistant" generation prompt.
 * Refuses what the template refuses (raise_exception): channel tags inside content or
 * reasoning, content and reasoning both on a tool-call turn, a tool result without a call. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hmoe/json.h"
#include "text/strbuf_impl.h"
#include "text/text_impl.h"

/* A value as Jinja's string concatenation or | join prints it (strings raw). */
static void add_py(struct hmoe_strbuf *b, const struct hmoe_json *v) { hmoe_text_py_value(b, v); }

/* tojson of one JSON value (HF separators, non-ASCII kept). */
static void add_tojson(struct hmoe_strbuf *b, const struct hmoe_json *v) {
    char *s = hmoe_json_to_hf_string(v);
    if (!s) b->oom = true;
    else hmoe_strbuf_add(b, s);
    free(s);
}

/* tojson of a string of n bytes. */
static void add_tojson_str(struct hmoe_strbuf *b, const char *s, size_t n) {
    struct hmoe_json j = {.kind = HMOE_JSON_STRING, .str = (char *)s, .str_len = n};
    add_tojson(b, &j);
}

static bool truthy(const struct hmoe_json *v) {
    if (!v) return false;
    switch (v->kind) {
    case HMOE_JSON_NULL: return false;
    case HMOE_JSON_BOOL: return v->b;
    case HMOE_JSON_NUMBER: return v->num != 0;
    case HMOE_JSON_STRING: return v->str_len > 0;
    default: return v->n > 0;
    }
}

static bool str_eq(const struct hmoe_json *v, const char *s) {
    return v && v->kind == HMOE_JSON_STRING && strcmp(v->str, s) == 0;
}

/* `name in list` for a JSON array of strings (absent or not an array: false). */
static bool in_list(const struct hmoe_json *list, const char *name) {
    if (!list || list->kind != HMOE_JSON_ARRAY) return false;
    for (size_t i = 0; i < list->n; i++)
        if (str_eq(list->items[i], name)) return true;
    return false;
}

static size_t utf8_chars(const char *s, size_t n) {
    size_t c = 0;
    for (size_t i = 0; i < n; i++) c += ((unsigned char)s[i] & 0xC0) != 0x80;
    return c;
}

/* The template's render_typescript_type macro. Nested object properties get their type on
 * a new line indented by 16 spaces, and oneOf variants a 20-space gap before a default:
 * whitespace the template prints outside its trimmed tags. */
static void ts_type(struct hmoe_strbuf *b, const struct hmoe_json *spec, int depth) {
    const struct hmoe_json *type = hmoe_json_get(spec, "type"), *one_of = hmoe_json_get(spec, "oneOf");
    bool nullable = truthy(hmoe_json_get(spec, "nullable"));
    if (depth > 64) { /* a schema nested this deep is hostile input; the type is still valid TypeScript */
        hmoe_strbuf_add(b, "any");
        return;
    }
    if (str_eq(type, "array")) {
        const struct hmoe_json *items = hmoe_json_get(spec, "items");
        if (items) {
            const struct hmoe_json *it = hmoe_json_get(items, "type");
            if (str_eq(it, "string")) hmoe_strbuf_add(b, "string[]");
            else if (str_eq(it, "number") || str_eq(it, "integer")) hmoe_strbuf_add(b, "number[]");
            else if (str_eq(it, "boolean")) hmoe_strbuf_add(b, "boolean[]");
            else {
                struct hmoe_strbuf inner = {0};
                ts_type(&inner, items, depth + 1);
                const char *s = inner.s ? inner.s : "";
                if (strcmp(s, "object | object") == 0 || utf8_chars(s, inner.n) > 50) hmoe_strbuf_add(b, "any[]");
                else {
                    hmoe_strbuf_addn(b, s, inner.n);
                    hmoe_strbuf_add(b, "[]");
                }
                b->oom |= inner.oom;
                free(inner.s);
            }
        } else {
            hmoe_strbuf_add(b, "any[]");
        }
        if (nullable) hmoe_strbuf_add(b, " | null");
    } else if (type && type->kind == HMOE_JSON_ARRAY && type->n > 0) {
        for (size_t i = 0; i < type->n; i++) {
            if (i) hmoe_strbuf_add(b, " | ");
            add_py(b, type->items[i]);
        }
    } else if (truthy(one_of)) {
        /* The template's "has object variants" flag is set inside the loop, where Jinja
         * scoping keeps it from leaving the loop: every oneOf lists its variants. */
        for (size_t i = 0; one_of->kind == HMOE_JSON_ARRAY && i < one_of->n; i++) {
            const struct hmoe_json *var = one_of->items[i], *desc = hmoe_json_get(var, "description"),
                                   *dflt = hmoe_json_get(var, "default");
            ts_type(b, var, depth + 1);
            if (truthy(desc)) {
                hmoe_strbuf_add(b, "// ");
                add_py(b, desc);
            }
            if (dflt) {
                hmoe_strbuf_add(b, "                    // default: ");
                add_tojson(b, dflt);
            }
            if (i + 1 < one_of->n) hmoe_strbuf_add(b, " | \n");
        }
    } else if (str_eq(type, "string")) {
        const struct hmoe_json *en = hmoe_json_get(spec, "enum");
        if (truthy(en) && en->kind == HMOE_JSON_ARRAY) {
            hmoe_strbuf_add(b, "\"");
            for (size_t i = 0; i < en->n; i++) {
                if (i) hmoe_strbuf_add(b, "\" | \"");
                add_py(b, en->items[i]);
            }
            hmoe_strbuf_add(b, "\"");
        } else {
            hmoe_strbuf_add(b, "string");
            if (nullable) hmoe_strbuf_add(b, " | null");
        }
    } else if (str_eq(type, "number") || str_eq(type, "integer")) {
        hmoe_strbuf_add(b, "number");
    } else if (str_eq(type, "boolean")) {
        hmoe_strbuf_add(b, "boolean");
    } else if (str_eq(type, "object")) {
        const struct hmoe_json *props = hmoe_json_get(spec, "properties"), *req = hmoe_json_get(spec, "required");
        if (truthy(props) && props->kind == HMOE_JSON_OBJECT) {
            hmoe_strbuf_add(b, "{\n");
            for (size_t i = 0; i < props->n; i++) {
                hmoe_strbuf_add(b, props->keys[i]);
                if (!in_list(req, props->keys[i])) hmoe_strbuf_add(b, "?");
                hmoe_strbuf_add(b, ": \n                ");
                ts_type(b, props->items[i], depth + 1);
                if (i + 1 < props->n) hmoe_strbuf_add(b, ", ");
            }
            hmoe_strbuf_add(b, "}");
        } else {
            hmoe_strbuf_add(b, "object");
        }
    } else {
        hmoe_strbuf_add(b, "any");
    }
}

/* The template's render_tool_namespace("functions", tools). */
static enum hmoe_status tool_namespace(struct hmoe_strbuf *b, const struct hmoe_chat_opts *o, struct hmoe_err *err) {
    hmoe_strbuf_add(b, "## functions\n\nnamespace functions {\n\n");
    for (size_t t = 0; t < o->n_tools; t++) {
        struct hmoe_err perr = {0};
        struct hmoe_json *tool = hmoe_json_parse(o->tools[t], strlen(o->tools[t]), &perr);
        const struct hmoe_json *fn = hmoe_json_get(tool, "function");
        const struct hmoe_json *name = hmoe_json_get(fn, "name");
        if (!fn || fn->kind != HMOE_JSON_OBJECT || !name || name->kind != HMOE_JSON_STRING) {
            hmoe_json_free(tool);
            return HMOE_RAISE(err, HMOE_ERR_ARG, "tool %zu: the harmony format needs {\"type\": \"function\", "
                              "\"function\": {\"name\": ..., \"description\": ..., \"parameters\": ...}}", t);
        }
        const struct hmoe_json *desc = hmoe_json_get(fn, "description"), *params = hmoe_json_get(fn, "parameters");
        const struct hmoe_json *props = hmoe_json_get(params, "properties"), *req = hmoe_json_get(params, "required");
        hmoe_strbuf_add(b, "// ");
        if (desc) add_py(b, desc);
        hmoe_strbuf_add(b, "\ntype ");
        hmoe_strbuf_add(b, name->str);
        hmoe_strbuf_add(b, " = ");
        if (truthy(params) && truthy(props) && props->kind == HMOE_JSON_OBJECT) {
            hmoe_strbuf_add(b, "(_: {\n");
            for (size_t i = 0; i < props->n; i++) {
                const struct hmoe_json *spec = props->items[i], *pdesc = hmoe_json_get(spec, "description"),
                                       *dflt = hmoe_json_get(spec, "default");
                if (truthy(pdesc)) {
                    hmoe_strbuf_add(b, "// ");
                    add_py(b, pdesc);
                    hmoe_strbuf_add(b, "\n");
                }
                hmoe_strbuf_add(b, props->keys[i]);
                if (!in_list(req, props->keys[i])) hmoe_strbuf_add(b, "?");
                hmoe_strbuf_add(b, ": ");
                ts_type(b, spec, 0);
                if (dflt) {
                    /* With an enum or oneOf the default is concatenated as text, else as JSON. */
                    if (truthy(hmoe_json_get(spec, "enum"))) {
                        hmoe_strbuf_add(b, ", // default: ");
                        add_py(b, dflt);
                    } else if (truthy(hmoe_json_get(spec, "oneOf"))) {
                        hmoe_strbuf_add(b, "// default: ");
                        add_py(b, dflt);
                    } else {
                        hmoe_strbuf_add(b, ", // default: ");
                        add_tojson(b, dflt);
                    }
                }
                hmoe_strbuf_add(b, ",\n");
            }
            hmoe_strbuf_add(b, "}) => any;\n\n");
        } else {
            hmoe_strbuf_add(b, "() => any;\n\n");
        }
        hmoe_json_free(tool);
    }
    hmoe_strbuf_add(b, "} // namespace functions");
    return HMOE_OK;
}

static bool role_is(const struct hmoe_chat_msg *m, const char *r) { return strcmp(m->role, r) == 0; }

/* The template's raise_exception for channel tags pasted into a field. */
static bool has_channel_tags(const char *s) {
    return s && (strstr(s, "<|channel|>analysis<|message|>") || strstr(s, "<|channel|>final<|message|>"));
}

/* Arguments of a call as `arguments|tojson`: JSON text is re-serialized in tojson form (an
 * OpenAI client sends the object encoded as a string; the template expects the object),
 * anything else is a plain string and written as a JSON string. */
static void add_arguments(struct hmoe_strbuf *b, const char *args) {
    struct hmoe_err perr = {0};
    struct hmoe_json *j = hmoe_json_parse(args, strlen(args), &perr);
    if (j) add_tojson(b, j);
    else add_tojson_str(b, args, strlen(args));
    hmoe_json_free(j);
}

static void add_msg(struct hmoe_strbuf *b, const char *head, const char *body, const char *end) {
    hmoe_strbuf_add(b, head);
    hmoe_strbuf_add(b, body);
    hmoe_strbuf_add(b, end);
}

enum hmoe_status hmoe_text_render_harmony(struct hmoe_strbuf *b, const struct hmoe_chat_msg *msgs, size_t n,
                                          const struct hmoe_chat_opts *o, struct hmoe_err *err) {
    char today[16];
    const char *date = o->current_date;
    if (!date) {
        /* strftime_now("%Y-%m-%d"): the local date, as the template's Python and JS hosts give it. */
        time_t now = time(NULL);
        struct tm tm;
        if (!localtime_r(&now, &tm) || !strftime(today, sizeof today, "%Y-%m-%d", &tm)) strcpy(today, "1970-01-01");
        date = today;
    }
    const char *effort = o->reasoning_effort ? o->reasoning_effort : "medium";
    hmoe_strbuf_add(b, "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\n"
                       "Knowledge cutoff: 2024-06\nCurrent date: ");
    hmoe_strbuf_add(b, date);
    hmoe_strbuf_add(b, "\n\nReasoning: ");
    hmoe_strbuf_add(b, effort);
    hmoe_strbuf_add(b, "\n\n# Valid channels: analysis, commentary, final. Channel must be included for every message.");
    if (o->n_tools) hmoe_strbuf_add(b, "\nCalls to these tools must go to the commentary channel: 'functions'.");
    hmoe_strbuf_add(b, "<|end|>");

    /* A leading system or developer message becomes the developer instructions. */
    size_t first = 0;
    const char *dev = "";
    if (n > 0 && (role_is(&msgs[0], "system") || role_is(&msgs[0], "developer"))) {
        dev = msgs[0].content;
        first = 1;
    }
    if (dev[0] || o->n_tools) {
        hmoe_strbuf_add(b, "<|start|>developer<|message|>");
        if (dev[0]) add_msg(b, "# Instructions\n\n", dev, "\n\n");
        if (o->n_tools) {
            hmoe_strbuf_add(b, "# Tools\n\n");
            enum hmoe_status st = tool_namespace(b, o, err);
            if (st != HMOE_OK) return st;
        }
        hmoe_strbuf_add(b, "<|end|>");
    }

    const char *last_call = NULL; /* name of the latest tool call: tool results come from it */
    for (size_t i = first; i < n; i++) {
        const struct hmoe_chat_msg *m = &msgs[i];
        const char *think = m->reasoning_content;
        if (role_is(m, "assistant")) {
            if (has_channel_tags(m->content) || has_channel_tags(think))
                return HMOE_RAISE(err, HMOE_ERR_ARG, "message %zu: harmony channel tags in the %s; pass the analysis "
                                  "text as reasoning_content and the final text as content", i,
                                  has_channel_tags(m->content) ? "content" : "reasoning");
            if (m->n_tool_calls) {
                /* The reasoning of a tool call is kept until a later final answer exists. */
                bool later_final = false;
                for (size_t k = i + 1; k < n; k++)
                    later_final |= role_is(&msgs[k], "assistant") && msgs[k].n_tool_calls == 0;
                if (m->content[0] && think && think[0])
                    return HMOE_RAISE(err, HMOE_ERR_ARG, "message %zu: a tool-call turn takes content or reasoning, "
                                      "not both (the harmony template renders one analysis message)", i);
                if (m->content[0] && !later_final)
                    add_msg(b, "<|start|>assistant<|channel|>analysis<|message|>", m->content, "<|end|>");
                else if (think && think[0] && !later_final)
                    add_msg(b, "<|start|>assistant<|channel|>analysis<|message|>", think, "<|end|>");
                /* One call per turn: the template renders the first. */
                const struct hmoe_chat_tool_call *tc = &m->tool_calls[0];
                add_msg(b, "<|start|>assistant to=functions.", tc->name, "<|channel|>commentary json<|message|>");
                add_arguments(b, tc->arguments);
                hmoe_strbuf_add(b, "<|call|>");
                last_call = tc->name;
            } else if (i == n - 1 && !o->add_generation_prompt) {
                if (think) add_msg(b, "<|start|>assistant<|channel|>analysis<|message|>", think, "<|end|>");
                add_msg(b, "<|start|>assistant<|channel|>final<|message|>", m->content, "<|return|>");
            } else {
                add_msg(b, "<|start|>assistant<|channel|>final<|message|>", m->content, "<|end|>");
                last_call = NULL;
            }
        } else if (role_is(m, "tool")) {
            if (!last_call)
                return HMOE_RAISE(err, HMOE_ERR_ARG, "message %zu: a tool result without an earlier assistant tool call",
                                  i);
            add_msg(b, "<|start|>functions.", last_call, " to=assistant<|channel|>commentary<|message|>");
            add_tojson_str(b, m->content, strlen(m->content));
            hmoe_strbuf_add(b, "<|end|>");
        } else if (role_is(m, "user")) {
            add_msg(b, "<|start|>user<|message|>", m->content, "<|end|>");
        }
        /* Later system / developer messages: the template has no place for them. */
    }
    if (o->add_generation_prompt) hmoe_strbuf_add(b, "<|start|>assistant");
    return HMOE_OK;
}

/* Body of the message whose header starts at `hdr` (just after "<|channel|>"): from after
 * "<|message|>" to the next <|end|>, <|return|>, <|call|> or <|start|> (or the end). */
static struct hmoe_harmony_span message_body(const char *hdr, const char *end) {
    static const char *const stops[] = {"<|end|>", "<|return|>", "<|call|>", "<|start|>"};
    const char *m = strstr(hdr, "<|message|>");
    if (!m || m >= end) return (struct hmoe_harmony_span){end, 0};
    const char *b = m + strlen("<|message|>"), *e = end;
    for (size_t k = 0; k < HMOE_ARRAY_LEN(stops); k++) {
        const char *s = strstr(b, stops[k]);
        if (s && s < e) e = s;
    }
    return (struct hmoe_harmony_span){b, (size_t)(e - b)};
}

void hmoe_chat_harmony_reply(const char *text, struct hmoe_harmony_reply *out) {
    const char *end = text + strlen(text);
    memset(out, 0, sizeof *out);
    bool any = false;
    for (const char *c = strstr(text, "<|channel|>"); c; c = strstr(c + 1, "<|channel|>")) {
        const char *name = c + strlen("<|channel|>");
        struct hmoe_harmony_span body = message_body(name, end);
        any = true;
        if (strncmp(name, "analysis", 8) == 0) out->analysis = body;
        else if (strncmp(name, "final", 5) == 0) out->final = body, out->has_final = true;
    }
    if (!any) out->final = (struct hmoe_harmony_span){text, (size_t)(end - text)}, out->has_final = true;
}
