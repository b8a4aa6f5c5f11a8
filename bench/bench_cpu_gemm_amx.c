/* bench_cpu_gemm_amx.c — batched expert GEMM on the CPU: AMX int8 (src/cpu/amx_gemm_impl.h)
 * against the AVX-512 VNNI kernels, for the Q4_K_M expert types and shapes of Qwen3-30B-A3B
 * (gate/up 768 rows × 2048 columns, down 2048 × 768; Q4_K and Q6_K), against the RAM read
 * roofline of the same thread count measured in the same run (bench_util.h).
 *
 * A stack of expert matrices (default 512 MiB per type, beyond the L3) is walked in work
 * items of one expert's row chunk (the whole matrix, or 32 rows as moe_cpu.c's down items)
 * times ntok activation rows, by 1 and T threads for ~0.3 s each; reports weight GB/s
 * (each item streams its rows once), GMAC/s (rows·cols·ntok per second) and the ratio to
 * the read probe. Both kernels are first checked against vec_dot_ref on one expert.
 *
 * Build: make bench CUDA=0   (AMX rows need a CPU that passes the run-time AMX check)
 * Run:   ./build/bench/bench_cpu_gemm_amx [-t threads] [-m MiB] [-n 8,16,32,64,128] [-s seconds]
 *                                      [-x shape,..] [-R rounds] [-e]
 *        (-e: the tile emulator instead of AMX, to check this program on a machine without AMX; slow;
 *         -R: rounds, AMX runs repeated, the median reported;
 *         -x: indexes into shapes[] below)
 */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "cpu/amx_impl.h"
#include "cpu/cpu_impl.h"

struct shape {
    enum hmoe_type type;
    int64_t rows, cols, chunk; /* chunk: rows per work item (= rows: whole matrix) */
};

/* One expert (rows × cols) × ntok rows through hmoe_cpu_gemm vs vec_dot_ref on a sample. */
static int check(const struct shape *s, const uint8_t *w, size_t row_bytes, const uint8_t *xq, size_t act_bytes,
                 int64_t ntok, const char *what) {
    const struct hmoe_type_info *ti = &hmoe_type_info[s->type];
    float *y = malloc(sizeof(float) * (size_t)(s->rows * ntok));
    hmoe_cpu_gemm(s->type, s->cols, w, row_bytes, 0, s->rows, xq, act_bytes, ntok, y, (size_t)s->rows);
    int ok = 1;
    for (int64_t t = 0; t < ntok && ok; t += 7)
        for (int64_t r = 0; r < s->rows && ok; r += 13) {
            const float ref = ti->vec_dot_ref(s->cols, w + (size_t)r * row_bytes, xq + (size_t)t * act_bytes);
            const float got = y[t * s->rows + r];
            if (!(fabsf(got - ref) <= 1e-6f + 1e-5f * fabsf(ref))) {
                fprintf(stderr, "bench_cpu_gemm_amx: %s %s row %lld tok %lld: got %g, reference %g — kernel is wrong\n",
                        what, ti->name, (long long)r, (long long)t, got, ref);
                ok = 0;
            }
        }
    free(y);
    return ok;
}

/* Items (expert k % n_exp, row chunk) for ~`secs` on nt threads; returns items done, time in *dt. */
static int64_t run(const struct shape *s, const uint8_t *w, size_t mat_bytes, size_t row_bytes, int64_t n_exp,
                   const uint8_t *xq, size_t act_bytes, int64_t ntok, int nt, double secs, double *dt) {
    const int64_t per = (s->rows + s->chunk - 1) / s->chunk;
    atomic_llong next = 0;
    const double t0 = hmoe_time_s(), deadline = t0 + secs;
#pragma omp parallel num_threads(nt)
    {
        float *y = malloc(sizeof(float) * (size_t)(s->chunk * ntok));
        for (;;) {
            const long long k = atomic_fetch_add(&next, 1);
            if (k % 64 == 0 && hmoe_time_s() > deadline) break;
            const int64_t e = (k / per) % n_exp, r0 = (k % per) * s->chunk;
            const int64_t r1 = r0 + s->chunk < s->rows ? r0 + s->chunk : s->rows;
            hmoe_cpu_gemm(s->type, s->cols, w + (size_t)e * mat_bytes, row_bytes, r0, r1, xq, act_bytes, ntok, y,
                          (size_t)s->chunk);
        }
        free(y);
    }
    *dt = hmoe_time_s() - t0;
    /* items finished = items claimed minus the one each thread claimed and dropped */
    return (int64_t)atomic_load(&next) - nt;
}

int main(int argc, char **argv) {
    int max_threads = hmoe_cpu_physical_cores();
    size_t mib = 512;
    double secs = 0.3;
    const char *ntoks = "8,16,32,64,128";
    const char *shape_list = "0,1,2,3,4,5";
    int rounds = 1;
    enum hmoe_cpu_amx_mode on = HMOE_CPU_AMX_ON;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-e"))
            on = HMOE_CPU_AMX_EMULATED;
        else if (!strcmp(argv[i], "-t") && i + 1 < argc)
            max_threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-m") && i + 1 < argc)
            mib = (size_t)atol(argv[++i]);
        else if (!strcmp(argv[i], "-n") && i + 1 < argc)
            ntoks = argv[++i];
        else if (!strcmp(argv[i], "-s") && i + 1 < argc)
            secs = atof(argv[++i]);
        else if (!strcmp(argv[i], "-x") && i + 1 < argc)
            shape_list = argv[++i];
        else if (!strcmp(argv[i], "-R") && i + 1 < argc)
            rounds = atoi(argv[++i]) < 1 ? 1 : atoi(argv[i]);
        else {
            fprintf(stderr, "usage: %s [-t threads] [-m MiB per type] [-n ntok,..] [-s seconds] [-x shape,..] [-R rounds] [-e]\n", argv[0]);
            return 2;
        }
    }
    hmoe_cpu_init();
    const enum hmoe_cpu_amx_mode amx = hmoe_cpu_force_amx(on, 1);
    printf("bench_cpu_gemm_amx: path %s, %s, up to %d threads, %zu MiB of experts per type\n",
           hmoe_cpu_path_name(hmoe_cpu_path()), hmoe_cpu_amx_status(), max_threads, mib);
    int thread_counts[2] = {1, max_threads};
    const int n_tc = max_threads > 1 ? 2 : 1;

    const struct shape shapes[] = {{HMOE_TYPE_Q4_K, 768, 2048, 768},
                                   {HMOE_TYPE_Q4_K, 2048, 768, 2048},
                                   {HMOE_TYPE_Q4_K, 2048, 768, 32},
                                   {HMOE_TYPE_Q6_K, 2048, 768, 2048},
                                   {HMOE_TYPE_Q6_K, 2048, 768, 32},
                                   {HMOE_TYPE_Q6_K, 768, 2048, 768}};
    /* activations: 128 rows of 2048 quantized for Q8_K (both types' partner) */
    const int64_t max_tok = 128, max_cols = 2048;
    uint8_t *xq[2];
    size_t act_bytes[2];
    float *x = malloc(sizeof(float) * (size_t)max_cols);
    for (int c = 0; c < 2; c++) {
        const int64_t cols = c ? 2048 : 768;
        act_bytes[c] = hmoe_cpu_act_bytes(HMOE_TYPE_Q4_K, cols);
        xq[c] = malloc(act_bytes[c] * (size_t)max_tok);
        for (int64_t t = 0; t < max_tok; t++) {
            for (int64_t i = 0; i < cols; i++) x[i] = bench_normal();
            hmoe_cpu_quantize_act(HMOE_TYPE_Q4_K, x, xq[c] + (size_t)t * act_bytes[c], cols);
        }
    }
    /* one weight stack per type; both shapes of a type have the same matrix size */
    const size_t total = mib << 20;
    uint8_t *stack[2];
    for (int k = 0; k < 2; k++) {
        const enum hmoe_type t = k ? HMOE_TYPE_Q6_K : HMOE_TYPE_Q4_K;
        const size_t mat = hmoe_row_bytes(t, 2048) * 768;
        stack[k] = bench_alloc_touched(total, max_threads);
        if (!stack[k]) {
            fprintf(stderr, "bench_cpu_gemm_amx: out of memory for %zu MiB\n", mib);
            return 1;
        }
        bench_fill_weights(t, stack[k], mat);
        for (size_t o = mat; o + mat <= total; o += mat) memcpy(stack[k] + o, stack[k], mat);
    }
    double probe[2];
    for (int i = 0; i < n_tc; i++) {
        probe[i] = bench_read_gbs(stack[0], total, thread_counts[i], 3);
        printf("read probe, %d thread(s): %.1f GB/s\n", thread_counts[i], probe[i]);
    }

    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        const struct shape *s = &shapes[si];
        int want = 0;
        for (const char *p = shape_list; p && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
            if ((size_t)atoi(p) == si) want = 1;
        if (!want) continue;
        const int k = s->type == HMOE_TYPE_Q6_K;
        const size_t row_bytes = hmoe_row_bytes(s->type, s->cols), mat = row_bytes * (size_t)s->rows;
        const int64_t n_exp = (int64_t)(total / mat);
        const int c = s->cols == 2048;
        /* correctness first, both kernels */
        hmoe_cpu_force_amx(HMOE_CPU_AMX_OFF, 0);
        if (!check(s, stack[k], row_bytes, xq[c], act_bytes[c], 37, "vnni")) return 1;
        if (amx == on) {
            hmoe_cpu_force_amx(on, 1);
            if (!check(s, stack[k], row_bytes, xq[c], act_bytes[c], 37, "amx")) return 1;
        }
        for (const char *p = ntoks; p && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL) {
            const int64_t ntok = atoi(p);
            if (ntok < 1 || ntok > max_tok) continue;
            for (int ti = 0; ti < n_tc; ti++) {
                const int nt = thread_counts[ti];
                double dt, rows;
                hmoe_cpu_force_amx(HMOE_CPU_AMX_OFF, 1);
                rows = (double)run(s, stack[k], mat, row_bytes, n_exp, xq[c], act_bytes[c], ntok, nt, secs, &dt) *
                       (double)s->chunk; /* chunks divide the rows here */
                const double vnni = rows * (double)s->cols * (double)ntok / dt / 1e9;
                printf("%s %lldx%lld items of %4lld rows ntok %3lld t%-2d GMAC/s: vnni %6.1f", hmoe_type_info[s->type].name,
                       (long long)s->rows, (long long)s->cols, (long long)s->chunk, (long long)ntok, nt, vnni);
                double gbs0 = 0, g[16];
                const int nr = rounds < 16 ? rounds : 16;
                hmoe_cpu_force_amx(on, 1);
                for (int r = 0; r < nr && amx == on; r++) {
                    rows = (double)run(s, stack[k], mat, row_bytes, n_exp, xq[c], act_bytes[c], ntok, nt, secs, &dt) *
                           (double)s->chunk;
                    g[r] = rows * (double)s->cols * (double)ntok / dt / 1e9;
                    if (r == 0) gbs0 = rows * (double)row_bytes / dt / 1e9;
                }
                if (amx == on) {
                    for (int a = 1; a < nr; a++) /* insertion sort of the rounds, then the median */
                        for (int b = a; b > 0 && g[b] < g[b - 1]; b--) {
                            const double tmp = g[b];
                            g[b] = g[b - 1];
                            g[b - 1] = tmp;
                        }
                    printf(" | amx %6.1f", g[nr / 2]);
                }
                printf("  (amx: %.1f GB/s = %.2f of read)\n", gbs0, gbs0 / probe[ti]);
                fflush(stdout);
            }
        }
    }
    hmoe_cpu_force_amx(HMOE_CPU_AMX_OFF, 0);
    free(x);
    return 0;
}
