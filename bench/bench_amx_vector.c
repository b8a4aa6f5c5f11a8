/* bench_amx_vector.c — the vector-unit share of the AMX GEMM (src/cpu/amx_gemm_impl.h): the
 * kernel body built a third time with every tile operation a no-op, so what is timed is only
 * the AVX-512 work around the tiles (digit A tiles, activation transposes, scale epilogue,
 * output stores). Runs on any AVX-512 CPU, so that work can be tuned where there is no AMX;
 * compare with bench_cpu_gemm_amx on an AMX machine for the tile unit's share. Correctness
 * first: the same body on the tile emulator must match vec_dot_ref on a sample (its outputs
 * here are meaningless). One thread, one in-cache expert matrix, best of -r calls.
 *
 * Build: make bench CUDA=0
 * Run:   ./build/bench/bench_amx_vector [-r reps]
 */
#pragma GCC target("avx2,fma,f16c,bmi2,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx512vbmi,avx512bitalg")
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "cpu/amx_impl.h"

#define AMX_SUFFIX null
#define TILE_CFG(cfg) ((void)(cfg))
#define TILE_RELEASE() ((void)0)
#define TILE_ZERO(n) ((void)0)
#define TILE_LOAD(t, p, stride) __asm__ volatile("" ::"r"(p))
#define TILE_STORE(t, p, stride) __asm__ volatile("" ::"r"(p) : "memory")
#define TILE_DPBUSD(c, a, b) ((void)0)
#define TILE_DPBSSD(c, a, b) ((void)0)
#include "cpu/amx_gemm_impl.h"

int main(int argc, char **argv) {
    int reps = 200;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-r") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [-r reps]\n", argv[0]);
            return 2;
        }
    }
    (void)bench_read_gbs; /* bench_util.h's probe: not needed here (everything is in cache) */
    hmoe_cpu_init();
    if (hmoe_cpu_path() != HMOE_CPU_AVX512) {
        printf("bench_amx_vector: needs the AVX-512 path (this CPU: %s)\n", hmoe_cpu_path_name(hmoe_cpu_path()));
        return 0;
    }
    const struct {
        enum hmoe_type t;
        hmoe_cpu_gemm_fn null, emu;
    } types[] = {{HMOE_TYPE_Q4_K, hmoe_cpu_gemm_q4_k_null, hmoe_cpu_gemm_q4_k_amxemu},
                 {HMOE_TYPE_Q6_K, hmoe_cpu_gemm_q6_k_null, hmoe_cpu_gemm_q6_k_amxemu}};
    const int64_t rows = 768, cols = 2048, max_tok = 128;
    for (size_t k = 0; k < 2; k++) {
        const enum hmoe_type t = types[k].t;
        const struct hmoe_type_info *ti = &hmoe_type_info[t];
        const size_t rb = hmoe_row_bytes(t, cols), ab = hmoe_cpu_act_bytes(t, cols);
        uint8_t *w = bench_alloc_touched(rb * (size_t)rows, 1), *xq = malloc(ab * (size_t)max_tok);
        float *y = malloc(sizeof(float) * (size_t)(rows * max_tok)), *x = malloc(sizeof(float) * (size_t)cols);
        bench_fill_weights(t, w, rb * (size_t)rows);
        for (int64_t j = 0; j < max_tok; j++) {
            for (int64_t i = 0; i < cols; i++) x[i] = bench_normal();
            hmoe_cpu_quantize_act(t, x, xq + (size_t)j * ab, cols);
        }
        /* correctness of the body (emulated tiles), 16 rows × 17 tokens */
        types[k].emu(cols, w, rb, 16, xq, ab, 17, y, 16);
        for (int64_t j = 0; j < 17; j++)
            for (int64_t r = 0; r < 16; r++) {
                const float ref = ti->vec_dot_ref(cols, w + (size_t)r * rb, xq + (size_t)j * ab), got = y[j * 16 + r];
                if (!(fabsf(got - ref) <= 1e-6f + 1e-5f * fabsf(ref))) {
                    fprintf(stderr, "bench_amx_vector: %s row %lld tok %lld: %g, reference %g — kernel is wrong\n",
                            ti->name, (long long)r, (long long)j, got, ref);
                    return 1;
                }
            }
        for (int64_t ntok = 16; ntok <= max_tok; ntok *= 2) {
            double best = 1e30;
            for (int r = 0; r < reps; r++) {
                const double t0 = hmoe_time_s();
                types[k].null(cols, w, rb, rows, xq, ab, ntok, y, (size_t)rows);
                const double dt = hmoe_time_s() - t0;
                if (dt < best) best = dt;
            }
            printf("%s %lldx%lld ntok %3lld: vector work %.1f us per call = %.0f GMAC/s-equivalent (1 thread, best of %d)\n",
                   ti->name, (long long)rows, (long long)cols, (long long)ntok, best * 1e6,
                   (double)(rows * cols * ntok) / best / 1e9, reps);
        }
        free(w);
        free(xq);
        free(y);
        free(x);
    }
    return 0;
}
