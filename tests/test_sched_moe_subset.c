/* test_sched_moe_subset.c — hmoe_sched_moe_ffn_subset (src/sched/moe_cpu.c), the CPU half of the
 * hybrid prefill split: on the experts of layer 0 of two golden models (Q4_K_M: quantized
 * activations; mini-F32: f32 rows), with the routing hmoe_sched_moe_ffn chose, the subset of all
 * experts reproduces hmoe_sched_moe_ffn bit for bit, the outputs of a partition of the experts sum
 * to it within float rounding, every work-item layout gives the same bits, an empty subset gives
 * zeros, and a routed id outside 0..E-1 is
 * refused with HMOE_ERR_ARG. hmoe_sched_moe_ffn itself is checked against llama.cpp's logits by
 * test_model_golden.c; the GPU hybrid split against them by gpu_test_forward.c.
 */
#include "harness.h"
#include "hmoe/model.h"
#include "hmoe/sched.h"

enum { MAX_TOK = 37 };

/* Deterministic inputs in [-2, 2). */
static void fill(float *x, size_t n, uint32_t seed) {
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        x[i] = (float)((seed >> 8) & 0xffff) / 16384.0f - 2.0f;
    }
}

/* Largest |a - b| over one row, relative to the row's largest |b| (at least 1e-6). */
static double row_rel_diff(const float *a, const float *b, int64_t d) {
    double mx = 1e-6, diff = 0;
    for (int64_t j = 0; j < d; j++) {
        mx = fmax(mx, fabs((double)b[j]));
        diff = fmax(diff, fabs((double)a[j] - (double)b[j]));
    }
    return diff / mx;
}

static void run_model(const char *file, int n_tok) {
    char name[256], path[8192];
    struct hmoe_err err = {0};
    snprintf(path, sizeof path, "%s", t_shared(file));
    struct hmoe_model *m = NULL;
    snprintf(name, sizeof name, "%s: load", file);
    if (hmoe_model_load(path, NULL, &m, &err)) {
        t_check(0, name, "%s", err.msg);
        return;
    }
    const struct hmoe_moe_weights *w = &m->w.layers[0].moe;
    const int64_t d = w->gate.n_in;
    const int E = (int)w->router.n_out, k = w->n_expert_used;
    struct hmoe_sched_moe *s = NULL;
    const size_t nd = (size_t)n_tok * (size_t)d, nk = (size_t)n_tok * (size_t)k;
    float *x = malloc(nd * sizeof *x), *full = malloc(nd * sizeof *full), *part = malloc(nd * sizeof *part);
    float *sum = calloc(nd, sizeof *sum), *wts = malloc(nk * sizeof *wts);
    int32_t *sel = malloc(nk * sizeof *sel);
    uint8_t *mask = malloc((size_t)E);
    if (!x || !full || !part || !sum || !wts || !sel || !mask ||
        hmoe_sched_moe_init(&m->w.layers[0].moe, 1, MAX_TOK, 2, &s, &err)) {
        t_check(0, name, "set-up: %s", err.msg[0] ? err.msg : "out of memory");
        goto out;
    }
    fill(x, nd, 12345u + (uint32_t)n_tok);
    snprintf(name, sizeof name, "%s, %d token(s): full routed FFN", file, n_tok);
    if (hmoe_sched_moe_ffn(s, w, x, n_tok, full, &err)) {
        t_check(0, name, "%s", err.msg);
        goto out;
    }
    memcpy(sel, hmoe_sched_moe_last_selection(s), nk * sizeof *sel);
    memcpy(wts, hmoe_sched_moe_last_weights(s), nk * sizeof *wts);

    /* every expert: the same computation in the same order */
    memset(mask, 1, (size_t)E);
    enum hmoe_status st = hmoe_sched_moe_ffn_subset(s, w, x, n_tok, sel, wts, mask, part, &err);
    snprintf(name, sizeof name, "%s, %d token(s): subset of all experts == hmoe_sched_moe_ffn", file, n_tok);
    long bad = st ? 0 : t_first_mismatch(part, full, (long)nd, 0.0, 0.0);
    t_check(!st && bad < 0, name, "%s element %ld: %g vs %g", st ? err.msg : "", bad, bad >= 0 ? part[bad] : 0.0,
            bad >= 0 ? full[bad] : 0.0);

    /* a partition into three subsets (e % 3), the last with a gap-free run, summed */
    int pairs_seen = 0;
    for (int p = 0; p < 3 && !st; p++) {
        for (int e = 0; e < E; e++) mask[e] = (uint8_t)(e % 3 == p);
        for (size_t i = 0; i < nd; i++) part[i] = 1e30f; /* must be overwritten, zeros included */
        st = hmoe_sched_moe_ffn_subset(s, w, x, n_tok, sel, wts, mask, part, &err);
        for (size_t i = 0; i < nd && !st; i++) sum[i] += part[i];
        for (size_t i = 0; i < nk; i++) pairs_seen += mask[sel[i]];
    }
    double worst = 0;
    for (int t = 0; t < n_tok && !st; t++)
        worst = fmax(worst, row_rel_diff(sum + (size_t)t * d, full + (size_t)t * d, d));
    snprintf(name, sizeof name, "%s, %d token(s): outputs of experts e%%3 == 0, 1, 2 sum to the full FFN", file, n_tok);
    t_check(!st && worst <= 1e-5 && pairs_seen == (int)nk, name, "%s worst row |diff| / max|full| %.3g (limit 1e-5), %d of %zu pairs",
            st ? err.msg : "", worst, pairs_seen, nk);

    /* work-item layouts (hmoe_sched_moe_set_chunks): 16-row chunks with one down item per thread
     * (a batch's items cross experts and threads), the decoded token's last down rows in 16 items
     * (several items of one expert on both threads), and the default again. The layout decides
     * which thread computes a row, not how: the same bits, full FFN and subset alike. */
    if (!st) {
        struct hmoe_sched_moe_chunks lay[3];
        for (int l = 0; l < 3; l++) hmoe_sched_moe_chunks_default(&lay[l]);
        lay[0].gu_max_rows = lay[0].dn_max_rows = 16, lay[0].dn_per_thread = 1;
        lay[1].dn_tail_items = 16;
        static const char *const lay_name[3] = {"16-row chunks", "down tail 16 items", "default"};
        float *ref = malloc(nd * sizeof *ref), *sub = malloc(nd * sizeof *sub);
        for (int e = 0; e < E; e++) mask[e] = (uint8_t)(e % 3 == 1);
        if (!ref || !sub || (st = hmoe_sched_moe_ffn_subset(s, w, x, n_tok, sel, wts, mask, sub, &err))) {
            t_check(0, "layouts: set-up", "%s", err.msg[0] ? err.msg : "out of memory");
        } else {
            for (int l = 0; l < 3 && !st; l++) {
                st = hmoe_sched_moe_set_chunks(s, &lay[l], &err);
                if (!st) st = hmoe_sched_moe_ffn(s, w, x, n_tok, ref, &err);
                long bad = st ? 0 : t_first_mismatch(ref, full, (long)nd, 0.0, 0.0);
                snprintf(name, sizeof name, "%s, %d token(s): layout %s: full FFN same bits", file, n_tok, lay_name[l]);
                t_check(!st && bad < 0, name, "%s element %ld: %g vs %g", st ? err.msg : "", bad,
                        bad >= 0 ? ref[bad] : 0.0, bad >= 0 ? full[bad] : 0.0);
                for (size_t i = 0; i < nd; i++) part[i] = 1e30f;
                if (!st) st = hmoe_sched_moe_ffn_subset(s, w, x, n_tok, sel, wts, mask, part, &err);
                bad = st ? 0 : t_first_mismatch(part, sub, (long)nd, 0.0, 0.0);
                snprintf(name, sizeof name, "%s, %d token(s): layout %s: subset e%%3 == 1 same bits", file, n_tok,
                         lay_name[l]);
                t_check(!st && bad < 0, name, "%s element %ld: %g vs %g", st ? err.msg : "", bad,
                        bad >= 0 ? part[bad] : 0.0, bad >= 0 ? sub[bad] : 0.0);
            }
        }
        /* a layout outside the ranges is refused */
        struct hmoe_sched_moe_chunks badc = lay[2];
        badc.dn_max_rows = 8;
        struct hmoe_err e2 = {0};
        snprintf(name, sizeof name, "%s, %d token(s): 8-row down chunks refused", file, n_tok);
        t_check(hmoe_sched_moe_set_chunks(s, &badc, &e2) == HMOE_ERR_ARG && strstr(e2.msg, "16 rows"), name, "%s",
                e2.msg);
        free(ref);
        free(sub);
    }

    /* the empty subset */
    memset(mask, 0, (size_t)E);
    for (size_t i = 0; i < nd; i++) part[i] = 1e30f;
    st = hmoe_sched_moe_ffn_subset(s, w, x, n_tok, sel, wts, mask, part, &err);
    long nz = -1;
    for (size_t i = 0; i < nd && !st && nz < 0; i++)
        if (part[i] != 0.0f) nz = (long)i;
    snprintf(name, sizeof name, "%s, %d token(s): empty subset gives zeros", file, n_tok);
    t_check(!st && nz < 0, name, "%s element %ld = %g", st ? err.msg : "", nz, nz >= 0 ? part[nz] : 0.0);

    /* routing from outside that names an expert that does not exist */
    memset(mask, 1, (size_t)E);
    const int32_t keep = sel[nk - 1];
    for (int v = 0; v < 2; v++) {
        sel[nk - 1] = v == 0 ? E : -1;
        err.msg[0] = 0;
        st = hmoe_sched_moe_ffn_subset(s, w, x, n_tok, sel, wts, mask, part, &err);
        snprintf(name, sizeof name, "%s, %d token(s): routed expert id %d refused", file, n_tok, sel[nk - 1]);
        t_check(st == HMOE_ERR_ARG && strstr(err.msg, "outside"), name, "status %d: %s", st, err.msg);
    }
    sel[nk - 1] = keep;
out:
    hmoe_sched_moe_free(s);
    free(x);
    free(full);
    free(part);
    free(sum);
    free(wts);
    free(sel);
    free(mask);
    hmoe_model_free(m);
}

int main(void) {
    const char *files[] = {"fixtures/models/tiny-qwen3moe-A-Q4_K_M.gguf", "fixtures/models/tiny-qwen3moe-A-mini-F32.gguf"};
    for (size_t f = 0; f < 2; f++) {
        run_model(files[f], MAX_TOK); /* batch: gather job, down by (expert, row chunk), sum job */
        run_model(files[f], 1);       /* one token: down by (expert, row chunk) */
    }
    return t_summary();
}
