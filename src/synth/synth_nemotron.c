/* synth_nemotron.c — the nemotron_h_moe architecture behind the `hmoe synth` presets
 * nemotron-3-nano-30b-a3b and nemotron-tiny: metadata keys as the converter writes them
 * (nemotron_h_moe.md §2: per-layer head_count_kv / feed_forward_length arrays, the ssm.* and
 * expert keys, junk rope keys) and the tensor list of §3, one mixer per layer following the
 * preset's layer pattern (M Mamba-2, * attention, E MoE; --layers N takes its first N
 * characters, repeating it past its end).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "synth_impl.h"

#define PUT(...) hmoe_synth_put_tensor(&out[n++], __VA_ARGS__)

char hmoe_synth_layer_kind(const struct hmoe_synth_preset *p, int i) {
    const size_t len = strlen(p->layer_pattern);
    return p->layer_pattern[(size_t)i % len];
}

static size_t max_tensors(const struct hmoe_synth_preset *p) { return 3 + 9 * (size_t)p->n_layer; }

static size_t put_mamba(const struct hmoe_synth_preset *p, int i, struct hmoe_synth_tensor *out, size_t n) {
    const int64_t d = p->n_embd, di = p->ssm_inner_size, h = p->ssm_time_step_rank, g = p->ssm_group_count;
    const int64_t conv_dim = di + 2 * g * p->ssm_state_size;
    PUT("ssm_in.weight", i, SYNTH_MATRIX, 2, d, di + conv_dim + h, 1);
    PUT("ssm_conv1d.weight", i, SYNTH_SSM_CONV, 2, p->ssm_conv_kernel, conv_dim, 1);
    PUT("ssm_conv1d.bias", i, SYNTH_SSM_DT, 1, conv_dim, 1, 1);
    PUT("ssm_dt.bias", i, SYNTH_SSM_DT, 1, h, 1, 1);
    PUT("ssm_a", i, SYNTH_SSM_A, 2, 1, h, 1);
    PUT("ssm_d", i, SYNTH_NORM, 2, 1, h, 1);
    PUT("ssm_norm.weight", i, SYNTH_NORM, 2, di / g, g, 1);
    PUT("ssm_out.weight", i, SYNTH_SSM_OUT, 2, di, d, 1);
    return n;
}

static size_t put_attention(const struct hmoe_synth_preset *p, int i, struct hmoe_synth_tensor *out, size_t n) {
    const int64_t d = p->n_embd, q = (int64_t)p->n_head * p->head_dim, kv = (int64_t)p->n_head_kv * p->head_dim;
    PUT("attn_q.weight", i, SYNTH_ATTN_Q, 2, d, q, 1);
    PUT("attn_k.weight", i, SYNTH_ATTN_K, 2, d, kv, 1);
    PUT("attn_v.weight", i, SYNTH_ATTN_V, 2, d, kv, 1);
    PUT("attn_output.weight", i, SYNTH_ATTN_OUTPUT, 2, q, d, 1);
    return n;
}

/* Router, selection bias, ungated routed experts and shared expert (§3, §6.1). */
static size_t put_moe(const struct hmoe_synth_preset *p, int i, struct hmoe_synth_tensor *out, size_t n) {
    const int64_t d = p->n_embd, e = p->n_expert, f = p->n_ff_exp, fs = p->n_ff_shexp;
    PUT("ffn_gate_inp.weight", i, SYNTH_FFN_ROUTER, 2, d, e, 1);
    PUT("exp_probs_b.bias", i, SYNTH_SSM_DT, 1, e, 1, 1);
    PUT("ffn_up_exps.weight", i, SYNTH_FFN_UP_EXPS, 3, d, f, e);
    PUT("ffn_down_exps.weight", i, SYNTH_FFN_DOWN_EXPS, 3, f, d, e);
    PUT("ffn_up_shexp.weight", i, SYNTH_MATRIX, 2, d, fs, 1);
    PUT("ffn_down_shexp.weight", i, SYNTH_FFN_DOWN_SHEXP, 2, fs, d, 1);
    return n;
}

static size_t list_tensors(const struct hmoe_synth_preset *p, struct hmoe_synth_tensor *out, size_t max) {
    if (max < max_tensors(p)) return 0;
    const int64_t d = p->n_embd, v = p->n_vocab;
    size_t n = 0;
    PUT("token_embd.weight", -1, SYNTH_TOKEN_EMBD, 2, d, v, 1);
    PUT("output_norm.weight", -1, SYNTH_OUTPUT_NORM, 1, d, 1, 1);
    PUT("output.weight", -1, SYNTH_OUTPUT, 2, d, v, 1);
    for (int i = 0; i < (int)p->n_layer; i++) {
        PUT("attn_norm.weight", i, SYNTH_ATTN_NORM, 1, d, 1, 1); /* every kind's pre-norm (§1) */
        const char kind = hmoe_synth_layer_kind(p, i);
        n = kind == 'M' ? put_mamba(p, i, out, n) : kind == '*' ? put_attention(p, i, out, n) : put_moe(p, i, out, n);
    }
    return n;
}

static enum hmoe_status add_hparams(struct hmoe_gguf_writer *w, const struct hmoe_synth_preset *p,
                                    struct hmoe_err *err) {
    struct {
        const char *key;
        uint32_t v;
    } u[] = {
        {"nemotron_h_moe.block_count", p->n_layer},
        {"nemotron_h_moe.context_length", p->n_ctx},
        {"nemotron_h_moe.embedding_length", p->n_embd},
        {"nemotron_h_moe.attention.head_count", p->n_head},
        {"nemotron_h_moe.attention.key_length", p->head_dim},
        {"nemotron_h_moe.attention.value_length", p->head_dim},
        {"nemotron_h_moe.rope.dimension_count", p->n_embd / p->n_head}, /* junk, as the converter writes it */
        {"nemotron_h_moe.expert_count", p->n_expert},
        {"nemotron_h_moe.expert_used_count", p->n_expert_used},
        {"nemotron_h_moe.expert_feed_forward_length", p->n_ff_exp},
        {"nemotron_h_moe.expert_shared_feed_forward_length", p->n_ff_shexp},
        {"nemotron_h_moe.expert_shared_count", 1},
        {"nemotron_h_moe.expert_group_count", 1},
        {"nemotron_h_moe.expert_group_used_count", 1},
        {"nemotron_h_moe.ssm.conv_kernel", p->ssm_conv_kernel},
        {"nemotron_h_moe.ssm.inner_size", p->ssm_inner_size},
        {"nemotron_h_moe.ssm.state_size", p->ssm_state_size},
        {"nemotron_h_moe.ssm.time_step_rank", p->ssm_time_step_rank},
        {"nemotron_h_moe.ssm.group_count", p->ssm_group_count},
        {"nemotron_h_moe.vocab_size", p->n_vocab},
    };
    enum hmoe_status st = HMOE_OK;
    for (size_t i = 0; st == HMOE_OK && i < HMOE_ARRAY_LEN(u); i++) st = hmoe_gguf_writer_add_u32(w, u[i].key, u[i].v, err);
    /* The per-layer arrays that decide the layer kinds (§1). */
    int32_t *hkv = calloc(p->n_layer, sizeof *hkv), *ff = calloc(p->n_layer, sizeof *ff);
    if (!hkv || !ff) st = HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory");
    for (uint32_t i = 0; st == HMOE_OK && i < p->n_layer; i++) {
        const char kind = hmoe_synth_layer_kind(p, (int)i);
        hkv[i] = kind == '*' ? (int32_t)p->n_head_kv : 0;
        ff[i] = kind == 'E' ? (int32_t)p->n_ff_exp : 0;
    }
    if (st == HMOE_OK)
        st = hmoe_gguf_writer_add_arr(w, "nemotron_h_moe.attention.head_count_kv", HMOE_GGUF_I32, hkv, p->n_layer, err);
    if (st == HMOE_OK)
        st = hmoe_gguf_writer_add_arr(w, "nemotron_h_moe.feed_forward_length", HMOE_GGUF_I32, ff, p->n_layer, err);
    free(hkv);
    free(ff);
    if (st == HMOE_OK) st = hmoe_gguf_writer_add_f32(w, "nemotron_h_moe.rope.freq_base", p->rope_freq_base, err);
    if (st == HMOE_OK) st = hmoe_gguf_writer_add_f32(w, "nemotron_h_moe.attention.layer_norm_rms_epsilon", p->rms_eps, err);
    if (st == HMOE_OK) st = hmoe_gguf_writer_add_f32(w, "nemotron_h_moe.attention.layer_norm_epsilon", p->rms_eps, err);
    if (st == HMOE_OK) st = hmoe_gguf_writer_add_bool(w, "nemotron_h_moe.expert_weights_norm", true, err);
    if (st == HMOE_OK) st = hmoe_gguf_writer_add_f32(w, "nemotron_h_moe.expert_weights_scale", 2.5f, err);
    return st;
}

const struct hmoe_synth_arch hmoe_synth_arch_nemotron_h_moe = {
    .name = "nemotron_h_moe",
    .qwen3_template = false,
    .list_tensors = list_tensors,
    .max_tensors = max_tensors,
    .add_hparams = add_hparams,
};
