/* gpu_test_mamba2.c — the Mamba-2 kernels of cuda_mamba2.cu and the sigmoid router / ungated F32
 * expert kernels of cuda_moe_ungated.cu against their CPU twins (src/model/mamba2.c,
 * deltanet.c's conv with bias, src/sched's hmoe_sched_route_sigmoid; these match llama.cpp end to
 * end in tests/test_nemotron.c) and scalar C written here from nemotron_h_moe.md §6.1: causal
 * conv + bias + SiLU with the state carried across calls (micro-batches of 2, 1, 37 and 1
 * tokens), the selective scan (state sizes 16 and 128, head dims 16 and 64, 1 to 70 tokens, the
 * state carried across two calls), the grouped gated RMSNorm, ReLU², the sigmoid top-k with
 * selection bias / renormalisation / scale, the F32 up + ReLU² and weighted down products, and
 * the launchers' shape checks. Tolerance: both sides in f32 with different summation orders:
 * |d| <= 1e-4 * max(1, max|ref|) (5e-4 for the scan, whose errors accumulate over the tokens).
 */
#include "harness.h"
#include "gpu_util.h"
#include "hmoe/sched.h"
#include "model/deltanet_impl.h"
#include "model/mamba2_impl.h"

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

static void test_conv(void) {
    const int K = 4, ch = 200, xs = 232; /* rows wider than the channels, as in the ssm_in projection */
    static const int batches[] = {2, 1, 37, 1, 100, 3}; /* runs of 16 tokens: one, three, seven */
    float *w = rnd((size_t)ch * K, 0.5f), *bias = rnd(ch, 0.5f), *st = calloc((size_t)(K - 1) * ch, 4);
    float *gst = malloc((size_t)(K - 1) * ch * 4);
    float *d_w = dup_dev(w, (size_t)ch * K * 4), *d_b = dup_dev(bias, (size_t)ch * 4),
          *d_st = dup_dev(st, (size_t)(K - 1) * ch * 4);
    char name[160], why[256];
    for (size_t b = 0; b < HMOE_ARRAY_LEN(batches); b++) {
        const int n = batches[b];
        float *x = rnd((size_t)n * xs, 1.0f), *y = malloc((size_t)n * ch * 4), *gy = malloc((size_t)n * ch * 4);
        float *d_x = dup_dev(x, (size_t)n * xs * 4), *d_y = dalloc((size_t)n * ch * 4);
        snprintf(name, sizeof name, "mamba2_conv: K=4 + bias over %d channels, micro-batch %zu of %d tokens (state carried)",
                 ch, b + 1, n);
        struct hmoe_err err = {0};
        if (launched(hmoe_cuda_mamba2_conv(d_x, xs, d_st, d_w, d_b, K, ch, n, d_y, ch, g_stream, &err), &err, name) &&
            from_dev(gy, d_y, (size_t)n * ch * 4, name) && from_dev(gst, d_st, (size_t)(K - 1) * ch * 4, name)) {
            hmoe_gdn_conv_bias(x, xs, st, w, bias, K, ch, 0, ch, n, y, ch);
            int ok = close_enough(gy, y, (size_t)n * ch, 1e-5, why, sizeof why);
            if (ok && !(ok = close_enough(gst, st, (size_t)(K - 1) * ch, 0.0, why, sizeof why)))
                strncat(why, " (conv state)", sizeof why - strlen(why) - 1);
            t_check(ok, name, "%s", why);
        }
        free(x), free(y), free(gy);
    }
    free(w), free(bias), free(st), free(gst);
}

/* Heads H of P rows, G groups, state N, n tokens in two calls (n1 then n - n1). */
static void test_scan(int H, int P, int G, int N, int n, int n1) {
    const int di = H * P, cd = di + 2 * G * N, dts = H + 3; /* dt rows wider than the heads */
    float *xbc = rnd((size_t)n * cd, 1.0f), *dt = rnd((size_t)n * dts, 1.5f), *dtb = rnd(H, 0.5f), *A = rnd(H, 1.0f),
          *D = rnd(H, 1.0f);
    for (int h = 0; h < H; h++) A[h] = -fabsf(A[h]) - 0.05f;
    dt[1] = 25.0f; /* above the softplus threshold */
    const size_t sf = (size_t)H * P * N;
    float *S = calloc(sf, 4), *gS = malloc(sf * 4), *y = calloc((size_t)n * di, 4), *gy = malloc((size_t)n * di * 4);
    float *d_xbc = dup_dev(xbc, (size_t)n * cd * 4), *d_dt = dup_dev(dt, (size_t)n * dts * 4),
          *d_dtb = dup_dev(dtb, H * 4), *d_A = dup_dev(A, H * 4), *d_D = dup_dev(D, H * 4), *d_S = dup_dev(S, sf * 4),
          *d_y = dalloc((size_t)n * di * 4);
    char name[200], why[256];
    snprintf(name, sizeof name, "mamba2_scan: %d heads x %d, %d groups, state %d, %d tokens in calls of %d + %d", H, P, G, N,
             n, n1, n - n1);
    struct hmoe_err err = {0};
    bool ok_launch = true;
    for (int part = 0; part < 2 && ok_launch; part++) {
        const int t0 = part ? n1 : 0, nt = part ? n - n1 : n1;
        if (nt == 0) continue;
        const struct hmoe_cuda_mamba2_scan_args a = {.S = d_S, .n_head = H, .P = P, .N = N, .n_group = G, .ntok = nt,
                                                     .x = d_xbc + (size_t)t0 * cd, .x_stride = cd,
                                                     .B = d_xbc + (size_t)t0 * cd + di, .C = d_xbc + (size_t)t0 * cd + di + G * N,
                                                     .bc_stride = cd, .dt = d_dt + (size_t)t0 * dts, .dt_stride = dts,
                                                     .dt_bias = d_dtb, .A = d_A, .D = d_D, .y = d_y + (size_t)t0 * di,
                                                     .y_stride = di};
        ok_launch = launched(hmoe_cuda_mamba2_scan(&a, g_stream, &err), &err, name);
    }
    if (ok_launch && from_dev(gy, d_y, (size_t)n * di * 4, name) && from_dev(gS, d_S, sf * 4, name)) {
        hmoe_mamba2_dt(dt, (size_t)dts, dtb, n, H);
        for (int h = 0; h < H; h++) {
            const int g = h / (H / G);
            hmoe_mamba2_scan(S + (size_t)h * P * N, P, N, n, xbc + h * P, (size_t)cd, xbc + di + g * N,
                             xbc + di + G * N + g * N, (size_t)cd, dt + h, (size_t)dts, A[h], D[h], y + h * P, (size_t)di);
        }
        int ok = close_enough(gy, y, (size_t)n * di, 5e-4, why, sizeof why);
        if (ok && !(ok = close_enough(gS, S, sf, 5e-4, why, sizeof why))) strncat(why, " (state)", sizeof why - strlen(why) - 1);
        t_check(ok, name, "%s", why);
    }
    free(xbc), free(dt), free(dtb), free(A), free(D), free(S), free(gS), free(y), free(gy);
}

static void test_gated_norm(void) {
    const int n = 5, G = 4, gs = 96, di = G * gs, zs = di + 40;
    float *y = rnd((size_t)n * di, 2.0f), *z = rnd((size_t)n * zs, 2.0f), *w = rnd(di, 1.0f), *gy = malloc((size_t)n * di * 4);
    float *d_y = dup_dev(y, (size_t)n * di * 4), *d_z = dup_dev(z, (size_t)n * zs * 4), *d_w = dup_dev(w, (size_t)di * 4);
    const char *name = "mamba2_gated_norm: y * silu(z), RMSNorm per group of 96, 4 groups, 5 tokens";
    char why[256];
    struct hmoe_err err = {0};
    if (launched(hmoe_cuda_mamba2_gated_norm(d_y, di, d_z, zs, d_w, n, G, gs, 1e-5f, g_stream, &err), &err, name) &&
        from_dev(gy, d_y, (size_t)n * di * 4, name)) {
        for (int t = 0; t < n; t++)
            for (int j = 0; j < G; j++)
                hmoe_mamba2_gated_norm(y + (size_t)t * di + j * gs, z + (size_t)t * zs + j * gs, w + j * gs, gs, 1e-5f);
        t_check(close_enough(gy, y, (size_t)n * di, 1e-4, why, sizeof why), name, "%s", why);
    }
    free(y), free(z), free(w), free(gy);
}

static void test_relu2(void) {
    const int n = 3, F = 50, st = 64;
    float *x = rnd((size_t)n * st, 2.0f), *gx = malloc((size_t)n * st * 4), *d_x = dup_dev(x, (size_t)n * st * 4);
    const char *name = "relu2: max(x, 0)^2 on 3 rows of 50 (stride 64, the gap untouched)";
    char why[256];
    struct hmoe_err err = {0};
    if (launched(hmoe_cuda_relu2(d_x, st, n, F, g_stream, &err), &err, name) && from_dev(gx, d_x, (size_t)n * st * 4, name)) {
        for (int t = 0; t < n; t++)
            for (int i = 0; i < F; i++) {
                float *v = x + (size_t)t * st + i;
                *v = *v > 0.0f ? *v * *v : 0.0f;
            }
        t_check(close_enough(gx, x, (size_t)n * st, 0.0, why, sizeof why), name, "%s", why);
    }
    free(x), free(gx);
}

static void test_topk_sigmoid(int E, int k, bool renorm, float scale, bool bias) {
    const int n = 9;
    float *lg = rnd((size_t)n * E, 2.0f), *sb = rnd(E, 0.3f);
    lg[3] = lg[5]; /* a tie: the lower index first */
    float *d_lg = dup_dev(lg, (size_t)n * E * 4), *d_sb = dup_dev(sb, (size_t)E * 4);
    int32_t *d_ids = dalloc((size_t)n * k * 4), *gids = malloc((size_t)n * k * 4), *ids = malloc((size_t)n * k * 4);
    float *d_w = dalloc((size_t)n * k * 4), *gw = malloc((size_t)n * k * 4), *w = malloc((size_t)n * k * 4);
    float *probs = malloc((size_t)2 * E * 4);
    char name[200], why[256];
    snprintf(name, sizeof name, "moe_topk_sigmoid: %d experts top-%d, %s bias, renorm %d, scale %.1f, 9 tokens", E, k,
             bias ? "with" : "no", renorm, scale);
    const struct hmoe_cuda_topk_sigmoid_args a = {.logits = d_lg, .logits_stride = E, .ntok = n, .n_expert = E, .k = k,
                                                  .sel_bias = bias ? d_sb : NULL, .renorm = renorm, .scale = scale,
                                                  .ids = d_ids, .weights = d_w};
    struct hmoe_err err = {0};
    if (launched(hmoe_cuda_moe_topk_sigmoid(&a, g_stream, &err), &err, name) && from_dev(gids, d_ids, (size_t)n * k * 4, name) &&
        from_dev(gw, d_w, (size_t)n * k * 4, name)) {
        struct hmoe_moe_weights mw = {.router = {.n_out = E}, .n_expert_used = k, .gating = HMOE_MOE_SIGMOID,
                                      .sel_bias = bias ? sb : NULL, .no_renorm = !renorm, .w_scale = scale};
        int bad = -1;
        for (int t = 0; t < n; t++) {
            hmoe_sched_route_sigmoid(&mw, lg + (size_t)t * E, probs, ids + (size_t)t * k, w + (size_t)t * k);
            for (int j = 0; j < k && bad < 0; j++)
                if (ids[t * k + j] != gids[t * k + j]) bad = t * k + j;
        }
        int ok = bad < 0 && close_enough(gw, w, (size_t)n * k, 1e-5, why, sizeof why);
        if (bad >= 0) snprintf(why, sizeof why, "slot %d: GPU expert %d, CPU %d", bad, gids[bad], ids[bad]);
        t_check(ok, name, "%s", why);
    }
    free(lg), free(sb), free(gids), free(ids), free(gw), free(w), free(probs);
}

/* F32 experts: z = relu2(up_e x), y += sum_j w_j down_e z, vs scalar loops. */
static void test_f32_experts(void) {
    enum { E = 5, k = 3, n = 4, m = 24, F = 20, ys = 30 };
    float *up = rnd((size_t)E * F * m, 0.3f), *dn = rnd((size_t)E * m * F, 0.3f), *x = rnd((size_t)n * m, 1.0f);
    float *wts = rnd((size_t)n * k, 1.0f), *y = rnd((size_t)n * ys, 1.0f), *gy = malloc((size_t)n * ys * 4);
    int32_t ids[n * k];
    for (int i = 0; i < n * k; i++) ids[i] = (int32_t)(rng_u32() % E);
    ids[4] = -1; /* a bad id contributes nothing */
    float *d_up = dup_dev(up, (size_t)E * F * m * 4), *d_dn = dup_dev(dn, (size_t)E * m * F * 4),
          *d_x = dup_dev(x, (size_t)n * m * 4), *d_w = dup_dev(wts, (size_t)n * k * 4), *d_y = dup_dev(y, (size_t)n * ys * 4),
          *d_z = dalloc((size_t)n * k * F * 4);
    int32_t *d_ids = dup_dev(ids, sizeof ids);
    const struct hmoe_cuda_experts eu = {.type = HMOE_TYPE_F32, .w = d_up, .row_bytes = (size_t)m * 4,
                                         .expert_stride_bytes = (size_t)F * m * 4, .nrows = F, .ncols = m, .n_expert = E};
    const struct hmoe_cuda_experts ed = {.type = HMOE_TYPE_F32, .w = d_dn, .row_bytes = (size_t)F * 4,
                                         .expert_stride_bytes = (size_t)m * F * 4, .nrows = m, .ncols = F, .n_expert = E};
    const char *name = "moe_f32_up_relu2 + moe_f32_down: 5 experts, top-3, 4 tokens, widths 24 / 20 (not multiples of 32)";
    char why[256];
    struct hmoe_err err = {0};
    if (launched(hmoe_cuda_moe_f32_up_relu2(&eu, d_ids, n * k, k, d_x, m, d_z, F, g_stream, &err), &err, name) &&
        launched(hmoe_cuda_moe_f32_down(&ed, d_ids, d_w, n, k, d_z, F, d_y, ys, g_stream, &err), &err, name) &&
        from_dev(gy, d_y, (size_t)n * ys * 4, name)) {
        for (int t = 0; t < n; t++)
            for (int j = 0; j < k; j++) {
                const int e = ids[t * k + j];
                if (e < 0) continue;
                float z[F];
                for (int f = 0; f < F; f++) {
                    double s = 0;
                    for (int c = 0; c < m; c++) s += (double)up[((size_t)e * F + f) * m + c] * x[t * m + c];
                    z[f] = s > 0 ? (float)(s * s) : 0.0f;
                }
                for (int r = 0; r < m; r++) {
                    double s = 0;
                    for (int f = 0; f < F; f++) s += (double)dn[((size_t)e * m + r) * F + f] * z[f];
                    y[t * ys + r] += wts[t * k + j] * (float)s;
                }
            }
        t_check(close_enough(gy, y, (size_t)n * ys, 1e-4, why, sizeof why), name, "%s", why);
    }
    free(up), free(dn), free(x), free(wts), free(y), free(gy);
}

static void test_refusals(void) {
    struct hmoe_err err = {0};
    struct hmoe_cuda_mamba2_scan_args a = {.N = 300, .P = 4, .n_head = 2, .n_group = 1, .ntok = 1};
    enum hmoe_status s1 = hmoe_cuda_mamba2_scan(&a, g_stream, &err);
    enum hmoe_status s2 = hmoe_cuda_mamba2_conv(NULL, 8, NULL, NULL, NULL, 17, 8, 1, NULL, 8, g_stream, &err);
    t_check(s1 == HMOE_ERR_ARG && s2 == HMOE_ERR_ARG && strstr(err.msg, "kernel width"),
            "launchers refuse state size 300 and conv width 17 (HMOE_ERR_ARG, nothing launched)", "status %d / %d: %s", s1,
            s2, err.msg);
}

int main(void) {
    if (!gpu_open_or_skip("gpu_test_mamba2")) return t_summary();
    rng_seed(2688);
    test_conv();
    test_scan(8, 16, 2, 16, 1, 1);
    test_scan(8, 16, 2, 16, 70, 33);
    test_scan(4, 64, 1, 128, 37, 5);
    test_scan(64, 64, 8, 128, 3, 1); /* the Nano-30B shapes */
    test_scan(6, 24, 3, 40, 20, 20);  /* sizes that are no multiple of the warp */
    test_scan(4, 20, 2, 256, 40, 17); /* state 256 (chunks of 16 tokens), rows past P in the last block */
    test_gated_norm();
    test_relu2();
    test_topk_sigmoid(8, 3, true, 2.5f, true);
    test_topk_sigmoid(128, 6, true, 2.5f, true);
    test_topk_sigmoid(40, 5, false, 1.0f, false);
    test_f32_experts();
    test_refusals();
    gpu_free_all();
    gpu_close();
    return t_summary();
}
