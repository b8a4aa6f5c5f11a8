/* attn_wsum.c — hmoe_cpu_attn_wsum (cpu.h): the attention's weighted sum over a transposed V
 * cache, o[h][e] = Σ_p prob[h][p]·V(e, p), on the path hmoe_cpu_init() picked: the AVX-512
 * kernel (attn_wsum_avx512.c), the AVX2 one (attn_wsum_avx2.c) or this portable loop, which widens V with the type table's
 * reference dequantizer (types.h) 256 positions at a time and sums in binary32 the same way.
 */
#include "cpu_impl.h"

enum { WSUM_CHUNK = 256 };

static void wsum_ref(enum hmoe_type vt, int64_t n_pos, const void *v, size_t row_bytes, int64_t n_rows,
                     const float *prob, size_t p_stride, int n_h, float *o, size_t o_stride) {
    const size_t es = hmoe_type_info[vt].type_size;
    float row[WSUM_CHUNK];
    for (int h = 0; h < n_h; h++)
        for (int64_t e = 0; e < n_rows; e++) o[(size_t)h * o_stride + (size_t)e] = 0.0f;
    for (int64_t e = 0; e < n_rows; e++)
        for (int64_t p0 = 0; p0 < n_pos; p0 += WSUM_CHUNK) {
            const int64_t n = n_pos - p0 < WSUM_CHUNK ? n_pos - p0 : WSUM_CHUNK;
            hmoe_type_info[vt].dequant_ref((const char *)v + (size_t)e * row_bytes + (size_t)p0 * es, row, n);
            for (int h = 0; h < n_h; h++) {
                const float *ph = prob + (size_t)h * p_stride + p0;
                float s = 0.0f;
                for (int64_t p = 0; p < n; p++) s += ph[p] * row[p];
                o[(size_t)h * o_stride + (size_t)e] += s;
            }
        }
}

void hmoe_cpu_attn_wsum(enum hmoe_type vt, int64_t n_pos, const void *v, size_t row_bytes, int64_t n_rows,
                        const float *prob, size_t p_stride, int n_h, float *o, size_t o_stride) {
    if (n_pos <= 0) {
        for (int h = 0; h < n_h; h++)
            for (int64_t e = 0; e < n_rows; e++) o[(size_t)h * o_stride + (size_t)e] = 0.0f;
        return;
    }
    const bool simd = vt == HMOE_TYPE_F32 || vt == HMOE_TYPE_F16 || vt == HMOE_TYPE_BF16;
    if (simd && hmoe_cpu_path() == HMOE_CPU_AVX512)
        hmoe_cpu_attn_wsum_avx512(vt, n_pos, v, row_bytes, n_rows, prob, p_stride, n_h, o, o_stride);
    else if (simd && hmoe_cpu_path() == HMOE_CPU_AVX2)
        hmoe_cpu_attn_wsum_avx2(vt, n_pos, v, row_bytes, n_rows, prob, p_stride, n_h, o, o_stride);
    else
        wsum_ref(vt, n_pos, v, row_bytes, n_rows, prob, p_stride, n_h, o, o_stride);
}
