/* attn_wsum_avx2.c — the attention's weighted sum over a transposed V cache with AVX2 + FMA +
 * F16C (cpu.h hmoe_cpu_attn_wsum; attention.c stores f32/f16/bf16 V as [head][Dv][n_ctx]):
 * o[h][e] = Σ_p prob[h][p]·V(e, p). The AVX-512 kernel's scheme (attn_wsum_avx512.c) for 16
 * YMM registers: blocks of 2 rows × 4 heads keep 8 partial sums (8 positions per lane) in
 * registers over all positions, so per 8 positions a block widens 2 V rows once for 4 heads
 * and costs 4 probability loads and 8 FMAs; the 8 sums are reduced together at the end (one
 * vhaddps tree). Probabilities stay binary32 (FMA, exact products of 16-bit V).
 * Rows and heads past the end of a block repeat the last one (results dropped); the last
 * < 8 positions are copied into zero-padded buffers, so no position at or past n_pos is read.
 * Compiled with -mavx2 -mfma -mf16c (Makefile); only called after the run-time check.
 */
#include <immintrin.h>
#include <string.h>

#include "attn_avx2_impl.h"
#include "cpu_impl.h"

static inline __attribute__((always_inline)) void wsum_step(const __m256 v0, const __m256 v1, const __m256 *ph,
                                                            __m256 *acc) {
#pragma GCC unroll 4
    for (int h = 0; h < 4; h++) {
        acc[2 * h + 0] = _mm256_fmadd_ps(v0, ph[h], acc[2 * h + 0]);
        acc[2 * h + 1] = _mm256_fmadd_ps(v1, ph[h], acc[2 * h + 1]);
    }
}

static inline __attribute__((always_inline)) void wsum_block(enum hmoe_type vt, int64_t n_pos, const char *const v[2],
                                                             const float *const p[4], float out[8]) {
    const size_t es = hmoe_type_info[vt].type_size;
    __m256 acc[8];
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++) acc[i] = _mm256_setzero_ps();
    int64_t i0 = 0;
    for (; i0 + 8 <= n_pos; i0 += 8) {
        const __m256 v0 = attn_ld8(vt, v[0] + (size_t)i0 * es), v1 = attn_ld8(vt, v[1] + (size_t)i0 * es);
        __m256 ph[4];
#pragma GCC unroll 4
        for (int h = 0; h < 4; h++) ph[h] = _mm256_loadu_ps(p[h] + i0);
        wsum_step(v0, v1, ph, acc);
    }
    if (i0 < n_pos) { /* the last n < 8 positions, zero-padded */
        const int64_t n = n_pos - i0;
        _Alignas(32) char vb[2][32] = {{0}};
        _Alignas(32) float pb[4][8] = {{0}};
        memcpy(vb[0], v[0] + (size_t)i0 * es, (size_t)n * es);
        memcpy(vb[1], v[1] + (size_t)i0 * es, (size_t)n * es);
        __m256 ph[4];
        for (int h = 0; h < 4; h++) {
            memcpy(pb[h], p[h] + i0, (size_t)n * sizeof(float));
            ph[h] = _mm256_load_ps(pb[h]);
        }
        wsum_step(attn_ld8(vt, vb[0]), attn_ld8(vt, vb[1]), ph, acc);
    }
    _mm256_storeu_ps(out, attn_sum8(acc)); /* out[2h + r] = o[h][r] */
}

void hmoe_cpu_attn_wsum_avx2(enum hmoe_type vt, int64_t n_pos, const void *v, size_t row_bytes, int64_t n_rows,
                             const float *prob, size_t p_stride, int n_h, float *o, size_t o_stride) {
    for (int64_t e0 = 0; e0 < n_rows; e0 += 2) {
        const int nr = n_rows - e0 < 2 ? (int)(n_rows - e0) : 2;
        const char *rows[2];
        for (int r = 0; r < 2; r++) rows[r] = (const char *)v + (size_t)(e0 + (r < nr ? r : nr - 1)) * row_bytes;
        for (int h0 = 0; h0 < n_h; h0 += 4) {
            const int nh = n_h - h0 < 4 ? n_h - h0 : 4;
            const float *ps[4];
            for (int h = 0; h < 4; h++) ps[h] = prob + (size_t)(h0 + (h < nh ? h : nh - 1)) * p_stride;
            float out[8];
            wsum_block(vt, n_pos, rows, ps, out);
            for (int h = 0; h < nh; h++)
                for (int r = 0; r < nr; r++) o[(size_t)(h0 + h) * o_stride + (size_t)(e0 + r)] = out[2 * h + r];
        }
    }
}
