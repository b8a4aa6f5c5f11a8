/* bench_gemv.c — decode (gemv) and prefill (gemm) speed of the CPU kernels per weight
 * type, against the RAM read roofline measured in the same run (bench_util.h).
 *
 * Decode: a stack of Qwen3-30B-A3B expert matrices (2048 columns × 768 rows each, default
 * 2 GiB in total: the dev VM reports a 512 MiB L3) multiplied by one activation row, rows split over
 * T threads in contiguous ranges as the expert path does; reports weight GB/s and % of
 * the read bandwidth of T threads; then the same stack in 384-row work items at random
 * experts (the MoE's gate/up items: many short streams). Prefill: one expert matrix × ntok = 8..512 activation
 * rows (hmoe_cpu_gemm, rows split over threads); reports GFLOP/s (2·rows·cols·ntok / s).
 * Every kernel is first checked against the type table's vec_dot_ref on sample outputs.
 *
 * Build: make bench CUDA=0
 * Run:   ./build/bench/bench_gemv [-t max_threads] [-m MiB] [-r reps] [-y Q4_K,Q6_K,...] [-c 2048|768] [-H] [-o json]
 *        (-H: weights and probe buffers in transparent huge pages, madvise; -c 768: the down
 *        projection's shape, 2048 rows × 768 columns, instead of gate/up's 768 × 2048)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

#include "bench_util.h"

static int json;

/* Compare `n` sample outputs of gemv and gemm (ntok 5) with the reference dot product. */
static int check_type(enum hmoe_type t, int64_t ncols, const uint8_t *w, size_t row_bytes, const void *xq,
                      size_t act_bytes) {
    const struct hmoe_type_info *ti = &hmoe_type_info[t];
    float y[64], yg[5 * 64];
    hmoe_cpu_gemv(t, ncols, w, row_bytes, 0, 64, xq, y);
    hmoe_cpu_gemm(t, ncols, w, row_bytes, 0, 64, xq, act_bytes, 5, yg, 64);
    for (int tok = 0; tok < 5; tok++)
        for (int r = 0; r < 64; r++) {
            float ref = ti->vec_dot_ref(ncols, w + (size_t)r * row_bytes, (const char *)xq + (size_t)tok * act_bytes);
            float got = tok == 0 ? y[r] : yg[tok * 64 + r];
            float got2 = yg[tok * 64 + r];
            if (fabsf(got - ref) > 1e-6f + 1e-5f * fabsf(ref) || fabsf(got2 - ref) > 1e-6f + 1e-5f * fabsf(ref)) {
                fprintf(stderr, "bench_gemv: %s row %d tok %d: got %g / %g, reference %g — kernel is wrong\n", ti->name,
                        r, tok, got, got2, ref);
                return 0;
            }
        }
    return 1;
}

int main(int argc, char **argv) {
    int max_threads = hmoe_cpu_physical_cores(), reps = 5;
    size_t mib = 2048;
    int64_t ncols = 2048;
    const char *types = "Q4_K,Q6_K,Q5_K,Q8_0,Q2_K,Q3_K,IQ2_XXS,IQ2_XS,IQ2_S,IQ3_XXS,IQ3_S,IQ4_XS,IQ4_NL,F16,BF16,F32";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-H"))
            bench_hugepages = 1;
        else if (!strcmp(argv[i], "-t") && i + 1 < argc)
            max_threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-m") && i + 1 < argc)
            mib = (size_t)atol(argv[++i]);
        else if (!strcmp(argv[i], "-r") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-y") && i + 1 < argc)
            types = argv[++i];
        else if (!strcmp(argv[i], "-c") && i + 1 < argc)
            ncols = atol(argv[++i]);
        else if (!strcmp(argv[i], "-o") && i + 1 < argc)
            json = !strcmp(argv[++i], "json");
        else {
            fprintf(stderr,
                    "usage: %s [-t max threads] [-m weight MiB (2048)] [-r reps (5)] [-y TYPE,TYPE] [-c 2048|768] [-H] "
                    "[-o json]\n",
                    argv[0]);
            return 2;
        }
    }
    if (max_threads < 1 || max_threads > 64 || reps < 1 || mib < 16 || (ncols != 2048 && ncols != 768)) {
        fprintf(stderr, "bench_gemv: need 1 <= -t <= 64, -r >= 1, -m >= 16, -c 2048 or 768\n");
        return 2;
    }
    hmoe_cpu_init();
    const char *path = hmoe_cpu_isa_name(); /* avx2 or avx2+vnni tell the AVX2 kernel sets apart */

    if (json)
        printf("{\"path\": \"%s\", \"types\": [", path);
    else
        printf("path %s; roofline = best streaming read (bench_util.h) of the same weight buffer, timed\n"
               "alternately with the kernel so both see the same machine load\n",
               path);

    const int64_t nrows_expert = ncols == 2048 ? 768 : 2048;
    int first = 1;
    char list[256];
    snprintf(list, sizeof list, "%s", types);
    for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
        enum hmoe_type t;
        if (!hmoe_type_from_name(tok, &t) || !hmoe_cpu_supports(t)) {
            fprintf(stderr, "bench_gemv: no kernels for type '%s', skipped\n", tok);
            continue;
        }
        size_t row_bytes = hmoe_row_bytes(t, ncols), act_bytes = hmoe_cpu_act_bytes(t, ncols);
        size_t expert_bytes = row_bytes * (size_t)nrows_expert;
        int64_t nexp = (int64_t)(((size_t)mib << 20) / expert_bytes);
        if (nexp < 1) nexp = 1;
        int64_t nrows = nexp * nrows_expert;
        size_t wbytes = row_bytes * (size_t)nrows;
        uint8_t *w = bench_alloc_touched(wbytes, max_threads);
        const int ntok_max = 512;
        float *x = malloc(sizeof(float) * (size_t)ncols * ntok_max);
        uint8_t *xq = malloc(act_bytes * ntok_max);
        float *y = malloc(sizeof(float) * (size_t)(nrows > nrows_expert * ntok_max ? nrows : nrows_expert * ntok_max));
        if (!w || !x || !xq || !y) return fprintf(stderr, "bench_gemv: out of memory\n"), 1;
        bench_fill_weights(t, w, wbytes);
        for (size_t i = 0; i < (size_t)ncols * ntok_max; i++) x[i] = bench_normal();
        for (int k = 0; k < ntok_max; k++)
            hmoe_cpu_quantize_act(t, x + (size_t)k * ncols, xq + (size_t)k * act_bytes, ncols);
        if (!check_type(t, ncols, w, row_bytes, xq, act_bytes)) return 1;

        if (json)
            printf("%s{\"type\": \"%s\", \"weight_mib\": %.1f, \"gemv\": [", first ? "" : ", ", tok,
                   wbytes / 1048576.0);
        else
            printf("\n%s: decode gemv over %lld experts of %lldx%lld (%.1f MiB)\n", tok, (long long)nexp,
                   (long long)nrows_expert, (long long)ncols, wbytes / 1048576.0);
        first = 0;
        for (int nt = 1; nt <= max_threads; nt++) {
            /* Each rep times the read probe and the kernel back to back (alternating which goes
             * first) and records their ratio; on a shared machine the median of these paired
             * ratios is steadier than a ratio of two independent bests. */
            double best = 1e30, roof = 0, ratio[64];
            int nrep = reps < 64 ? reps : 64;
            for (int r = 0; r < nrep; r++) {
                double probe = 0, dt = 0;
                for (int k = 0; k < 2; k++) {
                    if ((k + r) % 2 == 0) {
                        probe = bench_read_gbs(w, wbytes, nt, 1);
                        continue;
                    }
                    double t0 = hmoe_time_s();
#pragma omp parallel num_threads(nt)
                    {
                        int id = omp_get_thread_num(), n = omp_get_num_threads();
                        int64_t r0 = nrows * id / n, r1 = nrows * (id + 1) / n;
                        hmoe_cpu_gemv(t, ncols, w, row_bytes, r0, r1, xq, y + r0);
                    }
                    dt = hmoe_time_s() - t0;
                }
                roof = HMOE_MAX(roof, probe);
                best = HMOE_MIN(best, dt);
                ratio[r] = (double)wbytes / dt / 1e9 / probe;
            }
            for (int a = 1; a < nrep; a++) /* insertion sort for the median */
                for (int b = a; b > 0 && ratio[b] < ratio[b - 1]; b--) {
                    double tmp = ratio[b];
                    ratio[b] = ratio[b - 1];
                    ratio[b - 1] = tmp;
                }
            double med = ratio[nrep / 2], gbs = (double)wbytes / best / 1e9;
            double gws = (double)ncols * (double)nrows / best / 1e9; /* weights per second */
            if (json)
                printf("%s{\"threads\": %d, \"gbs\": %.2f, \"gweights_per_s\": %.2f, \"roofline_gbs\": %.2f, "
                       "\"pct_best\": %.1f, \"pct_median_paired\": %.1f}",
                       nt > 1 ? ", " : "", nt, gbs, gws, roof, 100 * gbs / roof, 100 * med);
            else
                printf("  gemv %d thr: best %6.2f GB/s (%6.2f Gweights/s), roofline best %6.2f GB/s = %5.1f%%; median "
                       "paired ratio %5.1f%%\n",
                       nt, gbs, gws, roof, 100 * gbs / roof, 100 * med);
        }
        /* Decode as the MoE runs it: work items of half an expert (384 rows, one item of the
         * gate/up job) at random experts of the stack, so every item starts a new stream and
         * ends where the next expert begins (what the look-ahead of tile_impl.h's
         * HMOE_DEFINE_GEMV_STREAM is clamped for). Same probe pairing as above. */
        for (int nt = 1; nt <= max_threads && nexp >= 8; nt++) {
            const int64_t item_rows = nrows_expert / 2, n_items = nrows / item_rows;
            double best = 1e30, roof = 0;
            for (int r = 0; r < reps; r++) {
                roof = HMOE_MAX(roof, bench_read_gbs(w, wbytes, nt, 1));
                double t0 = hmoe_time_s();
#pragma omp parallel for num_threads(nt) schedule(static)
                for (int64_t it = 0; it < n_items; it++) {
                    uint64_t h = (uint64_t)it * 0x9e3779b97f4a7c15ull; /* a fixed shuffle of the items */
                    h ^= h >> 29;
                    const int64_t e = (int64_t)(h % (uint64_t)nexp), half = (int64_t)((h >> 40) & 1);
                    const uint8_t *we = w + (size_t)e * expert_bytes;
                    hmoe_cpu_gemv(t, ncols, we, row_bytes, half * item_rows, (half + 1) * item_rows, xq,
                                  y + (size_t)omp_get_thread_num() * (size_t)nrows_expert + (size_t)(half * item_rows));
                }
                best = HMOE_MIN(best, hmoe_time_s() - t0);
            }
            const double gbs = (double)(n_items * item_rows) * (double)row_bytes / best / 1e9;
            if (!json)
                printf("  gemv %d thr, %lld-row items at random experts: best %6.2f GB/s = %5.1f%% of roofline %6.2f\n",
                       nt, (long long)item_rows, gbs, 100 * gbs / roof, roof);
        }
        /* Compute capacity, independent of RAM and of other processes: one thread over 64 rows
         * (L2-resident), timed with the thread's CPU clock. Decode keeps up with RAM while this
         * exceeds the per-core share of the read bandwidth. */
        {
            double best = 1e30, bestg = 1e30;
            for (int r = 0; r < 30; r++) {
                double t0 = bench_thread_cpu_s();
                for (int k = 0; k < 20; k++) hmoe_cpu_gemv(t, ncols, w, row_bytes, 0, 64, xq, y);
                best = HMOE_MIN(best, (bench_thread_cpu_s() - t0) / 20);
                t0 = bench_thread_cpu_s();
                hmoe_cpu_gemm(t, ncols, w, row_bytes, 0, 64, xq, act_bytes, 64, y, 64);
                bestg = HMOE_MIN(bestg, bench_thread_cpu_s() - t0);
            }
            double gbs = (double)(64 * row_bytes) / best / 1e9, gmacs = 64.0 * 64 * (double)ncols / bestg / 1e9;
            if (json)
                printf("], \"in_cache_gemv_gbs\": %.2f, \"in_cache_gemm64_gmacs\": %.2f", gbs, gmacs);
            else
                printf("  in cache, 1 thread, CPU time: gemv %.2f GB/s of weights; gemm (64 tokens) %.1f GMAC/s\n", gbs,
                       gmacs);
        }
        if (json) printf(", \"gemm\": [");
        /* Prefill: one expert matrix (2048x768), all threads, ntok activation rows. */
        const int ntoks[] = {8, 16, 32, 64, 128, 256, 512};
        for (size_t k = 0; k < sizeof ntoks / sizeof ntoks[0]; k++) {
            int ntok = ntoks[k];
            double best = 1e30;
            for (int r = 0; r < reps; r++) {
                double t0 = hmoe_time_s();
#pragma omp parallel num_threads(max_threads)
                {
                    int id = omp_get_thread_num(), n = omp_get_num_threads();
                    int64_t r0 = nrows_expert * id / n, r1 = nrows_expert * (id + 1) / n;
                    /* each expert of the stack in turn, so the weights come from RAM as in prefill */
                    for (int64_t e = 0; e < HMOE_MIN(nexp, 4); e++)
                        hmoe_cpu_gemm(t, ncols, w + (size_t)e * expert_bytes, row_bytes, r0, r1, xq, act_bytes, ntok,
                                      y + r0, (size_t)nrows_expert);
                }
                double dt = hmoe_time_s() - t0;
                if (dt < best) best = dt;
            }
            double flops = 2.0 * (double)ncols * (double)nrows_expert * ntok * (double)HMOE_MIN(nexp, 4);
            /* weight-decode rate: bytes of weight blocks consumed per second (each expert once) */
            double wgbs = (double)expert_bytes * (double)HMOE_MIN(nexp, 4) / best / 1e9;
            if (json)
                printf("%s{\"ntok\": %d, \"gflops\": %.2f, \"weight_gbs\": %.3f}", k ? ", " : "", ntok,
                       flops / best / 1e9, wgbs);
            else
                printf("  gemm %d thr ntok %3d: %7.2f GFLOP/s, weights decoded at %6.3f GB/s (%.3f ms per expert)\n",
                       max_threads, ntok, flops / best / 1e9, wgbs, best * 1e3 / (double)HMOE_MIN(nexp, 4));
        }
        if (json) printf("]}");
        free(w);
        free(x);
        free(xq);
        free(y);
    }
    if (json) printf("]}\n");
    return 0;
}
