/* qwen35moe_gpu_init.c — the qwen35moe part of the GPU backend's setup (qwen35moe_gpu.h): checks
 * of what the kernels support, the VRAM it needs (for placement under the budget), the upload of
 * each layer's DeltaNet and shared-expert weights (matrices that share an input back to back, so
 * equal types become one product), the recurrent state in VRAM (zeroed; recurrent.c moves it for
 * rewinds and checkpoints), and the mixer buffers for the largest micro-batch.
 * qwen35moe.md §2-§3, §5-§7; attention weights, KV cache and experts are gpu_init.c's; these
 * are the entry's gpu hooks check / vram_bytes / init / free / report (arch.h).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <stdio.h>

#include "model/arch/qwen35moe.h"
#include "model/arch/qwen35moe_gpu.h"

#define SMALL_TOKENS 8 /* as gpu_forward.c: f16 copies only for larger micro-batches */

static size_t align256(size_t n) { return (n + 255) / 256 * 256; }
static size_t mat_bytes(const struct hmoe_mat *m) { return (size_t)m->n_out * m->row_bytes; }

enum hmoe_status hmoe_gpu_q35_check(const struct hmoe_model *m, struct hmoe_err *err) {
    const struct hmoe_model_config *cfg = &m->cfg;
    if (cfg->ssm_head_dim > 256 || cfg->ssm_conv_kernel < 2 || cfg->ssm_conv_kernel > 8)
        return HMOE_RAISE(err, HMOE_ERR_UNSUPPORTED,
                          "GPU Gated DeltaNet needs head dim <= 256 and conv kernel 2..8 (model: %d, %d); use --gpu off",
                          cfg->ssm_head_dim, cfg->ssm_conv_kernel);
    /* Text tokens: M-RoPE is NEOX on the first n_rot dims when every pair uses t, h or w (§6). */
    for (int s = 0; s < cfg->n_rot / 2; s++)
        if (s >= 3 * cfg->rope_sections[s % 3])
            return HMOE_RAISE(err, HMOE_ERR_UNSUPPORTED,
                              "GPU RoPE: rotation pair %d uses the e position of M-RoPE sections [%d,%d,%d,%d]; use --gpu off",
                              s, cfg->rope_sections[0], cfg->rope_sections[1], cfg->rope_sections[2],
                              cfg->rope_sections[3]);
    for (int il = 0; il < cfg->n_layer; il++) {
        const struct hmoe_layer_weights *L = &m->w.layers[il];
        const struct hmoe_mat *all[] = {&L->gdn.qkv, &L->gdn.gate, &L->gdn.alpha, &L->gdn.beta, &L->gdn.out,
                                        &L->shexp.gate, &L->shexp.up, &L->shexp.down};
        for (size_t i = L->recurrent ? 0 : 5; i < HMOE_ARRAY_LEN(all); i++) {
            if (!hmoe_cuda_type_supported(all[i]->type))
                return HMOE_RAISE(err, HMOE_ERR_UNSUPPORTED, "tensor %s: type %s has no GPU kernels; use --gpu off",
                                  all[i]->name, hmoe_type_name(all[i]->type));
            if (hmoe_type_info[all[i]->type].is_quantized && all[i]->n_in % 32)
                return HMOE_RAISE(err, HMOE_ERR_UNSUPPORTED,
                                  "tensor %s: quantized with %lld columns, the GPU needs a multiple of 32; use --gpu off",
                                  all[i]->name, (long long)all[i]->n_in);
        }
    }
    return HMOE_OK;
}

/* Lay the matrices of a group list out from *off (base NULL: sizes only), uploading them when
 * base is set; consecutive matrices of one type and row size with no padding between them
 * become one product. */
static enum hmoe_status pack(struct hmoe_gpu *g, uint8_t *base, size_t *off, const struct hmoe_mat *const *mats, int n,
                             struct hmoe_gpu_q35_proj *pj, struct hmoe_err *err) {
    int64_t col = 0;
    size_t end_prev = 0;
    if (pj) pj->n = 0;
    for (int i = 0; i < n; i++) {
        const struct hmoe_mat *m = mats[i];
        const size_t start = (*off + 15) / 16 * 16, bytes = mat_bytes(m);
        if (pj) {
            struct hmoe_gpu_mat *last = pj->n ? &pj->w[pj->n - 1] : NULL;
            if (last && last->type == m->type && last->row_bytes == m->row_bytes && start == end_prev) {
                last->nrows += m->n_out;
            } else {
                pj->w[pj->n] = (struct hmoe_gpu_mat){.type = m->type, .w = base + start, .row_bytes = m->row_bytes,
                                                     .nrows = m->n_out, .ncols = m->n_in};
                pj->off[pj->n++] = col;
            }
        }
        if (base && bytes) {
            enum hmoe_status st = hmoe_cuda_upload(g->cu, base + start, m->data, bytes, err);
            if (st) return st;
        }
        col += m->n_out;
        *off = end_prev = start + bytes;
    }
    return HMOE_OK;
}

static enum hmoe_status put_vec(struct hmoe_gpu *g, uint8_t *base, size_t *off, const float *src, size_t n,
                                const float **dst, struct hmoe_err *err) {
    const size_t start = align256(*off);
    *off = start + n * 4;
    if (!base) return HMOE_OK;
    *dst = (const float *)(base + start);
    return hmoe_cuda_upload(g->cu, base + start, src, n * 4, err);
}

/* One layer's weights from base (NULL: sizes only); returns the bytes used in *bytes. */
static enum hmoe_status layer_weights(struct hmoe_ctx *c, int il, uint8_t *base, size_t *bytes, struct hmoe_err *err) {
    struct hmoe_gpu *g = c->gpu;
    const struct hmoe_model_config *cfg = &c->m->cfg;
    const struct hmoe_layer_weights *W = &c->m->w.layers[il];
    struct hmoe_gpu_q35_layer *L = base ? &((struct hmoe_gpu_q35 *)g->arch_state)->L[il] : NULL;
    size_t off = 0;
    enum hmoe_status st = HMOE_OK;
    struct hmoe_gpu_q35_proj tmp;
    if (W->recurrent) {
        const struct hmoe_gdn_weights *G = &W->gdn;
        const struct hmoe_mat *proj[] = {&G->qkv, &G->gate, &G->alpha, &G->beta};
        const struct hmoe_mat *out[] = {&G->out};
        const int64_t cd = 2 * (int64_t)cfg->ssm_n_k_head * cfg->ssm_head_dim + (int64_t)cfg->ssm_n_v_head * cfg->ssm_head_dim;
        if ((st = pack(g, base, &off, proj, 4, L ? &L->proj : NULL, err))) return st;
        off = align256(off);
        if ((st = pack(g, base, &off, out, 1, L ? &tmp : NULL, err))) return st;
        if (L) L->out = tmp.w[0];
        const float *dummy;
        if ((st = put_vec(g, base, &off, G->conv1d, (size_t)(cfg->ssm_conv_kernel * cd), L ? &L->conv_w : &dummy, err)) ||
            (st = put_vec(g, base, &off, G->dt_bias, (size_t)cfg->ssm_n_v_head, L ? &L->dt_bias : &dummy, err)) ||
            (st = put_vec(g, base, &off, G->a, (size_t)cfg->ssm_n_v_head, L ? &L->a : &dummy, err)) ||
            (st = put_vec(g, base, &off, G->norm, (size_t)cfg->ssm_head_dim, L ? &L->norm : &dummy, err)))
            return st;
        off = align256(off);
    }
    const struct hmoe_shexp_weights *S = &W->shexp;
    const struct hmoe_mat *gu[] = {&S->gate, &S->up};
    const struct hmoe_mat *dn[] = {&S->down}, *gi[] = {&S->gate_inp};
    if ((st = pack(g, base, &off, gu, 2, L ? &L->sh_gu : NULL, err))) return st;
    off = align256(off);
    if ((st = pack(g, base, &off, dn, 1, L ? &tmp : NULL, err))) return st;
    if (L) L->sh_down = tmp.w[0];
    off = align256(off);
    if ((st = pack(g, base, &off, gi, 1, L ? &tmp : NULL, err))) return st;
    if (L) L->sh_gate_inp = tmp.w[0];
    *bytes = align256(off);
    return HMOE_OK;
}

/* Mixer buffers carved from base (0: sizes only). */
static size_t act_layout(struct hmoe_ctx *c, struct hmoe_gpu_q35 *Q, uintptr_t base) {
    const struct hmoe_model_config *cfg = &c->m->cfg;
    const size_t ub = (size_t)c->p.n_ubatch, d = (size_t)cfg->n_embd, Fs = (size_t)cfg->n_ff_shexp;
    const size_t dim = (size_t)cfg->ssm_head_dim, Hv = (size_t)cfg->ssm_n_v_head, Hk = (size_t)cfg->ssm_n_k_head;
    const size_t vd = Hv * dim, cd = 2 * Hk * dim + vd;
    Q->P = (int64_t)(cd + vd + 2 * Hv);
    Q->qg_w = 2 * (int64_t)cfg->n_head * cfg->head_dim + 2 * (int64_t)cfg->n_head_kv * cfg->head_dim;
    uintptr_t p = base;
#define PIECE(field, type, bytes)  \
    do {                           \
        Q->field = (type)p;        \
        p += align256(bytes);      \
    } while (0)
    PIECE(proj, float *, ub * (size_t)Q->P * 4);
    PIECE(y, float *, ub * cd * 4);
    PIECE(o, float *, ub * vd * 4);
    PIECE(o16, uint16_t *, ub * vd * 2);
    PIECE(oq, void *, ub * hmoe_cuda_q8_1_row_bytes((int64_t)(vd + 31) / 32 * 32));
    PIECE(qg, float *, ub * (size_t)Q->qg_w * 4);
    PIECE(sh_gu, float *, ub * 2 * Fs * 4);
    PIECE(sh_z, float *, ub * Fs * 4);
    PIECE(sh_z16, uint16_t *, ub * Fs * 2);
    PIECE(sh_zq, void *, ub * hmoe_cuda_q8_1_row_bytes((int64_t)(Fs + 31) / 32 * 32));
    PIECE(sh_out, float *, ub * d * 4);
    PIECE(sh_gamma, float *, ub * 4);
#undef PIECE
    return (size_t)(p - base);
}

static size_t state_bytes(const struct hmoe_rec_state *r) {
    return (size_t)r->n_rec * (r->conv_floats + r->ssm_floats) * sizeof(float);
}

uint64_t hmoe_gpu_q35_bytes(const struct hmoe_ctx *c) {
    struct hmoe_ctx *cc = (struct hmoe_ctx *)c; /* sizing passes write nothing */
    uint64_t total = 0;
    for (int il = 0; il < c->m->cfg.n_layer; il++) {
        size_t b = 0;
        struct hmoe_err e = {0};
        layer_weights(cc, il, NULL, &b, &e);
        total += b;
    }
    struct hmoe_gpu_q35 tmp;
    return total + align256(state_bytes(c->rs.rec)) + act_layout(cc, &tmp, 0);
}

enum hmoe_status hmoe_gpu_q35_init(struct hmoe_ctx *c, struct hmoe_err *err) {
    struct hmoe_gpu *g = c->gpu;
    struct hmoe_rec_state *r = c->rs.rec;
    const int n_layer = c->m->cfg.n_layer;
    struct hmoe_gpu_q35 *Q = calloc(1, sizeof *Q);
    if (!Q) return HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory");
    g->arch_state = Q;
    Q->rec = r;
    Q->L = calloc((size_t)n_layer, sizeof *Q->L);
    if (!Q->L) return HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory");
    enum hmoe_status st = HMOE_OK;
    for (int il = 0; il < n_layer && !st; il++) {
        size_t b = 0;
        if ((st = layer_weights(c, il, NULL, &b, err))) break;
        if ((st = hmoe_cuda_buf_alloc(g->cu, b, &Q->L[il].buf, err))) break;
        st = layer_weights(c, il, Q->L[il].buf.ptr, &b, err);
        Q->weight_bytes += b;
    }
    if (st) return st;
    /* The live recurrent state, zero = the start of a sequence (§5.2). */
    if ((st = hmoe_cuda_buf_alloc(g->cu, align256(state_bytes(r)), &Q->state, err)) ||
        (st = hmoe_cuda_memset(g->cu, Q->state.ptr, 0, Q->state.bytes, err)))
        return st;
    float *conv = Q->state.ptr, *ssm = conv + (size_t)r->n_rec * r->conv_floats;
    for (int il = 0; il < n_layer; il++)
        if (r->slot[il] >= 0) {
            Q->L[il].conv_state = conv + (size_t)r->slot[il] * r->conv_floats;
            Q->L[il].ssm = ssm + (size_t)r->slot[il] * r->ssm_floats;
        }
    hmoe_rec_attach_device(r, g->cu, conv, ssm);
    if ((st = hmoe_cuda_buf_alloc(g->cu, act_layout(c, Q, 0), &Q->act, err))) return st;
    act_layout(c, Q, (uintptr_t)Q->act.ptr);
    return hmoe_cuda_memset(g->cu, Q->act.ptr, 0, Q->act.bytes, err);
}

void hmoe_gpu_q35_free(struct hmoe_gpu *g, int n_layer) {
    struct hmoe_gpu_q35 *Q = ((struct hmoe_gpu_q35 *)g->arch_state);
    if (!Q) return;
    hmoe_rec_attach_device(Q->rec, NULL, NULL, NULL); /* the CPU owns the state again */
    for (int i = 0; Q->L && i < n_layer; i++) hmoe_cuda_buf_free(g->cu, &Q->L[i].buf);
    free(Q->L);
    hmoe_cuda_buf_free(g->cu, &Q->state);
    hmoe_cuda_buf_free(g->cu, &Q->act);
    free(Q);
    g->arch_state = NULL;
}

/* The VRAM report's line for the mixers, shared experts and recurrent state. */
void hmoe_gpu_q35_report(const struct hmoe_gpu *g, char *buf, size_t cap) {
    const struct hmoe_gpu_q35 *Q = g->arch_state;
    const double MiB = 1048576.0;
    snprintf(buf, cap, "  DeltaNet + shared experts %9.1f MiB, recurrent state %.1f MiB, mixer buffers %.1f MiB\n",
             (double)Q->weight_bytes / MiB, (double)Q->state.bytes / MiB, (double)Q->act.bytes / MiB);
}
