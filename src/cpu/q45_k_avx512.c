/* q45_k_avx512.c — Q4_K and Q5_K × Q8_K dot products with AVX-512BW + VNNI (quants.md
 * §4.3-§4.5, §8.4); the two formats share the scale/min packing and the nibble order.
 * Per 64 elements: one 32-byte load of quant bytes broadcast to both halves of a zmm, low
 * nibbles kept in the lower half and high nibbles shifted into the upper half (= elements
 * 64p..64p+63 in order); for Q5_K the qh bit of each element is tested (vptestmb) and 16
 * OR-ed in. vpmaddubsw with the int8 activations, vpdpwssd with the 6-bit scales; the mins
 * use the Q8_K bsums. Exact integer sums per block, then scaled and accumulated in double.
 * Decode (one token) has its own 4-row kernels (k45_gemv4p on an activation row prepared
 * once per call; k45_gemv4 for rows too long for that buffer), prefill its own tiles.
 * Compiled with -mavx512* (Makefile); only called after cpu_dispatch.c checked the CPU.
 */
#include <immintrin.h>
#include <stddef.h>
#include <string.h>

#include "cpu_impl.h"
#include "hmoe/quant_blocks.h"
#include "tile_impl.h"

/* The 8 scales and 8 mins of §4.3 as 16 int16 [SC0..SC7, MN0..MN7], computed in vector
 * registers from the block's first 16 bytes (d, dmin, then the 12 scale bytes as words
 * U0, U1, U2; quants.md §4.3's word form): dwords [U0 & 3f.., U2 & 0f.. | (U0 >> 2) & 30..,
 * U1 & 3f.., (U2 >> 4) & 0f.. | (U1 >> 2) & 30..]. */
static inline __m256i k45_scales_mins(const void *block) {
    const __m128i v = _mm_loadu_si128((const __m128i *)block);
    const __m128i a = _mm_srlv_epi32(_mm_shuffle_epi32(v, _MM_SHUFFLE(3, 2, 3, 1)), _mm_set_epi32(4, 0, 0, 0));
    const __m128i hi2 = _mm_and_si128(_mm_srli_epi32(_mm_shuffle_epi32(v, _MM_SHUFFLE(2, 2, 1, 1)), 2),
                                      _mm_set_epi32(0x30303030, 0, 0x30303030, 0));
    const __m128i m = _mm_set_epi32(0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f);
    return _mm256_cvtepu8_epi16(_mm_ternarylogic_epi32(a, m, hi2, 0xEA)); /* (a & m) | hi2 */
}

/* The same for the blocks of 4 rows at once (one per 128-bit lane of h, their first 16
 * bytes each): lane r of the result holds row r's [SC0..SC7, MN0..MN7] as bytes. */
static inline __m512i k45_scales_mins_x4(const __m512i h) {
    const __m512i a = _mm512_srlv_epi32(_mm512_shuffle_epi32(h, _MM_SHUFFLE(3, 2, 3, 1)),
                                        _mm512_broadcast_i32x4(_mm_set_epi32(4, 0, 0, 0)));
    const __m512i hi2 = _mm512_and_si512(_mm512_srli_epi32(_mm512_shuffle_epi32(h, _MM_SHUFFLE(2, 2, 1, 1)), 2),
                                         _mm512_broadcast_i32x4(_mm_set_epi32(0x30303030, 0, 0x30303030, 0)));
    const __m512i m = _mm512_broadcast_i32x4(_mm_set_epi32(0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f));
    return _mm512_ternarylogic_epi32(a, m, hi2, 0xEA); /* (a & m) | hi2 */
}

/* out[r*T + t] = dot(weight row r (nb blocks at w + r*rb), activation row t). R, T and the
 * layout arguments are constants after inlining, so acc[] lives in registers and loops
 * unroll. Both block types start with d, dmin, scales[12]; qs_off / qh_off locate the quants. */
static inline __attribute__((always_inline)) void k45_tile(const char *w, size_t rb, int64_t nb, const char *x,
                                                           size_t xs, float *out, const int R, const int T,
                                                           const size_t block_bytes, const size_t qs_off,
                                                           const int has_qh, const size_t qh_off) {
    /* Accumulate in double, as the references do: the scale and min terms of a row cancel
     * heavily, and float sums of them lose ~eps·Σ|terms| (up to 1e-4 relative). */
    __m512d acc[HMOE_TILE_MAX_TOK];
    for (int k = 0; k < R * T; k++) acc[k] = _mm512_setzero_pd();
    const __m512i m4 = _mm512_set1_epi8(0x0f), b4 = _mm512_set1_epi8(0x10);
    /* shift 0 for the lower 16 words (low nibbles), 4 for the upper 16 (high nibbles) */
    const __m512i shift = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(4), 1);
    /* Q5_K: chunk p tests bit 2p of qh[l] in its lower half and bit 2p+1 in its upper half */
    const __m512i bit0 = _mm512_inserti64x4(_mm512_set1_epi8(1), _mm256_set1_epi8(2), 1);
    /* vpermw indices into [SC0..SC7, MN0..MN7]: chunk p gets SC[2p] in its lower 16 words
     * and SC[2p+1] in its upper 16; the mins vector repeats MN[j] twice so that vpmaddwd
     * pairs it with bsums[2j] and bsums[2j+1]. */
    const __m512i ix0 = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(1), 1);
    const __m512i two = _mm512_set1_epi16(2);
    const __m512i ix1 = _mm512_add_epi16(ix0, two), ix2 = _mm512_add_epi16(ix1, two);
    const __m512i ix3 = _mm512_add_epi16(ix2, two);
    const __m256i ixm = _mm256_set_epi16(15, 15, 14, 14, 13, 13, 12, 12, 11, 11, 10, 10, 9, 9, 8, 8);
    for (int64_t i = 0; i < nb; i++) {
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            const uint8_t *b = (const uint8_t *)w + (size_t)r * rb + (size_t)i * block_bytes;
            if (T == 1) hmoe_prefetch_block((const char *)b + hmoe_prefetch_distance(rb, R), block_bytes);
            const __m256i scmn16 = k45_scales_mins(b);
            const __m512i scmn = _mm512_castsi256_si512(scmn16);
            const __m512i s0 = _mm512_permutexvar_epi16(ix0, scmn), s1 = _mm512_permutexvar_epi16(ix1, scmn);
            const __m512i s2 = _mm512_permutexvar_epi16(ix2, scmn), s3 = _mm512_permutexvar_epi16(ix3, scmn);
            const __m256i mn = _mm256_permutexvar_epi16(ixm, scmn16);
            __m512i q[4];
            __m512i qh = _mm512_setzero_si512();
            if (has_qh) qh = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(b + qh_off)));
#pragma GCC unroll 4
            for (int p = 0; p < 4; p++) {
                __m512i raw = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(b + qs_off + 32 * p)));
                q[p] = _mm512_and_si512(_mm512_srlv_epi16(raw, shift), m4);
                if (has_qh) {
                    __mmask64 hbit = _mm512_test_epi8_mask(qh, _mm512_slli_epi16(bit0, 2 * p));
                    q[p] = _mm512_mask_add_epi8(q[p], hbit, q[p], b4);
                }
            }
            const struct hmoe_block_q4_k *hdr = (const struct hmoe_block_q4_k *)b; /* d, dmin: same offsets in Q5_K */
            const double d = _cvtsh_ss(hdr->d), dmin = _cvtsh_ss(hdr->dmin);
#pragma GCC unroll 8
            for (int t = 0; t < T; t++) {
                const struct hmoe_block_q8_k *a = (const struct hmoe_block_q8_k *)(x + (size_t)t * xs) + i;
                __m512i is = _mm512_madd_epi16(_mm512_maddubs_epi16(q[0], _mm512_loadu_si512(a->qs)), s0);
                is = _mm512_dpwssd_epi32(is, _mm512_maddubs_epi16(q[1], _mm512_loadu_si512(a->qs + 64)), s1);
                is = _mm512_dpwssd_epi32(is, _mm512_maddubs_epi16(q[2], _mm512_loadu_si512(a->qs + 128)), s2);
                is = _mm512_dpwssd_epi32(is, _mm512_maddubs_epi16(q[3], _mm512_loadu_si512(a->qs + 192)), s3);
                /* fold the 16 lanes to 8; mins: MN[j] * (bsums[2j] + bsums[2j+1]) */
                const __m256i is8 = _mm256_add_epi32(_mm512_castsi512_si256(is), _mm512_extracti64x4_epi64(is, 1));
                const __m256i ms8 = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)a->bsums), mn);
                const double da = a->d;
                acc[r * T + t] = _mm512_fmadd_pd(_mm512_cvtepi32_pd(is8), _mm512_set1_pd(d * da), acc[r * T + t]);
                acc[r * T + t] = _mm512_fmadd_pd(_mm512_cvtepi32_pd(ms8), _mm512_set1_pd(-dmin * da), acc[r * T + t]);
            }
        }
    }
    for (int k = 0; k < R * T; k++) out[k] = (float)_mm512_reduce_add_pd(acc[k]);
}

/* Decode path for rows longer than k45_gemv_dec's prepared buffer (one token, 4 rows): the
 * same integer sums in a layout that needs fewer instructions per block, which matters because
 * decode must keep up with RAM:
 *  - quants: two 64-byte loads; low / high nibbles of qs[0..63] are sub-blocks (0, 2) and
 *    (1, 3) — elements [0..31 | 64..95] and [32..63 | 96..127] — so the activations are
 *    loaded in that order instead (two 32-byte halves, shared by the 4 rows);
 *  - scales: the 4 rows' block headers are loaded into one zmm and unpacked together
 *    (k45_scales_mins_x4), and their fp16 d/dmin picked from it by one vpermw (in-cache
 *    decode 31.6 -> 34.2 GB/s of weights on one Zen 5 core, bench_gemv);
 *  - floats: the 4 rows' 8-lane int32 sums and mins are reduced together (vphaddd tree)
 *    into [IS0, MS0, IS1, MS1, ..] and scaled by [d0, dmin0, d1, ..]·[da, -da, ..] with one
 *    double FMA per block for all 4 rows. */
/* The decode layout of one block's quants (both decode kernels): two 64-byte loads; low / high
 * nibbles of qs[0..63] are sub-blocks (0, 2) and (1, 3) — elements [0..31 | 64..95] and
 * [32..63 | 96..127] — and of qs[64..127] (4, 6) and (5, 7); for Q5_K the qh bit of each element
 * (bit e/32 of qh[e%32]) adds 16; qb holds the bit masks, built once per call (k45_qh_bits_dec). */
struct k45_qh_bits {
    __m512i l0, h0, l1, h1;
};

static inline struct k45_qh_bits k45_qh_bits_dec(void) {
    struct k45_qh_bits q;
    q.l0 = _mm512_inserti64x4(_mm512_set1_epi8(1), _mm256_set1_epi8(4), 1);
    q.h0 = _mm512_add_epi8(q.l0, q.l0);
    q.l1 = _mm512_slli_epi16(q.l0, 4);
    q.h1 = _mm512_slli_epi16(q.h0, 4);
    return q;
}

static inline __attribute__((always_inline)) void k45_unpack_dec(const uint8_t *b, const size_t qs_off, const int has_qh,
                                                                 const size_t qh_off, const struct k45_qh_bits *qb,
                                                                 __m512i *l0, __m512i *h0, __m512i *l1, __m512i *h1) {
    const __m512i m4 = _mm512_set1_epi8(0x0f), b4 = _mm512_set1_epi8(0x10);
    const __m512i z0 = _mm512_loadu_si512(b + qs_off), z1 = _mm512_loadu_si512(b + qs_off + 64);
    *l0 = _mm512_and_si512(z0, m4);
    *h0 = _mm512_and_si512(_mm512_srli_epi16(z0, 4), m4);
    *l1 = _mm512_and_si512(z1, m4);
    *h1 = _mm512_and_si512(_mm512_srli_epi16(z1, 4), m4);
    if (has_qh) {
        const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(b + qh_off)));
        *l0 = _mm512_mask_add_epi8(*l0, _mm512_test_epi8_mask(qh, qb->l0), *l0, b4);
        *h0 = _mm512_mask_add_epi8(*h0, _mm512_test_epi8_mask(qh, qb->h0), *h0, b4);
        *l1 = _mm512_mask_add_epi8(*l1, _mm512_test_epi8_mask(qh, qb->l1), *l1, b4);
        *h1 = _mm512_mask_add_epi8(*h1, _mm512_test_epi8_mask(qh, qb->h1), *h1, b4);
    }
}

static inline __m512i ld2x32(const int8_t *lo, const int8_t *hi) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)lo)),
                              _mm256_loadu_si256((const __m256i *)hi), 1);
}

static inline __attribute__((always_inline)) void k45_gemv4(const char *w, size_t rb, int64_t nb, const char *x,
                                                            size_t pf, float *out, const size_t block_bytes,
                                                            const size_t qs_off, const int has_qh,
                                                            const size_t qh_off) {
    __m512d acc = _mm512_setzero_pd();
    const struct k45_qh_bits qb = k45_qh_bits_dec();
    /* scale words: L0 = sub-blocks (0, 2), H0 = (1, 3), L1 = (4, 6), H1 = (5, 7) */
    const __m512i ixl0 = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1);
    const __m512i one = _mm512_set1_epi16(1), four = _mm512_set1_epi16(4);
    const __m512i ixh0 = _mm512_add_epi16(ixl0, one), ixl1 = _mm512_add_epi16(ixl0, four);
    const __m512i ixh1 = _mm512_add_epi16(ixh0, four);
    const __m512i ixm = _mm512_castsi256_si512(
        _mm256_set_epi16(15, 15, 14, 14, 13, 13, 12, 12, 11, 11, 10, 10, 9, 9, 8, 8)); /* upper half unused */
    /* fp16 d, dmin of rows 0..3: words 0, 1 of each 128-bit lane of the headers */
    const __m512i ixd = _mm512_castsi128_si512(_mm_set_epi16(25, 24, 17, 16, 9, 8, 1, 0));
    /* Q5_K: the qh bit of each half of L0, H0, L1, H1 (bit e/32 of qh[e%32]) */
    const __m512d sign = _mm512_castsi512_pd(_mm512_set_epi64(INT64_MIN, 0, INT64_MIN, 0, INT64_MIN, 0, INT64_MIN, 0));
    for (int64_t i = 0; i < nb; i++) {
        const struct hmoe_block_q8_k *a = (const struct hmoe_block_q8_k *)x + i;
        const __m512i al0 = ld2x32(a->qs, a->qs + 64), ah0 = ld2x32(a->qs + 32, a->qs + 96);
        const __m512i al1 = ld2x32(a->qs + 128, a->qs + 192), ah1 = ld2x32(a->qs + 160, a->qs + 224);
        const __m256i bs = _mm256_loadu_si256((const __m256i *)a->bsums);
        __m256i is8[4], ms8[4];
        /* the 4 rows' headers (d, dmin, 12 scale bytes), unpacked together: rows 0, 1 as words
         * in sm[0], rows 2, 3 in sm[1] ([SC0..SC7, MN0..MN7] per row) */
        const uint8_t *b0 = (const uint8_t *)w + (size_t)i * block_bytes;
        __m512i hdr = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)b0));
        hdr = _mm512_inserti32x4(hdr, _mm_loadu_si128((const __m128i *)(b0 + rb)), 1);
        hdr = _mm512_inserti32x4(hdr, _mm_loadu_si128((const __m128i *)(b0 + 2 * rb)), 2);
        hdr = _mm512_inserti32x4(hdr, _mm_loadu_si128((const __m128i *)(b0 + 3 * rb)), 3);
        const __m512i scmn_b = k45_scales_mins_x4(hdr);
        const __m512i sm[2] = {_mm512_cvtepu8_epi16(_mm512_castsi512_si256(scmn_b)),
                               _mm512_cvtepu8_epi16(_mm512_extracti64x4_epi64(scmn_b, 1))};
#pragma GCC unroll 4
        for (int r = 0; r < 4; r++) {
            const uint8_t *b = b0 + (size_t)r * rb;
            hmoe_prefetch_block((const char *)b + pf, block_bytes);
            const __m512i scmn = sm[r >> 1];
            const __m512i odd = _mm512_set1_epi16((short)(16 * (r & 1))); /* row r's words in scmn */
            __m512i l0, h0, l1, h1;
            k45_unpack_dec(b, qs_off, has_qh, qh_off, &qb, &l0, &h0, &l1, &h1);
            __m512i is = _mm512_madd_epi16(_mm512_maddubs_epi16(l0, al0),
                                           _mm512_permutexvar_epi16(_mm512_add_epi16(ixl0, odd), scmn));
            is = _mm512_dpwssd_epi32(is, _mm512_maddubs_epi16(h0, ah0),
                                     _mm512_permutexvar_epi16(_mm512_add_epi16(ixh0, odd), scmn));
            is = _mm512_dpwssd_epi32(is, _mm512_maddubs_epi16(l1, al1),
                                     _mm512_permutexvar_epi16(_mm512_add_epi16(ixl1, odd), scmn));
            is = _mm512_dpwssd_epi32(is, _mm512_maddubs_epi16(h1, ah1),
                                     _mm512_permutexvar_epi16(_mm512_add_epi16(ixh1, odd), scmn));
            is8[r] = _mm256_add_epi32(_mm512_castsi512_si256(is), _mm512_extracti64x4_epi64(is, 1));
            ms8[r] = _mm256_madd_epi16(
                bs, _mm512_castsi512_si256(_mm512_permutexvar_epi16(_mm512_add_epi16(ixm, odd), scmn)));
        }
        /* [IS0, MS0, IS1, MS1, IS2, MS2, IS3, MS3] (lane sums; each fits int32) */
        const __m256i u0 = _mm256_hadd_epi32(_mm256_hadd_epi32(is8[0], ms8[0]), _mm256_hadd_epi32(is8[1], ms8[1]));
        const __m256i u1 = _mm256_hadd_epi32(_mm256_hadd_epi32(is8[2], ms8[2]), _mm256_hadd_epi32(is8[3], ms8[3]));
        const __m256i v =
            _mm256_add_epi32(_mm256_permute2x128_si256(u0, u1, 0x20), _mm256_permute2x128_si256(u0, u1, 0x31));
        const __m512d sc =
            _mm512_cvtps_pd(_mm256_cvtph_ps(_mm512_castsi512_si128(_mm512_permutexvar_epi16(ixd, hdr))));
        const __m512d dav = _mm512_xor_pd(_mm512_set1_pd((double)a->d), sign);
        acc = _mm512_fmadd_pd(_mm512_cvtepi32_pd(v), _mm512_mul_pd(sc, dav), acc);
    }
    double lanes[8];
    _mm512_storeu_pd(lanes, acc);
    for (int r = 0; r < 4; r++) out[r] = (float)(lanes[2 * r] + lanes[2 * r + 1]);
}

/* Decode path with the activation row prepared once per call (k45_prep_dec): the 4 rows'
 * weights need no shuffles and the scales apply per 16-bit sum instead of per product pair.
 *  - prepared block: qs in the order of the nibble vectors (V0 = low nibbles of qs[0..63] =
 *    elements [0..31 | 64..95], V1 = their high nibbles = [32..63 | 96..127], V2, V3 the same
 *    for qs[64..127]), so each V·x is one vpdpbusd into its own zeroed register. Each int32
 *    lane then sums 4 products of one sub-block: |lane| <= 4·31·128 < 2^15 (Q5_K too), so
 *    vpackssdw packs two of them into words exactly;
 *  - packs: P01 = (V0, V1) words are, per 128-bit lane k, [SB0 x4, SB1 x4] for k < 2 and
 *    [SB2 x4, SB3 x4] for k >= 2 (P23: SB 4..7); one vpmaddwd + one vpdpwssd with scale
 *    words of the same layout (one masked vpermb each from the 4 rows' unpacked headers);
 *  - mins of the 4 rows in one vpmaddwd: word (lane k, row r, t) = MN_r[2k+t] against the
 *    prepared pair sums bsums[4k+2t] + bsums[4k+2t+1] (|.| <= 4096), laid out like the
 *    transposed sums so both reduce in the same tree to [IS0..IS3 | MS0..MS3];
 *  - floats: one double FMA per block for the 4 rows' sums and mins, as k45_gemv4.
 * Per row and block 6 multiplies and 4 shuffles instead of 9 and 5; in-cache decode on one
 * core of this VM (768 rows x 2048, thread CPU time, alternating): 36.6 -> 43-44 GB/s of
 * weights. */
struct k45_dec_act {
    int8_t qs[256];   /* V0, V1, V2, V3 order (see above) */
    int16_t bp[32];   /* 128-bit lane k: [bp(2k), bp(2k+1)] x4, bp(j) = bsums[2j] + bsums[2j+1] */
    float d;
    char pad[60];
};
_Static_assert(sizeof(struct k45_dec_act) % 64 == 0, "prepared blocks must stay 64-byte aligned (aligned loads)");

static inline void k45_prep_dec(struct k45_dec_act *dst, const char *src, int64_t nb) {
    /* bp words j = 0..7 in the first 8 words (from the 16 bsums), then word w of the result
     * picks bp(2k + (w & 1)) with k = w / 8 */
    const __m512i ixbp = _mm512_set_epi16(7, 6, 7, 6, 7, 6, 7, 6, 5, 4, 5, 4, 5, 4, 5, 4, 3, 2, 3, 2, 3, 2, 3, 2, 1, 0,
                                          1, 0, 1, 0, 1, 0);
    for (int64_t i = 0; i < nb; i++) {
        const struct hmoe_block_q8_k *a = (const struct hmoe_block_q8_k *)src + i;
        struct k45_dec_act *d = dst + i;
        _mm512_store_si512(d->qs, ld2x32(a->qs, a->qs + 64));
        _mm512_store_si512(d->qs + 64, ld2x32(a->qs + 32, a->qs + 96));
        _mm512_store_si512(d->qs + 128, ld2x32(a->qs + 128, a->qs + 192));
        _mm512_store_si512(d->qs + 192, ld2x32(a->qs + 160, a->qs + 224));
        const __m256i bsw = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)a->bsums), _mm256_set1_epi16(1));
        const __m512i bp = _mm512_castsi256_si512(_mm256_packs_epi32(bsw, bsw)); /* |bp| <= 4096: exact */
        /* packs works per 128-bit lane: words [b0 b1 b2 b3 b0 b1 b2 b3 | b4 b5 b6 b7 b4 ..] */
        const __m512i fix = _mm512_set_epi16(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 11,
                                             10, 9, 8, 3, 2, 1, 0);
        const __m512i bp8 = _mm512_permutexvar_epi16(fix, bp);
        _mm512_store_si512(d->bp, _mm512_permutexvar_epi16(ixbp, bp8));
        d->d = a->d;
    }
}

static inline __attribute__((always_inline)) void k45_gemv4p(const char *w, size_t rb, int64_t nb,
                                                             const struct k45_dec_act *x, size_t pf, float *out,
                                                             const size_t block_bytes, const size_t qs_off,
                                                             const int has_qh, const size_t qh_off) {
    __m512d acc = _mm512_setzero_pd();
    const struct k45_qh_bits qb = k45_qh_bits_dec();
    /* masked vpermb indices into the unpacked headers (row r's [SC0..SC7, MN0..MN7] bytes in
     * 128-bit lane r): word w of S01 = SC[(w/16)*2 + (w/4 & 1)] of row r, S23 = that + 4;
     * mins words (lane k, row r, t) -> MN_r[2k + t] = byte 16r + 8 + 2k + t */
    const __m512i ix01 = _mm512_set_epi8(0, 3, 0, 3, 0, 3, 0, 3, 0, 2, 0, 2, 0, 2, 0, 2, 0, 3, 0, 3, 0, 3, 0, 3, 0, 2,
                                         0, 2, 0, 2, 0, 2, 0, 1, 0, 1, 0, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1,
                                         0, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0);
    const __m512i four8 = _mm512_set1_epi16(4), row8 = _mm512_set1_epi16(16);
    const __m512i ixm = _mm512_set_epi8(0, 63, 0, 62, 0, 47, 0, 46, 0, 31, 0, 30, 0, 15, 0, 14, 0, 61, 0, 60, 0, 45,
                                        0, 44, 0, 29, 0, 28, 0, 13, 0, 12, 0, 59, 0, 58, 0, 43, 0, 42, 0, 27, 0, 26,
                                        0, 11, 0, 10, 0, 57, 0, 56, 0, 41, 0, 40, 0, 25, 0, 24, 0, 9, 0, 8);
    const __mmask64 even = 0x5555555555555555ull;
    /* fp16 d, dmin of rows 0..3: words [d0 d1 d2 d3 dmin0 .. dmin3] */
    const __m512i ixd = _mm512_castsi128_si512(_mm_set_epi16(25, 17, 9, 1, 24, 16, 8, 0));
    const __m512d sign = _mm512_castsi512_pd(_mm512_set_epi64(INT64_MIN, INT64_MIN, INT64_MIN, INT64_MIN, 0, 0, 0, 0));
    for (int64_t i = 0; i < nb; i++) {
        const struct k45_dec_act *a = x + i;
        const __m512i a0 = _mm512_load_si512(a->qs), a1 = _mm512_load_si512(a->qs + 64);
        const __m512i a2 = _mm512_load_si512(a->qs + 128), a3 = _mm512_load_si512(a->qs + 192);
        const uint8_t *b0 = (const uint8_t *)w + (size_t)i * block_bytes;
        __m512i hdr = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)b0));
        hdr = _mm512_inserti32x4(hdr, _mm_loadu_si128((const __m128i *)(b0 + rb)), 1);
        hdr = _mm512_inserti32x4(hdr, _mm_loadu_si128((const __m128i *)(b0 + 2 * rb)), 2);
        hdr = _mm512_inserti32x4(hdr, _mm_loadu_si128((const __m128i *)(b0 + 3 * rb)), 3);
        const __m512i scmn = k45_scales_mins_x4(hdr);
        __m512i is[4];
#pragma GCC unroll 4
        for (int r = 0; r < 4; r++) {
            const uint8_t *b = b0 + (size_t)r * rb;
            hmoe_prefetch_block((const char *)b + pf, block_bytes);
            __m512i l0, h0, l1, h1;
            k45_unpack_dec(b, qs_off, has_qh, qh_off, &qb, &l0, &h0, &l1, &h1);
            const __m512i zero = _mm512_setzero_si512();
            const __m512i p01 = _mm512_packs_epi32(_mm512_dpbusd_epi32(zero, l0, a0), _mm512_dpbusd_epi32(zero, h0, a1));
            const __m512i p23 = _mm512_packs_epi32(_mm512_dpbusd_epi32(zero, l1, a2), _mm512_dpbusd_epi32(zero, h1, a3));
            const __m512i ixr = _mm512_add_epi16(ix01, _mm512_mullo_epi16(row8, _mm512_set1_epi16((short)r)));
            is[r] = _mm512_madd_epi16(p01, _mm512_maskz_permutexvar_epi8(even, ixr, scmn));
            is[r] = _mm512_dpwssd_epi32(is[r], p23,
                                        _mm512_maskz_permutexvar_epi8(even, _mm512_add_epi16(ixr, four8), scmn));
        }
        /* mins of the 4 rows: dword (lane k, row r) */
        const __m512i ms = _mm512_madd_epi16(_mm512_maskz_permutexvar_epi8(even, ixm, scmn), _mm512_load_si512(a->bp));
        /* transpose-sum the rows' 16 lanes to dword (lane k, row r), like ms */
        const __m512i s01 = _mm512_add_epi32(_mm512_unpacklo_epi32(is[0], is[1]), _mm512_unpackhi_epi32(is[0], is[1]));
        const __m512i s23 = _mm512_add_epi32(_mm512_unpacklo_epi32(is[2], is[3]), _mm512_unpackhi_epi32(is[2], is[3]));
        const __m512i t = _mm512_add_epi32(_mm512_unpacklo_epi64(s01, s23), _mm512_unpackhi_epi64(s01, s23));
        /* sum the 4 lanes of t and of ms: [IS0..IS3 | MS0..MS3] */
        const __m256i t2 = _mm256_add_epi32(_mm512_castsi512_si256(t), _mm512_extracti64x4_epi64(t, 1));
        const __m256i m2 = _mm256_add_epi32(_mm512_castsi512_si256(ms), _mm512_extracti64x4_epi64(ms, 1));
        const __m256i v =
            _mm256_add_epi32(_mm256_permute2x128_si256(t2, m2, 0x20), _mm256_permute2x128_si256(t2, m2, 0x31));
        const __m512d sc =
            _mm512_cvtps_pd(_mm256_cvtph_ps(_mm512_castsi512_si128(_mm512_permutexvar_epi16(ixd, hdr))));
        const __m512d dav = _mm512_xor_pd(_mm512_set1_pd((double)a->d), sign);
        acc = _mm512_fmadd_pd(_mm512_cvtepi32_pd(v), _mm512_mul_pd(sc, dav), acc);
    }
    double lanes[8];
    _mm512_storeu_pd(lanes, acc);
    for (int r = 0; r < 4; r++) out[r] = (float)(lanes[r] + lanes[4 + r]);
}

/* The R = 4, T = 1 instance takes the decode path above; every other shape the tile. */
static inline __attribute__((always_inline)) void k45_body(const char *w, size_t rb, int64_t nb, const char *x,
                                                           size_t xs, float *out, const int R, const int T,
                                                           const size_t block_bytes, const size_t qs_off,
                                                           const int has_qh, const size_t qh_off) {
    if (R == 4 && T == 1)
        k45_gemv4(w, rb, nb, x, hmoe_prefetch_distance(rb, 4), out, block_bytes, qs_off, has_qh, qh_off);
    else
        k45_tile(w, rb, nb, x, xs, out, R, T, block_bytes, qs_off, has_qh, qh_off);
}

/* Prefill path. vpdpbusd could replace each vpmaddubsw + vpdpwssd pair if all four
 * 64-element chunks of a block had the same lane -> sub-block map, so that they sum into
 * one register scaled once. One qword permute per chunk gives the weights that shape:
 * chunk c = qword c of each 32-byte run (runs p = 0..3), low nibbles then high nibbles,
 * i.e. elements 32·J[k] + 8c + (0..7) for qword k, J = (0,2,4,6,1,3,5,7): 8 elements of
 * every sub-block, sub-block J[k] in int32 lanes 2k, 2k+1. q8k_prep_k45 puts each
 * activation row in the same order once per tile (tile_impl.h, HMOE_DEFINE_GEMM_PREP). */
static inline void q8k_prep_k45(char *dst, const char *src, int64_t nb) {
    for (int64_t i = 0; i < nb; i++) {
        const struct hmoe_block_q8_k *s = (const struct hmoe_block_q8_k *)src + i;
        struct hmoe_block_q8_k *d = (struct hmoe_block_q8_k *)dst + i;
        const __m512i s0 = _mm512_loadu_si512(s->qs), s1 = _mm512_loadu_si512(s->qs + 64);
        const __m512i s2 = _mm512_loadu_si512(s->qs + 128), s3 = _mm512_loadu_si512(s->qs + 192);
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) { /* qword k of chunk c = activation qword 4·J[k] + c */
            const __m512i a = _mm512_permutex2var_epi64(s0, _mm512_set_epi64(0, 0, 12 + c, 4 + c, 0, 0, 8 + c, c), s1);
            const __m512i b = _mm512_permutex2var_epi64(s2, _mm512_set_epi64(12 + c, 4 + c, 0, 0, 8 + c, c, 0, 0), s3);
            _mm512_storeu_si512(d->qs + 64 * c, _mm512_mask_blend_epi64(0xCC, a, b));
        }
        d->d = s->d;
        memcpy(d->bsums, s->bsums, sizeof d->bsums);
    }
}

static inline __attribute__((always_inline)) void k45_gemm_tile(const char *w, int64_t nb, const char *x, size_t xs,
                                                                float *out, const int T, const size_t block_bytes,
                                                                const size_t qs_off, const int has_qh,
                                                                const size_t qh_off) {
    __m512d acc[HMOE_TILE_MAX_TOK];
    for (int t = 0; t < T; t++) acc[t] = _mm512_setzero_pd();
    const __m512i m4 = _mm512_set1_epi8(0x0f), b4 = _mm512_set1_epi8(0x10);
    const __m512i shift = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(4), 1);
    /* scale of int32 lane L: word 2L = SC[J[L/2]], word 2L+1 = 0 (masked) */
    const __m512i ixs = _mm512_set_epi16(7, 7, 7, 7, 5, 5, 5, 5, 3, 3, 3, 3, 1, 1, 1, 1, 6, 6, 6, 6, 4, 4, 4, 4, 2, 2,
                                         2, 2, 0, 0, 0, 0);
    const __m256i ixm = _mm256_set_epi16(15, 15, 14, 14, 13, 13, 12, 12, 11, 11, 10, 10, 9, 9, 8, 8);
    /* Q5_K: qword k of a chunk tests bit J[k] of qh[8c + (0..7)] */
    const __m512i hbits =
        _mm512_set_epi64(0x8080808080808080, 0x2020202020202020, 0x0808080808080808, 0x0202020202020202,
                         0x4040404040404040, 0x1010101010101010, 0x0404040404040404, 0x0101010101010101);
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *b = (const uint8_t *)w + (size_t)i * block_bytes;
        const __m256i scmn16 = k45_scales_mins(b);
        const __m512i sc = _mm512_maskz_permutexvar_epi16(0x55555555, ixs, _mm512_castsi256_si512(scmn16));
        const __m256i mn = _mm256_permutexvar_epi16(ixm, scmn16);
        const __m512i z0 = _mm512_loadu_si512(b + qs_off), z1 = _mm512_loadu_si512(b + qs_off + 64);
        __m512i qh = _mm512_setzero_si512();
        if (has_qh) qh = _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(b + qh_off)));
        __m512i q[4];
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) {
            const __m512i idx = _mm512_set_epi64(12 + c, 8 + c, 4 + c, c, 12 + c, 8 + c, 4 + c, c);
            q[c] = _mm512_and_si512(_mm512_srlv_epi16(_mm512_permutex2var_epi64(z0, idx, z1), shift), m4);
            if (has_qh) {
                const __m512i hq = _mm512_permutexvar_epi64(_mm512_set1_epi64(c), qh);
                q[c] = _mm512_mask_add_epi8(q[c], _mm512_test_epi8_mask(hq, hbits), q[c], b4);
            }
        }
        const struct hmoe_block_q4_k *hdr = (const struct hmoe_block_q4_k *)b;
        const double d = _cvtsh_ss(hdr->d), dmin = _cvtsh_ss(hdr->dmin);
#pragma GCC unroll 8
        for (int t = 0; t < T; t++) {
            const struct hmoe_block_q8_k *a = (const struct hmoe_block_q8_k *)(x + (size_t)t * xs) + i;
            __m512i dp = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q[0], _mm512_loadu_si512(a->qs));
            dp = _mm512_dpbusd_epi32(dp, q[1], _mm512_loadu_si512(a->qs + 64));
            dp = _mm512_dpbusd_epi32(dp, q[2], _mm512_loadu_si512(a->qs + 128));
            dp = _mm512_dpbusd_epi32(dp, q[3], _mm512_loadu_si512(a->qs + 192));
            /* Q4_K lanes are at most 4·4·15·128 < 2^15, so vpmaddwd with (SC, 0) word pairs
             * multiplies exactly; Q5_K's 31 needs vpmulld */
            const __m512i is = has_qh ? _mm512_mullo_epi32(dp, sc) : _mm512_madd_epi16(dp, sc);
            const __m256i is8 = _mm256_add_epi32(_mm512_castsi512_si256(is), _mm512_extracti64x4_epi64(is, 1));
            const __m256i ms8 = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)a->bsums), mn);
            const double da = a->d;
            acc[t] = _mm512_fmadd_pd(_mm512_cvtepi32_pd(is8), _mm512_set1_pd(d * da), acc[t]);
            acc[t] = _mm512_fmadd_pd(_mm512_cvtepi32_pd(ms8), _mm512_set1_pd(-dmin * da), acc[t]);
        }
    }
    for (int t = 0; t < T; t++) out[t] = (float)_mm512_reduce_add_pd(acc[t]);
}

#define Q4K_GEMM_TILE(w, rb, nb, x, xs, out, T)                                                                        \
    ((void)(rb),                                                                                                       \
     k45_gemm_tile(w, nb, x, xs, out, T, sizeof(struct hmoe_block_q4_k), offsetof(struct hmoe_block_q4_k, qs), 0, 0))
#define Q5K_GEMM_TILE(w, rb, nb, x, xs, out, T)                                                                        \
    ((void)(rb), k45_gemm_tile(w, nb, x, xs, out, T, sizeof(struct hmoe_block_q5_k),                                   \
                               offsetof(struct hmoe_block_q5_k, qs), 1, offsetof(struct hmoe_block_q5_k, qh)))

#define Q4K_TILE(w, rb, nb, x, xs, out, R, T)                                                                          \
    k45_body(w, rb, nb, x, xs, out, R, T, sizeof(struct hmoe_block_q4_k), offsetof(struct hmoe_block_q4_k, qs), 0, 0)
#define Q5K_TILE(w, rb, nb, x, xs, out, R, T)                                                                          \
    k45_body(w, rb, nb, x, xs, out, R, T, sizeof(struct hmoe_block_q5_k), offsetof(struct hmoe_block_q5_k, qs), 1,     \
             offsetof(struct hmoe_block_q5_k, qh))

HMOE_GEMV_TILE_INSTANCES(q4k512, Q4K_TILE)
HMOE_GEMV_TILE_INSTANCES(q5k512, Q5K_TILE)

/* The decode gemv of both types: the activation row prepared once (k45_prep_dec) into a
 * stack buffer, then the streaming loop of HMOE_DEFINE_GEMV_STREAM (tile_impl.h: first
 * look-ahead burst, page look-ahead, look-ahead clamped to the range) over k45_gemv4p.
 * Rows longer than the buffer (> 170 blocks = 43520 columns) take k45_gemv4 instead. */
#define K45_PREP_MAX_BLOCKS ((int64_t)((64 * 1024) / sizeof(struct k45_dec_act)))
static inline __attribute__((always_inline)) void k45_gemv_dec(int64_t ncols, const void *w, size_t row_bytes,
                                                               int64_t nrows, const void *xq, float *y,
                                                               const hmoe_tile_fn *row_tiles,
                                                               const size_t block_bytes, const size_t qs_off,
                                                               const int has_qh, const size_t qh_off) {
    const int64_t nb = ncols / 256;
    const size_t pf = hmoe_stream_prefetch_distance(row_bytes);
    const size_t all = (size_t)nrows * row_bytes, ahead = pf + HMOE_PAGE_AHEAD_EXTRA;
    size_t touch = (size_t)((((uintptr_t)w + 4095) & ~(uintptr_t)4095) - (uintptr_t)w);
    hmoe_prefetch_block((const char *)w, pf < all ? pf : all);
    _Alignas(64) struct k45_dec_act buf[(64 * 1024) / sizeof(struct k45_dec_act)];
    const int prep = nb <= K45_PREP_MAX_BLOCKS && nrows >= HMOE_TILE_GEMV_ROWS;
    if (prep) k45_prep_dec(buf, (const char *)xq, nb);
    int64_t r = 0;
    for (; r + HMOE_TILE_GEMV_ROWS <= nrows; r += HMOE_TILE_GEMV_ROWS) {
        touch = hmoe_page_touch((const char *)w, touch, (size_t)(r + HMOE_TILE_GEMV_ROWS) * row_bytes + ahead, all);
        const size_t left = (size_t)(nrows - r - HMOE_TILE_GEMV_ROWS) * row_bytes; /* after this tile */
        const char *wt = (const char *)w + (size_t)r * row_bytes;
        if (prep)
            k45_gemv4p(wt, row_bytes, nb, buf, pf < left ? pf : left, y + r, block_bytes, qs_off, has_qh, qh_off);
        else
            k45_gemv4(wt, row_bytes, nb, (const char *)xq, pf < left ? pf : left, y + r, block_bytes, qs_off, has_qh,
                      qh_off);
    }
    if (r < nrows)
        row_tiles[nrows - r]((const char *)w + (size_t)r * row_bytes, row_bytes, nb, (const char *)xq, 0, y + r);
}

void hmoe_cpu_gemv_q4_k_avx512(int64_t ncols, const void *w, size_t row_bytes, int64_t nrows, const void *xq,
                               float *y) {
    k45_gemv_dec(ncols, w, row_bytes, nrows, xq, y, q4k512_row_tiles, sizeof(struct hmoe_block_q4_k),
                 offsetof(struct hmoe_block_q4_k, qs), 0, 0);
}
void hmoe_cpu_gemv_q5_k_avx512(int64_t ncols, const void *w, size_t row_bytes, int64_t nrows, const void *xq,
                               float *y) {
    k45_gemv_dec(ncols, w, row_bytes, nrows, xq, y, q5k512_row_tiles, sizeof(struct hmoe_block_q5_k),
                 offsetof(struct hmoe_block_q5_k, qs), 1, offsetof(struct hmoe_block_q5_k, qh));
}

HMOE_GEMM_TILE_INSTANCES(q4k512g, Q4K_GEMM_TILE)
HMOE_DEFINE_GEMM_PREP(q4_k_avx512, q4k512g, 256, q8k_prep_k45, sizeof(struct hmoe_block_q8_k))

HMOE_GEMM_TILE_INSTANCES(q5k512g, Q5K_GEMM_TILE)
HMOE_DEFINE_GEMM_PREP(q5_k_avx512, q5k512g, 256, q8k_prep_k45, sizeof(struct hmoe_block_q8_k))
