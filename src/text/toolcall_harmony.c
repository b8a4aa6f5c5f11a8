/* toolcall_harmony.c — gpt-oss's harmony messages in generated text (chat-templates.md §3,
 * gpt-oss.md): after the generation prompt "<|start|>assistant" the model writes messages
 * "<|channel|>C [to=R] [<|constrain|>json]<|message|>BODY" ended by <|end|>, <|call|> or <|return|>,
 * each later one opened by "<|start|>assistant". The analysis channel is reasoning, the final
 * channel (and commentary addressed to no one) is content, a message addressed to=functions.NAME
 * is a call whose body is the JSON arguments. <|call|> and <|return|> stop generation, so the
 * last message usually ends with the text itself. */
#include <stdlib.h>
#include <string.h>

#include "text/toolcall_impl.h"

static const char MESSAGE[] = "<|message|>";
/* What ends a body: the three end markers, or the start of the next header when a model leaves
 * the end marker out. */
static const char *const BODY_END[] = {"<|end|>", "<|call|>", "<|return|>", "<|start|>", "<|channel|>", NULL};
enum { N_CONSUMED_ENDS = 3 };  /* the first three are consumed; the others begin the next header */
enum { HEADER_MAX = 1024 };    /* a "header" this long without <|message|> is not harmony: content */

/* Earliest body end in p[0..n): its position and index in BODY_END, or NULL. */
static const char *find_end(const char *p, size_t n, int *which) {
    for (const char *q = p, *end = p + n; q && q < end; q++) {
        q = memchr(q, '<', (size_t)(end - q));
        if (!q) return NULL;
        for (int k = 0; BODY_END[k]; k++) {
            size_t l = strlen(BODY_END[k]);
            if ((size_t)(end - q) >= l && memcmp(q, BODY_END[k], l) == 0) {
                *which = k;
                return q;
            }
        }
    }
    return NULL;
}

static size_t partial_end(const char *p, size_t n) {
    size_t best = 0;
    for (int k = 0; BODY_END[k]; k++) {
        size_t h = hmoe_tc_partial_tag(p, n, BODY_END[k]);
        if (h > best) best = h;
    }
    return best;
}

/* The first "<|start|>" or "<|channel|>" in p[0..n), or NULL. */
static const char *first_header_start(const char *p, size_t n) {
    const char *best = NULL;
    for (int k = N_CONSUMED_ENDS; BODY_END[k]; k++) {
        const char *q = hmoe_tc_find(p, n, BODY_END[k]);
        if (q && (!best || q < best)) best = q;
    }
    return best;
}

/* The word after `key` in the header (up to whitespace or the next "<|"), or NULL. */
static char *header_word(const char *h, size_t n, const char *key) {
    const char *k = hmoe_tc_find(h, n, key);
    if (!k) return NULL;
    const char *p = k + strlen(key), *end = h + n, *q = p;
    while (q < end && !hmoe_tc_is_ws(*q) && *q != '<' && *q != 0) q++;
    char *w = malloc((size_t)(q - p) + 1);
    if (w) {
        memcpy(w, p, (size_t)(q - p));
        w[q - p] = 0;
    }
    return w;
}

/* Decide what the body after header h[0..n) is. */
static void read_header(struct hmoe_toolcall_stream *s, const char *h, size_t n) {
    free(s->recipient);
    s->recipient = NULL;
    char *channel = header_word(h, n, "<|channel|>");
    /* "to=" addresses the message; it may stand before or after the channel. */
    const char *to = hmoe_tc_find(h, n, "to=");
    if (to && (to == h || hmoe_tc_is_ws(to[-1]) || to[-1] == '>')) s->recipient = header_word(to, (size_t)(h + n - to), "to=");
    if (s->recipient && !s->recipient[0]) {
        free(s->recipient);
        s->recipient = NULL;
    }
    if (s->recipient) s->body = TC_BODY_CALL;
    else if (channel && strcmp(channel, "analysis") == 0) s->body = TC_BODY_REASONING;
    else s->body = TC_BODY_CONTENT;
    free(channel);
}

/* The function a call message is addressed to ("" when none). */
static const char *call_name(const struct hmoe_toolcall_stream *s) {
    const char *name = s->recipient ? s->recipient : "";
    return strncmp(name, "functions.", 10) == 0 ? name + 10 : name;
}

/* A call body p[0..n), whole or so far, without the whitespace at its ends. The call has begun
 * once its first byte can start a JSON value (decided by that byte alone, so it is the same for
 * every split of the text). */
static bool call_body(const struct hmoe_toolcall_stream *s, const char **p, size_t *n) {
    while (*n && hmoe_tc_is_ws(**p)) (*p)++, (*n)--;
    while (*n && hmoe_tc_is_ws((*p)[*n - 1])) (*n)--;
    return *call_name(s) && *n && **p && strchr("{[\"-0123456789tfn", **p);
}

/* An open call body p[0..n): its arguments so far, the text as written, go out while it can
 * still be JSON. */
static void stream_call(struct hmoe_toolcall_stream *s, const char *p, size_t n) {
    if (!call_body(s, &p, &n)) return;
    /* the trimmed body starts at the same byte from now on: the scan resumes over it */
    struct tc_live *l = &s->live;
    if (!l->scan_on) {
        hmoe_tc_json_scan_init(&l->scan, false);
        l->scan_on = true;
    }
    hmoe_tc_json_scan(&l->scan, p, n);
    if (l->scan.status == TC_JSON_BAD) return; /* it will not parse: no more of it goes out */
    const char *name = call_name(s);
    hmoe_tc_live_update(s, name, strlen(name), p, n);
}

/* A call body p[0..n) has ended: a call when it is JSON, else its text is content. */
static void end_call(struct hmoe_toolcall_stream *s, const char *p, size_t n) {
    const char *a = p;
    size_t an = n;
    const bool begun = call_body(s, &a, &an);
    const char *name = call_name(s);
    struct hmoe_err perr = {0};
    struct hmoe_json *j = an && *name ? hmoe_json_parse(a, an, &perr) : NULL;
    if (j) {
        /* The arguments as the model wrote them: the template renders them back verbatim. */
        char *args = malloc(an + 1);
        if (!args) s->oom = true;
        else {
            memcpy(args, a, an);
            args[an] = 0;
            hmoe_tc_drop_ws(&s->content);
            hmoe_tc_live_close(s, name, strlen(name), args);
            free(args);
        }
        hmoe_json_free(j);
    } else {
        hmoe_tc_live_drop(s, begun);
        hmoe_tc_emit(s, &s->content, p, n);
    }
}

void hmoe_tc_harmony_step(struct hmoe_toolcall_stream *s, bool final) {
    for (;;) {
        if (s->oom) return;
        const char *p = s->pend.s;
        size_t n = s->pend.n;
        if (s->state == TC_H_HEAD) {
            const char *m = hmoe_tc_find(p, n, MESSAGE);
            if (m && (size_t)(m - p) + sizeof MESSAGE - 1 <= HEADER_MAX) {
                read_header(s, p, (size_t)(m - p));
                hmoe_tc_consume(s, (size_t)(m - p) + sizeof MESSAGE - 1);
                s->state = TC_H_BODY;
                continue;
            }
            if (n >= HEADER_MAX) {
                /* No <|message|> within HEADER_MAX bytes: a model not writing harmony. Its text is
                 * content up to the last "<|" (which may begin a real header). The decision reads
                 * only the first HEADER_MAX bytes, so every split of the text makes the same one. */
                size_t cut = 0;
                for (size_t i = HEADER_MAX - 1; i > 0 && !cut; i--)
                    if (p[i] == '<' && (i + 1 == HEADER_MAX || p[i + 1] == '|')) cut = i;
                if (!cut) cut = hmoe_utf8_complete_prefix(p, HEADER_MAX);
                if (!cut) cut = HEADER_MAX;
                hmoe_tc_emit(s, &s->content, p, cut);
                hmoe_tc_consume(s, cut);
                continue;
            }
            if (final) {
                /* A header cut off by the end shows nothing; plain text before it is content. */
                const char *h = first_header_start(p, n);
                hmoe_tc_emit(s, &s->content, p, h ? (size_t)(h - p) : n);
                hmoe_tc_consume(s, n);
            }
            return;
        }
        /* TC_H_BODY */
        size_t from = s->body == TC_BODY_CALL && s->scanned > 16 ? s->scanned - 16 : 0;
        int which = 0;
        const char *e = find_end(p + from, n - from, &which);
        if (e) {
            size_t len = (size_t)(e - p);
            if (s->body == TC_BODY_CALL) end_call(s, p, len);
            else {
                struct tc_out *o = s->body == TC_BODY_REASONING ? &s->reasoning : &s->content;
                hmoe_tc_emit(s, o, p, len);
                hmoe_tc_drop_ws(o);
            }
            hmoe_tc_consume(s, len + (which < N_CONSUMED_ENDS ? strlen(BODY_END[which]) : 0));
            s->state = TC_H_HEAD;
            continue;
        }
        if (s->body == TC_BODY_CALL) {
            s->scanned = n;
            if (final) {
                end_call(s, p, n);
                hmoe_tc_consume(s, n);
            } else {
                stream_call(s, p, n - partial_end(p, n));
            }
            return;
        }
        size_t hold = final ? 0 : partial_end(p, n);
        hmoe_tc_emit(s, s->body == TC_BODY_REASONING ? &s->reasoning : &s->content, p, n - hold);
        hmoe_tc_consume(s, n - hold);
        return;
    }
}
