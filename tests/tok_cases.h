/* tok_cases.h — a tokenizer against expected ids from an independent implementation: every line of a
 * fixture JSONL {"text", "ids"} is tokenized (BOS as the vocabulary says, special tokens parsed) and
 * compared, and the expected ids detokenized (specials rendered, the added BOS left out) must give
 * the text back. Header-only, for the tests that check one vocabulary each. */
#ifndef HMOE_TESTS_TOK_CASES_H
#define HMOE_TESTS_TOK_CASES_H
#include "harness.h"
#include "hmoe/json.h"
#include "hmoe/text.h"

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

/* `ref` names the implementation the ids came from, for the check names. */
static void tok_run_cases(struct hmoe_vocab *vocab, const char *file, const char *ref, int min_cases) {
    struct hmoe_err err = {0};
    char *text;
    size_t len;
    if (hmoe_read_file(t_shared(file), &text, &len, &err) != HMOE_OK) {
        t_check(0, file, "unreadable: %s", err.msg);
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
            printf("%s line %d '%s' ... FAIL: expected [%s] got [%s]\n", file, line, t, e, g);
        }
        /* Every case is valid UTF-8: the ids (specials rendered) detokenize to the text. */
        char *out = NULL;
        size_t out_len = 0;
        const size_t skip = vocab->add_bos && n_exp > 0 && exp[0] == vocab->bos_id; /* the BOS added */
        hmoe_detokenize(vocab, exp + skip, n_exp - skip, false, true, &out, &out_len, &err);
        if (!jt || !out || out_len != jt->str_len || memcmp(out, jt->str, out_len) != 0) detok_bad++;
        free(out);
        free(exp);
        free(got);
        hmoe_json_free(c);
        if (!*nl) break;
    }
    free(text);
    char name[256];
    snprintf(name, sizeof name, "%s has at least %d cases", file, min_cases);
    t_check(line >= min_cases, name, "found %d", line);
    snprintf(name, sizeof name, "tokenization == %s on every case of %s", ref, file);
    t_check(bad == 0, name, "%d of %d cases differ", bad, line);
    t_check(detok_bad == 0, "detokenize(expected ids) gives the case text back", "%d cases differ", detok_bad);
}

#endif
