/* config.c — read and validate a model's hyper-parameters from GGUF metadata into
 * struct hmoe_model_config (qwen3moe.md §1: required keys, defaults, the traps such as
 * head_dim = key_length and expert FFN = expert_feed_forward_length; qwen35moe.md §1-§2:
 * main layers = block_count - nextn_predict_layers, ssm.* keys, partial RoPE sections).
 * Relies on the typed getters of gguf.h; every failure names the file and the key.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "model/arch/gptoss.h"
#include "model/model_impl.h"

/* Indexed by enum hmoe_arch. */
static const char *const supported_archs[] = {"qwen3moe", "qwen35moe", "nemotron_h_moe", "nemotron_h", "gpt-oss"};

const char *hmoe_model_supported_archs(void) { return "qwen3moe, qwen35moe, nemotron_h_moe, nemotron_h, gpt-oss"; }

static bool is_nemotron(const struct hmoe_model_config *c) {
    return c->arch_id == HMOE_ARCH_NEMOTRON_H_MOE || c->arch_id == HMOE_ARCH_NEMOTRON_H;
}

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
    for (size_t i = 0; i < HMOE_ARRAY_LEN(supported_archs); i++)
        if (str_eq(a, supported_archs[i])) {
            snprintf(c->arch, sizeof c->arch, "%s", supported_archs[i]);
            c->arch_id = (enum hmoe_arch)i;
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

/* qwen35moe.md §1-§2: MTP blocks, layer pattern, shared expert, Gated DeltaNet sizes and
 * the M-RoPE sections (required; text-only tokens make them plain partial NEOX, §6). */
static enum hmoe_status read_qwen35(const struct hmoe_gguf *g, struct hmoe_model_config *c, struct hmoe_err *err) {
    const char *a = c->arch;
    char key[128];
    enum hmoe_status st;
    snprintf(key, sizeof key, "%s.nextn_predict_layers", a);
    const struct hmoe_gguf_kv *kv = hmoe_gguf_find_kv(g, key);
    if (kv) {
        int64_t v;
        if ((st = hmoe_gguf_get_i64(g, key, &v, err))) return st;
        if (v < 0 || v >= c->n_layer)
            return HMOE_RAISE(err, HMOE_ERR_FORMAT, "%s: %s = %lld must be below block_count %d", g->path, key,
                              (long long)v, c->n_layer);
        c->n_nextn = (int)v;
    }
    c->n_layer -= c->n_nextn; /* MTP blocks are appended after the main layers (§1, §8) */
    if ((st = read_int(g, a, "full_attention_interval", false, 4, &c->full_attn_interval, err)) ||
        (st = read_int(g, a, "expert_shared_feed_forward_length", true, 0, &c->n_ff_shexp, err)) ||
        (st = read_int(g, a, "ssm.conv_kernel", true, 0, &c->ssm_conv_kernel, err)) ||
        (st = read_int(g, a, "ssm.state_size", true, 0, &c->ssm_head_dim, err)) ||
        (st = read_int(g, a, "ssm.group_count", true, 0, &c->ssm_n_k_head, err)) ||
        (st = read_int(g, a, "ssm.time_step_rank", true, 0, &c->ssm_n_v_head, err)))
        return st;
    int inner = 0;
    if ((st = read_int(g, a, "ssm.inner_size", true, 0, &inner, err))) return st;
    if (inner != c->ssm_n_v_head * c->ssm_head_dim)
        return HMOE_RAISE(err, HMOE_ERR_UNSUPPORTED,
                          "%s: ssm.inner_size %d is not time_step_rank %d x state_size %d; hmoe (like llama.cpp) "
                          "needs the value head size to equal the key head size",
                          g->path, inner, c->ssm_n_v_head, c->ssm_head_dim);
    if (c->ssm_n_v_head % c->ssm_n_k_head != 0)
        return HMOE_RAISE(err, HMOE_ERR_FORMAT, "%s: ssm.time_step_rank %d is not a multiple of ssm.group_count %d",
                          g->path, c->ssm_n_v_head, c->ssm_n_k_head);
    if (c->ssm_conv_kernel < 2 || c->ssm_conv_kernel > 16)
        return HMOE_RAISE(err, HMOE_ERR_UNSUPPORTED, "%s: ssm.conv_kernel %d is out of range (2..16)", g->path,
                          c->ssm_conv_kernel);
    if (c->head_dim_v != c->head_dim)
        return HMOE_RAISE(err, HMOE_ERR_UNSUPPORTED,
                          "%s: attention.value_length %d differs from key_length %d; the output gate of %s needs them "
                          "equal",
                          g->path, c->head_dim_v, c->head_dim, a);
    snprintf(key, sizeof key, "%s.attention.recurrent_layers", a);
    if (hmoe_gguf_find_kv(g, key))
        return HMOE_RAISE(err, HMOE_ERR_UNSUPPORTED,
                          "%s: %s (an explicit layer pattern) is not supported yet; hmoe uses full_attention_interval",
                          g->path, key);
    snprintf(key, sizeof key, "%s.rope.dimension_sections", a);
    kv = hmoe_gguf_find_kv(g, key);
    if (!kv) return HMOE_RAISE(err, HMOE_ERR_NOT_FOUND, "%s: required metadata key '%s' is missing", g->path, key);
    if (kv->type != HMOE_GGUF_ARRAY || kv->arr_n < 3 || kv->arr_n > 4 || kv->arr_type == HMOE_GGUF_STRING ||
        kv->arr_type == HMOE_GGUF_ARRAY)
        return HMOE_RAISE(err, HMOE_ERR_FORMAT, "%s: '%s' must be an array of 3 or 4 integers", g->path, key);
    int pairs = 0;
    for (uint64_t i = 0; i < kv->arr_n; i++) {
        int64_t v = hmoe_gguf_arr_i64(kv, i);
        if (v < 0 || v > 4096)
            return HMOE_RAISE(err, HMOE_ERR_FORMAT, "%s: '%s'[%llu] = %lld is out of range", g->path, key,
                              (unsigned long long)i, (long long)v);
        c->rope_sections[i] = (int)v;
        pairs += (int)v;
    }
    if (pairs > c->n_rot / 2)
        return HMOE_RAISE(err, HMOE_ERR_FORMAT, "%s: '%s' covers %d rotation pairs but rope.dimension_count %d has %d",
                          g->path, key, pairs, c->n_rot, c->n_rot / 2);
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
    /* nemotron_h: head_count_kv and feed_forward_length are per-layer arrays that decide the
     * layer kinds, and the expert keys are optional (read in its own file). */
    if (!is_nemotron(c) &&
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
    if (is_nemotron(c)) {
        /* nemotron_h_config.c */
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
    if (c->arch_id == HMOE_ARCH_QWEN35MOE && (st = read_qwen35(g, c, err))) return st;
    if (is_nemotron(c) && (st = hmoe_nemotron_read_config(g, c, err))) return st;
    if (c->arch_id == HMOE_ARCH_GPTOSS && (st = hmoe_gptoss_read_config(g, c, err))) return st;

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
    /* qwen3moe rotates the whole head; qwen35moe the first n_rot dims (§5.1 there). */
    if (c->arch_id == HMOE_ARCH_QWEN3MOE && c->n_rot != c->head_dim)
        return HMOE_RAISE(err, HMOE_ERR_UNSUPPORTED,
                          "%s: rope.dimension_count %d differs from key_length %d; %s rotates the whole head", g->path,
                          c->n_rot, c->head_dim, a);
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
