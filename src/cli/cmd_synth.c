/* cmd_synth.c — `hmoe synth`: write a random-weight GGUF with a real model's layout, type
 * mix and (optionally) skewed routing, for benchmarks. Prints what it writes (tensor count,
 * size, per-type histogram), shows a progress bar on a terminal, removes the partial file
 * on any error or Ctrl-C. The work is in src/synth/ (synth.h).
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "hmoe/progress.h"
#include "hmoe/synth.h"

static volatile sig_atomic_t interrupted;

static void on_sigint(int sig) {
    (void)sig;
    interrupted = 1;
}

struct progress_ctx {
    struct hmoe_progress bar;
};

static bool on_progress(void *ctx, uint64_t done_bytes, uint64_t total_bytes) {
    (void)total_bytes;
    hmoe_progress_update(&((struct progress_ctx *)ctx)->bar, done_bytes);
    return !interrupted;
}

static void print_summary(const struct hmoe_synth_plan *plan, const char *path) {
    const double gib = 1024.0 * 1024.0 * 1024.0;
    const struct hmoe_synth_preset *p = &plan->preset;
    char routing[48];
    if (plan->routing.kind == HMOE_SYNTH_ROUTING_ZIPF) snprintf(routing, sizeof routing, "zipf:%g", plan->routing.zipf_s);
    else snprintf(routing, sizeof routing, "uniform");
    printf("writing %s: %s, mix %s, %u layers, %u experts (top-%u), vocab %u%s, routing %s, seed %llu\n", path, p->name,
           plan->rules ? hmoe_synth_rules_label(plan->rules) : hmoe_synth_mix_name(plan->mix), p->n_layer, p->n_expert, p->n_expert_used, p->n_vocab,
           plan->vocab_src ? " (--vocab)" : " (generated)", routing, (unsigned long long)plan->seed);
    printf("  %zu tensors, %.2f GiB of tensor data\n", plan->n_tensors, (double)plan->data_bytes / gib);
    for (int t = 0; t < HMOE_TYPE_COUNT; t++) {
        size_t n = 0;
        uint64_t bytes = 0;
        for (size_t i = 0; i < plan->n_tensors; i++)
            if ((int)plan->tensors[i].type == t) {
                n++;
                bytes += plan->tensors[i].n_bytes;
            }
        if (n) printf("  %-8s %5zu tensors %9.3f GiB\n", hmoe_type_name((uint32_t)t), n, (double)bytes / gib);
    }
    fflush(stdout);
}

int hmoe_cmd_synth(int argc, char **argv) {
    const char *preset = NULL, *mix = NULL, *routing = NULL, *vocab = NULL, *out = NULL;
    int layers = 0;
    int64_t seed = 1;
    bool quiet = false;
    char preset_help[160], mix_help[400];
    snprintf(preset_help, sizeof preset_help, "model shape: %s (required)", hmoe_synth_preset_names());
    snprintf(mix_help, sizeof mix_help,
             "type mix as llama-quantize makes it: %s (default: the preset's own, q4_k_m or mxfp4_moe); or per-tensor rules 'REGEX=TYPE,...' over a "
             "base mix (e.g. 'q6_k,attn_.*=q8_0'; first match wins), or the rule preset %s",
             hmoe_synth_mix_names(), hmoe_synth_rule_preset_names());
    const struct hmoe_opt opts[] = {
        {"--preset", NULL, "NAME", preset_help, HMOE_OPT_STR, &preset},
        {"--layers", NULL, "N", "number of layers (same shapes, smaller file; default: the preset's)", HMOE_OPT_INT, &layers},
        {"--mix", NULL, "MIX", mix_help, HMOE_OPT_STR, &mix},
        {"--routing", NULL, "R", "uniform (random router, default) or zipf:S (expert popularity ~ 1/rank^S)", HMOE_OPT_STR,
         &routing},
        {"--seed", "-s", "N", "random seed; the same seed writes the same bytes (default 1)", HMOE_OPT_I64, &seed},
        {"--vocab", NULL, "FILE", "copy the tokenizer.* keys from this GGUF (default: a generated Qwen3-style vocab)",
         HMOE_OPT_STR, &vocab},
        {"--quiet", "-q", NULL, "print nothing but errors (no summary, no progress bar)", HMOE_OPT_FLAG, &quiet},
        {"--output", "-o", "FILE", "the GGUF file to write (required)", HMOE_OPT_STR, &out},
        {NULL, NULL, NULL, NULL, 0, NULL},
    };
    const char *usage = "hmoe synth --preset NAME [--layers N] [--mix MIX] [--routing uniform|zipf:S] [--seed N] "
                        "[--vocab FILE.gguf] [--quiet] -o FILE.gguf";
    int n_pos = 0;
    int rc = hmoe_opts_parse(usage, opts, argc, argv, NULL, 0, &n_pos);
    if (rc) return rc < 0 ? HMOE_EXIT_OK : rc;
    if (!preset || !out) {
        fprintf(stderr, "hmoe: synth needs %s\nusage: %s\n(see --help)\n", !preset ? "--preset" : "-o FILE.gguf", usage);
        return HMOE_EXIT_USAGE;
    }
    if (layers < 0 || seed < 0) {
        fprintf(stderr, "hmoe: %s must not be negative\nusage: %s\n", layers < 0 ? "--layers" : "--seed", usage);
        return HMOE_EXIT_USAGE;
    }
    struct hmoe_err err = {0};
    struct hmoe_synth_opts o = {.preset = preset, .mix = mix, .n_layers = (uint32_t)layers, .seed = (uint64_t)seed,
                                .vocab_path = vocab};
    if (hmoe_synth_parse_routing(routing, &o.routing, &err) != HMOE_OK) return hmoe_cli_fail(&err);
    struct hmoe_synth_plan plan;
    if (hmoe_synth_plan_init(&plan, &o, &err) != HMOE_OK) return hmoe_cli_fail(&err);
    if (!quiet) print_summary(&plan, out);

    struct sigaction sa, old_sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_sa);
    struct progress_ctx pc;
    hmoe_progress_init(&pc.bar, "synth", plan.data_bytes, !quiet && hmoe_progress_stderr_is_tty());
    double t0 = hmoe_time_s();
    enum hmoe_status st = hmoe_synth_write(&plan, out, on_progress, &pc, &err);
    double dt = hmoe_time_s() - t0;
    if (st == HMOE_OK) hmoe_progress_finish(&pc.bar, plan.data_bytes);
    else if (pc.bar.drawn) fputc('\n', stderr);
    sigaction(SIGINT, &old_sa, NULL);
    uint64_t bytes = plan.data_bytes;
    hmoe_synth_plan_free(&plan);
    if (st != HMOE_OK) return hmoe_cli_fail(&err);
    if (!quiet) printf("wrote %s in %.1f s (%.0f MB/s)\n", out, dt, dt > 0 ? (double)bytes / dt / 1e6 : 0.0);
    return HMOE_EXIT_OK;
}
