/* q45_k_avxvnni.c — the Q4_K / Q5_K kernels of q45_k_dec_avx2_impl.h with AVX-VNNI (VEX
 * vpdpbusd / vpdpwssd). Decode: per pair of sub-blocks two vpdpbusd, one vpackssdw and one
 * vpdpwssd instead of two vpmaddubsw, two vpmaddwd and two vpaddd; prefill tiles: each
 * sub-block's scale multiply and add in one vpdpwssd.
 * Compiled with -mavx2 -mfma -mf16c -mavxvnni (Makefile, only when the compiler knows the
 * flag: HMOE_HAVE_AVXVNNI); only called after cpu_dispatch.c found AVX-VNNI.
 */
#if HMOE_HAVE_AVXVNNI
#define HMOE_K45D_VNNI 1
#include "q45_k_dec_avx2_impl.h"

K45D_DEFINE(avxvnni)
#else
typedef int hmoe_q45_k_avxvnni_unused; /* ISO C: a translation unit is not empty */
#endif
