/* strbuf_impl.h — private to src/text: a growable byte string for the template renderers
 * and the tojson writer. Appends after a failed allocation are no-ops; check `oom` once
 * at the end. */
#ifndef HMOE_TEXT_STRBUF_IMPL_H
#define HMOE_TEXT_STRBUF_IMPL_H

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

struct hmoe_strbuf {
    char *s;
    size_t n, cap;
    bool oom;
};

static inline void hmoe_strbuf_addn(struct hmoe_strbuf *b, const char *p, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1) cap *= 2;
        char *q = realloc(b->s, cap);
        if (!q) { b->oom = true; return; }
        b->s = q;
        b->cap = cap;
    }
    memcpy(b->s + b->n, p, n);
    b->n += n;
    b->s[b->n] = 0;
}

static inline void hmoe_strbuf_add(struct hmoe_strbuf *b, const char *p) { hmoe_strbuf_addn(b, p, strlen(p)); }

#endif
