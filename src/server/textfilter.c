/* textfilter.c — what happens to generated text between the detokenizer and the client:
 * stop strings (found across token boundaries; a tail that may still become one is held
 * back so that a stream never shows part of a stop string), and JSON strings that stay
 * valid whatever bytes a random-weight model produces. (Reasoning and tool calls are split
 * out of chat answers by src/text's toolcall parser.)
 */
#include <stdlib.h>
#include <string.h>

#include "hmoe/json.h"
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

json_t *srv_json_text(const char *s, size_t n) {
    struct srv_buf b = {0};
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        const size_t len = hmoe_utf8_seq_len(u + i, n - i);
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
