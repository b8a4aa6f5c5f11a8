/* bench_hyb_cpu.c — the CPU expert phase of hybrid decode (src/sched/hybrid_cpu.c) alone, without
 * a GPU: Qwen3-30B-A3B-shaped experts (d 2048, F 768, Q4_K gate/up, Q6_K down: 3.06 MB each) in
 * plain memory (tests/hyb_fake.h), every layer's mailbox published up front so the team runs the
 * layers back to back, m of the k = 8 selected experts missed per layer. First the result of each
 * variant is checked against the type table's scalar references (small case), then each variant's
 * missed-expert bytes / step time is reported in GB/s next to the RAM read bandwidth of the same
 * thread count over the same buffer (bench_util.h), measured in this run. Variants alternate step
 * by step: 1 and 2 work items per thread and phase.
 *
 * Build: make bench CUDA=0    Run: ./build/bench/bench_hyb_cpu [-t threads] [-e experts] [-L layers] [-s steps]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../tests/hyb_fake.h"
#include "bench_util.h"

struct variant {
    const char *name;
    int items;
};
static const struct variant variants[] = {{"work items x1", 1}, {"work items x2", 2}};
#define N_VAR (sizeof variants / sizeof variants[0])

static uint64_t rs = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(void) {
    rs ^= rs << 13, rs ^= rs >> 7, rs ^= rs << 17;
    return (uint32_t)(rs >> 11);
}

/* Publish every layer of step seq with m misses among k = 8 distinct experts. */
static void publish_all(struct hyb_fake *f, uint32_t seq, int m) {
    const int k = f->h.k, E = f->h.E, d = f->h.d;
    static float x[8192];
    for (int l = 0; l < f->h.n_layer; l++) {
        int ids[32], miss[32];
        float w[32];
        for (int j = 0; j < k; j++) {
            bool dup;
            do {
                ids[j] = (int)(rnd() % (uint32_t)E);
                dup = false;
                for (int q = 0; q < j; q++) dup |= ids[q] == ids[j];
            } while (dup);
            w[j] = 1.0f / (float)k;
            miss[j] = j < m;
        }
        for (int i = 0; i < d; i++) x[i] = ((float)(rnd() % 2001) - 1000.0f) / 500.0f;
        hyb_fake_publish(f, l, seq, ids, w, miss, x);
    }
}

static int check(int nt) {
    int bad = 0;
    for (size_t v = 0; v < N_VAR; v++) {
        struct hyb_fake f;
        if (hyb_fake_init(&f, 3, 2048, 768, 16, 8, nt, HMOE_TYPE_Q4_K, HMOE_TYPE_Q6_K, 5)) return 1;
        f.h.cpu_items = variants[v].items;
        float *ref = malloc(2048 * sizeof *ref);
        for (int m = 1; m <= 8; m *= 2) {
            publish_all(&f, (uint32_t)m, m);
            struct hmoe_err err = {0};
            if (hmoe_hyb_cpu_step(&f.h, (uint32_t)m, &err)) return 1;
            for (int l = 0; l < 3; l++) {
                hyb_fake_reference(&f, l, ref);
                double amax = 0, dmax = 0;
                for (int i = 0; i < 2048; i++) amax = fmax(amax, fabs(ref[i]));
                for (int i = 0; i < 2048; i++) dmax = fmax(dmax, fabs((double)f.h.res_host[(size_t)l * 2048 + i] - ref[i]));
                if (!(dmax <= 1e-4 * amax)) {
                    fprintf(stderr, "check: %s, %d misses, layer %d off by %.3g of max\n", variants[v].name, m, l, dmax / amax);
                    bad = 1;
                }
            }
        }
        free(ref);
        hyb_fake_free(&f);
    }
    return bad;
}

int main(int argc, char **argv) {
    int nt = hmoe_cpu_physical_cores(), E = 32, L = 48, steps = 20;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "-t")) nt = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-e")) E = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-L")) L = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-s")) steps = atoi(argv[i + 1]);
        else {
            fprintf(stderr, "usage: bench_hyb_cpu [-t threads] [-e experts per layer] [-L layers] [-s steps]\n");
            return 2;
        }
    }
    if (E < 8 || L < 1 || nt < 1 || steps < 1) {
        fprintf(stderr, "bench_hyb_cpu: needs at least 8 experts (k = 8 distinct per layer), 1 layer, thread, step\n");
        return 2;
    }
    hmoe_cpu_init();
    omp_set_dynamic(0);
    (void)bench_alloc_touched; /* (bench_util.h; the weights here come from hyb_fake.h) */
    if (check(nt)) {
        printf("bench_hyb_cpu: correctness check FAILED\n");
        return 1;
    }
    printf("correctness: %zu variants x 1/2/4/8 misses vs scalar references ... ok\n", N_VAR);
    struct hyb_fake f;
    if (hyb_fake_init(&f, L, 2048, 768, E, 8, nt, HMOE_TYPE_Q4_K, HMOE_TYPE_Q6_K, 11)) {
        fprintf(stderr, "bench_hyb_cpu: out of memory\n");
        return 1;
    }
    const struct hmoe_moe_weights *w0 = &f.h.moe[0];
    const size_t eb = 2 * w0->gate.mat_bytes + w0->down.mat_bytes;
    const size_t total = eb * (size_t)E * (size_t)L;
    const double probe = bench_read_gbs(f.w, total, nt, 3);
    printf("%d threads, %d layers x %d experts x %.2f MB = %.1f GB; RAM read probe (same threads, same buffer) %.1f GB/s\n",
           nt, L, E, (double)eb / 1e6, (double)total / 1e9, probe);
    uint32_t seq = 100;
    for (int m = 1; m <= 8; m *= 2) {
        double t[N_VAR] = {0};
        for (int s = 0; s < steps + 1; s++)
            for (size_t v = 0; v < N_VAR; v++) {
                f.h.cpu_items = variants[v].items;
                publish_all(&f, ++seq, m);
                struct hmoe_err err = {0};
                const double t0 = hmoe_time_s();
                if (hmoe_hyb_cpu_step(&f.h, seq, &err)) {
                    fprintf(stderr, "bench_hyb_cpu: %s\n", err.msg);
                    return 1;
                }
                if (s) t[v] += hmoe_time_s() - t0; /* step 0 warms up */
            }
        for (size_t v = 0; v < N_VAR; v++) {
            const double bytes = (double)eb * m * L * steps, gbps = bytes / t[v] / 1e9;
            printf("m=%d misses/layer  %-14s %7.1f us/layer  %6.1f GB/s  %5.1f %% of probe\n", m, variants[v].name,
                   t[v] / steps / L * 1e6, gbps, 100.0 * gbps / probe);
        }
    }
    hyb_fake_free(&f);
    return 0;
}
