/* cli.h — private to src/cli: the subcommands and the flag-table parser they share.
 * Only src/cli prints user-facing errors and chooses exit codes (house style 10, 14). */
#ifndef HMOE_CLI_H
#define HMOE_CLI_H

#include <stdbool.h>
#include <stdio.h>

#include "hmoe/common.h"
#include "hmoe/model.h"
#include "hmoe/text.h"

/* Exit codes: 0 success, 1 runtime error (bad file, out of memory, ...), 2 usage error. */
enum { HMOE_EXIT_OK = 0, HMOE_EXIT_ERROR = 1, HMOE_EXIT_USAGE = 2 };

enum hmoe_opt_kind {
    HMOE_OPT_FLAG,   /* no value; sets *(bool *)dest = true */
    HMOE_OPT_INT,    /* int */
    HMOE_OPT_I64,    /* int64_t */
    HMOE_OPT_FLOAT,  /* float */
    HMOE_OPT_STR,    /* const char * (points into argv) */
    HMOE_OPT_STRS,   /* repeatable string: appends to a struct hmoe_opt_strs */
    HMOE_OPT_SECTION, /* not a flag: --help prints `help` as the heading of the rows below it */
};
/* A heading row for a flag table (long_name "" never matches a flag). */
#define HMOE_OPT_HEADING(title) {"", NULL, NULL, title, HMOE_OPT_SECTION, NULL}

/* A repeatable option's values (e.g. -ot REGEX=CPU given several times). */
struct hmoe_opt_strs {
    const char *v[32];
    int n;
};

/* One row of a command's flag table; the table ends with a row whose long_name is NULL. */
struct hmoe_opt {
    const char *long_name;  /* "--model" */
    const char *short_name; /* "-m", "-ngl", ... or NULL */
    const char *hint;       /* value placeholder for --help ("FILE"), NULL for flags */
    const char *help;       /* one line, including the default */
    enum hmoe_opt_kind kind;
    void *dest;
};

/* Parse argv[1..argc-1] (argv[0] is the subcommand name). Positional arguments are
 * stored in pos[] (up to max_pos). Prints a message naming the bad flag or value plus
 * the usage line to stderr and returns HMOE_EXIT_USAGE on error; prints --help (or
 * --version) and returns -1 when that was asked for; returns 0 on success. */
int hmoe_opts_parse(const char *usage, const struct hmoe_opt *opts, int argc, char **argv, const char **pos,
                    int max_pos, int *n_pos);
void hmoe_opts_print_help(FILE *f, const char *usage, const struct hmoe_opt *opts);

/* The build this binary comes from (cli_version.c): git commit ("unknown" without git) and
 * options (CUDA, GPU architectures, compiler). */
const char *hmoe_cli_build_commit(void);
const char *hmoe_cli_build_options(void);
/* "version: COMMIT\nbuilt with OPTIONS\n" to f; returns the exit code (1 when f fails). */
int hmoe_cli_print_version(FILE *f);

/* Print "hmoe: <message>" for an error returned by the library, and return HMOE_EXIT_ERROR. */
int hmoe_cli_fail(const struct hmoe_err *err);

/* Model and context flags shared by the commands that run a model (cli_model.c). */
struct hmoe_cli_model_opts {
    const char *model_path;
    int n_ctx, n_threads, n_ubatch, n_batch;
    const char *cache_type_k, *cache_type_v;
    const char *rope_scaling;
    /* kept as text so that "not given" (NULL) differs from every value, 0 included */
    const char *rope_scale, *rope_freq_base, *yarn_orig_ctx;
    bool quiet;       /* no progress bar, no notes (errors and warnings still print) */
    bool no_preload;  /* leave the weights to be paged in on first use */
    bool no_mmap;     /* read the weights into huge-page RAM instead of mapping the file */
    /* GPU backend and hybrid scheduler (HMOE_CLI_GPU_OPTS rows) */
    const char *gpu, *moe_miss, *cache_policy, *prefetch;
    int64_t vram_budget_mib;
    bool cpu_moe, no_profile;
    int n_cpu_moe, cache_fills, stream_min;
    struct hmoe_opt_strs ot;
};
/* --gpu and the placement / expert-cache flags (llama.cpp names where they exist). */
#define HMOE_CLI_GPU_OPTS(o)                                                                                     \
    HMOE_OPT_HEADING("GPU and expert placement"),                                                              \
    {"--gpu", NULL, "MODE", "auto (default: the GPU when one is present and this build has CUDA), on, off",     \
     HMOE_OPT_STR, &(o).gpu},                                                                                   \
    {"--vram-budget", NULL, "MiB", "everything hmoe puts on the GPU stays under this (default: free VRAM - "    \
     "1024); experts that do not fit stay in RAM with a VRAM cache", HMOE_OPT_I64, &(o).vram_budget_mib},        \
    {"--cpu-moe", "-cmoe", NULL, "keep every expert tensor in RAM (computed by CPU threads)", HMOE_OPT_FLAG,    \
     &(o).cpu_moe},                                                                                             \
    {"--n-cpu-moe", "-ncmoe", "N", "keep the experts of the first N layers in RAM", HMOE_OPT_INT,              \
     &(o).n_cpu_moe},                                                                                           \
    {"--override-tensor", "-ot", "REGEX=CPU|GPU", "place expert tensors whose name matches (repeatable)",       \
     HMOE_OPT_STRS, &(o).ot},                                                                                   \
    {"--moe-miss", NULL, "POLICY", "experts missing from VRAM during decode: cpu (CPU threads), transfer "    \
     "(the GPU reads them over PCIe from the page-locked experts and computes them) or auto (default: "          \
     "transfer where its read rate measured at start beats the CPU threads', else cpu; -v prints both)",        \
     HMOE_OPT_STR, &(o).moe_miss},                                                                              \
    {"--prefetch", NULL, "on|off", "decode: predict the next layer's experts from this layer's state and copy " \
     "uncached ones into the VRAM cache during the token (default off; accuracy in -v)",                        \
     HMOE_OPT_STR, &(o).prefetch},                                                                              \
    {"--cache-policy", NULL, "lfu|lru", "expert cache replacement (default lfu)", HMOE_OPT_STR,                \
     &(o).cache_policy},                                                                                        \
    {"--cache-fills", NULL, "N", "expert copies to VRAM started per decoded token (default auto; 0 = static "  \
     "hot set only)", HMOE_OPT_INT, &(o).cache_fills},                                                          \
    {"--no-profile", NULL, NULL, "do not read or update the routing profile in ~/.cache/hmoe", HMOE_OPT_FLAG,   \
     &(o).no_profile},                                                                                          \
    {"--stream-min", NULL, "N", "hybrid prefill streams experts to the GPU for micro-batches of at least N "   \
     "tokens (default 32; smaller ones run on CPU threads)", HMOE_OPT_INT, &(o).stream_min}
/* Rows for a command's flag table (llama.cpp names). */
#define HMOE_CLI_MODEL_OPTS(o)                                                                                   \
    HMOE_OPT_HEADING("model and context"),                                                                     \
    {"--model", "-m", "FILE", "GGUF model file (required)", HMOE_OPT_STR, &(o).model_path},                    \
    {"--ctx-size", "-c", "N", "KV cache size in tokens (default 4096; logits: the number of ids); capped at "  \
     "the model's context_length", HMOE_OPT_INT, &(o).n_ctx},                                                  \
    {"--threads", "-t", "N", "CPU threads (default: physical cores)", HMOE_OPT_INT, &(o).n_threads},           \
    {"--ubatch-size", "-ub", "N", "tokens per forward micro-batch (default 512)", HMOE_OPT_INT, &(o).n_ubatch}, \
    {"--batch-size", "-b", "N", "logical batch size (accepted for llama.cpp compatibility; prompts are split "  \
     "into -ub micro-batches)", HMOE_OPT_INT, &(o).n_batch},                                                    \
    {"--cache-type-k", "-ctk", "TYPE", "KV cache type for K: f32, f16, bf16, q8_0 (default f16)", HMOE_OPT_STR, \
     &(o).cache_type_k},                                                                                        \
    {"--cache-type-v", "-ctv", "TYPE", "KV cache type for V: f32, f16, bf16, q8_0 (default f16)", HMOE_OPT_STR, \
     &(o).cache_type_v},                                                                                        \
    {"--rope-scaling", NULL, "TYPE", "RoPE scaling none|linear|yarn (default: from the model)", HMOE_OPT_STR,   \
     &(o).rope_scaling},                                                                                        \
    {"--rope-scale", NULL, "S", "RoPE context scaling factor, > 0 (default: from the model)", HMOE_OPT_STR,        \
     &(o).rope_scale},                                                                                          \
    {"--rope-freq-base", NULL, "F", "RoPE base frequency, > 1 (default: from the model)", HMOE_OPT_STR,            \
     &(o).rope_freq_base},                                                                                      \
    {"--yarn-orig-ctx", NULL, "N", "YaRN original context, >= 1 (default: from the model)", HMOE_OPT_STR,             \
     &(o).yarn_orig_ctx},                                                                                       \
    {"--quiet", "-q", NULL, "no progress bars (they are drawn only when stderr is a terminal anyway)",          \
     HMOE_OPT_FLAG, &(o).quiet},                                                                                \
    {"--no-preload", NULL, NULL, "do not read the weights into memory at start (they are then paged in on "    \
     "first use, which makes the first tokens slow)", HMOE_OPT_FLAG, &(o).no_preload},                          \
    {"--no-mmap", NULL, NULL, "read the weights into RAM (transparent huge pages) instead of mapping the file: "  \
     "faster CPU decode, costs the file size in RAM and a read at start", HMOE_OPT_FLAG, &(o).no_mmap},         \
    HMOE_CLI_GPU_OPTS(o)

void hmoe_cli_model_opts_default(struct hmoe_cli_model_opts *o);
/* Load the model and create its context from the flags; prints the error and returns an
 * exit code on failure (0 on success). Checks the plan against the memory available
 * (fails when the KV cache cannot fit, warns when weights + KV exceed it) and, unless
 * --no-preload or the weights do not fit, reads the weights into the page cache with a
 * progress bar so that the first prompt is not timed against the disk. */
int hmoe_cli_model_open(const struct hmoe_cli_model_opts *o, struct hmoe_model **model, struct hmoe_ctx **ctx);
/* The same in two steps, for commands that create several contexts for one model (bench). */
int hmoe_cli_model_load(const struct hmoe_cli_model_opts *o, struct hmoe_model **model);
int hmoe_cli_ctx_open(const struct hmoe_cli_model_opts *o, const struct hmoe_model *model, struct hmoe_ctx **ctx);
/* The plan against hmoe_cli_mem_available_bytes(): prints an error naming the size needed
 * and the flag to change and sets *rc when the KV cache cannot fit; prints a warning when
 * weights + KV exceed it. Returns true when everything fits (worth preloading). */
bool hmoe_cli_check_memory(const struct hmoe_model *m, const struct hmoe_ctx *c, int *rc);
/* With --verbose (log level info): the GPU backend's report (placement, VRAM breakdown, peak and
 * decode statistics) to stderr; nothing on the CPU backend. */
void hmoe_cli_ctx_report(struct hmoe_ctx *ctx);
/* Read the model's weights through the page cache (progress bar when slow and enabled). */
void hmoe_cli_model_preload(const struct hmoe_model *model, bool show_progress);

/* --- machine facts (cli_sys.c) --------------------------------------------------------- */

/* Bytes of memory a new allocation can get without swapping or the OOM killer: MemAvailable
 * of /proc/meminfo, capped by the cgroup v2 limit when there is one. The environment
 * variable HMOE_MEM_AVAILABLE_MIB overrides it (containers with odd accounting, tests).
 * 0 when unknown (then no check is made). */
uint64_t hmoe_cli_mem_available_bytes(void);
/* Free bytes for an unprivileged user on the file system holding `dir`, or 0 if unknown. */
uint64_t hmoe_cli_disk_free_bytes(const char *dir);
/* CPU model name from /proc/cpuinfo ("" when unknown). */
void hmoe_cli_cpu_name(char *buf, size_t size);
/* Bytes of the last-level cache (sysfs), or 0 when unknown. */
uint64_t hmoe_cli_llc_bytes(void);
/* "8.0 MiB" / "17.28 GiB" into buf; returns buf. */
const char *hmoe_cli_fmt_bytes(char *buf, size_t size, uint64_t bytes);

/* --- text generation pieces shared by run and chat (cli_gen.c) --------------------------- */

/* Sampling flag rows (llama.cpp names); `seed` is an int64_t, -1 = from the clock. */
#define HMOE_CLI_SAMPLING_OPTS(sp, seed)                                                                         \
    HMOE_OPT_HEADING("sampling"),                                                                              \
    {"--temp", NULL, "T", "temperature (default 0.8; 0 = greedy)", HMOE_OPT_FLOAT, &(sp).temp},                 \
    {"--top-k", NULL, "K", "top-k sampling (default 40, 0 = off)", HMOE_OPT_INT, &(sp).top_k},                  \
    {"--top-p", NULL, "P", "top-p sampling (default 0.95, 1.0 = off)", HMOE_OPT_FLOAT, &(sp).top_p},            \
    {"--min-p", NULL, "P", "min-p sampling (default 0.05, 0.0 = off)", HMOE_OPT_FLOAT, &(sp).min_p},            \
    {"--repeat-penalty", NULL, "R", "penalise repeats of recent tokens (default 1.0 = off)", HMOE_OPT_FLOAT,    \
     &(sp).repeat_penalty},                                                                                     \
    {"--repeat-last-n", NULL, "N", "tokens the repeat penalty looks back over (default 64)", HMOE_OPT_INT,      \
     &(sp).repeat_last_n},                                                                                      \
    {"--seed", "-s", "SEED", "random seed (default -1 = from the clock)", HMOE_OPT_I64, &(seed)}

/* The sampling flags' ranges: a usage error naming the first flag out of range (exit code). */
int hmoe_cli_sampler_check(const struct hmoe_sampler_params *sp);
/* sp->seed from the --seed value (-1: clock and pid). */
void hmoe_cli_sampler_seed(struct hmoe_sampler_params *sp, int64_t seed);

/* Load the model's vocabulary and check it matches the logits; prints the error. */
int hmoe_cli_vocab_open(const struct hmoe_model *model, struct hmoe_vocab **vocab);
/* The chat format: --chat-template NAME when given (unknown: usage error), else detected
 * from the GGUF's template (unrecognised: warning, ChatML). */
int hmoe_cli_chat_template(const struct hmoe_vocab *vocab, const char *name, enum hmoe_chat_template *out);

/* llama.cpp-style timing block (llama_perf_context_print), printed to stderr by run. */
struct hmoe_cli_timings {
    double load_s, prompt_s, sample_s, eval_s, total_s;
    int n_prompt, n_sample, n_eval, n_total;
};
void hmoe_cli_print_timings(const struct hmoe_cli_timings *t);
/* Generated text to f; with `escape` (stdout is a terminal) control bytes other than newline and
 * tab, and bytes that are not well-formed UTF-8, print as \xNN, so that random-weight or broken
 * output cannot switch the terminal's character set or send it escape sequences. */
void hmoe_cli_write_text(FILE *f, const char *text, size_t n, bool escape);
/* Flush stdout; when that or an earlier write failed (a full disk, /dev/full, a closed pipe),
 * print the error and return rc, or HMOE_EXIT_ERROR when rc was 0. */
int hmoe_cli_stdout_check(int rc);
/* Parse "1,2,3" (also "[1, 2, 3]" or whitespace-separated) into a malloc'd array. */
int hmoe_cli_parse_ids(const char *text, int32_t **ids, int *n);

/* Subcommands (one file each: cmd_<name>.c). argv[0] is the subcommand name. */
int hmoe_cmd_info(int argc, char **argv);
int hmoe_cmd_tokenize(int argc, char **argv);
int hmoe_cmd_template(int argc, char **argv);
int hmoe_cmd_logits(int argc, char **argv);
int hmoe_cmd_run(int argc, char **argv);
int hmoe_cmd_chat(int argc, char **argv);
int hmoe_cmd_bench(int argc, char **argv);
int hmoe_cmd_synth(int argc, char **argv);
int hmoe_cmd_serve(int argc, char **argv);

#endif
