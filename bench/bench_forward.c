/* bench_forward.c — end-to-end CPU speed of the qwen3moe forward pass, llama-bench style.
 *
 *   make bench && ./build/bench/bench_forward -m /tmp/synth6.gguf -t 2 [-p 512] [-n 64] [-r 3] [-o json]
 *   (synthetic file: /usr/bin/python3 ../shared/tools/gguf_synth.py /tmp/synth6.gguf
 *    --preset qwen3-30b-a3b --layers 6 --vocab ../shared/tools/qwen3-vocab.json.gz)
 *
 * First checks correctness (the F32 mini model's p05 prefill vs llama.cpp's golden, limit
 * 1e-4, fixtures/README.md §5.4), then measures in the same run: the RAM read bandwidth
 * roofline (AVX-512 or AVX2 loads over 1 GiB, all threads), pp<p> (one micro-batch of p
 * random ids from an empty cache, logits for the last) and tg<n> (n single-token decodes from
 * an empty cache), each after a warm-up, mean ± sd over -r repetitions. Decode bandwidth =
 * weight bytes one token reads (attention, router, norms, k experts of each layer at their
 * real types, LM head, one embedding row) x tok/s, reported against the roofline.
 */
#include <immintrin.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hmoe/cpu.h"
#include "hmoe/json.h"
#include "hmoe/model.h"

static void die(const char *what, const struct hmoe_err *err) {
    fprintf(stderr, "bench_forward: %s: %s\n", what, err ? err->msg : "");
    exit(1);
}

/* ---- roofline: read bandwidth ------------------------------------------------------- */

__attribute__((target("avx512f"))) static uint64_t sum_avx512(const uint8_t *p, size_t n) {
    __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t i = 0; i < n; i += 256) {
        a0 = _mm512_add_epi64(a0, _mm512_load_si512((const void *)(p + i)));
        a1 = _mm512_add_epi64(a1, _mm512_load_si512((const void *)(p + i + 64)));
        a2 = _mm512_add_epi64(a2, _mm512_load_si512((const void *)(p + i + 128)));
        a3 = _mm512_add_epi64(a3, _mm512_load_si512((const void *)(p + i + 192)));
    }
    a0 = _mm512_add_epi64(_mm512_add_epi64(a0, a1), _mm512_add_epi64(a2, a3));
    return (uint64_t)_mm512_reduce_add_epi64(a0);
}

__attribute__((target("avx2"))) static uint64_t sum_avx2(const uint8_t *p, size_t n) {
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t i = 0; i < n; i += 128) {
        a0 = _mm256_add_epi64(a0, _mm256_load_si256((const void *)(p + i)));
        a1 = _mm256_add_epi64(a1, _mm256_load_si256((const void *)(p + i + 32)));
        a2 = _mm256_add_epi64(a2, _mm256_load_si256((const void *)(p + i + 64)));
        a3 = _mm256_add_epi64(a3, _mm256_load_si256((const void *)(p + i + 96)));
    }
    a0 = _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3));
    uint64_t v[4];
    _mm256_storeu_si256((__m256i *)v, a0);
    return v[0] + v[1] + v[2] + v[3];
}

/* Best of 3 passes over a 1 GiB buffer, split across n_threads. Bytes/s. */
static double measure_read_bw(int n_threads) {
    const size_t n = (size_t)1 << 30;
    uint8_t *buf = aligned_alloc(64, n);
    if (!buf) return 0;
#pragma omp parallel for num_threads(n_threads) schedule(static)
    for (size_t i = 0; i < n; i += 4096) memset(buf + i, (int)(i >> 12), 4096); /* touch every page */
    const bool avx512 = __builtin_cpu_supports("avx512f");
    double best = 0;
    volatile uint64_t sink = 0;
    for (int rep = 0; rep < 3; rep++) {
        double t0 = hmoe_time_s();
        uint64_t s = 0;
#pragma omp parallel num_threads(n_threads) reduction(+ : s)
        {
            const int nt = omp_get_num_threads(), id = omp_get_thread_num();
            const size_t part = n / (size_t)nt / 4096 * 4096;
            const uint8_t *p = buf + (size_t)id * part;
            s += avx512 ? sum_avx512(p, part) : sum_avx2(p, part);
        }
        double dt = hmoe_time_s() - t0;
        sink += s;
        if (n / dt > best) best = n / dt;
    }
    (void)sink;
    free(buf);
    return best;
}

/* ---- weight bytes one decoded token reads ------------------------------------------- */

static double decode_bytes_per_token(const struct hmoe_model *m) {
    const struct hmoe_model_config *c = &m->cfg;
    double b = (double)m->w.output.mat_bytes + (double)m->w.token_embd.row_bytes + 4.0 * c->n_embd;
    for (int il = 0; il < c->n_layer; il++) {
        const struct hmoe_layer_weights *L = &m->w.layers[il];
        b += (double)L->attn_q.n_out * L->attn_q.row_bytes + (double)L->attn_k.n_out * L->attn_k.row_bytes +
             (double)L->attn_v.n_out * L->attn_v.row_bytes + (double)L->attn_output.mat_bytes;
        b += (double)L->moe.router.mat_bytes + 4.0 * (2 * c->n_embd + 2 * c->head_dim);
        b += (double)c->n_expert_used * ((double)L->moe.gate.mat_bytes + L->moe.up.mat_bytes + L->moe.down.mat_bytes);
    }
    return b;
}

/* ---- correctness first --------------------------------------------------------------- */

static double check_mini(const char *shared, int n_threads) {
    char path[4096];
    struct hmoe_err err = {0};
    snprintf(path, sizeof path, "%s/fixtures/golden/tiny-qwen3moe-A-mini-F32.json", shared);
    struct hmoe_json *side = hmoe_json_parse_file(path, &err);
    if (!side) die("golden sidecar", &err);
    const struct hmoe_json *pr = hmoe_json_get(side, "prompts")->items[4]; /* p05_text, every position stored */
    const struct hmoe_json *ja = hmoe_json_get(pr, "ids");
    const int n = (int)ja->n, V = 4101;
    int32_t *ids = malloc(sizeof *ids * (size_t)n);
    for (int i = 0; i < n; i++) ids[i] = (int32_t)ja->items[i]->num;
    snprintf(path, sizeof path, "%s/fixtures/golden/%s", shared, hmoe_json_get_str(pr, "logits_file", "?"));
    float *ref = malloc(sizeof(float) * (size_t)n * V), *out = malloc(sizeof(float) * (size_t)n * V);
    FILE *f = fopen(path, "rb");
    if (!f || fread(ref, sizeof(float), (size_t)n * V, f) != (size_t)n * V) die("golden logits", NULL);
    fclose(f);
    snprintf(path, sizeof path, "%s/fixtures/models/tiny-qwen3moe-A-mini-F32.gguf", shared);
    struct hmoe_model *m = NULL;
    struct hmoe_ctx *c = NULL;
    struct hmoe_ctx_params cp;
    hmoe_ctx_params_default(&cp);
    cp.n_ctx = 64;
    cp.type_k = cp.type_v = HMOE_TYPE_F32;
    cp.n_threads = n_threads;
    if (hmoe_model_load(path, NULL, &m, &err) || hmoe_ctx_init(m, &cp, &c, &err) ||
        hmoe_ctx_decode(c, ids, n, 0, HMOE_LOGITS_ALL, out, &err))
        die("mini model", &err);
    double worst = 0;
    for (size_t i = 0; i < (size_t)n * V; i++) {
        double d = fabs((double)out[i] - ref[i]);
        worst = d > worst || d != d ? d : worst;
    }
    hmoe_ctx_free(c);
    hmoe_model_free(m);
    hmoe_json_free(side);
    free(ids);
    free(ref);
    free(out);
    return worst;
}

/* ---- timing ---------------------------------------------------------------------------- */

static uint64_t lcg = 88172645463325252ull;
static int32_t rand_id(int V) {
    lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
    return (int32_t)((lcg >> 33) % (uint64_t)V);
}

static void mean_sd(const double *v, int n, double *mean, double *sd) {
    double s = 0, q = 0;
    for (int i = 0; i < n; i++) s += v[i];
    *mean = s / n;
    for (int i = 0; i < n; i++) q += (v[i] - *mean) * (v[i] - *mean);
    *sd = n > 1 ? sqrt(q / (n - 1)) : 0;
}

int main(int argc, char **argv) {
    const char *model_path = NULL, *out_fmt = NULL, *shared = getenv("HMOE_SHARED");
    int n_threads = 0, n_p = 512, n_g = 64, reps = 3;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) die("usage", &(struct hmoe_err){.msg = "bench_forward -m FILE [-t N] [-p 512] [-n 64] [-r 3] [-o json]"});
        if (!strcmp(a, "-m")) model_path = v;
        else if (!strcmp(a, "-t")) n_threads = atoi(v);
        else if (!strcmp(a, "-p")) n_p = atoi(v);
        else if (!strcmp(a, "-n")) n_g = atoi(v);
        else if (!strcmp(a, "-r")) reps = atoi(v);
        else if (!strcmp(a, "-o")) out_fmt = v;
        else die("unknown option", &(struct hmoe_err){.msg = "see the header of bench/bench_forward.c"});
        i++;
    }
    if (!model_path || n_p < 1 || n_g < 1 || reps < 1 || reps > 100)
        die("usage", &(struct hmoe_err){.msg = "bench_forward -m FILE [-t N] [-p 512] [-n 64] [-r 3] [-o json]"});
    if (!shared || !*shared) shared = "../shared";
    hmoe_cpu_init();
    if (n_threads <= 0) n_threads = hmoe_cpu_physical_cores();
    const bool json = out_fmt && !strcmp(out_fmt, "json");

    const double mini_err = check_mini(shared, n_threads);
    if (!(mini_err <= 1e-4)) {
        fprintf(stderr, "bench_forward: correctness check failed: mini-F32 p05 max |d| %.3g > 1e-4\n", mini_err);
        return 1;
    }
    if (!json) printf("check: mini-F32 p05 prefill vs llama.cpp golden: max |d| %.2g (limit 1e-4) ok\n", mini_err);

    const double bw = measure_read_bw(n_threads);
    struct hmoe_err err = {0};
    struct hmoe_model *m = NULL;
    struct hmoe_ctx *c = NULL;
    double t0 = hmoe_time_s();
    if (hmoe_model_load(model_path, NULL, &m, &err)) die(model_path, &err);
    const double load_ms = (hmoe_time_s() - t0) * 1e3;
    struct hmoe_ctx_params cp;
    hmoe_ctx_params_default(&cp); /* f16 K/V as llama-bench */
    cp.n_ctx = n_p + n_g;
    cp.n_ubatch = n_p;
    cp.n_threads = n_threads;
    if (hmoe_ctx_init(m, &cp, &c, &err)) die("context", &err);
    const int V = m->cfg.n_vocab;
    int32_t *ids = malloc(sizeof *ids * (size_t)n_p);
    float *logits = malloc(sizeof *logits * (size_t)V);
    double pp[100], tg[100];
    for (int rep = -1; rep < reps; rep++) { /* rep -1: warm-up (page faults, caches) */
        for (int i = 0; i < n_p; i++) ids[i] = rand_id(V);
        hmoe_ctx_reset(c);
        double a = hmoe_time_s();
        if (hmoe_ctx_decode(c, ids, n_p, 0, HMOE_LOGITS_LAST, logits, &err)) die("prefill", &err);
        double b = hmoe_time_s();
        hmoe_ctx_reset(c);
        for (int i = 0; i < n_g; i++) {
            int32_t id = rand_id(V);
            if (hmoe_ctx_decode(c, &id, 1, i, HMOE_LOGITS_LAST, logits, &err)) die("decode", &err);
            if (rep < 0) break; /* one warm-up token */
        }
        double e = hmoe_time_s();
        if (rep >= 0) {
            pp[rep] = n_p / (b - a);
            tg[rep] = n_g / (e - b);
        }
    }
    double pp_m, pp_sd, tg_m, tg_sd;
    mean_sd(pp, reps, &pp_m, &pp_sd);
    mean_sd(tg, reps, &tg_m, &tg_sd);
    const double bpt = decode_bytes_per_token(m), dec_bw = bpt * tg_m;
    const char *path_name = hmoe_cpu_path_name(hmoe_cpu_path());
    if (json) {
        printf("{\"model\": ");
        hmoe_json_write_str(stdout, model_path, strlen(model_path));
        printf(", \"threads\": %d, \"cpu_path\": \"%s\", \"check_max_abs\": %.3g, \"membw_GBps\": %.2f, "
               "\"pp\": %d, \"pp_tps\": %.2f, \"pp_sd\": %.2f, \"tg\": %d, \"tg_tps\": %.2f, \"tg_sd\": %.2f, "
               "\"decode_bytes_per_token\": %.0f, \"decode_GBps\": %.2f, \"decode_roofline_ratio\": %.3f}\n",
               n_threads, path_name, mini_err, bw / 1e9, n_p, pp_m, pp_sd, n_g, tg_m, tg_sd, bpt, dec_bw / 1e9,
               dec_bw / bw);
    } else {
        printf("model: %s (%s, %d layers, %d experts, %d used), loaded in %.0f ms\n", model_path, m->cfg.arch,
               m->cfg.n_layer, m->cfg.n_expert, m->cfg.n_expert_used, load_ms);
        printf("threads %d, CPU kernels %s, KV f16\n", n_threads, path_name);
        printf("roofline: read bandwidth %.2f GB/s (%d threads, best of 3 over 1 GiB)\n", bw / 1e9, n_threads);
        printf("pp%d: %8.2f ± %.2f tok/s\n", n_p, pp_m, pp_sd);
        printf("tg%d: %8.2f ± %.2f tok/s\n", n_g, tg_m, tg_sd);
        printf("decode: %.1f MB of weights per token -> %.2f GB/s = %.1f %% of the read roofline\n", bpt / 1e6,
               dec_bw / 1e9, 100.0 * dec_bw / bw);
    }
    free(ids);
    free(logits);
    hmoe_ctx_free(c);
    hmoe_model_free(m);
    return 0;
}
