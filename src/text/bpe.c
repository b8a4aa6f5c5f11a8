/* bpe.c — byte-level BPE on one pre-tokenized word (tokenizer.md §4.4).
 * The word's bytes become symbols (their byte-level characters), then the adjacent pair
 * with the lowest merge rank — leftmost on ties — is merged until none is left. A binary
 * heap keyed by (rank, left position) holds the candidate pairs and stale entries are
 * skipped when popped, so a word of n bytes costs O(n log n), never O(n^2).
 * Relies on the symbol and merge tables built by vocab.c. */
#include <stdlib.h>
#include <string.h>

#include "text/text_impl.h"

struct cand {
    uint64_t key;     /* rank << 32 | left position: pops lowest rank, then leftmost */
    uint32_t right;   /* right position when pushed */
    uint32_t lsym, rsym;
    uint32_t result;
};

struct hmoe_bpe_scratch {
    uint32_t *sym, *next, *prev; /* per byte position; sym == DEAD once merged into the left */
    size_t cap;
    char *text;                  /* the word as byte-level characters (whole-word lookup) */
    size_t cap_text;
    struct cand *heap;
    size_t n_heap, cap_heap;
};

#define DEAD UINT32_MAX
#define NIL UINT32_MAX

struct hmoe_bpe_scratch *hmoe_bpe_scratch_new(void) { return calloc(1, sizeof(struct hmoe_bpe_scratch)); }

void hmoe_bpe_scratch_free(struct hmoe_bpe_scratch *s) {
    if (!s) return;
    free(s->sym);
    free(s->next);
    free(s->prev);
    free(s->heap);
    free(s->text);
    free(s);
}

static bool heap_push(struct hmoe_bpe_scratch *s, struct cand c) {
    if (s->n_heap == s->cap_heap) {
        size_t cap = s->cap_heap ? s->cap_heap * 2 : 256;
        struct cand *h = realloc(s->heap, cap * sizeof *h);
        if (!h) return false;
        s->heap = h;
        s->cap_heap = cap;
    }
    size_t i = s->n_heap++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (s->heap[p].key <= c.key) break;
        s->heap[i] = s->heap[p];
        i = p;
    }
    s->heap[i] = c;
    return true;
}

static struct cand heap_pop(struct hmoe_bpe_scratch *s) {
    struct cand top = s->heap[0], last = s->heap[--s->n_heap];
    size_t i = 0, n = s->n_heap;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && s->heap[c + 1].key < s->heap[c].key) c++;
        if (last.key <= s->heap[c].key) break;
        s->heap[i] = s->heap[c];
        i = c;
    }
    if (n) s->heap[i] = last;
    return top;
}

/* Queue the pair starting at position l (if it has a right neighbour and a rule). */
static bool push_pair(const struct hmoe_vocab_impl *im, struct hmoe_bpe_scratch *s, uint32_t l) {
    if (l == NIL) return true;
    uint32_t r = s->next[l];
    if (r == NIL) return true;
    const struct hmoe_merge_slot *m = hmoe_vocab_merge_find(im, s->sym[l], s->sym[r]);
    if (!m) return true;
    return heap_push(s, (struct cand){.key = ((uint64_t)m->rank << 32) | l, .right = r, .lsym = s->sym[l],
                                      .rsym = s->sym[r], .result = m->result});
}

/* A final symbol that is not a token: llama.cpp then looks up each byte of its text as a
 * one-byte token and emits those that exist (never happens with a consistent vocab). */
static bool emit_symbol(const struct hmoe_vocab *v, uint32_t sym, struct hmoe_idvec *out) {
    const struct hmoe_vocab_impl *im = v->impl;
    if (sym < v->n_tokens) return hmoe_idvec_push(out, (int32_t)sym);
    for (uint32_t i = 0; i < im->sym_len[sym]; i++) {
        int32_t t = hmoe_vocab_find(v, im->sym_text[sym] + i, 1);
        if (t != HMOE_TOKEN_NONE && !hmoe_idvec_push(out, t)) return false;
    }
    return true;
}

/* llama3 vocabularies (ignore_merges): the token whose text is the whole word written in
 * byte-level characters, or HMOE_TOKEN_NONE (then BPE runs as usual). false: out of memory. */
static bool whole_word(const struct hmoe_vocab *v, struct hmoe_bpe_scratch *s, const unsigned char *word, size_t len,
                       int32_t *id) {
    const struct hmoe_vocab_impl *im = v->impl;
    size_t n = 0;
    for (size_t i = 0; i < len; i++) n += im->sym_len[im->byte_sym[word[i]]];
    if (n > s->cap_text) {
        char *t = realloc(s->text, n * 2);
        if (!t) return false;
        s->text = t;
        s->cap_text = n * 2;
    }
    n = 0;
    for (size_t i = 0; i < len; i++) {
        const uint32_t sym = im->byte_sym[word[i]];
        memcpy(s->text + n, im->sym_text[sym], im->sym_len[sym]);
        n += im->sym_len[sym];
    }
    *id = hmoe_vocab_find(v, s->text, n);
    return true;
}

bool hmoe_bpe_encode_word(const struct hmoe_vocab *v, struct hmoe_bpe_scratch *s, const unsigned char *word,
                          size_t len, struct hmoe_idvec *out) {
    const struct hmoe_vocab_impl *im = v->impl;
    if (len == 0) return true;
    if (v->pre == HMOE_VOCAB_PRE_LLAMA3 && len > 1) {
        int32_t id;
        if (!whole_word(v, s, word, len, &id)) return false;
        if (id != HMOE_TOKEN_NONE) return hmoe_idvec_push(out, id);
    }
    if (len == 1) return emit_symbol(v, im->byte_sym[word[0]], out);
    if (len >= NIL) return false; /* positions are 32-bit; callers split far below this */
    if (len > s->cap) {
        size_t cap = len * 2;
        uint32_t *a = realloc(s->sym, cap * sizeof *a);
        if (!a) return false;
        s->sym = a;
        if (!(a = realloc(s->next, cap * sizeof *a))) return false;
        s->next = a;
        if (!(a = realloc(s->prev, cap * sizeof *a))) return false;
        s->prev = a;
        s->cap = cap;
    }
    for (size_t i = 0; i < len; i++) {
        s->sym[i] = im->byte_sym[word[i]];
        s->prev[i] = i ? (uint32_t)(i - 1) : NIL;
        s->next[i] = i + 1 < len ? (uint32_t)(i + 1) : NIL;
    }
    s->n_heap = 0;
    for (size_t i = 0; i + 1 < len; i++)
        if (!push_pair(im, s, (uint32_t)i)) return false;
    while (s->n_heap) {
        struct cand c = heap_pop(s);
        uint32_t l = (uint32_t)(c.key & 0xFFFFFFFFu), r = c.right;
        /* Stale: either side merged since the pair was queued (symbols only grow, so an
         * unchanged symbol id on both sides, still adjacent, means the pair is current). */
        if (s->sym[l] != c.lsym || s->next[l] != r || s->sym[r] != c.rsym) continue;
        s->sym[l] = c.result;
        s->next[l] = s->next[r];
        if (s->next[r] != NIL) s->prev[s->next[r]] = l;
        s->sym[r] = DEAD;
        if (!push_pair(im, s, s->prev[l]) || !push_pair(im, s, l)) return false;
    }
    for (uint32_t i = 0; i != NIL; i = s->next[i])
        if (!emit_symbol(v, s->sym[i], out)) return false;
    return true;
}
