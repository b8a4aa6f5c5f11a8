/* iq_tile_impl.h — private to src/cpu: gemv / gemm loops of the I-quant kernels. AVX-512 bodies
 * BODY(wa, wb, nb, acts, oa, ob, T) decode TWO rows together against T activation rows re-laid
 * into per-thread scratch (iq_act_impl.h); AVX2 bodies BODY1(w, nb, x, xs, out, T) take one row
 * and Q8_K / Q8_0 as quantized. gemv prefetches ahead; gemm runs row chunks × token tiles. */
#ifndef HMOE_CPU_IQ_TILE_IMPL_H
#define HMOE_CPU_IQ_TILE_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "hmoe/types.h"
#include "iq_act_impl.h"

#define HMOE_IQ_TILE_TOK 8          /* tokens per gemm tile */
#define HMOE_IQ_TILE_ROWS 64        /* rows per gemm chunk: 34 KiB of IQ2_XXS rows of 2048, L1/L2-resident */
#define HMOE_IQ_PREFETCH_BYTES 8192 /* gemv prefetches this far ahead (at least two rows) */

/* Decode reads two rows at once, an access pattern the hardware prefetchers follow
 * poorly; gemv asks for the coming row pairs explicitly (a prefetch never faults). 8 KiB
 * ahead: without it a thread read IQ2_XXS at ~4.6 GB/s, with it ~12 (dev VM); 32 KiB did
 * no better there and wastes more bytes past the end of a small expert matrix. */
static inline void hmoe_iq_prefetch(const char *p, size_t bytes) {
    for (size_t o = 0; o < bytes; o += 64) __builtin_prefetch(p + o, 0, 3);
}

/* Without scratch memory the kernels fall back to the reference dot product. */
static inline void hmoe_iq_gemv_ref(enum hmoe_type t, int64_t ncols, const char *w, size_t row_bytes, int64_t nrows,
                                    const char *xq, size_t xq_stride, int64_t ntok, float *y, size_t y_stride) {
    for (int64_t k = 0; k < ntok; k++)
        for (int64_t r = 0; r < nrows; r++)
            y[(size_t)k * y_stride + (size_t)r] =
                hmoe_type_info[t].vec_dot_ref(ncols, w + (size_t)r * row_bytes, xq + (size_t)k * xq_stride);
}

typedef void (*hmoe_iq_tile_fn)(const char *wa, const char *wb, int64_t nb, const struct hmoe_cpu_iq_act *x, float *oa,
                                float *ob);

#define HMOE_IQ_TILE_ONE(NAME, BODY, T)                                                                                \
    static void NAME##_t##T(const char *wa, const char *wb, int64_t nb, const struct hmoe_cpu_iq_act *x, float *oa,    \
                            float *ob) {                                                                               \
        BODY(wa, wb, nb, x, oa, ob, T);                                                                                \
    }

#define HMOE_IQ_TILES(NAME, BODY)                                                                                      \
    HMOE_IQ_TILE_ONE(NAME, BODY, 1)                                                                                    \
    HMOE_IQ_TILE_ONE(NAME, BODY, 2)                                                                                    \
    HMOE_IQ_TILE_ONE(NAME, BODY, 3)                                                                                    \
    HMOE_IQ_TILE_ONE(NAME, BODY, 4)                                                                                    \
    HMOE_IQ_TILE_ONE(NAME, BODY, 5)                                                                                    \
    HMOE_IQ_TILE_ONE(NAME, BODY, 6)                                                                                    \
    HMOE_IQ_TILE_ONE(NAME, BODY, 7)                                                                                    \
    HMOE_IQ_TILE_ONE(NAME, BODY, 8)                                                                                    \
    static const hmoe_iq_tile_fn NAME##_tiles[HMOE_IQ_TILE_TOK + 1] = {                                                \
        0, NAME##_t1, NAME##_t2, NAME##_t3, NAME##_t4, NAME##_t5, NAME##_t6, NAME##_t7, NAME##_t8};

/* hmoe_cpu_gemv_SUFFIX / hmoe_cpu_gemm_SUFFIX (cpu_impl.h) over the tiles of NAME for weight
 * type WTYPE; OFFSET and SPLIT are the relayout's (iq_act_impl.h), RELAYOUT its function.
 * gemv streams as the row variant below does: the first look-ahead distance in one burst,
 * each row pair's look-ahead clamped to the range and every 4 KiB page touched
 * HMOE_IQ_PAGE_AHEAD bytes before the row prefetches reach it. */
#define HMOE_IQ_PAGE_AHEAD 16384
#define HMOE_IQ_DEFINE_GEMV_GEMM(SUFFIX, NAME, WTYPE, OFFSET, SPLIT, RELAYOUT)                                         \
    void hmoe_cpu_gemv_##SUFFIX(int64_t ncols, const void *w, size_t row_bytes, int64_t nrows, const void *xq,         \
                                float *y) {                                                                            \
        const int64_t nb = ncols / 256;                                                                                \
        const char *w0 = (const char *)w;                                                                              \
        struct hmoe_cpu_iq_act *acts = hmoe_cpu_iq_scratch((size_t)nb * sizeof *acts);                                 \
        if (!acts) {                                                                                                   \
            hmoe_iq_gemv_ref(WTYPE, ncols, w0, row_bytes, nrows, (const char *)xq, 0, 1, y, 0);                        \
            return;                                                                                                    \
        }                                                                                                              \
        const size_t pf =                                                                                              \
            HMOE_IQ_PREFETCH_BYTES > 2 * row_bytes ? HMOE_IQ_PREFETCH_BYTES / row_bytes * row_bytes : 2 * row_bytes;   \
        const size_t all = (size_t)nrows * row_bytes;                                                                  \
        hmoe_iq_prefetch(w0, pf < all ? pf : all);                                                                     \
        RELAYOUT(xq, 0, 1, nb, OFFSET, SPLIT, acts);                                                                   \
        size_t touch = (size_t)((((uintptr_t)w0 + 4095) & ~(uintptr_t)4095) - (uintptr_t)w0);                          \
        int64_t r = 0;                                                                                                 \
        for (; r + 2 <= nrows; r += 2) {                                                                               \
            const size_t end = (size_t)(r + 2) * row_bytes;                                                            \
            size_t upto = end + pf + HMOE_IQ_PAGE_AHEAD;                                                               \
            if (upto > all) upto = all;                                                                                \
            for (; touch < upto; touch += 4096) __builtin_prefetch(w0 + touch, 0, 3);                                  \
            if (end + pf <= all) hmoe_iq_prefetch(w0 + end + pf - 2 * row_bytes, 2 * row_bytes);                       \
            NAME##_t1(w0 + (size_t)r * row_bytes, w0 + (size_t)(r + 1) * row_bytes, nb, acts, y + r, y + r + 1);       \
        }                                                                                                              \
        if (r < nrows) {                                                                                               \
            float dummy;                                                                                               \
            NAME##_t1(w0 + (size_t)r * row_bytes, w0 + (size_t)r * row_bytes, nb, acts, y + r, &dummy);                \
        }                                                                                                              \
    }                                                                                                                  \
    void hmoe_cpu_gemm_##SUFFIX(int64_t ncols, const void *w, size_t row_bytes, int64_t nrows, const void *xq,         \
                                size_t xq_stride, int64_t ntok, float *y, size_t y_stride) {                           \
        const int64_t nb = ncols / 256;                                                                                \
        const char *w0 = (const char *)w;                                                                              \
        struct hmoe_cpu_iq_act *acts = hmoe_cpu_iq_scratch((size_t)(nb * ntok) * sizeof *acts);                        \
        if (!acts) {                                                                                                   \
            hmoe_iq_gemv_ref(WTYPE, ncols, w0, row_bytes, nrows, (const char *)xq, xq_stride, ntok, y, y_stride);      \
            return;                                                                                                    \
        }                                                                                                              \
        RELAYOUT(xq, xq_stride, ntok, nb, OFFSET, SPLIT, acts);                                                        \
        for (int64_t r0 = 0; r0 < nrows; r0 += HMOE_IQ_TILE_ROWS) {                                                    \
            int64_t r1 = r0 + HMOE_IQ_TILE_ROWS < nrows ? r0 + HMOE_IQ_TILE_ROWS : nrows;                              \
            for (int64_t t0 = 0; t0 < ntok; t0 += HMOE_IQ_TILE_TOK) {                                                  \
                int64_t nt = ntok - t0 < HMOE_IQ_TILE_TOK ? ntok - t0 : HMOE_IQ_TILE_TOK;                              \
                hmoe_iq_tile_fn tile = NAME##_tiles[nt];                                                               \
                for (int64_t r = r0; r < r1; r += 2) {                                                                 \
                    int64_t rb = r + 1 < r1 ? r + 1 : r;                                                               \
                    float oa[HMOE_IQ_TILE_TOK], ob[HMOE_IQ_TILE_TOK];                                                  \
                    tile(w0 + (size_t)r * row_bytes, w0 + (size_t)rb * row_bytes, nb, acts + t0 * nb, oa, ob);         \
                    for (int64_t t = 0; t < nt; t++) {                                                                 \
                        y[(size_t)(t0 + t) * y_stride + (size_t)r] = oa[t];                                            \
                        if (rb != r) y[(size_t)(t0 + t) * y_stride + (size_t)rb] = ob[t];                              \
                    }                                                                                                  \
                }                                                                                                      \
            }                                                                                                          \
        }                                                                                                              \
    }

/* ---- Natural-layout variant (AVX2 bodies): one row at a time, Q8_K / Q8_0 activations
 * as quantized, BODY1(w, nb, x, x_stride_bytes, out, T) with out[t] = dot(row w, act t). */
typedef void (*hmoe_iq_row_fn)(const char *w, int64_t nb, const char *x, size_t xs, float *out);

#define HMOE_IQ_ROW_ONE(NAME, BODY, T)                                                                                 \
    static void NAME##_t##T(const char *w, int64_t nb, const char *x, size_t xs, float *o) { BODY(w, nb, x, xs, o, T); }

#define HMOE_IQ_ROW_TILES(NAME, BODY)                                                                                  \
    HMOE_IQ_ROW_ONE(NAME, BODY, 1)                                                                                     \
    HMOE_IQ_ROW_ONE(NAME, BODY, 2)                                                                                     \
    HMOE_IQ_ROW_ONE(NAME, BODY, 3)                                                                                     \
    HMOE_IQ_ROW_ONE(NAME, BODY, 4)                                                                                     \
    static const hmoe_iq_row_fn NAME##_tiles[5] = {0, NAME##_t1, NAME##_t2, NAME##_t3, NAME##_t4};

/* gemv / gemm over the row tiles of NAME; BLCK = elements per weight block (ROWS2: the two
 * functions named apart, for a type whose decode has its own kernel).
 * gemv streams like the K-quant decode (tile_impl.h, HMOE_DEFINE_GEMV_STREAM): the first
 * look-ahead distance requested in one burst (a MoE work item is a short stream, and without
 * it its first 8 KiB arrive at demand-miss latency), the row look-ahead clamped to the range
 * (never pulling in the next expert's matrix), and each 4 KiB page touched
 * HMOE_IQ_PAGE_AHEAD bytes before the row prefetches reach it so its table walk is done. */
#define HMOE_IQ_DEFINE_GEMV_GEMM_ROWS(SUFFIX, NAME, BLCK) HMOE_IQ_DEFINE_GEMV_GEMM_ROWS2(SUFFIX, SUFFIX, NAME, BLCK)
#define HMOE_IQ_DEFINE_GEMV_GEMM_ROWS2(GEMV_SFX, GEMM_SFX, NAME, BLCK)                                                 \
    void hmoe_cpu_gemv_##GEMV_SFX(int64_t ncols, const void *w, size_t row_bytes, int64_t nrows, const void *xq,         \
                                float *y) {                                                                            \
        const char *w0 = (const char *)w;                                                                              \
        const size_t pf =                                                                                              \
            HMOE_IQ_PREFETCH_BYTES > row_bytes ? HMOE_IQ_PREFETCH_BYTES / row_bytes * row_bytes : row_bytes;           \
        const size_t all = (size_t)nrows * row_bytes;                                                                  \
        hmoe_iq_prefetch(w0, pf < all ? pf : all);                                                                     \
        size_t touch = (size_t)((((uintptr_t)w0 + 4095) & ~(uintptr_t)4095) - (uintptr_t)w0);                          \
        for (int64_t r = 0; r < nrows; r++) {                                                                          \
            const size_t end = (size_t)(r + 1) * row_bytes;                                                            \
            size_t upto = end + pf + HMOE_IQ_PAGE_AHEAD;                                                               \
            if (upto > all) upto = all;                                                                                \
            for (; touch < upto; touch += 4096) __builtin_prefetch(w0 + touch, 0, 3);                                  \
            if (end + pf <= all) hmoe_iq_prefetch(w0 + end + pf - row_bytes, row_bytes);                                \
            NAME##_t1(w0 + (size_t)r * row_bytes, ncols / (BLCK), (const char *)xq, 0, y + r);                         \
        }                                                                                                              \
    }                                                                                                                  \
    void hmoe_cpu_gemm_##GEMM_SFX(int64_t ncols, const void *w, size_t row_bytes, int64_t nrows, const void *xq,       \
                                  size_t xq_stride, int64_t ntok, float *y, size_t y_stride) {                         \
        const char *w0 = (const char *)w;                                                                              \
        for (int64_t r0 = 0; r0 < nrows; r0 += HMOE_IQ_TILE_ROWS) {                                                    \
            int64_t r1 = r0 + HMOE_IQ_TILE_ROWS < nrows ? r0 + HMOE_IQ_TILE_ROWS : nrows;                              \
            for (int64_t t0 = 0; t0 < ntok; t0 += 4) {                                                                 \
                int64_t nt = ntok - t0 < 4 ? ntok - t0 : 4;                                                            \
                for (int64_t r = r0; r < r1; r++) {                                                                    \
                    float o[4];                                                                                        \
                    NAME##_tiles[nt](w0 + (size_t)r * row_bytes, ncols / (BLCK),                                       \
                                     (const char *)xq + (size_t)t0 * xq_stride, xq_stride, o);                         \
                    for (int64_t t = 0; t < nt; t++) y[(size_t)(t0 + t) * y_stride + (size_t)r] = o[t];                \
                }                                                                                                      \
            }                                                                                                          \
        }                                                                                                              \
    }

#endif
