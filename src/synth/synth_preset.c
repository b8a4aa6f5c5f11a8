/* synth_preset.c — model presets for `hmoe synth` and the qwen3moe architecture behind
 * them: hyperparameters (qwen3moe.md §8), metadata keys (§1) and the tensor list in the
 * order convert_hf_to_gguf / gguf_synth.py write it (§2; fixtures/README.md "models").
 * The qwen35moe presets use the second descriptor in synth_qwen35.c (qwen35moe.md §3, §9).
 */
#include <stdio.h>
#include <string.h>

#include "synth_impl.h"

static const struct hmoe_synth_preset presets[] = {
    /* Qwen3-30B-A3B: 48 layers, 32/4 heads x 128, 128 experts top-8, expert FFN 768 */
    {.name = "qwen3-30b-a3b", .arch = &hmoe_synth_arch_qwen3moe, .n_layer = 48, .n_embd = 2048, .n_head = 32,
     .n_head_kv = 4, .head_dim = 128, .n_expert = 128, .n_expert_used = 8, .n_ff_exp = 768, .n_ff = 6144,
     .n_vocab = 151936, .n_ctx = 40960, .rope_freq_base = 1e6f, .rms_eps = 1e-6f},
    /* Qwen3-235B-A22B: 94 layers, 64/4 heads x 128, 128 experts top-8, expert FFN 1536 */
    {.name = "qwen3-235b-a22b", .arch = &hmoe_synth_arch_qwen3moe, .n_layer = 94, .n_embd = 4096, .n_head = 64,
     .n_head_kv = 4, .head_dim = 128, .n_expert = 128, .n_expert_used = 8, .n_ff_exp = 1536, .n_ff = 12288,
     .n_vocab = 151936, .n_ctx = 40960, .rope_freq_base = 1e6f, .rms_eps = 1e-6f},
    /* Same structure, small: the shape of fixtures model A (n_ff = 4 x 256 as there) */
    {.name = "tiny", .arch = &hmoe_synth_arch_qwen3moe, .n_layer = 4, .n_embd = 256, .n_head = 8, .n_head_kv = 2,
     .head_dim = 64, .n_expert = 16, .n_expert_used = 4, .n_ff_exp = 256, .n_ff = 1024, .n_vocab = 151936,
     .n_ctx = 4096, .rope_freq_base = 1e6f, .rms_eps = 1e-6f},
    /* Qwen3.6-35B-A3B (= Qwen3.5-35B-A3B, qwen35moe.md §9): 40 layers = 10 x (3 DeltaNet + 1 gated
     * attention), 16/2 heads x 256 with 64 rotated, DeltaNet 16 q/k heads, 32 v heads x 128,
     * 256 experts top-8 x 512 + shared expert 512. Written without the MTP block, as the
     * stock 21.2 GB Q4_K_M file of §9. */
    {.name = "qwen3.6-35b-a3b", .arch = &hmoe_synth_arch_qwen35moe, .n_layer = 40, .n_embd = 2048, .n_head = 16,
     .n_head_kv = 2, .head_dim = 256, .n_expert = 256, .n_expert_used = 8, .n_ff_exp = 512, .n_vocab = 248320,
     .n_ctx = 262144, .rope_freq_base = 1e7f, .rms_eps = 1e-6f, .full_attn_interval = 4, .n_ff_shexp = 512,
     .n_rot = 64, .rope_sections = {11, 11, 10, 0}, .ssm_conv_kernel = 4, .ssm_state_size = 128,
     .ssm_group_count = 16, .ssm_time_step_rank = 32},
    /* The same structure, small, with one MTP block (the drafter of --spec mtp): for tests. */
    {.name = "qwen35-tiny", .arch = &hmoe_synth_arch_qwen35moe, .n_layer = 4, .n_embd = 256, .n_head = 4,
     .n_head_kv = 2, .head_dim = 64, .n_expert = 16, .n_expert_used = 4, .n_ff_exp = 256, .n_vocab = 2048,
     .n_ctx = 4096, .rope_freq_base = 1e7f, .rms_eps = 1e-6f, .n_nextn = 1, .full_attn_interval = 4,
     .n_ff_shexp = 256, .n_rot = 16, .rope_sections = {3, 3, 2, 0}, .ssm_conv_kernel = 4, .ssm_state_size = 64,
     .ssm_group_count = 2, .ssm_time_step_rank = 4},
    /* NVIDIA Nemotron-3-Nano-30B-A3B (nemotron_h_moe.md §9): 52 layers = 23 Mamba-2 + 6 attention
     * + 23 MoE; d 2688; Mamba-2 64 heads x 64 (inner 4096), 8 groups, state 128, conv 4; 32/2
     * heads x 128 without RoPE; 128 ungated experts top-6 x 1856 + shared expert 3712. */
    {.name = "nemotron-3-nano-30b-a3b", .arch = &hmoe_synth_arch_nemotron_h_moe, .n_layer = 52, .n_embd = 2688,
     .n_head = 32, .n_head_kv = 2, .head_dim = 128, .n_expert = 128, .n_expert_used = 6, .n_ff_exp = 1856,
     .n_vocab = 131072, .n_ctx = 1048576, .rope_freq_base = 10000.0f, .rms_eps = 1e-5f, .n_ff_shexp = 3712,
     .ssm_conv_kernel = 4, .ssm_state_size = 128, .ssm_group_count = 8, .ssm_time_step_rank = 64,
     .layer_pattern = "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME", .ssm_inner_size = 4096},
    /* The same structure, small; d 320 and F 160 are not multiples of 256, so the Q4_K_M mix
     * falls back to Q5_0 / Q8_0 as for the real model. For tests. */
    {.name = "nemotron-tiny", .arch = &hmoe_synth_arch_nemotron_h_moe, .n_layer = 6, .n_embd = 320, .n_head = 4,
     .n_head_kv = 2, .head_dim = 64, .n_expert = 16, .n_expert_used = 4, .n_ff_exp = 160, .n_vocab = 2048,
     .n_ctx = 4096, .rope_freq_base = 10000.0f, .rms_eps = 1e-5f, .n_ff_shexp = 320, .ssm_conv_kernel = 4,
     .ssm_state_size = 32, .ssm_group_count = 2, .ssm_time_step_rank = 8, .layer_pattern = "MEM*EE",
     .ssm_inner_size = 256},
};

const struct hmoe_synth_preset *hmoe_synth_find_preset(const char *name) {
    for (size_t i = 0; name && i < HMOE_ARRAY_LEN(presets); i++)
        if (strcmp(presets[i].name, name) == 0) return &presets[i];
    for (size_t i = 0; name && i < HMOE_SYNTH_GPTOSS_N_PRESETS; i++) /* synth_gptoss.c */
        if (strcmp(hmoe_synth_gptoss_presets[i].name, name) == 0) return &hmoe_synth_gptoss_presets[i];
    return NULL;
}

const char *hmoe_synth_preset_names(void) {
    return "qwen3-30b-a3b, qwen3-235b-a22b, tiny, qwen3.6-35b-a3b, qwen35-tiny, nemotron-3-nano-30b-a3b, nemotron-tiny, "
           "gpt-oss-20b, gpt-oss-120b, gpt-oss-tiny";
}

/* ---- qwen3moe ------------------------------------------------------------------------ */

static size_t qwen3moe_max_tensors(const struct hmoe_synth_preset *p) { return 3 + 12 * (size_t)p->n_layer; }

void hmoe_synth_put_tensor(struct hmoe_synth_tensor *t, const char *name, int layer, int role, uint32_t n_dims,
                           int64_t ne0, int64_t ne1, int64_t ne2) {
    memset(t, 0, sizeof *t);
    if (layer >= 0) snprintf(t->name, sizeof t->name, "blk.%d.%s", layer, name);
    else snprintf(t->name, sizeof t->name, "%s", name);
    t->layer = layer;
    t->role = role;
    t->n_dims = n_dims;
    t->ne[0] = ne0;
    t->ne[1] = n_dims > 1 ? ne1 : 1;
    t->ne[2] = n_dims > 2 ? ne2 : 1;
    t->ne[3] = 1;
}

/* Order: token_embd, output_norm, output, then per layer attention before MoE — the order
 * of gguf_synth.py, so both tools give identical tensor infos (names, shapes, offsets). */
static size_t qwen3moe_list_tensors(const struct hmoe_synth_preset *p, struct hmoe_synth_tensor *out, size_t max) {
    if (max < qwen3moe_max_tensors(p)) return 0;
    int64_t d = p->n_embd, q = (int64_t)p->n_head * p->head_dim, kv = (int64_t)p->n_head_kv * p->head_dim;
    int64_t hd = p->head_dim, f = p->n_ff_exp, e = p->n_expert, v = p->n_vocab;
    size_t n = 0;
    hmoe_synth_put_tensor(&out[n++], "token_embd.weight", -1, SYNTH_TOKEN_EMBD, 2, d, v, 1);
    hmoe_synth_put_tensor(&out[n++], "output_norm.weight", -1, SYNTH_OUTPUT_NORM, 1, d, 1, 1);
    hmoe_synth_put_tensor(&out[n++], "output.weight", -1, SYNTH_OUTPUT, 2, d, v, 1);
    for (int i = 0; i < (int)p->n_layer; i++) {
        hmoe_synth_put_tensor(&out[n++], "attn_norm.weight", i, SYNTH_ATTN_NORM, 1, d, 1, 1);
        hmoe_synth_put_tensor(&out[n++], "attn_q.weight", i, SYNTH_ATTN_Q, 2, d, q, 1);
        hmoe_synth_put_tensor(&out[n++], "attn_k.weight", i, SYNTH_ATTN_K, 2, d, kv, 1);
        hmoe_synth_put_tensor(&out[n++], "attn_v.weight", i, SYNTH_ATTN_V, 2, d, kv, 1);
        hmoe_synth_put_tensor(&out[n++], "attn_output.weight", i, SYNTH_ATTN_OUTPUT, 2, q, d, 1);
        hmoe_synth_put_tensor(&out[n++], "attn_q_norm.weight", i, SYNTH_ATTN_Q_NORM, 1, hd, 1, 1);
        hmoe_synth_put_tensor(&out[n++], "attn_k_norm.weight", i, SYNTH_ATTN_K_NORM, 1, hd, 1, 1);
        hmoe_synth_put_tensor(&out[n++], "ffn_norm.weight", i, SYNTH_FFN_NORM, 1, d, 1, 1);
        hmoe_synth_put_tensor(&out[n++], "ffn_gate_inp.weight", i, SYNTH_FFN_ROUTER, 2, d, e, 1);
        hmoe_synth_put_tensor(&out[n++], "ffn_gate_exps.weight", i, SYNTH_FFN_GATE_EXPS, 3, d, f, e);
        hmoe_synth_put_tensor(&out[n++], "ffn_up_exps.weight", i, SYNTH_FFN_UP_EXPS, 3, d, f, e);
        hmoe_synth_put_tensor(&out[n++], "ffn_down_exps.weight", i, SYNTH_FFN_DOWN_EXPS, 3, f, d, e);
    }
    return n;
}

/* Keys and types as convert_hf_to_gguf writes them (qwen3moe.md §1): counts u32, floats f32. */
static enum hmoe_status qwen3moe_add_hparams(struct hmoe_gguf_writer *w, const struct hmoe_synth_preset *p,
                                             struct hmoe_err *err) {
    struct {
        const char *key;
        uint32_t v;
    } u[] = {
        {"qwen3moe.block_count", p->n_layer},
        {"qwen3moe.context_length", p->n_ctx},
        {"qwen3moe.embedding_length", p->n_embd},
        {"qwen3moe.feed_forward_length", p->n_ff},
        {"qwen3moe.attention.head_count", p->n_head},
        {"qwen3moe.attention.head_count_kv", p->n_head_kv},
        {"qwen3moe.attention.key_length", p->head_dim},
        {"qwen3moe.attention.value_length", p->head_dim},
    };
    enum hmoe_status st = HMOE_OK;
    for (size_t i = 0; st == HMOE_OK && i < HMOE_ARRAY_LEN(u); i++) st = hmoe_gguf_writer_add_u32(w, u[i].key, u[i].v, err);
    if (st == HMOE_OK) st = hmoe_gguf_writer_add_f32(w, "qwen3moe.rope.freq_base", p->rope_freq_base, err);
    if (st == HMOE_OK) st = hmoe_gguf_writer_add_f32(w, "qwen3moe.attention.layer_norm_rms_epsilon", p->rms_eps, err);
    if (st == HMOE_OK) st = hmoe_gguf_writer_add_u32(w, "qwen3moe.expert_count", p->n_expert, err);
    if (st == HMOE_OK) st = hmoe_gguf_writer_add_u32(w, "qwen3moe.expert_used_count", p->n_expert_used, err);
    if (st == HMOE_OK) st = hmoe_gguf_writer_add_u32(w, "qwen3moe.expert_feed_forward_length", p->n_ff_exp, err);
    return st;
}

const struct hmoe_synth_arch hmoe_synth_arch_qwen3moe = {
    .name = "qwen3moe",
    .qwen3_template = true,
    .list_tensors = qwen3moe_list_tensors,
    .max_tensors = qwen3moe_max_tensors,
    .add_hparams = qwen3moe_add_hparams,
};
