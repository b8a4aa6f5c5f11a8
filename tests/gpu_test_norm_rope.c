/* gpu_test_norm_rope.c — RMSNorm, QK-norm + NEOX RoPE + KV store, SwiGLU and add
 * (cuda_norm_rope.cu) against scalar C written here from qwen3moe.md §4.2, §4.3, §5 (float64).
 *
 * Tolerances: the GPU sums in f32, the references in f64, so outputs must agree to ~1e-6
 * relative to the row's scale (we allow 2e-5); stored fp16 K/V within one fp16 rounding;
 * q8_0 K within half a quantization step plus the fp16 rounding of d; the residual written
 * back and raw V rows stored in q8_0 must be exact (same float ops / the type table's Q8_0
 * quantizer). The q8_1 output must be byte-identical to quantizing the GPU's own f32 output.
 */
#include "harness.h"
#include "gpu_util.h"

static uint32_t fbits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static void test_rmsnorm(int64_t nrows, int64_t n, int with_add) {
    char name[200], why[200] = "";
    snprintf(name, sizeof name, "rmsnorm %lld x %lld%s -> f32, f16, q8_1", (long long)nrows, (long long)n,
             with_add ? " after residual add" : "");
    const size_t qb = hmoe_cuda_q8_1_row_bytes(n);
    float *x = malloc((size_t)(nrows * n) * 4), *add = malloc((size_t)(nrows * n) * 4), *w = malloc((size_t)n * 4);
    float *xo = malloc((size_t)(nrows * n) * 4), *h = malloc((size_t)(nrows * n) * 4);
    uint16_t *h16 = malloc((size_t)(nrows * n) * 2);
    uint8_t *hq = malloc(qb * (size_t)nrows), *want_q = calloc((size_t)nrows, qb);
    for (int64_t i = 0; i < nrows * n; i++) x[i] = rng_normal() * 3.0f, add[i] = rng_normal();
    for (int64_t i = 0; i < n; i++) w[i] = 1.0f + 0.3f * rng_normal();
    float *d_x = dup_dev(x, (size_t)(nrows * n) * 4), *d_add = dup_dev(add, (size_t)(nrows * n) * 4), *d_w = dup_dev(w, (size_t)n * 4);
    float *d_h = dalloc((size_t)(nrows * n) * 4);
    uint16_t *d_h16 = dalloc((size_t)(nrows * n) * 2);
    void *d_q = n % 32 == 0 ? dalloc(qb * (size_t)nrows) : NULL;
    struct hmoe_cuda_rmsnorm_args a = {.x = d_x, .x_stride = n, .add = with_add ? d_add : NULL, .add_stride = n, .w = d_w,
                                       .eps = 1e-6f, .nrows = nrows, .n = n, .out_f32 = d_h, .out_f16 = d_h16, .out_q8_1 = d_q};
    struct hmoe_err err = {0};
    if (!launched(hmoe_cuda_rmsnorm(&a, g_stream, &err), &err, name) || !from_dev(xo, d_x, (size_t)(nrows * n) * 4, name) ||
        !from_dev(h, d_h, (size_t)(nrows * n) * 4, name) || !from_dev(h16, d_h16, (size_t)(nrows * n) * 2, name) ||
        (d_q && !from_dev(hq, d_q, qb * (size_t)nrows, name)))
        goto out;
    int ok = 1;
    for (int64_t r = 0; r < nrows && ok; r++) {
        double ss = 0;
        for (int64_t i = 0; i < n; i++) {
            float v = with_add ? x[r * n + i] + add[r * n + i] : x[r * n + i];
            if (fbits(v) != fbits(xo[r * n + i])) {
                snprintf(why, sizeof why, "row %lld: residual x[%lld] = %.9g, want %.9g", (long long)r, (long long)i, xo[r * n + i], v);
                ok = 0;
                break;
            }
            ss += (double)v * v;
        }
        const double rs = 1.0 / sqrt(ss / (double)n + 1e-6);
        for (int64_t i = 0; i < n && ok; i++) {
            const double ref = (double)xo[r * n + i] * rs * w[i];
            if (!(fabs(h[r * n + i] - ref) <= 2e-6 * (fabs(ref) + 1.0))) {
                snprintf(why, sizeof why, "row %lld elem %lld: %.9g, want %.9g", (long long)r, (long long)i, h[r * n + i], ref);
                ok = 0;
            } else if (h16[r * n + i] != hmoe_f32_to_fp16(h[r * n + i])) {
                snprintf(why, sizeof why, "row %lld elem %lld: f16 0x%04x, want fp16(f32 out) 0x%04x", (long long)r, (long long)i,
                         h16[r * n + i], hmoe_f32_to_fp16(h[r * n + i]));
                ok = 0;
            }
        }
        if (ok && d_q) {
            ref_quantize_q8_1(h + r * n, n, want_q + r * qb);
            if (memcmp(want_q + r * qb, hq + r * qb, (size_t)n + 8 * (size_t)(n / 32)) != 0) {
                snprintf(why, sizeof why, "row %lld: q8_1 bytes differ from quantizing the f32 output", (long long)r);
                ok = 0;
            }
        }
    }
    t_check(ok, name, "%s", why);
out:
    free(x), free(add), free(w), free(xo), free(h), free(h16), free(hq), free(want_q);
}

/* Reference QK-norm + RoPE of one head vector (qwen3moe.md §4.3 step 4, §5). */
static void ref_head(const float *src, int D, const float *nw, float eps, const struct hmoe_cuda_rope *rp, int pos, double *out) {
    double ss = 0;
    for (int i = 0; i < D; i++) ss += (double)src[i] * src[i];
    const double r = 1.0 / sqrt(ss / D + eps);
    for (int i = 0; i < D; i++) out[i] = nw ? (double)src[i] * r * nw[i] : src[i];
    const int half = rp->n_rot / 2;
    for (int i = 0; i < half; i++) {
        const double ex = pos * pow(rp->freq_base, -2.0 * i / rp->n_rot), in = rp->freq_scale * ex;
        double th = in;
        if (rp->ext_factor != 0.0f) {
            double y = (i - rp->corr_low) / fmax(0.001, (double)rp->corr_high - rp->corr_low);
            double ramp = (1.0 - fmin(1.0, fmax(0.0, y))) * rp->ext_factor;
            th = in * (1 - ramp) + ex * ramp;
        }
        const double c = cos(th) * rp->mscale, s = sin(th) * rp->mscale;
        const double x0 = out[i], x1 = out[i + half];
        out[i] = x0 * c - x1 * s;
        out[i + half] = x0 * s + x1 * c;
    }
}

static void test_qk_rope_kv(int H, int Hkv, int D, int n_rot, enum hmoe_type kvt, enum hmoe_type vt, int yarn, int use_norm) {
    char name[256], why[256] = "";
    snprintf(name, sizeof name, "qk_norm_rope_store H=%d Hkv=%d D=%d n_rot=%d K %s V %s cache%s%s", H, Hkv, D, n_rot,
             hmoe_type_name(kvt), hmoe_type_name(vt), yarn ? ", YaRN x4" : "", use_norm ? "" : ", no norm");
    const int ntok = 6, pos[6] = {0, 1, 7, 100, 4095, 40000};
    const int64_t n_ctx = 40001;
    const int qs = H * D, ks = Hkv * D;
    float *q = malloc((size_t)ntok * qs * 4), *k = malloc((size_t)ntok * ks * 4), *v = malloc((size_t)ntok * ks * 4);
    float *qn = malloc((size_t)D * 4), *kn = malloc((size_t)D * 4), *qo = malloc((size_t)ntok * qs * 4);
    for (int i = 0; i < ntok * qs; i++) q[i] = rng_normal();
    for (int i = 0; i < ntok * ks; i++) k[i] = rng_normal() * 2.0f, v[i] = rng_normal();
    for (int i = 0; i < D; i++) qn[i] = 1.0f + 0.2f * rng_normal(), kn[i] = 1.0f + 0.2f * rng_normal();
    struct hmoe_cuda_rope rp = {.n_rot = n_rot, .freq_base = 1e6f, .freq_scale = 1.0f, .ext_factor = 0.0f, .mscale = 1.0f};
    if (yarn) {
        rp.freq_scale = 0.25f;
        hmoe_cuda_rope_yarn_corr(&rp, 32768, 32.0f, 1.0f);
    }
    const size_t kvb = hmoe_cuda_kv_bytes(kvt, n_ctx, Hkv, D), rowb = gpu_kv_row_bytes(kvt, D);
    const size_t vvb = hmoe_cuda_kv_bytes(vt, n_ctx, Hkv, D), rowv = gpu_kv_row_bytes(vt, D);
    struct hmoe_cuda_kv kv = {.type_k = kvt, .type_v = vt, .k = dalloc(kvb), .v = dalloc(vvb), .n_ctx = n_ctx, .n_head_kv = Hkv,
                              .head_dim = D};
    float *d_q = dup_dev(q, (size_t)ntok * qs * 4);
    struct hmoe_cuda_qkv_args a = {.q = d_q, .k = dup_dev(k, (size_t)ntok * ks * 4), .v = dup_dev(v, (size_t)ntok * ks * 4),
                                   .q_stride = qs, .kv_stride = ks, .ntok = ntok, .n_head = H, .n_head_kv = Hkv, .head_dim = D,
                                   .q_norm = use_norm ? dup_dev(qn, (size_t)D * 4) : NULL,
                                   .k_norm = use_norm ? dup_dev(kn, (size_t)D * 4) : NULL, .eps = 1e-6f,
                                   .pos = dup_dev(pos, sizeof pos), .rope = rp, .kv = kv};
    struct hmoe_err err = {0};
    uint8_t *krow = malloc(rowb), *vrow = malloc(rowv), *vwant = malloc(rowv);
    float *kdec = malloc((size_t)D * 4);
    double *ref = malloc((size_t)D * 8);
    if (!launched(hmoe_cuda_qk_norm_rope_store(&a, g_stream, &err), &err, name) || !from_dev(qo, d_q, (size_t)ntok * qs * 4, name))
        goto out;
    int ok = 1;
    for (int t = 0; t < ntok && ok; t++) {
        for (int h = 0; h < H && ok; h++) {
            ref_head(q + (size_t)t * qs + h * D, D, use_norm ? qn : NULL, 1e-6f, &rp, pos[t], ref);
            double scale = 0;
            for (int i = 0; i < D; i++) scale = fmax(scale, fabs(ref[i]));
            for (int i = 0; i < D && ok; i++)
                if (!(fabs(qo[(size_t)t * qs + h * D + i] - ref[i]) <= 2e-5 * scale + 1e-6)) {
                    snprintf(why, sizeof why, "tok %d (pos %d) q head %d dim %d: %.9g, want %.9g", t, pos[t], h, i,
                             qo[(size_t)t * qs + h * D + i], ref[i]);
                    ok = 0;
                }
        }
        for (int h = 0; h < Hkv && ok; h++) {
            const size_t off = ((size_t)h * n_ctx + pos[t]) * rowb, offv = ((size_t)h * n_ctx + pos[t]) * rowv;
            if (!from_dev(krow, (const uint8_t *)kv.k + off, rowb, name) || !from_dev(vrow, (const uint8_t *)kv.v + offv, rowv, name)) {
                ok = -1;
                break;
            }
            ref_head(k + (size_t)t * ks + h * D, D, use_norm ? kn : NULL, 1e-6f, &rp, pos[t], ref);
            double scale = 0;
            for (int i = 0; i < D; i++) scale = fmax(scale, fabs(ref[i]));
            hmoe_type_info[kvt].dequant_ref(krow, kdec, D);
            for (int i = 0; i < D && ok; i++) {
                const double got = kdec[i];
                const double step = kv_store_tol(kvt, krow, i, ref[i]); /* gpu_util.h */
                const double tol = step + 2e-5 * scale + 1e-6;
                if (!(fabs(got - ref[i]) <= tol)) {
                    snprintf(why, sizeof why, "tok %d (pos %d) k head %d dim %d: %.9g, want %.9g", t, pos[t], h, i, got, ref[i]);
                    ok = 0;
                }
            }
            const float *vs = v + (size_t)t * ks + h * D;
            hmoe_cpu_attn_kv_store(vt, vs, vwant, D);
            for (size_t i = 0; ok && i < rowv; i++)
                if (vrow[i] != vwant[i]) {
                    snprintf(why, sizeof why, "tok %d v head %d: stored byte %zu is 0x%02x, the CPU %s cache store writes 0x%02x", t, h,
                             i, vrow[i], hmoe_type_name(vt), vwant[i]);
                    ok = 0;
                }
        }
    }
    if (ok >= 0) t_check(ok, name, "%s", why);
out:
    free(q), free(k), free(v), free(qn), free(kn), free(qo), free(krow), free(vrow), free(vwant), free(ref), free(kdec);
    gpu_free_all();
}

static void test_qk_rope(int H, int Hkv, int D, int n_rot, enum hmoe_type kvt, int yarn, int use_norm) {
    test_qk_rope_kv(H, Hkv, D, n_rot, kvt, kvt, yarn, use_norm);
}

static void test_swiglu_add(void) {
    const int64_t nrows = 5, n = 1000, stride = 1003;
    float *g = malloc((size_t)(nrows * stride) * 4), *u = malloc((size_t)(nrows * stride) * 4), *z = malloc((size_t)(nrows * n) * 4);
    for (int64_t i = 0; i < nrows * stride; i++) g[i] = rng_normal() * 4.0f, u[i] = rng_normal();
    float *d_g = dup_dev(g, (size_t)(nrows * stride) * 4), *d_u = dup_dev(u, (size_t)(nrows * stride) * 4), *d_z = dalloc((size_t)(nrows * n) * 4);
    struct hmoe_err err = {0};
    const char *name = "swiglu silu(g) * u, strided rows";
    if (launched(hmoe_cuda_swiglu(d_g, d_u, stride, nrows, n, d_z, n, g_stream, &err), &err, name) &&
        from_dev(z, d_z, (size_t)(nrows * n) * 4, name)) {
        long bad = -1;
        for (int64_t r = 0; r < nrows; r++)
            for (int64_t c = 0; c < n && bad < 0; c++) {
                const double gv = g[r * stride + c], ref = gv / (1.0 + exp(-gv)) * u[r * stride + c];
                if (!(fabs(z[r * n + c] - ref) <= 1e-6 * (fabs(ref) + 1e-3))) bad = (long)(r * n + c);
            }
        t_check(bad < 0, name, "element %ld: %.9g", bad, bad >= 0 ? z[bad] : 0.0);
    }
    name = "add a + b exact";
    float *s = malloc((size_t)(nrows * n) * 4);
    if (launched(hmoe_cuda_add(d_g, d_u, nrows * n, d_z, g_stream, &err), &err, name) && from_dev(s, d_z, (size_t)(nrows * n) * 4, name)) {
        long bad = -1;
        for (int64_t i = 0; i < nrows * n && bad < 0; i++)
            if (fbits(s[i]) != fbits(g[i] + u[i])) bad = (long)i;
        t_check(bad < 0, name, "element %ld", bad);
    }
    free(g), free(u), free(z), free(s);
}

static void test_bad_args(void) {
    struct hmoe_err err = {0};
    struct hmoe_cuda_qkv_args a = {.head_dim = 100, .n_head = 8, .n_head_kv = 2};
    enum hmoe_status st = hmoe_cuda_qk_norm_rope_store(&a, g_stream, &err);
    t_check(st == HMOE_ERR_ARG, "qk_norm_rope refuses head_dim 100", "status %d: %s", st, err.msg);
    struct hmoe_cuda_rmsnorm_args r = {.n = 0};
    st = hmoe_cuda_rmsnorm(&r, g_stream, &err);
    t_check(st == HMOE_ERR_ARG, "rmsnorm refuses n = 0", "status %d: %s", st, err.msg);
}

int main(void) {
    if (!gpu_open_or_skip("gpu_test_norm_rope")) return t_summary();
    rng_seed(31337);
    test_rmsnorm(3, 2048, 1);
    test_rmsnorm(1, 2048, 0); /* one row, no add: the split decode kernel (v3) */
    test_rmsnorm(1, 4096, 0);
    test_rmsnorm(1, 2048, 1); /* one row with an add: v2 */
    test_rmsnorm(5, 4096, 0);
    test_rmsnorm(2, 100, 1); /* not a multiple of 32: no q8_1 */
    test_qk_rope(8, 2, 64, 64, HMOE_TYPE_F16, 0, 1);
    test_qk_rope(32, 4, 128, 128, HMOE_TYPE_F16, 0, 1);
    test_qk_rope(32, 4, 128, 128, HMOE_TYPE_Q8_0, 0, 1);
    test_qk_rope(32, 4, 128, 128, HMOE_TYPE_F16, 1, 1);
    test_qk_rope(16, 2, 256, 64, HMOE_TYPE_F16, 0, 1);
    test_qk_rope(4, 4, 32, 32, HMOE_TYPE_Q8_0, 0, 0);
    /* every cache type (K and V the same), then mixed pairs */
    const enum hmoe_type all[] = {HMOE_TYPE_F32,  HMOE_TYPE_F16,  HMOE_TYPE_BF16, HMOE_TYPE_Q8_0,  HMOE_TYPE_Q4_0,
                                  HMOE_TYPE_Q4_1, HMOE_TYPE_Q5_0, HMOE_TYPE_Q5_1, HMOE_TYPE_IQ4_NL};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        test_qk_rope_kv(32, 4, 128, 128, all[i], all[i], 0, 1);
        test_qk_rope_kv(4, 4, 32, 32, all[i], all[i], 0, 0);
    }
    test_qk_rope_kv(32, 4, 128, 128, HMOE_TYPE_Q8_0, HMOE_TYPE_Q4_0, 0, 1);
    test_qk_rope_kv(16, 2, 256, 64, HMOE_TYPE_F16, HMOE_TYPE_Q5_1, 0, 1);
    test_qk_rope_kv(8, 2, 64, 64, HMOE_TYPE_IQ4_NL, HMOE_TYPE_BF16, 1, 1);
    test_swiglu_add();
    test_bad_args();
    gpu_close();
    return t_summary();
}
