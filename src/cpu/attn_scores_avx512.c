/* attn_scores_avx512.c — the attention's scores q·k over the K cache with AVX-512 (cpu.h
 * hmoe_cpu_attn_scores) for F32, F16 and BF16 caches: s[h][p] = Σ_d K(p, d)·q_h(d).
 * The queries (already in the cache type, as llama.cpp converts them) are widened to binary32
 * once per call; blocks of 2 positions × 8 heads keep their 16 partial sums in registers over
 * head_dim and reduce them together in one transpose tree (attn_sum16), so a position costs
 * its K row loaded once for all heads. Why not the gemm tiles: they widened every query again
 * for every position and reduced each (position, head) sum on its own: 12 GMAC/s in L1,
 * against ~40 here. Heads and positions past a block's end repeat
 * the last one (results dropped); head_dim tails by masks.
 */
#include <immintrin.h>

#include "attn_avx512_impl.h"
#include "cpu_impl.h"

void hmoe_cpu_attn_scores_avx512(enum hmoe_type kt, int64_t D, const void *k, size_t k_stride, int64_t n_pos,
                                 const void *q, size_t q_stride, int n_h, float *s, size_t s_stride) {
    const size_t es = hmoe_type_info[kt].type_size;
    const int64_t nc = (D + 15) / 16; /* 16-element chunks of a row */
    _Alignas(64) float qf[8 * HMOE_CPU_ATTN_MAX_DIM];
    for (int h0 = 0; h0 < n_h; h0 += 8) {
        const int nh = n_h - h0 < 8 ? n_h - h0 : 8;
        for (int h = 0; h < 8; h++) {
            const char *qh = (const char *)q + (size_t)(h0 + (h < nh ? h : nh - 1)) * q_stride;
            for (int64_t c = 0; c < nc; c++) {
                const __mmask16 m = D - 16 * c >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (D - 16 * c)) - 1);
                _mm512_store_ps(qf + (size_t)h * HMOE_CPU_ATTN_MAX_DIM + 16 * c, attn_ld16(kt, qh + (size_t)(16 * c) * es, m));
            }
        }
        for (int64_t p = 0; p < n_pos; p += 2) {
            const int np = n_pos - p < 2 ? 1 : 2;
            const char *k0 = (const char *)k + (size_t)p * k_stride, *k1 = k0 + (size_t)(np - 1) * k_stride;
            __m512 acc[16];
#pragma GCC unroll 16
            for (int i = 0; i < 16; i++) acc[i] = _mm512_setzero_ps();
            for (int64_t c = 0; c < nc; c++) {
                const __mmask16 m = D - 16 * c >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (D - 16 * c)) - 1);
                const __m512 a = attn_ld16(kt, k0 + (size_t)(16 * c) * es, m);
                const __m512 b = attn_ld16(kt, k1 + (size_t)(16 * c) * es, m);
#pragma GCC unroll 8
                for (int h = 0; h < 8; h++) {
                    const __m512 qv = _mm512_load_ps(qf + (size_t)h * HMOE_CPU_ATTN_MAX_DIM + 16 * c);
                    acc[h] = _mm512_fmadd_ps(a, qv, acc[h]);
                    acc[8 + h] = _mm512_fmadd_ps(b, qv, acc[8 + h]);
                }
            }
            float out[16]; /* out[8j + h] = score of head h at position p + j */
            _mm512_storeu_ps(out, attn_sum16(acc));
            for (int h = 0; h < nh; h++)
                for (int j = 0; j < np; j++) s[(size_t)(h0 + h) * s_stride + (size_t)(p + j)] = out[8 * j + h];
        }
    }
}
