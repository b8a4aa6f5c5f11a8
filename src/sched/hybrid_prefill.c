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
 * A layer's n_cpu is fixed when its first chunk is prefetched (HMOE_PREFILL_SPLIT=index).
 * Split by count (HMOE_PREFILL_SPLIT=count): a layer's first chunk (half its uncached experts, at
 * most a chunk: those with the most tokens in earlier micro-batches) is still prefetched during the
 * previous layer; after the router the host reads the routed ids (side stream, polled) while the GPU
 * runs the cached group and that chunk, counts tokens per expert and, for the other uncached
 * experts, skips those without tokens, gives CPU threads the lightest by a cost model (split_count.c:
 * start + job + per expert + per pair, fitted online from the jobs' host stamps; the GPU's part
 * from events) and streams the rest heaviest first (a streamed expert costs its copy whatever its
 * tokens, a CPU expert mostly per token).
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

/* Queue the copy of the cnt experts list[0..cnt) (ascending: runs of consecutive experts go as
 * one copy per tensor) of layer il as its chunk c into staging buffer b (after its last reader),
 * and of the chunk's expert map. */
static enum hmoe_status enqueue_copy_list(struct hmoe_sched_hybrid *h, int il, int c, int b, const int *list, int cnt,
                                          struct hmoe_err *err) {
    const struct hmoe_moe_weights *w = &h->moe[il];
    const size_t E = (size_t)h->E, row = ((size_t)il * (size_t)h->n_chunks + (size_t)c) * E;
    int32_t *map = h->chunk_host + row;
    for (int e = 0; e < h->E; e++) map[e] = -1;
    for (int i = 0; i < cnt; i++) map[list[i]] = i;
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
        while (j < cnt && list[j] == list[j - 1] + 1) j++;
        const int e0 = list[i];
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

/* Chunk c of the ns streamed experts of layer il in index mode: its first ns uncached ones. */
static enum hmoe_status enqueue_copy(struct hmoe_sched_hybrid *h, int il, int c, int b, int ns, struct hmoe_err *err) {
    int list[HYB_MAX_EXPERT];
    uncached(h, il, list);
    const int first = c * h->chunk_experts;
    return enqueue_copy_list(h, il, c, b, list + first, HMOE_MIN(ns - first, h->chunk_experts), err);
}

static void sort_ints(int *a, int n) {
    for (int i = 1; i < n; i++) {
        const int v = a[i];
        int j = i - 1;
        while (j >= 0 && a[j] > v) a[j + 1] = a[j], j--;
        a[j + 1] = v;
    }
}

/* Count mode: the first chunk of layer il, copied before its routing is known: the uncached
 * experts list[] with the most tokens in earlier micro-batches (by index while there is no
 * history), ascending, into first; returns how many: those with tokens in the last micro-batches
 * (history >= COUNT_HIST_USED), at least COUNT_FIRST_MIN (its copies, ~0.05 ms each at 512 tokens,
 * cover the host's round trip after the router), at most a chunk and half the layer (the other half
 * is left to the counts). The H200's first call prefetched half the layer: at 14 GiB nearly all
 * of those 14 had no tokens (the synthetic file routes to low ids; the cache holds the low ids). */
#define COUNT_FIRST_MIN 8
#define COUNT_HIST_USED 0.5f
static int predict_first(const struct hmoe_sched_hybrid *h, int il, const int *list, int nu, int *first) {
    const float *hist = h->cnt_hist + (size_t)il * (size_t)h->E;
    int hot = 0;
    for (int j = 0; j < nu; j++) hot += hist[list[j]] >= COUNT_HIST_USED;
    const int n0 = HMOE_MIN(HMOE_MIN(h->chunk_experts, (nu + 1) / 2), HMOE_MAX(COUNT_FIRST_MIN, hot));
    uint8_t taken[HYB_MAX_EXPERT] = {0};
    for (int i = 0; i < n0; i++) {
        int best = -1;
        for (int j = 0; j < nu; j++)
            if (!taken[j] && (best < 0 || hist[list[j]] > hist[list[best]])) best = j;
        taken[best] = 1;
        first[i] = list[best];
    }
    sort_ints(first, n0);
    return n0;
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
        if (h->split_count) {
            const int nu = uncached(h, nl, list);
            if (nu <= 0) continue;
            h->pf_n0 = predict_first(h, nl, list, nu, h->pf_first);
            enum hmoe_status st = enqueue_copy_list(h, nl, 0, buf, h->pf_first, h->pf_n0, err);
            h->pf_valid = true;
            h->pf_layer = nl;
            h->pf_chunk = 0;
            h->pf_buf = buf;
            h->pf_ncpu = 0;
            return st;
        }
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
        /* hybpf2's latch: a layer where the split measured slower than streaming its CPU experts
         * would have been (router -> sum added vs t3 + their copies), by more than the margin,
         * twice in a row (not on its first, cold visit), streams everything from then on */
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
    if (h->split_count) count_update(h, m, t3, t4, t5, job_ms);
    else plan_update(h, m, t3, t4, t5, job_ms);
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
        if (h->split_count) {
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

/* Priors of the CPU job's cost fit (ms; 16 threads with AMX on the H200 host, while the copy
 * engine streams): fixed part per micro-batch of n tokens, per expert, per (token, expert) pair.
 * From bench_moe_subset (gpu_results.md, cpujob: 0.57 ms + 0.199 ms per 32-token expert on the CPU
 * alone; +10-30 % beside a DMA stream) and the split's jobs (7-8 us per pair at ~100 tokens). */
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

/* Count mode: the layer's CPU part, experts cpu[0..nc), as the CPU job on the side stream (the rows,
 * ids and weights are already on their way there). */
static enum hmoe_status queue_count_cpu(struct hmoe_sched_hybrid *h, int il, int n, const int *cpu, int nc, void **ev,
                                        struct hmoe_err *err) {
    const int set = h->sp_set;
    uint8_t *mask = h->sp_mask + (size_t)set * (size_t)h->E;
    memset(mask, 0, (size_t)h->E);
    for (int i = 0; i < nc; i++) mask[cpu[i]] = 1;
    h->sp_job[set] = (struct hyb_split_job){.h = h, .il = il, .n = n, .mask = mask};
    enum hmoe_status st = hmoe_cuda_launch_host_fn(h->sp_stream, cpu_job, &h->sp_job[set], err);
    if (!st) st = hmoe_cuda_event_record(ev[4], h->sp_stream, err);
    return st;
}

/* HMOE_PREFILL_SPLIT=count (split_on): a streamed RAM layer's first chunk (the experts predicted
 * heaviest, prefetched during the previous layer) and its cached group are queued before the
 * routing is known; the routed ids then come to the host (the copy engine still copies that
 * chunk), which counts tokens per expert: the other uncached experts without tokens are skipped,
 * CPU threads take the lightest by the cost model, the GPU streams the rest heaviest first. */
static enum hmoe_status prefill_count(struct hmoe_sched_hybrid *h, int il, int n, const struct hmoe_sched_moe_bufs *b,
                                      void *stream, struct hmoe_err *err) {
    const struct hyb_layer *L = &h->L[il];
    const int E = h->E, ce = h->chunk_experts;
    int list[HYB_MAX_EXPERT], first[HYB_MAX_EXPERT], cand[HYB_MAX_EXPERT], cpu[HYB_MAX_EXPERT], gpu[HYB_MAX_EXPERT];
    const int nu = uncached(h, il, list);
    h->sp_set ^= 1;
    /* the layer before the previous one used this set: its groups and CPU job are done or about
     * to be (this also keeps the calling thread at most two split layers ahead) */
    enum hmoe_status st = collect(h, h->sp_set, err);
    void **ev = h->ev_sp[h->sp_set];
    void *s = h->sp_stream;
    const size_t nk = (size_t)n * (size_t)h->k;
    /* the routing and rows to the host on the side stream, ids first (the host waits for them) */
    if (!st) st = hmoe_cuda_event_record(ev[0], stream, err);
    if (!st) st = hmoe_cuda_stream_wait_event(s, ev[0], err);
    if (!st) st = hmoe_cuda_memcpy_async(h->sp_ids, b->ids, nk * sizeof(int32_t), s, err);
    if (!st) st = hmoe_cuda_event_record(ev[1], s, err);
    /* (no CPU part with HMOE_PREFILL_CPU_SHARE=0: the rows stay on the device) */
    if (!st && h->split_share != 0) st = hmoe_cuda_memcpy_async(h->sp_wts, b->wts, nk * sizeof(float), s, err);
    if (!st && h->split_share != 0)
        st = hmoe_cuda_memcpy_async(h->sp_h, b->hf, (size_t)n * (size_t)h->d * sizeof(float), s, err);
    /* the first chunk: prefetched, or its copy starts now */
    int n0;
    if (h->pf_valid && h->pf_layer == il && h->pf_chunk == 0) {
        n0 = h->pf_n0;
        memcpy(first, h->pf_first, (size_t)n0 * sizeof *first);
    } else {
        n0 = predict_first(h, il, list, nu, first);
        h->pf_buf = 1 - h->last_buf;
        if (!st) st = enqueue_copy_list(h, il, 0, h->pf_buf, first, n0, err);
    }
    h->pf_valid = false;
    const int buf0 = h->pf_buf;
    if (!st && L->n_slots > 0 && nu < E)
        st = grouped(h, il, n, b, h->d_slot_of + (size_t)il * E, &L->gate, L->up.w, &L->down, stream, err);
    if (!st) st = hmoe_cuda_event_record(ev[2], stream, err);
    if (!st && n0 > 0) {
        h->last_buf = buf0;
        st = hmoe_cuda_stream_wait_event(stream, h->ev_copy[buf0], err);
        if (!st) st = grouped(h, il, n, b, h->d_chunk_map + (size_t)il * (size_t)h->n_chunks * (size_t)E, &h->sg[buf0],
                              h->su[buf0].w, &h->sd[buf0], stream, err);
        if (!st) st = hmoe_cuda_event_record(h->ev_used[buf0], stream, err);
    }
    /* the host waits for the routed ids (polling: no spinning core beside the CPU team) */
    if (!st) st = wait_event(ev[1], err);
    if (st) return st;
    /* the copy engine ran dry while the host waited: the first chunk was too small for the trip */
    const bool idle = n0 > 0 && hmoe_cuda_event_query(h->ev_copy[buf0]) > 0;
    memset(h->cnt_tok, 0, (size_t)E * sizeof *h->cnt_tok);
    for (size_t i = 0; i < nk; i++)
        if (h->sp_ids[i] >= 0 && h->sp_ids[i] < E) h->cnt_tok[h->sp_ids[i]]++;
    float *hist = h->cnt_hist + (size_t)il * (size_t)E;
    for (int e = 0; e < E; e++) hist[e] = 0.5f * hist[e] + (float)h->cnt_tok[e];
    /* candidates: the uncached experts not in the first chunk */
    uint8_t in0[HYB_MAX_EXPERT] = {0};
    for (int i = 0; i < n0; i++) in0[first[i]] = 1;
    int m = 0;
    for (int i = 0; i < nu; i++)
        if (!in0[list[i]]) cand[m++] = list[i];
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
    /* exactly the SPLIT_PROBE_MIN lightest until the CPU job was measured twice at this size (its
     * first job is cold, and a prior that never gets a CPU part would never be corrected); none
     * for a layer latched off */
    if (h->split_share < 0 && h->cnt_fit[c].n < 2) cm.force_cpu = SPLIT_PROBE_MIN;
    if (h->split_share < 0 && pl->off) cm.force_cpu = 0;
    struct hmoe_sched_count_split cs;
    hmoe_sched_split_by_count(&cm, cand, m, h->cnt_tok, cpu, gpu, &cs);
    if (cs.n_cpu > 0) st = queue_count_cpu(h, il, n, cpu, cs.n_cpu, ev, err);
    /* the rest streams in chunks behind the first one, the next layer's first chunk behind them */
    int buf = buf0;
    for (int at = 0, ch = 1; at < cs.n_gpu && !st; at += ce, ch++) {
        const int cnt = HMOE_MIN(ce, cs.n_gpu - at);
        int part[HYB_MAX_EXPERT];
        memcpy(part, gpu + at, (size_t)cnt * sizeof *part);
        sort_ints(part, cnt);
        buf = 1 - h->last_buf;
        st = enqueue_copy_list(h, il, ch, buf, part, cnt, err);
        h->last_buf = buf;
        const size_t row = ((size_t)il * (size_t)h->n_chunks + (size_t)ch) * (size_t)E;
        if (!st) st = hmoe_cuda_stream_wait_event(stream, h->ev_copy[buf], err);
        if (!st) st = grouped(h, il, n, b, h->d_chunk_map + row, &h->sg[buf], h->su[buf].w, &h->sd[buf], stream, err);
        if (!st) st = hmoe_cuda_event_record(h->ev_used[buf], stream, err);
    }
    if (!st) st = prefetch_next_layer(h, il, n, 1 - h->last_buf, err);
    if (!st) st = hmoe_cuda_event_record(ev[3], stream, err);
    /* after its own groups the GPU waits for the CPU's sum and adds it from mapped memory */
    if (!st && cs.n_cpu > 0) st = hmoe_cuda_stream_wait_event(stream, ev[4], err);
    if (!st && cs.n_cpu > 0) st = hmoe_cuda_add(b->x, h->sp_out, (int64_t)n * h->d, b->x, stream, err);
    if (!st && cs.n_cpu > 0) st = hmoe_cuda_event_record(h->ev_sp_end[h->sp_set], stream, err);
    if (st) return st;
    h->sp_meas[h->sp_set] = (struct hyb_split_meas){.pending = true, .n = n, .ns = n0 + cs.n_gpu, .nc = cs.n_cpu,
                                                    .ncached = E - nu, .il = il, .n0 = n0, .n_after = cs.n_gpu,
                                                    .pairs = cs.cpu_pairs};
    struct hyb_split_acc *a = &h->sp_batch;
    if (!a->layers || (uint64_t)cs.n_cpu < a->nc_min) a->nc_min = (uint64_t)cs.n_cpu;
    a->nc_max = HMOE_MAX(a->nc_max, (uint64_t)cs.n_cpu);
    if (h->split_share < 0 && pl->off) a->off_layers++;
    a->layers++;
    a->nc += (uint64_t)cs.n_cpu;
    a->ns += (uint64_t)(n0 + cs.n_gpu);
    a->ncached += (uint64_t)(E - nu);
    a->n0 += (uint64_t)n0;
    for (int i = 0; i < n0; i++) a->n0_unused += h->cnt_tok[first[i]] == 0;
    a->nskip += (uint64_t)cs.n_skip;
    a->pairs += cs.cpu_pairs;
    a->idle += idle;
    /* lightest first: no CPU expert has more tokens than an expert streamed after the counts */
    if (cs.n_cpu > 0 && cs.n_gpu > 0 && h->cnt_tok[cpu[cs.n_cpu - 1]] > h->cnt_tok[gpu[cs.n_gpu - 1]]) a->light_bad++;
    if (cs.n_cpu > 0) {
        a->pred_cpu_ms += cs.cpu_end_ms;
        a->pred_gpu_ms += cs.gpu_end_ms;
    }
    if (il == h->last_ram) st = end_batch(h, n, err);
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
    if (h->stream && n >= h->stream_min) {
        if (h->split_count) {
            int list[HYB_MAX_EXPERT];
            if (uncached(h, il, list) > 0) return prefill_count(h, il, n, b, stream, err);
        }
        return prefill_stream(h, il, n, b, stream, err);
    }
    h->pf_valid = false;
    return prefill_cpu(h, il, n, b, stream, err);
}
