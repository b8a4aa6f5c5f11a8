/* q46_k_amxemu_avx512.c — the AMX GEMM of amx_gemm_impl.h built on a scalar emulator of
 * the tile instructions (8 tiles of 16 rows × 64 bytes per thread; LDTILECFG rows/colsb,
 * TILELOADD/TILESTORED/TILEZERO, TDPBUSD u8·s8 and TDPBSSD s8·s8 with B in the VNNI layout
 * B[k/4][n·4 + k%4], Intel SDM vol. 2). Slow; it exists so that `make test` checks the
 * kernel's data layout and arithmetic on machines without AMX (tests/test_cpu_amx.c).
 */
#include <string.h>

#include "amx_impl.h"

static _Thread_local struct {
    uint8_t rows[8];
    uint16_t colsb[8];
    uint8_t t[8][16][64];
} emu;

static void emu_cfg(const struct hmoe_amx_cfg *c) {
    for (int t = 0; t < 8; t++) {
        emu.rows[t] = c->rows[t] > 16 ? 16 : c->rows[t];
        emu.colsb[t] = c->colsb[t] > 64 ? 64 : c->colsb[t];
    }
    memset(emu.t, 0, sizeof emu.t);
}

static void emu_load(int t, const void *p, size_t stride) {
    memset(emu.t[t], 0, sizeof emu.t[t]);
    for (int r = 0; r < emu.rows[t]; r++) memcpy(emu.t[t][r], (const uint8_t *)p + (size_t)r * stride, emu.colsb[t]);
}

static void emu_store(int t, void *p, size_t stride) {
    for (int r = 0; r < emu.rows[t]; r++) memcpy((uint8_t *)p + (size_t)r * stride, emu.t[t][r], emu.colsb[t]);
}

/* C[m][n] += Σ_k A[m][k]·B[k/4][4n + k%4], A unsigned or signed bytes, B signed. */
static void emu_dp(int c, int a, int b, int a_signed) {
    const int M = emu.rows[a], K = emu.colsb[a], N = emu.colsb[c] / 4;
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            int32_t acc;
            memcpy(&acc, &emu.t[c][m][4 * n], 4);
            for (int k = 0; k < K; k++) {
                const int32_t av = a_signed ? (int32_t)(int8_t)emu.t[a][m][k] : (int32_t)emu.t[a][m][k];
                acc += av * (int32_t)(int8_t)emu.t[b][k / 4][4 * n + k % 4];
            }
            memcpy(&emu.t[c][m][4 * n], &acc, 4);
        }
}

#define AMX_SUFFIX amxemu
#define TILE_CFG(cfg) emu_cfg(cfg)
#define TILE_RELEASE() ((void)0)
#define TILE_ZERO(n) memset(emu.t[n], 0, sizeof emu.t[n])
#define TILE_LOAD(t, p, stride) emu_load(t, p, stride)
#define TILE_STORE(t, p, stride) emu_store(t, p, stride)
#define TILE_DPBUSD(c, a, b) emu_dp(c, a, b, 0)
#define TILE_DPBSSD(c, a, b) emu_dp(c, a, b, 1)
#include "amx_gemm_impl.h"
