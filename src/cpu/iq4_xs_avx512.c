/* iq4_xs_avx512.c — IQ4_XS × Q8_K with AVX-512 VBMI/VNNI (quants.md §5.9, §8.4): the four slices
 * of iq_act_impl.h are the low / high nibbles of the even / odd qwords of qs (vpermt2q);
 * vpermb with kvalues + 128 gives unsigned weights for vpdpbusd (corr removes the 128) and
 * vpmulld applies the signed 6-bit scales ls - 32 per chunk, two rows per pass. */
#include <immintrin.h>

#include "cpu_impl.h"
#include "hmoe/quant_blocks.h"
#include "iq_act_impl.h"
#include "iq_avx512_impl.h"
#include "iq_codes_impl.h"
#include "iq_tile_impl.h"

/* The four slices of one row's block: kvalues[code] + 128 for elements 8g..8g+7 of chunk c. */
static inline void iq4xs_slices(const struct hmoe_block_iq4_xs *b, __m512i tab, __m512i v[4]) {
    const __m512i q0 = _mm512_loadu_si512(b->qs), q1 = _mm512_loadu_si512(b->qs + 64);
    const __m512i ev = _mm512_permutex2var_epi64(q0, _mm512_set_epi64(14, 12, 10, 8, 6, 4, 2, 0), q1);
    const __m512i od = _mm512_permutex2var_epi64(q0, _mm512_set_epi64(15, 13, 11, 9, 7, 5, 3, 1), q1);
    v[0] = _mm512_permutexvar_epi8(ev, tab);
    v[1] = _mm512_permutexvar_epi8(od, tab);
    v[2] = _mm512_permutexvar_epi8(_mm512_srli_epi16(ev, 4), tab);
    v[3] = _mm512_permutexvar_epi8(_mm512_srli_epi16(od, 4), tab);
}

/* ls - 32 of chunk c for rows A (dword 2c) and B (2c + 1): low 4 bits from nibble c of
 * scales_l (as one u32), high 2 bits from bits 2c..2c+1 of scales_h. */
static inline __m512i iq4xs_scales(const struct hmoe_block_iq4_xs *a, const struct hmoe_block_iq4_xs *b) {
    uint32_t la, lb;
    __builtin_memcpy(&la, a->scales_l, 4);
    __builtin_memcpy(&lb, b->scales_l, 4);
    const __m512i l = _mm512_set1_epi64((long long)((uint64_t)la | (uint64_t)lb << 32));
    const __m512i h = _mm512_set1_epi64((long long)((uint64_t)a->scales_h | (uint64_t)b->scales_h << 32));
    const __m512i c2 = _mm512_set_epi32(14, 14, 12, 12, 10, 10, 8, 8, 6, 6, 4, 4, 2, 2, 0, 0); /* 2c */
    const __m512i lo = _mm512_srlv_epi32(l, _mm512_add_epi32(c2, c2)); /* nibble c in bits 0-3 */
    const __m512i hi = _mm512_and_si512(_mm512_rorv_epi32(h, _mm512_sub_epi32(c2, _mm512_set1_epi32(4))),
                                        _mm512_set1_epi32(0x30));                        /* bits 2c, 2c+1 -> 4, 5 */
    const __m512i ls = _mm512_ternarylogic_epi32(lo, hi, _mm512_set1_epi32(0x0f), 0xec); /* (lo & 15) | hi */
    return _mm512_sub_epi32(ls, _mm512_set1_epi32(32));
}

static inline __attribute__((always_inline)) void iq4xs_tile(const char *wa, const char *wb, int64_t nb,
                                                             const struct hmoe_cpu_iq_act *x, float *oa, float *ob,
                                                             const int T) {
    const __m512i tab = _mm512_load_si512(hmoe_cpu_iq_codes()->iq4nl_u8); /* kvalues + 128 */
    __m512d acc[HMOE_IQ_TILE_TOK];
    for (int t = 0; t < T; t++) acc[t] = _mm512_setzero_pd();

    for (int64_t i = 0; i < nb; i++) {
        const struct hmoe_block_iq4_xs *ba = (const struct hmoe_block_iq4_xs *)wa + i;
        const struct hmoe_block_iq4_xs *bb = (const struct hmoe_block_iq4_xs *)wb + i;
        __m512i va[4], vb[4];
        iq4xs_slices(ba, tab, va);
        iq4xs_slices(bb, tab, vb);
        const __m512i sc2 = iq4xs_scales(ba, bb);
        const __m512d dd = hmoe_iq512_pair_d(&ba->d, &bb->d);
#pragma GCC unroll 8
        for (int t = 0; t < T; t++) hmoe_iq512_dots(va, vb, sc2, sc2, 0, dd, x + t * nb + i, &acc[t]);
    }
    for (int t = 0; t < T; t++) hmoe_iq512_store_pair(acc[t], 1.0, oa + t, ob + t);
}

#define IQ4XS_BODY(wa, wb, nb, x, oa, ob, T) iq4xs_tile(wa, wb, nb, x, oa, ob, T)
HMOE_IQ_TILES(iq4xs512, IQ4XS_BODY)
HMOE_IQ_DEFINE_GEMV_GEMM(iq4_xs_avx512, iq4xs512, HMOE_TYPE_IQ4_XS, 128, 0, hmoe_cpu_iq_act_avx512)
