/* gpu_test_attn_prefill.c — the tensor-core prefill attention (cuda_attn_prefill.cu,
 * hmoe_cuda_attn_prefill_mma and the AUTO dispatcher) against a float64 attention written here
 * from qwen3moe.md §4.3 steps 7-9 (GQA head h reads kv head h / (H/Hkv), scale, causal mask
 * inclusive of the query's own position pos[t], softmax, weighted V).
 *
 * Tolerance, from what the kernel rounds to f16 (unit roundoff u = 2^-11): q (and, for a q8_0
 * cache, each dequantized k) moves every score by at most E = scale * max_t sum_i |q_i k_ti| *
 * (u + u_k); softmax weights then move by a factor within e^(+-2E), so the output by at most
 * (e^(2E) - 1) * max_t |v_ti|; the f16 probabilities (and q8_0 v values) add u (+ u) relative
 * of max_t |v_ti|, and probabilities below f16's normal range up to 2^-25 each. Plus 1e-5
 * (1 + |ref|) for f32 accumulation. A wrong mask, row, head or tile shows up as errors of
 * order |v| on the first rows (few visible keys), far outside this.
 * Cache rows after the batch's last position hold NaN: the kernel must not let them in. The
 * dispatcher also runs with every other cache type and mixed K / V types, which go to the
 * CUDA-core kernel (f32 throughout: well inside the same tolerance).
 */
#include "harness.h"
#include "gpu_util.h"

static void ref_attn_tol(const struct gpu_kv_cache *c, const float *q, int h, int G, int pos, float scale, double *out,
                         double *tol) {
    const int D = c->D, hk = h / G;
    const double u = ldexp(1.0, -11), uk = c->type == HMOE_TYPE_Q8_0 ? u : 0.0;
    double *s = malloc(sizeof(double) * (size_t)(pos + 1)), m = -INFINITY, sum = 0, s1 = 0;
    for (int i = 0; i < D; i++) out[i] = 0, tol[i] = 0;
    for (int t = 0; t <= pos; t++) {
        const float *k = c->kd + ((size_t)hk * c->n_ctx + t) * D, *v = c->vd + ((size_t)hk * c->n_ctx + t) * D;
        double d = 0, a = 0;
        for (int i = 0; i < D; i++) d += (double)q[i] * k[i], a += fabs((double)q[i] * k[i]);
        s[t] = d * scale;
        m = fmax(m, s[t]);
        s1 = fmax(s1, a);
        for (int i = 0; i < D; i++) tol[i] = fmax(tol[i], fabs(v[i])); /* max |v| for now */
    }
    for (int t = 0; t <= pos; t++) {
        const double p = exp(s[t] - m);
        sum += p;
        const float *v = c->vd + ((size_t)hk * c->n_ctx + t) * D;
        for (int i = 0; i < D; i++) out[i] += p * v[i];
    }
    const double E = scale * s1 * (u + uk), rel = expm1(2 * E) + u + uk + (pos + 1) * ldexp(1.0, -25);
    for (int i = 0; i < D; i++) {
        out[i] /= sum;
        tol[i] = rel * tol[i] + 1e-5 * (1 + fabs(out[i]));
    }
    free(s);
}

/* kind: 0 = hmoe_cuda_attn_prefill_mma(warps, hb), 1 = the AUTO dispatcher. check_every: compare
 * every check_every-th token (long batches; the first and last token always). */
static void run_case_kv(int H, int Hkv, int D, enum hmoe_type t, enum hmoe_type tv, int p0, int T, int f16_out, int warps, int hb,
                        int kind, int check_every) {
    char name[240], why[240] = "", tname[48];
    if (t == tv) snprintf(tname, sizeof tname, "%s", hmoe_type_name(t));
    else snprintf(tname, sizeof tname, "K %s V %s", hmoe_type_name(t), hmoe_type_name(tv));
    snprintf(name, sizeof name, "attn prefill %s H=%d Hkv=%d D=%d %s cache, %d tokens after %d%s (warps %d, heads/block %d)",
             kind ? "auto" : "mma", H, Hkv, D, tname, T, p0, f16_out ? ", f32 + f16 out" : "", warps, hb);
    struct gpu_kv_cache c;
    gpu_kv_cache_init2(&c, Hkv, D, p0 + T + 70, t, tv, p0 + T);
    const int G = H / Hkv;
    const float scale = 1.0f / sqrtf((float)D);
    const int64_t qs = (int64_t)H * D + 8, os = (int64_t)H * D + 16; /* padded strides */
    float *q = malloc((size_t)(T * qs) * 4), *out = malloc((size_t)(T * os) * 4);
    uint16_t *out16 = malloc((size_t)(T * os) * 2);
    int32_t *pos = malloc((size_t)T * 4);
    double *ref = malloc((size_t)D * 8), *tol = malloc((size_t)D * 8), worst = 0;
    for (int64_t i = 0; i < T * qs; i++) q[i] = rng_normal() * 2.0f;
    for (int i = 0; i < T; i++) pos[i] = p0 + i;
    float *d_q = dup_dev(q, (size_t)(T * qs) * 4), *d_out = dalloc((size_t)(T * os) * 4);
    uint16_t *d_out16 = f16_out ? dalloc((size_t)(T * os) * 2) : NULL;
    int32_t *d_pos = dup_dev(pos, (size_t)T * 4);
    struct hmoe_err err = {0};
    const enum hmoe_status st =
        kind ? hmoe_cuda_attn_prefill(d_q, qs, T, d_pos, &c.kv, H, scale, d_out, d_out16, os, g_stream, &err)
             : hmoe_cuda_attn_prefill_mma(d_q, qs, T, d_pos, &c.kv, H, scale, warps, hb, d_out, d_out16, os, g_stream, &err);
    if (launched(st, &err, name) && from_dev(out, d_out, (size_t)(T * os) * 4, name) &&
        (!f16_out || from_dev(out16, d_out16, (size_t)(T * os) * 2, name))) {
        int ok = 1;
        for (int tk = 0; tk < T && ok; tk++) {
            if (tk % check_every && tk != T - 1) continue;
            for (int h = 0; h < H && ok; h++) {
                ref_attn_tol(&c, q + tk * qs + (size_t)h * D, h, G, pos[tk], scale, ref, tol);
                const float *got = out + tk * os + (size_t)h * D;
                for (int i = 0; i < D && ok; i++) {
                    const double e = fabs(got[i] - ref[i]);
                    if (!(e <= tol[i])) {
                        snprintf(why, sizeof why, "token %d head %d dim %d: %.9g, want %.9g (tolerance %.3g)", tk, h, i, got[i],
                                 ref[i], tol[i]);
                        ok = 0;
                    }
                    if (e / tol[i] > worst) worst = e / tol[i];
                    if (ok && f16_out && out16[tk * os + h * D + i] != hmoe_f32_to_fp16(got[i])) {
                        snprintf(why, sizeof why, "token %d head %d dim %d: f16 out != fp16(f32 out)", tk, h, i);
                        ok = 0;
                    }
                }
            }
        }
        /* the padding between rows is never written (dalloc fills NaN bytes) */
        for (int tk = 0; tk < T && ok; tk++)
            for (int64_t i = (int64_t)H * D; i < os && ok; i++)
                if (!isnan(out[tk * os + i])) snprintf(why, sizeof why, "token %d: padding written", tk), ok = 0;
        t_check(ok, name, "%s", why);
        if (ok) printf("#   worst error / tolerance %.3f\n", worst);
    }
    free(q), free(out), free(out16), free(pos), free(ref), free(tol);
    gpu_kv_cache_free(&c);
}

static void run_case(int H, int Hkv, int D, enum hmoe_type t, int p0, int T, int f16_out, int warps, int hb, int kind,
                     int check_every) {
    run_case_kv(H, Hkv, D, t, t, p0, T, f16_out, warps, hb, kind, check_every);
}

static void test_mma(int H, int Hkv, int D, enum hmoe_type t, int p0, int T, int f16_out, int warps, int hb) {
    run_case(H, Hkv, D, t, p0, T, f16_out, warps, hb, 0, 1);
}

static void test_bad_args(void) {
    struct hmoe_err err = {0};
    void *d = dalloc(1 << 16);
    struct hmoe_cuda_kv kv = {.type_k = HMOE_TYPE_F16, .type_v = HMOE_TYPE_F16, .k = d, .v = d, .n_ctx = 4, .n_head_kv = 4,
                              .head_dim = 96};
    enum hmoe_status st = hmoe_cuda_attn_prefill_mma(d, 32 * 96, 1, d, &kv, 32, 1.0f, 4, 1, d, NULL, 32 * 96, g_stream, &err);
    t_check(st == HMOE_ERR_ARG, "attn prefill mma refuses head_dim 96", "status %d: %s", st, err.msg);
    kv.head_dim = 128;
    st = hmoe_cuda_attn_prefill_mma(d, 32 * 128, 1, d, &kv, 32, 1.0f, 4, 3, d, NULL, 32 * 128, g_stream, &err);
    t_check(st == HMOE_ERR_ARG, "attn prefill mma refuses 3 heads per block for 8 per kv head", "status %d: %s", st, err.msg);
    st = hmoe_cuda_attn_prefill_mma(d, 32 * 128 + 1, 1, d, &kv, 32, 1.0f, 4, 1, d, NULL, 32 * 128, g_stream, &err);
    t_check(st == HMOE_ERR_ARG, "attn prefill mma refuses an odd q stride", "status %d: %s", st, err.msg);
    kv.type_k = kv.type_v = HMOE_TYPE_F32;
    st = hmoe_cuda_attn_prefill_mma(d, 32 * 128, 1, d, &kv, 32, 1.0f, 4, 1, d, NULL, 32 * 128, g_stream, &err);
    t_check(st == HMOE_ERR_ARG, "attn prefill mma refuses an F32 cache", "status %d: %s", st, err.msg);
    kv.type_k = HMOE_TYPE_Q8_0, kv.type_v = HMOE_TYPE_F16;
    st = hmoe_cuda_attn_prefill_mma(d, 32 * 128, 1, d, &kv, 32, 1.0f, 4, 1, d, NULL, 32 * 128, g_stream, &err);
    t_check(st == HMOE_ERR_ARG, "attn prefill mma refuses a Q8_0 K / F16 V cache", "status %d: %s", st, err.msg);
    gpu_free_all();
}

int main(void) {
    if (!gpu_open_or_skip("gpu_test_attn_prefill")) return t_summary();
    rng_seed(777);
    const enum hmoe_type F16 = HMOE_TYPE_F16, Q8 = HMOE_TYPE_Q8_0;
    if (getenv("HMOE_TEST_QUICK")) { /* compute-sanitizer racecheck: one case per code path */
        test_mma(32, 4, 128, F16, 50, 77, 1, 4, 1);
        test_mma(32, 4, 128, Q8, 7, 61, 0, 8, 8);
        test_mma(16, 2, 256, Q8, 33, 40, 0, 4, 1);
        test_mma(8, 2, 64, Q8, 5, 40, 0, 4, 2);
        gpu_close();
        return t_summary();
    }
    /* Qwen3-30B-A3B shape: 32 q heads over 4 kv heads, head_dim 128 */
    test_mma(32, 4, 128, F16, 0, 1, 0, 4, 1);
    test_mma(32, 4, 128, F16, 0, 200, 1, 4, 1);
    test_mma(32, 4, 128, F16, 50, 77, 0, 4, 1);
    test_mma(32, 4, 128, F16, 64, 64, 0, 4, 1);
    test_mma(32, 4, 128, Q8, 0, 5, 0, 4, 1);
    test_mma(32, 4, 128, Q8, 20, 145, 1, 4, 1);
    test_mma(32, 4, 128, F16, 10, 300, 0, 8, 1);
    test_mma(32, 4, 128, F16, 0, 130, 0, 4, 8);
    test_mma(32, 4, 128, Q8, 7, 61, 0, 8, 8);
    test_mma(32, 4, 128, F16, 3, 70, 1, 4, 2);
    /* Qwen3-235B shape (16 per kv head), Qwen3.5 gated attention shape (head_dim 256), small heads */
    test_mma(64, 4, 128, F16, 3, 70, 0, 4, 1);
    test_mma(16, 2, 256, F16, 0, 100, 1, 4, 1);
    test_mma(16, 2, 256, Q8, 33, 70, 1, 4, 1);
    test_mma(16, 2, 256, F16, 5, 50, 0, 8, 8);
    test_mma(8, 2, 64, F16, 0, 33, 0, 4, 1);
    test_mma(8, 2, 64, Q8, 5, 40, 0, 4, 2);
    /* long batch (many tiles through the double buffer), every 37th token checked */
    run_case(32, 4, 128, F16, 0, 1100, 0, 4, 1, 0, 37);
    run_case(32, 4, 128, Q8, 100, 700, 0, 8, 1, 0, 37);
    /* the dispatcher (AUTO: this kernel on sm_80+, else the CUDA-core one) */
    run_case(32, 4, 128, F16, 30, 90, 1, 4, 1, 1, 1);
    run_case(16, 2, 256, F16, 0, 40, 0, 4, 1, 1, 1);
    /* the dispatcher with the cache types the tensor-core kernel leaves to the CUDA-core one (every
     * other type, mixed K / V types); cache rows past the batch hold NaN there too */
    const enum hmoe_type other[][2] = {{HMOE_TYPE_F32, HMOE_TYPE_F32},   {HMOE_TYPE_BF16, HMOE_TYPE_BF16},
                                       {HMOE_TYPE_Q4_0, HMOE_TYPE_Q4_0}, {HMOE_TYPE_Q4_1, HMOE_TYPE_Q4_1},
                                       {HMOE_TYPE_Q5_0, HMOE_TYPE_Q5_0}, {HMOE_TYPE_Q5_1, HMOE_TYPE_Q5_1},
                                       {HMOE_TYPE_IQ4_NL, HMOE_TYPE_IQ4_NL}, {HMOE_TYPE_Q8_0, HMOE_TYPE_Q4_0},
                                       {HMOE_TYPE_F16, HMOE_TYPE_Q5_1}, {HMOE_TYPE_F16, HMOE_TYPE_Q8_0}};
    for (size_t i = 0; i < sizeof other / sizeof other[0]; i++) {
        run_case_kv(32, 4, 128, other[i][0], other[i][1], 30, 90, 1, 4, 1, 1, 1);
        run_case_kv(16, 2, 256, other[i][0], other[i][1], 0, 40, 0, 4, 1, 1, 1);
        run_case_kv(8, 2, 64, other[i][0], other[i][1], 5, 40, 0, 4, 1, 1, 1);
    }
    test_bad_args();
    gpu_close();
    return t_summary();
}
