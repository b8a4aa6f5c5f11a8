/* bench_moe_decode.c — one decoded token (or, -n N, one decode step of N parallel sequences)
 * through the CPU MoE block (hmoe_sched_moe_ffn: router, routing, the experts' work items on the
 * cpu.h team, the weighted sum), the call each RAM layer of `-cmoe` decode makes, on layers of a
 * model's expert shapes and types:
 *   nemotron  Nemotron-3-Nano-30B-A3B: d 2688, 128 ungated ReLU² experts of 1856, top-6, sigmoid
 *             routing; up Q5_0, down Q5_0 or Q8_0 (its Q4_K_M file: 2688 and 1856 are not
 *             multiples of 256, so Q4_K / Q6_K fall back to Q5_0 / Q8_0)
 *   qwen3     Qwen3-30B-A3B: d 2048, 128 SwiGLU experts of 768, top-8; gate/up Q4_K, down Q6_K
 *   gptoss    gpt-oss-20b: d 2880, 32 experts of 2880, top-4; MXFP4
 *   qwen35    Qwen3.5/3.6-35B-A3B: d 2048, 256 experts of 512, top-8; gate/up Q4_K, down Q6_K
 * Layers are distinct copies (enough of them to exceed the last-level cache, -m MiB), visited in
 * turn, so every call streams its experts from RAM. First one call per layer is checked against
 * a scalar reference (the type table's quantize_ref / vec_dot_ref, the routing the call chose);
 * then each rep times the RAM read probe of the same threads over the same buffers (bench_util.h)
 * and S calls back to back, alternating which goes first. Reported: ms per call, the expert +
 * router bytes per call over its time in GB/s and as % of the probe (best and median of the
 * paired ratios), and the work items of the last call per thread (count and bytes).
 *
 * Build: make bench CUDA=0
 * Run:   ./build/bench/bench_moe_decode [-p nemotron|qwen3|gptoss|qwen35] [-y UP,DOWN] [-t threads]
 *        [-m MiB (3072)] [-s calls per rep (64)] [-r reps (5)] [-n rows per call (1)]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "hmoe/sched.h"

struct preset {
    const char *name;
    int64_t d, F;
    int E, k;
    enum hmoe_moe_act act;
    enum hmoe_moe_gating gating;
    enum hmoe_type up, down;
};
static const struct preset presets[] = {
    {"nemotron", 2688, 1856, 128, 6, HMOE_MOE_RELU2, HMOE_MOE_SIGMOID, HMOE_TYPE_Q5_0, HMOE_TYPE_Q5_0},
    {"qwen3", 2048, 768, 128, 8, HMOE_MOE_SWIGLU, HMOE_MOE_SOFTMAX, HMOE_TYPE_Q4_K, HMOE_TYPE_Q6_K},
    {"gptoss", 2880, 2880, 32, 4, HMOE_MOE_SWIGLU, HMOE_MOE_TOPK_SOFTMAX, HMOE_TYPE_MXFP4, HMOE_TYPE_MXFP4},
    {"qwen35", 2048, 512, 256, 8, HMOE_MOE_SWIGLU, HMOE_MOE_SOFTMAX, HMOE_TYPE_Q4_K, HMOE_TYPE_Q6_K},
};

static struct hmoe_mat make_stack(enum hmoe_type t, int64_t n_in, int64_t n_out, int E, uint8_t *data) {
    struct hmoe_mat m = {.data = data, .type = t, .n_in = n_in, .n_out = n_out, .n_mat = E, .name = "bench"};
    m.row_bytes = hmoe_row_bytes(t, n_in);
    m.mat_bytes = m.row_bytes * (size_t)n_out;
    return m;
}

/* Scalar reference of one token through the experts the call chose (sel, wsel). */
static void reference(const struct hmoe_moe_weights *w, const float *x, const int32_t *sel, const float *wsel,
                      float *out) {
    const int64_t d = w->up.n_in, F = w->up.n_out;
    const struct hmoe_type_info *tu = &hmoe_type_info[w->up.type], *td = &hmoe_type_info[w->down.type];
    uint8_t *xq = malloc(hmoe_row_bytes(tu->vec_dot_type, d) + 64), *zq = malloc(hmoe_row_bytes(td->vec_dot_type, F) + 64);
    float *g = malloc((size_t)F * sizeof *g), *u = malloc((size_t)F * sizeof *u);
    hmoe_type_info[tu->vec_dot_type].quantize_ref(x, xq, d);
    memset(out, 0, (size_t)d * sizeof *out);
    for (int i = 0; i < w->n_expert_used; i++) {
        const int e = sel[i];
        const uint8_t *wu = (const uint8_t *)w->up.data + (size_t)e * w->up.mat_bytes;
        for (int64_t r = 0; r < F; r++) u[r] = tu->vec_dot_ref(d, wu + (size_t)r * w->up.row_bytes, xq);
        if (w->act == HMOE_MOE_RELU2) {
            for (int64_t r = 0; r < F; r++) g[r] = u[r] > 0.0f ? u[r] * u[r] : 0.0f;
        } else {
            const uint8_t *wg = (const uint8_t *)w->gate.data + (size_t)e * w->gate.mat_bytes;
            for (int64_t r = 0; r < F; r++) {
                const float a = tu->vec_dot_ref(d, wg + (size_t)r * w->gate.row_bytes, xq);
                g[r] = a / (1.0f + expf(-a)) * u[r];
            }
        }
        hmoe_type_info[td->vec_dot_type].quantize_ref(g, zq, F);
        const uint8_t *wd = (const uint8_t *)w->down.data + (size_t)e * w->down.mat_bytes;
        for (int64_t r = 0; r < d; r++) out[r] += wsel[i] * td->vec_dot_ref(F, wd + (size_t)r * w->down.row_bytes, zq);
    }
    free(xq), free(zq), free(g), free(u);
}

static int cmp_d(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    const struct preset *p = &presets[0];
    int nt = hmoe_cpu_physical_cores(), steps = 64, reps = 5, n_tok = 1;
    size_t mib = 3072;
    enum hmoe_type up_t = HMOE_TYPE_COUNT, down_t = HMOE_TYPE_COUNT;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) goto usage;
        i++;
        if (!strcmp(a, "-p")) {
            p = NULL;
            for (size_t j = 0; j < sizeof presets / sizeof presets[0]; j++)
                if (!strcmp(v, presets[j].name)) p = &presets[j];
            if (!p) goto usage;
        } else if (!strcmp(a, "-y")) {
            char buf[64];
            snprintf(buf, sizeof buf, "%s", v);
            char *c = strchr(buf, ',');
            if (!c) goto usage;
            *c = 0;
            if (!hmoe_type_from_name(buf, &up_t) || !hmoe_type_from_name(c + 1, &down_t)) goto usage;
        } else if (!strcmp(a, "-t")) nt = atoi(v);
        else if (!strcmp(a, "-m")) mib = (size_t)atol(v);
        else if (!strcmp(a, "-s")) steps = atoi(v);
        else if (!strcmp(a, "-r")) reps = atoi(v);
        else if (!strcmp(a, "-n")) n_tok = atoi(v);
        else goto usage;
    }
    if (nt < 1 || nt > 64 || steps < 1 || reps < 1 || reps > 64 || n_tok < 1 || n_tok > 64) goto usage;
    if (up_t == HMOE_TYPE_COUNT) up_t = p->up, down_t = p->down;
    if (!hmoe_cpu_supports(up_t) || !hmoe_cpu_supports(down_t)) {
        fprintf(stderr, "bench_moe_decode: no CPU kernels for %s / %s\n", hmoe_type_info[up_t].name,
                hmoe_type_info[down_t].name);
        return 2;
    }
    hmoe_cpu_init();
    const int64_t d = p->d, F = p->F;
    const int E = p->E, k = p->k;
    const bool gated = p->act != HMOE_MOE_RELU2;
    const size_t up_b = hmoe_row_bytes(up_t, d) * (size_t)F * (size_t)E, dn_b = hmoe_row_bytes(down_t, F) * (size_t)d * E;
    const size_t rt_b = (size_t)d * (size_t)E * sizeof(float), layer_b = (gated ? 2 : 1) * up_b + dn_b + rt_b;
    int L = (int)(((size_t)mib << 20) / layer_b);
    if (L < 1) L = 1;
    printf("%s layer (d %lld, %d experts of %lld, top-%d, %s), %s / %s, path %s, %d threads, %d rows a call; %d layers of %.1f MiB\n",
           p->name, (long long)d, E, (long long)F, k, gated ? "gated" : "ungated", hmoe_type_info[up_t].name,
           hmoe_type_info[down_t].name, hmoe_cpu_isa_name(), nt, n_tok, L, layer_b / 1048576.0);

    struct hmoe_moe_weights *layers = calloc((size_t)L, sizeof *layers);
    uint8_t **bufs = calloc((size_t)L, sizeof *bufs);
    float *bias = malloc((size_t)E * sizeof *bias);
    for (int e = 0; e < E; e++) bias[e] = 0.01f * bench_normal();
    for (int l = 0; l < L; l++) {
        bufs[l] = bench_alloc_touched(layer_b, nt);
        if (!bufs[l]) return fprintf(stderr, "bench_moe_decode: out of memory\n"), 1;
        uint8_t *pu = bufs[l], *pg = pu + up_b, *pd = pg + (gated ? up_b : 0), *pr = pd + dn_b;
        if (l == 0) {
            bench_fill_weights(up_t, pu, up_b);
            if (gated) bench_fill_weights(up_t, pg, up_b);
            bench_fill_weights(down_t, pd, dn_b);
        } else {
            memcpy(pu, bufs[0], layer_b - rt_b); /* same expert bytes, own router: own routing */
        }
        float *router = (float *)pr;
        for (size_t i = 0; i < (size_t)d * (size_t)E; i++) router[i] = 0.05f * bench_normal();
        struct hmoe_moe_weights *w = &layers[l];
        w->router = make_stack(HMOE_TYPE_F32, d, E, 1, pr);
        w->up = make_stack(up_t, d, F, E, pu);
        if (gated) w->gate = make_stack(up_t, d, F, E, pg);
        w->down = make_stack(down_t, F, d, E, pd);
        w->n_expert_used = k;
        w->act = p->act;
        w->gating = p->gating;
        if (p->gating == HMOE_MOE_SIGMOID) w->sel_bias = bias, w->w_scale = 2.5f;
    }
    struct hmoe_sched_moe *s = NULL;
    struct hmoe_err err = {0};
    if (hmoe_sched_moe_init(layers, L, n_tok, nt, &s, &err)) return fprintf(stderr, "bench_moe_decode: %s\n", err.msg), 1;
    const size_t xn = (size_t)d * (size_t)n_tok;
    float *x = malloc(xn * sizeof *x), *out = malloc(xn * sizeof *out), *ref = malloc((size_t)d * sizeof *ref);

    /* Check: one call per layer (up to 3), each row against the scalar reference of the routing
     * the call chose for it. */
    for (int l = 0; l < L && l < 3; l++) {
        for (size_t i = 0; i < xn; i++) x[i] = bench_normal();
        if (hmoe_sched_moe_ffn(s, &layers[l], x, n_tok, out, &err)) return fprintf(stderr, "bench_moe_decode: %s\n", err.msg), 1;
        for (int t = 0; t < n_tok; t++) {
            reference(&layers[l], x + (size_t)t * d, hmoe_sched_moe_last_selection(s) + (size_t)t * k,
                      hmoe_sched_moe_last_weights(s) + (size_t)t * k, ref);
            double mx = 0, diff = 0;
            for (int64_t i = 0; i < d; i++) mx = fmax(mx, fabs(ref[i])), diff = fmax(diff, fabs(ref[i] - out[t * d + i]));
            if (!(diff <= 1e-4 * mx + 1e-6)) {
                fprintf(stderr, "bench_moe_decode: FAIL layer %d row %d: max |out - reference| %g of max |reference| %g\n",
                        l, t, diff, mx);
                return 1;
            }
        }
    }
    printf("check: %d layer calls match the scalar reference (max error <= 1e-4 of max |out|)\n", L < 3 ? L : 3);

    const size_t total_b = layer_b * (size_t)L;
    double best = 1e30, roof = 0, ratio[64], ms_all[64];
    uint64_t bytes_per_call = 0;
    int step = 0;
    for (int r = 0; r < reps; r++) {
        double probe = 0, dt = 0;
        for (int half = 0; half < 2; half++) {
            if ((half + r) % 2 == 0) {
                /* the probe over the same layers' buffers, each thread its own slice */
                double sum_t = 0;
                for (int l = 0; l < L; l++) sum_t += (double)layer_b / (bench_read_gbs(bufs[l], layer_b, nt, 1) * 1e9);
                probe = (double)total_b / sum_t / 1e9;
                continue;
            }
            struct hmoe_sched_moe_reads rd;
            hmoe_sched_moe_reads_take(s, &rd);
            const double t0 = hmoe_time_s();
            for (int c = 0; c < steps; c++, step++) {
                x[step % xn] += 0.5f; /* a new token: other experts */
                hmoe_sched_moe_ffn(s, &layers[step % L], x, n_tok, out, &err);
            }
            dt = hmoe_time_s() - t0;
            hmoe_sched_moe_reads_take(s, &rd);
            bytes_per_call = (rd.bytes + (uint64_t)steps * rt_b) / (uint64_t)steps;
        }
        const double gbs = (double)bytes_per_call * steps / dt / 1e9;
        roof = fmax(roof, probe);
        best = fmin(best, dt);
        ratio[r] = gbs / probe;
        ms_all[r] = dt * 1e3 / steps;
    }
    qsort(ratio, (size_t)reps, sizeof ratio[0], cmp_d);
    qsort(ms_all, (size_t)reps, sizeof ms_all[0], cmp_d);
    const double gbs = (double)bytes_per_call * steps / best / 1e9;
    printf("per call: %.3f ms best, %.3f median; %.2f MB read (experts + router): best %.2f GB/s = %.1f%% of the "
           "probe's best %.2f GB/s; median paired ratio %.1f%%; per thread %.2f GB/s\n",
           best * 1e3 / steps, ms_all[reps / 2], bytes_per_call / 1e6, gbs, 100 * gbs / roof, roof,
           100 * ratio[reps / 2], gbs / nt);
    /* the work items of the last call per thread, and the layout's items */
    uint64_t ti[64] = {0}, tb[64] = {0}, tb_min = UINT64_MAX, tb_max = 0, tb_sum = 0;
    hmoe_sched_moe_thread_work(s, nt, ti, tb);
    printf("last call per thread (items / KB):");
    for (int t = 0; t < nt; t++) {
        printf(" %llu/%.0f", (unsigned long long)ti[t], tb[t] / 1e3);
        tb_min = tb[t] < tb_min ? tb[t] : tb_min, tb_max = tb[t] > tb_max ? tb[t] : tb_max, tb_sum += tb[t];
    }
    printf("\n  bytes per thread: min %.0f KB, max %.0f KB, mean %.0f KB (max / mean %.2f)\n", tb_min / 1e3,
           tb_max / 1e3, tb_sum / 1e3 / nt, tb_sum ? (double)tb_max * nt / (double)tb_sum : 0.0);
    hmoe_sched_moe_free(s);
    for (int l = 0; l < L; l++) free(bufs[l]);
    free(bufs), free(layers), free(bias), free(x), free(out), free(ref);
    return 0;
usage:
    fprintf(stderr,
            "usage: %s [-p nemotron|qwen3|gptoss|qwen35] [-y UP,DOWN] [-t threads] [-m MiB] [-s calls] [-r reps] [-n rows]\n",
            argv[0]);
    return 2;
}
