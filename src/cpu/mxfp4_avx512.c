/* mxfp4_avx512.c — MXFP4 × Q8_0 dot products on the AVX-512 path: the bodies of
 * leg32_avx2_impl.h (see mxfp4_avx2.c) built with the AVX-512 flags, so the block sums are
 * one EVEX vpdpbusd each (AVX512-VNNI + VL) and the compiler has 32 vector registers for
 * the 8-token gemm tiles. A block is 32 elements, exactly one YMM of activations, so wider
 * registers would only add shuffles.
 * Compiled with the AVX-512 flags (Makefile); only called after cpu_dispatch.c checked the CPU.
 */
#define LEG32_VNNI 1
#include "leg32_avx2_impl.h"

/* the tiles (prefill) and their 4-row gemv, which takes the decode kernel's remainder rows */
LEG32_DEFINE2(mxfp4_avx512_tiles, mxfp4_avx512, mxfp4512, sizeof(struct hmoe_block_mxfp4), leg32_unpack_mxfp4,
              leg32_scale_e8m0, leg32_scales4_e8m0)

/* decode: two blocks per step on a prepared activation row */
#define MXFP4D_VNNI 1
#include "mxfp4_dec_avx2_impl.h"
MXFP4D_DEFINE(avx512)
