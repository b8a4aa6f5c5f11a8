/* quant_act_avx512.c — activation quantizers with AVX-512: Q8_K (quants.md §8.3), Q8_0
 * (§8.1, the AVX2-path rounding the references implement), F16 and BF16 (§8.4). They must
 * give the references' bytes (src/kernels/quant_act.c) for every input, NaN and Inf
 * included, so rounding uses the same 1.5·2^23 "magic number" addition as
 * hmoe_nearest_int_even() rather than vcvtps2dq, and maxima skip NaN the way `a > amax`
 * does (vmaxps returns its second operand when the first is NaN). Tails (n not a multiple
 * of 16 for F16/BF16) go through the reference.
 */
#include <immintrin.h>
#include <string.h>

#include "cpu_impl.h"
#include "hmoe/quant_blocks.h"

/* Round to nearest, ties to even, exactly as hmoe_nearest_int_even(): (v + 1.5·2^23)'s
 * low 23 bits minus 2^22. */
static inline __m512i round_magic(__m512 v) {
    const __m512 magic = _mm512_set1_ps(12582912.0f);
    __m512i bits = _mm512_castps_si512(_mm512_add_ps(v, magic));
    return _mm512_sub_epi32(_mm512_and_si512(bits, _mm512_set1_epi32(0x007fffff)), _mm512_set1_epi32(0x00400000));
}

void hmoe_cpu_quantize_q8_k_avx512(const float *src, void *dst, int64_t n) {
    struct hmoe_block_q8_k *y = dst;
    const __m512 absmask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
    for (int64_t i = 0; i < n / HMOE_QK_K; i++, y++, src += HMOE_QK_K) {
        __m512 m = _mm512_setzero_ps();
        for (int k = 0; k < 16; k++) m = _mm512_max_ps(_mm512_and_ps(_mm512_loadu_ps(src + 16 * k), absmask), m);
        const float amax = _mm512_reduce_max_ps(m);
        if (amax == 0.0f) { /* also when every element is NaN: the reference skips NaN too */
            memset(y, 0, sizeof *y);
            continue;
        }
        /* the first element whose |x| is the maximum keeps its sign (§8.3) */
        float xmax = amax;
        const __m512 am = _mm512_set1_ps(amax);
        for (int k = 0; k < 16; k++) {
            __mmask16 hit = _mm512_cmp_ps_mask(_mm512_and_ps(_mm512_loadu_ps(src + 16 * k), absmask), am, _CMP_EQ_OQ);
            if (hit) {
                xmax = src[16 * k + __builtin_ctz(hit)];
                break;
            }
        }
        const float iscale = -127.0f / xmax;
        const __m512 is = _mm512_set1_ps(iscale);
        const __m512i q127 = _mm512_set1_epi32(127);
        for (int k = 0; k < 16; k++) {
            __m512i q = _mm512_min_epi32(round_magic(_mm512_mul_ps(is, _mm512_loadu_ps(src + 16 * k))), q127);
            _mm_storeu_si128((__m128i *)(y->qs + 16 * k), _mm512_cvtepi32_epi8(q)); /* (int8_t) truncation */
            y->bsums[k] = (int16_t)_mm512_reduce_add_epi32(_mm512_cvtepi8_epi32(_mm512_cvtepi32_epi8(q)));
        }
        y->d = 1.0f / iscale;
    }
}

void hmoe_cpu_quantize_q8_0_avx512(const float *src, void *dst, int64_t n) {
    struct hmoe_block_q8_0 *y = dst;
    const __m512 absmask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
    for (int64_t i = 0; i < n / HMOE_QK_LEGACY; i++, y++, src += HMOE_QK_LEGACY) {
        const __m512 x0 = _mm512_loadu_ps(src), x1 = _mm512_loadu_ps(src + 16);
        __m512 m = _mm512_max_ps(_mm512_and_ps(x0, absmask), _mm512_setzero_ps());
        m = _mm512_max_ps(_mm512_and_ps(x1, absmask), m);
        const float amax = _mm512_reduce_max_ps(m);
        const float d = amax / 127.0f;
        const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        const __m512 idv = _mm512_set1_ps(id);
        /* saturating packs = the reference's clamp to -128..127 */
        _mm_storeu_si128((__m128i *)y->qs, _mm512_cvtsepi32_epi8(round_magic(_mm512_mul_ps(x0, idv))));
        _mm_storeu_si128((__m128i *)(y->qs + 16), _mm512_cvtsepi32_epi8(round_magic(_mm512_mul_ps(x1, idv))));
        y->d = (uint16_t)_mm_extract_epi16(_mm_cvtps_ph(_mm_set_ss(d), _MM_FROUND_TO_NEAREST_INT), 0);
    }
}

void hmoe_cpu_quantize_f16_avx512(const float *src, void *dst, int64_t n) {
    uint8_t *p = dst;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm256_storeu_si256((__m256i *)(p + 2 * i),
                            _mm512_cvtps_ph(_mm512_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
    if (i < n) hmoe_type_info[HMOE_TYPE_F16].quantize_ref(src + i, p + 2 * i, n - i);
}

/* f32 -> bf16 as hmoe_f32_to_bf16(): round to nearest even on the dropped half; NaN is
 * truncated with the quiet bit forced. (vcvtneps2bf16 would flush subnormals.) */
void hmoe_cpu_quantize_bf16_avx512(const float *src, void *dst, int64_t n) {
    uint8_t *p = dst;
    const __m512i one = _mm512_set1_epi32(1), rnd = _mm512_set1_epi32(0x7fff), quiet = _mm512_set1_epi32(0x40);
    const __m512i absm = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512i u = _mm512_loadu_si512(src + i);
        const __m512i hi = _mm512_srli_epi32(u, 16);
        __m512i r = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, rnd), _mm512_and_si512(hi, one)), 16);
        const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, absm), inf);
        r = _mm512_mask_or_epi32(r, nan, hi, quiet);
        _mm256_storeu_si256((__m256i *)(p + 2 * i), _mm512_cvtepi32_epi16(r));
    }
    if (i < n) hmoe_type_info[HMOE_TYPE_BF16].quantize_ref(src + i, p + 2 * i, n - i);
}
