/* bench_impl.h — private to `hmoe bench` (cmd_bench.c, bench_probe.c, bench_print.c,
 * bench_synth.c): one result row in llama-bench's schema plus hmoe's roofline and GPU
 * columns, the start-up bandwidth probes, the four printers and the synthetic default model.
 * A column that does not apply yet (the GPU ones until the hybrid path lands) is negative
 * here and printed as null (json/jsonl), "" (csv) or "-" (md).
 */
#ifndef HMOE_CLI_BENCH_IMPL_H
#define HMOE_CLI_BENCH_IMPL_H

#include "cli.h"

#define HMOE_BENCH_NA (-1.0)

struct hmoe_bench_result {
    /* llama-bench fields (same names in json/csv) */
    const char *build_commit;
    int build_number;
    const char *cpu_info, *gpu_info, *backends;
    const char *model_filename;
    char model_type[128];
    uint64_t model_size, model_n_params;
    int n_batch, n_ubatch, n_threads, n_gpu_layers;
    const char *type_k, *type_v;
    int n_prompt, n_gen, n_depth;
    char test_time[32];
    int n_samples;
    const uint64_t *samples_ns;
    const double *samples_ts;
    double avg_ns, stddev_ns, avg_ts, stddev_ts;
    /* hmoe */
    double ram_read_gbps;   /* probe: RAM read bandwidth with n_threads threads */
    double h2d_gbps;        /* probe: pinned host->device, NA without a GPU */
    double bytes_per_token; /* tg: weights + KV read per token; NA for pp */
    double ram_gbps;        /* tg: bytes_per_token * avg_ts; NA for pp */
    double roofline_pct;    /* tg: ram_gbps / ram_read_gbps * 100 on the CPU; with a GPU the part that
                             * reads RAM (hybrid: cpu_roofline_pct) or else gpu_roofline_pct; NA for pp */
    double vram_budget_mib, vram_peak_mib, cache_hit_rate, pcie_gbps; /* NA until the GPU path */
    /* hybrid tg: CPU expert phase (missed-expert bytes / its time) and the per-layer handoff latency
     * GPU -> CPU and CPU -> GPU (hmoe_ctx_stats); NA elsewhere */
    double cpu_expert_gbps, handoff_in_us, handoff_out_us;
    /* after the test: the process's peak resident set, and the host memory page-locked (for the
     * device's copies plus mlock) */
    double rss_peak_mib, pinned_mib;
    /* GPU: the VRAM plan made at load (total, CUDA context, reserve for what loads on first use, KV
     * cache, resident experts, expert cache and its slots per RAM layer, buffers) and the measured
     * peak of the process on the device (as nvidia-smi counts it); NA on the CPU path */
    double vram_plan_mib, vram_context_mib, vram_reserve_mib, vram_kv_mib, vram_resident_mib, vram_cache_mib,
        vram_cache_slots, vram_buffers_mib, vram_device_peak_mib;
    /* with a GPU: device-to-device copy rate of GPU 0 (HBM read + write bytes per second); tg
     * with a GPU: the CPU part (cpu_expert_gbps / ram_read_gbps) and the GPU part (the bytes the
     * GPU reads per token, i.e. bytes_per_token less the CPU's missed experts, x t/s / hbm_gbps)
     * as percentages; NA elsewhere */
    double hbm_gbps, cpu_roofline_pct, gpu_roofline_pct;
};

/* The split rooflines of a tg row run with a GPU (bytes_per_token, avg_ts, ram_read_gbps and
 * hbm_gbps set): the CPU part from its expert phase (rate and ms per token, 0 when the CPU
 * computed nothing), the GPU part from what is left of bytes_per_token; roofline_pct becomes
 * the CPU part when there is one, else the GPU part (a single RAM-based figure would count
 * the VRAM-resident weights as RAM reads and exceed 100 %). */
static inline void hmoe_bench_split_rooflines(struct hmoe_bench_result *r, double cpu_expert_gbps,
                                              double cpu_expert_ms_per_token) {
    const double cpu_bytes =
        cpu_expert_gbps > 0 && cpu_expert_ms_per_token > 0 ? cpu_expert_gbps * 1e9 * cpu_expert_ms_per_token * 1e-3 : 0;
    r->cpu_roofline_pct = cpu_bytes > 0 && r->ram_read_gbps > 0 ? cpu_expert_gbps / r->ram_read_gbps * 100 : HMOE_BENCH_NA;
    const double gpu_bytes = r->bytes_per_token > cpu_bytes ? r->bytes_per_token - cpu_bytes : 0;
    r->gpu_roofline_pct = r->hbm_gbps > 0 && r->bytes_per_token >= 0 ? gpu_bytes * r->avg_ts / 1e9 / r->hbm_gbps * 100
                                                                      : HMOE_BENCH_NA;
    r->roofline_pct = r->cpu_roofline_pct >= 0 ? r->cpu_roofline_pct : r->gpu_roofline_pct;
}

/* ---- probes (bench_probe.c) --------------------------------------------------------------- */

/* RAM read bandwidth in GB/s (1e9 B/s) with n_threads threads streaming a buffer much larger
 * than the last-level cache (best of a few passes); 0 when the buffer cannot be allocated.
 * *buf_bytes gets the buffer size used. */
double hmoe_bench_probe_ram_gbps(int n_threads, uint64_t *buf_bytes);
/* Pinned host->device GB/s of GPU 0, or HMOE_BENCH_NA without one; *gpu_name gets its name. */
double hmoe_bench_probe_h2d_gbps(char *gpu_name, size_t name_size);
/* Device-to-device copy rate of GPU 0 in GB/s of HBM traffic (read + write), or HMOE_BENCH_NA
 * without one. */
double hmoe_bench_probe_hbm_gbps(void);

/* ---- output (bench_print.c) ---------------------------------------------------------------- */

enum hmoe_bench_format { HMOE_BENCH_MD, HMOE_BENCH_JSON, HMOE_BENCH_JSONL, HMOE_BENCH_CSV };

struct hmoe_bench_printer {
    enum hmoe_bench_format fmt;
    FILE *f;
    int n_rows;
    bool show_ubatch; /* md: n_ubatch column (llama-bench shows non-default parameters) */
};
bool hmoe_bench_format_from_name(const char *name, enum hmoe_bench_format *out);
void hmoe_bench_print_begin(struct hmoe_bench_printer *p);
void hmoe_bench_print_row(struct hmoe_bench_printer *p, const struct hmoe_bench_result *r);
void hmoe_bench_print_end(struct hmoe_bench_printer *p);

/* ---- parallel sequences (bench_batched.c) ------------------------------------------------- */

/* llama-batched-bench's tests for every (-npp, -ntg, -npl) of the model at path, printed in
 * fmt. Returns an exit code (errors printed). */
/* bench_spec.c — `hmoe bench --spec mtp`: the costs of drafting and verifying at depth P, the
 * speed-ups they give at acceptance 0.5 / 0.7 / 0.9 for k = 1 .. n_draft, and a greedy run of
 * n_gen tokens with and without drafts (measured acceptance; the tokens must agree). */
int hmoe_bench_spec(const struct hmoe_cli_model_opts *mo, const char *path, int depth, int n_gen, int n_draft,
                    int reps, bool quiet);
int hmoe_bench_batched(const struct hmoe_cli_model_opts *mo, const char *path, const int *npp, int n_npp,
                       const int *ntg, int n_ntg, const int *npl, int n_npl, enum hmoe_bench_format fmt, bool quiet);

/* ---- synthetic default model (bench_synth.c) ----------------------------------------------- */

/* Write a synthetic model of `preset` (n_layers 0 = as many of the preset's layers as fit in
 * free memory and disk) to out_path when given, else to a temporary file in $TMPDIR (or
 * /tmp) whose name is put in path (the caller deletes it). Prints what it writes unless
 * quiet; progress bar on a terminal. Returns an exit code (errors printed). */
int hmoe_bench_synth_write(const char *preset, int n_layers, const char *out_path, bool quiet, char *path,
                           size_t path_size);

#endif
