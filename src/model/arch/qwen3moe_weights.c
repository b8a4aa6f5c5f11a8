/* qwen3moe_weights.c — bind one qwen3moe main layer (qwen3moe.md §2): attn_norm, Q/K/V
 * (split or fused), per-head Q/K norms, the output projection, ffn_norm, the router and the
 * gate/up/down expert stacks. Shapes come from the config; a wrong one is named with what the
 * architecture needs (weights.c helpers).
 */
#include <stdio.h>

#include "model/arch/qwen3moe.h"

enum hmoe_status hmoe_qwen3moe_bind_layer(struct hmoe_model *md, int il, struct hmoe_err *err) {
    const struct hmoe_model_config *c = &md->cfg;
    struct hmoe_layer_weights *L = &md->w.layers[il];
    const int64_t d = c->n_embd, D = c->head_dim, E = c->n_expert, F = c->n_ff_exp,
                  no = (int64_t)c->n_head * c->head_dim_v;
    char name[96];
    enum hmoe_status st;
#define NAME(suffix) (snprintf(name, sizeof name, "blk.%d.%s", il, suffix), name)
    if ((st = hmoe_model_bind_vec(md, NAME("attn_norm.weight"), d, true, &L->attn_norm, err))) return st;
    if ((st = hmoe_model_bind_qkv(md, il, L, err))) return st;
    if ((st = hmoe_model_bind_vec(md, NAME("attn_q_norm.weight"), D, true, &L->attn_q_norm, err))) return st;
    if ((st = hmoe_model_bind_vec(md, NAME("attn_k_norm.weight"), D, true, &L->attn_k_norm, err))) return st;
    if ((st = hmoe_model_bind_mat(md, NAME("attn_output.weight"), (int64_t[]){no, d}, 2, &L->attn_output, err))) return st;
    if ((st = hmoe_model_bind_vec(md, NAME("ffn_norm.weight"), d, true, &L->ffn_norm, err))) return st;
    if ((st = hmoe_model_bind_mat(md, NAME("ffn_gate_inp.weight"), (int64_t[]){d, E}, 2, &L->moe.router, err))) return st;
    if (!hmoe_gguf_find_tensor(md->gguf, NAME("ffn_gate_exps.weight")) &&
        hmoe_gguf_find_tensor(md->gguf, NAME("ffn_gate_up_exps.weight")))
        return HMOE_RAISE(err, HMOE_ERR_UNSUPPORTED,
                          "%s: %s (fused gate/up experts) is not valid for qwen3moe; convert without "
                          "--fuse-gate-up-exps",
                          md->gguf->path, name);
    if ((st = hmoe_model_bind_mat(md, NAME("ffn_gate_exps.weight"), (int64_t[]){d, F, E}, 3, &L->moe.gate, err))) return st;
    if ((st = hmoe_model_bind_mat(md, NAME("ffn_up_exps.weight"), (int64_t[]){d, F, E}, 3, &L->moe.up, err))) return st;
    if ((st = hmoe_model_bind_mat(md, NAME("ffn_down_exps.weight"), (int64_t[]){F, d, E}, 3, &L->moe.down, err))) return st;
#undef NAME
    L->moe.n_expert_used = c->n_expert_used;
    L->moe.gating = c->arch_entry->moe.gating;
    L->moe.act = c->arch_entry->moe.act;
    return HMOE_OK;
}
