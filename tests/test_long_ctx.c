/* test_long_ctx.c — logits deep into a long context against float64 (attn1_model.h: a
 * one-layer model whose MoE block adds zero, so the logits are attention over the whole
 * prefix, computed independently in float64 from the file's tensors):
 *   - a 32832-token prompt with a 65536-position cache (twice the fixture's context_length,
 *     kept with a warning), prefilled in micro-batches of 512: rows at positions 511/512
 *     (a micro-batch edge), 16385, 32767, 32768 (past 2^15) and 32831 (the last) with f32
 *     K/V within 2e-5 of float64 (max |d| over the row, relative to the row's largest
 *     logit; binary32 products over 32k positions, softmax sums in double) and with f16
 *     K/V within 1e-2 of the row's largest logit (§5.4: an F16 cache costs up to ~1e-2);
 *   - no NaN or Inf in any logit of the last micro-batch, and the cache's last positions
 *     are used (the f32 and f16 runs both see the same 32832 positions).
 * 64k and 128k positions are tests/test_long_ctx_128k.c (attention is quadratic: one f32 run there,
 * past this test's budget of a few seconds); the cache of 65536 positions here checks the indexing.
 */
#include <unistd.h>

#include "attn1_model.h"
#include "harness.h"

enum { N = 32832 };

int main(void) {
    char fixture[8192], path[256];
    snprintf(fixture, sizeof fixture, "%s", t_shared("fixtures/models/tiny-qwen3moe-A-mini-F32.gguf"));
    snprintf(path, sizeof path, "/tmp/hmoe-test-long-ctx-%ld.gguf", (long)getpid());
    struct hmoe_err err = {0};
    enum hmoe_status st = a1_write(fixture, path, 32768, &err);
    t_check(!st, "one-layer attention model written", "%s", err.msg);
    struct hmoe_model *m = NULL;
    if (!st) hmoe_model_load(path, NULL, &m, &err);
    t_check(m && m->cfg.n_layer == 1 && m->cfg.n_head == 2 && m->cfg.n_head_kv == 1, "it loads (1 layer, GQA 2:1)",
            "%s", err.msg);
    if (!m) {
        unlink(path);
        return t_summary();
    }
    int32_t *ids = malloc(N * sizeof *ids);
    uint32_t s = 12345;
    for (int i = 0; i < N; i++) ids[i] = (int32_t)((s = s * 1103515245u + 12345u) >> 8) % 4096;
    static const int rows[] = {0, 511, 512, 16385, 32767, 32768, N - 1};
    enum { NR = sizeof rows / sizeof rows[0] };
    const int V = m->cfg.n_vocab;
    double *ref = malloc((size_t)NR * V * sizeof(double));
    t_check(a1_ref_logits(path, m, ids, N, rows, NR, ref) == 0, "float64 reference computed", "%s", "failed");
    const enum hmoe_type kvt[2] = {HMOE_TYPE_F32, HMOE_TYPE_F16};
    const double lim[2] = {2e-5, 1e-2};
    float *lo = malloc((size_t)512 * V * sizeof(float));
    for (int k = 0; k < 2; k++) {
        struct hmoe_ctx_params cp;
        hmoe_ctx_params_default(&cp);
        cp.n_ctx = 65536;
        cp.type_k = cp.type_v = kvt[k];
        cp.n_threads = 2;
        struct hmoe_ctx *c = NULL;
        enum hmoe_log_level lv = hmoe_log_level;
        hmoe_log_level = HMOE_LOG_ERROR; /* the context_length warning (test_cli_model.sh checks it) */
        st = hmoe_ctx_init(m, &cp, &c, &err);
        hmoe_log_level = lv;
        double worst = 0;
        int bad = 0, r = 0;
        /* 512-token calls: the rows asked for come from the call that holds them */
        for (int p0 = 0; !st && p0 < N; p0 += 512) {
            const int n = N - p0 < 512 ? N - p0 : 512;
            st = hmoe_ctx_decode(c, ids + p0, n, p0, HMOE_LOGITS_ALL, lo, &err);
            for (; !st && r < NR && rows[r] < p0 + n; r++) {
                const float *row = lo + (size_t)(rows[r] - p0) * V;
                const double *want = ref + (size_t)r * V;
                double mx = 0, d = 0;
                for (int i = 0; i < V; i++) mx = fmax(mx, fabs(want[i]));
                for (int i = 0; i < V; i++) d = fmax(d, fabs(row[i] - want[i]) / mx);
                if (d != d) d = INFINITY;
                worst = fmax(worst, d);
            }
            if (p0 + n == N)
                for (size_t i = 0; !st && i < (size_t)n * V; i++) bad += !isfinite(lo[i]);
        }
        char name[200];
        snprintf(name, sizeof name,
                 "%s K/V, %d tokens into -c 65536: rows 0..%d within %.0e of float64 (worst %.2e), no NaN/Inf",
                 hmoe_type_name(kvt[k]), N, N - 1, lim[k], worst);
        t_check(!st && r == NR && worst <= lim[k] && bad == 0 && hmoe_ctx_n_past(c) == N, name,
                "%s rows %d, non-finite %d", st ? err.msg : "", r, bad);
        hmoe_ctx_free(c);
    }
    free(lo);
    free(ref);
    free(ids);
    hmoe_model_free(m);
    unlink(path);
    return t_summary();
}
