/* textfilter.c — what happens to generated text between the detokenizer and the client:
 * stop strings (found across token boundaries; a tail that may still become one is held
 * back so that a stream never shows part of a stop string), the <think>…</think> split into
 * reasoning_content and content (llama-server's default "deepseek" reasoning format: the
 * tags themselves and the newlines around them are dropped), and JSON strings that stay
 * valid whatever bytes a random-weight model produces.
 */
#include <stdlib.h>
#include <string.h>

#include "server/server_impl.h"

void srv_buf_add(struct srv_buf *b, const char *p, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1) cap *= 2;
        char *q = realloc(b->s, cap);
        if (!q) {
            b->oom = true;
            return;
        }
        b->s = q;
        b->cap = cap;
    }
    if (n) memcpy(b->s + b->n, p, n);
    b->n += n;
    b->s[b->n] = 0;
}

void srv_buf_free(struct srv_buf *b) {
    free(b->s);
    memset(b, 0, sizeof *b);
}

size_t srv_stop_scan(const struct srv_gen_params *gp, const char *s, size_t n, int *which, size_t *keep) {
    size_t first = n;
    *which = -1;
    *keep = 0;
    for (int k = 0; k < gp->n_stop; k++) {
        const char *w = gp->stop[k];
        const size_t wl = strlen(w);
        if (!wl || wl > n) goto partial;
        for (size_t i = 0; i + wl <= n && i < first; i++)
            if (memcmp(s + i, w, wl) == 0) {
                first = i;
                *which = k;
                break;
            }
    partial:
        /* the longest tail of s that is a proper prefix of w */
        for (size_t t = HMOE_MIN(wl ? wl - 1 : 0, n); t > *keep; t--)
            if (memcmp(s + n - t, w, t) == 0) {
                *keep = t;
                break;
            }
    }
    return first;
}

void srv_think_init(struct srv_think *t, bool enabled, bool starts_inside) {
    memset(t, 0, sizeof *t);
    t->enabled = enabled;
    t->in_think = enabled && starts_inside;
    t->strip_lead = t->in_think;
}

static const char OPEN[] = "<think>", CLOSE[] = "</think>";

/* Length of the longest tail of s[0..n) that is a proper prefix of tag. */
static size_t tag_prefix_tail(const char *s, size_t n, const char *tag) {
    const size_t tl = strlen(tag);
    for (size_t t = HMOE_MIN(tl - 1, n); t > 0; t--)
        if (memcmp(s + n - t, tag, t) == 0) return t;
    return 0;
}

static void emit_section(struct srv_think *t, struct srv_job *j, const char *s, size_t n, srv_emit_fn emit) {
    if (t->strip_lead) {
        while (n && (*s == '\n' || *s == '\r' || *s == ' ')) s++, n--;
        if (!n) return;
        t->strip_lead = false;
    }
    if (!n) return;
    if (!t->in_think && !t->seen_content) t->seen_content = true;
    emit(j, s, n, t->in_think);
}

/* Reasoning ends "...\n</think>": its trailing newlines are held until more reasoning follows. */
static void emit_reasoning_held(struct srv_think *t, struct srv_job *j, const char *s, size_t n, srv_emit_fn emit) {
    size_t body = n;
    while (body && s[body - 1] == '\n') body--;
    if (body && t->hold.n) {
        emit_section(t, j, t->hold.s, t->hold.n, emit);
        t->hold.n = 0;
    }
    emit_section(t, j, s, body, emit);
    srv_buf_add(&t->hold, s + body, n - body);
}

void srv_think_push(struct srv_think *t, struct srv_job *j, const char *s, size_t n, srv_emit_fn emit) {
    if (!t->enabled) {
        if (n) emit(j, s, n, false);
        return;
    }
    /* Work on held bytes + the new ones (held bytes are a tag prefix or reasoning newlines). */
    struct srv_buf w = {0};
    const bool held_newlines = t->in_think && t->hold.n && t->hold.s[0] == '\n';
    if (!held_newlines) {
        srv_buf_add(&w, t->hold.s ? t->hold.s : "", t->hold.n);
        t->hold.n = 0;
    }
    srv_buf_add(&w, s, n);
    if (w.oom) {
        srv_buf_free(&w);
        return;
    }
    const char *p = w.s;
    size_t left = w.n;
    while (left) {
        /* <think> opens only before any content (the model's answer starts with it). */
        const char *tag = t->in_think ? CLOSE : (!t->seen_content ? OPEN : NULL);
        if (!tag) {
            emit_section(t, j, p, left, emit);
            break;
        }
        const size_t tl = strlen(tag);
        const char *hit = NULL;
        for (size_t i = 0; i + tl <= left && !hit; i++)
            if (memcmp(p + i, tag, tl) == 0) hit = p + i;
        if (hit) {
            const size_t before = (size_t)(hit - p);
            if (t->in_think) {
                emit_section(t, j, p, before, emit);
                t->hold.n = 0; /* the newlines before </think> are dropped */
            } else {
                emit_section(t, j, p, before, emit);
            }
            t->in_think = !t->in_think;
            t->strip_lead = true;
            p = hit + tl;
            left -= before + tl;
            continue;
        }
        const size_t keep = tag_prefix_tail(p, left, tag);
        if (t->in_think) {
            emit_reasoning_held(t, j, p, left - keep, emit);
        } else {
            /* whitespace before the first tag is no content yet */
            size_t k = 0;
            while (!t->seen_content && k < left - keep && (p[k] == '\n' || p[k] == ' ' || p[k] == '\r')) k++;
            if (k == left - keep && !t->seen_content) {
                srv_buf_add(&t->hold, p, left);
                break;
            }
            emit_section(t, j, p, left - keep, emit);
        }
        srv_buf_add(&t->hold, p + left - keep, keep);
        break;
    }
    srv_buf_free(&w);
}

void srv_think_flush(struct srv_think *t, struct srv_job *j, srv_emit_fn emit) {
    if (t->hold.n && !(t->in_think && t->hold.s[0] == '\n')) emit_section(t, j, t->hold.s, t->hold.n, emit);
    srv_buf_free(&t->hold);
}

/* Length of the well-formed UTF-8 character at s (no overlongs, no surrogates, <= U+10FFFF), or 0. */
static size_t utf8_char_len(const unsigned char *s, size_t n) {
    const unsigned c = s[0];
    size_t len;
    unsigned cp;
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) len = 2, cp = c & 0x1F;
    else if (c >= 0xE0 && c <= 0xEF) len = 3, cp = c & 0x0F;
    else if (c >= 0xF0 && c <= 0xF4) len = 4, cp = c & 0x07;
    else return 0;
    if (n < len) return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        cp = cp << 6 | (s[i] & 0x3Fu);
    }
    if ((len == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
        return 0;
    return len;
}

json_t *srv_json_text(const char *s, size_t n) {
    struct srv_buf b = {0};
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        const size_t len = utf8_char_len(u + i, n - i);
        if (len) {
            srv_buf_add(&b, s + i, len);
            i += len;
        } else {
            srv_buf_add(&b, "\xEF\xBF\xBD", 3);
            i++;
        }
    }
    json_t *j = b.oom ? NULL : json_stringn(b.s ? b.s : "", b.n);
    srv_buf_free(&b);
    return j;
}

bool srv_prompt_opens_think(const char *prompt) {
    const char *turn = prompt, *p;
    while ((p = strstr(turn, "<|im_start|>")) != NULL) turn = p + 1;
    const char *open = NULL;
    for (p = turn; (p = strstr(p, OPEN)) != NULL; p++) open = p;
    if (!open) return false;
    return strstr(open, CLOSE) == NULL;
}
