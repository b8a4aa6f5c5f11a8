/* attn_wsum_avx512.c — the attention's weighted sum over a transposed V cache with AVX-512
 * (cpu.h hmoe_cpu_attn_wsum; attention.c stores f32/f16/bf16 V as [head][Dv][n_ctx]):
 * o[h][e] = Σ_p prob[h][p]·V(e, p). Blocks of 4 rows × 4 heads keep their 16 partial sums
 * (16 positions per lane) in registers over all positions and reduce them together in one
 * transpose tree (attn_sum16); per 16 positions a block costs 4 V loads, 4 probability loads
 * and 16 FMAs. Why not 16 rows × 1 head (the earlier kernel): its 16 accumulators plus 16
 * row pointers did not fit the register file, every FMA went through the stack, and the V
 * rows were widened again for every head: 11 GMAC/s in L1 against ~40 this way. Probabilities stay binary32 (FMA, exact products of 16-bit V).
 * Rows and heads past the end of a block repeat the last one (results dropped); position
 * tails by masks, so no position at or past n_pos is read.
 */
#include <immintrin.h>

#include "attn_avx512_impl.h"
#include "cpu_impl.h"

static inline __attribute__((always_inline)) void wsum_block(enum hmoe_type vt, int64_t n_pos, const char *const v[4],
                                                             const float *const p[4], float out[16]) {
    const size_t es = hmoe_type_info[vt].type_size;
    __m512 acc[16];
#pragma GCC unroll 16
    for (int i = 0; i < 16; i++) acc[i] = _mm512_setzero_ps();
    int64_t i0 = 0;
    for (; i0 + 16 <= n_pos; i0 += 16) {
        const __m512 v0 = attn_ld16(vt, v[0] + (size_t)i0 * es, 0xFFFF), v1 = attn_ld16(vt, v[1] + (size_t)i0 * es, 0xFFFF);
        const __m512 v2 = attn_ld16(vt, v[2] + (size_t)i0 * es, 0xFFFF), v3 = attn_ld16(vt, v[3] + (size_t)i0 * es, 0xFFFF);
#pragma GCC unroll 4
        for (int h = 0; h < 4; h++) {
            const __m512 ph = _mm512_loadu_ps(p[h] + i0);
            acc[4 * h + 0] = _mm512_fmadd_ps(v0, ph, acc[4 * h + 0]);
            acc[4 * h + 1] = _mm512_fmadd_ps(v1, ph, acc[4 * h + 1]);
            acc[4 * h + 2] = _mm512_fmadd_ps(v2, ph, acc[4 * h + 2]);
            acc[4 * h + 3] = _mm512_fmadd_ps(v3, ph, acc[4 * h + 3]);
        }
    }
    if (i0 < n_pos) {
        const __mmask16 m = (__mmask16)((1u << (n_pos - i0)) - 1);
        const __m512 v0 = attn_ld16(vt, v[0] + (size_t)i0 * es, m), v1 = attn_ld16(vt, v[1] + (size_t)i0 * es, m);
        const __m512 v2 = attn_ld16(vt, v[2] + (size_t)i0 * es, m), v3 = attn_ld16(vt, v[3] + (size_t)i0 * es, m);
#pragma GCC unroll 4
        for (int h = 0; h < 4; h++) {
            const __m512 ph = _mm512_maskz_loadu_ps(m, p[h] + i0);
            acc[4 * h + 0] = _mm512_fmadd_ps(v0, ph, acc[4 * h + 0]);
            acc[4 * h + 1] = _mm512_fmadd_ps(v1, ph, acc[4 * h + 1]);
            acc[4 * h + 2] = _mm512_fmadd_ps(v2, ph, acc[4 * h + 2]);
            acc[4 * h + 3] = _mm512_fmadd_ps(v3, ph, acc[4 * h + 3]);
        }
    }
    _mm512_storeu_ps(out, attn_sum16(acc)); /* out[4h + r] = o[h][r] */
}

void hmoe_cpu_attn_wsum_avx512(enum hmoe_type vt, int64_t n_pos, const void *v, size_t row_bytes, int64_t n_rows,
                               const float *prob, size_t p_stride, int n_h, float *o, size_t o_stride) {
    for (int64_t e0 = 0; e0 < n_rows; e0 += 4) {
        const int nr = n_rows - e0 < 4 ? (int)(n_rows - e0) : 4;
        const char *rows[4];
        for (int r = 0; r < 4; r++) rows[r] = (const char *)v + (size_t)(e0 + (r < nr ? r : nr - 1)) * row_bytes;
        for (int h0 = 0; h0 < n_h; h0 += 4) {
            const int nh = n_h - h0 < 4 ? n_h - h0 : 4;
            const float *ps[4];
            for (int h = 0; h < 4; h++) ps[h] = prob + (size_t)(h0 + (h < nh ? h : nh - 1)) * p_stride;
            float out[16];
            wsum_block(vt, n_pos, rows, ps, out);
            for (int h = 0; h < nh; h++)
                for (int r = 0; r < nr; r++) o[(size_t)(h0 + h) * o_stride + (size_t)(e0 + r)] = out[4 * h + r];
        }
    }
}
