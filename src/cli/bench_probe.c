/* bench_probe.c — the rooflines `hmoe bench` reports against, measured at start: RAM read
 * bandwidth (OpenMP threads each streaming their slice of a buffer at least 4x the last-level
 * cache, 64-byte AVX-512 loads when the CPU has them) and pinned host->device bandwidth when a
 * GPU is present (cuda.h). Takes well under a second.
 */
#include <immintrin.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "bench_impl.h"
#include "hmoe/cpu.h"
#include "hmoe/cuda.h"

/* Sum of n bytes read with 64-byte loads (the result only keeps the loads alive). */
__attribute__((target("avx512f"))) static uint64_t read_avx512(const uint8_t *p, size_t n) {
    __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t i = 0; i + 256 <= n; i += 256) {
        a0 = _mm512_add_epi64(a0, _mm512_load_si512((const void *)(p + i)));
        a1 = _mm512_add_epi64(a1, _mm512_load_si512((const void *)(p + i + 64)));
        a2 = _mm512_add_epi64(a2, _mm512_load_si512((const void *)(p + i + 128)));
        a3 = _mm512_add_epi64(a3, _mm512_load_si512((const void *)(p + i + 192)));
    }
    /* Folded in registers with unsigned vector adds: the compiler's reduce intrinsic adds
     * signed 64-bit lanes, and random bytes overflow them (undefined behaviour). */
    const __m512i s = _mm512_add_epi64(_mm512_add_epi64(a0, a1), _mm512_add_epi64(a2, a3));
    const __m256i h = _mm256_add_epi64(_mm512_castsi512_si256(s), _mm512_extracti64x4_epi64(s, 1));
    const __m128i q = _mm_add_epi64(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
    return (uint64_t)_mm_cvtsi128_si64(q) + (uint64_t)_mm_extract_epi64(q, 1);
}

/* Portable: 16-byte loads, four lines in flight per step. */
static uint64_t read_sse2(const uint8_t *p, size_t n) {
    __m128i a0 = _mm_setzero_si128(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t i = 0; i + 64 <= n; i += 64) {
        a0 = _mm_add_epi64(a0, _mm_load_si128((const __m128i *)(p + i)));
        a1 = _mm_add_epi64(a1, _mm_load_si128((const __m128i *)(p + i + 16)));
        a2 = _mm_add_epi64(a2, _mm_load_si128((const __m128i *)(p + i + 32)));
        a3 = _mm_add_epi64(a3, _mm_load_si128((const __m128i *)(p + i + 48)));
    }
    uint64_t t[2];
    _mm_storeu_si128((__m128i *)t, _mm_add_epi64(_mm_add_epi64(a0, a1), _mm_add_epi64(a2, a3)));
    return t[0] + t[1];
}

static volatile uint64_t probe_sink;

double hmoe_bench_probe_ram_gbps(int n_threads, uint64_t *buf_bytes) {
    hmoe_cpu_init();
    if (n_threads < 1) n_threads = 1;
    uint64_t n = HMOE_MAX(4 * hmoe_cli_llc_bytes(), (uint64_t)256 << 20);
    const uint64_t avail = hmoe_cli_mem_available_bytes();
    if (avail && n > avail / 4) n = HMOE_MAX(avail / 4, (uint64_t)64 << 20);
    if (n < ((uint64_t)4 << 20) * (uint64_t)n_threads) n = ((uint64_t)4 << 20) * (uint64_t)n_threads;
    uint8_t *buf = NULL;
    const size_t huge = (size_t)2 << 20;
    n -= n % huge;
    if (posix_memalign((void **)&buf, huge, (size_t)n) != 0) return 0;
    /* 2 MiB pages where the kernel allows them: 128x fewer page faults in the first touch. */
    madvise(buf, (size_t)n, MADV_HUGEPAGE);
    const size_t per = ((size_t)n / (size_t)n_threads) & ~(size_t)4095; /* each slice 4 KiB-aligned */
    *buf_bytes = (uint64_t)per * (uint64_t)n_threads;
    const bool avx512 = hmoe_cpu_path() == HMOE_CPU_AVX512;
    /* First touch by the thread that will read the slice (NUMA placement, no zero page). */
#pragma omp parallel num_threads(n_threads)
    memset(buf + per * (size_t)omp_get_thread_num(), 1, per);
    double best = 1e30;
    for (int pass = 0; pass < 4; pass++) {
        uint64_t total = 0;
        const double t0 = hmoe_time_s();
#pragma omp parallel num_threads(n_threads) reduction(+ : total)
        {
            const uint8_t *p = buf + per * (size_t)omp_get_thread_num();
            total += avx512 ? read_avx512(p, per) : read_sse2(p, per);
        }
        const double dt = hmoe_time_s() - t0;
        probe_sink += total;
        if (pass > 0 && dt < best) best = dt; /* pass 0 warms the TLB and the threads */
    }
    free(buf);
    return (double)per * (double)n_threads / best / 1e9;
}

double hmoe_bench_probe_h2d_gbps(char *gpu_name, size_t name_size) {
    gpu_name[0] = 0;
    if (!hmoe_cuda_available()) return HMOE_BENCH_NA;
    struct hmoe_cuda_device_info info;
    struct hmoe_err err = {0};
    if (hmoe_cuda_device_info(0, &info, &err) == HMOE_OK) snprintf(gpu_name, name_size, "%s", info.name);
    double gbps = 0;
    if (hmoe_cuda_probe_h2d_gbps(0, (size_t)256 << 20, &gbps, &err) != HMOE_OK) {
        fprintf(stderr, "hmoe: warning: %s\n", err.msg);
        return HMOE_BENCH_NA;
    }
    return gbps;
}

double hmoe_bench_probe_hbm_gbps(void) {
    if (!hmoe_cuda_available()) return HMOE_BENCH_NA;
    struct hmoe_err err = {0};
    double gbps = 0;
    if (hmoe_cuda_probe_d2d_gbps(0, (size_t)256 << 20, &gbps, &err) != HMOE_OK) {
        fprintf(stderr, "hmoe: warning: %s\n", err.msg);
        return HMOE_BENCH_NA;
    }
    return gbps;
}
