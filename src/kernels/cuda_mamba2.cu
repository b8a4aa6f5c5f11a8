/* cuda_mamba2.cu — the Mamba-2 mixer kernels of cuda.h (nemotron_h_moe.md §4): the causal
 * depthwise conv with its rolling state, bias and SiLU (parallel over channels and runs of
 * tokens); the selective scan with the f32 state in VRAM (Δ = softplus(dt + dt_bias), decay,
 * input term, C read-out and D skip in one kernel, a sequential scan over the micro-batch inside
 * it, its inputs staged in shared memory by chunks of tokens); the grouped gated RMSNorm; and the
 * squared ReLU of the ungated FFNs. The CPU twins are src/model/mamba2.c and deltanet.c's conv;
 * tests/gpu_test_mamba2.c compares the two.
 */
#include "cuda_impl.cuh"

HMOE_D float m2_silu(float x) { return x / (1.0f + expf(-x)); }

/* ---- causal depthwise conv: thread (channel, run of M2_CONV_RUN tokens), K-tap window in
 * registers. Outputs of different runs are independent (each reads its K-1 inputs before the
 * run, from x or from the state), so a prompt fills the device instead of one sequential pass
 * per channel. Only runs starting at token 0 read the state (K-1 <= M2_CONV_RUN), so their
 * threads alone rewrite it after their outputs: no second launch, no race. ------------------ */

#define M2_MAX_K 16
#define M2_CONV_RUN 16
#define M2_CONV_THREADS 128

__global__ void __launch_bounds__(M2_CONV_THREADS) mamba2_conv_kernel(const float *x, int64_t x_stride, float *state,
                                                                      const float *w, const float *bias, int K,
                                                                      int64_t n_ch, int64_t ntok, float *y,
                                                                      int64_t y_stride) {
    const int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= n_ch) return;
    const int ns = K - 1;
    const int64_t t0 = (int64_t)blockIdx.y * M2_CONV_RUN, t1 = t0 + M2_CONV_RUN < ntok ? t0 + M2_CONV_RUN : ntok;
    float win[M2_MAX_K], wc[M2_MAX_K];
    for (int j = 0; j < K; j++) wc[j] = w[c * K + j];
    for (int j = 0; j < ns; j++) { /* input u = t0 - ns + j: a state row before token 0 */
        const int64_t u = t0 - ns + j;
        win[j] = u < 0 ? state[(u + ns) * n_ch + c] : x[u * x_stride + c];
    }
    const float b = bias ? bias[c] : 0.0f;
    for (int64_t t = t0; t < t1; t++) {
        win[ns] = x[t * x_stride + c];
        float s = 0.0f;
        for (int j = 0; j < K; j++) s += wc[j] * win[j]; /* tap K-1 multiplies the current token */
        y[t * y_stride + c] = m2_silu(bias ? s + b : s);
        for (int j = 0; j < ns; j++) win[j] = win[j + 1];
    }
    if (t0 != 0) return;
    /* the last K-1 raw inputs, oldest first; row j reads state row ntok + j >= j (not yet rewritten) */
    for (int j = 0; j < ns; j++) {
        const int64_t u = ntok - ns + j;
        state[(int64_t)j * n_ch + c] = u < 0 ? state[(u + ns) * n_ch + c] : x[u * x_stride + c];
    }
}

extern "C" enum hmoe_status hmoe_cuda_mamba2_conv(const float *d_x, int64_t x_stride, float *d_state, const float *d_w,
                                                  const float *d_bias, int K, int64_t n_ch, int64_t ntok, float *d_y,
                                                  int64_t y_stride, void *stream, struct hmoe_err *err) {
    HMOE_CUDA_REQUIRE(err, K >= 2 && K <= M2_MAX_K, "mamba2_conv: kernel width %d outside 2..%d", K, M2_MAX_K);
    HMOE_CUDA_REQUIRE(err, n_ch > 0 && ntok >= 0 && x_stride >= n_ch && y_stride >= n_ch && d_x && d_state && d_w && d_y,
                      "mamba2_conv: bad shape or NULL buffer");
    HMOE_CUDA_REQUIRE(err, ntok < ((int64_t)M2_CONV_RUN << 20), "mamba2_conv: %lld tokens in one call", (long long)ntok);
    HMOE_CUDA_REQUIRE(err, (const float *)d_y != d_x, "mamba2_conv: y must not be x (runs read inputs other runs replace)");
    if (ntok == 0) return HMOE_OK;
    const dim3 grid((unsigned)hmoe_cu_div_up(n_ch, M2_CONV_THREADS), (unsigned)hmoe_cu_div_up(ntok, M2_CONV_RUN));
    mamba2_conv_kernel<<<grid, M2_CONV_THREADS, 0, hmoe_cu_stream(stream)>>>(
        d_x, x_stride, d_state, d_w, d_bias, K, n_ch, ntok, d_y, y_stride);
    HMOE_CUDA_LAUNCH_CHECK(err, "mamba2_conv");
    return HMOE_OK;
}

/* ---- selective scan ------------------------------------------------------------------------
 * Rows p of a head's state S_h[p][0..N) are independent (§4: S = a S + Δ x_p B, y_p = S·C + D x_p),
 * so a warp owns M2_ROWS rows and keeps them in registers for the whole micro-batch: lane l
 * holds elements n = l + 32 j. The state is read once and written once per call. The block's
 * warps share one head, hence one B/C group: the block stages a chunk of tokens' B, C, x rows
 * and Δ / decay in shared memory with all its threads' loads in flight at once, then the warps
 * walk the chunk from there (one round trip to L2 per chunk instead of one per token). */

#define M2_WARPS 4
#define M2_ROWS 2
#define M2_BLOCK_ROWS (M2_WARPS * M2_ROWS)

template <int J>
__global__ void __launch_bounds__(M2_WARPS * 32) mamba2_scan_kernel(struct hmoe_cuda_mamba2_scan_args a) {
    constexpr int T = J >= 8 ? 8 : 16; /* tokens per chunk: 2 T 32 J floats of B and C (<= 16 KiB) */
    __shared__ float sB[T][32 * J], sC[T][32 * J], sx[T][M2_BLOCK_ROWS], s_delta[T], s_decay[T];
    __shared__ float s_part[M2_WARPS][M2_ROWS][T][33]; /* lane partial sums of y, padded row */
#define M2_CHUNK_PER (T * 32 * J / (M2_WARPS * 32)) /* B (and C) values per thread per chunk */
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int P = a.P, N = a.N;
    const int blocks_per_head = (P + M2_BLOCK_ROWS - 1) / M2_BLOCK_ROWS;
    const int h = blockIdx.x / blocks_per_head;
    const int pb = (blockIdx.x % blocks_per_head) * M2_BLOCK_ROWS, p0 = pb + warp * M2_ROWS;
    const int g = h / (a.n_head / a.n_group); /* consecutive heads share a B/C group (§4) */
    float *S = a.S + (size_t)h * P * N;
    float s[M2_ROWS][J];
    bool row_ok[M2_ROWS];
#pragma unroll
    for (int i = 0; i < M2_ROWS; i++) {
        row_ok[i] = p0 + i < P;
#pragma unroll
        for (int j = 0; j < J; j++) {
            const int n = lane + 32 * j;
            s[i][j] = row_ok[i] && n < N ? S[(size_t)(p0 + i) * N + n] : 0.0f;
        }
    }
    const float A = a.A[h], D = a.D[h], dtb = a.dt_bias[h];
    const int bcs = (int)a.bc_stride;
    for (int64_t t0 = 0; t0 < a.ntok; t0 += T) {
        const int nt = a.ntok - t0 < T ? (int)(a.ntok - t0) : T;
        __syncthreads(); /* the previous chunk is consumed */
        /* every load of the chunk issued before the first store (a loop that stores as it loads
         * would wait one L2 round trip per element a thread owns) */
        float rb[M2_CHUNK_PER], rc[M2_CHUNK_PER];
        const float *Bc = a.B + t0 * a.bc_stride + (int64_t)g * N, *Cc = a.C + t0 * a.bc_stride + (int64_t)g * N;
#pragma unroll
        for (int q = 0; q < M2_CHUNK_PER; q++) {
            const int i = threadIdx.x + q * M2_WARPS * 32, tt = i / (32 * J), n = i % (32 * J);
            const bool ok = tt < nt && n < N;
            const int e = tt * bcs + n; /* within the chunk: T rows (the launcher checks the range) */
            rb[q] = ok ? Bc[e] : 0.0f;
            rc[q] = ok ? Cc[e] : 0.0f;
        }
#pragma unroll
        for (int q = 0; q < M2_CHUNK_PER; q++) {
            const int i = threadIdx.x + q * M2_WARPS * 32;
            sB[i / (32 * J)][i % (32 * J)] = rb[q];
            sC[i / (32 * J)][i % (32 * J)] = rc[q];
        }
        for (int i = threadIdx.x; i < nt * M2_BLOCK_ROWS; i += blockDim.x) {
            const int tt = i / M2_BLOCK_ROWS, r = i % M2_BLOCK_ROWS;
            sx[tt][r] = pb + r < P ? a.x[(t0 + tt) * a.x_stride + (int64_t)h * P + pb + r] : 0.0f;
        }
        if (threadIdx.x < nt) {
            const float dv = a.dt[(t0 + threadIdx.x) * a.dt_stride + h] + dtb;
            const float delta = dv > 20.0f ? dv : log1pf(expf(dv)); /* llama.cpp's softplus threshold */
            s_delta[threadIdx.x] = delta;
            s_decay[threadIdx.x] = expf(delta * A);
        }
        __syncthreads();
        /* the state chain per token; y's lane partials go to shared memory and are summed per
         * token after the chunk (no warp reduction on the chain's path) */
        for (int tt = 0; tt < nt; tt++) {
            const float delta = s_delta[tt], decay = s_decay[tt];
#pragma unroll
            for (int i = 0; i < M2_ROWS; i++) {
                const float xd = sx[tt][warp * M2_ROWS + i] * delta;
                float acc = 0.0f;
#pragma unroll
                for (int j = 0; j < J; j++) {
                    s[i][j] = s[i][j] * decay + sB[tt][lane + 32 * j] * xd;
                    acc += s[i][j] * sC[tt][lane + 32 * j];
                }
                s_part[warp][i][tt][lane] = acc;
            }
        }
        __syncwarp();
        if (lane < nt) {
#pragma unroll
            for (int i = 0; i < M2_ROWS; i++) {
                if (!row_ok[i]) continue; /* whole warp: p0 is per warp */
                float acc = 0.0f;
                for (int l = 0; l < 32; l++) acc += s_part[warp][i][lane][l];
                a.y[(t0 + lane) * a.y_stride + (int64_t)h * P + p0 + i] = acc + D * sx[lane][warp * M2_ROWS + i];
            }
        }
    }
#pragma unroll
    for (int i = 0; i < M2_ROWS; i++)
#pragma unroll
        for (int j = 0; j < J; j++) {
            const int n = lane + 32 * j;
            if (row_ok[i] && n < N) S[(size_t)(p0 + i) * N + n] = s[i][j];
        }
}

extern "C" enum hmoe_status hmoe_cuda_mamba2_scan(const struct hmoe_cuda_mamba2_scan_args *a, void *stream,
                                                  struct hmoe_err *err) {
    HMOE_CUDA_REQUIRE(err, a->N >= 1 && a->N <= 256 && a->P >= 1 && a->n_head >= 1 && a->n_group >= 1 &&
                               a->n_head % a->n_group == 0,
                      "mamba2_scan: state size %d (1..256), head dim %d, %d heads in %d groups", a->N, a->P, a->n_head,
                      a->n_group);
    HMOE_CUDA_REQUIRE(err, a->S && a->x && a->B && a->C && a->dt && a->dt_bias && a->A && a->D && a->y && a->ntok >= 0,
                      "mamba2_scan: NULL buffer or negative ntok");
    HMOE_CUDA_REQUIRE(err, a->bc_stride >= 0 && a->bc_stride < (1 << 26), "mamba2_scan: B/C row stride %lld too large",
                      (long long)a->bc_stride);
    if (a->ntok == 0) return HMOE_OK;
    const int blocks_per_head = (a->P + M2_BLOCK_ROWS - 1) / M2_BLOCK_ROWS;
    const dim3 grid((unsigned)(a->n_head * blocks_per_head)), block(M2_WARPS * 32);
    cudaStream_t st = hmoe_cu_stream(stream);
    if (a->N <= 32) mamba2_scan_kernel<1><<<grid, block, 0, st>>>(*a);
    else if (a->N <= 64) mamba2_scan_kernel<2><<<grid, block, 0, st>>>(*a);
    else if (a->N <= 128) mamba2_scan_kernel<4><<<grid, block, 0, st>>>(*a);
    else mamba2_scan_kernel<8><<<grid, block, 0, st>>>(*a);
    HMOE_CUDA_LAUNCH_CHECK(err, "mamba2_scan");
    return HMOE_OK;
}

/* ---- grouped gated RMSNorm: one block per (token, group) ----------------------------------- */

__global__ void __launch_bounds__(128) mamba2_gated_norm_kernel(float *y, int64_t y_stride, const float *z,
                                                                int64_t z_stride, const float *w, int n_group, int gs,
                                                                float eps) {
    __shared__ float red[4];
    const int64_t t = blockIdx.x / n_group;
    const int grp = blockIdx.x % n_group;
    float *yr = y + t * y_stride + (int64_t)grp * gs;
    const float *zr = z + t * z_stride + (int64_t)grp * gs, *wr = w + (int64_t)grp * gs;
    float ss = 0.0f;
    for (int i = threadIdx.x; i < gs; i += blockDim.x) {
        const float v = yr[i] * m2_silu(zr[i]); /* gate before the norm (§4, pitfall 8) */
        yr[i] = v;
        ss += v * v;
    }
    ss = hmoe_warp_sum(ss);
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = ss;
    __syncthreads();
    const float scale = 1.0f / sqrtf((red[0] + red[1] + red[2] + red[3]) / (float)gs + eps);
    for (int i = threadIdx.x; i < gs; i += blockDim.x) yr[i] = (yr[i] * scale) * wr[i];
}

extern "C" enum hmoe_status hmoe_cuda_mamba2_gated_norm(float *d_y, int64_t y_stride, const float *d_z, int64_t z_stride,
                                                        const float *d_w, int64_t ntok, int n_group, int group_size,
                                                        float eps, void *stream, struct hmoe_err *err) {
    HMOE_CUDA_REQUIRE(err, ntok >= 0 && n_group >= 1 && group_size >= 1 && y_stride >= (int64_t)n_group * group_size &&
                               d_y && d_z && d_w,
                      "mamba2_gated_norm: bad shape or NULL buffer");
    if (ntok == 0) return HMOE_OK;
    HMOE_CUDA_REQUIRE(err, ntok * n_group < ((int64_t)1 << 31), "mamba2_gated_norm: too many rows");
    mamba2_gated_norm_kernel<<<(unsigned)(ntok * n_group), 128, 0, hmoe_cu_stream(stream)>>>(
        d_y, y_stride, d_z, z_stride, d_w, n_group, group_size, eps);
    HMOE_CUDA_LAUNCH_CHECK(err, "mamba2_gated_norm");
    return HMOE_OK;
}

/* ---- squared ReLU in place ------------------------------------------------------------------ */

__global__ void relu2_kernel(float *x, int64_t stride, int64_t nrows, int64_t n) {
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= nrows * n) return;
    float *p = x + (i / n) * stride + i % n;
    const float v = *p;
    *p = v > 0.0f ? v * v : 0.0f;
}

extern "C" enum hmoe_status hmoe_cuda_relu2(float *d_x, int64_t stride, int64_t nrows, int64_t n, void *stream,
                                            struct hmoe_err *err) {
    HMOE_CUDA_REQUIRE(err, nrows >= 0 && n >= 1 && stride >= n && d_x, "relu2: bad shape or NULL buffer");
    if (nrows == 0) return HMOE_OK;
    relu2_kernel<<<(unsigned)hmoe_cu_div_up(nrows * n, 256), 256, 0, hmoe_cu_stream(stream)>>>(d_x, stride, nrows, n);
    HMOE_CUDA_LAUNCH_CHECK(err, "relu2");
    return HMOE_OK;
}
