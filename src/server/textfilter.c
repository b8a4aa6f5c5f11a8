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
    t->seen_content = t->in_think; /* the block is already open: no second one */
}

static const char OPEN[] = "<think>", CLOSE[] = "</think>";

/* Length of the longest tail of s[0..n) that is a proper prefix of tag. */
static size_t tag_prefix_tail(const char *s, size_t n, const char *tag) {
    const size_t tl = strlen(tag);
    for (size_t t = HMOE_MIN(tl - 1, n); t > 0; t--)
        if (memcmp(s + n - t, tag, t) == 0) return t;
    return 0;
}

/* Emit s[0..n) to the current section, dropping the newlines and spaces that start it. */
static void emit_section(struct srv_think *t, struct srv_job *j, const char *s, size_t n, srv_emit_fn emit) {
    if (t->strip_lead) {
        while (n && (*s == '\n' || *s == '\r' || *s == ' ')) s++, n--;
        if (!n) return;
        t->strip_lead = false;
    }
    if (n) emit(j, s, n, t->in_think);
}

static const char *find(const char *s, size_t n, const char *tag) {
    const size_t tl = strlen(tag);
    for (size_t i = 0; i + tl <= n; i++)
        if (memcmp(s + i, tag, tl) == 0) return s + i;
    return NULL;
}

static void consume(struct srv_buf *b, size_t n) {
    memmove(b->s, b->s + n, b->n - n);
    b->n -= n;
}

/* Classify as much of t->hold as can be: a tag prefix, the newlines that may end the
 * reasoning, or the whitespace before a possible <think> wait for more text. */
static void think_run(struct srv_think *t, struct srv_job *j, srv_emit_fn emit) {
    while (t->hold.n) {
        char *h = t->hold.s;
        const size_t n = t->hold.n;
        if (t->in_think) {
            const char *hit = find(h, n, CLOSE);
            if (hit) {
                size_t body = (size_t)(hit - h);
                while (body && h[body - 1] == '\n') body--;
                emit_section(t, j, h, body, emit);
                consume(&t->hold, (size_t)(hit - h) + strlen(CLOSE));
                t->in_think = false;
                t->strip_lead = true;
                continue;
            }
            size_t safe = n - tag_prefix_tail(h, n, CLOSE);
            while (safe && h[safe - 1] == '\n') safe--;
            emit_section(t, j, h, safe, emit);
            consume(&t->hold, safe);
            return;
        }
        if (!t->seen_content) {
            /* the answer may open with <think> after some whitespace, nowhere else */
            size_t k = 0;
            while (k < n && (h[k] == '\n' || h[k] == '\r' || h[k] == ' ')) k++;
            const size_t rest = n - k, tl = strlen(OPEN);
            if (rest >= tl && memcmp(h + k, OPEN, tl) == 0) {
                consume(&t->hold, k + tl);
                t->in_think = true;
                t->seen_content = true; /* one block only */
                t->strip_lead = true;
                continue;
            }
            if (rest < tl && memcmp(h + k, OPEN, rest) == 0) return; /* may still become <think> */
            t->seen_content = true;
        }
        emit_section(t, j, h, n, emit);
        t->hold.n = 0;
    }
}

void srv_think_push(struct srv_think *t, struct srv_job *j, const char *s, size_t n, srv_emit_fn emit) {
    if (!t->enabled) {
        if (n) emit(j, s, n, false);
        return;
    }
    srv_buf_add(&t->hold, s, n);
    if (t->hold.oom) return;
    think_run(t, j, emit);
}

void srv_think_flush(struct srv_think *t, struct srv_job *j, srv_emit_fn emit) {
    if (t->enabled && !t->hold.oom) {
        size_t n = t->hold.n;
        if (t->in_think)
            while (n && t->hold.s[n - 1] == '\n') n--;
        emit_section(t, j, t->hold.s ? t->hold.s : "", n, emit);
    }
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
