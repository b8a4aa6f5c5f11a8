/* iq_avx512_impl.h — private to src/cpu/iq*_avx512.c (AVX-512 BW/VL/VNNI/VBMI/BITALG): pieces
 * every I-quant body shares. Rows A and B are decoded together and their per-token integer
 * sums end in ONE double accumulator (row A even lanes, B odd), each block scaled by dw·da in
 * double as the reference does (quants.md §8.4): integer partial sums are exact, only the
 * float summation order differs from vec_dot_ref. */
#ifndef HMOE_CPU_IQ_AVX512_IMPL_H
#define HMOE_CPU_IQ_AVX512_IMPL_H

#include <immintrin.h>
#include <stdint.h>

#include "iq_act_impl.h"

/* A 64-bit element mask from memory through a general register: a scalar load plus
 * kmovq k, r64 (measured faster than kmovq k, m64 on Zen 5). The empty asm keeps the
 * compiler from turning the vector store + reload into vector-to-GPR extracts. */
static inline __mmask64 hmoe_iq512_load_mask(const void *p) {
    uint64_t r;
    __asm__("movq %1, %0" : "=r"(r) : "m"(*(const uint64_t *)p));
    return _cvtu64_mask64(r);
}

/* vpmultishiftqb control, same in every qword: byte k = (base + step·k) mod 64. */
static inline __m512i hmoe_iq512_ms_ctrl(int base, int step) {
    uint64_t c = 0;
    for (int k = 0; k < 8; k++) c |= (uint64_t)((base + step * k) & 63) << (8 * k);
    return _mm512_set1_epi64((long long)c);
}

/* The two fp16 block scales {dA, dB} as doubles, repeated over the 8 lanes. */
static inline __m512d hmoe_iq512_pair_d(const void *da16, const void *db16) {
    uint16_t a, b;
    __builtin_memcpy(&a, da16, 2);
    __builtin_memcpy(&b, db16, 2);
    return _mm512_broadcast_f64x2(
        _mm_cvtps_pd(_mm_cvtph_ps(_mm_cvtsi32_si128((int)((uint32_t)a | (uint32_t)b << 16)))));
}

/* acc += per-block sums of rows A (even lanes) and B (odd lanes), times `scale`.
 * pa, pb: 16 int32 partial sums where dwords 2c, 2c+1 belong to chunk c; sc2: dword 2c
 * = row A's integer scale of chunk c, 2c + 1 = row B's (multiplied in exactly). */
static inline __m512d hmoe_iq512_acc_chunks(__m512d acc, __m512i pa, __m512i pb, __m512i sc2, __m512d scale) {
    const __m512i x = _mm512_mask_blend_epi32(0xaaaa, pa, pb);               /* a0 b1 a2 b3 .. */
    const __m512i y = _mm512_mask_blend_epi32(0x5555, pa, pb);               /* b0 a1 b2 a3 .. */
    __m512i s = _mm512_add_epi32(x, _mm512_shuffle_epi32(y, _MM_PERM_CDAB)); /* a0+a1 b0+b1 .. */
    s = _mm512_mullo_epi32(s, sc2);
    const __m256i s8 = _mm256_add_epi32(_mm512_castsi512_si256(s), _mm512_extracti64x4_epi64(s, 1));
    return _mm512_fmadd_pd(_mm512_cvtepi32_pd(s8), scale, acc);
}

/* As hmoe_iq512_acc_chunks for types with a scale per 16 elements: lo = slices 0-1 (the
 * first half of each chunk) with scales sc2lo, hi = slices 2-3 with sc2hi. */
static inline __m512d hmoe_iq512_acc_halves(__m512d acc, __m512i palo, __m512i pblo, __m512i pahi, __m512i pbhi,
                                            __m512i sc2lo, __m512i sc2hi, __m512d scale) {
    const __m512i xl = _mm512_mask_blend_epi32(0xaaaa, palo, pblo), yl = _mm512_mask_blend_epi32(0x5555, palo, pblo);
    const __m512i xh = _mm512_mask_blend_epi32(0xaaaa, pahi, pbhi), yh = _mm512_mask_blend_epi32(0x5555, pahi, pbhi);
    const __m512i sl = _mm512_add_epi32(xl, _mm512_shuffle_epi32(yl, _MM_PERM_CDAB));
    const __m512i sh = _mm512_add_epi32(xh, _mm512_shuffle_epi32(yh, _MM_PERM_CDAB));
    const __m512i s = _mm512_add_epi32(_mm512_mullo_epi32(sl, sc2lo), _mm512_mullo_epi32(sh, sc2hi));
    const __m256i s8 = _mm256_add_epi32(_mm512_castsi512_si256(s), _mm512_extracti64x4_epi64(s, 1));
    return _mm512_fmadd_pd(_mm512_cvtepi32_pd(s8), scale, acc);
}

/* IQ2_XS / IQ2_S scales: byte c of the 8-byte scales field holds chunk c's two 4-bit
 * scales (low nibble: first 16 elements). Returns {2s+1} with dword 2c = row A, 2c + 1 =
 * row B, for the low (*lo) and high (*hi) nibbles. */
static inline void hmoe_iq512_nibble_scales(const uint8_t *sa, const uint8_t *sb, __m512i *lo, __m512i *hi) {
    uint64_t a, b;
    __builtin_memcpy(&a, sa, 8);
    __builtin_memcpy(&b, sb, 8);
    const __m512i x =
        _mm512_cvtepu8_epi32(_mm_unpacklo_epi8(_mm_cvtsi64_si128((long long)a), _mm_cvtsi64_si128((long long)b)));
    const __m512i m = _mm512_set1_epi32(0x1e), one = _mm512_set1_epi32(1);
    *lo = _mm512_ternarylogic_epi32(_mm512_slli_epi32(x, 1), m, one, 0xea); /* (x<<1 & 0x1e) | 1 */
    *hi = _mm512_ternarylogic_epi32(_mm512_srli_epi32(x, 3), m, one, 0xea); /* (x>>3 & 0x1e) | 1 */
}

/* Row A = f · the sum of the even lanes, row B = f · the odd lanes (f: the type's constant
 * factor, a power of two, so applying it last changes no rounding). */
static inline void hmoe_iq512_store_pair(__m512d acc, double f, float *oa, float *ob) {
    const __m256d h = _mm256_add_pd(_mm512_castpd512_pd256(acc), _mm512_extractf64x4_pd(acc, 1));
    const __m128d q = _mm_mul_pd(_mm_add_pd(_mm256_castpd256_pd128(h), _mm256_extractf128_pd(h, 1)), _mm_set1_pd(f));
    *oa = (float)_mm_cvtsd_f64(q);
    *ob = (float)_mm_cvtsd_f64(_mm_unpackhi_pd(q, q));
}

/* dword 2c = 2·sA_c + 1, 2c + 1 = 2·sB_c + 1 for 4-bit scales s in the top nibble of
 * qword c of qa / qb: shifting by 59 leaves 2s + (bit 59), and "| 1" makes it 2s + 1. */
static inline __m512i hmoe_iq512_top_nibble_scales(__m512i qa, __m512i qb) {
    const __m512i s = _mm512_mask_blend_epi32(0xaaaa, _mm512_srli_epi64(qa, 59), _mm512_srli_epi64(qb, 27));
    return _mm512_or_si512(s, _mm512_set1_epi32(1));
}

/* The per-token part of every 256-element body: slices va / vb (64 ± weight, unsigned)
 * of rows A and B dotted with the re-laid activations `a`, one integer scale per chunk
 * (sclo) or per 16 elements (split: sclo for slices 0-1, schi for 2-3), into *acc with
 * the block scales dd (row A even lanes, B odd) times the activation scale. */
static inline __attribute__((always_inline)) void hmoe_iq512_dots(const __m512i va[4], const __m512i vb[4],
                                                                  __m512i sclo, __m512i schi, const int split,
                                                                  __m512d dd, const struct hmoe_cpu_iq_act *a,
                                                                  __m512d *acc) {
    const __m512d s = _mm512_mul_pd(dd, _mm512_set1_pd(a->d));
    if (!split) {
        __m512i pa = _mm512_load_si512(a->corr[0]), pb = pa;
#pragma GCC unroll 4
        for (int g = 0; g < 4; g++) {
            const __m512i av = _mm512_load_si512(a->qs + 64 * g);
            pa = _mm512_dpbusd_epi32(pa, va[g], av);
            pb = _mm512_dpbusd_epi32(pb, vb[g], av);
        }
        *acc = hmoe_iq512_acc_chunks(*acc, pa, pb, sclo, s);
    } else {
        __m512i pal = _mm512_load_si512(a->corr[0]), pbl = pal, pah = _mm512_load_si512(a->corr[1]), pbh = pah;
        const __m512i a0 = _mm512_load_si512(a->qs), a1 = _mm512_load_si512(a->qs + 64);
        const __m512i a2 = _mm512_load_si512(a->qs + 128), a3 = _mm512_load_si512(a->qs + 192);
        pal = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(pal, va[0], a0), va[1], a1);
        pbl = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(pbl, vb[0], a0), vb[1], a1);
        pah = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(pah, va[2], a2), va[3], a3);
        pbh = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(pbh, vb[2], a2), vb[3], a3);
        *acc = hmoe_iq512_acc_halves(*acc, pal, pbl, pah, pbh, sclo, schi, s);
    }
}

#endif
