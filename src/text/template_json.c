/* template_json.c — an OpenAI-style conversation {"messages": [...], "tools": [...]} (as
 * parsed by hmoe/json.h) into hmoe_chat_msg structs, and the HF `tojson` writer the Qwen3
 * template uses for tools and non-string tool-call arguments (chat-templates.md §1.3:
 * ", " and ": " separators, key order kept, non-ASCII kept as UTF-8). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hmoe/json.h"
#include "hmoe/text.h"
#include "text/strbuf_impl.h"
#include "text/toolcall_impl.h"

/* Python json.dumps(ensure_ascii=False) string escaping, the quotes left out (also used by the
 * streamed arguments of toolcall_scan.c, which must write what this file writes). */
void hmoe_hf_str_bytes(struct hmoe_strbuf *b, const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        char esc[8];
        switch (c) {
        case '"': hmoe_strbuf_add(b, "\\\""); break;
        case '\\': hmoe_strbuf_add(b, "\\\\"); break;
        case '\n': hmoe_strbuf_add(b, "\\n"); break;
        case '\r': hmoe_strbuf_add(b, "\\r"); break;
        case '\t': hmoe_strbuf_add(b, "\\t"); break;
        case '\b': hmoe_strbuf_add(b, "\\b"); break;
        case '\f': hmoe_strbuf_add(b, "\\f"); break;
        default:
            if (c < 0x20) {
                snprintf(esc, sizeof esc, "\\u%04x", c);
                hmoe_strbuf_add(b, esc);
            } else {
                hmoe_strbuf_addn(b, (const char *)&s[i], 1);
            }
        }
    }
}

static void tojson_str(struct hmoe_strbuf *b, const char *s, size_t n) {
    hmoe_strbuf_add(b, "\"");
    hmoe_hf_str_bytes(b, s, n);
    hmoe_strbuf_add(b, "\"");
}

static void tojson(struct hmoe_strbuf *b, const struct hmoe_json *j) {
    switch (j->kind) {
    case HMOE_JSON_NULL: hmoe_strbuf_add(b, "null"); break;
    case HMOE_JSON_BOOL: hmoe_strbuf_add(b, j->b ? "true" : "false"); break;
    case HMOE_JSON_NUMBER: hmoe_strbuf_add(b, j->str); break; /* the source text, as written */
    case HMOE_JSON_STRING: tojson_str(b, j->str, j->str_len); break;
    case HMOE_JSON_ARRAY:
        hmoe_strbuf_add(b, "[");
        for (size_t i = 0; i < j->n; i++) {
            if (i) hmoe_strbuf_add(b, ", ");
            tojson(b, j->items[i]);
        }
        hmoe_strbuf_add(b, "]");
        break;
    case HMOE_JSON_OBJECT:
        hmoe_strbuf_add(b, "{");
        for (size_t i = 0; i < j->n; i++) {
            if (i) hmoe_strbuf_add(b, ", ");
            tojson_str(b, j->keys[i], strlen(j->keys[i]));
            hmoe_strbuf_add(b, ": ");
            tojson(b, j->items[i]);
        }
        hmoe_strbuf_add(b, "}");
        break;
    }
}

char *hmoe_json_to_hf_string(const struct hmoe_json *j) {
    struct hmoe_strbuf b = {0};
    tojson(&b, j);
    if (b.oom) {
        free(b.s);
        return NULL;
    }
    return b.s;
}

void hmoe_chat_conv_free(struct hmoe_chat_conv *c) {
    if (!c) return;
    for (size_t i = 0; i < c->n_owned; i++) free(c->owned[i]);
    for (size_t i = 0; i < c->n_tools; i++) free(c->tools[i]);
    free(c->owned);
    free(c->tools);
    free(c->msgs);
    free(c->calls);
    memset(c, 0, sizeof *c);
}

/* A member that must be a string (or absent / null when `optional`). */
static enum hmoe_status get_string(const struct hmoe_json *obj, const char *key, bool optional, size_t idx,
                                   const char **out, struct hmoe_err *err) {
    const struct hmoe_json *j = hmoe_json_get(obj, key);
    *out = NULL;
    if (!j || j->kind == HMOE_JSON_NULL) {
        if (optional) return HMOE_OK;
        return HMOE_RAISE(err, HMOE_ERR_ARG, "message %zu: missing \"%s\"", idx, key);
    }
    if (j->kind != HMOE_JSON_STRING)
        return HMOE_RAISE(err, HMOE_ERR_ARG, "message %zu: \"%s\" must be a string (content arrays are not supported)",
                          idx, key);
    if (strlen(j->str) != j->str_len)
        return HMOE_RAISE(err, HMOE_ERR_ARG, "message %zu: \"%s\" contains a NUL character", idx, key);
    *out = j->str;
    return HMOE_OK;
}

enum hmoe_status hmoe_chat_conv_from_json(const struct hmoe_json *root, struct hmoe_chat_conv *c,
                                          struct hmoe_err *err) {
    memset(c, 0, sizeof *c);
    const struct hmoe_json *msgs = hmoe_json_get(root, "messages");
    if (!msgs || msgs->kind != HMOE_JSON_ARRAY)
        return HMOE_RAISE(err, HMOE_ERR_ARG, "the conversation needs a \"messages\" array "
                          "({\"messages\": [{\"role\": \"user\", \"content\": \"...\"}]})");
    const struct hmoe_json *tools = hmoe_json_get(root, "tools");
    if (tools && tools->kind != HMOE_JSON_ARRAY && tools->kind != HMOE_JSON_NULL)
        return HMOE_RAISE(err, HMOE_ERR_ARG, "\"tools\" must be an array of tool definitions");
    size_t n_calls = 0;
    for (size_t i = 0; i < msgs->n; i++) {
        const struct hmoe_json *tc = hmoe_json_get(msgs->items[i], "tool_calls");
        if (tc && tc->kind == HMOE_JSON_ARRAY) n_calls += tc->n;
    }
    c->msgs = calloc(msgs->n ? msgs->n : 1, sizeof *c->msgs);
    c->calls = calloc(n_calls ? n_calls : 1, sizeof *c->calls);
    c->owned = calloc(n_calls ? n_calls : 1, sizeof *c->owned);
    size_t n_tools = tools && tools->kind == HMOE_JSON_ARRAY ? tools->n : 0;
    c->tools = calloc(n_tools ? n_tools : 1, sizeof *c->tools);
    if (!c->msgs || !c->calls || !c->owned || !c->tools) goto nomem;
    for (size_t i = 0; i < n_tools; i++) {
        if (!(c->tools[i] = hmoe_json_to_hf_string(tools->items[i]))) goto nomem;
        c->n_tools++;
    }
    size_t call_at = 0;
    enum hmoe_status st;
    for (size_t i = 0; i < msgs->n; i++) {
        const struct hmoe_json *m = msgs->items[i];
        struct hmoe_chat_msg *out = &c->msgs[i];
        if (m->kind != HMOE_JSON_OBJECT) {
            st = HMOE_RAISE(err, HMOE_ERR_ARG, "message %zu is not an object", i);
            goto fail;
        }
        if ((st = get_string(m, "role", false, i, &out->role, err)) != HMOE_OK ||
            (st = get_string(m, "content", true, i, &out->content, err)) != HMOE_OK ||
            (st = get_string(m, "reasoning_content", true, i, &out->reasoning_content, err)) != HMOE_OK)
            goto fail;
        if (!out->content) out->content = ""; /* null content (tool-call turns) renders as empty */
        const struct hmoe_json *tc = hmoe_json_get(m, "tool_calls");
        if (tc && tc->kind != HMOE_JSON_ARRAY && tc->kind != HMOE_JSON_NULL) {
            st = HMOE_RAISE(err, HMOE_ERR_ARG, "message %zu: \"tool_calls\" must be an array", i);
            goto fail;
        }
        out->tool_calls = &c->calls[call_at];
        for (size_t k = 0; tc && tc->kind == HMOE_JSON_ARRAY && k < tc->n; k++) {
            const struct hmoe_json *call = tc->items[k];
            const struct hmoe_json *fn = hmoe_json_get(call, "function"); /* the template unwraps .function */
            if (fn && fn->kind == HMOE_JSON_OBJECT) call = fn;
            const struct hmoe_json *name = hmoe_json_get(call, "name"), *args = hmoe_json_get(call, "arguments");
            if (!name || name->kind != HMOE_JSON_STRING || !args) {
                st = HMOE_RAISE(err, HMOE_ERR_ARG, "message %zu: tool call %zu needs a string \"name\" and "
                                "\"arguments\"", i, k);
                goto fail;
            }
            struct hmoe_chat_tool_call *dst = &c->calls[call_at++];
            dst->name = name->str;
            if (args->kind == HMOE_JSON_STRING) dst->arguments = args->str; /* a string is written verbatim */
            else {
                char *s = hmoe_json_to_hf_string(args);
                if (!s) goto nomem;
                c->owned[c->n_owned++] = s;
                dst->arguments = s;
            }
            out->n_tool_calls++;
        }
        c->n_msgs++;
    }
    return HMOE_OK;
nomem:
    st = HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory reading the conversation");
fail:
    hmoe_chat_conv_free(c);
    return st;
}
