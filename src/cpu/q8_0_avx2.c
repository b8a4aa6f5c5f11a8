/* q8_0_avx2.c — Q8_0 × Q8_0 dot products with AVX2 (quants.md §3.5, §8.4): the bodies of
 * leg32_avx2_impl.h with the block's bytes as they are (its AVX-VNNI twin: q8_0_avxvnni.c).
 * Compiled with -mavx2 -mfma -mf16c (Makefile); only called after the run-time check.
 */
#define LEG32_VNNI 0
#include "leg32_avx2_impl.h"

LEG32_DEFINE(q8_0_avx2, q80256, sizeof(struct hmoe_block_q8_0), leg32_unpack_q8_0, leg32_scale_fp16,
             leg32_scales4_fp16)
