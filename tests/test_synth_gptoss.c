/* test_synth_gptoss.c — `hmoe synth` for gpt-oss (gpt-oss.md): the gpt-oss-20b and -120b
 * presets plan the published shapes and the MXFP4_MOE mix (expert stacks MXFP4, every other
 * matrix Q8_0, norms / router / biases / sinks F32) with byte counts derived here from the
 * shapes; random MXFP4 blocks decode to weights of std ≈ 0.02 with valid exponents; and a
 * written gpt-oss-tiny file loads and runs: a 48-token prefill (three times its sliding
 * window of 16) matches token-by-token decoding. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "hmoe/cpu.h"
#include "hmoe/model.h"
#include "hmoe/synth.h"

/* Find a planned tensor by name. */
static const struct hmoe_synth_tensor *find(const struct hmoe_synth_plan *p, const char *name) {
    for (size_t i = 0; i < p->n_tensors; i++)
        if (strcmp(p->tensors[i].name, name) == 0) return &p->tensors[i];
    return NULL;
}

/* Bytes of rows x ne0 elements of type t, from the block layout (MXFP4: 17 bytes / 32,
 * Q8_0: 34 bytes / 32, F32: 4 bytes). */
static uint64_t bytes_of(enum hmoe_type t, uint64_t ne0, uint64_t rows) {
    uint64_t per = t == HMOE_TYPE_MXFP4 ? 17 : t == HMOE_TYPE_Q8_0 ? 34 : 128;
    return ne0 / 32 * per * rows;
}

static void check_big(const char *preset, uint32_t L, uint32_t E) {
    struct hmoe_synth_plan p;
    struct hmoe_err err = {0};
    struct hmoe_synth_opts o = {.preset = preset, .seed = 1};
    char name[160];
    enum hmoe_status st = hmoe_synth_plan_init(&p, &o, &err);
    snprintf(name, sizeof name, "synth %s plans", preset);
    t_check(!st, name, "%s", err.msg);
    if (st) return;
    const uint64_t d = 2880, q = 64 * 64, kv = 8 * 64, F = 2880, V = 201088;
    snprintf(name, sizeof name, "%s: %u layers, %u experts top-4, 64/8 heads x 64, vocab 201088, mix mxfp4_moe", preset,
             L, E);
    t_check(p.preset.n_layer == L && p.preset.n_expert == E && p.preset.n_expert_used == 4 && p.preset.n_head == 64 &&
                p.preset.n_head_kv == 8 && p.preset.head_dim == 64 && p.preset.n_vocab == V && p.preset.swa_window == 128 &&
                strcmp(hmoe_synth_mix_name(p.mix), "mxfp4_moe") == 0 && hmoe_synth_mix_file_type(p.mix) == 38 &&
                p.n_tensors == 3 + 19 * (size_t)L,
            name, "layers %u experts %u tensors %zu", p.preset.n_layer, p.preset.n_expert, p.n_tensors);
    /* Types and shapes of one layer and the globals. */
    const struct hmoe_synth_tensor *gate = find(&p, "blk.5.ffn_gate_exps.weight"),
                                   *down = find(&p, "blk.5.ffn_down_exps.weight"), *aq = find(&p, "blk.5.attn_q.weight"),
                                   *ao = find(&p, "blk.5.attn_output.weight"), *emb = find(&p, "token_embd.weight"),
                                   *out = find(&p, "output.weight"), *sinks = find(&p, "blk.5.attn_sinks.weight"),
                                   *router = find(&p, "blk.5.ffn_gate_inp.weight"),
                                   *db = find(&p, "blk.5.ffn_down_exps.bias"), *qb = find(&p, "blk.5.attn_q.bias"),
                                   *pan = find(&p, "blk.5.post_attention_norm.weight");
    snprintf(name, sizeof name, "%s: experts MXFP4 {2880, 2880, E}, attention/embedding/output Q8_0, the rest F32",
             preset);
    t_check(gate && down && aq && ao && emb && out && sinks && router && db && qb && pan &&
                gate->type == HMOE_TYPE_MXFP4 && down->type == HMOE_TYPE_MXFP4 && gate->ne[0] == (int64_t)d &&
                gate->ne[1] == (int64_t)F && gate->ne[2] == (int64_t)E && aq->type == HMOE_TYPE_Q8_0 &&
                aq->ne[1] == (int64_t)q && ao->type == HMOE_TYPE_Q8_0 && ao->ne[0] == (int64_t)q &&
                emb->type == HMOE_TYPE_Q8_0 && out->type == HMOE_TYPE_Q8_0 && sinks->type == HMOE_TYPE_F32 &&
                sinks->ne[0] == 64 && router->type == HMOE_TYPE_F32 && db->type == HMOE_TYPE_F32 &&
                db->ne[0] == (int64_t)d && db->ne[1] == (int64_t)E && qb->type == HMOE_TYPE_F32 &&
                pan->type == HMOE_TYPE_F32,
            name, "a tensor is missing or has the wrong type/shape");
    /* Every tensor's bytes from its shape, summed with 32-byte padding. */
    uint64_t expert = 3 * bytes_of(HMOE_TYPE_MXFP4, d, F * E) * L;
    uint64_t attn = (bytes_of(HMOE_TYPE_Q8_0, d, q + 2 * kv) + bytes_of(HMOE_TYPE_Q8_0, q, d)) * L;
    uint64_t f32 = 4 * (uint64_t)L * (q + 2 * kv + d + 64 + 2 * d + d * E + E + 2 * F * E + d * E);
    uint64_t globals = 2 * bytes_of(HMOE_TYPE_Q8_0, d, V) + 4 * d;
    uint64_t sum = 0;
    for (size_t i = 0; i < p.n_tensors; i++) sum += p.tensors[i].n_bytes;
    snprintf(name, sizeof name, "%s: tensor bytes = experts + attention + globals + F32 from the shapes (%.2f GB)",
             preset, (double)sum / 1e9);
    t_check(sum == expert + attn + f32 + globals, name, "planned %llu, expected %llu", (unsigned long long)sum,
            (unsigned long long)(expert + attn + f32 + globals));
    hmoe_synth_plan_free(&p);
}

/* Random MXFP4 blocks: exponents 119..120, weights of std about 0.02 (gpt-oss.md decoding). */
static void check_blocks(void) {
    enum { NB = 4096 };
    uint8_t *blk = malloc(NB * 17);
    struct hmoe_err err = {0};
    enum hmoe_status st = hmoe_synth_fill_blocks(HMOE_TYPE_MXFP4, 7, blk, NB, &err);
    static const int kv[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
    double s2 = 0;
    bool exps_ok = true;
    for (int b = 0; !st && b < NB; b++) {
        const uint8_t *p = blk + (size_t)b * 17;
        exps_ok &= p[0] == 119 || p[0] == 120;
        double scale = ldexp(1.0, p[0] - 128);
        for (int j = 0; j < 16; j++) {
            double lo = kv[p[1 + j] & 15] * scale, hi = kv[p[1 + j] >> 4] * scale;
            s2 += lo * lo + hi * hi;
        }
    }
    double sd = sqrt(s2 / (NB * 32.0));
    t_check(!st && hmoe_synth_can_fill(HMOE_TYPE_MXFP4) && exps_ok && sd > 0.012 && sd < 0.03,
            "synth MXFP4 blocks: exponent 119..120, weight std about 0.02", "%s std %.4f", st ? err.msg : "", sd);
    /* The library's own decoder agrees with the reference decoding above on a block. */
    float got[32];
    hmoe_type_info[HMOE_TYPE_MXFP4].dequant_ref(blk, got, 32);
    bool same = true;
    double scale = ldexp(1.0, blk[0] - 128);
    for (int j = 0; j < 16; j++)
        same &= got[j] == (float)(kv[blk[1 + j] & 15] * scale) && got[j + 16] == (float)(kv[blk[1 + j] >> 4] * scale);
    t_check(same, "synth MXFP4 block decodes as gpt-oss.md describes", "differs");
    free(blk);
}

static void check_tiny_runs(void) {
    char path[] = "/tmp/hmoe-gptoss-XXXXXX";
    int fd = mkstemp(path);
    if (fd >= 0) close(fd);
    struct hmoe_synth_plan p;
    struct hmoe_err err = {0};
    struct hmoe_synth_opts o = {.preset = "gpt-oss-tiny", .seed = 5};
    enum hmoe_status st = fd < 0 ? HMOE_ERR_IO : hmoe_synth_plan_init(&p, &o, &err);
    if (!st) {
        st = hmoe_synth_write(&p, path, NULL, NULL, &err);
        hmoe_synth_plan_free(&p);
    }
    struct hmoe_model *m = NULL;
    if (!st) st = hmoe_model_load(path, NULL, &m, &err);
    t_check(!st && m->cfg.n_layer == 4 && m->cfg.swa_window == 16 && m->w.layers[1].moe.up.type == HMOE_TYPE_MXFP4 &&
                m->w.layers[1].attn_q.type == HMOE_TYPE_Q8_0 && m->w.layers[1].attn_sinks != NULL &&
                m->w.output.type == HMOE_TYPE_Q8_0,
            "synth gpt-oss-tiny loads: MXFP4 experts, Q8_0 attention and output, sinks, window 16", "%s", err.msg);
    if (!st) {
        enum { N = 48 };
        const int V = m->cfg.n_vocab;
        int32_t tok[N];
        for (int i = 0; i < N; i++) tok[i] = (int32_t)((i * 53 + 7) % V);
        float *a = malloc(sizeof(float) * N * V), *b = malloc(sizeof(float) * N * V);
        struct hmoe_ctx_params cp;
        hmoe_ctx_params_default(&cp);
        cp.n_ctx = 128;
        cp.type_k = cp.type_v = HMOE_TYPE_F32;
        cp.n_threads = 2;
        struct hmoe_ctx *c = NULL;
        st = hmoe_ctx_init(m, &cp, &c, &err);
        if (!st) st = hmoe_ctx_decode(c, tok, N, 0, HMOE_LOGITS_ALL, a, &err);
        if (!st) hmoe_ctx_reset(c);
        for (int i = 0; !st && i < N; i++) st = hmoe_ctx_decode(c, &tok[i], 1, i, HMOE_LOGITS_LAST, b + (size_t)i * V, &err);
        double worst = 0, amax = 0;
        bool finite = true;
        for (size_t i = 0; !st && i < (size_t)N * V; i++) {
            finite &= isfinite(a[i]) && isfinite(b[i]);
            worst = fmax(worst, fabs((double)a[i] - b[i]));
            amax = fmax(amax, fabs((double)a[i]));
        }
        t_check(!st && finite && amax > 0 && worst < 1e-2 * amax,
                "synth gpt-oss-tiny runs: 48-token prefill matches token-by-token decoding",
                "%s max |d| %.3g of |logit| %.3g", st ? err.msg : "", worst, amax);
        hmoe_ctx_free(c);
        free(a);
        free(b);
    }
    hmoe_model_free(m);
    remove(path);
}

int main(void) {
    hmoe_cpu_init();
    check_big("gpt-oss-20b", 24, 32);
    check_big("gpt-oss-120b", 36, 128);
    check_blocks();
    check_tiny_runs();
    return t_summary();
}
