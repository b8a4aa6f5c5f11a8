/* hybrid_pin.c — page-locking the GGUF mapping's expert ranges of the RAM layers for the hybrid
 * scheduler (sched.h, "Pinned memory"), and the CPU team's RAM read probe. Each layer's range is
 * first read into the page cache (MADV_WILLNEED + one touch per page, timed apart from the
 * pinning, so a slow disk and a slow pin can be told apart in -v), then registered with the
 * driver as one range per layer (a copy is DMA only when its source lies inside one registration,
 * and the three tensors share pages at their borders, so a layer is not split at tensor edges).
 *
 * No registration can stall the load. Registering a file mapping makes the kernel pin each page
 * for the long term, and a page it cannot pin in place is migrated first; a page-cache page that
 * is dirty or under writeback (a file written shortly before, still in the page cache, as after
 * `hmoe synth`) can only move once the disk has it, and the pin retries until then, so one call
 * can take minutes or not come back while the disk drains. That is the likely cause of a load
 * that hangs after the PCIe line; a file that was written long before pins in seconds. So each
 * registration runs on a worker thread (pin_bounded.c) and is waited for only until the pass's
 * deadline (HMOE_PIN_BUDGET_S, default 30 s, from the start of the pass) or its own bound (a
 * floor rate, below); one that misses it is abandoned (the worker undoes it when it returns),
 * pinning stops, the layers left unpinned copy through the driver's staging and one note says
 * so, with the page cache's dirty bytes. HMOE_PIN=0 skips pinning. HMOE_PIN=copy never pins file
 * pages: each RAM layer's experts are copied into page-locked anonymous memory (cudaHostAlloc)
 * and the scheduler's weight views point there (CPU threads and copies read the copy; the file's
 * page cache becomes reclaimable), which sidesteps the kernel's file-page pinning altogether.
 */
#include <omp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "hmoe/sysmem.h"
#include "sched/hybrid_impl.h"

#define PIN_BUDGET_S 30.0
#define PIN_LOG_S 5.0 /* progress line at most this often (-v) */
/* A healthy pin of resident pages runs at GB/s; a registration slower than this floor rate (with
 * a floor of PIN_REG_MIN_S) is a kernel that crawls, and is given up on before the pass budget. */
#define PIN_REG_MIN_S 5.0
#define PIN_REG_FLOOR_BPS 100e6

static void add_note(struct hmoe_sched_hybrid *h, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add_note(struct hmoe_sched_hybrid *h, const char *fmt, ...) {
    const size_t len = strlen(h->notes);
    if (len + 1 >= sizeof h->notes) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(h->notes + len, sizeof h->notes - len, fmt, ap);
    va_end(ap);
}

static volatile uint8_t touch_sink;

/* The page-aligned span of layer l's expert tensors inside the file (an ungated block has no
 * gate stack), or false. */
static bool layer_span(const struct hmoe_sched_hybrid *h, int l, uintptr_t lo_file, uintptr_t hi_file, uintptr_t *lo,
                       uintptr_t *hi) {
    const uintptr_t page = 4096;
    const struct hmoe_moe_weights *w = &h->moe[l];
    const struct hmoe_mat *m[3] = {&w->gate, &w->up, &w->down};
    uintptr_t a_lo = UINTPTR_MAX, a_hi = 0;
    for (int i = 0; i < 3; i++) {
        if (!m[i]->data) continue;
        const uintptr_t a = (uintptr_t)m[i]->data, b = a + m[i]->mat_bytes * (size_t)m[i]->n_mat;
        a_lo = a < a_lo ? a : a_lo;
        a_hi = b > a_hi ? b : a_hi;
    }
    *lo = a_lo / page * page;
    *hi = (a_hi + page - 1) / page * page;
    return *lo >= lo_file / page * page && *hi <= (hi_file + page - 1) / page * page;
}

void hmoe_hyb_pin(struct hmoe_sched_hybrid *h, const void *file_base, uint64_t file_size) {
    const char *env = getenv("HMOE_PIN");
    if (env && !strcmp(env, "0")) {
        add_note(h, "pinning off (HMOE_PIN=0): copies from RAM go through the driver's staging; ");
        return;
    }
    /* a --no-mmap copy is anonymous memory already: registering it is cheap and a second copy
     * would hold the experts twice */
    const bool copy = env && !strcmp(env, "copy") && !h->file_in_ram;
    const char *be = getenv("HMOE_PIN_BUDGET_S");
    const double budget = be && atof(be) > 0 ? atof(be) : PIN_BUDGET_S;
    const uintptr_t lo_file = (uintptr_t)file_base, hi_file = lo_file + file_size;
    const double t0 = hmoe_time_s();
    double last_log = t0;
    bool failed_noted = false, worker_failed = false;
    struct hyb_pin_worker *worker = NULL;
    const hyb_pin_register_fn reg = h->pin_register ? h->pin_register : hmoe_cuda_host_register;
    const hyb_pin_unregister_fn unreg = h->pin_unregister ? h->pin_unregister : hmoe_cuda_host_unregister;
    const int dev = h->cu ? hmoe_cuda_ctx_device(h->cu) : -1;
    /* Locked pages leave what the kernel can reclaim: pinning stops while a share of the memory
     * available at the start stays free, so that the KV cache, the CPU team's scratch and the rest
     * of the system never have to swap. (Resident page-cache pages count as available, so pinning
     * the mapping's pages costs them too.) */
    struct hmoe_sysmem sm;
    hmoe_sysmem_read(&sm);
    const uint64_t keep_free = HMOE_MAX((uint64_t)sm.mem_available / 8, (uint64_t)2 << 30);
    const uint64_t pin_cap = sm.mem_available > keep_free ? sm.mem_available - keep_free : 0;
    const bool cap_known = sm.mem_available > 0;
    for (int l = 0; l < h->n_layer && !h->pin_stopped; l++) {
        struct hyb_layer *L = &h->L[l];
        uintptr_t lo, hi;
        if (!L->ram || !layer_span(h, l, lo_file, hi_file, &lo, &hi)) continue;
        const size_t len = hi - lo;
        if (cap_known && h->pin_bytes + len > pin_cap) {
            add_note(h, "page-locking stopped after %.1f GB to keep %.1f GB of the %.1f GB of RAM available free "
                        "(HMOE_MEM_AVAILABLE_MIB): the remaining RAM layers copy through the driver's staging; ",
                     (double)h->pin_bytes / 1e9, (double)keep_free / 1e9, (double)sm.mem_available / 1e9);
            h->pin_stopped = h->pin_ram_capped = true;
            break;
        }
        h->pin_tried++;
        /* into the page cache first: the pin then only locks resident pages */
        const double ta = hmoe_time_s();
        madvise((void *)lo, len, MADV_WILLNEED);
        uint8_t acc = 0;
        for (size_t off = 0; off < len; off += 4096) acc ^= ((const volatile uint8_t *)lo)[off];
        touch_sink = acc;
        const double tb = hmoe_time_s();
        h->touch_s += tb - ta;
        if (copy) {
            const double t1 = hmoe_time_s();
            struct hmoe_err e = {0};
            uint8_t *buf = NULL;
            if (hmoe_cuda_host_alloc_uninit(len, &buf, &e) != HMOE_OK) {
                add_note(h, "HMOE_PIN=copy: %s; the remaining layers stay unpinned; ", e.msg);
                h->pin_stopped = true;
                break;
            }
#pragma omp parallel for num_threads(h->nt) schedule(static)
            for (size_t off = 0; off < len; off += (size_t)4 << 20)
                memcpy(buf + off, (const uint8_t *)lo + off, HMOE_MIN((size_t)4 << 20, len - off));
            /* our view of the file pages is no longer needed; an anonymous copy (--no-mmap) would be
             * zero-filled by this, so it stays */
            if (!h->file_in_ram) madvise((void *)lo, len, MADV_DONTNEED);
            struct hmoe_moe_weights *w = &h->moe[l];
            struct hmoe_mat *m[3] = {&w->gate, &w->up, &w->down};
            for (int i = 0; i < 3; i++)
                if (m[i]->data) m[i]->data = buf + ((uintptr_t)m[i]->data - lo);
            L->copy_buf = buf;
            L->pinned = true;
            L->pin_len = len;
            L->pin_lo = buf;
            h->pin_layers++;
            h->pin_bytes += len;
            h->pin_s += hmoe_time_s() - t1;
            L->src = (struct hmoe_cuda_expert_src){.base = {w->gate.data, w->up.data, w->down.data},
                                                   .bytes = {w->gate.mat_bytes, w->up.mat_bytes, w->down.mat_bytes}};
            L->src_ok = hmoe_cuda_host_device_ptr(buf) == buf;
            continue;
        }
        L->pin_lo = (uint8_t *)lo;
        L->pin_chunk = len; /* one registration per layer (see above) */
        L->pin_len = len;
        bool ok = !worker_failed;
        if (ok && hmoe_time_s() - t0 >= budget) { /* reading took the budget: none left to pin */
            h->pin_stopped = true;
            break;
        }
        if (ok && !worker && !(worker = hmoe_hyb_pin_worker_start(reg, unreg, dev))) {
            add_note(h, "no thread for page-locking: copies from RAM go through the driver's staging; ");
            worker_failed = true, ok = false;
            h->pin_stopped = true;
        }
        if (ok) {
            struct hmoe_err e = {0};
            bool late = false;
            const double deadline = HMOE_MIN(t0 + budget, tb + HMOE_MAX(PIN_REG_MIN_S, (double)len / PIN_REG_FLOOR_BPS));
            if (hmoe_hyb_pin_worker_register(worker, (void *)lo, len, deadline, l, &late, &e) != HMOE_OK) {
                ok = false;
                if (late) {
                    struct hmoe_sysmem sm;
                    hmoe_sysmem_read(&sm);
                    h->pin_abandoned++;
                    h->pin_stopped = true;
                    int left = 0;
                    for (int r = l; r < h->n_layer; r++) left += h->L[r].ram;
                    HMOE_WARN("page-locking the experts gave up at layer %d after %.1f s; %d RAM layers copy through "
                              "the driver's staging (slower; HMOE_PIN=copy page-locks a copy instead)",
                              l, hmoe_time_s() - tb, left);
                    add_note(h, "page-locking layer %d's experts (%.0f MiB) did not return within %.1f s (the kernel "
                                "is slow to lock file pages; %.0f MiB of the page cache is dirty or under "
                                "writeback): it and the later RAM layers copy through the driver's staging "
                                "(HMOE_PIN=copy page-locks a copy instead); ",
                             l, (double)len / 1048576.0, hmoe_time_s() - tb,
                             (double)(sm.dirty + sm.writeback) / 1048576.0);
                } else if (!failed_noted) {
                    add_note(h, "page-locking the mapped experts failed (%s): copies from RAM go through the driver's "
                                "staging; ", e.msg);
                    failed_noted = true;
                }
            } else {
                L->pin_chunks = 1;
                h->pin_bytes += len;
            }
        }
        const double tc = hmoe_time_s();
        h->pin_s += tc - tb;
        if (tc - tb > 2.0)
            HMOE_INFO("hybrid: layer %d: %.0f MiB read in %.2f s, page-locked in %.2f s (slow pin)", l,
                      (double)len / 1048576.0, tb - ta, tc - tb);
        if (ok) {
            L->pinned = true;
            h->pin_layers++;
            /* kernels read the pinned mapping at its host address (unified addressing) */
            bool same = true;
            for (int c = 0; c < L->pin_chunks && same; c++)
                same = hmoe_cuda_host_device_ptr(L->pin_lo + (size_t)c * L->pin_chunk) == L->pin_lo + (size_t)c * L->pin_chunk;
            const struct hmoe_moe_weights *w = &h->moe[l];
            L->src = (struct hmoe_cuda_expert_src){.base = {w->gate.data, w->up.data, w->down.data},
                                                   .bytes = {w->gate.mat_bytes, w->up.mat_bytes, w->down.mat_bytes}};
            L->src_ok = same;
        }
        if (tc - t0 > budget) h->pin_stopped = true;
        if (tc - last_log > PIN_LOG_S) {
            HMOE_INFO("hybrid: page-locking experts: %d layers, %.1f GB in %.1f s", h->pin_layers,
                      (double)h->pin_bytes / 1e9, tc - t0);
            last_log = tc;
        }
    }
    hmoe_hyb_pin_worker_stop(worker);
    if (copy && h->pin_layers)
        add_note(h, "HMOE_PIN=copy: %d RAM layers' experts (%.1f GB) copied into page-locked memory in %.1f s; ",
                 h->pin_layers, (double)h->pin_bytes / 1e9, h->pin_s);
    else if (h->pin_stopped && !h->pin_abandoned && !worker_failed && !h->pin_ram_capped)
        add_note(h, "page-locking stopped by its %.0f s budget (HMOE_PIN_BUDGET_S) after %d of %d RAM layers (%.1f GB "
                    "at %.2f GB/s; reading them took %.1f s): the others copy through the driver's staging; ",
                 budget, h->pin_layers, h->pin_tried, (double)h->pin_bytes / 1e9,
                 h->pin_s > 0 ? (double)h->pin_bytes / h->pin_s / 1e9 : 0.0, h->touch_s);
    if (h->pin_tried && h->pin_layers < h->pin_tried)
        HMOE_INFO("hybrid: page-locked the experts of %d of %d RAM layers", h->pin_layers, h->pin_tried);
}

void hmoe_hyb_unpin(struct hmoe_sched_hybrid *h) {
    for (int l = 0; l < h->n_layer; l++) {
        struct hyb_layer *L = &h->L[l];
        for (int c = 0; c < L->pin_chunks; c++)
            (h->pin_unregister ? h->pin_unregister : hmoe_cuda_host_unregister)(L->pin_lo + (size_t)c * L->pin_chunk);
        hmoe_cuda_host_free(L->copy_buf); /* (the views into it die with the scheduler) */
        L->copy_buf = NULL;
        L->pin_chunks = 0;
        L->pinned = L->src_ok = false;
    }
}

double hmoe_hyb_probe_ram(struct hmoe_sched_hybrid *h) {
    /* the largest resident range we have: pinned layers are in RAM for sure */
    const uint8_t *p = NULL;
    size_t len = 0;
    for (int l = 0; l < h->n_layer; l++)
        if (h->L[l].pinned && h->L[l].pin_len > len) p = h->L[l].pin_lo, len = h->L[l].pin_len;
    if (!p || len < ((size_t)64 << 20)) return 0.0;
    len = HMOE_MIN(len, (size_t)512 << 20) / 64 * 64;
    double best = 0;
    for (int r = 0; r < 3; r++) {
        uint64_t sum = 0;
        const double t0 = hmoe_time_s();
#pragma omp parallel for num_threads(h->nt) reduction(^ : sum) schedule(static)
        for (size_t i = 0; i < len / 8; i += 8) {
            const uint64_t *q = (const uint64_t *)p + i;
            sum ^= q[0] ^ q[1] ^ q[2] ^ q[3] ^ q[4] ^ q[5] ^ q[6] ^ q[7];
        }
        const double dt = hmoe_time_s() - t0;
        touch_sink = (uint8_t)sum;
        if (dt > 0) best = HMOE_MAX(best, (double)len / dt / 1e9);
    }
    return best;
}
