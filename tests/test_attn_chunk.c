/* test_attn_chunk.c — a batch's attention in chunks of tokens (attention.c task_attend_chunk:
 * the queries of up to 4 tokens share each K/V read) gives the same logits, bit for bit, as
 * one token per work item (the run state's att_tok set to 1 after init), on the tiny Q4_K_M and F32 models: a 29-token
 * prefill (chunks of 4 with a short last one) and then 13 more tokens at position 29 over
 * the cache the first call left (rows of different lengths inside one chunk), with f16 and
 * f32 K/V caches and 1 and 2 threads. The softmax of each row covers its own token's
 * positions and the rest is zeroed, so the weighted sum only adds exact zeros.
 */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "model/model_impl.h"
#include "model_check.h"

static struct hmoe_model *load_model(const char *file, struct hmoe_err *err) {
    char path[8192];
    struct hmoe_model *m = NULL;
    snprintf(path, sizeof path, "%s%s", t_shared("fixtures/models/"), file);
    hmoe_model_load(path, NULL, &m, err);
    return m;
}

/* Logits of all 42 positions (two calls) with the given tokens per attention item. */
static float *run(struct hmoe_model *m, const char *tok, enum hmoe_type kv, int threads, const int32_t *ids,
                  struct hmoe_err *err) {
    struct hmoe_ctx_params cp;
    hmoe_ctx_params_default(&cp);
    cp.n_ctx = 256;
    cp.type_k = cp.type_v = kv;
    cp.n_threads = threads;
    struct hmoe_ctx *c = NULL;
    const int V = m->cfg.n_vocab;
    float *lo = malloc((size_t)42 * V * sizeof(float));
    const bool ok = lo && !hmoe_ctx_init(m, &cp, &c, err);
    if (ok && !strcmp(tok, "1")) c->rs.att_tok = 1; /* buffers are sized for more: fewer is safe */
    if (!ok || hmoe_ctx_decode(c, ids, 29, 0, HMOE_LOGITS_ALL, lo, err) ||
        hmoe_ctx_decode(c, ids + 29, 13, 29, HMOE_LOGITS_ALL, lo + (size_t)29 * V, err)) {
        free(lo);
        lo = NULL;
    }
    hmoe_ctx_free(c);
    return lo;
}

int main(void) {
    static const char *const files[] = {"tiny-qwen3moe-A-Q4_K_M.gguf", "tiny-qwen3moe-A-mini-F32.gguf"};
    const enum hmoe_type kvs[] = {HMOE_TYPE_F16, HMOE_TYPE_F32};
    int32_t ids[42];
    for (int i = 0; i < 42; i++) ids[i] = (int32_t)(17 + 131 * i) % 1000;
    for (size_t f = 0; f < HMOE_ARRAY_LEN(files); f++) {
        struct hmoe_err err = {0};
        struct hmoe_model *m = load_model(files[f], &err);
        if (!m) {
            t_check(0, files[f], "%s", err.msg);
            continue;
        }
        const int V = m->cfg.n_vocab;
        for (size_t k = 0; k < HMOE_ARRAY_LEN(kvs); k++)
            for (int threads = 1; threads <= 2; threads++) {
                char name[256];
                snprintf(name, sizeof name, "%s, %s K/V, %d thread%s: attention in 4-token chunks = one token per item",
                         files[f], hmoe_type_name(kvs[k]), threads, threads > 1 ? "s" : "");
                float *a = run(m, "1", kvs[k], threads, ids, &err), *b = a ? run(m, "4", kvs[k], threads, ids, &err) : NULL;
                long diff = -1;
                float da = 0, db = 0;
                if (a && b) {
                    diff = 0;
                    for (size_t i = 0; i < (size_t)42 * V; i++)
                        if (a[i] != b[i]) {
                            if (!diff) da = a[i], db = b[i];
                            diff++;
                        }
                }
                t_check(a && b && diff == 0, name, "%s%ld of %ld logits differ (first: %.9g vs %.9g)",
                        a && b ? "" : err.msg, diff, (long)42 * V, da, db);
                free(a);
                free(b);
            }
        hmoe_model_free(m);
    }
    return t_summary();
}
