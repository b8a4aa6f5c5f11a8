/* cmd_bench.c — `hmoe bench`: tokens per second with llama-bench's conventions. Every
 * combination of -t, -ub and -d runs a prompt test per -p value (a fresh prefill of N random
 * tokens at depth d, logits of the last) and a generation test per -n value (N single-token
 * decodes after a depth-d prefill, which is not timed), each -r times after one uncounted
 * warm-up; results are mean ± stddev of the per-run tokens/s. Beyond llama-bench: a RAM
 * read-bandwidth probe (and pinned host->device when there is a GPU) gives the roofline
 * generation is compared against. Without -m it benchmarks a synthetic model (bench_synth.c).
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_impl.h"
#include "hmoe/sysmem.h"
#include "hmoe/cpu.h"
#include "hmoe/progress.h"
#include "info_impl.h"

/* The temporary synthetic model (up to GBs), removed on Ctrl+C, kill and a closed terminal as
 * well (unlink is async-signal-safe). */
static char tmp_model[4096];
static const int cleanup_signals[] = {SIGINT, SIGTERM, SIGHUP};
static void on_signal(int sig) {
    if (tmp_model[0]) unlink(tmp_model);
    _exit(128 + sig);
}

static const char *usage = "hmoe bench [-m FILE] [-p N,..] [-n N,..] [-d N,..] [-t N,..] [-ub N,..] [-r N] "
                           "[-o md|json|jsonl|csv] [--synthetic PRESET [--synthetic-layers N]] "
                           "[-npl N,.. [-npp N,..] [-ntg N,..]] [options]";

static const char *bench_help =
    "\nWithout -m, a synthetic Qwen3-MoE model (random weights, real layout and Q4_K_M mix) is written to a\n"
    "temporary file in $TMPDIR (default /tmp), measured and deleted: --synthetic tiny (the default; -p 128 -n 32\n"
    "-r 3 unless given) or qwen3-30b-a3b / qwen3-235b-a22b (the full shapes, cut to the layers that fit in free\n"
    "memory and disk; llama-bench's -p 512 -n 128 -r 5).\n"
    "\nColumns and fields (json/jsonl/csv use llama-bench's names: avg_ts, stddev_ts, samples_ts, n_prompt, ...):\n"
    "  t/s              mean ± sample standard deviation of the -r runs; the warm-up run before them (the\n"
    "                   whole prompt for pp, 16 tokens for tg) is not counted. tg excludes the depth prefill\n"
    "  ram_read_gbps    RAM read bandwidth measured at start with the test's thread count (1 GB/s = 1e9 B/s)\n"
    "  bytes_per_token  tg only: weights read per token (attention, router, the k routed experts, output head,\n"
    "                   one embedding row) plus the KV cache at the mean position, plus for models with\n"
    "                   recurrent state its bytes, read and written once per token\n"
    "  ram_gbps         tg only: bytes_per_token x t/s;  roofline_pct = ram_gbps / ram_read_gbps (above 100%\n"
    "                   when the weights fit in the CPU caches); pp is compute-bound: null / '-'. With a GPU,\n"
    "                   roofline_pct is cpu_roofline_pct in hybrid rows whose CPU computed experts, else\n"
    "                   gpu_roofline_pct\n"
    "  hbm_gbps         device-to-device copy rate of GPU 0, HBM read + write bytes (null without a GPU)\n"
    "  cpu_roofline_pct GPU tg: cpu_expert_gbps / ram_read_gbps (null when the CPU computed no expert)\n"
    "  gpu_roofline_pct GPU tg: (bytes_per_token - the CPU's missed-expert bytes) x t/s / hbm_gbps\n"
    "  h2d_gbps         pinned host->device bandwidth of GPU 0 (null without a GPU)\n"
    "  vram_budget_mib, vram_peak_mib, cache_hit_rate, pcie_gbps: GPU / hybrid expert-cache columns, null in\n"
    "                   json/jsonl, empty in csv and '-' in md while this build runs on the CPU only\n"
    "  cpu_expert_gbps  hybrid tg: missed-expert bytes / time of the CPU expert phase (json/csv only)\n"
    "  handoff_in_us, handoff_out_us: hybrid tg, per layer with CPU misses: GPU publish -> CPU sees it, CPU\n"
    "                   release -> GPU sees it (-v shows both and their clock-free sum)\n"
    "  rss_peak_mib     peak resident set of the process after the test (mapped weights count once read)\n"
    "  pinned_mib       host memory page-locked: the GPU's pinned expert ranges (or their copy) plus --mlock\n"
    "  vram_plan_mib, vram_context_mib, vram_reserve_mib, vram_kv_mib, vram_resident_mib, vram_cache_mib,\n"
    "  vram_cache_slots, vram_buffers_mib: the VRAM plan made at load (json/csv only; null on the CPU path)\n"
    "  vram_device_peak_mib: the process's measured peak on the device as nvidia-smi counts it (context included)\n"
    "\nWith -npl (or -np) B,..: llama-batched-bench's test instead, B sequences stepped together: PP prompt\n"
    "tokens each in one batched step, then TG steps of one token per sequence (-npp, default 128; -ntg,\n"
    "default 32; -ub sets the micro-batch, -t the threads). Columns (json/csv names in brackets): T_PP/S_PP\n"
    "(t_pp, speed_pp), T_TG/S_TG (t_tg, speed_tg: all sequences), S_TG/B (speed_tg_per_seq), T/S (t, speed),\n"
    "expert MiB/step (expert_mib_per_step: the experts read per decode step, each once for all rows),\n"
    "per-pair MiB (pair_mib_per_step: one read per (token, expert)), sharing (expert_sharing: their ratio),\n"
    "RAM GB/s and roofline (ram_gbps, roofline_pct: dense weights + distinct experts + KV per step x steps/s\n"
    "against ram_read_gbps). The sequences run on the backend --gpu picks (on the GPU: every layer's products on\n"
    "all rows, attention per sequence; architectures with recurrent state on the CPU).\n";

/* Comma lists from repeatable options ("-p 128,512 -p 1024") into a malloc'd int array. */
static int parse_list(const char *flag, const struct hmoe_opt_strs *s, int dflt, int min, int **out, int *n) {
    *out = NULL;
    *n = 0;
    int cap = 8, cnt = 0;
    int *v = malloc((size_t)cap * sizeof *v);
    if (!v) return HMOE_EXIT_ERROR;
    for (int i = 0; i < s->n; i++) {
        const char *p = s->v[i];
        for (;;) {
            char *end;
            errno = 0;
            long x = strtol(p, &end, 10);
            if (end == p || errno || x < min || x > INT_MAX / 4 || (*end && *end != ',')) {
                fprintf(stderr, "hmoe: bad value '%s' for %s (integers >= %d, comma-separated)\nusage: %s\n", s->v[i],
                        flag, min, usage);
                free(v);
                return HMOE_EXIT_USAGE;
            }
            if (cnt == cap) {
                int *nv = realloc(v, (size_t)(cap *= 2) * sizeof *v);
                if (!nv) {
                    free(v);
                    return HMOE_EXIT_ERROR;
                }
                v = nv;
            }
            v[cnt++] = (int)x;
            if (!*end) break;
            p = end + 1;
        }
    }
    if (cnt == 0) v[cnt++] = dflt;
    *out = v;
    *n = cnt;
    return HMOE_EXIT_OK;
}

static int list_max(const int *v, int n) {
    int m = 0;
    for (int i = 0; i < n; i++) m = HMOE_MAX(m, v[i]);
    return m;
}

/* "30.5B" / "9.6M": a parameter count for the model_type label. */
static void count_label(char *buf, size_t size, double n) {
    if (n >= 1e9) snprintf(buf, size, "%.1fB", n / 1e9);
    else if (n >= 1e6) snprintf(buf, size, "%.1fM", n / 1e6);
    else snprintf(buf, size, "%.0fK", n / 1e3);
}

/* What a result row says about the model: size, parameters, "<architecture> 30.5B.A3.3B Q4_K_M" as llama-bench. */
struct model_facts {
    uint64_t size_bytes, n_params;
    char type[128];
    double tg_weight_bytes; /* weights read per generated token (info_stats.c) */
};

static int model_facts(const struct hmoe_model *m, struct model_facts *mf) {
    struct hmoe_info_stats st;
    struct hmoe_err err = {0};
    if (hmoe_info_stats_init(&st, m->gguf, &err) != HMOE_OK) {
        hmoe_info_stats_free(&st);
        return hmoe_cli_fail(&err);
    }
    const struct hmoe_gguf *g = m->gguf;
    uint64_t params = 0, exp_params = 0, embd_params = 0;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        params += g->tensors[i].n_elements;
        if (strstr(g->tensors[i].name, "_exps")) exp_params += g->tensors[i].n_elements;
        if (strcmp(g->tensors[i].name, "token_embd.weight") == 0) embd_params = g->tensors[i].n_elements;
    }
    /* Active parameters: k of E experts, one embedding row (unless the embedding is also the output). */
    double active = (double)(params - exp_params) + (double)exp_params * m->cfg.n_expert_used / m->cfg.n_expert;
    if (!m->cfg.tied_output) active -= (double)embd_params - m->cfg.n_embd;
    char total_s[32], active_s[32];
    count_label(total_s, sizeof total_s, (double)params);
    count_label(active_s, sizeof active_s, active);
    uint32_t ftype = hmoe_gguf_get_u32_or(g, "general.file_type", UINT32_MAX);
    snprintf(mf->type, sizeof mf->type, "%s %s.A%s %s", m->cfg.arch, total_s, active_s,
             ftype == UINT32_MAX ? "?" : hmoe_info_ftype_name(ftype));
    mf->size_bytes = st.total_tensor_bytes;
    mf->n_params = params;
    mf->tg_weight_bytes = st.active_bytes_per_token >= 0 ? (double)st.active_bytes_per_token : HMOE_BENCH_NA;
    hmoe_info_stats_free(&st);
    return HMOE_EXIT_OK;
}

struct bench_run {
    struct hmoe_ctx *ctx;
    int n_vocab, reps;
    bool warmup;
    float *logits;
    int32_t *ids;      /* random tokens: depth prefill, then the test's */
    uint64_t rng;
    int depth_ready;   /* the KV cache holds this many depth tokens, -1 = none */
};

static int32_t random_token(struct bench_run *b) {
    b->rng ^= b->rng >> 12;
    b->rng ^= b->rng << 25;
    b->rng ^= b->rng >> 27;
    return (int32_t)((b->rng * 0x2545f4914f6cdd1dull >> 33) % (uint64_t)b->n_vocab);
}

static uint64_t now_ns(void) { return (uint64_t)(hmoe_time_s() * 1e9); }

/* Fill the KV cache with `depth` random tokens once per depth; tests rewind to it. */
static int ensure_depth(struct bench_run *b, int depth) {
    if (b->depth_ready == depth) return HMOE_EXIT_OK;
    struct hmoe_err err = {0};
    hmoe_ctx_reset(b->ctx);
    b->depth_ready = -1;
    if (depth > 0) {
        for (int i = 0; i < depth; i++) b->ids[i] = random_token(b);
        if (hmoe_ctx_decode(b->ctx, b->ids, depth, 0, HMOE_LOGITS_NONE, NULL, &err)) return hmoe_cli_fail(&err);
        hmoe_ctx_checkpoint(b->ctx); /* models with recurrent state: each test rewinds to here */
    }
    b->depth_ready = depth;
    return HMOE_EXIT_OK;
}

/* One test: n_prompt tokens as one prefill, or n_gen single-token decodes, at `depth`.
 * samples_ns gets b->reps timings. */
static int run_test(struct bench_run *b, int depth, int n_prompt, int n_gen, uint64_t *samples_ns) {
    int rc = ensure_depth(b, depth);
    if (rc) return rc;
    struct hmoe_err err = {0};
    int32_t *toks = b->ids + depth;
    const int n = n_prompt > 0 ? n_prompt : n_gen;
    for (int i = 0; i < n; i++) toks[i] = random_token(b);
    for (int rep = b->warmup ? -1 : 0; rep < b->reps; rep++) {
        hmoe_ctx_truncate(b->ctx, depth);
        /* The warm-up of a generation test is short: it only has to wake threads and caches. */
        const int steps = n_gen > 0 && rep < 0 ? HMOE_MIN(n_gen, 16) : n_gen;
        const uint64_t t0 = now_ns();
        if (n_prompt > 0) {
            if (hmoe_ctx_decode(b->ctx, toks, n_prompt, depth, HMOE_LOGITS_LAST, b->logits, &err))
                return hmoe_cli_fail(&err);
        } else
            for (int i = 0; i < steps; i++)
                if (hmoe_ctx_decode(b->ctx, toks + i, 1, depth + i, HMOE_LOGITS_LAST, b->logits, &err))
                    return hmoe_cli_fail(&err);
        const uint64_t t1 = now_ns();
        if (rep >= 0) samples_ns[rep] = t1 - t0;
    }
    return HMOE_EXIT_OK;
}

static void fill_stats(struct hmoe_bench_result *r, const uint64_t *ns, double *ts, int n, int n_tokens) {
    double sum_ns = 0, sum_ts = 0;
    for (int i = 0; i < n; i++) {
        ts[i] = ns[i] ? n_tokens / (ns[i] * 1e-9) : 0;
        sum_ns += (double)ns[i];
        sum_ts += ts[i];
    }
    r->avg_ns = sum_ns / n;
    r->avg_ts = sum_ts / n;
    double v_ns = 0, v_ts = 0;
    for (int i = 0; i < n; i++) {
        v_ns += ((double)ns[i] - r->avg_ns) * ((double)ns[i] - r->avg_ns);
        v_ts += (ts[i] - r->avg_ts) * (ts[i] - r->avg_ts);
    }
    r->stddev_ns = n > 1 ? sqrt(v_ns / (n - 1)) : 0;
    r->stddev_ts = n > 1 ? sqrt(v_ts / (n - 1)) : 0;
    r->n_samples = n;
    r->samples_ns = ns;
    r->samples_ts = ts;
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(r->test_time, sizeof r->test_time, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

struct bench_cfg {
    int *p, np, *n, nn, *d, nd, *t, nt, *ub, nub;
    int reps, n_batch;
    bool warmup, quiet;
    const char *type_k, *type_v;
    char cpu[128], gpu[256];
    double h2d_gbps, hbm_gbps;
    const struct hmoe_cli_model_opts *gpu_opts; /* --gpu, --vram-budget, ... */
    double *ram_gbps; /* [nt] probe per thread count, 0 = not yet */
};

/* Every test of one model. */
static int bench_model(struct bench_cfg *cfg, const char *path, struct hmoe_bench_printer *pr) {
    struct hmoe_cli_model_opts mo;
    hmoe_cli_model_opts_default(&mo);
    if (cfg->gpu_opts) mo = *cfg->gpu_opts; /* the GPU / placement flags; the rest is set below */
    mo.model_path = path;
    mo.cache_type_k = cfg->type_k;
    mo.cache_type_v = cfg->type_v;
    struct hmoe_model *model = NULL;
    int rc = hmoe_cli_model_load(&mo, &model);
    if (rc) return rc;
    struct model_facts mf;
    if ((rc = model_facts(model, &mf))) {
        hmoe_model_free(model);
        return rc;
    }
    const int max_n = HMOE_MAX(list_max(cfg->p, cfg->np), list_max(cfg->n, cfg->nn));
    mo.n_ctx = HMOE_MAX(list_max(cfg->d, cfg->nd) + max_n, 1);
    /* depth + tokens past the model's context_length: the context keeps them with a warning (ctx.c), as llama-bench */
    struct bench_run b = {.n_vocab = model->cfg.n_vocab, .reps = cfg->reps, .warmup = cfg->warmup,
                          .rng = 0x9e3779b97f4a7c15ull};
    b.logits = malloc((size_t)model->cfg.n_vocab * sizeof *b.logits);
    b.ids = malloc((size_t)mo.n_ctx * sizeof *b.ids);
    uint64_t *ns = malloc((size_t)cfg->reps * sizeof *ns);
    double *ts = malloc((size_t)cfg->reps * sizeof *ts);
    if (!b.logits || !b.ids || !ns || !ts) {
        fprintf(stderr, "hmoe: out of memory\n");
        rc = HMOE_EXIT_ERROR;
    }
    bool preloaded = false;
    for (int it = 0; !rc && it < cfg->nt; it++)
        for (int iu = 0; !rc && iu < cfg->nub; iu++) {
            mo.n_threads = cfg->t[it];
            mo.n_ubatch = cfg->ub[iu];
            if ((rc = hmoe_cli_ctx_open(&mo, model, &b.ctx))) break;
            bool fits = hmoe_cli_check_memory(model, b.ctx, &rc);
            if (!rc && fits && !preloaded) {
                hmoe_cli_model_preload(model, !cfg->quiet && hmoe_progress_stderr_is_tty());
                preloaded = true;
            }
            const int threads = hmoe_ctx_get_params(b.ctx)->n_threads;
            if (!rc && cfg->ram_gbps[it] == 0) {
                uint64_t buf = 0;
                cfg->ram_gbps[it] = hmoe_bench_probe_ram_gbps(threads, &buf);
                if (!cfg->quiet)
                    fprintf(stderr, "bench: RAM read %.1f GB/s with %d thread%s (%.0f MiB buffer); CPU kernels %s, %s%s\n",
                            cfg->ram_gbps[it], threads, threads > 1 ? "s" : "", (double)buf / 1048576.0,
                            hmoe_cpu_path_name(hmoe_cpu_path()), hmoe_cpu_amx_status(),
                            cfg->h2d_gbps >= 0 ? "" : "; no GPU: GPU columns are '-'");
            }
            /* KV bytes read per position, for the tg bandwidth. */
            const double kv_per_pos = (double)hmoe_ctx_kv_bytes(b.ctx) / hmoe_ctx_n_ctx(b.ctx);
            const double state_rw = 2.0 * (double)hmoe_ctx_state_bytes(b.ctx); /* recurrent state, per token */
            b.depth_ready = -1;
            for (int id = 0; !rc && id < cfg->nd; id++)
                for (int pass = 0; !rc && pass < 2; pass++) { /* pp tests, then tg tests */
                    const int *vals = pass ? cfg->n : cfg->p, nv = pass ? cfg->nn : cfg->np;
                    for (int iv = 0; !rc && iv < nv; iv++) {
                        if (vals[iv] <= 0) continue;
                        const int depth = cfg->d[id], n_prompt = pass ? 0 : vals[iv], n_gen = pass ? vals[iv] : 0;
                        if ((rc = run_test(&b, depth, n_prompt, n_gen, ns))) break;
                        struct hmoe_bench_result r = {
                            .build_commit = hmoe_cli_build_commit(), .build_number = hmoe_cli_build_number(),
                            .cpu_info = cfg->cpu, .gpu_info = cfg->gpu, .backends = "CPU", .model_filename = path,
                            .model_size = mf.size_bytes, .model_n_params = mf.n_params, .n_batch = cfg->n_batch,
                            .n_ubatch = cfg->ub[iu], .n_threads = threads,
                            .type_k = cfg->type_k, .type_v = cfg->type_v, .n_gpu_layers = 0, .n_prompt = n_prompt,
                            .n_gen = n_gen, .n_depth = depth, .ram_read_gbps = cfg->ram_gbps[it],
                            .h2d_gbps = cfg->h2d_gbps, .bytes_per_token = HMOE_BENCH_NA, .ram_gbps = HMOE_BENCH_NA,
                            .roofline_pct = HMOE_BENCH_NA, .vram_budget_mib = HMOE_BENCH_NA,
                            .vram_peak_mib = HMOE_BENCH_NA, .cache_hit_rate = HMOE_BENCH_NA,
                            .pcie_gbps = HMOE_BENCH_NA, .cpu_expert_gbps = HMOE_BENCH_NA,
                            .handoff_in_us = HMOE_BENCH_NA, .handoff_out_us = HMOE_BENCH_NA,
                            .vram_plan_mib = HMOE_BENCH_NA, .vram_context_mib = HMOE_BENCH_NA,
                            .vram_reserve_mib = HMOE_BENCH_NA, .vram_kv_mib = HMOE_BENCH_NA,
                            .vram_resident_mib = HMOE_BENCH_NA, .vram_cache_mib = HMOE_BENCH_NA,
                            .vram_cache_slots = HMOE_BENCH_NA, .vram_buffers_mib = HMOE_BENCH_NA,
                            .vram_device_peak_mib = HMOE_BENCH_NA,
                            .hbm_gbps = HMOE_BENCH_NA, .cpu_roofline_pct = HMOE_BENCH_NA,
                            .gpu_roofline_pct = HMOE_BENCH_NA};
                        snprintf(r.model_type, sizeof r.model_type, "%s", mf.type);
                        struct hmoe_ctx_stats cs;
                        hmoe_ctx_get_stats(b.ctx, &cs);
                        if (cs.vram_budget_bytes) {
                            r.backends = strcmp(hmoe_ctx_backend(b.ctx), "cuda") ? "CUDA+CPU" : "CUDA";
                            r.n_gpu_layers = model->cfg.n_layer + 1;
                            r.vram_budget_mib = (double)cs.vram_budget_bytes / 1048576.0;
                            r.vram_peak_mib = (double)cs.vram_peak_bytes / 1048576.0;
                            r.vram_plan_mib = (double)cs.vram_plan_bytes / 1048576.0;
                            r.vram_context_mib = (double)cs.vram_context_bytes / 1048576.0;
                            r.vram_reserve_mib = (double)cs.vram_reserve_bytes / 1048576.0;
                            r.vram_kv_mib = (double)cs.vram_kv_bytes / 1048576.0;
                            r.vram_resident_mib = (double)cs.vram_resident_bytes / 1048576.0;
                            r.vram_cache_mib = (double)cs.vram_cache_bytes / 1048576.0;
                            r.vram_cache_slots = cs.vram_cache_slots;
                            r.vram_buffers_mib = (double)cs.vram_buffers_bytes / 1048576.0;
                            r.vram_device_peak_mib = (double)cs.vram_device_peak_bytes / 1048576.0;
                            r.cache_hit_rate = cs.cache_hit_rate;
                            r.pcie_gbps = cs.pcie_gbps;
                            if (n_gen > 0 && cs.cpu_expert_gbps > 0) {
                                r.cpu_expert_gbps = cs.cpu_expert_gbps;
                                r.handoff_in_us = cs.handoff_in_us;
                                r.handoff_out_us = cs.handoff_out_us;
                            }
                        }
                        r.rss_peak_mib = (double)hmoe_sysmem_rss_peak() / 1048576.0;
                        r.pinned_mib = (double)(cs.pinned_bytes + hmoe_sysmem_locked()) / 1048576.0;
                        fill_stats(&r, ns, ts, cfg->reps, n_prompt + n_gen);
                        if (n_gen > 0 && mf.tg_weight_bytes >= 0) {
                            r.bytes_per_token =
                                mf.tg_weight_bytes + kv_per_pos * (depth + (n_gen - 1) / 2.0) + state_rw;
                            r.ram_gbps = r.bytes_per_token * r.avg_ts / 1e9;
                            if (r.ram_read_gbps > 0) r.roofline_pct = r.ram_gbps / r.ram_read_gbps * 100;
                            if (cs.vram_budget_bytes) {
                                r.hbm_gbps = cfg->hbm_gbps;
                                hmoe_bench_split_rooflines(&r, cs.cpu_expert_gbps, cs.cpu_expert_ms_per_token);
                            }
                        }
                        hmoe_bench_print_row(pr, &r);
                    }
                }
            hmoe_cli_ctx_report(b.ctx);
            hmoe_ctx_free(b.ctx);
            b.ctx = NULL;
        }
    free(b.logits);
    free(b.ids);
    free(ns);
    free(ts);
    hmoe_model_free(model);
    return rc;
}

int hmoe_cmd_bench(int argc, char **argv) {
    struct hmoe_opt_strs models = {0}, p_s = {0}, n_s = {0}, d_s = {0}, t_s = {0}, ub_s = {0}, npl_s = {0},
                         npp_s = {0}, ntg_s = {0};
    int reps = INT_MIN /* not given */, n_batch = 2048, syn_layers = 0;
    const char *out_fmt = "md", *type_k = "f16", *type_v = "f16", *synthetic = NULL, *syn_out = NULL;
    bool no_warmup = false, quiet = false, verbose = false;
    struct hmoe_cli_spec_args spa = {.draft_max = HMOE_CLI_DRAFT_MAX};
    struct hmoe_cli_model_opts go;
    hmoe_cli_model_opts_default(&go);
    const struct hmoe_opt opts[] = {
        {"--model", "-m", "FILE", "GGUF model (repeatable; default: a synthetic model, see below)", HMOE_OPT_STRS,
         &models},
        {"--n-prompt", "-p", "N,..", "prompt sizes to test (default 512; 0 = no prompt test)", HMOE_OPT_STRS, &p_s},
        {"--n-gen", "-n", "N,..", "generation lengths to test (default 128; 0 = no generation test)", HMOE_OPT_STRS,
         &n_s},
        {"--n-depth", "-d", "N,..", "tokens already in the KV cache when a test starts (default 0)", HMOE_OPT_STRS,
         &d_s},
        {"--threads", "-t", "N,..", "CPU threads (default: physical cores)", HMOE_OPT_STRS, &t_s},
        {"--ubatch-size", "-ub", "N,..", "tokens per forward micro-batch (default 512)", HMOE_OPT_STRS, &ub_s},
        {"--batch-size", "-b", "N", "logical batch size (recorded for llama-bench compatibility; default 2048)",
         HMOE_OPT_INT, &n_batch},
        {"--repetitions", "-r", "N", "timed runs per test (default 5)", HMOE_OPT_INT, &reps},
        {"--output", "-o", "FMT", "md (default), json, jsonl or csv, to stdout", HMOE_OPT_STR, &out_fmt},
        {"--cache-type-k", "-ctk", "TYPE", "KV cache type for K: f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl (default f16)", HMOE_OPT_STR,
         &type_k},
        {"--cache-type-v", "-ctv", "TYPE", "KV cache type for V: f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl (default f16)", HMOE_OPT_STR,
         &type_v},
        {"--n-parallel-list", "-npl", "N,..", "parallel sequences to test together (llama-batched-bench; -np is the "
         "same)", HMOE_OPT_STRS, &npl_s},
        {"--n-prompt-parallel", "-npp", "N,..", "with -npl: prompt tokens of each sequence (default 128)",
         HMOE_OPT_STRS, &npp_s},
        {"--n-gen-parallel", "-ntg", "N,..", "with -npl: tokens generated by each sequence (default 32)",
         HMOE_OPT_STRS, &ntg_s},
        {"--no-warmup", NULL, NULL, "skip the uncounted warm-up run before each test", HMOE_OPT_FLAG, &no_warmup},
        {"--no-mmap", NULL, NULL, "read the weights into RAM (transparent huge pages) instead of mapping the file",
         HMOE_OPT_FLAG, &go.no_mmap},
        {"--mlock", NULL, NULL, "keep the weights in RAM: never evicted or swapped", HMOE_OPT_FLAG, &go.mlock},
        {"--synthetic", NULL, "PRESET",
         "without -m: tiny (default), qwen3-30b-a3b, qwen3-235b-a22b, qwen3.6-35b-a3b or qwen35-tiny", HMOE_OPT_STR,
         &synthetic},
        {"--synthetic-layers", NULL, "N", "without -m: layers of the synthetic model (default: all that fit)",
         HMOE_OPT_INT, &syn_layers},
        {"--synthetic-out", NULL, "FILE", "without -m: write the synthetic model to FILE and keep it", HMOE_OPT_STR,
         &syn_out},
        {"--quiet", "-q", NULL, "only the results on stdout: no notes, no progress bars", HMOE_OPT_FLAG, &quiet},
        {"--verbose", "-v", NULL, "print load information", HMOE_OPT_FLAG, &verbose},
        HMOE_CLI_SPEC_OPTS(spa),
        HMOE_CLI_GPU_OPTS(go),
        HMOE_CLI_COMPAT_OPTS(go.compat),
        {NULL, NULL, NULL, NULL, 0, NULL},
    };
    int n_pos = 0;
    int rc = hmoe_opts_parse(usage, opts, argc, argv, NULL, 0, &n_pos);
    if (rc < 0) fputs(bench_help, stdout);
    if (rc) return rc < 0 ? HMOE_EXIT_OK : rc;
    if (go.compat.parallel) { /* -np: llama-batched-bench's list of parallel sequences */
        if (npl_s.n < (int)HMOE_ARRAY_LEN(npl_s.v)) npl_s.v[npl_s.n++] = go.compat.parallel;
        go.compat.parallel = NULL;
    }
    go.quiet = quiet; /* the compatibility notes follow bench's -q; loading keeps its own messages */
    rc = hmoe_cli_compat_apply("bench", &go);
    go.quiet = false;
    if (rc) return rc;
    if (verbose) hmoe_log_level = HMOE_LOG_INFO;
    struct hmoe_bench_printer pr = {.f = stdout};
    if (!hmoe_bench_format_from_name(out_fmt, &pr.fmt)) {
        fprintf(stderr, "hmoe: unknown output format '%s' (use md, json, jsonl or csv)\nusage: %s\n", out_fmt, usage);
        return HMOE_EXIT_USAGE;
    }
    if (models.n && (synthetic || syn_layers || syn_out)) {
        fprintf(stderr, "hmoe: --synthetic* options apply only without -m\nusage: %s\n", usage);
        return HMOE_EXIT_USAGE;
    }
    enum hmoe_type kt, vt;
    if (!hmoe_kv_type_from_name(type_k, &kt) || !hmoe_kv_type_from_name(type_v, &vt)) {
        fprintf(stderr, "hmoe: unknown KV cache type '%s' (use " HMOE_KV_TYPE_NAMES " with -ctk/-ctv)\n",
                hmoe_kv_type_from_name(type_k, &kt) ? type_v : type_k);
        return HMOE_EXIT_USAGE;
    }
    /* The tiny synthetic default gets small tests so the first run takes seconds. */
    const bool small = !models.n && (!synthetic || strcmp(synthetic, "tiny") == 0);
    if (reps == INT_MIN) reps = small ? 3 : 5;
    if (reps < 1 || reps > 1000) {
        fprintf(stderr, "hmoe: invalid -r/--repetitions %d: must be 1..1000\nusage: %s\n", reps, usage);
        return HMOE_EXIT_USAGE;
    }
    struct bench_cfg cfg = {.reps = reps, .n_batch = n_batch, .warmup = !no_warmup, .quiet = quiet, .type_k = type_k,
                            .type_v = type_v, .gpu_opts = &go};
    if ((rc = parse_list("-p", &p_s, small ? 128 : 512, 0, &cfg.p, &cfg.np)) ||
        (rc = parse_list("-n", &n_s, small ? 32 : 128, 0, &cfg.n, &cfg.nn)) ||
        (rc = parse_list("-d", &d_s, 0, 0, &cfg.d, &cfg.nd)) || (rc = parse_list("-t", &t_s, 0, 1, &cfg.t, &cfg.nt)) ||
        (rc = parse_list("-ub", &ub_s, 512, 1, &cfg.ub, &cfg.nub)))
        goto done;
    if (t_s.n == 0) cfg.t[0] = 0; /* 0: hmoe_ctx_init picks the physical cores */
    for (int i = 0; i < cfg.nub; i++)
        if (cfg.ub[i] != 512) pr.show_ubatch = true;
    if (!(cfg.ram_gbps = calloc((size_t)cfg.nt, sizeof *cfg.ram_gbps))) {
        rc = HMOE_EXIT_ERROR;
        goto done;
    }
    hmoe_cli_cpu_name(cfg.cpu, sizeof cfg.cpu);
    cfg.h2d_gbps = hmoe_bench_probe_h2d_gbps(cfg.gpu, sizeof cfg.gpu);
    if (!quiet && cfg.h2d_gbps >= 0) fprintf(stderr, "bench: %s: host->device %.1f GB/s (pinned)\n", cfg.gpu, cfg.h2d_gbps);
    cfg.hbm_gbps = cfg.h2d_gbps >= 0 ? hmoe_bench_probe_hbm_gbps() : HMOE_BENCH_NA;
    if (!quiet && cfg.hbm_gbps >= 0) fprintf(stderr, "bench: %s: device copy %.1f GB/s (HBM read + write)\n", cfg.gpu, cfg.hbm_gbps);

    char syn_path[4096] = "";
    if (!models.n) {
        if ((rc = hmoe_bench_synth_write(synthetic ? synthetic : "tiny", syn_layers, syn_out, quiet, syn_path,
                                         sizeof syn_path)))
            goto done;
        models.v[models.n++] = syn_path;
        if (!syn_out) {
            snprintf(tmp_model, sizeof tmp_model, "%s", syn_path);
            for (size_t i = 0; i < HMOE_ARRAY_LEN(cleanup_signals); i++) signal(cleanup_signals[i], on_signal);
        }
    }
    if (spa.spec) {
        if (strcmp(spa.spec, "mtp") != 0 || pr.fmt != HMOE_BENCH_MD) {
            fprintf(stderr, "hmoe: bench --spec takes mtp and prints markdown (no -o %s)\nusage: %s\n", out_fmt, usage);
            rc = HMOE_EXIT_USAGE;
            goto cleanup;
        }
        go.n_threads = cfg.t[0];
        go.n_ubatch = cfg.ub[0];
        go.cache_type_k = type_k;
        go.cache_type_v = type_v;
        for (int i = 0; !rc && i < models.n; i++)
            rc = hmoe_bench_spec(&go, models.v[i], cfg.p[0], cfg.n[0], spa.draft_max, reps, quiet);
        goto cleanup;
    }
    if (npl_s.n) {
        int *npl = NULL, *npp = NULL, *ntg = NULL, n_npl = 0, n_npp = 0, n_ntg = 0;
        if (!(rc = parse_list("-npl", &npl_s, 1, 1, &npl, &n_npl)) &&
            !(rc = parse_list("-npp", &npp_s, 128, 0, &npp, &n_npp)) &&
            !(rc = parse_list("-ntg", &ntg_s, 32, 0, &ntg, &n_ntg))) {
            for (int i = 0; i < n_npl && !rc; i++)
                if (npl[i] > HMOE_MAX_SEQ) {
                    fprintf(stderr, "hmoe: -npl %d: at most %d parallel sequences\nusage: %s\n", npl[i], HMOE_MAX_SEQ,
                            usage);
                    rc = HMOE_EXIT_USAGE;
                }
            go.n_threads = cfg.t[0];
            go.n_ubatch = cfg.ub[0];
            go.cache_type_k = type_k;
            go.cache_type_v = type_v;
            for (int i = 0; !rc && i < models.n; i++)
                rc = hmoe_bench_batched(&go, models.v[i], npp, n_npp, ntg, n_ntg, npl, n_npl, pr.fmt, quiet);
        }
        free(npl);
        free(npp);
        free(ntg);
        goto cleanup;
    }
    hmoe_bench_print_begin(&pr);
    for (int i = 0; !rc && i < models.n; i++) rc = bench_model(&cfg, models.v[i], &pr);
    hmoe_bench_print_end(&pr);
    if (pr.fmt == HMOE_BENCH_MD && pr.n_rows && !quiet)
        fprintf(stdout, "\nRAM GB/s: weights + KV read per generated token x t/s; roofline: that / RAM read bandwidth "
                        "measured at start; with a GPU the CPU part of a hybrid row, else the GPU part against a device copy probe "
                        "(json: cpu_roofline_pct, gpu_roofline_pct). GPU columns: '-' on the CPU.\n");
cleanup:
    if (tmp_model[0]) {
        unlink(tmp_model);
        for (size_t i = 0; i < HMOE_ARRAY_LEN(cleanup_signals); i++) signal(cleanup_signals[i], SIG_DFL);
    }
    rc = hmoe_cli_stdout_check(rc);
done:
    free(cfg.p);
    free(cfg.n);
    free(cfg.d);
    free(cfg.t);
    free(cfg.ub);
    free(cfg.ram_gbps);
    return rc;
}
