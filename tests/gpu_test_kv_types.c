/* gpu_test_kv_types.c — the whole model on the GPU with every KV cache type pair (-ctk / -ctv)
 * against the CPU backend with the same pair, on the F32 tiny fixture model
 * (fixtures/models/tiny-qwen3moe-A-mini-F32.gguf, so the weights add no quantization of their own).
 * Per pair: one 48-token prefill (logits of every position) and the same tokens decoded one by one
 * (the fused decode step), each compared with the CPU prefill of the same pair.
 *
 * Tolerances: both backends store K and V rows with the same quantizer (byte-identical for equal
 * inputs: gpu_test_norm_rope, gpu_test_attn), so what separates them is the f32 arithmetic of the
 * projections and attention (~1e-6 relative) plus, rarely, a K/V element whose code flips because
 * that tiny difference crosses a rounding boundary: one quantization step of one element, which
 * for 4- and 5-bit types is 1/8 .. 1/32 of its block's largest value. For f32 / f16 / bf16 / q8_0
 * the F16-KV limit of the golden tests applies (max |d| <= 1e-2, fixtures §5.4); for the 4- and
 * 5-bit types max |d| <= 0.06 (the limit the golden tests allow a quantized model). Both with
 * cosine >= 0.9999 per row and the same top-1 token at >= 95 % of positions, or else, since the
 * CPU's quantized-K dot products also quantize q (to the type's activation blocks, as llama.cpp's
 * CPU backend does) where the GPU multiplies f32 q: the GPU no further from the CPU with an F32
 * cache than 1.5 x the CPU with that pair is (max |d| and 1 - cosine) — a codec bug lands far
 * outside that. Each case prints ("#") the CPU's own distance from the F32 cache.
 */
#include "harness.h"
#include "hmoe/cuda.h"
#include "model_check.h"

#define NTOK 48

struct res {
    double max_abs, worst_cos;
    int top1_ok;
};

static struct res compare_rows(const float *a, const float *b, int n, int V) {
    struct res r = {0, 1, 0};
    for (int p = 0; p < n; p++) {
        struct mc_row s = mc_compare_row(a + (size_t)p * V, b + (size_t)p * V, V);
        if (!(s.max_abs <= r.max_abs)) r.max_abs = s.max_abs;
        if (!(s.cos >= r.worst_cos)) r.worst_cos = s.cos;
        r.top1_ok += mc_argmax(a + (size_t)p * V, V) == mc_argmax(b + (size_t)p * V, V);
    }
    return r;
}

static struct hmoe_ctx *open_ctx(const struct hmoe_model *m, enum hmoe_type tk, enum hmoe_type tv, enum hmoe_gpu_mode gpu,
                                 struct hmoe_err *err) {
    struct hmoe_ctx_params cp;
    hmoe_ctx_params_default(&cp);
    cp.n_ctx = 256;
    cp.type_k = tk, cp.type_v = tv;
    cp.n_threads = 2;
    cp.gpu = gpu;
    cp.sched.no_profile = true;
    struct hmoe_ctx *c = NULL;
    if (hmoe_ctx_init(m, &cp, &c, err)) return NULL;
    return c;
}

/* All NTOK logits rows of a prefill (decode_one: token by token) into out. */
static bool run(struct hmoe_ctx *c, const int32_t *ids, bool decode_one, float *out, int V, struct hmoe_err *err) {
    hmoe_ctx_reset(c);
    if (!decode_one) return !hmoe_ctx_decode(c, ids, NTOK, 0, HMOE_LOGITS_ALL, out, err);
    for (int i = 0; i < NTOK; i++)
        if (hmoe_ctx_decode(c, &ids[i], 1, i, HMOE_LOGITS_LAST, out + (size_t)i * V, err)) return false;
    return true;
}

static const enum hmoe_type pairs[][2] = {
    {HMOE_TYPE_F32, HMOE_TYPE_F32},   {HMOE_TYPE_F16, HMOE_TYPE_F16},     {HMOE_TYPE_BF16, HMOE_TYPE_BF16},
    {HMOE_TYPE_Q8_0, HMOE_TYPE_Q8_0}, {HMOE_TYPE_Q4_0, HMOE_TYPE_Q4_0},   {HMOE_TYPE_Q4_1, HMOE_TYPE_Q4_1},
    {HMOE_TYPE_Q5_0, HMOE_TYPE_Q5_0}, {HMOE_TYPE_Q5_1, HMOE_TYPE_Q5_1},   {HMOE_TYPE_IQ4_NL, HMOE_TYPE_IQ4_NL},
    {HMOE_TYPE_Q8_0, HMOE_TYPE_Q4_0}, {HMOE_TYPE_F16, HMOE_TYPE_Q5_1},    {HMOE_TYPE_F16, HMOE_TYPE_Q8_0},
    {HMOE_TYPE_Q4_0, HMOE_TYPE_F16},  {HMOE_TYPE_BF16, HMOE_TYPE_IQ4_NL},
};

static bool low_bits(enum hmoe_type t) {
    return t != HMOE_TYPE_F32 && t != HMOE_TYPE_F16 && t != HMOE_TYPE_BF16 && t != HMOE_TYPE_Q8_0;
}

int main(void) {
    if (!hmoe_cuda_available()) {
        printf("gpu_test_kv_types ... skipped: no CUDA device\n");
        return t_summary();
    }
    struct hmoe_err err = {0};
    char path[8192];
    snprintf(path, sizeof path, "%s", t_shared("fixtures/models/tiny-qwen3moe-A-mini-F32.gguf"));
    struct hmoe_model *m = NULL;
    if (hmoe_model_load(path, NULL, &m, &err)) {
        t_check(0, "gpu_test_kv_types: load the F32 tiny model", "%s", err.msg);
        return t_summary();
    }
    const int V = m->cfg.n_vocab;
    int32_t ids[NTOK];
    for (int i = 0; i < NTOK; i++) ids[i] = (int32_t)((7 + 131 * i) % V);
    float *cpu = malloc((size_t)NTOK * V * 4), *gpu = malloc((size_t)NTOK * V * 4), *base = malloc((size_t)NTOK * V * 4);
    struct hmoe_ctx *c32 = open_ctx(m, HMOE_TYPE_F32, HMOE_TYPE_F32, HMOE_GPU_OFF, &err);
    const bool have_base = c32 && run(c32, ids, false, base, V, &err);
    t_check(have_base, "gpu_test_kv_types: CPU prefill with an F32 cache", "%s", err.msg);
    hmoe_ctx_free(c32);
    for (size_t i = 0; have_base && i < sizeof pairs / sizeof pairs[0]; i++) {
        const enum hmoe_type tk = pairs[i][0], tv = pairs[i][1];
        char name[256];
        struct hmoe_ctx *cc = open_ctx(m, tk, tv, HMOE_GPU_OFF, &err);
        struct hmoe_ctx *cg = cc ? open_ctx(m, tk, tv, HMOE_GPU_ON, &err) : NULL;
        snprintf(name, sizeof name, "gpu_test_kv_types -ctk %s -ctv %s: contexts", hmoe_type_name(tk), hmoe_type_name(tv));
        if (!cc || !cg || strcmp(hmoe_ctx_backend(cg), "cuda") != 0) {
            t_check(0, name, "%s", cg ? hmoe_ctx_backend(cg) : err.msg);
            hmoe_ctx_free(cc), hmoe_ctx_free(cg);
            continue;
        }
        const double lim = low_bits(tk) || low_bits(tv) ? 0.06 : 1e-2;
        const bool cpu_ok = run(cc, ids, false, cpu, V, &err);
        struct res nz = {0, 1, NTOK};
        if (cpu_ok) {
            nz = compare_rows(cpu, base, NTOK, V);
            printf("#   -ctk %s -ctv %s: CPU vs CPU with an F32 cache: max |d| %.3g, worst cosine %.6f, top-1 %d/%d\n",
                   hmoe_type_name(tk), hmoe_type_name(tv), nz.max_abs, nz.worst_cos, nz.top1_ok, NTOK);
        }
        for (int dec = 0; dec < 2; dec++) {
            snprintf(name, sizeof name, "gpu_test_kv_types -ctk %s -ctv %s: GPU %s vs CPU prefill", hmoe_type_name(tk),
                     hmoe_type_name(tv), dec ? "token-by-token decode" : "prefill");
            if (!cpu_ok || !run(cg, ids, dec, gpu, V, &err)) {
                t_check(0, name, "%s", err.msg);
                continue;
            }
            const struct res r = compare_rows(gpu, cpu, NTOK, V), rb = compare_rows(gpu, base, NTOK, V);
            const bool close = r.worst_cos >= 0.9999 && r.top1_ok >= (int)(0.95 * NTOK);
            const bool as_noisy = rb.max_abs <= 1.5 * nz.max_abs + 1e-3 && 1.0 - rb.worst_cos <= 1.5 * (1.0 - nz.worst_cos) + 1e-5;
            t_check(r.max_abs <= lim && (close || as_noisy), name,
                    "max |d| %.3g (limit %.3g), worst cosine %.6f (limit 0.9999), top-1 %d/%d (limit 95 %%); from the F32 "
                    "cache: GPU max |d| %.3g cosine %.6f, CPU max |d| %.3g cosine %.6f (limit 1.5x)",
                    r.max_abs, lim, r.worst_cos, r.top1_ok, NTOK, rb.max_abs, rb.worst_cos, nz.max_abs, nz.worst_cos);
        }
        hmoe_ctx_free(cc), hmoe_ctx_free(cg);
    }
    free(cpu), free(gpu), free(base);
    hmoe_model_free(m);
    return t_summary();
}
