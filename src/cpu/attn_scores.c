/* attn_scores.c — hmoe_cpu_attn_scores (cpu.h): the attention's scores of n_h queries against
 * n_pos cached keys, on the path hmoe_cpu_init() picked: the AVX-512 or AVX2 kernel for
 * F32/F16/BF16 caches (attn_scores_avx512.c, attn_scores_avx2.c), else the type table's gemv/gemm kernels (the block caches
 * Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL; other CPUs; head_dim over HMOE_CPU_ATTN_MAX_DIM),
 * which compute the same dot products.
 */
#include "cpu_impl.h"

void hmoe_cpu_attn_scores(enum hmoe_type kt, int64_t D, const void *k, size_t k_stride, int64_t n_pos, const void *q,
                          size_t q_stride, int n_h, float *s, size_t s_stride) {
    if (n_pos <= 0 || n_h <= 0) return;
    const bool simd = kt == HMOE_TYPE_F32 || kt == HMOE_TYPE_F16 || kt == HMOE_TYPE_BF16;
    if (simd && D <= HMOE_CPU_ATTN_MAX_DIM && hmoe_cpu_path() == HMOE_CPU_AVX512)
        hmoe_cpu_attn_scores_avx512(kt, D, k, k_stride, n_pos, q, q_stride, n_h, s, s_stride);
    else if (simd && D <= HMOE_CPU_ATTN_MAX_DIM && hmoe_cpu_path() == HMOE_CPU_AVX2)
        hmoe_cpu_attn_scores_avx2(kt, D, k, k_stride, n_pos, q, q_stride, n_h, s, s_stride);
    else if (n_h == 1)
        hmoe_cpu_gemv(kt, D, k, k_stride, 0, n_pos, q, s);
    else
        hmoe_cpu_gemm(kt, D, k, k_stride, 0, n_pos, q, q_stride, n_h, s, s_stride);
}
