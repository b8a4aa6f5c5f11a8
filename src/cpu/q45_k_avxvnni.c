/* q45_k_avxvnni.c — the Q4_K / Q5_K decode gemv of q45_k_dec_avx2_impl.h with AVX-VNNI
 * (VEX vpdpbusd / vpdpwssd): per pair of sub-blocks two vpdpbusd, one vpackssdw and one
 * vpdpwssd instead of two vpmaddubsw, two vpmaddwd and two vpaddd. Prefill keeps the AVX2
 * tiles (q45_k_avx2.c), which also take this kernel's remainder rows.
 * Compiled with -mavx2 -mfma -mf16c -mavxvnni (Makefile, only when the compiler knows the
 * flag: HMOE_HAVE_AVXVNNI); only called after cpu_dispatch.c found AVX-VNNI.
 */
#if HMOE_HAVE_AVXVNNI
#define HMOE_K45D_VNNI 1
#include "q45_k_dec_avx2_impl.h"

void hmoe_cpu_gemv_q4_k_avxvnni(int64_t ncols, const void *w, size_t row_bytes, int64_t nrows, const void *xq,
                                float *y) {
    K45D_GEMV_Q4(ncols, w, row_bytes, nrows, xq, y, hmoe_cpu_gemv_q4_k_avx2_tiles);
}
void hmoe_cpu_gemv_q5_k_avxvnni(int64_t ncols, const void *w, size_t row_bytes, int64_t nrows, const void *xq,
                                float *y) {
    K45D_GEMV_Q5(ncols, w, row_bytes, nrows, xq, y, hmoe_cpu_gemv_q5_k_avx2_tiles);
}
#else
typedef int hmoe_q45_k_avxvnni_unused; /* ISO C: a translation unit is not empty */
#endif
