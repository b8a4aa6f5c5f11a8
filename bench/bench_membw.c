/* bench_membw.c — RAM read bandwidth with 1..N OpenMP threads: the roofline for the
 * decode kernels (a token's expert weights are read once from RAM, so gemv can at best
 * run at this speed). Streams a buffer much larger than the last-level cache (default
 * 2 GiB; the dev VM reports a 512 MiB L3, and a 256 MiB buffer reads at L3 speed) with
 * AVX-512 (or AVX2) loads on the path hmoe_cpu_init() picks; reports GB/s (1e9 B/s). On the
 * AVX-512 path a second table reads the same buffer with a page look-ahead prefetch, as the
 * decode kernels stream (lines printed after the plain ones, marked "page-ahead").
 *
 * Build: make bench CUDA=0      Run: ./build/bench/bench_membw [-m MiB] [-t N] [-r reps] [-o json]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"

/* The same read with one prefetch to the first line of each 4 KiB page PAGE_AHEAD bytes
 * ahead, as the decode kernels do (tile_impl.h hmoe_page_touch): the hardware prefetchers
 * stop at page boundaries, so plain loads over 4 KiB pages under-read what RAM gives. */
#define PAGE_AHEAD (48 * 1024)
__attribute__((target("avx512f"))) static uint64_t read_avx512_page_ahead(const uint8_t *p, size_t n) {
    __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t i = 0; i + 256 <= n; i += 256) {
        if ((i & 4095) == 0 && i + PAGE_AHEAD < n) __builtin_prefetch(p + i + PAGE_AHEAD, 0, 3);
        a0 = _mm512_add_epi64(a0, _mm512_load_si512((const void *)(p + i)));
        a1 = _mm512_add_epi64(a1, _mm512_load_si512((const void *)(p + i + 64)));
        a2 = _mm512_add_epi64(a2, _mm512_load_si512((const void *)(p + i + 128)));
        a3 = _mm512_add_epi64(a3, _mm512_load_si512((const void *)(p + i + 192)));
    }
    a0 = _mm512_add_epi64(_mm512_add_epi64(a0, a1), _mm512_add_epi64(a2, a3));
    return (uint64_t)_mm512_reduce_add_epi64(a0);
}

/* bench_read_gbs with the page look-ahead (AVX-512 path only). */
static double read_gbs_page_ahead(const uint8_t *buf, size_t n, int nthreads, int reps) {
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        double t0 = hmoe_time_s();
        uint64_t total = 0;
#pragma omp parallel num_threads(nthreads) reduction(+ : total)
        {
            int nt = omp_get_num_threads(), id = omp_get_thread_num();
            size_t per = (n / (size_t)nt) & ~(size_t)4095;
            total += read_avx512_page_ahead(buf + per * (size_t)id, per);
        }
        double dt = hmoe_time_s() - t0;
        bench_sink += total;
        if (dt < best) best = dt;
    }
    size_t per = (n / (size_t)nthreads) & ~(size_t)4095;
    return (double)(per * (size_t)nthreads) / best / 1e9;
}

int main(int argc, char **argv) {
    size_t mib = 2048;
    int max_threads = hmoe_cpu_physical_cores(), reps = 5, json = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-H"))
            bench_hugepages = 1;
        else if (!strcmp(argv[i], "-m") && i + 1 < argc)
            mib = (size_t)atol(argv[++i]);
        else if (!strcmp(argv[i], "-t") && i + 1 < argc)
            max_threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-r") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-o") && i + 1 < argc)
            json = !strcmp(argv[++i], "json");
        else {
            fprintf(stderr,
                    "usage: %s [-m MiB (2048)] [-t max threads (physical cores)] [-r reps (5)] [-H] [-o json]\n",
                    argv[0]);
            return 2;
        }
    }
    if (mib < 64 || max_threads < 1 || reps < 1) {
        fprintf(stderr, "bench_membw: need -m >= 64, -t >= 1, -r >= 1\n");
        return 2;
    }
    hmoe_cpu_init();
    size_t n = mib << 20;
    uint8_t *buf = bench_alloc_touched(n, max_threads);
    if (!buf) {
        fprintf(stderr, "bench_membw: cannot allocate %zu MiB\n", mib);
        return 1;
    }
    /* Sanity check before timing: the probe must see every byte it claims to read. */
    uint64_t want = 0;
    for (size_t i = 0; i < 1 << 20; i += 8) {
        uint64_t v;
        memcpy(&v, buf + i, 8);
        want += v;
    }
    uint64_t got = hmoe_cpu_path() == HMOE_CPU_AVX512 ? bench_read_avx512(buf, 1 << 20)
                   : hmoe_cpu_path() == HMOE_CPU_AVX2 ? bench_read_avx2(buf, 1 << 20)
                                                      : want;
    if (got != want) {
        fprintf(stderr, "bench_membw: probe sum mismatch (%llu vs %llu)\n", (unsigned long long)got,
                (unsigned long long)want);
        return 1;
    }
    if (json)
        printf("{\"path\": \"%s\", \"buffer_mib\": %zu, \"read_gbs\": [", hmoe_cpu_path_name(hmoe_cpu_path()), mib);
    else
        printf("read bandwidth, %s loads, %zu MiB buffer, best of %d\n", hmoe_cpu_path_name(hmoe_cpu_path()), mib,
               reps);
    for (int t = 1; t <= max_threads; t++) {
        double gbs = bench_read_gbs(buf, n, t, reps);
        if (json)
            printf("%s{\"threads\": %d, \"gbs\": %.2f}", t > 1 ? ", " : "", t, gbs);
        else
            printf("  %2d thread%s  %7.2f GB/s\n", t, t > 1 ? "s" : " ", gbs);
    }
    if (hmoe_cpu_path() == HMOE_CPU_AVX512) {
        if (json)
            printf("], \"read_page_ahead_gbs\": [");
        else
            printf("the same with one prefetch per 4 KiB page %d KiB ahead (as the decode kernels)\n", PAGE_AHEAD / 1024);
        for (int t = 1; t <= max_threads; t++) {
            double gbs = read_gbs_page_ahead(buf, n, t, reps);
            if (json)
                printf("%s{\"threads\": %d, \"gbs\": %.2f}", t > 1 ? ", " : "", t, gbs);
            else
                printf("  %2d thread%s  %7.2f GB/s  page-ahead\n", t, t > 1 ? "s" : " ", gbs);
        }
    }
    if (json) printf("]}\n");
    free(buf);
    return 0;
}
