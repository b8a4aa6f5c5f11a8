/* tile_impl.h — private to src/cpu: the gemv / gemm loops shared by every SIMD weight
 * type. A type writes one always-inline body BODY(w, row_bytes, nb, x, x_stride, out, R, T)
 * computing out[r*T + t] = dot(row r, activation t) for R rows × T tokens, each weight block
 * decoded once for all T tokens and each activation block loaded once for all R rows (R, T
 * are constants after inlining). gemv runs 4-row tiles; gemm runs 1-row × 8-token tiles over
 * a 16-row chunk that stays in L1/L2 while all token tiles pass over it (cpu.h).
 */
#ifndef HMOE_CPU_TILE_IMPL_H
#define HMOE_CPU_TILE_IMPL_H

#include <stddef.h>
#include <stdint.h>

#define HMOE_TILE_MAX_TOK 8   /* token columns per gemm tile: 8 accumulators + decoded weights fit in 32 zmm */
#define HMOE_TILE_GEMV_ROWS 4 /* rows per gemv tile */
#define HMOE_TILE_ROWS 16     /* rows per chunk in gemm: 16 Q4_K rows of 2048 = 18 KiB, L1-resident */

/* Decode (T == 1) streams weights from RAM, and a 4-row tile reads 4 interleaved streams that
 * the hardware prefetchers follow poorly, so the bodies prefetch the same block a whole number
 * of rows ahead: at least one row tile and at least 32 KiB (measured on the dev VM, Q4_K,
 * 1 thread: 4 KiB ahead reached 68-71% of the read roofline, 16 KiB 74%, 32 KiB 83-90%,
 * 64 KiB no better). Past the matrix end it is harmless (prefetches never fault). */
#ifndef HMOE_PREFETCH_MIN_BYTES
#define HMOE_PREFETCH_MIN_BYTES 32768
#endif
static inline size_t hmoe_prefetch_distance(size_t row_bytes, int R) {
    size_t rows = (HMOE_PREFETCH_MIN_BYTES + row_bytes - 1) / row_bytes;
    return (rows > (size_t)R ? rows : (size_t)R) * row_bytes;
}
/* The streaming decode gemv (HMOE_DEFINE_GEMV_STREAM, the Q4_K/Q5_K decode in
 * q45_k_avx512.c) looks ahead much less: 8 KiB. Why: since the page look-ahead below touches
 * every page before the block prefetches reach it, the 32 KiB block look-ahead only cost
 * speed (2 threads streaming real Q4_K_M weights, distances alternated in one process:
 * Q4_K gate/up with the prepared-row kernel 51-53 GB/s at 32 KiB, 56-57 at 16 KiB, 62 at 8 KiB, 59-60
 * at one tile; the Q6_K LM head 40 at 32 KiB, 53 at 16 KiB, 59-61 at 8 KiB, and 66-68 at
 * 8 KiB with q6k_gemv4's one prefetch per line). */
#define HMOE_STREAM_PREFETCH_MIN_BYTES 8192
static inline size_t hmoe_stream_prefetch_distance(size_t row_bytes) {
    size_t rows = (HMOE_STREAM_PREFETCH_MIN_BYTES + row_bytes - 1) / row_bytes;
    return (rows > (size_t)HMOE_TILE_GEMV_ROWS ? rows : (size_t)HMOE_TILE_GEMV_ROWS) * row_bytes;
}
static inline void hmoe_prefetch_block(const char *p, size_t bytes) {
    for (size_t o = 0; o < bytes; o += 64) __builtin_prefetch(p + o, 0, 3);
}

typedef void (*hmoe_tile_fn)(const char *w, size_t rb, int64_t nb, const char *x, size_t xs, float *out);

#define HMOE_TILE_ONE(NAME, BODY, R, T)                                                                                \
    static void NAME##_r##R##t##T(const char *w, size_t rb, int64_t nb, const char *x, size_t xs, float *o) {          \
        BODY(w, rb, nb, x, xs, o, R, T);                                                                               \
    }

/* Instantiate NAME_r1t1..NAME_r4t1 (gemv) ... */
#define HMOE_GEMV_TILE_INSTANCES(NAME, BODY)                                                                           \
    HMOE_TILE_ONE(NAME, BODY, 1, 1)                                                                                    \
    HMOE_TILE_ONE(NAME, BODY, 2, 1)                                                                                    \
    HMOE_TILE_ONE(NAME, BODY, 3, 1)                                                                                    \
    HMOE_TILE_ONE(NAME, BODY, 4, 1)                                                                                    \
    static const hmoe_tile_fn NAME##_row_tiles[HMOE_TILE_GEMV_ROWS + 1] = {0, NAME##_r1t1, NAME##_r2t1, NAME##_r3t1,   \
                                                                           NAME##_r4t1};

/* ... and NAME_r1t2..NAME_r1t8 (gemm; NAME_r1t1 serves both). */
#define HMOE_TILE_INSTANCES(NAME, BODY)                                                                                \
    HMOE_GEMV_TILE_INSTANCES(NAME, BODY)                                                                               \
    HMOE_TILE_ONE(NAME, BODY, 1, 2)                                                                                    \
    HMOE_TILE_ONE(NAME, BODY, 1, 3)                                                                                    \
    HMOE_TILE_ONE(NAME, BODY, 1, 4)                                                                                    \
    HMOE_TILE_ONE(NAME, BODY, 1, 5)                                                                                    \
    HMOE_TILE_ONE(NAME, BODY, 1, 6)                                                                                    \
    HMOE_TILE_ONE(NAME, BODY, 1, 7)                                                                                    \
    HMOE_TILE_ONE(NAME, BODY, 1, 8)                                                                                    \
    static const hmoe_tile_fn NAME##_tok_tiles[HMOE_TILE_MAX_TOK + 1] = {                                              \
        0, NAME##_r1t1, NAME##_r1t2, NAME##_r1t3, NAME##_r1t4, NAME##_r1t5, NAME##_r1t6, NAME##_r1t7, NAME##_r1t8};

/* Page look-ahead of the decode streams: one prefetch to the first line of every 4 KiB page
 * this far past the current tile, ahead of the block look-ahead above. Why: the weights of
 * the default (mmap) path sit in 4 KiB pages, and the block prefetches that enter a page
 * whose translation is not yet in the TLB did not keep the stream going (the kernels read
 * 20-26 GB/s per core, the plain-load probe 25-27); touching each page first, a few pages
 * before the block prefetches reach it, lets its table walk finish early: Q4_K decode
 * 19-20 -> 35-37 GB/s on one core, Q6_K 23-26 -> 32, in bench_gemv. 16 KiB past the block look-ahead is 4 pages, several walks' worth of time at
 * 25-35 GB/s per core; the touched lines are needed soon anyway (they land in L1/L2). */
#define HMOE_PAGE_AHEAD_EXTRA 16384
static inline size_t hmoe_page_touch(const char *w, size_t touch, size_t upto, size_t all) {
    if (upto > all) upto = all;
    for (; touch < upto; touch += 4096) __builtin_prefetch(w + touch, 0, 3);
    return touch;
}

/* Define hmoe_cpu_gemv_SUFFIX / hmoe_cpu_gemm_SUFFIX over the tiles of NAME.
 * BLCK = weight elements per block (1 for the float types, whose bodies take n = ncols). */
#define HMOE_DEFINE_GEMV(SUFFIX, NAME, BLCK)                                                                           \
    void hmoe_cpu_gemv_##SUFFIX(int64_t ncols, const void *w, size_t row_bytes, int64_t nrows, const void *xq,         \
                                float *y) {                                                                            \
        const int64_t nb = ncols / (BLCK);                                                                             \
        const size_t all = (size_t)nrows * row_bytes;                                                                  \
        const size_t ahead = hmoe_prefetch_distance(row_bytes, HMOE_TILE_GEMV_ROWS) + HMOE_PAGE_AHEAD_EXTRA;           \
        size_t touch = (size_t)((((uintptr_t)w + 4095) & ~(uintptr_t)4095) - (uintptr_t)w);                           \
        int64_t r = 0;                                                                                                 \
        for (; r + HMOE_TILE_GEMV_ROWS <= nrows; r += HMOE_TILE_GEMV_ROWS) {                                           \
            touch = hmoe_page_touch((const char *)w, touch, (size_t)(r + HMOE_TILE_GEMV_ROWS) * row_bytes + ahead, all); \
            NAME##_r4t1((const char *)w + (size_t)r * row_bytes, row_bytes, nb, (const char *)xq, 0, y + r);           \
        }                                                                                                              \
        if (r < nrows)                                                                                                 \
            NAME##_row_tiles[nrows - r]((const char *)w + (size_t)r * row_bytes, row_bytes, nb, (const char *)xq, 0,   \
                                        y + r);                                                                        \
    }

/* gemv for types with a dedicated 4-row decode body GEMV4(w, rb, nb, x, pf, out) that
 * prefetches each block `pf` bytes ahead. Two things the plain loop above leaves to the
 * hardware prefetcher, which matter for the small matrices of decode (an expert is 0.3-1 MB,
 * a work item a few hundred rows): the first look-ahead distance of the range is requested
 * in one burst before the first tile (else the first look-ahead distance of every item streams
 * at demand-miss latency), and the look-ahead is clamped to the range, so an item never pulls
 * in bytes past its end (the next expert's matrix, which this token may not use).
 * Each page of the range is touched HMOE_PAGE_AHEAD_EXTRA bytes before the block look-ahead
 * enters it (hmoe_page_touch; offsets of page starts, clamped to the range too). */
#define HMOE_DEFINE_GEMV_STREAM(SUFFIX, NAME, GEMV4, BLCK)                                                             \
    void hmoe_cpu_gemv_##SUFFIX(int64_t ncols, const void *w, size_t row_bytes, int64_t nrows, const void *xq,         \
                                float *y) {                                                                            \
        const int64_t nb = ncols / (BLCK);                                                                             \
        const size_t pf = hmoe_stream_prefetch_distance(row_bytes);                                                    \
        const size_t all = (size_t)nrows * row_bytes, ahead = pf + HMOE_PAGE_AHEAD_EXTRA;                              \
        size_t touch = (size_t)((((uintptr_t)w + 4095) & ~(uintptr_t)4095) - (uintptr_t)w);                           \
        hmoe_prefetch_block((const char *)w, pf < all ? pf : all);                                                     \
        int64_t r = 0;                                                                                                 \
        for (; r + HMOE_TILE_GEMV_ROWS <= nrows; r += HMOE_TILE_GEMV_ROWS) {                                           \
            touch = hmoe_page_touch((const char *)w, touch, (size_t)(r + HMOE_TILE_GEMV_ROWS) * row_bytes + ahead, all); \
            const size_t left = (size_t)(nrows - r - HMOE_TILE_GEMV_ROWS) * row_bytes; /* after this tile */           \
            GEMV4((const char *)w + (size_t)r * row_bytes, row_bytes, nb, (const char *)xq, pf < left ? pf : left,     \
                  y + r);                                                                                              \
        }                                                                                                              \
        if (r < nrows)                                                                                                 \
            NAME##_row_tiles[nrows - r]((const char *)w + (size_t)r * row_bytes, row_bytes, nb, (const char *)xq, 0,   \
                                        y + r);                                                                        \
    }

#define HMOE_DEFINE_GEMM(SUFFIX, NAME, BLCK)                                                                           \
    void hmoe_cpu_gemm_##SUFFIX(int64_t ncols, const void *w, size_t row_bytes, int64_t nrows, const void *xq,         \
                                size_t xq_stride, int64_t ntok, float *y, size_t y_stride) {                           \
        const int64_t nb = ncols / (BLCK);                                                                             \
        for (int64_t r0 = 0; r0 < nrows; r0 += HMOE_TILE_ROWS) {                                                       \
            int64_t r1 = r0 + HMOE_TILE_ROWS < nrows ? r0 + HMOE_TILE_ROWS : nrows;                                    \
            for (int64_t t0 = 0; t0 < ntok; t0 += HMOE_TILE_MAX_TOK) {                                                 \
                int64_t nt = ntok - t0 < HMOE_TILE_MAX_TOK ? ntok - t0 : HMOE_TILE_MAX_TOK;                            \
                const char *xt = (const char *)xq + (size_t)t0 * xq_stride;                                            \
                hmoe_tile_fn tile = NAME##_tok_tiles[nt];                                                              \
                for (int64_t r = r0; r < r1; r++) {                                                                    \
                    float out[HMOE_TILE_MAX_TOK];                                                                      \
                    tile((const char *)w + (size_t)r * row_bytes, row_bytes, nb, xt, xq_stride, out);                  \
                    for (int64_t t = 0; t < nt; t++) y[(size_t)(t0 + t) * y_stride + (size_t)r] = out[t];              \
                }                                                                                                      \
            }                                                                                                          \
        }                                                                                                              \
    }

#define HMOE_DEFINE_GEMV_GEMM(SUFFIX, NAME, BLCK)                                                                      \
    HMOE_DEFINE_GEMV(SUFFIX, NAME, BLCK)                                                                               \
    HMOE_DEFINE_GEMM(SUFFIX, NAME, BLCK)

/* gemm for types whose tiles want the activations in their own order. PREP(dst, src, nb)
 * rewrites one activation row of nb blocks (act_block_bytes each) into that order; it runs
 * once per (row chunk, token tile) into a stack buffer, so its cost is spread over
 * HMOE_PREP_ROWS rows. GEMM_TILES are NAME##_gT instances (HMOE_GEMM_TILE_INSTANCES) that
 * read the prepared rows. A row too long for the buffer falls back to gemv per token. */
#define HMOE_PREP_BYTES (64 * 1024) /* prepared activations per token tile (stack) */
#define HMOE_PREP_ROWS 64           /* rows per chunk: 64 Q4_K rows of 2048 = 72 KiB, L2-resident */

#define HMOE_GEMM_TILE_ONE(NAME, BODY, T)                                                                              \
    static void NAME##_g##T(const char *w, size_t rb, int64_t nb, const char *x, size_t xs, float *o) {                \
        BODY(w, rb, nb, x, xs, o, T);                                                                                  \
    }
#define HMOE_GEMM_TILE_INSTANCES(NAME, BODY)                                                                           \
    HMOE_GEMM_TILE_ONE(NAME, BODY, 1)                                                                                  \
    HMOE_GEMM_TILE_ONE(NAME, BODY, 2)                                                                                  \
    HMOE_GEMM_TILE_ONE(NAME, BODY, 3)                                                                                  \
    HMOE_GEMM_TILE_ONE(NAME, BODY, 4)                                                                                  \
    HMOE_GEMM_TILE_ONE(NAME, BODY, 5)                                                                                  \
    HMOE_GEMM_TILE_ONE(NAME, BODY, 6)                                                                                  \
    HMOE_GEMM_TILE_ONE(NAME, BODY, 7)                                                                                  \
    HMOE_GEMM_TILE_ONE(NAME, BODY, 8)                                                                                  \
    static const hmoe_tile_fn NAME##_gemm_tiles[HMOE_TILE_MAX_TOK + 1] = {                                             \
        0, NAME##_g1, NAME##_g2, NAME##_g3, NAME##_g4, NAME##_g5, NAME##_g6, NAME##_g7, NAME##_g8};

#define HMOE_DEFINE_GEMM_PREP(SUFFIX, NAME, BLCK, PREP, act_block_bytes)                                               \
    void hmoe_cpu_gemm_##SUFFIX(int64_t ncols, const void *w, size_t row_bytes, int64_t nrows, const void *xq,         \
                                size_t xq_stride, int64_t ntok, float *y, size_t y_stride) {                           \
        const int64_t nb = ncols / (BLCK);                                                                             \
        const size_t act_row = (size_t)nb * (act_block_bytes);                                                         \
        int64_t tt = (int64_t)(HMOE_PREP_BYTES / act_row);                                                             \
        if (tt < 1) {                                                                                                  \
            for (int64_t t = 0; t < ntok; t++)                                                                         \
                hmoe_cpu_gemv_##SUFFIX(ncols, w, row_bytes, nrows, (const char *)xq + (size_t)t * xq_stride,           \
                                       y + (size_t)t * y_stride);                                                      \
            return;                                                                                                    \
        }                                                                                                              \
        if (tt > HMOE_TILE_MAX_TOK) tt = HMOE_TILE_MAX_TOK;                                                            \
        _Alignas(64) char buf[HMOE_PREP_BYTES];                                                                        \
        for (int64_t r0 = 0; r0 < nrows; r0 += HMOE_PREP_ROWS) {                                                       \
            int64_t r1 = r0 + HMOE_PREP_ROWS < nrows ? r0 + HMOE_PREP_ROWS : nrows;                                    \
            for (int64_t t0 = 0; t0 < ntok; t0 += tt) {                                                                \
                int64_t nt = ntok - t0 < tt ? ntok - t0 : tt;                                                          \
                for (int64_t t = 0; t < nt; t++)                                                                       \
                    PREP(buf + (size_t)t * act_row, (const char *)xq + (size_t)(t0 + t) * xq_stride, nb);              \
                hmoe_tile_fn tile = NAME##_gemm_tiles[nt];                                                             \
                for (int64_t r = r0; r < r1; r++) {                                                                    \
                    float out[HMOE_TILE_MAX_TOK];                                                                      \
                    tile((const char *)w + (size_t)r * row_bytes, row_bytes, nb, buf, act_row, out);                   \
                    for (int64_t t = 0; t < nt; t++) y[(size_t)(t0 + t) * y_stride + (size_t)r] = out[t];              \
                }                                                                                                      \
            }                                                                                                          \
        }                                                                                                              \
    }

#endif
