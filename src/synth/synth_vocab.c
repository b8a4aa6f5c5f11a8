/* synth_vocab.c — a valid byte-level BPE vocabulary of any size for synthetic models
 * (tokenizer.md §1–§3): the 256 byte tokens in GPT-2 byte→unicode form and in GPT-2 order
 * (so ids 0..255 equal Qwen3's), then merges of existing tokens — merge k creates token
 * 256 + k, as in the real Qwen3 vocab — then Qwen3's 26 added tokens and [PADn] fillers.
 * Deterministic (fixed seed): every synthetic file gets the same vocabulary.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "synth_impl.h"

#define QWEN3_FIRST_ADDED 151643u
#define MAX_TOKEN_BYTES 16 /* merged tokens stay short, like most real ones */
#define VOCAB_SEED 0x766f636162ull

/* Qwen3's added tokens in id order from 151643 (tokenizer.md §2): 3 control, 4 user-defined. */
static const struct {
    const char *text;
    int32_t type;
} added[] = {
    {"<|endoftext|>", 3},   {"<|im_start|>", 3},     {"<|im_end|>", 3},     {"<|object_ref_start|>", 3},
    {"<|object_ref_end|>", 3}, {"<|box_start|>", 3}, {"<|box_end|>", 3},    {"<|quad_start|>", 3},
    {"<|quad_end|>", 3},    {"<|vision_start|>", 3}, {"<|vision_end|>", 3}, {"<|vision_pad|>", 3},
    {"<|image_pad|>", 3},   {"<|video_pad|>", 3},    {"<tool_call>", 4},    {"</tool_call>", 4},
    {"<|fim_prefix|>", 3},  {"<|fim_middle|>", 3},   {"<|fim_suffix|>", 3}, {"<|fim_pad|>", 3},
    {"<|repo_name|>", 3},   {"<|file_sep|>", 3},     {"<tool_response>", 4}, {"</tool_response>", 4},
    {"<think>", 4},         {"</think>", 4},
};
#define N_ADDED ((uint32_t)HMOE_ARRAY_LEN(added))

/* GPT-2 bytes_to_unicode (tokenizer.md §3), in GPT-2's vocabulary order: ids 0..187 are the
 * printable bytes 0x21–0x7E, 0xA1–0xAC, 0xAE–0xFF (code point = byte), ids 188..255 the other
 * 68 bytes in increasing order (code points U+0100, U+0101, ...). Returns the code point. */
static uint32_t byte_token_cp(int id) {
    int printable_seen = 0, other_seen = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int b = 0; b < 256; b++) {
            bool printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || b >= 0xae;
            if (pass == 0 && printable && printable_seen++ == id) return (uint32_t)b;
            if (pass == 1 && !printable && 188 + other_seen++ == id) return 0x100u + (uint32_t)(other_seen - 1);
        }
    return 0; /* not reached for 0 <= id < 256 */
}

struct builder {
    struct hmoe_synth_vocab *v;
    char *arena;
    size_t used, cap;
    uint32_t *table; /* open addressing: token id + 1, 0 = empty */
    size_t mask;
};

static uint64_t fnv1a(const char *s, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 0x100000001b3ull;
    return h;
}

/* Slot of string s: either the slot holding it or the empty slot where it would go. */
static size_t lookup(const struct builder *b, const char *s, size_t n) {
    size_t i = (size_t)fnv1a(s, n) & b->mask;
    for (;;) {
        uint32_t id = b->table[i];
        if (id == 0) return i;
        const struct hmoe_gguf_str *t = &b->v->tokens[id - 1];
        if (t->len == n && memcmp(t->ptr, s, n) == 0) return i;
        i = (i + 1) & b->mask;
    }
}

static const char *store(struct builder *b, const char *s, size_t n) {
    char *p = b->arena + b->used; /* capacity is computed up front, see init */
    memcpy(p, s, n);
    b->used += n;
    return p;
}

static void add_token(struct builder *b, uint32_t id, const char *s, size_t n, int32_t type) {
    b->v->tokens[id].ptr = store(b, s, n);
    b->v->tokens[id].len = n;
    b->v->token_type[id] = type;
    size_t slot = lookup(b, s, n);
    if (b->table[slot] == 0) b->table[slot] = id + 1;
}

/* Ids of lowercase ASCII letters 'a'..'z' among the byte tokens (GPT-2 order: id = byte - 0x21). */
#define LETTER_ID(c) ((uint32_t)((c) - 0x21))

enum hmoe_status hmoe_synth_vocab_init(struct hmoe_synth_vocab *v, uint32_t n_vocab, struct hmoe_err *err) {
    memset(v, 0, sizeof *v);
    if (n_vocab < 256 + N_ADDED)
        return HMOE_RAISE(err, HMOE_ERR_ARG, "a byte-level BPE vocabulary needs at least %u tokens, not %u", 256 + N_ADDED,
                          n_vocab);
    /* Qwen3 layout when it fits: BPE ids below 151643, added tokens at their real ids, padding after. */
    uint32_t first_added = n_vocab >= QWEN3_FIRST_ADDED + N_ADDED ? QWEN3_FIRST_ADDED : n_vocab - N_ADDED;
    v->n_tokens = n_vocab;
    v->n_merges = first_added - 256;
    size_t cap = (size_t)first_added * MAX_TOKEN_BYTES + (size_t)v->n_merges * (2 * MAX_TOKEN_BYTES + 1) +
                 (size_t)N_ADDED * 24 + (size_t)(n_vocab - first_added - N_ADDED) * 16;
    struct builder b = {.v = v, .cap = cap};
    size_t slots = 1;
    while (slots < 2 * (size_t)n_vocab) slots *= 2;
    b.mask = slots - 1;
    v->tokens = calloc(n_vocab, sizeof *v->tokens);
    v->token_type = calloc(n_vocab, sizeof *v->token_type);
    v->merges = calloc(v->n_merges ? v->n_merges : 1, sizeof *v->merges);
    b.arena = v->arena = malloc(cap);
    b.table = calloc(slots, sizeof *b.table);
    if (!v->tokens || !v->token_type || !v->merges || !v->arena || !b.table) {
        free(b.table);
        hmoe_synth_vocab_free(v);
        return HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory generating a %u-token vocabulary", n_vocab);
    }
    for (int id = 0; id < 256; id++) {
        uint32_t cp = byte_token_cp(id);
        char u[2];
        size_t n = 1;
        if (cp < 0x80) u[0] = (char)cp;
        else {
            u[0] = (char)(0xc0 | (cp >> 6));
            u[1] = (char)(0x80 | (cp & 0x3f));
            n = 2;
        }
        add_token(&b, (uint32_t)id, u, n, 1);
    }
    /* Merges: left part biased towards early (short, "frequent") tokens, right part a
     * letter half of the time, as subwords grow in real BPE. Results are new, short and
     * free of '<' (so no merged token can look like a special token to llama.cpp). */
    struct synth_rng rng;
    synth_rng_init(&rng, VOCAB_SEED, 0);
    char buf[2 * MAX_TOKEN_BYTES + 1];
    for (uint32_t id = 256; id < first_added;) {
        double u = synth_rng_uniform(&rng);
        uint32_t a = (uint32_t)(u * u * id), bb;
        if (synth_rng_uniform(&rng) < 0.5) bb = LETTER_ID('a') + (uint32_t)synth_rng_below(&rng, 26);
        else {
            u = synth_rng_uniform(&rng);
            bb = (uint32_t)(u * u * id);
        }
        const struct hmoe_gguf_str *ta = &v->tokens[a], *tb = &v->tokens[bb];
        size_t n = (size_t)(ta->len + tb->len);
        if (n > MAX_TOKEN_BYTES) continue;
        memcpy(buf, ta->ptr, ta->len);
        memcpy(buf + ta->len, tb->ptr, tb->len);
        if (memchr(buf, '<', n) || b.table[lookup(&b, buf, n)] != 0) continue;
        add_token(&b, id, buf, n, 1);
        /* merge text "a b": the parts never contain a space (0x20 is encoded as U+0120) */
        memcpy(buf, ta->ptr, ta->len);
        buf[ta->len] = ' ';
        memcpy(buf + ta->len + 1, tb->ptr, tb->len);
        v->merges[id - 256].ptr = store(&b, buf, n + 1);
        v->merges[id - 256].len = n + 1;
        id++;
    }
    for (uint32_t k = 0; k < N_ADDED; k++) add_token(&b, first_added + k, added[k].text, strlen(added[k].text), added[k].type);
    for (uint32_t id = first_added + N_ADDED; id < n_vocab; id++) {
        char pad[24];
        int n = snprintf(pad, sizeof pad, "[PAD%u]", id);
        add_token(&b, id, pad, (size_t)n, 5);
    }
    v->bos_id = first_added;     /* <|endoftext|> */
    v->eos_id = first_added + 2; /* <|im_end|> */
    v->pad_id = first_added;     /* <|endoftext|> */
    free(b.table);
    return HMOE_OK;
}

void hmoe_synth_vocab_free(struct hmoe_synth_vocab *v) {
    free(v->tokens);
    free(v->token_type);
    free(v->merges);
    free(v->arena);
    memset(v, 0, sizeof *v);
}
