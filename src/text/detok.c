/* detok.c — token ids -> bytes (tokenizer.md §5): the per-token piece table built at load
 * (NORMAL texts mapped back through the byte map, added tokens raw, UNUSED empty), whole-
 * sequence detokenization, and the streaming detokenizer that holds back an incomplete
 * UTF-8 sequence at the end of the output until the next token completes it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/text_impl.h"
#include "text/unicode_impl.h"

enum hmoe_status hmoe_vocab_build_pieces(struct hmoe_vocab *v, struct hmoe_err *err) {
    struct hmoe_vocab_impl *im = v->impl;
    int16_t cpt_byte[0x144]; /* byte for each code point the byte map uses (U+0000..U+0143) */
    for (uint32_t c = 0; c < 0x144; c++) cpt_byte[c] = (int16_t)hmoe_cpt_to_byte(c);

    /* A NORMAL piece is at most as long as its text, except for the rare unmappable code
     * point, which llama.cpp spells "[UNK_BYTE_0x<hex><text>]" (<= 20 + text bytes each). */
    uint64_t total = 0;
    for (uint32_t i = 0; i < v->n_tokens; i++) total += (uint64_t)v->text_len[i] * 21 + 1;
    v->piece = malloc(v->n_tokens * sizeof *v->piece);
    v->piece_len = malloc(v->n_tokens * sizeof *v->piece_len);
    char *arena = malloc(total);
    if (arena && !hmoe_vocab_own(im, arena)) {
        free(arena);
        arena = NULL;
    }
    if (!v->piece || !v->piece_len || !arena) return HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory building token pieces");
    char *p = arena;
    for (uint32_t i = 0; i < v->n_tokens; i++) {
        uint8_t a = v->attr[i];
        const unsigned char *t = (const unsigned char *)v->text[i];
        size_t tl = v->text_len[i];
        v->piece[i] = p;
        if (a & (HMOE_TOKEN_CONTROL | HMOE_TOKEN_UNKNOWN | HMOE_TOKEN_USER_DEFINED)) {
            memcpy(p, t, tl); /* added tokens are stored as plain UTF-8: never byte-decoded */
            p += tl;
        } else if (a & (HMOE_TOKEN_NORMAL | HMOE_TOKEN_BYTE)) {
            for (size_t pos = 0; pos < tl;) {
                uint32_t c = hmoe_utf8_decode(t, tl, &pos);
                if (c < 0x144 && cpt_byte[c] >= 0) {
                    *p++ = (char)cpt_byte[c];
                    continue;
                }
                p += sprintf(p, "[UNK_BYTE_0x");
                char u[4];
                size_t ul = hmoe_utf8_encode(c, u);
                for (size_t k = 0; k < ul; k++) p += sprintf(p, "%02x", (unsigned char)u[k]);
                memcpy(p, t, tl);
                p += tl;
                *p++ = ']';
            }
        } /* UNUSED / undefined: empty */
        v->piece_len[i] = (uint32_t)(p - v->piece[i]);
        *p++ = 0;
    }
    return HMOE_OK;
}

const char *hmoe_token_to_piece(const struct hmoe_vocab *v, int32_t id, bool render_special, size_t *len) {
    if (id < 0 || (uint32_t)id >= v->n_tokens ||
        (!render_special && (v->attr[id] & (HMOE_TOKEN_CONTROL | HMOE_TOKEN_UNKNOWN)))) {
        *len = 0;
        return "";
    }
    *len = v->piece_len[id];
    return v->piece[id];
}

enum hmoe_status hmoe_detokenize(const struct hmoe_vocab *v, const int32_t *ids, size_t n, bool remove_special,
                                 bool render_special, char **out, size_t *out_len, struct hmoe_err *err) {
    *out = NULL;
    *out_len = 0;
    if (remove_special && v->add_bos && n > 0 && ids[0] == v->bos_id) { ids++; n--; }
    if (remove_special && v->add_eos && n > 0 && ids[n - 1] == v->eos_id) n--;
    size_t total = 0, len;
    for (size_t i = 0; i < n; i++) {
        hmoe_token_to_piece(v, ids[i], render_special, &len);
        total += len;
    }
    char *buf = malloc(total + 1);
    if (!buf) return HMOE_RAISE(err, HMOE_ERR_NOMEM, "detokenize: out of memory for %zu bytes", total);
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        const char *p = hmoe_token_to_piece(v, ids[i], render_special, &len);
        memcpy(buf + at, p, len);
        at += len;
    }
    buf[at] = 0;
    *out = buf;
    *out_len = at;
    return HMOE_OK;
}

size_t hmoe_utf8_complete_prefix(const char *s, size_t len) {
    /* Look back over at most 4 bytes for the first byte of the last character. */
    for (size_t k = 1; k <= 4 && k <= len; k++) {
        unsigned char c = (unsigned char)s[len - k];
        if ((c & 0xC0) == 0x80) continue; /* continuation: keep looking for the first byte */
        size_t need = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 1;
        return k < need ? len - k : len;
    }
    return len; /* only continuation bytes: nothing can complete them */
}

void hmoe_detok_stream_init(struct hmoe_detok_stream *s, const struct hmoe_vocab *v, bool render_special) {
    memset(s, 0, sizeof *s);
    s->vocab = v;
    s->render_special = render_special;
}

void hmoe_detok_stream_free(struct hmoe_detok_stream *s) {
    free(s->buf);
    memset(s, 0, sizeof *s);
}

const char *hmoe_detok_stream_push(struct hmoe_detok_stream *s, int32_t id, size_t *len) {
    size_t plen;
    const char *p = hmoe_token_to_piece(s->vocab, id, s->render_special, &plen);
    size_t need = s->n_pending + plen + 1;
    if (need > s->cap) {
        size_t cap = need < 256 ? 256 : need * 2;
        char *b = realloc(s->buf, cap);
        if (!b) { *len = 0; return NULL; }
        s->buf = b;
        s->cap = cap;
    }
    memcpy(s->buf, s->pending, s->n_pending);
    memcpy(s->buf + s->n_pending, p, plen);
    size_t total = s->n_pending + plen, ok = hmoe_utf8_complete_prefix(s->buf, total);
    s->n_pending = total - ok; /* <= 3 bytes by construction */
    memcpy(s->pending, s->buf + ok, s->n_pending);
    s->buf[ok] = 0;
    *len = ok;
    return s->buf;
}

const char *hmoe_detok_stream_flush(struct hmoe_detok_stream *s, size_t *len) {
    if (s->cap < 5) {
        char *b = realloc(s->buf, 256);
        if (!b) { *len = 0; return NULL; }
        s->buf = b;
        s->cap = 256;
    }
    memcpy(s->buf, s->pending, s->n_pending);
    s->buf[s->n_pending] = 0;
    *len = s->n_pending;
    s->n_pending = 0;
    return s->buf;
}
