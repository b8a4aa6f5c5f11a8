/* cmd_chat.c — `hmoe chat -m FILE`: interactive multi-turn chat. On a terminal the line
 * editor reads each message (lineedit.c); from a pipe every line is one user turn. A line
 * starting with '/' is a command (/help lists them; "//" sends a literal '/'), a line ending
 * in '\' continues on the next. Each answer streams as it is generated, then a one-line
 * timing goes to stderr (chat_turn.c). Ctrl+C stops an answer; twice in a row, or Ctrl+D
 * at the prompt, exits.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chat_impl.h"
#include "hmoe/cpu.h"
#include "hmoe/progress.h"

static const char *usage = "hmoe chat -m FILE [-sys TEXT] [--no-think] [--show-think | --hide-think] [-n N] [-c N] "
                           "[--ctx-drop-oldest] [--temp T] [options]";

static const char *commands_help =
    "\nin-chat commands (a line that starts with '/'; '//' sends a literal '/'):\n"
    "  /exit, /quit        leave (also Ctrl+D at the prompt, or Ctrl+C twice in a row)\n"
    "  /clear              start a new conversation (the system prompt stays)\n"
    "  /regen              answer the last message again\n"
    "  /system TEXT        set the system prompt (/system alone removes it)\n"
    "  /save FILE          write the conversation as {\"messages\": [...]} (the format of hmoe template -i)\n"
    "  /load FILE          replace the conversation with a saved one and prefill it\n"
    "  /help               this list\n"
    "\nA line ending in '\\' continues on the next line. Ctrl+C stops the answer being written.\n"
    "Standard input that is not a terminal: every line is one user turn (commands work too), EOF exits; the exit\n"
    "status is 1 if a turn failed (e.g. the context was full). Reasoning (<think>...</think>, harmony's analysis\n"
    "channel) is shown dimmed on a "
    "terminal and hidden when stdout is not one, unless --show-think or --hide-think says otherwise.\n"
    "After each answer stderr gets: [prompt N tok (M cached), X tok/s | first token T ms | G tok, Y tok/s | ctx U/C]\n"
    "where N tokens were prefilled and M reused from the KV cache.\n"
    "Line editing: left/right, Home/End (Ctrl+A/E), Backspace, Delete, up/down history, Ctrl+U/K/W, Ctrl+L.\n";

static void on_sigint(int sig) {
    (void)sig;
    if (++hmoe_chat_sigint_count >= 2) {
        /* Second Ctrl+C before the first was handled: leave now, colours reset. */
        static const char msg[] = "\033[0m\n";
        ssize_t w = write(STDOUT_FILENO, msg, sizeof msg - 1);
        (void)w;
        _exit(130);
    }
}

/* One line from a pipe (without its newline) in *line (malloc'd); false at EOF. */
static bool read_pipe_line(char **line) {
    size_t cap = 0;
    ssize_t n = getline(line, &cap, stdin);
    if (n < 0) return false;
    while (n > 0 && ((*line)[n - 1] == '\n' || (*line)[n - 1] == '\r')) (*line)[--n] = 0;
    return true;
}

struct reader {
    bool tty;
    struct hmoe_lineedit le;
    const char *prompt, *prompt_more;
};

/* A whole message: lines ending in '\' are joined with '\n'. */
static enum hmoe_lineedit_result read_message(struct reader *r, char **msg) {
    *msg = NULL;
    char *acc = NULL;
    size_t acc_len = 0;
    for (;;) {
        char *line = NULL;
        enum hmoe_lineedit_result res;
        if (r->tty) res = hmoe_lineedit_read(&r->le, acc ? r->prompt_more : r->prompt, &line);
        else res = read_pipe_line(&line) ? HMOE_LINEEDIT_LINE : HMOE_LINEEDIT_EOF;
        if (res != HMOE_LINEEDIT_LINE) {
            free(line);
            if (res == HMOE_LINEEDIT_EOF && acc) break; /* end of input after a '\' line */
            free(acc);
            return res;
        }
        size_t n = strlen(line);
        bool more = n > 0 && line[n - 1] == '\\';
        if (more) line[--n] = 0;
        char *a = realloc(acc, acc_len + n + 2);
        if (!a) {
            free(line);
            free(acc);
            return HMOE_LINEEDIT_ERROR;
        }
        acc = a;
        memcpy(acc + acc_len, line, n);
        acc_len += n;
        if (more) acc[acc_len++] = '\n';
        acc[acc_len] = 0;
        free(line);
        if (!more) break;
    }
    if (r->tty) hmoe_lineedit_history_add(&r->le, acc);
    *msg = acc;
    return HMOE_LINEEDIT_LINE;
}

/* Runs a '/' command. Returns 1 to exit the chat, 0 to go on, -1 when it failed. */
static int run_command(struct hmoe_chat_session *s, const char *line) {
    const char *arg = strchr(line, ' ');
    size_t cmd_len = arg ? (size_t)(arg - line) : strlen(line);
    while (arg && *arg == ' ') arg++;
    if (arg && !*arg) arg = NULL;
#define IS(name) (cmd_len == strlen(name) && strncmp(line, name, cmd_len) == 0)
    struct hmoe_err err = {0};
    struct hmoe_chat_turn_stats st;
    if (IS("/exit") || IS("/quit")) return 1;
    if (IS("/help")) {
        fputs(commands_help + 1, stderr);
        return 0;
    }
    if (IS("/clear")) {
        hmoe_cli_conv_clear(&s->conv);
        fprintf(stderr, "[new conversation]\n");
        return 0;
    }
    if (IS("/system")) {
        if (!hmoe_cli_conv_set_system(&s->conv, arg ? arg : "")) {
            fprintf(stderr, "hmoe: out of memory\n");
            return -1;
        }
        fprintf(stderr, arg ? "[system prompt set]\n" : "[system prompt removed]\n");
        return 0;
    }
    if (IS("/regen")) {
        if (s->conv.n && strcmp(s->conv.msgs[s->conv.n - 1].role, "assistant") == 0) hmoe_cli_conv_pop(&s->conv);
        if (!s->conv.n || strcmp(s->conv.msgs[s->conv.n - 1].role, "user") != 0) {
            fprintf(stderr, "hmoe: /regen: there is no answer to redo yet\n");
            return -1;
        }
        int rc = hmoe_chat_turn_answer(s, &st);
        if (!rc && st.answered) hmoe_chat_turn_print_stats(s, &st);
        return rc ? -1 : 0;
    }
    if (IS("/save") || IS("/load")) {
        if (!arg) {
            fprintf(stderr, "hmoe: %.*s needs a file name\n", (int)cmd_len, line);
            return -1;
        }
        if (IS("/save")) {
            if (hmoe_cli_conv_save(&s->conv, arg, &err)) {
                hmoe_cli_fail(&err);
                return -1;
            }
            fprintf(stderr, "[saved %zu messages to %s]\n", s->conv.n, arg);
            return 0;
        }
        if (hmoe_cli_conv_load(&s->conv, arg, &err)) {
            hmoe_cli_fail(&err);
            return -1;
        }
        fprintf(stderr, "[loaded %zu messages from %s]\n", s->conv.n, arg);
        int rc = hmoe_chat_turn_prefill_only(s, &st);
        if (!rc) hmoe_chat_turn_print_stats(s, &st);
        return rc ? -1 : 0;
    }
#undef IS
    fprintf(stderr, "hmoe: unknown command '%.*s' (/help lists the commands; '//' sends a line starting with '/')\n",
            (int)cmd_len, line);
    return -1;
}

int hmoe_cmd_chat(int argc, char **argv) {
    struct hmoe_cli_model_opts mo;
    hmoe_cli_model_opts_default(&mo);
    struct hmoe_sampler_params sp;
    hmoe_sampler_params_default(&sp);
    int64_t seed = -1;
    int n_predict = -1;
    const char *sys = NULL;
    struct hmoe_cli_chat_args ca = {0};
    struct hmoe_cli_spec_args spa = {.draft_max = HMOE_CLI_DRAFT_MAX};
    bool think = false, no_think = false, show_think = false, hide_think = false, drop_oldest = false,
         verbose = false;
    const struct hmoe_opt opts[] = {
        {"--n-predict", "-n", "N", "most tokens per answer (default -1 = until end of generation or full context)",
         HMOE_OPT_INT, &n_predict},
        {"--system-prompt", "-sys", "TEXT", "system prompt (kept by /clear; change it with /system)", HMOE_OPT_STR,
         &sys},
        {"--think", NULL, NULL, "let the model reason first (Qwen3 enable_thinking=true; the default)", HMOE_OPT_FLAG,
         &think},
        {"--no-think", NULL, NULL, "no reasoning (Qwen3 enable_thinking=false: an empty think block)", HMOE_OPT_FLAG,
         &no_think},
        {"--show-think", NULL, NULL, "print the reasoning (default on a terminal, dimmed; piped: plain with tags)",
         HMOE_OPT_FLAG, &show_think},
        {"--hide-think", NULL, NULL, "do not print the reasoning (default when stdout is not a terminal)",
         HMOE_OPT_FLAG, &hide_think},
        HMOE_CLI_CHAT_TEMPLATE_OPTS(ca),
        {"--ctx-drop-oldest", NULL, NULL,
         "when the conversation plus room for the answer (-n, or a quarter of -c) does not fit, drop the oldest "
         "user/assistant exchanges (the system prompt stays) instead of refusing the turn",
         HMOE_OPT_FLAG, &drop_oldest},
        {"--verbose", "-v", NULL, "print model and context details", HMOE_OPT_FLAG, &verbose},
        HMOE_CLI_SAMPLING_OPTS(sp, seed),
        HMOE_CLI_SPEC_OPTS(spa),
        HMOE_CLI_MODEL_OPTS(mo),
        {NULL, NULL, NULL, NULL, 0, NULL},
    };
    const char *pos[1];
    int n_pos = 0;
    int rc = hmoe_opts_parse(usage, opts, argc, argv, pos, 0, &n_pos);
    if (rc < 0) fputs(commands_help, stdout);
    if (rc) return rc < 0 ? HMOE_EXIT_OK : rc;
    if ((rc = hmoe_cli_compat_apply("chat", &mo))) return rc;
    if (think && no_think) {
        fprintf(stderr, "hmoe: give either --think or --no-think\nusage: %s\n", usage);
        return HMOE_EXIT_USAGE;
    }
    if (show_think && hide_think) {
        fprintf(stderr, "hmoe: give either --show-think or --hide-think\nusage: %s\n", usage);
        return HMOE_EXIT_USAGE;
    }
    if (n_predict < -1) {
        fprintf(stderr, "hmoe: -n must be -1 or more\n");
        return HMOE_EXIT_USAGE;
    }
    if (mo.compat.reasoning_mode >= 0 && !think && !no_think) no_think = mo.compat.reasoning_mode == 0;
    if (verbose) hmoe_log_level = HMOE_LOG_INFO;
    if ((rc = hmoe_cli_sampler_check(&sp))) return rc;
    hmoe_cli_sampler_seed(&sp, seed);

    struct hmoe_chat_session s = {.n_predict = n_predict, .drop_oldest = drop_oldest, .enable_thinking = !no_think};
    struct reader r = {.tty = isatty(STDIN_FILENO) == 1};
    struct hmoe_err err = {0};
    const bool tty_out = isatty(STDOUT_FILENO) == 1;
    s.color = tty_out && !getenv("NO_COLOR");
    s.escape_out = tty_out;
    s.think = show_think ? HMOE_THINK_SHOW : hide_think ? HMOE_THINK_HIDE : tty_out ? HMOE_THINK_SHOW : HMOE_THINK_HIDE;
    s.progress = !mo.quiet && hmoe_progress_stderr_is_tty();
    if ((rc = hmoe_cli_model_open(&mo, &s.model, &s.ctx))) return rc;
    if ((rc = hmoe_cli_spec_open(&spa, s.ctx, &s.spec)) || (rc = hmoe_cli_vocab_open(s.model, &s.vocab)) ||
        (rc = hmoe_cli_chat_format(s.vocab, hmoe_model_arch(s.model)->chat_family, &ca, &s.fmt)))
        goto done;
    if (hmoe_sampler_init(&sp, s.model->cfg.n_vocab, &s.smp, &err)) {
        rc = hmoe_cli_fail(&err);
        goto done;
    }
    s.think_open = hmoe_vocab_find(s.vocab, "<think>", 7);
    s.think_close = hmoe_vocab_find(s.vocab, "</think>", 8);
    s.kv_ids = malloc((size_t)hmoe_ctx_n_ctx(s.ctx) * sizeof *s.kv_ids);
    s.logits = malloc((size_t)s.model->cfg.n_vocab * sizeof *s.logits);
    if (!s.kv_ids || !s.logits || (sys && !hmoe_cli_conv_set_system(&s.conv, sys))) {
        fprintf(stderr, "hmoe: out of memory\n");
        rc = HMOE_EXIT_ERROR;
        goto done;
    }
    HMOE_INFO("model: %s, %d layers, %d experts (%d used); context %d, KV %s/%s (%.1f MiB), %d threads, CPU kernels "
              "%s; template %s, thinking %s; seed %llu",
              s.model->cfg.arch, s.model->cfg.n_layer, s.model->cfg.n_expert, s.model->cfg.n_expert_used,
              hmoe_ctx_n_ctx(s.ctx), hmoe_type_name(hmoe_ctx_get_params(s.ctx)->type_k),
              hmoe_type_name(hmoe_ctx_get_params(s.ctx)->type_v), hmoe_ctx_kv_bytes(s.ctx) / 1048576.0,
              hmoe_ctx_get_params(s.ctx)->n_threads, hmoe_cpu_path_name(hmoe_cpu_path()),
              hmoe_chat_fmt_name(s.fmt), s.enable_thinking ? "on" : "off", (unsigned long long)sp.seed);

    struct sigaction sa, old_sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_sa);
    if (r.tty) {
        /* Editing goes where the person looks: stdout, or stderr when stdout is redirected. */
        hmoe_lineedit_init(&r.le, STDIN_FILENO, tty_out || !isatty(STDERR_FILENO) ? STDOUT_FILENO : STDERR_FILENO);
        r.prompt = s.color ? "\033[1m> \033[0m" : "> ";
        r.prompt_more = s.color ? "\033[1m. \033[0m" : ". ";
        fprintf(stderr, "hmoe chat: %s, context %d, template %s, thinking %s. /help lists commands; Ctrl+C stops an "
                        "answer; Ctrl+D exits.\n",
                s.model->gguf->path, hmoe_ctx_n_ctx(s.ctx), hmoe_chat_fmt_name(s.fmt),
                s.enable_thinking ? "on" : "off");
    }
    bool failed = false;
    for (;;) {
        char *msg = NULL;
        enum hmoe_lineedit_result res = read_message(&r, &msg);
        if (res == HMOE_LINEEDIT_EOF || res == HMOE_LINEEDIT_ERROR) break;
        if (res == HMOE_LINEEDIT_INTERRUPT) {
            if (hmoe_chat_sigint_count) break; /* the second Ctrl+C in a row */
            hmoe_chat_sigint_count = 1;
            fprintf(stderr, "(Ctrl+C again or Ctrl+D to exit)\n");
            continue;
        }
        hmoe_chat_sigint_count = 0;
        const char *text = msg;
        if (text[0] == '/' && text[1] != '/') {
            int c = run_command(&s, text);
            free(msg);
            if (c > 0) break;
            failed |= c < 0;
            continue;
        }
        if (text[0] == '/') text++; /* "//x" is the message "/x" */
        if (!*text) {
            free(msg);
            continue;
        }
        struct hmoe_chat_turn_stats st;
        if (!hmoe_cli_conv_add(&s.conv, "user", text, strlen(text))) {
            free(msg);
            fprintf(stderr, "hmoe: out of memory\n");
            failed = true;
            break;
        }
        free(msg);
        int trc = hmoe_chat_turn_answer(&s, &st);
        /* A Ctrl+C that stopped this answer has been handled: it does not count toward the
         * "twice in a row" that exits at the next prompt. */
        hmoe_chat_sigint_count = 0;
        if (!trc && st.answered) hmoe_chat_turn_print_stats(&s, &st);
        failed |= trc != 0;
    }
    sigaction(SIGINT, &old_sa, NULL);
    if (r.tty) hmoe_lineedit_free(&r.le);
    rc = failed && !r.tty ? HMOE_EXIT_ERROR : HMOE_EXIT_OK;
done:
    hmoe_cli_conv_free(&s.conv);
    free(s.kv_ids);
    free(s.logits);
    hmoe_sampler_free(s.smp);
    if (verbose) hmoe_cli_spec_report(s.spec);
    hmoe_spec_free(s.spec);
    hmoe_chat_fmt_free(s.fmt);
    hmoe_vocab_free(s.vocab);
    hmoe_cli_ctx_report(s.ctx);
    hmoe_ctx_free(s.ctx);
    hmoe_model_free(s.model);
    return rc;
}
