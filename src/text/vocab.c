/* vocab.c — load a byte-level BPE vocabulary from the GGUF tokenizer.* keys (tokenizer.md
 * §1–2): token texts and types, the merge ranks as a hash map (symbol pair -> rank), the
 * text -> id map, special ids and add_bos/add_eos. Relies on the gguf reader's public API;
 * special-token detection is in vocab_special.c, token pieces in detok.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/text_impl.h"
#include "text/unicode_impl.h"

bool hmoe_idvec_push(struct hmoe_idvec *iv, int32_t id) {
    if (iv->n == iv->cap) {
        size_t cap = iv->cap ? iv->cap * 2 : 64;
        int32_t *p = realloc(iv->v, cap * sizeof *p);
        if (!p) return false;
        iv->v = p;
        iv->cap = cap;
    }
    iv->v[iv->n++] = id;
    return true;
}

bool hmoe_vocab_own(struct hmoe_vocab_impl *im, void *block) {
    if (im->n_blocks == im->cap_blocks) {
        size_t cap = im->cap_blocks ? im->cap_blocks * 2 : 16;
        char **p = realloc(im->blocks, cap * sizeof *p);
        if (!p) return false;
        im->blocks = p;
        im->cap_blocks = cap;
    }
    im->blocks[im->n_blocks++] = block;
    return true;
}

/* FNV-1a over a then b: the hash of the concatenation without building it. */
static uint32_t hash2(const char *a, size_t alen, const char *b, size_t blen) {
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < alen; i++) h = (h ^ (unsigned char)a[i]) * 16777619u;
    for (size_t i = 0; i < blen; i++) h = (h ^ (unsigned char)b[i]) * 16777619u;
    return h;
}

static bool sym_equals2(const struct hmoe_vocab_impl *im, uint32_t sym, const char *a, size_t alen, const char *b,
                        size_t blen) {
    return im->sym_len[sym] == alen + blen && memcmp(im->sym_text[sym], a, alen) == 0 &&
           memcmp(im->sym_text[sym] + alen, b, blen) == 0;
}

/* Slot index holding a+b, or of the empty slot where it would go. */
static uint32_t sym_slot(const struct hmoe_vocab_impl *im, const char *a, size_t alen, const char *b, size_t blen) {
    uint32_t i = hash2(a, alen, b, blen) & im->str_mask;
    while (im->str_slots[i] && !sym_equals2(im, im->str_slots[i] - 1, a, alen, b, blen)) i = (i + 1) & im->str_mask;
    return i;
}

int64_t hmoe_vocab_sym_find2(const struct hmoe_vocab_impl *im, const char *a, size_t alen, const char *b,
                             size_t blen) {
    uint32_t s = im->str_slots[sym_slot(im, a, alen, b, blen)];
    return s ? (int64_t)s - 1 : -1;
}

/* Register the string a+b as a new symbol (not a token). `a`/`b` may be transient: the
 * concatenation is copied. Returns the symbol or -1 when out of memory. */
static int64_t sym_add_extra(struct hmoe_vocab_impl *im, const char *a, size_t alen, const char *b, size_t blen) {
    if (im->n_sym == im->cap_sym) {
        uint32_t cap = im->cap_sym * 2;
        const char **t = realloc(im->sym_text, cap * sizeof *t);
        if (!t) return -1;
        im->sym_text = t;
        uint32_t *l = realloc(im->sym_len, cap * sizeof *l);
        if (!l) return -1;
        im->sym_len = l;
        im->cap_sym = cap;
    }
    char *s = malloc(alen + blen + 1);
    if (!s || !hmoe_vocab_own(im, s)) { free(s); return -1; }
    memcpy(s, a, alen);
    memcpy(s + alen, b, blen);
    s[alen + blen] = 0;
    uint32_t sym = im->n_sym++;
    im->sym_text[sym] = s;
    im->sym_len[sym] = (uint32_t)(alen + blen);
    im->str_slots[sym_slot(im, s, alen + blen, "", 0)] = sym + 1;
    return sym;
}

static uint64_t mix64(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

const struct hmoe_merge_slot *hmoe_vocab_merge_find(const struct hmoe_vocab_impl *im, uint32_t l, uint32_t r) {
    uint64_t key = ((uint64_t)(l + 1) << 32) | (uint64_t)(r + 1);
    for (uint64_t i = mix64(key) & im->merge_mask;; i = (i + 1) & im->merge_mask) {
        const struct hmoe_merge_slot *s = &im->merges[i];
        if (s->key == key) return s;
        if (s->key == 0) return NULL;
    }
}

static uint32_t pow2_at_least(uint64_t n) {
    uint32_t p = 1024;
    while (p < n) p <<= 1;
    return p;
}

void hmoe_vocab_free(struct hmoe_vocab *v) {
    if (!v) return;
    struct hmoe_vocab_impl *im = v->impl;
    if (im) {
        for (size_t i = 0; i < im->n_blocks; i++) free(im->blocks[i]);
        free(im->blocks);
        free(im->sym_text);
        free(im->sym_len);
        free(im->str_slots);
        free(im->merges);
        free(im->specials);
        free(im);
    }
    free(v->text);
    free(v->text_len);
    free(v->attr);
    free(v->piece);
    free(v->piece_len);
    free(v->eog_ids);
    free(v->chat_template);
    free(v);
}

const char *hmoe_vocab_pre_name(enum hmoe_vocab_pre pre) {
    return pre == HMOE_VOCAB_PRE_QWEN35 ? "qwen35"
           : pre == HMOE_VOCAB_PRE_LLAMA3 ? "llama3"
           : pre == HMOE_VOCAB_PRE_GPT4O  ? "gpt-4o"
                                          : "qwen2";
}

int32_t hmoe_vocab_find(const struct hmoe_vocab *v, const char *text, size_t len) {
    int64_t s = hmoe_vocab_sym_find2(v->impl, text, len, "", 0);
    return s >= 0 && s < v->n_tokens ? (int32_t)s : HMOE_TOKEN_NONE;
}

bool hmoe_vocab_is_eog(const struct hmoe_vocab *v, int32_t id) {
    uint32_t lo = 0, hi = v->n_eog; /* eog_ids is sorted */
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (v->eog_ids[mid] == id) return true;
        if (v->eog_ids[mid] < id) lo = mid + 1;
        else hi = mid;
    }
    return false;
}

/* Pre-tokenizer names accepted for each implemented splitter (llama.cpp's aliases). */
static const struct {
    const char *name;
    enum hmoe_vocab_pre pre;
} pre_names[] = {
    {"qwen2", HMOE_VOCAB_PRE_QWEN2},  {"deepseek-r1-qwen", HMOE_VOCAB_PRE_QWEN2},
    {"kormo", HMOE_VOCAB_PRE_QWEN2},  {"f2llmv2", HMOE_VOCAB_PRE_QWEN2},
    {"qwen35", HMOE_VOCAB_PRE_QWEN35},
    {"pixtral", HMOE_VOCAB_PRE_LLAMA3}, {"llama3", HMOE_VOCAB_PRE_LLAMA3},
    {"llama-v3", HMOE_VOCAB_PRE_LLAMA3}, {"llama-bpe", HMOE_VOCAB_PRE_LLAMA3},
    {"gpt-4o", HMOE_VOCAB_PRE_GPT4O},
};

static bool str_is(struct hmoe_gguf_str s, const char *lit) {
    return s.len == strlen(lit) && memcmp(s.ptr, lit, s.len) == 0;
}

/* A required string-array key with at least one entry. */
static enum hmoe_status get_str_array(const struct hmoe_gguf *g, const char *key, const struct hmoe_gguf_kv **out,
                                      struct hmoe_err *err) {
    enum hmoe_status st = hmoe_gguf_get_arr(g, key, out, err);
    if (st == HMOE_ERR_NOT_FOUND)
        return HMOE_RAISE(err, HMOE_ERR_FORMAT, "%s: vocabulary key '%s' is missing; this GGUF has no usable tokenizer "
                          "(re-convert the model with llama.cpp's convert_hf_to_gguf.py)", g->path, key);
    if (st != HMOE_OK) return st;
    if ((*out)->arr_type != HMOE_GGUF_STRING)
        return HMOE_RAISE(err, HMOE_ERR_FORMAT, "%s: vocabulary key '%s' must be an array of strings, not of %s", g->path,
                          key, hmoe_gguf_vtype_name((*out)->arr_type));
    return HMOE_OK;
}

static enum hmoe_status load_texts(const struct hmoe_gguf *g, struct hmoe_vocab *v, const struct hmoe_gguf_kv *toks,
                                   struct hmoe_err *err) {
    struct hmoe_vocab_impl *im = v->impl;
    uint32_t n = v->n_tokens;
    uint64_t total = 0;
    for (uint32_t i = 0; i < n; i++) total += toks->arr_str[i].len + 1 + (toks->arr_str[i].len ? 0 : 24);
    char *arena = malloc(total ? total : 1);
    v->text = malloc(n * sizeof *v->text);
    v->text_len = malloc(n * sizeof *v->text_len);
    v->attr = malloc(n);
    im->cap_sym = n + 1024;
    im->sym_text = malloc(im->cap_sym * sizeof *im->sym_text);
    im->sym_len = malloc(im->cap_sym * sizeof *im->sym_len);
    /* Room for the tokens plus the strings merges add, at load <= 1/2. */
    im->str_mask = pow2_at_least(2 * ((uint64_t)n + 4096)) - 1;
    im->str_slots = calloc((size_t)im->str_mask + 1, sizeof *im->str_slots);
    if (arena && !hmoe_vocab_own(im, arena)) {
        free(arena);
        arena = NULL;
    }
    if (!arena || !v->text || !v->text_len || !v->attr || !im->sym_text || !im->sym_len || !im->str_slots)
        return HMOE_RAISE(err, HMOE_ERR_NOMEM, "%s: out of memory loading %u tokens", g->path, n);
    char *p = arena;
    for (uint32_t i = 0; i < n; i++) {
        struct hmoe_gguf_str s = toks->arr_str[i];
        if (s.len > UINT32_MAX / 2)
            return HMOE_RAISE(err, HMOE_ERR_FORMAT, "%s: token %u is %llu bytes long", g->path, i,
                              (unsigned long long)s.len);
        v->text[i] = p;
        if (s.len == 0) {
            /* llama.cpp names empty tokens so that they stay distinct and never match. */
            p += sprintf(p, "[EMPTY_%u]", i);
        } else {
            memcpy(p, s.ptr, s.len);
            p += s.len;
        }
        v->text_len[i] = (uint32_t)(p - v->text[i]);
        *p++ = 0;
        im->sym_text[i] = v->text[i];
        im->sym_len[i] = v->text_len[i];
        /* A duplicated text maps to its last id, as llama.cpp's text -> id map. */
        im->str_slots[sym_slot(im, v->text[i], v->text_len[i], "", 0)] = i + 1;
    }
    im->n_sym = n;
    return HMOE_OK;
}

static enum hmoe_status load_types(const struct hmoe_gguf *g, struct hmoe_vocab *v, struct hmoe_err *err) {
    const struct hmoe_gguf_kv *kv = hmoe_gguf_find_kv(g, "tokenizer.ggml.token_type");
    if (!kv) {
        memset(v->attr, HMOE_TOKEN_NORMAL, v->n_tokens);
        return HMOE_OK;
    }
    if (kv->type != HMOE_GGUF_ARRAY || kv->arr_type == HMOE_GGUF_STRING || kv->arr_type == HMOE_GGUF_ARRAY ||
        kv->arr_type == HMOE_GGUF_F32 || kv->arr_type == HMOE_GGUF_F64)
        return HMOE_RAISE(err, HMOE_ERR_FORMAT, "%s: 'tokenizer.ggml.token_type' must be an array of integers", g->path);
    if (kv->arr_n < v->n_tokens)
        return HMOE_RAISE(err, HMOE_ERR_FORMAT, "%s: 'tokenizer.ggml.token_type' has %llu entries for %u tokens", g->path,
                          (unsigned long long)kv->arr_n, v->n_tokens);
    for (uint32_t i = 0; i < v->n_tokens; i++) {
        switch (hmoe_gguf_arr_i64(kv, i)) { /* tokenizer.md §2 type codes */
        case 1: v->attr[i] = HMOE_TOKEN_NORMAL; break;
        case 2: v->attr[i] = HMOE_TOKEN_UNKNOWN; break;
        case 3: v->attr[i] = HMOE_TOKEN_CONTROL; break;
        case 4: v->attr[i] = HMOE_TOKEN_USER_DEFINED; break;
        case 5: v->attr[i] = HMOE_TOKEN_UNUSED; break;
        case 6: v->attr[i] = HMOE_TOKEN_BYTE; break;
        default: v->attr[i] = 0; break; /* undefined: renders as nothing, never matched */
        }
    }
    return HMOE_OK;
}

/* tokenizer.md §4.4: merges "A B" in rank order. Two passes: first every concatenation
 * becomes a symbol (a merge may need the result of a later-ranked one), then each rule
 * whose halves can ever appear is entered under its symbol pair, lowest rank kept. */
static enum hmoe_status load_merges(const struct hmoe_gguf *g, struct hmoe_vocab *v, const struct hmoe_gguf_kv *mk,
                                    struct hmoe_err *err) {
    struct hmoe_vocab_impl *im = v->impl;
    if (mk->arr_n > INT32_MAX)
        return HMOE_RAISE(err, HMOE_ERR_FORMAT, "%s: %llu merges is too many", g->path, (unsigned long long)mk->arr_n);
    v->n_merges = (uint32_t)mk->arr_n;

    /* The byte-level character of every byte is a symbol (initial BPE symbols). */
    for (int b = 0; b < 256; b++) {
        char u[4];
        size_t ul = hmoe_utf8_encode(hmoe_byte_to_cpt((uint8_t)b), u);
        int64_t s = hmoe_vocab_sym_find2(im, u, ul, "", 0);
        if (s < 0 && (s = sym_add_extra(im, u, ul, "", 0)) < 0) goto nomem;
        im->byte_sym[b] = (uint32_t)s;
    }
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1) {
            im->merge_mask = pow2_at_least(2 * (uint64_t)v->n_merges + 2) - 1;
            im->merges = calloc(im->merge_mask + 1, sizeof *im->merges);
            if (!im->merges) goto nomem;
        }
        for (uint32_t r = 0; r < v->n_merges; r++) {
            struct hmoe_gguf_str m = mk->arr_str[r];
            const char *sp = m.len > 1 ? memchr(m.ptr + 1, ' ', m.len - 1) : NULL;
            if (!sp) continue; /* llama.cpp keys it as ("", ""), which never matches */
            size_t alen = (size_t)(sp - m.ptr), blen = m.len - alen - 1;
            if (pass == 0) {
                if (im->n_sym > (im->str_mask + 1) / 2) {
                    /* Keep the load factor at <= 1/2: rehash into a table twice the size. */
                    uint32_t mask = im->str_mask * 2 + 1;
                    uint32_t *slots = calloc((size_t)mask + 1, sizeof *slots);
                    if (!slots) goto nomem;
                    free(im->str_slots);
                    im->str_slots = slots;
                    im->str_mask = mask;
                    /* Ascending order: for a duplicated token text the last id wins again. */
                    for (uint32_t s = 0; s < im->n_sym; s++)
                        slots[sym_slot(im, im->sym_text[s], im->sym_len[s], "", 0)] = s + 1;
                }
                if (hmoe_vocab_sym_find2(im, m.ptr, alen, sp + 1, blen) < 0 &&
                    sym_add_extra(im, m.ptr, alen, sp + 1, blen) < 0)
                    goto nomem;
                continue;
            }
            int64_t a = hmoe_vocab_sym_find2(im, m.ptr, alen, "", 0);
            int64_t b = hmoe_vocab_sym_find2(im, sp + 1, blen, "", 0);
            if (a < 0 || b < 0) continue; /* a half that never occurs: the rule can never fire */
            int64_t res = hmoe_vocab_sym_find2(im, m.ptr, alen, sp + 1, blen);
            uint64_t key = ((uint64_t)(a + 1) << 32) | (uint64_t)(b + 1);
            uint64_t i = mix64(key) & im->merge_mask;
            while (im->merges[i].key && im->merges[i].key != key) i = (i + 1) & im->merge_mask;
            if (im->merges[i].key) continue; /* duplicate rule: the first (lowest rank) stays */
            im->merges[i] = (struct hmoe_merge_slot){.key = key, .rank = r, .result = (uint32_t)res};
        }
    }
    return HMOE_OK;
nomem:
    return HMOE_RAISE(err, HMOE_ERR_NOMEM, "%s: out of memory loading %u merges", g->path, v->n_merges);
}

/* Special ids from the keys (tokenizer.md §1). llama.cpp's gpt2 defaults are BOS = EOS = 11;
 * an id outside the vocabulary is ignored, as there. */
static void load_special_ids(const struct hmoe_gguf *g, struct hmoe_vocab *v) {
    static const struct {
        const char *key;
        size_t off;
    } keys[] = {
        {"tokenizer.ggml.bos_token_id", offsetof(struct hmoe_vocab, bos_id)},
        {"tokenizer.ggml.eos_token_id", offsetof(struct hmoe_vocab, eos_id)},
        {"tokenizer.ggml.eot_token_id", offsetof(struct hmoe_vocab, eot_id)},
        {"tokenizer.ggml.eom_token_id", offsetof(struct hmoe_vocab, eom_id)},
        {"tokenizer.ggml.unknown_token_id", offsetof(struct hmoe_vocab, unk_id)},
        {"tokenizer.ggml.padding_token_id", offsetof(struct hmoe_vocab, pad_id)},
        {"tokenizer.ggml.fim_pre_token_id", offsetof(struct hmoe_vocab, fim_pre_id)},
        {"tokenizer.ggml.fim_suf_token_id", offsetof(struct hmoe_vocab, fim_suf_id)},
        {"tokenizer.ggml.fim_mid_token_id", offsetof(struct hmoe_vocab, fim_mid_id)},
        {"tokenizer.ggml.fim_pad_token_id", offsetof(struct hmoe_vocab, fim_pad_id)},
        {"tokenizer.ggml.fim_rep_token_id", offsetof(struct hmoe_vocab, fim_rep_id)},
        {"tokenizer.ggml.fim_sep_token_id", offsetof(struct hmoe_vocab, fim_sep_id)},
    };
    v->bos_id = v->eos_id = 11;
    v->eot_id = v->eom_id = v->unk_id = v->pad_id = HMOE_TOKEN_NONE;
    v->fim_pre_id = v->fim_suf_id = v->fim_mid_id = v->fim_pad_id = v->fim_rep_id = v->fim_sep_id = HMOE_TOKEN_NONE;
    for (size_t k = 0; k < HMOE_ARRAY_LEN(keys); k++) {
        int32_t *id = (int32_t *)((char *)v + keys[k].off);
        if (*id >= 0 && (uint32_t)*id >= v->n_tokens) *id = HMOE_TOKEN_NONE;
        uint32_t val;
        if (hmoe_gguf_get_u32(g, keys[k].key, &val, NULL) == HMOE_OK && val < v->n_tokens) *id = (int32_t)val;
    }
    /* llama.cpp's default depends on the pre-tokenizer: on for the llama3 family (nemotron_h_moe.md §10). */
    v->add_bos = hmoe_gguf_get_bool_or(g, "tokenizer.ggml.add_bos_token", v->pre == HMOE_VOCAB_PRE_LLAMA3);
    v->add_eos = hmoe_gguf_get_bool_or(g, "tokenizer.ggml.add_eos_token", false);
}

enum hmoe_status hmoe_vocab_load(const struct hmoe_gguf *g, struct hmoe_vocab **out, struct hmoe_err *err) {
    *out = NULL;
    struct hmoe_gguf_str model, pre;
    enum hmoe_status st = hmoe_gguf_get_str(g, "tokenizer.ggml.model", &model, err);
    if (st == HMOE_ERR_NOT_FOUND)
        return HMOE_RAISE(err, HMOE_ERR_FORMAT, "%s: vocabulary key 'tokenizer.ggml.model' is missing; this GGUF has no "
                          "tokenizer (a vocab-only or full model GGUF converted by llama.cpp is needed)", g->path);
    if (st != HMOE_OK) return st;
    if (!str_is(model, "gpt2"))
        return HMOE_RAISE(err, HMOE_ERR_UNSUPPORTED, "%s: tokenizer.ggml.model is '%.*s'; only byte-level BPE ('gpt2', "
                          "as in Qwen3 / Qwen3.5) is supported", g->path, (int)HMOE_MIN(model.len, 64), model.ptr);
    st = hmoe_gguf_get_str(g, "tokenizer.ggml.pre", &pre, err);
    if (st == HMOE_ERR_NOT_FOUND)
        return HMOE_RAISE(err, HMOE_ERR_UNSUPPORTED, "%s: vocabulary key 'tokenizer.ggml.pre' is missing; supported "
                          "pre-tokenizers are qwen2, qwen35, pixtral (llama3) and gpt-4o", g->path);
    if (st != HMOE_OK) return st;
    int pre_idx = -1;
    for (size_t i = 0; i < HMOE_ARRAY_LEN(pre_names); i++)
        if (str_is(pre, pre_names[i].name)) pre_idx = (int)i;
    if (pre_idx < 0)
        return HMOE_RAISE(err, HMOE_ERR_UNSUPPORTED, "%s: pre-tokenizer '%.*s' (tokenizer.ggml.pre) is not supported; "
                          "supported: qwen2 (Qwen2/2.5/3, Qwen3-MoE), qwen35 (Qwen3.5/3.6), pixtral / llama3 "
                          "(Nemotron-3), gpt-4o (o200k_harmony)", g->path,
                          (int)HMOE_MIN(pre.len, 64), pre.ptr);
    const struct hmoe_gguf_kv *toks, *merges;
    if ((st = get_str_array(g, "tokenizer.ggml.tokens", &toks, err)) != HMOE_OK) return st;
    if ((st = get_str_array(g, "tokenizer.ggml.merges", &merges, err)) != HMOE_OK) return st;
    if (toks->arr_n == 0 || toks->arr_n > INT32_MAX / 2)
        return HMOE_RAISE(err, HMOE_ERR_FORMAT, "%s: 'tokenizer.ggml.tokens' has %llu entries", g->path,
                          (unsigned long long)toks->arr_n);

    struct hmoe_vocab *v = calloc(1, sizeof *v);
    if (!v || !(v->impl = calloc(1, sizeof(struct hmoe_vocab_impl)))) {
        free(v);
        return HMOE_RAISE(err, HMOE_ERR_NOMEM, "%s: out of memory", g->path);
    }
    v->n_tokens = (uint32_t)toks->arr_n;
    v->pre = pre_names[pre_idx].pre;
    if ((st = load_texts(g, v, toks, err)) != HMOE_OK || (st = load_types(g, v, err)) != HMOE_OK ||
        (st = load_merges(g, v, merges, err)) != HMOE_OK)
        goto fail;
    load_special_ids(g, v);
    struct hmoe_gguf_str tmpl;
    if (hmoe_gguf_get_str(g, "tokenizer.chat_template", &tmpl, NULL) == HMOE_OK) {
        v->chat_template = malloc(tmpl.len + 1);
        if (!v->chat_template) { st = HMOE_RAISE(err, HMOE_ERR_NOMEM, "%s: out of memory", g->path); goto fail; }
        memcpy(v->chat_template, tmpl.ptr, tmpl.len);
        v->chat_template[tmpl.len] = 0;
    }
    if ((st = hmoe_vocab_setup_specials(v, err)) != HMOE_OK || (st = hmoe_vocab_build_pieces(v, err)) != HMOE_OK)
        goto fail;
    *out = v;
    return HMOE_OK;
fail:
    hmoe_vocab_free(v);
    return st;
}
