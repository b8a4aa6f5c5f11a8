/* iq4_xs_avxvnni.c — the IQ4_XS decode gemv of iq4_xs_dec_avx2_impl.h with AVX-VNNI: codes
 * looked up as kvalue + 128 (unsigned), two VEX vpdpbusd per pair of sub-blocks from the
 * prepared offsets, one vpmulld for the scales. Prefill keeps the AVX2 row tiles (iq4_avx2.c),
 * which also take this kernel's remainder rows.
 * Compiled with -mavx2 -mfma -mf16c -mavxvnni (Makefile, only when the compiler knows the
 * flag: HMOE_HAVE_AVXVNNI); only called after cpu_dispatch.c found AVX-VNNI.
 */
#if HMOE_HAVE_AVXVNNI
#include <string.h>

#define IQ4D_VNNI 1
#include "iq4_xs_dec_avx2_impl.h"

void hmoe_cpu_gemv_iq4_xs_avxvnni(int64_t ncols, const void *w, size_t row_bytes, int64_t nrows, const void *xq,
                                  float *y) {
    iq4d_gemv(ncols, w, row_bytes, nrows, xq, y, hmoe_cpu_gemv_iq4_xs_avx2_tiles);
}
#else
typedef int hmoe_iq4_xs_avxvnni_unused; /* ISO C: a translation unit is not empty */
#endif
