/* synth_qwen35.c — the qwen35moe architecture behind the `hmoe synth` presets
 * qwen3.6-35b-a3b and qwen35-tiny: metadata keys (qwen35moe.md §2) and the tensor list of
 * §3 — per main layer the norms, routed experts and gated shared expert, then the Gated
 * DeltaNet set or, every full_attention_interval-th layer, the gated attention set; MTP
 * blocks (n_nextn) after the main layers with the attention set, the FFN and the nextn.*
 * tensors. Order within a layer as in fixtures/moe-tiny/qwen35moe-tiny.gguf.
 */
#include <stdio.h>

#include "synth_impl.h"

#define PUT(...) hmoe_synth_put_tensor(&out[n++], __VA_ARGS__)

static size_t max_tensors(const struct hmoe_synth_preset *p) {
    return 3 + 19 * (size_t)(p->n_layer + p->n_nextn) + 4 * (size_t)p->n_nextn; /* 10 FFN + <= 9 mixer */
}

/* Norms, router, routed experts, shared expert and its gate (every layer, §3). */
static size_t put_ffn(const struct hmoe_synth_preset *p, int i, struct hmoe_synth_tensor *out, size_t n) {
    const int64_t d = p->n_embd, e = p->n_expert, f = p->n_ff_exp, fs = p->n_ff_shexp;
    PUT("attn_norm.weight", i, SYNTH_ATTN_NORM, 1, d, 1, 1);
    PUT("post_attention_norm.weight", i, SYNTH_FFN_NORM, 1, d, 1, 1); /* the pre-FFN norm (§1) */
    PUT("ffn_gate_inp.weight", i, SYNTH_FFN_ROUTER, 2, d, e, 1);
    PUT("ffn_gate_exps.weight", i, SYNTH_FFN_GATE_EXPS, 3, d, f, e);
    PUT("ffn_up_exps.weight", i, SYNTH_FFN_UP_EXPS, 3, d, f, e);
    PUT("ffn_down_exps.weight", i, SYNTH_FFN_DOWN_EXPS, 3, f, d, e);
    PUT("ffn_gate_inp_shexp.weight", i, SYNTH_SHEXP_GATE_INP, 1, d, 1, 1);
    PUT("ffn_gate_shexp.weight", i, SYNTH_MATRIX, 2, d, fs, 1);
    PUT("ffn_up_shexp.weight", i, SYNTH_MATRIX, 2, d, fs, 1);
    PUT("ffn_down_shexp.weight", i, SYNTH_FFN_DOWN_SHEXP, 2, fs, d, 1);
    return n;
}

/* Gated full attention (§3, §5.1): Q holds [query | gate] per head. */
static size_t put_attention(const struct hmoe_synth_preset *p, int i, struct hmoe_synth_tensor *out, size_t n) {
    const int64_t d = p->n_embd, hd = p->head_dim, q = (int64_t)p->n_head * hd, kv = (int64_t)p->n_head_kv * hd;
    PUT("attn_q.weight", i, SYNTH_ATTN_Q, 2, d, 2 * q, 1);
    PUT("attn_k.weight", i, SYNTH_ATTN_K, 2, d, kv, 1);
    PUT("attn_v.weight", i, SYNTH_ATTN_V, 2, d, kv, 1);
    PUT("attn_output.weight", i, SYNTH_ATTN_OUTPUT, 2, q, d, 1);
    PUT("attn_q_norm.weight", i, SYNTH_ATTN_Q_NORM, 1, hd, 1, 1);
    PUT("attn_k_norm.weight", i, SYNTH_ATTN_K_NORM, 1, hd, 1, 1);
    return n;
}

/* Gated DeltaNet (§3, §5.2). */
static size_t put_deltanet(const struct hmoe_synth_preset *p, int i, struct hmoe_synth_tensor *out, size_t n) {
    const int64_t d = p->n_embd, dk = p->ssm_state_size, hv = p->ssm_time_step_rank;
    const int64_t key_dim = (int64_t)p->ssm_group_count * dk, value_dim = hv * dk, conv_dim = 2 * key_dim + value_dim;
    PUT("attn_qkv.weight", i, SYNTH_ATTN_V, 2, d, conv_dim, 1);
    PUT("attn_gate.weight", i, SYNTH_MATRIX, 2, d, value_dim, 1);
    PUT("ssm_conv1d.weight", i, SYNTH_SSM_CONV, 2, p->ssm_conv_kernel, conv_dim, 1);
    PUT("ssm_dt.bias", i, SYNTH_SSM_DT, 1, hv, 1, 1);
    PUT("ssm_a", i, SYNTH_SSM_A, 1, hv, 1, 1);
    PUT("ssm_beta.weight", i, SYNTH_MATRIX, 2, d, hv, 1);
    PUT("ssm_alpha.weight", i, SYNTH_MATRIX, 2, d, hv, 1);
    PUT("ssm_norm.weight", i, SYNTH_NORM, 1, dk, 1, 1);
    PUT("ssm_out.weight", i, SYNTH_SSM_OUT, 2, value_dim, d, 1);
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
        n = put_ffn(p, i, out, n);
        n = (i + 1) % (int)p->full_attn_interval == 0 ? put_attention(p, i, out, n) : put_deltanet(p, i, out, n);
    }
    /* MTP blocks (§3, §8): a full-attention layer with the FFN, plus the nextn.* inputs. */
    for (int i = (int)p->n_layer; i < (int)(p->n_layer + p->n_nextn); i++) {
        n = put_ffn(p, i, out, n);
        n = put_attention(p, i, out, n);
        PUT("nextn.eh_proj.weight", i, SYNTH_MATRIX, 2, 2 * d, d, 1);
        PUT("nextn.enorm.weight", i, SYNTH_NORM, 1, d, 1, 1);
        PUT("nextn.hnorm.weight", i, SYNTH_NORM, 1, d, 1, 1);
        PUT("nextn.shared_head_norm.weight", i, SYNTH_NORM, 1, d, 1, 1);
    }
    return n;
}

/* Keys and types as the converter writes them (§2): counts u32, floats f32, sections i32[4]. */
static enum hmoe_status add_hparams(struct hmoe_gguf_writer *w, const struct hmoe_synth_preset *p,
                                    struct hmoe_err *err) {
    const uint32_t inner = p->ssm_time_step_rank * p->ssm_state_size;
    struct {
        const char *key;
        uint32_t v;
    } u[] = {
        {"qwen35moe.block_count", p->n_layer + p->n_nextn},
        {"qwen35moe.context_length", p->n_ctx},
        {"qwen35moe.embedding_length", p->n_embd},
        {"qwen35moe.attention.head_count", p->n_head},
        {"qwen35moe.attention.head_count_kv", p->n_head_kv},
        {"qwen35moe.attention.key_length", p->head_dim},
        {"qwen35moe.attention.value_length", p->head_dim},
        {"qwen35moe.rope.dimension_count", p->n_rot},
        {"qwen35moe.expert_count", p->n_expert},
        {"qwen35moe.expert_used_count", p->n_expert_used},
        {"qwen35moe.expert_feed_forward_length", p->n_ff_exp},
        {"qwen35moe.expert_shared_feed_forward_length", p->n_ff_shexp},
        {"qwen35moe.ssm.conv_kernel", p->ssm_conv_kernel},
        {"qwen35moe.ssm.state_size", p->ssm_state_size},
        {"qwen35moe.ssm.group_count", p->ssm_group_count},
        {"qwen35moe.ssm.time_step_rank", p->ssm_time_step_rank},
        {"qwen35moe.ssm.inner_size", inner},
        {"qwen35moe.full_attention_interval", p->full_attn_interval},
    };
    enum hmoe_status st = HMOE_OK;
    for (size_t i = 0; st == HMOE_OK && i < HMOE_ARRAY_LEN(u); i++) st = hmoe_gguf_writer_add_u32(w, u[i].key, u[i].v, err);
    if (st == HMOE_OK && p->n_nextn)
        st = hmoe_gguf_writer_add_u32(w, "qwen35moe.nextn_predict_layers", p->n_nextn, err);
    const int32_t sections[4] = {(int32_t)p->rope_sections[0], (int32_t)p->rope_sections[1],
                                 (int32_t)p->rope_sections[2], (int32_t)p->rope_sections[3]};
    if (st == HMOE_OK)
        st = hmoe_gguf_writer_add_arr(w, "qwen35moe.rope.dimension_sections", HMOE_GGUF_I32, sections, 4, err);
    if (st == HMOE_OK) st = hmoe_gguf_writer_add_f32(w, "qwen35moe.rope.freq_base", p->rope_freq_base, err);
    if (st == HMOE_OK) st = hmoe_gguf_writer_add_f32(w, "qwen35moe.attention.layer_norm_rms_epsilon", p->rms_eps, err);
    return st;
}

const struct hmoe_synth_arch hmoe_synth_arch_qwen35moe = {
    .name = "qwen35moe",
    .qwen3_template = false,
    .list_tensors = list_tensors,
    .max_tensors = max_tensors,
    .add_hparams = add_hparams,
};
