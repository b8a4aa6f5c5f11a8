/* chat_impl.h — private to `hmoe chat` (cmd_chat.c, chat_conv.c, chat_turn.c, lineedit.c):
 * the conversation as a list of messages, one turn of generation that reuses the KV cache
 * through the longest common token prefix, and the terminal line editor.
 * Relies on text.h for templates and tokens, model.h for decoding.
 */
#ifndef HMOE_CLI_CHAT_IMPL_H
#define HMOE_CLI_CHAT_IMPL_H

#include <signal.h>

#include "cli.h"

/* ---- conversation (chat_conv.c) -------------------------------------------------------- */

struct hmoe_cli_msg {
    char *role;    /* "system", "user", "assistant" */
    char *content; /* assistant: the whole answer, <think>…</think> included (the template drops it) */
};

struct hmoe_cli_conv {
    struct hmoe_cli_msg *msgs;
    size_t n, cap;
};

void hmoe_cli_conv_free(struct hmoe_cli_conv *c);
bool hmoe_cli_conv_add(struct hmoe_cli_conv *c, const char *role, const char *content, size_t len);
void hmoe_cli_conv_pop(struct hmoe_cli_conv *c);
/* Drop every message but the system prompt. */
void hmoe_cli_conv_clear(struct hmoe_cli_conv *c);
/* Set (text non-empty) or remove (text empty) the system prompt, always messages[0]. */
bool hmoe_cli_conv_set_system(struct hmoe_cli_conv *c, const char *text);
/* Drop the oldest exchange after the system prompt: its user message and every message up to
 * the next user message. False when only the last user turn would be left. */
bool hmoe_cli_conv_drop_oldest(struct hmoe_cli_conv *c);
/* Render with the chat template into a malloc'd string. */
enum hmoe_status hmoe_cli_conv_render(const struct hmoe_cli_conv *c, const struct hmoe_chat_fmt *fmt,
                                      bool add_generation_prompt, bool enable_thinking, char **out,
                                      struct hmoe_err *err);
/* {"messages": [{"role": ..., "content": ...}, ...]}, the format `hmoe template -i` reads. */
enum hmoe_status hmoe_cli_conv_save(const struct hmoe_cli_conv *c, const char *path, struct hmoe_err *err);
/* Replace the conversation with a file of that format (reasoning_content is folded back into
 * the content as a think block; tool calls and tool messages are rejected). */
enum hmoe_status hmoe_cli_conv_load(struct hmoe_cli_conv *c, const char *path, struct hmoe_err *err);

/* ---- a chat session and one turn (chat_turn.c) ------------------------------------------ */

/* Ctrl+C: the SIGINT handler counts, generation checks the count per token. */
extern volatile sig_atomic_t hmoe_chat_sigint_count;

enum hmoe_chat_think { HMOE_THINK_HIDE, HMOE_THINK_SHOW };

struct hmoe_chat_session {
    struct hmoe_model *model;
    struct hmoe_ctx *ctx;
    struct hmoe_vocab *vocab;
    struct hmoe_sampler *smp;
    struct hmoe_spec *spec;    /* --spec mtp, or NULL */
    struct hmoe_chat_fmt *fmt; /* the model's template or a built-in format */
    bool enable_thinking;
    enum hmoe_chat_think think;
    bool color;             /* stdout is a terminal: ANSI dim for reasoning */
    bool escape_out;        /* stdout is a terminal: control bytes of answers print escaped */
    bool progress;          /* progress bar for long prefills */
    bool drop_oldest;       /* --ctx-drop-oldest */
    int n_predict;          /* -n: -1 = until end of generation or full context */
    int32_t think_open, think_close; /* ids of <think> and </think>, or HMOE_TOKEN_NONE */
    int32_t *kv_ids;        /* [n_ctx] the tokens at KV positions 0 .. n_past-1 */
    float *logits;          /* [n_vocab] */
    struct hmoe_cli_conv conv;
};

/* What one turn did, for the timing line. */
struct hmoe_chat_turn_stats {
    int n_cached, n_prefill, n_gen, n_dropped;
    int n_steps;            /* decode steps after the first token (the rate's numerator) */
    double prefill_s, first_token_s, gen_s;
    bool interrupted, ctx_full;
    bool prefill_only;      /* /load: no answer */
    bool answered;          /* generation ran (false when the prefill was interrupted) */
};

/* Answer the conversation (whose last message is the user's): render, reuse the longest
 * common prefix of the KV cache, prefill the rest, stream the answer to stdout and append
 * it as the assistant message. Prints its own errors; returns an exit code (a context
 * overflow removes the user message and returns HMOE_EXIT_ERROR). */
int hmoe_chat_turn_answer(struct hmoe_chat_session *s, struct hmoe_chat_turn_stats *st);
/* Prefill the whole conversation without a generation prompt (after /load). */
int hmoe_chat_turn_prefill_only(struct hmoe_chat_session *s, struct hmoe_chat_turn_stats *st);
/* "[prompt 23 tok (140 cached), 812.3 tok/s | first token 45 ms | 120 tok, 31.2 tok/s | ctx 283/4096]" */
void hmoe_chat_turn_print_stats(const struct hmoe_chat_session *s, const struct hmoe_chat_turn_stats *st);

/* ---- line editor (lineedit.c) ------------------------------------------------------------ */

enum hmoe_lineedit_result { HMOE_LINEEDIT_LINE, HMOE_LINEEDIT_EOF, HMOE_LINEEDIT_INTERRUPT, HMOE_LINEEDIT_ERROR };

struct hmoe_lineedit {
    int fd_in, fd_out;
    char **hist;
    int n_hist, cap_hist;
};

void hmoe_lineedit_init(struct hmoe_lineedit *le, int fd_in, int fd_out);
void hmoe_lineedit_free(struct hmoe_lineedit *le);
/* Read one line in raw mode with editing keys (left/right, home/end, backspace, delete,
 * up/down history, Ctrl+A/E/U/K/W/L), moving by UTF-8 characters. `prompt` may contain ANSI
 * SGR sequences. LINE: *line is malloc'd (no newline). EOF: Ctrl+D on an empty line or end
 * of input. INTERRUPT: Ctrl+C (the line is dropped). The terminal is restored on return. */
enum hmoe_lineedit_result hmoe_lineedit_read(struct hmoe_lineedit *le, const char *prompt, char **line);
/* Append to the history (consecutive duplicates and empty lines are skipped). */
void hmoe_lineedit_history_add(struct hmoe_lineedit *le, const char *line);

#endif
