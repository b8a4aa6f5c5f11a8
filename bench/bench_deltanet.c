/* bench_deltanet.c — the Gated DeltaNet recurrence of Qwen3.6-35B-A3B (qwen35moe.md §5.2-§5.3:
 * 32 value heads of 128 x 128 f32 state, 30 recurrent layers) through deltanet.c alone.
 * Checks first: the chunked form (§5.3) equals the token-by-token recurrence on random
 * inputs (outputs and final state). Then:
 *   decode  one token through all 30 layers' states (63 MiB read and written, like a real
 *           decode step): state GB/s against the RAM read bandwidth measured in this run;
 *   prefill 512 tokens per layer, recurrence vs chunked: tokens/s and GFLOP/s against an
 *           FMA-throughput peak measured in this run (the recurrence is ~4 dim^2 FMA per
 *           token and head; the chunked form does about as much, in small matrix products).
 *
 * Build: make bench CUDA=0
 * Run:   ./build/bench/bench_deltanet [-t threads] [-r reps]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "model/deltanet_impl.h"

enum { DIM = 128, HV = 32, HK = 16, LAYERS = 30, NTOK = 512 };

/* Per-token inputs laid out as the model has them: q, k (key heads), v (value heads). */
struct inputs {
    size_t stride;     /* floats per token: 2*HK*DIM + HV*DIM */
    float *qkv;        /* [NTOK][stride] */
    float *gb;         /* [NTOK][2*HV]: log decay, then beta */
};

static void make_inputs(struct inputs *in) {
    in->stride = (size_t)(2 * HK + HV) * DIM;
    in->qkv = malloc(sizeof(float) * NTOK * in->stride);
    in->gb = malloc(sizeof(float) * NTOK * 2 * HV);
    for (size_t i = 0; i < NTOK * in->stride; i++) in->qkv[i] = bench_normal();
    for (int t = 0; t < NTOK; t++) {
        for (int g = 0; g < 2 * HK; g++)
            hmoe_gdn_l2norm(in->qkv + t * in->stride + g * DIM, DIM, 1e-6f, g < HK ? 1.0f / sqrtf(DIM) : 1.0f);
        for (int h = 0; h < HV; h++) {
            in->gb[t * 2 * HV + h] = -0.05f * fabsf(bench_normal());
            in->gb[t * 2 * HV + HV + h] = 0.5f + 0.4f * tanhf(bench_normal());
        }
    }
}

/* One layer: every value head over n tokens (starting at token t0) with the given form. */
static void layer(float *S, const struct inputs *in, int t0, int n, float *o, bool chunked, float *scratch,
                  size_t scratch_floats, int nt) {
#pragma omp parallel for num_threads(nt) schedule(dynamic, 1)
    for (int h = 0; h < HV; h++) {
        const int g = h % HK;
        const float *base = in->qkv + (size_t)t0 * in->stride;
        const float *q = base + g * DIM, *k = base + (HK + g) * DIM, *v = base + (2 * HK + h) * DIM;
        const float *gd = in->gb + (size_t)t0 * 2 * HV + h, *bt = gd + HV;
        float *Sh = S + (size_t)h * DIM * DIM, *oh = o + h * DIM;
        if (chunked)
            hmoe_gdn_chunked(Sh, DIM, n, q, k, in->stride, v, in->stride, gd, bt, 2 * HV, oh, HV * DIM,
                             scratch + (size_t)omp_get_thread_num() * scratch_floats);
        else
            hmoe_gdn_recurrent(Sh, DIM, n, q, k, in->stride, v, in->stride, gd, bt, 2 * HV, oh, HV * DIM);
    }
}

/* FMA throughput of one thread (GFLOP/s, 2 flops per FMA lane), the compute roofline:
 * 12 independent chains in registers cover the FMA latency on two ports. */
__attribute__((target("avx512f"))) static double fma_peak_avx512(void) {
    const __m512 b = _mm512_set1_ps(0.999f), c = _mm512_set1_ps(1e-3f);
    __m512 a0 = _mm512_set1_ps(1), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0, a8 = a0, a9 = a0,
           a10 = a0, a11 = a0;
    const long iters = 20000000;
    double t0 = hmoe_time_s();
    for (long i = 0; i < iters; i++) {
        a0 = _mm512_fmadd_ps(a0, b, c), a1 = _mm512_fmadd_ps(a1, b, c), a2 = _mm512_fmadd_ps(a2, b, c);
        a3 = _mm512_fmadd_ps(a3, b, c), a4 = _mm512_fmadd_ps(a4, b, c), a5 = _mm512_fmadd_ps(a5, b, c);
        a6 = _mm512_fmadd_ps(a6, b, c), a7 = _mm512_fmadd_ps(a7, b, c), a8 = _mm512_fmadd_ps(a8, b, c);
        a9 = _mm512_fmadd_ps(a9, b, c), a10 = _mm512_fmadd_ps(a10, b, c), a11 = _mm512_fmadd_ps(a11, b, c);
    }
    double dt = hmoe_time_s() - t0;
    __m512 s = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)),
                             _mm512_add_ps(_mm512_add_ps(a4, a5), _mm512_add_ps(a6, a7)));
    s = _mm512_add_ps(s, _mm512_add_ps(_mm512_add_ps(a8, a9), _mm512_add_ps(a10, a11)));
    bench_sink += (uint64_t)_mm512_reduce_add_ps(s);
    return (double)iters * 12 * 16 * 2 / dt / 1e9;
}

int main(int argc, char **argv) {
    int nt = hmoe_cpu_physical_cores(), reps = 3;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "-t") == 0) nt = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "-r") == 0) reps = atoi(argv[i + 1]);
    }
    hmoe_cpu_init();
    struct inputs in;
    make_inputs(&in);
    const size_t state_floats = (size_t)HV * DIM * DIM, sf = hmoe_gdn_chunk_scratch_floats(DIM);
    float *scratch = malloc(sizeof(float) * sf * (size_t)nt);
    float *o1 = malloc(sizeof(float) * NTOK * HV * DIM), *o2 = malloc(sizeof(float) * NTOK * HV * DIM);
    float *S1 = calloc(state_floats, sizeof(float)), *S2 = calloc(state_floats, sizeof(float));

    /* Correctness: chunked == recurrence (a prefill of 200 tokens from a non-zero state). */
    for (size_t i = 0; i < state_floats; i++) S1[i] = S2[i] = 0.01f * bench_normal();
    layer(S1, &in, 0, 200, o1, false, scratch, sf, nt);
    layer(S2, &in, 0, 200, o2, true, scratch, sf, nt);
    double wo = 0, ws = 0;
    for (size_t i = 0; i < (size_t)200 * HV * DIM; i++) wo = fmax(wo, fabs((double)o1[i] - o2[i]));
    for (size_t i = 0; i < state_floats; i++) ws = fmax(ws, fabs((double)S1[i] - S2[i]));
    printf("check: chunked vs recurrence, 200 tokens x %d heads: max |d| outputs %.2g, state %.2g  %s\n", HV, wo, ws,
           wo < 1e-3 && ws < 1e-3 ? "ok" : "FAIL");
    if (!(wo < 1e-3 && ws < 1e-3)) return 1;

    /* Roofline probes. */
    size_t probe = (size_t)512 << 20;
    uint8_t *buf = bench_alloc_touched(probe, nt);
    const double ram = buf ? bench_read_gbs(buf, probe, nt, 3) : 0;
    free(buf);
    const double peak = (hmoe_cpu_path() == HMOE_CPU_AVX512 ? fma_peak_avx512() : 0) * nt;
    printf("roofline: RAM read %.1f GB/s, FMA peak %.0f GFLOP/s (%d thread%s)\n", ram, peak, nt, nt > 1 ? "s" : "");

    /* Decode: one token through 30 layers of state (each its own 2 MiB block). */
    float *states = calloc(state_floats * LAYERS, sizeof(float));
    const double state_bytes = (double)state_floats * LAYERS * sizeof(float);
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        double t0 = hmoe_time_s();
        for (int t = 0; t < 16; t++)
            for (int l = 0; l < LAYERS; l++) layer(states + (size_t)l * state_floats, &in, t, 1, o1, false, scratch, sf, nt);
        best = fmin(best, (hmoe_time_s() - t0) / 16);
    }
    printf("decode : %.3f ms per token for %d layers; state %.1f MiB read + written: %.1f GB/s = %.0f%% of RAM read\n",
           best * 1e3, LAYERS, state_bytes / 1048576.0, 2 * state_bytes / best / 1e9,
           ram > 0 ? 100.0 * 2 * state_bytes / best / 1e9 / ram : 0.0);

    /* Prefill: 512 tokens through one layer, both forms. 4 dim^2 FMA = 8 dim^2 flops per token and head. */
    const double flops = 8.0 * DIM * DIM * HV * NTOK;
    for (int chunked = 0; chunked < 2; chunked++) {
        best = 1e30;
        for (int r = 0; r < reps; r++) {
            memset(S1, 0, sizeof(float) * state_floats);
            double t0 = hmoe_time_s();
            layer(S1, &in, 0, NTOK, o1, chunked, scratch, sf, nt);
            best = fmin(best, hmoe_time_s() - t0);
        }
        printf("prefill %-10s: %d tokens x 1 layer in %.2f ms: %.0f tok/s per layer (%.1f ms for %d layers), "
               "%.1f GFLOP/s = %.0f%% of FMA peak\n",
               chunked ? "chunked" : "recurrent", NTOK, best * 1e3, NTOK / best, best * 1e3 * LAYERS, LAYERS,
               flops / best / 1e9, peak > 0 ? 100.0 * flops / best / 1e9 / peak : 0.0);
    }
    free(states), free(scratch), free(o1), free(o2), free(S1), free(S2), free(in.qkv), free(in.gb);
    return 0;
}
