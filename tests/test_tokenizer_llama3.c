/* test_tokenizer_llama3.c — the llama3 pre-tokenizer family ("pixtral", Nemotron-3:
 * nemotron_h_moe.md §10) on a small test vocabulary built here, whose tokens and merges make
 * each rule visible in the ids: numbers split in runs of up to three digits, a pre-token that
 * is itself a vocabulary entry emitted whole although the merges would build something else
 * (ignore_merges), BOS added by default and not when tokenizer.ggml.add_bos_token is false.
 * The same vocabulary with pre = qwen2 shows the difference. Expected ids follow from the
 * regex and the merge list by hand (each case says how). */
#include "harness.h"
#include "hmoe/gguf.h"
#include "hmoe/text.h"

/* Byte-level characters: printable ASCII is itself, space is U+0120 'Ġ'. */
static const char *const toks[] = {"<unk>", "<s>", "</s>", "h", "e", "l", "o", "\xc4\xa0", "1", "2", "3", "4", "5",
                                   "he", "hel", "lo", "\xc4\xa0hello", "12", "123", NULL};
enum { T_BOS = 1, T_H = 3, T_L = 5, T_O = 6, T_SP = 7, T_4 = 11, T_5 = 12, T_1 = 8, T_2 = 9, T_3 = 10,
       T_HEL = 14, T_LO = 15, T_SPHELLO = 16, T_123 = 18 };
static const char *const merges[] = {"h e", "he l", "l o", "1 2", "12 3", NULL};

struct buf {
    unsigned char b[4096];
    size_t at;
};
static void put(struct buf *b, const void *p, size_t n) {
    memcpy(b->b + b->at, p, n);
    b->at += n;
}
static void put_u32(struct buf *b, uint32_t v) { put(b, &v, 4); }
static void put_u64(struct buf *b, uint64_t v) { put(b, &v, 8); }
static void put_str(struct buf *b, const char *s) {
    put_u64(b, strlen(s));
    put(b, s, strlen(s));
}
static void kv_str(struct buf *b, const char *k, const char *v) {
    put_str(b, k), put_u32(b, 8), put_str(b, v);
}
static void kv_arr(struct buf *b, const char *k, const char *const *v) {
    uint64_t n = 0;
    while (v[n]) n++;
    put_str(b, k), put_u32(b, 9), put_u32(b, 8), put_u64(b, n);
    for (uint64_t i = 0; i < n; i++) put_str(b, v[i]);
}

/* pre: the tokenizer.ggml.pre value; add_bos: -1 = key absent, else its value. */
static struct hmoe_vocab *load(const char *pre, int add_bos, struct hmoe_gguf **g) {
    static struct buf b;
    b.at = 0;
    put(&b, "GGUF", 4), put_u32(&b, 3), put_u64(&b, 0), put_u64(&b, add_bos < 0 ? 5 : 6);
    kv_str(&b, "tokenizer.ggml.model", "gpt2");
    kv_str(&b, "tokenizer.ggml.pre", pre);
    kv_arr(&b, "tokenizer.ggml.tokens", toks);
    kv_arr(&b, "tokenizer.ggml.merges", merges);
    put_str(&b, "tokenizer.ggml.bos_token_id"), put_u32(&b, 4), put_u32(&b, T_BOS);
    if (add_bos >= 0) {
        const uint8_t v = (uint8_t)add_bos;
        put_str(&b, "tokenizer.ggml.add_bos_token"), put_u32(&b, 7), put(&b, &v, 1);
    }
    while (b.at % 32) b.b[b.at++] = 0;
    struct hmoe_err err = {0};
    struct hmoe_vocab *v = NULL;
    if (hmoe_gguf_open_memory(b.b, b.at, "llama3-test.gguf", g, &err) || hmoe_vocab_load(*g, &v, &err))
        t_check(0, "test vocabulary loads", "%s", err.msg);
    return v;
}

static void expect(struct hmoe_vocab *v, const char *name, const char *text, const int32_t *want, size_t n_want) {
    int32_t *ids = NULL;
    size_t n = 0;
    struct hmoe_err err = {0};
    enum hmoe_status st = hmoe_tokenize(v, text, strlen(text), true, true, &ids, &n, &err);
    char got[256] = "";
    size_t o = 0;
    for (size_t i = 0; i < n && o < sizeof got - 12; i++) o += (size_t)snprintf(got + o, sizeof got - o, " %d", ids[i]);
    t_check(!st && n == n_want && (n == 0 || memcmp(ids, want, n * sizeof *ids) == 0), name, "%s ids:%s", err.msg, got);
    free(ids);
}

int main(void) {
    struct hmoe_gguf *g = NULL;
    struct hmoe_vocab *v = load("pixtral", -1, &g);
    if (v) {
        t_check(v->pre == HMOE_VOCAB_PRE_LLAMA3 && v->add_bos, "pixtral: llama3 pre-tokenizer, BOS on by default",
                "pre %d add_bos %d", v->pre, v->add_bos);
        /* " hello" is one pre-token, "Ġhello" is a token: emitted whole (BPE would give hel|lo). */
        expect(v, "pixtral: a pre-token that is a vocabulary entry is emitted whole", " hello",
               (int32_t[]){T_BOS, T_SPHELLO}, 2);
        /* "hello" is not a token: BPE merges h+e, he+l, l+o -> hel lo. */
        expect(v, "pixtral: other pre-tokens go through the merges", "hello", (int32_t[]){T_BOS, T_HEL, T_LO}, 3);
        /* 12345 -> pre-tokens 123 | 45: "123" is a token, "45" has no merge. */
        expect(v, "pixtral: digits in runs of up to three", "12345", (int32_t[]){T_BOS, T_123, T_4, T_5}, 4);
        /* 1 2 3 4 5 in words 123|45 again, then " hello" whole. */
        expect(v, "pixtral: digits then a whole word", "12345 hello", (int32_t[]){T_BOS, T_123, T_4, T_5, T_SPHELLO},
               5);
    }
    hmoe_vocab_free(v);
    hmoe_gguf_free(g);
    v = load("pixtral", 0, &g);
    if (v) expect(v, "pixtral: add_bos_token false is respected", " hello", (int32_t[]){T_SPHELLO}, 1);
    hmoe_vocab_free(v);
    hmoe_gguf_free(g);
    /* qwen2 on the same vocabulary: single digits, merges only (1 2 3 4 5; Ġ hel lo), no BOS. */
    v = load("qwen2", -1, &g);
    if (v) {
        expect(v, "qwen2 on the same vocabulary: one digit per pre-token", "12345",
               (int32_t[]){T_1, T_2, T_3, T_4, T_5}, 5);
        expect(v, "qwen2 on the same vocabulary: merges only", " hello", (int32_t[]){T_SP, T_HEL, T_LO}, 3);
    }
    hmoe_vocab_free(v);
    hmoe_gguf_free(g);
    return t_summary();
}
