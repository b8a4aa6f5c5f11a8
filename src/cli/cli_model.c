/* cli_model.c — what `logits`, `run`, `chat` and `bench` share: turning the llama.cpp-style
 * context flags (-c, -t, -ctk, -ctv, -ub, --rope-*) into model and context parameters,
 * loading both with one message per failure, checking the plan against the memory this
 * machine has (cli_sys.c), reading the weights in with a progress bar, and parsing
 * token-id lists.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "hmoe/progress.h"
#include "hmoe/sched.h"
#include "hmoe/sysmem.h"

/* A --rope-* value: a finite number above `min` (or at least min when min_inclusive). NULL
 * (flag not given) leaves *out alone. Prints the usage error naming the flag. */
static bool parse_rope_value(const char *flag, const char *text, double min, bool min_inclusive, const char *range,
                             double *out) {
    if (!text) return true;
    char *end = NULL;
    errno = 0;
    const double v = strtod(text, &end);
    if (errno || end == text || *end || !isfinite(v) || (min_inclusive ? v < min : v <= min)) {
        fprintf(stderr, "hmoe: invalid %s '%s': must be a number %s\n", flag, text, range);
        return false;
    }
    *out = v;
    return true;
}

/* Every -ot rule parsed up front, whichever backend runs, so that a bad rule is the same
 * usage error with or without a GPU (the GPU backend parses them again to apply them). */
static bool check_override_rules(const struct hmoe_opt_strs *ot) {
    for (int i = 0; i < ot->n; i++) {
        struct hmoe_sched_override rule;
        struct hmoe_err err = {0};
        if (hmoe_sched_override_parse(ot->v[i], &rule, &err)) {
            fprintf(stderr, "hmoe: invalid -ot/--override-tensor '%s': %s\n", ot->v[i], err.msg);
            return false;
        }
        hmoe_sched_override_free(&rule);
    }
    return true;
}

void hmoe_cli_model_opts_default(struct hmoe_cli_model_opts *o) {
    memset(o, 0, sizeof *o);
    o->n_ctx = 4096;
    o->n_seq = 1;
    o->n_ubatch = 512;
    o->cache_type_k = "f16";
    o->cache_type_v = "f16";
    o->gpu = "auto";
    o->cache_fills = -1;
    o->n_batch = INT_MIN; /* not given (-b is checked and noted by hmoe_cli_compat_apply) */
    o->compat.n_parallel = 1;
    o->compat.reasoning_mode = -1;
    o->compat.expert_cache_mib = -1;
}

/* --no-mmap and --mlock make the weights memory the kernel cannot take back (an anonymous copy,
 * locked pages): checked against the memory available before a byte is read, so that the load
 * is refused with the numbers instead of swapping or meeting the OOM killer half-way. */
static bool weights_fit_locked(const struct hmoe_cli_model_opts *o) {
    if (!o->no_mmap && !o->mlock) return true;
    struct stat st;
    const uint64_t avail = hmoe_cli_mem_available_bytes();
    if (avail == 0 || stat(o->model_path, &st) != 0 || !S_ISREG(st.st_mode)) return true; /* unknown; open says */
    const uint64_t need = hmoe_gguf_split_total_bytes(o->model_path, (uint64_t)st.st_size);
    if (need <= avail) return true;
    char need_s[32], avail_s[32];
    hmoe_cli_fmt_bytes(need_s, sizeof need_s, need);
    hmoe_cli_fmt_bytes(avail_s, sizeof avail_s, avail);
    const char *flag = o->no_mmap && o->mlock ? "--no-mmap --mlock" : o->no_mmap ? "--no-mmap" : "--mlock";
    fprintf(stderr,
            "hmoe: error: not enough memory: %s keeps the whole model (%s) in RAM but only %s is available; drop "
            "%s (the mapped file is then paged in and out as needed), free memory, or set HMOE_MEM_AVAILABLE_MIB "
            "if that count is wrong\n",
            flag, need_s, avail_s, flag);
    return false;
}

int hmoe_cli_model_load(const struct hmoe_cli_model_opts *o, struct hmoe_model **model) {
    *model = NULL;
    struct hmoe_err err = {0};
    if (!o->model_path) {
        fprintf(stderr, "hmoe: -m/--model FILE is required\n");
        return HMOE_EXIT_USAGE;
    }
    struct hmoe_model_params mp = {0};
    if (o->rope_scaling) {
        mp.has_rope_scaling = true;
        if (strcmp(o->rope_scaling, "none") == 0) mp.rope_scaling = HMOE_ROPE_SCALING_NONE;
        else if (strcmp(o->rope_scaling, "linear") == 0) mp.rope_scaling = HMOE_ROPE_SCALING_LINEAR;
        else if (strcmp(o->rope_scaling, "yarn") == 0) mp.rope_scaling = HMOE_ROPE_SCALING_YARN;
        else {
            fprintf(stderr, "hmoe: unknown --rope-scaling '%s' (use none, linear or yarn)\n", o->rope_scaling);
            return HMOE_EXIT_USAGE;
        }
    }
    double scale = 0, base = 0, orig = 0;
    if (!parse_rope_value("--rope-scale", o->rope_scale, 0, false, "above 0", &scale) ||
        !parse_rope_value("--rope-freq-base", o->rope_freq_base, 1, false, "above 1", &base) ||
        !parse_rope_value("--yarn-orig-ctx", o->yarn_orig_ctx, 1, true, "from 1 to 2147483647", &orig))
        return HMOE_EXIT_USAGE;
    if (orig != floor(orig) || orig > 2147483647.0) {
        fprintf(stderr, "hmoe: invalid --yarn-orig-ctx '%s': must be a whole number from 1 to 2147483647\n",
                o->yarn_orig_ctx);
        return HMOE_EXIT_USAGE;
    }
    if (!check_override_rules(&o->ot)) return HMOE_EXIT_USAGE;
    mp.rope_scale = (float)scale;
    mp.yarn_orig_ctx = (int)orig;
    mp.rope_freq_base = (float)base;
    mp.no_mmap = o->no_mmap;
    mp.mlock = o->mlock;
    if (!weights_fit_locked(o)) return HMOE_EXIT_ERROR;
    if (hmoe_model_load(o->model_path, &mp, model, &err)) return hmoe_cli_fail(&err);
    /* As in llama.cpp, a model without RoPE scaling ignores the factor; say so instead of silently. */
    if (o->rope_scale && (*model)->cfg.rope_scaling == HMOE_ROPE_SCALING_NONE && scale != 1.0)
        fprintf(stderr, "hmoe: warning: --rope-scale %s has no effect: this model has no RoPE scaling; add "
                        "--rope-scaling linear or --rope-scaling yarn to use it\n", o->rope_scale);
    return HMOE_EXIT_OK;
}

/* What the plan keeps in RAM against what the kernel can hand out. Memory the kernel cannot take
 * back (the CPU backend's KV cache and recurrent state, a --no-mmap copy or --mlock'ed weights)
 * beyond the limit is an error: the OOM killer or swap would end the run later. Mapped weights
 * can be evicted and re-read, so weights + KV beyond the limit only warn (very slow, but it runs).
 * On a GPU backend the KV cache lives in VRAM (the VRAM budget covers it). */
bool hmoe_cli_check_memory(const struct hmoe_model *m, const struct hmoe_ctx *c, int *rc) {
    *rc = HMOE_EXIT_OK;
    const uint64_t avail = hmoe_cli_mem_available_bytes();
    if (avail == 0) return true; /* unknown: no check */
    const bool kv_in_ram = !strcmp(hmoe_ctx_backend(c), "cpu");
    const uint64_t kv = kv_in_ram ? hmoe_ctx_kv_bytes(c) + hmoe_ctx_state_bytes(c) : 0,
                   weights = m->gguf->file_size;
    const bool weights_fixed = m->gguf->in_ram || m->gguf->locked;
    const struct hmoe_ctx_params *p = hmoe_ctx_get_params(c);
    char kv_s[32], avail_s[32], w_s[32], sum_s[32];
    hmoe_cli_fmt_bytes(kv_s, sizeof kv_s, kv);
    hmoe_cli_fmt_bytes(avail_s, sizeof avail_s, avail);
    hmoe_cli_fmt_bytes(w_s, sizeof w_s, weights);
    hmoe_cli_fmt_bytes(sum_s, sizeof sum_s, kv + weights);
    /* a --no-mmap copy or a lock is already in place and counted out of MemAvailable */
    if (kv > avail) {
        fprintf(stderr,
                "hmoe: error: not enough memory: the KV cache for -c %d (%s K, %s V) needs %s but only %s is "
                "available%s; lower -c/--ctx-size or use -ctk q8_0 -ctv q8_0\n",
                p->n_ctx, hmoe_type_name(p->type_k), hmoe_type_name(p->type_v), kv_s, avail_s,
                weights_fixed ? " beside the weights held in RAM" : "");
        *rc = HMOE_EXIT_ERROR;
        return false;
    }
    if (!weights_fixed && weights + kv > avail) {
        fprintf(stderr,
                "hmoe: warning: the model (%s) plus the KV cache (%s for -c %d) need more than the %s of memory "
                "available: weights will be read from disk again and again (very slow). Free memory, lower "
                "-c/--ctx-size, or use a smaller quantization\n",
                w_s, kv_s, p->n_ctx, avail_s);
        return false;
    }
    return true;
}

void hmoe_cli_mem_report(const struct hmoe_ctx *c) {
    if (hmoe_log_level < HMOE_LOG_INFO) return;
    struct hmoe_ctx_stats cs = {0};
    if (c) hmoe_ctx_get_stats(c, &cs);
    const uint64_t locked = hmoe_sysmem_locked();
    fprintf(stderr, "memory: peak RSS %.0f MiB, page-locked %.0f MiB (device %.0f MiB, mlock %.0f MiB)",
            (double)hmoe_sysmem_rss_peak() / 1048576.0, (double)(cs.pinned_bytes + locked) / 1048576.0,
            (double)cs.pinned_bytes / 1048576.0, (double)locked / 1048576.0);
    if (cs.vram_budget_bytes)
        fprintf(stderr, ", VRAM peak %.0f MiB of a %.0f MiB budget (the process as nvidia-smi counts it; %.0f MiB of "
                "it hmoe's buffers)", (double)cs.vram_device_peak_bytes / 1048576.0,
                (double)cs.vram_budget_bytes / 1048576.0, (double)cs.vram_peak_bytes / 1048576.0);
    fputc('\n', stderr);
}

static volatile uint8_t preload_sink; /* keeps the page-touching loop */

void hmoe_cli_model_preload(const struct hmoe_model *model, bool show_progress) {
    const struct hmoe_gguf *g = model->gguf;
    if (!g->is_mapped || g->file_size == 0) return;
    const size_t page = 4096, chunk = (size_t)64 << 20;
    struct hmoe_progress bar;
    hmoe_progress_init(&bar, "loading", g->file_size, show_progress);
    uint8_t acc = 0;
    for (uint64_t off = 0; off < g->file_size; off += chunk) {
        const size_t len = (size_t)HMOE_MIN((uint64_t)chunk, g->file_size - off);
        /* No MADV_WILLNEED ahead: its read-ahead fills the page cache in small folios, while
         * the faults of this loop in the MADV_HUGEPAGE mapping (gguf_open.c) read the file in
         * 2 MiB folios that decode then reads through one TLB entry each (2.6 GB model from
         * an evicted cache: 100 % of it in 2 MiB folios instead of 88 %, same load time;
         * measured on the 2-core machine). The kernel still reads ahead of the faults. */
        for (size_t i = 0; i < len; i += page) acc ^= g->base[off + i];
        hmoe_progress_update(&bar, off + len);
    }
    preload_sink = acc;
    hmoe_progress_finish(&bar, g->file_size);
}

int hmoe_cli_ctx_open(const struct hmoe_cli_model_opts *o, const struct hmoe_model *model, struct hmoe_ctx **ctx) {
    *ctx = NULL;
    struct hmoe_err err = {0};
    struct hmoe_ctx_params cp;
    hmoe_ctx_params_default(&cp);
    if (!hmoe_kv_type_from_name(o->cache_type_k, &cp.type_k) || !hmoe_kv_type_from_name(o->cache_type_v, &cp.type_v)) {
        fprintf(stderr, "hmoe: unknown KV cache type '%s' (use " HMOE_KV_TYPE_NAMES " with -ctk/-ctv)\n",
                hmoe_kv_type_from_name(o->cache_type_k, &cp.type_k) ? o->cache_type_v : o->cache_type_k);
        return HMOE_EXIT_USAGE;
    }
    if (o->n_ctx < 0 || o->n_threads < 0 || o->n_ubatch < 0) {
        fprintf(stderr, "hmoe: -c, -t and -ub must not be negative\n");
        return HMOE_EXIT_USAGE;
    }
    cp.n_ctx = o->n_ctx;
    cp.n_seq = o->n_seq > 0 ? o->n_seq : 1;
    cp.n_threads = o->n_threads;
    /* More threads than CPUs only adds contention (and one OpenMP stack each): warn and cap. */
    const long n_cpu = sysconf(_SC_NPROCESSORS_ONLN);
    if (n_cpu > 0 && o->n_threads > n_cpu) {
        fprintf(stderr, "hmoe: warning: -t %d is more than the %ld CPUs of this machine; using %ld threads\n",
                o->n_threads, n_cpu, n_cpu);
        cp.n_threads = (int)n_cpu;
    }
    cp.n_ubatch = o->n_ubatch;
    if (o->gpu && !hmoe_gpu_mode_from_name(o->gpu, &cp.gpu)) {
        fprintf(stderr, "hmoe: unknown --gpu '%s' (use auto, on or off)\n", o->gpu);
        return HMOE_EXIT_USAGE;
    }
    if (o->moe_miss && !hmoe_moe_miss_from_name(o->moe_miss, &cp.sched.moe_miss)) {
        fprintf(stderr, "hmoe: unknown --moe-miss '%s' (use cpu, transfer or auto)\n", o->moe_miss);
        return HMOE_EXIT_USAGE;
    }
    if (o->prefetch && strcmp(o->prefetch, "on") && strcmp(o->prefetch, "off")) {
        fprintf(stderr, "hmoe: unknown --prefetch '%s' (use on or off)\n", o->prefetch);
        return HMOE_EXIT_USAGE;
    }
    cp.sched.prefetch = o->prefetch && !strcmp(o->prefetch, "on");
    if (o->cache_policy && strcmp(o->cache_policy, "lfu") && strcmp(o->cache_policy, "lru")) {
        fprintf(stderr, "hmoe: unknown --cache-policy '%s' (use lfu or lru)\n", o->cache_policy);
        return HMOE_EXIT_USAGE;
    }
    if (o->vram_budget_mib < 0 || o->n_cpu_moe < 0 || o->stream_min < 0 || o->cache_fills < -1) {
        fprintf(stderr, "hmoe: --vram-budget, --n-cpu-moe, --stream-min and --cache-fills must not be negative\n");
        return HMOE_EXIT_USAGE;
    }
    if (o->cache_policy && !strcmp(o->cache_policy, "lru")) cp.sched.cache_policy = HMOE_CACHE_LRU;
    cp.sched.vram_budget_mib = hmoe_cli_compat_vram_budget(o, model); /* --vram-budget or --moe-cache-mib */
    cp.sched.cpu_moe = o->cpu_moe;
    cp.sched.n_cpu_moe = o->n_cpu_moe;
    cp.sched.override_tensor = o->ot.v;
    cp.sched.n_override_tensor = o->ot.n;
    cp.sched.cache_fills_per_token = o->cache_fills;
    cp.sched.no_profile = o->no_profile;
    cp.sched.stream_min_tokens = o->stream_min;
    cp.verbose = hmoe_log_level >= HMOE_LOG_INFO;
    if (hmoe_ctx_init(model, &cp, ctx, &err)) return hmoe_cli_fail(&err);
    hmoe_cli_ctx_report(*ctx);
    return HMOE_EXIT_OK;
}

void hmoe_cli_ctx_report(struct hmoe_ctx *ctx) {
    if (!ctx || hmoe_log_level < HMOE_LOG_INFO) return;
    const char *r = hmoe_ctx_report(ctx);
    if (*r) fputs(r, stderr);
    hmoe_cli_mem_report(ctx);
}

int hmoe_cli_model_open(const struct hmoe_cli_model_opts *o, struct hmoe_model **model, struct hmoe_ctx **ctx) {
    *ctx = NULL;
    int rc = hmoe_cli_model_load(o, model);
    if (rc) return rc;
    rc = hmoe_cli_ctx_open(o, *model, ctx);
    bool fits = false;
    if (!rc) fits = hmoe_cli_check_memory(*model, *ctx, &rc);
    if (rc) {
        hmoe_ctx_free(*ctx);
        hmoe_model_free(*model);
        *ctx = NULL;
        *model = NULL;
        return rc;
    }
    if (fits && !o->no_preload) hmoe_cli_model_preload(*model, !o->quiet && hmoe_progress_stderr_is_tty());
    return HMOE_EXIT_OK;
}

int hmoe_cli_parse_ids(const char *text, int32_t **ids, int *n) {
    *ids = NULL;
    *n = 0;
    size_t cap = 16, cnt = 0;
    int32_t *v = malloc(cap * sizeof *v);
    if (!v) return HMOE_EXIT_ERROR;
    const char *p = text;
    for (;;) {
        while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r' || *p == ',' || *p == '[' || *p == ']') p++;
        if (!*p) break;
        char *end;
        errno = 0;
        long x = strtol(p, &end, 10);
        if (end == p || errno || x < 0 || x > INT32_MAX) {
            fprintf(stderr, "hmoe: bad token id at '%.20s' (expected non-negative integers separated by commas)\n", p);
            free(v);
            return HMOE_EXIT_USAGE;
        }
        if (cnt == cap) {
            int32_t *nv = realloc(v, (cap *= 2) * sizeof *v);
            if (!nv) {
                free(v);
                return HMOE_EXIT_ERROR;
            }
            v = nv;
        }
        v[cnt++] = (int32_t)x;
        p = end;
    }
    if (cnt == 0 || cnt > INT32_MAX / 2) {
        fprintf(stderr, "hmoe: no token ids given\n");
        free(v);
        return HMOE_EXIT_USAGE;
    }
    *ids = v;
    *n = (int)cnt;
    return HMOE_EXIT_OK;
}
