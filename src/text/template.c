/* template.c — render a conversation into a prompt for a recognised chat template family
 * (chat-templates.md §1 Qwen3; §2 Qwen3.5/3.6 in template_qwen35.c; plain ChatML as the
 * fallback). Each renderer mirrors its Jinja template statement by statement, including
 * the Python string methods it uses (split, strip), so the output is byte-identical;
 * fixtures/chat/qwen3-renders.jsonl checks that. Relies on strbuf_impl.h; the JSON -> messages conversion is template_json.c. */
#include <stdlib.h>
#include <string.h>

#include "text/strbuf_impl.h"
#include "text/text_impl.h"

/* A slice of a string (Python's str methods return new strings; we return views). */
struct sv {
    const char *p;
    size_t n;
};

static struct sv sv_of(const char *s) { return (struct sv){s, strlen(s)}; }

static const char *sv_find_first(struct sv s, const char *needle) {
    size_t nl = strlen(needle);
    for (size_t i = 0; i + nl <= s.n; i++)
        if (memcmp(s.p + i, needle, nl) == 0) return s.p + i;
    return NULL;
}

static const char *sv_find_last(struct sv s, const char *needle) {
    size_t nl = strlen(needle);
    for (size_t i = s.n + 1; i-- > 0;)
        if (i + nl <= s.n && memcmp(s.p + i, needle, nl) == 0) return s.p + i;
    return NULL;
}

/* s.split(sep)[-1] and s.split(sep)[0]. */
static struct sv split_last(struct sv s, const char *sep) {
    const char *h = sv_find_last(s, sep);
    if (!h) return s;
    const char *b = h + strlen(sep);
    return (struct sv){b, (size_t)(s.p + s.n - b)};
}
static struct sv split_first(struct sv s, const char *sep) {
    const char *h = sv_find_first(s, sep);
    return h ? (struct sv){s.p, (size_t)(h - s.p)} : s;
}
static struct sv lstrip_nl(struct sv s) {
    while (s.n && s.p[0] == '\n') { s.p++; s.n--; }
    return s;
}
static struct sv rstrip_nl(struct sv s) {
    while (s.n && s.p[s.n - 1] == '\n') s.n--;
    return s;
}
static bool starts_with(const char *s, const char *pre) { return strncmp(s, pre, strlen(pre)) == 0; }
static bool ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && memcmp(s + a - b, suf, b) == 0;
}

static bool role_is(const struct hmoe_chat_msg *m, const char *r) { return strcmp(m->role, r) == 0; }

/* developer_ok: the template has a developer role (harmony). */
static enum hmoe_status check_roles(const struct hmoe_chat_msg *msgs, size_t n, bool developer_ok,
                                    struct hmoe_err *err) {
    static const char *const known[] = {"system", "user", "assistant", "tool"};
    for (size_t i = 0; i < n; i++) {
        if (!msgs[i].role || !msgs[i].content)
            return HMOE_RAISE(err, HMOE_ERR_ARG, "message %zu: missing role or content", i);
        bool ok = developer_ok && strcmp(msgs[i].role, "developer") == 0;
        for (size_t k = 0; k < HMOE_ARRAY_LEN(known); k++) ok |= strcmp(msgs[i].role, known[k]) == 0;
        if (!ok)
            return HMOE_RAISE(err, HMOE_ERR_ARG, "message %zu: unknown role '%s' (expected system, user, assistant "
                              "or tool)", i, msgs[i].role);
    }
    return HMOE_OK;
}

static void add_sv(struct hmoe_strbuf *b, struct sv s) { hmoe_strbuf_addn(b, s.p, s.n); }

/* chat-templates.md §1.3: the system turn that lists the tools (Qwen3 JSON call format). */
static void qwen3_tools_header(struct hmoe_strbuf *b, const struct hmoe_chat_msg *msgs, size_t n,
                               const struct hmoe_chat_opts *o) {
    hmoe_strbuf_add(b, "<|im_start|>system\n");
    if (n > 0 && role_is(&msgs[0], "system")) {
        hmoe_strbuf_add(b, msgs[0].content);
        hmoe_strbuf_add(b, "\n\n");
    }
    hmoe_strbuf_add(b, "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
                       "You are provided with function signatures within <tools></tools> XML tags:\n<tools>");
    for (size_t i = 0; i < o->n_tools; i++) {
        hmoe_strbuf_add(b, "\n");
        hmoe_strbuf_add(b, o->tools[i]);
    }
    hmoe_strbuf_add(b, "\n</tools>\n\nFor each function call, return a json object with function name and arguments "
                       "within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, "
                       "\"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n");
}

static void qwen3_assistant(struct hmoe_strbuf *b, const struct hmoe_chat_msg *m, size_t i, size_t n,
                            size_t last_query) {
    struct sv content = sv_of(m->content), reasoning = {"", 0};
    if (m->reasoning_content) reasoning = sv_of(m->reasoning_content);
    else if (sv_find_first(content, "</think>")) {
        /* content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n') */
        reasoning = lstrip_nl(split_last(rstrip_nl(split_first(content, "</think>")), "<think>"));
        content = lstrip_nl(split_last(content, "</think>"));
    }
    hmoe_strbuf_add(b, "<|im_start|>assistant\n");
    if (i > last_query && (i == n - 1 || reasoning.n > 0)) {
        hmoe_strbuf_add(b, "<think>\n");
        add_sv(b, rstrip_nl(lstrip_nl(reasoning)));
        hmoe_strbuf_add(b, "\n</think>\n\n");
        add_sv(b, lstrip_nl(content));
    } else {
        add_sv(b, content);
    }
    for (size_t k = 0; k < m->n_tool_calls; k++) {
        if (k > 0 || content.n > 0) hmoe_strbuf_add(b, "\n");
        hmoe_strbuf_add(b, "<tool_call>\n{\"name\": \"");
        hmoe_strbuf_add(b, m->tool_calls[k].name);
        hmoe_strbuf_add(b, "\", \"arguments\": ");
        hmoe_strbuf_add(b, m->tool_calls[k].arguments);
        hmoe_strbuf_add(b, "}\n</tool_call>");
    }
    hmoe_strbuf_add(b, "<|im_end|>\n");
}

static void render_qwen3(struct hmoe_strbuf *b, const struct hmoe_chat_msg *msgs, size_t n,
                         const struct hmoe_chat_opts *o) {
    if (o->n_tools > 0) qwen3_tools_header(b, msgs, n, o);
    else if (role_is(&msgs[0], "system")) {
        hmoe_strbuf_add(b, "<|im_start|>system\n");
        hmoe_strbuf_add(b, msgs[0].content);
        hmoe_strbuf_add(b, "<|im_end|>\n");
    }
    /* The last user message that is not a wrapped tool result (§1.2); default: the last message. */
    size_t last_query = n - 1;
    for (size_t i = n; i-- > 0;) {
        const struct hmoe_chat_msg *m = &msgs[i];
        if (role_is(m, "user") &&
            !(starts_with(m->content, "<tool_response>") && ends_with(m->content, "</tool_response>"))) {
            last_query = i;
            break;
        }
    }
    for (size_t i = 0; i < n; i++) {
        const struct hmoe_chat_msg *m = &msgs[i];
        if (role_is(m, "user") || (role_is(m, "system") && i > 0)) {
            hmoe_strbuf_add(b, "<|im_start|>");
            hmoe_strbuf_add(b, m->role);
            hmoe_strbuf_add(b, "\n");
            hmoe_strbuf_add(b, m->content);
            hmoe_strbuf_add(b, "<|im_end|>\n");
        } else if (role_is(m, "assistant")) {
            qwen3_assistant(b, m, i, n, last_query);
        } else if (role_is(m, "tool")) {
            if (i == 0 || !role_is(&msgs[i - 1], "tool")) hmoe_strbuf_add(b, "<|im_start|>user");
            hmoe_strbuf_add(b, "\n<tool_response>\n");
            hmoe_strbuf_add(b, m->content);
            hmoe_strbuf_add(b, "\n</tool_response>");
            if (i == n - 1 || !role_is(&msgs[i + 1], "tool")) hmoe_strbuf_add(b, "<|im_end|>\n");
        }
    }
    if (o->add_generation_prompt) {
        hmoe_strbuf_add(b, "<|im_start|>assistant\n");
        if (!o->enable_thinking) hmoe_strbuf_add(b, "<think>\n\n</think>\n\n");
    }
}

/* Plain ChatML: one turn per message, no think or tool handling. */
static void render_chatml(struct hmoe_strbuf *b, const struct hmoe_chat_msg *msgs, size_t n,
                          const struct hmoe_chat_opts *o) {
    for (size_t i = 0; i < n; i++) {
        hmoe_strbuf_add(b, "<|im_start|>");
        hmoe_strbuf_add(b, msgs[i].role);
        hmoe_strbuf_add(b, "\n");
        hmoe_strbuf_add(b, msgs[i].content);
        hmoe_strbuf_add(b, "<|im_end|>\n");
    }
    if (o->add_generation_prompt) hmoe_strbuf_add(b, "<|im_start|>assistant\n");
}

enum hmoe_status hmoe_chat_render(enum hmoe_chat_template tmpl, const struct hmoe_chat_msg *msgs, size_t n,
                                  const struct hmoe_chat_opts *opts, char **out, struct hmoe_err *err) {
    *out = NULL;
    static const struct hmoe_chat_opts dflt = {.add_generation_prompt = true, .enable_thinking = true};
    const struct hmoe_chat_opts *o = opts ? opts : &dflt;
    enum hmoe_status st = check_roles(msgs, n, tmpl == HMOE_CHAT_TEMPLATE_HARMONY, err);
    if (st != HMOE_OK) return st;
    if (n == 0) return HMOE_RAISE(err, HMOE_ERR_ARG, "the conversation has no messages");
    struct hmoe_strbuf b = {0};
    switch (tmpl) {
    case HMOE_CHAT_TEMPLATE_QWEN3:
        render_qwen3(&b, msgs, n, o);
        break;
    case HMOE_CHAT_TEMPLATE_QWEN35:
        st = hmoe_text_render_qwen35(&b, msgs, n, o, err); /* template_qwen35.c */
        if (st != HMOE_OK) {
            free(b.s);
            return st;
        }
        break;
    case HMOE_CHAT_TEMPLATE_NEMOTRON:
        st = hmoe_text_render_nemotron(&b, msgs, n, o, err); /* template_nemotron.c */
        if (st != HMOE_OK) {
            free(b.s);
            return st;
        }
        break;
    case HMOE_CHAT_TEMPLATE_HARMONY:
        st = hmoe_text_render_harmony(&b, msgs, n, o, err); /* template_harmony.c */
        if (st != HMOE_OK) {
            free(b.s);
            return st;
        }
        break;
    case HMOE_CHAT_TEMPLATE_CHATML:
        for (size_t i = 0; i < n; i++)
            if (msgs[i].n_tool_calls)
                return HMOE_RAISE(err, HMOE_ERR_ARG, "message %zu has tool calls, which the ChatML template cannot "
                                  "render (use --chat-template qwen3 for a Qwen3 model)", i);
        if (o->n_tools)
            return HMOE_RAISE(err, HMOE_ERR_ARG, "the ChatML template has no tool format; use --chat-template qwen3 "
                              "for a Qwen3 model");
        render_chatml(&b, msgs, n, o);
        break;
    default:
        return HMOE_RAISE(err, HMOE_ERR_ARG, "unknown chat template id %d", (int)tmpl);
    }
    if (b.oom) {
        free(b.s);
        return HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory rendering the chat template");
    }
    if (!b.s) hmoe_strbuf_add(&b, ""); /* never hand back NULL on success */
    *out = b.s;
    return HMOE_OK;
}
