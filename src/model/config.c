/* config.c — read and validate a model's hyper-parameters from GGUF metadata into
 * struct hmoe_model_config: the keys every architecture shares (qwen3moe.md §1: required
 * keys, defaults, the traps such as head_dim = key_length and expert FFN =
 * expert_feed_forward_length), then the architecture entry's own keys (arch.h read_config),
 * then the relations the forward passes rely on. Relies on the typed getters of gguf.h;
 * every failure names the file and the key.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "hmoe/arch.h"
#include "model/model_impl.h"

/* Read "{arch}.{suffix}" as a positive integer. A per-layer array (allowed for head counts)
 * must hold one value for every layer. Absent: *out = dflt, or an error when required. */
static enum hmoe_status read_int(const struct hmoe_gguf *g, const char *arch, const char *suffix, bool required,
                                 int dflt, int *out, struct hmoe_err *err) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    const struct hmoe_gguf_kv *kv = hmoe_gguf_find_kv(g, key);
    if (!kv) {
        if (required)
            return HMOE_RAISE(err, HMOE_ERR_NOT_FOUND, "%s: required metadata key '%s' is missing", g->path, key);
        *out = dflt;
        return HMOE_OK;
    }
    int64_t v;
    if (kv->type == HMOE_GGUF_ARRAY) {
        if (kv->arr_n == 0 || kv->arr_type == HMOE_GGUF_STRING || kv->arr_type == HMOE_GGUF_ARRAY)
            return HMOE_RAISE(err, HMOE_ERR_FORMAT, "%s: key '%s' is an empty or non-numeric array", g->path, key);
        v = hmoe_gguf_arr_i64(kv, 0);
        for (uint64_t i = 1; i < kv->arr_n; i++)
            if (hmoe_gguf_arr_i64(kv, i) != v)
                return HMOE_RAISE(err, HMOE_ERR_UNSUPPORTED,
                                  "%s: key '%s' varies per layer (%lld at layer 0, %lld at layer %llu); hmoe needs "
                                  "the same value for every layer",
                                  g->path, key, (long long)v, (long long)hmoe_gguf_arr_i64(kv, i),
                                  (unsigned long long)i);
    } else {
        enum hmoe_status st = hmoe_gguf_get_i64(g, key, &v, err);
        if (st) return st;
    }
    if (v <= 0 || v > (1 << 24))
        return HMOE_RAISE(err, HMOE_ERR_FORMAT, "%s: key '%s' = %lld is out of range (1..16777216)", g->path, key,
                          (long long)v);
    *out = (int)v;
    return HMOE_OK;
}

static enum hmoe_status read_float(const struct hmoe_gguf *g, const char *arch, const char *suffix, bool required,
                                   float dflt, float *out, struct hmoe_err *err) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    if (!hmoe_gguf_find_kv(g, key)) {
        if (required)
            return HMOE_RAISE(err, HMOE_ERR_NOT_FOUND, "%s: required metadata key '%s' is missing", g->path, key);
        *out = dflt;
        return HMOE_OK;
    }
    enum hmoe_status st = hmoe_gguf_get_f32(g, key, out, err);
    if (st) return st;
    if (!isfinite(*out))
        return HMOE_RAISE(err, HMOE_ERR_FORMAT, "%s: key '%s' is not a finite number", g->path, key);
    return HMOE_OK;
}

enum hmoe_status hmoe_model_cfg_int(const struct hmoe_gguf *g, const char *arch, const char *suffix, bool required,
                                    int dflt, int *out, struct hmoe_err *err) {
    return read_int(g, arch, suffix, required, dflt, out, err);
}

enum hmoe_status hmoe_model_cfg_float(const struct hmoe_gguf *g, const char *arch, const char *suffix, bool required,
                                      float dflt, float *out, struct hmoe_err *err) {
    return read_float(g, arch, suffix, required, dflt, out, err);
}

static bool str_eq(struct hmoe_gguf_str s, const char *lit) {
    return s.len == strlen(lit) && memcmp(s.ptr, lit, s.len) == 0;
}

/* general.architecture must be one we implement; name it and list the supported ones. */
static enum hmoe_status check_arch(const struct hmoe_gguf *g, struct hmoe_model_config *c, struct hmoe_err *err) {
    struct hmoe_gguf_str a;
    enum hmoe_status st = hmoe_gguf_get_str(g, "general.architecture", &a, err);
    if (st == HMOE_ERR_NOT_FOUND)
        return HMOE_RAISE(err, HMOE_ERR_FORMAT, "%s: no general.architecture key: not a model file (supported: %s)",
                          g->path, hmoe_model_supported_archs());
    if (st) return st;
    const struct hmoe_arch *entry = hmoe_arch_find_str(a);
    if (entry) {
        snprintf(c->arch, sizeof c->arch, "%.*s", (int)a.len, a.ptr);
        c->arch_entry = entry;
        return HMOE_OK;
    }
    return HMOE_RAISE(err, HMOE_ERR_UNSUPPORTED, "%s: unsupported architecture '%.*s' (supported: %s)", g->path,
                      (int)HMOE_MIN(a.len, 64), a.ptr, hmoe_model_supported_archs());
}

static enum hmoe_status read_rope_scaling(const struct hmoe_gguf *g, const struct hmoe_model_params *p,
                                          struct hmoe_model_config *c, struct hmoe_err *err) {
    const char *arch = c->arch;
    char key[128];
    snprintf(key, sizeof key, "%s.rope.scaling.type", arch);
    c->rope_scaling = HMOE_ROPE_SCALING_NONE;
    const struct hmoe_gguf_kv *kv = hmoe_gguf_find_kv(g, key);
    if (kv) {
        struct hmoe_gguf_str s;
        enum hmoe_status st = hmoe_gguf_get_str(g, key, &s, err);
        if (st) return st;
        if (str_eq(s, "none")) c->rope_scaling = HMOE_ROPE_SCALING_NONE;
        else if (str_eq(s, "linear")) c->rope_scaling = HMOE_ROPE_SCALING_LINEAR;
        else if (str_eq(s, "yarn")) c->rope_scaling = HMOE_ROPE_SCALING_YARN;
        else
            return HMOE_RAISE(err, HMOE_ERR_UNSUPPORTED,
                              "%s: %s = '%.*s' is not supported (supported: none, linear, yarn)", g->path, key,
                              (int)HMOE_MIN(s.len, 32), s.ptr);
    }
    float factor;
    enum hmoe_status st = read_float(g, arch, "rope.scaling.factor", false, 0.0f, &factor, err);
    if (st) return st;
    st = read_int(g, arch, "rope.scaling.original_context_length", false, c->n_ctx_train, &c->rope_n_ctx_orig, err);
    if (st) return st;
    st = read_float(g, arch, "rope.scaling.attn_factor", false, 1.0f, &c->rope_attn_factor, err);
    if (st) return st;
    if (p) {
        if (p->has_rope_scaling) c->rope_scaling = p->rope_scaling;
        if (p->rope_scale > 0.0f) factor = p->rope_scale;
        if (p->yarn_orig_ctx > 0) c->rope_n_ctx_orig = p->yarn_orig_ctx;
        if (p->rope_freq_base > 0.0f) c->rope_freq_base = p->rope_freq_base;
    }
    /* A missing or zero factor means 1 (no scaling); "none" ignores the factor. */
    if (factor < 0.0f)
        return HMOE_RAISE(err, HMOE_ERR_FORMAT, "%s: rope scaling factor %g must be positive", g->path, factor);
    c->rope_freq_scale = (c->rope_scaling == HMOE_ROPE_SCALING_NONE || factor == 0.0f) ? 1.0f : 1.0f / factor;
    if (c->rope_scaling == HMOE_ROPE_SCALING_LINEAR && c->rope_freq_scale == 1.0f)
        c->rope_scaling = HMOE_ROPE_SCALING_NONE;
    return HMOE_OK;
}

enum hmoe_status hmoe_model_read_config(const struct hmoe_gguf *g, const struct hmoe_model_params *p,
                                        struct hmoe_model_config *c, struct hmoe_err *err) {
    memset(c, 0, sizeof *c);
    enum hmoe_status st = check_arch(g, c, err);
    if (st) return st;
    const char *a = c->arch;
    if ((st = read_int(g, a, "block_count", true, 0, &c->n_layer, err)) ||
        (st = read_int(g, a, "embedding_length", true, 0, &c->n_embd, err)) ||
        (st = read_int(g, a, "context_length", true, 0, &c->n_ctx_train, err)) ||
        (st = read_int(g, a, "attention.head_count", true, 0, &c->n_head, err)))
        return st;
    /* Layer kinds from per-layer arrays (head_count_kv, feed_forward_length): the entry reads
     * those and the expert keys itself. */
    const struct hmoe_arch *entry = c->arch_entry;
    if (!entry->own_layer_keys &&
        ((st = read_int(g, a, "attention.head_count_kv", false, c->n_head, &c->n_head_kv, err)) ||
         (st = read_int(g, a, "expert_count", true, 0, &c->n_expert, err)) ||
         (st = read_int(g, a, "expert_used_count", true, 0, &c->n_expert_used, err))))
        return st;
    /* Head dim: key_length, falling back to d/H only when absent (wrong for Qwen3, §1). */
    if ((st = read_int(g, a, "attention.key_length", false, c->n_embd / c->n_head, &c->head_dim, err)) ||
        (st = read_int(g, a, "attention.value_length", false, c->head_dim, &c->head_dim_v, err)) ||
        (st = read_int(g, a, "rope.dimension_count", false, c->head_dim, &c->n_rot, err)))
        return st;
    /* Expert FFN width: expert_feed_forward_length, else feed_forward_length / k (§1). */
    char key[128];
    snprintf(key, sizeof key, "%s.expert_feed_forward_length", a);
    if (entry->own_layer_keys) {
        /* the entry's read_config */
    } else if (hmoe_gguf_find_kv(g, key)) {
        if ((st = read_int(g, a, "expert_feed_forward_length", true, 0, &c->n_ff_exp, err))) return st;
    } else {
        int ff = 0;
        if ((st = read_int(g, a, "feed_forward_length", true, 0, &ff, err))) return st;
        c->n_ff_exp = ff / c->n_expert_used;
    }
    if ((st = read_float(g, a, "attention.layer_norm_rms_epsilon", true, 0.0f, &c->rms_eps, err)) ||
        (st = read_float(g, a, "rope.freq_base", false, 10000.0f, &c->rope_freq_base, err)))
        return st;
    if ((st = read_rope_scaling(g, p, c, err))) return st;
    if (entry->read_config && (st = entry->read_config(g, c, err))) return st;

    /* Vocabulary size = number of token strings (qwen3moe.md §1); checked against the
     * embedding's rows when the weights are bound. 0 = take it from token_embd. */
    const struct hmoe_gguf_kv *tok = hmoe_gguf_find_kv(g, "tokenizer.ggml.tokens");
    if (tok && tok->type == HMOE_GGUF_ARRAY) {
        if (tok->arr_n == 0 || tok->arr_n > (1u << 24))
            return HMOE_RAISE(err, HMOE_ERR_FORMAT, "%s: tokenizer.ggml.tokens has %llu entries (expected 1..16777216)",
                              g->path, (unsigned long long)tok->arr_n);
        c->n_vocab = (int)tok->arr_n;
    }

    /* Relations the forward pass relies on. */
    if (c->n_head % c->n_head_kv != 0)
        return HMOE_RAISE(err, HMOE_ERR_FORMAT, "%s: head_count %d is not a multiple of head_count_kv %d", g->path,
                          c->n_head, c->n_head_kv);
    if (c->head_dim % 2 != 0)
        return HMOE_RAISE(err, HMOE_ERR_FORMAT, "%s: attention.key_length %d must be even (RoPE rotates pairs)",
                          g->path, c->head_dim);
    if (c->n_rot > c->head_dim || c->n_rot % 2 != 0)
        return HMOE_RAISE(err, HMOE_ERR_FORMAT, "%s: rope.dimension_count %d must be even and at most key_length %d",
                          g->path, c->n_rot, c->head_dim);
    if (c->n_expert_used > c->n_expert)
        return HMOE_RAISE(err, HMOE_ERR_FORMAT, "%s: expert_used_count %d exceeds expert_count %d", g->path,
                          c->n_expert_used, c->n_expert);
    if (c->n_expert > 0 && c->n_ff_exp <= 0)
        return HMOE_RAISE(err, HMOE_ERR_FORMAT, "%s: expert FFN width is 0", g->path);
    if (!(c->rms_eps > 0.0f && c->rms_eps < 1.0f))
        return HMOE_RAISE(err, HMOE_ERR_FORMAT, "%s: layer_norm_rms_epsilon %g must be in (0, 1)", g->path,
                          c->rms_eps);
    if (!(c->rope_freq_base > 1.0f))
        return HMOE_RAISE(err, HMOE_ERR_FORMAT, "%s: rope.freq_base %g must be > 1", g->path, c->rope_freq_base);
    return HMOE_OK;
}
