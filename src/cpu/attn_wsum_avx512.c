/* attn_wsum_avx512.c — the attention's weighted sum over a transposed V cache with AVX-512
 * (cpu.h hmoe_cpu_attn_wsum; attention.c stores f32/f16/bf16 V as [head][Dv][n_ctx]):
 * o[h][e] = Σ_p prob[h][p]·V(e, p). Why not the gemm kernels: with Dv = 128 rows of a few
 * dozen positions and 8 heads, a gemm tile call per (row, 8 heads) spends its time in
 * horizontal sums (and 16-bit V needs the probabilities split in two 16-bit halves); this
 * keeps 16 rows' partial sums in 16 registers per head over all positions and reduces them
 * together in one transpose tree, with the probabilities in binary32 (FMA, exact products
 * of the 16-bit values). Tails (positions, rows) by masks.
 */
#include <immintrin.h>

#include "cpu_impl.h"

/* 16 elements of V at p (mask m) widened to binary32. */
static inline __m512 ld_v(enum hmoe_type t, const char *p, __mmask16 m) {
    if (t == HMOE_TYPE_F16) return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
    if (t == HMOE_TYPE_BF16)
        return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p)), 16));
    return _mm512_maskz_loadu_ps(m, p);
}

/* r[i] = sum of the 16 lanes of a[i], i < 16. */
static inline __m512 sum16(const __m512 *a) {
    __m512 b[8], c[4];
    for (int i = 0; i < 8; i++) /* 128-bit lanes: [A0+A2, A1+A3, B0+B2, B1+B3] for a = 2i, b = 2i+1 */
        b[i] = _mm512_add_ps(_mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], 0x44),
                             _mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], 0xEE));
    for (int i = 0; i < 4; i++) /* lane k: four partial sums of a[4i + k] */
        c[i] = _mm512_add_ps(_mm512_shuffle_f32x4(b[2 * i], b[2 * i + 1], 0x88),
                             _mm512_shuffle_f32x4(b[2 * i], b[2 * i + 1], 0xDD));
    /* Inside each 128-bit lane k: element j of the result = total of c[j] lane k = a[4j + k]. */
    const __m512 s01 = _mm512_add_ps(_mm512_unpacklo_ps(c[0], c[1]), _mm512_unpackhi_ps(c[0], c[1]));
    const __m512 s23 = _mm512_add_ps(_mm512_unpacklo_ps(c[2], c[3]), _mm512_unpackhi_ps(c[2], c[3]));
    const __m512d lo = _mm512_unpacklo_pd(_mm512_castps_pd(s01), _mm512_castps_pd(s23));
    const __m512d hi = _mm512_unpackhi_pd(_mm512_castps_pd(s01), _mm512_castps_pd(s23));
    const __m512 r = _mm512_add_ps(_mm512_castpd_ps(lo), _mm512_castpd_ps(hi)); /* lane k, element j: a[4j + k] */
    const __m512i idx = _mm512_set_epi32(15, 11, 7, 3, 14, 10, 6, 2, 13, 9, 5, 1, 12, 8, 4, 0);
    return _mm512_permutexvar_ps(idx, r);
}

/* Positions per block: a 16-row group's V block (16 x 512 x 2 bytes) stays in L1/L2 while
 * every head passes over it; partial sums of blocks are added in binary32. */
#define WSUM_BLOCK 512

void hmoe_cpu_attn_wsum_avx512(enum hmoe_type vt, int64_t n_pos, const void *v, size_t row_bytes, int64_t n_rows,
                               const float *prob, size_t p_stride, int n_h, float *o, size_t o_stride) {
    const size_t es = hmoe_type_info[vt].type_size;
    for (int64_t p0 = 0; p0 < n_pos; p0 += WSUM_BLOCK) {
        const int64_t p1 = p0 + WSUM_BLOCK < n_pos ? p0 + WSUM_BLOCK : n_pos;
        for (int64_t e0 = 0; e0 < n_rows; e0 += 16) {
            const int nr = n_rows - e0 < 16 ? (int)(n_rows - e0) : 16;
            const char *rows[16];
            for (int i = 0; i < 16; i++) rows[i] = (const char *)v + (size_t)(e0 + (i < nr ? i : nr - 1)) * row_bytes;
            const __mmask16 mo = (__mmask16)((1u << nr) - 1);
            for (int h = 0; h < n_h; h++) {
                const float *ph = prob + (size_t)h * p_stride;
                __m512 acc[16];
                for (int i = 0; i < 16; i++) acc[i] = _mm512_setzero_ps();
                for (int64_t p = p0; p < p1; p += 16) {
                    const __mmask16 m = p1 - p >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (p1 - p)) - 1);
                    const __m512 pv = _mm512_maskz_loadu_ps(m, ph + p);
#pragma GCC unroll 16
                    for (int i = 0; i < 16; i++) acc[i] = _mm512_fmadd_ps(ld_v(vt, rows[i] + (size_t)p * es, m), pv, acc[i]);
                }
                float *oh = o + (size_t)h * o_stride + e0;
                __m512 s = sum16(acc);
                if (p0 > 0) s = _mm512_add_ps(s, _mm512_maskz_loadu_ps(mo, oh));
                _mm512_mask_storeu_ps(oh, mo, s);
            }
        }
    }
}
