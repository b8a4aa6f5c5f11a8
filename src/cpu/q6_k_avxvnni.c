/* q6_k_avxvnni.c — the Q6_K kernels of q6_k_dec_avx2_impl.h with AVX-VNNI: the scale
 * multiply and the add of each 32-element step in one VEX vpdpwssd, in the decode kernel
 * and in the prefill tiles.
 * Compiled with -mavx2 -mfma -mf16c -mavxvnni (Makefile, only when the compiler knows the
 * flag: HMOE_HAVE_AVXVNNI); only called after cpu_dispatch.c found AVX-VNNI.
 */
#if HMOE_HAVE_AVXVNNI
#define HMOE_Q6KD_VNNI 1
#include "q6_k_dec_avx2_impl.h"

Q6KD_DEFINE(avxvnni)
#else
typedef int hmoe_q6_k_avxvnni_unused; /* ISO C: a translation unit is not empty */
#endif
