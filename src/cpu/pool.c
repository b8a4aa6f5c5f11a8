/* pool.c — the persistent worker team behind hmoe_cpu_parallel() (cpu.h): one process-wide
 * set of pthreads that run the items of one job at a time, the calling thread included.
 * Why not an OpenMP team per matmul: an OpenMP region ends in a barrier that waits for every
 * thread to *arrive*, so on a shared machine a descheduled thread stalls the token for a whole
 * time slice (2-thread decode fell from 71 to 1.5-9 tok/s under load). Here the caller never
 * waits for a thread, only for items already claimed: items are handed out one at a time from
 * one atomic word (job generation << 32 | next item, so a late worker cannot claim an item of
 * the next job), a worker that wakes up late finds nothing left, and if no worker shows up the
 * caller runs every item itself. Idle workers spin on the job counter for a short while (new
 * jobs follow each other within microseconds inside a token), then sleep on a futex.
 * Linux-only (futex), like the rest of src/cpu (sysfs, cpuid).
 */
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "cpu_impl.h"

enum { POOL_MAX_THREADS = 1024 };

/* How long an idle worker spins before it sleeps (HMOE_SPIN_US overrides; see cpu.h). Long
 * enough to span the serial steps between the jobs of one token (a few µs) with a wide
 * margin, short enough that a worker left idle between tokens or by a serial caller gives
 * its core back quickly on a shared machine. */
#define POOL_SPIN_NS_DEFAULT 200000L

static struct {
    _Alignas(64) _Atomic uint64_t work; /* generation << 32 | next unclaimed item */
    _Alignas(64) _Atomic int64_t done;  /* items finished by workers in this generation */
    _Alignas(64) _Atomic uint32_t seq;  /* generation of the latest job; the futex word */
    _Atomic int n_sleeping;             /* workers blocked (or about to block) on seq */
    /* The job of generation seq. Written by the caller only while no job is in flight;
     * relaxed atomics because a worker that lags behind may read them while they change
     * (it then fails to claim anything, see claim()). */
    _Alignas(64) _Atomic(hmoe_cpu_task_fn) fn;
    _Atomic(void *) arg;
    _Atomic int64_t n_items;
    _Atomic int n_threads;
    pthread_mutex_t lock; /* one job at a time (several contexts on several threads) */
    uint32_t gen;         /* under lock */
    int n_workers;        /* under lock; worker i has tid i + 1 */
    long spin_ns;
} P = {.lock = PTHREAD_MUTEX_INITIALIZER, .spin_ns = -1};

static _Thread_local int pool_tid = -1; /* >= 0 while this thread runs an item */

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static inline long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000L + ts.tv_nsec;
}

/* Claim the next item of generation g, or -1 when that job has none left / is over. */
static inline int64_t claim(uint32_t g, int64_t n_items) {
    uint64_t v = atomic_load_explicit(&P.work, memory_order_acquire);
    for (;;) {
        if ((uint32_t)(v >> 32) != g || (int64_t)(uint32_t)v >= n_items) return -1;
        if (atomic_compare_exchange_weak_explicit(&P.work, &v, v + 1, memory_order_acq_rel, memory_order_acquire))
            return (int64_t)(uint32_t)v;
    }
}

/* Run items of job g until none is left; returns how many this thread ran. A successful
 * claim proves job g was still in flight, so fn/arg/n_items read before it belong to g: the
 * caller closes the work word to the next generation before it rewrites them (release), and
 * these loads are acquire, so a worker that read a newer job's value also sees the closed
 * word and its claim of g fails. (Without the close, a late worker could read the next job's
 * larger n_items, still win a compare-exchange on g's exhausted word, run an item past g's
 * end and count it into the next job's done, and the caller would wait forever on such a
 * count; test_decode_threads hit it.) */
static int64_t run_items(uint32_t g, int tid) {
    const int64_t n = atomic_load_explicit(&P.n_items, memory_order_acquire);
    const hmoe_cpu_task_fn fn = atomic_load_explicit(&P.fn, memory_order_acquire);
    void *arg = atomic_load_explicit(&P.arg, memory_order_acquire);
    int64_t ran = 0;
    pool_tid = tid;
    for (int64_t it; (it = claim(g, n)) >= 0; ran++) fn(arg, it, tid);
    pool_tid = -1;
    return ran;
}

static void futex_wait(_Atomic uint32_t *addr, uint32_t val) {
    syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}
static void futex_wake(_Atomic uint32_t *addr, int n) {
    syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
}

/* Wait until a job newer than `seen` is published: spin, then sleep. */
static uint32_t wait_job(uint32_t seen) {
    const long deadline = now_ns() + P.spin_ns;
    for (unsigned i = 1;; i++) {
        uint32_t s = atomic_load_explicit(&P.seq, memory_order_acquire);
        if (s != seen) return s;
        cpu_relax();
        if ((i & 255) == 0 && now_ns() > deadline) break;
    }
    for (;;) {
        /* Dekker with the publisher: it stores seq then reads n_sleeping (both seq_cst), we
         * raise n_sleeping then read seq, so one of us sees the other. */
        atomic_fetch_add(&P.n_sleeping, 1);
        if (atomic_load(&P.seq) == seen) futex_wait(&P.seq, seen);
        atomic_fetch_sub(&P.n_sleeping, 1);
        uint32_t s = atomic_load_explicit(&P.seq, memory_order_acquire);
        if (s != seen) return s;
    }
}

static void *worker_main(void *p) {
    const int tid = (int)(intptr_t)p;
    uint32_t seen = atomic_load(&P.seq); /* created under the lock, before the next job */
    for (;;) {
        seen = wait_job(seen);
        if (tid >= atomic_load_explicit(&P.n_threads, memory_order_relaxed)) continue;
        const int64_t ran = run_items(seen, tid);
        if (ran) atomic_fetch_add_explicit(&P.done, ran, memory_order_release);
    }
    return NULL;
}

static long spin_from_env(void) {
    const char *e = getenv("HMOE_SPIN_US");
    if (!e || !*e) return POOL_SPIN_NS_DEFAULT;
    char *end;
    long us = strtol(e, &end, 10);
    if (*end || us < 0 || us > 10000000) {
        HMOE_WARN("HMOE_SPIN_US=%s is not a number of microseconds (0..10000000); using %ld\n", e,
                  POOL_SPIN_NS_DEFAULT / 1000);
        return POOL_SPIN_NS_DEFAULT;
    }
    return us * 1000L;
}

/* Start workers up to `want` (under the lock). Failure to create one is not an error: the
 * caller and the workers that exist run every item. */
static void grow(int want) {
    if (P.spin_ns < 0) P.spin_ns = spin_from_env();
    if (want > POOL_MAX_THREADS - 1) want = POOL_MAX_THREADS - 1;
    while (P.n_workers < want) {
        pthread_attr_t at;
        pthread_t th;
        pthread_attr_init(&at);
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        int rc = pthread_create(&th, &at, worker_main, (void *)(intptr_t)(P.n_workers + 1));
        pthread_attr_destroy(&at);
        if (rc != 0) {
            HMOE_WARN("could not start worker thread %d; continuing with %d\n", P.n_workers + 1, P.n_workers + 1);
            break;
        }
        P.n_workers++;
    }
}

void hmoe_cpu_parallel(int n_threads, int64_t n_items, hmoe_cpu_task_fn fn, void *arg) {
    if (n_items <= 0) return;
    /* Serial cases: one thread, one item, or a call from inside an item (nested: the item
     * keeps its own tid, whose scratch it owns). */
    if (n_threads <= 1 || n_items == 1 || pool_tid >= 0 || n_items > (int64_t)UINT32_MAX) {
        const int tid = pool_tid >= 0 ? pool_tid : 0;
        for (int64_t i = 0; i < n_items; i++) fn(arg, i, tid);
        return;
    }
    if (n_threads > POOL_MAX_THREADS) n_threads = POOL_MAX_THREADS;
    pthread_mutex_lock(&P.lock);
    grow(n_threads - 1);
    const uint32_t g = ++P.gen;
    /* Close the previous job's work word (generation g, no item open) before the job's fields
     * change; see run_items. */
    atomic_exchange(&P.work, (uint64_t)g << 32 | UINT32_MAX);
    atomic_store_explicit(&P.fn, fn, memory_order_release);
    atomic_store_explicit(&P.arg, arg, memory_order_release);
    atomic_store_explicit(&P.n_items, n_items, memory_order_release);
    atomic_store_explicit(&P.n_threads, n_threads, memory_order_relaxed);
    atomic_store_explicit(&P.done, 0, memory_order_relaxed);
    atomic_store_explicit(&P.work, (uint64_t)g << 32, memory_order_release);
    atomic_store(&P.seq, g);
    if (atomic_load(&P.n_sleeping) > 0) futex_wake(&P.seq, INT_MAX);

    const int64_t mine = run_items(g, 0);
    /* Wait only for items other threads claimed and are still running. Spin first (they are
     * normally microseconds from done), then yield in case the holder shares our core. */
    const int64_t want = n_items - mine;
    for (unsigned i = 0; atomic_load_explicit(&P.done, memory_order_acquire) != want; i++) {
        if (i < 20000) cpu_relax();
        else sched_yield();
    }
    pthread_mutex_unlock(&P.lock);
}
