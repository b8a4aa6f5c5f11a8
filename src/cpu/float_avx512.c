/* float_avx512.c — F32 × F32, F16 × F16 and BF16 × BF16 dot products with AVX-512
 * (quants.md §2, §8.4). 16 elements at a time: both operands widened to binary32 (exact:
 * vcvtph2ps, or a 16-bit shift for bf16) and multiplied-added in binary32 (FMA), the way
 * llama.cpp accumulates these types, with the partial sums folded into double every 512
 * elements so long rows stay as accurate as the double reference. A tail of
 * ncols % 16 elements goes through the reference dot product (src/kernels/vecdot_float.c).
 */
#include <immintrin.h>

#include "cpu_impl.h"
#include "tile_impl.h"

/* 16 elements of each kind widened to binary32. */
static inline __m512 ld_f32(const char *p) { return _mm512_loadu_ps((const float *)p); }
static inline __m512 ld_f16(const char *p) { return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p)); }
static inline __m512 ld_bf16(const char *p) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p)), 16));
}

/* out[r*T + t] = dot(row r at w + r*rb, x_t) over n elements of `esize` bytes; LD widens 16.
 * Multiply-added in binary32 (FMA: the product is exact inside it; fp16/bf16 products are
 * exact in binary32 anyway), 16 products per instruction instead of 8 in double plus the
 * conversions. Two accumulator sets (even / odd 16-element steps) keep two FMA chains per
 * output in flight. binary32 sums over a whole 59392-element row drift ~1e-4 relative after
 * cancellation (the kernel test's random rows show it), so every FLOAT_FOLD elements the
 * binary32 partials are folded into a double accumulator: each chain is at most 16 FMAs
 * long, which keeps the result within ~1e-7 of the double reference. */
#define FLOAT_FOLD 512

#define FLOAT_STEP(LD, esize, acc, e)                                                                                  \
    _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) {                                                              \
        if (T == 1 && ((e) * (esize)) % 64 == 0) /* one line per 64 bytes, next row tile */                            \
            __builtin_prefetch(w + (size_t)(r + R) * rb + (size_t)(e) * (esize), 0, 3);                                \
        const __m512 wv = LD(w + (size_t)r * rb + (size_t)(e) * (esize));                                              \
        _Pragma("GCC unroll 8") for (int t = 0; t < T; t++) acc[r * T + t] =                                           \
            _mm512_fmadd_ps(wv, LD(x + (size_t)t * xs + (size_t)(e) * (esize)), acc[r * T + t]);                       \
    }

/* dacc[k] += a0[k] + a1[k] widened to double; a0, a1 restart from zero. */
#define FLOAT_FOLD_INTO(dacc, a0, a1)                                                                                  \
    for (int k = 0; k < R * T; k++) {                                                                                  \
        const __m512 v = _mm512_add_ps(a0[k], a1[k]);                                                                  \
        dacc[k] = _mm512_add_pd(dacc[k], _mm512_cvtps_pd(_mm512_castps512_ps256(v)));                                  \
        dacc[k] = _mm512_add_pd(dacc[k],                                                                               \
                                _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1))));    \
        a0[k] = a1[k] = _mm512_setzero_ps();                                                                           \
    }

#define FLOAT_TILE_BODY(LD, esize, type)                                                                               \
    do {                                                                                                               \
        __m512 a0[HMOE_TILE_MAX_TOK], a1[HMOE_TILE_MAX_TOK];                                                           \
        __m512d dacc[HMOE_TILE_MAX_TOK];                                                                               \
        for (int k = 0; k < R * T; k++) a0[k] = a1[k] = _mm512_setzero_ps(), dacc[k] = _mm512_setzero_pd();           \
        int64_t e = 0;                                                                                                 \
        while (e + 32 <= n) {                                                                                          \
            const int64_t end = n - e < FLOAT_FOLD ? e + (n - e) / 32 * 32 : e + FLOAT_FOLD;                           \
            for (; e < end; e += 32) {                                                                                 \
                FLOAT_STEP(LD, esize, a0, e)                                                                           \
                FLOAT_STEP(LD, esize, a1, e + 16)                                                                      \
            }                                                                                                          \
            FLOAT_FOLD_INTO(dacc, a0, a1)                                                                              \
        }                                                                                                              \
        if (e + 16 <= n) {                                                                                             \
            FLOAT_STEP(LD, esize, a0, e)                                                                               \
            e += 16;                                                                                                   \
            FLOAT_FOLD_INTO(dacc, a0, a1)                                                                              \
        }                                                                                                              \
        for (int r = 0; r < R; r++)                                                                                    \
            for (int t = 0; t < T; t++) {                                                                              \
                double s = _mm512_reduce_add_pd(dacc[r * T + t]);                                                      \
                if (e < n)                                                                                             \
                    s += hmoe_type_info[type].vec_dot_ref(n - e, w + (size_t)r * rb + (size_t)e * (esize),             \
                                                          x + (size_t)t * xs + (size_t)e * (esize));                   \
                out[r * T + t] = (float)s;                                                                             \
            }                                                                                                          \
    } while (0)

static inline __attribute__((always_inline)) void f32_tile(const char *w, size_t rb, int64_t n, const char *x,
                                                           size_t xs, float *out, const int R, const int T) {
    FLOAT_TILE_BODY(ld_f32, 4, HMOE_TYPE_F32);
}
static inline __attribute__((always_inline)) void f16_tile(const char *w, size_t rb, int64_t n, const char *x,
                                                           size_t xs, float *out, const int R, const int T) {
    FLOAT_TILE_BODY(ld_f16, 2, HMOE_TYPE_F16);
}
static inline __attribute__((always_inline)) void bf16_tile(const char *w, size_t rb, int64_t n, const char *x,
                                                            size_t xs, float *out, const int R, const int T) {
    FLOAT_TILE_BODY(ld_bf16, 2, HMOE_TYPE_BF16);
}

HMOE_TILE_INSTANCES(f32512, f32_tile)
HMOE_DEFINE_GEMV_GEMM(f32_avx512, f32512, 1)
HMOE_TILE_INSTANCES(f16512, f16_tile)
HMOE_DEFINE_GEMV_GEMM(f16_avx512, f16512, 1)
HMOE_TILE_INSTANCES(bf16512, bf16_tile)
HMOE_DEFINE_GEMV_GEMM(bf16_avx512, bf16512, 1)
