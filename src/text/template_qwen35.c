/* template_qwen35.c — the Qwen3.5 / Qwen3.6 chat format (chat-templates.md §2): ChatML
 * turns with every content trimmed (Python str.strip()), thinking on by default (the
 * generation prompt opens "<think>\n"), assistant turns after the last real user query with
 * their reasoning block (always, even empty; every turn with preserve_thinking, the Qwen3.6
 * option), tools listed before the system text and calls in the XML format of §2.3.
 * Written statement by statement from that section; no fixture exists for it (the tests'
 * expected strings are derived from the document). Relies on strbuf_impl.h and json.h.
 */
#include <math.h>
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

/* Length of the whitespace character Python's str.isspace() accepts at s (UTF-8), or 0. */
static size_t space_at(const unsigned char *s, size_t n) {
    if (n >= 1 && ((s[0] >= 0x09 && s[0] <= 0x0d) || (s[0] >= 0x1c && s[0] <= 0x20))) return 1;
    if (n >= 2 && s[0] == 0xc2 && (s[1] == 0x85 || s[1] == 0xa0)) return 2;
    if (n >= 3 && s[0] == 0xe1 && s[1] == 0x9a && s[2] == 0x80) return 3;        /* U+1680 */
    if (n >= 3 && s[0] == 0xe2 && s[1] == 0x80 &&
        (s[2] <= 0x8a || s[2] == 0xa8 || s[2] == 0xa9 || s[2] == 0xaf) && s[2] >= 0x80)
        return 3;                                                                  /* U+2000-200A, 2028, 2029, 202F */
    if (n >= 3 && s[0] == 0xe2 && s[1] == 0x81 && s[2] == 0x9f) return 3;        /* U+205F */
    if (n >= 3 && s[0] == 0xe3 && s[1] == 0x80 && s[2] == 0x80) return 3;        /* U+3000 */
    return 0;
}

/* Jinja's |trim: Python's str.strip() without arguments. */
static struct sv trim(struct sv s) {
    size_t k;
    while (s.n && (k = space_at((const unsigned char *)s.p, s.n))) s.p += k, s.n -= k;
    for (;;) {
        size_t cut = 0;
        /* the last character starts at most 3 bytes back */
        for (size_t back = 1; back <= 3 && back <= s.n && !cut; back++)
            if (space_at((const unsigned char *)s.p + s.n - back, back) == back) cut = back;
        if (!cut) break;
        s.n -= cut;
    }
    return s;
}

static struct sv sv_of(const char *s) { return (struct sv){s, s ? strlen(s) : 0}; }

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

static struct sv lstrip_nl(struct sv s) {
    while (s.n && s.p[0] == '\n') s.p++, s.n--;
    return s;
}
static struct sv rstrip_nl(struct sv s) {
    while (s.n && s.p[s.n - 1] == '\n') s.n--;
    return s;
}
static bool sv_starts(struct sv s, const char *pre) { return s.n >= strlen(pre) && memcmp(s.p, pre, strlen(pre)) == 0; }
static bool sv_ends(struct sv s, const char *suf) {
    size_t k = strlen(suf);
    return s.n >= k && memcmp(s.p + s.n - k, suf, k) == 0;
}
static void add_sv(struct hmoe_strbuf *b, struct sv s) { hmoe_strbuf_addn(b, s.p, s.n); }
static bool role_is(const struct hmoe_chat_msg *m, const char *r) { return strcmp(m->role, r) == 0; }

/* Python's repr of a float (what `| string` prints): shortest round-trip digits, fixed
 * notation for exponents -4..15 (always with a fractional part), else d.ddde+XX. */
static void py_float(struct hmoe_strbuf *b, double v) {
    char buf[40], digits[24], out[64];
    if (!isfinite(v)) {
        hmoe_strbuf_add(b, isnan(v) ? "nan" : v < 0 ? "-inf" : "inf");
        return;
    }
    int prec = 1;
    for (; prec < 17; prec++) {
        snprintf(buf, sizeof buf, "%.*e", prec - 1, v);
        if (strtod(buf, NULL) == v) break;
    }
    snprintf(buf, sizeof buf, "%.*e", prec - 1, v);
    const char *p = buf;
    size_t o = 0, nd = 0;
    if (*p == '-') out[o++] = *p++;
    for (; *p && *p != 'e'; p++)
        if (*p != '.') digits[nd++] = *p;
    digits[nd] = 0;
    const int ex = atoi(p + 1);
    if (ex >= -4 && ex < 16) {
        if (ex < 0) {
            o += (size_t)snprintf(out + o, sizeof out - o, "0.");
            for (int i = 0; i < -ex - 1; i++) out[o++] = '0';
            o += (size_t)snprintf(out + o, sizeof out - o, "%s", digits);
        } else {
            for (int i = 0; i <= ex; i++) out[o++] = (size_t)i < nd ? digits[i] : '0';
            out[o++] = '.';
            if ((size_t)ex + 1 < nd) o += (size_t)snprintf(out + o, sizeof out - o, "%s", digits + ex + 1);
            else out[o++] = '0';
        }
    } else {
        out[o++] = digits[0];
        if (nd > 1) o += (size_t)snprintf(out + o, sizeof out - o, ".%s", digits + 1);
        o += (size_t)snprintf(out + o, sizeof out - o, "e%c%02d", ex < 0 ? '-' : '+', ex < 0 ? -ex : ex);
    }
    out[o] = 0;
    hmoe_strbuf_add(b, out);
}

void hmoe_text_strip(const char **p, size_t *n) {
    struct sv s = trim((struct sv){*p, *n});
    *p = s.p;
    *n = s.n;
}

/* One parameter value: strings raw, objects/arrays as tojson, other scalars as Python's
 * str() (the template's `| string`). */
void hmoe_text_py_value(struct hmoe_strbuf *b, const struct hmoe_json *v) {
    switch (v->kind) {
    case HMOE_JSON_STRING: hmoe_strbuf_addn(b, v->str, v->str_len); break;
    case HMOE_JSON_BOOL: hmoe_strbuf_add(b, v->b ? "True" : "False"); break;
    case HMOE_JSON_NULL: hmoe_strbuf_add(b, "None"); break;
    case HMOE_JSON_NUMBER:
        if (strpbrk(v->str, ".eE")) py_float(b, v->num);
        else hmoe_strbuf_add(b, v->str);
        break;
    default: {
        char *s = hmoe_json_to_hf_string(v);
        if (!s) b->oom = true;
        else hmoe_strbuf_add(b, s);
        free(s);
    }
    }
}

/* §2.3: "<tool_call>\n<function=NAME>\n" + "<parameter=K>\nV\n</parameter>\n"... The
 * arguments text (a JSON object, or the JSON-encoded string OpenAI sends) is parsed. */
static enum hmoe_status tool_calls(struct hmoe_strbuf *b, const struct hmoe_chat_msg *m, size_t idx, struct sv content,
                                   struct hmoe_err *err) {
    for (size_t k = 0; k < m->n_tool_calls; k++) {
        const struct hmoe_chat_tool_call *tc = &m->tool_calls[k];
        struct hmoe_err perr = {0};
        struct hmoe_json *args = hmoe_json_parse(tc->arguments, strlen(tc->arguments), &perr);
        if (!args || args->kind != HMOE_JSON_OBJECT) {
            hmoe_json_free(args);
            return HMOE_RAISE(err, HMOE_ERR_ARG,
                              "message %zu: tool call %zu: the Qwen3.5 format needs the arguments as a JSON object "
                              "(got '%.60s')",
                              idx, k, tc->arguments);
        }
        if (k > 0) hmoe_strbuf_add(b, "\n<tool_call>\n<function=");
        else if (trim(content).n) hmoe_strbuf_add(b, "\n\n<tool_call>\n<function=");
        else hmoe_strbuf_add(b, "<tool_call>\n<function=");
        hmoe_strbuf_add(b, tc->name);
        hmoe_strbuf_add(b, ">\n");
        for (size_t i = 0; i < args->n; i++) {
            hmoe_strbuf_add(b, "<parameter=");
            hmoe_strbuf_add(b, args->keys[i]);
            hmoe_strbuf_add(b, ">\n");
            hmoe_text_py_value(b, args->items[i]);
            hmoe_strbuf_add(b, "\n</parameter>\n");
        }
        hmoe_strbuf_add(b, "</function>\n</tool_call>");
        hmoe_json_free(args);
    }
    return HMOE_OK;
}

/* The system turn with the tool list (§2.3): tools first, then the system text. */
static void tools_header(struct hmoe_strbuf *b, const struct hmoe_chat_msg *msgs, const struct hmoe_chat_opts *o) {
    hmoe_strbuf_add(b, "<|im_start|>system\n# Tools\n\nYou have access to the following functions:\n\n<tools>");
    for (size_t i = 0; i < o->n_tools; i++) {
        hmoe_strbuf_add(b, "\n");
        hmoe_strbuf_add(b, o->tools[i]);
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
    if (role_is(&msgs[0], "system")) {
        struct sv sys = trim(sv_of(msgs[0].content));
        if (sys.n) {
            hmoe_strbuf_add(b, "\n\n");
            add_sv(b, sys);
        }
    }
    hmoe_strbuf_add(b, "<|im_end|>\n");
}

enum hmoe_status hmoe_text_render_qwen35(struct hmoe_strbuf *b, const struct hmoe_chat_msg *msgs, size_t n,
                                         const struct hmoe_chat_opts *o, struct hmoe_err *err) {
    if (o->n_tools > 0) tools_header(b, msgs, o);
    else if (role_is(&msgs[0], "system")) {
        hmoe_strbuf_add(b, "<|im_start|>system\n");
        add_sv(b, trim(sv_of(msgs[0].content)));
        hmoe_strbuf_add(b, "<|im_end|>\n");
    }
    /* The last user message that is not a wrapped tool result; the template refuses a
     * conversation without one. */
    size_t last_query = n;
    for (size_t i = n; i-- > 0 && last_query == n;) {
        struct sv c = trim(sv_of(msgs[i].content));
        if (role_is(&msgs[i], "user") && !(sv_starts(c, "<tool_response>") && sv_ends(c, "</tool_response>")))
            last_query = i;
    }
    if (last_query == n)
        return HMOE_RAISE(err, HMOE_ERR_ARG, "the Qwen3.5 template needs a user message (none found)");
    for (size_t i = 0; i < n; i++) {
        const struct hmoe_chat_msg *m = &msgs[i];
        struct sv content = trim(sv_of(m->content));
        if (role_is(m, "system")) {
            if (i > 0)
                return HMOE_RAISE(err, HMOE_ERR_ARG,
                                  "message %zu: the Qwen3.5 template allows a system message only at the beginning", i);
        } else if (role_is(m, "user")) {
            hmoe_strbuf_add(b, "<|im_start|>user\n");
            add_sv(b, content);
            hmoe_strbuf_add(b, "<|im_end|>\n");
        } else if (role_is(m, "assistant")) {
            struct sv reasoning = {"", 0};
            if (m->reasoning_content) reasoning = sv_of(m->reasoning_content);
            else if (find(content, "</think>", false)) {
                /* content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n') */
                const char *close = find(content, "</think>", false);
                struct sv before = rstrip_nl((struct sv){content.p, (size_t)(close - content.p)});
                const char *open = find(before, "<think>", true);
                if (open) before = (struct sv){open + 7, (size_t)(before.p + before.n - open - 7)};
                reasoning = lstrip_nl(before);
                const char *last_close = find(content, "</think>", true) + 8;
                content = lstrip_nl((struct sv){last_close, (size_t)(content.p + content.n - last_close)});
            }
            reasoning = trim(reasoning);
            hmoe_strbuf_add(b, "<|im_start|>assistant\n");
            if (o->preserve_thinking || i > last_query) {
                hmoe_strbuf_add(b, "<think>\n");
                add_sv(b, reasoning);
                hmoe_strbuf_add(b, "\n</think>\n\n");
            }
            add_sv(b, content);
            enum hmoe_status st = tool_calls(b, m, i, content, err);
            if (st) return st;
            hmoe_strbuf_add(b, "<|im_end|>\n");
        } else if (role_is(m, "tool")) {
            /* loop.previtem is undefined for the first message: no header then. */
            if (i > 0 && !role_is(&msgs[i - 1], "tool")) hmoe_strbuf_add(b, "<|im_start|>user");
            hmoe_strbuf_add(b, "\n<tool_response>\n");
            add_sv(b, content);
            hmoe_strbuf_add(b, "\n</tool_response>");
            if (i == n - 1 || !role_is(&msgs[i + 1], "tool")) hmoe_strbuf_add(b, "<|im_end|>\n");
        }
    }
    if (o->add_generation_prompt)
        hmoe_strbuf_add(b, o->enable_thinking ? "<|im_start|>assistant\n<think>\n"
                                              : "<|im_start|>assistant\n<think>\n\n</think>\n\n");
    return HMOE_OK;
}
