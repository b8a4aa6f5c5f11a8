/* q4_k_gemm4_avx2_impl.h — private to src/cpu: the Q4_K prefill gemm on groups of 4 tokens
 * for 16 YMM registers, included by q45_k_dec_avx2_impl.h after q45_k_gemm_avx2_impl.h (whose
 * weight rearrangement, prepared activation rows and remainder tiles it uses), so that each
 * includer builds it with its own instructions (HMOE_K45D_VNNI 0 / 1).
 *
 * Why groups of tokens: the 1-row tile (k45g_tile) spends per block and token 8 vpdpbusd on
 * the products but ~12 more vector uops on the block's epilogue (pack, scale, the mins'
 * vpmaddwd, a 3-uop vphaddd, the halves' add, an int -> double conversion, the scale's multiply
 * and the double FMA), and the three vector ports, not the two that take vpdpbusd, bound it.
 * With the tokens of a group in the lanes of the epilogue's vectors, that work is shared:
 *  - VNNI: the low-nibble sums of two tokens pack into one register (vpackssdw, exact: a lane
 *    sums 16 products, |.| <= 16·15·128 = 30720), one vpmaddwd scales them, and the two
 *    tokens' high-nibble sums join by one vpdpwssd; one vphaddd of two such token pairs
 *    leaves [t0 t1 t2 t3] per 128-bit half; plain AVX2: each token's two int16 sums scaled by
 *    two vpmaddwd, a token pair joined by one vphaddd, two pairs by another;
 *  - the mins take the tokens in the lanes from the start: pair sums of the Q8_K bsums, laid
 *    out per block as [token] x [sub-blocks 2j, 2j+1] words (k4q_prep_quads), against the
 *    row's mins broadcast per sub-block pair: two vpmaddwd (one vpmaddwd + one vpdpwssd)
 *    for 4 tokens;
 *  - the sums of the 4 tokens go to double at once and take the scales d·da and dmin·da as
 *    4-lane vectors (da of the group's tokens prepared per block): one conversion and one FMA
 *    each for sums and mins, per group instead of per token.
 * That is ~6.5 vector uops of epilogue per block and token instead of ~12. The double
 * accumulation keeps the reference's precision (q45_k_gemm_avx2_impl.h says why).
 * A tile whose token count is not a multiple of 4 fills its last group with zero activation
 * rows (d = 0, sums 0: they add exactly 0) when that is cheaper than a k45g_tile for the last
 * 1..3 tokens, which unpacks the weights once more and pays the per-token epilogue: always
 * after full groups (a padded group costs ~4·17 uops per block, the separate tile ~45 + 25
 * per token), and for 3 tokens alone; 1 or 2 tokens alone take k45g_tile.
 */
#ifndef HMOE_CPU_Q4_K_GEMM4_AVX2_IMPL_H
#define HMOE_CPU_Q4_K_GEMM4_AVX2_IMPL_H

#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

#include "hmoe/quant_blocks.h"
#include "tile_impl.h"

#define K4Q_MAX_TOK 16 /* tokens per tile: 4 groups, each one double accumulator */
/* prepared activations per token tile (stack): 16 tokens of rows up to 4096 columns (the
 * attention output projection of Qwen3-30B-A3B), which at HMOE_PREP_BYTES would take 8-token
 * tiles and spend twice the weight side per token */
#define K4Q_PREP_BYTES (96 * 1024)
/* weight bytes per row chunk, which every token tile passes over while it stays in L2: the
 * activations are prepared once per chunk and token tile, and a work item of the MoE gate/up
 * job (up to 256 rows of 2048 columns, 288 KiB) in 64-row chunks would prepare its tokens 4 times */
#define K4Q_CHUNK_BYTES (512 * 1024)

/* Per group of 4 tokens and block: the tokens' Q8_K d and the pair sums
 * bp(s) = bsums[2s] + bsums[2s+1] (|.| <= 32·128, exact in int16) as
 * bp[0] = [j = 0: (bp0, bp1) of tokens 0..3 | j = 1: (bp2, bp3) of tokens 0..3],
 * bp[1] = [j = 2 | j = 3], i.e. dword k of each 128-bit half is token k's pair. */
struct k4q_quad {
    double d[4];
    int16_t bp[2][16];
};
_Static_assert(sizeof(struct k4q_quad) % 32 == 0, "prepared groups must stay 32-byte aligned (aligned loads)");

/* The groups of the G·4 prepared activation rows at x (struct k45g_act, stride xs), nb
 * blocks each, as q[g·nb + i]: each token's pair sums as 4 dwords (pair j), the 4 tokens'
 * dwords transposed. */
static inline void k4q_prep_quads(struct k4q_quad *q, const char *x, size_t xs, int64_t nb, int64_t G) {
    for (int64_t g = 0; g < G; g++)
        for (int64_t i = 0; i < nb; i++) {
            struct k4q_quad *o = q + g * nb + i;
            __m128i p[4];
            for (int k = 0; k < 4; k++) {
                const struct k45g_act *a = (const struct k45g_act *)(x + (size_t)(4 * g + k) * xs) + i;
                const __m256i s = _mm256_madd_epi16(_mm256_load_si256((const __m256i *)a->bsums), _mm256_set1_epi16(1));
                p[k] = _mm_packs_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1)); /* exact */
                o->d[k] = a->d;
            }
            const __m128i t01l = _mm_unpacklo_epi32(p[0], p[1]), t23l = _mm_unpacklo_epi32(p[2], p[3]);
            const __m128i t01h = _mm_unpackhi_epi32(p[0], p[1]), t23h = _mm_unpackhi_epi32(p[2], p[3]);
            _mm256_store_si256((__m256i *)o->bp[0],
                               _mm256_set_m128i(_mm_unpackhi_epi64(t01l, t23l), _mm_unpacklo_epi64(t01l, t23l)));
            _mm256_store_si256((__m256i *)o->bp[1],
                               _mm256_set_m128i(_mm_unpackhi_epi64(t01h, t23h), _mm_unpacklo_epi64(t01h, t23h)));
        }
}

/* out[t] = dot(the Q4_K row at w, prepared activation row t at x + t·xs), t < 4·G; q: the
 * G groups' k4q_quad (q[g·nb + i]). The weight side is k45g_tile's: 8 registers lo / hi with
 * the lane -> sub-block map of q45_k_gemm_avx2_impl.h (dword pair m: sub-blocks 2m / 2m + 1). */
static inline __attribute__((always_inline)) void k4q_tile(const char *w, int64_t nb, const char *x, size_t xs,
                                                          const struct k4q_quad *q, float *out, const int G) {
    __m256d acc[K4Q_MAX_TOK / 4];
    for (int g = 0; g < G; g++) acc[g] = _mm256_setzero_pd();
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    const char Z = (char)0x80; /* vpshufb: zero byte */
#if HMOE_K45D_VNNI
    /* words of vpackssdw(sums of token t, sums of token t + 1) per 128-bit half: dwords 0-3 of
     * each (half 1: 4-7), i.e. sub-blocks [0 0 2 2 0 0 2 2 | 4 4 6 6 4 4 6 6] (+1 for hi) */
    static const char sl0[16] = {0, Z, 0, Z, 2, Z, 2, Z, 0, Z, 0, Z, 2, Z, 2, Z};
    static const char sl1[16] = {4, Z, 4, Z, 6, Z, 6, Z, 4, Z, 4, Z, 6, Z, 6, Z};
    static const char sh0[16] = {1, Z, 1, Z, 3, Z, 3, Z, 1, Z, 1, Z, 3, Z, 3, Z};
    static const char sh1[16] = {5, Z, 5, Z, 7, Z, 7, Z, 5, Z, 5, Z, 7, Z, 7, Z};
#else
    /* words of one token's vpmaddubsw sums: sub-blocks [0 ×4, 2 ×4 | 4 ×4, 6 ×4] (+1 for hi) */
    static const char sl0[16] = {0, Z, 0, Z, 0, Z, 0, Z, 2, Z, 2, Z, 2, Z, 2, Z};
    static const char sl1[16] = {4, Z, 4, Z, 4, Z, 4, Z, 6, Z, 6, Z, 6, Z, 6, Z};
    static const char sh0[16] = {1, Z, 1, Z, 1, Z, 1, Z, 3, Z, 3, Z, 3, Z, 3, Z};
    static const char sh1[16] = {5, Z, 5, Z, 5, Z, 5, Z, 7, Z, 7, Z, 7, Z, 7, Z};
#endif
    const __m256i ctl_l = k45g_ctl(sl0, sl1), ctl_h = k45g_ctl(sh0, sh1);
    const size_t qs_off = offsetof(struct hmoe_block_q4_k, qs);
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *b = (const uint8_t *)w + (size_t)i * sizeof(struct hmoe_block_q4_k);
        const __m128i scmn16 = k45d_scales_mins(b);
        const __m256i scmn = _mm256_broadcastsi128_si256(scmn16);
        const __m256i sc_l = _mm256_shuffle_epi8(scmn, ctl_l), sc_h = _mm256_shuffle_epi8(scmn, ctl_h);
        /* dword j = (MN 2j, MN 2j+1) as words; M01 = [j 0 ×4 | j 1 ×4], M23 = [j 2 ×4 | j 3 ×4] */
        const __m256i mnw = _mm256_castsi128_si256(_mm_cvtepu8_epi16(_mm_srli_si128(scmn16, 8)));
        const __m256i mn01 = _mm256_permutevar8x32_epi32(mnw, _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1));
        const __m256i mn23 = _mm256_permutevar8x32_epi32(mnw, _mm256_setr_epi32(2, 2, 2, 2, 3, 3, 3, 3));
        const __m256i r0 = _mm256_loadu_si256((const __m256i *)(b + qs_off));
        const __m256i r1 = _mm256_loadu_si256((const __m256i *)(b + qs_off + 32));
        const __m256i r2 = _mm256_loadu_si256((const __m256i *)(b + qs_off + 64));
        const __m256i r3 = _mm256_loadu_si256((const __m256i *)(b + qs_off + 96));
        __m256i z[4];
        k45g_chunks(r0, r1, r2, r3, z);
        __m256i lo[4], hi[4];
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) {
            lo[c] = _mm256_and_si256(z[c], m4);
            hi[c] = _mm256_and_si256(_mm256_srli_epi16(z[c], 4), m4);
        }
        const struct hmoe_block_q4_k *hdr = (const struct hmoe_block_q4_k *)b;
        const __m256d d = _mm256_set1_pd(_cvtsh_ss(hdr->d)), dmin = _mm256_set1_pd(_cvtsh_ss(hdr->dmin));
#pragma GCC unroll 4
        for (int g = 0; g < G; g++) {
            __m256i v[2];
#pragma GCC unroll 2
            for (int p = 0; p < 2; p++) {
                const __m256i *a0 = (const __m256i *)((const struct k45g_act *)(x + (size_t)(4 * g + 2 * p) * xs) + i)->qs;
                const __m256i *a1 =
                    (const __m256i *)((const struct k45g_act *)(x + (size_t)(4 * g + 2 * p + 1) * xs) + i)->qs;
#if HMOE_K45D_VNNI
                const __m256i zero = _mm256_setzero_si256();
                __m256i l0 = _mm256_dpbusd_avx_epi32(zero, lo[0], _mm256_load_si256(a0 + 0));
                __m256i l1 = _mm256_dpbusd_avx_epi32(zero, lo[0], _mm256_load_si256(a1 + 0));
                l0 = _mm256_dpbusd_avx_epi32(l0, lo[1], _mm256_load_si256(a0 + 2));
                l1 = _mm256_dpbusd_avx_epi32(l1, lo[1], _mm256_load_si256(a1 + 2));
                l0 = _mm256_dpbusd_avx_epi32(l0, lo[2], _mm256_load_si256(a0 + 4));
                l1 = _mm256_dpbusd_avx_epi32(l1, lo[2], _mm256_load_si256(a1 + 4));
                l0 = _mm256_dpbusd_avx_epi32(l0, lo[3], _mm256_load_si256(a0 + 6));
                l1 = _mm256_dpbusd_avx_epi32(l1, lo[3], _mm256_load_si256(a1 + 6));
                __m256i h0 = _mm256_dpbusd_avx_epi32(zero, hi[0], _mm256_load_si256(a0 + 1));
                __m256i h1 = _mm256_dpbusd_avx_epi32(zero, hi[0], _mm256_load_si256(a1 + 1));
                h0 = _mm256_dpbusd_avx_epi32(h0, hi[1], _mm256_load_si256(a0 + 3));
                h1 = _mm256_dpbusd_avx_epi32(h1, hi[1], _mm256_load_si256(a1 + 3));
                h0 = _mm256_dpbusd_avx_epi32(h0, hi[2], _mm256_load_si256(a0 + 5));
                h1 = _mm256_dpbusd_avx_epi32(h1, hi[2], _mm256_load_si256(a1 + 5));
                h0 = _mm256_dpbusd_avx_epi32(h0, hi[3], _mm256_load_si256(a0 + 7));
                h1 = _mm256_dpbusd_avx_epi32(h1, hi[3], _mm256_load_si256(a1 + 7));
                /* per half [t t t+1 t+1] */
                v[p] = _mm256_dpwssd_avx_epi32(_mm256_madd_epi16(_mm256_packs_epi32(l0, l1), sc_l),
                                               _mm256_packs_epi32(h0, h1), sc_h);
#else
                __m256i is[2];
                const __m256i *at[2] = {a0, a1};
#pragma GCC unroll 2
                for (int k = 0; k < 2; k++) {
                    const __m256i *a = at[k];
                    __m256i sl = _mm256_maddubs_epi16(lo[0], _mm256_load_si256(a + 0));
                    __m256i sh = _mm256_maddubs_epi16(hi[0], _mm256_load_si256(a + 1));
                    sl = _mm256_add_epi16(sl, _mm256_maddubs_epi16(lo[1], _mm256_load_si256(a + 2)));
                    sh = _mm256_add_epi16(sh, _mm256_maddubs_epi16(hi[1], _mm256_load_si256(a + 3)));
                    sl = _mm256_add_epi16(sl, _mm256_maddubs_epi16(lo[2], _mm256_load_si256(a + 4)));
                    sh = _mm256_add_epi16(sh, _mm256_maddubs_epi16(hi[2], _mm256_load_si256(a + 5)));
                    sl = _mm256_add_epi16(sl, _mm256_maddubs_epi16(lo[3], _mm256_load_si256(a + 6)));
                    sh = _mm256_add_epi16(sh, _mm256_maddubs_epi16(hi[3], _mm256_load_si256(a + 7)));
                    is[k] = _mm256_add_epi32(_mm256_madd_epi16(sl, sc_l), _mm256_madd_epi16(sh, sc_h));
                }
                v[p] = _mm256_hadd_epi32(is[0], is[1]); /* per half [t t t+1 t+1] */
#endif
            }
            const struct k4q_quad *qg = q + (size_t)g * (size_t)nb + i;
            const __m256i u = _mm256_hadd_epi32(v[0], v[1]); /* per half [t0 t1 t2 t3] */
            const __m128i is4 = _mm_add_epi32(_mm256_castsi256_si128(u), _mm256_extracti128_si256(u, 1));
#if HMOE_K45D_VNNI
            const __m256i ms = _mm256_dpwssd_avx_epi32(_mm256_madd_epi16(_mm256_load_si256((const __m256i *)qg->bp[0]), mn01),
                                                       _mm256_load_si256((const __m256i *)qg->bp[1]), mn23);
#else
            const __m256i ms = _mm256_add_epi32(_mm256_madd_epi16(_mm256_load_si256((const __m256i *)qg->bp[0]), mn01),
                                                _mm256_madd_epi16(_mm256_load_si256((const __m256i *)qg->bp[1]), mn23));
#endif
            const __m128i ms4 = _mm_add_epi32(_mm256_castsi256_si128(ms), _mm256_extracti128_si256(ms, 1));
            const __m256d da = _mm256_load_pd(qg->d);
            acc[g] = _mm256_fmadd_pd(_mm256_cvtepi32_pd(is4), _mm256_mul_pd(d, da), acc[g]);
            acc[g] = _mm256_fnmadd_pd(_mm256_cvtepi32_pd(ms4), _mm256_mul_pd(dmin, da), acc[g]);
        }
    }
    for (int g = 0; g < G; g++) _mm_storeu_ps(out + 4 * g, _mm256_cvtpd_ps(acc[g]));
}

#define K4Q_TILE_ONE(NAME, G)                                                                                          \
    static void NAME##_q##G(const char *w, int64_t nb, const char *x, size_t xs, const struct k4q_quad *q, float *o) { \
        k4q_tile(w, nb, x, xs, q, o, G);                                                                               \
    }
typedef void (*k4q_tile_fn)(const char *w, int64_t nb, const char *x, size_t xs, const struct k4q_quad *q, float *o);

/* hmoe_cpu_gemm_SUFFIX for Q4_K over the group tiles NAME_q1..q4 and, for 1..3 tokens that
 * do not fill a group (see above), the tiles SMALL[1..3] (k45g_tile on the same prepared
 * rows). Rows in chunks of K4Q_CHUNK_BYTES (at least HMOE_PREP_ROWS rows), L2-resident while
 * every token tile passes over them; the activation rows of a token tile and its groups are
 * prepared once per chunk into one stack buffer of K4Q_PREP_BYTES; a row too long for it
 * falls back to GEMV per token. */
#define K4Q_DEFINE_GEMM(SUFFIX, NAME, SMALL, GEMV)                                                                     \
    K4Q_TILE_ONE(NAME, 1)                                                                                              \
    K4Q_TILE_ONE(NAME, 2)                                                                                              \
    K4Q_TILE_ONE(NAME, 3)                                                                                              \
    K4Q_TILE_ONE(NAME, 4)                                                                                              \
    static const k4q_tile_fn NAME##_group_tiles[K4Q_MAX_TOK / 4 + 1] = {0, NAME##_q1, NAME##_q2, NAME##_q3,           \
                                                                        NAME##_q4};                                    \
    void hmoe_cpu_gemm_##SUFFIX(int64_t ncols, const void *w, size_t row_bytes, int64_t nrows, const void *xq,         \
                                size_t xq_stride, int64_t ntok, float *y, size_t y_stride) {                           \
        const int64_t nb = ncols / 256;                                                                                \
        const size_t act_row = (size_t)nb * sizeof(struct k45g_act);                                                   \
        /* a token costs its row and a quarter of its group's k4q_quad per block */                                    \
        int64_t tt = (int64_t)(K4Q_PREP_BYTES / (act_row + (size_t)nb * sizeof(struct k4q_quad) / 4));                \
        if (tt < 1) {                                                                                                  \
            for (int64_t t = 0; t < ntok; t++)                                                                         \
                GEMV(ncols, w, row_bytes, nrows, (const char *)xq + (size_t)t * xq_stride, y + (size_t)t * y_stride);  \
            return;                                                                                                    \
        }                                                                                                              \
        if (tt > K4Q_MAX_TOK) tt = K4Q_MAX_TOK;                                                                        \
        if (tt > 4) tt &= ~(int64_t)3;                                                                                 \
        _Alignas(64) char buf[K4Q_PREP_BYTES];                                                                        \
        struct k4q_quad *quads = (struct k4q_quad *)(buf + (size_t)tt * act_row);                                      \
        const int64_t chunk = row_bytes < K4Q_CHUNK_BYTES / HMOE_PREP_ROWS ? (int64_t)(K4Q_CHUNK_BYTES / row_bytes)     \
                                                                           : HMOE_PREP_ROWS;                           \
        for (int64_t r0 = 0; r0 < nrows; r0 += chunk) {                                                                \
            const int64_t r1 = r0 + chunk < nrows ? r0 + chunk : nrows;                                                \
            for (int64_t t0 = 0; t0 < ntok; t0 += tt) {                                                                \
                const int64_t nt = ntok - t0 < tt ? ntok - t0 : tt;                                                   \
                int64_t ng = nt / 4, nr = nt % 4;                                                                      \
                const int pad = tt >= 4 && nr && (ng || nr == 3); /* the last group filled with zero rows */           \
                if (pad) ng++, nr = 0;                                                                                 \
                if (r0 == 0 || ntok > tt) { /* one token tile: prepared once for all chunks */                         \
                    for (int64_t t = 0; t < nt; t++)                                                                   \
                        k45g_prep(buf + (size_t)t * act_row, (const char *)xq + (size_t)(t0 + t) * xq_stride, nb);     \
                    if (pad) memset(buf + (size_t)nt * act_row, 0, (size_t)(4 * ng - nt) * act_row);                   \
                    k4q_prep_quads(quads, buf, act_row, nb, ng);                                                       \
                }                                                                                                      \
                const k4q_tile_fn group = NAME##_group_tiles[ng];                                                      \
                const hmoe_tile_fn rest = SMALL[nr];                                                                   \
                const char *xr = buf + (size_t)(4 * ng) * act_row;                                                     \
                for (int64_t r = r0; r < r1; r++) {                                                                    \
                    float out[K4Q_MAX_TOK];                                                                            \
                    const char *wr = (const char *)w + (size_t)r * row_bytes;                                          \
                    if (ng) group(wr, nb, buf, act_row, quads, out);                                                   \
                    if (nr) rest(wr, row_bytes, nb, xr, act_row, out + 4 * ng);                                        \
                    for (int64_t t = 0; t < nt; t++) y[(size_t)(t0 + t) * y_stride + (size_t)r] = out[t];              \
                }                                                                                                      \
            }                                                                                                          \
        }                                                                                                              \
    }

#endif
