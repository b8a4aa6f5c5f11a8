/* quant_act_avx2.c — activation quantizers with AVX2/F16C: Q8_K (quants.md §8.3), Q8_0
 * (§8.1), F16 and BF16, byte-identical to the references for every input (the rules are
 * explained in quant_act_avx512.c: magic-number rounding, NaN-skipping maxima). Tails go
 * through the reference.
 */
#include <immintrin.h>
#include <string.h>

#include "cpu_impl.h"
#include "hmoe/quant_blocks.h"

static inline __m256i round_magic(__m256 v) {
    __m256i bits = _mm256_castps_si256(_mm256_add_ps(v, _mm256_set1_ps(12582912.0f)));
    return _mm256_sub_epi32(_mm256_and_si256(bits, _mm256_set1_epi32(0x007fffff)), _mm256_set1_epi32(0x00400000));
}

static inline float hmax8(__m256 m) {
    __m128 v = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    v = _mm_max_ps(v, _mm_movehl_ps(v, v));
    v = _mm_max_ss(v, _mm_movehdup_ps(v));
    return _mm_cvtss_f32(v);
}

/* 32 int32 (four vectors, element order) -> 32 int8 with signed saturation, in order. */
static inline __m256i pack32(__m256i a, __m256i b, __m256i c, __m256i d) {
    const __m256i ab = _mm256_packs_epi32(a, b), cd = _mm256_packs_epi32(c, d);
    return _mm256_permutevar8x32_epi32(_mm256_packs_epi16(ab, cd), _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

void hmoe_cpu_quantize_q8_k_avx2(const float *src, void *dst, int64_t n) {
    struct hmoe_block_q8_k *y = dst;
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    for (int64_t i = 0; i < n / HMOE_QK_K; i++, y++, src += HMOE_QK_K) {
        __m256 m = _mm256_setzero_ps();
        for (int k = 0; k < 32; k++) m = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(src + 8 * k), absmask), m);
        const float amax = hmax8(m);
        if (amax == 0.0f) {
            memset(y, 0, sizeof *y);
            continue;
        }
        float xmax = amax;
        const __m256 am = _mm256_set1_ps(amax);
        for (int k = 0; k < 32; k++) {
            int hit =
                _mm256_movemask_ps(_mm256_cmp_ps(_mm256_and_ps(_mm256_loadu_ps(src + 8 * k), absmask), am, _CMP_EQ_OQ));
            if (hit) {
                xmax = src[8 * k + __builtin_ctz((unsigned)hit)];
                break;
            }
        }
        const float iscale = -127.0f / xmax;
        const __m256 is = _mm256_set1_ps(iscale);
        const __m256i q127 = _mm256_set1_epi32(127);
        /* q is within -127..127 after the min (see quant_act_avx512.c), so saturating packs are exact */
        for (int k = 0; k < 8; k++) {
            __m256i q[4];
            for (int j = 0; j < 4; j++)
                q[j] = _mm256_min_epi32(round_magic(_mm256_mul_ps(is, _mm256_loadu_ps(src + 32 * k + 8 * j))), q127);
            _mm256_storeu_si256((__m256i *)(y->qs + 32 * k), pack32(q[0], q[1], q[2], q[3]));
            for (int h = 0; h < 2; h++) {
                __m256i s = _mm256_add_epi32(q[2 * h], q[2 * h + 1]);
                __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
                s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, _MM_SHUFFLE(1, 0, 3, 2)));
                s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, _MM_SHUFFLE(2, 3, 0, 1)));
                y->bsums[2 * k + h] = (int16_t)_mm_cvtsi128_si32(s4);
            }
        }
        y->d = 1.0f / iscale;
    }
}

void hmoe_cpu_quantize_q8_0_avx2(const float *src, void *dst, int64_t n) {
    struct hmoe_block_q8_0 *y = dst;
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    for (int64_t i = 0; i < n / HMOE_QK_LEGACY; i++, y++, src += HMOE_QK_LEGACY) {
        __m256 x[4], m = _mm256_setzero_ps();
        for (int j = 0; j < 4; j++) {
            x[j] = _mm256_loadu_ps(src + 8 * j);
            m = _mm256_max_ps(_mm256_and_ps(x[j], absmask), m);
        }
        const float amax = hmax8(m);
        const float d = amax / 127.0f;
        const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        const __m256 idv = _mm256_set1_ps(id);
        __m256i q[4];
        for (int j = 0; j < 4; j++) q[j] = round_magic(_mm256_mul_ps(x[j], idv));
        _mm256_storeu_si256((__m256i *)y->qs, pack32(q[0], q[1], q[2], q[3])); /* saturation = the reference's clamp */
        y->d = (uint16_t)_mm_extract_epi16(_mm_cvtps_ph(_mm_set_ss(d), _MM_FROUND_TO_NEAREST_INT), 0);
    }
}

void hmoe_cpu_quantize_f16_avx2(const float *src, void *dst, int64_t n) {
    uint8_t *p = dst;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(p + 2 * i), _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
    if (i < n) hmoe_type_info[HMOE_TYPE_F16].quantize_ref(src + i, p + 2 * i, n - i);
}

void hmoe_cpu_quantize_bf16_avx2(const float *src, void *dst, int64_t n) {
    uint8_t *p = dst;
    const __m256i one = _mm256_set1_epi32(1), rnd = _mm256_set1_epi32(0x7fff), quiet = _mm256_set1_epi32(0x40);
    const __m256i absm = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256i r[2];
        for (int h = 0; h < 2; h++) {
            const __m256i u = _mm256_loadu_si256((const __m256i *)(src + i + 8 * h));
            const __m256i hi = _mm256_srli_epi32(u, 16);
            const __m256i rn =
                _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, rnd), _mm256_and_si256(hi, one)), 16);
            /* NaN: |u| > 0x7f800000 as signed ints (both sides are non-negative) */
            const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, absm), inf);
            r[h] = _mm256_blendv_epi8(rn, _mm256_or_si256(hi, quiet), nan);
        }
        /* 16 values < 65536: unsigned-saturating pack keeps them, then undo the lane interleave */
        const __m256i pk = _mm256_permute4x64_epi64(_mm256_packus_epi32(r[0], r[1]), _MM_SHUFFLE(3, 1, 2, 0));
        _mm256_storeu_si256((__m256i *)(p + 2 * i), pk);
    }
    if (i < n) hmoe_type_info[HMOE_TYPE_BF16].quantize_ref(src + i, p + 2 * i, n - i);
}
