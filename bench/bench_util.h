/* bench_util.h — helpers shared by the bench_*.c programs: a RAM read-bandwidth probe
 * (the roofline every kernel bench reports against, measured in the same run), timing,
 * and a page-touching allocator. The probe uses AVX-512 or AVX2 loads behind function
 * target attributes, picked with the same run-time check the kernels use (cpu.h), so a
 * bench binary built for baseline x86-64 still runs anywhere.
 */
#ifndef HMOE_BENCH_UTIL_H
#define HMOE_BENCH_UTIL_H

#include <immintrin.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "hmoe/common.h"
#include "hmoe/cpu.h"
#include "hmoe/fp16.h"
#include "hmoe/quant_blocks.h"
#include "hmoe/types.h"

/* Sum of a buffer read with 64-byte loads; the returned value only defeats dead-code
 * elimination. Four independent accumulators keep enough loads in flight. */
__attribute__((target("avx512f"))) static uint64_t bench_read_avx512(const uint8_t *p, size_t n) {
    __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
    size_t i = 0;
    for (; i + 256 <= n; i += 256) {
        a0 = _mm512_add_epi64(a0, _mm512_load_si512((const void *)(p + i)));
        a1 = _mm512_add_epi64(a1, _mm512_load_si512((const void *)(p + i + 64)));
        a2 = _mm512_add_epi64(a2, _mm512_load_si512((const void *)(p + i + 128)));
        a3 = _mm512_add_epi64(a3, _mm512_load_si512((const void *)(p + i + 192)));
    }
    a0 = _mm512_add_epi64(_mm512_add_epi64(a0, a1), _mm512_add_epi64(a2, a3));
    return (uint64_t)_mm512_reduce_add_epi64(a0);
}

__attribute__((target("avx2"))) static uint64_t bench_read_avx2(const uint8_t *p, size_t n) {
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
    size_t i = 0;
    for (; i + 128 <= n; i += 128) {
        a0 = _mm256_add_epi64(a0, _mm256_load_si256((const __m256i *)(p + i)));
        a1 = _mm256_add_epi64(a1, _mm256_load_si256((const __m256i *)(p + i + 32)));
        a2 = _mm256_add_epi64(a2, _mm256_load_si256((const __m256i *)(p + i + 64)));
        a3 = _mm256_add_epi64(a3, _mm256_load_si256((const __m256i *)(p + i + 96)));
    }
    a0 = _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3));
    uint64_t t[4];
    _mm256_storeu_si256((__m256i *)t, a0);
    return t[0] + t[1] + t[2] + t[3];
}

static uint64_t bench_read_scalar(const uint8_t *p, size_t n) {
    uint64_t s = 0;
    for (size_t i = 0; i + 8 <= n; i += 64) {
        uint64_t v;
        memcpy(&v, p + i, 8);
        s += v;
    }
    return s;
}

static volatile uint64_t bench_sink;

/* CPU time of the calling thread in seconds: unaffected by other processes' use of the cores. */
static inline double bench_thread_cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Page-aligned buffer of n bytes, first touched by `nthreads` threads in the same static
 * split the probes use (so pages are spread like the data they later stream). */
static int bench_hugepages; /* -H: ask for transparent huge pages (madvise) */
static inline void *bench_alloc_touched(size_t n, int nthreads) {
    void *p = NULL;
    if (posix_memalign(&p, (size_t)2 << 20, n) != 0) return NULL;
    if (bench_hugepages) madvise(p, n, MADV_HUGEPAGE);
#pragma omp parallel for num_threads(nthreads) schedule(static)
    for (size_t i = 0; i < n; i += 4096) memset((char *)p + i, (int)(i >> 12) & 0xff, 4096);
    return p;
}

/* Read bandwidth in GB/s (1e9 bytes/s) of `nthreads` threads each reading its own
 * contiguous slice of buf[0..n), best of `reps` passes. */
static inline double bench_read_gbs(const uint8_t *buf, size_t n, int nthreads, int reps) {
    enum hmoe_cpu_path path = hmoe_cpu_path();
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        double t0 = hmoe_time_s();
        uint64_t total = 0;
#pragma omp parallel num_threads(nthreads) reduction(+ : total)
        {
            int nt = omp_get_num_threads(), id = omp_get_thread_num();
            size_t per = (n / (size_t)nt) & ~(size_t)4095;
            const uint8_t *p = buf + per * (size_t)id;
            if (path == HMOE_CPU_AVX512)
                total += bench_read_avx512(p, per);
            else if (path == HMOE_CPU_AVX2)
                total += bench_read_avx2(p, per);
            else
                total += bench_read_scalar(p, per);
        }
        double dt = hmoe_time_s() - t0;
        bench_sink += total;
        if (dt < best) best = dt;
    }
    size_t per = (n / (size_t)nthreads) & ~(size_t)4095;
    return (double)(per * (size_t)nthreads) / best / 1e9;
}

/* xorshift64* — deterministic data for the benches. */
static uint64_t bench_rng = 0x243f6a8885a308d3ull;
static uint64_t bench_u64(void) {
    bench_rng ^= bench_rng >> 12;
    bench_rng ^= bench_rng << 25;
    bench_rng ^= bench_rng >> 27;
    return bench_rng * 0x2545f4914f6cdd1dull;
}
static float bench_normal(void) {
    float s = 0;
    for (int i = 0; i < 4; i++) s += (float)((bench_u64() >> 40) * (1.0 / 16777216.0));
    return (s - 2.0f) * 1.7f;
}

/* Random weights of type t: random bytes, then finite fp16 scales where the block has
 * them (random bytes there would be Inf/NaN and say nothing about speed). */
static inline void bench_fill_weights(enum hmoe_type t, uint8_t *w, size_t bytes) {
    const struct hmoe_type_info *ti = &hmoe_type_info[t];
    if (!ti->is_quantized) {
        for (size_t e = 0; e < bytes / (size_t)ti->type_size; e++) {
            float v = 0.02f * bench_normal();
            if (ti->type_size == 4)
                memcpy(w + 4 * e, &v, 4);
            else {
                uint16_t h = t == HMOE_TYPE_F16 ? hmoe_f32_to_fp16(v) : hmoe_f32_to_bf16(v);
                memcpy(w + 2 * e, &h, 2);
            }
        }
        return;
    }
    for (size_t i = 0; i + 8 <= bytes; i += 8) {
        uint64_t v = bench_u64();
        memcpy(w + i, &v, 8);
    }
    /* fp16 fields per block: K-quants from the table below, every other block type starts with d */
    static const struct {
        enum hmoe_type t;
        int n;
        size_t off[2];
    } fields[] = {
        {HMOE_TYPE_Q4_K, 2, {offsetof(struct hmoe_block_q4_k, d), offsetof(struct hmoe_block_q4_k, dmin)}},
        {HMOE_TYPE_Q5_K, 2, {offsetof(struct hmoe_block_q5_k, d), offsetof(struct hmoe_block_q5_k, dmin)}},
        {HMOE_TYPE_Q6_K, 1, {offsetof(struct hmoe_block_q6_k, d), 0}},
        {HMOE_TYPE_Q2_K, 2, {offsetof(struct hmoe_block_q2_k, d), offsetof(struct hmoe_block_q2_k, dmin)}},
        {HMOE_TYPE_Q3_K, 1, {offsetof(struct hmoe_block_q3_k, d), 0}},
    };
    int n = 1;
    size_t off[2] = {0, 0};
    for (size_t k = 0; k < sizeof fields / sizeof fields[0]; k++)
        if (fields[k].t == t) n = fields[k].n, off[0] = fields[k].off[0], off[1] = fields[k].off[1];
    for (size_t b = 0; b < bytes / (size_t)ti->type_size; b++)
        for (int f = 0; f < n; f++) {
            uint16_t h = hmoe_f32_to_fp16(1e-3f * (1.0f + (float)(bench_u64() & 255) / 64.0f));
            memcpy(w + b * (size_t)ti->type_size + off[f], &h, 2);
        }
}

#endif
