/* deltanet.c — Gated DeltaNet math (qwen35moe.md §5.2 decode step, §5.3 chunked prefill):
 * gates, causal conv with state, L2 norm, the delta-rule recurrence per value head and its
 * chunked equivalent, the gated RMSNorm. Plain f32 loops on the layouts of deltanet_impl.h;
 * the recurrence's hot loop has an AVX-512 version (deltanet_avx512.c) picked at run time.
 * Reductions run in f32 except the norms' sums of squares (double, as ggml's CPU norms).
 */
#include <math.h>
#include <string.h>

#include "hmoe/cpu.h"
#include "model/deltanet_impl.h"

static float sigmoidf(float x) { return 1.0f / (1.0f + expf(-x)); }
static float siluf(float x) { return x / (1.0f + expf(-x)); }
/* ln(1 + e^x); llama.cpp returns x itself above 20 (§5.2). */
static float softplusf(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

void hmoe_gdn_gates(float *alpha, float *beta, size_t stride, const float *dt_bias, const float *a, int n,
                    int n_v_head) {
    for (int t = 0; t < n; t++) {
        float *al = alpha + (size_t)t * stride, *be = beta + (size_t)t * stride;
        for (int h = 0; h < n_v_head; h++) {
            al[h] = softplusf(al[h] + dt_bias[h]) * a[h];
            be[h] = sigmoidf(be[h]);
        }
    }
}

void hmoe_gdn_conv(const float *x, size_t x_stride, float *state, const float *w, int K, int64_t conv_dim, int64_t c0,
                   int64_t c1, int n, float *y, size_t y_stride) {
    hmoe_gdn_conv_bias(x, x_stride, state, w, NULL, K, conv_dim, c0, c1, n, y, y_stride);
}

void hmoe_gdn_conv_bias(const float *x, size_t x_stride, float *state, const float *w, const float *bias, int K,
                        int64_t conv_dim, int64_t c0, int64_t c1, int n, float *y, size_t y_stride) {
    const int ns = K - 1;
    for (int64_t c = c0; c < c1; c++) {
        const float *wc = w + c * K;
        const float bc = bias ? bias[c] : 0.0f;
        /* The window of K raw inputs ending at token t: state rows first, then x rows. */
        for (int t = 0; t < n; t++) {
            float s = 0.0f;
            for (int j = 0; j < K; j++) {
                const int src = t + j; /* index into [state (ns rows) | x (n rows)] */
                const float xv = src < ns ? state[(size_t)src * conv_dim + c] : x[(size_t)(src - ns) * x_stride + c];
                s += wc[j] * xv;
            }
            y[(size_t)t * y_stride + c] = siluf(bias ? s + bc : s);
        }
        /* New state: the last ns rows of [state | x]; with n < ns the newest old rows move up. */
        for (int r = 0; r < ns; r++) {
            const int src = n + r;
            state[(size_t)r * conv_dim + c] =
                src < ns ? state[(size_t)src * conv_dim + c] : x[(size_t)(src - ns) * x_stride + c];
        }
    }
}

void hmoe_gdn_l2norm(float *v, int len, float eps, float scale) {
    double sum = 0.0;
    for (int i = 0; i < len; i++) sum += (double)v[i] * (double)v[i];
    const float nrm = sqrtf((float)sum);
    const float s = scale / (nrm > eps ? nrm : eps);
    for (int i = 0; i < len; i++) v[i] *= s;
}

void hmoe_gdn_gated_norm(float *o, const float *z, const float *w, int dim, float eps) {
    double sum = 0.0;
    for (int i = 0; i < dim; i++) sum += (double)o[i] * (double)o[i];
    const float scale = 1.0f / sqrtf((float)(sum / (double)dim) + eps);
    for (int i = 0; i < dim; i++) o[i] = (o[i] * scale) * w[i] * siluf(z[i]);
}

/* AVX-512 version of one token's step (deltanet_avx512.c); dim must be a multiple of 16. */
void hmoe_gdn_step_avx512(float *S, int dim, const float *q, const float *k, const float *v, float decay, float beta,
                          float *o);

/* One token: every row r of S is independent, so decay, read, write and output read happen
 * in one pass over the row while it is in registers/L1 (the order of §5.2 per row). */
static void step_ref(float *S, int dim, const float *q, const float *k, const float *v, float decay, float beta,
                     float *o) {
    for (int r = 0; r < dim; r++) {
        float *row = S + (size_t)r * dim;
        float u = 0.0f;
        for (int c = 0; c < dim; c++) {
            row[c] *= decay;
            u += row[c] * k[c];
        }
        const float dl = beta * (v[r] - u);
        float acc = 0.0f;
        for (int c = 0; c < dim; c++) {
            row[c] += dl * k[c];
            acc += row[c] * q[c];
        }
        o[r] = acc;
    }
}

void hmoe_gdn_recurrent(float *S, int dim, int n, const float *q, const float *k, size_t qk_stride, const float *v,
                        size_t v_stride, const float *g, const float *beta, size_t gb_stride, float *o,
                        size_t o_stride) {
    const bool fast = hmoe_cpu_path() == HMOE_CPU_AVX512 && dim % 16 == 0;
    for (int t = 0; t < n; t++) {
        const float decay = expf(g[(size_t)t * gb_stride]), b = beta[(size_t)t * gb_stride];
        const float *qt = q + (size_t)t * qk_stride, *kt = k + (size_t)t * qk_stride, *vt = v + (size_t)t * v_stride;
        float *ot = o + (size_t)t * o_stride;
        if (fast) hmoe_gdn_step_avx512(S, dim, qt, kt, vt, decay, b, ot);
        else step_ref(S, dim, qt, kt, vt, decay, b, ot);
    }
}

/* ---- chunked form (§5.3) -------------------------------------------------------------- */

size_t hmoe_gdn_chunk_scratch_floats(int dim) {
    const size_t C = HMOE_GDN_CHUNK;
    /* A [C][C], QK [C][C], W [C][dim], U [C][dim], G [C], SW scratch [dim] */
    return 2 * C * C + 2 * C * (size_t)dim + C + (size_t)dim;
}

static float dotf(const float *a, const float *b, int n) {
    float s = 0.0f;
    for (int i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

/* One chunk of nc <= C tokens starting at the given pointers. */
static void chunk(float *S, int dim, int nc, const float *q, const float *k, size_t qk_stride, const float *v,
                  size_t v_stride, const float *g, const float *beta, size_t gb_stride, float *o, size_t o_stride,
                  float *scratch) {
    const int C = HMOE_GDN_CHUNK;
    float *A = scratch, *QK = A + C * C, *W = QK + C * C, *U = W + (size_t)C * dim, *G = U + (size_t)C * dim;
    float *sw = G + C;
#define Q(t) (q + (size_t)(t) * qk_stride)
#define KK(t) (k + (size_t)(t) * qk_stride)
#define V(t) (v + (size_t)(t) * v_stride)
    /* Cumulative log decay inside the chunk: G_t = g_0 + ... + g_t (<= 0, decreasing). */
    float acc = 0.0f;
    for (int t = 0; t < nc; t++) G[t] = acc += g[(size_t)t * gb_stride];
    /* A[t][c] = beta_t exp(G_t - G_c) (k_t . k_c) for c < t; QK[t][c] = exp(G_t - G_c) (q_t . k_c), c <= t. */
    for (int t = 0; t < nc; t++) {
        const float bt = beta[(size_t)t * gb_stride];
        for (int c = 0; c < t; c++) A[t * C + c] = bt * expf(G[t] - G[c]) * dotf(KK(t), KK(c), dim);
        for (int c = 0; c <= t; c++) QK[t * C + c] = expf(G[t] - G[c]) * dotf(Q(t), KK(c), dim);
    }
    /* (I + A) U = beta V and (I + A) W = beta exp(G) K by forward substitution (A is strictly
     * lower triangular, so T = (I + A)^-1 is never formed). */
    for (int t = 0; t < nc; t++) {
        const float bt = beta[(size_t)t * gb_stride], et = expf(G[t]);
        float *ut = U + (size_t)t * dim, *wt = W + (size_t)t * dim;
        for (int i = 0; i < dim; i++) {
            ut[i] = bt * V(t)[i];
            wt[i] = bt * et * KK(t)[i];
        }
        for (int c = 0; c < t; c++) {
            const float a = A[t * C + c];
            const float *uc = U + (size_t)c * dim, *wc = W + (size_t)c * dim;
            for (int i = 0; i < dim; i++) {
                ut[i] -= a * uc[i];
                wt[i] -= a * wc[i];
            }
        }
    }
    /* u'_t = U_t - S W_t (value-dim vectors; S is [dim value rows][dim key cols]). */
    for (int t = 0; t < nc; t++) {
        float *ut = U + (size_t)t * dim;
        const float *wt = W + (size_t)t * dim;
        for (int r = 0; r < dim; r++) sw[r] = dotf(S + (size_t)r * dim, wt, dim);
        for (int r = 0; r < dim; r++) ut[r] -= sw[r];
    }
    /* o_t = exp(G_t) S q_t + sum_{c<=t} QK[t][c] u'_c, with the state entering the chunk. */
    for (int t = 0; t < nc; t++) {
        float *ot = o + (size_t)t * o_stride;
        const float et = expf(G[t]);
        for (int r = 0; r < dim; r++) ot[r] = et * dotf(S + (size_t)r * dim, Q(t), dim);
        for (int c = 0; c <= t; c++) {
            const float a = QK[t * C + c];
            const float *uc = U + (size_t)c * dim;
            for (int r = 0; r < dim; r++) ot[r] += a * uc[r];
        }
    }
    /* S_next = exp(G_last) S + sum_c exp(G_last - G_c) outer(u'_c, k_c). */
    const float Gl = G[nc - 1], el = expf(Gl);
    for (int c = 0; c < nc; c++) G[c] = expf(Gl - G[c]);
    for (int r = 0; r < dim; r++) {
        float *row = S + (size_t)r * dim;
        for (int i = 0; i < dim; i++) row[i] *= el;
        for (int c = 0; c < nc; c++) {
            const float a = G[c] * U[(size_t)c * dim + r];
            const float *kc = KK(c);
            for (int i = 0; i < dim; i++) row[i] += a * kc[i];
        }
    }
#undef Q
#undef KK
#undef V
}

void hmoe_gdn_chunked(float *S, int dim, int n, const float *q, const float *k, size_t qk_stride, const float *v,
                      size_t v_stride, const float *g, const float *beta, size_t gb_stride, float *o, size_t o_stride,
                      float *scratch) {
    for (int t0 = 0; t0 < n; t0 += HMOE_GDN_CHUNK) {
        const int nc = n - t0 < HMOE_GDN_CHUNK ? n - t0 : HMOE_GDN_CHUNK;
        chunk(S, dim, nc, q + (size_t)t0 * qk_stride, k + (size_t)t0 * qk_stride, qk_stride, v + (size_t)t0 * v_stride,
              v_stride, g + (size_t)t0 * gb_stride, beta + (size_t)t0 * gb_stride, gb_stride, o + (size_t)t0 * o_stride,
              o_stride, scratch);
    }
}
