/* fuzz_model.c — libFuzzer target for what hmoe does with a GGUF after parsing it: the
 * vocabulary load (tokenizer keys, merges, special tokens) followed by a tokenize /
 * detokenize round of a few strings, and the model load (architecture check, hyper-parameter
 * validation, every tensor bound with its expected shape and type). Traps when a rejected
 * file has no message; ASan/UBSan catch the rest. Seeds: the fixture models whole
 * (moe-tiny: six architectures, under 1.4 MB each). Build and run (Makefile `fuzz`):
 *   make fuzz && make fuzz-run FUZZ_TIME=600
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hmoe/gguf.h"
#include "hmoe/model.h"
#include "hmoe/text.h"

static volatile uint64_t sink;

static void require_message(const char *what, const struct hmoe_err *err) {
    if (err->msg[0]) return;
    fprintf(stderr, "fuzz_model: %s failed without a message (status %d)\n", what, (int)err->code);
    __builtin_trap();
}

static void vocab_round(const struct hmoe_gguf *g) {
    struct hmoe_err err = {0};
    struct hmoe_vocab *v = NULL;
    if (hmoe_vocab_load(g, &v, &err) != HMOE_OK) {
        require_message("hmoe_vocab_load", &err);
        return;
    }
    static const char *const texts[] = {"Hello world", "<|im_start|>user\nHi<|im_end|>", "  \t\n 123 x\xff\xfe",
                                        "\xe6\x9d\xb1\xe4\xba\xac <think>"};
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        int32_t *ids = NULL;
        size_t n = 0;
        if (hmoe_tokenize(v, texts[i], strlen(texts[i]), true, true, &ids, &n, &err) == HMOE_OK) {
            char *back = NULL;
            size_t back_len = 0;
            if (hmoe_detokenize(v, ids, n, false, true, &back, &back_len, &err) == HMOE_OK) sink += back_len;
            free(back);
        } else {
            require_message("hmoe_tokenize", &err);
        }
        free(ids);
    }
    /* every piece of the first and last tokens, and ids out of range */
    for (int32_t id = -2; id < 64; id++) {
        size_t len = 0;
        const int32_t pick = id < 32 ? id : (int32_t)v->n_tokens - 1 - (id - 32);
        hmoe_token_to_piece(v, pick, true, &len);
        sink += len + hmoe_vocab_is_eog(v, pick);
    }
    hmoe_vocab_free(v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    struct hmoe_err err = {0};
    struct hmoe_gguf *g = NULL;
    if (hmoe_gguf_open_memory(data, size, "fuzz.gguf", &g, &err) != HMOE_OK) return 0;
    vocab_round(g);
    struct hmoe_model *m = NULL;
    if (hmoe_model_load_gguf(g, NULL, &m, &err) == HMOE_OK) {
        sink += m->weight_bytes + (uint64_t)m->cfg.n_layer;
        hmoe_model_free(m); /* frees g too */
    } else {
        require_message("hmoe_model_load_gguf", &err);
        hmoe_gguf_free(g);
    }
    return 0;
}
