/* synth_gptoss.c — the gpt-oss architecture behind the `hmoe synth` presets gpt-oss-20b,
 * gpt-oss-120b and gpt-oss-tiny: hyperparameters of the published checkpoints (gpt-oss.md
 * "Hyperparameters": YaRN factor 32 over 4096, θ 150000, window 128 on even layers), metadata
 * keys as the converter writes them, and the tensor list of "Tensors": Q/K/V/output with
 * biases, one sink logit per head, post_attention_norm as the pre-FFN norm, a biased router
 * and biased gate/up/down expert stacks. The default mix is mxfp4_moe (synth_mix.c): experts
 * MXFP4, every other matrix Q8_0, as the published GGUF files.
 */
#include <stdio.h>
#include <string.h>

#include "synth_impl.h"

#define PUT(...) hmoe_synth_put_tensor(&out[n++], __VA_ARGS__)

static size_t max_tensors(const struct hmoe_synth_preset *p) { return 3 + 19 * (size_t)p->n_layer; }

static size_t list_tensors(const struct hmoe_synth_preset *p, struct hmoe_synth_tensor *out, size_t max) {
    if (max < max_tensors(p)) return 0;
    const int64_t d = p->n_embd, q = (int64_t)p->n_head * p->head_dim, kv = (int64_t)p->n_head_kv * p->head_dim;
    const int64_t f = p->n_ff_exp, e = p->n_expert, v = p->n_vocab;
    size_t n = 0;
    PUT("token_embd.weight", -1, SYNTH_TOKEN_EMBD, 2, d, v, 1);
    PUT("output_norm.weight", -1, SYNTH_OUTPUT_NORM, 1, d, 1, 1);
    PUT("output.weight", -1, SYNTH_OUTPUT, 2, d, v, 1);
    for (int i = 0; i < (int)p->n_layer; i++) {
        PUT("attn_norm.weight", i, SYNTH_ATTN_NORM, 1, d, 1, 1);
        PUT("attn_q.weight", i, SYNTH_ATTN_Q, 2, d, q, 1);
        PUT("attn_q.bias", i, SYNTH_BIAS, 1, q, 1, 1);
        PUT("attn_k.weight", i, SYNTH_ATTN_K, 2, d, kv, 1);
        PUT("attn_k.bias", i, SYNTH_BIAS, 1, kv, 1, 1);
        PUT("attn_v.weight", i, SYNTH_ATTN_V, 2, d, kv, 1);
        PUT("attn_v.bias", i, SYNTH_BIAS, 1, kv, 1, 1);
        PUT("attn_output.weight", i, SYNTH_ATTN_OUTPUT, 2, q, d, 1);
        PUT("attn_output.bias", i, SYNTH_RESID_BIAS, 1, d, 1, 1);
        PUT("attn_sinks.weight", i, SYNTH_BIAS, 1, p->n_head, 1, 1);
        PUT("post_attention_norm.weight", i, SYNTH_FFN_NORM, 1, d, 1, 1); /* the pre-FFN norm */
        PUT("ffn_gate_inp.weight", i, SYNTH_FFN_ROUTER, 2, d, e, 1);
        PUT("ffn_gate_inp.bias", i, SYNTH_BIAS, 1, e, 1, 1);
        PUT("ffn_gate_exps.weight", i, SYNTH_FFN_GATE_EXPS, 3, d, f, e);
        PUT("ffn_gate_exps.bias", i, SYNTH_BIAS, 2, f, e, 1);
        PUT("ffn_up_exps.weight", i, SYNTH_FFN_UP_EXPS, 3, d, f, e);
        PUT("ffn_up_exps.bias", i, SYNTH_BIAS, 2, f, e, 1);
        PUT("ffn_down_exps.weight", i, SYNTH_FFN_DOWN_EXPS, 3, f, d, e);
        PUT("ffn_down_exps.bias", i, SYNTH_RESID_BIAS, 2, d, e, 1);
    }
    return n;
}

static enum hmoe_status add_hparams(struct hmoe_gguf_writer *w, const struct hmoe_synth_preset *p,
                                    struct hmoe_err *err) {
    struct {
        const char *key;
        uint32_t v;
    } u[] = {
        {"gpt-oss.block_count", p->n_layer},
        {"gpt-oss.context_length", p->n_ctx},
        {"gpt-oss.embedding_length", p->n_embd},
        {"gpt-oss.feed_forward_length", p->n_ff},
        {"gpt-oss.attention.head_count", p->n_head},
        {"gpt-oss.attention.head_count_kv", p->n_head_kv},
        {"gpt-oss.attention.key_length", p->head_dim},
        {"gpt-oss.attention.value_length", p->head_dim},
        {"gpt-oss.attention.sliding_window", p->swa_window},
        {"gpt-oss.expert_count", p->n_expert},
        {"gpt-oss.expert_used_count", p->n_expert_used},
        {"gpt-oss.expert_feed_forward_length", p->n_ff_exp},
        {"gpt-oss.rope.scaling.original_context_length", 4096},
    };
    enum hmoe_status st = HMOE_OK;
    for (size_t i = 0; st == HMOE_OK && i < HMOE_ARRAY_LEN(u); i++) st = hmoe_gguf_writer_add_u32(w, u[i].key, u[i].v, err);
    if (st == HMOE_OK) st = hmoe_gguf_writer_add_f32(w, "gpt-oss.rope.freq_base", p->rope_freq_base, err);
    if (st == HMOE_OK) st = hmoe_gguf_writer_add_str(w, "gpt-oss.rope.scaling.type", "yarn", err);
    if (st == HMOE_OK) st = hmoe_gguf_writer_add_f32(w, "gpt-oss.rope.scaling.factor", 32.0f, err);
    if (st == HMOE_OK) st = hmoe_gguf_writer_add_f32(w, "gpt-oss.attention.layer_norm_rms_epsilon", p->rms_eps, err);
    return st;
}

const struct hmoe_synth_arch hmoe_synth_arch_gptoss = {
    .name = "gpt-oss",
    .qwen3_template = false,
    .list_tensors = list_tensors,
    .max_tensors = max_tensors,
    .add_hparams = add_hparams,
};

const struct hmoe_synth_preset hmoe_synth_gptoss_presets[HMOE_SYNTH_GPTOSS_N_PRESETS] = {
    /* gpt-oss-20b (21B, 3.6B active): 24 layers, d 2880, 64/8 heads x 64, 32 experts top-4 x 2880 */
    {.name = "gpt-oss-20b", .arch = &hmoe_synth_arch_gptoss, .n_layer = 24, .n_embd = 2880, .n_head = 64,
     .n_head_kv = 8, .head_dim = 64, .n_expert = 32, .n_expert_used = 4, .n_ff_exp = 2880, .n_ff = 2880,
     .n_vocab = 201088, .n_ctx = 131072, .rope_freq_base = 150000.0f, .rms_eps = 1e-5f, .swa_window = 128,
     .default_mix = "mxfp4_moe"},
    /* gpt-oss-120b (117B, 5.1B active): 36 layers, 128 experts top-4, otherwise as 20b */
    {.name = "gpt-oss-120b", .arch = &hmoe_synth_arch_gptoss, .n_layer = 36, .n_embd = 2880, .n_head = 64,
     .n_head_kv = 8, .head_dim = 64, .n_expert = 128, .n_expert_used = 4, .n_ff_exp = 2880, .n_ff = 2880,
     .n_vocab = 201088, .n_ctx = 131072, .rope_freq_base = 150000.0f, .rms_eps = 1e-5f, .swa_window = 128,
     .default_mix = "mxfp4_moe"},
    /* The same structure, small, for tests: q width 512 != d 256 as in the real model, and a
     * window of 16 so that short prompts already cross it. */
    {.name = "gpt-oss-tiny", .arch = &hmoe_synth_arch_gptoss, .n_layer = 4, .n_embd = 256, .n_head = 8,
     .n_head_kv = 2, .head_dim = 64, .n_expert = 8, .n_expert_used = 4, .n_ff_exp = 256, .n_ff = 256,
     .n_vocab = 2048, .n_ctx = 4096, .rope_freq_base = 150000.0f, .rms_eps = 1e-5f, .swa_window = 16,
     .default_mix = "mxfp4_moe"},
};
