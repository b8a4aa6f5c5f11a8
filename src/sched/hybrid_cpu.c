/* hybrid_cpu.c — the CPU half of a hybrid decode step (sched.h; the GPU half is
 * hmoe_sched_hybrid_enqueue_decode). One OpenMP team for the whole step; for each RAM layer in
 * order every thread spins on the layer's mailbox itself (acquire load of the sequence number,
 * no relay through a master), then the team computes the experts the GPU does not hold, the
 * SwiGLU expert of qwen3moe.md §4.4 with cpu.h kernels, as work items claimed in order from one
 * counter per layer (a descheduled thread delays only the item it holds):
 *   A. gate and up rows of one missed expert (whole or a large part: long contiguous runs),
 *      + their biases, the layer's activation (silu(g) * u or the clamped form); whoever finishes the last rows of expert j quantizes z_j for the down matrix;
 *   D. down rows of one missed expert into that expert's partial vector (waiting for z_j, the
 *      thread prefetches the rows it is about to read into L2 instead of idling);
 *   R. output rows: res[r] = sum_j w_j y_j[r] in selection order (one expert: D writes res),
 * and the thread that completes the last item releases the sequence number the GPU spins on.
 * No barrier; a thread starts a layer's items only once the previous layer with misses was
 * released (free with a GPU, which publishes only after that; needed when mailboxes are filled
 * ahead, as tests and bench_hyb_cpu do, since g, u, zq and the partial vectors are shared).
 * h->cpu_items asks for about that many items per thread and phase (default 2; tests and
 * bench_hyb_cpu vary it). Host clock stamps of each layer (CPU waiting, mailbox seen, result
 * released) feed the handoff statistics of hybrid.c.
 */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hmoe/cpu.h"
#include "sched/hybrid_impl.h"

#define PF_MAX_BYTES ((size_t)512 << 10) /* prefetch while waiting for z_j: at most this much (L2) */
/* Items per thread and phase. H200, 16 threads, 2 GiB tg128: the CPU
 * phase ran at 88.9 GB/s with 2 against 87.6 / 82.8 GB/s with 1 (one run vs two): items of about
 * half an expert's gate+up or down rows still stream long runs, and the spare ones even out
 * threads that started late or read slower. */
#define CPU_ITEMS_DEFAULT 2

/* Claim counters of one layer, zeroed before each step; each word on its own cache line. */
struct hyb_sync {
    _Alignas(64) int32_t next;                             /* next unclaimed item */
    _Alignas(64) int32_t zrows[HMOE_CUDA_MAILBOX_MAX_K];   /* rows of g_j finished */
    _Alignas(64) int32_t zready[HMOE_CUDA_MAILBOX_MAX_K];  /* z_j quantized */
    _Alignas(64) int32_t ddone;                            /* down items finished */
    _Alignas(64) int32_t rdone;                            /* reduction items finished */
    _Alignas(64) int32_t pad;
};

static inline void cpu_relax(void) { __builtin_ia32_pause(); }

uint64_t hmoe_hyb_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

enum hmoe_status hmoe_hyb_cpu_init(struct hmoe_sched_hybrid *h, struct hmoe_err *err) {
    h->cpu_items = CPU_ITEMS_DEFAULT;
    h->sync = aligned_alloc(64, (size_t)HMOE_MAX(h->n_layer, 1) * sizeof(struct hyb_sync));
    h->ypart = aligned_alloc(64, ((size_t)HMOE_MAX(h->k, 1) * (size_t)h->d * sizeof(float) + 255) / 256 * 256);
    if (!h->sync || !h->ypart) return HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory");
    memset(h->sync, 0, (size_t)HMOE_MAX(h->n_layer, 1) * sizeof(struct hyb_sync));
    return HMOE_OK;
}

void hmoe_hyb_cpu_free(struct hmoe_sched_hybrid *h) {
    free(h->sync);
    free(h->ypart);
    h->sync = NULL;
    h->ypart = NULL;
}

/* Wait for the GPU's mailbox of this token; false on timeout or when another thread gave up. */
static bool wait_gpu(const struct hmoe_cuda_mailbox *mb, uint32_t seq, double deadline, const int *abort_flag) {
    unsigned spins = 0;
    while (__atomic_load_n(&mb->gpu_seq, __ATOMIC_ACQUIRE) != seq) {
        cpu_relax();
        if (++spins % 4096 == 0 && (hmoe_time_s() > deadline || __atomic_load_n(abort_flag, __ATOMIC_RELAXED)))
            return false;
    }
    return true;
}

/* Chunk of rows for `parts` nearly equal parts of n rows (multiple of 16), and the number of
 * non-empty chunks it gives. */
static int64_t chunk_rows(int64_t n, int parts, int *n_chunks) {
    int64_t per = (n + parts - 1) / parts;
    per = HMOE_MAX(16, (per + 15) / 16 * 16);
    *n_chunks = (int)((n + per - 1) / per);
    return per;
}

/* The missed experts of a published mailbox, selection order: m of them. */
static int missed(const struct hmoe_sched_hybrid *h, const struct hmoe_cuda_mailbox *mb, int *e_of, float *w_of) {
    int m = 0;
    for (int j = 0; j < h->k && j < mb->k; j++)
        if (mb->miss[j] && mb->ids[j] >= 0 && mb->ids[j] < h->E) {
            e_of[m] = mb->ids[j];
            w_of[m] = mb->wts[j];
            m++;
        }
    return m;
}

/* First thread to see layer il's mailbox stamps when it saw it and when it had started waiting. */
static void stamp_seen(struct hyb_layer *L, uint64_t t_wait) {
    if (__atomic_load_n(&L->h_seen_ns, __ATOMIC_RELAXED)) return;
    uint64_t zero = 0;
    const uint64_t now = hmoe_hyb_now_ns();
    if (__atomic_compare_exchange_n(&L->h_seen_ns, &zero, now, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        L->h_wait_ns = t_wait;
}

static void release(struct hmoe_sched_hybrid *h, int il, uint32_t seq) {
    h->L[il].h_rel_ns = hmoe_hyb_now_ns();
    __atomic_store_n(&h->mb[il].cpu_seq, seq, __ATOMIC_RELEASE);
}

/* Spin until *word >= want; meanwhile prefetch [pf, pf + pf_len) into L2. false: give up. */
static bool wait_count(const int32_t *word, int32_t want, const uint8_t *pf, size_t pf_len, double deadline,
                       const int *abort_flag) {
    size_t done = 0;
    unsigned spins = 0;
    while (__atomic_load_n(word, __ATOMIC_ACQUIRE) < want) {
        if (done < pf_len) {
            for (int i = 0; i < 8 && done < pf_len; i++, done += 64) __builtin_prefetch(pf + done, 0, 2);
        } else {
            cpu_relax();
        }
        if (++spins % 4096 == 0 && (hmoe_time_s() > deadline || __atomic_load_n(abort_flag, __ATOMIC_RELAXED)))
            return false;
    }
    return true;
}

/* Spin until layer mb's result of this token is released; false: give up. */
static bool wait_released(const struct hmoe_cuda_mailbox *mb, uint32_t seq, double deadline, const int *abort_flag) {
    unsigned spins = 0;
    while (__atomic_load_n(&mb->cpu_seq, __ATOMIC_ACQUIRE) != seq) {
        cpu_relax();
        if (++spins % 4096 == 0 && (hmoe_time_s() > deadline || __atomic_load_n(abort_flag, __ATOMIC_RELAXED)))
            return false;
    }
    return true;
}

/* ---- the work-item path (default) ---------------------------------------------------------- */

static int step_items(struct hmoe_sched_hybrid *h, uint32_t seq, double deadline) {
    const int64_t d = h->d;
    int failed_layer = -1;
    int abort_flag = 0;
    struct hyb_sync *S0 = h->sync;

#pragma omp parallel num_threads(h->nt)
    {
        const int tid = omp_get_thread_num();
        const int T = omp_get_num_threads();
        uint8_t *xg = h->xq_g + (size_t)tid * h->ag;
        uint8_t *xu = h->xq_u + (size_t)tid * h->au;
        float *tmp = h->tmp + (size_t)tid * (size_t)d;
        int prev = -1; /* the last layer with misses this thread took part in */
        for (int il = 0; il < h->n_layer; il++) {
            struct hyb_layer *L = &h->L[il];
            if (!L->ram) continue;
            const struct hmoe_cuda_mailbox *mb = &h->mb[il];
            const uint64_t t_wait = hmoe_hyb_now_ns();
            if (!wait_gpu(mb, seq, deadline, &abort_flag)) {
                __atomic_store_n(&abort_flag, 1, __ATOMIC_RELAXED);
                __atomic_store_n(&failed_layer, il, __ATOMIC_RELAXED); /* (any thread may write it) */
                break;
            }
            stamp_seen(L, t_wait);
            int e_of[HMOE_CUDA_MAILBOX_MAX_K];
            float w_of[HMOE_CUDA_MAILBOX_MAX_K];
            const int m = mb->n_miss > 0 ? missed(h, mb, e_of, w_of) : 0;
            if (m == 0) {
                /* (n_miss > 0 with no valid id: nothing to add, but the GPU waits for the answer) */
                if (mb->n_miss > 0 && tid == 0) release(h, il, seq);
                continue;
            }
            /* g, u, zq and ypart are shared by all layers: start only when the previous layer with misses
             * has been released, i.e. all its items are done. With a GPU this always holds already (it
             * publishes layer il only after it saw that answer); mailboxes filled ahead (tests, bench)
             * would otherwise let a thread that ran out of items overwrite them under a slower one. */
            if (prev >= 0 && !wait_released(&h->mb[prev], seq, deadline, &abort_flag)) {
                __atomic_store_n(&abort_flag, 1, __ATOMIC_RELAXED);
                __atomic_store_n(&failed_layer, il, __ATOMIC_RELAXED);
                break;
            }
            prev = il;
            struct hyb_sync *S = &S0[il];
            const struct hmoe_moe_weights *W = &h->moe[il];
            const int64_t F = W->gate.n_out;
            const int per = T * h->cpu_items;
            int ca, cd, nr;
            const int64_t ra = chunk_rows(F, (per + m - 1) / m, &ca);
            const int64_t rd = chunk_rows(d, (per + m - 1) / m, &cd);
            const int64_t rr = chunk_rows(d, per, &nr);
            const int nA = m * ca, nD = m * cd, nR = m > 1 ? nr : 0, n_items = nA + nD + nR;
            const bool same = hmoe_type_info[W->gate.type].vec_dot_type == hmoe_type_info[W->up.type].vec_dot_type;
            const float *hx = h->h_host + (size_t)il * (size_t)d;
            float *res = h->res_host + (size_t)il * (size_t)d;
            bool have_x = false;
            for (;;) {
                const int i = __atomic_fetch_add(&S->next, 1, __ATOMIC_RELAXED);
                if (i >= n_items || __atomic_load_n(&abort_flag, __ATOMIC_RELAXED)) break;
                if (i < nA) { /* A: gate and up rows of expert j */
                    const int j = i / ca;
                    const int64_t r0 = (int64_t)(i % ca) * ra, r1 = HMOE_MIN(F, r0 + ra);
                    if (!have_x) {
                        hmoe_hyb_act_quantize(W->gate.type, hx, xg, d);
                        if (!same) hmoe_hyb_act_quantize(W->up.type, hx, xu, d);
                        have_x = true;
                    }
                    const uint8_t *wg = (const uint8_t *)W->gate.data + (size_t)e_of[j] * W->gate.mat_bytes;
                    const uint8_t *wu = (const uint8_t *)W->up.data + (size_t)e_of[j] * W->up.mat_bytes;
                    float *g = h->g + (size_t)j * (size_t)F, *u = h->u + (size_t)j * (size_t)F;
                    hmoe_cpu_gemv(W->gate.type, d, wg, W->gate.row_bytes, r0, r1, xg, g + r0);
                    hmoe_cpu_gemv(W->up.type, d, wu, W->up.row_bytes, r0, r1, same ? xg : xu, u + r0);
                    if (W->gate_bias) {
                        const float *bg = W->gate_bias + (size_t)e_of[j] * (size_t)F;
                        for (int64_t r = r0; r < r1; r++) g[r] += bg[r];
                    }
                    if (W->up_bias) {
                        const float *bu = W->up_bias + (size_t)e_of[j] * (size_t)F;
                        for (int64_t r = r0; r < r1; r++) u[r] += bu[r];
                    }
                    if (W->act == HMOE_MOE_SWIGLU_OAI) hmoe_sched_swiglu_oai(g + r0, u + r0, r1 - r0);
                    else
                        hmoe_cpu_swiglu(g + r0, u + r0, r1 - r0);
                    const int32_t rows = (int32_t)(r1 - r0);
                    if (__atomic_fetch_add(&S->zrows[j], rows, __ATOMIC_ACQ_REL) + rows == (int32_t)F) {
                        hmoe_hyb_act_quantize(W->down.type, g, h->zq + (size_t)j * h->ad, F);
                        __atomic_store_n(&S->zready[j], 1, __ATOMIC_RELEASE);
                    }
                } else if (i < nA + nD) { /* D: down rows of expert j */
                    const int j = (i - nA) / cd;
                    const int64_t r0 = (int64_t)((i - nA) % cd) * rd, r1 = HMOE_MIN(d, r0 + rd);
                    const uint8_t *wd = (const uint8_t *)W->down.data + (size_t)e_of[j] * W->down.mat_bytes;
                    const size_t run = (size_t)(r1 - r0) * W->down.row_bytes;
                    if (!wait_count(&S->zready[j], 1, wd + (size_t)r0 * W->down.row_bytes, HMOE_MIN(run, PF_MAX_BYTES),
                                    deadline, &abort_flag)) {
                        __atomic_store_n(&abort_flag, 1, __ATOMIC_RELAXED);
                        __atomic_store_n(&failed_layer, il, __ATOMIC_RELAXED);
                        break;
                    }
                    const uint8_t *zq = h->zq + (size_t)j * h->ad;
                    /* the down bias is inside the expert's output, so it is weighted with it */
                    const float *bd = W->down_bias ? W->down_bias + (size_t)e_of[j] * (size_t)d : NULL;
                    if (m == 1) {
                        hmoe_cpu_gemv(W->down.type, F, wd, W->down.row_bytes, r0, r1, zq, tmp);
                        if (bd)
                            for (int64_t r = r0; r < r1; r++) tmp[r - r0] += bd[r];
                        for (int64_t r = r0; r < r1; r++) res[r] = w_of[0] * tmp[r - r0];
                    } else {
                        float *yp = h->ypart + (size_t)j * (size_t)d;
                        hmoe_cpu_gemv(W->down.type, F, wd, W->down.row_bytes, r0, r1, zq, yp + r0);
                        if (bd)
                            for (int64_t r = r0; r < r1; r++) yp[r] += bd[r];
                    }
                    if (__atomic_fetch_add(&S->ddone, 1, __ATOMIC_ACQ_REL) + 1 == nD && m == 1) release(h, il, seq);
                } else { /* R: weighted sum over the missed experts, selection order */
                    const int c = i - nA - nD;
                    const int64_t r0 = (int64_t)c * rr, r1 = HMOE_MIN(d, r0 + rr);
                    if (!wait_count(&S->ddone, nD, NULL, 0, deadline, &abort_flag)) {
                        __atomic_store_n(&abort_flag, 1, __ATOMIC_RELAXED);
                        __atomic_store_n(&failed_layer, il, __ATOMIC_RELAXED);
                        break;
                    }
                    const float *y = h->ypart;
                    for (int64_t r = r0; r < r1; r++) res[r] = w_of[0] * y[r];
                    for (int j = 1; j < m; j++) {
                        y = h->ypart + (size_t)j * (size_t)d;
                        for (int64_t r = r0; r < r1; r++) res[r] += w_of[j] * y[r];
                    }
                    if (__atomic_fetch_add(&S->rdone, 1, __ATOMIC_ACQ_REL) + 1 == nR) release(h, il, seq);
                }
            }
            if (__atomic_load_n(&abort_flag, __ATOMIC_RELAXED)) break;
        }
    }
    return failed_layer;
}

enum hmoe_status hmoe_hyb_cpu_step(struct hmoe_sched_hybrid *h, uint32_t seq, struct hmoe_err *err) {
    const double deadline = hmoe_time_s() + HYB_TIMEOUT_MS / 1000.0;
    for (int il = 0; il < h->n_layer; il++) {
        struct hyb_layer *L = &h->L[il];
        L->h_wait_ns = L->h_seen_ns = L->h_rel_ns = 0;
        if (L->ram) memset(&h->sync[il], 0, sizeof h->sync[il]);
    }
    const int failed_layer = step_items(h, seq, deadline);
    if (failed_layer >= 0)
        return HMOE_RAISE(err, HMOE_ERR_DEVICE,
                          "hybrid decode: no routing from the GPU for layer %d within %d ms (device error or hang)",
                          failed_layer, HYB_TIMEOUT_MS);
    return HMOE_OK;
}
