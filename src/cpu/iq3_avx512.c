/* iq3_avx512.c — IQ3_XXS/IQ3_S × Q8_K with AVX-512 VBMI/BITALG/VNNI (quants.md §5.4-5.5, §8.4),
 * as iq2_avx512.c: the 64 grid indices of a block (two 4-element entries per group, IQ3_S's
 * 9th bit blending a second table half) go through vpermi2b into 3-bit code tables, reordered
 * (vpshufd) so vpunpck gives per chunk the codes of groups 0-1 and 2-3; vpmultishiftqb moves a
 * code to bits 3-5 for vpermb; signs via vpshufbitqmb, chunk scales via vpmulld. */
#include <immintrin.h>

#include "cpu_impl.h"
#include "hmoe/quant_blocks.h"
#include "iq_act_impl.h"
#include "iq_avx512_impl.h"
#include "iq_codes_impl.h"
#include "iq_tile_impl.h"

/* Entry order after vpshufd(0xd8) on the index bytes: byte j holds natural entry
 * e(j) = 16l + [0-3, 8-11, 4-7, 12-15][j % 16]; vpshufbitqmb reads IQ3_S's 9th index bits
 * (qh as one u64, bit e = entry e) in that order. */
static const uint8_t entry_of[64] __attribute__((aligned(64))) = {
    0,  1,  2,  3,  8,  9,  10, 11, 4,  5,  6,  7,  12, 13, 14, 15, 16, 17, 18, 19, 24, 25,
    26, 27, 20, 21, 22, 23, 28, 29, 30, 31, 32, 33, 34, 35, 40, 41, 42, 43, 36, 37, 38, 39,
    44, 45, 46, 47, 48, 49, 50, 51, 56, 57, 58, 59, 52, 53, 54, 55, 60, 61, 62, 63};
/* [row A sign bytes 4c + g | row B 32 + 4c + g] -> qword c = [A groups 0-3 | B groups 0-3] */
static const uint8_t sgn_order[64] __attribute__((aligned(64))) = {
    0,  1,  2,  3,  32, 33, 34, 35, 4,  5,  6,  7,  36, 37, 38, 39, 8,  9,  10, 11, 40, 41,
    42, 43, 12, 13, 14, 15, 44, 45, 46, 47, 16, 17, 18, 19, 48, 49, 50, 51, 20, 21, 22, 23,
    52, 53, 54, 55, 24, 25, 26, 27, 56, 57, 58, 59, 28, 29, 30, 31, 60, 61, 62, 63};

/* vpmultishiftqb control for group g' (0/1) of an S01 / S23 qword [lo, hi] × 4 entries:
 * element k is in entry 2g' + k/4, byte lo (k%4 < 2) or hi, at bit 3·(k%2); the byte taken
 * starts 3 bits lower so the code lands in bits 3-5. */
static inline __m512i iq3_ms_ctrl(int gp) {
    uint64_t c = 0;
    for (int k = 0; k < 8; k++) {
        const int pos = 8 * (2 * (2 * gp + k / 4) + (k % 4) / 2) + 3 * (k % 2);
        c |= (uint64_t)((pos - 3) & 63) << (8 * k);
    }
    return _mm512_set1_epi64((long long)c);
}

static inline __m512i lut128(const uint8_t *t, int p, __m512i idx) {
    return _mm512_permutex2var_epi8(_mm512_load_si512(t + 128 * p), idx, _mm512_load_si512(t + 128 * p + 64));
}

/* S01 / S23 code vectors of one row from its 64 index bytes q (natural order); k8 = the
 * 9th index bits in reordered order (512-entry grid) when wide. */
static inline void iq3_codes(const struct hmoe_cpu_iq_codebook *cb, __m512i q, __mmask64 k8, const int wide,
                             __m512i *s01, __m512i *s23) {
    const __m512i idx = _mm512_shuffle_epi32(q, (_MM_PERM_ENUM)0xd8);
    const __mmask64 k7 = _mm512_movepi8_mask(idx);
    __m512i lo = _mm512_mask_blend_epi8(k7, lut128(cb->lo, 0, idx), lut128(cb->lo, 1, idx));
    __m512i hi = _mm512_mask_blend_epi8(k7, lut128(cb->hi, 0, idx), lut128(cb->hi, 1, idx));
    if (wide) {
        lo = _mm512_mask_blend_epi8(k8, lo, _mm512_mask_blend_epi8(k7, lut128(cb->lo, 2, idx), lut128(cb->lo, 3, idx)));
        hi = _mm512_mask_blend_epi8(k8, hi, _mm512_mask_blend_epi8(k7, lut128(cb->hi, 2, idx), lut128(cb->hi, 3, idx)));
    }
    *s01 = _mm512_unpacklo_epi8(lo, hi);
    *s23 = _mm512_unpackhi_epi8(lo, hi);
}

/* kind 0: IQ3_XXS, 1: IQ3_S */
static inline __attribute__((always_inline)) void iq3_tile(const char *wa, const char *wb, int64_t nb,
                                                           const struct hmoe_cpu_iq_act *x, float *oa, float *ob,
                                                           const int T, const int kind) {
    const struct hmoe_cpu_iq_codes *C = hmoe_cpu_iq_codes();
    const struct hmoe_cpu_iq_codebook *cb = kind == 0 ? &C->iq3xxs : &C->iq3s;
    const __m512i mag = _mm512_add_epi8(_mm512_load_si512(cb->perm_mag), _mm512_set1_epi8(64));
    const __m512i ks0 = _mm512_load_si512(C->ksigns), ks1 = _mm512_load_si512(C->ksigns + 64);
    const __m512i csgn = _mm512_load_si512(sgn_order), ment = _mm512_load_si512(entry_of);
    const __m512i k128 = _mm512_set1_epi8((char)128), one = _mm512_set1_epi32(1);
    const size_t bsz = kind == 0 ? sizeof(struct hmoe_block_iq3_xxs) : sizeof(struct hmoe_block_iq3_s);
    __m512d acc[HMOE_IQ_TILE_TOK];
    for (int t = 0; t < T; t++) acc[t] = _mm512_setzero_pd();

    for (int64_t i = 0; i < nb; i++) {
        const char *ba = wa + (size_t)i * bsz, *bb = wb + (size_t)i * bsz;
        const __m512i qa = _mm512_loadu_si512(ba + 2), qb = _mm512_loadu_si512(bb + 2); /* 64 grid indices */
        __m512i a01, a23, b01, b23, sg, sc2;
        if (kind == 0) {
            const struct hmoe_block_iq3_xxs *xa = (const void *)ba, *xb = (const void *)bb;
            iq3_codes(cb, qa, 0, 0, &a01, &a23);
            iq3_codes(cb, qb, 0, 0, &b01, &b23);
            /* sign/scale words: qword c = [row A word c | row B word c] */
            const __m512i w = _mm512_permutexvar_epi32(
                _mm512_set_epi32(15, 7, 14, 6, 13, 5, 12, 4, 11, 3, 10, 2, 9, 1, 8, 0),
                _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(xa->qs + 64))),
                                   _mm256_loadu_si256((const __m256i *)(xb->qs + 64)), 1));
            const __m512i f = _mm512_multishift_epi64_epi8(_mm512_set1_epi64(0x352e2720150e0700LL), w);
            sg = _mm512_permutex2var_epi8(ks0, f, ks1);
            sc2 = _mm512_or_si512(_mm512_srli_epi32(w, 27), one); /* 2s + bit 27, then | 1 */
        } else {
            const struct hmoe_block_iq3_s *sa = (const void *)ba, *sb = (const void *)bb;
            uint64_t ha, hb;
            __builtin_memcpy(&ha, sa->qh, 8);
            __builtin_memcpy(&hb, sb->qh, 8);
            iq3_codes(cb, qa, _mm512_bitshuffle_epi64_mask(_mm512_set1_epi64((long long)ha), ment), 1, &a01, &a23);
            iq3_codes(cb, qb, _mm512_bitshuffle_epi64_mask(_mm512_set1_epi64((long long)hb), ment), 1, &b01, &b23);
            sg = _mm512_permutexvar_epi8(
                csgn, _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)sa->signs)),
                                         _mm256_loadu_si256((const __m256i *)sb->signs), 1));
            /* 4-bit scale of chunk c: nibble c % 2 of scales[c / 2]; dword 2c row A, 2c + 1 row B */
            uint32_t s4a, s4b;
            __builtin_memcpy(&s4a, sa->scales, 4);
            __builtin_memcpy(&s4b, sb->scales, 4);
            const __m512i bytes = _mm512_maskz_permutexvar_epi8(
                0x1111111111111111ull, _mm512_set_epi32(7, 3, 7, 3, 6, 2, 6, 2, 5, 1, 5, 1, 4, 0, 4, 0),
                _mm512_castsi128_si512(_mm_cvtsi64_si128((long long)((uint64_t)s4a | (uint64_t)s4b << 32))));
            const __m512i s =
                _mm512_srlv_epi32(bytes, _mm512_set_epi32(4, 4, 0, 0, 4, 4, 0, 0, 4, 4, 0, 0, 4, 4, 0, 0));
            sc2 = _mm512_ternarylogic_epi32(_mm512_slli_epi32(s, 1), _mm512_set1_epi32(0x1e), one, 0xea);
        }
        __m512i va[4], vb[4];
#pragma GCC unroll 4
        for (int g = 0; g < 4; g++) {
            const __m512i cm = iq3_ms_ctrl(g & 1);
            va[g] = _mm512_permutexvar_epi8(_mm512_multishift_epi64_epi8(cm, g < 2 ? a01 : a23), mag);
            vb[g] = _mm512_permutexvar_epi8(_mm512_multishift_epi64_epi8(cm, g < 2 ? b01 : b23), mag);
            va[g] = _mm512_mask_sub_epi8(va[g], _mm512_bitshuffle_epi64_mask(sg, hmoe_iq512_ms_ctrl(8 * g, 1)), k128,
                                         va[g]);
            vb[g] = _mm512_mask_sub_epi8(vb[g], _mm512_bitshuffle_epi64_mask(sg, hmoe_iq512_ms_ctrl(8 * g + 32, 1)),
                                         k128, vb[g]);
        }
        const __m512d dd = hmoe_iq512_pair_d(ba, bb);
#pragma GCC unroll 8
        for (int t = 0; t < T; t++) hmoe_iq512_dots(va, vb, sc2, sc2, 0, dd, x + t * nb + i, &acc[t]);
    }
    for (int t = 0; t < T; t++) hmoe_iq512_store_pair(acc[t], kind == 0 ? 0.25 : 1.0, oa + t, ob + t);
}

#define IQ3XXS_BODY(wa, wb, nb, x, oa, ob, T) iq3_tile(wa, wb, nb, x, oa, ob, T, 0)
#define IQ3S_BODY(wa, wb, nb, x, oa, ob, T) iq3_tile(wa, wb, nb, x, oa, ob, T, 1)
HMOE_IQ_TILES(iq3xxs512, IQ3XXS_BODY)
HMOE_IQ_DEFINE_GEMV_GEMM(iq3_xxs_avx512, iq3xxs512, HMOE_TYPE_IQ3_XXS, 64, 0, hmoe_cpu_iq_act_avx512)
HMOE_IQ_TILES(iq3s512, IQ3S_BODY)
HMOE_IQ_DEFINE_GEMV_GEMM(iq3_s_avx512, iq3s512, HMOE_TYPE_IQ3_S, 64, 0, hmoe_cpu_iq_act_avx512)
