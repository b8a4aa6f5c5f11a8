/* test_long_ctx_128k.c — logits at 64k and 128k positions against float64 (attn1_model.h: the
 * one-layer model whose logits are attention over the whole prefix, the reference computed
 * independently in float64 from the file's tensors; tests/test_long_ctx.c covers 32k with f32
 * and f16 caches):
 *   - a 131072-token prompt into -c 131072 (four times the fixture's context_length, kept with a
 *     warning), f32 K/V, prefilled in micro-batches of 512: rows at 65535 / 65536 (past 2^16),
 *     98304, 131071 (the last position of the cache) within 2e-5 of float64 (max |d| over the row,
 *     relative to the row's largest logit; the 32k test's limit: the rows measure below 1e-6);
 *   - no NaN or Inf in any logit of the micro-batches that hold those rows.
 * One f32 run only, logits kept only for the micro-batches that hold a row: attention is
 * quadratic, so 128k positions cost 16x one 32k run (3 minutes on the 2-core machine at load
 * average 9, where test_long_ctx took 25 s; a quarter of that idle).
 */
#include <unistd.h>

#include "attn1_model.h"
#include "harness.h"

enum { N = 131072 };

int main(void) {
    char fixture[8192], path[256];
    snprintf(fixture, sizeof fixture, "%s", t_shared("fixtures/models/tiny-qwen3moe-A-mini-F32.gguf"));
    snprintf(path, sizeof path, "/tmp/hmoe-test-long-ctx-128k-%ld.gguf", (long)getpid());
    struct hmoe_err err = {0};
    enum hmoe_status st = a1_write(fixture, path, 32768, &err);
    t_check(!st, "one-layer attention model written", "%s", err.msg);
    struct hmoe_model *m = NULL;
    if (!st) hmoe_model_load(path, NULL, &m, &err);
    t_check(m && m->cfg.n_layer == 1, "it loads (1 layer)", "%s", err.msg);
    if (!m) {
        unlink(path);
        return t_summary();
    }
    int32_t *ids = malloc(N * sizeof *ids);
    uint32_t s = 777;
    for (int i = 0; i < N; i++) ids[i] = (int32_t)((s = s * 1103515245u + 12345u) >> 8) % 4096;
    static const int rows[] = {65535, 65536, 98304, N - 1};
    enum { NR = sizeof rows / sizeof rows[0] };
    const int V = m->cfg.n_vocab;
    double *ref = malloc((size_t)NR * V * sizeof(double));
    t_check(a1_ref_logits(path, m, ids, N, rows, NR, ref) == 0, "float64 reference computed", "%s", "failed");
    float *lo = malloc((size_t)512 * V * sizeof(float));
    struct hmoe_ctx_params cp;
    hmoe_ctx_params_default(&cp);
    cp.n_ctx = N;
    cp.type_k = cp.type_v = HMOE_TYPE_F32;
    cp.n_threads = 2;
    cp.gpu = HMOE_GPU_OFF;
    struct hmoe_ctx *c = NULL;
    enum hmoe_log_level lv = hmoe_log_level;
    hmoe_log_level = HMOE_LOG_ERROR; /* the context_length warning (test_cli_model.sh checks it) */
    st = hmoe_ctx_init(m, &cp, &c, &err);
    hmoe_log_level = lv;
    double worst[NR] = {0};
    int bad = 0, r = 0;
    for (int p0 = 0; !st && p0 < N; p0 += 512) {
        const int n = N - p0 < 512 ? N - p0 : 512;
        const bool wanted = r < NR && rows[r] < p0 + n;
        /* only the calls that hold a wanted row need every row's logits */
        st = hmoe_ctx_decode(c, ids + p0, n, p0, wanted ? HMOE_LOGITS_ALL : HMOE_LOGITS_LAST, lo, &err);
        if (!st && wanted)
            for (size_t i = 0; i < (size_t)n * V; i++) bad += !isfinite(lo[i]);
        for (; !st && r < NR && rows[r] < p0 + n; r++) {
            const float *row = lo + (size_t)(rows[r] - p0) * V;
            const double *want = ref + (size_t)r * V;
            double mx = 0, d = 0;
            for (int i = 0; i < V; i++) mx = fmax(mx, fabs(want[i]));
            for (int i = 0; i < V; i++) d = fmax(d, fabs(row[i] - want[i]) / mx);
            worst[r] = d == d ? d : INFINITY;
        }
    }
    for (int k = 0; k < NR; k++) {
        char name[200];
        snprintf(name, sizeof name, "f32 K/V, -c %d: logits at position %d within 2e-5 of float64 (%.2e)", N, rows[k],
                 worst[k]);
        t_check(!st && r == NR && worst[k] <= 2e-5, name, "%s", st ? err.msg : "");
    }
    t_check(!st && bad == 0 && hmoe_ctx_n_past(c) == N, "no NaN/Inf in the micro-batches of those rows, cache full",
            "%s non-finite %d, n_past %d", st ? err.msg : "", bad, c ? hmoe_ctx_n_past(c) : -1);
    hmoe_ctx_free(c);
    free(lo);
    free(ref);
    free(ids);
    hmoe_model_free(m);
    unlink(path);
    return t_summary();
}
