/* q5_0_avx512.c — Q5_0 × Q8_0 dot products on the AVX-512 path (quants.md §3, §8.4; the hot
 * type of Nemotron-3 files): the bodies of leg32_avx2_impl.h built with the AVX-512 flags
 * (EVEX vpdpbusd on YMM, see q8_0_avx512.c), with unpackers of their own: the 5th bits of a
 * block are a 32-bit mask, so one masked byte add puts 0x10 where they are set into the
 * nibbles (elements 0-15 low, 16-31 high). The gemm tiles take signed values (minus 16), the
 * decode the unsigned codes 0..31 with the offset 16 per block (LEG32_GEMV4U_BODY): per row and
 * block a 16-byte load, a shift, an insert, an AND, the masked add and one vpdpbusd.
 * Compiled with the AVX-512 flags (Makefile); only called after cpu_dispatch.c checked the CPU.
 */
#define LEG32_VNNI 1
#include "leg32_avx2_impl.h"

static inline __mmask32 q50_high_bits(const struct hmoe_block_q5_0 *b) {
    uint32_t qh;
    memcpy(&qh, b->qh, sizeof qh);
    return (__mmask32)qh;
}

static inline __m256i q50_unpack_mask(const void *blk) {
    const struct hmoe_block_q5_0 *b = blk;
    const __m256i high = _mm256_maskz_mov_epi8(q50_high_bits(b), _mm256_set1_epi8(0x10));
    return _mm256_sub_epi8(_mm256_or_si256(leg32_nibbles(b->qs), high), _mm256_set1_epi8(16));
}

static inline __m256i q50_unpack_u_mask(const void *blk) {
    const struct hmoe_block_q5_0 *b = blk;
    const __m256i nib = leg32_nibbles(b->qs);
    return _mm256_mask_add_epi8(nib, q50_high_bits(b), nib, _mm256_set1_epi8(0x10));
}

LEG32_DEFINE_U(q5_0_avx512, q50512, sizeof(struct hmoe_block_q5_0), q50_unpack_mask, q50_unpack_u_mask, 16,
               leg32_scale_fp16, leg32_scales4_fp16)
