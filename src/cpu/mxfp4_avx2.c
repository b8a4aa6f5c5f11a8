/* mxfp4_avx2.c — MXFP4 × Q8_0 dot products with AVX2 (quants.md §6.1, §8.4; the expert
 * type of gpt-oss): the bodies of leg32_avx2_impl.h with each block's codes looked up in
 * the doubled E2M1 table by one vpshufb, scaled by the E8M0 byte decoded the ggml way
 * (2^(e-128), binary32 subnormals for e = 0, 1 kept: no flush-to-zero here). Its AVX-VNNI
 * twin is mxfp4_avxvnni.c, the AVX-512 path's mxfp4_avx512.c.
 * Compiled with -mavx2 -mfma -mf16c (Makefile); only called after the run-time check.
 */
#define LEG32_VNNI 0
#include "leg32_avx2_impl.h"

/* the tiles (prefill) and their 4-row gemv, which takes the decode kernel's remainder rows */
LEG32_DEFINE2(mxfp4_avx2_tiles, mxfp4_avx2, mxfp4256, sizeof(struct hmoe_block_mxfp4), leg32_unpack_mxfp4,
              leg32_scale_e8m0, leg32_scales4_e8m0)

/* decode: two blocks per step on a prepared activation row */
#define MXFP4D_VNNI 0
#include "mxfp4_dec_avx2_impl.h"
MXFP4D_DEFINE(avx2)
