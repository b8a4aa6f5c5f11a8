/* deltanet_impl.h — private to src/model: the Gated DeltaNet math of qwen35moe.md §5.2-§5.3
 * on plain f32 arrays (no context, no threads), so a CUDA version can mirror it kernel for
 * kernel and be tested against it.
 *
 * State layout (per recurrent layer, per sequence, f32, zero at sequence start):
 *   conv state  [K-1][conv_dim]  the last K-1 RAW (pre-conv) qkv rows, oldest first
 *   S           [Hv][Dv][Dk]     one Dv x Dk matrix per value head; row r (value index) is
 *                                contiguous over the key index c, as llama.cpp stores it
 * Token vectors: q and k of key head g, v of value head h; value head h reads key head
 * h mod Hk (the GGUF's tiled order, §4.5). The causes of every step are in deltanet.c.
 */
#ifndef HMOE_DELTANET_IMPL_H
#define HMOE_DELTANET_IMPL_H

#include <stddef.h>
#include <stdint.h>

/* Gates of n tokens x Hv heads, in place (row t at t*stride): alpha becomes the log decay
 * softplus(alpha + dt_bias[h]) * a[h] (<= 0, a = -exp(A_log)), beta becomes sigmoid(beta). */
void hmoe_gdn_gates(float *alpha, float *beta, size_t stride, const float *dt_bias, const float *a, int n, int n_v_head);

/* Causal depthwise convolution + SiLU of channels [c0, c1) over n tokens. x: raw inputs,
 * row t at x + t*x_stride (conv_dim channels); state: [K-1][conv_dim], oldest row first;
 * w: [conv_dim][K], tap K-1 multiplies the current token. y[t][c] = silu(sum_j w[c][j] *
 * window[j][c]) with window = the K-1 state rows then x[0..t]. The state's columns
 * [c0, c1) are updated to the last K-1 raw inputs (older state rows survive when n < K-1).
 * y must not alias x. */
void hmoe_gdn_conv(const float *x, size_t x_stride, float *state, const float *w, int K, int64_t conv_dim, int64_t c0,
                   int64_t c1, int n, float *y, size_t y_stride);
/* The same with a per-channel bias added before the SiLU (bias NULL: none), as Mamba-2's
 * conv1d has (nemotron_h_moe.md §4). */
void hmoe_gdn_conv_bias(const float *x, size_t x_stride, float *state, const float *w, const float *bias, int K,
                        int64_t conv_dim, int64_t c0, int64_t c1, int n, float *y, size_t y_stride);

/* v := v / max(||v||_2, eps) * scale over len values (ggml's l2_norm, then the q scale). */
void hmoe_gdn_l2norm(float *v, int len, float eps, float scale);

/* The delta rule of one value head over n tokens, token by token (§5.2): for each t,
 *   S = exp(g_t) S;  u = S k_t;  S += outer(beta_t (v_t - u), k_t);  o_t = S q_t.
 * S: [Dv][Dk] (Dv = Dk = dim). q_t, k_t at q + t*qk_stride, k + t*qk_stride (q already
 * L2-normed and scaled by 1/sqrt(Dk), k L2-normed); v_t at v + t*v_stride; g_t, beta_t at
 * g[t*gb_stride], beta[t*gb_stride]; o_t written to o + t*o_stride. */
void hmoe_gdn_recurrent(float *S, int dim, int n, const float *q, const float *k, size_t qk_stride, const float *v,
                        size_t v_stride, const float *g, const float *beta, size_t gb_stride, float *o,
                        size_t o_stride);

/* The same result computed in chunks of HMOE_GDN_CHUNK tokens (§5.3: forward substitution
 * of (I + A) in place of the inverse, then the chunk's outputs and the next state from
 * matrix products). scratch: hmoe_gdn_chunk_scratch_floats(dim) floats. */
#define HMOE_GDN_CHUNK 64
size_t hmoe_gdn_chunk_scratch_floats(int dim);
void hmoe_gdn_chunked(float *S, int dim, int n, const float *q, const float *k, size_t qk_stride, const float *v,
                      size_t v_stride, const float *g, const float *beta, size_t gb_stride, float *o, size_t o_stride,
                      float *scratch);

/* One head's output through the gated RMSNorm: o = rmsnorm(o) * w * silu(z), over dim
 * values (w has no +1 folded in, §4.1). */
void hmoe_gdn_gated_norm(float *o, const float *z, const float *w, int dim, float eps);

#endif
