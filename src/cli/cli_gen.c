/* cli_gen.c — what `run` and `chat` share around text generation: the sampling seed, the
 * vocabulary check, choosing the chat format (chat-templates.md §4: render known formats,
 * warn and fall back to ChatML otherwise) and llama.cpp's timing block.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

void hmoe_cli_sampler_seed(struct hmoe_sampler_params *sp, int64_t seed) {
    sp->seed = seed < 0 ? (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32) : (uint64_t)seed;
}

int hmoe_cli_sampler_check(const struct hmoe_sampler_params *sp) {
    const char *flag = NULL, *range = NULL;
    double v = 0;
    if (!isfinite(sp->temp)) flag = "--temp", range = "a finite number (0 or less = greedy)", v = sp->temp;
    else if (!(sp->top_p >= 0.0f)) flag = "--top-p", range = "a number >= 0 (1 = off)", v = sp->top_p;
    else if (!(sp->min_p >= 0.0f)) flag = "--min-p", range = "a number >= 0 (0 = off)", v = sp->min_p;
    else if (!(sp->repeat_penalty > 0.0f) || !isfinite(sp->repeat_penalty))
        flag = "--repeat-penalty", range = "a finite number > 0 (1 = off)", v = sp->repeat_penalty;
    if (!flag) return HMOE_EXIT_OK;
    fprintf(stderr, "hmoe: invalid %s %g: must be %s\n", flag, v, range);
    return HMOE_EXIT_USAGE;
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
            fprintf(stderr, "hmoe: unknown chat template '%s' (supported: chatml, qwen3, qwen35, nemotron, harmony)\n", name);
            return HMOE_EXIT_USAGE;
        }
        return HMOE_EXIT_OK;
    }
    *out = hmoe_chat_template_detect(vocab->chat_template);
    /* A Qwen3.5 vocabulary without any template (e.g. a synthetic file) speaks Qwen3.5. */
    if (!vocab->chat_template && vocab->pre == HMOE_VOCAB_PRE_QWEN35) *out = HMOE_CHAT_TEMPLATE_QWEN35;
    /* Likewise an o200k ("gpt-4o") vocabulary without one: gpt-oss speaks only harmony. */
    if (!vocab->chat_template && vocab->pre == HMOE_VOCAB_PRE_GPT4O) *out = HMOE_CHAT_TEMPLATE_HARMONY;
    if (*out == HMOE_CHAT_TEMPLATE_UNKNOWN) {
        fprintf(stderr, "hmoe: warning: chat template not recognised (hmoe renders: qwen3, qwen35, nemotron, harmony); using plain "
                        "ChatML (choose with --chat-template chatml|qwen3|qwen35|nemotron|harmony)\n");
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

/* Bytes of the well-formed UTF-8 sequence at s[0..n) (shortest form, no surrogates, at most
 * U+10FFFF), or 0 when s does not start with one. */
static size_t utf8_seq_len(const unsigned char *s, size_t n) {
    const unsigned c = s[0];
    size_t len;
    unsigned cp;
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) len = 2, cp = c & 0x1F;
    else if (c >= 0xE0 && c <= 0xEF) len = 3, cp = c & 0x0F;
    else if (c >= 0xF0 && c <= 0xF4) len = 4, cp = c & 0x07;
    else return 0;
    if (n < len) return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        cp = cp << 6 | (s[i] & 0x3Fu);
    }
    if ((len == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
        return 0;
    return len;
}

void hmoe_cli_write_text(FILE *f, const char *text, size_t n, bool escape) {
    if (!escape) {
        if (n) fwrite(text, 1, n, f);
        return;
    }
    const unsigned char *s = (const unsigned char *)text;
    size_t run = 0; /* bytes [i - run, i) print as they are */
    for (size_t i = 0; i < n;) {
        const size_t len = utf8_seq_len(s + i, n - i);
        const bool control = len == 1 && ((s[i] < 0x20 && s[i] != '\n' && s[i] != '\t') || s[i] == 0x7F);
        if (len && !control) {
            i += len;
            run += len;
            continue;
        }
        if (run) fwrite(s + i - run, 1, run, f);
        run = 0;
        fprintf(f, "\\x%02X", s[i]);
        i++;
    }
    if (run) fwrite(s + n - run, 1, run, f);
}

int hmoe_cli_stdout_check(int rc) {
    errno = 0;
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "hmoe: error: cannot write the output to standard output%s%s\n", errno ? ": " : "",
                errno ? strerror(errno) : "");
        return rc ? rc : HMOE_EXIT_ERROR;
    }
    return rc;
}
