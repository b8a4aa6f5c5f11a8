/* test_synth_rules.c — `hmoe synth --mix` per-tensor rule lists (src/model/synth_mix.c): each bad
 * list is an argument error naming the item; the first matching rule wins over later ones and
 * over the base mix; norms take only float-type rules (a rule that types no tensor is an
 * error); the ud-q4_k_xl preset gives every
 * tensor of a 6-layer file the type of the published UD-Q4_K_XL table as written out here by
 * hand (Q8_0 attention, Q6_K embeddings and head, BF16 norms, F32 routers, ffn_down Q6_K in
 * blocks 0-3 and Q5_K after, ffn_gate/up IQ4_XS in odd blocks and Q4_K in even ones); the file
 * it writes loads on the CPU (its BF16 norms widened to exactly the stored values) and decodes
 * to finite logits, the same in two runs.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "harness.h"
#include "hmoe/fp16.h"
#include "hmoe/gguf.h"
#include "hmoe/model.h"
#include "hmoe/synth.h"

static void expect_bad(const char *mix, const char *part) {
    struct hmoe_synth_opts o = {.preset = "tiny", .mix = mix, .seed = 1};
    struct hmoe_synth_plan plan;
    struct hmoe_err err = {0};
    const enum hmoe_status st = hmoe_synth_plan_init(&plan, &o, &err);
    char label[200];
    snprintf(label, sizeof label, "--mix '%s' is refused: %s", mix, part);
    t_check(st == HMOE_ERR_ARG && strstr(err.msg, part), label, "status %d: %s", st, err.msg);
    if (!st) hmoe_synth_plan_free(&plan);
}

static const struct hmoe_synth_tensor *find(const struct hmoe_synth_plan *p, const char *name) {
    for (size_t i = 0; i < p->n_tensors; i++)
        if (!strcmp(p->tensors[i].name, name)) return &p->tensors[i];
    return NULL;
}

/* The UD-Q4_K_XL table for tensor `name` of block l (-1: outside the blocks), by hand. */
static enum hmoe_type ud_type(const char *name, int l) {
    if (strstr(name, "_norm.weight")) return HMOE_TYPE_BF16;
    if (strstr(name, "ffn_gate_inp")) return HMOE_TYPE_F32;
    if (!strcmp(name, "token_embd.weight") || !strcmp(name, "output.weight")) return HMOE_TYPE_Q6_K;
    if (strstr(name, ".attn_")) return HMOE_TYPE_Q8_0;
    if (strstr(name, "ffn_down_exps")) return l < 4 ? HMOE_TYPE_Q6_K : HMOE_TYPE_Q5_K;
    if (strstr(name, "ffn_gate_exps") || strstr(name, "ffn_up_exps")) return l % 2 ? HMOE_TYPE_IQ4_XS : HMOE_TYPE_Q4_K;
    return HMOE_TYPE_COUNT;
}

static float *decode(const char *path, int *nv) {
    struct hmoe_err err = {0};
    struct hmoe_model *m = NULL;
    if (hmoe_model_load(path, NULL, &m, &err)) return fprintf(stderr, "%s\n", err.msg), NULL;
    struct hmoe_ctx_params cp;
    hmoe_ctx_params_default(&cp);
    cp.n_ctx = 64, cp.n_threads = 1;
    struct hmoe_ctx *c = NULL;
    *nv = m->cfg.n_vocab;
    float *lo = malloc((size_t)*nv * sizeof *lo);
    const int32_t ids[6] = {11, 2000, 300, 45, 7, 100000};
    if (!lo || hmoe_ctx_init(m, &cp, &c, &err) || hmoe_ctx_decode(c, ids, 6, 0, HMOE_LOGITS_LAST, lo, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        free(lo);
        lo = NULL;
    }
    hmoe_ctx_free(c);
    hmoe_model_free(m);
    return lo;
}

int main(void) {
    expect_bad("attn_.*=q9_9", "unknown type name");
    expect_bad("(attn=q8_0", "bad regular expression");
    expect_bad("=q8_0", "empty pattern");
    expect_bad("nosuchmix", "unknown mix 'nosuchmix' (valid: q4_k_m");
    expect_bad("nosuchmix,attn_q=q8_0", "'nosuchmix' is neither REGEX=TYPE nor a mix name");
    expect_bad("q4_k_m,q6_k,attn_q=q8_0", "second base mix");
    expect_bad("attn_q=q8_0,,attn_k=q8_0", "empty item");
    expect_bad("_norm\\.weight=q4_k", "rule '_norm\\.weight=q4_k' types no tensor of this file");
    expect_bad("attn_q=q8_0,attn_q\\.weight=q6_k", "rule 'attn_q\\.weight=q6_k' types no tensor");

    /* first match wins; the base mix for the rest */
    struct hmoe_synth_opts o = {.preset = "tiny", .mix = "q6_k,attn_q\\.=q8_0,blk\\.1\\.=q4_0,\\d\\.ffn_norm=f16", .seed = 1};
    struct hmoe_synth_plan plan;
    struct hmoe_err err = {0};
    enum hmoe_status st = hmoe_synth_plan_init(&plan, &o, &err);
    const struct hmoe_synth_tensor *q1 = st ? NULL : find(&plan, "blk.1.attn_q.weight"),
                                   *k1 = st ? NULL : find(&plan, "blk.1.attn_k.weight"),
                                   *k2 = st ? NULL : find(&plan, "blk.2.attn_k.weight"),
                                   *n2 = st ? NULL : find(&plan, "blk.2.ffn_norm.weight"),
                                   *a2 = st ? NULL : find(&plan, "blk.2.attn_norm.weight");
    t_check(q1 && k1 && k2 && n2 && a2 && q1->type == HMOE_TYPE_Q8_0 && k1->type == HMOE_TYPE_Q4_0 &&
                k2->type == HMOE_TYPE_Q6_K && n2->type == HMOE_TYPE_F16 && a2->type == HMOE_TYPE_F32,
            "--mix rules: the first match wins, the base mix (q6_k) types the rest, \\d works, norms stay F32",
            "%s", st ? err.msg : "a type differs");
    if (!st) hmoe_synth_plan_free(&plan);

    /* the UD-Q4_K_XL preset, tensor by tensor */
    o = (struct hmoe_synth_opts){.preset = "tiny", .mix = "ud-q4_k_xl", .n_layers = 6, .seed = 3};
    st = hmoe_synth_plan_init(&plan, &o, &err);
    int bad = -1, kinds[HMOE_TYPE_COUNT] = {0};
    for (size_t i = 0; !st && i < plan.n_tensors; i++) {
        const struct hmoe_synth_tensor *t = &plan.tensors[i];
        kinds[t->type]++;
        if (t->type != ud_type(t->name, t->layer) && bad < 0) bad = (int)i;
    }
    t_check(!st && bad < 0 && kinds[HMOE_TYPE_Q5_K] == 2 && kinds[HMOE_TYPE_IQ4_XS] == 6,
            "--mix ud-q4_k_xl: every tensor has the type of the UD-Q4_K_XL table",
            "%s tensor %s is %s", st ? err.msg : "", bad >= 0 ? plan.tensors[bad].name : "-",
            bad >= 0 ? hmoe_type_name(plan.tensors[bad].type) : "-");
    char path[] = "/tmp/hmoe_ud_XXXXXX";
    const int fd = mkstemp(path);
    if (fd >= 0) close(fd);
    if (!st) st = hmoe_synth_write(&plan, path, NULL, NULL, &err);
    if (!bad && !st) hmoe_synth_plan_free(&plan);
    else if (!st || plan.tensors) hmoe_synth_plan_free(&plan);

    /* it loads, its norms are the stored BF16 values, and it decodes */
    struct hmoe_model *m = NULL;
    bool norms = false;
    if (!st && hmoe_model_load(path, NULL, &m, &err) == HMOE_OK) {
        const struct hmoe_gguf_tensor *t = hmoe_gguf_find_tensor(m->gguf, "blk.5.attn_norm.weight");
        const float *w = m->w.layers[5].attn_norm;
        norms = t && t->type == HMOE_TYPE_BF16 && w;
        double mean = 0;
        for (uint64_t i = 0; norms && i < t->n_elements; i++) {
            uint16_t h;
            memcpy(&h, (const uint8_t *)t->data + 2 * i, 2);
            norms = w[i] == hmoe_bf16_to_f32(h);
            mean += w[i] / (double)t->n_elements;
        }
        norms = norms && fabs(mean - 1.0) < 0.01; /* 1 ± 0.02 as the F32 norms */
        hmoe_model_free(m);
    }
    t_check(norms, "ud-q4_k_xl file: BF16 norms load widened to exactly the stored values (mean 1)", "%s",
            st ? err.msg : "mismatch");
    int nv = 0, nv2 = 0;
    float *a = st ? NULL : decode(path, &nv), *b = st ? NULL : decode(path, &nv2);
    bool finite = a && b && nv == nv2;
    for (int i = 0; finite && i < nv; i++) finite = isfinite(a[i]) && a[i] == b[i];
    t_check(finite, "ud-q4_k_xl file: decodes on the CPU to finite logits, identical in two runs", "%s",
            a && b ? "NaN/Inf or runs differ" : "load or decode failed");
    free(a), free(b);
    unlink(path);
    return t_summary();
}
