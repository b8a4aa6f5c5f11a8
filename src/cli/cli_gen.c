/* cli_gen.c — what `run` and `chat` share around text generation: the sampling seed, the
 * vocabulary check, choosing the chat format (chat-templates.md §4: render known formats,
 * warn and fall back to ChatML otherwise) and llama.cpp's timing block.
 */
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

void hmoe_cli_sampler_seed(struct hmoe_sampler_params *sp, int64_t seed) {
    sp->seed = seed < 0 ? (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32) : (uint64_t)seed;
}

int hmoe_cli_vocab_open(const struct hmoe_model *model, struct hmoe_vocab **vocab) {
    struct hmoe_err err = {0};
    *vocab = NULL;
    if (hmoe_vocab_load(model->gguf, vocab, &err)) return hmoe_cli_fail(&err);
    if ((*vocab)->n_tokens != (uint32_t)model->cfg.n_vocab) {
        fprintf(stderr, "hmoe: %s: the vocabulary has %u tokens but the model has %d logits\n", model->gguf->path,
                (*vocab)->n_tokens, model->cfg.n_vocab);
        hmoe_vocab_free(*vocab);
        *vocab = NULL;
        return HMOE_EXIT_ERROR;
    }
    return HMOE_EXIT_OK;
}

int hmoe_cli_chat_template(const struct hmoe_vocab *vocab, const char *name, enum hmoe_chat_template *out) {
    if (name) {
        *out = hmoe_chat_template_from_name(name);
        if (*out == HMOE_CHAT_TEMPLATE_UNKNOWN) {
            fprintf(stderr, "hmoe: unknown chat template '%s' (supported: chatml, qwen3, qwen35, nemotron)\n", name);
            return HMOE_EXIT_USAGE;
        }
        return HMOE_EXIT_OK;
    }
    *out = hmoe_chat_template_detect(vocab->chat_template);
    /* A Qwen3.5 vocabulary without any template (e.g. a synthetic file) speaks Qwen3.5. */
    if (!vocab->chat_template && vocab->pre == HMOE_VOCAB_PRE_QWEN35) *out = HMOE_CHAT_TEMPLATE_QWEN35;
    if (*out == HMOE_CHAT_TEMPLATE_UNKNOWN) {
        fprintf(stderr, "hmoe: warning: chat template not recognised (hmoe renders: qwen3, qwen35, nemotron); using plain "
                        "ChatML (choose with --chat-template chatml|qwen3|qwen35|nemotron)\n");
        *out = HMOE_CHAT_TEMPLATE_CHATML;
    }
    return HMOE_EXIT_OK;
}

void hmoe_cli_print_timings(const struct hmoe_cli_timings *t) {
    fprintf(stderr, "\n");
    fprintf(stderr, "       load time = %10.2f ms\n", t->load_s * 1e3);
    fprintf(stderr, "   sampling time = %10.2f ms / %5d runs   (%8.2f ms per token, %8.2f tokens per second)\n",
            t->sample_s * 1e3, t->n_sample, t->n_sample ? t->sample_s * 1e3 / t->n_sample : 0.0,
            t->sample_s > 0 ? t->n_sample / t->sample_s : 0.0);
    fprintf(stderr, "prompt eval time = %10.2f ms / %5d tokens (%8.2f ms per token, %8.2f tokens per second)\n",
            t->prompt_s * 1e3, t->n_prompt, t->n_prompt ? t->prompt_s * 1e3 / t->n_prompt : 0.0,
            t->prompt_s > 0 ? t->n_prompt / t->prompt_s : 0.0);
    fprintf(stderr, "       eval time = %10.2f ms / %5d runs   (%8.2f ms per token, %8.2f tokens per second)\n",
            t->eval_s * 1e3, t->n_eval, t->n_eval ? t->eval_s * 1e3 / t->n_eval : 0.0,
            t->eval_s > 0 ? t->n_eval / t->eval_s : 0.0);
    fprintf(stderr, "      total time = %10.2f ms / %5d tokens\n", t->total_s * 1e3, t->n_total);
}
