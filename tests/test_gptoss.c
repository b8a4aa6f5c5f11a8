/* test_gptoss.c — fixtures/moe-tiny/gpt-oss-tiny.gguf (d 64, 4 layers, 4/2 heads, head_dim 16,
 * sliding window 4 on even layers, sinks, biases, YaRN s = 32, 8 experts top-3, swiglu-oai)
 * against llama.cpp's logits for the 70 ids of tokens.txt (moe-tiny/README.md): one prefill
 * vs *-prefill.f32 and one token per call vs *-decode.f32, max |Δ| < 1e-3 and identical
 * argmax with an F32 KV cache (the README: this model reacts strongly to an F16 cache, so F32
 * is the comparison). Also prefill in micro-batches of 16 (the window crosses batch
 * boundaries), one thread, our decode against our prefill, and the two gpt-oss building
 * blocks on their own: the sink softmax and the top-k-then-softmax router.
 */
#include <math.h>
#include <string.h>

#include "harness.h"
#include "hmoe/arch.h"
#include "hmoe/cpu.h"
#include "model_check.h"

enum { N_TOK = 70, N_VOCAB = 256 };

struct worst {
    double max_abs;
    int pos, flips;
};

static struct worst compare(const float *out, const float *ref) {
    struct worst w = {0, -1, 0};
    for (int p = 0; p < N_TOK; p++) {
        struct mc_row r = mc_compare_row(out + (size_t)p * N_VOCAB, ref + (size_t)p * N_VOCAB, N_VOCAB);
        if (r.max_abs > w.max_abs) w.max_abs = r.max_abs, w.pos = p;
        w.flips += mc_argmax(out + (size_t)p * N_VOCAB, N_VOCAB) != mc_argmax(ref + (size_t)p * N_VOCAB, N_VOCAB);
    }
    return w;
}

/* Logits of all 70 positions: one prefill (micro-batches of n_ubatch) or token by token. */
static int logits(struct hmoe_model *m, int n_threads, int n_ubatch, bool decode, const int32_t *ids, float *out,
                  char *msg, size_t cap) {
    struct hmoe_err err = {0};
    struct hmoe_ctx *c = NULL;
    struct hmoe_ctx_params cp;
    hmoe_ctx_params_default(&cp);
    cp.n_ctx = 128;
    cp.type_k = cp.type_v = HMOE_TYPE_F32;
    cp.n_threads = n_threads;
    cp.n_ubatch = n_ubatch;
    enum hmoe_status st = hmoe_ctx_init(m, &cp, &c, &err);
    if (!st && !decode) st = hmoe_ctx_decode(c, ids, N_TOK, 0, HMOE_LOGITS_ALL, out, &err);
    for (int i = 0; decode && !st && i < N_TOK; i++)
        st = hmoe_ctx_decode(c, &ids[i], 1, i, HMOE_LOGITS_LAST, out + (size_t)i * N_VOCAB, &err);
    snprintf(msg, cap, "%s", st ? err.msg : "");
    hmoe_ctx_free(c);
    return st == HMOE_OK;
}

static void check_vs(const char *what, const float *out, const float *ref, double tol, bool ran, const char *msg) {
    struct worst w = compare(out, ref);
    char name[200];
    snprintf(name, sizeof name, "gpt-oss-tiny %s (max |d| %.2g)", what, w.max_abs);
    t_check(ran && w.max_abs < tol && w.flips == 0, name, "%s worst at position %d (limit %g), %d argmax flips", msg,
            w.pos, tol, w.flips);
}

/* The sink softmax against its definition in double (gpt-oss.md, attention sinks). */
static void test_sink_softmax(void) {
    const float in[5] = {0.5f, -1.25f, 2.0f, 3.5f, -0.75f}, scale = 0.25f, sinks[3] = {-2.0f, 1.0f, 9.0f};
    for (int k = 0; k < 3; k++) {
        float s[5];
        memcpy(s, in, sizeof s);
        hmoe_cpu_softmax_scaled_sink(s, 5, scale, sinks[k]);
        double mx = sinks[k], den = 0, worst = 0, sum = 0;
        for (int i = 0; i < 5; i++) mx = fmax(mx, in[i] * scale);
        for (int i = 0; i < 5; i++) den += exp(in[i] * scale - mx);
        den += exp(sinks[k] - mx);
        for (int i = 0; i < 5; i++) {
            worst = fmax(worst, fabs(s[i] - exp(in[i] * scale - mx) / den));
            sum += s[i];
        }
        char name[120];
        snprintf(name, sizeof name, "sink softmax, sink %g: matches the definition, sums to %.4f < 1", sinks[k], sum);
        t_check(worst < 1e-7 && sum < 1.0, name, "max |d| %.3g", worst);
    }
}

/* Top-k of the logits, softmax over those k (no renormalisation against the others). */
static void test_router(void) {
    const float lg[6] = {0.1f, 2.0f, -1.0f, 2.0f, 5.0f, -INFINITY};
    int32_t sel[3];
    float w[3];
    hmoe_sched_route_topk_softmax(lg, 6, 3, sel, w);
    const double e1 = exp(2.0 - 5.0), den = 1.0 + 2.0 * e1;
    t_check(sel[0] == 4 && sel[1] == 1 && sel[2] == 3, "top-k softmax router: descending, lowest index on ties",
            "sel %d %d %d", sel[0], sel[1], sel[2]);
    t_check(fabs(w[0] - 1.0 / den) < 1e-6 && fabs(w[1] - e1 / den) < 1e-6 && fabs(w[2] - e1 / den) < 1e-6,
            "top-k softmax router: weights = softmax over the selected logits", "w %g %g %g", w[0], w[1], w[2]);
    const float neg[3] = {-INFINITY, -INFINITY, 1.0f};
    hmoe_sched_route_topk_softmax(neg, 3, 3, sel, w);
    t_check(sel[0] == 2 && sel[1] == 0 && sel[2] == 1 && w[0] == 1.0f && w[1] == 0.0f,
            "top-k softmax router: -inf logits stay selectable with weight 0", "sel %d %d %d", sel[0], sel[1], sel[2]);
}

int main(void) {
    char path[8192], msg[512];
    struct hmoe_err err = {0};
    int32_t ids[N_TOK];
    test_sink_softmax();
    test_router();
    snprintf(path, sizeof path, "%s", t_shared("fixtures/moe-tiny/tokens.txt"));
    FILE *f = fopen(path, "r");
    int n = 0;
    while (f && n < N_TOK && fscanf(f, "%d", &ids[n]) == 1) n++;
    if (f) fclose(f);
    t_check(n == N_TOK, "gpt-oss-tiny tokens.txt has 70 ids", "read %d", n);
    snprintf(path, sizeof path, "%s", t_shared("fixtures/moe-tiny/gpt-oss-tiny.llamacpp-prefill.f32"));
    float *ref_p = mc_read_f32(path, (size_t)N_TOK * N_VOCAB);
    snprintf(path, sizeof path, "%s", t_shared("fixtures/moe-tiny/gpt-oss-tiny.llamacpp-decode.f32"));
    float *ref_d = mc_read_f32(path, (size_t)N_TOK * N_VOCAB);
    t_check(ref_p && ref_d, "gpt-oss-tiny reference logits present", "missing .f32 files");
    struct hmoe_model *m = NULL;
    snprintf(path, sizeof path, "%s", t_shared("fixtures/moe-tiny/gpt-oss-tiny.gguf"));
    enum hmoe_status st = hmoe_model_load(path, NULL, &m, &err);
    t_check(!st, "gpt-oss-tiny load", "%s", err.msg);
    if (!st && n == N_TOK && ref_p && ref_d) {
        const struct hmoe_model_config *c = &m->cfg;
        t_check(!strcmp(c->arch, "gpt-oss") && c->arch_entry == hmoe_arch_find("gpt-oss") && c->head_dim == 16 && c->n_head == 4 && c->n_head_kv == 2 &&
                    c->n_expert == 8 && c->n_expert_used == 3 && c->n_ff_exp == 32 && c->swa_window == 4 &&
                    c->swa_period == 2 && c->rope_scaling == HMOE_ROPE_SCALING_YARN && !c->tied_output,
                "gpt-oss-tiny hyper-parameters (window 4, period 2, YaRN, top-3 of 8, untied)",
                "D %d H %d/%d E %d k %d F %d window %d period %d", c->head_dim, c->n_head, c->n_head_kv, c->n_expert,
                c->n_expert_used, c->n_ff_exp, c->swa_window, c->swa_period);
        const struct hmoe_layer_weights *L = m->w.layers;
        t_check(L[0].attn_window == 4 && L[1].attn_window == 0 && L[2].attn_window == 4 && L[3].attn_window == 0 &&
                    L[0].attn_sinks && L[3].attn_output_bias && L[1].moe.router_bias && L[2].moe.down_bias &&
                    L[0].moe.gating == HMOE_MOE_TOPK_SOFTMAX && L[0].moe.act == HMOE_MOE_SWIGLU_OAI,
                "gpt-oss-tiny layers: window on even layers, sinks, biases, top-k softmax, swiglu-oai", "windows %d %d",
                L[0].attn_window, L[1].attn_window);
        float *out = malloc(sizeof(float) * N_TOK * N_VOCAB), *dec = malloc(sizeof(float) * N_TOK * N_VOCAB);
        bool ok = logits(m, 2, 512, false, ids, out, msg, sizeof msg);
        check_vs("prefill vs llama.cpp, F32 KV", out, ref_p, 1e-3, ok, msg);
        ok = logits(m, 2, 512, true, ids, dec, msg, sizeof msg);
        check_vs("token-by-token decode vs llama.cpp, F32 KV", dec, ref_d, 1e-3, ok, msg);
        check_vs("token-by-token decode vs our prefill", dec, out, 1e-4, ok, msg);
        ok = logits(m, 2, 16, false, ids, out, msg, sizeof msg);
        check_vs("prefill in micro-batches of 16 vs llama.cpp", out, ref_p, 1e-3, ok, msg);
        ok = logits(m, 1, 512, false, ids, out, msg, sizeof msg);
        check_vs("prefill on one thread vs llama.cpp", out, ref_p, 1e-3, ok, msg);
        free(out);
        free(dec);
    }
    hmoe_model_free(m);
    free(ref_p);
    free(ref_d);
    return t_summary();
}
