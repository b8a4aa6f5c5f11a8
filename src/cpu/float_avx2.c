/* float_avx2.c — F32 × F32, F16 × F16 and BF16 × BF16 dot products with AVX2/FMA/F16C
 * (quants.md §2, §8.4). 8 elements at a time widened to binary32 (exact) and then to
 * double, so products are exact and sums kept in double like the references; a tail of
 * ncols % 8 elements goes through the reference dot product.
 */
#include <immintrin.h>

#include "cpu_impl.h"
#include "tile_impl.h"

static inline __m256 ld_f32(const char *p) { return _mm256_loadu_ps((const float *)p); }
static inline __m256 ld_f16(const char *p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)); }
static inline __m256 ld_bf16(const char *p) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p)), 16));
}

/* out[r*T + t] = dot(row r at w + r*rb, x_t) over n elements of `esize` bytes; LD widens 8. */
#define FLOAT_TILE_BODY(LD, esize, type)                                                                               \
    do {                                                                                                               \
        __m256d lo[HMOE_TILE_MAX_TOK], hi[HMOE_TILE_MAX_TOK];                                                          \
        for (int k = 0; k < R * T; k++) lo[k] = hi[k] = _mm256_setzero_pd();                                           \
        int64_t e = 0;                                                                                                 \
        for (; e + 8 <= n; e += 8) {                                                                                   \
            _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) {                                                      \
                if (T == 1 && (e * (esize)) % 64 == 0) /* one line per 64 bytes, next row tile */                      \
                    __builtin_prefetch(w + (size_t)(r + R) * rb + (size_t)e * (esize), 0, 3);                          \
                const __m256 wv = LD(w + (size_t)r * rb + (size_t)e * (esize));                                        \
                const __m256d w0 = _mm256_cvtps_pd(_mm256_castps256_ps128(wv));                                        \
                const __m256d w1 = _mm256_cvtps_pd(_mm256_extractf128_ps(wv, 1));                                      \
                _Pragma("GCC unroll 8") for (int t = 0; t < T; t++) {                                                  \
                    const __m256 xv = LD(x + (size_t)t * xs + (size_t)e * (esize));                                    \
                    lo[r * T + t] = _mm256_fmadd_pd(w0, _mm256_cvtps_pd(_mm256_castps256_ps128(xv)), lo[r * T + t]);   \
                    hi[r * T + t] = _mm256_fmadd_pd(w1, _mm256_cvtps_pd(_mm256_extractf128_ps(xv, 1)), hi[r * T + t]); \
                }                                                                                                      \
            }                                                                                                          \
        }                                                                                                              \
        for (int r = 0; r < R; r++)                                                                                    \
            for (int t = 0; t < T; t++) {                                                                              \
                const __m256d v = _mm256_add_pd(lo[r * T + t], hi[r * T + t]);                                         \
                __m128d s2 = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));                       \
                double s = _mm_cvtsd_f64(s2) + _mm_cvtsd_f64(_mm_unpackhi_pd(s2, s2));                                 \
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

/* F32 prefill (the MoE router's gemm): the activation rows are widened to double once per
 * token tile (f32d_prep), so a token costs per 8 elements two double FMAs on memory operands
 * instead of two conversions, an extract and two FMAs per row; the weights are widened once
 * per row for all tokens of the tile. Exact products, double sums, like the tiles above. */
static inline void f32d_prep(char *dst, const char *src, int64_t n) {
    double *d = (double *)dst;
    const float *f = (const float *)src;
    int64_t e = 0;
    for (; e + 4 <= n; e += 4) _mm256_storeu_pd(d + e, _mm256_cvtps_pd(_mm_loadu_ps(f + e)));
    for (; e < n; e++) d[e] = f[e];
}

/* out[t] = dot(the F32 row at w, widened activation row t at x + t·xs) over n elements. */
static inline __attribute__((always_inline)) void f32d_tile(const char *w, int64_t n, const char *x, size_t xs,
                                                            float *out, const int T) {
    __m256d lo[HMOE_TILE_MAX_TOK], hi[HMOE_TILE_MAX_TOK];
    for (int t = 0; t < T; t++) lo[t] = hi[t] = _mm256_setzero_pd();
    const float *wf = (const float *)w;
    int64_t e = 0;
    for (; e + 8 <= n; e += 8) {
        const __m256 wv = _mm256_loadu_ps(wf + e);
        const __m256d w0 = _mm256_cvtps_pd(_mm256_castps256_ps128(wv)), w1 = _mm256_cvtps_pd(_mm256_extractf128_ps(wv, 1));
#pragma GCC unroll 8
        for (int t = 0; t < T; t++) {
            const double *xd = (const double *)(x + (size_t)t * xs) + e;
            lo[t] = _mm256_fmadd_pd(w0, _mm256_loadu_pd(xd), lo[t]);
            hi[t] = _mm256_fmadd_pd(w1, _mm256_loadu_pd(xd + 4), hi[t]);
        }
    }
    for (int t = 0; t < T; t++) {
        const __m256d v = _mm256_add_pd(lo[t], hi[t]);
        const __m128d s2 = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
        double s = _mm_cvtsd_f64(s2) + _mm_cvtsd_f64(_mm_unpackhi_pd(s2, s2));
        const double *xd = (const double *)(x + (size_t)t * xs);
        for (int64_t k = e; k < n; k++) s += (double)wf[k] * xd[k];
        out[t] = (float)s;
    }
}
#define F32D_TILE(w, rb, n, x, xs, out, T) ((void)(rb), f32d_tile(w, n, x, xs, out, T))

HMOE_GEMV_TILE_INSTANCES(f32256, f32_tile)
HMOE_DEFINE_GEMV(f32_avx2, f32256, 1)
HMOE_GEMM_TILE_INSTANCES(f32d, F32D_TILE)
HMOE_DEFINE_GEMM_PREP(f32_avx2, f32d, 1, f32d_prep, sizeof(double))
HMOE_TILE_INSTANCES(f16256, f16_tile)
HMOE_DEFINE_GEMV_GEMM(f16_avx2, f16256, 1)
HMOE_TILE_INSTANCES(bf16256, bf16_tile)
HMOE_DEFINE_GEMV_GEMM(bf16_avx2, bf16256, 1)
