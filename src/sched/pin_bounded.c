/* pin_bounded.c — page-locking with a time bound per registration (hybrid_impl.h), for the pin
 * pass of hybrid_pin.c. A registration (cudaHostRegister) is one driver call that cannot be
 * interrupted: on a file mapping the kernel pins every page for the long term, and a page it
 * must first migrate (a movable or CMA page; a dirty or under-writeback page-cache page of a file
 * written just before cannot move until the disk has it) makes it retry, for as long as that takes.
 * So the call runs on a worker thread and the loader waits for it only until a deadline. A call
 * given up on is left to the worker: when it returns, the worker undoes a registration that
 * succeeded and exits, so no range stays locked that the scheduler does not know about; the loader
 * never waits for it again (the layers go through the driver's staging instead).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sched/hybrid_impl.h"

#define PIN_WAIT_LOG_S 5.0 /* -v line while one registration takes this long */

struct hyb_pin_worker {
    pthread_mutex_t mu;
    pthread_cond_t cv;                 /* on CLOCK_MONOTONIC, the clock of hmoe_time_s */
    pthread_t tid;
    hyb_pin_register_fn reg;
    hyb_pin_unregister_fn unreg;
    int dev;                           /* CUDA device to make current on the worker (-1: leave it) */
    /* one request at a time, guarded by mu */
    void *p;
    size_t n;
    bool pending, done, abandoned, quit;
    enum hmoe_status st;
    struct hmoe_err err;
    int refs;                          /* the loader and the worker: the last one out frees */
};

static void release_locked(struct hyb_pin_worker *w) {
    const int left = --w->refs;
    pthread_mutex_unlock(&w->mu);
    if (left) return;
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    free(w);
}

static void *worker_main(void *arg) {
    struct hyb_pin_worker *w = arg;
    if (w->dev >= 0) hmoe_cuda_use_device(w->dev); /* the runtime's current device is per thread */
    pthread_mutex_lock(&w->mu);
    for (;;) {
        while (!w->pending && !w->quit) pthread_cond_wait(&w->cv, &w->mu);
        if (!w->pending) break;
        void *p = w->p;
        const size_t n = w->n;
        pthread_mutex_unlock(&w->mu);
        struct hmoe_err e = {0};
        const enum hmoe_status st = w->reg(p, n, true, &e);
        pthread_mutex_lock(&w->mu);
        w->pending = false;
        if (w->abandoned) {
            pthread_mutex_unlock(&w->mu);
            if (st == HMOE_OK) w->unreg(p);
            pthread_mutex_lock(&w->mu);
            break;
        }
        w->st = st;
        w->err = e;
        w->done = true;
        pthread_cond_broadcast(&w->cv);
    }
    release_locked(w);
    return NULL;
}

struct hyb_pin_worker *hmoe_hyb_pin_worker_start(hyb_pin_register_fn reg, hyb_pin_unregister_fn unreg, int dev) {
    struct hyb_pin_worker *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    w->reg = reg, w->unreg = unreg, w->dev = dev, w->refs = 2;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    const bool ok = !pthread_mutex_init(&w->mu, NULL) && !pthread_cond_init(&w->cv, &ca);
    pthread_condattr_destroy(&ca);
    if (!ok || pthread_create(&w->tid, NULL, worker_main, w)) {
        free(w); /* (a failed init leaves nothing to destroy on Linux) */
        return NULL;
    }
    return w;
}

static struct timespec at(double t) {
    struct timespec ts;
    ts.tv_sec = (time_t)t;
    ts.tv_nsec = (long)((t - (double)ts.tv_sec) * 1e9);
    if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
    return ts;
}

enum hmoe_status hmoe_hyb_pin_worker_register(struct hyb_pin_worker *w, void *p, size_t n, double deadline,
                                              int layer, bool *timed_out, struct hmoe_err *err) {
    *timed_out = false;
    pthread_mutex_lock(&w->mu);
    w->p = p, w->n = n, w->pending = true, w->done = false;
    pthread_cond_broadcast(&w->cv);
    const double t0 = hmoe_time_s();
    double next_log = t0 + PIN_WAIT_LOG_S;
    while (!w->done) {
        /* (hmoe_time_s reads CLOCK_MONOTONIC too, so the times are on the condition's clock);
         * a slow registration says so in -v while it is waited for */
        const struct timespec ts = at(HMOE_MIN(deadline, next_log));
        if (pthread_cond_timedwait(&w->cv, &w->mu, &ts) && !w->done && hmoe_time_s() < deadline) {
            HMOE_INFO("hybrid: page-locking layer %d (%.0f MiB) for %.0f s so far; given up at %.0f s", layer,
                      (double)n / 1048576.0, hmoe_time_s() - t0, deadline - t0);
            next_log += PIN_WAIT_LOG_S;
            continue;
        }
        if (!w->done && hmoe_time_s() >= deadline) {
            *timed_out = true;
            w->abandoned = true;
            pthread_mutex_unlock(&w->mu);
            return HMOE_RAISE(err, HMOE_ERR_DEVICE, "page-locking %zu MiB did not return in time", n >> 20);
        }
    }
    const enum hmoe_status st = w->st;
    if (st && err) *err = w->err;
    pthread_mutex_unlock(&w->mu);
    return st;
}

void hmoe_hyb_pin_worker_stop(struct hyb_pin_worker *w) {
    if (!w) return;
    pthread_mutex_lock(&w->mu);
    const bool stuck = w->abandoned;
    w->quit = true;
    pthread_cond_broadcast(&w->cv);
    const pthread_t tid = w->tid;
    /* an idle worker exits at once and is joined; one still inside an abandoned call is let go
     * (it cleans up and frees the shared state when the call returns) */
    release_locked(w);
    if (stuck) pthread_detach(tid);
    else pthread_join(tid, NULL);
}
