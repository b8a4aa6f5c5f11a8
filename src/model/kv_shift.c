/* kv_shift.c — hmoe_ctx_shift: llama.cpp's context shift on the CPU KV cache. The positions
 * [n_keep, n_keep + n_discard) are dropped and the later ones move down by n_discard, so
 * that generation can go on in a full context. V rows are moved as they are; K rows were
 * stored after RoPE at their old position, so each is turned back by the angle of
 * n_discard positions (a NEOX rotation of the rotated pairs: R(theta(p)) followed by
 * R(-theta(n_discard)) is R(theta(p - n_discard)) because every RoPE angle, with linear or
 * YaRN scaling too, is the position times a per-pair frequency), as llama.cpp's K-shift does.
 * The rotation is the RoPE table's cos/sin at position -n_discard divided by their common
 * magnitude, which removes the YaRN attention factor (the stored K already carries it once).
 * Quantized K rows go through f32 and are stored again (cpu.h hmoe_cpu_attn_kv_store).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hmoe/cpu.h"
#include "model/model_impl.h"

struct shift_call {
    struct hmoe_ctx *c;
    int n_keep, n_discard, n_move, n_kv_layers;
    const int *layers; /* the layers with a KV cache */
    const float *co, *si;
};

/* One (layer, KV head): its K rows re-rotated and moved, its V rows moved. */
static void task_shift(void *arg, int64_t item, int tid) {
    const struct shift_call *a = arg;
    struct hmoe_ctx *c = a->c;
    const struct hmoe_model_config *cfg = &c->m->cfg;
    const int il = a->layers[item / cfg->n_head_kv], g = (int)(item % cfg->n_head_kv);
    const int D = cfg->head_dim, Dv = cfg->head_dim_v;
    const size_t n_ctx = (size_t)c->p.n_ctx, kr = c->k_row_bytes;
    const enum hmoe_type tk = c->p.type_k;
    float *row = c->rs.att_v + (size_t)tid * (size_t)HMOE_MAX(D, Dv); /* per-thread scratch (ctx.c) */
    uint8_t *kc = c->rs.k_cache[il] + (size_t)g * n_ctx * kr;
    for (int j = 0; j < a->n_move; j++) {
        const size_t src = (size_t)(a->n_keep + a->n_discard + j), dst = (size_t)(a->n_keep + j);
        if (tk == HMOE_TYPE_F32) memcpy(row, kc + src * kr, (size_t)D * sizeof(float));
        else hmoe_type_info[tk].dequant_ref(kc + src * kr, row, D);
        hmoe_model_rope_neox(row, cfg->n_rot, a->co, a->si);
        hmoe_cpu_attn_kv_store(tk, row, kc + dst * kr, D);
    }
    uint8_t *vc = c->rs.v_cache[il];
    if (c->v_trans) { /* [Hkv][Dv][n_ctx]: one run of positions per element */
        const size_t es = hmoe_type_info[c->p.type_v].type_size;
        for (int e = 0; e < Dv; e++) {
            uint8_t *r = vc + ((size_t)g * Dv + (size_t)e) * n_ctx * es;
            memmove(r + (size_t)a->n_keep * es, r + (size_t)(a->n_keep + a->n_discard) * es, (size_t)a->n_move * es);
        }
    } else { /* [n_ctx][Hkv] rows */
        const size_t vr = c->v_row_bytes, vpos = (size_t)cfg->n_head_kv * vr;
        for (int j = 0; j < a->n_move; j++)
            memcpy(vc + (size_t)(a->n_keep + j) * vpos + (size_t)g * vr,
                   vc + (size_t)(a->n_keep + a->n_discard + j) * vpos + (size_t)g * vr, vr);
    }
}

enum hmoe_status hmoe_ctx_shift(struct hmoe_ctx *c, int n_keep, int n_discard, struct hmoe_err *err) {
    const struct hmoe_model_config *cfg = &c->m->cfg;
    if (c->gpu)
        return HMOE_RAISE(err, HMOE_ERR_UNSUPPORTED,
                          "--context-shift: the KV cache is on the GPU, where shifting is not implemented; use --gpu off");
    if (c->rs.rec)
        return HMOE_RAISE(err, HMOE_ERR_UNSUPPORTED,
                          "--context-shift: %s has recurrent layers, whose state cannot drop old positions; raise "
                          "-c/--ctx-size instead",
                          cfg->arch);
    if (n_keep < 0 || n_discard < 1 || (int64_t)n_keep + n_discard > c->n_past)
        return HMOE_RAISE(err, HMOE_ERR_ARG, "context shift: cannot drop %d positions after %d of the %d cached",
                          n_discard, n_keep, c->n_past);
    int *layers = malloc((size_t)cfg->n_layer * sizeof *layers), n_kv = 0;
    const int half = HMOE_MAX(1, cfg->n_rot / 2);
    float *co = malloc((size_t)half * sizeof(float)), *si = malloc((size_t)half * sizeof(float));
    if (!layers || !co || !si) {
        free(layers);
        free(co);
        free(si);
        return HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory");
    }
    for (int il = 0; il < cfg->n_layer; il++)
        if (c->rs.k_cache[il]) layers[n_kv++] = il;
    if (cfg->n_rot >= 2) {
        const int32_t back = -n_discard;
        hmoe_model_rope_table(cfg, &back, 1, co, si);
        for (int i = 0; i < half; i++) {
            const float mag = hypotf(co[i], si[i]);
            co[i] /= mag;
            si[i] /= mag;
        }
    }
    struct shift_call a = {.c = c, .n_keep = n_keep, .n_discard = n_discard,
                           .n_move = c->n_past - n_keep - n_discard, .n_kv_layers = n_kv, .layers = layers,
                           .co = co, .si = si};
    hmoe_cpu_parallel(c->p.n_threads, (int64_t)n_kv * cfg->n_head_kv, task_shift, &a);
    c->n_past -= n_discard;
    free(layers);
    free(co);
    free(si);
    return HMOE_OK;
}
