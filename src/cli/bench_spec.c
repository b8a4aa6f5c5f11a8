/* bench_spec.c — `hmoe bench --spec mtp`: what self-speculative decoding with the MTP block
 * costs and gains on this machine, for one model, prompt depth P (-p) and --draft-max N.
 *
 * Measured (median of -r runs each, on contexts holding P random tokens):
 *   t1       one decode step (1 token, plain context);
 *   tv(j)    one pass of j + 1 tokens with logits for all (verifying j drafts), j = 0 .. N;
 *   td       one MTP draft (the block's pass for one token and its LM head);
 *   tc       the recurrent-state checkpoint taken before each verification;
 * and a real greedy generation of -n tokens with and without --spec (tokens compared), which
 * gives the acceptance rate on this model (random-weight files accept almost nothing).
 * Model of a step with k drafts, each accepted with probability a given the ones before:
 *   E[tokens] = (1 - a^(k+1)) / (1 - a)
 *   cost      = k*td + tv(k) + tc + sum_{i<k} a^i (1 - a) tv(i)    (a rejection after i accepted
 *               drafts re-runs those i + 1 tokens from the checkpoint)
 *   speed-up  = E[tokens] * t1 / cost
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_impl.h"
#include "hmoe/progress.h"

struct spec_bench {
    struct hmoe_ctx *plain, *sc;
    struct hmoe_spec *spec;
    float *logits;
    int32_t *ids;
    int n_vocab, depth, reps;
};

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Median seconds of a pass of n tokens at the depth (logits for all), after a rewind. */
static int time_pass(struct spec_bench *b, int n, double *out) {
    struct hmoe_err err = {0};
    double t[64];
    const int reps = HMOE_MIN(b->reps, 64);
    for (int r = -1; r < reps; r++) { /* one uncounted warm-up */
        hmoe_ctx_truncate(b->plain, b->depth);
        const double t0 = hmoe_time_s();
        if (hmoe_ctx_decode(b->plain, b->ids + b->depth, n, b->depth, HMOE_LOGITS_ALL, b->logits, &err))
            return hmoe_cli_fail(&err);
        if (r >= 0) t[r] = hmoe_time_s() - t0;
    }
    *out = median(t, reps);
    return HMOE_EXIT_OK;
}

/* Median seconds of one draft and of one checkpoint, on the speculative context. */
static int time_draft(struct spec_bench *b, int n_draft, double *td, double *tc) {
    struct hmoe_err err = {0};
    double t[64], c[64];
    int32_t out[HMOE_SPEC_DRAFT_MAX];
    const int reps = HMOE_MIN(b->reps, 64);
    for (int r = -1; r < reps; r++) {
        const double t0 = hmoe_time_s();
        if (hmoe_spec_draft(b->spec, b->ids[b->depth], n_draft, out, NULL, &err)) return hmoe_cli_fail(&err);
        const double t1 = hmoe_time_s();
        hmoe_ctx_checkpoint(b->sc);
        if (r >= 0) t[r] = (t1 - t0) / n_draft, c[r] = hmoe_time_s() - t1;
    }
    *td = median(t, reps);
    *tc = median(c, reps);
    return HMOE_EXIT_OK;
}

/* Greedy generation of n tokens after the depth: seconds, and the tokens into out. */
static int generate(struct spec_bench *b, struct hmoe_ctx *c, struct hmoe_spec *s, int n, int32_t *out, double *secs) {
    struct hmoe_err err = {0};
    hmoe_ctx_truncate(c, b->depth - 1);
    if (hmoe_ctx_decode(c, b->ids + b->depth - 1, 1, b->depth - 1, HMOE_LOGITS_LAST, b->logits, &err))
        return hmoe_cli_fail(&err);
    const float *lg = b->logits;
    const double t0 = hmoe_time_s();
    for (int i = 0; i < n; i++) {
        out[i] = hmoe_argmax(lg, b->n_vocab);
        if (hmoe_cli_decode_next(c, s, out[i], b->depth + i, b->logits, &lg, &err)) return hmoe_cli_fail(&err);
    }
    *secs = hmoe_time_s() - t0;
    return HMOE_EXIT_OK;
}

static double speedup(double a, int k, double t1, double td, double tc, const double *tv) {
    double tokens = 0, cost = k * td + tv[k] + tc, p = 1;
    for (int i = 0; i <= k; i++) tokens += pow(a, i);
    for (int i = 0; i < k; i++, p *= a) cost += p * (1 - a) * tv[i];
    return tokens * t1 / cost;
}

int hmoe_bench_spec(const struct hmoe_cli_model_opts *mo_in, const char *path, int depth, int n_gen, int n_draft,
                    int reps, bool quiet) {
    struct hmoe_cli_model_opts mo = *mo_in;
    mo.model_path = path;
    if (depth < 1) depth = 1;
    if (n_gen < 1) n_gen = 1;
    mo.n_ctx = depth + n_gen + n_draft + 2;
    struct hmoe_model *model = NULL;
    int rc = hmoe_cli_model_load(&mo, &model);
    if (rc) return rc;
    struct spec_bench b = {.n_vocab = model->cfg.n_vocab, .depth = depth, .reps = reps};
    struct hmoe_err err = {0};
    int32_t *g0 = malloc((size_t)n_gen * sizeof *g0), *g1 = malloc((size_t)n_gen * sizeof *g1);
    b.logits = malloc((size_t)(n_draft + 1) * (size_t)b.n_vocab * sizeof *b.logits);
    b.ids = malloc((size_t)mo.n_ctx * sizeof *b.ids);
    if (!g0 || !g1 || !b.logits || !b.ids) {
        fprintf(stderr, "hmoe: out of memory\n");
        rc = HMOE_EXIT_ERROR;
        goto done;
    }
    uint64_t r = 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < mo.n_ctx; i++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        b.ids[i] = (int32_t)((r >> 33) % (uint64_t)b.n_vocab);
    }
    if ((rc = hmoe_cli_ctx_open(&mo, model, &b.plain)) || (rc = hmoe_cli_ctx_open(&mo, model, &b.sc))) goto done;
    struct hmoe_cli_spec_args sa = {.spec = "mtp", .draft_max = n_draft};
    if ((rc = hmoe_cli_spec_open(&sa, b.sc, &b.spec))) goto done;
    if (!quiet) hmoe_cli_model_preload(model, hmoe_progress_stderr_is_tty());
    /* both contexts hold the depth; the recurrent state is checkpointed there */
    if (hmoe_ctx_decode(b.plain, b.ids, depth, 0, HMOE_LOGITS_NONE, NULL, &err) ||
        hmoe_ctx_decode(b.sc, b.ids, depth, 0, HMOE_LOGITS_NONE, NULL, &err)) {
        rc = hmoe_cli_fail(&err);
        goto done;
    }
    hmoe_ctx_checkpoint(b.plain);
    hmoe_ctx_checkpoint(b.sc);
    double tv[HMOE_SPEC_DRAFT_MAX + 1], td = 0, tc = 0, s0 = 0, s1 = 0;
    for (int j = 0; !rc && j <= n_draft; j++) rc = time_pass(&b, j + 1, &tv[j]);
    if (!rc) rc = time_draft(&b, n_draft, &td, &tc);
    hmoe_spec_reset_stats(b.spec);
    if (!rc) rc = generate(&b, b.plain, NULL, n_gen, g0, &s0);
    if (!rc) rc = generate(&b, b.sc, b.spec, n_gen, g1, &s1);
    if (rc) goto done;
    struct hmoe_spec_stats st;
    hmoe_spec_get_stats(b.spec, &st);
    const bool same = memcmp(g0, g1, (size_t)n_gen * sizeof *g0) == 0;
    const double t1 = tv[0], acc = st.drafted ? (double)st.accepted / (double)st.drafted : 0;
    printf("model: %s; depth %d, %d threads; --spec mtp --draft-max %d\n", path, depth,
           hmoe_ctx_get_params(b.plain)->n_threads, n_draft);
    printf("decode step t1 = %.3f ms; MTP draft td = %.3f ms (%.2f x t1); checkpoint tc = %.3f ms\n\n", t1 * 1e3,
           td * 1e3, td / t1, tc * 1e3);
    printf("| k | verify ms | verify / t1 | speed-up at 0.5 | speed-up at 0.7 | speed-up at 0.9 |\n");
    printf("|---|-----------|-------------|-----------------|-----------------|-----------------|\n");
    for (int k = 1; k <= n_draft; k++)
        printf("| %d | %9.3f | %11.2f | %14.2fx | %14.2fx | %14.2fx |\n", k, tv[k] * 1e3, tv[k] / t1,
               speedup(0.5, k, t1, td, tc, tv), speedup(0.7, k, t1, td, tc, tv), speedup(0.9, k, t1, td, tc, tv));
    printf("\ngreedy %d tokens: plain %.2f t/s, --spec mtp %.2f t/s (%.2fx), %s tokens; acceptance %.1f%% "
           "(%llu of %llu drafts), %llu tokens re-run\n",
           n_gen, n_gen / s0, n_gen / s1, s0 / s1, same ? "the same" : "DIFFERENT", 100 * acc,
           (unsigned long long)st.accepted, (unsigned long long)st.drafted, (unsigned long long)st.replayed);
    if (!quiet)
        printf("\nverify: one pass of k + 1 tokens (k drafts), logits for all. speed-up at a (acceptance of each "
               "draft): E[tokens] * t1 / (k*td + verify(k) + tc + sum_{i<k} a^i (1-a) verify(i)), "
               "E[tokens] = (1 - a^(k+1)) / (1 - a); a rejection after i drafts re-runs i + 1 tokens.\n");
    if (!same) rc = HMOE_EXIT_ERROR;
done:
    hmoe_spec_free(b.spec);
    hmoe_ctx_free(b.sc);
    hmoe_ctx_free(b.plain);
    hmoe_model_free(model);
    free(g0);
    free(g1);
    free(b.logits);
    free(b.ids);
    return rc;
}
