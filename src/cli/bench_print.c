/* bench_print.c — `hmoe bench` output in llama-bench's four formats: a markdown table
 * (model, size, params, backend, threads, test "pp512 @ d1024", t/s "mean ± stddev"), a JSON
 * array, JSON lines and CSV with llama-bench's field names (avg_ts, stddev_ts, samples_ts, ...)
 * followed by hmoe's own (ram_gbps, roofline_pct, vram_*, cache_hit_rate, pcie_gbps, and for hybrid
 * decode cpu_expert_gbps, handoff_in_us, handoff_out_us; not in the md table). Rows
 * stream out as tests finish. Not-applicable values: null / "" / "-" (bench_impl.h).
 */
#include <inttypes.h>
#include <stddef.h>
#include <string.h>

#include "bench_impl.h"
#include "hmoe/json.h"

bool hmoe_bench_format_from_name(const char *name, enum hmoe_bench_format *out) {
    static const struct {
        const char *name;
        enum hmoe_bench_format fmt;
    } names[] = {{"md", HMOE_BENCH_MD}, {"json", HMOE_BENCH_JSON}, {"jsonl", HMOE_BENCH_JSONL}, {"csv", HMOE_BENCH_CSV}};
    for (size_t i = 0; i < HMOE_ARRAY_LEN(names); i++)
        if (strcmp(name, names[i].name) == 0) {
            *out = names[i].fmt;
            return true;
        }
    return false;
}

/* ---- markdown ---------------------------------------------------------------------------- */

static const char *md_head[] = {"model", "size", "params", "backend", "threads", "n_ubatch", "test", "t/s",
                                "RAM GB/s", "roofline", "VRAM budget", "VRAM peak", "cache hit", "PCIe GB/s"};
static const int md_width[] = {30, 10, 10, 7, 7, 8, 15, 20, 8, 8, 11, 9, 9, 9};
static const bool md_left[] = {true, false, false, true, false, false, false, false,
                               false, false, false, false, false, false};

static void md_line(struct hmoe_bench_printer *p, char cells[][160]) {
    for (size_t i = 0; i < HMOE_ARRAY_LEN(md_head); i++) {
        if (i == 5 && !p->show_ubatch) continue;
        fprintf(p->f, md_left[i] ? "| %-*s " : "| %*s ", md_width[i], cells[i]);
    }
    fprintf(p->f, "|\n");
}

static void md_begin(struct hmoe_bench_printer *p) {
    char cells[HMOE_ARRAY_LEN(md_head)][160];
    for (size_t i = 0; i < HMOE_ARRAY_LEN(md_head); i++) snprintf(cells[i], 160, "%s", md_head[i]);
    md_line(p, cells);
    for (size_t i = 0; i < HMOE_ARRAY_LEN(md_head); i++) {
        if (i == 5 && !p->show_ubatch) continue;
        fprintf(p->f, "| ");
        for (int k = 0; k < md_width[i] - 1; k++) fputc('-', p->f);
        fprintf(p->f, md_left[i] ? "- " : ": ");
    }
    fprintf(p->f, "|\n");
}

static void fmt_na(char *cell, double v, const char *fmt) {
    if (v < 0) snprintf(cell, 160, "-");
    else snprintf(cell, 160, fmt, v);
}

static void md_row(struct hmoe_bench_printer *p, const struct hmoe_bench_result *r) {
    char c[HMOE_ARRAY_LEN(md_head)][160];
    const double gib = 1024.0 * 1024.0 * 1024.0;
    snprintf(c[0], 160, "%s", r->model_type);
    if (r->model_size >= (uint64_t)1 << 30) snprintf(c[1], 160, "%.2f GiB", (double)r->model_size / gib);
    else snprintf(c[1], 160, "%.2f MiB", (double)r->model_size / (1024.0 * 1024.0));
    const double np = (double)r->model_n_params;
    if (np >= 1e9) snprintf(c[2], 160, "%.2f B", np / 1e9);
    else if (np >= 1e6) snprintf(c[2], 160, "%.2f M", np / 1e6);
    else snprintf(c[2], 160, "%.2f K", np / 1e3);
    snprintf(c[3], 160, "%s", r->backends);
    snprintf(c[4], 160, "%d", r->n_threads);
    snprintf(c[5], 160, "%d", r->n_ubatch);
    char test[40];
    if (r->n_prompt > 0) snprintf(test, sizeof test, "pp%d", r->n_prompt);
    else snprintf(test, sizeof test, "tg%d", r->n_gen);
    if (r->n_depth > 0) snprintf(c[6], 160, "%s @ d%d", test, r->n_depth);
    else snprintf(c[6], 160, "%s", test);
    snprintf(c[7], 160, "%.2f ± %.2f", r->avg_ts, r->stddev_ts);
    fmt_na(c[8], r->ram_gbps, "%.1f");
    fmt_na(c[9], r->roofline_pct, "%.0f%%");
    fmt_na(c[10], r->vram_budget_mib, "%.0f MiB");
    fmt_na(c[11], r->vram_peak_mib, "%.0f MiB");
    fmt_na(c[12], r->cache_hit_rate < 0 ? -1 : r->cache_hit_rate * 100, "%.1f%%");
    fmt_na(c[13], r->pcie_gbps, "%.1f");
    md_line(p, c);
}

/* ---- json / jsonl / csv: one field list --------------------------------------------------- */

enum kind { K_STR, K_U64, K_INT, K_BOOL, K_NUM, K_NUM_NA, K_SAMPLES_NS, K_SAMPLES_TS };
struct field {
    const char *name;
    enum kind kind;
    size_t off;
};
#define F(name, kind) {#name, kind, offsetof(struct hmoe_bench_result, name)}
static const struct field fields[] = {
    F(build_commit, K_STR),      F(build_number, K_INT),
    F(cpu_info, K_STR),          F(gpu_info, K_STR),          F(backends, K_STR),
    F(model_filename, K_STR),    F(model_type, K_STR),        F(model_size, K_U64),
    F(model_n_params, K_U64),    F(n_batch, K_INT),           F(n_ubatch, K_INT),
    F(n_threads, K_INT),         F(type_k, K_STR),            F(type_v, K_STR),
    F(n_gpu_layers, K_INT),      F(n_prompt, K_INT),          F(n_gen, K_INT),
    F(n_depth, K_INT),           F(test_time, K_STR),         F(avg_ns, K_NUM),
    F(stddev_ns, K_NUM),         F(avg_ts, K_NUM),            F(stddev_ts, K_NUM),
    F(samples_ns, K_SAMPLES_NS), F(samples_ts, K_SAMPLES_TS), F(ram_read_gbps, K_NUM_NA),
    F(h2d_gbps, K_NUM_NA),       F(bytes_per_token, K_NUM_NA), F(ram_gbps, K_NUM_NA),
    F(roofline_pct, K_NUM_NA),   F(vram_budget_mib, K_NUM_NA), F(vram_peak_mib, K_NUM_NA),
    F(cache_hit_rate, K_NUM_NA), F(pcie_gbps, K_NUM_NA),     F(cpu_expert_gbps, K_NUM_NA),
    F(handoff_in_us, K_NUM_NA),  F(handoff_out_us, K_NUM_NA), F(rss_peak_mib, K_NUM),
    F(pinned_mib, K_NUM),        F(vram_plan_mib, K_NUM_NA),  F(vram_context_mib, K_NUM_NA),
    F(vram_reserve_mib, K_NUM_NA), F(vram_kv_mib, K_NUM_NA),  F(vram_resident_mib, K_NUM_NA),
    F(vram_cache_mib, K_NUM_NA), F(vram_cache_slots, K_NUM_NA), F(vram_buffers_mib, K_NUM_NA),
    F(vram_device_peak_mib, K_NUM_NA),
    F(hbm_gbps, K_NUM_NA),       F(cpu_roofline_pct, K_NUM_NA),
    F(gpu_roofline_pct, K_NUM_NA),
};
#undef F

static const char *field_str(const struct hmoe_bench_result *r, const struct field *f) {
    /* model_type is an array in the struct, the other strings are pointers */
    if (strcmp(f->name, "model_type") == 0) return r->model_type;
    if (strcmp(f->name, "test_time") == 0) return r->test_time;
    const char *s = *(const char *const *)((const char *)r + f->off);
    return s ? s : "";
}

static void json_value(FILE *o, const struct hmoe_bench_result *r, const struct field *f) {
    const char *base = (const char *)r + f->off;
    switch (f->kind) {
    case K_STR: {
        const char *s = field_str(r, f);
        hmoe_json_write_str(o, s, strlen(s));
        break;
    }
    case K_U64: fprintf(o, "%" PRIu64, *(const uint64_t *)base); break;
    case K_INT: fprintf(o, "%d", *(const int *)base); break;
    case K_BOOL: fprintf(o, "%s", *(const bool *)base ? "true" : "false"); break;
    case K_NUM: fprintf(o, "%.6f", *(const double *)base); break;
    case K_NUM_NA:
        if (*(const double *)base < 0) fprintf(o, "null");
        else fprintf(o, "%.6f", *(const double *)base);
        break;
    case K_SAMPLES_NS:
        fprintf(o, "[");
        for (int i = 0; i < r->n_samples; i++) fprintf(o, "%s%" PRIu64, i ? ", " : " ", r->samples_ns[i]);
        fprintf(o, " ]");
        break;
    case K_SAMPLES_TS:
        fprintf(o, "[");
        for (int i = 0; i < r->n_samples; i++) fprintf(o, "%s%g", i ? ", " : " ", r->samples_ts[i]);
        fprintf(o, " ]");
        break;
    }
}

static void json_object(FILE *o, const struct hmoe_bench_result *r, bool pretty) {
    fprintf(o, pretty ? "  {\n" : "{");
    for (size_t i = 0; i < HMOE_ARRAY_LEN(fields); i++) {
        fprintf(o, pretty ? "    \"%s\": " : "\"%s\": ", fields[i].name);
        json_value(o, r, &fields[i]);
        if (i + 1 < HMOE_ARRAY_LEN(fields)) fprintf(o, pretty ? ",\n" : ", ");
    }
    fprintf(o, pretty ? "\n  }" : "}\n");
}

/* CSV as llama-bench writes it: every value in double quotes, quotes doubled. */
static void csv_quoted(FILE *o, const char *s) {
    fputc('"', o);
    for (; *s; s++) {
        if (*s == '"') fputc('"', o);
        fputc(*s, o);
    }
    fputc('"', o);
}

static void csv_row(FILE *o, const struct hmoe_bench_result *r) {
    for (size_t i = 0; i < HMOE_ARRAY_LEN(fields); i++) {
        const struct field *f = &fields[i];
        if (f->kind == K_SAMPLES_NS || f->kind == K_SAMPLES_TS) continue; /* llama-bench's csv has no samples */
        if (i) fputc(',', o);
        char buf[160];
        const char *base = (const char *)r + f->off;
        switch (f->kind) {
        case K_STR: csv_quoted(o, field_str(r, f)); continue;
        case K_U64: snprintf(buf, sizeof buf, "%" PRIu64, *(const uint64_t *)base); break;
        case K_INT: snprintf(buf, sizeof buf, "%d", *(const int *)base); break;
        case K_BOOL: snprintf(buf, sizeof buf, "%d", *(const bool *)base); break;
        case K_NUM: snprintf(buf, sizeof buf, "%.6f", *(const double *)base); break;
        default:
            if (*(const double *)base < 0) buf[0] = 0;
            else snprintf(buf, sizeof buf, "%.6f", *(const double *)base);
        }
        csv_quoted(o, buf);
    }
    fputc('\n', o);
}

void hmoe_bench_print_begin(struct hmoe_bench_printer *p) {
    p->n_rows = 0;
    switch (p->fmt) {
    case HMOE_BENCH_MD: md_begin(p); break;
    case HMOE_BENCH_JSON: fprintf(p->f, "["); break;
    case HMOE_BENCH_JSONL: break;
    case HMOE_BENCH_CSV: {
        bool first = true;
        for (size_t i = 0; i < HMOE_ARRAY_LEN(fields); i++) {
            if (fields[i].kind == K_SAMPLES_NS || fields[i].kind == K_SAMPLES_TS) continue;
            fprintf(p->f, "%s%s", first ? "" : ",", fields[i].name);
            first = false;
        }
        fputc('\n', p->f);
        break;
    }
    }
    fflush(p->f);
}

void hmoe_bench_print_row(struct hmoe_bench_printer *p, const struct hmoe_bench_result *r) {
    switch (p->fmt) {
    case HMOE_BENCH_MD: md_row(p, r); break;
    case HMOE_BENCH_JSON:
        fprintf(p->f, p->n_rows ? ",\n" : "\n");
        json_object(p->f, r, true);
        break;
    case HMOE_BENCH_JSONL: json_object(p->f, r, false); break;
    case HMOE_BENCH_CSV: csv_row(p->f, r); break;
    }
    p->n_rows++;
    fflush(p->f);
}

void hmoe_bench_print_end(struct hmoe_bench_printer *p) {
    if (p->fmt == HMOE_BENCH_JSON) fprintf(p->f, p->n_rows ? "\n]\n" : "]\n");
    fflush(p->f);
}
