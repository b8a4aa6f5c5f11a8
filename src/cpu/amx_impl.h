/* amx_impl.h — private to src/cpu: the AMX int8 expert GEMM (Q4_K, Q6_K × Q8_K) and the
 * run-time check that lets it run. The kernel body (amx_gemm_impl.h) is written once
 * against a tiny tile interface — TILE_CFG / TILE_ZERO / TILE_LOAD / TILE_STORE /
 * TILE_DPBUSD / TILE_DPBSSD / TILE_RELEASE on tiles 0..7 named by literal numbers — and
 * built twice: with the real instructions (q46_k_amx_avx512.c, only run after
 * hmoe_cpu_amx_detect() said yes) and with a scalar emulator of the same semantics
 * (q46_k_amxemu_avx512.c), which is what `make test` checks on machines without AMX.
 */
#ifndef HMOE_CPU_AMX_IMPL_H
#define HMOE_CPU_AMX_IMPL_H

#include <stdbool.h>
#include <stdint.h>

#include "cpu_impl.h"

/* The 64-byte tile configuration of LDTILECFG, palette 1 (Intel SDM vol. 2, LDTILECFG). */
struct hmoe_amx_cfg {
    uint8_t palette, start_row;
    uint8_t reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
};
_Static_assert(sizeof(struct hmoe_amx_cfg) == 64, "LDTILECFG takes 64 bytes");

/* Run-time check, in order: cpuid AMX-TILE + AMX-INT8, the kernel's permission for the tile
 * data state (arch_prctl ARCH_REQ_XCOMP_PERM), XCR0 tile bits, then one tile product of
 * each kind compared with scalar code while SIGILL / SIGSEGV are caught. `why` gets a
 * short reason when the answer is no. Call once (cpu_dispatch.c caches it). */
bool hmoe_cpu_amx_detect(const char **why);
/* The guarded part of the check: TDPBUSD and TDPBSSD on fixed data against scalar sums
 * (q46_k_amx_avx512.c). Only called after the cpuid / permission checks passed. */
bool hmoe_cpu_amx_selftest(void);

/* The raw kernels (any ntok >= 1), real and emulated; the signature of hmoe_cpu_gemm_fn. */
HMOE_CPU_DECLARE_WEIGHT_GEMM(q4_k_amx)
HMOE_CPU_DECLARE_WEIGHT_GEMM(q6_k_amx)
HMOE_CPU_DECLARE_WEIGHT_GEMM(q4_k_amxemu)
HMOE_CPU_DECLARE_WEIGHT_GEMM(q6_k_amxemu)

#endif
