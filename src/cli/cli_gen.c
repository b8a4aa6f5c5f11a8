/* cli_gen.c — what `run` and `chat` share around text generation: the sampling seed, the
 * vocabulary check, choosing the chat format (chat-templates.md §4: render known formats,
 * warn and fall back to ChatML otherwise) and llama.cpp's timing block.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "hmoe/json.h"

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

int hmoe_cli_chat_format(const struct hmoe_vocab *vocab, enum hmoe_chat_template arch_family,
                         const struct hmoe_cli_chat_args *a, struct hmoe_chat_fmt **out) {
    struct hmoe_err err = {0};
    char *file_text = NULL;
    size_t len;
    if (a->file && hmoe_read_file(a->file, &file_text, &len, &err) != HMOE_OK) return hmoe_cli_fail(&err);
    struct hmoe_chat_fmt_src src = {
        .template_text = a->file ? file_text : vocab->chat_template,
        .template_origin = a->file ? a->file : "tokenizer.chat_template",
        .template_required = a->file != NULL,
        .name = a->name,
        .kwargs_json = a->kwargs,
        .bos_token = vocab->bos_id != HMOE_TOKEN_NONE ? vocab->text[vocab->bos_id] : NULL,
        .eos_token = vocab->eos_id != HMOE_TOKEN_NONE ? vocab->text[vocab->eos_id] : NULL,
        .default_family = arch_family,
    };
    char warning[640];
    enum hmoe_status st = hmoe_chat_fmt_open(&src, out, warning, sizeof warning, &err);
    free(file_text);
    if (st != HMOE_OK) {
        fprintf(stderr, "hmoe: %s\n", err.msg);
        return st == HMOE_ERR_ARG ? HMOE_EXIT_USAGE : HMOE_EXIT_ERROR;
    }
    if (warning[0]) fprintf(stderr, "hmoe: warning: %s\n", warning);
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

void hmoe_cli_write_text(FILE *f, const char *text, size_t n, bool escape) {
    if (!escape) {
        if (n) fwrite(text, 1, n, f);
        return;
    }
    const unsigned char *s = (const unsigned char *)text;
    size_t run = 0; /* bytes [i - run, i) print as they are */
    for (size_t i = 0; i < n;) {
        const size_t len = hmoe_utf8_seq_len(s + i, n - i);
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

int hmoe_cli_spec_open(const struct hmoe_cli_spec_args *a, struct hmoe_ctx *ctx, struct hmoe_spec **out) {
    *out = NULL;
    if (!a->spec) {
        if (a->draft_max != HMOE_CLI_DRAFT_MAX) fprintf(stderr, "hmoe: warning: --draft-max has no effect without --spec\n");
        return HMOE_EXIT_OK;
    }
    if (strcmp(a->spec, "mtp") != 0) {
        fprintf(stderr, "hmoe: invalid --spec '%s': the only drafter is mtp (the model's MTP block)\n", a->spec);
        return HMOE_EXIT_USAGE;
    }
    struct hmoe_err err = {0};
    enum hmoe_status st = hmoe_spec_init(ctx, a->draft_max, out, &err);
    if (st == HMOE_ERR_ARG) {
        fprintf(stderr, "hmoe: %s\n", err.msg);
        return HMOE_EXIT_USAGE;
    }
    return st ? hmoe_cli_fail(&err) : HMOE_EXIT_OK;
}

enum hmoe_status hmoe_cli_decode_next(struct hmoe_ctx *ctx, struct hmoe_spec *spec, int32_t id, int pos, float *buf,
                                      const float **logits, struct hmoe_err *err) {
    if (spec) return hmoe_spec_decode(spec, id, pos, logits, err);
    *logits = buf;
    return hmoe_ctx_decode(ctx, &id, 1, pos, HMOE_LOGITS_LAST, buf, err);
}

void hmoe_cli_spec_report(const struct hmoe_spec *spec) {
    if (!spec) return;
    struct hmoe_spec_stats st;
    hmoe_spec_get_stats(spec, &st);
    fprintf(stderr,
            "hmoe: --spec mtp: %llu steps, %llu drafted, %llu accepted (%.1f%%), %llu tokens re-run after rejections; "
            "draft %.1f ms, verify %.1f ms, rewind %.1f ms\n",
            (unsigned long long)st.steps, (unsigned long long)st.drafted, (unsigned long long)st.accepted,
            st.drafted ? 100.0 * (double)st.accepted / (double)st.drafted : 0.0, (unsigned long long)st.replayed,
            st.draft_s * 1e3, st.verify_s * 1e3, st.replay_s * 1e3);
}
