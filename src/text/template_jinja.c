/* template_jinja.c — the chat format of a model (struct hmoe_chat_fmt, text.h): the file's own
 * Jinja template (tokenizer.chat_template, or --chat-template-file / a template string given
 * to --chat-template) rendered by the interpreter (jinja.h), with the built-in families as the
 * fallback for a file without a template, for a template the interpreter rejects (a warning
 * with its line:col), and behind --chat-template NAME. --chat-template-kwargs become template
 * variables that override the ones set here (bos_token, eos_token, enable_thinking, ...).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hmoe/jinja.h"
#include "hmoe/json.h"
#include "text/strbuf_impl.h"
#include "text/text_impl.h"

struct hmoe_chat_fmt {
    struct hmoe_jinja *jinja;          /* NULL: the built-in family renders */
    enum hmoe_chat_template family;    /* the built-in family, or the one the template is recognised as */
    char *bos_token, *eos_token;
    struct hmoe_json *kwargs;          /* --chat-template-kwargs, or NULL */
};

static char *dup_str(const char *s) {
    if (!s) return NULL;
    size_t n = strlen(s);
    char *d = malloc(n + 1);
    if (d) memcpy(d, s, n + 1);
    return d;
}

void hmoe_chat_fmt_free(struct hmoe_chat_fmt *f) {
    if (!f) return;
    hmoe_jinja_free(f->jinja);
    free(f->bos_token);
    free(f->eos_token);
    hmoe_json_free(f->kwargs);
    free(f);
}

/* A template that compiles but cannot render a plain exchange (a construct the interpreter
 * lacks) falls back like one that does not compile; raise_exception is the template's own
 * verdict on a conversation and is left to the real render. */
static enum hmoe_status trial_render(const struct hmoe_chat_fmt *f, struct hmoe_err *err) {
    static const char conv[] = "[{\"role\": \"user\", \"content\": \"Hello\"}]";
    struct hmoe_json *msgs = hmoe_json_parse(conv, sizeof conv - 1, err);
    if (!msgs) return HMOE_ERR_INTERNAL;
    struct hmoe_jinja_chat chat = {.messages = msgs, .add_generation_prompt = true, .enable_thinking = true,
                                   .bos_token = f->bos_token, .eos_token = f->eos_token, .kwargs = f->kwargs};
    char *out = NULL;
    enum hmoe_status st = hmoe_jinja_render_chat(f->jinja, &chat, NULL, &out, err);
    free(out);
    hmoe_json_free(msgs);
    return st == HMOE_ERR_ARG ? HMOE_OK : st;
}

enum hmoe_status hmoe_chat_fmt_open(const struct hmoe_chat_fmt_src *src, struct hmoe_chat_fmt **out, char *warning,
                                    size_t warning_cap, struct hmoe_err *err) {
    *out = NULL;
    if (warning && warning_cap) warning[0] = 0;
    struct hmoe_chat_fmt *f = calloc(1, sizeof *f);
    if (!f) return HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory");
    f->bos_token = dup_str(src->bos_token);
    f->eos_token = dup_str(src->eos_token);
    if (src->kwargs_json) {
        struct hmoe_err jerr = {0};
        f->kwargs = hmoe_json_parse(src->kwargs_json, strlen(src->kwargs_json), &jerr);
        if (!f->kwargs || f->kwargs->kind != HMOE_JSON_OBJECT) {
            hmoe_chat_fmt_free(f);
            return HMOE_RAISE(err, HMOE_ERR_ARG, "--chat-template-kwargs: expected a JSON object such as "
                              "'{\"enable_thinking\": false}'%s%s", jerr.msg[0] ? ": " : "", jerr.msg);
        }
    }
    /* --chat-template NAME: a built-in family; any other text with a Jinja tag is a template. */
    const char *text = src->template_text, *origin = src->template_origin ? src->template_origin : "the chat template";
    if (src->name) {
        f->family = hmoe_chat_template_from_name(src->name);
        if (f->family != HMOE_CHAT_TEMPLATE_UNKNOWN) { *out = f; return HMOE_OK; }
        if (!strstr(src->name, "{%") && !strstr(src->name, "{{")) {
            hmoe_chat_fmt_free(f);
            return HMOE_RAISE(err, HMOE_ERR_ARG, "unknown chat template '%s' (built-in: chatml, qwen3, qwen35, nemotron; "
                              "or a Jinja template: --chat-template-file FILE)", src->name);
        }
        text = src->name;
        origin = "--chat-template";
    }
    f->family = hmoe_chat_template_detect(text);
    if (text) {
        struct hmoe_err jerr = {0};
        if (hmoe_jinja_compile(text, strlen(text), &f->jinja, &jerr) == HMOE_OK && trial_render(f, &jerr) == HMOE_OK) {
            *out = f;
            return HMOE_OK;
        }
        hmoe_jinja_free(f->jinja);
        f->jinja = NULL;
        if (src->template_required) { /* a template the user gave: its error is the answer */
            hmoe_chat_fmt_free(f);
            return HMOE_RAISE(err, HMOE_ERR_FORMAT, "%s: %s", origin, jerr.msg);
        }
        if (warning)
            snprintf(warning, warning_cap, "%s: %s; rendering with the built-in %s format instead", origin, jerr.msg,
                     f->family != HMOE_CHAT_TEMPLATE_UNKNOWN         ? hmoe_chat_template_name(f->family)
                     : src->default_family != HMOE_CHAT_TEMPLATE_UNKNOWN ? hmoe_chat_template_name(src->default_family)
                                                                        : "chatml");
    }
    if (f->family == HMOE_CHAT_TEMPLATE_UNKNOWN) {
        /* No template (a synthetic file): the architecture's format where it has one. */
        const bool has_default = src->default_family != HMOE_CHAT_TEMPLATE_UNKNOWN;
        f->family = has_default ? src->default_family : HMOE_CHAT_TEMPLATE_CHATML;
        if (!text && !has_default && warning)
            snprintf(warning, warning_cap, "the model has no chat template (tokenizer.chat_template); using plain "
                     "ChatML (choose with --chat-template NAME or --chat-template-file FILE)");
    }
    *out = f;
    return HMOE_OK;
}

const char *hmoe_chat_fmt_name(const struct hmoe_chat_fmt *f) {
    return f->jinja ? "jinja" : hmoe_chat_template_name(f->family);
}

enum hmoe_chat_template hmoe_chat_fmt_family(const struct hmoe_chat_fmt *f) { return f->family; }

/* The built-in families read two template variables of --chat-template-kwargs (and of a
 * request's chat_template_kwargs, which come later and win): enable_thinking and harmony's
 * reasoning_effort. The strings point into the JSON, which outlives the render. */
static void builtin_kwargs(const struct hmoe_json *kw, struct hmoe_chat_opts *o) {
    for (size_t i = 0; kw && kw->kind == HMOE_JSON_OBJECT && i < kw->n; i++) {
        const struct hmoe_json *v = kw->items[i];
        if (strcmp(kw->keys[i], "enable_thinking") == 0 && v->kind == HMOE_JSON_BOOL) o->enable_thinking = v->b;
        else if (strcmp(kw->keys[i], "reasoning_effort") == 0 && v->kind == HMOE_JSON_STRING) o->reasoning_effort = v->str;
    }
}

enum hmoe_status hmoe_chat_fmt_render_json(const struct hmoe_chat_fmt *f, const struct hmoe_json *messages,
                                           const struct hmoe_json *tools, const struct hmoe_chat_opts *opts,
                                           const struct hmoe_json *kwargs, char **out, struct hmoe_err *err) {
    *out = NULL;
    static const struct hmoe_chat_opts dflt = {.add_generation_prompt = true, .enable_thinking = true};
    const struct hmoe_chat_opts *o = opts ? opts : &dflt;
    if (!messages || messages->kind != HMOE_JSON_ARRAY)
        return HMOE_RAISE(err, HMOE_ERR_ARG, "the conversation needs a \"messages\" array");
    if (kwargs && kwargs->kind != HMOE_JSON_OBJECT)
        return HMOE_RAISE(err, HMOE_ERR_ARG, "chat_template_kwargs must be a JSON object");
    if (f->jinja) {
        /* The format's kwargs, then the request's: a later member wins (the renderer sets
         * variables in order), so the two lists are joined without copying a value. */
        size_t n1 = f->kwargs ? f->kwargs->n : 0, n2 = kwargs ? kwargs->n : 0;
        struct hmoe_json joined = {.kind = HMOE_JSON_OBJECT, .n = n1 + n2};
        joined.items = calloc(n1 + n2 + 1, sizeof *joined.items);
        joined.keys = calloc(n1 + n2 + 1, sizeof *joined.keys);
        if (!joined.items || !joined.keys) {
            free(joined.items);
            free(joined.keys);
            return HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory");
        }
        for (size_t i = 0; i < n1; i++) joined.items[i] = f->kwargs->items[i], joined.keys[i] = f->kwargs->keys[i];
        for (size_t i = 0; i < n2; i++) joined.items[n1 + i] = kwargs->items[i], joined.keys[n1 + i] = kwargs->keys[i];
        /* Messages are adjusted the way llama.cpp prepares them, in shallow copies of the ones
         * that change (everything else is shared):
         * - "content": null (what API clients send beside tool_calls) reads as "": templates test
         *   `'</think>' in content`, which null would fail;
         * - harmony templates read an assistant turn's analysis from "thinking": a string
         *   reasoning_content is copied there, and a turn with tool calls drops its content (the
         *   call is the turn). */
        static char empty_text[] = "";
        static struct hmoe_json empty_str = {.kind = HMOE_JSON_STRING, .str = empty_text};
        static char thinking_key[] = "thinking";
        const bool harmony = f->family == HMOE_CHAT_TEMPLATE_HARMONY;
        struct hmoe_json msgs_copy = *messages;
        struct hmoe_json *objs = calloc(messages->n + 1, sizeof *objs);
        struct hmoe_json **msg_items = calloc(messages->n + 1, sizeof *msg_items);
        struct hmoe_json ***obj_items = calloc(messages->n + 1, sizeof *obj_items);
        char ***obj_keys = calloc(messages->n + 1, sizeof *obj_keys);
        if (!objs || !msg_items || !obj_items || !obj_keys) {
            free(objs), free(msg_items), free(obj_items), free(obj_keys), free(joined.items), free(joined.keys);
            return HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory");
        }
        msgs_copy.items = msg_items;
        for (size_t i = 0; i < messages->n; i++) {
            struct hmoe_json *m = messages->items[i];
            msg_items[i] = m;
            if (m->kind != HMOE_JSON_OBJECT) continue;
            const struct hmoe_json *c = hmoe_json_get(m, "content");
            const struct hmoe_json *rc = harmony ? hmoe_json_get(m, "reasoning_content") : NULL;
            const struct hmoe_json *tc = hmoe_json_get(m, "tool_calls");
            const bool null_content = c && c->kind == HMOE_JSON_NULL;
            const bool add_thinking = rc && rc->kind == HMOE_JSON_STRING && !hmoe_json_get(m, "thinking");
            const bool drop_content = add_thinking && tc && tc->kind == HMOE_JSON_ARRAY && tc->n > 0;
            if (!null_content && !add_thinking) continue;
            obj_items[i] = calloc(m->n + 1, sizeof *obj_items[i]);
            obj_keys[i] = calloc(m->n + 1, sizeof *obj_keys[i]);
            if (!obj_items[i] || !obj_keys[i]) continue; /* out of memory: left as it is */
            size_t n = 0;
            for (size_t k = 0; k < m->n; k++) {
                const bool is_content = strcmp(m->keys[k], "content") == 0;
                if (is_content && drop_content) continue;
                obj_keys[i][n] = m->keys[k];
                obj_items[i][n++] = is_content && null_content ? &empty_str : m->items[k];
            }
            if (add_thinking) obj_keys[i][n] = thinking_key, obj_items[i][n++] = (struct hmoe_json *)rc;
            objs[i] = *m;
            objs[i].n = n;
            objs[i].items = obj_items[i];
            objs[i].keys = obj_keys[i];
            msg_items[i] = &objs[i];
        }
        struct hmoe_jinja_chat chat = {.messages = &msgs_copy, .tools = tools && tools->n ? tools : NULL,
                                       .add_generation_prompt = o->add_generation_prompt,
                                       .enable_thinking = o->enable_thinking, .bos_token = f->bos_token,
                                       .eos_token = f->eos_token, .kwargs = &joined};
        enum hmoe_status st = hmoe_jinja_render_chat(f->jinja, &chat, NULL, out, err);
        for (size_t i = 0; i < messages->n; i++) free(obj_items[i]), free(obj_keys[i]);
        free(obj_items);
        free(obj_keys);
        free(msg_items);
        free(objs);
        free(joined.items);
        free(joined.keys);
        return st;
    }
    struct hmoe_json conv_obj = {.kind = HMOE_JSON_OBJECT};
    struct hmoe_json *items[2] = {(struct hmoe_json *)messages, (struct hmoe_json *)tools};
    char *keys[2] = {"messages", "tools"};
    conv_obj.n = tools ? 2 : 1;
    conv_obj.items = items;
    conv_obj.keys = keys;
    struct hmoe_chat_conv conv;
    enum hmoe_status st = hmoe_chat_conv_from_json(&conv_obj, &conv, err);
    if (st != HMOE_OK) return st;
    struct hmoe_chat_opts co = *o;
    builtin_kwargs(f->kwargs, &co);
    builtin_kwargs(kwargs, &co);
    co.tools = (const char *const *)conv.tools;
    co.n_tools = conv.n_tools;
    st = hmoe_chat_render(f->family, conv.msgs, conv.n_msgs, &co, out, err);
    hmoe_chat_conv_free(&conv);
    return st;
}

/* JSON text of a string (for messages built in memory). */
static void add_json_str(struct hmoe_strbuf *b, const char *s) {
    hmoe_strbuf_add(b, "\"");
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        char esc[8];
        if (c == '"' || c == '\\') { esc[0] = '\\'; esc[1] = (char)c; hmoe_strbuf_addn(b, esc, 2); }
        else if (c < 0x20) { snprintf(esc, sizeof esc, "\\u%04x", c); hmoe_strbuf_add(b, esc); }
        else hmoe_strbuf_addn(b, s, 1);
    }
    hmoe_strbuf_add(b, "\"");
}

enum hmoe_status hmoe_chat_fmt_render(const struct hmoe_chat_fmt *f, const struct hmoe_chat_msg *msgs, size_t n,
                                      const struct hmoe_chat_opts *opts, char **out, struct hmoe_err *err) {
    *out = NULL;
    if (!f->jinja) {
        struct hmoe_chat_opts co = *opts;
        builtin_kwargs(f->kwargs, &co);
        builtin_kwargs(opts->kwargs, &co);
        return hmoe_chat_render(f->family, msgs, n, &co, out, err);
    }
    /* The messages as JSON, the shape templates read (OpenAI's); arguments that are JSON text
     * of an object become that object, as an API client sends them. */
    struct hmoe_strbuf b = {0};
    hmoe_strbuf_add(&b, "{\"messages\": [");
    for (size_t i = 0; i < n; i++) {
        const struct hmoe_chat_msg *m = &msgs[i];
        hmoe_strbuf_add(&b, i ? ", {\"role\": " : "{\"role\": ");
        add_json_str(&b, m->role ? m->role : "user");
        hmoe_strbuf_add(&b, ", \"content\": ");
        add_json_str(&b, m->content ? m->content : "");
        if (m->reasoning_content) {
            hmoe_strbuf_add(&b, ", \"reasoning_content\": ");
            add_json_str(&b, m->reasoning_content);
        }
        if (m->n_tool_calls) {
            hmoe_strbuf_add(&b, ", \"tool_calls\": [");
            for (size_t k = 0; k < m->n_tool_calls; k++) {
                const char *args = m->tool_calls[k].arguments ? m->tool_calls[k].arguments : "{}";
                struct hmoe_err jerr = {0};
                struct hmoe_json *j = hmoe_json_parse(args, strlen(args), &jerr);
                hmoe_strbuf_add(&b, k ? ", {\"type\": \"function\", \"function\": {\"name\": "
                                      : "{\"type\": \"function\", \"function\": {\"name\": ");
                add_json_str(&b, m->tool_calls[k].name ? m->tool_calls[k].name : "");
                hmoe_strbuf_add(&b, ", \"arguments\": ");
                if (j && j->kind == HMOE_JSON_OBJECT) hmoe_strbuf_add(&b, args);
                else add_json_str(&b, args);
                hmoe_json_free(j);
                hmoe_strbuf_add(&b, "}}");
            }
            hmoe_strbuf_add(&b, "]");
        }
        hmoe_strbuf_add(&b, "}");
    }
    hmoe_strbuf_add(&b, "]");
    if (opts && opts->n_tools) {
        hmoe_strbuf_add(&b, ", \"tools\": [");
        for (size_t k = 0; k < opts->n_tools; k++) {
            if (k) hmoe_strbuf_add(&b, ", ");
            hmoe_strbuf_add(&b, opts->tools[k]);
        }
        hmoe_strbuf_add(&b, "]");
    }
    hmoe_strbuf_add(&b, "}");
    if (b.oom) { free(b.s); return HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory"); }
    struct hmoe_json *conv = hmoe_json_parse(b.s, b.n, err);
    free(b.s);
    if (!conv) return err ? err->code : HMOE_ERR_INTERNAL;
    enum hmoe_status st =
        hmoe_chat_fmt_render_json(f, hmoe_json_get(conv, "messages"), hmoe_json_get(conv, "tools"), opts,
                                  opts ? opts->kwargs : NULL, out, err);
    hmoe_json_free(conv);
    return st;
}
