/* split_count.c — the prefill split's choice by token count (sched.h): after a streamed
 * RAM layer's router the host knows how many tokens each uncached expert got; a streamed expert
 * costs its PCIe copy whatever its tokens, a CPU expert a fixed part plus a part per (token,
 * expert) pair, and an expert without tokens costs nothing at all. Pure arithmetic (hybrid_prefill.c
 * feeds it counts and measured costs) so that tests/test_sched_split_count.c checks it on the CPU:
 * the lightest-first selection and the online fit of the CPU job's cost.
 */
#include <math.h>
#include <string.h>

#include "hmoe/sched.h"

/* Sorts idx[0..n) by tokens ascending, a tie to the higher expert id (insertion sort: n <= 512,
 * called once per layer). */
static void sort_light_first(int *idx, int n, const uint32_t *tok) {
    for (int i = 1; i < n; i++) {
        const int v = idx[i];
        int j = i - 1;
        while (j >= 0 && (tok[idx[j]] > tok[v] || (tok[idx[j]] == tok[v] && idx[j] < v))) {
            idx[j + 1] = idx[j];
            j--;
        }
        idx[j + 1] = v;
    }
}

void hmoe_sched_split_by_count(const struct hmoe_sched_count_model *p, const int *cand, int m, const uint32_t *tok,
                               int *cpu, int *gpu, struct hmoe_sched_count_split *out) {
    memset(out, 0, sizeof *out);
    if (m <= 0 || m > HMOE_SCHED_COUNT_MAX) return;
    int used[HMOE_SCHED_COUNT_MAX];
    int mu = 0;
    for (int i = 0; i < m; i++)
        if (tok[cand[i]] > 0) used[mu++] = cand[i];
    out->n_skip = m - mu;
    sort_light_first(used, mu, tok);
    const double a = fmax(p->expert_ms, 0), b = fmax(p->pair_ms, 0);
    int nc = 0;
    double cpu_end = p->start_ms + fmax(p->job_ms, 0);
    if (p->force_cpu >= 0) {
        nc = p->force_cpu < mu ? p->force_cpu : mu;
        for (int i = 0; i < nc; i++) cpu_end += a + b * tok[used[i]];
    } else {
        /* lightest first while the CPU's predicted end stays margin_ms before the GPU's (which
         * loses one copy per expert the CPU takes) */
        for (int i = 0; i < mu && (p->max_cpu < 0 || nc < p->max_cpu); i++) {
            const double c = cpu_end + a + b * tok[used[i]];
            const double g = p->gpu_ms + p->copy_ms * (mu - i - 1);
            if (c + p->margin_ms > g) break;
            cpu_end = c;
            nc++;
        }
        /* the copies saved, less adding the CPU's sum, must be worth it */
        if (nc > 0 && nc * p->copy_ms - p->add_ms < p->min_gain_ms) {
            nc = 0;
            cpu_end = 0;
        }
    }
    out->n_cpu = nc;
    out->n_gpu = mu - nc;
    out->cpu_end_ms = nc > 0 ? cpu_end : 0;
    out->gpu_end_ms = p->gpu_ms + p->copy_ms * (mu - nc);
    for (int i = 0; i < nc; i++) {
        cpu[i] = used[i];
        out->cpu_pairs += tok[used[i]];
    }
    /* the GPU streams the heaviest first */
    for (int i = 0; i < mu - nc; i++) gpu[i] = used[mu - 1 - i];
}

void hmoe_sched_cost_fit_init(struct hmoe_sched_cost_fit *f, const double prior[3], const double prior_sd[3]) {
    memset(f, 0, sizeof *f);
    for (int i = 0; i < 3; i++) {
        f->th[i] = prior[i];
        f->P[i][i] = prior_sd[i] * prior_sd[i];
    }
}

/* Recursive least squares with forgetting: th += K (ms - x.th), K = P x / (lambda + x' P x),
 * P = (P - K x' P) / lambda. The prior's covariance keeps the three parameters apart while the
 * samples alone cannot (experts and pairs grow together). */
void hmoe_sched_cost_fit_add(struct hmoe_sched_cost_fit *f, double experts, double pairs, double ms, double lambda) {
    const double x[3] = {1.0, experts, pairs};
    double Px[3], xPx = 0, pred = 0;
    for (int i = 0; i < 3; i++) {
        Px[i] = 0;
        for (int j = 0; j < 3; j++) Px[i] += f->P[i][j] * x[j];
        xPx += x[i] * Px[i];
        pred += x[i] * f->th[i];
    }
    const double den = lambda + xPx;
    if (!(den > 0) || !isfinite(ms)) return;
    for (int i = 0; i < 3; i++) f->th[i] += Px[i] / den * (ms - pred);
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) f->P[i][j] = (f->P[i][j] - Px[i] * Px[j] / den) / lambda;
    f->n++;
}

void hmoe_sched_cost_fit_get(const struct hmoe_sched_cost_fit *f, const double floor_[3], double out[3]) {
    for (int i = 0; i < 3; i++) out[i] = f->th[i] > floor_[i] ? f->th[i] : floor_[i];
}
