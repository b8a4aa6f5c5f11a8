/* q6_k_unpack_impl.h — the 256 six-bit quants of one Q6_K block as unsigned bytes (0..63) in
 * four zmm, shared by the AVX-512 dot products (q6_k_avx512.c) and the AMX A-tile build
 * (amx_gemm_impl.h); include only from files compiled with AVX-512BW (quants.md §4.6).
 * One 64-byte load of ql gives elements 0..63 (low nibbles) and 64..127 (high nibbles) of a
 * half; its 32 qh bytes, broadcast to both zmm halves, are shifted so each byte's 2-bit field
 * lands on bits 4-5 and merged in with vpternlog. q[2h] / q[2h+1] = elements 128h + 0..63 / 64..127.
 */
#ifndef HMOE_CPU_Q6_K_UNPACK_IMPL_H
#define HMOE_CPU_Q6_K_UNPACK_IMPL_H

#include <immintrin.h>

#include "hmoe/quant_blocks.h"

struct q6k_unpack_consts {
    __m512i m4, m30, sh_lo, sh_hi;
};

static inline struct q6k_unpack_consts q6k_unpack_consts(void) {
    struct q6k_unpack_consts c;
    c.m4 = _mm512_set1_epi8(0x0f);
    c.m30 = _mm512_set1_epi8(0x30);
    /* lower zmm half = elements l (qh bits 0-1 -> shift left 4), upper = l+32 (bits 2-3 -> left 2);
     * for the high-nibble chunk: l+64 (bits 4-5, no shift), l+96 (bits 6-7 -> right 2) */
    c.sh_lo = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(2), 1);
    c.sh_hi = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1);
    return c;
}

static inline __attribute__((always_inline)) void q6k_unpack(const struct hmoe_block_q6_k *b,
                                                             const struct q6k_unpack_consts *c, __m512i q[4]) {
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
        const __m512i ql = _mm512_loadu_si512(b->ql + 64 * h);
        const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(b->qh + 32 * h)));
        const __m512i hb_lo = _mm512_and_si512(_mm512_sllv_epi16(qh, c->sh_lo), c->m30);
        const __m512i hb_hi = _mm512_and_si512(_mm512_srlv_epi16(qh, c->sh_hi), c->m30);
        q[2 * h] = _mm512_ternarylogic_epi32(ql, c->m4, hb_lo, 0xEA);                           /* (A & B) | C */
        q[2 * h + 1] = _mm512_ternarylogic_epi32(_mm512_srli_epi16(ql, 4), c->m4, hb_hi, 0xEA); /* (A & B) | C */
    }
}

#endif
