/* q6_k_gemm4_avx2_impl.h — private to src/cpu: the Q6_K prefill gemm on groups of 4 tokens
 * for 16 YMM registers, included by q6_k_dec_avx2_impl.h after q6k_tile (which takes the last
 * 1..3 tokens), so that each includer builds it with its own instructions (HMOE_Q6KD_VNNI).
 *
 * Per row and block the 256 six-bit values are unpacked once into 8 registers (q6k_tile's
 * layout: register g holds elements 32g..32g+31, sub-blocks 2g / 2g+1 in the two 128-bit
 * lanes) and the scale vectors once to the stack, where each token's vpmaddwd / vpdpwssd
 * reads them as memory operands; so a token's sum over the block lives in one register and
 * the tokens run one after the other (q6k_tile keeps one accumulator per token over the whole
 * block, which leaves no registers for more than 8 tokens). Per token and block, AVX-VNNI: 8
 * vpdpbusd into zeroed registers (a dword sums 4 products, |.| <= 4·63·128 < 2^15), the two
 * registers of a pair packed to words (vpackssdw, exact: a word holds 4 elements of one
 * sub-block) and scaled by one vpdpwssd, which moves a quarter of the work to the shuffle port
 * (8 vpmaddubsw + 8 vpdpwssd all need the multiply ports); plain AVX2: 8 vpmaddubsw
 * (|pair| <= 2·63·128, no saturation) and 8 vpmaddwd + vpaddd. The accumulator starting from the "-32" offset -32·Σ scale[b]·bsums[b] (one vpmaddwd on the
 * scales times -32, |.| <= 4096); the epilogue is shared by the 4 tokens of a group: a
 * vphaddd tree leaves [t0 t1 t2 t3], one conversion to double and one FMA with d·da of the
 * 4 tokens (prepared per block) instead of ~10 vector uops per token.
 */
#ifndef HMOE_CPU_Q6_K_GEMM4_AVX2_IMPL_H
#define HMOE_CPU_Q6_K_GEMM4_AVX2_IMPL_H

#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

#include "hmoe/quant_blocks.h"
#include "tile_impl.h"

#define Q6KG_MAX_TOK 16  /* tokens per tile: 4 groups, each one double accumulator */
#define Q6KG_MAX_BLOCKS 64 /* prepared da: 4 groups × 64 blocks × 32 bytes (stack); longer rows take q6k_tile */

/* da of the G groups of 4 activation rows at x (stride xs), nb blocks each, as da[(g·nb + i)·4 + k]. */
static inline void q6kg_prep_da(double *da, const char *x, size_t xs, int64_t nb, int64_t G) {
    for (int64_t g = 0; g < G; g++)
        for (int64_t i = 0; i < nb; i++)
            for (int k = 0; k < 4; k++)
                da[(g * nb + i) * 4 + k] = ((const struct hmoe_block_q8_k *)(x + (size_t)(4 * g + k) * xs) + i)->d;
}

/* out[t] = dot(the Q6_K row at w, Q8_K activation row t at x + t·xs), t < 4·G. */
static inline __attribute__((always_inline)) void q6kg_tile(const char *w, int64_t nb, const char *x, size_t xs,
                                                           const double *da, float *out, const int G) {
    __m256d acc[Q6KG_MAX_TOK / 4];
    for (int g = 0; g < G; g++) acc[g] = _mm256_setzero_pd();
    const __m256i m4 = _mm256_set1_epi8(0x0f), m30 = _mm256_set1_epi8(0x30);
#if !HMOE_Q6KD_VNNI
    /* after vpermd puts dword g (= scales 2g, 2g+1 as words) in both lanes: lane 0 repeats word 0, lane 1 word 1 */
    const __m256i pick =
        _mm256_set_epi8(3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0);
#endif
    for (int64_t i = 0; i < nb; i++) {
        const struct hmoe_block_q6_k *b = (const struct hmoe_block_q6_k *)w + i;
        const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)b->scales));
#if HMOE_Q6KD_VNNI
        /* pair of registers (2jp, 2jp + 1): words [s 4jp ×4, s 4jp+2 ×4 | s 4jp+1 ×4, s 4jp+3 ×4] */
        _Alignas(32) __m256i s[4];
        const __m256i sc_lo = _mm256_permute4x64_epi64(sc16, _MM_SHUFFLE(1, 0, 1, 0));
        const __m256i sc_hi = _mm256_permute4x64_epi64(sc16, _MM_SHUFFLE(3, 2, 3, 2));
        const __m256i pick0 = _mm256_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 4, 5, 4, 5, 4, 5, 4, 5, 2, 3, 2, 3, 2, 3, 2, 3, 6,
                                               7, 6, 7, 6, 7, 6, 7);
        const __m256i pick1 = _mm256_add_epi8(pick0, _mm256_set1_epi8(8));
        s[0] = _mm256_shuffle_epi8(sc_lo, pick0);
        s[1] = _mm256_shuffle_epi8(sc_lo, pick1);
        s[2] = _mm256_shuffle_epi8(sc_hi, pick0);
        s[3] = _mm256_shuffle_epi8(sc_hi, pick1);
#else
        _Alignas(32) __m256i s[8];
        for (int g = 0; g < 8; g++) s[g] = _mm256_shuffle_epi8(_mm256_permutevar8x32_epi32(sc16, _mm256_set1_epi32(g)), pick);
#endif
        const __m256i off = _mm256_sub_epi16(_mm256_setzero_si256(), _mm256_slli_epi16(sc16, 5)); /* -32·scale */
        __m256i q[8];
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            const __m256i ql0 = _mm256_loadu_si256((const __m256i *)(b->ql + 64 * h));
            const __m256i ql1 = _mm256_loadu_si256((const __m256i *)(b->ql + 64 * h + 32));
            const __m256i qh = _mm256_loadu_si256((const __m256i *)(b->qh + 32 * h));
            q[4 * h] = _mm256_or_si256(_mm256_and_si256(ql0, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), m30));
            q[4 * h + 1] = _mm256_or_si256(_mm256_and_si256(ql1, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), m30));
            q[4 * h + 2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4), _mm256_and_si256(qh, m30));
            q[4 * h + 3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4),
                                           _mm256_and_si256(_mm256_srli_epi16(qh, 2), m30));
        }
        const __m256d d = _mm256_set1_pd(_cvtsh_ss(b->d));
#pragma GCC unroll 4
        for (int g = 0; g < G; g++) {
            __m256i is[4];
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++) {
                const struct hmoe_block_q8_k *a = (const struct hmoe_block_q8_k *)(x + (size_t)(4 * g + k) * xs) + i;
                __m256i v = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)a->bsums), off);
#if HMOE_Q6KD_VNNI
#pragma GCC unroll 4
                for (int jp = 0; jp < 4; jp++) {
                    const __m256i z = _mm256_setzero_si256();
                    const __m256i p0 = _mm256_dpbusd_avx_epi32(z, q[2 * jp], _mm256_loadu_si256((const __m256i *)(a->qs + 64 * jp)));
                    const __m256i p1 =
                        _mm256_dpbusd_avx_epi32(z, q[2 * jp + 1], _mm256_loadu_si256((const __m256i *)(a->qs + 64 * jp + 32)));
                    v = _mm256_dpwssd_avx_epi32(v, _mm256_packs_epi32(p0, p1), s[jp]);
                }
#else
#pragma GCC unroll 8
                for (int j = 0; j < 8; j++)
                    v = Q6KD_DPWSSD(v, _mm256_maddubs_epi16(q[j], _mm256_loadu_si256((const __m256i *)(a->qs + 32 * j))),
                                    s[j]);
#endif
                is[k] = v;
            }
            const __m256i u = _mm256_hadd_epi32(_mm256_hadd_epi32(is[0], is[1]), _mm256_hadd_epi32(is[2], is[3]));
            const __m128i v4 = _mm_add_epi32(_mm256_castsi256_si128(u), _mm256_extracti128_si256(u, 1));
            const __m256d sc = _mm256_mul_pd(d, _mm256_load_pd(da + ((size_t)g * (size_t)nb + (size_t)i) * 4));
            acc[g] = _mm256_fmadd_pd(_mm256_cvtepi32_pd(v4), sc, acc[g]);
        }
    }
    for (int g = 0; g < G; g++) _mm_storeu_ps(out + 4 * g, _mm256_cvtpd_ps(acc[g]));
}

#define Q6KG_TILE_ONE(NAME, G)                                                                                         \
    static void NAME##_q##G(const char *w, int64_t nb, const char *x, size_t xs, const double *da, float *o) {        \
        q6kg_tile(w, nb, x, xs, da, o, G);                                                                             \
    }
typedef void (*q6kg_tile_fn)(const char *w, int64_t nb, const char *x, size_t xs, const double *da, float *o);

/* hmoe_cpu_gemm_SUFFIX for Q6_K over the group tiles NAME_q1..q4 and, for the last 1..3 tokens
 * of a tile, SMALL[1..3] (q6k_tile); rows in chunks of HMOE_PREP_ROWS (L2-resident) while
 * every 16-token tile passes over them. Rows of more than Q6KG_MAX_BLOCKS blocks take
 * LONG (the q6k_tile gemm). */
#define Q6KG_DEFINE_GEMM(SUFFIX, NAME, SMALL, LONG)                                                                    \
    Q6KG_TILE_ONE(NAME, 1)                                                                                             \
    Q6KG_TILE_ONE(NAME, 2)                                                                                             \
    Q6KG_TILE_ONE(NAME, 3)                                                                                             \
    Q6KG_TILE_ONE(NAME, 4)                                                                                             \
    static const q6kg_tile_fn NAME##_group_tiles[Q6KG_MAX_TOK / 4 + 1] = {0, NAME##_q1, NAME##_q2, NAME##_q3,         \
                                                                         NAME##_q4};                                   \
    void hmoe_cpu_gemm_##SUFFIX(int64_t ncols, const void *w, size_t row_bytes, int64_t nrows, const void *xq,         \
                                size_t xq_stride, int64_t ntok, float *y, size_t y_stride) {                           \
        const int64_t nb = ncols / 256;                                                                                \
        if (nb > Q6KG_MAX_BLOCKS) {                                                                                    \
            LONG(ncols, w, row_bytes, nrows, xq, xq_stride, ntok, y, y_stride);                                        \
            return;                                                                                                    \
        }                                                                                                              \
        _Alignas(32) double da[Q6KG_MAX_TOK * Q6KG_MAX_BLOCKS];                                                        \
        for (int64_t r0 = 0; r0 < nrows; r0 += HMOE_PREP_ROWS) {                                                       \
            const int64_t r1 = r0 + HMOE_PREP_ROWS < nrows ? r0 + HMOE_PREP_ROWS : nrows;                              \
            for (int64_t t0 = 0; t0 < ntok; t0 += Q6KG_MAX_TOK) {                                                      \
                const int64_t nt = ntok - t0 < Q6KG_MAX_TOK ? ntok - t0 : Q6KG_MAX_TOK, ng = nt / 4, nr = nt % 4;      \
                const char *xt = (const char *)xq + (size_t)t0 * xq_stride;                                            \
                q6kg_prep_da(da, xt, xq_stride, nb, ng);                                                               \
                const q6kg_tile_fn group = NAME##_group_tiles[ng];                                                     \
                const hmoe_tile_fn rest = SMALL[nr];                                                                   \
                const char *xr = xt + (size_t)(4 * ng) * xq_stride;                                                    \
                for (int64_t r = r0; r < r1; r++) {                                                                    \
                    float out[Q6KG_MAX_TOK];                                                                           \
                    const char *wr = (const char *)w + (size_t)r * row_bytes;                                          \
                    if (ng) group(wr, nb, xt, xq_stride, da, out);                                                     \
                    if (nr) rest(wr, row_bytes, nb, xr, xq_stride, out + 4 * ng);                                      \
                    for (int64_t t = 0; t < nt; t++) y[(size_t)(t0 + t) * y_stride + (size_t)r] = out[t];              \
                }                                                                                                      \
            }                                                                                                          \
        }                                                                                                              \
    }

#endif
