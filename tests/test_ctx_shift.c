/* test_ctx_shift.c — hmoe_ctx_shift (llama.cpp's context shift) on the tiny F32 fixture:
 *   - 600 tokens in, then positions [10, 305) dropped: layer 0's K rows now at positions
 *     10..304 equal the K rows a fresh context computes for the same tokens at those
 *     positions (layer 0's K depends on its own token only), within the rounding of the
 *     binary32 RoPE angles (ggml's repeated multiplication, test_rope_yarn.c): per pair i,
 *     |d| <= |k pair| ((i + 2) 2^-23 (|theta(p)| + |theta(n_discard)| + |theta(p')|) + 2^-20);
 *     the 10 kept rows and every moved V row are bit-identical; a quantized cache adds the
 *     rounding of three stores (the old row, its re-store after the turn, the fresh row):
 *     f16 3 |k pair| 2^-11, q8_0 3 (amax/254 + amax/1024) for the row's largest |k|;
 *   - n_past drops by n_discard and decoding continues at the new end (finite logits);
 *   - a shift with nothing to drop, or past n_past, is an argument error.
 */
#include <math.h>

#include "harness.h"
#include "hmoe/fp16.h"
#include "model/model_impl.h"

enum { N = 600, KEEP = 10, DROP = 295 };

static struct hmoe_ctx *ctx(const struct hmoe_model *m, enum hmoe_type t) {
    struct hmoe_ctx_params cp;
    hmoe_ctx_params_default(&cp);
    cp.n_ctx = 1024;
    cp.type_k = cp.type_v = t;
    cp.n_threads = 2;
    struct hmoe_ctx *c = NULL;
    struct hmoe_err err = {0};
    hmoe_ctx_init(m, &cp, &c, &err);
    return c;
}

static void k_row(const struct hmoe_ctx *c, int g, int p, float *out) {
    const uint8_t *r = c->rs.k_cache[0] + ((size_t)g * (size_t)c->p.n_ctx + (size_t)p) * c->k_row_bytes;
    if (c->p.type_k == HMOE_TYPE_F32) memcpy(out, r, (size_t)c->m->cfg.head_dim * sizeof(float));
    else hmoe_type_info[c->p.type_k].dequant_ref(r, out, c->m->cfg.head_dim);
}

static void shift_case(const struct hmoe_model *m, enum hmoe_type t, const int32_t *ids) {
    const struct hmoe_model_config *cfg = &m->cfg;
    struct hmoe_ctx *a = ctx(m, t), *b = ctx(m, t);
    struct hmoe_err err = {0};
    int32_t fresh[N - DROP];
    memcpy(fresh, ids, KEEP * sizeof *ids);
    memcpy(fresh + KEEP, ids + KEEP + DROP, (N - KEEP - DROP) * sizeof *ids);
    enum hmoe_status st = !a || !b ? HMOE_ERR_NOMEM : hmoe_ctx_decode(a, ids, N, 0, HMOE_LOGITS_NONE, NULL, &err);
    if (!st) st = hmoe_ctx_decode(b, fresh, N - DROP, 0, HMOE_LOGITS_NONE, NULL, &err);
    if (!st) st = hmoe_ctx_shift(a, KEEP, DROP, &err);
    const int D = cfg->head_dim, half = cfg->n_rot / 2;
    double worst = 0;
    bool same_kept = true, same_v = true;
    const double theta_scale = pow(cfg->rope_freq_base, -2.0 / cfg->n_rot);
    for (int g = 0; !st && g < cfg->n_head_kv; g++)
        for (int p = 0; p < N - DROP; p++) {
            float ka[512], kb[512];
            k_row(a, g, p, ka);
            k_row(b, g, p, kb);
            if (p < KEEP) {
                same_kept &= memcmp(ka, kb, (size_t)D * sizeof(float)) == 0;
                continue;
            }
            double amax = 0;
            for (int i = 0; i < D; i++) amax = fmax(amax, fabs(kb[i]));
            for (int i = 0; i < half; i++) {
                const double f = pow(theta_scale, i), mag = hypot(kb[i], kb[i + half]);
                double tol = mag * ((i + 2) * ldexp(1, -23) * f * (p + DROP + DROP + p) + ldexp(1, -20));
                if (t == HMOE_TYPE_F16) tol += 3 * mag * ldexp(1, -11);
                if (t == HMOE_TYPE_Q8_0) tol += 3 * amax * (1.0 / 254 + 1.0 / 1024);
                const double d = fmax(fabs(ka[i] - kb[i]), fabs(ka[i + half] - kb[i + half]));
                worst = fmax(worst, d != d ? INFINITY : d / tol);
            }
            for (int i = cfg->n_rot; i < D; i++) same_kept &= ka[i] == kb[i];
        }
    /* V: the moved rows are the bytes of the same token's V (layer 0: its own token only) */
    if (!st && a->v_trans) {
        const size_t es = hmoe_type_info[t].type_size, n_ctx = (size_t)a->p.n_ctx;
        for (int r = 0; r < cfg->n_head_kv * cfg->head_dim_v; r++)
            same_v &= memcmp(a->rs.v_cache[0] + (size_t)r * n_ctx * es, b->rs.v_cache[0] + (size_t)r * n_ctx * es,
                             (size_t)(N - DROP) * es) == 0;
    } else if (!st) {
        same_v = memcmp(a->rs.v_cache[0], b->rs.v_cache[0], (size_t)(N - DROP) * cfg->n_head_kv * a->v_row_bytes) == 0;
    }
    char name[200];
    snprintf(name, sizeof name,
             "%s cache: after dropping [%d, %d) of %d, layer 0's K equals K at the new positions (worst %.3f of the "
             "tolerance), kept rows and V identical",
             hmoe_type_name(t), KEEP, KEEP + DROP, N, worst);
    t_check(!st && worst <= 1.0 && same_kept && same_v, name, "%s kept %d v %d", st ? err.msg : "", same_kept, same_v);
    float *lo = malloc((size_t)cfg->n_vocab * sizeof(float));
    const int32_t next = 77;
    const int np = st ? -1 : hmoe_ctx_n_past(a);
    if (!st) st = hmoe_ctx_decode(a, &next, 1, np, HMOE_LOGITS_LAST, lo, &err);
    int bad = 0;
    for (int i = 0; !st && i < cfg->n_vocab; i++) bad += !isfinite(lo[i]);
    snprintf(name, sizeof name, "%s cache: n_past %d -> %d, the next token decodes there with finite logits",
             hmoe_type_name(t), N, np);
    t_check(!st && np == N - DROP && bad == 0, name, "%s", st ? err.msg : "non-finite");
    free(lo);
    hmoe_ctx_free(a);
    hmoe_ctx_free(b);
}

int main(void) {
    char path[8192];
    snprintf(path, sizeof path, "%s", t_shared("fixtures/models/tiny-qwen3moe-A-mini-F32.gguf"));
    struct hmoe_err err = {0};
    struct hmoe_model *m = NULL;
    hmoe_model_load(path, NULL, &m, &err);
    t_check(m != NULL, "mini-F32 model loads", "%s", err.msg);
    if (!m) return t_summary();
    int32_t ids[N];
    for (int i = 0; i < N; i++) ids[i] = (int32_t)((13 + 389 * i) % 4096);
    shift_case(m, HMOE_TYPE_F32, ids);
    shift_case(m, HMOE_TYPE_F16, ids);
    shift_case(m, HMOE_TYPE_Q8_0, ids);
    struct hmoe_ctx *c = ctx(m, HMOE_TYPE_F32);
    enum hmoe_status s1 = hmoe_ctx_decode(c, ids, 20, 0, HMOE_LOGITS_NONE, NULL, &err);
    enum hmoe_status s2 = hmoe_ctx_shift(c, 4, 0, &err), s3 = hmoe_ctx_shift(c, 10, 11, &err);
    t_check(!s1 && s2 == HMOE_ERR_ARG && s3 == HMOE_ERR_ARG && hmoe_ctx_n_past(c) == 20,
            "a shift of nothing or past n_past is an argument error and changes nothing", "%d %d", s2, s3);
    hmoe_ctx_free(c);
    hmoe_model_free(m);
    return t_summary();
}
