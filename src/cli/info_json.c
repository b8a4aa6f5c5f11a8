/* info_json.c — `hmoe info --json`: one JSON object whose "metadata" and "tensors" use the
 * conventions of shared/fixtures/models/manifest.json (values as stored, type names as
 * ggml spells them, ne as stored with n_dims entries), so the two can be compared key by
 * key. Floats: f32 values are widened to double and printed with %.17g, which parses back
 * to the same double the manifest holds; non-finite values become null (JSON has none).
 * Arrays longer than 1024 elements are summarised as {"type", "element_type", "length"}.
 */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "hmoe/json.h"
#include "info_impl.h"

#define JSON_MAX_ARRAY 1024

static void put_double(FILE *f, double d) {
    if (isfinite(d)) fprintf(f, "%.17g", d);
    else fputs("null", f);
}

static void put_elem(FILE *f, const struct hmoe_gguf_kv *kv, uint64_t i) {
    switch (kv->arr_type) {
    case HMOE_GGUF_STRING: hmoe_json_write_str(f, kv->arr_str[i].ptr, (size_t)kv->arr_str[i].len); break;
    case HMOE_GGUF_F32: case HMOE_GGUF_F64: put_double(f, hmoe_gguf_arr_f64(kv, i)); break;
    case HMOE_GGUF_BOOL: fputs(hmoe_gguf_arr_i64(kv, i) ? "true" : "false", f); break;
    case HMOE_GGUF_U64: fprintf(f, "%" PRIu64, (uint64_t)hmoe_gguf_arr_i64(kv, i)); break;
    default: fprintf(f, "%" PRId64, hmoe_gguf_arr_i64(kv, i)); break;
    }
}

static void put_value(FILE *f, const struct hmoe_gguf_kv *kv) {
    switch (kv->type) {
    case HMOE_GGUF_U8: case HMOE_GGUF_U16: case HMOE_GGUF_U32: case HMOE_GGUF_U64:
        fprintf(f, "%" PRIu64, kv->v.u64);
        break;
    case HMOE_GGUF_I8: case HMOE_GGUF_I16: case HMOE_GGUF_I32: case HMOE_GGUF_I64:
        fprintf(f, "%" PRId64, kv->v.i64);
        break;
    case HMOE_GGUF_F32: case HMOE_GGUF_F64: put_double(f, kv->v.f64); break;
    case HMOE_GGUF_BOOL: fputs(kv->v.b ? "true" : "false", f); break;
    case HMOE_GGUF_STRING: hmoe_json_write_str(f, kv->v.str.ptr, (size_t)kv->v.str.len); break;
    case HMOE_GGUF_ARRAY:
        if (kv->arr_n > JSON_MAX_ARRAY) {
            fprintf(f, "{\"type\": \"array\", \"element_type\": \"%s\", \"length\": %" PRIu64 "}",
                    hmoe_gguf_vtype_name(kv->arr_type), kv->arr_n);
            break;
        }
        fputc('[', f);
        for (uint64_t i = 0; i < kv->arr_n; i++) {
            if (i) fputs(", ", f);
            put_elem(f, kv, i);
        }
        fputc(']', f);
        break;
    default: fputs("null", f); break;
    }
}

/* "key": value pairs of the records whose key does / does not start with "tokenizer.". */
static void put_group(FILE *f, const struct hmoe_gguf *g, bool tokenizer) {
    bool first = true;
    fputc('{', f);
    for (uint64_t i = 0; i < g->n_kv; i++) {
        const struct hmoe_gguf_kv *kv = &g->kv[i];
        if ((strncmp(kv->key, "tokenizer.", 10) == 0) != tokenizer) continue;
        fputs(first ? "\n    " : ",\n    ", f);
        first = false;
        hmoe_json_write_str(f, kv->key, strlen(kv->key));
        fputs(": ", f);
        put_value(f, kv);
    }
    fputs(first ? "}" : "\n  }", f);
}

static void put_u64_list(FILE *f, const uint64_t *v, uint32_t n) {
    fputc('[', f);
    for (uint32_t i = 0; i < n; i++) fprintf(f, "%s%" PRIu64, i ? ", " : "", v[i]);
    fputc(']', f);
}

static void put_opt_i64(FILE *f, int64_t v) {
    if (v >= 0) fprintf(f, "%" PRId64, v);
    else fputs("null", f);
}

void hmoe_info_print_json(FILE *f, const struct hmoe_gguf *g, const struct hmoe_info_stats *s) {
    struct hmoe_gguf_str nm;
    uint64_t ft;
    fputs("{\n  \"file\": ", f);
    hmoe_json_write_str(f, g->path, strlen(g->path));
    fprintf(f, ",\n  \"size_bytes\": %" PRIu64 ",\n  \"gguf_version\": %u", hmoe_gguf_disk_bytes(g), g->version);
    /* a split model's files in shard order; [] for one file */
    fputs(",\n  \"shards\": [", f);
    for (uint32_t i = 0; g->n_shards > 1 && i < g->n_shards; i++) {
        fputs(i ? ", {\"path\": " : "{\"path\": ", f);
        hmoe_json_write_str(f, g->shards[i].path, strlen(g->shards[i].path));
        fprintf(f, ", \"size_bytes\": %" PRIu64 ", \"n_tensors\": %" PRIu64 "}", g->shards[i].size,
                g->shards[i].n_tensors);
    }
    fputc(']', f);
    fprintf(f, ",\n  \"alignment\": %u,\n  \"data_start\": %" PRIu64, g->alignment, g->data_start);
    fputs(",\n  \"architecture\": ", f);
    if (s->arch) hmoe_json_write_str(f, s->arch, strlen(s->arch));
    else fputs("null", f);
    fputs(",\n  \"name\": ", f);
    if (hmoe_gguf_get_str(g, "general.name", &nm, NULL) == HMOE_OK) hmoe_json_write_str(f, nm.ptr, (size_t)nm.len);
    else fputs("null", f);
    if (hmoe_gguf_get_u64(g, "general.file_type", &ft, NULL) == HMOE_OK)
        fprintf(f, ",\n  \"file_type\": %" PRIu64 ",\n  \"file_type_name\": \"%s\"", ft, hmoe_info_ftype_name(ft));
    else fputs(",\n  \"file_type\": null,\n  \"file_type_name\": null", f);
    fputs(",\n  \"metadata\": ", f);
    put_group(f, g, false);
    fputs(",\n  \"tokenizer\": ", f);
    put_group(f, g, true);
    fputs(",\n  \"n_vocab\": ", f);
    put_opt_i64(f, s->n_vocab);
    fprintf(f, ",\n  \"n_tensors\": %" PRIu64 ",\n  \"tensors\": [", g->n_tensors);
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const struct hmoe_gguf_tensor *t = &g->tensors[i];
        fputs(i ? ",\n    {\"name\": " : "\n    {\"name\": ", f);
        hmoe_json_write_str(f, t->name, strlen(t->name));
        fprintf(f, ", \"type\": \"%s\", \"ne\": [", hmoe_type_name(t->type));
        for (uint32_t d = 0; d < t->n_dims; d++) fprintf(f, "%s%" PRId64, d ? ", " : "", t->ne[d]);
        fprintf(f, "], \"n_bytes\": %" PRIu64 ", \"offset\": %" PRIu64 "}", t->n_bytes, t->offset);
    }
    fputs(g->n_tensors ? "\n  ],\n  \"type_histogram\": {" : "],\n  \"type_histogram\": {", f);
    bool first = true;
    for (int t = 0; t < HMOE_TYPE_COUNT; t++) {
        if (!s->type_count[t]) continue;
        fprintf(f, "%s\"%s\": {\"count\": %" PRIu64 ", \"bytes\": %" PRIu64 "}", first ? "" : ", ",
                hmoe_type_name((uint32_t)t), s->type_count[t], s->type_bytes[t]);
        first = false;
    }
    fprintf(f, "},\n  \"total_tensor_bytes\": %" PRIu64, s->total_tensor_bytes);
    fprintf(f, ",\n  \"mtp_layers\": %u, \"mtp_bytes\": %" PRIu64 ", \"mtp_used\": false", s->n_mtp, s->mtp_bytes);
    if (s->is_moe) {
        fputs(",\n  \"moe\": {\"n_expert\": ", f);
        put_opt_i64(f, s->n_expert);
        fputs(", \"n_expert_used\": ", f);
        put_opt_i64(f, s->n_expert_used);
        fprintf(f, ", \"n_layer\": %u, \"expert_bytes_total\": %" PRIu64 ", \"non_expert_bytes\": %" PRIu64, s->n_layer,
                s->expert_bytes_total, s->non_expert_bytes);
        fputs(",\n    \"expert_bytes_per_layer\": ", f);
        put_u64_list(f, s->expert_bytes_per_layer, s->n_layer);
        fputs(",\n    \"bytes_per_expert_per_layer\": ", f);
        put_u64_list(f, s->bytes_per_expert_per_layer, s->n_layer);
        fprintf(f, ",\n    \"token_embd_row_bytes\": %" PRIu64 ", \"tied_output\": %s, \"active_bytes_per_token\": ",
                s->token_embd_row_bytes, s->tied_output ? "true" : "false");
        put_opt_i64(f, s->active_bytes_per_token);
        fputc('}', f);
    } else {
        fputs(",\n  \"moe\": null", f);
    }
    fputs("\n}\n", f);
}
