/* info_text.c — the human-readable `hmoe info` report: file facts, every metadata key
 * (hyperparameters first, tokenizer arrays summarised as "[array of N strings]"), a
 * tensor-type histogram and, for MoE files, where the bytes are (info_stats.c).
 * f32 values are printed with %.9g (enough to round-trip a float), f64 with %.17g.
 */
#include <inttypes.h>
#include <string.h>

#include "info_impl.h"

#define KEY_W 44 /* key column width */

static void put_str(FILE *f, const char *s, uint64_t len, uint64_t max_chars) {
    fputc('"', f);
    uint64_t i = 0;
    for (; i < len && i < max_chars; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c == '\n') fputs("\\n", f);
        else if (c == '\t') fputs("\\t", f);
        else if (c < 0x20 || c == 0x7f) fprintf(f, "\\x%02x", c);
        else fputc(c, f); /* UTF-8 passes through */
    }
    fputc('"', f);
    if (i < len) fprintf(f, "... (%" PRIu64 " bytes)", len);
}

static void put_elem(FILE *f, const struct hmoe_gguf_kv *kv, uint64_t i) {
    switch (kv->arr_type) {
    case HMOE_GGUF_STRING: put_str(f, kv->arr_str[i].ptr, kv->arr_str[i].len, 40); break;
    case HMOE_GGUF_F32: fprintf(f, "%.9g", hmoe_gguf_arr_f64(kv, i)); break;
    case HMOE_GGUF_F64: fprintf(f, "%.17g", hmoe_gguf_arr_f64(kv, i)); break;
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
    case HMOE_GGUF_F32: fprintf(f, "%.9g", kv->v.f64); break;
    case HMOE_GGUF_F64: fprintf(f, "%.17g", kv->v.f64); break;
    case HMOE_GGUF_BOOL: fputs(kv->v.b ? "true" : "false", f); break;
    case HMOE_GGUF_STRING: put_str(f, kv->v.str.ptr, kv->v.str.len, 100); break;
    case HMOE_GGUF_ARRAY: {
        /* Short arrays (per-layer values, rope sections) inline; vocabularies summarised. */
        uint64_t limit = kv->arr_type == HMOE_GGUF_STRING ? 8 : 32;
        if (kv->arr_n > limit) {
            fprintf(f, "[array of %" PRIu64 " %s]", kv->arr_n,
                    kv->arr_type == HMOE_GGUF_STRING ? "strings" : hmoe_gguf_vtype_name(kv->arr_type));
            break;
        }
        fputc('[', f);
        for (uint64_t i = 0; i < kv->arr_n; i++) {
            if (i) fputs(", ", f);
            put_elem(f, kv, i);
        }
        fputc(']', f);
        break;
    }
    default: fputs("?", f); break;
    }
}

static void put_kv(FILE *f, const struct hmoe_gguf_kv *kv) {
    /* Keys come from the file: control bytes are escaped so they cannot drive the terminal. */
    int w = 0;
    fputs("  ", f);
    for (const unsigned char *k = (const unsigned char *)kv->key; *k; k++)
        w += *k < 0x20 || *k == 0x7f ? fprintf(f, "\\x%02x", *k) : (fputc(*k, f), 1);
    fprintf(f, "%*s ", w < KEY_W ? KEY_W - w : 0, "");
    put_value(f, kv);
    fputc('\n', f);
}

static const char *human(uint64_t n, char *buf, size_t cap) {
    if (n >= ((uint64_t)1 << 30)) snprintf(buf, cap, "%" PRIu64 " bytes (%.2f GiB)", n, (double)n / (1 << 30));
    else snprintf(buf, cap, "%" PRIu64 " bytes (%.2f MiB)", n, (double)n / (1 << 20));
    return buf;
}

void hmoe_info_print_text(FILE *f, const struct hmoe_gguf *g, const struct hmoe_info_stats *s) {
    char b1[64];
    struct hmoe_gguf_str nm;
    uint64_t ft;
    fprintf(f, "%-16s %s\n", "file", g->path);
    fprintf(f, "%-16s %s\n", "size", human(hmoe_gguf_disk_bytes(g), b1, sizeof b1));
    for (uint32_t i = 0; g->n_shards > 1 && i < g->n_shards; i++)
        fprintf(f, "%-16s %u of %u: %s, %s, %" PRIu64 " tensors\n", i ? "" : "shards", i + 1, g->n_shards,
                g->shards[i].path, human(g->shards[i].size, b1, sizeof b1), g->shards[i].n_tensors);
    fprintf(f, "%-16s %u\n", "gguf version", g->version);
    fprintf(f, "%-16s %s\n", "architecture", s->arch ? s->arch : "(none: general.architecture is missing)");
    if (hmoe_gguf_get_str(g, "general.name", &nm, NULL) == HMOE_OK) {
        fprintf(f, "%-16s ", "name");
        put_str(f, nm.ptr, nm.len, 100);
        fputc('\n', f);
    }
    if (hmoe_gguf_get_u64(g, "general.file_type", &ft, NULL) == HMOE_OK)
        fprintf(f, "%-16s %" PRIu64 " (%s)\n", "file type", ft, hmoe_info_ftype_name(ft));
    fprintf(f, "%-16s %u (data section starts at byte %" PRIu64 ")\n", "alignment", g->alignment, g->data_start);

    /* Metadata in three groups, each in file order. */
    size_t al = s->arch ? strlen(s->arch) : 0;
    fprintf(f, "\nhyperparameters (%s.*)\n", s->arch ? s->arch : "?");
    for (uint64_t i = 0; i < g->n_kv; i++)
        if (s->arch && strncmp(g->kv[i].key, s->arch, al) == 0 && g->kv[i].key[al] == '.') put_kv(f, &g->kv[i]);
    fprintf(f, "\nother metadata\n");
    for (uint64_t i = 0; i < g->n_kv; i++) {
        const char *k = g->kv[i].key;
        if (strncmp(k, "tokenizer.", 10) == 0 || (s->arch && strncmp(k, s->arch, al) == 0 && k[al] == '.')) continue;
        put_kv(f, &g->kv[i]);
    }
    fprintf(f, "\ntokenizer\n");
    struct hmoe_gguf_str tm = {"?", 1}, tp = {"?", 1};
    hmoe_gguf_get_str(g, "tokenizer.ggml.model", &tm, NULL);
    hmoe_gguf_get_str(g, "tokenizer.ggml.pre", &tp, NULL);
    fprintf(f, "  %-*s %.*s / %.*s\n", KEY_W, "model / pre", (int)HMOE_MIN(tm.len, 64), tm.ptr, (int)HMOE_MIN(tp.len, 64),
            tp.ptr);
    if (s->n_vocab >= 0) fprintf(f, "  %-*s %" PRId64 "\n", KEY_W, "vocab size", s->n_vocab);
    else fprintf(f, "  %-*s unknown (no tokenizer.ggml.tokens)\n", KEY_W, "vocab size");
    for (uint64_t i = 0; i < g->n_kv; i++)
        if (strncmp(g->kv[i].key, "tokenizer.", 10) == 0) put_kv(f, &g->kv[i]);

    fprintf(f, "\n%-16s %" PRIu64 ", %s\n", "tensors", g->n_tensors, human(s->total_tensor_bytes, b1, sizeof b1));
    fprintf(f, "  %-10s %8s %16s %8s\n", "type", "count", "bytes", "share");
    for (int t = 0; t < HMOE_TYPE_COUNT; t++) {
        if (!s->type_count[t]) continue;
        double share = s->total_tensor_bytes ? 100.0 * (double)s->type_bytes[t] / (double)s->total_tensor_bytes : 0.0;
        fprintf(f, "  %-10s %8" PRIu64 " %16" PRIu64 " %7.2f%%\n", hmoe_type_name((uint32_t)t), s->type_count[t],
                s->type_bytes[t], share);
    }
    if (s->n_mtp)
        fprintf(f, "\n%-16s %u (blk.%u.*, %s): run only to draft tokens with --spec mtp\n",
                "mtp blocks", s->n_mtp, s->n_layer - s->n_mtp, human(s->mtp_bytes, b1, sizeof b1));
    if (!s->is_moe) return;

    char b2[64];
    fprintf(f, "\nmixture of experts\n");
    if (s->n_expert >= 0) fprintf(f, "  %-*s %" PRId64 "\n", KEY_W, "experts per layer", s->n_expert);
    if (s->n_expert_used >= 0) fprintf(f, "  %-*s %" PRId64 "\n", KEY_W, "experts used per token", s->n_expert_used);
    else fprintf(f, "  %-*s unknown (no %s.expert_used_count)\n", KEY_W, "experts used per token", s->arch ? s->arch : "?");
    fprintf(f, "  %-*s %s\n", KEY_W, "expert tensors, total", human(s->expert_bytes_total, b1, sizeof b1));
    fprintf(f, "  %-*s %s\n", KEY_W, "everything else (VRAM without experts)", human(s->non_expert_bytes, b2, sizeof b2));
    if (s->active_bytes_per_token >= 0)
        fprintf(f, "  %-*s %s%s\n", KEY_W, "active bytes per token",
                human((uint64_t)s->active_bytes_per_token, b1, sizeof b1), s->tied_output ? "  (output tied to token_embd: whole table counted)" : "  (token_embd: one row counted)");
    fprintf(f, "  %-10s %20s %20s\n", "layer", "expert bytes", "bytes per expert");
    for (uint32_t l = 0; l < s->n_layer; l++)
        fprintf(f, "  blk.%-6u %20" PRIu64 " %20" PRIu64 "\n", l, s->expert_bytes_per_layer[l],
                s->bytes_per_expert_per_layer[l]);
}
