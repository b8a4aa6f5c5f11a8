/* fuzz_server.c — libFuzzer target for what `hmoe serve` does with a request body before the
 * engine sees it: JSON parsing, every generation endpoint's reader (chat with template
 * rendering, tools and the answer parser's setup; completions; /completion; Ollama's /api/chat and
 * /api/generate; response_format grammars and forced tool calls) and the
 * tokenize / detokenize / apply-template endpoints, against the tiny fixture model's real
 * vocabulary and template. A refused request must carry a 4xx/5xx status and a message;
 * an accepted one must have a prompt that fits the context. ASan/UBSan catch the rest.
 * Build and run (Makefile `fuzz`):  make fuzz && build/fuzz/fuzz_server -max_total_time=600 tests/data/fuzz-server
 * (HMOE_FUZZ_MODEL overrides the model, default tests/fixtures/models/tiny-qwen3moe-A-mini-F32.gguf).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/server_impl.h"

static struct hmoe_server srv;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    const char *path = getenv("HMOE_FUZZ_MODEL");
    if (!path) path = "tests/fixtures/models/tiny-qwen3moe-A-mini-F32.gguf";
    struct hmoe_err err = {0};
    struct hmoe_model *model = NULL;
    struct hmoe_ctx *ctx = NULL;
    struct hmoe_vocab *vocab = NULL;
    struct hmoe_ctx_params cp;
    hmoe_ctx_params_default(&cp);
    cp.n_ctx = 256;
    cp.n_threads = 1;
    if (hmoe_model_load(path, NULL, &model, &err) || hmoe_ctx_init(model, &cp, &ctx, &err) ||
        hmoe_vocab_load(model->gguf, &vocab, &err)) {
        fprintf(stderr, "fuzz_server: %s: %s\n", path, err.msg);
        exit(1);
    }
    hmoe_server_params_default(&srv.p);
    srv.model = model;
    srv.ctx = ctx;
    srv.vocab = vocab;
    struct hmoe_chat_fmt_src src = {.template_text = vocab->chat_template, .template_origin = "tokenizer.chat_template",
                                    .default_family = HMOE_CHAT_TEMPLATE_UNKNOWN};
    struct hmoe_chat_fmt *fmt = NULL;
    char warning[640];
    if (hmoe_chat_fmt_open(&src, &fmt, warning, sizeof warning, &err)) {
        fprintf(stderr, "fuzz_server: %s: %s\n", path, err.msg);
        exit(1);
    }
    srv.fmt = fmt;
    srv.model_name = (char *)"fuzz";
    return 0;
}

static void require_error(const char *what, const struct srv_error *e) {
    if (e->status >= 400 && e->status < 600 && e->msg[0]) return;
    fprintf(stderr, "fuzz_server: %s refused without a status and message (%d '%s')\n", what, e->status, e->msg);
    __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    struct srv_error e = {0};
    json_t *req = srv_parse_body((const char *)data, size, &e);
    if (!req) {
        require_error("parse", &e);
        return 0;
    }
    static const enum srv_kind kinds[] = {SRV_KIND_CHAT, SRV_KIND_COMPLETIONS, SRV_KIND_NATIVE, SRV_KIND_OLLAMA_CHAT,
                                          SRV_KIND_OLLAMA_GENERATE};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        memset(&e, 0, sizeof e);
        json_t *conv = NULL;
        if (srv_kind_ollama(kinds[k])) { /* Ollama's body read into the OpenAI one first */
            bool load_only = false;
            conv = srv_ollama_request(req, kinds[k], &load_only, &e);
            if (!conv) {
                require_error("an Ollama request", &e);
                continue;
            }
            if (load_only) {
                json_decref(conv);
                continue;
            }
        }
        struct srv_job *j = srv_request_job(&srv, kinds[k], conv ? conv : req, &e);
        json_decref(conv);
        if (!j) {
            require_error("a generation request", &e);
            continue;
        }
        if (j->n_ids <= 0 || j->n_ids >= hmoe_ctx_n_ctx(srv.ctx) || j->gp.n_predict > hmoe_ctx_n_ctx(srv.ctx) - j->n_ids)
            __builtin_trap();
        /* the answer path: a few bytes of the request as if generated */
        srv_emit_text(j, (const char *)data, size < 64 ? size : 64);
        srv_emit_end(j);
        srv_job_complete(j);
        srv_job_unref(j);
    }
    json_t *out = NULL;
    int (*const info[])(struct hmoe_server *, json_t *, json_t **, struct srv_error *) = {
        srv_api_tokenize, srv_api_detokenize, srv_api_apply_template};
    for (size_t k = 0; k < sizeof info / sizeof info[0]; k++) {
        memset(&e, 0, sizeof e);
        out = NULL;
        if (info[k](&srv, req, &out, &e) != 200) require_error("an endpoint", &e);
        json_decref(out);
    }
    json_decref(req);
    return 0;
}
