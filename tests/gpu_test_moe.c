/* gpu_test_moe.c — the MoE kernels (cuda_moe.cu) and the prefill GEMM (cuda_mmq.cu) against
 * scalar C written here from qwen3moe.md §4.4.
 *
 *  router top-k   ids exact against a C sort (logit descending, lower expert index on ties;
 *                 inputs with many exact ties), weights = softmax renormalised, within 1e-6
 *  decode experts gate+up (silu(g)*u) and down (sum_j w_j * dot + residual) against float64
 *                 dots over dequant_ref weights and the GPU's own q8_1 activations (bytes pinned
 *                 by gpu_test_dequant): 1e-5 of the sum of |products| (f32 accumulation)
 *  prefill        the plan (counts, stable expert order, inverse map, tiles) exactly; the f16
 *                 GEMM with weights rounded to f16 (what the kernel multiplies) in float64: 1e-5
 *                 of sum |w*x| plus the f16 rounding of an f16 output; dense GEMM for every GPU
 *                 type, both tile shapes, + residual and f16 output; the cuBLAS path likewise;
 *                 the int8 GEMM (q8_1 activations) like the decode experts, dense for every
 *                 quantized type but IQ1_M and through the whole MoE prefill pipeline.
 */
#include "harness.h"
#include "gpu_util.h"

static double silu(double g) { return g / (1.0 + exp(-g)); }

/* ------------------------------------------------ top-k ------------------------------------------------ */

/* gating TOPK_SOFTMAX: lg already biased; softmax over the k chosen only. */
static void ref_topk_gated(const float *lg, int E, int k, int gating, int32_t *ids, float *w) {
    int used[1024] = {0};
    double m = -INFINITY, se = 0;
    for (int e = 0; e < E; e++) m = fmax(m, lg[e]);
    for (int e = 0; e < E; e++) se += exp((double)lg[e] - m);
    double ps = 0, p[32];
    for (int j = 0; j < k; j++) {
        int best = -1;
        for (int e = 0; e < E; e++)
            if (!used[e] && (best < 0 || lg[e] > lg[best])) best = e; /* strict: lower index wins ties */
        used[best] = 1;
        ids[j] = best;
        p[j] = exp((double)lg[best] - m) / se;
        ps += p[j];
    }
    for (int j = 0; j < k; j++)
        w[j] = (float)(gating == HMOE_CUDA_GATING_TOPK_SOFTMAX ? p[j] / ps : p[j] / fmax(ps, 6.103515625e-5));
}
static void ref_topk(const float *lg, int E, int k, int32_t *ids, float *w) {
    ref_topk_gated(lg, E, k, HMOE_CUDA_GATING_SOFTMAX, ids, w);
}

/* gating / biased: the router bias added to the logits before the choice, and the weights of the
 * rule (TOPK_SOFTMAX: softmax over the k chosen). */
static void test_topk_gated(int E, int k, int ties, int gating, bool biased) {
    char name[200], why[200] = "";
    snprintf(name, sizeof name, "moe_topk E=%d k=%d%s%s%s: ids exact, weights 1e-6", E, k, ties ? " with many tied logits" : "",
             gating == HMOE_CUDA_GATING_TOPK_SOFTMAX ? ", softmax over the chosen" : "", biased ? ", router bias" : "");
    const int ntok = 100;
    float *lg = malloc((size_t)ntok * E * 4), *w = malloc((size_t)ntok * k * 4), *rw = malloc((size_t)k * 4);
    int32_t *ids = malloc((size_t)ntok * k * 4), *rid = malloc((size_t)k * 4);
    for (int i = 0; i < ntok * E; i++) lg[i] = ties ? (float)(int)(rng_normal() * 2.0f) * 0.5f : rng_normal() * 2.0f;
    float *bias = malloc((size_t)E * 4), *blg = malloc((size_t)ntok * E * 4);
    for (int e = 0; e < E; e++) bias[e] = biased ? (ties ? (float)(int)(rng_normal() * 2.0f) * 0.5f : rng_normal()) : 0.0f;
    for (int i = 0; i < ntok * E; i++) blg[i] = lg[i] + bias[i % E]; /* the same f32 sum as the kernel */
    float *d_lg = dup_dev(lg, (size_t)ntok * E * 4), *d_w = dalloc((size_t)ntok * k * 4);
    float *d_b = biased ? dup_dev(bias, (size_t)E * 4) : NULL;
    int32_t *d_ids = dalloc((size_t)ntok * k * 4);
    struct hmoe_err err = {0};
    if (launched(hmoe_cuda_moe_topk(d_lg, d_b, gating, ntok, E, k, d_ids, d_w, g_stream, &err), &err, name) &&
        from_dev(ids, d_ids, (size_t)ntok * k * 4, name) && from_dev(w, d_w, (size_t)ntok * k * 4, name)) {
        int ok = 1;
        for (int t = 0; t < ntok && ok; t++) {
            ref_topk_gated(blg + (size_t)t * E, E, k, gating, rid, rw);
            for (int j = 0; j < k && ok; j++) {
                if (ids[t * k + j] != rid[j]) {
                    snprintf(why, sizeof why, "token %d slot %d: expert %d, want %d", t, j, ids[t * k + j], rid[j]);
                    ok = 0;
                } else if (!(fabsf(w[t * k + j] - rw[j]) <= 1e-6f)) {
                    snprintf(why, sizeof why, "token %d slot %d: weight %.9g, want %.9g", t, j, w[t * k + j], rw[j]);
                    ok = 0;
                }
            }
        }
        t_check(ok, name, "%s", why);
    }
    free(lg), free(w), free(rw), free(ids), free(rid), free(bias), free(blg);
    gpu_free_all();
}
static void test_topk(int E, int k, int ties) { test_topk_gated(E, k, ties, HMOE_CUDA_GATING_SOFTMAX, false); }

/* Fused decode router: logits within 1e-5 of the float64 matvec, ids exact against the C top-k of
 * the GPU's own logits, weights 1e-6; called twice (the device counter must have reset itself). */
static void test_router_topk(int E, int k, int64_t ncols) {
    char name[160], why[200] = "";
    snprintf(name, sizeof name, "moe_router_topk E=%d k=%d over %lld columns, two calls", E, k, (long long)ncols);
    float *w = malloc((size_t)(E * ncols) * 4), *x = malloc((size_t)ncols * 4), *lg = malloc((size_t)E * 4), *wt = malloc((size_t)k * 4),
          *rw = malloc((size_t)k * 4);
    int32_t *ids = malloc((size_t)k * 4), *rid = malloc((size_t)k * 4);
    for (int64_t i = 0; i < E * ncols; i++) w[i] = rng_normal();
    float *d_w = dup_dev(w, (size_t)(E * ncols) * 4), *d_x = dalloc((size_t)ncols * 4), *d_lg = dalloc((size_t)E * 4);
    float *d_wt = dalloc((size_t)k * 4);
    int32_t *d_ids = dalloc((size_t)k * 4);
    unsigned int *d_cnt = dalloc(16);
    struct hmoe_err err = {0};
    hmoe_cuda_memset(g_ctx, d_cnt, 0, 16, &err);
    int ok = 1;
    for (int call = 0; call < 2 && ok; call++) {
        for (int64_t i = 0; i < ncols; i++) x[i] = rng_normal();
        to_dev(d_x, x, (size_t)ncols * 4);
        if (!launched(hmoe_cuda_moe_router_topk(d_w, NULL, HMOE_CUDA_GATING_SOFTMAX, d_x, ncols, E, k, d_lg, d_ids, d_wt, d_cnt, g_stream, &err), &err, name) ||
            !from_dev(lg, d_lg, (size_t)E * 4, name) || !from_dev(ids, d_ids, (size_t)k * 4, name) || !from_dev(wt, d_wt, (size_t)k * 4, name))
            goto out;
        for (int e = 0; e < E && ok; e++) {
            double s_ = 0, m = 0;
            for (int64_t i = 0; i < ncols; i++) s_ += (double)w[e * ncols + i] * x[i], m += fabs((double)w[e * ncols + i] * x[i]);
            if (!(fabs(lg[e] - s_) <= 1e-5 * m)) snprintf(why, sizeof why, "call %d logit %d: %.9g, want %.9g", call, e, lg[e], s_), ok = 0;
        }
        ref_topk(lg, E, k, rid, rw);
        for (int j = 0; j < k && ok; j++)
            if (ids[j] != rid[j] || !(fabsf(wt[j] - rw[j]) <= 1e-6f))
                snprintf(why, sizeof why, "call %d slot %d: expert %d weight %.9g, want %d %.9g", call, j, ids[j], wt[j], rid[j], rw[j]), ok = 0;
    }
    t_check(ok, name, "%s", why);
out:
    free(w), free(x), free(lg), free(wt), free(rw), free(ids), free(rid);
    gpu_free_all();
}

/* ------------------------------------------------ experts ------------------------------------------------ */


/* The decode expert kernels: gate/up (silu(g) * u of each slot's expert against the float64 dot
 * products of the q8_1 rows) and down (y += sum_j w_j dot_j, d rows). */
static double swiglu_oai(double g, double u) {
    const double x = fmin(g, 7.0), y = fmax(-7.0, fmin(u, 7.0));
    return x / (1.0 + exp(-1.702 * x)) * (y + 1.0);
}

/* oai: the clamped activation with gate / up / down biases (random, F32 [E][rows]). */
static void test_decode_experts_var(enum hmoe_type tgu, enum hmoe_type tdn, int ntok, int64_t d, bool oai) {
    char name[200], why[256] = "";
    const int E = 16, k = 4;
    const int64_t F = 256;
    struct gpu_experts gate, up, down;
    gpu_experts_make(&gate, tgu, E, F, d);
    gpu_experts_make(&up, tgu, E, F, d);
    gpu_experts_make(&down, tdn, E, d, F);
    float *bg = malloc((size_t)(E * F) * 4), *bu = malloc((size_t)(E * F) * 4), *bd = malloc((size_t)(E * d) * 4);
    for (int64_t i = 0; i < E * F; i++) bg[i] = oai ? 2.0f * rng_normal() : 0.0f, bu[i] = oai ? 2.0f * rng_normal() : 0.0f;
    for (int64_t i = 0; i < E * d; i++) bd[i] = oai ? rng_normal() : 0.0f;
    if (oai) {
        gate.dev.act = HMOE_CUDA_ACT_SWIGLU_OAI;
        gate.dev.bias = dup_dev(bg, (size_t)(E * F) * 4);
        up.dev.bias = dup_dev(bu, (size_t)(E * F) * 4);
        down.dev.bias = dup_dev(bd, (size_t)(E * d) * 4);
    }
    int32_t *ids = malloc((size_t)ntok * k * 4);
    float *wts = malloc((size_t)ntok * k * 4), *x = malloc((size_t)(ntok * d) * 4), *y0 = malloc((size_t)(ntok * d) * 4);
    for (int t = 0; t < ntok; t++) {
        float s = 0;
        for (int j = 0; j < k; j++) {
            ids[t * k + j] = (t * 5 + j * 3 + 1) % E; /* distinct per token */
            wts[t * k + j] = 0.1f + (float)rng_unif();
            s += wts[t * k + j];
        }
        for (int j = 0; j < k; j++) wts[t * k + j] /= s;
    }
    for (int64_t i = 0; i < ntok * d; i++) x[i] = rng_normal(), y0[i] = rng_normal();
    const size_t xs = hmoe_cuda_q8_1_row_bytes(d), zs = hmoe_cuda_q8_1_row_bytes(F);
    const int nslot = ntok * k;
    int32_t *d_ids = dup_dev(ids, (size_t)nslot * 4);
    float *d_w = dup_dev(wts, (size_t)nslot * 4), *d_x = dup_dev(x, (size_t)(ntok * d) * 4), *d_y = dup_dev(y0, (size_t)(ntok * d) * 4);
    void *d_xq = dalloc(xs * (size_t)ntok), *d_zq = dalloc(zs * (size_t)nslot);
    float *d_z = dalloc((size_t)(nslot * F) * 4);
    uint8_t *xq = malloc(xs * (size_t)ntok), *zq = malloc(zs * (size_t)nslot);
    float *z = malloc((size_t)(nslot * F) * 4), *y = malloc((size_t)(ntok * d) * 4);
    struct hmoe_err err = {0};
    snprintf(name, sizeof name, "moe_gate_up %s, %d token(s) x %d experts: %s", hmoe_type_name(tgu), ntok, k,
             oai ? "biased clamped swiglu-oai" : "silu(g)*u");
    if (!launched(hmoe_cuda_quantize_q8_1(d_x, d, ntok, d, d_xq, g_stream, &err), &err, name) ||
        !launched(hmoe_cuda_moe_gate_up(&gate.dev, &up.dev, d_ids, nslot, k, d_xq, xs, d_z, F, g_stream, &err), &err, name))
        goto out;
    if (!from_dev(xq, d_xq, xs * (size_t)ntok, name) || !from_dev(z, d_z, (size_t)(nslot * F) * 4, name)) goto out;
    int ok = 1;
    for (int s = 0; s < nslot && ok; s++)
        for (int64_t f = 0; f < F && ok; f++) {
            double g, gm, u, um;
            ref_dot_q8_1(gpu_experts_row(&gate, ids[s], f), xq + (size_t)(s / k) * xs, d, &g, &gm);
            ref_dot_q8_1(gpu_experts_row(&up, ids[s], f), xq + (size_t)(s / k) * xs, d, &u, &um);
            g += bg[ids[s] * F + f], u += bu[ids[s] * F + f];
            /* (the clamped form's slope in g is at most 1.2 (|u| + 1) as silu's, in u at most |act g|) */
            const double ref = oai ? swiglu_oai(g, u) : silu(g) * u,
                         tol = 1.2 * (fabs(u) + oai) * 1e-5 * gm + fabs(silu(g)) * 1e-5 * um + 1e-6 * fabs(ref) + 1e-6 * oai + 1e-30;
            if (!(fabs(z[s * F + f] - ref) <= tol)) {
                snprintf(why, sizeof why, "slot %d row %lld: %.9g, want %.9g (tol %.3g)", s, (long long)f, z[s * F + f], ref, tol);
                ok = 0;
            }
        }
    t_check(ok, name, "%s", why);
    snprintf(name, sizeof name, "moe_down %s, %d token(s) x %d experts, %lld rows: y += sum w_j %s", hmoe_type_name(tdn),
             ntok, k, (long long)d, oai ? "(dot_j + bias_j)" : "dot_j");
    if (!launched(hmoe_cuda_quantize_q8_1(d_z, F, nslot, F, d_zq, g_stream, &err), &err, name) ||
        !launched(hmoe_cuda_moe_down(&down.dev, d_ids, d_w, ntok, k, d_zq, zs, d_y, d, g_stream, &err), &err, name) ||
        !from_dev(zq, d_zq, zs * (size_t)nslot, name) || !from_dev(y, d_y, (size_t)(ntok * d) * 4, name))
        goto out;
    ok = 1;
    for (int t = 0; t < ntok && ok; t++)
        for (int64_t r = 0; r < d && ok; r++) {
            double ref = y0[t * d + r], tol = 1e-6 * fabs(y0[t * d + r]) + 1e-30;
            for (int j = 0; j < k; j++) {
                double s, m;
                ref_dot_q8_1(gpu_experts_row(&down, ids[t * k + j], r), zq + (size_t)(t * k + j) * zs, F, &s, &m);
                ref += wts[t * k + j] * (s + bd[ids[t * k + j] * d + r]);
                tol += 1e-5 * wts[t * k + j] * m + 1e-6 * fabs(bd[ids[t * k + j] * d + r]);
            }
            if (!(fabs(y[t * d + r] - ref) <= tol)) {
                snprintf(why, sizeof why, "token %d row %lld: %.9g, want %.9g (tol %.3g)", t, (long long)r, y[t * d + r], ref, tol);
                ok = 0;
            }
        }
    t_check(ok, name, "%s", why);
out:
    gpu_experts_free(&gate), gpu_experts_free(&up), gpu_experts_free(&down);
    free(ids), free(wts), free(x), free(y0), free(xq), free(zq), free(z), free(y), free(bg), free(bu), free(bd);
    gpu_free_all();
}
static void test_decode_experts_impl(enum hmoe_type tgu, enum hmoe_type tdn, int ntok, int64_t d) {
    test_decode_experts_var(tgu, tdn, ntok, d, false);
}
static void test_decode_experts(enum hmoe_type tgu, enum hmoe_type tdn, int ntok) { test_decode_experts_impl(tgu, tdn, ntok, 512); }

/* Decode RMSNorm + router + top-k in one launch: the normalised row within 2e-6 of float64 (its
 * q8_1 row bit-exact against the reference quantizer of it), logits within 1e-5 of the float64
 * matvec of that row, ids exact against the C top-k of the GPU's logits, weights 1e-6; two calls
 * (the counter must reset). dup > 1: router rows repeat in groups of dup, so logits tie exactly
 * (the top-k of the last block must pick the lower index among equals). */
static void test_router_norm_topk(int E, int k, int64_t n, int dup) {
    char name[160], why[200] = "";
    snprintf(name, sizeof name, "moe_router_norm_topk E=%d k=%d, row of %lld, two calls%s", E, k, (long long)n,
             dup > 1 ? ", tied rows" : "");
    float *w = malloc((size_t)(E * n) * 4), *x = malloc((size_t)n * 4), *nw = malloc((size_t)n * 4), *hf = malloc((size_t)n * 4);
    float *lg = malloc((size_t)E * 4), *wt = malloc((size_t)k * 4), *rw = malloc((size_t)k * 4);
    int32_t *ids = malloc((size_t)k * 4), *rid = malloc((size_t)k * 4);
    const size_t qb = hmoe_cuda_q8_1_row_bytes(n);
    uint8_t *hq = malloc(qb), *wantq = malloc(qb);
    for (int64_t i = 0; i < E * n; i++) w[i] = rng_normal();
    for (int64_t i = 0; i < E * n && dup > 1; i++) w[i] = w[((i / n) / dup * dup) * n + i % n];
    for (int64_t i = 0; i < n; i++) nw[i] = 0.5f + (float)rng_unif();
    float *d_w = dup_dev(w, (size_t)(E * n) * 4), *d_nw = dup_dev(nw, (size_t)n * 4), *d_x = dalloc((size_t)n * 4);
    float *d_lg = dalloc((size_t)E * 4), *d_wt = dalloc((size_t)k * 4), *d_hf = dalloc((size_t)n * 4);
    int32_t *d_ids = dalloc((size_t)k * 4);
    void *d_hq = dalloc(qb);
    unsigned int *d_cnt = dalloc(16);
    struct hmoe_err err = {0};
    hmoe_cuda_memset(g_ctx, d_cnt, 0, 16, &err);
    int ok = 1;
    for (int call = 0; call < 2 && ok; call++) {
        for (int64_t i = 0; i < n; i++) x[i] = rng_normal() * (call ? 30.0f : 1.0f);
        to_dev(d_x, x, (size_t)n * 4);
        const struct hmoe_cuda_router_norm_args a = {.x = d_x, .norm_w = d_nw, .eps = 1e-6f, .n = n, .router = d_w, .n_expert = E,
                                                     .k = k, .logits = d_lg, .ids = d_ids, .weights = d_wt, .counter = d_cnt,
                                                     .out_f32 = d_hf, .out_q8_1 = d_hq};
        if (!launched(hmoe_cuda_moe_router_norm_topk(&a, g_stream, &err), &err, name) || !from_dev(lg, d_lg, (size_t)E * 4, name) ||
            !from_dev(ids, d_ids, (size_t)k * 4, name) || !from_dev(wt, d_wt, (size_t)k * 4, name) ||
            !from_dev(hf, d_hf, (size_t)n * 4, name) || !from_dev(hq, d_hq, qb, name))
            goto out;
        double ss = 0;
        for (int64_t i = 0; i < n; i++) ss += (double)x[i] * x[i];
        const double rs = 1.0 / sqrt(ss / (double)n + 1e-6);
        for (int64_t i = 0; i < n && ok; i++) {
            const double want = x[i] * rs * nw[i];
            if (!(fabs(hf[i] - want) <= 2e-6 * fabs(want) + 1e-30))
                snprintf(why, sizeof why, "call %d norm col %lld: %.9g, want %.9g", call, (long long)i, hf[i], want), ok = 0;
        }
        ref_quantize_q8_1(hf, n, wantq);
        if (ok && memcmp(hq, wantq, (size_t)n + 8 * (size_t)(n / 32)) != 0)
            snprintf(why, sizeof why, "call %d: q8_1 row differs from quantizing the f32 row", call), ok = 0;
        for (int e = 0; e < E && ok; e++) {
            double s_ = 0, m = 0;
            for (int64_t i = 0; i < n; i++) s_ += (double)w[e * n + i] * hf[i], m += fabs((double)w[e * n + i] * hf[i]);
            if (!(fabs(lg[e] - s_) <= 1e-5 * m)) snprintf(why, sizeof why, "call %d logit %d: %.9g, want %.9g", call, e, lg[e], s_), ok = 0;
        }
        ref_topk(lg, E, k, rid, rw);
        for (int j = 0; j < k && ok; j++)
            if (ids[j] != rid[j] || !(fabsf(wt[j] - rw[j]) <= 1e-6f))
                snprintf(why, sizeof why, "call %d slot %d: expert %d weight %.9g, want %d %.9g", call, j, ids[j], wt[j], rid[j], rw[j]), ok = 0;
    }
    t_check(ok, name, "%s", why);
out:
    free(w), free(x), free(nw), free(hf), free(lg), free(wt), free(rw), free(ids), free(rid), free(hq), free(wantq);
    gpu_free_all();
}

/* ------------------------------------------------ GEMM ------------------------------------------------ */

static float f16r(float v) { return hmoe_fp16_to_f32(hmoe_f32_to_fp16(v)); }

/* Dense GEMM (expert 0 only) for one type: y (ntok x nrows) = x16 . f16(W)^T (+ add), f32 or f16 out. */
static void test_gemm_dense(enum hmoe_type t, int64_t ntok, int64_t nrows, int64_t ncols, int mode /* 0 f32, 1 f32+add, 2 f16, 3 cublas */) {
    char name[200], why[200] = "";
    static const char *mn[] = {"f32 out", "f32 out + residual", "f16 out", "cuBLAS path"};
    snprintf(name, sizeof name, "gemm %s %lld x %lld x %lld tokens, %s", hmoe_type_name(t), (long long)nrows, (long long)ncols,
             (long long)ntok, mn[mode]);
    struct gpu_experts w;
    gpu_experts_make(&w, t, 1, nrows, ncols);
    const int64_t xs = ncols + 8, ys = nrows + 2;
    float *x = malloc((size_t)(ntok * xs) * 4), *add = malloc((size_t)(ntok * ys) * 4), *y = malloc((size_t)(ntok * ys) * 4);
    uint16_t *x16 = malloc((size_t)(ntok * xs) * 2), *y16 = malloc((size_t)(ntok * ys) * 2);
    for (int64_t i = 0; i < ntok * xs; i++) x16[i] = hmoe_f32_to_fp16(rng_normal()), x[i] = hmoe_fp16_to_f32(x16[i]);
    for (int64_t i = 0; i < ntok * ys; i++) add[i] = rng_normal();
    uint16_t *d_x = dup_dev(x16, (size_t)(ntok * xs) * 2), *d_y16 = dalloc((size_t)(ntok * ys) * 2);
    float *d_y = mode == 1 || mode == 3 ? dup_dev(add, (size_t)(ntok * ys) * 4) : dalloc((size_t)(ntok * ys) * 4);
    struct hmoe_cuda_gemm_args a = {.w = w.dev, .x = d_x, .x_stride = xs, .ntok = ntok, .y_f32 = mode == 2 ? NULL : d_y,
                                    .y_f16 = mode == 2 ? d_y16 : NULL, .y_stride = ys,
                                    .add = mode == 1 || mode == 3 ? d_y : NULL, .add_stride = ys};
    struct hmoe_err err = {0};
    enum hmoe_status st;
    if (mode == 3) {
        uint16_t *scr = dalloc((size_t)(nrows * ncols) * 2);
        st = hmoe_cuda_gemm_cublas(g_ctx, &a, scr, &err);
    } else {
        st = hmoe_cuda_gemm(&a, g_stream, &err);
    }
    if (!launched(st, &err, name)) goto out;
    if (mode == 2 ? !from_dev(y16, d_y16, (size_t)(ntok * ys) * 2, name) : !from_dev(y, d_y, (size_t)(ntok * ys) * 4, name)) goto out;
    int ok = 1;
    for (int64_t tk = 0; tk < ntok && ok; tk++)
        for (int64_t r = 0; r < nrows && ok; r++) {
            double s = 0, m = 0;
            const float *wr = gpu_experts_row(&w, 0, r);
            for (int64_t c = 0; c < ncols; c++) {
                const double p = (double)f16r(wr[c]) * x[tk * xs + c];
                s += p;
                m += fabs(p);
            }
            const double base = (mode == 1 || mode == 3) ? add[tk * ys + r] : 0.0;
            const double got = mode == 2 ? hmoe_fp16_to_f32(y16[tk * ys + r]) : y[tk * ys + r];
            const double tol = 1e-5 * m + 1e-6 * fabs(base) + (mode == 2 ? ldexp(fabs(s), -11) : 0.0) + 1e-30;
            if (!(fabs(got - (s + base)) <= tol)) {
                snprintf(why, sizeof why, "token %lld row %lld: %.9g, want %.9g (tol %.3g)", (long long)tk, (long long)r, got, s + base, tol);
                ok = 0;
            }
        }
    t_check(ok, name, "%s", why);
out:
    gpu_experts_free(&w);
    free(x), free(add), free(y), free(x16), free(y16);
    gpu_free_all();
}

/* Dense GEMM on the int8 path: x quantized to q8_1 on the GPU (bytes pinned by gpu_test_dequant),
 * reference = float64 sum over dequant_ref weights times those q8_1 values: 1e-5 of sum |w*a|. */
static void test_gemm_int8(enum hmoe_type t, int64_t ntok, int64_t nrows, int64_t ncols, int add_mode) {
    char name[200], why[200] = "";
    snprintf(name, sizeof name, "gemm int8 %s %lld x %lld x %lld tokens%s", hmoe_type_name(t), (long long)nrows, (long long)ncols,
             (long long)ntok, add_mode ? ", + residual" : "");
    struct gpu_experts w;
    gpu_experts_make(&w, t, 1, nrows, ncols);
    const size_t qs = hmoe_cuda_q8_1_row_bytes(ncols);
    const int64_t ys = nrows + 2;
    float *x = malloc((size_t)(ntok * ncols) * 4), *add = malloc((size_t)(ntok * ys) * 4), *y = malloc((size_t)(ntok * ys) * 4);
    uint8_t *xq = malloc(qs * (size_t)ntok);
    for (int64_t i = 0; i < ntok * ncols; i++) x[i] = rng_normal();
    for (int64_t i = 0; i < ntok * ys; i++) add[i] = rng_normal();
    float *d_x = dup_dev(x, (size_t)(ntok * ncols) * 4), *d_y = add_mode ? dup_dev(add, (size_t)(ntok * ys) * 4) : dalloc((size_t)(ntok * ys) * 4);
    void *d_xq = dalloc(qs * (size_t)ntok);
    struct hmoe_err err = {0};
    struct hmoe_cuda_gemm_args a = {.w = w.dev, .xq = d_xq, .xq_stride_bytes = qs, .ntok = ntok, .y_f32 = d_y, .y_stride = ys,
                                    .add = add_mode ? d_y : NULL, .add_stride = ys};
    if (!launched(hmoe_cuda_quantize_q8_1(d_x, ncols, ntok, ncols, d_xq, g_stream, &err), &err, name) ||
        !launched(hmoe_cuda_gemm(&a, g_stream, &err), &err, name) || !from_dev(xq, d_xq, qs * (size_t)ntok, name) ||
        !from_dev(y, d_y, (size_t)(ntok * ys) * 4, name))
        goto out;
    int ok = 1;
    for (int64_t tk = 0; tk < ntok && ok; tk++)
        for (int64_t r = 0; r < nrows && ok; r++) {
            double sd, m;
            ref_dot_q8_1(gpu_experts_row(&w, 0, r), xq + tk * qs, ncols, &sd, &m);
            const double base = add_mode ? add[tk * ys + r] : 0.0;
            if (!(fabs(y[tk * ys + r] - (sd + base)) <= 1e-5 * m + 1e-6 * fabs(base) + 1e-30)) {
                snprintf(why, sizeof why, "token %lld row %lld: %.9g, want %.9g", (long long)tk, (long long)r, y[tk * ys + r], sd + base);
                ok = 0;
            }
        }
    t_check(ok, name, "%s", why);
out:
    gpu_experts_free(&w);
    free(x), free(add), free(y), free(xq);
    gpu_free_all();
}

/* The MoE prefill pipeline on the int8 path: q8_1 x, fused gate/up (f32 z), quantize z, down. */
static void test_prefill_moe_int8(enum hmoe_type tgu, enum hmoe_type tdn, int ntok, int E, int k) {
    char name[200], why[256] = "";
    const int64_t d = 512, F = 256, nrows = (int64_t)ntok * k;
    struct gpu_experts gate, up, down;
    gpu_experts_make(&gate, tgu, E, F, d);
    gpu_experts_make(&up, tgu, E, F, d);
    gpu_experts_make(&down, tdn, E, d, F);
    const size_t xs = hmoe_cuda_q8_1_row_bytes(d), zs = hmoe_cuda_q8_1_row_bytes(F);
    float *lg = malloc((size_t)ntok * E * 4), *x = malloc((size_t)(ntok * d) * 4), *z = malloc((size_t)(nrows * F) * 4);
    float *ye = malloc((size_t)(nrows * d) * 4);
    uint8_t *xq = malloc(xs * (size_t)ntok), *zq = malloc(zs * (size_t)nrows);
    int32_t *ids = malloc((size_t)nrows * 4);
    const size_t pb = hmoe_cuda_moe_plan_bytes(ntok, k, E);
    int32_t *plan = malloc(pb);
    for (int64_t i = 0; i < (int64_t)ntok * E; i++) lg[i] = rng_normal();
    for (int64_t i = 0; i < ntok * d; i++) x[i] = 0.05f * rng_normal();
    float *d_lg = dup_dev(lg, (size_t)ntok * E * 4), *d_w = dalloc((size_t)nrows * 4), *d_x = dup_dev(x, (size_t)(ntok * d) * 4);
    float *d_z = dalloc((size_t)(nrows * F) * 4), *d_ye = dalloc((size_t)(nrows * d) * 4);
    int32_t *d_ids = dalloc((size_t)nrows * 4);
    void *d_plan = dalloc(pb), *d_xq = dalloc(xs * (size_t)ntok), *d_zq = dalloc(zs * (size_t)nrows);
    struct hmoe_err err = {0};
    snprintf(name, sizeof name, "moe prefill int8 gate/up GEMM %s, %d tokens x %d of %d experts: silu(g)*u", hmoe_type_name(tgu), ntok, k, E);
    struct hmoe_cuda_gemm_args ga = {.w = gate.dev, .w_up = up.dev.w, .xq = d_xq, .xq_stride_bytes = xs, .ntok = ntok, .plan = d_plan,
                                     .k = k, .x_gather = true, .y_f32 = d_z, .y_stride = F};
    if (!launched(hmoe_cuda_moe_topk(d_lg, NULL, HMOE_CUDA_GATING_SOFTMAX, ntok, E, k, d_ids, d_w, g_stream, &err), &err, name) ||
        !launched(hmoe_cuda_moe_plan_build(d_ids, ntok, k, E, d_plan, g_stream, &err), &err, name) ||
        !launched(hmoe_cuda_quantize_q8_1(d_x, d, ntok, d, d_xq, g_stream, &err), &err, name) ||
        !launched(hmoe_cuda_gemm(&ga, g_stream, &err), &err, name) || !from_dev(ids, d_ids, (size_t)nrows * 4, name) ||
        !from_dev(plan, d_plan, pb, name) || !from_dev(xq, d_xq, xs * (size_t)ntok, name) ||
        !from_dev(z, d_z, (size_t)(nrows * F) * 4, name))
        goto out;
    const int32_t *rows = plan + 4 + E + 1;
    int ok = 1;
    for (int64_t r = 0; r < nrows && ok; r++) {
        const int slot = rows[r], e = ids[slot];
        for (int64_t f = 0; f < F && ok; f++) {
            double g, gm, u, um;
            ref_dot_q8_1(gpu_experts_row(&gate, e, f), xq + (size_t)(slot / k) * xs, d, &g, &gm);
            ref_dot_q8_1(gpu_experts_row(&up, e, f), xq + (size_t)(slot / k) * xs, d, &u, &um);
            const double ref = silu(g) * u, tol = 1.2 * fabs(u) * 1e-5 * gm + fabs(silu(g)) * 1e-5 * um + 1e-6 * fabs(ref) + 1e-30;
            if (!(fabs(z[r * F + f] - ref) <= tol)) {
                snprintf(why, sizeof why, "plan row %lld (slot %d, expert %d) col %lld: %.9g, want %.9g (tol %.3g)", (long long)r, slot, e,
                         (long long)f, z[r * F + f], ref, tol);
                ok = 0;
            }
        }
    }
    t_check(ok, name, "%s", why);
    snprintf(name, sizeof name, "moe prefill int8 down GEMM %s over grouped q8_1 rows", hmoe_type_name(tdn));
    struct hmoe_cuda_gemm_args da = {.w = down.dev, .xq = d_zq, .xq_stride_bytes = zs, .ntok = ntok, .plan = d_plan, .k = k,
                                     .x_gather = false, .y_f32 = d_ye, .y_stride = d};
    if (!launched(hmoe_cuda_quantize_q8_1(d_z, F, nrows, F, d_zq, g_stream, &err), &err, name) ||
        !launched(hmoe_cuda_gemm(&da, g_stream, &err), &err, name) || !from_dev(zq, d_zq, zs * (size_t)nrows, name) ||
        !from_dev(ye, d_ye, (size_t)(nrows * d) * 4, name))
        goto out;
    ok = check_plan_down(&down, ids, rows, nrows, d, F, zq, zs, ye, why, sizeof why);
    t_check(ok, name, "%s", why);
out:
    gpu_experts_free(&gate), gpu_experts_free(&up), gpu_experts_free(&down);
    free(lg), free(x), free(z), free(ye), free(xq), free(zq), free(ids), free(plan);
    gpu_free_all();
}

static void test_prefill_moe(enum hmoe_type tgu, enum hmoe_type tdn, int ntok, int E, int k) {
    char name[200], why[256] = "";
    const int64_t d = 512, F = 256, nrows = (int64_t)ntok * k;
    struct gpu_experts gate, up, down;
    gpu_experts_make(&gate, tgu, E, F, d);
    gpu_experts_make(&up, tgu, E, F, d);
    gpu_experts_make(&down, tdn, E, d, F);
    float *lg = malloc((size_t)ntok * E * 4), *x = malloc((size_t)(ntok * d) * 4), *y0 = malloc((size_t)(ntok * d) * 4);
    uint16_t *x16 = malloc((size_t)(ntok * d) * 2), *z16 = malloc((size_t)(nrows * F) * 2);
    float *ye = malloc((size_t)(nrows * d) * 4), *wts = malloc((size_t)nrows * 4), *y = malloc((size_t)(ntok * d) * 4);
    int32_t *ids = malloc((size_t)nrows * 4);
    const size_t pb = hmoe_cuda_moe_plan_bytes(ntok, k, E);
    int32_t *plan = malloc(pb);
    for (int64_t i = 0; i < (int64_t)ntok * E; i++) lg[i] = rng_normal();
    /* activations scaled so that silu(g)*u stays well inside the f16 range of the z output */
    for (int64_t i = 0; i < ntok * d; i++)
        x16[i] = hmoe_f32_to_fp16(0.02f * rng_normal()), x[i] = hmoe_fp16_to_f32(x16[i]), y0[i] = rng_normal();
    float *d_lg = dup_dev(lg, (size_t)ntok * E * 4), *d_w = dalloc((size_t)nrows * 4), *d_ye = dalloc((size_t)(nrows * d) * 4);
    float *d_y = dup_dev(y0, (size_t)(ntok * d) * 4);
    int32_t *d_ids = dalloc((size_t)nrows * 4);
    void *d_plan = dalloc(pb);
    uint16_t *d_x = dup_dev(x16, (size_t)(ntok * d) * 2), *d_z = dalloc((size_t)(nrows * F) * 2);
    struct hmoe_err err = {0};

    snprintf(name, sizeof name, "moe plan %d tokens x %d of %d experts: counts, stable order, inverse, tiles", ntok, k, E);
    if (!launched(hmoe_cuda_moe_topk(d_lg, NULL, HMOE_CUDA_GATING_SOFTMAX, ntok, E, k, d_ids, d_w, g_stream, &err), &err, name) ||
        !launched(hmoe_cuda_moe_plan_build(d_ids, ntok, k, E, d_plan, g_stream, &err), &err, name) ||
        !from_dev(ids, d_ids, (size_t)nrows * 4, name) || !from_dev(wts, d_w, (size_t)nrows * 4, name) || !from_dev(plan, d_plan, pb, name))
        goto out;
    /* the plan, checked field by field (layout: cuda_moe_impl.cuh) */
    const int32_t *off = plan + 4, *rows = off + E + 1, *inv = rows + nrows;
    size_t tpos = (4 + (size_t)E + 1 + 2 * (size_t)nrows + 3) / 4 * 4;
    const int32_t *tiles = plan + tpos;
    int ok = plan[1] == E && plan[2] == nrows && off[0] == 0 && off[E] == nrows;
    if (!ok) snprintf(why, sizeof why, "header %d %d %d, offsets %d..%d", plan[0], plan[1], plan[2], off[0], off[E]);
    int ntiles = 0;
    for (int e = 0; e < E && ok; e++) {
        int cnt = 0;
        for (int64_t s = 0; s < nrows; s++) cnt += ids[s] == e;
        if (off[e + 1] - off[e] != cnt) {
            snprintf(why, sizeof why, "expert %d: %d rows, want %d", e, off[e + 1] - off[e], cnt);
            ok = 0;
        }
        for (int32_t r = off[e]; r < off[e + 1] && ok; r++) {
            if (ids[rows[r]] != e || (r > off[e] && rows[r] <= rows[r - 1]) || inv[rows[r]] != r) {
                snprintf(why, sizeof why, "plan row %d (expert %d): slot %d out of order or not inverse", r, e, rows[r]);
                ok = 0;
            }
        }
        for (int32_t r0 = off[e]; r0 < off[e + 1] && ok; r0 += HMOE_CUDA_MOE_TILE, ntiles++) {
            const int32_t *tl = tiles + 4 * ntiles;
            const int want = off[e + 1] - r0 < HMOE_CUDA_MOE_TILE ? off[e + 1] - r0 : HMOE_CUDA_MOE_TILE;
            if (tl[0] != e || tl[1] != r0 || tl[2] != want) {
                snprintf(why, sizeof why, "tile %d: {%d, %d, %d}, want {%d, %d, %d}", ntiles, tl[0], tl[1], tl[2], e, r0, want);
                ok = 0;
            }
        }
    }
    if (ok && plan[0] != ntiles) snprintf(why, sizeof why, "%d tiles, want %d", plan[0], ntiles), ok = 0;
    t_check(ok, name, "%s", why);
    if (!ok) goto out;

    snprintf(name, sizeof name, "moe prefill gate/up GEMM %s, gathered tokens, f16 silu(g)*u", hmoe_type_name(tgu));
    struct hmoe_cuda_gemm_args ga = {.w = gate.dev, .w_up = up.dev.w, .x = d_x, .x_stride = d, .ntok = ntok, .plan = d_plan,
                                     .k = k, .x_gather = true, .y_f16 = d_z, .y_stride = F};
    if (!launched(hmoe_cuda_gemm(&ga, g_stream, &err), &err, name) || !from_dev(z16, d_z, (size_t)(nrows * F) * 2, name)) goto out;
    ok = 1;
    for (int64_t r = 0; r < nrows && ok; r++) {
        const int slot = rows[r], e = ids[slot];
        const float *xt = x + (size_t)(slot / k) * d;
        for (int64_t f = 0; f < F && ok; f++) {
            double g = 0, gm = 0, u = 0, um = 0;
            const float *gw = gpu_experts_row(&gate, e, f), *uw = gpu_experts_row(&up, e, f);
            for (int64_t c = 0; c < d; c++) {
                const double pg = (double)f16r(gw[c]) * xt[c], pu = (double)f16r(uw[c]) * xt[c];
                g += pg, gm += fabs(pg), u += pu, um += fabs(pu);
            }
            const double ref = silu(g) * u;
            const double tol = ldexp(fabs(ref), -10) + 1.2 * fabs(u) * 1e-5 * gm + fabs(silu(g)) * 1e-5 * um + 1e-7;
            const double got = hmoe_fp16_to_f32(z16[r * F + f]);
            if (!(fabs(got - ref) <= tol)) {
                snprintf(why, sizeof why, "plan row %lld (slot %d, expert %d) col %lld: %.9g, want %.9g", (long long)r, slot, e,
                         (long long)f, got, ref);
                ok = 0;
            }
        }
    }
    t_check(ok, name, "%s", why);

    snprintf(name, sizeof name, "moe prefill down GEMM %s over grouped rows", hmoe_type_name(tdn));
    struct hmoe_cuda_gemm_args da = {.w = down.dev, .x = d_z, .x_stride = F, .ntok = ntok, .plan = d_plan, .k = k,
                                     .x_gather = false, .y_f32 = d_ye, .y_stride = d};
    if (!launched(hmoe_cuda_gemm(&da, g_stream, &err), &err, name) || !from_dev(ye, d_ye, (size_t)(nrows * d) * 4, name)) goto out;
    ok = 1;
    for (int64_t r = 0; r < nrows && ok; r++) {
        const int e = ids[rows[r]];
        for (int64_t c = 0; c < d && ok; c++) {
            double s = 0, m = 0;
            const float *dw = gpu_experts_row(&down, e, c);
            for (int64_t f = 0; f < F; f++) {
                const double p = (double)f16r(dw[f]) * hmoe_fp16_to_f32(z16[r * F + f]);
                s += p, m += fabs(p);
            }
            if (!(fabs(ye[r * d + c] - s) <= 1e-5 * m + 1e-30)) {
                snprintf(why, sizeof why, "plan row %lld col %lld: %.9g, want %.9g", (long long)r, (long long)c, ye[r * d + c], s);
                ok = 0;
            }
        }
    }
    t_check(ok, name, "%s", why);

    snprintf(name, sizeof name, "moe_combine %d tokens: y += sum_j w_j * ye[row(t, j)]", ntok);
    if (!launched(hmoe_cuda_moe_combine(d_plan, d_ye, d, d_w, ntok, k, E, d, d_y, d, g_stream, &err), &err, name) ||
        !from_dev(y, d_y, (size_t)(ntok * d) * 4, name))
        goto out;
    ok = 1;
    for (int t = 0; t < ntok && ok; t++)
        for (int64_t c = 0; c < d && ok; c++) {
            double ref = y0[t * d + c], m = fabs(y0[t * d + c]);
            for (int j = 0; j < k; j++) {
                const double p = (double)wts[t * k + j] * ye[(size_t)inv[t * k + j] * d + c];
                ref += p, m += fabs(p);
            }
            if (!(fabs(y[t * d + c] - ref) <= 1e-6 * m + 1e-30)) {
                snprintf(why, sizeof why, "token %d col %lld: %.9g, want %.9g", t, (long long)c, y[t * d + c], ref);
                ok = 0;
            }
        }
    t_check(ok, name, "%s", why);
out:
    gpu_experts_free(&gate), gpu_experts_free(&up), gpu_experts_free(&down);
    free(lg), free(x), free(y0), free(x16), free(z16), free(ye), free(wts), free(y), free(ids), free(plan);
    gpu_free_all();
}

static const enum hmoe_type k_types[] = {
    HMOE_TYPE_F32,     HMOE_TYPE_F16,    HMOE_TYPE_BF16,   HMOE_TYPE_Q4_0,    HMOE_TYPE_Q4_1,   HMOE_TYPE_Q5_0,
    HMOE_TYPE_Q5_1,    HMOE_TYPE_Q8_0,   HMOE_TYPE_Q2_K,   HMOE_TYPE_Q3_K,    HMOE_TYPE_Q4_K,   HMOE_TYPE_Q5_K,
    HMOE_TYPE_Q6_K,    HMOE_TYPE_IQ2_XXS, HMOE_TYPE_IQ2_XS, HMOE_TYPE_IQ2_S,  HMOE_TYPE_IQ3_XXS, HMOE_TYPE_IQ3_S,
    HMOE_TYPE_IQ1_S,   HMOE_TYPE_IQ1_M,  HMOE_TYPE_IQ4_NL, HMOE_TYPE_IQ4_XS,  HMOE_TYPE_MXFP4,
};

static void test_bad_args(void) {
    struct hmoe_err err = {0};
    void *d = dalloc(1 << 16);
    enum hmoe_status st = hmoe_cuda_moe_topk(d, NULL, HMOE_CUDA_GATING_SOFTMAX, 4, 600, 8, d, d, g_stream, &err);
    t_check(st == HMOE_ERR_ARG, "moe_topk refuses 600 experts", "status %d: %s", st, err.msg);
    st = hmoe_cuda_moe_topk(d, NULL, HMOE_CUDA_GATING_SOFTMAX, 4, 8, 9, d, d, g_stream, &err);
    t_check(st == HMOE_ERR_ARG, "moe_topk refuses k > n_expert", "status %d: %s", st, err.msg);
    struct hmoe_cuda_experts g = {.type = HMOE_TYPE_Q4_K, .w = d, .row_bytes = 144, .expert_stride_bytes = 144 * 8, .nrows = 8,
                                  .ncols = 256, .n_expert = 1};
    struct hmoe_cuda_experts u = g;
    u.type = HMOE_TYPE_Q6_K;
    st = hmoe_cuda_moe_gate_up(&g, &u, d, 1, 1, d, 512, d, 8, g_stream, &err);
    t_check(st == HMOE_ERR_ARG, "moe_gate_up refuses gate/up of different types", "status %d: %s", st, err.msg);
    struct hmoe_cuda_gemm_args a = {.w = g, .x = d, .x_stride = 256, .ntok = 1, .y_f32 = d, .y_f16 = d, .y_stride = 8};
    st = hmoe_cuda_gemm(&a, g_stream, &err);
    t_check(st == HMOE_ERR_ARG, "gemm refuses two outputs", "status %d: %s", st, err.msg);
    gpu_free_all();
}

int main(void) {
    if (!gpu_open_or_skip("gpu_test_moe")) return t_summary();
    rng_seed(99);
    test_topk(128, 8, 0);
    test_topk(128, 8, 1);
    test_topk(16, 4, 1);
    test_topk(256, 8, 0);
    test_topk(512, 32, 1);
    test_topk(8, 8, 1);
    test_topk(1, 1, 0);
    test_topk_gated(32, 4, 0, HMOE_CUDA_GATING_TOPK_SOFTMAX, true);
    test_topk_gated(128, 4, 1, HMOE_CUDA_GATING_TOPK_SOFTMAX, true);
    test_topk_gated(128, 8, 0, HMOE_CUDA_GATING_SOFTMAX, true);
    test_router_topk(128, 8, 2048);
    test_router_topk(16, 4, 256);
    test_router_topk(256, 8, 4096);
    test_decode_experts(HMOE_TYPE_Q4_K, HMOE_TYPE_Q6_K, 1);
    test_decode_experts(HMOE_TYPE_Q4_K, HMOE_TYPE_Q4_K, 3);
    test_decode_experts(HMOE_TYPE_IQ2_XXS, HMOE_TYPE_IQ3_XXS, 1);
    test_decode_experts(HMOE_TYPE_IQ2_XS, HMOE_TYPE_Q5_K, 2);
    test_decode_experts(HMOE_TYPE_Q8_0, HMOE_TYPE_IQ4_NL, 1);
    test_decode_experts_impl(HMOE_TYPE_Q4_K, HMOE_TYPE_Q4_K, 1, 4096); /* 4096 output rows */
    test_decode_experts_var(HMOE_TYPE_MXFP4, HMOE_TYPE_MXFP4, 1, 512, true);
    test_decode_experts_var(HMOE_TYPE_MXFP4, HMOE_TYPE_Q8_0, 3, 512, true);
    test_router_norm_topk(128, 8, 2048, 1);
    test_router_norm_topk(16, 4, 256, 1);
    test_router_norm_topk(256, 8, 4096, 1);
    test_router_norm_topk(8, 2, 64, 1);
    test_router_norm_topk(17, 3, 96, 1);
    test_router_norm_topk(128, 8, 2048, 4);
    for (size_t i = 0; i < HMOE_ARRAY_LEN(k_types); i++) test_gemm_dense(k_types[i], 70, 192, 512, 0);
    test_gemm_dense(HMOE_TYPE_Q4_K, 5, 256, 768, 1);
    test_gemm_dense(HMOE_TYPE_Q6_K, 130, 128, 1024, 1);
    test_gemm_dense(HMOE_TYPE_IQ2_XXS, 33, 64, 256, 2);
    test_gemm_dense(HMOE_TYPE_Q4_K, 70, 192, 512, 3);
    for (size_t i = 0; i < HMOE_ARRAY_LEN(k_types); i++)
        if (hmoe_type_info[k_types[i]].is_quantized && k_types[i] != HMOE_TYPE_IQ1_M) test_gemm_int8(k_types[i], 70, 192, 512, 0);
    test_gemm_int8(HMOE_TYPE_Q4_K, 5, 256, 768, 1);
    test_gemm_int8(HMOE_TYPE_Q6_K, 130, 128, 1024, 1);
    test_prefill_moe_int8(HMOE_TYPE_Q4_K, HMOE_TYPE_Q6_K, 300, 16, 4);
    test_prefill_moe_int8(HMOE_TYPE_IQ2_XXS, HMOE_TYPE_IQ3_XXS, 37, 16, 4);
    test_prefill_moe_int8(HMOE_TYPE_Q4_K, HMOE_TYPE_Q5_K, 1000, 8, 2);
    test_prefill_moe(HMOE_TYPE_Q4_K, HMOE_TYPE_Q6_K, 300, 16, 4);
    test_prefill_moe(HMOE_TYPE_IQ2_XXS, HMOE_TYPE_IQ3_XXS, 37, 16, 4);
    test_prefill_moe(HMOE_TYPE_Q4_K, HMOE_TYPE_Q4_K, 1000, 8, 2); /* > 48 rows per expert: 64-row tiles */
    test_bad_args();
    gpu_close();
    return t_summary();
}
