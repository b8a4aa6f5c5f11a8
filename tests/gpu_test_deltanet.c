/* gpu_test_deltanet.c — the qwen35moe mixer kernels of cuda_deltanet.cu against their CPU twins
 * in src/model/deltanet.c (which match llama.cpp end to end, tests/test_qwen35.c) and scalar C
 * written here from qwen35moe.md §5.1 and §7: gates, causal conv with state carried across
 * calls (micro-batches of 1, 2 and 37 tokens, so fewer tokens than the window too), L2 norm,
 * the delta-rule scan (head dims 16, 64, 128; state and outputs), gated RMSNorm, [query | gate]
 * split, sigmoid output gate, sigmoid-scaled residual add, and the launchers' shape checks.
 * Tolerance: both sides in f32 with different summation orders: |d| <= 1e-4 * max(1, max|ref|)
 * (5e-4 for the scan, whose errors accumulate over the tokens).
 */
#include "harness.h"
#include "gpu_util.h"
#include "model/deltanet_impl.h"

static float *rnd(size_t n, float scale) {
    float *p = malloc(n * 4);
    for (size_t i = 0; i < n; i++) p[i] = rng_normal() * scale;
    return p;
}

/* max |a - b| against tol * max(1, max |b|); fills why on failure. */
static int close_enough(const float *a, const float *b, size_t n, double tol, char *why, size_t cap) {
    double worst = 0, mx = 0;
    size_t wi = 0;
    for (size_t i = 0; i < n; i++) {
        double dlt = fabs((double)a[i] - b[i]);
        if (!(dlt <= worst)) worst = dlt, wi = i;
        mx = fmax(mx, fabs((double)b[i]));
    }
    const double lim = tol * fmax(1.0, mx);
    snprintf(why, cap, "max |d| %.3g at %zu (GPU %.7g, CPU %.7g), limit %.3g", worst, wi, a[wi], b[wi], lim);
    return worst <= lim;
}

static void test_gates(void) {
    const int n = 5, Hv = 32, stride = 40;
    float *al = rnd((size_t)n * stride, 8.0f), *be = rnd((size_t)n * stride, 3.0f), *dt = rnd(Hv, 1.0f), *a = rnd(Hv, 1.0f);
    for (int h = 0; h < Hv; h++) a[h] = -fabsf(a[h]);
    al[3] = 30.0f; /* above the softplus threshold */
    float *d_al = dup_dev(al, (size_t)n * stride * 4), *d_be = dup_dev(be, (size_t)n * stride * 4);
    float *d_dt = dup_dev(dt, Hv * 4), *d_a = dup_dev(a, Hv * 4);
    float *gal = malloc((size_t)n * stride * 4), *gbe = malloc((size_t)n * stride * 4);
    struct hmoe_err err = {0};
    const char *name = "gdn_gates: softplus(alpha + dt_bias) * a, sigmoid(beta), 5 tokens x 32 heads";
    char why[256];
    if (launched(hmoe_cuda_gdn_gates(d_al, d_be, stride, d_dt, d_a, n, Hv, g_stream, &err), &err, name) &&
        from_dev(gal, d_al, (size_t)n * stride * 4, name) && from_dev(gbe, d_be, (size_t)n * stride * 4, name)) {
        hmoe_gdn_gates(al, be, stride, dt, a, n, Hv);
        int ok = close_enough(gal, al, (size_t)n * stride, 1e-5, why, sizeof why);
        if (ok) ok = close_enough(gbe, be, (size_t)n * stride, 1e-5, why, sizeof why);
        t_check(ok, name, "%s", why);
    }
    free(al), free(be), free(dt), free(a), free(gal), free(gbe);
}

static void test_conv(void) {
    const int K = 4, ch = 200, xs = 232; /* rows wider than the channels, as in the fused projection */
    static const int batches[] = {2, 1, 37, 1};
    float *w = rnd((size_t)ch * K, 0.5f), *st = calloc((size_t)(K - 1) * ch, 4), *gst = malloc((size_t)(K - 1) * ch * 4);
    float *d_w = dup_dev(w, (size_t)ch * K * 4), *d_st = dup_dev(st, (size_t)(K - 1) * ch * 4);
    char name[160], why[256];
    for (size_t b = 0; b < HMOE_ARRAY_LEN(batches); b++) {
        const int n = batches[b];
        float *x = rnd((size_t)n * xs, 1.0f), *y = malloc((size_t)n * ch * 4), *gy = malloc((size_t)n * ch * 4);
        float *d_x = dup_dev(x, (size_t)n * xs * 4), *d_y = dalloc((size_t)n * ch * 4);
        snprintf(name, sizeof name, "gdn_conv: K=4 over %d channels, micro-batch %zu of %d tokens (state carried)", ch, b + 1, n);
        struct hmoe_err err = {0};
        if (launched(hmoe_cuda_gdn_conv(d_x, xs, d_st, d_w, K, ch, n, d_y, ch, g_stream, &err), &err, name) &&
            from_dev(gy, d_y, (size_t)n * ch * 4, name) && from_dev(gst, d_st, (size_t)(K - 1) * ch * 4, name)) {
            hmoe_gdn_conv(x, xs, st, w, K, ch, 0, ch, n, y, ch);
            int ok = close_enough(gy, y, (size_t)n * ch, 1e-5, why, sizeof why);
            if (ok && !(ok = close_enough(gst, st, (size_t)(K - 1) * ch, 0.0, why, sizeof why)))
                strncat(why, " (conv state)", sizeof why - strlen(why) - 1);
            t_check(ok, name, "%s", why);
        }
        free(x), free(y), free(gy);
    }
    free(w), free(st), free(gst);
}

static void test_l2norm(void) {
    const int n = 3, nv = 6, len = 128, stride = 6 * 128 + 64;
    float *x = rnd((size_t)n * stride, 2.0f), *gx = malloc((size_t)n * stride * 4);
    for (int i = 0; i < len; i++) x[(size_t)1 * stride + i] = 0.0f; /* all-zero head: x / eps stays 0 */
    float *d_x = dup_dev(x, (size_t)n * stride * 4);
    const char *name = "gdn_l2norm: 3 tokens x 6 heads of 128, scale 1/sqrt(128) on the first 2, a zero head";
    char why[256];
    struct hmoe_err err = {0};
    const float sc = 1.0f / sqrtf(128.0f);
    if (launched(hmoe_cuda_gdn_l2norm(d_x, stride, n, nv, len, 2, sc, 1e-6f, g_stream, &err), &err, name) &&
        from_dev(gx, d_x, (size_t)n * stride * 4, name)) {
        for (int t = 0; t < n; t++)
            for (int j = 0; j < nv; j++) hmoe_gdn_l2norm(x + (size_t)t * stride + j * len, len, 1e-6f, j < 2 ? sc : 1.0f);
        t_check(close_enough(gx, x, (size_t)n * stride, 1e-5, why, sizeof why), name, "%s", why);
    }
    free(x), free(gx);
}

/* The scan: Hv value heads over Hk q/k heads (tiled mapping), n tokens, state in and out. */
static void test_recurrent(int dim, int n) {
    const int Hk = 2, Hv = 4, kd = Hk * dim, vd = Hv * dim, cd = 2 * kd + vd, gbs = 2 * Hv + 3;
    float *y = rnd((size_t)n * cd, 1.0f), *gb = rnd((size_t)n * gbs, 1.0f), *S = rnd((size_t)Hv * dim * dim, 0.1f);
    for (int t = 0; t < n; t++)
        for (int j = 0; j < 2 * Hk; j++) hmoe_gdn_l2norm(y + (size_t)t * cd + j * dim, dim, 1e-6f, j < Hk ? 1.0f / sqrtf((float)dim) : 1.0f);
    for (int t = 0; t < n; t++)
        for (int h = 0; h < Hv; h++) {
            gb[(size_t)t * gbs + h] = -fabsf(gb[(size_t)t * gbs + h]) * 0.3f;                  /* log decay */
            gb[(size_t)t * gbs + Hv + h] = 1.0f / (1.0f + expf(-gb[(size_t)t * gbs + Hv + h])); /* beta */
        }
    float *o = malloc((size_t)n * vd * 4), *go = malloc((size_t)n * vd * 4), *gS = malloc((size_t)Hv * dim * dim * 4);
    float *d_y = dup_dev(y, (size_t)n * cd * 4), *d_gb = dup_dev(gb, (size_t)n * gbs * 4);
    float *d_S = dup_dev(S, (size_t)Hv * dim * dim * 4), *d_o = dalloc((size_t)n * vd * 4);
    char name[160], why[256];
    snprintf(name, sizeof name, "gdn_recurrent: head dim %d, 2 q/k heads, 4 v heads (h mod 2), %d tokens: outputs and state",
             dim, n);
    const struct hmoe_cuda_gdn_args a = {.S = d_S, .dim = dim, .n_k_head = Hk, .n_v_head = Hv, .ntok = n, .q = d_y,
                                         .k = d_y + kd, .qk_stride = cd, .v = d_y + 2 * kd, .v_stride = cd, .g = d_gb,
                                         .beta = d_gb + Hv, .gb_stride = gbs, .o = d_o, .o_stride = vd};
    struct hmoe_err err = {0};
    if (launched(hmoe_cuda_gdn_recurrent(&a, g_stream, &err), &err, name) && from_dev(go, d_o, (size_t)n * vd * 4, name) &&
        from_dev(gS, d_S, (size_t)Hv * dim * dim * 4, name)) {
        for (int h = 0; h < Hv; h++) {
            const int g = h % Hk;
            hmoe_gdn_recurrent(S + (size_t)h * dim * dim, dim, n, y + g * dim, y + kd + g * dim, cd, y + 2 * kd + h * dim, cd,
                               gb + h, gb + Hv + h, gbs, o + h * dim, vd);
        }
        int ok = close_enough(go, o, (size_t)n * vd, 5e-4, why, sizeof why);
        if (ok && !(ok = close_enough(gS, S, (size_t)Hv * dim * dim, 5e-4, why, sizeof why)))
            strncat(why, " (state)", sizeof why - strlen(why) - 1);
        t_check(ok, name, "%s", why);
    }
    free(y), free(gb), free(S), free(o), free(go), free(gS);
}

static void test_gated_norm(void) {
    const int n = 4, Hv = 8, dim = 64, zs = 600;
    float *o = rnd((size_t)n * Hv * dim, 1.5f), *z = rnd((size_t)n * zs, 2.0f), *w = rnd(dim, 1.0f);
    float *go = malloc((size_t)n * Hv * dim * 4);
    float *d_o = dup_dev(o, (size_t)n * Hv * dim * 4), *d_z = dup_dev(z, (size_t)n * zs * 4), *d_w = dup_dev(w, dim * 4);
    const char *name = "gdn_gated_norm: RMSNorm(o_h) * w * silu(z_h), 4 tokens x 8 heads of 64";
    char why[256];
    struct hmoe_err err = {0};
    if (launched(hmoe_cuda_gdn_gated_norm(d_o, Hv * dim, d_z, zs, d_w, n, Hv, dim, 1e-6f, g_stream, &err), &err, name) &&
        from_dev(go, d_o, (size_t)n * Hv * dim * 4, name)) {
        for (int t = 0; t < n; t++)
            for (int h = 0; h < Hv; h++)
                hmoe_gdn_gated_norm(o + ((size_t)t * Hv + h) * dim, z + (size_t)t * zs + h * dim, w, dim, 1e-6f);
        t_check(close_enough(go, o, (size_t)n * Hv * dim, 1e-5, why, sizeof why), name, "%s", why);
    }
    free(o), free(z), free(w), free(go);
}

/* qg_split + sigmoid_gate + gated_add against scalar C from §5.1 step 1/6 and §7 step 3-4. */
static void test_gates_attn_shexp(void) {
    const int n = 3, H = 4, D = 64, W = 2 * H * D + 100, d = 96;
    float *qg = rnd((size_t)n * W, 2.0f), *o = rnd((size_t)n * H * D, 1.0f), *x = rnd((size_t)n * d, 1.0f);
    float *s = rnd((size_t)n * d, 1.0f), *gam = rnd(n, 2.0f);
    float *gq = malloc((size_t)n * H * D * 4), *go = malloc((size_t)n * H * D * 4), *gx = malloc((size_t)n * d * 4);
    float *d_qg = dup_dev(qg, (size_t)n * W * 4), *d_q = dalloc((size_t)n * H * D * 4), *d_o = dup_dev(o, (size_t)n * H * D * 4);
    float *d_x = dup_dev(x, (size_t)n * d * 4), *d_s = dup_dev(s, (size_t)n * d * 4), *d_g = dup_dev(gam, n * 4);
    struct hmoe_err err = {0};
    const char *name = "qg_split / sigmoid_gate / gated_add: per-head [query | gate] layout, sigmoid scalars";
    if (launched(hmoe_cuda_qg_split(d_qg, W, n, H, D, d_q, H * D, g_stream, &err), &err, name) &&
        launched(hmoe_cuda_sigmoid_gate(d_o, H * D, d_qg, W, n, H, D, g_stream, &err), &err, name) &&
        launched(hmoe_cuda_gated_add(d_x, d, d_s, d, d_g, 1, n, d, g_stream, &err), &err, name) &&
        from_dev(gq, d_q, (size_t)n * H * D * 4, name) && from_dev(go, d_o, (size_t)n * H * D * 4, name) &&
        from_dev(gx, d_x, (size_t)n * d * 4, name)) {
        double worst = 0;
        for (int t = 0; t < n; t++)
            for (int j = 0; j < H; j++)
                for (int e = 0; e < D; e++) {
                    const size_t i = (size_t)t * H * D + j * D + e;
                    const double q = qg[(size_t)t * W + j * 2 * D + e], gt = qg[(size_t)t * W + j * 2 * D + D + e];
                    worst = fmax(worst, fabs(gq[i] - q));
                    worst = fmax(worst, fabs(go[i] - o[i] / (1.0 + exp(-gt))));
                }
        for (int t = 0; t < n; t++)
            for (int c = 0; c < d; c++)
                worst = fmax(worst, fabs(gx[(size_t)t * d + c] - (x[(size_t)t * d + c] + s[(size_t)t * d + c] / (1.0 + exp(-gam[t])))));
        t_check(worst <= 1e-5, name, "max |d| %.3g (limit 1e-5)", worst);
    }
    free(qg), free(o), free(x), free(s), free(gam), free(gq), free(go), free(gx);
}

static void test_refusals(void) {
    struct hmoe_err err = {0};
    struct hmoe_cuda_gdn_args a = {.dim = 300, .n_k_head = 1, .n_v_head = 1, .ntok = 1};
    enum hmoe_status s1 = hmoe_cuda_gdn_recurrent(&a, g_stream, &err);
    enum hmoe_status s2 = hmoe_cuda_gdn_conv(NULL, 8, NULL, NULL, 9, 8, 1, NULL, 8, g_stream, &err);
    t_check(s1 == HMOE_ERR_ARG && s2 == HMOE_ERR_ARG && strstr(err.msg, "kernel width"),
            "launchers refuse head dim 300 and conv width 9 (HMOE_ERR_ARG, nothing launched)", "status %d / %d: %s", s1, s2,
            err.msg);
}

int main(void) {
    if (!gpu_open_or_skip("gpu_test_deltanet")) return t_summary();
    rng_seed(35);
    test_gates();
    test_conv();
    test_l2norm();
    test_recurrent(16, 1);
    test_recurrent(16, 37);
    test_recurrent(64, 5);
    test_recurrent(128, 1);
    test_recurrent(128, 70);
    test_gated_norm();
    test_gates_attn_shexp();
    test_refusals();
    gpu_free_all();
    gpu_close();
    return t_summary();
}
