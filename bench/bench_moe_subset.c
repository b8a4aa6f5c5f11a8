/* bench_moe_subset.c — the CPU job of the hybrid prefill split (hmoe_sched_moe_ffn_subset,
 * src/sched/moe_cpu.c) alone, on the MoE weights of a real GGUF (the synthetic Qwen3-30B-A3B file),
 * for a prefill micro-batch: n tokens with a random top-k routing, subsets of n experts per call
 * (a new random subset per layer, as the planner's list differs per layer). First the layouts are
 * checked (a subset's output bit for bit across the work-item layouts, and the outputs of a
 * partition of all experts summed against hmoe_sched_moe_ffn with its own routing, 1e-5 of a row's
 * largest value), then each layout's ms per call, per expert, the slope between the smallest and
 * largest subset (what the planner sees as "CPU ms per expert") and moe_cpu.c's phases
 * are reported, with the read bandwidth of the same threads over the mapped
 * expert weights (the roofline, measured in this run) next to the weight bytes per second.
 * -g sleeps between calls (the team's workers go to sleep as between the split's layers), -S runs
 * memory-streaming threads beside the job (as the copy engine streams during the split).
 *
 * Build: make bench CUDA=0
 * Run:   ./build/bench/bench_moe_subset -m q4.gguf [-t 16] [-p 512] [-e 4,8,16,32] [-L layers]
 *        [-r rounds] [-g gap_us] [-S stream threads] [-V layouts 0,1,2] [-M]
 *        -M: the file read into huge-page RAM (--no-mmap) instead of 4 KiB page-cache pages.
 */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#include "bench_util.h"
#include "hmoe/model.h"
#include "hmoe/sched.h"

/* The work-item layouts compared (hmoe_sched_moe_set_chunks before each call); 0 = the default. */
static const struct layout {
    const char *name;
    int dn_max, dn_pt, gu_pt, gu_max; /* 0: the default's value */
} layouts[] = {
    {"default (gather job, down by expert)", 0, 0, 0, 0},
    {"down whole experts", 2048, 1, 0, 0},
    {"gate/up 4 items/thread", 0, 0, 4, 768},
};
#define N_LAYOUT (int)(sizeof layouts / sizeof layouts[0])

static void use_layout(struct hmoe_sched_moe *s, int v) {
    struct hmoe_sched_moe_chunks c;
    hmoe_sched_moe_chunks_default(&c);
    if (layouts[v].dn_max) c.dn_max_rows = layouts[v].dn_max;
    if (layouts[v].dn_pt) c.dn_per_thread = layouts[v].dn_pt;
    if (layouts[v].gu_pt) c.gu_per_thread = layouts[v].gu_pt;
    if (layouts[v].gu_max) c.gu_max_rows = layouts[v].gu_max;
    struct hmoe_err e = {0};
    if (hmoe_sched_moe_set_chunks(s, &c, &e)) fprintf(stderr, "bench_moe_subset: %s\n", e.msg);
}

/* Random routing: k distinct experts of E per token, weights positive and summing to 1. */
static void route_random(int n_tok, int E, int k, int32_t *sel, float *w) {
    for (int t = 0; t < n_tok; t++) {
        float sum = 0;
        for (int i = 0; i < k; i++) {
            int e;
            bool dup;
            do {
                e = (int)(bench_u64() % (uint64_t)E);
                dup = false;
                for (int j = 0; j < i; j++) dup |= sel[t * k + j] == e;
            } while (dup);
            sel[t * k + i] = e;
            w[t * k + i] = 0.1f + (float)(bench_u64() % 1000) / 1000.0f;
            sum += w[t * k + i];
        }
        for (int i = 0; i < k; i++) w[t * k + i] /= sum;
    }
}

/* A random subset of n of E experts. */
static void pick_subset(uint8_t *mask, int E, int n) {
    memset(mask, 0, (size_t)E);
    for (int c = 0; c < n && c < E;) {
        int e = (int)(bench_u64() % (uint64_t)E);
        if (!mask[e]) mask[e] = 1, c++;
    }
}

/* -S: threads copying 256 MiB buffers until told to stop. */
static atomic_int stream_stop;
static atomic_ullong stream_bytes;
static void *stream_main(void *arg) {
    (void)arg;
    const size_t n = (size_t)256 << 20;
    uint8_t *a = malloc(n), *b = malloc(n);
    if (!a || !b) return NULL;
    memset(a, 1, n), memset(b, 2, n);
    while (!atomic_load(&stream_stop)) {
        for (size_t o = 0; o < n && !atomic_load(&stream_stop); o += (size_t)4 << 20) {
            memcpy(b + o, a + o, (size_t)4 << 20);
            atomic_fetch_add(&stream_bytes, (unsigned long long)4 << 20);
        }
    }
    free(a), free(b);
    return NULL;
}

static int parse_list(const char *s, int *v, int max) {
    int n = 0;
    while (*s && n < max) {
        v[n++] = atoi(s);
        while (*s && *s != ',') s++;
        if (*s == ',') s++;
    }
    return n;
}

int main(int argc, char **argv) {
    const char *file = NULL;
    int nt = 16, n_tok = 512, n_layer_max = 0, rounds = 2, gap_us = 0, n_stream = 0;
    bool no_mmap = false;
    int sizes[8] = {4, 8, 16, 32}, n_sizes = 4, vlist[8] = {0, 1, 2}, n_v = N_LAYOUT;
    for (int i = 1; i < argc; i += 2) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "";
        if (!strcmp(a, "-M")) no_mmap = true, i--;
        else if (!strcmp(a, "-m")) file = v;
        else if (!strcmp(a, "-t")) nt = atoi(v);
        else if (!strcmp(a, "-p")) n_tok = atoi(v);
        else if (!strcmp(a, "-e")) n_sizes = parse_list(v, sizes, 8);
        else if (!strcmp(a, "-L")) n_layer_max = atoi(v);
        else if (!strcmp(a, "-r")) rounds = atoi(v);
        else if (!strcmp(a, "-g")) gap_us = atoi(v);
        else if (!strcmp(a, "-S")) n_stream = atoi(v);
        else if (!strcmp(a, "-V")) n_v = parse_list(v, vlist, 8);
        else {
            fprintf(stderr, "bench_moe_subset: unknown flag %s\n", a);
            return 2;
        }
    }
    for (int i = 0; i < n_v; i++)
        if (vlist[i] < 0 || vlist[i] >= N_LAYOUT) {
            fprintf(stderr, "bench_moe_subset: -V takes layouts 0..%d\n", N_LAYOUT - 1);
            return 2;
        }
    if (!file || nt < 1 || n_tok < 2 || rounds < 1 || n_sizes < 1) {
        fprintf(stderr, "usage: bench_moe_subset -m FILE.gguf [-t threads] [-p tokens] [-e 4,8,16,32] [-L layers] "
                        "[-r rounds] [-g gap_us] [-S stream threads] [-V 0,1,2] [-M]\n");
        return 2;
    }
    (void)bench_alloc_touched;
    hmoe_cpu_init();
    struct hmoe_err err = {0};
    struct hmoe_model *m = NULL;
    struct hmoe_model_params mp = {.no_mmap = no_mmap};
    if (hmoe_model_load(file, &mp, &m, &err)) {
        fprintf(stderr, "bench_moe_subset: %s\n", err.msg);
        return 1;
    }
    int L = m->cfg.n_layer;
    if (n_layer_max > 0 && n_layer_max < L) L = n_layer_max;
    struct hmoe_moe_weights *mw = malloc((size_t)L * sizeof *mw);
    for (int l = 0; l < L; l++) mw[l] = m->w.layers[l].moe;
    const int E = (int)mw[0].router.n_out, k = mw[0].n_expert_used;
    const int64_t d = mw[0].gate.n_in, F = mw[0].gate.n_out;
    const size_t expert_bytes = mw[0].gate.mat_bytes + mw[0].up.mat_bytes + mw[0].down.mat_bytes;
    struct hmoe_sched_moe *s = NULL;
    if (hmoe_sched_moe_init(mw, L, n_tok, nt, &s, &err)) {
        fprintf(stderr, "bench_moe_subset: %s\n", err.msg);
        return 1;
    }
    const size_t nd = (size_t)n_tok * (size_t)d, nk = (size_t)n_tok * (size_t)k;
    float *x = malloc(nd * sizeof *x), *out = malloc(nd * sizeof *out), *ref = malloc(nd * sizeof *ref);
    float *sum = calloc(nd, sizeof *sum), *w = malloc(nk * sizeof *w);
    int32_t *sel = malloc(nk * sizeof *sel);
    uint8_t *mask = malloc((size_t)E);
    if (!x || !out || !ref || !sum || !w || !sel || !mask) return 1;
    for (size_t i = 0; i < nd; i++) x[i] = bench_normal();
    printf("bench_moe_subset: %s, %d layers, E %d, k %d, d %lld, F %lld, %s/%s/%s, %.2f MB per expert; %d tokens, "
           "%d threads, gap %d us, %d stream threads, %s; cpu %s, %s\n",
           file, L, E, k, (long long)d, (long long)F, hmoe_type_info[mw[0].gate.type].name,
           hmoe_type_info[mw[0].up.type].name, hmoe_type_info[mw[0].down.type].name, (double)expert_bytes / 1e6, n_tok,
           nt, gap_us, n_stream, no_mmap ? "huge-page RAM copy" : "mapped file", hmoe_cpu_path_name(hmoe_cpu_path()), hmoe_cpu_amx_status());

    /* Touch every expert weight once (faults the mapping in, like the split's pinned pages) and
     * measure the read roofline over them: gate tensors of all layers, each read as one buffer. */
    double t0 = hmoe_time_s(), gbs = 0;
    for (int l = 0; l < L; l++) {
        const struct hmoe_mat *ts[3] = {&mw[l].gate, &mw[l].up, &mw[l].down};
        for (int j = 0; j < 3; j++) {
            double g = bench_read_gbs(ts[j]->data, ts[j]->mat_bytes * (size_t)E, nt, l == 0 && j == 0 ? 3 : 1);
            if (l == 0 && j == 0) gbs = bench_read_gbs(ts[j]->data, ts[j]->mat_bytes * (size_t)E, nt, 3);
            (void)g;
        }
    }
    printf("touched %d layers' experts in %.1f s; read roofline %.1f GB/s (%d threads, layer 0 gate tensor)\n", L,
           hmoe_time_s() - t0, gbs, nt);

    /* Correctness: layer 0, the full FFN's own routing; the partition into 16-expert subsets sums
     * to it, and every layout gives the same bits for one subset. */
    int bad = 0;
    use_layout(s, 0);
    if (hmoe_sched_moe_ffn(s, &mw[0], x, n_tok, ref, &err)) {
        fprintf(stderr, "bench_moe_subset: %s\n", err.msg);
        return 1;
    }
    memcpy(sel, hmoe_sched_moe_last_selection(s), nk * sizeof *sel);
    memcpy(w, hmoe_sched_moe_last_weights(s), nk * sizeof *w);
    for (int p = 0; p < (E + 15) / 16; p++) {
        for (int e = 0; e < E; e++) mask[e] = (uint8_t)(e / 16 == p);
        if (hmoe_sched_moe_ffn_subset(s, &mw[0], x, n_tok, sel, w, mask, out, &err)) return 1;
        for (size_t i = 0; i < nd; i++) sum[i] += out[i];
    }
    double worst = 0;
    for (int t = 0; t < n_tok; t++) {
        double mx = 1e-6, df = 0;
        for (int64_t j = 0; j < d; j++) {
            mx = fmax(mx, fabs(ref[(size_t)t * d + j]));
            df = fmax(df, fabs((double)sum[(size_t)t * d + j] - ref[(size_t)t * d + j]));
        }
        worst = fmax(worst, df / mx);
    }
    bad += worst > 1e-5;
    printf("check: 16-expert subsets summed vs full FFN: worst row rel diff %.3g (limit 1e-5) %s\n", worst,
           worst > 1e-5 ? "FAIL" : "ok");
    pick_subset(mask, E, 16);
    for (int i = 0; i < n_v; i++) {
        use_layout(s, vlist[i]);
        if (hmoe_sched_moe_ffn_subset(s, &mw[0], x, n_tok, sel, w, mask, i ? out : ref, &err)) return 1;
        if (i == 0) continue;
        long mis = -1;
        for (size_t j = 0; j < nd && mis < 0; j++)
            if (memcmp(&out[j], &ref[j], sizeof(float))) mis = (long)j;
        bad += mis >= 0;
        printf("check: layout %d vs %d, 16-expert subset: %s (first mismatch %ld)\n", vlist[i], vlist[0],
               mis >= 0 ? "FAIL" : "same bits", mis);
    }
    if (bad) {
        printf("bench_moe_subset: correctness check failed, no timing\n");
        return 1;
    }

    pthread_t st[64];
    n_stream = n_stream > 64 ? 64 : n_stream;
    for (int i = 0; i < n_stream; i++) pthread_create(&st[i], NULL, stream_main, NULL);
    if (n_stream) usleep(200000);

    /* Timing: per layout and subset size, `rounds` passes over the layers, a fresh random routing
     * per pass and subset per call; layouts interleaved per pass. */
    double ms[8][8] = {{0}}, act[8][8] = {{0}};
    struct hmoe_sched_moe_times ph[8][8];
    memset(ph, 0, sizeof ph);
    uint64_t calls[8][8] = {{0}};
    const double ts0 = hmoe_time_s();
    const unsigned long long sb0 = atomic_load(&stream_bytes);
    for (int r = 0; r < rounds + 1; r++) /* the first pass warms up and is not counted */
        for (int si = 0; si < n_sizes; si++) {
            route_random(n_tok, E, k, sel, w);
            for (int vi = 0; vi < n_v; vi++) {
                use_layout(s, vlist[vi]);
                struct hmoe_sched_moe_times tk;
                hmoe_sched_moe_times_take(s, &tk);
                double tsum = 0;
                for (int l = 0; l < L; l++) {
                    pick_subset(mask, E, sizes[si]);
                    if (gap_us) usleep((useconds_t)gap_us);
                    double a = hmoe_time_s();
                    if (hmoe_sched_moe_ffn_subset(s, &mw[l], x, n_tok, sel, w, mask, out, &err)) {
                        fprintf(stderr, "bench_moe_subset: %s\n", err.msg);
                        return 1;
                    }
                    tsum += hmoe_time_s() - a;
                }
                hmoe_sched_moe_times_take(s, &tk);
                if (r == 0) continue;
                ms[vi][si] += tsum * 1e3;
                calls[vi][si] += (uint64_t)L;
                act[vi][si] += (double)tk.experts;
                ph[vi][si].calls += tk.calls, ph[vi][si].experts += tk.experts, ph[vi][si].pairs += tk.pairs;
                for (int p = 0; p < HMOE_MOE_PH_COUNT; p++) ph[vi][si].ms[p] += tk.ms[p];
            }
        }
    const double tstream = hmoe_time_s() - ts0;
    atomic_store(&stream_stop, 1);
    for (int i = 0; i < n_stream; i++) pthread_join(st[i], NULL);
    if (n_stream)
        printf("stream threads: %.1f GB/s during the timing\n",
               (double)(atomic_load(&stream_bytes) - sb0) * 2 / tstream / 1e9); /* read + write */

    printf("| layout | experts | pairs/call | ms/call | ms/expert | weights GB/s | %% of roofline |");
    for (int p = 0; p < HMOE_MOE_PH_COUNT - 1; p++) printf(" %s ms |", hmoe_sched_moe_phase_name(p));
    printf("\n|---|---|---|---|---|---|---|");
    for (int p = 0; p < HMOE_MOE_PH_COUNT - 1; p++) printf("---|");
    printf("\n");
    for (int vi = 0; vi < n_v; vi++) {
        for (int si = 0; si < n_sizes; si++) {
            const double c = (double)calls[vi][si], per = ms[vi][si] / c, ne = act[vi][si] / c;
            const double g = ne * (double)expert_bytes / (per * 1e-3) / 1e9;
            printf("| %d %s | %d | %.0f | %.3f | %.3f | %.1f | %.0f |", vlist[vi], layouts[vlist[vi]].name, sizes[si],
                   (double)ph[vi][si].pairs / c, per, per / ne, g, 100.0 * g / gbs);
            for (int p = 0; p < HMOE_MOE_PH_COUNT - 1; p++) printf(" %.3f |", ph[vi][si].ms[p] / c);
            printf("\n");
        }
        if (n_sizes >= 2) {
            const int a = 0, b = n_sizes - 1;
            const double ta = ms[vi][a] / (double)calls[vi][a], tb = ms[vi][b] / (double)calls[vi][b];
            const double ea = act[vi][a] / (double)calls[vi][a], eb = act[vi][b] / (double)calls[vi][b];
            const double slope = (tb - ta) / (eb - ea);
            printf("layout %d: slope %.3f ms per expert, intercept %.3f ms per call (subsets %d..%d)\n", vlist[vi], slope,
                   ta - slope * ea, sizes[a], sizes[b]);
        }
    }
    hmoe_sched_moe_free(s);
    hmoe_model_free(m);
    free(mw), free(x), free(out), free(ref), free(sum), free(w), free(sel), free(mask);
    return 0;
}
