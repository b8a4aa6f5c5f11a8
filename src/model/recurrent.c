/* recurrent.c — the recurrent state of a context with recurrent layers (qwen35moe.md §5.2:
 * conv state and delta-rule matrices per Gated DeltaNet layer; nemotron_h_moe.md §7: conv
 * and SSM state per Mamba-2 layer; f32, per sequence; shapes from struct hmoe_rec_dims) next
 * to the KV cache: allocation with the micro-batch scratch, rewinding, checkpoints and replay.
 *
 * A KV cache forgets positions by moving n_past back; a recurrent state has no positions to
 * forget. hmoe_ctx_truncate therefore keeps n_past's meaning (the attention layers' cache
 * is still valid below it) but moves the state back to the newest checkpoint at or before
 * the new n_past, or to zero; the state then lags (n_state < n_past) and the next decode
 * re-runs the remembered tokens hist[n_state .. pos0) first. The result is exactly what a
 * fresh prefill gives; a checkpoint only makes it cheaper (llama.cpp keeps checkpoints too).
 * With the GPU backend the live state sits in VRAM (the architecture entry's gpu->init attaches it) and the
 * checkpoints stay in RAM.
 */
#include <stdlib.h>
#include <string.h>

#include "hmoe/cuda.h"
#include "model/gpu_impl.h"
#include "model/recurrent_impl.h"

size_t hmoe_rec_state_bytes(const struct hmoe_rec_state *r) {
    return r ? (size_t)r->n_rec * (r->conv_floats + r->ssm_floats) * sizeof(float) : 0;
}

void hmoe_rec_free(struct hmoe_rec_state *r) {
    if (!r) return;
    free(r->slot);
    free(r->conv);
    free(r->ssm);
    free(r->hist);
    for (int i = 0; i < HMOE_REC_CKPT; i++) {
        free(r->ckpt[i].conv);
        free(r->ckpt[i].ssm);
    }
    if (r->scratch_borrowed) {
        free(r);
        return;
    }
    free(r->qkv);
    free(r->y);
    free(r->z);
    free(r->alpha);
    free(r->beta);
    free(r->o);
    free(r->qg);
    free(r->sh_g);
    free(r->sh_u);
    free(r->sh_gamma);
    free(r->sh_out);
    free(r->chunk_scratch);
    free(r->rope0_cos);
    free(r->rope0_sin);
    free(r);
}

/* calloc of n rows of cols floats; a zero size still gets one float (a valid pointer). */
static float *rows(size_t n, int64_t cols) { return calloc(cols > 0 ? n * (size_t)cols : 1, sizeof(float)); }

/* The live state, token history and checkpoints of one sequence (shapes already set). */
static enum hmoe_status alloc_state(struct hmoe_rec_state *r, int n_ctx, struct hmoe_err *err) {
    const size_t nr = (size_t)(r->n_rec ? r->n_rec : 1);
    /* calloc: large blocks come as untouched zero pages, so unused checkpoints cost nothing. */
    r->conv = calloc(nr * r->conv_floats, sizeof(float));
    r->ssm = calloc(nr * r->ssm_floats, sizeof(float));
    r->hist = calloc((size_t)n_ctx, sizeof *r->hist);
    bool ok = r->conv && r->ssm && r->hist;
    for (int i = 0; i < HMOE_REC_CKPT; i++) {
        r->ckpt[i].pos = -1;
        r->ckpt[i].conv = calloc(nr * r->conv_floats, sizeof(float));
        r->ckpt[i].ssm = calloc(nr * r->ssm_floats, sizeof(float));
        ok = ok && r->ckpt[i].conv && r->ckpt[i].ssm;
    }
    if (!ok)
        return HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory for the recurrent state (%zu MiB, %d checkpoints)",
                          hmoe_rec_state_bytes(r) >> 20, HMOE_REC_CKPT);
    return HMOE_OK;
}

enum hmoe_status hmoe_rec_init_seq(const struct hmoe_rec_state *base, int n_ctx, struct hmoe_rec_state **out,
                                   struct hmoe_err *err) {
    struct hmoe_rec_state *r = malloc(sizeof *r);
    *out = r;
    if (!r) return HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory");
    *r = *base; /* shapes and scratch pointers */
    r->scratch_borrowed = true;
    r->conv = r->ssm = NULL;
    r->hist = NULL;
    r->n_state = 0;
    r->age = 0;
    r->cu = NULL;
    r->d_conv = r->d_ssm = NULL;
    for (int i = 0; i < HMOE_REC_CKPT; i++) r->ckpt[i] = (struct hmoe_rec_ckpt){.pos = -1};
    r->slot = malloc((size_t)base->n_layer_slots * sizeof *r->slot);
    if (!r->slot) return HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory");
    memcpy(r->slot, base->slot, (size_t)base->n_layer_slots * sizeof *r->slot);
    return alloc_state(r, n_ctx, err);
}

enum hmoe_status hmoe_rec_init(struct hmoe_ctx *c, const struct hmoe_rec_dims *dm, struct hmoe_err *err) {
    const struct hmoe_model_config *cfg = &c->m->cfg;
    struct hmoe_rec_state *r = calloc(1, sizeof *r);
    if (!r) return HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory");
    c->rs.rec = r;
    r->slot = malloc((size_t)cfg->n_layer * sizeof *r->slot);
    if (!r->slot) return HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory");
    r->cols = (struct hmoe_rec_dims_cols){.qkv = dm->qkv_cols, .y = dm->y_cols, .z = dm->z_cols,
                                          .alpha = dm->alpha_cols, .beta = dm->beta_cols,
                                          .o = dm->o_seq_cols ? dm->o_seq_cols : dm->o_cols,
                                          .qg = dm->qg_cols, .sh = dm->sh_cols, .sh_u = dm->sh_u_cols,
                                          .d = cfg->n_embd};
    for (int il = 0; il < cfg->n_layer; il++) r->slot[il] = c->m->w.layers[il].recurrent ? r->n_rec++ : -1;
    r->n_layer_slots = cfg->n_layer;
    r->dim = cfg->ssm_head_dim;
    r->n_k_head = cfg->ssm_n_k_head;
    r->n_v_head = cfg->ssm_n_v_head;
    r->key_dim = (int64_t)r->n_k_head * r->dim;
    r->value_dim = (int64_t)r->n_v_head * r->dim;
    r->K = dm->K;
    r->conv_dim = dm->conv_dim;
    r->conv_floats = (size_t)(r->K - 1) * (size_t)r->conv_dim;
    r->ssm_floats = dm->ssm_floats;
    const size_t ub = (size_t)c->p.n_ubatch, d = (size_t)cfg->n_embd;
    enum hmoe_status st = alloc_state(r, c->p.n_ctx, err);
    if (st) return st;
    r->qkv = rows(ub, dm->qkv_cols);
    r->y = rows(ub, dm->y_cols);
    r->z = rows(ub, dm->z_cols);
    r->alpha = rows(ub, dm->alpha_cols);
    r->beta = rows(ub, dm->beta_cols);
    r->o = rows(ub, dm->o_cols);
    r->qg = rows(ub, dm->qg_cols);
    r->sh_g = rows(ub, dm->sh_cols);
    r->sh_u = rows(ub, dm->sh_u_cols);
    r->sh_gamma = calloc(ub, sizeof(float));
    r->sh_out = calloc(ub * d, sizeof(float));
    r->chunk_floats = dm->chunk_floats;
    r->chunk_scratch = calloc((size_t)c->p.n_threads * r->chunk_floats, sizeof(float));
    r->rope0_cos = calloc((size_t)(cfg->n_rot / 2 + 1), sizeof(float));
    r->rope0_sin = calloc((size_t)(cfg->n_rot / 2 + 1), sizeof(float));
    if (!r->qkv || !r->y || !r->z || !r->alpha || !r->beta || !r->o || !r->qg || !r->sh_g || !r->sh_u ||
        !r->sh_gamma || !r->sh_out || !r->chunk_scratch || !r->rope0_cos || !r->rope0_sin)
        return HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory for the run state (%zu-token micro-batch)", ub);
    const int32_t zero = 0;
    hmoe_model_rope_table(cfg, &zero, 1, r->rope0_cos, r->rope0_sin);
    return HMOE_OK;
}

/* The live state lives in RAM, or in VRAM once the GPU backend attached it (then copies
 * between it and the checkpoints in RAM go over the bus and wait for the device). */
static void save_live(struct hmoe_rec_state *r, struct hmoe_rec_ckpt *ck) {
    const size_t cb = (size_t)r->n_rec * r->conv_floats * sizeof(float), sb = (size_t)r->n_rec * r->ssm_floats * sizeof(float);
    if (!r->cu) {
        memcpy(ck->conv, r->conv, cb);
        memcpy(ck->ssm, r->ssm, sb);
        return;
    }
    struct hmoe_err e = {0};
    if (hmoe_cuda_download(r->cu, ck->conv, r->d_conv, cb, &e) || hmoe_cuda_download(r->cu, ck->ssm, r->d_ssm, sb, &e)) {
        HMOE_WARN("recurrent state checkpoint not saved: %s", e.msg);
        ck->pos = -1;
    }
}

static void zero_live(struct hmoe_rec_state *r) {
    const size_t cb = (size_t)r->n_rec * r->conv_floats * sizeof(float), sb = (size_t)r->n_rec * r->ssm_floats * sizeof(float);
    if (!r->cu) {
        memset(r->conv, 0, cb);
        memset(r->ssm, 0, sb);
        return;
    }
    struct hmoe_err e = {0};
    if (hmoe_cuda_memset(r->cu, r->d_conv, 0, cb, &e) || hmoe_cuda_memset(r->cu, r->d_ssm, 0, sb, &e))
        HMOE_WARN("recurrent state not reset on the GPU: %s", e.msg);
}

/* false when the copy failed (the caller starts from zero instead). */
static bool load_live(struct hmoe_rec_state *r, const struct hmoe_rec_ckpt *ck) {
    const size_t cb = (size_t)r->n_rec * r->conv_floats * sizeof(float), sb = (size_t)r->n_rec * r->ssm_floats * sizeof(float);
    if (!r->cu) {
        memcpy(r->conv, ck->conv, cb);
        memcpy(r->ssm, ck->ssm, sb);
        return true;
    }
    struct hmoe_err e = {0};
    if (hmoe_cuda_upload(r->cu, r->d_conv, ck->conv, cb, &e) || hmoe_cuda_upload(r->cu, r->d_ssm, ck->ssm, sb, &e)) {
        HMOE_WARN("recurrent state checkpoint not restored (%s): replaying from the start", e.msg);
        return false;
    }
    return true;
}

void hmoe_rec_attach_device(struct hmoe_rec_state *r, struct hmoe_cuda_ctx *cu, float *d_conv, float *d_ssm) {
    if (!r) return;
    r->cu = cu;
    r->d_conv = d_conv;
    r->d_ssm = d_ssm;
    r->n_state = 0;
    if (!cu) zero_live(r);
}

void hmoe_rec_truncate(struct hmoe_rec_state *r, int n_keep) {
    /* Checkpoints past n_keep describe a future that is being replaced. */
    for (int i = 0; i < HMOE_REC_CKPT; i++)
        if (r->ckpt[i].pos > n_keep) r->ckpt[i].pos = -1;
    if (r->n_state <= n_keep) return; /* the state is at or before n_keep already */
    int best = -1;
    for (int i = 0; i < HMOE_REC_CKPT; i++)
        if (r->ckpt[i].pos >= 0 && (best < 0 || r->ckpt[i].pos > r->ckpt[best].pos)) best = i;
    if (best >= 0 && load_live(r, &r->ckpt[best])) {
        r->n_state = r->ckpt[best].pos;
        r->ckpt[best].age = ++r->age; /* just used: keep it longest */
    } else {
        zero_live(r);
        r->n_state = 0;
    }
}

void hmoe_rec_checkpoint(struct hmoe_rec_state *r, int n_past) {
    if (r->n_state != n_past || n_past == 0) return; /* lagging state: nothing current to save */
    int slot = -1;
    for (int i = 0; i < HMOE_REC_CKPT && slot < 0; i++)
        if (r->ckpt[i].pos == n_past) slot = i;
    for (int i = 0; i < HMOE_REC_CKPT && slot < 0; i++)
        if (r->ckpt[i].pos < 0) slot = i;
    if (slot < 0) {
        slot = 0;
        for (int i = 1; i < HMOE_REC_CKPT; i++)
            if (r->ckpt[i].age < r->ckpt[slot].age) slot = i;
    }
    r->ckpt[slot].pos = n_past;
    r->ckpt[slot].age = ++r->age;
    save_live(r, &r->ckpt[slot]);
}

enum hmoe_status hmoe_rec_prepare(struct hmoe_ctx *c, const int32_t *ids, int n, int pos0, struct hmoe_err *err) {
    struct hmoe_rec_state *r = c->rs.rec;
    while (r->n_state < pos0) {
        const int m = HMOE_MIN(c->p.n_ubatch, pos0 - r->n_state);
        enum hmoe_status st = hmoe_ctx_forward(c, r->hist + r->n_state, m, r->n_state, HMOE_LOGITS_NONE, NULL, err);
        if (st) return st;
        r->n_state += m;
    }
    memcpy(r->hist + pos0, ids, (size_t)n * sizeof *ids);
    return HMOE_OK;
}
