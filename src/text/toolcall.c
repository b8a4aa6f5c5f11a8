/* toolcall.c — generated assistant text into content, reasoning and tool calls (text.h), for the
 * families whose reasoning is a <think> block and whose calls are <tool_call> blocks
 * (chat-templates.md §1.5 Qwen3 JSON calls, §2.3 Qwen3.5 / Qwen3.6 and Nemotron-3 XML calls).
 * The whole-text form runs the streaming parser over the text in one piece, so the two cannot
 * disagree; the parser holds back only what a later byte could still turn into a tag. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/toolcall_impl.h"

static const char THINK_OPEN[] = "<think>", THINK_CLOSE[] = "</think>";
static const char CALL_OPEN[] = "<tool_call>", CALL_CLOSE[] = "</tool_call>";

enum hmoe_toolcall_format hmoe_toolcall_format_for(enum hmoe_chat_template tmpl, const char *jinja_text) {
    switch (tmpl) {
    case HMOE_CHAT_TEMPLATE_QWEN3: return HMOE_TOOLCALL_QWEN3_JSON;
    case HMOE_CHAT_TEMPLATE_QWEN35: return HMOE_TOOLCALL_QWEN35_XML;
    case HMOE_CHAT_TEMPLATE_NEMOTRON: return HMOE_TOOLCALL_NEMOTRON;
    case HMOE_CHAT_TEMPLATE_HARMONY: return HMOE_TOOLCALL_HARMONY;
    default: break;
    }
    /* ChatML or a template hmoe does not render: the GGUF's own template shows what the model
     * was taught to write (harmony headers before the XML form, which also contains <tool_call>). */
    if (!jinja_text) return HMOE_TOOLCALL_NONE;
    if (strstr(jinja_text, "<|channel|>") && strstr(jinja_text, "<|start|>")) return HMOE_TOOLCALL_HARMONY;
    if (strstr(jinja_text, "<function=")) return HMOE_TOOLCALL_QWEN35_XML;
    if (strstr(jinja_text, "<tool_call>")) return HMOE_TOOLCALL_QWEN3_JSON;
    return HMOE_TOOLCALL_NONE;
}

const char *hmoe_toolcall_format_name(enum hmoe_toolcall_format fmt) {
    switch (fmt) {
    case HMOE_TOOLCALL_NONE: return "none";
    case HMOE_TOOLCALL_QWEN3_JSON: return "qwen3-json";
    case HMOE_TOOLCALL_QWEN35_XML: return "qwen35-xml";
    case HMOE_TOOLCALL_NEMOTRON: return "nemotron";
    case HMOE_TOOLCALL_HARMONY: return "harmony";
    }
    return NULL;
}

bool hmoe_toolcall_prompt_in_think(const char *prompt, size_t len) {
    if (!prompt) return false;
    while (len && hmoe_tc_is_ws(prompt[len - 1])) len--;
    size_t k = sizeof THINK_OPEN - 1;
    return len >= k && memcmp(prompt + len - k, THINK_OPEN, k) == 0;
}

/* --- output streams ------------------------------------------------------------------- */

void hmoe_tc_emit(struct hmoe_toolcall_stream *s, struct tc_out *o, const char *p, size_t n) {
    (void)s;
    size_t i = 0;
    while (i < n) {
        size_t j = i;
        while (j < n && hmoe_tc_is_ws(p[j])) j++;
        if (j > i) hmoe_strbuf_addn(&o->ws, p + i, j - i);
        if (j == n) break;
        size_t k = j;
        while (k < n && !hmoe_tc_is_ws(p[k])) k++;
        /* Whitespace counts only between text: dropped before the first byte of a stream. */
        if (o->started && o->ws.n) {
            hmoe_strbuf_addn(&o->all, o->ws.s, o->ws.n);
            hmoe_strbuf_addn(&o->delta, o->ws.s, o->ws.n);
        }
        o->ws.n = 0;
        hmoe_strbuf_addn(&o->all, p + j, k - j);
        hmoe_strbuf_addn(&o->delta, p + j, k - j);
        o->started = true;
        i = k;
    }
}

void hmoe_tc_drop_ws(struct tc_out *o) { o->ws.n = 0; }

void hmoe_tc_add_call(struct hmoe_toolcall_stream *s, const char *name, size_t name_len, const char *args) {
    if (s->n_calls == s->cap_calls) {
        size_t cap = s->cap_calls ? s->cap_calls * 2 : 4;
        struct hmoe_toolcall *c = realloc(s->calls, cap * sizeof *c);
        if (!c) { s->oom = true; return; }
        s->calls = c;
        s->cap_calls = cap;
    }
    char id[30];
    if (s->live.on) memcpy(id, s->live.id, sizeof id);
    else hmoe_tc_next_id(s, id);
    struct hmoe_toolcall *c = &s->calls[s->n_calls];
    c->id = strdup(id);
    c->name = malloc(name_len + 1);
    c->arguments = strdup(args);
    if (!c->id || !c->name || !c->arguments) {
        free(c->id);
        free(c->name);
        free(c->arguments);
        s->oom = true;
        return;
    }
    memcpy(c->name, name, name_len);
    c->name[name_len] = 0;
    s->n_calls++;
}

size_t hmoe_tc_partial_tag(const char *p, size_t n, const char *tag) {
    size_t t = strlen(tag);
    for (size_t k = t - 1 < n ? t - 1 : n; k > 0; k--)
        if (memcmp(p + n - k, tag, k) == 0) return k;
    return 0;
}

const char *hmoe_tc_find(const char *p, size_t n, const char *tag) {
    size_t t = strlen(tag);
    if (!p || n < t) return NULL;
    for (const char *q = p, *end = p + n - t; q <= end; q++) {
        q = memchr(q, tag[0], (size_t)(end - q) + 1);
        if (!q) return NULL;
        if (memcmp(q, tag, t) == 0) return q;
    }
    return NULL;
}

void hmoe_tc_consume(struct hmoe_toolcall_stream *s, size_t n) {
    if (!n) return;
    memmove(s->pend.s, s->pend.s + n, s->pend.n - n);
    s->pend.n -= n;
    s->pend.s[s->pend.n] = 0;
    s->scanned = 0;
}

/* Release pend into `o` except its last `hold` bytes. */
static void release(struct hmoe_toolcall_stream *s, struct tc_out *o, size_t hold) {
    hmoe_tc_emit(s, o, s->pend.s, s->pend.n - hold);
    hmoe_tc_consume(s, s->pend.n - hold);
}

/* The call's text turns out not to be a call: it is content, whitespace before it included. */
static void call_failed(struct hmoe_toolcall_stream *s) {
    if (s->call_ws.n) hmoe_tc_emit(s, &s->content, s->call_ws.s, s->call_ws.n);
    hmoe_tc_emit(s, &s->content, CALL_OPEN, sizeof CALL_OPEN - 1);
}

/* Has the call text p[0..n) reached its name? The name is known from a point in the text on, so
 * this has one answer for a call's text however the text arrived (and so do the ids drawn). */
static bool call_begun(const struct hmoe_toolcall_stream *s, const char *p, size_t n) {
    return s->fmt == HMOE_TOOLCALL_QWEN3_JSON ? hmoe_tc_json_call_begun(p, n) : hmoe_tc_xml_call_begun(p, n);
}

/* An open call: send what it has gained (the text up to a possible start of </tool_call>). */
static void stream_call(struct hmoe_toolcall_stream *s) {
    const size_t n = s->pend.n - hmoe_tc_partial_tag(s->pend.s, s->pend.n, CALL_CLOSE);
    const char *args;
    size_t args_len;
    char *name = NULL;
    bool named = s->fmt == HMOE_TOOLCALL_QWEN3_JSON ? hmoe_tc_partial_json_call(s, s->pend.s, n, &name, &args, &args_len)
                                                    : hmoe_tc_partial_xml_call(s, s->pend.s, n, &name, &args, &args_len);
    if (named) hmoe_tc_live_update(s, name, strlen(name), args, args_len);
    free(name);
}

/* Inside <tool_call>: pend holds the text after the opening tag. */
static bool step_call(struct hmoe_toolcall_stream *s, bool final) {
    size_t from = s->scanned > sizeof CALL_CLOSE ? s->scanned - sizeof CALL_CLOSE : 0;
    const char *end = hmoe_tc_find(s->pend.s + from, s->pend.n - from, CALL_CLOSE);
    if (!end) {
        s->scanned = s->pend.n;
        if (!final) {
            stream_call(s);
            return false;
        }
        /* Cut off before </tool_call> (the token limit): the text stays content. */
        hmoe_tc_live_drop(s, call_begun(s, s->pend.s, s->pend.n));
        call_failed(s);
        release(s, &s->content, 0);
        s->state = TC_CONTENT;
        return false;
    }
    size_t inner = (size_t)(end - s->pend.s);
    char *name = NULL, *args = NULL;
    bool ok = s->fmt == HMOE_TOOLCALL_QWEN3_JSON ? hmoe_tc_parse_json_call(s, s->pend.s, inner, &name, &args)
                                                 : hmoe_tc_parse_xml_call(s, s->pend.s, inner, &name, &args);
    if (ok) {
        hmoe_tc_live_close(s, name, strlen(name), args);
        hmoe_tc_consume(s, inner + sizeof CALL_CLOSE - 1);
    } else {
        hmoe_tc_live_drop(s, call_begun(s, s->pend.s, inner));
        call_failed(s);
        release(s, &s->content, s->pend.n - inner - (sizeof CALL_CLOSE - 1));
    }
    free(name);
    free(args);
    s->state = TC_CONTENT;
    return true;
}

/* Advance the <think> / <tool_call> machine over pend; final: no more text comes. */
static void step(struct hmoe_toolcall_stream *s, bool final) {
    for (;;) {
        if (s->oom) return;
        const char *p = s->pend.s;
        size_t n = s->pend.n;
        switch (s->state) {
        case TC_START: {
            size_t i = 0;
            while (i < n && hmoe_tc_is_ws(p[i])) i++;
            size_t k = sizeof THINK_OPEN - 1;
            if (n - i >= k && memcmp(p + i, THINK_OPEN, k) == 0) {
                if (s->think_in_content) hmoe_tc_emit(s, &s->content, THINK_OPEN, k);
                hmoe_tc_consume(s, i + k);
                s->state = TC_THINK;
                continue;
            }
            if (!final && n - i < k && memcmp(p + i, THINK_OPEN, n - i) == 0) return; /* "", "<th": wait */
            s->state = TC_CONTENT;
            continue;
        }
        case TC_THINK: {
            struct tc_out *o = s->think_in_content ? &s->content : &s->reasoning;
            const char *e = hmoe_tc_find(p, n, THINK_CLOSE);
            if (e) {
                hmoe_tc_emit(s, o, p, (size_t)(e - p));
                if (s->think_in_content) hmoe_tc_emit(s, o, THINK_CLOSE, sizeof THINK_CLOSE - 1);
                else hmoe_tc_drop_ws(o);
                hmoe_tc_consume(s, (size_t)(e - p) + sizeof THINK_CLOSE - 1);
                s->state = TC_CONTENT;
                continue;
            }
            release(s, o, final ? 0 : hmoe_tc_partial_tag(p, n, THINK_CLOSE));
            return;
        }
        case TC_CONTENT: {
            if (s->fmt == HMOE_TOOLCALL_NONE) {
                release(s, &s->content, 0);
                return;
            }
            const char *o = hmoe_tc_find(p, n, CALL_OPEN);
            if (o) {
                hmoe_tc_emit(s, &s->content, p, (size_t)(o - p));
                /* The whitespace that led up to the call is not content (unless the call fails). */
                s->call_ws.n = 0;
                hmoe_strbuf_addn(&s->call_ws, s->content.ws.s ? s->content.ws.s : "", s->content.ws.n);
                hmoe_tc_drop_ws(&s->content);
                hmoe_tc_consume(s, (size_t)(o - p) + sizeof CALL_OPEN - 1);
                s->state = TC_CALL;
                continue;
            }
            release(s, &s->content, final ? 0 : hmoe_tc_partial_tag(p, n, CALL_OPEN));
            return;
        }
        case TC_CALL:
            if (!step_call(s, final)) return;
            continue;
        case TC_H_HEAD:
        case TC_H_BODY:
            hmoe_tc_harmony_step(s, final);
            return;
        }
    }
}

/* --- the public API ------------------------------------------------------------------- */

static uint64_t random_seed(void) {
    uint64_t v = 0;
    FILE *f = fopen("/dev/urandom", "rb");
    if (f) {
        if (fread(&v, sizeof v, 1, f) != 1) v = 0;
        fclose(f);
    }
    if (!v) v = (uint64_t)(hmoe_time_s() * 1e9) ^ (uint64_t)(uintptr_t)&v;
    return v;
}

int hmoe_toolcall_stream_new(enum hmoe_toolcall_format fmt, const struct hmoe_toolcall_opts *opts,
                             struct hmoe_toolcall_stream **out, struct hmoe_err *err) {
    *out = NULL;
    if (!hmoe_toolcall_format_name(fmt))
        return HMOE_RAISE(err, HMOE_ERR_ARG, "tool-call parser: unknown format %d", (int)fmt);
    struct hmoe_toolcall_stream *s = calloc(1, sizeof *s);
    if (!s) return HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory creating the tool-call parser");
    s->fmt = fmt;
    if (fmt == HMOE_TOOLCALL_HARMONY) s->state = TC_H_HEAD;
    else s->state = opts && opts->in_think ? TC_THINK : TC_START;
    s->rng = opts && opts->id_seed ? opts->id_seed : random_seed();
    s->think_in_content = opts && opts->think_in_content;
    size_t n_tools = opts && opts->tools ? opts->n_tools : 0;
    if (n_tools) {
        s->tools = calloc(n_tools, sizeof *s->tools);
        if (!s->tools) {
            free(s);
            return HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory creating the tool-call parser");
        }
        s->n_tools = n_tools;
        for (size_t i = 0; i < n_tools; i++) {
            struct hmoe_err perr = {0};
            if (opts->tools[i]) s->tools[i] = hmoe_json_parse(opts->tools[i], strlen(opts->tools[i]), &perr);
        }
    }
    *out = s;
    return HMOE_OK;
}

static void delta_begin(struct hmoe_toolcall_stream *s) {
    s->content.delta.n = 0;
    s->reasoning.delta.n = 0;
    s->first_new = s->n_calls;
    hmoe_tc_pieces_begin(s);
}

static int delta_end(struct hmoe_toolcall_stream *s, struct hmoe_toolcall_delta *d, struct hmoe_err *err) {
    if (s->oom || s->pend.oom || s->call_ws.oom || s->content.all.oom || s->content.delta.oom || s->content.ws.oom ||
        s->reasoning.all.oom || s->reasoning.delta.oom || s->reasoning.ws.oom || s->piece_text.oom ||
        s->live.sent.oom) {
        s->oom = true;
        if (d) memset(d, 0, sizeof *d);
        return HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory parsing the generated text");
    }
    if (d) {
        d->reasoning = s->reasoning.delta.n ? s->reasoning.delta.s : "";
        d->reasoning_len = s->reasoning.delta.n;
        d->content = s->content.delta.n ? s->content.delta.s : "";
        d->content_len = s->content.delta.n;
        d->calls = s->n_calls > s->first_new ? &s->calls[s->first_new] : NULL;
        d->n_calls = s->n_calls - s->first_new;
        hmoe_tc_pieces_end(s);
        d->pieces = s->n_pieces ? s->out_pieces : NULL;
        d->n_pieces = s->n_pieces;
    }
    return HMOE_OK;
}

int hmoe_toolcall_stream_feed(struct hmoe_toolcall_stream *s, const char *piece, size_t len,
                              struct hmoe_toolcall_delta *delta, struct hmoe_err *err) {
    if (delta) memset(delta, 0, sizeof *delta);
    if (s->finished) return HMOE_RAISE(err, HMOE_ERR_ARG, "tool-call parser: text fed after the end");
    if (s->oom) return HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory parsing the generated text");
    delta_begin(s);
    hmoe_strbuf_addn(&s->pend, len ? piece : "", len); /* allocates pend even for an empty piece */
    if (!s->pend.oom) step(s, false);
    return delta_end(s, delta, err);
}

int hmoe_toolcall_stream_finish(struct hmoe_toolcall_stream *s, struct hmoe_toolcall_delta *delta,
                                struct hmoe_err *err) {
    if (delta) memset(delta, 0, sizeof *delta);
    if (s->finished) return HMOE_RAISE(err, HMOE_ERR_ARG, "tool-call parser: finished twice");
    if (s->oom) return HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory parsing the generated text");
    delta_begin(s);
    hmoe_strbuf_addn(&s->pend, "", 0);
    if (!s->pend.oom && s->pend.s) step(s, true);
    hmoe_tc_drop_ws(&s->content);
    hmoe_tc_drop_ws(&s->reasoning);
    s->finished = true;
    return delta_end(s, delta, err);
}

static char *dup_buf(const struct hmoe_strbuf *b) {
    char *p = malloc(b->n + 1);
    if (p) {
        if (b->n) memcpy(p, b->s, b->n);
        p[b->n] = 0;
    }
    return p;
}

int hmoe_toolcall_stream_result(const struct hmoe_toolcall_stream *s, struct hmoe_toolcalls *out,
                                struct hmoe_err *err) {
    memset(out, 0, sizeof *out);
    out->content = dup_buf(&s->content.all);
    out->reasoning = dup_buf(&s->reasoning.all);
    if (!out->content || !out->reasoning) goto nomem;
    if (s->n_calls) {
        out->calls = calloc(s->n_calls, sizeof *out->calls);
        if (!out->calls) goto nomem;
        for (size_t i = 0; i < s->n_calls; i++, out->n_calls++) {
            struct hmoe_toolcall *c = &out->calls[i];
            c->id = strdup(s->calls[i].id);
            c->name = strdup(s->calls[i].name);
            c->arguments = strdup(s->calls[i].arguments);
            if (!c->id || !c->name || !c->arguments) {
                out->n_calls++;
                goto nomem;
            }
        }
    }
    return HMOE_OK;
nomem:
    hmoe_toolcalls_free(out);
    return HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory copying the parsed message");
}

void hmoe_toolcall_stream_free(struct hmoe_toolcall_stream *s) {
    if (!s) return;
    free(s->pend.s);
    free(s->call_ws.s);
    free(s->recipient);
    struct tc_out *outs[2] = {&s->content, &s->reasoning};
    for (int i = 0; i < 2; i++) {
        free(outs[i]->all.s);
        free(outs[i]->delta.s);
        free(outs[i]->ws.s);
    }
    for (size_t i = 0; i < s->n_calls; i++) {
        free(s->calls[i].id);
        free(s->calls[i].name);
        free(s->calls[i].arguments);
    }
    free(s->calls);
    free(s->live.sent.s);
    hmoe_tc_json_scan_free(&s->live.scan);
    free(s->live.xml.json.s);
    free(s->piece_text.s);
    free(s->pieces);
    free(s->out_pieces);
    for (size_t i = 0; i < s->n_tools; i++) hmoe_json_free(s->tools[i]);
    free(s->tools);
    free(s);
}

void hmoe_toolcalls_free(struct hmoe_toolcalls *tc) {
    if (!tc) return;
    free(tc->content);
    free(tc->reasoning);
    for (size_t i = 0; i < tc->n_calls; i++) {
        free(tc->calls[i].id);
        free(tc->calls[i].name);
        free(tc->calls[i].arguments);
    }
    free(tc->calls);
    memset(tc, 0, sizeof *tc);
}

int hmoe_toolcall_parse_opts(enum hmoe_toolcall_format fmt, const struct hmoe_toolcall_opts *opts, const char *text,
                             size_t len, struct hmoe_toolcalls *out, struct hmoe_err *err) {
    memset(out, 0, sizeof *out);
    struct hmoe_toolcall_stream *s = NULL;
    int st = hmoe_toolcall_stream_new(fmt, opts, &s, err);
    if (st == HMOE_OK) st = hmoe_toolcall_stream_feed(s, text, len, NULL, err);
    if (st == HMOE_OK) st = hmoe_toolcall_stream_finish(s, NULL, err);
    if (st == HMOE_OK) st = hmoe_toolcall_stream_result(s, out, err);
    hmoe_toolcall_stream_free(s);
    return st;
}

int hmoe_toolcall_parse(enum hmoe_toolcall_format fmt, const char *text, size_t len, struct hmoe_toolcalls *out,
                        struct hmoe_err *err) {
    /* The prompt is not known here: a </think> that no <think> precedes shows that the
     * template opened the block (Qwen3.5, Nemotron-3 thinking on). */
    const char *close = hmoe_tc_find(text, len, THINK_CLOSE);
    const char *open = hmoe_tc_find(text, len, THINK_OPEN);
    struct hmoe_toolcall_opts opts = {0};
    opts.in_think = close && (!open || open > close);
    return hmoe_toolcall_parse_opts(fmt, &opts, text, len, out, err);
}
