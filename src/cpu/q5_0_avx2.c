/* q5_0_avx2.c — Q5_0 × Q8_0 dot products with AVX2 (quants.md §3, §8.4; the hot type of
 * Nemotron-3 files, whose 2688-wide rows cannot hold K-quant blocks): the bodies of
 * leg32_avx2_impl.h with each block rebuilt as signed bytes -16..15 (leg32_unpack_q5_0), the decode
 * on the unsigned codes 0..31 with the offset 16 per block (leg32_unpack_u_q5_0, LEG32_GEMV4U_BODY);
 * its AVX-VNNI twin is q5_0_avxvnni.c.
 * Compiled with -mavx2 -mfma -mf16c (Makefile); only called after the run-time check.
 */
#define LEG32_VNNI 0
#include "leg32_avx2_impl.h"

LEG32_DEFINE_U(q5_0_avx2, q50256, sizeof(struct hmoe_block_q5_0), leg32_unpack_q5_0, leg32_unpack_u_q5_0, 16,
               leg32_scale_fp16, leg32_scales4_fp16)
