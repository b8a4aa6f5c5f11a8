/* q6_k_avxvnni.c — the Q6_K decode gemv of q6_k_dec_avx2_impl.h with AVX-VNNI: the scale
 * multiply and the add of each 32-element step in one VEX vpdpwssd. Prefill keeps the AVX2
 * tiles (q6_k_avx2.c), which also take this kernel's remainder rows.
 * Compiled with -mavx2 -mfma -mf16c -mavxvnni (Makefile, only when the compiler knows the
 * flag: HMOE_HAVE_AVXVNNI); only called after cpu_dispatch.c found AVX-VNNI.
 */
#if HMOE_HAVE_AVXVNNI
#define HMOE_Q6KD_VNNI 1
#include "q6_k_dec_avx2_impl.h"

void hmoe_cpu_gemv_q6_k_avxvnni(int64_t ncols, const void *w, size_t row_bytes, int64_t nrows, const void *xq,
                                float *y) {
    q6kd_gemv(ncols, w, row_bytes, nrows, xq, y, hmoe_cpu_gemv_q6_k_avx2_tiles);
}
#else
typedef int hmoe_q6_k_avxvnni_unused; /* ISO C: a translation unit is not empty */
#endif
