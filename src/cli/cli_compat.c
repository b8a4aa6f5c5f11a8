/* cli_compat.c — the llama.cpp flags a pasted llama-cli / llama-server / llama-bench command line
 * carries (spelled as llama.cpp's tools/server README lists them): their values are checked like
 * any flag's, those with an hmoe meaning are mapped onto hmoe's flags, and each given flag prints
 * one line at start saying what it became or why it changes nothing, so that nobody wonders
 * whether "-ngl 99 -fa on" did something. */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "hmoe/cuda.h"

static bool is_serve(const char *cmd) { return strcmp(cmd, "serve") == 0; }

static void note(const struct hmoe_cli_model_opts *o, const char *flag, const char *value, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void note(const struct hmoe_cli_model_opts *o, const char *flag, const char *value, const char *fmt, ...) {
    if (o->quiet) return;
    fprintf(stderr, "hmoe: %s%s%s: ", flag, value ? " " : "", value ? value : "");
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

static int bad(const char *flag, const char *value, const char *takes) {
    fprintf(stderr, "hmoe: invalid %s '%s': %s\n(see --help, group \"llama.cpp compatibility\")\n", flag, value, takes);
    return HMOE_EXIT_USAGE;
}

static bool parse_i64(const char *s, int64_t min, int64_t max, int64_t *out) {
    char *end = NULL;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < min || v > max) return false;
    *out = v;
    return true;
}

static bool one_of(const char *s, const char *const *words) {
    for (; *words; words++)
        if (strcmp(s, *words) == 0) return true;
    return false;
}

/* Each comma-separated item of `s` (llama-bench takes lists) is an integer >= min or one of `words`. */
static bool list_ok(const char *s, int64_t min, const char *const *words) {
    char item[64];
    for (const char *p = s;;) {
        const char *c = strchr(p, ',');
        size_t n = c ? (size_t)(c - p) : strlen(p);
        if (!n || n >= sizeof item) return false;
        memcpy(item, p, n);
        item[n] = 0;
        int64_t v;
        if (!(words && one_of(item, words)) && !parse_i64(item, min, INT_MAX, &v)) return false;
        if (!c) return true;
        p = c + 1;
    }
}

static int gpu_layers(const char *cmd, struct hmoe_cli_model_opts *o) {
    const struct hmoe_cli_compat *c = &o->compat;
    static const char *const words[] = {"auto", "all", NULL};
    if (!list_ok(c->n_gpu_layers, 0, words)) return bad("-ngl/--n-gpu-layers", c->n_gpu_layers, "a number >= 0, auto or all");
    if (strcmp(c->n_gpu_layers, "0") == 0) {
        if (o->gpu && strcmp(o->gpu, "auto") != 0) {
            note(o, "-ngl", c->n_gpu_layers, "ignored: --gpu %s is given", o->gpu);
        } else {
            o->gpu = "off";
            note(o, "-ngl", c->n_gpu_layers, "mapped to --gpu off (everything on the CPU)");
        }
        return 0;
    }
    note(o, "-ngl", c->n_gpu_layers,
         "%s: with a GPU every layer goes to it, and the experts that do not fit --vram-budget stay in RAM "
         "(-cmoe, -ncmoe, -ot choose which)",
         strcmp(cmd, "bench") == 0 && strchr(c->n_gpu_layers, ',') ? "ignored (one placement per run)" : "ignored");
    return 0;
}

static int fit_target(struct hmoe_cli_model_opts *o) {
    const char *v = o->compat.fit_target;
    if (!list_ok(v, 0, NULL)) return bad("-fitt/--fit-target", v, "MiB >= 0 (a list takes its first value: one GPU)");
    int64_t margin = strtoll(v, NULL, 10);
    if (o->vram_budget_mib > 0) {
        note(o, "-fitt", v, "ignored: --vram-budget is given");
        return 0;
    }
    struct hmoe_cuda_device_info info;
    struct hmoe_err err = {0};
    if ((o->gpu && strcmp(o->gpu, "off") == 0) || !hmoe_cuda_available() ||
        hmoe_cuda_device_info(0, &info, &err) != HMOE_OK) {
        note(o, "-fitt", v, "ignored: no GPU in use");
        return 0;
    }
    int64_t free_mib = (int64_t)(info.free_bytes >> 20);
    if (free_mib - margin < 1) {
        note(o, "-fitt", v, "ignored: the GPU has only %lld MiB free", (long long)free_mib);
        return 0;
    }
    o->vram_budget_mib = free_mib - margin;
    note(o, "-fitt", v, "mapped to --vram-budget %lld (%lld MiB free now - %lld)", (long long)o->vram_budget_mib,
         (long long)free_mib, (long long)margin);
    return 0;
}

static int reasoning(const char *cmd, struct hmoe_cli_model_opts *o) {
    struct hmoe_cli_compat *c = &o->compat;
    static const char *const modes[] = {"off", "on", "auto", NULL};
    if (c->reasoning) {
        if (!one_of(c->reasoning, modes)) return bad("-rea/--reasoning", c->reasoning, "on, off or auto");
        c->reasoning_mode = strcmp(c->reasoning, "off") == 0 ? 0 : strcmp(c->reasoning, "on") == 0 ? 1 : -1;
        if (strcmp(cmd, "bench") == 0 || strcmp(cmd, "logits") == 0)
            note(o, "--reasoning", c->reasoning, "ignored: %s renders no chat template", cmd);
        else if (c->reasoning_mode < 0)
            note(o, "--reasoning", c->reasoning, "the template's default (thinking on where the model has it)");
        else if (is_serve(cmd))
            note(o, "--reasoning", c->reasoning, "enable_thinking=%s unless a request's chat_template_kwargs says "
                 "otherwise", c->reasoning_mode ? "true" : "false");
        else
            note(o, "--reasoning", c->reasoning, "mapped to %s%s", c->reasoning_mode ? "--think" : "--no-think",
                 strcmp(cmd, "run") == 0 ? " (with --chat)" : "");
    }
    static const char *const formats[] = {"none", "deepseek", "deepseek-legacy", "auto", NULL};
    if (c->reasoning_format) {
        if (!one_of(c->reasoning_format, formats))
            return bad("--reasoning-format", c->reasoning_format, "none, deepseek, deepseek-legacy or auto");
        if (!is_serve(cmd))
            note(o, "--reasoning-format", c->reasoning_format,
                 "ignored: %s", strcmp(cmd, "chat") == 0 ? "chat shows the reasoning as --show-think / --hide-think say"
                                                          : "only serve returns reasoning_content");
    }
    if (c->reasoning_budget) {
        int64_t v;
        if (!parse_i64(c->reasoning_budget, -1, INT_MAX, &v))
            return bad("--reasoning-budget", c->reasoning_budget, "-1 or a number of tokens");
        note(o, "--reasoning-budget", c->reasoning_budget, "ignored: there is no thinking budget (-n caps the answer)");
    }
    return 0;
}

static int load_mode(struct hmoe_cli_model_opts *o) {
    const struct hmoe_cli_compat *c = &o->compat;
    if (c->load_mode) {
        const char *m = c->load_mode;
        static const char *const modes[] = {"auto", "none", "mmap", "mlock", "mmap+mlock", "dio", NULL};
        if (!one_of(m, modes)) return bad("-lm/--load-mode", m, "auto, none, mmap, mlock, mmap+mlock or dio");
        if (!strcmp(m, "none") || !strcmp(m, "dio")) {
            o->no_mmap = true;
            note(o, "-lm", m, "mapped to --no-mmap (the file is read into RAM at start)");
        } else if (!strcmp(m, "auto") || !strcmp(m, "mmap")) {
            note(o, "-lm", m, "the default: the file is mapped and read into the page cache at start");
        } else {
            o->mlock = true;
            note(o, "-lm", m, "mapped to --mlock (the weights are locked in RAM)");
        }
    }
    if (c->mmap) note(o, "--mmap", NULL, "the default (--no-mmap reads the file into RAM)");
    return 0;
}

/* Flags that only a server has a use for. */
static int server_flags(const char *cmd, struct hmoe_cli_model_opts *o) {
    struct hmoe_cli_compat *c = &o->compat;
    int64_t v;
    if (c->parallel) {
        if (!parse_i64(c->parallel, -1, INT_MAX, &v) || v == 0) return bad("-np/--parallel", c->parallel, "-1 (auto) or 1 or more");
        c->n_parallel = (int)v;
        if (!is_serve(cmd))
            note(o, "-np", c->parallel, "%s", v == 1 ? "one sequence, as hmoe always runs" : "ignored: one sequence at a time");
    }
    if (c->cache_reuse) {
        if (!parse_i64(c->cache_reuse, 0, INT_MAX, &v)) return bad("--cache-reuse", c->cache_reuse, "a number of tokens >= 0");
        c->cache_reuse_min = (int)v;
        if (!is_serve(cmd)) note(o, "--cache-reuse", c->cache_reuse, "ignored: only serve keeps a prompt cache");
    }
    if (c->metrics && !is_serve(cmd)) note(o, "--metrics", NULL, "ignored: only serve has a /metrics endpoint");
    if (c->jinja || c->no_jinja)
        note(o, c->jinja ? "--jinja" : "--no-jinja", NULL, "%s",
             c->jinja ? "the default: the model's own Jinja template is rendered (--chat-template NAME: a built-in format)"
                      : "ignored: the model's own Jinja template is rendered (--chat-template NAME: a built-in format)");
    return 0;
}

int hmoe_cli_compat_apply(const char *cmd, struct hmoe_cli_model_opts *o) {
    struct hmoe_cli_compat *c = &o->compat;
    int rc;
    int64_t v;
    if (c->n_gpu_layers && (rc = gpu_layers(cmd, o))) return rc;
    if (c->flash_attn) {
        static const char *const modes[] = {"on", "off", "auto", "1", "0", "true", "false", NULL};
        if (!list_ok(c->flash_attn, INT_MAX, modes)) return bad("-fa/--flash-attn", c->flash_attn, "on, off or auto");
        note(o, "-fa", c->flash_attn, "ignored: hmoe has one attention kernel per backend and always uses it");
    }
    if (c->fit) {
        static const char *const modes[] = {"on", "off", NULL};
        if (!one_of(c->fit, modes)) return bad("-fit/--fit", c->fit, "on or off");
        note(o, "-fit", c->fit, "%s", strcmp(c->fit, "on") == 0
                                          ? "what hmoe does anyway: the placement fits --vram-budget (default free "
                                            "VRAM - 1024 MiB); -c is not shrunk"
                                          : "ignored: the placement always fits --vram-budget");
    }
    if (c->fit_target && (rc = fit_target(o))) return rc;
    if (c->fit_ctx) {
        if (!parse_i64(c->fit_ctx, 0, INT_MAX, &v)) return bad("-fitc/--fit-ctx", c->fit_ctx, "a number of tokens >= 0");
        note(o, "-fitc", c->fit_ctx, "ignored: the KV cache holds -c tokens (%d) and is never shrunk", o->n_ctx);
    }
    if ((rc = reasoning(cmd, o)) || (rc = load_mode(o)) || (rc = server_flags(cmd, o))) return rc;
    if (c->moe_cache_mib) {
        if (!parse_i64(c->moe_cache_mib, 0, INT64_MAX >> 21, &v)) return bad("--moe-cache-mib", c->moe_cache_mib, "MiB >= 0");
        if (o->vram_budget_mib > 0) note(o, "--moe-cache-mib", c->moe_cache_mib, "ignored: --vram-budget is given");
        else c->expert_cache_mib = v; /* mapped when the model is loaded: hmoe_cli_compat_vram_budget */
    }
    if (c->threads_batch) {
        if (!parse_i64(c->threads_batch, -1, INT_MAX, &v)) return bad("-tb/--threads-batch", c->threads_batch, "a thread count");
        note(o, "-tb", c->threads_batch, "ignored: the -t threads run both prompt and generation");
    }
    if (c->no_warmup) note(o, "--no-warmup", NULL, "ignored: there is no warm-up run (--no-preload skips reading the weights in)");
    if (o->n_batch != INT_MIN && strcmp(cmd, "bench") != 0) {
        char b[32];
        snprintf(b, sizeof b, "%d", o->n_batch);
        if (o->n_batch < 1) return bad("-b/--batch-size", b, "a number of tokens >= 1");
        note(o, "-b", b, "accepted: prompts go through in -ub micro-batches (%d tokens); -b sets no limit of its own",
             o->n_ubatch);
    }
    return 0;
}

/* Bytes of the model's tensors that the GPU holds besides the cached experts: everything but the
 * token embedding (looked up on the host) and the expert tensors of the layers kept in RAM. */
static uint64_t non_cache_bytes(const struct hmoe_cli_model_opts *o, const struct hmoe_model *model, uint64_t *experts) {
    const struct hmoe_gguf *g = model->gguf;
    uint64_t sum = 0;
    *experts = 0;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const struct hmoe_gguf_tensor *t = &g->tensors[i];
        if (strcmp(t->name, "token_embd.weight") == 0) continue;
        if (strstr(t->name, "_exps")) {
            int layer = -1;
            if (strncmp(t->name, "blk.", 4) == 0) layer = atoi(t->name + 4);
            bool in_ram = o->cpu_moe || (layer >= 0 && layer < o->n_cpu_moe);
            if (in_ram) continue;
            *experts += t->n_bytes;
        }
        sum += t->n_bytes;
    }
    return sum;
}

int64_t hmoe_cli_compat_vram_budget(const struct hmoe_cli_model_opts *o, const struct hmoe_model *model) {
    if (o->vram_budget_mib > 0 || o->compat.expert_cache_mib < 0) return o->vram_budget_mib;
    const int64_t MiB = 1 << 20, buffers_mib = 512;
    /* the CUDA context, cuBLAS and the kernel code loaded on first use (gpu_init.c plans them inside
     * the budget: about 0.9 GiB on the H200) */
    const int64_t runtime_mib = 1024;
    uint64_t resident_experts = 0;
    const uint64_t weights = non_cache_bytes(o, model, &resident_experts);
    const struct hmoe_model_config *cfg = &model->cfg;
    enum hmoe_type tk = HMOE_TYPE_F16, tv = HMOE_TYPE_F16;
    hmoe_kv_type_from_name(o->cache_type_k, &tk);
    hmoe_kv_type_from_name(o->cache_type_v, &tv);
    /* Every layer counted as attention: an upper bound for models with recurrent layers. */
    const int64_t per_token = (int64_t)cfg->n_head_kv * cfg->head_dim;
    const uint64_t kv = (uint64_t)cfg->n_layer * (hmoe_row_bytes(tk, per_token) + hmoe_row_bytes(tv, per_token)) *
                        (uint64_t)(o->n_ctx > 0 ? o->n_ctx : 4096);
    const int64_t weights_mib = (int64_t)((weights + MiB - 1) / MiB), kv_mib = (int64_t)((kv + MiB - 1) / MiB);
    const int64_t budget = o->compat.expert_cache_mib + weights_mib + kv_mib + buffers_mib + runtime_mib;
    const bool no_gpu = (o->gpu && strcmp(o->gpu, "off") == 0) || !hmoe_cuda_available();
    static int64_t last_printed = -1; /* bench opens one context per test: say it once per value */
    if (budget != last_printed) {
        char how[256];
        snprintf(how, sizeof how,
                 "--vram-budget %lld (%lld MiB of expert cache + %lld MiB of weights kept on the GPU%s + %lld MiB of "
                 "KV cache + %lld MiB of buffers + %lld MiB for the CUDA context and code)",
                 (long long)budget, (long long)o->compat.expert_cache_mib, (long long)weights_mib,
                 resident_experts ? ", resident experts included" : "", (long long)kv_mib, (long long)buffers_mib,
                 (long long)runtime_mib);
        if (no_gpu) note(o, "--moe-cache-mib", o->compat.moe_cache_mib, "ignored: no GPU in use (with one: %s)", how);
        else note(o, "--moe-cache-mib", o->compat.moe_cache_mib, "mapped to %s", how);
        last_printed = budget;
    }
    return no_gpu ? 0 : budget;
}
