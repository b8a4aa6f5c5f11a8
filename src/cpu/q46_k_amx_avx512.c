/* q46_k_amx_avx512.c — the AMX int8 GEMM for Q4_K and Q6_K (amx_gemm_impl.h) on the real
 * tile instructions, plus the guarded self-test of hmoe_cpu_amx_detect(). Built with the
 * AVX-512 and AMX flags (the Makefile gives *_amx_avx512.c -mamx-tile -mamx-int8); nothing
 * here runs unless cpu_dispatch.c found AMX usable at run time (amx_detect.c). A compiler
 * without those flags builds the fallback at the end: the self-test says no, so AMX is never
 * chosen, and the GEMM symbols exist only so that the dispatch table links.
 */
#include <immintrin.h>
#include <string.h>

#include "amx_impl.h"

/* gcc spells the feature macros __AMX_TILE__, clang __AMXTILE__. */
#if (defined(__AMX_TILE__) && defined(__AMX_INT8__)) || (defined(__AMXTILE__) && defined(__AMXINT8__))

#define AMX_SUFFIX amx
#define TILE_CFG(cfg) _tile_loadconfig(cfg)
#define TILE_RELEASE() _tile_release()
#define TILE_ZERO(t) _tile_zero(t)
#define TILE_LOAD(t, p, stride) _tile_loadd(t, p, stride)
#define TILE_STORE(t, p, stride) _tile_stored(t, p, stride)
#define TILE_DPBUSD(c, a, b) _tile_dpbusd(c, a, b)
#define TILE_DPBSSD(c, a, b) _tile_dpbssd(c, a, b)
#include "amx_gemm_impl.h"

/* One TDPBUSD and one TDPBSSD over full 16 × 64-byte tiles against scalar sums. */
bool hmoe_cpu_amx_selftest(void) {
    _Alignas(64) static uint8_t a[16][64], b[16][64];
    _Alignas(64) static int32_t c[16][16], c2[16][16];
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 64; j++) {
            a[i][j] = (uint8_t)(i * 37 + j * 11 + 200);
            b[i][j] = (uint8_t)(i * 13 - j * 7 + 91);
        }
    struct hmoe_amx_cfg cfg;
    amx_config_all(&cfg);
    _tile_loadconfig(&cfg);
    _tile_zero(0);
    _tile_zero(1);
    _tile_loadd(2, a, 64);
    _tile_loadd(3, b, 64);
    _tile_dpbusd(0, 2, 3);
    _tile_dpbssd(1, 2, 3);
    _tile_stored(0, c, 64);
    _tile_stored(1, c2, 64);
    _tile_release();
    for (int m = 0; m < 16; m++)
        for (int n = 0; n < 16; n++) {
            int32_t su = 0, ss = 0;
            for (int k = 0; k < 64; k++) {
                const int32_t bv = (int8_t)b[k / 4][4 * n + k % 4];
                su += (int32_t)a[m][k] * bv;
                ss += (int32_t)(int8_t)a[m][k] * bv;
            }
            if (c[m][n] != su || c2[m][n] != ss) return false;
        }
    return true;
}

#else /* no AMX in this compiler */

bool hmoe_cpu_amx_selftest(void) { return false; }

void hmoe_cpu_gemm_q4_k_amx(int64_t ncols, const void *w, size_t row_bytes, int64_t nrows, const void *xq,
                            size_t xq_stride, int64_t ntok, float *y, size_t y_stride) {
    hmoe_cpu_gemm_q4_k_amxemu(ncols, w, row_bytes, nrows, xq, xq_stride, ntok, y, y_stride);
}

void hmoe_cpu_gemm_q6_k_amx(int64_t ncols, const void *w, size_t row_bytes, int64_t nrows, const void *xq,
                            size_t xq_stride, int64_t ntok, float *y, size_t y_stride) {
    hmoe_cpu_gemm_q6_k_amxemu(ncols, w, row_bytes, nrows, xq, xq_stride, ntok, y, y_stride);
}

#endif
