/* iq_avx2_impl.h — private to src/cpu/iq*_avx2.c (AVX2/FMA/F16C): shared pieces of the AVX2
 * I-quant bodies. Grid entries come from table loads (they are the magnitude bytes), signs go
 * onto the activations with vpsignb (Q8_K quants are never -128, quants.md §8.3), integer sums
 * per 32 elements are exact (vpmaddubsw, vpmaddwd with the scales) and each block's int32
 * total is scaled by dw·da in double as vec_dot_ref does (§8.4). */
#ifndef HMOE_CPU_IQ_AVX2_IMPL_H
#define HMOE_CPU_IQ_AVX2_IMPL_H

#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

#include "hmoe/quant_blocks.h"

/* 32 explicit sign bits (bit k of byte g = element 8g + k negative) as vpsignb operands:
 * 0xff for negative, +1 for positive. */
static inline __m256i hmoe_iq256_signs(uint32_t s4) {
    const __m256i rep = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3,
                                         3, 3, 3, 3, 3, 3);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
    const __m256i b = _mm256_and_si256(_mm256_shuffle_epi8(_mm256_set1_epi32((int)s4), rep), bit);
    return _mm256_or_si256(_mm256_cmpeq_epi8(b, bit), _mm256_set1_epi8(1));
}

/* Sign sources of a block's 8 chunks for hmoe_iq256_sign_expand: s holds chunk c's four sign
 * bytes (bit k of byte g = element 8g + k negative) in dword c of the order c0 c1 c4 c5 |
 * c2 c3 c6 c7; qword c of st = [those 4 bytes | the same bytes shifted left by one]. */
static inline void hmoe_iq256_sign_store(__m256i s, uint64_t st[8]) {
    const __m256i t = _mm256_add_epi8(s, s);
    _mm256_storeu_si256((__m256i *)st, _mm256_unpacklo_epi32(s, t));
    _mm256_storeu_si256((__m256i *)(st + 4), _mm256_unpackhi_epi32(s, t));
}

/* Chunk's 32 vpsignb operands from its qword of hmoe_iq256_sign_store: byte 8g + k tests bit k
 * of sign byte g (bit 1 of the shifted copy for k = 0), and half the tested bit minus the
 * result is ±(bit / 2): negative exactly when the sign bit is set, never zero. One broadcast
 * load, one vpshufb, one vpand, one vpsubb, none of them on a general register. */
static inline __m256i hmoe_iq256_sign_expand(const uint64_t *st) {
    const __m256i pick = _mm256_setr_epi8(4, 0, 0, 0, 0, 0, 0, 0, 5, 1, 1, 1, 1, 1, 1, 1, 6, 2, 2, 2, 2, 2, 2, 2, 7, 3,
                                          3, 3, 3, 3, 3, 3);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040202ULL);
    const __m256i half = _mm256_set1_epi64x((long long)0x4020100804020101ULL);
    const __m256i v = _mm256_set1_epi64x((long long)*st);
    return _mm256_sub_epi8(half, _mm256_and_si256(_mm256_shuffle_epi8(v, pick), bit));
}

/* Bytes of 7 sign bits (bit 7 clear) completed with the implied eighth sign (quants.md §5:
 * bit 7 set when the 7 bits hold an odd count), by a nibble parity lookup. */
static inline __m256i hmoe_iq256_sign_parity(__m256i x) {
    const __m256i par = _mm256_setr_epi8(0, -128, -128, 0, -128, 0, 0, -128, -128, 0, 0, -128, 0, -128, -128, 0, 0,
                                         -128, -128, 0, -128, 0, 0, -128, -128, 0, 0, -128, 0, -128, -128, 0);
    const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(x, 4), _mm256_set1_epi8(0x0f));
    return _mm256_or_si256(x, _mm256_xor_si256(_mm256_shuffle_epi8(par, x), _mm256_shuffle_epi8(par, hi)));
}

/* sum += scaled dot of 32 magnitudes with 32 activations carrying the signs:
 * Σ_pairs sc16 · (mag·(±a)), i.e. vpmaddubsw then vpmaddwd with the 16-bit scales. */
static inline __m256i hmoe_iq256_dot32(__m256i sum, __m256i mag, __m256i sgn, __m256i sc16, const int8_t *a) {
    const __m256i av = _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)a), sgn);
    return _mm256_add_epi32(sum, _mm256_madd_epi16(_mm256_maddubs_epi16(mag, av), sc16));
}

/* acc += (8 int32 lanes summed to 4) · s, in double. */
static inline __m256d hmoe_iq256_acc(__m256d acc, __m256i sum, double s) {
    const __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(sum), _mm256_extracti128_si256(sum, 1));
    return _mm256_fmadd_pd(_mm256_cvtepi32_pd(s4), _mm256_set1_pd(s), acc);
}

/* Chunk c of block i for each of the T activation rows (xs bytes apart): sum[t] += the scaled
 * dot of the chunk's magnitudes and signs with the row's 32 quants (hmoe_iq256_dot32). */
static inline __attribute__((always_inline)) void hmoe_iq256_dot_rows(__m256i *sum, __m256i mag, __m256i sgn,
                                                                      __m256i sc, const char *x, size_t xs, int64_t i,
                                                                      int c, const int T) {
#pragma GCC unroll 4
    for (int t = 0; t < T; t++) {
        const struct hmoe_block_q8_k *a = (const struct hmoe_block_q8_k *)(x + (size_t)t * xs) + i;
        sum[t] = hmoe_iq256_dot32(sum[t], mag, sgn, sc, a->qs + 32 * c);
    }
}

/* End of block i: acc[t] += sum[t] · dw · (row t's activation scale of block i). */
static inline __attribute__((always_inline)) void hmoe_iq256_block_acc(__m256d *acc, const __m256i *sum, double dw,
                                                                       const char *x, size_t xs, int64_t i,
                                                                       const int T) {
#pragma GCC unroll 4
    for (int t = 0; t < T; t++) {
        const struct hmoe_block_q8_k *a = (const struct hmoe_block_q8_k *)(x + (size_t)t * xs) + i;
        acc[t] = hmoe_iq256_acc(acc[t], sum[t], dw * (double)a->d);
    }
}

static inline float hmoe_iq256_hsum(__m256d acc, double f) {
    const __m128d h = _mm_add_pd(_mm256_castpd256_pd128(acc), _mm256_extractf128_pd(acc, 1));
    return (float)((_mm_cvtsd_f64(h) + _mm_cvtsd_f64(_mm_unpackhi_pd(h, h))) * f);
}

#endif
