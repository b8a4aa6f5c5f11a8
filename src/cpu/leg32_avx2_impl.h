/* leg32_avx2_impl.h — private to src/cpu: gemv / gemm bodies for 16 YMM registers of the
 * weight types with 32-element blocks, one scale per block and Q8_0 activations (quants.md
 * §3, §6.1, §8.1): Q8_0, Q4_0, Q5_0 and MXFP4. A block is rebuilt as 32 signed bytes (leg32_*
 * unpackers), then |w| (u8) times the activations carrying w's sign (vpsignb) give the
 * exact int32 block sum — vpmaddubsw (|pair| <= 2·128·127, no saturation) + vpmaddwd with
 * ones on plain AVX2, one vpdpbusd with LEG32_VNNI — scaled by dw·da and accumulated in
 * double as the references do.
 * Decode (leg32_gemv4): 4 rows per tile, the 4 rows' 8-lane sums reduced together to
 * [S0..S3] and scaled by one double FMA per block; one prefetch per 64 bytes of each row's
 * stream, `pf` ahead (HMOE_DEFINE_GEMV_STREAM chooses and clamps it).
 * Included by q8_0_avx2.c, q4_0_avx2.c, q5_0_avx2.c, mxfp4_avx2.c (LEG32_VNNI 0), their *_avxvnni.c
 * twins (1, VEX vpdpbusd) and mxfp4_avx512.c (1, EVEX vpdpbusd on YMM, AVX512-VNNI + VL).
 */
#ifndef HMOE_CPU_LEG32_AVX2_IMPL_H
#define HMOE_CPU_LEG32_AVX2_IMPL_H

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "cpu_impl.h"
#include "hmoe/fp16.h"
#include "hmoe/quant_blocks.h"
#include "kernels/iq_tables.h"
#include "tile_impl.h"

#if LEG32_VNNI && defined(__AVX512VL__)
#define LEG32_DPBUSD(acc, u, s) _mm256_dpbusd_epi32(acc, u, s)
#elif LEG32_VNNI
#define LEG32_DPBUSD(acc, u, s) _mm256_dpbusd_avx_epi32(acc, u, s)
#endif

/* Σ w·a per int32 lane (4 byte products each) of one block: w signed, a the activations. */
static inline __m256i leg32_dot(__m256i q, __m256i a) {
    const __m256i aq = _mm256_abs_epi8(q), sa = _mm256_sign_epi8(a, q);
#if LEG32_VNNI
    return LEG32_DPBUSD(_mm256_setzero_si256(), aq, sa);
#else
    return _mm256_madd_epi16(_mm256_maddubs_epi16(aq, sa), _mm256_set1_epi16(1));
#endif
}

/* Σ (u - off)·a per int32 lane of one block for unsigned codes u (0..2·off-1), starting from
 * `base`, whose lanes sum to -off·Σa (leg32_offset_base): the codes need no sign transfer, and
 * the offset costs one term per block shared by every row of a tile. */
static inline __m256i leg32_dot_u(__m256i base, __m256i u, __m256i a) {
#if LEG32_VNNI
    return LEG32_DPBUSD(base, u, a);
#else
    return _mm256_add_epi32(base, _mm256_madd_epi16(_mm256_maddubs_epi16(u, a), _mm256_set1_epi16(1)));
#endif
}

/* Lanes summing to -off·Σa: off (u8) times -a (the activations are -127..127, so -a is exact;
 * the pair sums 2·16·127 stay far from vpmaddubsw's saturation). */
static inline __m256i leg32_offset_base(__m256i off8, __m256i a) {
    const __m256i na = _mm256_sub_epi8(_mm256_setzero_si256(), a);
#if LEG32_VNNI
    return LEG32_DPBUSD(_mm256_setzero_si256(), off8, na);
#else
    return _mm256_madd_epi16(_mm256_maddubs_epi16(off8, na), _mm256_set1_epi16(1));
#endif
}

/* Q4_0 nibble order (quants.md §3): element j in the low nibble of qs[j], j + 16 in the high;
 * the high nibbles shifted within the 16 bytes, put in the upper lane, one mask for both. */
static inline __m256i leg32_nibbles(const uint8_t *qs16) {
    const __m128i qs = _mm_loadu_si128((const __m128i *)qs16);
    const __m256i both = _mm256_inserti128_si256(_mm256_castsi128_si256(qs), _mm_srli_epi16(qs, 4), 1);
    return _mm256_and_si256(both, _mm256_set1_epi8(0x0F));
}

/* Q4_0 as unsigned codes 0..15 (offset 8). */
static inline __m256i leg32_unpack_u_q4_0(const void *blk) {
    return leg32_nibbles(((const struct hmoe_block_q4_0 *)blk)->qs);
}

static inline __m256i leg32_unpack_q8_0(const void *blk) {
    return _mm256_loadu_si256((const __m256i *)((const struct hmoe_block_q8_0 *)blk)->qs);
}

/* Q8_0 as unsigned codes 0..255 (offset 128: w XOR 0x80). VNNI only: vpdpbusd does not saturate,
 * where vpmaddubsw's pairs of 255·127 would. */
static inline __m256i leg32_unpack_u_q8_0(const void *blk) {
    return _mm256_xor_si256(leg32_unpack_q8_0(blk), _mm256_set1_epi8((char)0x80));
}

/* Q4_0: the nibbles minus 8 (values -8..7). */
static inline __m256i leg32_unpack_q4_0(const void *blk) {
    return _mm256_sub_epi8(leg32_nibbles(((const struct hmoe_block_q4_0 *)blk)->qs), _mm256_set1_epi8(8));
}

/* Q5_0 as unsigned codes 0..31 (offset 16): the nibbles OR 0x10 where qh has the bit. */
static inline __m256i leg32_unpack_u_q5_0(const void *blk) {
    const struct hmoe_block_q5_0 *b = blk;
    uint32_t qh;
    memcpy(&qh, b->qh, sizeof qh);
    const __m256i spread = _mm256_shuffle_epi8(
        _mm256_set1_epi32((int)qh), _mm256_set_epi64x(0x0303030303030303ll, 0x0202020202020202ll,
                                                      0x0101010101010101ll, 0x0000000000000000ll));
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    const __m256i high = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit), _mm256_set1_epi8(0x10));
    return _mm256_or_si256(leg32_nibbles(b->qs), high);
}

/* Q5_0: the unsigned codes minus 16 (values -16..15). */
static inline __m256i leg32_unpack_q5_0(const void *blk) {
    return _mm256_sub_epi8(leg32_unpack_u_q5_0(blk), _mm256_set1_epi8(16));
}

/* MXFP4: the codes looked up in the doubled E2M1 table (§6.1), values -12..12. */
static inline __m256i leg32_unpack_mxfp4(const void *blk) {
    const __m256i kv = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)hmoe_kvalues_mxfp4));
    return _mm256_shuffle_epi8(kv, leg32_nibbles(((const struct hmoe_block_mxfp4 *)blk)->qs));
}

static inline double leg32_scale_fp16(const void *blk) { return _cvtsh_ss(*(const uint16_t *)blk); }
static inline double leg32_scale_e8m0(const void *blk) { return hmoe_e8m0_to_f32_half(*(const uint8_t *)blk); }

/* The weight scales of the same block in 4 rows rb apart, as doubles. The fp16 words go
 * into the vector by word inserts: storing them to memory and loading them as one vector
 * stalls on store forwarding (it costs the in-cache Q8_0 decode 40 % of its speed). */
static inline __m256d leg32_scales4_fp16(const char *b, size_t rb) {
    __m128i h = _mm_cvtsi32_si128(*(const uint16_t *)b);
    h = _mm_insert_epi16(h, *(const uint16_t *)(b + rb), 1);
    h = _mm_insert_epi16(h, *(const uint16_t *)(b + 2 * rb), 2);
    h = _mm_insert_epi16(h, *(const uint16_t *)(b + 3 * rb), 3);
    return _mm256_cvtps_pd(_mm_cvtph_ps(h));
}
static inline __m256d leg32_scales4_e8m0(const char *b, size_t rb) {
    return _mm256_cvtps_pd(_mm_setr_ps(leg32_scale_e8m0(b), leg32_scale_e8m0(b + rb), leg32_scale_e8m0(b + 2 * rb),
                                       leg32_scale_e8m0(b + 3 * rb)));
}

/* out[r*T + t] = dot(weight row r at w + r*rb, activation row t) (tile_impl.h); prefetches
 * pf ahead when T == 1. UNPACK / SCALE: the type's leg32_* functions. */
#define LEG32_TILE_BODY(NAME, BB, UNPACK, SCALE)                                                                      \
    static inline __attribute__((always_inline)) void NAME(const char *w, size_t rb, int64_t nb, const char *x,       \
                                                           size_t xs, float *out, const int R, const int T,           \
                                                           size_t pf) {                                               \
        __m256d acc[HMOE_TILE_MAX_TOK];                                                                                \
        for (int k = 0; k < R * T; k++) acc[k] = _mm256_setzero_pd();                                                  \
        const int64_t pf_every = 64 / (BB); /* blocks per prefetched line: no line of the stream skipped */           \
        for (int64_t i = 0; i < nb; i++) {                                                                             \
            _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) {                                                      \
                const char *b = w + (size_t)r * rb + (size_t)i * (BB);                                                 \
                if (T == 1 && i % pf_every == 0) __builtin_prefetch(b + pf, 0, 3);                                     \
                const __m256i q = UNPACK(b);                                                                           \
                const double dw = SCALE(b);                                                                            \
                _Pragma("GCC unroll 8") for (int t = 0; t < T; t++) {                                                  \
                    const struct hmoe_block_q8_0 *a = (const struct hmoe_block_q8_0 *)(x + (size_t)t * xs) + i;        \
                    const __m256i dot = leg32_dot(q, _mm256_loadu_si256((const __m256i *)a->qs));                      \
                    const __m128i d4 = _mm_add_epi32(_mm256_castsi256_si128(dot), _mm256_extracti128_si256(dot, 1));   \
                    acc[r * T + t] = _mm256_fmadd_pd(_mm256_cvtepi32_pd(d4),                                           \
                                                     _mm256_set1_pd(dw * (double)_cvtsh_ss(a->d)), acc[r * T + t]);    \
                }                                                                                                      \
            }                                                                                                          \
        }                                                                                                              \
        for (int k = 0; k < R * T; k++) {                                                                              \
            __m128d s = _mm_add_pd(_mm256_castpd256_pd128(acc[k]), _mm256_extractf128_pd(acc[k], 1));                 \
            out[k] = (float)(_mm_cvtsd_f64(s) + _mm_cvtsd_f64(_mm_unpackhi_pd(s, s)));                                 \
        }                                                                                                              \
    }

/* Decode: out[r] = dot(row r, x) for the 4 rows at w, w + rb, ..; SCALES4: leg32_scales4_*. */
#define LEG32_GEMV4_BODY(NAME, BB, UNPACK, SCALES4)                                                                   \
    static void NAME(const char *w, size_t rb, int64_t nb, const char *x, size_t pf, float *out) {                     \
        __m256d acc = _mm256_setzero_pd();                                                                             \
        const int64_t pf_every = 64 / (BB);                                                                            \
        for (int64_t i = 0; i < nb; i++) {                                                                             \
            const struct hmoe_block_q8_0 *a = (const struct hmoe_block_q8_0 *)x + i;                                   \
            const __m256i av = _mm256_loadu_si256((const __m256i *)a->qs);                                             \
            const char *b0 = w + (size_t)i * (BB);                                                                     \
            __m256i s[4];                                                                                              \
            _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) {                                                      \
                const char *b = b0 + (size_t)r * rb;                                                                   \
                if (i % pf_every == 0) __builtin_prefetch(b + pf, 0, 3);                                               \
                s[r] = leg32_dot(UNPACK(b), av);                                                                       \
            }                                                                                                          \
            const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(s[0], s[1]), _mm256_hadd_epi32(s[2], s[3]));         \
            const __m128i v = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));               \
            const __m256d sc = _mm256_mul_pd(SCALES4(b0, rb), _mm256_set1_pd((double)_cvtsh_ss(a->d)));               \
            acc = _mm256_fmadd_pd(_mm256_cvtepi32_pd(v), sc, acc);                                                     \
        }                                                                                                              \
        double lanes[4];                                                                                               \
        _mm256_storeu_pd(lanes, acc);                                                                                  \
        for (int r = 0; r < 4; r++) out[r] = (float)lanes[r];                                                          \
    }

/* Decode of the types with unsigned codes u = w + OFF (Q4_0, Q5_0): as LEG32_GEMV4_BODY, each
 * row's block sum one vpdpbusd (AVX2: vpmaddubsw + vpmaddwd + add) of the codes with the
 * activations as they are, accumulated onto the block's -OFF·Σa lanes, which are computed
 * once for the 4 rows: 3 fewer operations per row and block than rebuilding signed values
 * (subtract, vpabsb, vpsignb). UNPACKU: a leg32_unpack_u_* function. */
#define LEG32_GEMV4U_BODY(NAME, BB, UNPACKU, OFF, SCALES4)                                                            \
    static void NAME(const char *w, size_t rb, int64_t nb, const char *x, size_t pf, float *out) {                     \
        __m256d acc = _mm256_setzero_pd();                                                                             \
        const int64_t pf_every = 64 / (BB);                                                                            \
        const __m256i off8 = _mm256_set1_epi8(OFF);                                                                    \
        for (int64_t i = 0; i < nb; i++) {                                                                             \
            const struct hmoe_block_q8_0 *a = (const struct hmoe_block_q8_0 *)x + i;                                   \
            const __m256i av = _mm256_loadu_si256((const __m256i *)a->qs);                                             \
            const __m256i base = leg32_offset_base(off8, av);                                                          \
            const char *b0 = w + (size_t)i * (BB);                                                                     \
            __m256i s[4];                                                                                              \
            _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) {                                                      \
                const char *b = b0 + (size_t)r * rb;                                                                   \
                if (i % pf_every == 0) __builtin_prefetch(b + pf, 0, 3);                                               \
                s[r] = leg32_dot_u(base, UNPACKU(b), av);                                                              \
            }                                                                                                          \
            const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(s[0], s[1]), _mm256_hadd_epi32(s[2], s[3]));         \
            const __m128i v = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));               \
            const __m256d sc = _mm256_mul_pd(SCALES4(b0, rb), _mm256_set1_pd((double)_cvtsh_ss(a->d)));               \
            acc = _mm256_fmadd_pd(_mm256_cvtepi32_pd(v), sc, acc);                                                     \
        }                                                                                                              \
        double lanes[4];                                                                                               \
        _mm256_storeu_pd(lanes, acc);                                                                                  \
        for (int r = 0; r < 4; r++) out[r] = (float)lanes[r];                                                          \
    }

/* ---- Prefill gemm on groups of 4 tokens. The 1-row tile above spends per block and token,
 * next to its one vpdpbusd, ~9 uops on the epilogue (the lanes' sum, int -> double, the fp16
 * activation scale, its product with dw, the FMA). Here a token tile's activation scales are
 * converted once per row chunk (as doubles, 8 per block: the group's 4 in one load) with the
 * offset term -OFF·Σa of each block (U: the weights as unsigned codes u = w + OFF, so a block
 * sum is one vpdpbusd of u with the activations as they are); per block and group the 4
 * tokens' lane sums are reduced together (two vphaddd), converted and scaled once. The block
 * sums are exact int32 totals scaled in double, as the references do. */
#define LEG32_GEMM_ROWS 64    /* rows per chunk: 64 rows of 2880 Q8_0 = 196 KiB, L2-resident */
#define LEG32_GEMM_MAX_NB 384 /* blocks per row the prepared scales hold (12288 columns); longer: the tiles */

struct leg32_gemm_prep {
    double da[LEG32_GEMM_MAX_NB][8];  /* activation scale of block i, token j of the tile (0 past it) */
    int32_t off[LEG32_GEMM_MAX_NB][8]; /* -OFF · Σ quants of that block (U only) */
};

/* The prepared scales and offsets of nt tokens (rows xs bytes apart) of nb blocks each. */
static inline void leg32_gemm_prepare(struct leg32_gemm_prep *p, const char *x, size_t xs, int nt, int64_t nb,
                                      int off) {
    for (int64_t i = 0; i < nb; i++)
        for (int j = 0; j < 8; j++) {
            p->da[i][j] = 0.0;
            p->off[i][j] = 0;
            if (j >= nt) continue;
            const struct hmoe_block_q8_0 *a = (const struct hmoe_block_q8_0 *)(x + (size_t)j * xs) + i;
            p->da[i][j] = (double)_cvtsh_ss(a->d);
            if (off) {
                const __m256i s16 = _mm256_maddubs_epi16(_mm256_set1_epi8(1), _mm256_loadu_si256((const __m256i *)a->qs));
                const __m256i s32 = _mm256_madd_epi16(s16, _mm256_set1_epi16(1));
                const __m128i h = _mm_add_epi32(_mm256_castsi256_si128(s32), _mm256_extracti128_si256(s32, 1));
                const __m128i h2 = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0x4e));
                p->off[i][j] = -off * _mm_cvtsi128_si32(_mm_add_epi32(h2, _mm_shuffle_epi32(h2, 0xb1)));
            }
        }
}

/* The 4 lanes [Σ s0, Σ s1, Σ s2, Σ s3] of four 8-lane int32 vectors. */
static inline __m128i leg32_sum4(__m256i s0, __m256i s1, __m256i s2, __m256i s3) {
    const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(s0, s1), _mm256_hadd_epi32(s2, s3));
    return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

/* out[t] = dot(weight row w, activation row t) for T <= 8 tokens. U: unsigned codes (UNPACK
 * gives u = w + OFF, the offsets are prepared); else signed values (|w| times the activations
 * carrying w's sign). */
#define LEG32_GROUP_TILE_BODY(NAME, BB, UNPACK, U, SCALE)                                                             \
    static inline __attribute__((always_inline)) void NAME(const char *w, int64_t nb, const char *x, size_t xs,       \
                                                           const struct leg32_gemm_prep *p, float *out, const int T) { \
        __m256d acc[2] = {_mm256_setzero_pd(), _mm256_setzero_pd()};                                                   \
        const __m256i z = _mm256_setzero_si256();                                                                      \
        for (int64_t i = 0; i < nb; i++) {                                                                             \
            const char *b = w + (size_t)i * (BB);                                                                      \
            const __m256i q = UNPACK(b);                                                                               \
            const __m256i aq = U ? q : _mm256_abs_epi8(q);                                                             \
            const __m256d dw = _mm256_set1_pd(SCALE(b));                                                               \
            _Pragma("GCC unroll 2") for (int g = 0; 4 * g < T; g++) {                                                  \
                __m256i s[4];                                                                                          \
                _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) {                                                  \
                    s[j] = z;                                                                                          \
                    if (4 * g + j >= T) continue;                                                                      \
                    const struct hmoe_block_q8_0 *a = (const struct hmoe_block_q8_0 *)(x + (size_t)(4 * g + j) * xs) + i; \
                    const __m256i av = _mm256_loadu_si256((const __m256i *)a->qs);                                     \
                    s[j] = leg32_dot_u(z, aq, U ? av : _mm256_sign_epi8(av, q));                                       \
                }                                                                                                      \
                __m128i v = leg32_sum4(s[0], s[1], s[2], s[3]);                                                        \
                if (U) v = _mm_add_epi32(v, _mm_loadu_si128((const __m128i *)&p->off[i][4 * g]));                     \
                const __m256d sc = _mm256_mul_pd(_mm256_loadu_pd(&p->da[i][4 * g]), dw);                              \
                acc[g] = _mm256_fmadd_pd(_mm256_cvtepi32_pd(v), sc, acc[g]);                                           \
            }                                                                                                          \
        }                                                                                                              \
        double lanes[8];                                                                                               \
        _mm256_storeu_pd(lanes, acc[0]);                                                                               \
        _mm256_storeu_pd(lanes + 4, acc[1]);                                                                           \
        for (int t = 0; t < T; t++) out[t] = (float)lanes[t];                                                          \
    }

/* NAME_gT: the group tile body for T tokens, a constant the compiler unrolls with. */
#define LEG32_GTILE_ONE(NAME, T)                                                                                       \
    static void NAME##_g##T(const char *w, int64_t nb, const char *x, size_t xs, const struct leg32_gemm_prep *p,     \
                            float *o) {                                                                                \
        NAME##_gbody(w, nb, x, xs, p, o, T);                                                                           \
    }

/* hmoe_cpu_gemm_SUFFIX over the group tiles of NAME (rows chunked by LEG32_GEMM_ROWS, tokens by 8;
 * rows of more than LEG32_GEMM_MAX_NB blocks: the 1-row tiles' gemm FALLBACK). */
#define LEG32_DEFINE_GROUP_GEMM(SUFFIX, NAME, BB, UNPACK, U, OFF, SCALE, FALLBACK)                                   \
    LEG32_GROUP_TILE_BODY(NAME##_gbody, BB, UNPACK, U, SCALE)                                                          \
    LEG32_GTILE_ONE(NAME, 1) LEG32_GTILE_ONE(NAME, 2) LEG32_GTILE_ONE(NAME, 3) LEG32_GTILE_ONE(NAME, 4)               \
    LEG32_GTILE_ONE(NAME, 5) LEG32_GTILE_ONE(NAME, 6) LEG32_GTILE_ONE(NAME, 7) LEG32_GTILE_ONE(NAME, 8)               \
    void hmoe_cpu_gemm_##SUFFIX(int64_t ncols, const void *w, size_t row_bytes, int64_t nrows, const void *xq,         \
                                size_t xq_stride, int64_t ntok, float *y, size_t y_stride) {                           \
        typedef void (*gtile_fn)(const char *, int64_t, const char *, size_t, const struct leg32_gemm_prep *, float *); \
        static const gtile_fn tiles[9] = {0,         NAME##_g1, NAME##_g2, NAME##_g3, NAME##_g4,                       \
                                          NAME##_g5, NAME##_g6, NAME##_g7, NAME##_g8};                                 \
        const int64_t nb = ncols / 32;                                                                                 \
        if (nb > LEG32_GEMM_MAX_NB) {                                                                                  \
            FALLBACK(ncols, w, row_bytes, nrows, xq, xq_stride, ntok, y, y_stride);                                    \
            return;                                                                                                    \
        }                                                                                                              \
        struct leg32_gemm_prep p;                                                                                      \
        for (int64_t r0 = 0; r0 < nrows; r0 += LEG32_GEMM_ROWS) {                                                      \
            const int64_t r1 = r0 + LEG32_GEMM_ROWS < nrows ? r0 + LEG32_GEMM_ROWS : nrows;                            \
            for (int64_t t0 = 0; t0 < ntok; t0 += 8) {                                                                 \
                const int nt = (int)(ntok - t0 < 8 ? ntok - t0 : 8);                                                   \
                const char *xt = (const char *)xq + (size_t)t0 * xq_stride;                                            \
                leg32_gemm_prepare(&p, xt, xq_stride, nt, nb, U ? (OFF) : 0);                                          \
                for (int64_t r = r0; r < r1; r++) {                                                                    \
                    float out[8];                                                                                      \
                    tiles[nt]((const char *)w + (size_t)r * row_bytes, nb, xt, xq_stride, &p, out);                    \
                    for (int t = 0; t < nt; t++) y[(size_t)(t0 + t) * y_stride + (size_t)r] = out[t];                  \
                }                                                                                                      \
            }                                                                                                          \
        }                                                                                                              \
    }

/* All of one type: tiles, the decode kernel, and hmoe_cpu_gemv_GEMV_SFX / hmoe_cpu_gemm_GEMM_SFX
 * (the streaming decode loop of tile_impl.h; the group gemm, whose long rows take the tiles'
 * gemm hmoe_cpu_gemm_GEMM_SFX_tiles). */
#define LEG32_DEFINE2(GEMV_SFX, GEMM_SFX, NAME, BB, UNPACK, SCALE, SCALES4)                                          \
    LEG32_TILE_BODY(NAME##_body, BB, UNPACK, SCALE)                                                                    \
    LEG32_GEMV4_BODY(NAME##_gemv4, BB, UNPACK, SCALES4)                                                               \
    static inline __attribute__((always_inline)) void NAME##_tile(const char *w, size_t rb, int64_t nb,               \
                                                                  const char *x, size_t xs, float *out, const int R,  \
                                                                  const int T) {                                      \
        NAME##_body(w, rb, nb, x, xs, out, R, T, hmoe_prefetch_distance(rb, R));                                       \
    }                                                                                                                  \
    HMOE_TILE_INSTANCES(NAME, NAME##_tile)                                                                             \
    HMOE_DEFINE_GEMV_STREAM(GEMV_SFX, NAME, NAME##_gemv4, 32)                                                          \
    HMOE_DEFINE_GEMM(GEMM_SFX##_tiles, NAME, 32)                                                                       \
    LEG32_DEFINE_GROUP_GEMM(GEMM_SFX, NAME, BB, UNPACK, 0, 0, SCALE, hmoe_cpu_gemm_##GEMM_SFX##_tiles)
#define LEG32_DEFINE(SUFFIX, NAME, BB, UNPACK, SCALE, SCALES4)                                                        \
    LEG32_DEFINE2(SUFFIX, SUFFIX, NAME, BB, UNPACK, SCALE, SCALES4)
/* The same with the unsigned codes (LEG32_GEMV4U_BODY) for gemv and the group gemm. */
#define LEG32_DEFINE_U(SUFFIX, NAME, BB, UNPACK, UNPACKU, OFF, SCALE, SCALES4)                                        \
    LEG32_TILE_BODY(NAME##_body, BB, UNPACK, SCALE)                                                                    \
    LEG32_GEMV4U_BODY(NAME##_gemv4, BB, UNPACKU, OFF, SCALES4)                                                        \
    static inline __attribute__((always_inline)) void NAME##_tile(const char *w, size_t rb, int64_t nb,               \
                                                                  const char *x, size_t xs, float *out, const int R,  \
                                                                  const int T) {                                      \
        NAME##_body(w, rb, nb, x, xs, out, R, T, hmoe_prefetch_distance(rb, R));                                       \
    }                                                                                                                  \
    HMOE_TILE_INSTANCES(NAME, NAME##_tile)                                                                             \
    HMOE_DEFINE_GEMV_STREAM(SUFFIX, NAME, NAME##_gemv4, 32)                                                            \
    HMOE_DEFINE_GEMM(SUFFIX##_tiles, NAME, 32)                                                                         \
    LEG32_DEFINE_GROUP_GEMM(SUFFIX, NAME, BB, UNPACKU, 1, OFF, SCALE, hmoe_cpu_gemm_##SUFFIX##_tiles)

#endif
