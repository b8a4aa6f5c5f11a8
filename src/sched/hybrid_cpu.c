/* hybrid_cpu.c — the CPU half of a hybrid decode step (sched.h; the GPU half is
 * hmoe_sched_hybrid_enqueue_decode). One OpenMP team for the whole step: for each RAM layer in
 * order every thread spins on the layer's mailbox until the GPU has published this token
 * (acquire load of the sequence number), then the team computes the experts the GPU does not
 * hold, the SwiGLU expert of qwen3moe.md §4.4 with cpu.h kernels:
 *   A. gate and up rows of all missed experts, split evenly over the threads, silu(g) * u;
 *   B. each missed expert's z quantized for the down matrix;
 *   C. output rows split over the threads: res[r] = sum_j w_j * down_j[r] · z_j,
 * written straight into the mapped result vector; the master then releases the sequence number
 * the GPU spins on. Three barriers per layer with misses, none for layers without.
 */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "hmoe/cpu.h"
#include "sched/hybrid_impl.h"

static inline void cpu_relax(void) { __builtin_ia32_pause(); }

/* Wait for the GPU's mailbox of this token; false on timeout. */
static bool wait_gpu(const struct hmoe_cuda_mailbox *mb, uint32_t seq, double deadline) {
    unsigned spins = 0;
    while (__atomic_load_n(&mb->gpu_seq, __ATOMIC_ACQUIRE) != seq) {
        cpu_relax();
        if (++spins % 4096 == 0 && hmoe_time_s() > deadline) return false;
    }
    return true;
}

/* Rows [lo, hi) of a range of n split into nt nearly equal parts, multiples of 16 rows. */
static void split(int64_t n, int nt, int tid, int64_t *lo, int64_t *hi) {
    int64_t per = (n + nt - 1) / nt;
    per = (per + 15) / 16 * 16;
    *lo = HMOE_MIN(n, (int64_t)tid * per);
    *hi = HMOE_MIN(n, *lo + per);
}

enum hmoe_status hmoe_hyb_cpu_step(struct hmoe_sched_hybrid *h, uint32_t seq, struct hmoe_err *err) {
    const int nt = h->nt, k = h->k;
    const int64_t d = h->d;
    int failed_layer = -1;
    double cpu_s = 0;
    const double deadline = hmoe_time_s() + HYB_TIMEOUT_MS / 1000.0;
    /* The master alone watches the mailbox and passes "layer il may start" (go = il + 1) or
     * "give up" (go = -1) to the team through one cache line, so every thread takes the same
     * path through the barriers below. */
    int go = 0;

#pragma omp parallel num_threads(nt)
    {
        const int tid = omp_get_thread_num();
        const int T = omp_get_num_threads();
        for (int il = 0; il < h->n_layer; il++) {
            if (!h->L[il].ram) continue;
            struct hmoe_cuda_mailbox *mb = &h->mb[il];
            if (tid == 0) {
                const double t_wait = hmoe_time_s();
                const bool ok = wait_gpu(mb, seq, deadline);
                h->L[il].cpu_wait_ns += (uint64_t)((hmoe_time_s() - t_wait) * 1e9);
                if (!ok) failed_layer = il;
                __atomic_store_n(&go, ok ? il + 1 : -1, __ATOMIC_RELEASE);
            } else {
                int v;
                while ((v = __atomic_load_n(&go, __ATOMIC_ACQUIRE)) != -1 && v < il + 1) cpu_relax();
            }
            if (__atomic_load_n(&go, __ATOMIC_ACQUIRE) == -1) break;
            const int nm = mb->n_miss;
            if (nm <= 0) continue;
            const double t0 = tid == 0 ? hmoe_time_s() : 0;
            const struct hmoe_moe_weights *W = &h->moe[il];
            const int64_t F = W->gate.n_out;
            int e_of[HMOE_CUDA_MAILBOX_MAX_K];
            float w_of[HMOE_CUDA_MAILBOX_MAX_K];
            int m = 0;
            for (int j = 0; j < k && j < mb->k; j++)
                if (mb->miss[j] && mb->ids[j] >= 0 && mb->ids[j] < h->E) {
                    e_of[m] = mb->ids[j];
                    w_of[m] = mb->wts[j];
                    m++;
                }
            const float *hx = h->h_host + (size_t)il * (size_t)d;
            /* A. gate and up rows (each thread quantizes the input itself: no barrier needed) */
            uint8_t *xg = h->xq_g + (size_t)tid * h->ag;
            uint8_t *xu = h->xq_u + (size_t)tid * h->au;
            const bool same = hmoe_type_info[W->gate.type].vec_dot_type == hmoe_type_info[W->up.type].vec_dot_type;
            int64_t lo, hi;
            split((int64_t)m * F, T, tid, &lo, &hi);
            if (lo < hi) {
                hmoe_hyb_act_quantize(W->gate.type, hx, xg, d);
                if (!same) hmoe_hyb_act_quantize(W->up.type, hx, xu, d);
            }
            for (int64_t r = lo; r < hi;) {
                const int j = (int)(r / F);
                const int64_t r0 = r % F, r1 = HMOE_MIN(F, r0 + (hi - r));
                const uint8_t *wg = (const uint8_t *)W->gate.data + (size_t)e_of[j] * W->gate.mat_bytes;
                const uint8_t *wu = (const uint8_t *)W->up.data + (size_t)e_of[j] * W->up.mat_bytes;
                float *g = h->g + (size_t)j * (size_t)F, *u = h->u + (size_t)j * (size_t)F;
                hmoe_cpu_gemv(W->gate.type, d, wg, W->gate.row_bytes, r0, r1, xg, g + r0);
                hmoe_cpu_gemv(W->up.type, d, wu, W->up.row_bytes, r0, r1, same ? xg : xu, u + r0);
                for (int64_t i = r0; i < r1; i++) g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
                r += r1 - r0;
            }
#pragma omp barrier
            /* B. z of each missed expert quantized for the down matrix */
            for (int j = tid; j < m; j += T)
                hmoe_hyb_act_quantize(W->down.type, h->g + (size_t)j * (size_t)F, h->zq + (size_t)j * h->ad, F);
#pragma omp barrier
            /* C. output rows: weighted sum over the missed experts, in selection order */
            split(d, T, tid, &lo, &hi);
            if (lo < hi) {
                float *res = h->res_host + (size_t)il * (size_t)d;
                float *tmp = h->tmp + (size_t)tid * (size_t)d;
                for (int j = 0; j < m; j++) {
                    const uint8_t *wd = (const uint8_t *)W->down.data + (size_t)e_of[j] * W->down.mat_bytes;
                    hmoe_cpu_gemv(W->down.type, F, wd, W->down.row_bytes, lo, hi, h->zq + (size_t)j * h->ad, tmp);
                    if (j == 0)
                        for (int64_t r = lo; r < hi; r++) res[r] = w_of[0] * tmp[r - lo];
                    else
                        for (int64_t r = lo; r < hi; r++) res[r] += w_of[j] * tmp[r - lo];
                }
            }
#pragma omp barrier
            if (tid == 0) {
                __atomic_store_n(&mb->cpu_seq, seq, __ATOMIC_RELEASE);
                cpu_s += hmoe_time_s() - t0;
            }
        }
    }
    h->cpu_ms += cpu_s * 1e3;
    if (failed_layer >= 0)
        return HMOE_RAISE(err, HMOE_ERR_DEVICE,
                          "hybrid decode: no routing from the GPU for layer %d within %d ms (device error or hang)",
                          failed_layer, HYB_TIMEOUT_MS);
    return HMOE_OK;
}
