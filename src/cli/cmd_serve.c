/* cmd_serve.c — `hmoe serve -m FILE [--host 127.0.0.1] [--port 8080] [...]`: the OpenAI-
 * compatible server (src/server). The server listens first and the model loads on a second
 * thread, so that /health answers 503 during the load; the main thread waits for SIGINT /
 * SIGTERM (blocked in every thread, taken with sigwait) and then stops the server: it stops
 * accepting, cancels the running request, answers the queued ones and exits 0.
 * llama-server flags that mean something else here are accepted and explained in one line.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#if HMOE_HAVE_SERVER
#include "hmoe/json.h"
#include "hmoe/server.h"

static const char *usage = "hmoe serve -m FILE [--host 127.0.0.1] [--port 8080] [-c N] [--alias NAME] "
                           "[--api-key KEY] [--queue 16] [sampling and model options]";

struct loader {
    const struct hmoe_cli_model_opts *mo;
    struct hmoe_server *srv;
    const struct hmoe_cli_chat_args *chat_args;
    struct hmoe_chat_fmt *fmt;
    struct hmoe_model *model;
    struct hmoe_ctx *ctx;
    const struct hmoe_cli_spec_args *spec_args;
    struct hmoe_spec *spec;
    struct hmoe_vocab *vocab;
    int rc;
    pthread_t main_thread;
};

/* Load the model, hand it to the server; SIGUSR1 tells the main thread it failed. */
static void *load_model(void *arg) {
    struct loader *l = arg;
    struct hmoe_err err = {0};
    l->rc = hmoe_cli_model_open(l->mo, &l->model, &l->ctx);
    if (!l->rc) l->rc = hmoe_cli_spec_open(l->spec_args, l->ctx, &l->spec);
    if (!l->rc) hmoe_server_set_spec(l->srv, l->spec);
    if (!l->rc) l->rc = hmoe_cli_vocab_open(l->model, &l->vocab);
    if (!l->rc) l->rc = hmoe_cli_chat_format(l->vocab, hmoe_model_arch(l->model)->chat_family, l->chat_args, &l->fmt);
    if (!l->rc && hmoe_server_set_model(l->srv, l->model, l->ctx, l->vocab, l->fmt, l->mo->model_path, &err))
        l->rc = hmoe_cli_fail(&err);
    if (l->rc) pthread_kill(l->main_thread, SIGUSR1);
    else fprintf(stderr, "hmoe serve: model loaded (%s, context %d, %s backend); ready\n", l->model->cfg.arch,
                 hmoe_ctx_n_ctx(l->ctx), hmoe_ctx_backend(l->ctx));
    return NULL;
}

/* The key from --api-key-file: the first line, without its newline. */
static int read_key_file(const char *path, char **key) {
    struct hmoe_err err = {0};
    size_t len = 0;
    if (hmoe_read_file(path, key, &len, &err)) return hmoe_cli_fail(&err);
    (*key)[strcspn(*key, "\r\n")] = 0;
    if (!**key) {
        fprintf(stderr, "hmoe: --api-key-file %s: the first line is empty (it should hold the key)\n", path);
        return HMOE_EXIT_USAGE;
    }
    return HMOE_EXIT_OK;
}

/* What the llama-server flags left to serve by hmoe_cli_compat_apply map to, one line each. */
static void print_tolerated(const struct hmoe_cli_compat *c, bool parse_reasoning) {
    if (c->parallel)
        fprintf(stderr, "hmoe serve: -np %s: %d slot%s stepped together, -c split evenly between them%s; further "
                        "requests wait in the FIFO queue (--queue)\n",
                c->parallel, c->n_parallel > 1 ? c->n_parallel : 1, c->n_parallel > 1 ? "s" : "",
                c->n_parallel > 1 ? " (architectures with recurrent state: on the CPU)" : "");
    if (c->metrics) fprintf(stderr, "hmoe serve: --metrics: GET /metrics (always served)\n");
    if (c->cache_reuse)
        fprintf(stderr, "hmoe serve: --cache-reuse %s: the prompt cache reuses the longest common prefix of the last "
                        "request (no chunk shifting)\n", c->cache_reuse);
    if (c->reasoning_format)
        fprintf(stderr, "hmoe serve: --reasoning-format %s: %s\n", c->reasoning_format,
                parse_reasoning ? "<think> text goes to reasoning_content" : "<think> text stays in content");
}

int hmoe_cmd_serve(int argc, char **argv) {
    struct hmoe_cli_model_opts mo;
    hmoe_cli_model_opts_default(&mo);
    struct hmoe_server_params sp;
    hmoe_server_params_default(&sp);
    const char *key_file = NULL;
    struct hmoe_cli_chat_args ca = {0};
    struct hmoe_cli_spec_args spa = {.draft_max = HMOE_CLI_DRAFT_MAX};
    int64_t seed = -1;
    int max_body_mib = 16;
    const struct hmoe_opt opts[] = {
        HMOE_OPT_HEADING("server"),
        {"--host", NULL, "ADDR", "address to listen on (default 127.0.0.1; 0.0.0.0 = every interface)", HMOE_OPT_STR,
         &sp.host},
        {"--port", NULL, "N", "TCP port (default 8080; 0 = any free port, printed at start)", HMOE_OPT_INT, &sp.port},
        {"--alias", "-a", "NAME", "model name in /v1/models and responses (default: the file name)", HMOE_OPT_STR,
         &sp.alias},
        {"--api-key", NULL, "KEY", "require 'Authorization: Bearer KEY' on every endpoint but /health", HMOE_OPT_STR,
         &sp.api_key},
        {"--api-key-file", NULL, "FILE", "the same with the key read from the first line of FILE", HMOE_OPT_STR,
         &key_file},
        {"--queue", NULL, "N", "requests waiting behind the running ones (default 16; more get 503 + Retry-After)",
         HMOE_OPT_INT, &sp.queue_max},
        {"--prefill-chunk", NULL, "N", "prompt tokens a slot runs per step beside the other slots' tokens (default: "
         "-ub)", HMOE_OPT_INT, &sp.prefill_chunk},
        {"--threads-http", NULL, "N", "HTTP threads (default 4)", HMOE_OPT_INT, &sp.http_threads},
        {"--timeout", "-to", "N", "seconds an idle connection is kept open (default 30)", HMOE_OPT_INT,
         &sp.idle_timeout_s},
        {"--max-body", NULL, "MiB", "request body limit (default 16)", HMOE_OPT_INT, &max_body_mib},
        HMOE_CLI_CHAT_TEMPLATE_OPTS(ca),
        {"--n-predict", "-n", "N", "default max tokens per request (default -1 = until the context is full)",
         HMOE_OPT_INT, &sp.n_predict},
        HMOE_CLI_SAMPLING_OPTS(sp.sampling, seed),
        HMOE_CLI_SPEC_OPTS(spa),
        HMOE_CLI_MODEL_OPTS(mo),
        {NULL, NULL, NULL, NULL, 0, NULL},
    };
    const char *pos[1];
    int n_pos = 0;
    int rc = hmoe_opts_parse(usage, opts, argc, argv, pos, 0, &n_pos);
    if (rc) return rc < 0 ? HMOE_EXIT_OK : rc;
    if ((rc = hmoe_cli_compat_apply("serve", &mo)) || (rc = hmoe_cli_sampler_check(&sp.sampling))) return rc;
    sp.seed_given = seed >= 0;
    hmoe_cli_sampler_seed(&sp.sampling, seed);
    if (!mo.model_path) {
        fprintf(stderr, "hmoe: -m/--model FILE is required\nusage: %s\n", usage);
        return HMOE_EXIT_USAGE;
    }
    /* --reasoning off: thinking off unless a request asks; --reasoning-format none: <think> stays in content */
    sp.enable_thinking = mo.compat.reasoning_mode != 0;
    sp.parse_reasoning = !mo.compat.reasoning_format || strcmp(mo.compat.reasoning_format, "none") != 0;
    if (mo.compat.n_parallel > HMOE_MAX_SEQ) {
        fprintf(stderr, "hmoe: -np %d: at most %d parallel sequences\nusage: %s\n", mo.compat.n_parallel, HMOE_MAX_SEQ,
                usage);
        return HMOE_EXIT_USAGE;
    }
    mo.n_seq = mo.compat.n_parallel > 1 ? mo.compat.n_parallel : 1; /* -1 (auto): one */
    if (sp.prefill_chunk < 0) {
        fprintf(stderr, "hmoe: --prefill-chunk must be >= 1\nusage: %s\n", usage);
        return HMOE_EXIT_USAGE;
    }
    if (sp.queue_max < 0 || sp.http_threads < 1 || sp.idle_timeout_s < 1 || max_body_mib < 1 || max_body_mib > 4096 ||
        sp.n_predict < -1) {
        fprintf(stderr, "hmoe: --queue must be >= 0, --threads-http and --timeout >= 1, --max-body 1 to 4096, "
                        "-n >= -1\n");
        return HMOE_EXIT_USAGE;
    }
    sp.body_max = (size_t)max_body_mib << 20;
    char *key = NULL;
    if (key_file) {
        if ((rc = read_key_file(key_file, &key))) return rc;
        sp.api_key = key;
    }
    if (!mo.quiet) print_tolerated(&mo.compat, sp.parse_reasoning);

    /* Signals are taken by sigwait in this thread only: block them before any thread starts. */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN); /* a client that hangs up mid-write is an error return, not a kill */

    struct hmoe_err err = {0};
    struct hmoe_server *srv = NULL;
    if (hmoe_server_start(&sp, &srv, &err)) {
        free(key);
        return hmoe_cli_fail(&err);
    }
    fprintf(stderr, "hmoe serve: server is listening on http://%s%s%s:%d (loading %s)\n", strchr(sp.host, ':') ? "[" : "",
            sp.host, strchr(sp.host, ':') ? "]" : "", hmoe_server_port(srv), mo.model_path);
    struct loader l = {.mo = &mo, .srv = srv, .chat_args = &ca, .spec_args = &spa, .main_thread = pthread_self()};
    pthread_t loader;
    if (pthread_create(&loader, NULL, load_model, &l)) {
        fprintf(stderr, "hmoe: cannot start the model loading thread\n");
        hmoe_server_free(srv);
        free(key);
        return HMOE_EXIT_ERROR;
    }
    int sig = 0;
    sigwait(&sigs, &sig);
    if (sig != SIGUSR1) fprintf(stderr, "hmoe serve: %s: stopping\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    /* a load still running cannot be interrupted: wait for it, then stop */
    pthread_join(loader, NULL);
    hmoe_server_stop(srv);
    hmoe_server_free(srv);
    hmoe_chat_fmt_free(l.fmt);
    hmoe_vocab_free(l.vocab);
    hmoe_spec_free(l.spec);
    hmoe_ctx_free(l.ctx);
    hmoe_model_free(l.model);
    free(key);
    return sig == SIGUSR1 ? (l.rc ? l.rc : HMOE_EXIT_ERROR) : HMOE_EXIT_OK;
}

#else

int hmoe_cmd_serve(int argc, char **argv) {
    (void)argc, (void)argv;
    fprintf(stderr, "hmoe: this build has no `serve`: install libmicrohttpd-dev and libjansson-dev, then run make again\n");
    return HMOE_EXIT_ERROR;
}

#endif
