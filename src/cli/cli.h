/* cli.h — private to src/cli: the subcommands and the flag-table parser they share.
 * Only src/cli prints user-facing errors and chooses exit codes (house style 10, 14). */
#ifndef HMOE_CLI_H
#define HMOE_CLI_H

#include <stdbool.h>
#include <stdio.h>

#include "hmoe/arch.h"
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
int hmoe_cli_build_number(void); /* commits in the history, as llama.cpp's build_number */
const char *hmoe_cli_build_options(void);
/* "version: COMMIT\nbuilt with OPTIONS\n" to f; returns the exit code (1 when f fails). */
int hmoe_cli_print_version(FILE *f);

/* Print "hmoe: <message>" for an error returned by the library, and return HMOE_EXIT_ERROR. */
int hmoe_cli_fail(const struct hmoe_err *err);

/* llama.cpp flags that hmoe accepts so that a pasted llama-cli / llama-server / llama-bench command
 * line runs (cli_compat.c). The strings are the values as given (NULL: not given); after
 * hmoe_cli_compat_apply the parsed fields hold what `serve` needs. */
struct hmoe_cli_compat {
    const char *n_gpu_layers, *flash_attn, *parallel, *fit, *fit_target, *fit_ctx, *reasoning, *reasoning_format,
        *reasoning_budget, *load_mode, *moe_cache_mib, *cache_reuse, *threads_batch;
    bool jinja, no_jinja, mmap, metrics, no_warmup;
    /* parsed */
    int n_parallel;          /* -np (default 1; -1 = auto) */
    int cache_reuse_min;     /* --cache-reuse N (default 0 = off) */
    int reasoning_mode;      /* --reasoning: -1 auto (default), 0 off, 1 on */
    int64_t expert_cache_mib; /* --moe-cache-mib N, or -1 */
};
/* The compatibility rows (--help group "llama.cpp compatibility"). */
#define HMOE_CLI_COMPAT_OPTS(c)                                                                                  \
    HMOE_OPT_HEADING("llama.cpp compatibility (accepted; each prints what it maps to or why it is ignored)"),   \
    {"--n-gpu-layers", "-ngl", "N|auto|all", "0 = --gpu off; any other value: every layer goes to the GPU, the "  \
     "experts that do not fit --vram-budget stay in RAM", HMOE_OPT_STR, &(c).n_gpu_layers},                       \
    {"--gpu-layers", NULL, "N|auto|all", "the same as -ngl", HMOE_OPT_STR, &(c).n_gpu_layers},                    \
    {"--flash-attn", "-fa", "on|off|auto", "ignored: attention is always the fused kernel", HMOE_OPT_STR,          \
     &(c).flash_attn},                                                                                          \
    {"--jinja", NULL, NULL, "accepted: the model's own Jinja template is the default (--chat-template NAME: built in)", \
     HMOE_OPT_FLAG, &(c).jinja},                                                                                \
    {"--no-jinja", NULL, NULL, "ignored: use --chat-template NAME for a built-in format", HMOE_OPT_FLAG, &(c).no_jinja},                             \
    {"--parallel", "-np", "N", "serve: N slots stepped together, -c split between them; bench: as -npl; run/chat: one", HMOE_OPT_STR, \
     &(c).parallel},                                                                                            \
    {"--fit", "-fit", "on|off", "on is what hmoe does: placement fits --vram-budget; -c is never shrunk",         \
     HMOE_OPT_STR, &(c).fit},                                                                                   \
    {"--fit-target", "-fitt", "MiB", "VRAM to leave free: --vram-budget = free VRAM - MiB (default 1024)",         \
     HMOE_OPT_STR, &(c).fit_target},                                                                            \
    {"--fit-ctx", "-fitc", "N", "ignored: the context is -c tokens, never shrunk", HMOE_OPT_STR, &(c).fit_ctx},  \
    {"--reasoning", "-rea", "on|off|auto", "off = --no-think (enable_thinking=false); on = --think; auto = the "   \
     "template's default", HMOE_OPT_STR, &(c).reasoning},                                                         \
    {"--reasoning-format", NULL, "FMT", "none|deepseek|deepseek-legacy|auto: serve's reasoning_content; run and " \
     "chat print as --show-think / --hide-think say", HMOE_OPT_STR, &(c).reasoning_format},                       \
    {"--reasoning-budget", NULL, "N", "ignored: no thinking budget (-n caps the answer)", HMOE_OPT_STR,           \
     &(c).reasoning_budget},                                                                                    \
    {"--load-mode", "-lm", "MODE", "auto|mmap: the default (mapped, preloaded); none|dio = --no-mmap; mlock: "   \
     "as --mlock", HMOE_OPT_STR, &(c).load_mode},                                                               \
    {"--mmap", NULL, NULL, "the default (see --no-mmap)", HMOE_OPT_FLAG, &(c).mmap},                              \
    {"--moe-cache-mib", NULL, "N", "VRAM for the expert cache: --vram-budget = N + what the model needs on the "  \
     "GPU without its experts", HMOE_OPT_STR, &(c).moe_cache_mib},                                                \
    {"--cache-reuse", NULL, "N", "serve: prompt-cache reuse (the longest common prefix is always reused); "       \
     "ignored elsewhere", HMOE_OPT_STR, &(c).cache_reuse},                                                        \
    {"--metrics", NULL, NULL, "serve: /metrics is always on; ignored elsewhere", HMOE_OPT_FLAG, &(c).metrics},     \
    {"--threads-batch", "-tb", "N", "ignored: -t threads run prompt and generation", HMOE_OPT_STR,                \
     &(c).threads_batch}

/* Model and context flags shared by the commands that run a model (cli_model.c). */
struct hmoe_cli_model_opts {
    const char *model_path;
    int n_ctx, n_threads, n_ubatch, n_batch;
    int n_seq;        /* sequences of the context (default 1); n_ctx is their total */
    const char *cache_type_k, *cache_type_v;
    const char *rope_scaling;
    /* kept as text so that "not given" (NULL) differs from every value, 0 included */
    const char *rope_scale, *rope_freq_base, *yarn_orig_ctx;
    bool quiet;       /* no progress bar, no notes (errors and warnings still print) */
    bool no_preload;  /* leave the weights to be paged in on first use */
    bool no_mmap;     /* read the weights into huge-page RAM instead of mapping the file */
    bool mlock;       /* lock the weights in RAM (llama.cpp's --mlock) */
    /* GPU backend and hybrid scheduler (HMOE_CLI_GPU_OPTS rows) */
    const char *gpu, *moe_miss, *cache_policy, *prefetch;
    int64_t vram_budget_mib;
    bool cpu_moe, no_profile;
    int n_cpu_moe, cache_fills, stream_min;
    struct hmoe_opt_strs ot;
    struct hmoe_cli_compat compat; /* HMOE_CLI_COMPAT_OPTS rows */
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
    {"--ctx-size", "-c", "N", "KV cache size in tokens (default 4096; logits: the number of ids); above "  \
     "the model's context_length with a warning", HMOE_OPT_INT, &(o).n_ctx},                                                  \
    {"--threads", "-t", "N", "CPU threads (default: physical cores)", HMOE_OPT_INT, &(o).n_threads},           \
    {"--ubatch-size", "-ub", "N", "tokens per forward micro-batch (default 512)", HMOE_OPT_INT, &(o).n_ubatch}, \
    {"--batch-size", "-b", "N", "logical batch size (accepted for llama.cpp compatibility; prompts are split "  \
     "into -ub micro-batches)", HMOE_OPT_INT, &(o).n_batch},                                                    \
    {"--cache-type-k", "-ctk", "TYPE", "KV cache type for K: f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl (default f16)", HMOE_OPT_STR, \
     &(o).cache_type_k},                                                                                        \
    {"--cache-type-v", "-ctv", "TYPE", "KV cache type for V: f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl (default f16)", HMOE_OPT_STR, \
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
    {"--mlock", NULL, NULL, "keep the weights in RAM: never evicted or swapped (needs the file size free and a "  \
     "large enough 'ulimit -l')", HMOE_OPT_FLAG, &(o).mlock},                                                   \
    HMOE_CLI_GPU_OPTS(o),                                                                                      \
    HMOE_CLI_COMPAT_OPTS((o).compat),                                                                          \
    {"--no-warmup", NULL, NULL, "ignored: there is no warm-up run (the weights are preloaded; see --no-preload)", \
     HMOE_OPT_FLAG, &(o).compat.no_warmup}

void hmoe_cli_model_opts_default(struct hmoe_cli_model_opts *o);
/* After parsing: check the llama.cpp compatibility values (a usage error names the flag and what it
 * takes), apply those that map onto hmoe flags, and print one line per given flag to stderr saying
 * what it maps to or why it is ignored (none with -q). `cmd` is "run", "chat", "bench", "logits" or
 * "serve" (serve prints its own lines for -np, --metrics, --cache-reuse and --reasoning-format).
 * Returns 0 or HMOE_EXIT_USAGE. */
int hmoe_cli_compat_apply(const char *cmd, struct hmoe_cli_model_opts *o);
/* The --vram-budget for the context of `model`: --vram-budget when given, else from --moe-cache-mib
 * (printing how), else 0 (the default: free VRAM - 1024 MiB). */
int64_t hmoe_cli_compat_vram_budget(const struct hmoe_cli_model_opts *o, const struct hmoe_model *model);
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
/* With --verbose: one line with the peak RSS, the page-locked bytes (for the device, mlock) and
 * the VRAM peak against its budget (GPU backends); part of hmoe_cli_ctx_report. */
void hmoe_cli_mem_report(const struct hmoe_ctx *c);
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

/* Self-speculative decoding flags (llama.cpp's --draft-max names). */
struct hmoe_cli_spec_args {
    const char *spec;   /* "mtp" or NULL (off) */
    int draft_max;      /* drafts per step (default HMOE_CLI_DRAFT_MAX) */
};
/* One MTP block is trained to predict one token ahead; chained drafts past the third are
 * rarely accepted, so the default is lower than llama.cpp's 16 for a separate draft model. */
#define HMOE_CLI_DRAFT_MAX 3
#define HMOE_CLI_SPEC_OPTS(a)                                                                                    \
    HMOE_OPT_HEADING("speculative decoding"),                                                                  \
    {"--spec", NULL, "mtp", "draft tokens with the model's MTP block and verify them in one pass (same "      \
     "output; CPU backend)", HMOE_OPT_STR, &(a).spec},                                                          \
    {"--draft-max", "--draft", "N", "tokens drafted per step with --spec (default 3, at most 16)", HMOE_OPT_INT, \
     &(a).draft_max}
/* The speculative decoder for --spec (NULL when the flag is absent); prints the error and
 * returns an exit code when the value, the model or the context cannot do it. */
int hmoe_cli_spec_open(const struct hmoe_cli_spec_args *a, struct hmoe_ctx *ctx, struct hmoe_spec **out);
/* Token id at pos, the logits after it into *logits: through the speculative decoder when
 * there is one, else one hmoe_ctx_decode step into buf. */
enum hmoe_status hmoe_cli_decode_next(struct hmoe_ctx *ctx, struct hmoe_spec *spec, int32_t id, int pos, float *buf,
                                      const float **logits, struct hmoe_err *err);
/* With --spec and -v: the acceptance line to stderr. */
void hmoe_cli_spec_report(const struct hmoe_spec *spec);

/* The sampling flags' ranges: a usage error naming the first flag out of range (exit code). */
int hmoe_cli_sampler_check(const struct hmoe_sampler_params *sp);
/* sp->seed from the --seed value (-1: clock and pid). */
void hmoe_cli_sampler_seed(struct hmoe_sampler_params *sp, int64_t seed);

/* Load the model's vocabulary and check it matches the logits; prints the error. */
int hmoe_cli_vocab_open(const struct hmoe_model *model, struct hmoe_vocab **vocab);
/* The chat template flags of run, chat and template (llama.cpp's names). */
struct hmoe_cli_chat_args {
    const char *name;   /* --chat-template NAME|JINJA */
    const char *file;   /* --chat-template-file FILE */
    const char *kwargs; /* --chat-template-kwargs JSON */
};
#define HMOE_CLI_CHAT_TEMPLATE_OPTS(a)                                                                                \
    {"--chat-template", NULL, "NAME", "built-in format chatml, qwen3, qwen35, nemotron or harmony, or a Jinja template string "  \
     "(default: the model's own template)", HMOE_OPT_STR, &(a).name},                                                 \
    {"--chat-template-file", NULL, "FILE", "render with the Jinja template in FILE", HMOE_OPT_STR, &(a).file},         \
    {"--chat-template-kwargs", NULL, "JSON", "template variables, e.g. '{\"enable_thinking\": false}'", HMOE_OPT_STR, \
     &(a).kwargs}
/* The chat format from those flags and the vocabulary's template; a file without a template
 * speaks `arch_family`, its architecture's format (arch.h; UNKNOWN: ChatML with a warning).
 * Prints warnings and errors (usage error for a bad name or kwargs). Free with hmoe_chat_fmt_free. */
int hmoe_cli_chat_format(const struct hmoe_vocab *vocab, enum hmoe_chat_template arch_family,
                         const struct hmoe_cli_chat_args *a, struct hmoe_chat_fmt **out);

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
