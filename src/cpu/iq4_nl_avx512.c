/* iq4_nl_avx512.c — IQ4_NL × Q8_0 with AVX-512 VBMI/VNNI (quants.md §5.8, §8.1, §8.4): groups of
 * 4 blocks of two rows; vpermi2b packs a row's 4 × 16 code bytes, vpermb (kvalues + 128) of the
 * low / high nibbles makes two 16-element slices per block, matching the Q8_0 activations
 * re-laid once per call (struct nl_act, with -128·Σa per block). Each block's int32 sum is
 * scaled by dw·da in double; blocks past the last full group use the reference dot. */
#include <immintrin.h>

#include "cpu_impl.h"
#include "hmoe/quant_blocks.h"
#include "iq_act_impl.h"
#include "iq_avx512_impl.h"
#include "iq_codes_impl.h"
#include "iq_tile_impl.h"

#define NL_GROUP 4 /* blocks per group */
#define NL_GROUP_BYTES (NL_GROUP * (int)sizeof(struct hmoe_block_iq4_nl))

/* Four Q8_0 activation blocks, re-laid. */
struct nl_act {
    int8_t qs[2][64]; /* slice s: bytes 16b + j = element 16s + j of block b */
    int32_t corr[16]; /* dword 4b = -128 · Σ block b's 32 quants, others 0 */
    double d[8];      /* d[2b] = d[2b + 1] = da of block b */
};
_Static_assert(sizeof(struct nl_act) == 256, "nl_act size");

static void nl_relayout(const void *src, size_t src_stride, int64_t ntok, int64_t ng, struct nl_act *dst) {
    for (int64_t t = 0; t < ntok; t++) {
        const struct hmoe_block_q8_0 *a = (const struct hmoe_block_q8_0 *)((const char *)src + (size_t)t * src_stride);
        for (int64_t g = 0; g < ng; g++) {
            struct nl_act *o = dst + t * ng + g;
            __m512i s0 = _mm512_setzero_si512(), s1 = s0;
            for (int b = 0; b < NL_GROUP; b++) {
                const struct hmoe_block_q8_0 *ab = a + g * NL_GROUP + b;
                s0 = _mm512_inserti32x4(s0, _mm_loadu_si128((const __m128i *)ab->qs), 0);
                s0 = _mm512_alignr_epi32(s0, s0, 4); /* rotate the new 16 bytes up one lane */
                s1 = _mm512_inserti32x4(s1, _mm_loadu_si128((const __m128i *)(ab->qs + 16)), 0);
                s1 = _mm512_alignr_epi32(s1, s1, 4);
                o->d[2 * b] = o->d[2 * b + 1] = (double)_cvtsh_ss(ab->d);
            }
            _mm512_store_si512(o->qs[0], s0);
            _mm512_store_si512(o->qs[1], s1);
            /* Σ of each block's 32 quants: psadbw-free, via dpbusd with ones on (a + 128) */
            const __m512i k128 = _mm512_set1_epi8((char)128), ones = _mm512_set1_epi8(1);
            __m512i sum = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_xor_si512(s0, k128), ones);
            sum = _mm512_dpbusd_epi32(sum, _mm512_xor_si512(s1, k128), ones); /* Σ(a + 128) per 4 bytes */
            /* dword 4b = Σ over block b = the lane's 4 dwords, minus 32·128 */
            sum = _mm512_add_epi32(sum, _mm512_shuffle_epi32(sum, _MM_PERM_BADC));
            sum = _mm512_add_epi32(sum, _mm512_shuffle_epi32(sum, _MM_PERM_CDAB));
            sum = _mm512_sub_epi32(sum, _mm512_set1_epi32(32 * 128));
            _mm512_store_si512(o->corr, _mm512_maskz_mullo_epi32(0x1111, sum, _mm512_set1_epi32(-128)));
        }
    }
}

/* Code bytes of a 4-block group: byte 16b + j = qs[j] of block b (block b at 18b). */
static const uint8_t nl_qs_pos[64] __attribute__((aligned(64))) = {
    2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14, 15, 16, 17, 20, 21, 22, 23, 24, 25,
    26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49,
    50, 51, 52, 53, 56, 57, 58, 59, 60, 61, 62, 63, 64, 65, 66, 67, 68, 69, 70, 71};

static inline __attribute__((always_inline)) void nl_tile(const char *wa, const char *wb, int64_t ng,
                                                          const struct nl_act *x, float *oa, float *ob, const int T) {
    const __m512i tab = _mm512_load_si512(hmoe_cpu_iq_codes()->iq4nl_u8);
    const __m512i cq = _mm512_load_si512(nl_qs_pos);
    /* words 9b of row A (source words 0..31) and row B (32..63): the fp16 d of block b */
    const __m512i cd = _mm512_castsi128_si512(_mm_setr_epi16(0, 32, 9, 41, 18, 50, 27, 59));
    __m512d acc[HMOE_IQ_TILE_TOK];
    for (int t = 0; t < T; t++) acc[t] = _mm512_setzero_pd();
    for (int64_t g = 0; g < ng; g++) {
        const char *pa = wa + (size_t)g * NL_GROUP_BYTES, *pb = wb + (size_t)g * NL_GROUP_BYTES;
        /* 72 bytes per group: the second load is masked to 8 bytes so it never reads past it */
        const __m512i a0 = _mm512_loadu_si512(pa), a1 = _mm512_maskz_loadu_epi8(0xff, pa + 64);
        const __m512i b0 = _mm512_loadu_si512(pb), b1 = _mm512_maskz_loadu_epi8(0xff, pb + 64);
        const __m512i qa = _mm512_permutex2var_epi8(a0, cq, a1), qb = _mm512_permutex2var_epi8(b0, cq, b1);
        const __m512i va0 = _mm512_permutexvar_epi8(qa, tab),
                      va1 = _mm512_permutexvar_epi8(_mm512_srli_epi16(qa, 4), tab);
        const __m512i vb0 = _mm512_permutexvar_epi8(qb, tab),
                      vb1 = _mm512_permutexvar_epi8(_mm512_srli_epi16(qb, 4), tab);
        const __m512d dd = _mm512_cvtps_pd(
            _mm256_cvtph_ps(_mm512_castsi512_si128(_mm512_permutex2var_epi16(a0, cd, b0)))); /* dA0 dB0 dA1 .. */
#pragma GCC unroll 8
        for (int t = 0; t < T; t++) {
            const struct nl_act *a = x + t * ng + g;
            const __m512i s0 = _mm512_load_si512(a->qs[0]), s1 = _mm512_load_si512(a->qs[1]);
            const __m512i c = _mm512_load_si512(a->corr);
            const __m512i sa = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(c, va0, s0), va1, s1);
            const __m512i sb = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(c, vb0, s0), vb1, s1);
            /* per block b (dwords 4b..4b+3): rows A and B summed into dwords 4b, 4b + 1 */
            const __m512i xm = _mm512_mask_blend_epi32(0xaaaa, sa, sb), ym = _mm512_mask_blend_epi32(0x5555, sa, sb);
            __m512i s = _mm512_add_epi32(xm, _mm512_shuffle_epi32(ym, _MM_PERM_CDAB));
            s = _mm512_add_epi32(s, _mm512_shuffle_epi32(s, _MM_PERM_BADC));
            const __m256i s8 = _mm512_castsi512_si256(
                _mm512_permutexvar_epi32(_mm512_castsi256_si512(_mm256_setr_epi32(0, 1, 4, 5, 8, 9, 12, 13)), s));
            acc[t] = _mm512_fmadd_pd(_mm512_cvtepi32_pd(s8), _mm512_mul_pd(dd, _mm512_load_pd(a->d)), acc[t]);
        }
    }
    for (int t = 0; t < T; t++) hmoe_iq512_store_pair(acc[t], 1.0, oa + t, ob + t);
}

typedef void (*nl_tile_fn)(const char *, const char *, int64_t, const struct nl_act *, float *, float *);
#define NL_TILE(T)                                                                                                     \
    static void nl_t##T(const char *wa, const char *wb, int64_t ng, const struct nl_act *x, float *oa, float *ob) {    \
        nl_tile(wa, wb, ng, x, oa, ob, T);                                                                             \
    }
NL_TILE(1)
NL_TILE(2)
NL_TILE(3)
NL_TILE(4)
NL_TILE(5)
NL_TILE(6)
NL_TILE(7)
NL_TILE(8)
static const nl_tile_fn nl_tiles[HMOE_IQ_TILE_TOK + 1] = {0, nl_t1, nl_t2, nl_t3, nl_t4, nl_t5, nl_t6, nl_t7, nl_t8};

/* Blocks after the last full group, through the reference dot product. */
static void nl_tail(int64_t ncols, const char *w, size_t row_bytes, int64_t nrows, const char *xq, size_t xq_stride,
                    int64_t ntok, float *y, size_t y_stride) {
    const int64_t done = ncols / (32 * NL_GROUP) * (32 * NL_GROUP), rest = ncols - done;
    if (rest == 0) return;
    const size_t wo = (size_t)(done / 32) * sizeof(struct hmoe_block_iq4_nl),
                 xo = (size_t)(done / 32) * sizeof(struct hmoe_block_q8_0);
    for (int64_t t = 0; t < ntok; t++)
        for (int64_t r = 0; r < nrows; r++)
            y[(size_t)t * y_stride + (size_t)r] += hmoe_type_info[HMOE_TYPE_IQ4_NL].vec_dot_ref(
                rest, w + (size_t)r * row_bytes + wo, xq + (size_t)t * xq_stride + xo);
}

void hmoe_cpu_gemm_iq4_nl_avx512(int64_t ncols, const void *w, size_t row_bytes, int64_t nrows, const void *xq,
                                 size_t xq_stride, int64_t ntok, float *y, size_t y_stride) {
    const int64_t ng = ncols / (32 * NL_GROUP);
    const char *w0 = (const char *)w;
    struct nl_act *acts = hmoe_cpu_iq_scratch((size_t)(ng * ntok) * sizeof *acts);
    if (!acts) {
        hmoe_iq_gemv_ref(HMOE_TYPE_IQ4_NL, ncols, w0, row_bytes, nrows, (const char *)xq, xq_stride, ntok, y, y_stride);
        return;
    }
    nl_relayout(xq, xq_stride, ntok, ng, acts);
    for (int64_t r0 = 0; r0 < nrows; r0 += HMOE_IQ_TILE_ROWS) {
        int64_t r1 = r0 + HMOE_IQ_TILE_ROWS < nrows ? r0 + HMOE_IQ_TILE_ROWS : nrows;
        for (int64_t t0 = 0; t0 < ntok; t0 += HMOE_IQ_TILE_TOK) {
            int64_t nt = ntok - t0 < HMOE_IQ_TILE_TOK ? ntok - t0 : HMOE_IQ_TILE_TOK;
            for (int64_t r = r0; r < r1; r += 2) {
                int64_t rb = r + 1 < r1 ? r + 1 : r;
                float oa[HMOE_IQ_TILE_TOK], ob[HMOE_IQ_TILE_TOK];
                if (ntok == 1) hmoe_iq_prefetch(w0 + (size_t)r * row_bytes + HMOE_IQ_PREFETCH_BYTES, 2 * row_bytes);
                nl_tiles[nt](w0 + (size_t)r * row_bytes, w0 + (size_t)rb * row_bytes, ng, acts + t0 * ng, oa, ob);
                for (int64_t t = 0; t < nt; t++) {
                    y[(size_t)(t0 + t) * y_stride + (size_t)r] = oa[t];
                    if (rb != r) y[(size_t)(t0 + t) * y_stride + (size_t)rb] = ob[t];
                }
            }
        }
    }
    nl_tail(ncols, w0, row_bytes, nrows, (const char *)xq, xq_stride, ntok, y, y_stride);
}

void hmoe_cpu_gemv_iq4_nl_avx512(int64_t ncols, const void *w, size_t row_bytes, int64_t nrows, const void *xq,
                                 float *y) {
    hmoe_cpu_gemm_iq4_nl_avx512(ncols, w, row_bytes, nrows, xq, 0, 1, y, 0);
}
