/* gpu_test_gptoss.c — the gpt-oss forward pass on the GPU (the backend's plain layer with Q/K/V/O
 * biases, sink logits and the sliding window in the attention kernels, the biased top-k-softmax
 * router and the biased clamped-SwiGLU experts in the MoE kernels) and in hybrid CPU+GPU mode,
 * against our CPU backend on the synth preset gpt-oss-tiny (d 256, 8 heads / 2 KV of 64, window
 * 16 on even layers, 8 experts top-4 of 256, MXFP4 experts + Q8_0 elsewhere; F16 mix too):
 *  - all-GPU: 40-token prefill (GEMM path) and token-by-token decode (matvec path, graph) vs the
 *    CPU backend, decode vs prefill, micro-batches of 7 (the matvec path for a batch);
 *  - hybrid: a --vram-budget between "the fixed part fits" and "all experts fit" (RAM layers with
 *    cache slots: misses on CPU threads, hits on the GPU with the experts' biases), prefill on
 *    CPU threads and streamed to the GPU in chunks, vs all-GPU; --cpu-moe vs all-GPU.
 * Limits: quantized: rel RMS <= 3 %, top-1 >= 90 %, cosine >= 0.999 on all but a tenth of the rows and
 * >= 0.995 on every row, median row cosine >= 0.9998; F16: max |d| <= 1e-2 max(1, max |logit|), cosine >= 0.9999, top-1 >= 95 %.
 * Why rows may stray: with 8 experts top-4 a near tie in one layer's router flips one expert of one
 * token when the experts' sums differ by rounding (CPU q8_0 activations vs the GPU's q8_1): that
 * token's row alone moves (seen: cosine 0.9988 at one row, 0.99995 at its neighbours; the all-GPU vs
 * CPU-backend decode shows the same at one row). A wrong bias, weight or activation moves every row.
 * The fixture moe-tiny/gpt-oss-tiny.gguf has head_dim 16, which the GPU attention kernels do not
 * take: its GPU context must refuse with a message that names head_dim and --gpu off.
 * Without a CUDA device it prints one "skipped" line and counts nothing.
 */
#include <math.h>
#include <unistd.h>

#include "harness.h"
#include "hmoe/cuda.h"
#include "hmoe/synth.h"
#include "model_check.h"

#define Q_REL_RMS 0.03
#define Q_MIN_COS 0.999
#define Q_TOP1 0.90
#define Q_ROW_COS 0.995 /* every row, also one whose routing flipped at a near tie */
#define Q_MED_COS 0.9998 /* the median row: rounding alone (seen 0.99994-0.99996) */

static struct hmoe_ctx_params params(int n_ubatch, bool cpu_moe, int64_t budget_mib, bool stream) {
    struct hmoe_ctx_params cp;
    hmoe_ctx_params_default(&cp);
    cp.n_ctx = 256;
    cp.type_k = cp.type_v = HMOE_TYPE_F16;
    cp.n_threads = 2;
    cp.n_ubatch = n_ubatch;
    cp.gpu = HMOE_GPU_ON;
    cp.sched.cpu_moe = cpu_moe;
    cp.sched.vram_budget_mib = budget_mib;
    cp.sched.stream_min_tokens = stream ? 1 : 1 << 30;
    cp.sched.no_profile = true;
    return cp;
}

static struct hmoe_ctx *open_ctx(const struct hmoe_model *m, struct hmoe_ctx_params cp, const char *want_backend,
                                 const char *name) {
    struct hmoe_ctx *c = NULL;
    struct hmoe_err err = {0};
    if (hmoe_ctx_init(m, &cp, &c, &err)) {
        t_check(0, name, "context: %s", err.msg);
        return NULL;
    }
    if (want_backend && strcmp(hmoe_ctx_backend(c), want_backend)) {
        t_check(0, name, "backend %s, want %s", hmoe_ctx_backend(c), want_backend);
        hmoe_ctx_free(c);
        return NULL;
    }
    return c;
}

static int cmp_double(const void *x, const void *y) {
    const double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

static void cmp_q(const char *name, enum hmoe_status st, const struct hmoe_err *err, const float *a, const float *b, int n,
                  int V, bool f16) {
    double worst = 0, wcos = 1, amax = 0, sq_d = 0, sq_r = 0;
    int top = 0, strays = 0;
    double *cos_row = calloc((size_t)n, sizeof *cos_row);
    for (int p = 0; !st && p < n; p++) {
        struct mc_row r = mc_compare_row(a + (size_t)p * V, b + (size_t)p * V, V);
        strays += !(r.cos >= Q_MIN_COS);
        if (cos_row) cos_row[p] = r.cos;
        worst = fmax(worst, r.max_abs);
        sq_d += r.sq_diff;
        sq_r += r.sq_ref;
        if (!(r.cos >= wcos)) wcos = r.cos;
        top += mc_argmax(a + (size_t)p * V, V) == mc_argmax(b + (size_t)p * V, V);
        for (int i = 0; i < V; i++) amax = fmax(amax, fabs((double)b[(size_t)p * V + i]));
    }
    const double rr = sq_r > 0 ? sqrt(sq_d / sq_r) : 1.0;
    double med = 0;
    if (cos_row && n > 0) {
        qsort(cos_row, (size_t)n, sizeof *cos_row, cmp_double);
        med = cos_row[n / 2];
    }
    free(cos_row);
    if (getenv("HMOE_TEST_ROWS")) /* per-row cosines: tells one diverging token from a drift of all */
        for (int p = 0; !st && p < n; p++) {
            struct mc_row r = mc_compare_row(a + (size_t)p * V, b + (size_t)p * V, V);
            fprintf(stderr, "  %s row %d: cosine %.6f max |d| %.3g top-1 %s\n", name, p, r.cos, r.max_abs,
                    mc_argmax(a + (size_t)p * V, V) == mc_argmax(b + (size_t)p * V, V) ? "same" : "differs");
        }
    const bool ok = f16 ? worst <= 1e-2 * fmax(1.0, amax) && wcos >= 0.9999 && top >= 0.95 * n
                        : rr <= Q_REL_RMS && wcos >= Q_ROW_COS && med >= Q_MED_COS && strays * 10 <= n && top >= Q_TOP1 * n;
    t_check(!st && ok, name,
            "%s max |d| %.3g (max |logit| %.3g), rel RMS %.4f, min / median cosine %.6f / %.6f, rows under %.3f %d/%d, top-1 %d/%d",
            st ? err->msg : "", worst, amax, rr, wcos, med, Q_MIN_COS, strays, n, top, n);
}

static enum hmoe_status run_all(struct hmoe_ctx *c, const int32_t *tok, int n, int V, float *pf, float *dc,
                                struct hmoe_err *err) {
    hmoe_ctx_reset(c);
    enum hmoe_status st = hmoe_ctx_decode(c, tok, n, 0, HMOE_LOGITS_ALL, pf, err);
    hmoe_ctx_reset(c);
    for (int i = 0; !st && i < n; i++) st = hmoe_ctx_decode(c, &tok[i], 1, i, HMOE_LOGITS_LAST, dc + (size_t)i * V, err);
    return st;
}

/* 1: hybrid, 2: all on the GPU, 0: no context at this budget. */
static int probe(const struct hmoe_model *m, int64_t b) {
    struct hmoe_ctx *c = NULL;
    struct hmoe_err err = {0};
    struct hmoe_ctx_params cp = params(512, false, b, false);
    if (hmoe_ctx_init(m, &cp, &c, &err)) return 0;
    const int r = strcmp(hmoe_ctx_backend(c), "cuda+cpu") == 0 ? 1 : 2;
    hmoe_ctx_free(c);
    return r;
}

enum { N = 40 };

/* Hybrid context `cp` vs the all-GPU logits gp (prefill) / gd (decode). */
static void hybrid_vs(const struct hmoe_model *m, struct hmoe_ctx_params cp, const char *name, const int32_t *tok, int V,
                      const float *gp, const float *gd, bool f16) {
    struct hmoe_ctx *c = open_ctx(m, cp, "cuda+cpu", name);
    if (!c) return;
    float *hp = malloc(sizeof(float) * N * V), *hd = malloc(sizeof(float) * N * V);
    struct hmoe_err e2 = {0};
    enum hmoe_status s2 = run_all(c, tok, N, V, hp, hd, &e2);
    char n2[400];
    snprintf(n2, sizeof n2, "%s: prefill", name);
    cmp_q(n2, s2, &e2, hp, gp, N, V, f16);
    snprintf(n2, sizeof n2, "%s: decode", name);
    cmp_q(n2, s2, &e2, hd, gd, N, V, f16);
    free(hp), free(hd);
    hmoe_ctx_free(c);
}

static void synth_tiny(const char *mix) {
    char path[] = "/tmp/hmoe-gptossgpu-XXXXXX";
    int fd = mkstemp(path);
    if (fd >= 0) close(fd);
    struct hmoe_synth_plan p;
    struct hmoe_err err = {0};
    struct hmoe_synth_opts o = {.preset = "gpt-oss-tiny", .mix = mix, .seed = 7};
    const bool f16 = strcmp(mix, "f16") == 0;
    char name[300];
    enum hmoe_status st = fd < 0 ? HMOE_ERR_IO : hmoe_synth_plan_init(&p, &o, &err);
    if (!st) {
        st = hmoe_synth_write(&p, path, NULL, NULL, &err);
        hmoe_synth_plan_free(&p);
    }
    struct hmoe_model *m = NULL;
    if (!st) st = hmoe_model_load(path, NULL, &m, &err);
    snprintf(name, sizeof name, "synth gpt-oss-tiny %s written and loaded", mix);
    t_check(!st, name, "%s", err.msg);
    if (st) {
        unlink(path);
        return;
    }
    const int V = m->cfg.n_vocab;
    int32_t tok[N];
    for (int i = 0; i < N; i++) tok[i] = (int32_t)((i * 131 + 17) % V);
    float *gp = malloc(sizeof(float) * N * V), *gd = malloc(sizeof(float) * N * V);
    float *cpf = malloc(sizeof(float) * N * V), *cdc = malloc(sizeof(float) * N * V);
    struct hmoe_ctx_params cp;
    hmoe_ctx_params_default(&cp);
    cp.n_ctx = 256;
    cp.n_threads = 2;
    struct hmoe_ctx *cc = NULL;
    st = hmoe_ctx_init(m, &cp, &cc, &err);
    if (!st) st = run_all(cc, tok, N, V, cpf, cdc, &err);
    snprintf(name, sizeof name, "synth gpt-oss-tiny %s on the CPU backend", mix);
    t_check(!st, name, "%s", err.msg);
    hmoe_ctx_free(cc);

    snprintf(name, sizeof name, "synth gpt-oss-tiny %s all-GPU context", mix);
    struct hmoe_ctx *c = open_ctx(m, params(512, false, 0, false), "cuda", name);
    if (c && !st) {
        st = run_all(c, tok, N, V, gp, gd, &err);
        snprintf(name, sizeof name, "synth gpt-oss-tiny %s all-GPU 40-token prefill vs CPU backend", mix);
        cmp_q(name, st, &err, gp, cpf, N, V, f16);
        snprintf(name, sizeof name, "synth gpt-oss-tiny %s all-GPU token-by-token decode vs CPU backend", mix);
        cmp_q(name, st, &err, gd, cdc, N, V, f16);
        snprintf(name, sizeof name, "synth gpt-oss-tiny %s all-GPU decode vs all-GPU prefill", mix);
        cmp_q(name, st, &err, gd, gp, N, V, f16);
    }
    hmoe_ctx_free(c);
    snprintf(name, sizeof name, "synth gpt-oss-tiny %s all-GPU prefill in micro-batches of 7 vs CPU backend", mix);
    c = open_ctx(m, params(7, false, 0, false), "cuda", name);
    if (c && !st) {
        float *mb = malloc(sizeof(float) * N * V);
        struct hmoe_err e2 = {0};
        enum hmoe_status s2 = hmoe_ctx_decode(c, tok, N, 0, HMOE_LOGITS_ALL, mb, &e2);
        cmp_q(name, s2, &e2, mb, cpf, N, V, f16);
        free(mb);
    }
    hmoe_ctx_free(c);

    if (!f16 && !st) { /* hybrid: the cache kernels take quantized experts */
        int64_t a = 1, b = 1 << 16;
        while (b - a > 1) {
            int64_t mid = (a + b) / 2;
            if (probe(m, mid) == 0) a = mid;
            else b = mid;
        }
        const int64_t lo = b;
        a = lo, b = 1 << 16;
        while (b - a > 1) {
            int64_t mid = (a + b) / 2;
            if (probe(m, mid) == 2) b = mid;
            else a = mid;
        }
        const int64_t mid = lo + (b - lo) / 2;
        snprintf(name, sizeof name,
                 "synth gpt-oss-tiny %s hybrid (--vram-budget %lld MiB: experts in RAM + cache slots, prefill on CPU "
                 "threads) vs all-GPU",
                 mix, (long long)mid);
        hybrid_vs(m, params(512, false, mid, false), name, tok, V, gp, gd, f16);
        snprintf(name, sizeof name,
                 "synth gpt-oss-tiny %s hybrid (--vram-budget %lld MiB, prefill streamed to the GPU) vs all-GPU", mix,
                 (long long)mid);
        hybrid_vs(m, params(512, false, mid, true), name, tok, V, gp, gd, f16);
        snprintf(name, sizeof name, "synth gpt-oss-tiny %s --cpu-moe vs all-GPU", mix);
        hybrid_vs(m, params(512, true, 0, false), name, tok, V, gp, gd, f16);
    }
    free(gp), free(gd), free(cpf), free(cdc);
    hmoe_model_free(m);
    unlink(path);
}

/* The fixture's head_dim 16 is outside the GPU attention kernels: a clear refusal, no crash. */
static void fixture_refused(void) {
    struct hmoe_model *m = NULL;
    struct hmoe_err err = {0};
    enum hmoe_status st = hmoe_model_load(t_shared("fixtures/moe-tiny/gpt-oss-tiny.gguf"), NULL, &m, &err);
    t_check(!st, "gpt-oss-tiny fixture loads", "%s", err.msg);
    if (st) return;
    struct hmoe_ctx *c = NULL;
    struct hmoe_ctx_params cp = params(512, false, 0, false);
    st = hmoe_ctx_init(m, &cp, &c, &err);
    t_check(st && strstr(err.msg, "head_dim") && strstr(err.msg, "--gpu off"),
            "gpt-oss-tiny fixture (head_dim 16): --gpu on refused, naming head_dim and --gpu off", "status %d: %s",
            (int)st, err.msg);
    hmoe_ctx_free(c);
    hmoe_model_free(m);
}

int main(void) {
    if (!hmoe_cuda_available()) {
        printf("gpu_test_gptoss ... skipped: no CUDA device\n");
        return t_summary();
    }
    fixture_refused();
    synth_tiny("mxfp4_moe");
    synth_tiny("f16");
    return t_summary();
}
