/* q5_0_avxvnni.c — the Q5_0 kernels of q5_0_avx2.c with AVX-VNNI: each block sum is one VEX
 * vpdpbusd instead of vpmaddubsw + vpmaddwd (leg32_avx2_impl.h); the decode takes the unsigned
 * codes (LEG32_GEMV4U_BODY).
 * Compiled with -mavx2 -mfma -mf16c -mavxvnni (Makefile, only when the compiler knows the
 * flag: HMOE_HAVE_AVXVNNI); only called after cpu_dispatch.c found AVX-VNNI.
 */
#if HMOE_HAVE_AVXVNNI
#define LEG32_VNNI 1
#include "leg32_avx2_impl.h"

LEG32_DEFINE_U(q5_0_avxvnni, q5_0vnni, sizeof(struct hmoe_block_q5_0), leg32_unpack_q5_0, leg32_unpack_u_q5_0, 16,
               leg32_scale_fp16, leg32_scales4_fp16)
#else
typedef int hmoe_q5_0_avxvnni_unused; /* ISO C: a translation unit is not empty */
#endif
