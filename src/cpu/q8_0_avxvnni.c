/* q8_0_avxvnni.c — the Q8_0 kernels of q8_0_avx2.c with AVX-VNNI: each block sum is one VEX
 * vpdpbusd instead of vpmaddubsw + vpmaddwd (leg32_avx2_impl.h); the decode and the group gemm
 * take the unsigned codes w + 128 (vpdpbusd does not saturate) with the offset -128·Σa per block.
 * Compiled with -mavx2 -mfma -mf16c -mavxvnni (Makefile, only when the compiler knows the
 * flag: HMOE_HAVE_AVXVNNI); only called after cpu_dispatch.c found AVX-VNNI.
 */
#if HMOE_HAVE_AVXVNNI
#define LEG32_VNNI 1
#include "leg32_avx2_impl.h"

LEG32_DEFINE_U(q8_0_avxvnni, q8_0vnni, sizeof(struct hmoe_block_q8_0), leg32_unpack_q8_0, leg32_unpack_u_q8_0, 128,
               leg32_scale_fp16, leg32_scales4_fp16)
#else
typedef int hmoe_q8_0_avxvnni_unused; /* ISO C: a translation unit is not empty */
#endif
