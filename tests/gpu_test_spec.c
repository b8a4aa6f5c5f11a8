/* gpu_test_spec.c — `--spec mtp` with the GPU backend (model.h hmoe_spec_*, gpu_forward.c
 * keep_hidden) on the synth preset qwen35-tiny (Q4_K_M, one MTP block), against the CPU backend
 * and against plain GPU decoding:
 *  - the final normed hidden states a GPU pass hands the MTP block (12-token prompt) against the
 *    CPU backend's, and the first draft's logits from them: relative RMS < 0.03;
 *  - a chooser that takes the pending draft at random: every row the GPU decoder returns against a
 *    plain GPU context decoding the chosen tokens one by one (relative RMS < 0.03, drafts both
 *    accepted and rejected);
 *  - greedy tokens with --draft-max 1 and 3 equal plain GPU greedy up to the first step whose top-2
 *    logits of the plain run are within 1e-3 (a near tie that rounding may flip).
 * Without a CUDA device it prints one "skipped" line and counts nothing.
 */
#include <math.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "hmoe/cuda.h"
#include "hmoe/synth.h"
#include "model/mtp_impl.h"

static struct hmoe_ctx *open_ctx(const struct hmoe_model *m, enum hmoe_gpu_mode gpu) {
    struct hmoe_ctx_params cp;
    hmoe_ctx_params_default(&cp);
    cp.n_ctx = 256;
    cp.type_k = cp.type_v = HMOE_TYPE_F16;
    cp.n_threads = 2;
    cp.gpu = gpu;
    cp.sched.no_profile = true;
    struct hmoe_ctx *c = NULL;
    struct hmoe_err err = {0};
    if (hmoe_ctx_init(m, &cp, &c, &err)) t_check(0, gpu ? "GPU context" : "CPU context", "%s", err.msg);
    return c;
}

/* Relative RMS of a - b over b. */
static double rel_rms(const float *a, const float *b, size_t n) {
    double e = 0, r = 0;
    for (size_t i = 0; i < n; i++) {
        e += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        r += (double)b[i] * b[i];
    }
    return r > 0 ? sqrt(e / r) : INFINITY;
}

static void hidden_and_draft(const struct hmoe_model *m) {
    enum { N = 12 };
    const int d = m->cfg.n_embd, V = m->cfg.n_vocab;
    struct hmoe_ctx *g = open_ctx(m, HMOE_GPU_ON), *c = open_ctx(m, HMOE_GPU_OFF);
    struct hmoe_spec *sg = NULL, *sc = NULL;
    struct hmoe_err err = {0};
    int32_t tok[N], dg[1], dc[1];
    for (int i = 0; i < N; i++) tok[i] = (int32_t)((i * 89 + 17) % V);
    float *lg = malloc(sizeof(float) * V), *lc = malloc(sizeof(float) * V), *l0 = malloc(sizeof(float) * V);
    enum hmoe_status st = g && c ? HMOE_OK : HMOE_ERR_DEVICE;
    if (!st) st = hmoe_spec_init(g, 2, &sg, &err);
    if (!st) st = hmoe_spec_init(c, 2, &sc, &err);
    if (!st) st = hmoe_ctx_decode(g, tok, N, 0, HMOE_LOGITS_LAST, l0, &err);
    if (!st) st = hmoe_ctx_decode(c, tok, N, 0, HMOE_LOGITS_LAST, l0, &err);
    const double rh = st ? INFINITY : rel_rms(g->mtp->hid, c->mtp->hid, (size_t)N * d);
    /* 5 %: the hidden rows carry every layer's activation rounding (q8_1 on the GPU, Q8_K on the
     * CPU) before the LM head averages it out; the logits below keep the models' 3 % bound */
    t_check(!st && rh < 0.05, "GPU pass: the hidden states for the MTP block match the CPU backend's",
            "%s rel rms %.3g", st ? err.msg : "", rh);
    if (!st) st = hmoe_spec_draft(sg, tok[0], 1, dg, lg, &err);
    if (!st) st = hmoe_spec_draft(sc, tok[0], 1, dc, lc, &err);
    const double rl = st ? INFINITY : rel_rms(lg, lc, (size_t)V);
    t_check(!st && rl < 0.03, "GPU context: the first draft's logits match the CPU backend's", "%s rel rms %.3g",
            st ? err.msg : "", rl);
    free(lg);
    free(lc);
    free(l0);
    hmoe_spec_free(sg);
    hmoe_spec_free(sc);
    hmoe_ctx_free(g);
    hmoe_ctx_free(c);
}

static void follow_drafts(const struct hmoe_model *m, int n_draft) {
    enum { NP = 9, NG = 40 };
    const int V = m->cfg.n_vocab;
    struct hmoe_ctx *c = open_ctx(m, HMOE_GPU_ON), *plain = open_ctx(m, HMOE_GPU_ON);
    struct hmoe_spec *s = NULL;
    struct hmoe_err err = {0};
    float *buf = malloc(sizeof(float) * V), *pb = malloc(sizeof(float) * V);
    int32_t prompt[NP];
    for (int i = 0; i < NP; i++) prompt[i] = (int32_t)((i * 53 + 5) % V);
    enum hmoe_status st = c && plain ? hmoe_spec_init(c, n_draft, &s, &err) : HMOE_ERR_DEVICE;
    if (!st) st = hmoe_ctx_decode(c, prompt, NP, 0, HMOE_LOGITS_LAST, buf, &err);
    if (!st) st = hmoe_ctx_decode(plain, prompt, NP, 0, HMOE_LOGITS_LAST, pb, &err);
    const float *lg = buf;
    double worst = 0;
    uint64_t r = 12345;
    for (int i = 0; !st && i < NG; i++) {
        int32_t pend[HMOE_SPEC_DRAFT_MAX];
        const int np = hmoe_spec_pending(s, pend);
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        const int32_t id = np > 0 && (r >> 40) % 2 ? pend[0] : hmoe_argmax(lg, V);
        if ((st = hmoe_spec_decode(s, id, NP + i, &lg, &err))) break;
        if ((st = hmoe_ctx_decode(plain, &id, 1, NP + i, HMOE_LOGITS_LAST, pb, &err))) break;
        worst = fmax(worst, rel_rms(lg, pb, (size_t)V));
    }
    struct hmoe_spec_stats ss = {0};
    if (s) hmoe_spec_get_stats(s, &ss);
    char name[200];
    snprintf(name, sizeof name,
             "GPU --draft-max %d, drafts taken at random: %d rows match plain GPU decoding (worst rel rms %.2g; %llu "
             "accepted, %llu re-run)",
             n_draft, NG, worst, (unsigned long long)ss.accepted, (unsigned long long)ss.replayed);
    t_check(!st && worst < 0.03 && ss.accepted > 0 && ss.accepted < ss.drafted, name, "%s", st ? err.msg : "");
    free(buf);
    free(pb);
    hmoe_spec_free(s);
    hmoe_ctx_free(c);
    hmoe_ctx_free(plain);
}

/* Greedy on the GPU; gap[i]: the top-2 logit gap of step i (NULL: not wanted). */
static enum hmoe_status greedy(const struct hmoe_model *m, int n_draft, int n, int32_t *out, float *gap,
                               struct hmoe_err *err) {
    enum { NP = 7 };
    const int V = m->cfg.n_vocab;
    struct hmoe_ctx *c = open_ctx(m, HMOE_GPU_ON);
    struct hmoe_spec *s = NULL;
    float *buf = malloc(sizeof(float) * V);
    int32_t prompt[NP];
    for (int i = 0; i < NP; i++) prompt[i] = (int32_t)((i * 41 + 3) % V);
    enum hmoe_status st = c ? HMOE_OK : HMOE_ERR_DEVICE;
    if (!st && n_draft) st = hmoe_spec_init(c, n_draft, &s, err);
    if (!st) st = hmoe_ctx_decode(c, prompt, NP, 0, HMOE_LOGITS_LAST, buf, err);
    const float *lg = buf;
    for (int i = 0; !st && i < n; i++) {
        out[i] = hmoe_argmax(lg, V);
        if (gap) {
            float second = -INFINITY;
            for (int j = 0; j < V; j++)
                if (j != out[i] && lg[j] > second) second = lg[j];
            gap[i] = lg[out[i]] - second;
        }
        st = s ? hmoe_spec_decode(s, out[i], NP + i, &lg, err)
               : hmoe_ctx_decode(c, &out[i], 1, NP + i, HMOE_LOGITS_LAST, buf, err);
    }
    free(buf);
    hmoe_spec_free(s);
    hmoe_ctx_free(c);
    return st;
}

static void greedy_same(const struct hmoe_model *m) {
    enum { NG = 32 };
    int32_t ref[NG], got[NG];
    float gap[NG];
    struct hmoe_err err = {0};
    enum hmoe_status st = greedy(m, 0, NG, ref, gap, &err);
    static const int drafts[] = {1, 3};
    for (size_t k = 0; k < 2; k++) {
        if (!st) st = greedy(m, drafts[k], NG, got, NULL, &err);
        int first = -1;
        for (int i = 0; !st && i < NG && first < 0; i++)
            if (got[i] != ref[i]) first = i;
        char name[160];
        snprintf(name, sizeof name, "GPU greedy --spec mtp --draft-max %d: the plain GPU tokens (%s)", drafts[k],
                 first < 0 ? "all 32" : "up to a near tie");
        t_check(!st && (first < 0 || gap[first] < 1e-3f), name, "%s first difference at %d (top-2 gap %g)",
                st ? err.msg : "", first, first >= 0 ? gap[first] : 0.0);
    }
}

int main(void) {
    if (!hmoe_cuda_available()) {
        printf("gpu_test_spec ... skipped: no CUDA device\n");
        return t_summary();
    }
    char path[] = "/tmp/hmoe-specgpu-XXXXXX";
    int fd = mkstemp(path);
    if (fd >= 0) close(fd);
    struct hmoe_synth_plan p;
    struct hmoe_err err = {0};
    struct hmoe_synth_opts o = {.preset = "qwen35-tiny", .mix = "q4_k_m", .seed = 11};
    enum hmoe_status st = fd < 0 ? HMOE_ERR_IO : hmoe_synth_plan_init(&p, &o, &err);
    if (!st) {
        st = hmoe_synth_write(&p, path, NULL, NULL, &err);
        hmoe_synth_plan_free(&p);
    }
    struct hmoe_model *m = NULL;
    if (!st) st = hmoe_model_load(path, NULL, &m, &err);
    t_check(!st && m->cfg.n_nextn == 1, "synth qwen35-tiny with its MTP block written and loaded", "%s", err.msg);
    if (!st) {
        hidden_and_draft(m);
        follow_drafts(m, 1);
        follow_drafts(m, 3);
        greedy_same(m);
    }
    hmoe_model_free(m);
    unlink(path);
    return t_summary();
}
