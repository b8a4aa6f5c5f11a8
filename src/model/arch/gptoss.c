/* gptoss.c — gpt-oss hyper-parameters and tensors (gpt-oss.md: Hyperparameters, Tensors).
 * Differences from qwen3moe's binding: Q/K/V and the output projection carry biases, each
 * layer has one sink logit per query head, the pre-FFN norm is post_attention_norm, the
 * router and every expert matrix carry biases, the MoE block routes by top-k then softmax and
 * uses the clamped SwiGLU, and even layers (by default) attend through a sliding window.
 */
#include <stdio.h>
#include <string.h>

#include "model/arch/gptoss.h"
#include "model/gpu_impl.h"

/* "{arch}.{suffix}" as an integer, or dflt when absent (required: an error naming the key). */
static enum hmoe_status key_int(const struct hmoe_gguf *g, const char *arch, const char *suffix, bool required,
                                int64_t dflt, int64_t lo, int64_t hi, int64_t *out, struct hmoe_err *err) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    const struct hmoe_gguf_kv *kv = hmoe_gguf_find_kv(g, key);
    if (!kv) {
        if (required)
            return HMOE_RAISE(err, HMOE_ERR_NOT_FOUND, "%s: required metadata key '%s' is missing (%s needs it)",
                              g->path, key, arch);
        *out = dflt;
        return HMOE_OK;
    }
    if (kv->type == HMOE_GGUF_ARRAY)
        return HMOE_RAISE(err, HMOE_ERR_UNSUPPORTED, "%s: key '%s' is an array; hmoe reads one integer here", g->path,
                          key);
    enum hmoe_status st = hmoe_gguf_get_i64(g, key, out, err);
    if (st) return st;
    if (*out < lo || *out > hi)
        return HMOE_RAISE(err, HMOE_ERR_FORMAT, "%s: key '%s' = %lld is out of range (%lld..%lld)", g->path, key,
                          (long long)*out, (long long)lo, (long long)hi);
    return HMOE_OK;
}

enum hmoe_status hmoe_gptoss_read_config(const struct hmoe_gguf *g, struct hmoe_model_config *c,
                                         struct hmoe_err *err) {
    const char *a = c->arch;
    int64_t v;
    enum hmoe_status st;
    char key[128];
    snprintf(key, sizeof key, "%s.expert_feed_forward_length", a);
    if (!hmoe_gguf_find_kv(g, key))
        return HMOE_RAISE(err, HMOE_ERR_NOT_FOUND, "%s: required metadata key '%s' is missing (%s needs it)", g->path,
                          key, a);
    if ((st = key_int(g, a, "attention.sliding_window", true, 0, 1, 1 << 24, &v, err))) return st;
    c->swa_window = (int)v;
    /* llama.cpp's pattern: layer i is windowed iff i % period < period - 1 (period 0: all) */
    if ((st = key_int(g, a, "attention.sliding_window_pattern", false, 2, 0, 1 << 16, &v, err))) return st;
    c->swa_period = (int)v;
    snprintf(key, sizeof key, "%s.rope.freq_base_swa", a);
    float base_swa = hmoe_gguf_get_f32_or(g, key, c->rope_freq_base);
    if (base_swa != c->rope_freq_base)
        return HMOE_RAISE(err, HMOE_ERR_UNSUPPORTED,
                          "%s: %s = %g differs from rope.freq_base %g; hmoe uses one RoPE base for all layers", g->path,
                          key, base_swa, c->rope_freq_base);
    if (c->n_rot != c->head_dim)
        return HMOE_RAISE(err, HMOE_ERR_UNSUPPORTED,
                          "%s: rope.dimension_count %d differs from key_length %d; %s rotates the whole head", g->path,
                          c->n_rot, c->head_dim, a);
    return HMOE_OK;
}

/* A bias of an expert stack {n, E}: F32, 4-byte aligned, viewed as a flat array. */
static enum hmoe_status bind_bias2(struct hmoe_model *md, const char *name, int64_t n, int64_t E, const float **v,
                                   struct hmoe_err *err) {
    struct hmoe_mat m;
    enum hmoe_status st = hmoe_model_bind_mat(md, name, (int64_t[]){n, E}, 2, &m, err);
    if (st) return st;
    if (m.type != HMOE_TYPE_F32 || (uintptr_t)m.data % sizeof(float) != 0)
        return HMOE_RAISE(err, HMOE_ERR_UNSUPPORTED, "%s: tensor %s has type %s; hmoe expects an aligned F32 bias",
                          md->gguf->path, name, hmoe_type_name(m.type));
    *v = m.data;
    return HMOE_OK;
}

static bool layer_windowed(const struct hmoe_model_config *c, int il) {
    return c->swa_period == 0 || il % c->swa_period < c->swa_period - 1;
}

enum hmoe_status hmoe_gptoss_bind_layer(struct hmoe_model *md, int il, struct hmoe_err *err) {
    const struct hmoe_model_config *c = &md->cfg;
    struct hmoe_layer_weights *L = &md->w.layers[il];
    const int64_t d = c->n_embd, E = c->n_expert, F = c->n_ff_exp, H = c->n_head, nq = H * c->head_dim,
                  nk = (int64_t)c->n_head_kv * c->head_dim, nv = (int64_t)c->n_head_kv * c->head_dim_v,
                  no = H * c->head_dim_v;
    char name[96];
    enum hmoe_status st;
    if (c->tied_output)
        return HMOE_RAISE(err, HMOE_ERR_NOT_FOUND, "%s: tensor output.weight is missing (%s has an untied LM head)",
                          md->gguf->path, c->arch);
#define NAME(suffix) (snprintf(name, sizeof name, "blk.%d.%s", il, suffix), name)
    const struct {
        const char *w, *b;
        int64_t n_in, n_out;
        struct hmoe_mat *m;
        const float **bias;
    } proj[4] = {
        {"attn_q.weight", "attn_q.bias", d, nq, &L->attn_q, &L->attn_q_bias},
        {"attn_k.weight", "attn_k.bias", d, nk, &L->attn_k, &L->attn_k_bias},
        {"attn_v.weight", "attn_v.bias", d, nv, &L->attn_v, &L->attn_v_bias},
        {"attn_output.weight", "attn_output.bias", no, d, &L->attn_output, &L->attn_output_bias},
    };
    if ((st = hmoe_model_bind_vec(md, NAME("attn_norm.weight"), d, true, &L->attn_norm, err))) return st;
    for (int i = 0; i < 4; i++) {
        if ((st = hmoe_model_bind_mat(md, NAME(proj[i].w), (int64_t[]){proj[i].n_in, proj[i].n_out}, 2, proj[i].m,
                                      err)))
            return st;
        if ((st = hmoe_model_bind_vec(md, NAME(proj[i].b), proj[i].n_out, true, proj[i].bias, err))) return st;
    }
    if ((st = hmoe_model_bind_vec(md, NAME("attn_sinks.weight"), H, true, &L->attn_sinks, err))) return st;
    if ((st = hmoe_model_bind_vec(md, NAME("post_attention_norm.weight"), d, true, &L->ffn_norm, err))) return st;

    struct hmoe_moe_weights *mo = &L->moe;
    if ((st = hmoe_model_bind_mat(md, NAME("ffn_gate_inp.weight"), (int64_t[]){d, E}, 2, &mo->router, err)) ||
        (st = hmoe_model_bind_vec(md, NAME("ffn_gate_inp.bias"), E, true, &mo->router_bias, err)) ||
        (st = hmoe_model_bind_mat(md, NAME("ffn_gate_exps.weight"), (int64_t[]){d, F, E}, 3, &mo->gate, err)) ||
        (st = bind_bias2(md, NAME("ffn_gate_exps.bias"), F, E, &mo->gate_bias, err)) ||
        (st = hmoe_model_bind_mat(md, NAME("ffn_up_exps.weight"), (int64_t[]){d, F, E}, 3, &mo->up, err)) ||
        (st = bind_bias2(md, NAME("ffn_up_exps.bias"), F, E, &mo->up_bias, err)) ||
        (st = hmoe_model_bind_mat(md, NAME("ffn_down_exps.weight"), (int64_t[]){F, d, E}, 3, &mo->down, err)) ||
        (st = bind_bias2(md, NAME("ffn_down_exps.bias"), d, E, &mo->down_bias, err)))
        return st;
#undef NAME
    mo->n_expert_used = c->n_expert_used;
    mo->gating = c->arch_entry->moe.gating;
    mo->act = c->arch_entry->moe.act;
    L->attn_window = layer_windowed(c, il) ? c->swa_window : 0;
    return HMOE_OK;
}

/* On the GPU the backend's plain layer step computes it: the biases, sinks and window are
 * uploaded from the layer weights (the q|k|v and o biases added by their products), the router
 * and expert kernels take the gating and activation from the MoE block. The fused single-token
 * launchers take the window and the sinks, so decode uses them. */
static const struct hmoe_arch_gpu gptoss_gpu = {
    .layer = hmoe_gpu_layer_attn_moe,
    .fused_decode = true,
};

const struct hmoe_arch hmoe_arch_gptoss = {
    .names = {"gpt-oss"},
    .summary = "gpt-oss: attention with sinks and a sliding window, biased top-k-softmax experts",
    .doc = "gpt-oss.md",
    .read_config = hmoe_gptoss_read_config,
    .bind_layer = hmoe_gptoss_bind_layer,
    .forward_cpu = hmoe_gptoss_forward,
    .gpu = &gptoss_gpu,
    .moe = {.gating = HMOE_MOE_TOPK_SOFTMAX, .act = HMOE_MOE_SWIGLU_OAI, .expert_bias = true},
    .chat_family = HMOE_CHAT_TEMPLATE_HARMONY,
    .tokenizer_pre = "gpt-4o",
};
