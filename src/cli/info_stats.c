/* info_stats.c — the sizes `hmoe info` reports, derived from the tensor list alone:
 * per-type histogram, expert bytes per layer and per single expert, everything else
 * (the VRAM floor when experts live in RAM) and the bytes read per generated token.
 * Relies on the loader's validated n_bytes/ne and on gguf.md §9's expert layout (expert
 * index = outermost dimension); the llama_ftype names are gguf.md §10.1's table.
 */
#include "info_impl.h"

#include <stdlib.h>
#include <string.h>

static const char *const ftype_names[] = {
    [0] = "ALL_F32",  [1] = "MOSTLY_F16", [2] = "Q4_0",     [3] = "Q4_1",    [7] = "Q8_0",     [8] = "Q5_0",
    [9] = "Q5_1",     [10] = "Q2_K",      [11] = "Q3_K_S",  [12] = "Q3_K_M", [13] = "Q3_K_L",  [14] = "Q4_K_S",
    [15] = "Q4_K_M",  [16] = "Q5_K_S",    [17] = "Q5_K_M",  [18] = "Q6_K",   [19] = "IQ2_XXS", [20] = "IQ2_XS",
    [21] = "Q2_K_S",  [22] = "IQ3_XS",    [23] = "IQ3_XXS", [24] = "IQ1_S",  [25] = "IQ4_NL",  [26] = "IQ3_S",
    [27] = "IQ3_M",   [28] = "IQ2_S",     [29] = "IQ2_M",   [30] = "IQ4_XS", [31] = "IQ1_M",   [32] = "BF16",
    [36] = "TQ1_0",   [37] = "TQ2_0",     [38] = "MXFP4_MOE", [39] = "NVFP4", [40] = "Q1_0",   [41] = "Q2_0",
};

const char *hmoe_info_ftype_name(uint64_t ftype) {
    if (ftype < sizeof ftype_names / sizeof ftype_names[0] && ftype_names[ftype]) return ftype_names[ftype];
    /* 4, 5, 6, 33, 34, 35 were presets once (gguf.md §10.1). */
    if (ftype == 4 || ftype == 5 || ftype == 6 || (ftype >= 33 && ftype <= 35)) return "retired";
    return "unknown";
}

/* N of a "blk.N." name, or -1. */
static int64_t layer_of(const char *name) {
    if (strncmp(name, "blk.", 4) != 0) return -1;
    int64_t n = 0;
    const char *p = name + 4;
    if (*p < '0' || *p > '9') return -1;
    for (; *p >= '0' && *p <= '9'; p++) {
        n = n * 10 + (*p - '0');
        if (n >= HMOE_INFO_MAX_LAYERS) return -1;
    }
    return *p == '.' ? n : -1;
}

static uint32_t arch_u32(const struct hmoe_gguf *g, const char *arch, const char *suffix, bool *found) {
    char key[256];
    uint32_t v = 0;
    snprintf(key, sizeof key, "%s.%s", arch ? arch : "", suffix);
    *found = arch && hmoe_gguf_get_u32(g, key, &v, NULL) == HMOE_OK;
    return v;
}

enum hmoe_status hmoe_info_stats_init(struct hmoe_info_stats *s, const struct hmoe_gguf *g, struct hmoe_err *err) {
    memset(s, 0, sizeof *s);
    s->n_vocab = -1;
    s->n_expert = -1;
    s->n_expert_used = -1;
    s->active_bytes_per_token = -1;
    struct hmoe_gguf_str a;
    if (hmoe_gguf_get_str(g, "general.architecture", &a, NULL) == HMOE_OK) {
        s->arch = malloc((size_t)a.len + 1);
        if (!s->arch) return HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory");
        memcpy(s->arch, a.ptr, (size_t)a.len);
        s->arch[a.len] = 0;
    }
    const struct hmoe_gguf_kv *tok = hmoe_gguf_find_kv(g, "tokenizer.ggml.tokens");
    if (tok && tok->type == HMOE_GGUF_ARRAY) s->n_vocab = (int64_t)tok->arr_n;

    int64_t max_layer = -1, max_exp_dim = -1;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const struct hmoe_gguf_tensor *t = &g->tensors[i];
        s->total_tensor_bytes += t->n_bytes;
        s->type_count[t->type]++;
        s->type_bytes[t->type] += t->n_bytes;
        int64_t l = layer_of(t->name);
        if (l > max_layer) max_layer = l;
        if (strstr(t->name, "_exps")) {
            s->is_moe = true;
            int64_t e = t->ne[t->n_dims ? t->n_dims - 1 : 0];
            if (e > max_exp_dim) max_exp_dim = e;
        }
    }
    s->n_layer = (uint32_t)(max_layer + 1);
    bool found;
    uint32_t n_mtp = arch_u32(g, s->arch, "nextn_predict_layers", &found);
    s->n_mtp = found && n_mtp <= s->n_layer ? n_mtp : 0;
    for (uint64_t i = 0; s->n_mtp && i < g->n_tensors; i++)
        if (layer_of(g->tensors[i].name) >= (int64_t)(s->n_layer - s->n_mtp)) s->mtp_bytes += g->tensors[i].n_bytes;
    if (!s->is_moe) return HMOE_OK;

    uint32_t v = arch_u32(g, s->arch, "expert_count", &found);
    s->n_expert = found ? (int64_t)v : max_exp_dim;
    v = arch_u32(g, s->arch, "expert_used_count", &found);
    if (found) s->n_expert_used = v;

    size_t nl = s->n_layer ? s->n_layer : 1;
    s->expert_bytes_per_layer = calloc(nl, sizeof *s->expert_bytes_per_layer);
    s->bytes_per_expert_per_layer = calloc(nl, sizeof *s->bytes_per_expert_per_layer);
    if (!s->expert_bytes_per_layer || !s->bytes_per_expert_per_layer)
        return HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory for %u layers", s->n_layer);
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const struct hmoe_gguf_tensor *t = &g->tensors[i];
        if (!strstr(t->name, "_exps")) continue;
        s->expert_bytes_total += t->n_bytes;
        int64_t l = layer_of(t->name);
        if (l < 0) continue;
        /* gguf.md §9: expert e occupies the e-th slice of the outermost dimension. */
        int64_t e = t->ne[t->n_dims ? t->n_dims - 1 : 0];
        s->expert_bytes_per_layer[l] += t->n_bytes;
        if (e > 0) s->bytes_per_expert_per_layer[l] += t->n_bytes / (uint64_t)e;
    }
    s->non_expert_bytes = s->total_tensor_bytes - s->expert_bytes_total;

    /* Per token, generation reads every non-expert weight except the embedding table, of
     * which it reads one row — unless there is no output.weight, in which case the whole
     * table is also the output matrix (gguf.md §8). */
    const struct hmoe_gguf_tensor *emb = hmoe_gguf_find_tensor(g, "token_embd.weight");
    s->tied_output = hmoe_gguf_find_tensor(g, "output.weight") == NULL;
    s->token_embd_row_bytes = emb ? emb->nb[1] : 0;
    if (s->n_expert_used >= 0) {
        uint64_t mtp_experts = 0; /* MTP blocks are never run: their bytes are not read */
        for (uint32_t l = s->n_layer - s->n_mtp; l < s->n_layer; l++) mtp_experts += s->expert_bytes_per_layer[l];
        uint64_t act = s->non_expert_bytes - (s->mtp_bytes - mtp_experts);
        if (emb && !s->tied_output && !strstr(emb->name, "_exps")) act = act - emb->n_bytes + emb->nb[1];
        bool ok = true; /* a hostile expert_used_count could overflow the sum */
        for (uint32_t l = 0; ok && l < s->n_layer - s->n_mtp; l++) {
            uint64_t x;
            ok = hmoe_mul_u64((uint64_t)s->n_expert_used, s->bytes_per_expert_per_layer[l], &x) &&
                 hmoe_add_u64(act, x, &act) && act <= (uint64_t)INT64_MAX;
        }
        s->active_bytes_per_token = ok ? (int64_t)act : -1;
    }
    return HMOE_OK;
}

void hmoe_info_stats_free(struct hmoe_info_stats *s) {
    free(s->arch);
    free(s->expert_bytes_per_layer);
    free(s->bytes_per_expert_per_layer);
    memset(s, 0, sizeof *s);
}
