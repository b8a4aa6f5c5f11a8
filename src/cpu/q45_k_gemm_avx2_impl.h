/* q45_k_gemm_avx2_impl.h — private to src/cpu: the Q4_K / Q5_K prefill gemm tile for 16 YMM
 * registers (1 weight row × up to 8 tokens), included by q45_k_dec_avx2_impl.h, so that each
 * includer builds it with its own instructions (HMOE_K45D_VNNI 0: vpmaddubsw into int16 sums;
 * 1: VEX vpdpbusd into int32 sums).
 *
 * Why the weights are rearranged: a block's 8 sub-blocks of 32 lie in four 32-byte runs
 * (run p: low nibbles = sub-block 2p, high = 2p+1, quants.md §4.4), so a run's register has
 * one sub-block in every int32 lane, and the per-sub-block scale would have to be applied to
 * each of the 8 nibble registers per token (a multiply-add per 32 elements). Blending the runs
 * so that dword pair m of every register comes from run m (and rotating the pairs by one
 * vpermd per chunk, so that the 4 chunks together hold each run's 8 dwords once) gives 8
 * registers with the same lane -> sub-block map: the 8 products of a token sum into two
 * registers (low / high nibbles) and are scaled once per block:
 *   chunk c, dword pair m  = bytes 8·((m + c) & 3) .. +7 of run m,
 *   low nibbles: sub-block 2m, high nibbles: sub-block 2m + 1.
 * The activation rows are put in the same order once per token tile (k45g_prep), so the
 * weight side costs ~30 instructions per row and block for all tokens of the tile, and a
 * token costs per block 8 vpdpbusd (or 8 vpmaddubsw + 6 vpaddw), the scale multiply, one
 * vpmaddwd for the mins and one double FMA for sums and mins together, instead of 16
 * multiply-adds and two double FMAs.
 *
 * Integer bounds (activations in [-128, 127]):
 *  - VNNI: an int32 lane sums 4 chunks × 4 products: ≤ 16·15·128 = 30720 for Q4_K, so the
 *    two sums pack to words exactly (vpackssdw) and one vpmaddwd scales them; Q5_K
 *    (≤ 16·31·128 = 63488) takes vpmulld on the dwords;
 *  - plain AVX2: a word of vpmaddubsw sums 2 products and 4 chunks add up to
 *    8·31·128 = 31744 < 2^15 for both types, so the words add without saturation and one
 *    vpmaddwd per half scales them.
 * The block's int32 sums and mins are reduced to two partial sums each (one vphaddd and
 * one add of the halves) and scaled and summed over blocks in double, like the reference:
 * in float, a block whose sums and mins nearly cancel loses more than the tests' 1e-5.
 */
#ifndef HMOE_CPU_Q45_K_GEMM_AVX2_IMPL_H
#define HMOE_CPU_Q45_K_GEMM_AVX2_IMPL_H

#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "hmoe/quant_blocks.h"
#include "tile_impl.h"

/* One activation block in the chunk order above: chunk c at qs[64c] (low-nibble partners)
 * and qs[64c + 32] (high-nibble partners), then Q8_K's bsums and d. */
struct k45g_act {
    int8_t qs[256];
    int16_t bsums[16];
    double d; /* the Q8_K block's d, widened once here */
    char pad[24];
};
_Static_assert(sizeof(struct k45g_act) % 32 == 0, "prepared blocks must stay 32-byte aligned (aligned loads)");

/* The 4 chunks z[c] of four 32-byte runs r[m]: dword pair m of chunk c = bytes
 * 8·((m + c) & 3) .. +7 of run m (blends, then one vpermd per chunk for the rotation). */
static inline __attribute__((always_inline)) void k45g_chunks(const __m256i r0, const __m256i r1, const __m256i r2,
                                                             const __m256i r3, __m256i z[4]) {
    /* chunk c before the rotation: dword pair m from run (m - c) & 3 at its own position */
    const __m256i y0 = _mm256_blend_epi32(_mm256_blend_epi32(r0, r1, 0x0C), _mm256_blend_epi32(r2, r3, 0xC0), 0xF0);
    const __m256i y1 = _mm256_blend_epi32(_mm256_blend_epi32(r3, r0, 0x0C), _mm256_blend_epi32(r1, r2, 0xC0), 0xF0);
    const __m256i y2 = _mm256_blend_epi32(_mm256_blend_epi32(r2, r3, 0x0C), _mm256_blend_epi32(r0, r1, 0xC0), 0xF0);
    const __m256i y3 = _mm256_blend_epi32(_mm256_blend_epi32(r1, r2, 0x0C), _mm256_blend_epi32(r3, r0, 0xC0), 0xF0);
    /* pair m of chunk c <- pair (m + c) & 3 */
    z[0] = y0;
    z[1] = _mm256_permutevar8x32_epi32(y1, _mm256_setr_epi32(2, 3, 4, 5, 6, 7, 0, 1));
    z[2] = _mm256_permutevar8x32_epi32(y2, _mm256_setr_epi32(4, 5, 6, 7, 0, 1, 2, 3));
    z[3] = _mm256_permutevar8x32_epi32(y3, _mm256_setr_epi32(6, 7, 0, 1, 2, 3, 4, 5));
}

/* The activations take the weights' order: the low-nibble partners of run m are Q8_K quants
 * 64m .. 64m + 31, the high-nibble partners the next 32. */
static inline void k45g_prep(char *dst, const char *src, int64_t nb) {
    for (int64_t i = 0; i < nb; i++) {
        const struct hmoe_block_q8_k *a = (const struct hmoe_block_q8_k *)src + i;
        struct k45g_act *g = (struct k45g_act *)dst + i;
        for (int h = 0; h < 2; h++) {
            __m256i z[4];
            k45g_chunks(_mm256_loadu_si256((const __m256i *)(a->qs + 32 * h)),
                        _mm256_loadu_si256((const __m256i *)(a->qs + 64 + 32 * h)),
                        _mm256_loadu_si256((const __m256i *)(a->qs + 128 + 32 * h)),
                        _mm256_loadu_si256((const __m256i *)(a->qs + 192 + 32 * h)), z);
            for (int c = 0; c < 4; c++) _mm256_store_si256((__m256i *)(g->qs + 64 * c + 32 * h), z[c]);
        }
        memcpy(g->bsums, a->bsums, sizeof g->bsums);
        g->d = a->d;
        memset(g->pad, 0, sizeof g->pad);
    }
}

/* 32 bytes from two 16-byte halves of a shuffle-control pattern (k45g_tile's scale vectors). */
static inline __m256i k45g_ctl(const char lo[16], const char hi[16]) {
    return _mm256_set_m128i(_mm_loadu_si128((const __m128i *)hi), _mm_loadu_si128((const __m128i *)lo));
}

/* out[t] = dot(the weight row at w, prepared activation row t at x + t·xs), t < T. */
static inline __attribute__((always_inline)) void k45g_tile(const char *w, int64_t nb, const char *x, size_t xs,
                                                           float *out, const int T, const size_t block_bytes,
                                                           const size_t qs_off, const int has_qh,
                                                           const size_t qh_off) {
    __m256d acc[HMOE_TILE_MAX_TOK];
    for (int t = 0; t < T; t++) acc[t] = _mm256_setzero_pd();
    const __m256i m4 = _mm256_set1_epi8(0x0f), b4 = _mm256_set1_epi8(0x10);
    const __m128i dup_mins = _mm_set_epi8(15, 15, 14, 14, 13, 13, 12, 12, 11, 11, 10, 10, 9, 9, 8, 8);
    const char Z = (char)0x80; /* vpshufb: zero byte */
#if HMOE_K45D_VNNI
    /* Q4_K: words of vpackssdw(lo sums, hi sums) per 128-bit half: lo dwords 0-3, hi dwords
     * 0-3 (half 1: dwords 4-7), i.e. sub-blocks [0 0 2 2 1 1 3 3 | 4 4 6 6 5 5 7 7] */
    static const char pk_lo[16] = {0, Z, 0, Z, 2, Z, 2, Z, 1, Z, 1, Z, 3, Z, 3, Z};
    static const char pk_hi[16] = {4, Z, 4, Z, 6, Z, 6, Z, 5, Z, 5, Z, 7, Z, 7, Z};
    /* Q5_K: dwords of the lo / hi sums, sub-blocks [0 0 2 2 4 4 6 6] / [1 1 3 3 5 5 7 7] */
    static const char dw_lo0[16] = {0, Z, Z, Z, 0, Z, Z, Z, 2, Z, Z, Z, 2, Z, Z, Z};
    static const char dw_lo1[16] = {4, Z, Z, Z, 4, Z, Z, Z, 6, Z, Z, Z, 6, Z, Z, Z};
    static const char dw_hi0[16] = {1, Z, Z, Z, 1, Z, Z, Z, 3, Z, Z, Z, 3, Z, Z, Z};
    static const char dw_hi1[16] = {5, Z, Z, Z, 5, Z, Z, Z, 7, Z, Z, Z, 7, Z, Z, Z};
    const __m256i ctl_a = has_qh ? k45g_ctl(dw_lo0, dw_lo1) : k45g_ctl(pk_lo, pk_hi);
    const __m256i ctl_b = has_qh ? k45g_ctl(dw_hi0, dw_hi1) : ctl_a;
#else
    /* words of the lo / hi int16 sums: sub-blocks [0 ×4, 2 ×4 | 4 ×4, 6 ×4] / [1, 3 | 5, 7] */
    static const char w_lo0[16] = {0, Z, 0, Z, 0, Z, 0, Z, 2, Z, 2, Z, 2, Z, 2, Z};
    static const char w_lo1[16] = {4, Z, 4, Z, 4, Z, 4, Z, 6, Z, 6, Z, 6, Z, 6, Z};
    static const char w_hi0[16] = {1, Z, 1, Z, 1, Z, 1, Z, 3, Z, 3, Z, 3, Z, 3, Z};
    static const char w_hi1[16] = {5, Z, 5, Z, 5, Z, 5, Z, 7, Z, 7, Z, 7, Z, 7, Z};
    const __m256i ctl_a = k45g_ctl(w_lo0, w_lo1), ctl_b = k45g_ctl(w_hi0, w_hi1);
#endif
    /* Q5_K: byte k of qword m of chunk c tests bit 2m (low nibble) / 2m + 1 (high) */
    const __m256i hb_lo = _mm256_set_epi64x(0x4040404040404040, 0x1010101010101010, 0x0404040404040404,
                                            0x0101010101010101);
    const __m256i hb_hi = _mm256_add_epi8(hb_lo, hb_lo);
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *b = (const uint8_t *)w + (size_t)i * block_bytes;
        const __m128i scmn16 = k45d_scales_mins(b);
        const __m256i scmn = _mm256_broadcastsi128_si256(scmn16);
        const __m256i sc_a = _mm256_shuffle_epi8(scmn, ctl_a), sc_b = _mm256_shuffle_epi8(scmn, ctl_b);
        const __m256i mn = _mm256_cvtepu8_epi16(_mm_shuffle_epi8(scmn16, dup_mins)); /* MN0,MN0,MN1,MN1,... */
        const __m256i r0 = _mm256_loadu_si256((const __m256i *)(b + qs_off));
        const __m256i r1 = _mm256_loadu_si256((const __m256i *)(b + qs_off + 32));
        const __m256i r2 = _mm256_loadu_si256((const __m256i *)(b + qs_off + 64));
        const __m256i r3 = _mm256_loadu_si256((const __m256i *)(b + qs_off + 96));
        __m256i qh = _mm256_setzero_si256();
        if (has_qh) qh = _mm256_loadu_si256((const __m256i *)(b + qh_off));
        __m256i lo[4], hi[4];
        __m256i z[4];
        k45g_chunks(r0, r1, r2, r3, z);
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) {
            lo[c] = _mm256_and_si256(z[c], m4);
            hi[c] = _mm256_and_si256(_mm256_srli_epi16(z[c], 4), m4);
            if (has_qh) { /* qword m of chunk c: qh bytes 8·((m + c) & 3) .. +7 */
                __m256i q = qh;
                if (c == 1) q = _mm256_permute4x64_epi64(qh, _MM_SHUFFLE(0, 3, 2, 1));
                if (c == 2) q = _mm256_permute4x64_epi64(qh, _MM_SHUFFLE(1, 0, 3, 2));
                if (c == 3) q = _mm256_permute4x64_epi64(qh, _MM_SHUFFLE(2, 1, 0, 3));
                lo[c] = _mm256_or_si256(lo[c], _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(q, hb_lo), hb_lo), b4));
                hi[c] = _mm256_or_si256(hi[c], _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(q, hb_hi), hb_hi), b4));
            }
        }
        const struct hmoe_block_q4_k *hdr = (const struct hmoe_block_q4_k *)b; /* d, dmin: same offsets in Q5_K */
        const double d = _cvtsh_ss(hdr->d), dmin = _cvtsh_ss(hdr->dmin);
        const __m256d dm = _mm256_setr_pd(d, d, -dmin, -dmin);
#pragma GCC unroll 8
        for (int t = 0; t < T; t++) {
            const struct k45g_act *a = (const struct k45g_act *)(x + (size_t)t * xs) + i;
            const __m256i *aq = (const __m256i *)a->qs;
#if HMOE_K45D_VNNI
            __m256i sl = _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), lo[0], _mm256_load_si256(aq + 0));
            __m256i sh = _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), hi[0], _mm256_load_si256(aq + 1));
            sl = _mm256_dpbusd_avx_epi32(sl, lo[1], _mm256_load_si256(aq + 2));
            sh = _mm256_dpbusd_avx_epi32(sh, hi[1], _mm256_load_si256(aq + 3));
            sl = _mm256_dpbusd_avx_epi32(sl, lo[2], _mm256_load_si256(aq + 4));
            sh = _mm256_dpbusd_avx_epi32(sh, hi[2], _mm256_load_si256(aq + 5));
            sl = _mm256_dpbusd_avx_epi32(sl, lo[3], _mm256_load_si256(aq + 6));
            sh = _mm256_dpbusd_avx_epi32(sh, hi[3], _mm256_load_si256(aq + 7));
            const __m256i is = has_qh ? _mm256_add_epi32(_mm256_mullo_epi32(sl, sc_a), _mm256_mullo_epi32(sh, sc_b))
                                      : _mm256_madd_epi16(_mm256_packs_epi32(sl, sh), sc_a);
#else
            __m256i sl = _mm256_maddubs_epi16(lo[0], _mm256_load_si256(aq + 0));
            __m256i sh = _mm256_maddubs_epi16(hi[0], _mm256_load_si256(aq + 1));
            sl = _mm256_add_epi16(sl, _mm256_maddubs_epi16(lo[1], _mm256_load_si256(aq + 2)));
            sh = _mm256_add_epi16(sh, _mm256_maddubs_epi16(hi[1], _mm256_load_si256(aq + 3)));
            sl = _mm256_add_epi16(sl, _mm256_maddubs_epi16(lo[2], _mm256_load_si256(aq + 4)));
            sh = _mm256_add_epi16(sh, _mm256_maddubs_epi16(hi[2], _mm256_load_si256(aq + 5)));
            sl = _mm256_add_epi16(sl, _mm256_maddubs_epi16(lo[3], _mm256_load_si256(aq + 6)));
            sh = _mm256_add_epi16(sh, _mm256_maddubs_epi16(hi[3], _mm256_load_si256(aq + 7)));
            const __m256i is = _mm256_add_epi32(_mm256_madd_epi16(sl, sc_a), _mm256_madd_epi16(sh, sc_b));
#endif
            /* [IS, IS, MS, MS] partial sums, scaled in double by [d, d, -dmin, -dmin] · da */
            const __m256i ms = _mm256_madd_epi16(_mm256_load_si256((const __m256i *)a->bsums), mn);
            const __m256i h = _mm256_hadd_epi32(is, ms);
            const __m128i h4 = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
            acc[t] = _mm256_fmadd_pd(_mm256_cvtepi32_pd(h4), _mm256_mul_pd(dm, _mm256_broadcast_sd(&a->d)), acc[t]);
        }
    }
    for (int t = 0; t < T; t++) {
        const __m128d s2 = _mm_add_pd(_mm256_castpd256_pd128(acc[t]), _mm256_extractf128_pd(acc[t], 1));
        out[t] = (float)_mm_cvtsd_f64(_mm_add_sd(s2, _mm_unpackhi_pd(s2, s2)));
    }
}

#define K45G_Q4K_TILE(w, rb, nb, x, xs, out, T)                                                                        \
    ((void)(rb),                                                                                                       \
     k45g_tile(w, nb, x, xs, out, T, sizeof(struct hmoe_block_q4_k), offsetof(struct hmoe_block_q4_k, qs), 0, 0))
#define K45G_Q5K_TILE(w, rb, nb, x, xs, out, T)                                                                        \
    ((void)(rb), k45g_tile(w, nb, x, xs, out, T, sizeof(struct hmoe_block_q5_k), offsetof(struct hmoe_block_q5_k, qs), \
                           1, offsetof(struct hmoe_block_q5_k, qh)))

#endif
