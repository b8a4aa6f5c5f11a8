/* qwen35moe_forward.c — the Qwen3.5/3.6 MoE forward pass for one micro-batch (qwen35moe.md §1):
 * embedding; per layer RMSNorm -> Gated DeltaNet (3 of every 4 layers, below) or gated full
 * attention (attention_gated.c) -> residual -> RMSNorm -> routed MoE (src/sched, routing as
 * qwen3moe) + sigmoid-gated shared expert (§7) -> residual; final RMSNorm and LM head.
 * The DeltaNet mixer here does the projections and threading (jobs of the cpu.h thread team);
 * the math is deltanet.c's.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hmoe/cpu.h"
#include "model/deltanet_impl.h"
#include "model/arch/qwen35moe.h"

void hmoe_qwen35_rec_dims(const struct hmoe_model_config *c, struct hmoe_rec_dims *o) {
    const int64_t dim = c->ssm_head_dim, key_dim = (int64_t)c->ssm_n_k_head * dim,
                  value_dim = (int64_t)c->ssm_n_v_head * dim, conv_dim = 2 * key_dim + value_dim;
    *o = (struct hmoe_rec_dims){.K = c->ssm_conv_kernel, .conv_dim = conv_dim,
                                .ssm_floats = (size_t)(c->ssm_n_v_head * dim * dim), .qkv_cols = conv_dim,
                                .y_cols = conv_dim, .z_cols = value_dim, .o_cols = value_dim,
                                .alpha_cols = c->ssm_n_v_head, .beta_cols = c->ssm_n_v_head,
                                .qg_cols = 2 * (int64_t)c->n_head * c->head_dim, .sh_cols = c->n_ff_shexp,
                                .sh_u_cols = c->n_ff_shexp, .chunk_floats = hmoe_gdn_chunk_scratch_floats((int)dim)};
}

/* One hmoe_qwen35_deltanet call as the thread team's work items see it. */
struct gdn_call {
    struct hmoe_ctx *c;
    const struct hmoe_gdn_weights *G;
    struct hmoe_rec_state *r;
    float *conv_state, *S;
    int64_t Hv, Hk, dim, kd, vd, cd, cchunk;
    int n;
    float eps, q_scale;
};

/* Causal conv over time for one chunk of channels. */
static void task_conv(void *arg, int64_t i, int tid) {
    (void)tid;
    const struct gdn_call *a = arg;
    const int64_t c0 = i * a->cchunk;
    hmoe_gdn_conv(a->r->qkv, (size_t)a->cd, a->conv_state, a->G->conv1d, a->r->K, a->cd, c0,
                  HMOE_MIN(a->cd, c0 + a->cchunk), a->n, a->r->y, (size_t)a->cd);
}

/* L2 norm of one (token, q/k head): j < Hk is q head j, else k head j - Hk. */
static void task_l2norm(void *arg, int64_t i, int tid) {
    (void)tid;
    const struct gdn_call *a = arg;
    const int64_t t = i / (2 * a->Hk), j = i % (2 * a->Hk);
    hmoe_gdn_l2norm(a->r->y + t * a->cd + j * a->dim, (int)a->dim, a->eps, j < a->Hk ? a->q_scale : 1.0f);
}

/* The recurrence of one value head over the batch (value head h reads q/k head h mod Hk,
 * §4.5), then its output through the gated RMSNorm. Token by token also for a prefill: on CPUs
 * the recurrence does the chunked form's arithmetic (§5.3) in one cache-resident pass per
 * token and measures faster (bench/bench_deltanet.c). */
static void task_head(void *arg, int64_t h, int tid) {
    (void)tid;
    const struct gdn_call *a = arg;
    struct hmoe_rec_state *r = a->r;
    const int64_t dim = a->dim, cd = a->cd, vd = a->vd, Hv = a->Hv, g = h % a->Hk;
    const float *q = r->y + g * dim, *k = r->y + a->kd + g * dim, *v = r->y + 2 * a->kd + h * dim;
    float *Sh = a->S + (size_t)h * (size_t)(dim * dim), *o = r->o + h * dim;
    hmoe_gdn_recurrent(Sh, (int)dim, a->n, q, k, (size_t)cd, v, (size_t)cd, r->alpha + h, r->beta + h, (size_t)Hv, o,
                       (size_t)vd);
    for (int t = 0; t < a->n; t++)
        hmoe_gdn_gated_norm(o + (size_t)t * vd, r->z + (size_t)t * vd + h * dim, a->G->norm, (int)dim, a->eps);
}

/* The parts that carry one sequence's state over its rows: causal conv over time (split by
 * channels), L2 norm per (token, q/k head), the recurrence per value head (independent heads,
 * sequential tokens). */
static void deltanet_seq(struct hmoe_ctx *c, int il, int n) {
    const struct hmoe_model_config *cfg = &c->m->cfg;
    const struct hmoe_gdn_weights *G = &c->m->w.layers[il].gdn;
    struct hmoe_rec_state *r = c->rs.rec;
    const int nt = c->p.n_threads, nt_small = n >= 4 ? nt : 1; /* tiny steps of a decoded token: no job */
    struct gdn_call a = {.c = c, .G = G, .r = r, .conv_state = r->conv + (size_t)r->slot[il] * r->conv_floats,
                         .S = r->ssm + (size_t)r->slot[il] * r->ssm_floats, .Hv = r->n_v_head, .Hk = r->n_k_head,
                         .dim = r->dim, .kd = r->key_dim, .vd = r->value_dim, .cd = r->conv_dim, .cchunk = 256,
                         .n = n, .eps = cfg->rms_eps, .q_scale = 1.0f / sqrtf((float)r->dim)};
    hmoe_cpu_parallel(nt_small, (a.cd + a.cchunk - 1) / a.cchunk, task_conv, &a);
    hmoe_cpu_parallel(nt_small, (int64_t)n * 2 * a.Hk, task_l2norm, &a);
    hmoe_cpu_parallel(nt, a.Hv, task_head, &a);
}

void hmoe_qwen35_deltanet(struct hmoe_ctx *c, int il, int n) {
    const struct hmoe_model_config *cfg = &c->m->cfg;
    const struct hmoe_gdn_weights *G = &c->m->w.layers[il].gdn;
    struct hmoe_run_state *rs = &c->rs;
    struct hmoe_rec_state *r = rs->rec;
    const int64_t d = cfg->n_embd, Hv = r->n_v_head, vd = r->value_dim, cd = r->conv_dim;

    /* Projections that share the normed input: qkv (conv input), z, alpha, beta. */
    const struct hmoe_mm_job jobs[4] = {
        {&G->qkv, r->qkv, (size_t)cd, NULL},
        {&G->gate, r->z, (size_t)vd, NULL},
        {&G->alpha, r->alpha, (size_t)Hv, NULL},
        {&G->beta, r->beta, (size_t)Hv, NULL},
    };
    hmoe_model_matmul(c, jobs, 4, rs->xn, (size_t)d, n);
    hmoe_gdn_gates(r->alpha, r->beta, (size_t)Hv, G->dt_bias, G->a, n, (int)Hv);
    hmoe_model_per_seq(c, il, n, deltanet_seq);
    const struct hmoe_mm_job wo = {&G->out, rs->out, (size_t)d, NULL};
    hmoe_model_matmul(c, &wo, 1, r->o, (size_t)vd, n);
}

/* Routed experts + sigmoid-gated shared expert of the normed rs->xn into rs->out (§7). */
enum hmoe_status hmoe_qwen35_ffn(struct hmoe_ctx *c, const struct hmoe_layer_weights *L, int n, struct hmoe_err *err) {
    const struct hmoe_model_config *cfg = &c->m->cfg;
    struct hmoe_run_state *rs = &c->rs;
    struct hmoe_rec_state *r = rs->rec;
    const int64_t d = cfg->n_embd, Fs = cfg->n_ff_shexp;
    enum hmoe_status st = hmoe_sched_moe_ffn(rs->moe, &L->moe, rs->xn, n, rs->out, err);
    if (st) return st;
    const struct hmoe_mm_job up[3] = {
        {&L->shexp.gate, r->sh_g, (size_t)Fs, NULL},
        {&L->shexp.up, r->sh_u, (size_t)Fs, NULL},
        {&L->shexp.gate_inp, r->sh_gamma, 1, NULL},
    };
    hmoe_model_matmul(c, up, 3, rs->xn, (size_t)d, n);
    for (int64_t i = 0; i < n * Fs; i++) r->sh_g[i] = r->sh_g[i] / (1.0f + expf(-r->sh_g[i])) * r->sh_u[i];
    const struct hmoe_mm_job down = {&L->shexp.down, r->sh_out, (size_t)d, NULL};
    hmoe_model_matmul(c, &down, 1, r->sh_g, (size_t)Fs, n);
    for (int t = 0; t < n; t++) {
        const float gamma = 1.0f / (1.0f + expf(-r->sh_gamma[t]));
        float *o = rs->out + (size_t)t * d;
        const float *s = r->sh_out + (size_t)t * d;
        for (int64_t j = 0; j < d; j++) o[j] += gamma * s[j];
    }
    return HMOE_OK;
}

enum hmoe_status hmoe_qwen35moe_forward(struct hmoe_ctx *c, const int32_t *ids, int n, int pos0,
                                        enum hmoe_logits which, float *logits, struct hmoe_err *err) {
    const struct hmoe_model_config *cfg = &c->m->cfg;
    const struct hmoe_model_weights *w = &c->m->w;
    struct hmoe_run_state *rs = &c->rs;

    hmoe_model_positions(c, n, pos0);
    hmoe_model_mrope_text_table(c, n);
    hmoe_model_embed(c, ids, n);

    for (int il = 0; il < cfg->n_layer; il++) {
        const struct hmoe_layer_weights *L = &w->layers[il];
        /* The previous layer's FFN output joins the residual here. */
        hmoe_model_add_rmsnorm(c, rs->x, il > 0 ? rs->out : NULL, rs->xn, L->attn_norm, n);
        if (L->recurrent) hmoe_qwen35_deltanet(c, il, n);
        else hmoe_model_gated_attention(c, il, n);
        /* post_attention_norm, the pre-FFN norm (trap 4). */
        hmoe_model_add_rmsnorm(c, rs->x, rs->out, rs->xn, L->ffn_norm, n);
        enum hmoe_status st = hmoe_qwen35_ffn(c, L, n, err);
        if (st) return st;
    }

    /* Last residual and final norm only for the rows whose logits are wanted (the residual
     * of the other rows is never read again). */
    hmoe_model_logits(c, which, n, logits);
    return HMOE_OK;
}
