/* iq2_avx512.c — IQ2_XXS/IQ2_XS/IQ2_S × Q8_K with AVX-512 VBMI/BITALG/VNNI/GFNI (quants.md
 * §5.1-5.3, §8.4), no gathers. Two rows' 64 grid indices go through vpermi2b into the 2-bit
 * code tables (iq_codes_impl.h); per slice (iq_act_impl.h) vpmultishiftqb puts each element's
 * code in bits 4-5 and vgf2p8affineqb (or vpermb, iq2_mag) maps it to 64 + magnitude,
 * vpshufbitqmb turns the sign bytes into element masks (negative: 64 - magnitude), vpdpbusd
 * sums, the activations' corr removes the 64 and vpmulld applies the 2s+1 scales. */
#include <immintrin.h>

#include "cpu_impl.h"
#include "hmoe/quant_blocks.h"
#include "iq_act_impl.h"
#include "iq_avx512_impl.h"
#include "iq_codes_impl.h"
#include "iq_tile_impl.h"

/* Index vectors for the lookups: byte 16l + 4m + g (+8 for row B, whose source bytes are
 * +64 in vpermi2b) = grid index of group g of chunk c = 2l + m, so that vpunpck{l,h}bw of
 * the lo/hi codes give qword c = chunk c (row A, row B). Source position of that index:
 * IQ2_XXS byte 8c + g; IQ2_XS low byte of u16 4c + g (byte 8c + 2g); IQ2_S byte 4c + g. */
static const uint8_t idx_xxs[64] __attribute__((aligned(64))) = {
    0,   1,   2,   3,   8,  9,  10, 11, 64, 65, 66, 67, 72,  73,  74,  75,  16,  17,  18,  19, 24, 25,
    26,  27,  80,  81,  82, 83, 88, 89, 90, 91, 32, 33, 34,  35,  40,  41,  42,  43,  96,  97, 98, 99,
    104, 105, 106, 107, 48, 49, 50, 51, 56, 57, 58, 59, 112, 113, 114, 115, 120, 121, 122, 123};
static const uint8_t idx_xs[64] __attribute__((aligned(64))) = {
    0,   2,   4,   6,   8,  10, 12, 14, 64, 66, 68, 70, 72,  74,  76,  78,  16,  18,  20,  22, 24,  26,
    28,  30,  80,  82,  84, 86, 88, 90, 92, 94, 32, 34, 36,  38,  40,  42,  44,  46,  96,  98, 100, 102,
    104, 106, 108, 110, 48, 50, 52, 54, 56, 58, 60, 62, 112, 114, 116, 118, 120, 122, 124, 126};
static const uint8_t idx_s[64] __attribute__((aligned(64))) = {
    0,  1,  2,  3,  4,  5,  6,  7,  64, 65, 66, 67, 68, 69, 70, 71, 8,  9,  10, 11, 12, 13,
    14, 15, 72, 73, 74, 75, 76, 77, 78, 79, 16, 17, 18, 19, 20, 21, 22, 23, 80, 81, 82, 83,
    84, 85, 86, 87, 24, 25, 26, 27, 28, 29, 30, 31, 88, 89, 90, 91, 92, 93, 94, 95};
/* Sign sources in the bitshuffle layout, qword c = [row A groups 0-3 | row B groups 0-3]
 * of chunk c: IQ2_XS high byte of u16 4c + g (byte 8c + 2g + 1, sign field in bits 1-7);
 * IQ2_S explicit sign byte 32 + 4c + g. */
static const uint8_t sgn_xs[64] __attribute__((aligned(64))) = {
    1,   3,   5,   7,   65, 67, 69, 71, 9,   11,  13,  15,  73, 75, 77, 79, 17,  19,  21,  23, 81, 83,
    85,  87,  25,  27,  29, 31, 89, 91, 93,  95,  33,  35,  37, 39, 97, 99, 101, 103, 41,  43, 45, 47,
    105, 107, 109, 111, 49, 51, 53, 55, 113, 115, 117, 119, 57, 59, 61, 63, 121, 123, 125, 127};
static const uint8_t sgn_s[64] __attribute__((aligned(64))) = {
    32,  33,  34,  35,  96, 97, 98,  99,  36,  37,  38,  39,  100, 101, 102, 103, 40,  41,  42,  43, 104, 105,
    106, 107, 44,  45,  46, 47, 108, 109, 110, 111, 48,  49,  50,  51,  112, 113, 114, 115, 52,  53, 54,  55,
    116, 117, 118, 119, 56, 57, 58,  59,  120, 121, 122, 123, 60,  61,  62,  63,  124, 125, 126, 127};

/* A codebook's lo/hi tables (looked up 128 entries at a time) and the constant vectors. */
struct iq2_luts {
    const uint8_t *lo, *hi;
    __m512i gf;  /* vgf2p8affineqb matrix: code in bits 4-5 -> 64 + magnitude (with HMOE_IQ2_GF_BIAS) */
    __m512i mag; /* the same map as a vpermb table */
    __m512i ks0, ks1;
};

static inline struct iq2_luts iq2_luts_init(const struct hmoe_cpu_iq_codes *C, const struct hmoe_cpu_iq_codebook *cb) {
    struct iq2_luts L;
    L.lo = cb->lo;
    L.hi = cb->hi;
    L.gf = _mm512_set1_epi64((long long)cb->gf_mag);
    L.mag = _mm512_add_epi8(_mm512_load_si512(cb->perm_mag), _mm512_set1_epi8(64));
    L.ks0 = _mm512_load_si512(C->ksigns);
    L.ks1 = _mm512_load_si512(C->ksigns + 64);
    return L;
}

/* Codes of the 128-entry piece p (entries 128p .. 128p + 127) for each index byte. */
static inline __m512i lut128(const uint8_t *t, int p, __m512i idx) {
    return _mm512_permutex2var_epi8(_mm512_load_si512(t + 128 * p), idx, _mm512_load_si512(t + 128 * p + 64));
}

/* Qword c of *ca / *cb = chunk c's four 16-bit group codes of row A / row B, for index
 * bytes idx (bits 0-7) plus higher bits in masks k8, k9 (tables of 256 << nhigh entries). */
static inline void iq2_codes(const struct iq2_luts *L, __m512i idx, __mmask64 k8, __mmask64 k9, const int nhigh,
                             __m512i *ca, __m512i *cb) {
    const __mmask64 k7 = _mm512_movepi8_mask(idx);
    __m512i lo = _mm512_mask_blend_epi8(k7, lut128(L->lo, 0, idx), lut128(L->lo, 1, idx));
    __m512i hi = _mm512_mask_blend_epi8(k7, lut128(L->hi, 0, idx), lut128(L->hi, 1, idx));
    if (nhigh >= 1) {
        __m512i lo1 = _mm512_mask_blend_epi8(k7, lut128(L->lo, 2, idx), lut128(L->lo, 3, idx));
        __m512i hi1 = _mm512_mask_blend_epi8(k7, lut128(L->hi, 2, idx), lut128(L->hi, 3, idx));
        if (nhigh >= 2) {
            const __m512i lo2 =
                _mm512_mask_blend_epi8(k8, _mm512_mask_blend_epi8(k7, lut128(L->lo, 4, idx), lut128(L->lo, 5, idx)),
                                       _mm512_mask_blend_epi8(k7, lut128(L->lo, 6, idx), lut128(L->lo, 7, idx)));
            const __m512i hi2 =
                _mm512_mask_blend_epi8(k8, _mm512_mask_blend_epi8(k7, lut128(L->hi, 4, idx), lut128(L->hi, 5, idx)),
                                       _mm512_mask_blend_epi8(k7, lut128(L->hi, 6, idx), lut128(L->hi, 7, idx)));
            lo1 = _mm512_mask_blend_epi8(k8, lo, lo1);
            hi1 = _mm512_mask_blend_epi8(k8, hi, hi1);
            lo = _mm512_mask_blend_epi8(k9, lo1, lo2);
            hi = _mm512_mask_blend_epi8(k9, hi1, hi2);
        } else {
            lo = _mm512_mask_blend_epi8(k8, lo, lo1);
            hi = _mm512_mask_blend_epi8(k8, hi, hi1);
        }
    }
    *ca = _mm512_unpacklo_epi8(lo, hi);
    *cb = _mm512_unpackhi_epi8(lo, hi);
}

/* 64 + magnitude of the code in bits 4-5 of each byte. IQ2_XXS / IQ2_XS use the GF(2)
 * affine map, which runs beside the shuffles; IQ2_S, whose three-table lookup and blends
 * keep the other port busier, measured faster with vpermb. */
static inline __m512i iq2_mag(const struct iq2_luts *L, __m512i x, const int kind) {
    return kind == 2 ? _mm512_permutexvar_epi8(x, L->mag) : _mm512_gf2p8affine_epi64_epi8(x, L->gf, HMOE_IQ2_GF_BIAS);
}

/* Slice g of rows A and B: 64 ± magnitude, sign bit k of group g of chunk c in bit
 * 8g + k (row A) / 32 + 8g + k (row B) of qword c of sg. */
static inline void iq2_expand(const struct iq2_luts *L, __m512i ca, __m512i cb, __m512i sg, __m512i va[4],
                              __m512i vb[4], const int kind) {
    const __m512i k128 = _mm512_set1_epi8((char)128);
#pragma GCC unroll 4
    for (int g = 0; g < 4; g++) {
        const __m512i cm = hmoe_iq512_ms_ctrl(16 * g - 4, 2);
        va[g] = iq2_mag(L, _mm512_multishift_epi64_epi8(cm, ca), kind);
        vb[g] = iq2_mag(L, _mm512_multishift_epi64_epi8(cm, cb), kind);
        va[g] =
            _mm512_mask_sub_epi8(va[g], _mm512_bitshuffle_epi64_mask(sg, hmoe_iq512_ms_ctrl(8 * g, 1)), k128, va[g]);
        vb[g] = _mm512_mask_sub_epi8(vb[g], _mm512_bitshuffle_epi64_mask(sg, hmoe_iq512_ms_ctrl(8 * g + 32, 1)), k128,
                                     vb[g]);
    }
}

/* kind 0: IQ2_XXS, 1: IQ2_XS, 2: IQ2_S */
static inline __attribute__((always_inline)) void iq2_tile(const char *wa, const char *wb, int64_t nb,
                                                           const struct hmoe_cpu_iq_act *x, float *oa, float *ob,
                                                           const int T, const int kind) {
    const struct hmoe_cpu_iq_codes *C = hmoe_cpu_iq_codes();
    const struct iq2_luts L = iq2_luts_init(C, kind == 0 ? &C->iq2xxs : kind == 1 ? &C->iq2xs : &C->iq2s);
    const __m512i cidx = _mm512_load_si512(kind == 0 ? idx_xxs : kind == 1 ? idx_xs : idx_s);
    const __m512i csgn = _mm512_load_si512(kind == 1 ? sgn_xs : sgn_s);
    const size_t bsz = kind == 0   ? sizeof(struct hmoe_block_iq2_xxs)
                       : kind == 1 ? sizeof(struct hmoe_block_iq2_xs)
                                   : sizeof(struct hmoe_block_iq2_s);
    __m512d acc[HMOE_IQ_TILE_TOK];
    for (int t = 0; t < T; t++) acc[t] = _mm512_setzero_pd();

    for (int64_t i = 0; i < nb; i++) {
        const char *ba = wa + (size_t)i * bsz, *bb = wb + (size_t)i * bsz;
        /* every IQ2 block is d (fp16) followed by 64 bytes of indices / signs */
        const __m512i qa = _mm512_loadu_si512(ba + 2), qb = _mm512_loadu_si512(bb + 2);
        const __m512i idx = _mm512_permutex2var_epi8(qa, cidx, qb);
        __m512i ca, cb, sg, sclo, schi = _mm512_setzero_si512();
        if (kind == 0) {
            iq2_codes(&L, idx, 0, 0, 0, &ca, &cb);
            /* ksigns of the 7-bit fields at bits 32 + 7g of each chunk's qword: bytes 0-3
             * of qword c from row A, bytes 4-7 from row B */
            const __m512i cfld = _mm512_set1_epi64(0x352e2720352e2720LL);
            __m512i f = _mm512_multishift_epi64_epi8(cfld, qa);
            f = _mm512_mask_multishift_epi64_epi8(f, 0xf0f0f0f0f0f0f0f0ull, cfld, qb);
            sg = _mm512_permutex2var_epi8(L.ks0, f, L.ks1);
            sclo = hmoe_iq512_top_nibble_scales(qa, qb);
        } else if (kind == 1) {
            /* u16 per group: index bits 0-8, sign field bits 9-15 */
            const __m512i hb = _mm512_permutex2var_epi8(qa, _mm512_or_si512(cidx, _mm512_set1_epi8(1)), qb);
            iq2_codes(&L, idx, _mm512_test_epi8_mask(hb, _mm512_set1_epi8(1)), 0, 1, &ca, &cb);
            const __m512i hs = _mm512_permutex2var_epi8(qa, csgn, qb);
            sg = _mm512_permutex2var_epi8(L.ks0, _mm512_srli_epi16(hs, 1), L.ks1); /* vpermi2b ignores bit 7 */
            const struct hmoe_block_iq2_xs *xa = (const void *)ba, *xb = (const void *)bb;
            hmoe_iq512_nibble_scales(xa->scales, xb->scales, &sclo, &schi);
        } else {
            /* index bits 8-9 of group g of chunk c: bits 2g, 2g + 1 of qh[c]; bitshuffle
             * reads them from qword j of the index layout = chunks 2l, 2l + 1 of one row */
            const struct hmoe_block_iq2_s *sa = (const void *)ba, *sb = (const void *)bb;
            uint64_t ha, hb;
            __builtin_memcpy(&ha, sa->qh, 8);
            __builtin_memcpy(&hb, sb->qh, 8);
            const __m512i qh =
                _mm512_permutexvar_epi16(_mm512_set_epi64(7, 3, 6, 2, 5, 1, 4, 0),
                                         _mm512_castsi128_si512(_mm_set_epi64x((long long)hb, (long long)ha)));
            iq2_codes(&L, idx, _mm512_bitshuffle_epi64_mask(qh, hmoe_iq512_ms_ctrl(0, 2)),
                      _mm512_bitshuffle_epi64_mask(qh, hmoe_iq512_ms_ctrl(1, 2)), 2, &ca, &cb);
            sg = _mm512_permutex2var_epi8(qa, csgn, qb);
            hmoe_iq512_nibble_scales(sa->scales, sb->scales, &sclo, &schi);
        }
        __m512i va[4], vb[4];
        iq2_expand(&L, ca, cb, sg, va, vb, kind);
        const __m512d dd = hmoe_iq512_pair_d(ba, bb);
#pragma GCC unroll 8
        for (int t = 0; t < T; t++) hmoe_iq512_dots(va, vb, sclo, schi, kind != 0, dd, x + t * nb + i, &acc[t]);
    }
    for (int t = 0; t < T; t++) hmoe_iq512_store_pair(acc[t], 0.125, oa + t, ob + t);
}

#define IQ2XXS_BODY(wa, wb, nb, x, oa, ob, T) iq2_tile(wa, wb, nb, x, oa, ob, T, 0)
#define IQ2XS_BODY(wa, wb, nb, x, oa, ob, T) iq2_tile(wa, wb, nb, x, oa, ob, T, 1)
#define IQ2S_BODY(wa, wb, nb, x, oa, ob, T) iq2_tile(wa, wb, nb, x, oa, ob, T, 2)
HMOE_IQ_TILES(iq2xxs512, IQ2XXS_BODY)
HMOE_IQ_DEFINE_GEMV_GEMM(iq2_xxs_avx512, iq2xxs512, HMOE_TYPE_IQ2_XXS, 64, 0, hmoe_cpu_iq_act_avx512)
HMOE_IQ_TILES(iq2xs512, IQ2XS_BODY)
HMOE_IQ_DEFINE_GEMV_GEMM(iq2_xs_avx512, iq2xs512, HMOE_TYPE_IQ2_XS, 64, 1, hmoe_cpu_iq_act_avx512)
HMOE_IQ_TILES(iq2s512, IQ2S_BODY)
HMOE_IQ_DEFINE_GEMV_GEMM(iq2_s_avx512, iq2s512, HMOE_TYPE_IQ2_S, 64, 1, hmoe_cpu_iq_act_avx512)
