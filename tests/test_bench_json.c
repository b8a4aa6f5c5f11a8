/* test_bench_json.c — `hmoe bench` output parsed with hmoe's own JSON reader: every
 * documented llama-bench field and hmoe column is there with its type; the numbers agree with
 * each other (t/s from the samples, bytes per token from the model file's tensor sizes and
 * KV shape read here with the GGUF reader, RAM GB/s and roofline from those); jsonl, csv and
 * md carry the same tests; the synthetic default writes and removes its temporary file;
 * bad formats, presets and sizes are refused with a message. Runs ./hmoe from the repo root.
 */
#include <dirent.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "hmoe/gguf.h"
#include "hmoe/json.h"

#include "cli/bench_impl.h"

/* Run a shell command; stdout in a malloc'd string, exit status in *rc. */
static char *run(const char *cmd, int *rc) {
    FILE *p = popen(cmd, "r");
    if (!p) {
        *rc = -1;
        return strdup("");
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    for (size_t got; (got = fread(buf + n, 1, cap - n - 1, p)) > 0;) {
        n += got;
        if (n + 1 == cap) buf = realloc(buf, cap *= 2);
    }
    buf[n] = 0;
    int st = pclose(p);
    *rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    return buf;
}

static bool near(double a, double b, double rel) { return fabs(a - b) <= rel * fabs(b) + 1e-12; }

static const char *const str_fields[] = {"build_commit", "cpu_info", "gpu_info", "backends", "model_filename", "model_type",
                                         "type_k", "type_v", "test_time"};
static const char *const num_fields[] = {"build_number", "model_size", "model_n_params", "n_batch", "n_ubatch", "n_threads",
                                         "n_gpu_layers", "n_prompt", "n_gen", "n_depth", "avg_ns", "stddev_ns",
                                         "avg_ts", "stddev_ts", "ram_read_gbps", "rss_peak_mib", "pinned_mib"};
static const char *const na_fields[] = {"h2d_gbps", "bytes_per_token", "ram_gbps", "roofline_pct",
                                        "vram_budget_mib", "vram_peak_mib", "cache_hit_rate", "pcie_gbps",
                                        "cpu_expert_gbps", "handoff_in_us", "handoff_out_us", "vram_plan_mib",
                                        "vram_context_mib", "vram_reserve_mib", "vram_kv_mib", "vram_resident_mib",
                                        "vram_cache_mib", "vram_cache_slots", "vram_buffers_mib", "vram_device_peak_mib", "hbm_gbps",
                                        "cpu_roofline_pct", "gpu_roofline_pct"};

/* Every documented field present with its JSON type; returns the first problem or NULL. */
static const char *check_fields(const struct hmoe_json *o, char *why, size_t why_size) {
    for (size_t i = 0; i < HMOE_ARRAY_LEN(str_fields); i++) {
        const struct hmoe_json *v = hmoe_json_get(o, str_fields[i]);
        if (!v || v->kind != HMOE_JSON_STRING) return snprintf(why, why_size, "%s not a string", str_fields[i]), why;
    }
    for (size_t i = 0; i < HMOE_ARRAY_LEN(num_fields); i++) {
        const struct hmoe_json *v = hmoe_json_get(o, num_fields[i]);
        if (!v || v->kind != HMOE_JSON_NUMBER) return snprintf(why, why_size, "%s not a number", num_fields[i]), why;
    }
    for (size_t i = 0; i < HMOE_ARRAY_LEN(na_fields); i++) {
        const struct hmoe_json *v = hmoe_json_get(o, na_fields[i]);
        if (!v || (v->kind != HMOE_JSON_NUMBER && v->kind != HMOE_JSON_NULL))
            return snprintf(why, why_size, "%s not a number or null", na_fields[i]), why;
    }
    const char *arrays[] = {"samples_ns", "samples_ts"};
    for (size_t i = 0; i < 2; i++) {
        const struct hmoe_json *v = hmoe_json_get(o, arrays[i]);
        if (!v || v->kind != HMOE_JSON_ARRAY || v->n != 1 || v->items[0]->kind != HMOE_JSON_NUMBER)
            return snprintf(why, why_size, "%s not an array of one number", arrays[i]), why;
    }
    return NULL;
}

static uint32_t meta_u32(const struct hmoe_gguf *g, const char *key) { return hmoe_gguf_get_u32_or(g, key, 0); }

/* The split rooflines of a GPU tg row: the CPU part against the RAM probe, the GPU part (the
 * bytes left after the CPU's missed experts) against the HBM copy rate. */
static void check_split_rooflines(void) {
    /* hybrid: 1 GB per token at 50 t/s; the CPU reads 80 GB/s for 2 ms per token = 0.16 GB */
    struct hmoe_bench_result h = {.bytes_per_token = 1e9, .avg_ts = 50, .ram_read_gbps = 100, .hbm_gbps = 4000,
                                  .roofline_pct = 500};
    hmoe_bench_split_rooflines(&h, 80, 2);
    t_check(near(h.cpu_roofline_pct, 80, 1e-12) && near(h.gpu_roofline_pct, 0.84e9 * 50 / 1e9 / 4000 * 100, 1e-12) &&
                near(h.roofline_pct, 80, 1e-12),
            "bench: hybrid tg roofline_pct = the CPU part (cpu_expert_gbps / RAM probe), GPU part against HBM",
            "cpu %g gpu %g roofline %g", h.cpu_roofline_pct, h.gpu_roofline_pct, h.roofline_pct);
    /* all on the GPU: no CPU part; no HBM probe: no GPU part either */
    struct hmoe_bench_result g = {.bytes_per_token = 1e9, .avg_ts = 50, .ram_read_gbps = 100, .hbm_gbps = 4000};
    hmoe_bench_split_rooflines(&g, 0, 0);
    struct hmoe_bench_result n = {.bytes_per_token = 1e9, .avg_ts = 50, .ram_read_gbps = 100,
                                  .hbm_gbps = HMOE_BENCH_NA};
    hmoe_bench_split_rooflines(&n, 0, 0);
    t_check(g.cpu_roofline_pct < 0 && near(g.gpu_roofline_pct, 1.25, 1e-12) && near(g.roofline_pct, 1.25, 1e-12) &&
                n.cpu_roofline_pct < 0 && n.gpu_roofline_pct < 0 && n.roofline_pct < 0,
            "bench: all-GPU tg roofline_pct = the GPU part; null without the HBM probe",
            "gpu %g/%g roofline %g/%g", g.gpu_roofline_pct, n.gpu_roofline_pct, g.roofline_pct, n.roofline_pct);
}

int main(void) {
    check_split_rooflines();
    char model[4096];
    snprintf(model, sizeof model, "%s", t_shared("fixtures/models/tiny-qwen3moe-A-Q4_K_M.gguf"));
    char cmd[8192];
    int rc;

    /* Expectations from the file itself. */
    struct hmoe_err err = {0};
    struct hmoe_gguf *g = NULL;
    if (hmoe_gguf_open(model, &g, &err) != HMOE_OK) {
        t_check(0, "bench: model opens", "%s", err.msg);
        return t_summary();
    }
    const double E = meta_u32(g, "qwen3moe.expert_count"), k = meta_u32(g, "qwen3moe.expert_used_count");
    uint64_t size = 0, params = 0;
    double active = 0;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const struct hmoe_gguf_tensor *t = &g->tensors[i];
        size += t->n_bytes;
        params += t->n_elements;
        if (strstr(t->name, "_exps")) active += (double)t->n_bytes * k / E;
        else if (strcmp(t->name, "token_embd.weight") == 0) active += (double)t->nb[1]; /* one row (output is separate) */
        else active += (double)t->n_bytes;
    }
    /* f16 K and V rows for every layer and KV head, per position. */
    const double kv_per_pos = (double)meta_u32(g, "qwen3moe.block_count") * meta_u32(g, "qwen3moe.attention.head_count_kv") *
                              2.0 * (meta_u32(g, "qwen3moe.attention.key_length") + meta_u32(g, "qwen3moe.attention.value_length"));
    hmoe_gguf_free(g);

    /* --gpu off: these checks describe the CPU path; a GPU host would pick the GPU by default. */
    snprintf(cmd, sizeof cmd, "./hmoe bench -m '%s' -p 8 -n 4 -r 1 -t 1 --gpu off -o json -q", model);
    char *out = run(cmd, &rc);
    struct hmoe_json *j = hmoe_json_parse(out, strlen(out), &err);
    t_check(rc == 0 && j && j->kind == HMOE_JSON_ARRAY && j->n == 2, "bench -o json: an array of two results",
            "rc %d, %s: %.300s", rc, j ? "wrong shape" : err.msg, out);
    for (size_t i = 0; j && j->kind == HMOE_JSON_ARRAY && i < j->n && i < 2; i++) {
        const struct hmoe_json *o = j->items[i];
        char why[128], name[128];
        const char *bad = check_fields(o, why, sizeof why);
        snprintf(name, sizeof name, "bench -o json: result %zu has every documented field and type", i);
        t_check(bad == NULL, name, "%s", bad ? bad : "");
        if (bad) continue;
        const bool pp = i == 0;
        const double n_tok = pp ? 8 : 4, avg_ts = hmoe_json_get_num(o, "avg_ts", 0),
                     avg_ns = hmoe_json_get_num(o, "avg_ns", 0);
        snprintf(name, sizeof name, "bench -o json: %s test shape and settings", pp ? "pp8" : "tg4");
        t_check(hmoe_json_get_num(o, "n_prompt", -1) == (pp ? 8 : 0) && hmoe_json_get_num(o, "n_gen", -1) == (pp ? 0 : 4) &&
                    hmoe_json_get_num(o, "n_depth", -1) == 0 && hmoe_json_get_num(o, "n_threads", 0) == 1 &&
                    hmoe_json_get_num(o, "n_ubatch", 0) == 512 &&
                    strcmp(hmoe_json_get_str(o, "model_filename", ""), model) == 0 &&
                    strcmp(hmoe_json_get_str(o, "backends", ""), "CPU") == 0 &&
                    strcmp(hmoe_json_get_str(o, "type_k", ""), "f16") == 0 &&
                    strncmp(hmoe_json_get_str(o, "model_type", ""), "qwen3moe ", 9) == 0,
                name, "%.400s", out);
        snprintf(name, sizeof name, "bench -o json: %s model_size and model_n_params from the file", pp ? "pp8" : "tg4");
        t_check(hmoe_json_get_num(o, "model_size", 0) == (double)size &&
                    hmoe_json_get_num(o, "model_n_params", 0) == (double)params,
                name, "size %.0f vs %llu, params %.0f vs %llu", hmoe_json_get_num(o, "model_size", 0),
                (unsigned long long)size, hmoe_json_get_num(o, "model_n_params", 0), (unsigned long long)params);
        const struct hmoe_json *s_ts = hmoe_json_get(o, "samples_ts"), *s_ns = hmoe_json_get(o, "samples_ns");
        snprintf(name, sizeof name, "bench -o json: %s avg_ts = tokens / avg_ns = samples_ts[0], stddev 0 (-r 1)",
                 pp ? "pp8" : "tg4");
        t_check(avg_ts > 0 && near(avg_ts, n_tok / (avg_ns * 1e-9), 1e-4) && near(avg_ts, s_ts->items[0]->num, 1e-4) &&
                    near(avg_ns, s_ns->items[0]->num, 1e-9) && hmoe_json_get_num(o, "stddev_ts", -1) == 0,
                name, "avg_ts %g avg_ns %g sample %g", avg_ts, avg_ns, s_ts->items[0]->num);
        const char *tt = hmoe_json_get_str(o, "test_time", "");
        snprintf(name, sizeof name, "bench -o json: %s test_time is ISO 8601 UTC", pp ? "pp8" : "tg4");
        t_check(strlen(tt) == 20 && tt[4] == '-' && tt[10] == 'T' && tt[19] == 'Z', name, "'%s'", tt);
        const struct hmoe_json *bpt = hmoe_json_get(o, "bytes_per_token"), *gbps = hmoe_json_get(o, "ram_gbps"),
                               *roof = hmoe_json_get(o, "roofline_pct");
        const double read_gbps = hmoe_json_get_num(o, "ram_read_gbps", 0);
        if (pp)
            t_check(bpt->kind == HMOE_JSON_NULL && gbps->kind == HMOE_JSON_NULL && roof->kind == HMOE_JSON_NULL &&
                        read_gbps > 0,
                    "bench -o json: pp has no bandwidth columns (null), the probe is there", "%.400s", out);
        else {
            /* Mean position of the 4 decodes at depth 0 is 1.5. */
            const double want = active + kv_per_pos * 1.5;
            t_check(bpt->kind == HMOE_JSON_NUMBER && near(bpt->num, want, 1e-9),
                    "bench -o json: tg bytes_per_token = active weights + KV at the mean position",
                    "%g vs %g", bpt->kind == HMOE_JSON_NUMBER ? bpt->num : -1, want);
            t_check(gbps->kind == HMOE_JSON_NUMBER && near(gbps->num, want * avg_ts / 1e9, 1e-5) &&
                        roof->kind == HMOE_JSON_NUMBER && near(roof->num, gbps->num / read_gbps * 100, 1e-5),
                    "bench -o json: tg ram_gbps = bytes_per_token x t/s, roofline_pct = ram_gbps / ram_read_gbps",
                    "%.400s", out);
        }
        const char *gpu[] = {"vram_budget_mib", "vram_peak_mib", "cache_hit_rate", "pcie_gbps", "cpu_expert_gbps",
                             "handoff_in_us", "handoff_out_us", "vram_plan_mib", "vram_context_mib",
                             "vram_kv_mib", "vram_cache_slots", "vram_device_peak_mib"};
        bool nulls = true;
        for (size_t f = 0; f < HMOE_ARRAY_LEN(gpu); f++) nulls &= hmoe_json_get(o, gpu[f])->kind == HMOE_JSON_NULL;
        snprintf(name, sizeof name, "bench -o json: %s GPU columns are null on the CPU path", pp ? "pp8" : "tg4");
        t_check(nulls, name, "%.400s", out);
    }
    hmoe_json_free(j);
    free(out);

    /* jsonl: one object per line. */
    snprintf(cmd, sizeof cmd, "./hmoe bench -m '%s' -p 8 -n 4 -r 1 -t 1 --gpu off -o jsonl -q", model);
    out = run(cmd, &rc);
    int lines = 0, parsed = 0;
    for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
        lines++;
        struct hmoe_json *o = hmoe_json_parse(line, strlen(line), NULL);
        parsed += o && o->kind == HMOE_JSON_OBJECT && hmoe_json_get_num(o, "avg_ts", 0) > 0;
        hmoe_json_free(o);
    }
    t_check(rc == 0 && lines == 2 && parsed == 2, "bench -o jsonl: two lines, each a result object",
            "rc %d, %d lines, %d parsed", rc, lines, parsed);
    free(out);

    /* csv: llama-bench's header names, one row per test, every value quoted. */
    snprintf(cmd, sizeof cmd, "./hmoe bench -m '%s' -p 8 -n 4 -r 1 -t 1 --gpu off -o csv -q", model);
    out = run(cmd, &rc);
    char *nl = strchr(out, '\n');
    int rows = 0;
    for (char *q = out; (q = strchr(q, '\n')); q++) rows++;
    t_check(rc == 0 && nl && rows == 3 && nl[1] == '"' && strncmp(out, "build_commit,build_number,cpu_info,", 35) == 0 &&
                strstr(out, "model_filename,model_type,model_size,model_n_params,n_batch,n_ubatch,n_threads") &&
                strstr(out, "n_prompt,n_gen,n_depth,test_time,avg_ns,stddev_ns,avg_ts,stddev_ts") &&
                strstr(out, "ram_gbps,roofline_pct,vram_budget_mib,vram_peak_mib,cache_hit_rate,pcie_gbps,"
                            "cpu_expert_gbps,handoff_in_us,handoff_out_us,rss_peak_mib,pinned_mib,vram_plan_mib,"
                            "vram_context_mib,vram_reserve_mib,vram_kv_mib,vram_resident_mib,vram_cache_mib,"
                            "vram_cache_slots,vram_buffers_mib,vram_device_peak_mib,hbm_gbps,cpu_roofline_pct,gpu_roofline_pct\n"),
            "bench -o csv: header with llama-bench's and hmoe's names, two quoted rows", "rc %d: %.500s", rc, out);
    free(out);

    /* md with depths: "pp8 @ d16", "t/s" as mean ± stddev, '-' for the GPU columns. */
    snprintf(cmd, sizeof cmd, "./hmoe bench -m '%s' -p 8 -n 4 -d 0,16 -r 2 -t 1 --gpu off -q", model);
    out = run(cmd, &rc);
    t_check(rc == 0 && strstr(out, "| model ") && strstr(out, "t/s |") && strstr(out, "|             pp8 |") &&
                strstr(out, "|             tg4 |") && strstr(out, "|       pp8 @ d16 |") &&
                strstr(out, "|       tg4 @ d16 |") && strstr(out, " ± ") && strstr(out, "|         - |"),
            "bench -o md: llama-bench table with depth tests, mean ± stddev, '-' for GPU columns", "rc %d: %.800s", rc,
            out);
    free(out);

    /* The synthetic default: a temporary file in $TMPDIR, gone afterwards; --synthetic-out keeps it. */
    char dir[] = "/tmp/hmoe-bench-test-XXXXXX";
    if (mkdtemp(dir)) {
        snprintf(cmd, sizeof cmd, "TMPDIR=%s ./hmoe bench --synthetic tiny -p 8 -n 4 -r 1 -t 1 -o json -q", dir);
        out = run(cmd, &rc);
        j = hmoe_json_parse(out, strlen(out), &err);
        const char *fn = j && j->n ? hmoe_json_get_str(j->items[0], "model_filename", "") : "";
        char prefix[128];
        snprintf(prefix, sizeof prefix, "%s/hmoe-bench-", dir);
        t_check(rc == 0 && j && j->n == 2 && strncmp(fn, prefix, strlen(prefix)) == 0,
                "bench --synthetic tiny: benchmarks a temporary model in $TMPDIR", "rc %d: %.300s", rc, out);
        int left = 0;
        DIR *d = opendir(dir);
        for (struct dirent *e; d && (e = readdir(d));) left += e->d_name[0] != '.';
        if (d) closedir(d);
        t_check(left == 0, "bench --synthetic: the temporary model is deleted", "%d files left in %s", left, dir);
        hmoe_json_free(j);
        free(out);
        char keep[4200];
        snprintf(keep, sizeof keep, "%s/kept.gguf", dir);
        snprintf(cmd, sizeof cmd, "./hmoe bench --synthetic-out %s -p 0 -n 2 -r 1 -t 1 -q >/dev/null", keep);
        free(run(cmd, &rc));
        t_check(rc == 0 && access(keep, R_OK) == 0, "bench --synthetic-out FILE keeps the model", "rc %d", rc);
        unlink(keep);
        rmdir(dir);
    }

    /* Refusals. */
    snprintf(cmd, sizeof cmd, "HMOE_MEM_AVAILABLE_MIB=64 ./hmoe bench --synthetic qwen3-30b-a3b -q 2>&1");
    out = run(cmd, &rc);
    t_check(rc == 1 && strstr(out, "not enough room for a synthetic qwen3-30b-a3b model") && strstr(out, "GiB"),
            "bench --synthetic too large for this machine: refused with the sizes", "rc %d: %s", rc, out);
    free(out);
    snprintf(cmd, sizeof cmd, "./hmoe bench -m '%s' -o xml 2>&1", model);
    out = run(cmd, &rc);
    t_check(rc == 2 && strstr(out, "unknown output format 'xml' (use md, json, jsonl or csv)"),
            "bench -o xml: usage error naming the formats", "rc %d: %s", rc, out);
    free(out);
    out = run("./hmoe bench --synthetic huge 2>&1", &rc);
    t_check(rc == 2 && strstr(out, "unknown --synthetic preset 'huge'") && strstr(out, "qwen3-30b-a3b"),
            "bench --synthetic huge: usage error listing the presets", "rc %d: %s", rc, out);
    free(out);
    snprintf(cmd, sizeof cmd, "./hmoe bench -m '%s' -p 8,x 2>&1", model);
    out = run(cmd, &rc);
    t_check(rc == 2 && strstr(out, "bad value '8,x' for -p"), "bench -p 8,x: usage error", "rc %d: %s", rc, out);
    free(out);
    out = run("./hmoe bench --help", &rc);
    t_check(rc == 0 && strstr(out, "usage: hmoe bench") && strstr(out, "roofline_pct") &&
                strstr(out, "null in\n") && strstr(out, "--synthetic"),
            "bench --help documents the columns and the synthetic default", "rc %d", rc);
    free(out);
    return t_summary();
}
