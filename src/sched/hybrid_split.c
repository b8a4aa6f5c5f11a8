/* hybrid_split.c — the planner and the statistics of the hybrid prefill split (hybrid_impl.h;
 * the streaming itself is hybrid_prefill.c). After a streamed layer's router the host knows how
 * many tokens each uncached expert got; hmoe_hyb_split_decide gives CPU threads the lightest ones
 * by a cost model (split_count.c: start + job + per expert + per pair, fitted online from the jobs'
 * host stamps; the GPU's part from CUDA events) and leaves the rest to the stream, heaviest first
 * (a streamed expert costs its copy whatever its tokens, a CPU expert mostly per token). Every
 * split layer records two sets of events (alternate layers); hmoe_hyb_split_collect reads a set
 * back into the estimates, hmoe_hyb_split_end_batch closes a micro-batch and logs it (-v).
 * Measured times only: nothing here assumes a machine's speed beyond the priors of the fit.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sched/hybrid_impl.h"

#define SPLIT_EWMA 0.3       /* weight of a new sample in the measured CPU rates */
#define SPLIT_W_EWMA 0.5     /* ... in a layer's GPU part (few samples per run) */
#define SPLIT_PROBE_MIN 2    /* until the CPU was measured at a batch size it takes 2 experts */
#define SPLIT_MIN_GAIN 0.02  /* a split must save this share of the layer, else none */
#define SPLIT_MARGIN_MS 0.03 /* the CPU aims to end this much + SPLIT_MARGIN_REL of the GPU part early */
#define SPLIT_MARGIN_REL 0.05

static void ewma(double *r, double sample) { *r = *r > 0 ? (1 - SPLIT_EWMA) * *r + SPLIT_EWMA * sample : sample; }

static uint64_t expert_bytes(const struct hmoe_moe_weights *w) {
    return (uint64_t)w->gate.mat_bytes + w->up.mat_bytes + w->down.mat_bytes;
}

/* Micro-batch size class: the planner keeps its state per floor(log2 n) (CPU time ~ tokens). */
static int size_class(int n) {
    int c = 0;
    while ((n >>= 1) && c < HYB_PLAN_CLASSES - 1) c++;
    return c;
}

/* GPU time one expert moved off the stream saves: its copy at the probed PCIe rate. */
static double stream_ms(const struct hmoe_sched_hybrid *h, int il) {
    const double gbps = h->h2d_probe_gbps > 1 ? h->h2d_probe_gbps : 20.0;
    return (double)expert_bytes(&h->moe[il]) / (gbps * 1e6);
}

static void acc_add(struct hyb_split_acc *a, const struct hyb_split_acc *b) {
    if (b->layers && (!a->layers || b->nc_min < a->nc_min)) a->nc_min = b->nc_min;
    a->batches += b->batches;
    a->layers += b->layers;
    a->gpu_layers += b->gpu_layers;
    a->nc += b->nc;
    a->ns += b->ns;
    a->ncached += b->ncached;
    a->cpu_ms += b->cpu_ms;
    a->gpu_ms += b->gpu_ms;
    a->gpu_stream_ms += b->gpu_stream_ms;
    a->nc_max = HMOE_MAX(a->nc_max, b->nc_max);
    a->cpu_layers += b->cpu_layers;
    a->off_layers += b->off_layers;
    a->window_ms += b->window_ms;
    a->wait_ms += b->wait_ms;
    a->fixed_ms += b->fixed_ms;
    a->add_ms += b->add_ms;
    a->n0 += b->n0;
    a->n0_unused += b->n0_unused;
    a->nskip += b->nskip;
    a->pairs += b->pairs;
    a->idle += b->idle;
    a->light_bad += b->light_bad;
    a->pred_cpu_ms += b->pred_cpu_ms;
    a->pred_gpu_ms += b->pred_gpu_ms;
}

/* A measured time into its running estimate: the first sample of a process or size class is cold
 * (lazy kernel loads, thread start, first touches: up to 10x the steady value on the H200) and is
 * replaced by the second; then an EWMA of weight w, or, with fast_down, a lower sample at once. */
static void track(double *est, int n_before, double sample, double w, bool fast_down) {
    if (n_before <= 1 || (fast_down && sample < *est)) *est = sample;
    else *est = (1 - w) * *est + w * sample;
}

/* Count mode: one measured layer. The CPU job's time goes into the size class's cost fit (the
 * process's first job is cold: not fitted), start and add into their EWMAs; the GPU's part without
 * the candidates streamed after the counts (t3 - copy * n_after; a lower value taken at once: a
 * high one is a cold or disturbed layer, and a low one only gives the CPU less) and the GPU's wait
 * for the CPU (added to the margin) per layer. */
#define COUNT_LAMBDA 0.95   /* forgetting of the cost fit: ~20 jobs, under half a micro-batch */
#define COUNT_WAIT_CAP 0.3  /* ms: at most this much measured waiting widens the margin */
#define COUNT_MED_CAP 1.25  /* a layer's GPU part counts at most this x the layers' median */
/* ms a CPU part must save (copies - add), whatever the layer: a job after a long idle stretch
 * can take several ms for a few pairs (H200, first call: 5 ms for 7 experts, 1 pair, at 14 GiB,
 * the GPU waited 7 ms), so a part saving a copy or two is not worth that risk */
#define COUNT_MIN_GAIN_MS 0.25
static void count_update(struct hmoe_sched_hybrid *h, const struct hyb_split_meas *m, double t3, double t4, double t5,
                         double job_ms) {
    const int c = size_class(m->n);
    struct hyb_plan_rates *r = &h->plan_r[c];
    struct hyb_count_layer *q = &h->cnt_l[(size_t)m->il * HYB_PLAN_CLASSES + (size_t)c];
    struct hyb_split_acc *a = &h->sp_batch;
    const double copy = stream_ms(h, m->il);
    if (m->nc > 0) {
        const double wait = HMOE_MAX(0.0, t4 - t3);
        const double fixed = HMOE_MAX(0.0, t4 - job_ms), add = HMOE_MAX(0.0, t5 - HMOE_MAX(t3, t4));
        track(&r->fixed_ms, r->n, fixed, SPLIT_EWMA, false);
        track(&r->add_ms, r->n, add, SPLIT_EWMA, false);
        r->n++;
        if (h->cnt_jobs[c]++ > 0)
            hmoe_sched_cost_fit_add(&h->cnt_fit[c], (double)m->nc, (double)m->pairs, job_ms, COUNT_LAMBDA);
        if (q->wait_n++ > 0) q->wait_ms = 0.5 * q->wait_ms + 0.5 * wait;
        /* the latch: a layer where the split measured slower than streaming its CPU experts would
         * have been (router -> sum added vs t3 + their copies), by more than the margin, twice in a
         * row (not on its first, cold visit), streams everything from then on */
        if (h->split_share < 0 && q->samples > 0) {
            struct hyb_plan_layer *p = &h->plan_l[(size_t)m->il * HYB_PLAN_CLASSES + (size_t)c];
            if (t5 > t3 + copy * m->nc + SPLIT_MARGIN_MS) p->strikes++;
            else p->strikes = 0;
            if (p->strikes >= 2) p->off = true;
        }
        a->cpu_layers++;
        a->wait_ms += wait;
        a->fixed_ms += fixed;
        a->add_ms += add;
        h->r_cpu_ms = job_ms / m->nc;
        h->r_cpu_tok = m->n;
    }
    track(&q->gpu_ms, q->samples, HMOE_MAX(0.0, t3 - copy * m->n_after), SPLIT_W_EWMA, true);
    q->samples++;
    a->window_ms += t3 + copy * m->nc;
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Wait for an event without spinning a core: the CPU job's thread team needs all of them (the
 * CUDA runtime's blocking wait spins when there are more cores than GPUs). */
enum hmoe_status hmoe_hyb_wait_event(void *ev, struct hmoe_err *err) {
    for (;;) {
        const int q = hmoe_cuda_event_query(ev);
        if (q != 0) return q > 0 ? HMOE_OK : hmoe_cuda_event_sync(ev, err);
        const struct timespec ts = {0, 20000};
        nanosleep(&ts, NULL);
    }
}

/* Read the timings of an earlier layer recorded in event set `set` (waiting for its GPU groups
 * and, with a CPU part, the add of its sum) into the planner and the micro-batch's statistics, and
 * pass on the CPU job's failure. An unreadable event only loses the sample: a device error
 * surfaces at the next sync. */
enum hmoe_status hmoe_hyb_split_collect(struct hmoe_sched_hybrid *h, int set, struct hmoe_err *err) {
    struct hyb_split_meas *m = &h->sp_meas[set];
    if (!m->pending) return HMOE_OK;
    m->pending = false;
    void **ev = h->ev_sp[set];
    enum hmoe_status st = hmoe_hyb_wait_event(ev[3], err);
    if (!st && m->nc > 0) st = hmoe_hyb_wait_event(ev[4], err);
    if (!st && m->nc > 0) st = hmoe_hyb_wait_event(h->ev_sp_end[set], err);
    if (st) return st;
    const struct hyb_split_job *j = &h->sp_job[set];
    if (m->nc > 0 && j->st) {
        *err = j->err;
        return j->st;
    }
    struct hmoe_err e = {0};
    double cached_ms = 0, t3 = 0, t4 = 0, t5 = 0;
    if (hmoe_cuda_event_elapsed_ms(ev[0], ev[2], &cached_ms, &e) || hmoe_cuda_event_elapsed_ms(ev[0], ev[3], &t3, &e))
        return HMOE_OK;
    const double stream_part = t3 - cached_ms, job_ms = (double)(j->t1_ns - j->t0_ns) / 1e6;
    if (m->nc > 0) {
        if (hmoe_cuda_event_elapsed_ms(ev[0], ev[4], &t4, &e) || hmoe_cuda_event_elapsed_ms(ev[0], h->ev_sp_end[set], &t5, &e))
            return HMOE_OK;
        h->sp_batch.cpu_ms += job_ms;
    }
    count_update(h, m, t3, t4, t5, job_ms);
    if (m->ns > 0) ewma(&h->r_gpu_ms, stream_part / m->ns);
    if (m->ncached > 0) ewma(&h->r_cached_ms, cached_ms / m->ncached);
    h->sp_batch.gpu_layers++;
    h->sp_batch.gpu_ms += t3;
    h->sp_batch.gpu_stream_ms += stream_part;
    return HMOE_OK;
}

/* Where the CPU jobs of this micro-batch spent their time (moe_cpu.c's phases), per call and per
 * expert (-v); only read here, after the batch's events, so no job is running. */
static void log_cpu_phases(struct hmoe_sched_hybrid *h) {
    struct hmoe_sched_moe_times t;
    hmoe_sched_moe_times_take(h->cpu_moe, &t);
    if (!t.calls) return;
    char buf[512];
    int o = 0;
    for (int p = 0; p < HMOE_MOE_PH_COUNT && o < (int)sizeof buf; p++)
        o += snprintf(buf + o, sizeof buf - (size_t)o, " %s %.3f", hmoe_sched_moe_phase_name(p), t.ms[p] / (double)t.calls);
    HMOE_INFO("  CPU jobs: %llu calls, %.1f experts / %.0f pairs per call; ms per call:%s; total %.3f ms per expert",
              (unsigned long long)t.calls, (double)t.experts / (double)t.calls, (double)t.pairs / (double)t.calls, buf,
              t.experts ? t.ms[HMOE_MOE_PH_TOTAL] / (double)t.experts : 0.0);
}

/* The last RAM layer of a micro-batch: read the outstanding timings, log the batch's split (-v). */
enum hmoe_status hmoe_hyb_split_end_batch(struct hmoe_sched_hybrid *h, int n, struct hmoe_err *err) {
    enum hmoe_status st = hmoe_hyb_split_collect(h, 1 - h->sp_set, err);
    if (!st) st = hmoe_hyb_split_collect(h, h->sp_set, err);
    struct hyb_split_acc *a = &h->sp_batch;
    if (!st && a->layers) {
        const double L = (double)a->layers, G = a->gpu_layers ? (double)a->gpu_layers : 1.0;
        const double C = a->cpu_layers ? (double)a->cpu_layers : 1.0;
        a->batches = 1;
        HMOE_INFO("hybrid prefill of %d tokens, %llu RAM layers: per layer %.1f experts on CPU threads (n_cpu %llu-%llu "
                  "over layers, %llu on the CPU side) / %.1f streamed / %.1f cached; window %.2f ms; GPU %.2f ms "
                  "(streamed part %.2f); per layer with a CPU part: CPU job %.2f ms, start %.2f ms, GPU waited for "
                  "the CPU %.3f ms, add %.3f ms; rates CPU %.3f ms/expert, streamed %.3f ms/expert (%s)",
                  n, (unsigned long long)a->layers, (double)a->nc / L, (unsigned long long)a->nc_min,
                  (unsigned long long)a->nc_max, (unsigned long long)a->cpu_layers, (double)a->ns / L,
                  (double)a->ncached / L, a->window_ms / G, a->gpu_ms / G, a->gpu_stream_ms / G, a->cpu_ms / C,
                  a->fixed_ms / C, a->wait_ms / C, a->add_ms / C,
                  h->r_cpu_ms * n / (h->r_cpu_tok > 0 ? h->r_cpu_tok : n), h->r_gpu_ms,
                  h->split_share >= 0 ? "forced share" : "planned");
        {
            const int c = size_class(n);
            /* the median of the layers' GPU part: the cap of the next micro-batch's estimates */
            int nm = 0;
            for (int il = 0; il < h->n_layer; il++) {
                const struct hyb_count_layer *q = &h->cnt_l[(size_t)il * HYB_PLAN_CLASSES + (size_t)c];
                if (q->samples > 0 && nm < h->n_layer) h->sp_w0s[nm++] = q->gpu_ms;
            }
            if (nm > 0) {
                qsort(h->sp_w0s, (size_t)nm, sizeof *h->sp_w0s, cmp_double);
                h->cnt_med[c] = h->sp_w0s[nm / 2];
            }
            HMOE_INFO("  split by count: per layer %.1f experts in the prefetched first chunk (%.1f of them without "
                      "tokens), %.1f other experts without tokens (skipped), %.1f on CPU threads (%.0f pairs), %.1f "
                      "streamed after the router; copy engine dry at the decision in %llu of %llu layers; GPU part "
                      "median %.2f ms; model per CPU layer: CPU end %.2f ms, GPU end %.2f "
                      "ms; CPU job fit %.3f ms + %.4f ms/expert + %.5f ms/pair (%d jobs), start %.3f ms",
                      (double)a->n0 / L, (double)a->n0_unused / L, (double)a->nskip / L, (double)a->nc / L,
                      (double)a->pairs / L,
                      (double)(a->ns - a->n0) / L, (unsigned long long)a->idle, (unsigned long long)a->layers,
                      h->cnt_med[c], a->pred_cpu_ms / C, a->pred_gpu_ms / C, h->cnt_fit[c].th[0], h->cnt_fit[c].th[1],
                      h->cnt_fit[c].th[2], h->cnt_fit[c].n, h->plan_r[c].fixed_ms);
        }
        acc_add(&h->sp_total, a);
        log_cpu_phases(h);
    }
    memset(a, 0, sizeof *a);
    return st;
}

/* Priors of the CPU job's cost fit (ms; 16 threads with AMX on the H200 host, while the copy
 * engine streams): fixed part per micro-batch of n tokens, per expert, per (token, expert) pair.
 * From bench_moe_subset (0.57 ms + 0.199 ms per 32-token expert on the CPU alone; +10-30 % beside
 * a DMA stream) and the split's jobs (7-8 us per pair at ~100 tokens). */
#define COUNT_PRIOR_JOB_MS 0.05
#define COUNT_PRIOR_JOB_MS_512 0.45 /* + this x n / 512 */
#define COUNT_PRIOR_EXPERT_MS 0.03
#define COUNT_PRIOR_PAIR_MS 0.0065
void hmoe_hyb_count_init(struct hmoe_sched_hybrid *h) {
    for (int c = 0; c < HYB_PLAN_CLASSES; c++) {
        const double n = (double)(1 << c);
        const double prior[3] = {COUNT_PRIOR_JOB_MS + COUNT_PRIOR_JOB_MS_512 * n / 512.0, COUNT_PRIOR_EXPERT_MS,
                                 COUNT_PRIOR_PAIR_MS};
        const double sd[3] = {0.3 * (1.0 + n / 512.0), 0.03, 0.004};
        hmoe_sched_cost_fit_init(&h->cnt_fit[c], prior, sd);
    }
}

/* The CPU's part of streamed layer il for n tokens once its routing is counted (h->cnt_tok): of the
 * m candidates cand[] (uncached, not in the n0-expert first chunk) CPU threads take cpu[0..n_cpu),
 * the stream gpu[0..n_gpu); a forced share (sched params), a probe of SPLIT_PROBE_MIN experts until
 * the CPU job was measured twice at this size (its first job is cold, and a prior that never gets a
 * CPU part would never be corrected), none for a layer latched off, else the cost model. */
void hmoe_hyb_split_decide(const struct hmoe_sched_hybrid *h, int il, int n, int nu, int n0, const int *cand, int m,
                           int *cpu, int *gpu, struct hmoe_sched_count_split *cs) {
    const int c = size_class(n);
    const struct hyb_plan_rates *r = &h->plan_r[c];
    const struct hyb_count_layer *q = &h->cnt_l[(size_t)il * HYB_PLAN_CLASSES + (size_t)c];
    const struct hyb_plan_layer *pl = &h->plan_l[(size_t)il * HYB_PLAN_CLASSES + (size_t)c];
    const double copy = stream_ms(h, il), gbps = h->h2d_probe_gbps > 1 ? h->h2d_probe_gbps : 20.0;
    /* the GPU's part without candidates: the layer's measured value, but not more than its first
     * chunk's copies while it rests on fewer than two samples (the first is cold: at pp4096 the
     * first call's cold samples ran to 30 ms and handed one layer 94 CPU experts, the GPU waited
     * 38 ms), and at most 1.25 x the layers' median of the last micro-batch */
    double gpu_est = q->samples > 0 ? q->gpu_ms : n0 * copy;
    if (q->samples < 2) gpu_est = HMOE_MIN(gpu_est, n0 * copy);
    if (h->cnt_med[c] > 0) gpu_est = HMOE_MIN(gpu_est, COUNT_MED_CAP * h->cnt_med[c]);
    static const double floors[3] = {0.0, 0.01, 0.001};
    double fit[3];
    hmoe_sched_cost_fit_get(&h->cnt_fit[c], floors, fit);
    struct hmoe_sched_count_model cm = {
        .start_ms = r->n > 0 ? r->fixed_ms : 0.35,
        .job_ms = fit[0],
        .expert_ms = fit[1],
        .pair_ms = fit[2],
        .gpu_ms = gpu_est,
        .copy_ms = copy,
        .add_ms = r->add_ms > 0 ? r->add_ms : (double)n * (double)h->d * 4.0 / (gbps * 1e6),
        .max_cpu = -1,
        .force_cpu = h->split_share >= 0 ? (int)lround(h->split_share * nu) : -1,
    };
    const double gpu_all = cm.gpu_ms + copy * m;
    cm.margin_ms = SPLIT_MARGIN_MS + SPLIT_MARGIN_REL * gpu_all + HMOE_MIN(COUNT_WAIT_CAP, q->wait_ms);
    cm.min_gain_ms = HMOE_MAX(SPLIT_MIN_GAIN * gpu_all, COUNT_MIN_GAIN_MS);
    if (h->split_share < 0 && h->cnt_fit[c].n < 2) cm.force_cpu = SPLIT_PROBE_MIN;
    if (h->split_share < 0 && pl->off) cm.force_cpu = 0;
    hmoe_sched_split_by_count(&cm, cand, m, h->cnt_tok, cpu, gpu, cs);
}

/* What streamed layer il's split did (cs from hmoe_hyb_split_decide; first[0..n0) the prefetched
 * chunk, idle: the copy engine had run dry when the counts came): the set's measurement, read back
 * by hmoe_hyb_split_collect, and the micro-batch's statistics. */
void hmoe_hyb_split_record(struct hmoe_sched_hybrid *h, int il, int n, int nu, int n0, const int *first,
                           const struct hmoe_sched_count_split *cs, const int *cpu, const int *gpu, bool idle) {
    const int E = h->E;
    const struct hyb_plan_layer *pl = &h->plan_l[(size_t)il * HYB_PLAN_CLASSES + (size_t)size_class(n)];
    h->sp_meas[h->sp_set] = (struct hyb_split_meas){.pending = true, .n = n, .ns = n0 + cs->n_gpu, .nc = cs->n_cpu,
                                                    .ncached = E - nu, .il = il, .n0 = n0, .n_after = cs->n_gpu,
                                                    .pairs = cs->cpu_pairs};
    struct hyb_split_acc *a = &h->sp_batch;
    if (!a->layers || (uint64_t)cs->n_cpu < a->nc_min) a->nc_min = (uint64_t)cs->n_cpu;
    a->nc_max = HMOE_MAX(a->nc_max, (uint64_t)cs->n_cpu);
    if (h->split_share < 0 && pl->off) a->off_layers++;
    a->layers++;
    a->nc += (uint64_t)cs->n_cpu;
    a->ns += (uint64_t)(n0 + cs->n_gpu);
    a->ncached += (uint64_t)(E - nu);
    a->n0 += (uint64_t)n0;
    for (int i = 0; i < n0; i++) a->n0_unused += h->cnt_tok[first[i]] == 0;
    a->nskip += (uint64_t)cs->n_skip;
    a->pairs += cs->cpu_pairs;
    a->idle += idle;
    /* lightest first: no CPU expert has more tokens than an expert streamed after the counts */
    if (cs->n_cpu > 0 && cs->n_gpu > 0 && h->cnt_tok[cpu[cs->n_cpu - 1]] > h->cnt_tok[gpu[cs->n_gpu - 1]]) a->light_bad++;
    if (cs->n_cpu > 0) {
        a->pred_cpu_ms += cs->cpu_end_ms;
        a->pred_gpu_ms += cs->gpu_end_ms;
    }
}

