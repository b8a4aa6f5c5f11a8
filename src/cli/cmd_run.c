/* cmd_run.c — `hmoe run -m FILE -p PROMPT [-n N] [sampling flags] [--chat]`: one-shot
 * completion. Tokenizes the prompt (optionally wrapped as one user turn of the model's chat
 * template), prefills it, then samples and streams tokens through the UTF-8-safe streaming
 * detokenizer until an end-of-generation token, -n tokens or a full context (with
 * --context-shift: the oldest half after --keep tokens is dropped and generation goes on, as
 * llama.cpp's llama-cli does), and prints llama.cpp-style timings to stderr. Ctrl+C during the
 * prefill or the generation stops after the micro-batch (or token) in progress, prints what was
 * done and its timings and exits 130; a second Ctrl+C leaves at once. Shape: parse flags, build model/context/vocab/sampler,
 * generate, free in reverse (style-examples.md §1).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "hmoe/cpu.h"
#include "hmoe/json.h"
#include "hmoe/text.h"

static const char *usage = "hmoe run -m FILE (-p PROMPT | -f FILE) [-n N] [--temp T] [--top-k K] [--top-p P] "
                           "[--min-p P] [--repeat-penalty R] [-s SEED] [--chat] [options]";

static volatile sig_atomic_t sigint_count;

static void on_sigint(int sig) {
    (void)sig;
    if (++sigint_count >= 2) _exit(130); /* the first one was not seen yet: leave now */
}

/* llama.cpp's escape processing of -p text (\n \t \r \\ \" \' and \xHH); unknown escapes
 * are kept as written. In place: the result is never longer. */
static size_t process_escapes(char *s) {
    size_t o = 0, n = strlen(s);
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '\\' || i + 1 >= n) {
            s[o++] = s[i];
            continue;
        }
        char c = s[++i];
        unsigned char b[1];
        char hex[3] = {i + 2 < n ? s[i + 1] : 0, i + 2 < n ? s[i + 2] : 0, 0};
        if (c == 'x' && i + 2 < n && hmoe_hex_decode(hex, b, 1) == 1) {
            s[o++] = (char)b[0];
            i += 2;
            continue;
        }
        switch (c) {
        case 'n': s[o++] = '\n'; break;
        case 't': s[o++] = '\t'; break;
        case 'r': s[o++] = '\r'; break;
        case '\\': s[o++] = '\\'; break;
        case '"': s[o++] = '"'; break;
        case '\'': s[o++] = '\''; break;
        default:
            s[o++] = '\\';
            s[o++] = c;
        }
    }
    s[o] = 0;
    return o;
}

/* The prompt as one user turn of the model's chat template (or --chat-template). */
static int wrap_chat(const struct hmoe_model *model, const struct hmoe_vocab *vocab, const struct hmoe_cli_chat_args *ca,
                     bool no_think,
                     const char *prompt, char **out) {
    struct hmoe_chat_fmt *fmt = NULL;
    int rc = hmoe_cli_chat_format(vocab, hmoe_model_arch(model)->chat_family, ca, &fmt);
    if (rc) return rc;
    struct hmoe_chat_msg msg = {.role = "user", .content = prompt};
    struct hmoe_chat_opts co = {.add_generation_prompt = true, .enable_thinking = !no_think};
    struct hmoe_err err = {0};
    if (hmoe_chat_fmt_render(fmt, &msg, 1, &co, out, &err)) rc = hmoe_cli_fail(&err);
    hmoe_chat_fmt_free(fmt);
    return rc;
}

static void print_ids(const char *what, const int32_t *ids, int n) {
    fprintf(stderr, "%s: [", what);
    for (int i = 0; i < n; i++) fprintf(stderr, "%s%d", i ? ", " : "", ids[i]);
    fprintf(stderr, "]\n");
}

int hmoe_cmd_run(int argc, char **argv) {
    struct hmoe_cli_model_opts mo;
    hmoe_cli_model_opts_default(&mo);
    struct hmoe_sampler_params sp;
    hmoe_sampler_params_default(&sp);
    const char *prompt_arg = NULL, *prompt_file = NULL;
    struct hmoe_cli_chat_args ca = {0};
    struct hmoe_cli_spec_args spa = {.draft_max = HMOE_CLI_DRAFT_MAX};
    int n_predict = 128, n_keep = 0;
    int64_t seed = -1;
    bool chat = false, no_think = false, no_display = false, no_escape = false, escape = false, ignore_eos = false,
         verbose = false, ctx_shift = false;
    const struct hmoe_opt opts[] = {
        {"--prompt", "-p", "TEXT", "prompt text (escapes such as \\n are processed; see --no-escape)", HMOE_OPT_STR,
         &prompt_arg},
        {"--file", "-f", "FILE", "read the prompt from FILE (bytes used as they are)", HMOE_OPT_STR, &prompt_file},
        {"--n-predict", "-n", "N", "tokens to generate (default 128, -1 = until end of generation or full context)",
         HMOE_OPT_INT, &n_predict},
        {"--chat", NULL, NULL, "wrap the prompt as one user turn of the model's chat template", HMOE_OPT_FLAG, &chat},
        {"--no-think", NULL, NULL, "with --chat: thinking off (Qwen3 enable_thinking=false)", HMOE_OPT_FLAG,
         &no_think},
        HMOE_CLI_CHAT_TEMPLATE_OPTS(ca),
        {"--ignore-eos", NULL, NULL, "keep generating after end-of-generation tokens", HMOE_OPT_FLAG, &ignore_eos},
        {"--context-shift", NULL, NULL,
         "when the context is full, drop the oldest half of it after the --keep tokens and go on (CPU KV cache)",
         HMOE_OPT_FLAG, &ctx_shift},
        {"--keep", "-k", "N", "with --context-shift: prompt tokens never dropped (default 0, -1 = the whole prompt)",
         HMOE_OPT_INT, &n_keep},
        {"--no-display-prompt", NULL, NULL, "do not echo the prompt before the completion", HMOE_OPT_FLAG,
         &no_display},
        {"--escape", "-e", NULL, "process escapes in -p (the default; accepted for llama.cpp compatibility)",
         HMOE_OPT_FLAG, &escape},
        {"--no-escape", NULL, NULL, "take -p text literally", HMOE_OPT_FLAG, &no_escape},
        {"--verbose", "-v", NULL, "print model, context and sampler details, prompt and generated ids", HMOE_OPT_FLAG,
         &verbose},
        HMOE_CLI_SAMPLING_OPTS(sp, seed),
        HMOE_CLI_SPEC_OPTS(spa),
        HMOE_CLI_MODEL_OPTS(mo),
        {NULL, NULL, NULL, NULL, 0, NULL},
    };
    const char *pos[1];
    int n_pos = 0;
    int rc = hmoe_opts_parse(usage, opts, argc, argv, pos, 0, &n_pos);
    if (rc) return rc < 0 ? HMOE_EXIT_OK : rc;
    if ((rc = hmoe_cli_compat_apply("run", &mo))) return rc;
    if (mo.compat.reasoning_mode >= 0) no_think = mo.compat.reasoning_mode == 0;
    (void)escape;
    if (verbose) hmoe_log_level = HMOE_LOG_INFO;
    if (!!prompt_arg == !!prompt_file) {
        fprintf(stderr, "hmoe: give exactly one of -p PROMPT or -f FILE\nusage: %s\n", usage);
        return HMOE_EXIT_USAGE;
    }
    if (n_predict < -1) {
        fprintf(stderr, "hmoe: -n must be -1 or more\n");
        return HMOE_EXIT_USAGE;
    }
    if (n_keep < -1) {
        fprintf(stderr, "hmoe: --keep must be -1 (the whole prompt) or more\n");
        return HMOE_EXIT_USAGE;
    }
    if ((rc = hmoe_cli_sampler_check(&sp))) return rc;
    hmoe_cli_sampler_seed(&sp, seed);

    struct hmoe_err err = {0};
    char *prompt = NULL, *wrapped = NULL;
    size_t prompt_len = 0;
    if (prompt_file) {
        if (hmoe_read_file(prompt_file, &prompt, &prompt_len, &err)) return hmoe_cli_fail(&err);
    } else {
        prompt = strdup(prompt_arg);
        prompt_len = no_escape ? strlen(prompt) : process_escapes(prompt);
    }

    const double t_start = hmoe_time_s();
    struct hmoe_model *model = NULL;
    struct hmoe_ctx *ctx = NULL;
    struct hmoe_vocab *vocab = NULL;
    struct hmoe_sampler *smp = NULL;
    struct hmoe_detok_stream ds = {0};
    int32_t *ids = NULL;
    float *logits = NULL;
    const float *cur = NULL; /* the logits the next token is sampled from */
    struct hmoe_spec *spec = NULL;
    int32_t *gen = NULL;
    size_t gen_cap = 0;
    bool ds_ok = false, sa_set = false;
    struct sigaction old_sa;
    rc = hmoe_cli_model_open(&mo, &model, &ctx);
    if (rc) goto done;
    if ((rc = hmoe_cli_spec_open(&spa, ctx, &spec))) goto done; /* before the prompt: it fills the MTP block's cache */
    if ((rc = hmoe_cli_vocab_open(model, &vocab))) goto done;
    if (hmoe_sampler_init(&sp, model->cfg.n_vocab, &smp, &err)) {
        rc = hmoe_cli_fail(&err);
        goto done;
    }
    if (chat) {
        if ((rc = wrap_chat(model, vocab, &ca, no_think, prompt, &wrapped))) goto done;
        free(prompt);
        prompt = wrapped;
        wrapped = NULL;
        prompt_len = strlen(prompt);
    }
    size_t n_ids = 0;
    if (hmoe_tokenize(vocab, prompt, prompt_len, true, true, &ids, &n_ids, &err)) {
        rc = hmoe_cli_fail(&err);
        goto done;
    }
    const int n_ctx = hmoe_ctx_n_ctx(ctx);
    if (n_ids == 0) {
        fprintf(stderr, "hmoe: the prompt is empty (no tokens to start from)\n");
        rc = HMOE_EXIT_USAGE;
        goto done;
    }
    if (n_ids > (size_t)n_ctx) {
        fprintf(stderr, "hmoe: the prompt is %zu tokens but the context holds %d; raise -c/--ctx-size (the model's "
                        "context_length is %d)\n", n_ids, n_ctx, model->cfg.n_ctx_train);
        rc = HMOE_EXIT_ERROR;
        goto done;
    }
    HMOE_INFO("model: %s, %d layers, %d experts (%d used), vocab %d; context %d, KV %s/%s (%.1f MiB), %d threads, "
              "CPU kernels %s, %s; seed %llu",
              model->cfg.arch, model->cfg.n_layer, model->cfg.n_expert, model->cfg.n_expert_used, model->cfg.n_vocab,
              n_ctx, hmoe_type_name(hmoe_ctx_get_params(ctx)->type_k), hmoe_type_name(hmoe_ctx_get_params(ctx)->type_v),
              hmoe_ctx_kv_bytes(ctx) / 1048576.0, hmoe_ctx_get_params(ctx)->n_threads,
              hmoe_cpu_path_name(hmoe_cpu_path()), hmoe_cpu_amx_status(), (unsigned long long)sp.seed);
    if (ctx_shift) { /* a GPU cache or a recurrent model cannot shift: say so before generating */
        struct hmoe_err e2 = {0};
        if (hmoe_ctx_shift(ctx, 0, 0, &e2) == HMOE_ERR_UNSUPPORTED) {
            rc = hmoe_cli_fail(&e2);
            goto done;
        }
    }
    if (verbose) print_ids("prompt ids", ids, (int)n_ids);
    logits = malloc((size_t)model->cfg.n_vocab * sizeof *logits);
    /* at most n_ctx tokens without a context shift; with one the buffer grows */
    gen_cap = (size_t)(n_predict >= 0 && n_predict < n_ctx ? HMOE_MAX(1, n_predict) : n_ctx);
    gen = malloc(gen_cap * sizeof *gen);
    hmoe_detok_stream_init(&ds, vocab, false);
    ds_ok = true;
    if (!logits || !gen) {
        fprintf(stderr, "hmoe: out of memory\n");
        rc = HMOE_EXIT_ERROR;
        goto done;
    }
    const bool escape_out = isatty(STDOUT_FILENO) == 1;
    if (!no_display) {
        hmoe_cli_write_text(stdout, prompt, prompt_len, escape_out);
        fflush(stdout);
    }
    for (size_t i = 0; i < n_ids; i++) hmoe_sampler_accept(smp, ids[i]);

    /* Ctrl+C is seen between micro-batches of the prompt and between generated tokens. */
    struct sigaction sa = {0};
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_sa);
    sa_set = true;
    const double t_loaded = hmoe_time_s();
    const int step = hmoe_ctx_get_params(ctx)->n_ubatch > 0 ? hmoe_ctx_get_params(ctx)->n_ubatch : 512;
    int n_done = 0;
    for (int m; n_done < (int)n_ids && !sigint_count; n_done += m) {
        m = HMOE_MIN(step, (int)n_ids - n_done);
        const bool last = n_done + m == (int)n_ids;
        if (hmoe_ctx_decode(ctx, ids + n_done, m, n_done, last ? HMOE_LOGITS_LAST : HMOE_LOGITS_NONE, logits, &err)) {
            rc = hmoe_cli_fail(&err);
            goto done;
        }
    }
    const double t_prompt = hmoe_time_s();
    cur = logits;
    /* As llama.cpp: --keep counts prompt tokens (-1 or more than the prompt: all of it), plus
     * the BOS token when the vocabulary adds one. */
    const int keep = (n_keep < 0 || (size_t)n_keep > n_ids ? (int)n_ids : n_keep) +
                     (n_keep >= 0 && (size_t)n_keep < n_ids && vocab->add_bos ? 1 : 0);
    int n_gen = 0, n_eval = 0, n_sample = 0, n_past = n_done, n_shifts = 0;
    double eval_s = 0, sample_s = 0;
    bool ctx_full = false;
    while (!sigint_count && (n_predict < 0 || n_gen < n_predict)) {
        const double ts = hmoe_time_s();
        int32_t id = hmoe_sampler_sample(smp, cur);
        sample_s += hmoe_time_s() - ts;
        n_sample++;
        if (!ignore_eos && hmoe_vocab_is_eog(vocab, id)) break;
        if ((size_t)n_gen == gen_cap) {
            int32_t *g2 = realloc(gen, 2 * gen_cap * sizeof *gen);
            if (!g2) {
                fprintf(stderr, "hmoe: out of memory\n");
                rc = HMOE_EXIT_ERROR;
                goto done;
            }
            gen = g2;
            gen_cap *= 2;
        }
        gen[n_gen++] = id;
        hmoe_sampler_accept(smp, id);
        size_t len = 0;
        const char *piece = hmoe_detok_stream_push(&ds, id, &len);
        if (piece && len) {
            hmoe_cli_write_text(stdout, piece, len, escape_out);
            fflush(stdout);
        }
        if (n_predict >= 0 && n_gen >= n_predict) break;
        if (n_past >= n_ctx && ctx_shift && n_past - keep >= 2) {
            /* llama.cpp's context shift: half of what follows the kept prefix goes */
            const int n_discard = (n_past - keep) / 2;
            if (hmoe_ctx_shift(ctx, keep, n_discard, &err)) {
                rc = hmoe_cli_fail(&err);
                goto done;
            }
            n_past -= n_discard;
            n_shifts++;
            HMOE_INFO("context shift: dropped positions %d..%d, %d left", keep, keep + n_discard - 1, n_past);
        }
        if (n_past >= n_ctx) {
            ctx_full = true;
            break;
        }
        if (sigint_count) break; /* (the token just shown is not decoded) */
        const double te = hmoe_time_s();
        if (hmoe_cli_decode_next(ctx, spec, id, n_past, logits, &cur, &err)) {
            rc = hmoe_cli_fail(&err);
            goto done;
        }
        eval_s += hmoe_time_s() - te;
        n_past++;
        n_eval++;
    }
    size_t len = 0;
    const char *rest = hmoe_detok_stream_flush(&ds, &len);
    if (rest && len) hmoe_cli_write_text(stdout, rest, len, escape_out);
    fputc('\n', stdout);
    if ((rc = hmoe_cli_stdout_check(rc))) goto done;
    const double t_end = hmoe_time_s();
    if (verbose) print_ids("generated ids", gen, n_gen);
    if (verbose) hmoe_cli_spec_report(spec);
    if (n_shifts) fprintf(stderr, "hmoe: context shifted %d times (--context-shift, --keep %d)\n", n_shifts, keep);
    if (ctx_full)
        fprintf(stderr, "hmoe: context full after %d tokens (-c %d); stopping. Raise -c/--ctx-size to generate more.\n",
                n_past, n_ctx);
    if (sigint_count) {
        if (n_done < (int)n_ids)
            fprintf(stderr, "[interrupted during the prompt: %d of %zu tokens prefilled]\n", n_done, n_ids);
        else fprintf(stderr, "[interrupted after %d generated tokens]\n", n_gen);
        rc = 130; /* as a shell reports a Ctrl+C */
    }
    struct hmoe_cli_timings tm = {.load_s = t_loaded - t_start, .prompt_s = t_prompt - t_loaded, .n_prompt = n_done,
                                  .sample_s = sample_s, .n_sample = n_sample, .eval_s = eval_s, .n_eval = n_eval,
                                  .total_s = t_end - t_start, .n_total = (int)n_ids + n_gen};
    hmoe_cli_print_timings(&tm);
done:
    if (sa_set) sigaction(SIGINT, &old_sa, NULL);
    if (ds_ok) hmoe_detok_stream_free(&ds);
    free(logits);
    free(gen);
    free(ids);
    free(prompt);
    free(wrapped);
    hmoe_sampler_free(smp);
    hmoe_vocab_free(vocab);
    hmoe_spec_free(spec);
    hmoe_cli_ctx_report(ctx);
    hmoe_ctx_free(ctx);
    hmoe_model_free(model);
    return rc;
}
