/* hyb_fake.h — a hybrid scheduler without a GPU for tests/test_hyb_cpu.c and bench/bench_hyb_cpu.c:
 * the state hmoe_hyb_cpu_step (src/sched/hybrid_cpu.c) reads, built in plain memory (random but
 * sane weight blocks from hmoe_synth_fill_blocks, mailboxes the caller fills as the GPU would),
 * and the reference result of one layer from the type table's scalar kernels (types.h:
 * quantize_ref of the activation format, vec_dot_ref), i.e. qwen3moe.md §4.4's expert sum.
 */
#ifndef HMOE_TESTS_HYB_FAKE_H
#define HMOE_TESTS_HYB_FAKE_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hmoe/cpu.h"
#include "hmoe/synth.h"
#include "sched/hybrid_impl.h"

struct hyb_fake {
    struct hmoe_sched_hybrid h;
    uint8_t *w;                 /* all layers' experts */
    struct hmoe_cuda_mailbox *mb;
};

static size_t hyb_fake_al64(size_t n) { return (n + 63) / 64 * 64; }

static void hyb_fake_free(struct hyb_fake *f) {
    struct hmoe_sched_hybrid *h = &f->h;
    hmoe_hyb_cpu_free(h);
    free(h->xq_g), free(h->xq_u), free(h->g), free(h->u), free(h->zq), free(h->tmp);
    free(h->h_host), free(h->res_host), free(h->moe), free(h->L);
    free(f->mb), free(f->w);
    memset(f, 0, sizeof *f);
}

static struct hmoe_mat hyb_fake_mat(enum hmoe_type t, int64_t n_in, int64_t n_out, int64_t E, const uint8_t *data) {
    const size_t rb = (size_t)(n_in / hmoe_type_info[t].blck) * (size_t)hmoe_type_info[t].type_size;
    return (struct hmoe_mat){.data = data, .type = t, .n_in = n_in, .n_out = n_out, .n_mat = E, .row_bytes = rb,
                             .mat_bytes = rb * (size_t)n_out, .name = "fake"};
}

/* 0 on success. Types: tg for gate and up, td for down (both fillable by synth). */
static int hyb_fake_init(struct hyb_fake *f, int n_layer, int d, int F, int E, int k, int nt, enum hmoe_type tg,
                         enum hmoe_type td, uint64_t seed) {
    memset(f, 0, sizeof *f);
    struct hmoe_sched_hybrid *h = &f->h;
    h->n_layer = n_layer, h->d = d, h->F = F, h->E = E, h->k = k, h->nt = nt;
    const struct hmoe_mat g0 = hyb_fake_mat(tg, d, F, E, NULL), d0 = hyb_fake_mat(td, F, d, E, NULL);
    const size_t per_layer = 2 * g0.mat_bytes * (size_t)E + d0.mat_bytes * (size_t)E;
    f->w = aligned_alloc(4096, (per_layer * (size_t)n_layer + 4095) / 4096 * 4096);
    f->mb = calloc((size_t)n_layer, sizeof *f->mb);
    h->moe = calloc((size_t)n_layer, sizeof *h->moe);
    h->L = calloc((size_t)n_layer, sizeof *h->L);
    h->h_host = calloc((size_t)n_layer * (size_t)d, sizeof(float));
    h->res_host = calloc((size_t)n_layer * (size_t)d, sizeof(float));
    if (!f->w || !f->mb || !h->moe || !h->L || !h->h_host || !h->res_host) return -1;
    h->mb = f->mb;
    struct hmoe_err err = {0};
    for (int l = 0; l < n_layer; l++) {
        uint8_t *base = f->w + per_layer * (size_t)l;
        struct hmoe_moe_weights *w = &h->moe[l];
        w->gate = hyb_fake_mat(tg, d, F, E, base);
        w->up = hyb_fake_mat(tg, d, F, E, base + g0.mat_bytes * (size_t)E);
        w->down = hyb_fake_mat(td, F, d, E, base + 2 * g0.mat_bytes * (size_t)E);
        w->n_expert_used = k;
        const struct hmoe_mat *m3[3] = {&w->gate, &w->up, &w->down};
        for (int i = 0; i < 3; i++) {
            const size_t nb = m3[i]->mat_bytes * (size_t)E / (size_t)hmoe_type_info[m3[i]->type].type_size;
            if (hmoe_synth_fill_blocks(m3[i]->type, seed + (uint64_t)(3 * l + i), (void *)m3[i]->data, nb, &err))
                return -1;
        }
        h->L[l].ram = true;
    }
    h->n_ram = n_layer;
    h->ag = hyb_fake_al64(hmoe_hyb_act_bytes(tg, d));
    h->au = h->ag;
    h->ad = hyb_fake_al64(hmoe_hyb_act_bytes(td, F));
    h->xq_g = aligned_alloc(64, (size_t)nt * h->ag);
    h->xq_u = aligned_alloc(64, (size_t)nt * h->au);
    h->g = aligned_alloc(64, hyb_fake_al64((size_t)k * (size_t)F * 4));
    h->u = aligned_alloc(64, hyb_fake_al64((size_t)k * (size_t)F * 4));
    h->zq = aligned_alloc(64, (size_t)k * h->ad);
    h->tmp = aligned_alloc(64, hyb_fake_al64((size_t)nt * (size_t)d * 4));
    if (!h->xq_g || !h->xq_u || !h->g || !h->u || !h->zq || !h->tmp) return -1;
    return hmoe_hyb_cpu_init(h, &err) == HMOE_OK ? 0 : -1;
}

/* Publish layer l for token seq as the GPU would: k selections (the first ones from `ids`), the
 * missed ones flagged, a hidden state, gpu_seq last. */
static inline void hyb_fake_publish(struct hyb_fake *f, int l, uint32_t seq, const int *ids, const float *wts,
                             const int *miss, const float *x) {
    struct hmoe_sched_hybrid *h = &f->h;
    struct hmoe_cuda_mailbox *mb = &f->mb[l];
    int nm = 0;
    for (int j = 0; j < h->k; j++) {
        mb->ids[j] = ids[j];
        mb->wts[j] = wts[j];
        mb->miss[j] = miss[j];
        nm += miss[j] != 0;
    }
    mb->k = h->k;
    mb->n_miss = nm;
    memcpy(h->h_host + (size_t)l * (size_t)h->d, x, (size_t)h->d * sizeof(float));
    __atomic_store_n(&mb->gpu_seq, seq, __ATOMIC_RELEASE);
}

/* The missed experts' weighted sum for layer l from the scalar references, into out[d]. */
static inline void hyb_fake_reference(const struct hyb_fake *f, int l, float *out) {
    const struct hmoe_sched_hybrid *h = &f->h;
    const struct hmoe_moe_weights *w = &h->moe[l];
    const struct hmoe_cuda_mailbox *mb = &f->mb[l];
    const int64_t d = h->d, F = w->gate.n_out;
    const struct hmoe_type_info *tg = &hmoe_type_info[w->gate.type], *tu = &hmoe_type_info[w->up.type],
                                *td = &hmoe_type_info[w->down.type];
    uint8_t *xg = malloc(hmoe_hyb_act_bytes(w->gate.type, d)), *xu = malloc(hmoe_hyb_act_bytes(w->up.type, d));
    uint8_t *zq = malloc(hmoe_hyb_act_bytes(w->down.type, F));
    float *z = malloc((size_t)F * sizeof *z);
    const float *x = h->h_host + (size_t)l * (size_t)d;
    hmoe_type_info[tg->vec_dot_type].quantize_ref(x, xg, d);
    hmoe_type_info[tu->vec_dot_type].quantize_ref(x, xu, d);
    for (int64_t r = 0; r < d; r++) out[r] = 0.0f;
    bool first = true;
    for (int j = 0; j < mb->k; j++) {
        if (!mb->miss[j]) continue;
        const size_t e = (size_t)mb->ids[j];
        for (int64_t r = 0; r < F; r++) {
            const float g = tg->vec_dot_ref(d, (const uint8_t *)w->gate.data + e * w->gate.mat_bytes + (size_t)r * w->gate.row_bytes, xg);
            const float u = tu->vec_dot_ref(d, (const uint8_t *)w->up.data + e * w->up.mat_bytes + (size_t)r * w->up.row_bytes, xu);
            z[r] = g / (1.0f + expf(-g)) * u;
        }
        hmoe_type_info[td->vec_dot_type].quantize_ref(z, zq, F);
        for (int64_t r = 0; r < d; r++) {
            const float y = td->vec_dot_ref(F, (const uint8_t *)w->down.data + e * w->down.mat_bytes + (size_t)r * w->down.row_bytes, zq);
            out[r] = first ? mb->wts[j] * y : out[r] + mb->wts[j] * y;
        }
        first = false;
    }
    free(xg), free(xu), free(zq), free(z);
}

#endif
