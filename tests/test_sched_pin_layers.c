/* test_sched_pin_layers.c — page-locking the expert ranges of chosen layers for a backend that
 * streams them itself (sched.h hmoe_sched_pin_layers, src/sched/pin_layers.c over hybrid_pin.c's
 * pass), with injected driver calls, on ungated blocks (up and down stacks, no gate: the
 * nemotron_h_moe layout): only the layers asked for are registered, each registration covers
 * both stacks, every one is undone once; a refusing driver and HMOE_PIN=0 leave every layer
 * unpinned with a note; HMOE_PIN=copy hands out views into a copy with the same bytes; bad
 * arguments are an error.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "harness.h"
#include "hmoe/cuda.h"
#include "hmoe/sched.h"

enum { N_LAYER = 4, E = 8, ROWS = 64, ROW_BYTES = 144 /* one Q4_K block of 256 */ };

static struct {
    bool fail;
    int calls, n_ok, n_unreg;
    void *reg_p[16];
    size_t reg_n[16];
    void *unreg[16];
} fk;

static enum hmoe_status fake_register(void *p, size_t bytes, bool read_only, struct hmoe_err *err) {
    (void)read_only;
    fk.calls++;
    if (fk.fail) return HMOE_RAISE(err, HMOE_ERR_DEVICE, "fake: operation not permitted");
    if (fk.n_ok < 16) fk.reg_p[fk.n_ok] = p, fk.reg_n[fk.n_ok] = bytes;
    fk.n_ok++;
    return HMOE_OK;
}

static void fake_unregister(void *p) {
    if (fk.n_unreg < 16) fk.unreg[fk.n_unreg] = p;
    fk.n_unreg++;
}

static struct hmoe_mat stack(const uint8_t *data, int64_t n_in) {
    return (struct hmoe_mat){.data = data, .type = HMOE_TYPE_Q4_K, .n_in = n_in, .n_out = ROWS, .n_mat = E,
                             .row_bytes = ROW_BYTES, .mat_bytes = (size_t)ROWS * ROW_BYTES, .name = "fake"};
}

/* Every layer: up stack, 4 KiB of other tensors, down stack, 4 KiB more (file order of a block). */
static size_t layer_bytes(void) { return 2 * ((size_t)E * ROWS * ROW_BYTES + 4096); }

static bool covers(void *p, size_t n, const struct hmoe_moe_weights *w) {
    const uint8_t *lo = p, *hi = lo + n;
    const uint8_t *u = w->up.data, *d = w->down.data;
    return lo <= u && u + w->up.mat_bytes * (size_t)E <= hi && lo <= d && d + w->down.mat_bytes * (size_t)E <= hi;
}

int main(void) {
    setenv("HMOE_PIN_BUDGET_S", "5", 1);
    setenv("HMOE_MEM_AVAILABLE_MIB", "100000", 1);
    unsetenv("HMOE_PIN");
    const size_t lb = layer_bytes(), file_size = lb * N_LAYER;
    /* a file mapping, as the GGUF's: HMOE_PIN=copy drops the mapping's pages after copying them */
    char path[] = "/tmp/hmoe-pin-layers-XXXXXX";
    const int fd = mkstemp(path);
    uint8_t *bytes = malloc(file_size);
    bool written = fd >= 0 && bytes;
    for (size_t i = 0; written && i < file_size; i++) bytes[i] = (uint8_t)(i * 131 + 7);
    written = written && write(fd, bytes, file_size) == (ssize_t)file_size;
    free(bytes);
    uint8_t *file = written ? mmap(NULL, file_size, PROT_READ, MAP_PRIVATE, fd, 0) : MAP_FAILED;
    if (fd >= 0) close(fd), unlink(path);
    t_check(file != MAP_FAILED, "pin layers: a mapped test file", "%s", "mkstemp / write / mmap failed");
    if (file == MAP_FAILED) return t_summary();
    struct hmoe_moe_weights moe[N_LAYER];
    memset(moe, 0, sizeof moe);
    for (int l = 0; l < N_LAYER; l++) {
        uint8_t *b = file + lb * (size_t)l;
        moe[l].up = stack(b, 256);
        moe[l].down = stack(b + (size_t)E * ROWS * ROW_BYTES + 4096, 256);
        moe[l].n_expert_used = 2;
    }
    const bool want[N_LAYER] = {true, false, true, true};
    struct hmoe_sched_pin_params p = {.moe = moe, .want = want, .n_layer = N_LAYER, .n_threads = 1, .file_base = file,
                                      .file_size = file_size, .reg = fake_register, .unreg = fake_unregister};
    struct hmoe_err err = {0};
    struct hmoe_sched_pinned *s = NULL;
    struct hmoe_sched_pin_info pi;

    /* 1. a working driver: the three layers asked for, each one range over both stacks */
    memset(&fk, 0, sizeof fk);
    enum hmoe_status st = hmoe_sched_pin_layers(&p, &s, &err);
    hmoe_sched_pinned_info(s, &pi);
    bool cover = fk.n_ok == 3;
    for (int i = 0, l = 0; cover && i < 3; i++, l++) {
        if (l == 1) l++;
        cover = covers(fk.reg_p[i], fk.reg_n[i], &moe[l]) && fk.reg_n[i] <= lb + 2 * 4096;
    }
    t_check(!st && pi.layers == 3 && pi.tried == 3 && cover && !pi.notes[0],
            "pin layers: the layers asked for are page-locked, one range over up and down each (no gate stack)",
            "status %d, %d of %d pinned, %d registrations, covering %d, note '%s'", st, pi.layers, pi.tried, fk.n_ok,
            cover, pi.notes);
    bool views = true;
    for (int l = 0; l < N_LAYER; l++) {
        const struct hmoe_moe_weights *v = hmoe_sched_pinned_layer(s, l);
        views &= want[l] ? v && v->up.data == moe[l].up.data && v->down.data == moe[l].down.data && !v->gate.data
                         : v == NULL;
    }
    t_check(views && !hmoe_sched_pinned_layer(s, -1) && !hmoe_sched_pinned_layer(s, N_LAYER),
            "pin layers: the pinned layers' views are the mapping's, the others (and out-of-range layers) NULL", "%s",
            "a view is wrong");
    t_check(pi.bytes >= 3 * 2 * (uint64_t)E * ROWS * ROW_BYTES && pi.bytes <= 3 * (uint64_t)(lb + 2 * 4096),
            "pin layers: the bytes reported are the three ranges", "%llu bytes", (unsigned long long)pi.bytes);
    hmoe_sched_unpin_layers(s);
    bool once = fk.n_unreg == fk.n_ok;
    for (int i = 0; once && i < fk.n_ok; i++) {
        int seen = 0;
        for (int j = 0; j < fk.n_unreg; j++) seen += fk.unreg[j] == fk.reg_p[i];
        once = seen == 1;
    }
    t_check(once, "pin layers: unpinning undoes each registration once", "registered %d, unregistered %d", fk.n_ok,
            fk.n_unreg);

    /* 2. a refusing driver: nothing pinned, the note names the failure and the fallback */
    memset(&fk, 0, sizeof fk);
    fk.fail = true;
    st = hmoe_sched_pin_layers(&p, &s, &err);
    hmoe_sched_pinned_info(s, &pi);
    bool none = true;
    for (int l = 0; l < N_LAYER; l++) none &= hmoe_sched_pinned_layer(s, l) == NULL;
    t_check(!st && pi.layers == 0 && none && strstr(pi.notes, "fake: operation not permitted") &&
                strstr(pi.notes, "staging"),
            "pin layers: a refused registration is no error, every layer unpinned, the note says why",
            "status %d, %d pinned, note '%s'", st, pi.layers, pi.notes);
    hmoe_sched_unpin_layers(s);
    t_check(fk.n_unreg == 0, "pin layers: nothing to undo after refusals", "%d unregistered", fk.n_unreg);

    /* 3. HMOE_PIN=0: no driver call */
    memset(&fk, 0, sizeof fk);
    setenv("HMOE_PIN", "0", 1);
    st = hmoe_sched_pin_layers(&p, &s, &err);
    hmoe_sched_pinned_info(s, &pi);
    t_check(!st && fk.calls == 0 && pi.layers == 0 && !hmoe_sched_pinned_layer(s, 0) && strstr(pi.notes, "HMOE_PIN=0"),
            "pin layers: HMOE_PIN=0 pins nothing and says so", "%d calls, note '%s'", fk.calls, pi.notes);
    hmoe_sched_unpin_layers(s);

    /* 4. HMOE_PIN=copy: views into a copy with the same bytes in page-locked host memory; where
     * the runtime gives none (a CUDA build on a machine without a usable driver) the pass says so */
    memset(&fk, 0, sizeof fk);
    setenv("HMOE_PIN", "copy", 1);
    st = hmoe_sched_pin_layers(&p, &s, &err);
    hmoe_sched_pinned_info(s, &pi);
    if (pi.layers > 0 || !strstr(pi.notes, "HMOE_PIN=copy: cannot allocate")) {
        bool same = pi.layers == 3 && fk.calls == 0;
        for (int l = 0; same && l < N_LAYER; l++) {
            const struct hmoe_moe_weights *v = hmoe_sched_pinned_layer(s, l);
            if (!want[l]) {
                same = v == NULL;
                continue;
            }
            const size_t sb = moe[l].up.mat_bytes * (size_t)E;
            same = v && v->up.data != moe[l].up.data && !v->gate.data && !memcmp(v->up.data, moe[l].up.data, sb) &&
                   !memcmp(v->down.data, moe[l].down.data, sb);
        }
        t_check(!st && same, "pin layers: HMOE_PIN=copy gives views into a copy with the mapping's bytes",
                "status %d, %d pinned, %d driver calls, note '%s'", st, pi.layers, fk.calls, pi.notes);
    } else {
        t_check(!st && pi.layers == 0 && strstr(pi.notes, "HMOE_PIN=copy"),
                "pin layers: HMOE_PIN=copy without page-locked memory pins nothing and says so",
                "status %d, %d pinned, note '%s'", st, pi.layers, pi.notes);
    }
    hmoe_sched_unpin_layers(s);
    unsetenv("HMOE_PIN");

    /* 5. bad arguments */
    struct hmoe_sched_pin_params bad = p;
    bad.n_layer = 0;
    s = (struct hmoe_sched_pinned *)&bad; /* must be cleared */
    st = hmoe_sched_pin_layers(&bad, &s, &err);
    t_check(st == HMOE_ERR_ARG && s == NULL, "pin layers: no layers is an argument error", "status %d", st);
    bad = p;
    bad.want = NULL;
    st = hmoe_sched_pin_layers(&bad, &s, &err);
    t_check(st == HMOE_ERR_ARG && s == NULL, "pin layers: no mask is an argument error", "status %d", st);
    hmoe_sched_pinned_info(NULL, &pi);
    t_check(pi.layers == 0 && pi.notes && !pi.notes[0] && !hmoe_sched_pinned_layer(NULL, 0),
            "pin layers: a NULL set reads as nothing pinned", "%d layers", pi.layers);
    hmoe_sched_unpin_layers(NULL);
    munmap(file, file_size);
    return t_summary();
}
