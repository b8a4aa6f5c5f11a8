/* q4_0_avx2.c — Q4_0 × Q8_0 dot products with AVX2 (quants.md §3, §8.4; the scores of a q4_0 K
 * cache, whose queries are quantized to Q8_0): the bodies of leg32_avx2_impl.h with each block
 * rebuilt as signed bytes -8..7 (leg32_unpack_q4_0), the decode on the nibbles themselves with
 * the offset 8 per block (LEG32_GEMV4U_BODY).
 * Compiled with -mavx2 -mfma -mf16c (Makefile); only called after the run-time check.
 */
#define LEG32_VNNI 0
#include "leg32_avx2_impl.h"

LEG32_DEFINE_U(q4_0_avx2, q40256, sizeof(struct hmoe_block_q4_0), leg32_unpack_q4_0, leg32_unpack_u_q4_0, 8,
               leg32_scale_fp16, leg32_scales4_fp16)
