/* gpu_test_batch.c — parallel sequences with the GPU backend, which holds one sequence:
 * --gpu on with n_seq 2 is refused naming -np; --gpu auto with n_seq 2 runs on the CPU and its
 * batched steps equal each sequence alone on the CPU (bit for bit: the same CPU code); with one
 * sequence on the GPU, hmoe_ctx_decode_batch gives hmoe_ctx_decode's logits (the same GPU
 * path) for a prefill and a decode step. Model: fixtures/models/tiny-qwen3moe-A-mini-F32.gguf (the GPU forward test's F32 model), an
 * F16 KV cache (a GPU cache type). Without a CUDA device it prints one "skipped" line.
 */
#include "harness.h"
#include "hmoe/cuda.h"
#include "model_check.h"


static struct hmoe_ctx *open_ctx(struct hmoe_model *m, enum hmoe_gpu_mode gpu, int n_seq, int n_ctx,
                                 struct hmoe_err *err, enum hmoe_status *st) {
    struct hmoe_ctx_params cp;
    hmoe_ctx_params_default(&cp);
    cp.n_threads = 2;
    cp.gpu = gpu;
    cp.n_seq = n_seq;
    cp.n_ctx = n_ctx;
    struct hmoe_ctx *c = NULL;
    *st = hmoe_ctx_init(m, &cp, &c, err);
    return c;
}

int main(void) {
    if (!hmoe_cuda_available()) {
        printf("gpu_test_batch ... skipped: no CUDA device\n");
        return t_summary();
    }
    struct hmoe_err err = {0};
    struct hmoe_model *m = NULL;
    if (hmoe_model_load(t_shared("fixtures/models/tiny-qwen3moe-A-mini-F32.gguf"), NULL, &m, &err)) {
        t_check(0, "gpu batch: load tiny-qwen3moe-A-mini-F32", "%s", err.msg);
        return t_summary();
    }
    const int V = m->cfg.n_vocab;
    enum hmoe_status st;
    struct hmoe_ctx *c = open_ctx(m, HMOE_GPU_ON, 2, 256, &err, &st);
    t_check(st == HMOE_ERR_UNSUPPORTED && !c && strstr(err.msg, "-np"), "gpu batch: --gpu on with 2 sequences is refused",
            "%d %s", st, err.msg);

    c = open_ctx(m, HMOE_GPU_AUTO, 2, 256, &err, &st);
    t_check(!st && c && strcmp(hmoe_ctx_backend(c), "cpu") == 0, "gpu batch: --gpu auto with 2 sequences runs on the CPU",
            "%d %s %s", st, err.msg, c ? hmoe_ctx_backend(c) : "-");
    int32_t a[12], b[7];
    for (int i = 0; i < 12; i++) a[i] = (i * 37 + 5) % V;
    for (int i = 0; i < 7; i++) b[i] = (i * 53 + 11) % V;
    float *lg = malloc(2 * (size_t)V * sizeof *lg), *ref = malloc((size_t)V * sizeof *ref);
    const size_t row = (size_t)V * sizeof *ref;
    if (c) {
        const struct hmoe_seq_tokens sh[2] = {{.seq = 0, .ids = a, .n = 12, .logits = true},
                                              {.seq = 1, .ids = b, .n = 7, .logits = true}};
        st = hmoe_ctx_decode_batch(c, sh, 2, lg, &err);
        struct hmoe_ctx *solo = open_ctx(m, HMOE_GPU_OFF, 1, 128, &err, &st);
        bool same = solo && !st;
        if (same) {
            same = !hmoe_ctx_decode(solo, a, 12, 0, HMOE_LOGITS_LAST, ref, &err) &&
                   memcmp(ref, lg, row) == 0;
            hmoe_ctx_reset(solo);
            same = same && !hmoe_ctx_decode(solo, b, 7, 0, HMOE_LOGITS_LAST, ref, &err) &&
                   memcmp(ref, lg + V, row) == 0;
        }
        t_check(same, "gpu batch: the CPU fallback's batched step equals each sequence alone", "%s", err.msg);
        hmoe_ctx_free(solo);
    }
    hmoe_ctx_free(c);

    c = open_ctx(m, HMOE_GPU_ON, 1, 128, &err, &st);
    t_check(!st && c && strcmp(hmoe_ctx_backend(c), "cpu") != 0, "gpu batch: one sequence on the GPU", "%d %s", st,
            err.msg);
    if (c && !st) {
        const struct hmoe_seq_tokens p = {.seq = 0, .ids = a, .n = 11, .logits = true};
        const struct hmoe_seq_tokens d = {.seq = 0, .ids = a + 11, .n = 1, .pos0 = 11, .logits = true};
        bool ok = !hmoe_ctx_decode_batch(c, &p, 1, lg, &err) && !hmoe_ctx_decode_batch(c, &d, 1, lg, &err);
        hmoe_ctx_reset(c);
        ok = ok && !hmoe_ctx_decode(c, a, 11, 0, HMOE_LOGITS_NONE, NULL, &err) &&
             !hmoe_ctx_decode(c, a + 11, 1, 11, HMOE_LOGITS_LAST, ref, &err);
        struct mc_row r = mc_compare_row(lg, ref, V);
        t_check(ok && r.max_abs < 1e-4, "gpu batch: a one-sequence batch on the GPU equals hmoe_ctx_decode",
                "%s max |d| %g", err.msg, r.max_abs);
    }
    hmoe_ctx_free(c);
    hmoe_model_free(m);
    free(lg);
    free(ref);
    return t_summary();
}
