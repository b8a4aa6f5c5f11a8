/* test_hyb_pin.c — the pin pass of the hybrid scheduler (src/sched/hybrid_pin.c,
 * pin_bounded.c) with injected driver calls: a registration that succeeds, one that fails, one
 * that blocks until the test lets it go (a kernel that never returns inside one call) and one that
 * crawls. The load must finish within its bound (HMOE_PIN_BUDGET_S), the layers left unpinned
 * must be marked so (they copy through the driver's staging), a note must say so, and every
 * registration that succeeded must be undone exactly once: by hmoe_hyb_unpin for the layers the
 * scheduler uses, by the worker for the one given up on.
 */
#include <pthread.h>
#include <time.h>

#include "harness.h"
#include "hyb_fake.h"

enum fake_mode { FAKE_OK, FAKE_FAIL, FAKE_BLOCK_AT, FAKE_CRAWL };

static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    enum fake_mode mode;
    int calls, block_at;
    bool released;
    int n_ok, n_unreg;
    void *reg_ok[64], *unreg[64];
} fk = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

static void sleep_s(double s) {
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

static enum hmoe_status fake_register(void *p, size_t bytes, bool read_only, struct hmoe_err *err) {
    (void)bytes, (void)read_only;
    pthread_mutex_lock(&fk.mu);
    const int call = fk.calls++;
    const enum fake_mode mode = fk.mode;
    if (mode == FAKE_BLOCK_AT && call == fk.block_at) {
        /* "never" is 5 s here, so that a pass without its bound fails the test instead of hanging it */
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += 5;
        while (!fk.released && !pthread_cond_timedwait(&fk.cv, &fk.mu, &until)) {}
    }
    pthread_mutex_unlock(&fk.mu);
    if (mode == FAKE_FAIL) return HMOE_RAISE(err, HMOE_ERR_DEVICE, "fake: operation not permitted");
    if (mode == FAKE_CRAWL) sleep_s(0.2);
    pthread_mutex_lock(&fk.mu);
    if (fk.n_ok < 64) fk.reg_ok[fk.n_ok] = p;
    fk.n_ok++;
    pthread_mutex_unlock(&fk.mu);
    return HMOE_OK;
}

static void fake_unregister(void *p) {
    pthread_mutex_lock(&fk.mu);
    if (fk.n_unreg < 64) fk.unreg[fk.n_unreg] = p;
    fk.n_unreg++;
    pthread_mutex_unlock(&fk.mu);
}

static void fake_reset(enum fake_mode mode, int block_at) {
    pthread_mutex_lock(&fk.mu);
    fk.mode = mode, fk.block_at = block_at, fk.calls = 0, fk.released = false, fk.n_ok = 0, fk.n_unreg = 0;
    pthread_mutex_unlock(&fk.mu);
}

static int counts(int *ok, int *unreg) {
    pthread_mutex_lock(&fk.mu);
    *ok = fk.n_ok, *unreg = fk.n_unreg;
    pthread_mutex_unlock(&fk.mu);
    return 0;
}

/* Every range registered with success was unregistered exactly once. */
static bool balanced(void) {
    pthread_mutex_lock(&fk.mu);
    bool ok = fk.n_ok == fk.n_unreg && fk.n_ok <= 64;
    for (int i = 0; ok && i < fk.n_ok; i++) {
        int seen = 0;
        for (int j = 0; j < fk.n_unreg; j++) seen += fk.unreg[j] == fk.reg_ok[i];
        ok = seen == 1;
    }
    pthread_mutex_unlock(&fk.mu);
    return ok;
}

static const int N_LAYER = 6;

static int setup(struct hyb_fake *f) {
    if (hyb_fake_init(f, N_LAYER, 256, 256, 8, 2, 1, HMOE_TYPE_Q4_K, HMOE_TYPE_Q6_K, 3)) return -1;
    f->h.pin_register = fake_register;
    f->h.pin_unregister = fake_unregister;
    return 0;
}

static uint64_t file_bytes(const struct hyb_fake *f) {
    const struct hmoe_moe_weights *w = &f->h.moe[N_LAYER - 1];
    return (uint64_t)((const uint8_t *)w->down.data + w->down.mat_bytes * (size_t)w->down.n_mat - f->w);
}

static int n_pinned(const struct hyb_fake *f) {
    int n = 0;
    for (int l = 0; l < N_LAYER; l++) n += f->h.L[l].pinned;
    return n;
}

/* The layers from `first` on are not pinned and hold no registration (the staging path). */
static bool rest_unpinned(const struct hyb_fake *f, int first) {
    for (int l = first; l < N_LAYER; l++)
        if (f->h.L[l].pinned || f->h.L[l].src_ok || f->h.L[l].pin_chunks) return false;
    return true;
}

static double run_pass(struct hyb_fake *f) {
    const double t0 = hmoe_time_s();
    hmoe_hyb_pin(&f->h, f->w, file_bytes(f));
    return hmoe_time_s() - t0;
}

int main(void) {
    struct hyb_fake f;
    int ok_n, un_n;

    setenv("HMOE_PIN_BUDGET_S", "0.5", 1);
    setenv("HMOE_MEM_AVAILABLE_MIB", "100000", 1);
    unsetenv("HMOE_PIN");

    /* 1. registrations that succeed: every RAM layer pinned, undone once each at unpin */
    fake_reset(FAKE_OK, -1);
    if (setup(&f)) t_check(0, "pin: set-up", "hyb_fake_init failed");
    run_pass(&f);
    t_check(n_pinned(&f) == N_LAYER && f.h.pin_layers == N_LAYER && !f.h.pin_stopped && !f.h.notes[0],
            "pin: working registrations pin every RAM layer, no note", "%d of %d pinned, stopped %d, note '%s'",
            n_pinned(&f), N_LAYER, f.h.pin_stopped, f.h.notes);
    hmoe_hyb_unpin(&f.h);
    t_check(balanced(), "pin: unpin undoes each registration once", "registered %d, unregistered %d", fk.n_ok,
            fk.n_unreg);
    hyb_fake_free(&f);

    /* 2. a failing driver: nothing pinned, the failure named in the note, nothing to undo */
    fake_reset(FAKE_FAIL, -1);
    if (setup(&f)) t_check(0, "pin: set-up", "hyb_fake_init failed");
    double dt = run_pass(&f);
    t_check(n_pinned(&f) == 0 && rest_unpinned(&f, 0) && strstr(f.h.notes, "failed (fake: operation not permitted)") &&
                strstr(f.h.notes, "staging") && dt < 0.5,
            "pin: a failing registration leaves every layer on staging with a note",
            "%d pinned, %.2f s, note '%s'", n_pinned(&f), dt, f.h.notes);
    hmoe_hyb_unpin(&f.h);
    counts(&ok_n, &un_n);
    t_check(ok_n == 0 && un_n == 0, "pin: nothing to undo after failures", "registered %d, unregistered %d", ok_n,
            un_n);
    hyb_fake_free(&f);

    /* 3. the third registration never returns until released: the pass ends at its 0.5 s bound */
    fake_reset(FAKE_BLOCK_AT, 2);
    if (setup(&f)) t_check(0, "pin: set-up", "hyb_fake_init failed");
    dt = run_pass(&f);
    t_check(dt >= 0.45 && dt < 0.5 + 0.3, "pin: a registration that never returns stops the pass at its bound",
            "took %.2f s with a 0.5 s budget", dt);
    t_check(f.h.L[0].pinned && f.h.L[1].pinned && rest_unpinned(&f, 2) && f.h.pin_layers == 2 &&
                f.h.pin_abandoned == 1 && f.h.pin_stopped,
            "pin: the layers before it stay pinned, it and the rest go through staging",
            "pinned %d, abandoned %d, layer 2 pinned %d", f.h.pin_layers, f.h.pin_abandoned, f.h.L[2].pinned);
    t_check(strstr(f.h.notes, "layer 2's experts") && strstr(f.h.notes, "did not return") &&
                strstr(f.h.notes, "staging") && strstr(f.h.notes, "HMOE_PIN=copy") && !strchr(f.h.notes, '\n'),
            "pin: one note names the layer, the fallback and the way out", "note '%s'", f.h.notes);
    hmoe_hyb_unpin(&f.h);
    counts(&ok_n, &un_n);
    t_check(ok_n == 2 && un_n == 2, "pin: unpin leaves the abandoned registration alone",
            "registered %d, unregistered %d", ok_n, un_n);
    /* the kernel comes back: the worker undoes the late registration by itself */
    pthread_mutex_lock(&fk.mu);
    fk.released = true;
    pthread_cond_broadcast(&fk.cv);
    pthread_mutex_unlock(&fk.mu);
    for (int i = 0; i < 200 && (counts(&ok_n, &un_n), un_n < 3); i++) sleep_s(0.01);
    t_check(balanced() && ok_n == 3 && fk.unreg[2] == fk.reg_ok[2],
            "pin: the late registration is undone by the worker when it returns", "registered %d, unregistered %d",
            ok_n, un_n);
    t_check(fk.calls == 3, "pin: no registration is attempted after one is abandoned", "%d calls", fk.calls);
    hyb_fake_free(&f);

    /* 4. a crawling kernel (0.2 s per registration): bounded by the budget, balanced afterwards */
    fake_reset(FAKE_CRAWL, -1);
    if (setup(&f)) t_check(0, "pin: set-up", "hyb_fake_init failed");
    dt = run_pass(&f);
    const int pinned = n_pinned(&f);
    t_check(dt < 0.5 + 0.3 && pinned >= 1 && pinned < N_LAYER && rest_unpinned(&f, pinned),
            "pin: a crawling kernel is cut off at the budget, the rest on staging", "%.2f s, %d pinned", dt, pinned);
    hmoe_hyb_unpin(&f.h);
    for (int i = 0; i < 100 && !balanced(); i++) sleep_s(0.01);
    t_check(balanced(), "pin: every crawling registration that landed is undone once", "registered %d, unregistered %d",
            fk.n_ok, fk.n_unreg);
    hyb_fake_free(&f);

    /* 5. little RAM available: pinning keeps 2 GiB (or 1/8) free, i.e. here 2.5 MiB may be locked */
    fake_reset(FAKE_OK, -1);
    setenv("HMOE_MEM_AVAILABLE_MIB", "2050", 1);
    if (setup(&f)) t_check(0, "pin: set-up", "hyb_fake_init failed");
    run_pass(&f);
    const uint64_t layer_bytes = (uint64_t)f.h.L[0].pin_len;
    const int fit = (int)(((uint64_t)2 << 20) / (layer_bytes ? layer_bytes : 1));
    t_check(fit >= 1 && fit < N_LAYER && f.h.pin_bytes <= ((uint64_t)2 << 20) && n_pinned(&f) == fit &&
                rest_unpinned(&f, n_pinned(&f)) && f.h.pin_ram_capped && strstr(f.h.notes, "to keep 2.1 GB") &&
                strstr(f.h.notes, "staging"),
            "pin: pinning stops where the memory available would fall below its reserve",
            "%.2f MiB per layer, %d pinned (expected %d), note '%s'", (double)layer_bytes / 1048576.0, n_pinned(&f),
            fit, f.h.notes);
    hmoe_hyb_unpin(&f.h);
    hyb_fake_free(&f);
    setenv("HMOE_MEM_AVAILABLE_MIB", "100000", 1);

    /* 6. HMOE_PIN=0: no driver call at all */
    setenv("HMOE_PIN", "0", 1);
    fake_reset(FAKE_OK, -1);
    if (setup(&f)) t_check(0, "pin: set-up", "hyb_fake_init failed");
    run_pass(&f);
    t_check(fk.calls == 0 && n_pinned(&f) == 0 && strstr(f.h.notes, "HMOE_PIN=0"),
            "pin: HMOE_PIN=0 pins nothing and says so", "%d calls, note '%s'", fk.calls, f.h.notes);
    hmoe_hyb_unpin(&f.h);
    hyb_fake_free(&f);
    return t_summary();
}
