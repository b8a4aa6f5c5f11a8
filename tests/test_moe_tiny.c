/* test_moe_tiny.c — fixtures/moe-tiny/qwen3moe-tiny.gguf (d 64, 2 layers, 4/2 heads,
 * head_dim 32 != d/H, 8 experts top-3, expert FFN 24) against llama.cpp's logits for the 70
 * ids of tokens.txt (moe-tiny/README.md): one prefill vs *-prefill.f32 and one token per
 * call vs *-decode.f32, max |Δ| < 1e-3 and identical argmax with an F32 KV cache; with an
 * F16 cache the README expects ~1e-3 and calls >= 1e-2 or an argmax flip a bug.
 */
#include "harness.h"
#include "model_check.h"

enum { N_TOK = 70, N_VOCAB = 256 };

static void run(struct hmoe_model *m, enum hmoe_type kv, double tol, const int32_t *ids, const float *ref_prefill,
                const float *ref_decode) {
    struct hmoe_err err = {0};
    struct hmoe_ctx *c = NULL;
    struct hmoe_ctx_params cp;
    hmoe_ctx_params_default(&cp);
    cp.n_ctx = 128;
    cp.type_k = cp.type_v = kv;
    cp.n_threads = 2;
    char name[160];
    const char *kvn = hmoe_type_name(kv);
    float *out = malloc(sizeof(float) * N_TOK * N_VOCAB);
    snprintf(name, sizeof name, "qwen3moe-tiny %s KV: context", kvn);
    if (hmoe_ctx_init(m, &cp, &c, &err)) {
        t_check(0, name, "%s", err.msg);
        free(out);
        return;
    }
    for (int mode = 0; mode < 2; mode++) {
        const float *ref = mode == 0 ? ref_prefill : ref_decode;
        enum hmoe_status st = HMOE_OK;
        hmoe_ctx_reset(c);
        if (mode == 0) st = hmoe_ctx_decode(c, ids, N_TOK, 0, HMOE_LOGITS_ALL, out, &err);
        for (int i = 0; mode == 1 && i < N_TOK && !st; i++)
            st = hmoe_ctx_decode(c, &ids[i], 1, i, HMOE_LOGITS_LAST, out + (size_t)i * N_VOCAB, &err);
        double worst = 0;
        int worst_pos = -1, flips = 0, first_flip = -1;
        for (int p = 0; p < N_TOK && !st; p++) {
            struct mc_row r = mc_compare_row(out + (size_t)p * N_VOCAB, ref + (size_t)p * N_VOCAB, N_VOCAB);
            if (r.max_abs > worst) worst = r.max_abs, worst_pos = p;
            if (mc_argmax(out + (size_t)p * N_VOCAB, N_VOCAB) != mc_argmax(ref + (size_t)p * N_VOCAB, N_VOCAB)) {
                flips++;
                if (first_flip < 0) first_flip = p;
            }
        }
        snprintf(name, sizeof name, "qwen3moe-tiny %s KV: %s vs llama.cpp (max |d| %.2g)", kvn,
                 mode == 0 ? "prefill" : "token-by-token decode", worst);
        t_check(!st && worst < tol && flips == 0, name, "%s worst at position %d (limit %g), %d argmax flips (first %d)",
                st ? err.msg : "", worst_pos, tol, flips, first_flip);
    }
    hmoe_ctx_free(c);
    free(out);
}

int main(void) {
    char path[8192];
    struct hmoe_err err = {0};
    int32_t ids[N_TOK];
    snprintf(path, sizeof path, "%s", t_shared("fixtures/moe-tiny/tokens.txt"));
    FILE *f = fopen(path, "r");
    int n = 0;
    while (f && n < N_TOK && fscanf(f, "%d", &ids[n]) == 1) n++;
    if (f) fclose(f);
    t_check(n == N_TOK, "qwen3moe-tiny tokens.txt has 70 ids", "read %d", n);
    snprintf(path, sizeof path, "%s", t_shared("fixtures/moe-tiny/qwen3moe-tiny.llamacpp-prefill.f32"));
    float *ref_p = mc_read_f32(path, (size_t)N_TOK * N_VOCAB);
    snprintf(path, sizeof path, "%s", t_shared("fixtures/moe-tiny/qwen3moe-tiny.llamacpp-decode.f32"));
    float *ref_d = mc_read_f32(path, (size_t)N_TOK * N_VOCAB);
    t_check(ref_p && ref_d, "qwen3moe-tiny reference logits present", "missing .f32 files");
    struct hmoe_model *m = NULL;
    snprintf(path, sizeof path, "%s", t_shared("fixtures/moe-tiny/qwen3moe-tiny.gguf"));
    enum hmoe_status st = hmoe_model_load(path, NULL, &m, &err);
    t_check(!st, "qwen3moe-tiny load", "%s", err.msg);
    if (!st && n == N_TOK && ref_p && ref_d) {
        t_check(m->cfg.head_dim == 32 && m->cfg.n_embd == 64 && m->cfg.n_head == 4 && m->cfg.n_expert_used == 3 &&
                    m->cfg.n_ff_exp == 24 && m->cfg.n_vocab == N_VOCAB,
                "qwen3moe-tiny hyper-parameters (head_dim 32 from key_length, top-3, FFN 24)",
                "head_dim %d d %d H %d k %d F %d V %d", m->cfg.head_dim, m->cfg.n_embd, m->cfg.n_head,
                m->cfg.n_expert_used, m->cfg.n_ff_exp, m->cfg.n_vocab);
        run(m, HMOE_TYPE_F32, 1e-3, ids, ref_p, ref_d);
        run(m, HMOE_TYPE_F16, 1e-2, ids, ref_p, ref_d);
    }
    hmoe_model_free(m);
    free(ref_p);
    free(ref_d);
    return t_summary();
}
