/* test_sched_split_count.c — the prefill split by token count (src/sched/split_count.c):
 * hmoe_sched_split_by_count (experts without tokens skipped, the CPU takes the lightest while its
 * predicted end stays margin_ms before the GPU's, forced counts, caps, the gain threshold) and the
 * CPU job's cost fit (recursive least squares). Expected values are worked out by hand from the
 * rule documented in sched.h, not taken from the code's output.
 */
#include <string.h>

#include "harness.h"
#include "hmoe/sched.h"

/* Ten candidates 10..19; 10 and 14 have no tokens. Light first (a tie to the higher id):
 * 17(1) 11(1) 15(2) 13(3) 19(4) 16(7) 18(20) 12(50). */
static uint32_t tok[32];
static const int cand[10] = {10, 11, 12, 13, 14, 15, 16, 17, 18, 19};

static struct hmoe_sched_count_model base(void) {
    return (struct hmoe_sched_count_model){.start_ms = 0.3, .job_ms = 0.2, .expert_ms = 0.05, .pair_ms = 0.01,
                                           .gpu_ms = 1.0, .copy_ms = 0.1, .add_ms = 0.1, .margin_ms = 0.05,
                                           .min_gain_ms = 0.05, .max_cpu = -1, .force_cpu = -1};
}

static void expect_split(const struct hmoe_sched_count_model *p, const int *want_cpu, int nc, const int *want_gpu, int ng,
                         int nskip, const char *name) {
    int cpu[16], gpu[16];
    struct hmoe_sched_count_split s;
    memset(cpu, -1, sizeof cpu);
    memset(gpu, -1, sizeof gpu);
    hmoe_sched_split_by_count(p, cand, 10, tok, cpu, gpu, &s);
    bool ok = s.n_cpu == nc && s.n_gpu == ng && s.n_skip == nskip;
    for (int i = 0; ok && i < nc; i++) ok = cpu[i] == want_cpu[i];
    for (int i = 0; ok && i < ng; i++) ok = gpu[i] == want_gpu[i];
    t_check(ok, name, "cpu %d (want %d) [%d %d %d ...], gpu %d (want %d) [%d %d ...], skipped %d (want %d)", s.n_cpu, nc,
            cpu[0], cpu[1], cpu[2], s.n_gpu, ng, gpu[0], gpu[1], s.n_skip, nskip);
}

static void split_cases(void) {
    memset(tok, 0, sizeof tok);
    const uint32_t t[10] = {0, 1, 50, 3, 0, 2, 7, 1, 20, 4};
    for (int i = 0; i < 10; i++) tok[cand[i]] = t[i];
    struct hmoe_sched_count_model p = base();
    /* CPU end 0.5 + (0.05 + 0.01 t) per expert vs GPU 1.0 + 0.1 per streamed used candidate:
     * 17: 0.56+0.05 <= 1.7, 11: 0.62 <= 1.6, 15: 0.69 <= 1.5, 13: 0.77 <= 1.4, 19: 0.86 <= 1.3,
     * 16: 0.98+0.05 <= 1.2, 18: 1.23+0.05 > 1.1 stops: 6 on the CPU, 12 and 18 streamed */
    const int c6[6] = {17, 11, 15, 13, 19, 16}, g2[2] = {12, 18};
    expect_split(&p, c6, 6, g2, 2, 2, "balance: the 6 lightest on the CPU, 2 heaviest streamed, 2 without tokens skipped");
    int cpu[16], gpu[16];
    struct hmoe_sched_count_split s;
    hmoe_sched_split_by_count(&p, cand, 10, tok, cpu, gpu, &s);
    t_check(s.cpu_pairs == 18 && fabs(s.cpu_end_ms - 0.98) < 1e-9 && fabs(s.gpu_end_ms - 1.2) < 1e-9,
            "predicted ends and pairs", "pairs %llu (18), CPU end %.4f (0.98), GPU end %.4f (1.2)",
            (unsigned long long)s.cpu_pairs, s.cpu_end_ms, s.gpu_end_ms);
    /* a small window: GPU 0.3 + 0.1 per streamed: 17 (0.61 <= 1.0), 11 (0.67 <= 0.9), 15 (0.74 <=
     * 0.8), 13 (0.82 > 0.7) stops: 3; the copies saved 0.3 - add 0.1 >= 0.05 */
    p.gpu_ms = 0.3;
    const int c3[3] = {17, 11, 15}, g5[5] = {12, 18, 16, 19, 13};
    expect_split(&p, c3, 3, g5, 5, 2, "small window: 3 lightest on the CPU, the rest heaviest first");
    /* saving 0.3 - 0.25 = 0.05 < 0.1: no CPU part */
    p.add_ms = 0.25, p.min_gain_ms = 0.1;
    const int g8[8] = {12, 18, 16, 19, 13, 15, 11, 17};
    expect_split(&p, NULL, 0, g8, 8, 2, "not worth adding the sum: every used candidate streams");
    p = base();
    p.max_cpu = 2;
    const int c2[2] = {17, 11}, g6[6] = {12, 18, 16, 19, 13, 15};
    expect_split(&p, c2, 2, g6, 6, 2, "capped at 2 (probe before the CPU job was measured)");
    p = base();
    p.force_cpu = 3, p.gpu_ms = 0; /* forced: the model is not asked */
    expect_split(&p, c3, 3, g5, 5, 2, "forced 3: the 3 lightest whatever the model says");
    p.force_cpu = 20;
    const int c8[8] = {17, 11, 15, 13, 19, 16, 18, 12};
    expect_split(&p, c8, 8, NULL, 0, 2, "forced more than used: every used candidate on the CPU, zero-token ones skipped");
    memset(tok, 0, sizeof tok);
    p = base();
    expect_split(&p, NULL, 0, NULL, 0, 10, "no tokens at all: everything skipped, nothing computed");
    hmoe_sched_split_by_count(&p, cand, 0, tok, cpu, gpu, &s);
    t_check(s.n_cpu == 0 && s.n_gpu == 0 && s.n_skip == 0, "no candidates: nothing", "%d %d %d", s.n_cpu, s.n_gpu, s.n_skip);
}

static uint64_t rng = 88172645463325252ull;
static double unit(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}

static void fit_cases(void) {
    struct hmoe_sched_cost_fit f;
    const double zero[3] = {0, 0, 0}, wide[3] = {10, 10, 10};
    hmoe_sched_cost_fit_init(&f, zero, wide);
    /* exact samples of 0.4 + 0.05 e + 0.007 p, experts and pairs varied independently */
    for (int i = 0; i < 60; i++) {
        const double e = 1 + (int)(unit() * 30), p = e * (1 + unit() * 40);
        hmoe_sched_cost_fit_add(&f, e, p, 0.4 + 0.05 * e + 0.007 * p, 1.0);
    }
    t_check(fabs(f.th[0] - 0.4) < 1e-3 && fabs(f.th[1] - 0.05) < 1e-4 && fabs(f.th[2] - 0.007) < 1e-5 && f.n == 60,
            "cost fit recovers c, a, b from exact samples", "%.5f %.6f %.7f after %d", f.th[0], f.th[1], f.th[2], f.n);
    /* forgetting: the per-pair cost rises to 0.01 (a DMA stream beside the job); lambda 0.95 follows */
    for (int i = 0; i < 200; i++) {
        const double e = 1 + (int)(unit() * 30), p = e * (1 + unit() * 40);
        hmoe_sched_cost_fit_add(&f, e, p, 0.4 + 0.05 * e + 0.01 * p, 0.95);
    }
    t_check(fabs(f.th[2] - 0.01) < 1e-4, "cost fit with forgetting follows a changed per-pair cost", "b %.6f (0.01)",
            f.th[2]);
    /* collinear samples (always 10 pairs per expert): the prior keeps the parameters finite and the
     * prediction at the sampled shape is right */
    const double prior[3] = {0.3, 0.03, 0.0065}, sd[3] = {0.3, 0.03, 0.004};
    hmoe_sched_cost_fit_init(&f, prior, sd);
    for (int i = 0; i < 100; i++) {
        const double e = 2 + (int)(unit() * 20);
        hmoe_sched_cost_fit_add(&f, e, 10 * e, 0.2 + 0.12 * e, 0.95);
    }
    const double pred = f.th[0] + f.th[1] * 8 + f.th[2] * 80;
    t_check(fabs(pred - (0.2 + 0.12 * 8)) < 5e-3 && isfinite(f.th[0]) && isfinite(f.th[1]) && isfinite(f.th[2]),
            "cost fit on collinear samples: right where sampled, finite", "predicted %.4f for 8 experts (%.4f)", pred,
            0.2 + 0.12 * 8);
    /* floors: a negative per-expert estimate is not used as such */
    f.th[1] = -0.02;
    const double floors[3] = {0, 0.01, 0.001};
    double got[3];
    hmoe_sched_cost_fit_get(&f, floors, got);
    t_check(got[1] == 0.01 && got[0] == f.th[0], "cost fit floors", "%.4f %.4f", got[0], got[1]);
    /* a non-finite sample is ignored */
    const int n = f.n;
    hmoe_sched_cost_fit_add(&f, 3, 30, NAN, 0.95);
    t_check(f.n == n && isfinite(f.th[0]), "cost fit ignores a non-finite sample", "n %d -> %d", n, f.n);
}

int main(void) {
    split_cases();
    fit_cases();
    return t_summary();
}
