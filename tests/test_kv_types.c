/* test_kv_types.c — every KV cache type llama.cpp offers (f32, f16, bf16, q8_0, q4_0, q4_1,
 * q5_0, q5_1, iq4_nl) on the CPU path:
 *   1. one attention row through the cache kernels (cpu.h: hmoe_cpu_attn_kv_store, the
 *      query in the K type's partner format, hmoe_cpu_attn_scores, softmax, V read back)
 *      against a float64 attention over the f32 K and V, within a bound derived from the
 *      data: a stored element is off by at most e_K (e_V) and a query element by at most e_q
 *      (per block: symmetric types d = extreme/qmax codes, error <= d with the clamp at the
 *      positive end, iq4_nl 14 d at its widest code gap; affine types d/2 plus the fp16
 *      rounding of the minimum; q8_0/q8_1 queries d/2; f16 2^-11 relative, bf16 2^-8), so a
 *      score moves by at most delta = sum |q| e_K + |k| e_q + e_K e_q; a softmax whose inputs
 *      move by at most scale*delta changes each probability by a factor within
 *      exp(+-2 scale delta), so an output element moves by at most
 *      (exp(2 scale delta_max) - 1) max|V| + max e_V (plus 1e-5 for binary32 sums);
 *   2. the same data read back (dequantized) as the float64 reference's input: the kernels
 *      then differ from it only by binary32 rounding (1e-4 of sum p|V|);
 *   0. each stored element within its bound e above (the quantizers themselves, tight);
 *   3. the tiny F32 fixture model (3 layers, head_dim 32) with each cache type: its logits
 *      against the f16 cache's within limits that scale with the type's worst relative
 *      element error r above (f32/f16 2^-11 ... iq4_nl 14/127): max |d| <= 4 r,
 *      1 - cosine <= 10 r^2, top-1 agreement >= (1 - 3 r) of the positions. Errors of one
 *      cache element enter the logits linearly (max |d|) and squared (cosine); the
 *      constants are this model's gain from cache error to logits with a margin of at
 *      least 1.5x for every type (measured: q8_0 0.016 / 4e-4, q4_0 0.071 / 7.7e-3);
 *   4. every type name parses (-ctk/-ctv spellings) and an unknown one does not.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "hmoe/cpu.h"
#include "hmoe/fp16.h"
#include "model_check.h"

enum { D = 64, NPOS = 333, NH = 3 };

static const struct {
    const char *name;
    enum hmoe_type t;
    double rel; /* worst error of one element relative to its block's extreme (see the header) */
} kv[] = {{"f32", HMOE_TYPE_F32, 0.0},          {"f16", HMOE_TYPE_F16, 1.0 / 2048},
          {"bf16", HMOE_TYPE_BF16, 1.0 / 256},  {"q8_0", HMOE_TYPE_Q8_0, 1.0 / 127},
          {"q4_0", HMOE_TYPE_Q4_0, 1.0 / 8},    {"q4_1", HMOE_TYPE_Q4_1, 1.0 / 15},
          {"q5_0", HMOE_TYPE_Q5_0, 1.0 / 16},   {"q5_1", HMOE_TYPE_Q5_1, 1.0 / 31},
          {"iq4_nl", HMOE_TYPE_IQ4_NL, 14.0 / 127}};

static uint64_t rng = 88172645463325252ull;
static double urand(void) { /* uniform in [-1, 1) */
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) / 4503599627370496.0 - 1.0;
}

/* Per element: the bound on |stored - x| for type t (see the header), from x's block of 32. */
static void elem_bounds(enum hmoe_type t, const float *x, int n, double *e) {
    for (int b = 0; b < n; b += 32) {
        double amax = 0, mn = x[b], mx = x[b];
        for (int j = b; j < b + 32 && j < n; j++) {
            amax = fmax(amax, fabs(x[j]));
            mn = fmin(mn, x[j]);
            mx = fmax(mx, x[j]);
        }
        for (int j = b; j < b + 32 && j < n; j++) {
            double bound;
            switch (t) {
            case HMOE_TYPE_F32: bound = 0; break;
            case HMOE_TYPE_F16: bound = fabs(x[j]) / 2048 + 6e-8; break;
            case HMOE_TYPE_BF16: bound = fabs(x[j]) / 256; break;
            case HMOE_TYPE_Q8_0: /* fp16 d: the code grid is off by <= 127 d 2^-11 */
                bound = amax / 127 * 0.5 + amax / 1024; break;
            case HMOE_TYPE_Q4_0: bound = amax / 8 * 1.01; break;
            case HMOE_TYPE_Q5_0: bound = amax / 16 * 1.01; break;
            case HMOE_TYPE_IQ4_NL: bound = amax * 14 / 127 * 1.01; break;
            case HMOE_TYPE_Q4_1: bound = (mx - mn) / 15 * 0.51 + fabs(mn) / 1024 + (mx - mn) / 1024; break;
            case HMOE_TYPE_Q5_1: bound = (mx - mn) / 31 * 0.51 + fabs(mn) / 1024 + (mx - mn) / 1024; break;
            default: bound = INFINITY;
            }
            e[j] = bound;
        }
    }
}

/* Cases 1 and 2 for one type pair (K type = V type = t). */
static void kernel_case(size_t ti) {
    const enum hmoe_type t = kv[ti].t;
    static float k[NPOS][D], v[NPOS][D], q[NH][D];
    for (int p = 0; p < NPOS; p++)
        for (int d = 0; d < D; d++) {
            k[p][d] = (float)(urand() * (1.0 + 0.5 * sin(p * 0.1 + d)));
            v[p][d] = (float)urand();
        }
    for (int h = 0; h < NH; h++)
        for (int d = 0; d < D; d++) q[h][d] = (float)(3.0 * urand());
    const size_t rb = hmoe_row_bytes(t, D), qb = hmoe_cpu_act_bytes(t, D);
    uint8_t *kc = calloc(NPOS, rb), *vc = calloc(NPOS, rb), *qq = calloc(NH, qb > 0 ? qb : 1);
    float *s = malloc(sizeof(float) * NH * NPOS), vrow[D];
    static double kd[NPOS][D], vd[NPOS][D], qd[NH][D];
    for (int p = 0; p < NPOS; p++) {
        hmoe_cpu_attn_kv_store(t, k[p], kc + p * rb, D);
        hmoe_cpu_attn_kv_store(t, v[p], vc + p * rb, D);
    }
    const bool q_f32 = hmoe_type_info[t].vec_dot_type == HMOE_TYPE_F32;
    for (int h = 0; h < NH; h++) {
        if (q_f32) memcpy(qq + h * qb, q[h], sizeof q[h]);
        else hmoe_cpu_quantize_act(t, q[h], qq + h * qb, D);
    }
    /* what the cache and the converted queries hold, read back with the type table */
    for (int p = 0; p < NPOS; p++) {
        float tk[D], tv[D];
        if (t == HMOE_TYPE_F32) memcpy(tk, kc + p * rb, sizeof tk), memcpy(tv, vc + p * rb, sizeof tv);
        else hmoe_type_info[t].dequant_ref(kc + p * rb, tk, D), hmoe_type_info[t].dequant_ref(vc + p * rb, tv, D);
        for (int d = 0; d < D; d++) kd[p][d] = tk[d], vd[p][d] = tv[d];
    }
    for (int h = 0; h < NH; h++) {
        float tq[D];
        if (q_f32) memcpy(tq, q[h], sizeof tq);
        else hmoe_type_info[hmoe_type_info[t].vec_dot_type].dequant_ref(qq + h * qb, tq, D);
        for (int d = 0; d < D; d++) qd[h][d] = tq[d];
    }
    hmoe_cpu_attn_scores(t, D, kc, rb, NPOS, qq, qb, NH, s, NPOS);
    const float scale = 1.0f / sqrtf((float)D);
    double worst_ratio = 0, worst_exact = 0, worst_store = 0, worst_bound = 0;
    bool ok = true;
    for (int p = 0; p < NPOS; p++) {
        double ek[D], ev[D];
        elem_bounds(t, k[p], D, ek);
        elem_bounds(t, v[p], D, ev);
        for (int d = 0; d < D; d++) {
            worst_store = fmax(worst_store, fabs(kd[p][d] - k[p][d]) / (ek[d] + 1e-30));
            worst_store = fmax(worst_store, fabs(vd[p][d] - v[p][d]) / (ev[d] + 1e-30));
            if (t == HMOE_TYPE_F32 && (kd[p][d] != k[p][d] || vd[p][d] != v[p][d])) worst_store = INFINITY;
        }
    }
    for (int h = 0; h < NH; h++) {
        hmoe_cpu_softmax_scaled(s + h * NPOS, NPOS, scale);
        double o[D] = {0};
        for (int p = 0; p < NPOS; p++) {
            if (t == HMOE_TYPE_F32) memcpy(vrow, vc + p * rb, sizeof vrow);
            else hmoe_type_info[t].dequant_ref(vc + p * rb, vrow, D);
            for (int d = 0; d < D; d++) o[d] += (double)s[h * NPOS + p] * vrow[d];
        }
        /* float64 references: (a) exact f32 K, V, q; (b) the stored values */
        double sa[NPOS], sb[NPOS], ma = -INFINITY, mb = -INFINITY, za = 0, zb = 0, delta = 0, maxv = 0, maxev = 0;
        double eq[D], ek[D], ev[D];
        elem_bounds(hmoe_type_info[t].vec_dot_type == t || q_f32 ? t : HMOE_TYPE_Q8_0, q[h], D, eq);
        if (t == HMOE_TYPE_F32) memset(eq, 0, sizeof eq);
        for (int p = 0; p < NPOS; p++) {
            double a = 0, b = 0, dl = 0;
            elem_bounds(t, k[p], D, ek);
            for (int d = 0; d < D; d++) {
                a += (double)q[h][d] * k[p][d];
                b += qd[h][d] * kd[p][d];
                dl += fabs(q[h][d]) * ek[d] + fabs(k[p][d]) * eq[d] + ek[d] * eq[d];
            }
            sa[p] = a * scale, sb[p] = b * scale;
            ma = fmax(ma, sa[p]), mb = fmax(mb, sb[p]);
            delta = fmax(delta, dl);
            elem_bounds(t, v[p], D, ev);
            for (int d = 0; d < D; d++) maxv = fmax(maxv, fabs(v[p][d])), maxev = fmax(maxev, ev[d]);
        }
        for (int p = 0; p < NPOS; p++) za += exp(sa[p] - ma), zb += exp(sb[p] - mb);
        const double bound = (exp(2.0 * scale * delta) - 1.0) * maxv + maxev + 1e-5;
        worst_bound = fmax(worst_bound, bound);
        for (int d = 0; d < D; d++) {
            double ra = 0, rb2 = 0, mag = 0;
            for (int p = 0; p < NPOS; p++) {
                ra += exp(sa[p] - ma) / za * v[p][d];
                rb2 += exp(sb[p] - mb) / zb * vd[p][d];
                mag += exp(sb[p] - mb) / zb * fabs(vd[p][d]);
            }
            const double ea = fabs(o[d] - ra), eb = fabs(o[d] - rb2);
            worst_ratio = fmax(worst_ratio, ea / bound);
            worst_exact = fmax(worst_exact, eb / (1e-4 * mag + 1e-7));
            if (!(ea <= bound) || !(eb <= 1e-4 * mag + 1e-7)) ok = false;
        }
    }
    char name[160];
    snprintf(name, sizeof name, "%s K/V: every stored element within its bound (worst %.3f of it)", kv[ti].name,
             t == HMOE_TYPE_F32 ? 0.0 : worst_store);
    t_check(t == HMOE_TYPE_F32 ? worst_store == 0 : worst_store <= 1.0, name, "worst %.3f", worst_store);
    snprintf(name, sizeof name, "%s K/V: attention within the derived bound (%.2g) of the f32 reference (worst %.3f of it)",
             kv[ti].name, worst_bound, worst_ratio);
    t_check(ok && worst_ratio <= 1.0, name, "worst error/bound %.3f", worst_ratio);
    snprintf(name, sizeof name, "%s K/V: kernels match float64 attention over the stored values (worst %.3f of 1e-4)",
             kv[ti].name, worst_exact);
    t_check(worst_exact <= 1.0, name, "worst %.3f", worst_exact);
    free(kc);
    free(vc);
    free(qq);
    free(s);
}

static float *model_logits(struct hmoe_model *m, enum hmoe_type t, const int32_t *ids, int n, struct hmoe_err *err) {
    struct hmoe_ctx_params cp;
    hmoe_ctx_params_default(&cp);
    cp.n_ctx = 256;
    cp.type_k = cp.type_v = t;
    cp.n_threads = 2;
    struct hmoe_ctx *c = NULL;
    float *lo = malloc((size_t)n * m->cfg.n_vocab * sizeof(float));
    if (!lo || hmoe_ctx_init(m, &cp, &c, err) || hmoe_ctx_decode(c, ids, n - 7, 0, HMOE_LOGITS_ALL, lo, err) ||
        hmoe_ctx_decode(c, ids + n - 7, 7, n - 7, HMOE_LOGITS_ALL, lo + (size_t)(n - 7) * m->cfg.n_vocab, err)) {
        free(lo);
        lo = NULL;
    }
    hmoe_ctx_free(c);
    return lo;
}

static void model_case(struct hmoe_model *m) {
    enum { N = 120 };
    int32_t ids[N];
    for (int i = 0; i < N; i++) ids[i] = (int32_t)((29 + 977 * i) % 4096);
    const int V = m->cfg.n_vocab;
    struct hmoe_err err = {0};
    float *ref = model_logits(m, HMOE_TYPE_F16, ids, N, &err);
    t_check(ref != NULL, "mini-F32 with an f16 cache runs", "%s", err.msg);
    if (!ref) return;
    for (size_t ti = 0; ti < HMOE_ARRAY_LEN(kv); ti++) {
        if (kv[ti].t == HMOE_TYPE_F16) continue;
        float *lo = model_logits(m, kv[ti].t, ids, N, &err);
        double worst = 0, min_cos = 1;
        int top1 = 0;
        for (int p = 0; lo && p < N; p++) {
            struct mc_row r = mc_compare_row(lo + (size_t)p * V, ref + (size_t)p * V, V);
            worst = fmax(worst, r.max_abs);
            min_cos = fmin(min_cos, r.cos);
            top1 += mc_argmax(lo + (size_t)p * V, V) == mc_argmax(ref + (size_t)p * V, V);
        }
        const double r = fmax(kv[ti].rel, 1.0 / 2048);
        char name[200];
        snprintf(name, sizeof name,
                 "mini-F32 with %s K/V vs f16 K/V (%d positions, two calls): max |d| %.3g <= %.3g, cosine %.6f, top-1 "
                 "%d/%d",
                 kv[ti].name, N, worst, 4 * r, min_cos, top1, N);
        t_check(lo && worst <= 4 * r && 1 - min_cos <= 10 * r * r && top1 >= (1 - 3 * r) * N, name, "%s",
                lo ? "limits: 1 - cosine <= 10 r^2, top-1 >= (1 - 3 r) N" : err.msg);
        free(lo);
    }
    free(ref);
}

int main(void) {
    hmoe_cpu_init();
    for (size_t ti = 0; ti < HMOE_ARRAY_LEN(kv); ti++) {
        enum hmoe_type t;
        char name[96];
        snprintf(name, sizeof name, "-ctk %s parses and attention has its kernels", kv[ti].name);
        t_check(hmoe_kv_type_from_name(kv[ti].name, &t) && t == kv[ti].t && hmoe_cpu_attn_kv_type_ok(t), name, "%s",
                "not parsed or no kernels");
        kernel_case(ti);
    }
    enum hmoe_type t;
    t_check(!hmoe_kv_type_from_name("q4_k", &t) && !hmoe_kv_type_from_name("q4_9", &t),
            "an unknown cache type name is refused", "%s", "accepted");
    char path[8192];
    snprintf(path, sizeof path, "%s", t_shared("fixtures/models/tiny-qwen3moe-A-mini-F32.gguf"));
    struct hmoe_err err = {0};
    struct hmoe_model *m = NULL;
    hmoe_model_load(path, NULL, &m, &err);
    t_check(m != NULL, "mini-F32 model loads", "%s", err.msg);
    if (m) model_case(m);
    hmoe_model_free(m);
    return t_summary();
}
