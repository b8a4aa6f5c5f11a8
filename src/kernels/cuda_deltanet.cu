/* cuda_deltanet.cu — the qwen35moe mixer kernels of cuda.h (qwen35moe.md §5.1-§5.3, §7): Gated
 * DeltaNet gates, causal depthwise conv with its rolling state, per-head L2 norm, the delta-rule
 * recurrence with the f32 state in VRAM (a sequential scan over the micro-batch inside the
 * kernel), the gated RMSNorm, and the gated attention / shared-expert helpers (query split,
 * sigmoid output gate, sigmoid-scaled residual add). The CPU twins are src/model/deltanet.c and
 * attention_gated.c; tests/gpu_test_deltanet.c compares the two.
 */
#include "cuda_impl.cuh"

HMOE_D float sigmoid_f(float x) { return 1.0f / (1.0f + expf(-x)); }
HMOE_D float silu_f(float x) { return x / (1.0f + expf(-x)); }

/* ---- gates: alpha -> log decay, beta -> sigmoid(beta) ---------------------------------- */

__global__ void gdn_gates_kernel(float *alpha, float *beta, int64_t stride, const float *dt_bias, const float *a,
                                 int64_t ntok, int n_head) {
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= ntok * n_head) return;
    const int64_t t = i / n_head;
    const int h = (int)(i % n_head);
    const float x = alpha[t * stride + h] + dt_bias[h];
    const float sp = x > 20.0f ? x : log1pf(expf(x)); /* llama.cpp's softplus threshold (§5.2) */
    alpha[t * stride + h] = sp * a[h];
    beta[t * stride + h] = sigmoid_f(beta[t * stride + h]);
}

extern "C" enum hmoe_status hmoe_cuda_gdn_gates(float *d_alpha, float *d_beta, int64_t stride, const float *d_dt_bias,
                                                const float *d_a, int64_t ntok, int n_head, void *stream,
                                                struct hmoe_err *err) {
    HMOE_CUDA_REQUIRE(err, ntok >= 0 && n_head > 0 && stride >= n_head, "gdn_gates: bad shape");
    if (ntok == 0) return HMOE_OK;
    const int64_t total = ntok * n_head;
    gdn_gates_kernel<<<(unsigned)hmoe_cu_div_up(total, 128), 128, 0, hmoe_cu_stream(stream)>>>(
        d_alpha, d_beta, stride, d_dt_bias, d_a, ntok, n_head);
    HMOE_CUDA_LAUNCH_CHECK(err, "gdn_gates");
    return HMOE_OK;
}

/* ---- causal depthwise conv: one thread per channel, the K-tap window in registers ------- */

#define GDN_MAX_K 8

__global__ void gdn_conv_kernel(const float *x, int64_t x_stride, float *state, const float *w, int K, int64_t n_ch,
                                int64_t ntok, float *y, int64_t y_stride) {
    const int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= n_ch) return;
    const int ns = K - 1;
    float win[GDN_MAX_K], wc[GDN_MAX_K];
    for (int j = 0; j < K; j++) wc[j] = w[c * K + j];
    for (int j = 0; j < ns; j++) win[j] = state[(int64_t)j * n_ch + c];
    for (int64_t t = 0; t < ntok; t++) {
        win[ns] = x[t * x_stride + c];
        float s = 0.0f;
        for (int j = 0; j < K; j++) s += wc[j] * win[j]; /* tap K-1 multiplies the current token */
        y[t * y_stride + c] = silu_f(s);
        for (int j = 0; j < ns; j++) win[j] = win[j + 1];
    }
    for (int j = 0; j < ns; j++) state[(int64_t)j * n_ch + c] = win[j]; /* raw inputs (trap 8) */
}

extern "C" enum hmoe_status hmoe_cuda_gdn_conv(const float *d_x, int64_t x_stride, float *d_state, const float *d_w,
                                               int K, int64_t n_ch, int64_t ntok, float *d_y, int64_t y_stride,
                                               void *stream, struct hmoe_err *err) {
    HMOE_CUDA_REQUIRE(err, K >= 2 && K <= GDN_MAX_K, "gdn_conv: kernel width %d outside 2..%d", K, GDN_MAX_K);
    HMOE_CUDA_REQUIRE(err, n_ch > 0 && ntok >= 0 && x_stride >= n_ch && y_stride >= n_ch, "gdn_conv: bad shape");
    if (ntok == 0) return HMOE_OK;
    gdn_conv_kernel<<<(unsigned)hmoe_cu_div_up(n_ch, 128), 128, 0, hmoe_cu_stream(stream)>>>(
        d_x, x_stride, d_state, d_w, K, n_ch, ntok, d_y, y_stride);
    HMOE_CUDA_LAUNCH_CHECK(err, "gdn_conv");
    return HMOE_OK;
}

/* ---- L2 norm per (token, head): one warp per vector ------------------------------------- */

__global__ void gdn_l2norm_kernel(float *x, int64_t stride, int64_t ntok, int n_vec, int len, int n_scaled,
                                  float scale, float eps) {
    const int64_t vec = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const int lane = threadIdx.x % 32;
    if (vec >= ntok * n_vec) return; /* whole warps leave together */
    const int64_t t = vec / n_vec;
    const int j = (int)(vec % n_vec);
    float *v = x + t * stride + (int64_t)j * len;
    float ss = 0.0f;
    for (int i = lane; i < len; i += 32) ss += v[i] * v[i];
    ss = hmoe_warp_sum(ss);
    const float nrm = sqrtf(ss);
    const float s = (j < n_scaled ? scale : 1.0f) / fmaxf(nrm, eps);
    for (int i = lane; i < len; i += 32) v[i] *= s;
}

extern "C" enum hmoe_status hmoe_cuda_gdn_l2norm(float *d_x, int64_t stride, int64_t ntok, int n_vec, int len,
                                                 int n_scaled, float scale, float eps, void *stream,
                                                 struct hmoe_err *err) {
    HMOE_CUDA_REQUIRE(err, ntok >= 0 && n_vec > 0 && len > 0 && stride >= (int64_t)n_vec * len,
                      "gdn_l2norm: bad shape");
    if (ntok == 0) return HMOE_OK;
    const int64_t threads = ntok * n_vec * 32;
    gdn_l2norm_kernel<<<(unsigned)hmoe_cu_div_up(threads, 256), 256, 0, hmoe_cu_stream(stream)>>>(
        d_x, stride, ntok, n_vec, len, n_scaled, scale, eps);
    HMOE_CUDA_LAUNCH_CHECK(err, "gdn_l2norm");
    return HMOE_OK;
}

/* ---- the delta-rule recurrence ------------------------------------------------------------
 * Rows r of a head's state S_h (value index r, key index c) are independent (§5.2 per row:
 * decay, u = row·k, row += beta (v_r - u) k, o_r = row·q), so a warp owns GDN_ROWS rows and keeps
 * them in registers for the whole scan over the micro-batch: lane l holds elements c = l + 32 j.
 * The state is read once and written once per call, whatever the token count. */

#define GDN_WARPS 4
#define GDN_ROWS 2

template <int J>
__global__ void __launch_bounds__(GDN_WARPS * 32) gdn_recurrent_kernel(struct hmoe_cuda_gdn_args a) {
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int dim = a.dim;
    const int blocks_per_head = (dim + GDN_WARPS * GDN_ROWS - 1) / (GDN_WARPS * GDN_ROWS);
    const int h = blockIdx.x / blocks_per_head;
    const int r0 = (blockIdx.x % blocks_per_head) * GDN_WARPS * GDN_ROWS + warp * GDN_ROWS;
    const int g = h % a.n_k_head; /* tiled v-head -> q/k-head mapping (§4.5) */
    float *S = a.S + (size_t)h * dim * dim;
    float s[GDN_ROWS][J];
    bool row_ok[GDN_ROWS];
#pragma unroll
    for (int i = 0; i < GDN_ROWS; i++) {
        row_ok[i] = r0 + i < dim;
#pragma unroll
        for (int j = 0; j < J; j++) {
            const int c = lane + 32 * j;
            s[i][j] = row_ok[i] && c < dim ? S[(size_t)(r0 + i) * dim + c] : 0.0f;
        }
    }
    for (int64_t t = 0; t < a.ntok; t++) {
        const float *q = a.q + t * a.qk_stride + (int64_t)g * dim, *k = a.k + t * a.qk_stride + (int64_t)g * dim;
        const float *v = a.v + t * a.v_stride + (int64_t)h * dim;
        const float decay = expf(a.g[t * a.gb_stride + h]), beta = a.beta[t * a.gb_stride + h];
        float kk[J], qq[J];
#pragma unroll
        for (int j = 0; j < J; j++) {
            const int c = lane + 32 * j;
            kk[j] = c < dim ? k[c] : 0.0f;
            qq[j] = c < dim ? q[c] : 0.0f;
        }
        float u[GDN_ROWS];
#pragma unroll
        for (int i = 0; i < GDN_ROWS; i++) {
            float acc = 0.0f;
#pragma unroll
            for (int j = 0; j < J; j++) {
                s[i][j] *= decay;
                acc += s[i][j] * kk[j];
            }
            u[i] = acc;
        }
#pragma unroll
        for (int i = 0; i < GDN_ROWS; i++) u[i] = hmoe_warp_sum(u[i]);
        float o[GDN_ROWS];
#pragma unroll
        for (int i = 0; i < GDN_ROWS; i++) {
            const float dl = row_ok[i] ? beta * (v[r0 + i] - u[i]) : 0.0f;
            float acc = 0.0f;
#pragma unroll
            for (int j = 0; j < J; j++) {
                s[i][j] += dl * kk[j];
                acc += s[i][j] * qq[j];
            }
            o[i] = acc;
        }
#pragma unroll
        for (int i = 0; i < GDN_ROWS; i++) o[i] = hmoe_warp_sum(o[i]);
        if (lane == 0) {
            float *ot = a.o + t * a.o_stride + (int64_t)h * dim;
#pragma unroll
            for (int i = 0; i < GDN_ROWS; i++)
                if (row_ok[i]) ot[r0 + i] = o[i];
        }
    }
#pragma unroll
    for (int i = 0; i < GDN_ROWS; i++)
#pragma unroll
        for (int j = 0; j < J; j++) {
            const int c = lane + 32 * j;
            if (row_ok[i] && c < dim) S[(size_t)(r0 + i) * dim + c] = s[i][j];
        }
}

extern "C" enum hmoe_status hmoe_cuda_gdn_recurrent(const struct hmoe_cuda_gdn_args *a, void *stream,
                                                    struct hmoe_err *err) {
    HMOE_CUDA_REQUIRE(err, a->dim > 0 && a->dim <= 256, "gdn_recurrent: head dim %d outside 1..256", a->dim);
    HMOE_CUDA_REQUIRE(err, a->n_k_head > 0 && a->n_v_head > 0 && a->ntok >= 0, "gdn_recurrent: bad head counts");
    if (a->ntok == 0) return HMOE_OK;
    const int blocks_per_head = (a->dim + GDN_WARPS * GDN_ROWS - 1) / (GDN_WARPS * GDN_ROWS);
    const unsigned grid = (unsigned)(blocks_per_head * a->n_v_head);
    cudaStream_t s = hmoe_cu_stream(stream);
    if (a->dim <= 32) gdn_recurrent_kernel<1><<<grid, GDN_WARPS * 32, 0, s>>>(*a);
    else if (a->dim <= 64) gdn_recurrent_kernel<2><<<grid, GDN_WARPS * 32, 0, s>>>(*a);
    else if (a->dim <= 128) gdn_recurrent_kernel<4><<<grid, GDN_WARPS * 32, 0, s>>>(*a);
    else gdn_recurrent_kernel<8><<<grid, GDN_WARPS * 32, 0, s>>>(*a);
    HMOE_CUDA_LAUNCH_CHECK(err, "gdn_recurrent");
    return HMOE_OK;
}

/* ---- gated RMSNorm: o = RMSNorm(o) * w * silu(z), one warp per (token, head) ------------- */

__global__ void gdn_gated_norm_kernel(float *o, int64_t o_stride, const float *z, int64_t z_stride, const float *w,
                                      int64_t ntok, int n_head, int dim, float eps) {
    const int64_t vec = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const int lane = threadIdx.x % 32;
    if (vec >= ntok * n_head) return;
    const int64_t t = vec / n_head;
    const int h = (int)(vec % n_head);
    float *ov = o + t * o_stride + (int64_t)h * dim;
    const float *zv = z + t * z_stride + (int64_t)h * dim;
    float ss = 0.0f;
    for (int i = lane; i < dim; i += 32) ss += ov[i] * ov[i];
    ss = hmoe_warp_sum(ss);
    const float scale = 1.0f / sqrtf(ss / (float)dim + eps);
    for (int i = lane; i < dim; i += 32) ov[i] = ov[i] * scale * w[i] * silu_f(zv[i]);
}

extern "C" enum hmoe_status hmoe_cuda_gdn_gated_norm(float *d_o, int64_t o_stride, const float *d_z, int64_t z_stride,
                                                     const float *d_w, int64_t ntok, int n_head, int dim, float eps,
                                                     void *stream, struct hmoe_err *err) {
    HMOE_CUDA_REQUIRE(err, ntok >= 0 && n_head > 0 && dim > 0 && o_stride >= (int64_t)n_head * dim &&
                               z_stride >= (int64_t)n_head * dim,
                      "gdn_gated_norm: bad shape");
    if (ntok == 0) return HMOE_OK;
    const int64_t threads = ntok * n_head * 32;
    gdn_gated_norm_kernel<<<(unsigned)hmoe_cu_div_up(threads, 256), 256, 0, hmoe_cu_stream(stream)>>>(
        d_o, o_stride, d_z, z_stride, d_w, ntok, n_head, dim, eps);
    HMOE_CUDA_LAUNCH_CHECK(err, "gdn_gated_norm");
    return HMOE_OK;
}

/* ---- gated attention: split [query | gate] per head; sigmoid output gate ----------------- */

__global__ void qg_split_kernel(const float *qg, int64_t qg_stride, int64_t ntok, int n_head, int head_dim, float *q,
                                int64_t q_stride) {
    const int64_t nq = (int64_t)n_head * head_dim;
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= ntok * nq) return;
    const int64_t t = i / nq, e = i % nq, j = e / head_dim, c = e % head_dim;
    q[t * q_stride + e] = qg[t * qg_stride + j * 2 * head_dim + c];
}

extern "C" enum hmoe_status hmoe_cuda_qg_split(const float *d_qg, int64_t qg_stride, int64_t ntok, int n_head,
                                               int head_dim, float *d_q, int64_t q_stride, void *stream,
                                               struct hmoe_err *err) {
    const int64_t nq = (int64_t)n_head * head_dim;
    HMOE_CUDA_REQUIRE(err, ntok >= 0 && nq > 0 && qg_stride >= 2 * nq && q_stride >= nq, "qg_split: bad shape");
    if (ntok == 0) return HMOE_OK;
    qg_split_kernel<<<(unsigned)hmoe_cu_div_up(ntok * nq, 256), 256, 0, hmoe_cu_stream(stream)>>>(
        d_qg, qg_stride, ntok, n_head, head_dim, d_q, q_stride);
    HMOE_CUDA_LAUNCH_CHECK(err, "qg_split");
    return HMOE_OK;
}

__global__ void sigmoid_gate_kernel(float *o, int64_t o_stride, const float *qg, int64_t qg_stride, int64_t ntok,
                                    int n_head, int head_dim) {
    const int64_t nq = (int64_t)n_head * head_dim;
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= ntok * nq) return;
    const int64_t t = i / nq, e = i % nq, j = e / head_dim, c = e % head_dim;
    o[t * o_stride + e] *= sigmoid_f(qg[t * qg_stride + j * 2 * head_dim + head_dim + c]);
}

extern "C" enum hmoe_status hmoe_cuda_sigmoid_gate(float *d_o, int64_t o_stride, const float *d_qg, int64_t qg_stride,
                                                   int64_t ntok, int n_head, int head_dim, void *stream,
                                                   struct hmoe_err *err) {
    const int64_t nq = (int64_t)n_head * head_dim;
    HMOE_CUDA_REQUIRE(err, ntok >= 0 && nq > 0 && qg_stride >= 2 * nq && o_stride >= nq, "sigmoid_gate: bad shape");
    if (ntok == 0) return HMOE_OK;
    sigmoid_gate_kernel<<<(unsigned)hmoe_cu_div_up(ntok * nq, 256), 256, 0, hmoe_cu_stream(stream)>>>(
        d_o, o_stride, d_qg, qg_stride, ntok, n_head, head_dim);
    HMOE_CUDA_LAUNCH_CHECK(err, "sigmoid_gate");
    return HMOE_OK;
}

/* ---- shared expert: x += sigmoid(gamma_t) * s ------------------------------------------- */

__global__ void gated_add_kernel(float *x, int64_t x_stride, const float *s, int64_t s_stride, const float *gamma,
                                 int64_t gamma_stride, int64_t ntok, int64_t n) {
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= ntok * n) return;
    const int64_t t = i / n, c = i % n;
    x[t * x_stride + c] += sigmoid_f(gamma[t * gamma_stride]) * s[t * s_stride + c];
}

extern "C" enum hmoe_status hmoe_cuda_gated_add(float *d_x, int64_t x_stride, const float *d_s, int64_t s_stride,
                                                const float *d_gamma, int64_t gamma_stride, int64_t ntok, int64_t n,
                                                void *stream, struct hmoe_err *err) {
    HMOE_CUDA_REQUIRE(err, ntok >= 0 && n > 0 && x_stride >= n && s_stride >= n && gamma_stride >= 1,
                      "gated_add: bad shape");
    if (ntok == 0) return HMOE_OK;
    gated_add_kernel<<<(unsigned)hmoe_cu_div_up(ntok * n, 256), 256, 0, hmoe_cu_stream(stream)>>>(
        d_x, x_stride, d_s, s_stride, d_gamma, gamma_stride, ntok, n);
    HMOE_CUDA_LAUNCH_CHECK(err, "gated_add");
    return HMOE_OK;
}
