/* amx_gemm_impl.h — the body of the AMX int8 GEMM for Q4_K and Q6_K weights × Q8_K
 * activations (quants.md §4.3, §4.6, §8.4), included once per tile backend (amx_impl.h):
 * the includer defines AMX_SUFFIX and the TILE_* operations, then includes this file.
 *
 * A C tile is 16 weight rows × 16 tokens of int32 sums over K = 64 elements per TDPBxxD.
 * The sub-block scales of a K-quant change every 32 (Q4_K) or 16 (Q6_K) elements, so one
 * tile product over 64 elements would mix them. Instead each weight is multiplied by its
 * sub-block scale before it enters a tile, split into base-8 digits small enough for 8 bits:
 *   Q4_K: sc (0..63) = lo + 8·hi, lo, hi in 0..7:  A_lo = q·lo, A_hi = q·hi (u8, <= 105);
 *   Q6_K: sc (-128..127) = e0 + 8·e1 + 64·e2, e in -3..4: A_k = (q - 32)·e_k (s8, -128..124).
 * Then the C tiles of one super-block (4 products of K = 64 each) hold Σ_sub sc·Σ q·a split
 * into digits: isum = C_lo + 8·C_hi (Q4_K) or C_0 + 8·C_1 + 64·C_2 (Q6_K), exactly the
 * integer block sums of the reference dot products. The rest is the references' float
 * part in double per (row, token): d·da·isum - dmin·da·Σ mn·bsum (Q4_K mins from the Q8_K
 * bsums with vpdpwssd), summed over super-blocks. So results match hmoe_cpu_gemm's AVX-512
 * kernels up to the order of the double additions.
 * B tiles (activations, VNNI layout B[k/4][tok·4 + k%4]) are built once per call by 16 × 16
 * dword transposes of the q8_K rows (xq_stride apart); A tiles once per (16-row tile, super-block)
 * and reused by every token tile. Tiles: Q4_K C 0-3 (lo/hi × 2 token tiles), A 4-5, B 6-7;
 * Q6_K C 0-2, A 3-5, B 6. Scratch is a per-thread buffer kept between calls.
 */
#include <immintrin.h>
#include <stdlib.h>
#include <string.h>

#include "hmoe/quant_blocks.h"
#include "q6_k_unpack_impl.h"

#define AMX_CAT_(a, b) a##b
#define AMX_CAT(a, b) AMX_CAT_(a, b)
#define AMX_FN(name) AMX_CAT(name, AMX_SUFFIX)

#define AMX_QK8 ((size_t)sizeof(struct hmoe_block_q8_k)) /* 292 */
#define AMX_TILE_BYTES 1024                               /* 16 rows × 64 bytes */

/* Per-thread scratch, grown on demand and kept (pool threads live as long as the process). */
static _Thread_local void *amx_scratch_p;
static _Thread_local size_t amx_scratch_bytes;
static void *amx_scratch(size_t bytes) {
    if (bytes <= amx_scratch_bytes) return amx_scratch_p;
    free(amx_scratch_p);
    amx_scratch_p = NULL;
    amx_scratch_bytes = 0;
    if (posix_memalign(&amx_scratch_p, 64, bytes) != 0) {
        amx_scratch_p = NULL;
        return NULL;
    }
    amx_scratch_bytes = bytes;
    return amx_scratch_p;
}

static void amx_config_all(struct hmoe_amx_cfg *cfg) {
    memset(cfg, 0, sizeof *cfg);
    cfg->palette = 1;
    for (int t = 0; t < 8; t++) {
        cfg->rows[t] = 16;
        cfg->colsb[t] = 64;
    }
}

/* Where the prepared activations of token tile tt, super-block i live. */
struct amx_acts {
    uint8_t *b;    /* [ntt][nb][4 chunks] VNNI tiles of 1 KiB */
    double *da;    /* [ntt][nb][16] Q8_K d per token (0 past ntok) */
    int32_t *mb;   /* [ntt][nb][4][16] Q4_K only: word pairs (S_2p, S_2p+1), S_j = bsums[2j] + bsums[2j+1] */
    int64_t nb;
};

/* 16 × 16 dwords: o[k] = (r[0][k], r[1][k], .., r[15][k]). Unpack 32- and 64-bit pairs inside
 * 128-bit lanes, then gather lanes with two rounds of shuffle_i32x4 (64 shuffles). */
static inline void amx_transpose16(const __m512i r[16], __m512i o[16]) {
    __m512i a[16], b[16];
    for (int i = 0; i < 8; i++) {
        a[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
        a[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
    }
    /* b[4i + j], lane L = rows 4i..4i+3 at column 4L + j */
    for (int i = 0; i < 4; i++) {
        b[4 * i] = _mm512_unpacklo_epi64(a[4 * i], a[4 * i + 2]);
        b[4 * i + 1] = _mm512_unpackhi_epi64(a[4 * i], a[4 * i + 2]);
        b[4 * i + 2] = _mm512_unpacklo_epi64(a[4 * i + 1], a[4 * i + 3]);
        b[4 * i + 3] = _mm512_unpackhi_epi64(a[4 * i + 1], a[4 * i + 3]);
    }
    for (int j = 0; j < 4; j++) {
        const __m512i c0 = _mm512_shuffle_i32x4(b[j], b[4 + j], 0x44), c1 = _mm512_shuffle_i32x4(b[j], b[4 + j], 0xEE);
        const __m512i c2 = _mm512_shuffle_i32x4(b[8 + j], b[12 + j], 0x44);
        const __m512i c3 = _mm512_shuffle_i32x4(b[8 + j], b[12 + j], 0xEE);
        o[j] = _mm512_shuffle_i32x4(c0, c2, 0x88);
        o[4 + j] = _mm512_shuffle_i32x4(c0, c2, 0xDD);
        o[8 + j] = _mm512_shuffle_i32x4(c1, c3, 0x88);
        o[12 + j] = _mm512_shuffle_i32x4(c1, c3, 0xDD);
    }
}

/* Build the B tiles (and d, bsum pairs) of all tokens: B[k/4][t·4 + k%4] of chunk c is the
 * 16 × 16 dword transpose of the 16 tokens' 64 quants of that chunk (zeros past ntok). */
static void amx_prep_acts(const char *xq, size_t xq_stride, int64_t ntok, int64_t nb, int with_mins,
                          struct amx_acts *A) {
    const int64_t ntt = (ntok + 15) / 16;
    for (int64_t tt = 0; tt < ntt; tt++) {
        const int64_t left = ntok - tt * 16, nv = left < 16 ? left : 16;
        for (int64_t i = 0; i < nb; i++) {
            const char *base = xq + (size_t)(tt * 16) * xq_stride + (size_t)i * AMX_QK8;
            uint8_t *bt = A->b + (size_t)(tt * nb + i) * 4 * AMX_TILE_BYTES;
            for (int c = 0; c < 4; c++) {
                __m512i r[16], o[16];
                for (int t = 0; t < 16; t++)
                    r[t] = t < nv ? _mm512_loadu_si512(base + (size_t)t * xq_stride + 4 + 64 * c) : _mm512_setzero_si512();
                amx_transpose16(r, o);
                for (int k = 0; k < 16; k++) _mm512_store_si512(bt + c * AMX_TILE_BYTES + 64 * k, o[k]);
            }
            /* d of the 16 tokens (a gather, zeros past ntok), as double */
            const __mmask16 live = nv >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << nv) - 1);
            const __m512i vidx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                                    _mm512_set1_epi32((int)xq_stride));
            const __m512 d16 = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), live, vidx, base, 1);
            const size_t o = (size_t)(tt * nb + i) * 16;
            _mm512_store_pd(A->da + o, _mm512_cvtps_pd(_mm512_castps512_ps256(d16)));
            _mm512_store_pd(A->da + o + 8, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(d16), 1))));
            if (!with_mins) continue;
            /* per token the 4 dwords (S_2p | S_2p+1 << 16), S_j = bsums[2j] + bsums[2j+1] (|S_j| <= 4064,
             * so packs does not saturate); then [token][p] -> [p][token] by two rounds of permutes */
            _Alignas(64) int32_t pt[64]; /* [token][p] */
            const __m128i ones = _mm_set1_epi16(1);
            for (int t = 0; t < 16; t++) {
                __m128i pr = _mm_setzero_si128();
                if (t < nv) {
                    const __m128i *bs = (const __m128i *)(base + (size_t)t * xq_stride + 4 + 256);
                    pr = _mm_packs_epi32(_mm_madd_epi16(_mm_loadu_si128(bs), ones),
                                         _mm_madd_epi16(_mm_loadu_si128(bs + 1), ones));
                }
                _mm_store_si128((__m128i *)(pt + 4 * t), pr);
            }
            const __m512i z[4] = {_mm512_load_si512(pt), _mm512_load_si512(pt + 16), _mm512_load_si512(pt + 32),
                                  _mm512_load_si512(pt + 48)};
            /* w[h][j]: p = 2h + j / 8, token 8·(pair) + j % 8 */
            const __m512i i1a = _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 1, 5, 9, 13, 17, 21, 25, 29);
            const __m512i i1b = _mm512_setr_epi32(2, 6, 10, 14, 18, 22, 26, 30, 3, 7, 11, 15, 19, 23, 27, 31);
            const __m512i w01a = _mm512_permutex2var_epi32(z[0], i1a, z[1]), w01b = _mm512_permutex2var_epi32(z[0], i1b, z[1]);
            const __m512i w23a = _mm512_permutex2var_epi32(z[2], i1a, z[3]), w23b = _mm512_permutex2var_epi32(z[2], i1b, z[3]);
            int32_t *mb = A->mb + (size_t)(tt * nb + i) * 64;
            _mm512_store_si512(mb, _mm512_shuffle_i64x2(w01a, w23a, 0x44));
            _mm512_store_si512(mb + 16, _mm512_shuffle_i64x2(w01a, w23a, 0xEE));
            _mm512_store_si512(mb + 32, _mm512_shuffle_i64x2(w01b, w23b, 0x44));
            _mm512_store_si512(mb + 48, _mm512_shuffle_i64x2(w01b, w23b, 0xEE));
        }
    }
}

/* Q4_K scales and mins of one block (quants.md §4.3) as 8 bytes each, from the 12 packed
 * bytes read as three little-endian words. */
static inline void amx_q4k_scales(const uint8_t *s12, uint64_t *sc8, uint64_t *mn8) {
    uint32_t u0, u1, u2;
    memcpy(&u0, s12, 4);
    memcpy(&u1, s12 + 4, 4);
    memcpy(&u2, s12 + 8, 4);
    const uint32_t sc03 = u0 & 0x3f3f3f3fu, mn03 = u1 & 0x3f3f3f3fu;
    const uint32_t sc47 = (u2 & 0x0f0f0f0fu) | ((u0 >> 6) & 0x03030303u) << 4;
    const uint32_t mn47 = ((u2 >> 4) & 0x0f0f0f0fu) | ((u1 >> 6) & 0x03030303u) << 4;
    *sc8 = sc03 | (uint64_t)sc47 << 32;
    *mn8 = mn03 | (uint64_t)mn47 << 32;
}

/* ---------------------------------------------------------------- Q4_K */

/* A tiles of 16 rows for super-block i: alo / ahi [16 rows][256] = q·(sc & 7), q·(sc >> 3)
 * in element order; per row d, dmin and the mins as word pairs. Rows past nrows are zero. */
static void amx_q4k_prep_rows(const uint8_t *w, size_t row_bytes, int64_t nrows_left, int64_t i, const __m512i T0,
                              const __m512i T1, uint8_t *alo, uint8_t *ahi, double *d, double *dmin,
                              int32_t *mpair) {
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    const __m512i shift = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(4), 1);
    for (int m = 0; m < 16; m++) {
        if (m >= nrows_left) {
            memset(alo + 256 * m, 0, 256);
            memset(ahi + 256 * m, 0, 256);
            d[m] = dmin[m] = 0;
            memset(mpair + 4 * m, 0, 16);
            continue;
        }
        const uint8_t *b = w + (size_t)m * row_bytes + (size_t)i * sizeof(struct hmoe_block_q4_k);
        const struct hmoe_block_q4_k *blk = (const struct hmoe_block_q4_k *)b;
        __builtin_prefetch(b + sizeof(struct hmoe_block_q4_k));
        __builtin_prefetch(b + sizeof(struct hmoe_block_q4_k) + 64);
        __builtin_prefetch(b + sizeof(struct hmoe_block_q4_k) + 128);
        uint64_t sc8, mn8;
        amx_q4k_scales(blk->scales, &sc8, &mn8);
        /* vpermt2b index = (digit << 4) | q into the 128-byte product table T */
        const __m512i sl = _mm512_set1_epi64((long long)((sc8 & 0x0707070707070707ull) << 4));
        const __m512i sh = _mm512_set1_epi64((long long)(((sc8 >> 3) & 0x0707070707070707ull) << 4));
        for (int c = 0; c < 4; c++) {
            /* qs[32c..32c+31]: low nibbles = elements 64c.. (sub-block 2c), high = 64c+32.. (2c+1) */
            const __m512i raw = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(blk->qs + 32 * c)));
            const __m512i q = _mm512_and_si512(_mm512_srlv_epi16(raw, shift), m4);
            const __m512i sub = _mm512_inserti64x4(_mm512_set1_epi8((char)(2 * c)), _mm256_set1_epi8((char)(2 * c + 1)), 1);
            const __m512i il = _mm512_or_si512(q, _mm512_permutexvar_epi8(sub, sl));
            const __m512i ih = _mm512_or_si512(q, _mm512_permutexvar_epi8(sub, sh));
            _mm512_store_si512(alo + 256 * m + 64 * c, _mm512_permutex2var_epi8(T0, il, T1));
            _mm512_store_si512(ahi + 256 * m + 64 * c, _mm512_permutex2var_epi8(T0, ih, T1));
        }
        d[m] = _cvtsh_ss(blk->d);
        dmin[m] = _cvtsh_ss(blk->dmin);
        for (int p = 0; p < 4; p++)
            mpair[4 * m + p] = (int32_t)(((mn8 >> (16 * p)) & 0xff) | ((mn8 >> (16 * p + 8)) & 0xff) << 16);
    }
}

/* acc[m][tok] += d·da·(lo + 8·hi) - dmin·da·Σ_p mpair·mb for the 16 rows of one token tile. */
static inline void amx_q4k_epilogue(const int32_t *clo, const int32_t *chi, const double *d, const double *dmin,
                                    const int32_t *mpair, const int32_t *mb, const double *da, double *acc,
                                    size_t ld_acc) {
    const __m512d da0 = _mm512_load_pd(da), da1 = _mm512_load_pd(da + 8);
    const __m512i mb0 = _mm512_load_si512(mb), mb1 = _mm512_load_si512(mb + 16);
    const __m512i mb2 = _mm512_load_si512(mb + 32), mb3 = _mm512_load_si512(mb + 48);
    for (int m = 0; m < 16; m++) {
        const __m512i is = _mm512_add_epi32(_mm512_load_si512(clo + 16 * m),
                                            _mm512_slli_epi32(_mm512_load_si512(chi + 16 * m), 3));
        __m512i im = _mm512_dpwssd_epi32(_mm512_setzero_si512(), _mm512_set1_epi32(mpair[4 * m]), mb0);
        im = _mm512_dpwssd_epi32(im, _mm512_set1_epi32(mpair[4 * m + 1]), mb1);
        im = _mm512_dpwssd_epi32(im, _mm512_set1_epi32(mpair[4 * m + 2]), mb2);
        im = _mm512_dpwssd_epi32(im, _mm512_set1_epi32(mpair[4 * m + 3]), mb3);
        const __m512d vd = _mm512_set1_pd(d[m]), vm = _mm512_set1_pd(dmin[m]);
        const __m512d v0 = _mm512_fmsub_pd(_mm512_cvtepi32_pd(_mm512_castsi512_si256(is)), vd,
                                           _mm512_mul_pd(_mm512_cvtepi32_pd(_mm512_castsi512_si256(im)), vm));
        const __m512d v1 = _mm512_fmsub_pd(_mm512_cvtepi32_pd(_mm512_extracti64x4_epi64(is, 1)), vd,
                                           _mm512_mul_pd(_mm512_cvtepi32_pd(_mm512_extracti64x4_epi64(im, 1)), vm));
        double *a = acc + (size_t)m * ld_acc;
        _mm512_store_pd(a, _mm512_fmadd_pd(v0, da0, _mm512_load_pd(a)));
        _mm512_store_pd(a + 8, _mm512_fmadd_pd(v1, da1, _mm512_load_pd(a + 8)));
    }
}

/* Write rows [0, nr) × tokens [0, ntok) of acc to y (y[t·y_stride + m]): per 16-token tile the
 * 16 × 16 block is rounded to float and transposed, so each token gets one (masked) 64-byte
 * store of its 16 rows instead of 16 scalar stores a y row apart. */
static void amx_store_y(const double *acc, size_t ld_acc, int64_t nr, int64_t ntok, float *y, size_t y_stride) {
    const __mmask16 rows = nr >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << nr) - 1);
    for (int64_t t0 = 0; t0 < ntok; t0 += 16) {
        __m512i r[16], o[16];
        for (int m = 0; m < 16; m++) {
            const double *a = acc + (size_t)m * ld_acc + t0;
            const __m256 lo = _mm512_cvtpd_ps(_mm512_load_pd(a)), hi = _mm512_cvtpd_ps(_mm512_load_pd(a + 8));
            r[m] = _mm512_castps_si512(_mm512_insertf32x8(_mm512_castps256_ps512(lo), hi, 1));
        }
        amx_transpose16(r, o);
        const int64_t nt = ntok - t0 < 16 ? ntok - t0 : 16;
        for (int64_t t = 0; t < nt; t++)
            _mm512_mask_storeu_ps(y + (size_t)(t0 + t) * y_stride, rows, _mm512_castsi512_ps(o[t]));
    }
}

/* Per-row data of one super-block's A tiles (double-buffered, see the main loops). */
struct amx_rows {
    uint8_t *a[3];            /* [16 rows][256] per digit tile set */
    double *d, *dmin;         /* [16] */
    int32_t *mpair;           /* [16][4] */
};

/* Main loops, both types: per 16-row tile, super-block i's tile products for all token tiles
 * are issued and their C tiles stored; then super-block i+1's A tiles are built, and only then
 * the C tiles of i are read back for the float part. So no vector load waits on a tile store
 * just issued, and no tile load on vector stores just issued (store-to-load forwarding between
 * the tile and vector units cannot help there). The A-build was meant to overlap the tile
 * products; on the H200 host's Xeon it does not (tile, A-build and epilogue times add up), and
 * storing C after the A-build, lagging the epilogue, a super-block-outer loop or cheaper digit
 * builds changed nothing measurable. */
void AMX_FN(hmoe_cpu_gemm_q4_k_)(int64_t ncols, const void *w, size_t row_bytes, int64_t nrows, const void *xq,
                                 size_t xq_stride, int64_t ntok, float *y, size_t y_stride) {
    if (nrows <= 0 || ntok <= 0) return;
    const int64_t nb = ncols / 256, ntt = (ntok + 15) / 16;
    const size_t ld_acc = (size_t)ntt * 16;
    const size_t b_bytes = (size_t)(ntt * nb) * 4 * AMX_TILE_BYTES, da_bytes = (size_t)(ntt * nb) * 16 * 8;
    const size_t mb_bytes = (size_t)(ntt * nb) * 64 * 4, acc_bytes = 16 * ld_acc * 8;
    const size_t c_bytes = (size_t)ntt * 2 * AMX_TILE_BYTES;            /* C lo, hi per token tile */
    const size_t set_bytes = 2 * 4096 + 16 * 8 * 2 + 16 * 16;            /* one A set + d, dmin, mpair */
    uint8_t *s = amx_scratch(b_bytes + da_bytes + mb_bytes + acc_bytes + c_bytes + 2 * set_bytes + 128);
    if (!s) {
        hmoe_cpu_gemm_q4_k_avx512(ncols, w, row_bytes, nrows, xq, xq_stride, ntok, y, y_stride);
        return;
    }
    struct amx_acts A = {.b = s, .da = (double *)(s + b_bytes), .mb = (int32_t *)(s + b_bytes + da_bytes), .nb = nb};
    uint8_t *p = s + b_bytes + da_bytes + mb_bytes;
    double *acc = (double *)p;
    int32_t *cbuf = (int32_t *)(p + acc_bytes);
    p += acc_bytes + c_bytes;
    struct amx_rows R[2];
    for (int k = 0; k < 2; k++, p += set_bytes) {
        R[k].a[0] = p;
        R[k].a[1] = p + 4096;
        R[k].d = (double *)(p + 8192);
        R[k].dmin = R[k].d + 16;
        R[k].mpair = (int32_t *)(R[k].dmin + 16);
    }
    uint8_t *tbl = p;
    for (int k = 0; k < 128; k++) tbl[k] = (uint8_t)((k >> 4) * (k & 15)); /* T[s·16 + q] = s·q */
    const __m512i T0 = _mm512_load_si512(tbl), T1 = _mm512_load_si512(tbl + 64);

    amx_prep_acts((const char *)xq, xq_stride, ntok, nb, 1, &A);
    struct hmoe_amx_cfg cfg;
    amx_config_all(&cfg);
    TILE_CFG(&cfg);
    for (int64_t r0 = 0; r0 < nrows; r0 += 16) {
        const int64_t nr = nrows - r0 < 16 ? nrows - r0 : 16;
        memset(acc, 0, acc_bytes);
        const uint8_t *wr = (const uint8_t *)w + (size_t)r0 * row_bytes;
        amx_q4k_prep_rows(wr, row_bytes, nr, 0, T0, T1, R[0].a[0], R[0].a[1], R[0].d, R[0].dmin, R[0].mpair);
        for (int64_t i = 0; i < nb; i++) {
            const struct amx_rows *cur = &R[i & 1];
            const uint8_t *alo = cur->a[0], *ahi = cur->a[1];
            for (int64_t tt = 0; tt < ntt; tt += 2) {
                const int two = tt + 1 < ntt;
                const uint8_t *b0 = A.b + (size_t)(tt * nb + i) * 4 * AMX_TILE_BYTES;
                const uint8_t *b1 = A.b + (size_t)((tt + 1) * nb + i) * 4 * AMX_TILE_BYTES;
                int32_t *c0 = cbuf + tt * 512, *c1 = c0 + 512;
                TILE_ZERO(0);
                TILE_ZERO(2);
                if (two) {
                    TILE_ZERO(1);
                    TILE_ZERO(3);
                }
                for (int c = 0; c < 4; c++) {
                    TILE_LOAD(4, alo + 64 * c, 256);
                    TILE_LOAD(5, ahi + 64 * c, 256);
                    TILE_LOAD(6, b0 + c * AMX_TILE_BYTES, 64);
                    TILE_DPBUSD(0, 4, 6);
                    TILE_DPBUSD(2, 5, 6);
                    if (two) {
                        TILE_LOAD(7, b1 + c * AMX_TILE_BYTES, 64);
                        TILE_DPBUSD(1, 4, 7);
                        TILE_DPBUSD(3, 5, 7);
                    }
                }
                TILE_STORE(0, c0, 64);
                TILE_STORE(2, c0 + 256, 64);
                if (two) {
                    TILE_STORE(1, c1, 64);
                    TILE_STORE(3, c1 + 256, 64);
                }
            }
            if (i + 1 < nb) {
                struct amx_rows *nx = &R[(i + 1) & 1];
                amx_q4k_prep_rows(wr, row_bytes, nr, i + 1, T0, T1, nx->a[0], nx->a[1], nx->d, nx->dmin, nx->mpair);
            }
            for (int64_t tt = 0; tt < ntt; tt++)
                amx_q4k_epilogue(cbuf + tt * 512, cbuf + tt * 512 + 256, cur->d, cur->dmin, cur->mpair,
                                 A.mb + (size_t)(tt * nb + i) * 64, A.da + (size_t)(tt * nb + i) * 16, acc + tt * 16,
                                 ld_acc);
        }
        amx_store_y(acc, ld_acc, nr, ntok, y + r0, y_stride);
    }
    TILE_RELEASE();
}

/* ---------------------------------------------------------------- Q6_K */

/* A tiles of 16 rows for super-block i: a[k][16 rows][256] = (q - 32)·e_k with the sub-block
 * scale sc = e0 + 8·e1 + 64·e2 (e in -3..4), in element order; per row d. */
static void amx_q6k_prep_rows(const uint8_t *w, size_t row_bytes, int64_t nrows_left, int64_t i, uint8_t *a0,
                              uint8_t *a1, uint8_t *a2, double *d) {
    const struct q6k_unpack_consts qc = q6k_unpack_consts();
    const __m512i b32 = _mm512_set1_epi8(32);
    const __m512i lowb = _mm512_set1_epi16(0x00ff), highb = _mm512_set1_epi16((short)0xff00);
    const __m256i three = _mm256_set1_epi16(3), seven = _mm256_set1_epi16(7);
    /* word w of chunk c's digit vector = digit of sub-block 4c + w/8 */
    const __m512i ixw = _mm512_set_epi16(3, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0,
                                         0, 0, 0, 0, 0);
    for (int m = 0; m < 16; m++) {
        if (m >= nrows_left) {
            memset(a0 + 256 * m, 0, 256);
            memset(a1 + 256 * m, 0, 256);
            memset(a2 + 256 * m, 0, 256);
            d[m] = 0;
            continue;
        }
        const struct hmoe_block_q6_k *b =
            (const struct hmoe_block_q6_k *)(w + (size_t)m * row_bytes) + i;
        for (int o = 0; o < 256; o += 64) __builtin_prefetch((const char *)(b + 1) + o);
        /* digits of the 16 scales, as words */
        const __m256i sc = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)b->scales));
        const __m256i e0 = _mm256_sub_epi16(_mm256_and_si256(_mm256_add_epi16(sc, three), seven), three);
        const __m256i s1 = _mm256_srai_epi16(_mm256_sub_epi16(sc, e0), 3);
        const __m256i e1 = _mm256_sub_epi16(_mm256_and_si256(_mm256_add_epi16(s1, three), seven), three);
        const __m256i e2 = _mm256_srai_epi16(_mm256_sub_epi16(s1, e1), 3);
        const __m512i E0 = _mm512_castsi256_si512(e0), E1 = _mm512_castsi256_si512(e1), E2 = _mm512_castsi256_si512(e2);
        __m512i q[4];
        q6k_unpack(b, &qc, q);
        for (int c = 0; c < 4; c++) {
            /* x·e per byte with 16-bit multiplies: the low byte of a word product depends only on
             * the low bytes, so even bytes come from x·e and odd bytes from (x & 0xff00)·e */
            const __m512i x = _mm512_sub_epi8(q[c], b32), xo = _mm512_and_si512(x, highb);
            const __m512i ix = _mm512_add_epi16(ixw, _mm512_set1_epi16((short)(4 * c)));
            const __m512i D0 = _mm512_permutexvar_epi16(ix, E0), D1 = _mm512_permutexvar_epi16(ix, E1);
            const __m512i D2 = _mm512_permutexvar_epi16(ix, E2);
            _mm512_store_si512(a0 + 256 * m + 64 * c, _mm512_ternarylogic_epi32(_mm512_mullo_epi16(x, D0), lowb,
                                                                               _mm512_mullo_epi16(xo, D0), 0xEA));
            _mm512_store_si512(a1 + 256 * m + 64 * c, _mm512_ternarylogic_epi32(_mm512_mullo_epi16(x, D1), lowb,
                                                                               _mm512_mullo_epi16(xo, D1), 0xEA));
            _mm512_store_si512(a2 + 256 * m + 64 * c, _mm512_ternarylogic_epi32(_mm512_mullo_epi16(x, D2), lowb,
                                                                               _mm512_mullo_epi16(xo, D2), 0xEA));
        }
        d[m] = _cvtsh_ss(b->d);
    }
}

/* acc[m][tok] += d·da·(C0 + 8·C1 + 64·C2) for the 16 rows of one token tile. */
static inline void amx_q6k_epilogue(const int32_t *c, const double *d, const double *da, double *acc, size_t ld_acc) {
    const __m512d da0 = _mm512_load_pd(da), da1 = _mm512_load_pd(da + 8);
    for (int m = 0; m < 16; m++) {
        const __m512i is = _mm512_add_epi32(
            _mm512_add_epi32(_mm512_load_si512(c + 16 * m), _mm512_slli_epi32(_mm512_load_si512(c + 256 + 16 * m), 3)),
            _mm512_slli_epi32(_mm512_load_si512(c + 512 + 16 * m), 6));
        const __m512d vd = _mm512_set1_pd(d[m]);
        const __m512d v0 = _mm512_mul_pd(_mm512_cvtepi32_pd(_mm512_castsi512_si256(is)), vd);
        const __m512d v1 = _mm512_mul_pd(_mm512_cvtepi32_pd(_mm512_extracti64x4_epi64(is, 1)), vd);
        double *a = acc + (size_t)m * ld_acc;
        _mm512_store_pd(a, _mm512_fmadd_pd(v0, da0, _mm512_load_pd(a)));
        _mm512_store_pd(a + 8, _mm512_fmadd_pd(v1, da1, _mm512_load_pd(a + 8)));
    }
}

void AMX_FN(hmoe_cpu_gemm_q6_k_)(int64_t ncols, const void *w, size_t row_bytes, int64_t nrows, const void *xq,
                                 size_t xq_stride, int64_t ntok, float *y, size_t y_stride) {
    if (nrows <= 0 || ntok <= 0) return;
    const int64_t nb = ncols / 256, ntt = (ntok + 15) / 16;
    const size_t ld_acc = (size_t)ntt * 16;
    const size_t b_bytes = (size_t)(ntt * nb) * 4 * AMX_TILE_BYTES, da_bytes = (size_t)(ntt * nb) * 16 * 8;
    const size_t acc_bytes = 16 * ld_acc * 8;
    const size_t c_bytes = (size_t)ntt * 3 * AMX_TILE_BYTES; /* C0, C1, C2 per token tile */
    const size_t set_bytes = 3 * 4096 + 16 * 8;
    uint8_t *s = amx_scratch(b_bytes + da_bytes + acc_bytes + c_bytes + 2 * set_bytes);
    if (!s) {
        hmoe_cpu_gemm_q6_k_avx512(ncols, w, row_bytes, nrows, xq, xq_stride, ntok, y, y_stride);
        return;
    }
    struct amx_acts A = {.b = s, .da = (double *)(s + b_bytes), .mb = NULL, .nb = nb};
    uint8_t *p = s + b_bytes + da_bytes;
    double *acc = (double *)p;
    int32_t *cbuf = (int32_t *)(p + acc_bytes);
    p += acc_bytes + c_bytes;
    struct amx_rows R[2];
    for (int k = 0; k < 2; k++, p += set_bytes) {
        R[k].a[0] = p;
        R[k].a[1] = p + 4096;
        R[k].a[2] = p + 8192;
        R[k].d = (double *)(p + 12288);
    }

    amx_prep_acts((const char *)xq, xq_stride, ntok, nb, 0, &A);
    struct hmoe_amx_cfg cfg;
    amx_config_all(&cfg);
    TILE_CFG(&cfg);
    for (int64_t r0 = 0; r0 < nrows; r0 += 16) {
        const int64_t nr = nrows - r0 < 16 ? nrows - r0 : 16;
        memset(acc, 0, acc_bytes);
        const uint8_t *wr = (const uint8_t *)w + (size_t)r0 * row_bytes;
        amx_q6k_prep_rows(wr, row_bytes, nr, 0, R[0].a[0], R[0].a[1], R[0].a[2], R[0].d);
        for (int64_t i = 0; i < nb; i++) {
            const struct amx_rows *cur = &R[i & 1];
            const uint8_t *a0 = cur->a[0], *a1 = cur->a[1], *a2 = cur->a[2];
            for (int64_t tt = 0; tt < ntt; tt++) {
                const uint8_t *b0 = A.b + (size_t)(tt * nb + i) * 4 * AMX_TILE_BYTES;
                int32_t *c = cbuf + tt * 768;
                TILE_ZERO(0);
                TILE_ZERO(1);
                TILE_ZERO(2);
                for (int k = 0; k < 4; k++) {
                    TILE_LOAD(3, a0 + 64 * k, 256);
                    TILE_LOAD(4, a1 + 64 * k, 256);
                    TILE_LOAD(5, a2 + 64 * k, 256);
                    TILE_LOAD(6, b0 + k * AMX_TILE_BYTES, 64);
                    TILE_DPBSSD(0, 3, 6);
                    TILE_DPBSSD(1, 4, 6);
                    TILE_DPBSSD(2, 5, 6);
                }
                TILE_STORE(0, c, 64);
                TILE_STORE(1, c + 256, 64);
                TILE_STORE(2, c + 512, 64);
            }
            if (i + 1 < nb) {
                struct amx_rows *nx = &R[(i + 1) & 1];
                amx_q6k_prep_rows(wr, row_bytes, nr, i + 1, nx->a[0], nx->a[1], nx->a[2], nx->d);
            }
            for (int64_t tt = 0; tt < ntt; tt++)
                amx_q6k_epilogue(cbuf + tt * 768, cur->d, A.da + (size_t)(tt * nb + i) * 16, acc + tt * 16, ld_acc);
        }
        amx_store_y(acc, ld_acc, nr, ntok, y + r0, y_stride);
    }
    TILE_RELEASE();
}
