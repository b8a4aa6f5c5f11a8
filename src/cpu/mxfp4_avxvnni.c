/* mxfp4_avxvnni.c — the MXFP4 kernels of mxfp4_avx2.c with AVX-VNNI: each block sum is one VEX
 * vpdpbusd instead of vpmaddubsw + vpmaddwd (leg32_avx2_impl.h).
 * Compiled with -mavx2 -mfma -mf16c -mavxvnni (Makefile, only when the compiler knows the
 * flag: HMOE_HAVE_AVXVNNI); only called after cpu_dispatch.c found AVX-VNNI.
 */
#if HMOE_HAVE_AVXVNNI
#define LEG32_VNNI 1
#include "leg32_avx2_impl.h"

/* the tiles (prefill) and their 4-row gemv, which takes the decode kernel's remainder rows */
LEG32_DEFINE2(mxfp4_avxvnni_tiles, mxfp4_avxvnni, mxfp4vnni, sizeof(struct hmoe_block_mxfp4), leg32_unpack_mxfp4,
              leg32_scale_e8m0, leg32_scales4_e8m0)

/* decode: two blocks per step on a prepared activation row */
#define MXFP4D_VNNI 1
#include "mxfp4_dec_avx2_impl.h"
MXFP4D_DEFINE(avxvnni)
#else
typedef int hmoe_mxfp4_avxvnni_unused; /* ISO C: a translation unit is not empty */
#endif
