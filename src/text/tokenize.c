/* tokenize.c — text -> token ids (tokenizer.md §4): split out special / added tokens
 * (longest first, before any regex), decode each remaining fragment to code points (an
 * invalid byte becomes U+FFFD, as in llama.cpp), pre-tokenize it into words, BPE each word,
 * and add BOS/EOS when the vocab asks. Relies on pretok_qwen.c, bpe.c and vocab.c. */
#define _GNU_SOURCE /* memmem */
#include <stdlib.h>
#include <string.h>

#include "text/text_impl.h"
#include "text/unicode_impl.h"

struct frag {
    int32_t id;      /* a special token, or HMOE_TOKEN_NONE for raw text */
    size_t off, len; /* raw text: bytes of the input */
};

struct fraglist {
    struct frag *v;
    size_t n, cap;
};

static bool frag_push(struct fraglist *l, struct frag f) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        struct frag *p = realloc(l->v, cap * sizeof *p);
        if (!p) return false;
        l->v = p;
        l->cap = cap;
    }
    l->v[l->n++] = f;
    return true;
}

/* §4.1: for each special token, longest first, cut every occurrence out of every raw
 * fragment left to right; pieces already cut are never rescanned. */
static bool partition(const struct hmoe_vocab *v, const char *text, size_t len, bool parse_special,
                      struct fraglist *out) {
    const struct hmoe_vocab_impl *im = v->impl;
    struct fraglist cur = {0}, next = {0};
    bool ok = frag_push(&cur, (struct frag){HMOE_TOKEN_NONE, 0, len});
    for (uint32_t k = 0; ok && k < im->n_specials; k++) {
        int32_t id = im->specials[k];
        if (!parse_special && (v->attr[id] & (HMOE_TOKEN_CONTROL | HMOE_TOKEN_UNKNOWN))) continue;
        const char *tt = v->text[id];
        size_t tl = v->text_len[id];
        next.n = 0;
        for (size_t i = 0; ok && i < cur.n; i++) {
            struct frag f = cur.v[i];
            if (f.id != HMOE_TOKEN_NONE) {
                ok = frag_push(&next, f);
                continue;
            }
            size_t off = f.off, end = f.off + f.len;
            const char *hit;
            while (ok && end - off >= tl && (hit = memmem(text + off, end - off, tt, tl))) {
                size_t at = (size_t)(hit - text);
                if (at > off) ok = frag_push(&next, (struct frag){HMOE_TOKEN_NONE, off, at - off});
                ok = ok && frag_push(&next, (struct frag){id, at, tl});
                off = at + tl;
            }
            if (ok && end > off) ok = frag_push(&next, (struct frag){HMOE_TOKEN_NONE, off, end - off});
        }
        struct fraglist t = cur;
        cur = next;
        next = t;
    }
    free(next.v);
    if (!ok) {
        free(cur.v);
        return false;
    }
    *out = cur;
    return true;
}

struct word_ctx {
    const struct hmoe_vocab *v;
    struct hmoe_bpe_scratch *bpe;
    const uint32_t *cpts;
    unsigned char *buf; /* the word re-encoded as UTF-8 (U+FFFD for invalid input bytes) */
    struct hmoe_idvec *out;
};

static bool on_word(void *ctx, size_t start, size_t end) {
    struct word_ctx *w = ctx;
    size_t n = 0;
    for (size_t i = start; i < end; i++) n += hmoe_utf8_encode(w->cpts[i], (char *)w->buf + n);
    return hmoe_bpe_encode_word(w->v, w->bpe, w->buf, n, w->out);
}

static bool encode_fragment(const struct hmoe_vocab *v, struct hmoe_bpe_scratch *bpe, const unsigned char *s,
                            size_t len, struct hmoe_idvec *out) {
    /* One code point per byte at most; an invalid byte (1) becomes U+FFFD (3 bytes). */
    uint32_t *cpts = malloc(len * sizeof *cpts);
    uint8_t *flags = malloc(len);
    unsigned char *buf = malloc(len * 3 + 4);
    bool ok = cpts && flags && buf;
    size_t n = 0;
    for (size_t pos = 0; ok && pos < len; n++) {
        cpts[n] = hmoe_utf8_decode(s, len, &pos);
        flags[n] = hmoe_ucd_flags(cpts[n]);
    }
    if (ok) {
        struct word_ctx w = {v, bpe, cpts, buf, out};
        ok = v->pre == HMOE_VOCAB_PRE_GPT4O ? hmoe_pretok_gpt4o_split(cpts, flags, n, on_word, &w)
                                            : hmoe_pretok_qwen_split(v->pre, cpts, flags, n, on_word, &w);
    }
    free(cpts);
    free(flags);
    free(buf);
    return ok;
}

enum hmoe_status hmoe_tokenize(const struct hmoe_vocab *v, const char *text, size_t len, bool add_special,
                               bool parse_special, int32_t **ids, size_t *n_ids, struct hmoe_err *err) {
    *ids = NULL;
    *n_ids = 0;
    if (len > 0 && !text) return HMOE_RAISE(err, HMOE_ERR_ARG, "tokenize: NULL text with length %zu", len);
    struct hmoe_idvec out = {0};
    struct fraglist frags = {0};
    struct hmoe_bpe_scratch *bpe = hmoe_bpe_scratch_new();
    bool ok = bpe != NULL;
    if (ok && add_special && v->add_bos && v->bos_id != HMOE_TOKEN_NONE) ok = hmoe_idvec_push(&out, v->bos_id);
    if (ok && len > 0) ok = partition(v, text, len, parse_special, &frags);
    for (size_t i = 0; ok && i < frags.n; i++) {
        if (frags.v[i].id != HMOE_TOKEN_NONE) ok = hmoe_idvec_push(&out, frags.v[i].id);
        else ok = encode_fragment(v, bpe, (const unsigned char *)text + frags.v[i].off, frags.v[i].len, &out);
    }
    if (ok && add_special && v->add_eos && v->eos_id != HMOE_TOKEN_NONE) ok = hmoe_idvec_push(&out, v->eos_id);
    free(frags.v);
    hmoe_bpe_scratch_free(bpe);
    if (!ok) {
        free(out.v);
        return HMOE_RAISE(err, HMOE_ERR_NOMEM, "tokenize: out of memory on %zu bytes of text", len);
    }
    if (out.n == 0) free(out.v);
    else *ids = out.v;
    *n_ids = out.n;
    return HMOE_OK;
}
