/* iq4_nl_avx2.c — IQ4_NL × Q8_0 dot products with AVX2 (quants.md §5.9, §8.4): a 32-element
 * block with one fp16 scale and Q4_0's nibble order, its codes looked up in the 16 kvalues by one
 * vpshufb, then the bodies of leg32_avx2_impl.h (the 4-row streaming decode, the 4-token group
 * gemm): |v| times the activations carrying v's sign (|v|·|a|·2 <= 2·127·127, no saturation).
 * Compiled with -mavx2 -mfma -mf16c (Makefile); only called after the run-time check.
 */
#define LEG32_VNNI 0
#include "leg32_avx2_impl.h"

/* The block's 32 kvalues (-127..113), elements 0-15 from the low nibbles, 16-31 from the high. */
static inline __m256i leg32_unpack_iq4_nl(const void *blk) {
    const __m256i kv = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)hmoe_kvalues_iq4nl));
    return _mm256_shuffle_epi8(kv, leg32_nibbles(((const struct hmoe_block_iq4_nl *)blk)->qs));
}

LEG32_DEFINE(iq4_nl_avx2, iq4nl256, sizeof(struct hmoe_block_iq4_nl), leg32_unpack_iq4_nl, leg32_scale_fp16,
             leg32_scales4_fp16)
