/* attn_scores_avx2.c — the attention's scores q·k over the K cache with AVX2 + FMA + F16C (cpu.h
 * hmoe_cpu_attn_scores) for F32, F16 and BF16 caches: s[h][p] = Σ_d K(p, d)·q_h(d).
 * The AVX-512 kernel's scheme in 8 lanes: the queries (in the cache type, as llama.cpp
 * converts them) widened to binary32 once per call, zero past head_dim; each position's K row
 * loaded once, 8 at a time, for 8 heads whose partial sums stay in 8 registers over head_dim and
 * are reduced together (hadd tree). Why not the gemm tiles: they widen every query again for
 * every position and sum each (position, head) in double. A row's last elements past a
 * multiple of 8 are widened into a zeroed chunk first (the bytes after a row are not read).
 * Heads past a block's end repeat the last one (results dropped).
 */
#include <immintrin.h>
#include <string.h>

#include "attn_avx2_impl.h"
#include "cpu_impl.h"

void hmoe_cpu_attn_scores_avx2(enum hmoe_type kt, int64_t D, const void *k, size_t k_stride, int64_t n_pos,
                               const void *q, size_t q_stride, int n_h, float *s, size_t s_stride) {
    const struct hmoe_type_info *ti = &hmoe_type_info[kt];
    const size_t es = ti->type_size;
    const int64_t nfull = D / 8, tail = D % 8, nc = nfull + (tail != 0);
    _Alignas(32) float qf[8 * HMOE_CPU_ATTN_MAX_DIM];
    for (int h0 = 0; h0 < n_h; h0 += 8) {
        const int nh = n_h - h0 < 8 ? n_h - h0 : 8;
        for (int h = 0; h < 8; h++) {
            float *qh = qf + (size_t)h * HMOE_CPU_ATTN_MAX_DIM;
            ti->dequant_ref((const char *)q + (size_t)(h0 + (h < nh ? h : nh - 1)) * q_stride, qh, D);
            for (int64_t d = D; d < 8 * nc; d++) qh[d] = 0.0f;
        }
        for (int64_t p = 0; p < n_pos; p++) {
            const char *kr = (const char *)k + (size_t)p * k_stride;
            __m256 acc[8];
            for (int h = 0; h < 8; h++) acc[h] = _mm256_setzero_ps();
            for (int64_t c = 0; c < nc; c++) {
                __m256 kv;
                if (c < nfull) {
                    kv = attn_ld8(kt, kr + (size_t)(8 * c) * es);
                } else { /* the row's last D % 8 elements */
                    _Alignas(32) float t8[8] = {0};
                    ti->dequant_ref(kr + (size_t)(8 * c) * es, t8, tail);
                    kv = _mm256_load_ps(t8);
                }
#pragma GCC unroll 8
                for (int h = 0; h < 8; h++)
                    acc[h] = _mm256_fmadd_ps(kv, _mm256_load_ps(qf + (size_t)h * HMOE_CPU_ATTN_MAX_DIM + 8 * c), acc[h]);
            }
            _Alignas(32) float out[8];
            _mm256_store_ps(out, attn_sum8(acc));
            for (int h = 0; h < nh; h++) s[(size_t)(h0 + h) * s_stride + (size_t)p] = out[h];
        }
    }
}
