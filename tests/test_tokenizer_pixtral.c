/* test_tokenizer_pixtral.c — the "pixtral" pre-tokenizer of the Nemotron-3 GGUFs (llama.cpp's LLAMA3
 * rules: nemotron_h_moe.md §10) against llama.cpp itself: fixtures/tokenizer/pixtral-cases.jsonl holds
 * the ids that llama.cpp's llama-tokenize prints for 401 texts (all scripts, code, emoji, digit runs,
 * whitespace runs, contractions in any case, control tokens) over pixtral-vocab.gguf, a vocabulary with
 * the Llama 3 tokens written with tokenizer.ggml.pre = "pixtral" and no add_bos_token key
 * (tests/tokenizer/gen_pixtral.mjs, pixtral_ids.sh). Also: the pre-tokenizer is recognised, BOS is
 * added by default, and detokenizing the expected ids gives the text back. */
#include "harness.h"
#include "hmoe/gguf.h"
#include "hmoe/text.h"
#include "tok_cases.h"

int main(void) {
    struct hmoe_err err = {0};
    struct hmoe_gguf *g = NULL;
    struct hmoe_vocab *vocab = NULL;
    if (hmoe_gguf_open(t_shared("fixtures/tokenizer/pixtral-vocab.gguf"), &g, &err) != HMOE_OK ||
        hmoe_vocab_load(g, &vocab, &err) != HMOE_OK) {
        t_check(0, "load pixtral-vocab.gguf", "%s", err.msg);
        hmoe_gguf_free(g);
        return t_summary();
    }
    hmoe_gguf_free(g);
    t_check(vocab->n_tokens == 128256 && vocab->pre == HMOE_VOCAB_PRE_LLAMA3 && vocab->add_bos,
            "pixtral vocab: 128256 tokens, the llama3 pre-tokenizer, BOS added by default", "n_tokens %u pre %d add_bos %d",
            vocab->n_tokens, vocab->pre, vocab->add_bos);
    tok_run_cases(vocab, "fixtures/tokenizer/pixtral-cases.jsonl", "llama.cpp llama-tokenize", 400);
    hmoe_vocab_free(vocab);
    return t_summary();
}
