/* test_tokenizer.c — tokenizer and detokenizer against llama.cpp's output in
 * ../shared/fixtures/tokenizer (cases.jsonl: ids of 203 texts; detok.jsonl: bytes of 50 id
 * sequences), the streaming detokenizer's UTF-8 holdback, empty and invalid-UTF-8 input,
 * and clear errors for vocabularies that miss required keys (tokenizer.md §1–5). */
#include "harness.h"
#include "hmoe/gguf.h"
#include "hmoe/json.h"
#include "hmoe/text.h"

static struct hmoe_vocab *vocab;

/* Is s[0..n) well-formed UTF-8 (surrogates and overlongs rejected)? */
static int utf8_valid(const unsigned char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        unsigned c = s[i];
        size_t k = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
        if (!k || i + k > n) return 0;
        uint32_t cp = k == 1 ? c : k == 2 ? (c & 0x1F) : k == 3 ? (c & 0x0F) : (c & 0x07);
        for (size_t j = 1; j < k; j++) {
            if ((s[i + j] & 0xC0) != 0x80) return 0;
            cp = (cp << 6) | (s[i + j] & 0x3F);
        }
        if ((k == 2 && cp < 0x80) || (k == 3 && cp < 0x800) || (k == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
            (cp >= 0xD800 && cp <= 0xDFFF))
            return 0;
        i += k;
    }
    return 1;
}

/* ids of a JSON array into a malloc'd buffer. */
static int32_t *json_ids(const struct hmoe_json *a, size_t *n) {
    *n = a ? a->n : 0;
    int32_t *v = malloc((*n ? *n : 1) * sizeof *v);
    for (size_t i = 0; i < *n; i++) v[i] = (int32_t)a->items[i]->num;
    return v;
}

static void fmt_ids(char *buf, size_t cap, const int32_t *ids, size_t n) {
    size_t at = 0;
    buf[0] = 0;
    for (size_t i = 0; i < n && at + 16 < cap; i++) at += (size_t)snprintf(buf + at, cap - at, "%s%d", i ? "," : "", ids[i]);
}

/* Feed ids one at a time: every chunk must be valid UTF-8 when `expect_valid`, and the
 * chunks plus the flush must equal `whole`. Returns NULL or a description of the failure. */
static const char *stream_check(const int32_t *ids, size_t n, bool render_special, const char *whole, size_t whole_len,
                                int expect_valid) {
    static char why[128];
    struct hmoe_detok_stream s;
    hmoe_detok_stream_init(&s, vocab, render_special);
    char *acc = malloc(whole_len + 64);
    size_t at = 0;
    const char *res = NULL;
    for (size_t i = 0; i <= n && !res; i++) {
        size_t len;
        const char *p = i < n ? hmoe_detok_stream_push(&s, ids[i], &len) : hmoe_detok_stream_flush(&s, &len);
        if (!p) res = "out of memory";
        else if (expect_valid && !utf8_valid((const unsigned char *)p, len)) {
            snprintf(why, sizeof why, "chunk after token %zu is not complete UTF-8", i);
            res = why;
        } else if (at + len > whole_len) res = "stream longer than the whole detokenization";
        else {
            memcpy(acc + at, p, len);
            at += len;
        }
    }
    if (!res && (at != whole_len || memcmp(acc, whole, at) != 0)) res = "concatenated chunks differ from the whole";
    free(acc);
    hmoe_detok_stream_free(&s);
    return res;
}

static void run_cases(void) {
    struct hmoe_err err = {0};
    char *text;
    size_t len;
    if (hmoe_read_file(t_shared("fixtures/tokenizer/cases.jsonl"), &text, &len, &err) != HMOE_OK) {
        t_check(0, "cases.jsonl readable", "%s", err.msg);
        return;
    }
    int line = 0, stream_bad = 0, detok_bad = 0;
    for (char *p = text, *nl; *p; p = nl + 1) {
        nl = strchr(p, '\n');
        if (!nl) nl = p + strlen(p);
        if (nl == p) { if (!*nl) break; continue; }
        line++;
        struct hmoe_json *c = hmoe_json_parse(p, (size_t)(nl - p), &err);
        const struct hmoe_json *jt = hmoe_json_get(c, "text");
        size_t n_exp, n_got = 0;
        int32_t *exp = json_ids(hmoe_json_get(c, "ids"), &n_exp), *got = NULL;
        bool ps = hmoe_json_get_bool(c, "parse_special", true);
        char name[160];
        snprintf(name, sizeof name, "cases.jsonl line %d (%s, parse_special=%d) ids", line,
                 hmoe_json_get_str(c, "category", "?"), ps);
        enum hmoe_status st = jt ? hmoe_tokenize(vocab, jt->str, jt->str_len, true, ps, &got, &n_got, &err) : HMOE_ERR_ARG;
        int ok = st == HMOE_OK && n_got == n_exp && (n_exp == 0 || memcmp(got, exp, n_exp * sizeof *exp) == 0);
        char e[512], g[512];
        fmt_ids(e, sizeof e, exp, n_exp);
        fmt_ids(g, sizeof g, got, n_got);
        t_check(ok, name, "expected [%s] got [%s]", e, g);
        /* Detokenizing llama.cpp's ids (specials rendered) gives back the text. */
        const char *detok = hmoe_json_get_str(c, "detok", "");
        char *out = NULL;
        size_t out_len = 0;
        hmoe_detokenize(vocab, exp, n_exp, false, true, &out, &out_len, &err);
        if (!out || out_len != strlen(detok) || memcmp(out, detok, out_len) != 0) {
            detok_bad++;
            printf("cases.jsonl line %d detok ... FAIL: got '%s'\n", line, out ? out : "(null)");
        }
        const char *why = stream_check(exp, n_exp, true, detok, strlen(detok), 1);
        if (why) {
            stream_bad++;
            printf("cases.jsonl line %d stream ... FAIL: %s\n", line, why);
        }
        free(out);
        free(exp);
        free(got);
        hmoe_json_free(c);
        if (!*nl) break;
    }
    free(text);
    t_check(line == 203, "cases.jsonl has 203 cases", "found %d", line);
    t_check(detok_bad == 0, "cases.jsonl: detokenize(ids) == detok for every case", "%d cases differ", detok_bad);
    t_check(stream_bad == 0, "cases.jsonl: streaming detok emits only complete UTF-8 and sums to detok",
            "%d cases failed", stream_bad);
}

static void run_detok(void) {
    struct hmoe_err err = {0};
    char *text;
    size_t len;
    if (hmoe_read_file(t_shared("fixtures/tokenizer/detok.jsonl"), &text, &len, &err) != HMOE_OK) {
        t_check(0, "detok.jsonl readable", "%s", err.msg);
        return;
    }
    int line = 0;
    for (char *p = text, *nl; *p; p = nl + 1) {
        nl = strchr(p, '\n');
        if (!nl) nl = p + strlen(p);
        if (nl == p) { if (!*nl) break; continue; }
        line++;
        struct hmoe_json *c = hmoe_json_parse(p, (size_t)(nl - p), &err);
        size_t n;
        int32_t *ids = json_ids(hmoe_json_get(c, "ids"), &n);
        bool unparse = hmoe_json_get_bool(c, "unparse_special", false);
        bool remove = hmoe_json_get_bool(c, "remove_special", false);
        const char *hex = hmoe_json_get_str(c, "detok_hex", "");
        unsigned char want[4096];
        long wl = hmoe_hex_decode(hex, want, sizeof want);
        char *out = NULL;
        size_t out_len = 0;
        hmoe_detokenize(vocab, ids, n, remove, unparse, &out, &out_len, &err);
        char name[200];
        snprintf(name, sizeof name, "detok.jsonl line %d (%s, unparse_special=%d)", line,
                 hmoe_json_get_str(c, "note", "?"), unparse);
        t_check(wl >= 0 && out && (long)out_len == wl && memcmp(out, want, out_len) == 0, name,
                "expected %ld bytes %s, got %zu bytes", wl, hex, out_len);
        /* Streaming gives the same bytes; chunks must be complete UTF-8 when the whole is. */
        const char *why = stream_check(ids, n, unparse, (const char *)want, wl < 0 ? 0 : (size_t)wl,
                                       utf8_valid(want, wl < 0 ? 0 : (size_t)wl));
        snprintf(name, sizeof name, "detok.jsonl line %d streaming", line);
        t_check(why == NULL, name, "%s", why ? why : "");
        free(out);
        free(ids);
        hmoe_json_free(c);
        if (!*nl) break;
    }
    free(text);
    t_check(line == 50, "detok.jsonl has 50 cases", "found %d", line);
}

static void expect_ids(const char *name, const char *text, size_t len, bool ps, const int32_t *exp, size_t n_exp) {
    struct hmoe_err err = {0};
    int32_t *got = NULL;
    size_t n = 0;
    enum hmoe_status st = hmoe_tokenize(vocab, text, len, true, ps, &got, &n, &err);
    char e[256], g[256];
    fmt_ids(e, sizeof e, exp, n_exp);
    fmt_ids(g, sizeof g, got, n);
    t_check(st == HMOE_OK && n == n_exp && (n == 0 || memcmp(got, exp, n * sizeof *got) == 0), name,
            "expected [%s] got [%s] (%s)", e, g, err.msg);
    free(got);
}

/* A minimal GGUF v3 image with the given string / string-array keys, for error paths. */
struct kvspec {
    const char *key;
    const char *str;          /* string value, or NULL */
    const char *const *arr;   /* string array value (NULL-terminated), or NULL */
};
static size_t put(unsigned char *b, size_t at, const void *p, size_t n) {
    memcpy(b + at, p, n);
    return at + n;
}
static size_t put_u64(unsigned char *b, size_t at, uint64_t v) { return put(b, at, &v, 8); }
static size_t put_u32(unsigned char *b, size_t at, uint32_t v) { return put(b, at, &v, 4); }
static size_t put_str(unsigned char *b, size_t at, const char *s) {
    at = put_u64(b, at, strlen(s));
    return put(b, at, s, strlen(s));
}
static size_t build_gguf(unsigned char *b, const struct kvspec *kv, int n) {
    size_t at = put(b, 0, "GGUF", 4);
    at = put_u32(b, at, 3);
    at = put_u64(b, at, 0);
    at = put_u64(b, at, (uint64_t)n);
    for (int i = 0; i < n; i++) {
        at = put_str(b, at, kv[i].key);
        if (kv[i].str) {
            at = put_u32(b, at, 8);
            at = put_str(b, at, kv[i].str);
        } else {
            uint64_t cnt = 0;
            while (kv[i].arr[cnt]) cnt++;
            at = put_u32(b, at, 9);
            at = put_u32(b, at, 8);
            at = put_u64(b, at, cnt);
            for (uint64_t k = 0; k < cnt; k++) at = put_str(b, at, kv[i].arr[k]);
        }
    }
    while (at % 32) b[at++] = 0;
    return at;
}

static void expect_load_error(const char *name, const struct kvspec *kv, int n, enum hmoe_status want,
                              const char *must_mention) {
    static unsigned char img[8192];
    size_t sz = build_gguf(img, kv, n);
    struct hmoe_err err = {0};
    struct hmoe_gguf *g = NULL;
    enum hmoe_status st = hmoe_gguf_open_memory(img, sz, "bad-vocab.gguf", &g, &err);
    if (st != HMOE_OK) {
        t_check(0, name, "test image rejected by the GGUF reader: %s", err.msg);
        return;
    }
    struct hmoe_vocab *v = NULL;
    st = hmoe_vocab_load(g, &v, &err);
    t_check(st == want && v == NULL && strstr(err.msg, must_mention) != NULL, name, "status %s, message '%s'",
            hmoe_status_str(st), err.msg);
    hmoe_vocab_free(v);
    hmoe_gguf_free(g);
}

/* Invalid UTF-8 input. Expected ids come from llama.cpp itself (the fixtures' commit
 * 3f545be, llama_tokenize on exactly these bytes, parse_special on): every byte that does
 * not start a complete sequence becomes U+FFFD (id 5691 alone) before splitting — the
 * bytes are not passed through — while overlong forms and surrogates are decoded and
 * re-encoded (C0 80 -> U+0000 -> byte 00 = id 188). */
static void run_invalid_utf8(void) {
    static const struct {
        const char *name, *text;
        int32_t ids[8];
        size_t n;
    } c[] = {
        {"stray FF between letters", "a\xff" "b", {64, 5691, 65}, 3},
        {"truncated 3-byte sequence", "\xe4\xbd", {9973}, 1},
        {"truncated sequence at the end", "caf\xc3", {68796, 5691}, 2},
        {"overlong NUL", "\xc0\x80x", {188, 87}, 2},
        {"surrogate", "\xed\xa0\x80z", {169, 63219, 89}, 3},
        {"lone continuation bytes", "x \x80\x80 y", {87, 220, 9973, 379}, 4},
        {"FE inside words", "h\xc3\xa9llo\xfe w\xc3\xb6rld", {71, 18503, 385, 5691, 289, 9416, 507}, 7},
        {"FF alone", "\xff", {5691}, 1},
        {"FF between added tokens", "<think>\xff</think>", {151667, 5691, 151668}, 3},
        {"emoji cut short", "\xf0\x9f\x98", {57332}, 1},
        {"cut sequence in whitespace", "  \xe2\x82 \n", {220, 220, 9973, 715}, 4},
    };
    for (size_t i = 0; i < HMOE_ARRAY_LEN(c); i++) {
        char name[96];
        snprintf(name, sizeof name, "invalid UTF-8 as llama.cpp: %s", c[i].name);
        expect_ids(name, c[i].text, strlen(c[i].text), true, c[i].ids, c[i].n);
    }
    /* Above U+10FFFF llama.cpp throws out of llama_tokenize (the process aborts); we must not
     * crash, and treat each byte as invalid. */
    struct hmoe_err err = {0};
    int32_t *ids = NULL;
    size_t n = 0;
    char *out = NULL;
    size_t out_len = 0;
    enum hmoe_status st = hmoe_tokenize(vocab, "\xf5\x80\x80\x80", 4, true, true, &ids, &n, &err);
    if (st == HMOE_OK) hmoe_detokenize(vocab, ids, n, false, true, &out, &out_len, &err);
    t_check(st == HMOE_OK && out && out_len == 12 && memcmp(out, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd", 12) == 0,
            "code point above U+10FFFF: no crash, four U+FFFD", "status %d, %zu bytes", st, out_len);
    free(ids);
    free(out);
}

static void run_errors(void) {
    static const char *const toks[] = {"a", "b", "ab", NULL};
    static const char *const merges[] = {"a b", NULL};
    const struct kvspec no_tokens[] = {{"tokenizer.ggml.model", "gpt2", NULL}, {"tokenizer.ggml.pre", "qwen2", NULL},
                                       {"tokenizer.ggml.merges", NULL, merges}};
    expect_load_error("vocab without tokenizer.ggml.tokens is a clear error", no_tokens, 3, HMOE_ERR_FORMAT,
                      "'tokenizer.ggml.tokens' is missing");
    const struct kvspec no_merges[] = {{"tokenizer.ggml.model", "gpt2", NULL}, {"tokenizer.ggml.pre", "qwen2", NULL},
                                       {"tokenizer.ggml.tokens", NULL, toks}};
    expect_load_error("vocab without tokenizer.ggml.merges is a clear error", no_merges, 3, HMOE_ERR_FORMAT,
                      "'tokenizer.ggml.merges' is missing");
    const struct kvspec no_model[] = {{"tokenizer.ggml.tokens", NULL, toks}};
    expect_load_error("GGUF without tokenizer.ggml.model is a clear error", no_model, 1, HMOE_ERR_FORMAT,
                      "'tokenizer.ggml.model' is missing");
    const struct kvspec spm[] = {{"tokenizer.ggml.model", "llama", NULL}, {"tokenizer.ggml.tokens", NULL, toks}};
    expect_load_error("SentencePiece vocab is reported unsupported", spm, 2, HMOE_ERR_UNSUPPORTED, "'llama'");
    const struct kvspec pre[] = {{"tokenizer.ggml.model", "gpt2", NULL}, {"tokenizer.ggml.pre", "bloom", NULL},
                                 {"tokenizer.ggml.tokens", NULL, toks}, {"tokenizer.ggml.merges", NULL, merges}};
    expect_load_error("unsupported pre-tokenizer names itself", pre, 4, HMOE_ERR_UNSUPPORTED, "'bloom'");
    const struct kvspec wrong_type[] = {{"tokenizer.ggml.model", "gpt2", NULL}, {"tokenizer.ggml.pre", "qwen2", NULL},
                                        {"tokenizer.ggml.tokens", "not-an-array", NULL},
                                        {"tokenizer.ggml.merges", NULL, merges}};
    expect_load_error("tokens key of the wrong type is a clear error", wrong_type, 4, HMOE_ERR_FORMAT,
                      "tokenizer.ggml.tokens");
}

int main(void) {
    struct hmoe_err err = {0};
    struct hmoe_gguf *g = NULL;
    if (hmoe_gguf_open(t_shared("fixtures/tokenizer/qwen3-vocab.gguf"), &g, &err) != HMOE_OK ||
        hmoe_vocab_load(g, &vocab, &err) != HMOE_OK) {
        t_check(0, "load qwen3-vocab.gguf", "%s", err.msg);
        hmoe_gguf_free(g);
        return t_summary();
    }
    hmoe_gguf_free(g); /* the vocab keeps its own copies */
    t_check(vocab->n_tokens == 151936 && vocab->n_merges == 151387 && vocab->pre == HMOE_VOCAB_PRE_QWEN2 &&
                !vocab->add_bos && !vocab->add_eos && vocab->bos_id == 151643 && vocab->eos_id == 151645,
            "qwen3 vocab: sizes, pre-tokenizer, special ids from metadata (fixtures/README §1)",
            "n_tokens %u n_merges %u pre %d add_bos %d bos %d eos %d", vocab->n_tokens, vocab->n_merges, vocab->pre,
            vocab->add_bos, vocab->bos_id, vocab->eos_id);
    /* tokenizer.md §7 "checked against llama.cpp": EOG has 151645, 151643, 151662 but not 151667;
     * fixtures/README §1: "</s>" (128247) is made control + EOG. */
    t_check(hmoe_vocab_is_eog(vocab, 151645) && hmoe_vocab_is_eog(vocab, 151643) && hmoe_vocab_is_eog(vocab, 151662) &&
                hmoe_vocab_is_eog(vocab, 128247) && !hmoe_vocab_is_eog(vocab, 151667) && !hmoe_vocab_is_eog(vocab, 9707),
            "EOG set as llama.cpp builds it", "unexpected membership");

    run_cases();
    run_detok();

    static const int32_t none[1] = {0};
    expect_ids("empty prompt gives no tokens", "", 0, true, none, 0);
    run_invalid_utf8();
    run_errors();

    hmoe_vocab_free(vocab);
    return t_summary();
}
