/* tile_impl.h — private to src/cpu: the loops shared by every SIMD weight type, written
 * once. A type provides a "tile" function that computes T dot products of ONE weight row
 * with T activation rows (T = 1..8, a compile-time constant after inlining), decoding
 * each weight block once for all T tokens. These macros wrap it into the gemv and gemm
 * entry points of cpu_impl.h: gemm walks a chunk of rows × tiles of 8 tokens so the
 * row chunk stays in L1/L2 while all token tiles pass over it (cpu.h, hmoe_cpu_gemm).
 */
#ifndef HMOE_CPU_TILE_IMPL_H
#define HMOE_CPU_TILE_IMPL_H

#include <stddef.h>
#include <stdint.h>

#define HMOE_TILE_MAX_TOK 8 /* token columns per tile: 8 accumulators + decoded weights fit in 32 zmm */
#define HMOE_TILE_ROWS 16   /* rows per chunk in gemm: 16 Q4_K rows of 2048 = 18 KiB, L1-resident */

/* Instantiate `static void NAME_tT(...)` for T = 1..8 from an always-inline body
 * BODY(w_row, nblocks, xq, xq_stride, out, T). */
#define HMOE_TILE_INSTANCES(NAME, BODY)                                                                             \
    static void NAME##_t1(const void *w, int64_t nb, const char *x, size_t xs, float *o) { BODY(w, nb, x, xs, o, 1); } \
    static void NAME##_t2(const void *w, int64_t nb, const char *x, size_t xs, float *o) { BODY(w, nb, x, xs, o, 2); } \
    static void NAME##_t3(const void *w, int64_t nb, const char *x, size_t xs, float *o) { BODY(w, nb, x, xs, o, 3); } \
    static void NAME##_t4(const void *w, int64_t nb, const char *x, size_t xs, float *o) { BODY(w, nb, x, xs, o, 4); } \
    static void NAME##_t5(const void *w, int64_t nb, const char *x, size_t xs, float *o) { BODY(w, nb, x, xs, o, 5); } \
    static void NAME##_t6(const void *w, int64_t nb, const char *x, size_t xs, float *o) { BODY(w, nb, x, xs, o, 6); } \
    static void NAME##_t7(const void *w, int64_t nb, const char *x, size_t xs, float *o) { BODY(w, nb, x, xs, o, 7); } \
    static void NAME##_t8(const void *w, int64_t nb, const char *x, size_t xs, float *o) { BODY(w, nb, x, xs, o, 8); } \
    typedef void (*NAME##_tile_fn)(const void *, int64_t, const char *, size_t, float *);                            \
    static const NAME##_tile_fn NAME##_tiles[HMOE_TILE_MAX_TOK + 1] = {0,          NAME##_t1, NAME##_t2,           \
                                                                      NAME##_t3,  NAME##_t4, NAME##_t5,           \
                                                                      NAME##_t6,  NAME##_t7, NAME##_t8};

/* Define hmoe_cpu_gemv_SUFFIX / hmoe_cpu_gemm_SUFFIX over the tiles NAME_tT.
 * BLCK = weight elements per block. GEMV_ROWS(w, nb, row_bytes, nrows, xq, y) may
 * process several rows at once; pass HMOE_GEMV_ROWS_BY_TILE to use the T=1 tile. */
#define HMOE_GEMV_ROWS_BY_TILE(NAME, w, nb, row_bytes, nrows, xq, y)                                                 \
    for (int64_t r_ = 0; r_ < (nrows); r_++) NAME##_t1((const char *)(w) + (size_t)r_ * (row_bytes), nb, xq, 0, (y) + r_)

#define HMOE_DEFINE_GEMV_GEMM(SUFFIX, NAME, BLCK, GEMV_ROWS)                                                        \
    void hmoe_cpu_gemv_##SUFFIX(int64_t ncols, const void *w, size_t row_bytes, int64_t nrows, const void *xq,      \
                                float *y) {                                                                          \
        GEMV_ROWS(NAME, w, ncols / (BLCK), row_bytes, nrows, (const char *)xq, y);                                    \
    }                                                                                                                \
    void hmoe_cpu_gemm_##SUFFIX(int64_t ncols, const void *w, size_t row_bytes, int64_t nrows, const void *xq,      \
                                size_t xq_stride, int64_t ntok, float *y, size_t y_stride) {                         \
        const int64_t nb = ncols / (BLCK);                                                                           \
        for (int64_t r0 = 0; r0 < nrows; r0 += HMOE_TILE_ROWS) {                                                     \
            int64_t r1 = r0 + HMOE_TILE_ROWS < nrows ? r0 + HMOE_TILE_ROWS : nrows;                                  \
            for (int64_t t0 = 0; t0 < ntok; t0 += HMOE_TILE_MAX_TOK) {                                               \
                int64_t nt = ntok - t0 < HMOE_TILE_MAX_TOK ? ntok - t0 : HMOE_TILE_MAX_TOK;                          \
                const char *xt = (const char *)xq + (size_t)t0 * xq_stride;                                          \
                NAME##_tile_fn tile = NAME##_tiles[nt];                                                              \
                for (int64_t r = r0; r < r1; r++) {                                                                  \
                    float out[HMOE_TILE_MAX_TOK];                                                                    \
                    tile((const char *)w + (size_t)r * row_bytes, nb, xt, xq_stride, out);                           \
                    for (int64_t t = 0; t < nt; t++) y[(size_t)(t0 + t) * y_stride + (size_t)r] = out[t];            \
                }                                                                                                    \
            }                                                                                                        \
        }                                                                                                            \
    }

#endif
