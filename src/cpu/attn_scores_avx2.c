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

#include "cpu_impl.h"

/* 8 elements of type t (F16, BF16 or F32) at p widened to binary32. */
static inline __attribute__((always_inline)) __m256 ld8(enum hmoe_type t, const char *p) {
    if (t == HMOE_TYPE_F16) return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
    if (t == HMOE_TYPE_BF16)
        return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p)), 16));
    return _mm256_loadu_ps((const float *)p);
}

/* r[i] = sum of the 8 lanes of a[i], i < 8. */
static inline __attribute__((always_inline)) __m256 sum8(const __m256 *a) {
    const __m256 t0 = _mm256_hadd_ps(a[0], a[1]), t1 = _mm256_hadd_ps(a[2], a[3]);
    const __m256 t2 = _mm256_hadd_ps(a[4], a[5]), t3 = _mm256_hadd_ps(a[6], a[7]);
    const __m256 u0 = _mm256_hadd_ps(t0, t1), u1 = _mm256_hadd_ps(t2, t3); /* per 128-bit half: 4 partial sums */
    return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
}

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
                    kv = ld8(kt, kr + (size_t)(8 * c) * es);
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
            _mm256_store_ps(out, sum8(acc));
            for (int h = 0; h < nh; h++) s[(size_t)(h0 + h) * s_stride + (size_t)p] = out[h];
        }
    }
}
