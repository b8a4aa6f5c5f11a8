/* attention_gated.c — the gated full-attention mixer of qwen35moe (qwen35moe.md §5.1, §6):
 * Q projection with a per-head [query | gate] layout, per-head Q/K RMSNorm, partial
 * interleaved M-RoPE on the first n_rot dims (for text tokens: NEOX pairs with every
 * section at the token's position, the e section at 0), causal GQA attention over the KV
 * cache (attention.c, scale 1/sqrt(head_dim)), output gate sigmoid(gate), attn_output.
 */
#include <math.h>
#include <string.h>

#include "hmoe/cpu.h"
#include "model/recurrent_impl.h"

/* Which position stream rotation pair s uses (§6): t, h, w for s % 3 == 0, 1, 2 while
 * s < 3 * section, else e. Text tokens have t = h = w = p and e = 0. */
static bool pair_uses_e(const int *sec, int s) {
    const int k = s % 3;
    return s >= 3 * sec[k];
}

void hmoe_model_mrope_text_table(const struct hmoe_ctx *c, int n) {
    const struct hmoe_model_config *cfg = &c->m->cfg;
    const struct hmoe_run_state *rs = &c->rs;
    const int half = cfg->n_rot / 2;
    hmoe_model_rope_table(cfg, rs->pos, n, rs->rope_cos, rs->rope_sin);
    for (int s = 0; s < half; s++) {
        if (!pair_uses_e(cfg->rope_sections, s)) continue;
        for (int t = 0; t < n; t++) {
            rs->rope_cos[(size_t)t * half + s] = rs->rec->rope0_cos[s];
            rs->rope_sin[(size_t)t * half + s] = rs->rec->rope0_sin[s];
        }
    }
}

/* One hmoe_model_gated_attention call as the thread team's work items see it. */
struct gatt_call {
    struct hmoe_ctx *c;
    const struct hmoe_layer_weights *L;
};

/* One token: split [query | gate] per head; norm + rotate queries and keys (gate stays raw,
 * trap 5). */
static void task_qk(void *arg, int64_t t, int tid) {
    (void)tid;
    const struct gatt_call *a = arg;
    const struct hmoe_model_config *cfg = &a->c->m->cfg;
    const struct hmoe_run_state *rs = &a->c->rs;
    const float *qg = rs->rec->qg;
    const int64_t H = cfg->n_head, Hkv = cfg->n_head_kv, D = cfg->head_dim, nq = H * D, nk = Hkv * D;
    const int64_t half = cfg->n_rot / 2;
    const float *co = rs->rope_cos + t * half, *si = rs->rope_sin + t * half;
    for (int64_t j = 0; j < H; j++) {
        float *qh = rs->q + t * nq + j * D;
        hmoe_model_rmsnorm(qh, qg + t * 2 * nq + j * 2 * D, a->L->attn_q_norm, D, cfg->rms_eps);
        hmoe_model_rope_neox(qh, cfg->n_rot, co, si);
    }
    for (int64_t j = 0; j < Hkv; j++) {
        float *kh = rs->k + t * nk + j * D;
        hmoe_model_rmsnorm(kh, kh, a->L->attn_k_norm, D, cfg->rms_eps);
        hmoe_model_rope_neox(kh, cfg->n_rot, co, si);
    }
}

/* One token: output gate, elementwise over the concatenated heads (§5.1 step 6). */
static void task_gate(void *arg, int64_t t, int tid) {
    (void)tid;
    const struct gatt_call *a = arg;
    const struct hmoe_model_config *cfg = &a->c->m->cfg;
    const struct hmoe_run_state *rs = &a->c->rs;
    const int64_t H = cfg->n_head, D = cfg->head_dim, Dv = cfg->head_dim_v, nq = H * D;
    for (int64_t j = 0; j < H; j++) {
        float *o = rs->attn + t * H * Dv + j * Dv;
        const float *gate = rs->rec->qg + t * 2 * nq + j * 2 * D + D;
        for (int64_t e = 0; e < Dv; e++) o[e] *= 1.0f / (1.0f + expf(-gate[e]));
    }
}

void hmoe_model_gated_attention(struct hmoe_ctx *c, int il, int n) {
    const struct hmoe_model_config *cfg = &c->m->cfg;
    const struct hmoe_layer_weights *L = &c->m->w.layers[il];
    struct hmoe_run_state *rs = &c->rs;
    const int64_t d = cfg->n_embd, H = cfg->n_head, Hkv = cfg->n_head_kv, D = cfg->head_dim, Dv = cfg->head_dim_v;
    const int nt_small = n >= 4 ? c->p.n_threads : 1; /* per-token steps of a decoded token: no job */
    struct gatt_call a = {.c = c, .L = L};

    const struct hmoe_mm_job qkv[3] = {
        {&L->attn_q, rs->rec->qg, (size_t)(2 * H * D), NULL},
        {&L->attn_k, rs->k, (size_t)(Hkv * D), NULL},
        {&L->attn_v, rs->v, (size_t)(Hkv * Dv), NULL},
    };
    hmoe_model_matmul(c, qkv, 3, rs->xn, (size_t)d, n);
    hmoe_cpu_parallel(nt_small, n, task_qk, &a);
    hmoe_model_attention(c, il, n);
    hmoe_cpu_parallel(nt_small, n, task_gate, &a);
    const struct hmoe_mm_job wo = {&L->attn_output, rs->out, (size_t)d, NULL};
    hmoe_model_matmul(c, &wo, 1, rs->attn, (size_t)(H * Dv), n);
}
