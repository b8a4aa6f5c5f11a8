/* bench_tokenize.c — tokenizer throughput on ~1 MB of deterministic mixed text (prose,
 * code, numbers, CJK, emoji, whitespace runs, added tokens) with the Qwen3 vocab.
 *
 *   make bench && ./build/bench/bench_tokenize [-m VOCAB.gguf] [--write FILE] [-o json]
 *
 * Checks first (fixture ids for a few texts, detokenize(tokenize(text)) == text on the
 * whole buffer), then reports vocab load ms, tokenize MB/s and tokens/s (best of 5), and the
 * ratio to a roofline measured in the same run: one scalar pass that decodes every code
 * point — the least work any Unicode-aware pre-tokenizer must do.
 * --write FILE saves the generated text (to time llama-tokenize -f FILE on the same input). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hmoe/gguf.h"
#include "hmoe/text.h"

static uint64_t rng = 0x9E3779B97F4A7C15ULL;
static uint32_t rnd(uint32_t n) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng % n);
}

struct buf {
    char *s;
    size_t n, cap;
};
static void add(struct buf *b, const char *s, size_t n) {
    if (b->n + n + 8 > b->cap) {
        b->cap = (b->n + n + 8) * 2;
        b->s = realloc(b->s, b->cap);
        if (!b->s) exit(1);
    }
    memcpy(b->s + b->n, s, n);
    b->n += n;
}
static void adds(struct buf *b, const char *s) { add(b, s, strlen(s)); }
static void addcp(struct buf *b, uint32_t cp) { /* cp in U+0080..U+10FFFF */
    char u[4];
    size_t n;
    if (cp < 0x800) { u[0] = (char)(0xC0 | (cp >> 6)); n = 2; }
    else if (cp < 0x10000) { u[0] = (char)(0xE0 | (cp >> 12)); u[1] = (char)(0x80 | ((cp >> 6) & 0x3F)); n = 3; }
    else {
        u[0] = (char)(0xF0 | (cp >> 18));
        u[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        u[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
        n = 4;
    }
    if (n == 2) u[1] = (char)(0x80 | (cp & 0x3F));
    else u[n - 1] = (char)(0x80 | (cp & 0x3F));
    add(b, u, n);
}

static void gen_text(struct buf *b, size_t target) {
    static const char *const words[] = {"the", "of", "and", "a", "to", "in", "is", "you", "that", "it", "he", "was",
                                        "for", "on", "are", "as", "with", "his", "they", "I", "at", "be", "this",
                                        "have", "from", "or", "one", "had", "by", "word", "but", "not", "what",
                                        "tokenizer", "Mixture-of-Experts", "GPU", "quantization", "don't", "we'll",
                                        "naïve", "résumé", "Straße", "Москва", "Ελλάδα", "مرحبا"};
    static const char *const code[] = {
        "for (int i = 0; i < n; i++) {\n    sum += a[i] * b[i];\n}\n",
        "def f(x):\n    return {\"key\": [1, 2, 3], 'y': x ** 2}\n\n",
        "#include <stdio.h>\nint main(void) { printf(\"%d\\n\", 42); return 0; }\n",
        "    if err != nil {\n\t\treturn fmt.Errorf(\"open %s: %w\", path, err)\n\t}\n",
        "SELECT id, name FROM users WHERE age >= 18 ORDER BY name;\n",
        "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n",
        "<think>\nLet me check.\n</think>\n\n",
    };
    while (b->n < target) {
        switch (rnd(10)) {
        case 0: case 1: case 2: case 3: /* prose */
            for (int k = 0, n = 5 + (int)rnd(30); k < n; k++) {
                if (k) adds(b, " ");
                const char *w = words[rnd(HMOE_ARRAY_LEN(words))];
                if (k == 0 && w[0] >= 'a' && w[0] <= 'z') {
                    char c = (char)(w[0] - 32);
                    add(b, &c, 1);
                    adds(b, w + 1);
                } else adds(b, w);
                if (rnd(8) == 0) adds(b, ",");
            }
            adds(b, rnd(3) ? ". " : ".\n\n");
            break;
        case 4: case 5: /* code */
            adds(b, code[rnd(HMOE_ARRAY_LEN(code))]);
            break;
        case 6: { /* numbers */
            char t[64];
            snprintf(t, sizeof t, "%u.%02u, %u%% and 0x%X; ", rnd(100000), rnd(100), rnd(100), rnd(1u << 30));
            adds(b, t);
            break;
        }
        case 7: /* CJK */
            for (int k = 0, n = 4 + (int)rnd(40); k < n; k++) addcp(b, 0x4E00 + rnd(0x5000));
            adds(b, rnd(2) ? "。" : "、");
            break;
        case 8: /* emoji, some with ZWJ / variation selectors */
            for (int k = 0, n = 1 + (int)rnd(5); k < n; k++) {
                addcp(b, 0x1F600 + rnd(0x50));
                if (rnd(4) == 0) { addcp(b, 0x200D); addcp(b, 0x1F4BB); }
                if (rnd(4) == 0) addcp(b, 0xFE0F);
            }
            adds(b, " ");
            break;
        case 9: /* whitespace runs */
            for (int k = 0, n = 1 + (int)rnd(12); k < n; k++) adds(b, (const char *[]){" ", "\t", "\n", "\r\n"}[rnd(4)]);
            break;
        }
    }
}

/* The roofline pass: decode every code point (input known to be valid UTF-8). */
static size_t scan_classes(const char *p, size_t n) {
    const unsigned char *s = (const unsigned char *)p;
    size_t acc = 0;
    for (size_t i = 0; i < n;) {
        unsigned c = s[i];
        size_t k = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
        uint32_t cp = k == 1 ? c : c & (0x7F >> k);
        for (size_t j = 1; j < k && i + j < n; j++) cp = (cp << 6) | (s[i + j] & 0x3F);
        acc += cp;
        i += k;
    }
    return acc;
}

int main(int argc, char **argv) {
    const char *path = "../shared/fixtures/tokenizer/qwen3-vocab.gguf", *write = NULL;
    int json = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-m") && i + 1 < argc) path = argv[++i];
        else if (!strcmp(argv[i], "--write") && i + 1 < argc) write = argv[++i];
        else if (!strcmp(argv[i], "-o") && i + 1 < argc && !strcmp(argv[i + 1], "json")) { json = 1; i++; }
        else { fprintf(stderr, "usage: %s [-m VOCAB.gguf] [--write FILE] [-o json]\n", argv[0]); return 2; }
    }
    struct hmoe_err err = {0};
    struct hmoe_gguf *g = NULL;
    struct hmoe_vocab *v = NULL;
    double load_ms = 1e9;
    for (int r = 0; r < 3; r++) { /* vocab load time: open + parse keys + build tables, best of 3 */
        hmoe_vocab_free(v);
        hmoe_gguf_free(g);
        v = NULL;
        g = NULL;
        double t0 = hmoe_time_s();
        if (hmoe_gguf_open(path, &g, &err) != HMOE_OK || hmoe_vocab_load(g, &v, &err) != HMOE_OK) {
            fprintf(stderr, "bench_tokenize: %s\n", err.msg);
            return 1;
        }
        double ms = (hmoe_time_s() - t0) * 1e3;
        if (ms < load_ms) load_ms = ms;
    }

    /* Correctness first: ids from cases.jsonl (llama.cpp) for a few texts. */
    static const struct { const char *text; int32_t ids[8]; size_t n; } ref[] = {
        {"Hello world", {9707, 1879}, 2},
        {"   Hello", {256, 21927}, 2},
        {"333", {18, 18, 18}, 3},
        {"a<tool_call>b", {64, 151657, 65}, 3},
    };
    for (size_t k = 0; k < HMOE_ARRAY_LEN(ref); k++) {
        int32_t *ids;
        size_t n;
        if (hmoe_tokenize(v, ref[k].text, strlen(ref[k].text), true, true, &ids, &n, &err) != HMOE_OK ||
            n != ref[k].n || memcmp(ids, ref[k].ids, n * sizeof *ids) != 0) {
            fprintf(stderr, "bench_tokenize: wrong ids for '%s'\n", ref[k].text);
            return 1;
        }
        free(ids);
    }
    struct buf text = {0};
    gen_text(&text, 1000000);
    if (write) {
        FILE *f = fopen(write, "wb");
        if (!f || fwrite(text.s, 1, text.n, f) != text.n || fclose(f) != 0) {
            fprintf(stderr, "bench_tokenize: cannot write %s\n", write);
            return 1;
        }
    }
    int32_t *ids = NULL;
    size_t n_ids = 0;
    double tok_s = 1e9;
    for (int r = 0; r < 5; r++) {
        free(ids);
        double t0 = hmoe_time_s();
        if (hmoe_tokenize(v, text.s, text.n, false, true, &ids, &n_ids, &err) != HMOE_OK) {
            fprintf(stderr, "bench_tokenize: %s\n", err.msg);
            return 1;
        }
        double dt = hmoe_time_s() - t0;
        if (dt < tok_s) tok_s = dt;
    }
    char *back;
    size_t back_len;
    double t0 = hmoe_time_s();
    if (hmoe_detokenize(v, ids, n_ids, false, true, &back, &back_len, &err) != HMOE_OK) return 1;
    double detok_s = hmoe_time_s() - t0;
    if (back_len != text.n || memcmp(back, text.s, text.n) != 0) {
        fprintf(stderr, "bench_tokenize: detokenize(tokenize(text)) differs from the text\n");
        return 1;
    }
    double scan_s = 1e9;
    size_t sink = 0;
    for (int r = 0; r < 5; r++) {
        t0 = hmoe_time_s();
        sink += scan_classes(text.s, text.n);
        double dt = hmoe_time_s() - t0;
        if (dt < scan_s) scan_s = dt;
    }
    double mb = text.n / 1e6;
    if (json)
        printf("{\"bytes\": %zu, \"tokens\": %zu, \"vocab_load_ms\": %.1f, \"tokenize_MBps\": %.2f, "
               "\"tokens_per_s\": %.0f, \"detok_MBps\": %.1f, \"roofline_MBps\": %.1f, \"ratio\": %.3f}\n",
               text.n, n_ids, load_ms, mb / tok_s, n_ids / tok_s, mb / detok_s, mb / scan_s, scan_s / tok_s);
    else {
        printf("check: fixture ids ok, detokenize(tokenize(text)) == text (%zu bytes, %zu tokens)\n", text.n, n_ids);
        printf("vocab load          %8.1f ms   (%u tokens, %u merges; best of 3)\n", load_ms, v->n_tokens, v->n_merges);
        printf("tokenize            %8.2f MB/s (%.1f ms, %.0f tokens/s; best of 5)\n", mb / tok_s, tok_s * 1e3,
               n_ids / tok_s);
        printf("detokenize          %8.1f MB/s\n", mb / detok_s);
        printf("roofline (decode every code point) %.1f MB/s; tokenize = %.3f of it\n", mb / scan_s,
               scan_s / tok_s);
    }
    (void)sink;
    free(back);
    free(ids);
    free(text.s);
    hmoe_vocab_free(v);
    hmoe_gguf_free(g);
    return 0;
}
