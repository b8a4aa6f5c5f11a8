/* mamba2.c — Mamba-2 mixer math (nemotron_h_moe.md §4 decode step, §4.1 chunked prefill):
 * Δ, the selective scan of one head token by token (its per-token step has AVX2 and
 * AVX-512 versions picked at run time: mamba2_avx2.c, mamba2_avx512.c; the scalar loop here
 * is their reference) and its chunked state-space-duality equivalent, the grouped gated
 * RMSNorm. Plain f32 loops on the layouts of mamba2_impl.h. The norm's sum of squares is in
 * double, as ggml's CPU RMSNorm.
 */
#include <math.h>
#include <string.h>

#include "hmoe/cpu.h"
#include "model/mamba2_impl.h"

/* ln(1 + e^x); llama.cpp returns x itself above 20. */
static float softplusf(float x) { return x > 20.0f ? x : log1pf(expf(x)); }
static float siluf(float x) { return x / (1.0f + expf(-x)); }

void hmoe_mamba2_dt(float *dt, size_t stride, const float *dt_bias, int n, int n_head) {
    for (int t = 0; t < n; t++)
        for (int h = 0; h < n_head; h++) dt[(size_t)t * stride + h] = softplusf(dt[(size_t)t * stride + h] + dt_bias[h]);
}

void hmoe_mamba2_scan(float *S, int P, int N, int n, const float *x, size_t x_stride, const float *B, const float *C,
                      size_t bc_stride, const float *dt, size_t dt_stride, float A, float D, float *y,
                      size_t y_stride) {
    const enum hmoe_cpu_path path = hmoe_cpu_path();
    for (int t = 0; t < n; t++) {
        const float delta = dt[(size_t)t * dt_stride], decay = expf(delta * A);
        const float *xt = x + (size_t)t * x_stride, *bt = B + (size_t)t * bc_stride, *ct = C + (size_t)t * bc_stride;
        float *yt = y + (size_t)t * y_stride;
        if (path == HMOE_CPU_AVX512 && N % 16 == 0) {
            hmoe_mamba2_step_avx512(S, P, N, xt, bt, ct, delta, decay, D, yt);
            continue;
        }
        if (path >= HMOE_CPU_AVX2 && N % 8 == 0) {
            hmoe_mamba2_step_avx2(S, P, N, xt, bt, ct, delta, decay, D, yt);
            continue;
        }
        /* Each state row p is decayed, written and read in one pass while it is in L1. */
        for (int p = 0; p < P; p++) {
            float *row = S + (size_t)p * N;
            const float xd = xt[p] * delta;
            float acc = 0.0f;
            for (int j = 0; j < N; j++) {
                row[j] = row[j] * decay + bt[j] * xd;
                acc += row[j] * ct[j];
            }
            yt[p] = acc + D * xt[p];
        }
    }
}

size_t hmoe_mamba2_chunk_scratch_floats(int P, int N) {
    (void)P;
    (void)N;
    const size_t L = HMOE_MAMBA2_CHUNK;
    return L * L + 2 * L; /* the masked, decayed C·B matrix; cumulative log decays; Δ-weighted decays */
}

/* One chunk of L <= HMOE_MAMBA2_CHUNK tokens. */
static void chunk(float *S, int P, int N, int L, const float *x, size_t x_stride, const float *B, const float *C,
                  size_t bc_stride, const float *dt, size_t dt_stride, float A, float D, float *y, size_t y_stride,
                  float *scratch) {
    float *M = scratch, *cum = scratch + (size_t)HMOE_MAMBA2_CHUNK * HMOE_MAMBA2_CHUNK, *wend = cum + HMOE_MAMBA2_CHUNK;
    /* Λ_t = Σ_{j<=t} Δ_j A: the log decay from the chunk's start through token t. */
    float run = 0.0f;
    for (int t = 0; t < L; t++) {
        run += dt[(size_t)t * dt_stride] * A;
        cum[t] = run;
    }
    /* M[t][s] = e^{Λ_t - Λ_s} (C_t · B_s) Δ_s for s <= t (the causal mask). */
    for (int t = 0; t < L; t++) {
        const float *ct = C + (size_t)t * bc_stride;
        for (int s = 0; s <= t; s++) {
            const float *bs = B + (size_t)s * bc_stride;
            float dot = 0.0f;
            for (int j = 0; j < N; j++) dot += ct[j] * bs[j];
            M[(size_t)t * L + s] = expf(cum[t] - cum[s]) * dot * dt[(size_t)s * dt_stride];
        }
    }
    /* y_t = e^{Λ_t} (S0 C_t) + Σ_s M[t][s] x_s + D x_t: the entering state's share, then the
     * chunk's own tokens. */
    for (int t = 0; t < L; t++) {
        const float *ct = C + (size_t)t * bc_stride, *xt = x + (size_t)t * x_stride;
        const float e0 = expf(cum[t]);
        float *yt = y + (size_t)t * y_stride;
        for (int p = 0; p < P; p++) {
            const float *row = S + (size_t)p * N;
            float acc = 0.0f;
            for (int j = 0; j < N; j++) acc += row[j] * ct[j];
            yt[p] = e0 * acc + D * xt[p];
        }
        for (int s = 0; s <= t; s++) {
            const float m = M[(size_t)t * L + s];
            const float *xs = x + (size_t)s * x_stride;
            for (int p = 0; p < P; p++) yt[p] += m * xs[p];
        }
    }
    /* S_end = e^{Λ_last} S0 + Σ_s e^{Λ_last - Λ_s} Δ_s outer(x_s, B_s). */
    const float last = cum[L - 1], e_last = expf(last);
    for (int s = 0; s < L; s++) wend[s] = expf(last - cum[s]) * dt[(size_t)s * dt_stride];
    for (int p = 0; p < P; p++) {
        float *row = S + (size_t)p * N;
        for (int j = 0; j < N; j++) row[j] *= e_last;
        for (int s = 0; s < L; s++) {
            const float coef = wend[s] * x[(size_t)s * x_stride + p];
            const float *bs = B + (size_t)s * bc_stride;
            for (int j = 0; j < N; j++) row[j] += coef * bs[j];
        }
    }
}

void hmoe_mamba2_chunked(float *S, int P, int N, int n, const float *x, size_t x_stride, const float *B,
                         const float *C, size_t bc_stride, const float *dt, size_t dt_stride, float A, float D, float *y,
                         size_t y_stride, float *scratch) {
    for (int t0 = 0; t0 < n; t0 += HMOE_MAMBA2_CHUNK) {
        const int L = n - t0 < HMOE_MAMBA2_CHUNK ? n - t0 : HMOE_MAMBA2_CHUNK;
        chunk(S, P, N, L, x + (size_t)t0 * x_stride, x_stride, B + (size_t)t0 * bc_stride, C + (size_t)t0 * bc_stride,
              bc_stride, dt + (size_t)t0 * dt_stride, dt_stride, A, D, y + (size_t)t0 * y_stride, y_stride, scratch);
    }
}

void hmoe_mamba2_gated_norm(float *y, const float *z, const float *w, int n, float eps) {
    double sum = 0.0;
    for (int i = 0; i < n; i++) {
        y[i] *= siluf(z[i]);
        sum += (double)y[i] * (double)y[i];
    }
    const float scale = 1.0f / sqrtf((float)(sum / (double)n) + eps);
    for (int i = 0; i < n; i++) y[i] = (y[i] * scale) * w[i];
}
