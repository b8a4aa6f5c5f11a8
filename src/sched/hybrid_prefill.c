/* hybrid_prefill.c — prefill of a layer whose experts live in RAM (sched.h). Micro-batches of at
 * least the break-even size run on the GPU: the experts already in the layer's VRAM cache slots
 * straight from there, the others streamed in chunks of up to 32 experts through two VRAM
 * staging buffers: the copy of chunk c+1 (second stream, waiting until the buffer's previous
 * chunk was consumed) overlaps the grouped GEMMs of chunk c (compute stream, waiting for its
 * copy). Each group renumbers the routed ids into its experts (others -1), builds the expert
 * plan, runs gate/up and down, and adds its weighted share into x. Smaller batches go to CPU
 * threads (hmoe_sched_moe_ffn on the normalised rows copied back). The decode cache is only read.
 * Split (issue #6): CPU threads compute the LAST n_cpu uncached experts of a streamed layer at the
 * same time, from the GPU's routing (rows, ids, weights copied to page-locked memory on a side
 * stream; never re-routed, so a token keeps exactly its k experts). The CPU job is a host function
 * queued on that side stream, so the calling thread never waits for it and keeps queueing the next
 * layers' copies (a first version ran the job on the calling thread: the copy engine then starved
 * and pp512 fell by 3-12 %, bench/gpu_results.md); the GPU waits for the job's event after its own
 * groups and adds the sum straight from mapped host memory. n_cpu: HMOE_PREFILL_CPU_SHARE, else
 * (the default) planned per layer and micro-batch size class from MEASURED times
 * (hmoe_sched_split_plan): the CPU part only has the GPU's own work after the router (the window:
 * the cached group and the streamed chunks, copy waits included), so events give the window, host
 * stamps the CPU's rate, and the CPU aims to end just before the GPU's groups; a layer where that
 * does not pay, or where a split measured no faster, streams everything (gpu_results.md, hybpf2).
 * A layer's n_cpu is fixed when its first chunk is prefetched.
 */
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sched/hybrid_impl.h"

/* Experts of layer il without a VRAM cache slot, ascending: the ones a prefill must stream. */
static int uncached(const struct hmoe_sched_hybrid *h, int il, int *list) {
    const int32_t *map = hmoe_sched_cache_map(h->cache, il);
    int n = 0;
    for (int e = 0; e < h->E; e++)
        if (!h->L[il].n_slots || map[e] < 0) list[n++] = e;
    return n;
}

#define SPLIT_EWMA 0.3      /* weight of a new sample in the measured CPU rates */
#define SPLIT_W_EWMA 0.5    /* ... in a layer's window and plain layer time (few samples per run) */
#define SPLIT_PROBE_DIV 16  /* until the CPU was measured at a batch size it takes nu / 16 experts */
#define SPLIT_PROBE_MIN 2   /* (at least 2) in the layers queued before the first measurement */
#define SPLIT_MIN_GAIN 0.02 /* a split must save this share of the layer, else none */
#define SPLIT_MARGIN_MS 0.03 /* the CPU aims to end this much + SPLIT_MARGIN_REL of the window early */
#define SPLIT_MARGIN_REL 0.05
#define SPLIT_DAMPING 0.5   /* share of the way to a larger plan taken per measurement */
#define SPLIT_W_CAP 1.25    /* a layer's window counts at most this x the micro-batch's median */

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

/* How many of layer il's nu uncached experts the CPU computes for a micro-batch of n tokens: the
 * forced share; else a few to measure the CPU at this size class (until two layers were timed: the
 * first sample is cold); else the layer's plan (0 until its window was measured, and for a layer
 * latched off). */
static int plan_cpu(const struct hmoe_sched_hybrid *h, int il, int n, int nu) {
    if (!h->split_on || nu <= 0) return 0;
    if (h->split_share >= 0) return HMOE_MIN(nu, (int)lround(h->split_share * nu));
    const int c = size_class(n);
    if (h->plan_r[c].n < 2) return HMOE_MIN(nu, HMOE_MAX(SPLIT_PROBE_MIN, nu / SPLIT_PROBE_DIV));
    const struct hyb_plan_layer *p = &h->plan_l[(size_t)il * HYB_PLAN_CLASSES + (size_t)c];
    if (p->off || p->samples == 0 || !(p->plan > 0)) return 0;
    return HMOE_MIN(nu, (int)floor(p->plan + 1e-9));
}

/* Queue the copy of chunk c of the ns streamed experts of layer il (its first ns uncached ones)
 * into staging buffer b (after its last reader) and of the chunk's expert map; runs of
 * consecutive experts go as one copy per tensor. */
static enum hmoe_status enqueue_copy(struct hmoe_sched_hybrid *h, int il, int c, int b, int ns, struct hmoe_err *err) {
    const struct hmoe_moe_weights *w = &h->moe[il];
    int list[HYB_MAX_EXPERT];
    uncached(h, il, list);
    const int nu = ns, first = c * h->chunk_experts;
    const int cnt = HMOE_MIN(nu - first, h->chunk_experts);
    const size_t E = (size_t)h->E, row = ((size_t)il * (size_t)h->n_chunks + (size_t)c) * E;
    int32_t *map = h->chunk_host + row;
    for (int e = 0; e < h->E; e++) map[e] = -1;
    for (int i = 0; i < cnt; i++) map[list[first + i]] = i;
    enum hmoe_status st = hmoe_cuda_stream_wait_event(h->fill_stream, h->ev_used[b], err);
    if (!st) st = hmoe_cuda_memcpy_async(h->d_chunk_map + row, map, E * sizeof(int32_t), h->fill_stream, err);
    uint8_t *base = h->stage[b].ptr;
    const size_t gb = (w->gate.mat_bytes * (size_t)cnt + 255) / 256 * 256;
    const size_t ub = (w->up.mat_bytes * (size_t)cnt + 255) / 256 * 256;
    const struct {
        const struct hmoe_mat *m;
        uint8_t *dst;
    } parts[3] = {{&w->gate, base}, {&w->up, base + gb}, {&w->down, base + gb + ub}};
    for (int i = 0; i < cnt && !st;) {
        int j = i + 1;
        while (j < cnt && list[first + j] == list[first + j - 1] + 1) j++;
        const int e0 = list[first + i];
        for (int p = 0; p < 3 && !st; p++)
            st = hmoe_cuda_memcpy_async(parts[p].dst + (size_t)i * parts[p].m->mat_bytes,
                                        (const uint8_t *)parts[p].m->data + (size_t)e0 * parts[p].m->mat_bytes,
                                        parts[p].m->mat_bytes * (size_t)(j - i), h->fill_stream, err);
        i = j;
    }
    if (!st) st = hmoe_cuda_event_record(h->ev_copy[b], h->fill_stream, err);
    h->sg[b] = (struct hmoe_cuda_experts){.type = w->gate.type, .w = base, .row_bytes = w->gate.row_bytes,
                                          .expert_stride_bytes = w->gate.mat_bytes, .nrows = w->gate.n_out,
                                          .ncols = w->gate.n_in, .n_expert = HMOE_MAX(cnt, 1)};
    h->su[b] = h->sg[b];
    h->su[b].type = w->up.type;
    h->su[b].w = base + gb;
    h->sd[b] = (struct hmoe_cuda_experts){.type = w->down.type, .w = base + gb + ub, .row_bytes = w->down.row_bytes,
                                          .expert_stride_bytes = w->down.mat_bytes, .nrows = w->down.n_out,
                                          .ncols = w->down.n_in, .n_expert = HMOE_MAX(cnt, 1)};
    h->stream_experts_total += (uint64_t)cnt;
    h->stream_bytes_total += (uint64_t)cnt * (w->gate.mat_bytes + w->up.mat_bytes + w->down.mat_bytes);
    return st;
}

/* Grouped MoE of the experts in `gate/up/down` (n_expert of them), ids renumbered through d_map. */
static enum hmoe_status grouped(struct hmoe_sched_hybrid *h, int il, int n, const struct hmoe_sched_moe_bufs *b,
                                const int32_t *d_map, const struct hmoe_cuda_experts *gate, const void *up_w,
                                const struct hmoe_cuda_experts *down, void *stream, struct hmoe_err *err) {
    const int k = h->k, cnt = (int)gate->n_expert;
    const int64_t d = h->d, F = h->moe[il].gate.n_out;
    enum hmoe_status st = hmoe_cuda_moe_map_ids(b->ids, (int64_t)n * k, d_map, h->E, b->ids_mapped, stream, err);
    if (!st) st = hmoe_cuda_moe_plan_build(b->ids_mapped, n, k, cnt, b->plan, stream, err);
    struct hmoe_cuda_gemm_args gu = {.w = *gate, .w_up = up_w, .x = b->h16, .x_stride = d, .ntok = n, .plan = b->plan,
                                     .k = k, .x_gather = true, .y_f16 = b->z16, .y_stride = F};
    if (!st) st = hmoe_cuda_gemm(&gu, stream, err);
    struct hmoe_cuda_gemm_args dn = {.w = *down, .x = b->z16, .x_stride = F, .ntok = n, .plan = b->plan, .k = k,
                                     .x_gather = false, .y_f32 = b->ye, .y_stride = d};
    if (!st) st = hmoe_cuda_gemm(&dn, stream, err);
    if (!st) st = hmoe_cuda_moe_combine(b->plan, b->ye, d, b->wts, n, k, cnt, d, b->x, d, stream, err);
    return st;
}

/* Start the copy of the first chunk of the next RAM layer after il that streams anything into
 * buffer `buf`, fixing that layer's CPU part now (the chunk's experts depend on it). */
static enum hmoe_status prefetch_next_layer(struct hmoe_sched_hybrid *h, int il, int n, int buf, struct hmoe_err *err) {
    int list[HYB_MAX_EXPERT];
    for (int nl = il + 1; nl < h->n_layer; nl++) {
        if (!h->L[nl].ram) continue;
        const int nu = uncached(h, nl, list), ncpu = plan_cpu(h, nl, n, nu);
        if (nu - ncpu <= 0) continue;
        enum hmoe_status st = enqueue_copy(h, nl, 0, buf, nu - ncpu, err);
        h->pf_valid = true;
        h->pf_layer = nl;
        h->pf_chunk = 0;
        h->pf_buf = buf;
        h->pf_ncpu = ncpu;
        return st;
    }
    return HMOE_OK;
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
}

/* A measured time into its running estimate: the first sample of a process or size class is cold
 * (lazy kernel loads, thread start, first touches: up to 10x the steady value on the H200) and is
 * replaced by the second; then an EWMA of weight w, or, with fast_down, a lower sample at once. */
static void track(double *est, int n_before, double sample, double w, bool fast_down) {
    if (n_before <= 1 || (fast_down && sample < *est)) *est = sample;
    else *est = (1 - w) * *est + w * sample;
}

/* One measured layer (times from the router's end, ms): t3 its GPU groups done; with a CPU part
 * t4 the CPU done, t5 the sum added, job_ms the CPU job itself. Updates the size class's CPU
 * rates and the layer's window and plain time; its plan is made at the end of the micro-batch
 * (plan_batch), when every layer's window is known. */
static void plan_update(struct hmoe_sched_hybrid *h, const struct hyb_split_meas *m, double t3, double t4, double t5,
                        double job_ms) {
    const int c = size_class(m->n);
    struct hyb_plan_rates *r = &h->plan_r[c];
    struct hyb_plan_layer *p = &h->plan_l[(size_t)m->il * HYB_PLAN_CLASSES + (size_t)c];
    struct hyb_split_acc *a = &h->sp_batch;
    const double tg = stream_ms(h, m->il);
    const double wait = m->nc > 0 ? HMOE_MAX(0.0, t4 - t3) : 0.0;
    if (m->nc > 0) {
        const double fixed = HMOE_MAX(0.0, t4 - job_ms), add = HMOE_MAX(0.0, t5 - HMOE_MAX(t3, t4));
        if (r->cpu_tok > 0) r->cpu_ms *= m->n / r->cpu_tok; /* the estimate at this batch size */
        track(&r->cpu_ms, r->n, job_ms / m->nc, SPLIT_EWMA, false);
        track(&r->fixed_ms, r->n, fixed, SPLIT_EWMA, false);
        track(&r->add_ms, r->n, add, SPLIT_EWMA, false);
        r->cpu_tok = m->n;
        r->n++;
        a->cpu_layers++;
        a->wait_ms += wait;
        a->fixed_ms += fixed;
        a->add_ms += add;
        h->r_cpu_ms = r->cpu_ms;
        h->r_cpu_tok = r->cpu_tok;
    }
    /* moving an expert off the stream shortens the GPU's part by about its copy: the window with
     * everything streamed; any error in that slope only slows the convergence to t4 = t3 - margin.
     * A lower window is taken at once (a high one is a cold or disturbed layer). */
    const double w0 = t3 + m->nc * tg;
    track(&p->w0_ms, p->samples, w0, SPLIT_W_EWMA, true);
    a->window_ms += w0;
    if (h->sp_w0n < h->n_layer) h->sp_w0s[h->sp_w0n++] = w0;
    if (m->nc == 0) {
        track(&p->l0_ms, p->l0_samples, t3, SPLIT_W_EWMA, true);
        p->l0_samples++;
    } else if (h->split_share < 0 && p->l0_ms > 0 && wait <= 0) {
        /* the CPU was in time, yet the layer is not faster than without it: a clear loss latches
         * the layer off at once, a gain under half the threshold twice in a row */
        if (t5 >= p->l0_ms) p->strikes = 2;
        else if (t5 > p->l0_ms * (1 - SPLIT_MIN_GAIN / 2)) p->strikes++;
        else p->strikes = 0;
        if (p->strikes >= 2) p->off = true;
    }
    p->samples++;
    p->pending = true;
    p->last_nc = m->nc;
    p->last_wait_ms = wait;
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The end of a micro-batch of n tokens: the plan of every layer measured in it. A layer's window
 * counts at most SPLIT_W_CAP x the batch's median window, at most the median while it has a
 * single sample (one cold or disturbed layer must not
 * hand the CPU a part it cannot finish: the first H200 run of this planner gave one layer 26
 * experts from a 40 ms first-pass window and the GPU waited 19 ms); a layer whose GPU waited
 * longer for the CPU than the split could save gets at most half its last part. */
static void plan_batch(struct hmoe_sched_hybrid *h, int n) {
    const int c = size_class(n);
    const struct hyb_plan_rates *r = &h->plan_r[c];
    double median = 0;
    if (h->sp_w0n > 0) {
        qsort(h->sp_w0s, (size_t)h->sp_w0n, sizeof *h->sp_w0s, cmp_double);
        median = h->sp_w0s[h->sp_w0n / 2];
    }
    h->sp_w0n = 0;
    const double gbps = h->h2d_probe_gbps > 1 ? h->h2d_probe_gbps : 20.0;
    int list[HYB_MAX_EXPERT];
    for (int il = 0; il < h->n_layer; il++) {
        struct hyb_plan_layer *p = &h->plan_l[(size_t)il * HYB_PLAN_CLASSES + (size_t)c];
        if (!p->pending) continue;
        p->pending = false;
        if (h->split_share >= 0 || !h->L[il].ram) continue;
        /* none without two CPU samples (the first is cold) or for a layer latched off; a layer
         * with a single window sample (the first pass, maybe cold) gets at most the median */
        if (p->off || r->n < 2 || !(r->cpu_ms > 0)) {
            p->plan = 0;
            continue;
        }
        const double cap = median * (p->samples < 2 ? 1.0 : SPLIT_W_CAP), tg = stream_ms(h, il);
        const double w = cap > 0 ? HMOE_MIN(p->w0_ms, cap) : p->w0_ms;
        const struct hmoe_sched_split_plan_in in = {
            .window_ms = w,
            .fixed_ms = r->fixed_ms,
            .cpu_ms = r->cpu_ms * n / r->cpu_tok,
            .stream_ms = tg,
            /* before the first add was timed: its read of the sum over PCIe */
            .add_ms = r->add_ms > 0 ? r->add_ms : (double)n * (double)h->d * 4.0 / (gbps * 1e6),
            .layer_ms = p->l0_ms,
            .margin_ms = SPLIT_MARGIN_MS + SPLIT_MARGIN_REL * w,
            .min_gain = SPLIT_MIN_GAIN,
            .damping = SPLIT_DAMPING,
            .prev = p->plan,
            .nu = uncached(h, il, list),
        };
        double plan = hmoe_sched_split_plan(&in);
        /* a layer's first plan rests on one window sample, from the warm-up pass whose windows all
         * run long (cold copies: 8.7 ms against 6.2-6.3 ms later at 2 GiB), so the median cap does
         * not help: it starts at half the target and grows by damping. Taken at once it
         * overshot on the H200 (26 CPU experts at 2 GiB, the GPU waited 2.3 ms per layer; 9.4
         * at 10 GiB, 1.2 ms) where the steady plans were 14-16 and 3-4. */
        if (!(p->plan > 0) && p->samples < 2) plan = floor(plan * SPLIT_DAMPING);
        if (p->last_nc > 0 && p->last_wait_ms > p->last_nc * tg) plan = HMOE_MIN(plan, floor(p->last_nc / 2.0));
        p->plan = plan;
    }
}

/* Wait for an event without spinning a core: the CPU job's thread team needs all of them (the
 * CUDA runtime's blocking wait spins when there are more cores than GPUs). */
static enum hmoe_status wait_event(void *ev, struct hmoe_err *err) {
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
static enum hmoe_status collect(struct hmoe_sched_hybrid *h, int set, struct hmoe_err *err) {
    struct hyb_split_meas *m = &h->sp_meas[set];
    if (!m->pending) return HMOE_OK;
    m->pending = false;
    void **ev = h->ev_sp[set];
    enum hmoe_status st = wait_event(ev[3], err);
    if (!st && m->nc > 0) st = wait_event(ev[4], err);
    if (!st && m->nc > 0) st = wait_event(h->ev_sp_end[set], err);
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
    plan_update(h, m, t3, t4, t5, job_ms);
    if (m->ns > 0) ewma(&h->r_gpu_ms, stream_part / m->ns);
    if (m->ncached > 0) ewma(&h->r_cached_ms, cached_ms / m->ncached);
    h->sp_batch.gpu_layers++;
    h->sp_batch.gpu_ms += t3;
    h->sp_batch.gpu_stream_ms += stream_part;
    return HMOE_OK;
}

/* HMOE_MOE_TIMING=1: where the CPU jobs of this micro-batch spent their time (moe_cpu.c's phases),
 * per call and per expert; only read here, after the batch's events, so no job is running. */
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
static enum hmoe_status end_batch(struct hmoe_sched_hybrid *h, int n, struct hmoe_err *err) {
    enum hmoe_status st = collect(h, 1 - h->sp_set, err);
    if (!st) st = collect(h, h->sp_set, err);
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
        acc_add(&h->sp_total, a);
        log_cpu_phases(h);
    }
    if (!st) plan_batch(h, n);
    h->sp_w0n = 0;
    memset(a, 0, sizeof *a);
    return st;
}

/* The CPU job (a host function on the side stream, after the routing's copy): the layer's
 * experts of the set's mask for the GPU's routing, into the mapped sum. No CUDA calls here. */
static void cpu_job(void *arg) {
    struct hyb_split_job *j = arg;
    struct hmoe_sched_hybrid *h = j->h;
    j->err = (struct hmoe_err){0};
    j->t0_ns = hmoe_hyb_now_ns();
    j->st = hmoe_sched_moe_ffn_subset(h->cpu_moe, &h->moe[j->il], h->sp_h, j->n, h->sp_ids, h->sp_wts, j->mask, h->sp_out,
                                      &j->err);
    j->t1_ns = hmoe_hyb_now_ns();
}

/* Queue the CPU part of a split layer on the side stream: the rows and routing to the host once
 * the router is done (event ev[0]), then the job computing the experts list[ns..nu). */
static enum hmoe_status queue_cpu_part(struct hmoe_sched_hybrid *h, int il, int n, const int *list, int ns, int nu,
                                       const struct hmoe_sched_moe_bufs *b, void **ev, struct hmoe_err *err) {
    const int set = h->sp_set;
    uint8_t *mask = h->sp_mask + (size_t)set * (size_t)h->E;
    memset(mask, 0, (size_t)h->E);
    for (int i = ns; i < nu; i++) mask[list[i]] = 1;
    h->sp_job[set] = (struct hyb_split_job){.h = h, .il = il, .n = n, .mask = mask};
    const size_t nk = (size_t)n * (size_t)h->k;
    void *s = h->sp_stream;
    enum hmoe_status st = hmoe_cuda_stream_wait_event(s, ev[0], err);
    if (!st) st = hmoe_cuda_memcpy_async(h->sp_h, b->hf, (size_t)n * (size_t)h->d * sizeof(float), s, err);
    if (!st) st = hmoe_cuda_memcpy_async(h->sp_ids, b->ids, nk * sizeof(int32_t), s, err);
    if (!st) st = hmoe_cuda_memcpy_async(h->sp_wts, b->wts, nk * sizeof(float), s, err);
    if (!st) st = hmoe_cuda_event_record(ev[1], s, err);
    if (!st) st = hmoe_cuda_launch_host_fn(s, cpu_job, &h->sp_job[set], err);
    if (!st) st = hmoe_cuda_event_record(ev[4], s, err);
    return st;
}

static enum hmoe_status prefill_stream(struct hmoe_sched_hybrid *h, int il, int n, const struct hmoe_sched_moe_bufs *b,
                                       void *stream, struct hmoe_err *err) {
    const struct hyb_layer *L = &h->L[il];
    int list[HYB_MAX_EXPERT];
    const int nu = uncached(h, il, list);
    const bool pre = h->pf_valid && h->pf_layer == il && h->pf_chunk == 0;
    const int ncpu = pre ? h->pf_ncpu : plan_cpu(h, il, n, nu), ns = nu - ncpu;
    const int nch = (ns + h->chunk_experts - 1) / h->chunk_experts;
    const bool timed = h->split_on && nu > 0;
    enum hmoe_status st = HMOE_OK;
    void **ev = NULL;
    if (timed) {
        h->sp_set ^= 1;
        /* the layer before the previous one used this set: its groups and CPU job are done or
         * about to be (this also keeps the calling thread at most two split layers ahead) */
        st = collect(h, h->sp_set, err);
        ev = h->ev_sp[h->sp_set];
        if (!st) st = hmoe_cuda_event_record(ev[0], stream, err);
    }
    /* the CPU's part runs beside the GPU's groups */
    if (!st && ncpu > 0) st = queue_cpu_part(h, il, n, list, ns, nu, b, ev, err);
    /* the first chunk's copy is under way (or starts now) while the cached experts run */
    if (!st && nch > 0 && !pre) {
        h->pf_valid = true;
        h->pf_layer = il;
        h->pf_chunk = 0;
        h->pf_buf = 1 - h->last_buf;
        h->pf_ncpu = ncpu;
        st = enqueue_copy(h, il, 0, h->pf_buf, ns, err);
    }
    if (!st && L->n_slots > 0 && nu < h->E)
        st = grouped(h, il, n, b, h->d_slot_of + (size_t)il * h->E, &L->gate, L->up.w, &L->down, stream, err);
    if (!st && timed) st = hmoe_cuda_event_record(ev[2], stream, err);
    for (int c = 0; c < nch && !st; c++) {
        int buf;
        if (h->pf_valid && h->pf_layer == il && h->pf_chunk == c) {
            buf = h->pf_buf;
        } else {
            buf = 1 - h->last_buf;
            st = enqueue_copy(h, il, c, buf, ns, err);
        }
        h->pf_valid = false;
        h->last_buf = buf;
        if (!st) st = hmoe_cuda_stream_wait_event(stream, h->ev_copy[buf], err);
        const size_t row = ((size_t)il * (size_t)h->n_chunks + (size_t)c) * (size_t)h->E;
        if (!st) st = grouped(h, il, n, b, h->d_chunk_map + row, &h->sg[buf], h->su[buf].w, &h->sd[buf], stream, err);
        if (!st) st = hmoe_cuda_event_record(h->ev_used[buf], stream, err);
        /* Start the next chunk's copy into the other buffer: this layer's next chunk, else the
         * first chunk of the next RAM layer that streams anything (it overlaps this layer's rest
         * and the next attention). */
        if (st) break;
        if (c + 1 < nch) {
            st = enqueue_copy(h, il, c + 1, 1 - buf, ns, err);
            h->pf_valid = true;
            h->pf_layer = il;
            h->pf_chunk = c + 1;
            h->pf_buf = 1 - buf;
        } else {
            st = prefetch_next_layer(h, il, n, 1 - buf, err);
        }
    }
    /* a layer the CPU takes whole still lets the next streaming layer's first chunk start now */
    if (!st && nch == 0 && ncpu > 0 && !h->pf_valid) st = prefetch_next_layer(h, il, n, 1 - h->last_buf, err);
    if (!st && timed) st = hmoe_cuda_event_record(ev[3], stream, err);
    /* after its own groups the GPU waits for the CPU's sum and adds it from mapped memory */
    if (!st && ncpu > 0) st = hmoe_cuda_stream_wait_event(stream, ev[4], err);
    if (!st && ncpu > 0) st = hmoe_cuda_add(b->x, h->sp_out, (int64_t)n * h->d, b->x, stream, err);
    if (!st && ncpu > 0) st = hmoe_cuda_event_record(h->ev_sp_end[h->sp_set], stream, err);
    if (st) return st;
    if (timed) {
        h->sp_meas[h->sp_set] =
            (struct hyb_split_meas){.pending = true, .n = n, .ns = ns, .nc = ncpu, .ncached = h->E - nu, .il = il};
        struct hyb_split_acc *a = &h->sp_batch;
        if (!a->layers || (uint64_t)ncpu < a->nc_min) a->nc_min = (uint64_t)ncpu;
        a->nc_max = HMOE_MAX(a->nc_max, (uint64_t)ncpu);
        if (h->split_share < 0 && h->plan_l[(size_t)il * HYB_PLAN_CLASSES + (size_t)size_class(n)].off) a->off_layers++;
        a->layers++;
        a->nc += (uint64_t)ncpu;
        a->ns += (uint64_t)ns;
        a->ncached += (uint64_t)(h->E - nu);
    }
    if (h->split_on && il == h->last_ram) st = end_batch(h, n, err);
    return st;
}

static enum hmoe_status prefill_cpu(struct hmoe_sched_hybrid *h, int il, int n, const struct hmoe_sched_moe_bufs *b,
                                    void *stream, struct hmoe_err *err) {
    const size_t bytes = (size_t)n * (size_t)h->d * sizeof(float);
    enum hmoe_status st = hmoe_cuda_memcpy_async(h->pf_h, b->hf, bytes, stream, err);
    if (!st) st = hmoe_cuda_stream_sync(stream, err);
    if (!st) st = hmoe_sched_moe_ffn(h->cpu_moe, &h->moe[il], h->pf_h, n, h->pf_out, err);
    if (st) return st;
    const int32_t *sel = hmoe_sched_moe_last_selection(h->cpu_moe);
    for (int i = 0; i < n * h->k; i++)
        if (sel[i] >= 0 && sel[i] < h->E) h->counts[(size_t)il * h->E + (size_t)sel[i]]++;
    /* b->ye ([n*k][d] floats) is free between layers: the result's landing place on the device */
    st = hmoe_cuda_memcpy_async(b->ye, h->pf_out, bytes, stream, err);
    if (!st) st = hmoe_cuda_add(b->x, b->ye, (int64_t)n * h->d, b->x, stream, err);
    return st;
}

enum hmoe_status hmoe_sched_hybrid_prefill(struct hmoe_sched_hybrid *h, int il, int n, const struct hmoe_sched_moe_bufs *b,
                                           void *stream, struct hmoe_err *err) {
    if (n > h->n_ub || !h->pf_h)
        return HMOE_RAISE(err, HMOE_ERR_INTERNAL, "hybrid prefill: %d tokens exceed the %d-token buffers", n, h->n_ub);
    if (h->stream && n >= h->stream_min) return prefill_stream(h, il, n, b, stream, err);
    h->pf_valid = false;
    return prefill_cpu(h, il, n, b, stream, err);
}
