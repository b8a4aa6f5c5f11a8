/* chat_turn.c — one turn of `hmoe chat`. The whole conversation is rendered with the chat
 * template and tokenized (special tokens parsed, chat-templates.md preamble); only the part
 * after the longest common prefix with the tokens already in the KV cache is prefilled
 * (hmoe_ctx_decode rewinds to any position), which also makes /regen, /clear and /system
 * correct without special cases. The answer streams through the UTF-8-safe detokenizer;
 * Qwen3 reasoning between <think> and </think> (chat-templates.md §1.5) is dimmed or hidden.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat_impl.h"
#include "hmoe/progress.h"

volatile sig_atomic_t hmoe_chat_sigint_count;

#define ANSI_DIM "\033[2m"
#define ANSI_RESET "\033[0m"

static void out(const char *s, size_t n) {
    if (n) fwrite(s, 1, n, stdout);
}
static void outs(const char *s) { out(s, strlen(s)); }

/* The conversation as tokens; prints the error. */
static int render_tokens(const struct hmoe_chat_session *s, bool add_gen, int32_t **ids, size_t *n) {
    struct hmoe_err err = {0};
    char *text = NULL;
    *ids = NULL;
    *n = 0;
    if (hmoe_cli_conv_render(&s->conv, s->fmt, add_gen, s->enable_thinking, &text, &err)) return hmoe_cli_fail(&err);
    enum hmoe_status st = hmoe_tokenize(s->vocab, text, strlen(text), true, true, ids, n, &err);
    free(text);
    return st ? hmoe_cli_fail(&err) : HMOE_EXIT_OK;
}

/* Render and tokenize, dropping the oldest exchanges while the prompt plus `reserve`
 * positions does not fit (--ctx-drop-oldest). Prints the context-full message and returns
 * HMOE_EXIT_ERROR when even the last message does not fit. */
static int fit_tokens(struct hmoe_chat_session *s, bool add_gen, int reserve, int32_t **ids, size_t *n,
                      struct hmoe_chat_turn_stats *st) {
    const int n_ctx = hmoe_ctx_n_ctx(s->ctx);
    for (;;) {
        int rc = render_tokens(s, add_gen, ids, n);
        if (rc) return rc;
        bool fits = *n + (size_t)(s->drop_oldest ? reserve : 1) <= (size_t)n_ctx;
        if (fits) break;
        if (s->drop_oldest && hmoe_cli_conv_drop_oldest(&s->conv)) {
            st->n_dropped++;
            free(*ids);
            continue;
        }
        if (*n < (size_t)n_ctx) break; /* no room for a full answer, but it can start */
        if (st->n_dropped || s->drop_oldest)
            fprintf(stderr,
                    "hmoe: context full: the last message alone makes the prompt %zu tokens but the context holds %d "
                    "(-c %d); shorten it or raise -c/--ctx-size (the model is trained for up to %d)\n",
                    *n, n_ctx, n_ctx, s->model->cfg.n_ctx_train);
        else
            fprintf(stderr,
                    "hmoe: context full: the conversation is %zu tokens but the context holds %d (-c %d); /clear starts "
                    "over, --ctx-drop-oldest drops the oldest turns, or raise -c/--ctx-size (the model is trained for up to "
                    "%d)\n",
                    *n, n_ctx, n_ctx, s->model->cfg.n_ctx_train);
        free(*ids);
        *ids = NULL;
        return HMOE_EXIT_ERROR;
    }
    if (st->n_dropped)
        fprintf(stderr, "[dropped the oldest %d exchange%s to fit the context (-c %d)]\n", st->n_dropped,
                st->n_dropped > 1 ? "s" : "", n_ctx);
    return HMOE_EXIT_OK;
}

/* Make the KV cache hold ids[0..n): keep the common prefix, decode the rest in micro-batch
 * sized steps (progress bar, Ctrl+C checked between steps). Logits of the last token when
 * want_logits (then at least that token is decoded again). */
static int prefill(struct hmoe_chat_session *s, const int32_t *ids, int n, bool want_logits,
                   struct hmoe_chat_turn_stats *st) {
    int p = 0;
    const int n_past = hmoe_ctx_n_past(s->ctx);
    while (p < n && p < n_past && s->kv_ids[p] == ids[p]) p++;
    if (want_logits && p == n) p = n - 1;
    hmoe_ctx_truncate(s->ctx, p);
    st->n_cached = p;
    st->n_prefill = n - p;
    const int step = hmoe_ctx_get_params(s->ctx)->n_ubatch;
    /* The next turn re-renders this turn's answer differently (reasoning dropped), so its
     * common prefix ends inside the generation prompt: a model with recurrent state keeps a
     * checkpoint of its state before the last <|im_start|>, a no-op for KV-only models. */
    const int32_t im_start = hmoe_vocab_find(s->vocab, "<|im_start|>", 12);
    int ck = -1;
    for (int i = n - 1; i >= p && im_start != HMOE_TOKEN_NONE && ck < 0; i--)
        if (ids[i] == im_start) ck = i;
    struct hmoe_progress bar;
    hmoe_progress_init_count(&bar, "prefill", (uint64_t)(n - p), "tok", s->progress);
    struct hmoe_err err = {0};
    const double t0 = hmoe_time_s();
    for (int pos = p, m; pos < n; pos += m) {
        if (hmoe_chat_sigint_count) {
            st->interrupted = true;
            break;
        }
        m = HMOE_MIN(step, n - pos);
        if (pos < ck) m = HMOE_MIN(m, ck - pos);
        if (pos == ck) hmoe_ctx_checkpoint(s->ctx);
        const bool last = pos + m == n;
        if (hmoe_ctx_decode(s->ctx, ids + pos, m, pos, last && want_logits ? HMOE_LOGITS_LAST : HMOE_LOGITS_NONE,
                            s->logits, &err)) {
            if (bar.drawn) fputc('\n', stderr);
            return hmoe_cli_fail(&err);
        }
        memcpy(s->kv_ids + pos, ids + pos, (size_t)m * sizeof *ids);
        hmoe_progress_update(&bar, (uint64_t)(pos + m - p));
    }
    st->prefill_s = hmoe_time_s() - t0;
    if (st->interrupted) {
        if (bar.drawn) fputc('\n', stderr);
    } else hmoe_progress_finish(&bar, (uint64_t)(n - p));
    return HMOE_EXIT_OK;
}

/* Streams the answer: reasoning between <think> and </think> (gpt-oss: the analysis channel)
 * dimmed, shown or hidden. */
struct display {
    const struct hmoe_chat_session *s;
    struct hmoe_detok_stream ds;
    bool in_think, strip_newlines, dim_on, indicator;
    struct hmoe_harmony_stream hs; /* harmony template: the channel of each token */
};

static void display_text(struct display *d, const char *p, size_t n) {
    if (d->in_think && d->s->think == HMOE_THINK_HIDE) return;
    if (d->strip_newlines) {
        while (n && *p == '\n') p++, n--;
        if (!n) return;
        d->strip_newlines = false;
    }
    hmoe_cli_write_text(stdout, p, n, d->s->escape_out);
}

static void display_flush(struct display *d) {
    size_t n = 0;
    const char *p = hmoe_detok_stream_flush(&d->ds, &n);
    if (p) display_text(d, p, n);
}

/* gpt-oss: headers are not shown; analysis text is the reasoning, shown dimmed (a line break
 * before the answer) or replaced by the indicator; every other channel is shown. */
static void display_harmony(struct display *d, int32_t id) {
    const struct hmoe_chat_session *s = d->s;
    const bool show = s->think == HMOE_THINK_SHOW;
    const enum hmoe_harmony_part part = hmoe_harmony_stream_push(&d->hs, s->vocab, id);
    if (part == HMOE_HARMONY_HEADER) {
        display_flush(d);
        return;
    }
    const bool think = part == HMOE_HARMONY_ANALYSIS;
    if (think != d->in_think) {
        display_flush(d);
        if (think && show && s->color) outs(ANSI_DIM), d->dim_on = true;
        else if (think && !show && s->color) outs(ANSI_DIM "(thinking...)" ANSI_RESET), d->indicator = true;
        if (!think && show) {
            if (d->dim_on) outs(ANSI_RESET), d->dim_on = false;
            outs("\n");
        }
        if (!think && d->indicator) outs("\r\033[K"), d->indicator = false;
        d->in_think = think;
    }
    size_t n = 0;
    const char *p = hmoe_detok_stream_push(&d->ds, id, &n);
    if (p) display_text(d, p, n);
}

static void display_token(struct display *d, int32_t id) {
    const struct hmoe_chat_session *s = d->s;
    const bool show = s->think == HMOE_THINK_SHOW;
    if (hmoe_chat_fmt_family(s->fmt) == HMOE_CHAT_TEMPLATE_HARMONY) {
        display_harmony(d, id);
    } else if (id == s->think_open && s->think_open != HMOE_TOKEN_NONE) {
        display_flush(d);
        d->in_think = true;
        if (show) {
            if (s->color) outs(ANSI_DIM), d->dim_on = true;
            outs("<think>");
        } else if (s->color) {
            outs(ANSI_DIM "(thinking...)" ANSI_RESET);
            d->indicator = true;
        }
    } else if (id == s->think_close && s->think_close != HMOE_TOKEN_NONE) {
        display_flush(d);
        if (show) {
            outs("</think>");
            if (d->dim_on) outs(ANSI_RESET), d->dim_on = false;
        } else {
            if (d->indicator) outs("\r\033[K"), d->indicator = false;
            d->strip_newlines = true; /* the answer proper starts with "\n\n" */
        }
        d->in_think = false;
    } else {
        size_t n = 0;
        const char *p = hmoe_detok_stream_push(&d->ds, id, &n);
        if (p) display_text(d, p, n);
    }
    fflush(stdout);
}

static void display_end(struct display *d) {
    display_flush(d);
    if (d->dim_on) outs(ANSI_RESET);
    if (d->indicator) outs("\r\033[K");
    outs("\n");
    fflush(stdout);
}

/* True when the prompt's last turn leaves a think block open: Qwen3.5's generation prompt
 * ends with "<think>\n" (chat-templates.md §2.1), so the answer starts with reasoning and
 * only its "</think>" shows up in the output. */
static bool prompt_opens_think(const struct hmoe_chat_session *s, const int32_t *ids, size_t n) {
    if (s->think_open == HMOE_TOKEN_NONE) return false;
    const int32_t im_start = hmoe_vocab_find(s->vocab, "<|im_start|>", 12);
    for (size_t i = n; i-- > 0 && ids[i] != im_start;) {
        if (ids[i] == s->think_close) return false;
        if (ids[i] == s->think_open) return true;
    }
    return false;
}

/* Length of the well-formed UTF-8 character at s (Unicode table 3-7: no overlongs, no
 * surrogates, at most U+10FFFF), or 0. */
static size_t utf8_wellformed(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    if (c >= 0x01 && c < 0x80) return 1;
    size_t need;
    unsigned lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) need = 1;
    else if (c >= 0xE0 && c <= 0xEF) need = 2, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
    else if (c >= 0xF0 && c <= 0xF4) need = 3, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
    else return 0;
    if (n <= need || s[1] < lo || s[1] > hi) return 0;
    for (size_t k = 2; k <= need; k++)
        if ((s[k] & 0xC0) != 0x80) return 0;
    return need + 1;
}

/* The answer as it joins the history: bytes that are not well-formed UTF-8 (and NUL) become
 * U+FFFD, so /save writes it exactly and /load reads back the same text (the tokenizer turns
 * such bytes into U+FFFD anyway, tokenizer.md §4). In place is not possible (1 byte -> 3). */
static char *sanitize_utf8(const char *p, size_t n, size_t *out_len) {
    char *o = malloc(3 * n + 1);
    if (!o) return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        size_t m = utf8_wellformed((const unsigned char *)p + i, n - i);
        if (m) {
            memcpy(o + k, p + i, m);
            k += m;
            i += m;
        } else {
            memcpy(o + k, "\xEF\xBF\xBD", 3);
            k += 3;
            i++;
        }
    }
    o[k] = 0;
    *out_len = k;
    return o;
}

/* Append bytes to a growing buffer. */
static bool append(char **buf, size_t *len, size_t *cap, const char *p, size_t n) {
    if (*len + n + 1 > *cap) {
        size_t c = HMOE_MAX(*cap * 2, *len + n + 64);
        char *b = realloc(*buf, c);
        if (!b) return false;
        *buf = b;
        *cap = c;
    }
    memcpy(*buf + *len, p, n);
    *len += n;
    (*buf)[*len] = 0;
    return true;
}

int hmoe_chat_turn_answer(struct hmoe_chat_session *s, struct hmoe_chat_turn_stats *st) {
    memset(st, 0, sizeof *st);
    const int n_ctx = hmoe_ctx_n_ctx(s->ctx);
    /* Room kept for the answer when old turns may be dropped: -n, else a quarter of the context. */
    int reserve = s->n_predict > 0 && s->n_predict <= n_ctx / 2 ? s->n_predict : n_ctx / 4;
    if (reserve < 1) reserve = 1;
    const double t0 = hmoe_time_s();
    int32_t *ids = NULL;
    size_t n = 0;
    int rc = fit_tokens(s, true, reserve, &ids, &n, st);
    if (rc) {
        hmoe_cli_conv_pop(&s->conv); /* the user message that did not fit */
        return rc;
    }
    rc = prefill(s, ids, (int)n, true, st);
    if (rc || st->interrupted) {
        if (st->interrupted) fprintf(stderr, "[interrupted: the message was not answered]\n");
        free(ids);
        hmoe_cli_conv_pop(&s->conv);
        return rc;
    }
    for (size_t i = 0; i < n; i++) hmoe_sampler_accept(s->smp, ids[i]);
    const bool opens_think = prompt_opens_think(s, ids, n);
    free(ids);
    st->answered = true;

    struct display d = {.s = s};
    hmoe_detok_stream_init(&d.ds, s->vocab, false);
    hmoe_harmony_stream_init(&d.hs, s->vocab);
    if (opens_think) display_token(&d, s->think_open); /* the answer starts inside the reasoning */
    char *answer = NULL;
    size_t a_len = 0, a_cap = 0;
    struct hmoe_err err = {0};
    int n_sampled = 0;
    double t_first = 0;
    rc = HMOE_EXIT_OK;
    /* With --spec the context may hold drafts past the answer: positions count here. */
    int pos = hmoe_ctx_n_past(s->ctx);
    const float *cur = s->logits;
    for (;;) {
        if (hmoe_chat_sigint_count) {
            st->interrupted = true;
            break;
        }
        const int32_t id = hmoe_sampler_sample(s->smp, cur);
        if (n_sampled++ == 0) {
            t_first = hmoe_time_s();
            st->first_token_s = t_first - t0;
        }
        if (hmoe_vocab_is_eog(s->vocab, id)) break;
        hmoe_sampler_accept(s->smp, id);
        display_token(&d, id);
        size_t pl = 0;
        const char *piece = hmoe_token_to_piece(s->vocab, id, false, &pl);
        if (!append(&answer, &a_len, &a_cap, piece, pl)) {
            fprintf(stderr, "hmoe: out of memory\n");
            rc = HMOE_EXIT_ERROR;
            break;
        }
        st->n_gen++;
        if (s->n_predict >= 0 && st->n_gen >= s->n_predict) break;
        if (pos >= n_ctx) {
            st->ctx_full = true;
            break;
        }
        if (hmoe_cli_decode_next(s->ctx, s->spec, id, pos, s->logits, &cur, &err)) {
            rc = hmoe_cli_fail(&err);
            break;
        }
        s->kv_ids[pos++] = id;
    }
    hmoe_ctx_truncate(s->ctx, pos); /* drafts past the answer are not in kv_ids */
    /* Tokens per second after the first: each later sample needed one decode step. */
    st->n_steps = n_sampled > 1 ? n_sampled - 1 : 0;
    st->gen_s = n_sampled > 1 ? hmoe_time_s() - t_first : 0;
    display_end(&d);
    hmoe_detok_stream_free(&d.ds);
    if (st->interrupted) fprintf(stderr, "[interrupted]\n");
    if (st->ctx_full)
        fprintf(stderr,
                "hmoe: context full (%d of %d tokens): the answer was cut; /clear starts over, --ctx-drop-oldest drops "
                "the oldest turns, or raise -c/--ctx-size (the model is trained for up to %d)\n",
                n_ctx, n_ctx, s->model->cfg.n_ctx_train);
    /* The (possibly partial) answer joins the history: the next turn and /regen see it. */
    size_t c_len = 0;
    char *content = sanitize_utf8(answer ? answer : "", a_len, &c_len);
    if ((!content || !hmoe_cli_conv_add(&s->conv, "assistant", content, c_len)) && rc == HMOE_EXIT_OK) {
        fprintf(stderr, "hmoe: out of memory\n");
        rc = HMOE_EXIT_ERROR;
    }
    free(content);
    free(answer);
    return rc;
}

int hmoe_chat_turn_prefill_only(struct hmoe_chat_session *s, struct hmoe_chat_turn_stats *st) {
    memset(st, 0, sizeof *st);
    st->prefill_only = true;
    int32_t *ids = NULL;
    size_t n = 0;
    int rc = fit_tokens(s, false, 1, &ids, &n, st);
    if (rc) return rc;
    if (n) rc = prefill(s, ids, (int)n, false, st);
    free(ids);
    return rc;
}

void hmoe_chat_turn_print_stats(const struct hmoe_chat_session *s, const struct hmoe_chat_turn_stats *st) {
    const bool dim = s->color && hmoe_progress_stderr_is_tty();
    if (st->prefill_only) {
        fprintf(stderr, "%s[prefill %d tok (%d cached), %.1f tok/s | ctx %d/%d]%s\n", dim ? ANSI_DIM : "",
                st->n_prefill, st->n_cached, st->prefill_s > 0 ? st->n_prefill / st->prefill_s : 0.0,
                hmoe_ctx_n_past(s->ctx), hmoe_ctx_n_ctx(s->ctx), dim ? ANSI_RESET : "");
        return;
    }
    fprintf(stderr, "%s[prompt %d tok (%d cached), %.1f tok/s | first token %.0f ms | %d tok, %.1f tok/s | ctx %d/%d]%s\n",
            dim ? ANSI_DIM : "", st->n_prefill, st->n_cached, st->prefill_s > 0 ? st->n_prefill / st->prefill_s : 0.0,
            st->first_token_s * 1e3, st->n_gen, st->gen_s > 0 ? st->n_steps / st->gen_s : 0.0,
            hmoe_ctx_n_past(s->ctx), hmoe_ctx_n_ctx(s->ctx), dim ? ANSI_RESET : "");
}
