/* vocab_special.c — what llama.cpp derives from token *texts* after reading the keys
 * (tokenizer.md §2): EOT/EOM/FIM ids by name, the CONTROL override for tokens that end
 * generation (so "</s>" in the Qwen3 vocab becomes control + EOG, fixtures/README §1),
 * "unused" control tokens, gpt-oss header tokens forced to USER_DEFINED, the EOG set, and
 * the special-token list (CONTROL / USER_DEFINED / UNKNOWN, longest text first) that
 * tokenize.c matches before pre-tokenization. */
#include <stdlib.h>
#include <string.h>

#include "text/text_impl.h"

/* Token names llama.cpp's loader recognises (llama-vocab.cpp, snapshot of the fixtures). */
static const char *const eot_names[] = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
                                        "<|end_of_text|>", "<EOT>", "_<EOT>", "[EOT]",
                                        "<\xef\xbd\x9c" "end\xe2\x96\x81" "of\xe2\x96\x81" "sentence\xef\xbd\x9c>",
                                        "<end_of_utterance>", NULL};
static const char *const eom_names[] = {"<|eom_id|>", NULL};
static const char *const fim_pre_names[] = {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>",
                                            "<\xef\xbd\x9c" "fim\xe2\x96\x81" "begin\xef\xbd\x9c>", "<PRE>",
                                            "\xe2\x96\x81<PRE>", "<|code_prefix|>", "<|prefix|>", NULL};
static const char *const fim_suf_names[] = {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>",
                                            "<\xef\xbd\x9c" "fim\xe2\x96\x81" "hole\xef\xbd\x9c>", "<SUF>",
                                            "\xe2\x96\x81<SUF>", "<|code_suffix|>", "<|suffix|>", NULL};
static const char *const fim_mid_names[] = {"<|fim_middle|>", "<fim-middle>", "<fim_middle>",
                                            "<\xef\xbd\x9c" "fim\xe2\x96\x81" "end\xef\xbd\x9c>", "<MID>",
                                            "\xe2\x96\x81<MID>", "<|code_middle|>", "<|middle|>", NULL};
static const char *const fim_pad_names[] = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]", NULL};
static const char *const fim_rep_names[] = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>", NULL};
static const char *const fim_sep_names[] = {"<|file_sep|>", NULL};
static const char *const eog_names[] = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>",
                                        "<|calls|>", "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>",
                                        "_<EOT>", "[EOT]", "[EOS]", "<|end_of_text|>", "<end_of_utterance>", "<eos>",
                                        "<turn|>", "<|tool_response>",
                                        "<\xef\xbd\x9c" "end\xe2\x96\x81" "of\xe2\x96\x81" "sentence\xef\xbd\x9c>",
                                        "[e~[", NULL};
/* gpt-oss harmony header tokens: always rendered (tokenizer.md §6). */
static const char *const render_names[] = {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>", NULL};

static int32_t find_name(const struct hmoe_vocab *v, const char *name) {
    return hmoe_vocab_find(v, name, strlen(name));
}

/* llama.cpp picks the first match in hash-map order; we take the first name in the list
 * that exists. Either way the token becomes CONTROL. Only when no key gave the id. */
static void detect(struct hmoe_vocab *v, int32_t *id, const char *const *names) {
    if (*id != HMOE_TOKEN_NONE) return;
    for (const char *const *n = names; *n; n++) {
        int32_t t = find_name(v, *n);
        if (t != HMOE_TOKEN_NONE) {
            *id = t;
            v->attr[t] |= HMOE_TOKEN_CONTROL;
            return;
        }
    }
}

static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

enum hmoe_status hmoe_vocab_setup_specials(struct hmoe_vocab *v, struct hmoe_err *err) {
    struct hmoe_vocab_impl *im = v->impl;
    detect(v, &v->eot_id, eot_names);
    detect(v, &v->eom_id, eom_names);
    detect(v, &v->fim_pre_id, fim_pre_names);
    detect(v, &v->fim_suf_id, fim_suf_names);
    detect(v, &v->fim_mid_id, fim_mid_names);
    detect(v, &v->fim_pad_id, fim_pad_names);
    detect(v, &v->fim_rep_id, fim_rep_names);
    detect(v, &v->fim_sep_id, fim_sep_names);

    for (uint32_t i = 0; i < v->n_tokens; i++)
        if ((v->attr[i] & HMOE_TOKEN_CONTROL) && strstr(v->text[i], "unused")) v->attr[i] |= HMOE_TOKEN_UNUSED;

    /* EOG: FIM pad/repo/sep, every token named like an end token (made CONTROL), EOS/EOT/EOM. */
    size_t cap = 16 + HMOE_ARRAY_LEN(eog_names);
    v->eog_ids = malloc(cap * sizeof *v->eog_ids);
    if (!v->eog_ids) return HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory building the EOG set");
    int32_t cand[8] = {v->fim_pad_id, v->fim_rep_id, v->fim_sep_id, v->eos_id, v->eot_id, v->eom_id};
    for (int k = 0; k < 6; k++)
        if (cand[k] != HMOE_TOKEN_NONE) v->eog_ids[v->n_eog++] = cand[k];
    for (const char *const *n = eog_names; *n; n++) {
        int32_t t = find_name(v, *n);
        if (t == HMOE_TOKEN_NONE) continue;
        v->eog_ids[v->n_eog++] = t;
        v->attr[t] |= HMOE_TOKEN_CONTROL;
    }
    for (const char *const *n = render_names; *n; n++) {
        int32_t t = find_name(v, *n);
        if (t != HMOE_TOKEN_NONE) v->attr[t] = HMOE_TOKEN_USER_DEFINED;
    }
    qsort(v->eog_ids, v->n_eog, sizeof *v->eog_ids, cmp_i32);
    uint32_t m = 0;
    for (uint32_t i = 0; i < v->n_eog; i++)
        if (m == 0 || v->eog_ids[m - 1] != v->eog_ids[i]) v->eog_ids[m++] = v->eog_ids[i];
    v->n_eog = m;

    /* Harmony (gpt-oss): with <|return|> and <|call|> present, <|end|> is not an end of
     * generation but a message separator, rendered as text. Gemma-4 style vocabularies
     * with <|tool_response> keep "</s>" as an ordinary token. */
    int32_t end = find_name(v, "<|end|>"), s_close = find_name(v, "</s>");
    bool has_return = hmoe_vocab_is_eog(v, find_name(v, "<|return|>"));
    bool has_call = hmoe_vocab_is_eog(v, find_name(v, "<|call|>")) || hmoe_vocab_is_eog(v, find_name(v, "<|calls|>"));
    bool has_flush = hmoe_vocab_is_eog(v, find_name(v, "<|flush|>"));
    bool has_tool_resp = hmoe_vocab_is_eog(v, find_name(v, "<|tool_response>"));
    int32_t drop[2] = {HMOE_TOKEN_NONE, HMOE_TOKEN_NONE};
    if (end != HMOE_TOKEN_NONE && hmoe_vocab_is_eog(v, end) && ((has_return && has_call) || (has_call && has_flush))) {
        drop[0] = end;
        v->attr[end] = HMOE_TOKEN_USER_DEFINED;
    }
    if (s_close != HMOE_TOKEN_NONE && has_tool_resp && hmoe_vocab_is_eog(v, s_close)) {
        drop[1] = s_close;
        v->attr[s_close] = HMOE_TOKEN_NORMAL;
    }
    m = 0;
    for (uint32_t i = 0; i < v->n_eog; i++)
        if (v->eog_ids[i] != drop[0] && v->eog_ids[i] != drop[1]) v->eog_ids[m++] = v->eog_ids[i];
    v->n_eog = m;

    /* Special-token list for the partition step (tokenizer.md §4.1). */
    uint32_t n = 0;
    for (uint32_t i = 0; i < v->n_tokens; i++)
        if (v->attr[i] & (HMOE_TOKEN_CONTROL | HMOE_TOKEN_USER_DEFINED | HMOE_TOKEN_UNKNOWN)) n++;
    /* Sort keys: longest text first, ties by id (so the order does not depend on qsort). */
    uint64_t *keys = malloc((n ? n : 1) * sizeof *keys);
    im->specials = malloc((n ? n : 1) * sizeof *im->specials);
    if (!keys || !im->specials) {
        free(keys);
        return HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory building the special-token list");
    }
    for (uint32_t i = 0; i < v->n_tokens; i++)
        if (v->attr[i] & (HMOE_TOKEN_CONTROL | HMOE_TOKEN_USER_DEFINED | HMOE_TOKEN_UNKNOWN))
            keys[im->n_specials++] = ((uint64_t)(UINT32_MAX - v->text_len[i]) << 32) | i;
    qsort(keys, im->n_specials, sizeof *keys, cmp_u64);
    for (uint32_t i = 0; i < im->n_specials; i++) im->specials[i] = (int32_t)(keys[i] & 0xFFFFFFFFu);
    free(keys);
    return HMOE_OK;
}
