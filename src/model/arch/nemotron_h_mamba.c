/* nemotron_h_mamba.c — the Mamba-2 mixer of a nemotron_h layer for one micro-batch
 * (nemotron_h_moe.md §4): ssm_in projection, causal depthwise conv + bias + SiLU over
 * [conv state | x B C], Δ = softplus(dt + dt_bias), the selective scan per head (token by
 * token also in prefill: mamba2_impl.h says why), y ⊙ silu(z) through the grouped RMSNorm,
 * ssm_out. The math is mamba2.c's and deltanet.c's conv; this file does the threading (jobs
 * of the cpu.h thread team) and the state's shapes.
 */
#include "hmoe/cpu.h"
#include "model/arch/nemotron_h.h"
#include "model/deltanet_impl.h"
#include "model/mamba2_impl.h"

void hmoe_nemotron_rec_dims(const struct hmoe_model_config *c, struct hmoe_rec_dims *o) {
    const int64_t di = c->ssm_d_inner, N = c->ssm_d_state, G = c->ssm_n_group, H = c->ssm_n_head;
    const int64_t conv_dim = di + 2 * G * N, m = c->moe_latent;
    const int64_t ff = HMOE_MAX((int64_t)c->n_ff_shexp, (int64_t)c->n_ff_dense);
    *o = (struct hmoe_rec_dims){.K = c->ssm_conv_kernel,
                                .conv_dim = conv_dim,
                                .ssm_floats = (size_t)(di * N),
                                .qkv_cols = di + conv_dim + H, /* ssm_in output [z | x B C | dt] */
                                .y_cols = conv_dim,            /* conv + SiLU output */
                                .z_cols = m,                   /* latent MoE input */
                                .o_cols = HMOE_MAX(di, m),     /* head outputs; latent MoE output */
                                .o_seq_cols = di,              /* the scan writes rows of d_inner */
                                .alpha_cols = H,               /* Δ per head */
                                .sh_cols = ff};                /* shared expert / dense FFN hidden */
}

struct mamba_call {
    const struct hmoe_mamba2_weights *M;
    struct hmoe_rec_state *r;
    float *conv_state, *S;
    int64_t di, cd, dip, H, P, N, G, cchunk;
    int K, n;
    float eps;
};

static void task_conv(void *arg, int64_t i, int tid) {
    (void)tid;
    const struct mamba_call *a = arg;
    const int64_t c0 = i * a->cchunk;
    hmoe_gdn_conv_bias(a->r->qkv + a->di, (size_t)a->dip, a->conv_state, a->M->conv1d, a->M->conv_bias, a->K, a->cd,
                       c0, HMOE_MIN(a->cd, c0 + a->cchunk), a->n, a->r->y, (size_t)a->cd);
}

/* The scan of head h over the batch; it reads B/C group h / (H / G). */
static void task_head(void *arg, int64_t h, int tid) {
    (void)tid;
    const struct mamba_call *a = arg;
    struct hmoe_rec_state *r = a->r;
    const int64_t g = h / (a->H / a->G), P = a->P, N = a->N;
    const float *x = r->y + h * P, *B = r->y + a->di + g * N, *C = r->y + a->di + a->G * N + g * N;
    float *S = a->S + (size_t)(h * P * N), *y = r->o + h * P;
    hmoe_mamba2_scan(S, (int)P, (int)N, a->n, x, (size_t)a->cd, B, C, (size_t)a->cd, r->alpha + h, (size_t)a->H,
                     a->M->a[h], a->M->d[h], y, (size_t)a->di);
}

/* One (token, norm group): gate with silu(z), then RMSNorm over the group's channels. */
static void task_norm(void *arg, int64_t i, int tid) {
    (void)tid;
    const struct mamba_call *a = arg;
    const int64_t t = i / a->G, j = i % a->G, gs = a->di / a->G;
    hmoe_mamba2_gated_norm(a->r->o + t * a->di + j * gs, a->r->qkv + t * a->dip + j * gs, a->M->norm + j * gs, (int)gs,
                           a->eps);
}

/* The layer's arguments for the rows of c's (possibly a batch view's) sequence. */
static struct mamba_call mamba_args(struct hmoe_ctx *c, int il, int n) {
    const struct hmoe_model_config *cfg = &c->m->cfg;
    struct hmoe_rec_state *r = c->rs.rec;
    const int64_t di = cfg->ssm_d_inner, H = cfg->ssm_n_head, cd = r->conv_dim;
    return (struct mamba_call){.M = &c->m->w.layers[il].mamba, .r = r,
                               .conv_state = r->conv + (size_t)r->slot[il] * r->conv_floats,
                               .S = r->ssm + (size_t)r->slot[il] * r->ssm_floats, .di = di, .cd = cd,
                               .dip = di + cd + H, .H = H, .P = di / H, .N = cfg->ssm_d_state,
                               .G = cfg->ssm_n_group, .cchunk = 256, .K = r->K, .n = n, .eps = cfg->rms_eps};
}

/* The parts that carry one sequence's state over its rows: the causal conv and the scan. */
static void mamba_seq(struct hmoe_ctx *c, int il, int n) {
    struct mamba_call a = mamba_args(c, il, n);
    const int nt = c->p.n_threads, nt_small = n >= 4 ? nt : 1; /* a decoded token's small steps: no job */
    hmoe_cpu_parallel(nt_small, (a.cd + a.cchunk - 1) / a.cchunk, task_conv, &a);
    hmoe_cpu_parallel(nt, a.H, task_head, &a);
}

void hmoe_nemotron_mamba(struct hmoe_ctx *c, int il, int n) {
    const struct hmoe_model_config *cfg = &c->m->cfg;
    const struct hmoe_mamba2_weights *M = &c->m->w.layers[il].mamba;
    struct hmoe_run_state *rs = &c->rs;
    struct hmoe_rec_state *r = rs->rec;
    const int64_t di = cfg->ssm_d_inner, H = cfg->ssm_n_head, cd = r->conv_dim;
    const int nt_small = n >= 4 ? c->p.n_threads : 1; /* a decoded token's small steps: no job */
    struct mamba_call a = mamba_args(c, il, n);

    const struct hmoe_mm_job in = {&M->in, r->qkv, (size_t)a.dip, NULL};
    hmoe_model_matmul(c, &in, 1, rs->xn, (size_t)cfg->n_embd, n);
    /* Δ per (token, head) into its own rows: the scan reads it with a stride of H. */
    for (int t = 0; t < n; t++)
        for (int64_t h = 0; h < H; h++) r->alpha[(size_t)t * H + h] = r->qkv[(size_t)t * a.dip + di + cd + h];
    hmoe_mamba2_dt(r->alpha, (size_t)H, M->dt_bias, n, (int)H);
    hmoe_model_per_seq(c, il, n, mamba_seq);
    hmoe_cpu_parallel(nt_small, (int64_t)n * a.G, task_norm, &a);
    const struct hmoe_mm_job out = {&M->out, rs->out, (size_t)cfg->n_embd, NULL};
    hmoe_model_matmul(c, &out, 1, r->o, (size_t)di, n);
}
