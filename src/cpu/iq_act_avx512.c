/* iq_act_avx512.c — the activation relayout of iq_act_impl.h with AVX-512: per Q8_K block,
 * a qword transpose (qword 4c + g of the block is slice g's qword c) and the chunk or half
 * chunk sums from the block's bsums, times -offset (quants.md §8.3: bsums[b] = Σ of
 * elements 16b..16b+15).
 */
#include <immintrin.h>

#include "cpu_impl.h"
#include "hmoe/quant_blocks.h"
#include "iq_act_impl.h"

void hmoe_cpu_iq_act_avx512(const void *src, size_t src_stride, int64_t ntok, int64_t nb, int offset, int split,
                            struct hmoe_cpu_iq_act *dst) {
    /* qword c of slice g = source qword 4c + g: lanes 0-3 from (in0, in1), 4-7 from (in2, in3) */
    const __m512i sel = _mm512_set_epi64(12, 8, 4, 0, 12, 8, 4, 0);
    const __m512i moff = _mm512_set1_epi32(-offset);
    for (int64_t t = 0; t < ntok; t++) {
        const struct hmoe_block_q8_k *a = (const struct hmoe_block_q8_k *)((const char *)src + (size_t)t * src_stride);
        struct hmoe_cpu_iq_act *o = dst + t * nb;
        for (int64_t i = 0; i < nb; i++) {
            const __m512i in0 = _mm512_loadu_si512(a[i].qs), in1 = _mm512_loadu_si512(a[i].qs + 64);
            const __m512i in2 = _mm512_loadu_si512(a[i].qs + 128), in3 = _mm512_loadu_si512(a[i].qs + 192);
            for (int g = 0; g < 4; g++) {
                const __m512i ix = _mm512_add_epi64(sel, _mm512_set1_epi64(g));
                const __m512i lo = _mm512_permutex2var_epi64(in0, ix, in1),
                              hi = _mm512_permutex2var_epi64(in2, ix, in3);
                _mm512_store_si512(o[i].qs + 64 * g, _mm512_mask_blend_epi64(0xf0, lo, hi));
            }
            /* bsums as dwords b = 0..15, times -offset; chunk c = halves 2c, 2c + 1 */
            const __m512i b =
                _mm512_mullo_epi32(_mm512_cvtepi16_epi32(_mm256_loadu_si256((const __m256i *)a[i].bsums)), moff);
            const __m512i odd = _mm512_srli_epi64(b, 32); /* dword 2c = half 2c + 1, odd dwords 0 */
            const __m512i even = _mm512_maskz_mov_epi32(0x5555, b);
            if (split) {
                _mm512_store_si512(o[i].corr[0], even);
                _mm512_store_si512(o[i].corr[1], odd);
            } else {
                _mm512_store_si512(o[i].corr[0], _mm512_add_epi32(even, odd));
                _mm512_store_si512(o[i].corr[1], _mm512_setzero_si512());
            }
            o[i].d = (double)a[i].d;
        }
    }
}
