/* chat_conv.c — the conversation of `hmoe chat`: messages owned as plain strings, edited
 * by the chat commands (/clear, /system, /regen, --ctx-drop-oldest), rendered with
 * the model's chat format (hmoe_chat_fmt_render), saved and loaded in the OpenAI shape
 * {"messages": [...]} that `hmoe template -i` also reads (json.h, text.h).
 */
#include <stdlib.h>
#include <string.h>

#include "chat_impl.h"
#include "hmoe/json.h"

static char *dup_n(const char *s, size_t n) {
    char *d = malloc(n + 1);
    if (!d) return NULL;
    memcpy(d, s, n);
    d[n] = 0;
    return d;
}

static void msg_free(struct hmoe_cli_msg *m) {
    free(m->role);
    free(m->content);
}

void hmoe_cli_conv_free(struct hmoe_cli_conv *c) {
    for (size_t i = 0; i < c->n; i++) msg_free(&c->msgs[i]);
    free(c->msgs);
    memset(c, 0, sizeof *c);
}

/* Insert a message at index `at` (0 .. n). */
static bool insert_at(struct hmoe_cli_conv *c, size_t at, const char *role, const char *content, size_t len) {
    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 16;
        struct hmoe_cli_msg *m = realloc(c->msgs, cap * sizeof *m);
        if (!m) return false;
        c->msgs = m;
        c->cap = cap;
    }
    struct hmoe_cli_msg m = {dup_n(role, strlen(role)), dup_n(content, len)};
    if (!m.role || !m.content) {
        msg_free(&m);
        return false;
    }
    memmove(&c->msgs[at + 1], &c->msgs[at], (c->n - at) * sizeof m);
    c->msgs[at] = m;
    c->n++;
    return true;
}

bool hmoe_cli_conv_add(struct hmoe_cli_conv *c, const char *role, const char *content, size_t len) {
    return insert_at(c, c->n, role, content, len);
}

/* Remove messages [from, to). */
static void remove_range(struct hmoe_cli_conv *c, size_t from, size_t to) {
    for (size_t i = from; i < to; i++) msg_free(&c->msgs[i]);
    memmove(&c->msgs[from], &c->msgs[to], (c->n - to) * sizeof c->msgs[0]);
    c->n -= to - from;
}

void hmoe_cli_conv_pop(struct hmoe_cli_conv *c) {
    if (c->n) remove_range(c, c->n - 1, c->n);
}

static bool has_system(const struct hmoe_cli_conv *c) { return c->n && strcmp(c->msgs[0].role, "system") == 0; }

void hmoe_cli_conv_clear(struct hmoe_cli_conv *c) { remove_range(c, has_system(c) ? 1 : 0, c->n); }

bool hmoe_cli_conv_set_system(struct hmoe_cli_conv *c, const char *text) {
    if (has_system(c)) remove_range(c, 0, 1);
    if (!*text) return true;
    return insert_at(c, 0, "system", text, strlen(text));
}

bool hmoe_cli_conv_drop_oldest(struct hmoe_cli_conv *c) {
    size_t first = has_system(c) ? 1 : 0, next = first + 1;
    while (next < c->n && strcmp(c->msgs[next].role, "user") != 0) next++;
    if (next >= c->n) return false; /* the oldest exchange is the current one */
    remove_range(c, first, next);
    return true;
}

enum hmoe_status hmoe_cli_conv_render(const struct hmoe_cli_conv *c, const struct hmoe_chat_fmt *fmt,
                                      bool add_generation_prompt, bool enable_thinking, char **out,
                                      struct hmoe_err *err) {
    struct hmoe_chat_msg *m = calloc(c->n ? c->n : 1, sizeof *m);
    char **owned = calloc(2 * (c->n ? c->n : 1), sizeof *owned);
    enum hmoe_status st = HMOE_OK;
    if (!m || !owned) st = HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory");
    for (size_t i = 0; !st && i < c->n; i++) {
        m[i].role = c->msgs[i].role;
        m[i].content = c->msgs[i].content;
        /* A gpt-oss answer is kept as generated (channel headers included); the harmony
         * template takes its final text as content and its analysis as the reasoning. */
        if (hmoe_chat_fmt_family(fmt) == HMOE_CHAT_TEMPLATE_HARMONY && strcmp(m[i].role, "assistant") == 0) {
            struct hmoe_harmony_reply r;
            hmoe_chat_harmony_reply(c->msgs[i].content, &r);
            owned[2 * i] = dup_n(r.final.p ? r.final.p : "", r.final.n);
            owned[2 * i + 1] = r.analysis.p ? dup_n(r.analysis.p, r.analysis.n) : NULL;
            if (!owned[2 * i] || (r.analysis.p && !owned[2 * i + 1])) st = HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory");
            m[i].content = owned[2 * i];
            m[i].reasoning_content = owned[2 * i + 1];
        }
    }
    struct hmoe_chat_opts o = {.add_generation_prompt = add_generation_prompt, .enable_thinking = enable_thinking};
    if (!st) st = hmoe_chat_fmt_render(fmt, m, c->n, &o, out, err);
    for (size_t i = 0; owned && i < 2 * c->n; i++) free(owned[i]);
    free(owned);
    free(m);
    return st;
}

enum hmoe_status hmoe_cli_conv_save(const struct hmoe_cli_conv *c, const char *path, struct hmoe_err *err) {
    FILE *f = fopen(path, "w");
    if (!f) return HMOE_RAISE(err, HMOE_ERR_IO, "%s: cannot create the file", path);
    fputs("{\"messages\": [", f);
    for (size_t i = 0; i < c->n; i++) {
        fputs(i ? ",\n  {\"role\": " : "\n  {\"role\": ", f);
        hmoe_json_write_str(f, c->msgs[i].role, strlen(c->msgs[i].role));
        fputs(", \"content\": ", f);
        hmoe_json_write_str(f, c->msgs[i].content, strlen(c->msgs[i].content));
        fputs("}", f);
    }
    fputs(c->n ? "\n]}\n" : "]}\n", f);
    if (ferror(f) | (fclose(f) != 0)) return HMOE_RAISE(err, HMOE_ERR_IO, "%s: error writing the file", path);
    return HMOE_OK;
}

enum hmoe_status hmoe_cli_conv_load(struct hmoe_cli_conv *c, const char *path, struct hmoe_err *err) {
    struct hmoe_json *j = hmoe_json_parse_file(path, err);
    if (!j) return err ? err->code : HMOE_ERR_FORMAT;
    struct hmoe_chat_conv conv;
    enum hmoe_status st = hmoe_chat_conv_from_json(j, &conv, err);
    if (st) {
        hmoe_json_free(j);
        return st;
    }
    struct hmoe_cli_conv next = {0};
    /* Loading replaces the conversation, so an empty file would silently lose it: refuse. */
    if (conv.n_msgs == 0)
        st = HMOE_RAISE(err, HMOE_ERR_FORMAT, "%s: \"messages\" is empty; nothing loaded (the current conversation "
                        "is kept)", path);
    const struct hmoe_json *items = hmoe_json_get(j, "messages");
    for (size_t i = 0; i < conv.n_msgs && !st; i++) {
        const struct hmoe_chat_msg *m = &conv.msgs[i];
        const bool known = strcmp(m->role, "system") == 0 || strcmp(m->role, "user") == 0 ||
                           strcmp(m->role, "assistant") == 0;
        if (!known || m->n_tool_calls) {
            st = HMOE_RAISE(err, m->n_tool_calls || !strcmp(m->role, "tool") ? HMOE_ERR_UNSUPPORTED : HMOE_ERR_FORMAT,
                            "%s: message %zu %s '%s'; hmoe chat keeps messages whose role is system, user or "
                            "assistant, without tool calls", path, i, m->n_tool_calls ? "has tool calls, role" : "has role",
                            m->role);
            break;
        }
        const struct hmoe_json *content = hmoe_json_get(items->items[i], "content");
        if (!content || content->kind != HMOE_JSON_STRING) {
            st = HMOE_RAISE(err, HMOE_ERR_FORMAT, "%s: message %zu (%s) has no \"content\" string", path, i, m->role);
            break;
        }
        /* A separate reasoning_content goes back into the content as the model wrote it. */
        const char *r = m->reasoning_content;
        size_t rl = r ? strlen(r) : 0, cl = strlen(m->content);
        char *text = malloc(rl + cl + 32);
        if (!text) {
            st = HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory");
            break;
        }
        if (r && *r) snprintf(text, rl + cl + 32, "<think>\n%s\n</think>\n\n%s", r, m->content);
        else memcpy(text, m->content, cl + 1);
        if (!hmoe_cli_conv_add(&next, m->role, text, strlen(text))) st = HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory");
        free(text);
    }
    hmoe_chat_conv_free(&conv);
    hmoe_json_free(j);
    if (st) {
        hmoe_cli_conv_free(&next);
        return st;
    }
    hmoe_cli_conv_free(c);
    *c = next;
    return HMOE_OK;
}
