/* mamba2_impl.h — private to src/model: the Mamba-2 mixer math of nemotron_h_moe.md §4 on
 * plain f32 arrays (no context, no threads), so that a GPU version can mirror it and be
 * tested against it. The causal conv with state is deltanet_impl.h's (hmoe_gdn_conv_bias).
 *
 * State layout (per Mamba layer and sequence, f32, zero at sequence start):
 *   conv state  [K-1][conv_dim]  the last K-1 RAW (pre-conv) x|B|C rows, oldest first
 *   S           [n_head][P][N]   N fastest (llama.cpp's order)
 * Head h reads B/C group h / (n_head / G): consecutive heads share a group (§4, pitfall 7).
 */
#ifndef HMOE_MAMBA2_IMPL_H
#define HMOE_MAMBA2_IMPL_H

#include <stddef.h>
#include <stdint.h>

/* dt of n tokens x n_head heads in place (row t at t*stride): Δ = softplus(dt + dt_bias[h]). */
void hmoe_mamba2_dt(float *dt, size_t stride, const float *dt_bias, int n, int n_head);

/* One head over n tokens, token by token (§4): with a = exp(Δ_t A),
 *   S = a S + Δ_t outer(x_t, B_t);  y_t = S C_t + D x_t   (the updated state).
 * Runs the AVX-512 or AVX2 step of the cpu.h path when N is a multiple of 16 / 8.
 * S: [P][N]; x_t = x + t*x_stride (P values), B_t / C_t = B + t*bc_stride / C + t*bc_stride
 * (N values), Δ_t = dt[t*dt_stride]; y_t written to y + t*y_stride (P values). */
void hmoe_mamba2_scan(float *S, int P, int N, int n, const float *x, size_t x_stride, const float *B, const float *C,
                      size_t bc_stride, const float *dt, size_t dt_stride, float A, float D, float *y,
                      size_t y_stride);

/* One token of the scan above (decay = exp(Δ A) given), with AVX2 + FMA (N % 8 == 0) or
 * AVX-512 (N % 16 == 0): mamba2_avx2.c, mamba2_avx512.c. */
void hmoe_mamba2_step_avx2(float *S, int P, int N, const float *x, const float *B, const float *C, float delta,
                           float decay, float D, float *y);
void hmoe_mamba2_step_avx512(float *S, int P, int N, const float *x, const float *B, const float *C, float delta,
                             float decay, float D, float *y);

/* The same result in chunks of HMOE_MAMBA2_CHUNK tokens (the state-space-duality form of
 * §4.1, the form a GPU prefill uses; on CPUs it does ~40 % more multiply-adds than the scan
 * and measured 1.9x slower, so the CPU forward pass scans: within a chunk y_t = e^{Λ_t} S0 C_t + Σ_{s<=t} e^{Λ_t-Λ_s} (C_t·B_s) Δ_s x_s + D x_t,
 * and S_end = e^{Λ_L} S0 + Σ_s e^{Λ_L-Λ_s} Δ_s outer(x_s, B_s)), as matrix products.
 * scratch: hmoe_mamba2_chunk_scratch_floats(P, N) floats. */
#define HMOE_MAMBA2_CHUNK 64
size_t hmoe_mamba2_chunk_scratch_floats(int P, int N);
void hmoe_mamba2_chunked(float *S, int P, int N, int n, const float *x, size_t x_stride, const float *B,
                         const float *C, size_t bc_stride, const float *dt, size_t dt_stride, float A, float D, float *y,
                         size_t y_stride, float *scratch);

/* One norm group of n values: y = rmsnorm(y * silu(z)) * w (gate before the norm, §4). */
void hmoe_mamba2_gated_norm(float *y, const float *z, const float *w, int n, float eps);

#endif
