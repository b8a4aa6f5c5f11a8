/* template_nemotron.c — the NVIDIA Nemotron-3 chat format (nemotron_h_moe.md §10; the
 * template llama.cpp ships as NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja): ChatML turns; a
 * system turn always comes first (empty without a system message) and carries the XML tool
 * list; assistant content gets an empty "<think></think>" when it has no think tags, and
 * assistant turns before the last user message lose their reasoning (truncate_history_thinking,
 * on by default); tool calls in the <function=...> XML format; tool results wrapped in
 * <tool_response> inside a user turn. The generation prompt opens "<think>\n", or closes an
 * empty think block without thinking. Written statement by statement from the template's
 * logic; the tests' expected strings are derived from it. Relies on strbuf_impl.h, json.h.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hmoe/json.h"
#include "text/strbuf_impl.h"
#include "text/text_impl.h"

struct sv {
    const char *p;
    size_t n;
};

static struct sv sv_of(const char *s) { return (struct sv){s ? s : "", s ? strlen(s) : 0}; }
static struct sv strip(struct sv s) {
    hmoe_text_strip(&s.p, &s.n);
    return s;
}
static const char *find(struct sv s, const char *needle, bool last) {
    const size_t nl = strlen(needle);
    const char *hit = NULL;
    for (size_t i = 0; i + nl <= s.n; i++)
        if (memcmp(s.p + i, needle, nl) == 0) {
            hit = s.p + i;
            if (!last) break;
        }
    return hit;
}
static void add_sv(struct hmoe_strbuf *b, struct sv s) { hmoe_strbuf_addn(b, s.p, s.n); }
static bool role_is(const struct hmoe_chat_msg *m, const char *r) { return strcmp(m->role, r) == 0; }

/* tojson of a JSON value (HF separators), appended. */
static void add_json(struct hmoe_strbuf *b, const struct hmoe_json *v) {
    char *s = hmoe_json_to_hf_string(v);
    if (!s) b->oom = true;
    else hmoe_strbuf_add(b, s);
    free(s);
}

static bool is_container(const struct hmoe_json *v) {
    return v->kind == HMOE_JSON_OBJECT || v->kind == HMOE_JSON_ARRAY;
}

/* The template's render_extra_keys macro: every member not in `handled` as
 * "\n<key>value</key>", containers as tojson, scalars as `| string`. */
static void extra_keys(struct hmoe_strbuf *b, const struct hmoe_json *obj, const char *const *handled) {
    if (!obj || obj->kind != HMOE_JSON_OBJECT) return;
    for (size_t i = 0; i < obj->n; i++) {
        bool skip = false;
        for (const char *const *h = handled; *h && !skip; h++) skip = strcmp(obj->keys[i], *h) == 0;
        if (skip) continue;
        hmoe_strbuf_add(b, "\n<");
        hmoe_strbuf_add(b, obj->keys[i]);
        hmoe_strbuf_add(b, ">");
        if (is_container(obj->items[i])) add_json(b, obj->items[i]);
        else hmoe_text_py_value(b, obj->items[i]);
        hmoe_strbuf_add(b, "</");
        hmoe_strbuf_add(b, obj->keys[i]);
        hmoe_strbuf_add(b, ">");
    }
}

/* "<tag>" + trimmed string member + "</tag>" after a newline, when present. */
static void trimmed_member(struct hmoe_strbuf *b, const struct hmoe_json *obj, const char *key, const char *tag) {
    const struct hmoe_json *v = hmoe_json_get(obj, key);
    if (!v) return;
    hmoe_strbuf_add(b, "\n<");
    hmoe_strbuf_add(b, tag);
    hmoe_strbuf_add(b, ">");
    if (v->kind == HMOE_JSON_STRING) add_sv(b, strip((struct sv){v->str, v->str_len}));
    else hmoe_text_py_value(b, v);
    hmoe_strbuf_add(b, "</");
    hmoe_strbuf_add(b, tag);
    hmoe_strbuf_add(b, ">");
}

/* One tool definition ({"type": "function", "function": {...}} or the function itself). */
static void tool_def(struct hmoe_strbuf *b, const struct hmoe_json *tool) {
    const struct hmoe_json *fn = hmoe_json_get(tool, "function");
    if (fn) tool = fn;
    hmoe_strbuf_add(b, "\n<function>\n<name>");
    hmoe_strbuf_add(b, hmoe_json_get_str(tool, "name", ""));
    hmoe_strbuf_add(b, "</name>");
    trimmed_member(b, tool, "description", "description");
    hmoe_strbuf_add(b, "\n<parameters>");
    const struct hmoe_json *params = hmoe_json_get(tool, "parameters");
    const struct hmoe_json *props = hmoe_json_get(params, "properties");
    if (props && props->kind == HMOE_JSON_OBJECT) {
        static const char *const handled[] = {"name", "type", "description", "enum", NULL};
        for (size_t i = 0; i < props->n; i++) {
            const struct hmoe_json *f = props->items[i];
            hmoe_strbuf_add(b, "\n<parameter>\n<name>");
            hmoe_strbuf_add(b, props->keys[i]);
            hmoe_strbuf_add(b, "</name>");
            const struct hmoe_json *ty = hmoe_json_get(f, "type");
            if (ty) {
                hmoe_strbuf_add(b, "\n<type>");
                hmoe_text_py_value(b, ty);
                hmoe_strbuf_add(b, "</type>");
            }
            trimmed_member(b, f, "description", "description");
            const struct hmoe_json *en = hmoe_json_get(f, "enum");
            if (en) {
                hmoe_strbuf_add(b, "\n<enum>");
                add_json(b, en);
                hmoe_strbuf_add(b, "</enum>");
            }
            extra_keys(b, f, handled);
            hmoe_strbuf_add(b, "\n</parameter>");
        }
    }
    static const char *const handled_params[] = {"type", "properties", "required", NULL};
    extra_keys(b, params, handled_params);
    const struct hmoe_json *req = hmoe_json_get(params, "required");
    if (req) {
        hmoe_strbuf_add(b, "\n<required>");
        add_json(b, req);
        hmoe_strbuf_add(b, "</required>");
    }
    hmoe_strbuf_add(b, "\n</parameters>");
    static const char *const handled_tool[] = {"type", "name", "description", "parameters", NULL};
    extra_keys(b, tool, handled_tool);
    hmoe_strbuf_add(b, "\n</function>");
}

static enum hmoe_status system_turn(struct hmoe_strbuf *b, struct sv sys, const struct hmoe_chat_opts *o,
                                    struct hmoe_err *err) {
    hmoe_strbuf_add(b, "<|im_start|>system\n");
    add_sv(b, sys);
    if (o->n_tools > 0) {
        if (sys.n) hmoe_strbuf_add(b, "\n\n");
        hmoe_strbuf_add(b, "# Tools\n\nYou have access to the following functions:\n\n<tools>");
        for (size_t i = 0; i < o->n_tools; i++) {
            struct hmoe_err perr = {0};
            struct hmoe_json *t = hmoe_json_parse(o->tools[i], strlen(o->tools[i]), &perr);
            if (!t || t->kind != HMOE_JSON_OBJECT) {
                hmoe_json_free(t);
                return HMOE_RAISE(err, HMOE_ERR_ARG, "tool %zu: the Nemotron format needs a JSON object (got '%.60s')",
                                  i, o->tools[i]);
            }
            tool_def(b, t);
            hmoe_json_free(t);
        }
        hmoe_strbuf_add(b, "\n</tools>");
        hmoe_strbuf_add(b,
                        "\n\nIf you choose to call a function ONLY reply in the following format with NO suffix:\n\n"
                        "<tool_call>\n<function=example_function_name>\n<parameter=example_parameter_1>\nvalue_1\n"
                        "</parameter>\n<parameter=example_parameter_2>\nThis is the value for the second parameter\n"
                        "that can span\nmultiple lines\n</parameter>\n</function>\n</tool_call>\n\n<IMPORTANT>\n"
                        "Reminder:\n- Function calls MUST follow the specified format: an inner <function=...></function> "
                        "block must be nested within <tool_call></tool_call> XML tags\n- Required parameters MUST be "
                        "specified\n- You may provide optional reasoning for your function call in natural language "
                        "BEFORE the function call, but NOT after\n- If there is no function call available, answer the "
                        "question like normal with your current knowledge and do not tell the user about function "
                        "calls\n</IMPORTANT>");
    }
    hmoe_strbuf_add(b, "<|im_end|>\n");
    return HMOE_OK;
}

/* "<tool_call>\n<function=NAME>\n" + "<parameter=K>\nV\n</parameter>\n"... per call. */
static enum hmoe_status tool_calls(struct hmoe_strbuf *b, const struct hmoe_chat_msg *m, size_t idx,
                                   struct hmoe_err *err) {
    for (size_t k = 0; k < m->n_tool_calls; k++) {
        const struct hmoe_chat_tool_call *tc = &m->tool_calls[k];
        struct hmoe_err perr = {0};
        struct hmoe_json *args = hmoe_json_parse(tc->arguments, strlen(tc->arguments), &perr);
        if (!args || args->kind != HMOE_JSON_OBJECT) {
            hmoe_json_free(args);
            return HMOE_RAISE(err, HMOE_ERR_ARG,
                              "message %zu: tool call %zu: the Nemotron format needs the arguments as a JSON object "
                              "(got '%.60s')",
                              idx, k, tc->arguments);
        }
        hmoe_strbuf_add(b, "<tool_call>\n<function=");
        hmoe_strbuf_add(b, tc->name);
        hmoe_strbuf_add(b, ">\n");
        for (size_t i = 0; i < args->n; i++) {
            hmoe_strbuf_add(b, "<parameter=");
            hmoe_strbuf_add(b, args->keys[i]);
            hmoe_strbuf_add(b, ">\n");
            hmoe_text_py_value(b, args->items[i]);
            hmoe_strbuf_add(b, "\n</parameter>\n");
        }
        hmoe_strbuf_add(b, "</function>\n</tool_call>\n");
        hmoe_json_free(args);
    }
    return HMOE_OK;
}

/* An assistant turn. `truncated`: before the last user message (reasoning dropped). */
static enum hmoe_status assistant(struct hmoe_strbuf *b, const struct hmoe_chat_msg *m, size_t idx, bool truncated,
                                  struct hmoe_err *err) {
    /* The content the turn works on: reasoning folded in as a think block, or an empty
     * think block in front of content that has no think tags. */
    struct hmoe_strbuf c = {0};
    struct sv reasoning = sv_of(m->reasoning_content);
    struct sv content = sv_of(m->content);
    if (m->reasoning_content && strip(reasoning).n) {
        hmoe_strbuf_add(&c, "<think>\n");
        add_sv(&c, reasoning);
        hmoe_strbuf_add(&c, "\n</think>\n");
        add_sv(&c, content);
    } else {
        if (!find(content, "<think>", false) && !find(content, "</think>", false)) hmoe_strbuf_add(&c, "<think></think>");
        add_sv(&c, content);
    }
    if (c.oom) return HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory rendering the chat template");
    struct sv full = {c.s ? c.s : "", c.n};
    enum hmoe_status st = HMOE_OK;
    if (m->n_tool_calls > 0) {
        hmoe_strbuf_add(b, "<|im_start|>assistant\n");
        if (strip(full).n == 0) {
            hmoe_strbuf_add(b, "<think></think>");
        } else if (!truncated) {
            add_sv(b, strip(full));
            hmoe_strbuf_add(b, "\n");
        } else {
            /* Only what follows the last </think>; an unclosed <think> drops its tail. */
            struct sv rest = full;
            const char *close = find(full, "</think>", true), *open = find(full, "<think>", false);
            if (close) rest = (struct sv){close + 8, (size_t)(full.p + full.n - close - 8)};
            else if (open) rest = (struct sv){full.p, (size_t)(open - full.p)};
            hmoe_strbuf_add(b, "<think></think>");
            add_sv(b, strip(rest));
            hmoe_strbuf_add(b, "\n");
        }
        st = tool_calls(b, m, idx, err);
        hmoe_strbuf_add(b, "<|im_end|>\n");
    } else if (!truncated) {
        hmoe_strbuf_add(b, "<|im_start|>assistant\n");
        add_sv(b, strip(full));
        hmoe_strbuf_add(b, "<|im_end|>\n");
    } else {
        struct hmoe_strbuf t = {0};
        const char *close = find(full, "</think>", true);
        if (find(full, "<think>", false) && close) {
            hmoe_strbuf_add(&t, "<think></think>");
            hmoe_strbuf_addn(&t, close + 8, (size_t)(full.p + full.n - close - 8));
        } else {
            add_sv(&t, full);
        }
        hmoe_strbuf_add(b, "<|im_start|>assistant\n");
        add_sv(b, strip((struct sv){t.s ? t.s : "", t.n}));
        hmoe_strbuf_add(b, "<|im_end|>\n");
        if (t.oom) b->oom = true;
        free(t.s);
    }
    free(c.s);
    return st;
}

enum hmoe_status hmoe_text_render_nemotron(struct hmoe_strbuf *b, const struct hmoe_chat_msg *msgs, size_t n,
                                           const struct hmoe_chat_opts *o, struct hmoe_err *err) {
    /* A leading system message becomes the system turn's text; the turn is there anyway. */
    const size_t first = role_is(&msgs[0], "system") ? 1 : 0;
    enum hmoe_status st = system_turn(b, first ? sv_of(msgs[0].content) : sv_of(""), o, err);
    if (st) return st;
    size_t last_user = SIZE_MAX;
    for (size_t i = first; i < n; i++)
        if (role_is(&msgs[i], "user")) last_user = i;
    for (size_t i = first; i < n; i++) {
        const struct hmoe_chat_msg *m = &msgs[i];
        if (role_is(m, "assistant")) {
            /* truncate_history_thinking (default on): turns before the last user message */
            if ((st = assistant(b, m, i, last_user != SIZE_MAX && i < last_user, err))) return st;
        } else if (role_is(m, "tool")) {
            /* loop.previtem is undefined for the loop's first message: no header then. */
            if (i > first && !role_is(&msgs[i - 1], "tool")) hmoe_strbuf_add(b, "<|im_start|>user\n");
            hmoe_strbuf_add(b, "<tool_response>\n");
            hmoe_strbuf_add(b, m->content);
            hmoe_strbuf_add(b, "\n</tool_response>\n");
            if (i == n - 1 || !role_is(&msgs[i + 1], "tool")) hmoe_strbuf_add(b, "<|im_end|>\n");
        } else {
            hmoe_strbuf_add(b, "<|im_start|>");
            hmoe_strbuf_add(b, m->role);
            hmoe_strbuf_add(b, "\n");
            hmoe_strbuf_add(b, m->content);
            hmoe_strbuf_add(b, "<|im_end|>\n");
        }
    }
    if (o->add_generation_prompt)
        hmoe_strbuf_add(b, o->enable_thinking ? "<|im_start|>assistant\n<think>\n" : "<|im_start|>assistant\n<think></think>");
    return HMOE_OK;
}
