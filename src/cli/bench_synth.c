/* bench_synth.c — the model `hmoe bench` measures when no -m is given: a synthetic GGUF
 * (synth.h: the real layout and type mix, random weights) written to a temporary file. The
 * number of layers is sized to this machine: as many of the preset's layers as fit both in
 * the free disk space and in available memory (a file larger than memory would measure the
 * disk, not the engine), and the user is told when the shape was cut.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_impl.h"
#include "hmoe/progress.h"
#include "hmoe/synth.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

static volatile sig_atomic_t interrupted;
static void on_sigint(int sig) {
    (void)sig;
    interrupted = 1;
}
static bool on_progress(void *ctx, uint64_t done_bytes, uint64_t total_bytes) {
    (void)total_bytes;
    hmoe_progress_update(ctx, done_bytes);
    return !interrupted;
}

/* Bytes of tensor data of `preset` with n layers (0 on error, printed). */
static uint64_t plan_bytes(const char *preset, uint32_t n) {
    struct hmoe_synth_opts o = {.preset = preset, .n_layers = n, .seed = 1};
    struct hmoe_synth_plan plan;
    struct hmoe_err err = {0};
    if (hmoe_synth_plan_init(&plan, &o, &err) != HMOE_OK) {
        hmoe_cli_fail(&err);
        return 0;
    }
    uint64_t b = plan.data_bytes;
    hmoe_synth_plan_free(&plan);
    return b;
}

int hmoe_bench_synth_write(const char *preset, int n_layers, const char *out_path, bool quiet, char *path,
                           size_t path_size) {
    const struct hmoe_synth_preset *p = hmoe_synth_find_preset(preset);
    if (!p) {
        fprintf(stderr, "hmoe: unknown --synthetic preset '%s' (valid: %s)\n", preset, hmoe_synth_preset_names());
        return HMOE_EXIT_USAGE;
    }
    if (n_layers < 0 || n_layers > (int)p->n_layer) {
        fprintf(stderr, "hmoe: --synthetic-layers must be 1..%u for %s\n", p->n_layer, preset);
        return HMOE_EXIT_USAGE;
    }
    const char *dir = getenv("TMPDIR");
    if (!dir || !*dir) dir = "/tmp";
    if (out_path) snprintf(path, path_size, "%s", out_path);
    else snprintf(path, path_size, "%s/hmoe-bench-XXXXXX.gguf", dir);

    /* Size: fixed part (embeddings, output) + per-layer part, from two plans. */
    const uint64_t one = plan_bytes(preset, 1), two = p->n_layer > 1 ? plan_bytes(preset, 2) : one;
    if (!one || !two) return HMOE_EXIT_ERROR;
    const uint64_t per_layer = two - one, fixed = one - per_layer;
    char check_dir[4096];
    snprintf(check_dir, sizeof check_dir, "%s", path);
    char *slash = strrchr(check_dir, '/');
    if (slash) *(slash == check_dir ? slash + 1 : slash) = 0;
    else snprintf(check_dir, sizeof check_dir, ".");
    const uint64_t disk = hmoe_cli_disk_free_bytes(check_dir), mem = hmoe_cli_mem_available_bytes();
    /* Keep 1 GiB of disk and a quarter of memory (KV cache, buffers, everything else). */
    uint64_t room = UINT64_MAX;
    if (disk) room = disk > ((uint64_t)1 << 30) ? disk - ((uint64_t)1 << 30) : 0;
    if (mem) room = HMOE_MIN(room, mem / 4 * 3);
    const uint64_t max_layers = room > fixed && per_layer ? (room - fixed) / per_layer : 0;
    uint32_t layers = n_layers ? (uint32_t)n_layers : (uint32_t)HMOE_MIN(max_layers, (uint64_t)p->n_layer);
    const uint64_t need = fixed + per_layer * (layers ? layers : 1);
    if (layers == 0 || need > room) {
        fprintf(stderr,
                "hmoe: error: not enough room for a synthetic %s model: %u layer%s need %.2f GiB but %s has %.2f GiB "
                "free and %.2f GiB of memory is available; %s\n",
                preset, layers ? layers : 1, layers == 1 ? "" : "s", (double)need / GIB, check_dir, (double)disk / GIB,
                (double)mem / GIB,
                max_layers ? "use fewer --synthetic-layers" : "use --synthetic tiny, or set TMPDIR to a larger disk");
        return HMOE_EXIT_ERROR;
    }
    if (!quiet && !n_layers && layers < p->n_layer)
        fprintf(stderr, "bench: %s has %u layers (%.1f GiB); %u fit in this machine's free memory and disk "
                        "(--synthetic-layers N to choose)\n",
                preset, p->n_layer, (double)(fixed + per_layer * p->n_layer) / GIB, layers);

    struct hmoe_synth_opts o = {.preset = preset, .n_layers = layers, .seed = 1};
    struct hmoe_synth_plan plan;
    struct hmoe_err err = {0};
    if (hmoe_synth_plan_init(&plan, &o, &err) != HMOE_OK) return hmoe_cli_fail(&err);
    if (!out_path) {
        int fd = mkstemps(path, 5);
        if (fd < 0) {
            fprintf(stderr, "hmoe: error: cannot create a temporary file in %s (set TMPDIR to a writable directory)\n",
                    dir);
            hmoe_synth_plan_free(&plan);
            return HMOE_EXIT_ERROR;
        }
        close(fd);
    }
    if (!quiet)
        fprintf(stderr, "bench: writing a synthetic %s model (%u of %u layers, %s, %.2f GiB, random weights) to %s\n",
                preset, layers, p->n_layer, hmoe_synth_mix_name(plan.mix), (double)plan.data_bytes / GIB, path);
    struct sigaction sa, old_sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_sa);
    struct hmoe_progress bar;
    hmoe_progress_init(&bar, "synth", plan.data_bytes, !quiet && hmoe_progress_stderr_is_tty());
    enum hmoe_status st = hmoe_synth_write(&plan, path, on_progress, &bar, &err);
    if (st == HMOE_OK) hmoe_progress_finish(&bar, plan.data_bytes);
    else if (bar.drawn) fputc('\n', stderr);
    sigaction(SIGINT, &old_sa, NULL);
    hmoe_synth_plan_free(&plan);
    if (st != HMOE_OK) {
        if (!out_path) unlink(path); /* synth removes its partial file; the empty temp file is ours */
        return hmoe_cli_fail(&err);
    }
    return HMOE_EXIT_OK;
}
