/* bench_moe.c — the matmul work of decode (tg) and prefill (pp512) of the 6-layer
 * Qwen3-30B-A3B synthetic model (gguf_synth.py --preset qwen3-30b-a3b --layers 6) run
 * through the cpu.h kernels alone: every weight matrix of the real shapes and Q4_K_M
 * types (attn q/k/o Q4_K, attn_v and ffn_down Q6_K in layers 2 and 5 else Q4_K, experts
 * Q4_K, router F32, output Q6_K), 128 experts with 8 chosen at random per token. No
 * attention softmax, norms or RoPE: the result is an upper bound for tok/s from the
 * kernels' side, to hold against llama.cpp's pp512 159.9 / tg64 26.2 (baselines.md) and,
 * for decode, against the RAM read roofline measured in the same run. -x iq2_xxs runs the
 * --mix iq2_xxs file instead (experts IQ2_XXS, ffn_down IQ3_XXS in layers 2 and 5; llama.cpp
 * pp512 75.8 / tg64 25.5 on the 2-core machine).
 *
 * Build: make bench CUDA=0
 * Run:   ./build/bench/bench_moe [-t threads] [-r reps] [-p prompt tokens (512)] [-x q4_k_m|iq2_xxs]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"

enum { EMBD = 2048, QDIM = 4096, KVDIM = 512, NEXP = 128, TOPK = 8, FF = 768, VOCAB = 151936, LAYERS = 6 };

struct mat {
    enum hmoe_type type;
    int64_t ncols, nrows; /* per expert for the expert tensors */
    size_t row_bytes;
    uint8_t *w;
};

struct layer {
    struct mat q, k, v, o, router, gate, up, down; /* gate/up/down hold NEXP experts back to back */
};

static size_t mat_init(struct mat *m, enum hmoe_type t, int64_t ncols, int64_t nrows, int64_t copies) {
    m->type = t, m->ncols = ncols, m->nrows = nrows, m->row_bytes = hmoe_row_bytes(t, ncols);
    size_t bytes = m->row_bytes * (size_t)nrows * (size_t)copies;
    m->w = bench_alloc_touched(bytes, 2);
    if (!m->w) {
        fprintf(stderr, "bench_moe: out of memory\n");
        exit(1);
    }
    bench_fill_weights(t, m->w, bytes);
    return bytes;
}

/* Rows of one matrix split over the threads of the enclosing parallel region. */
static void par_gemv(const struct mat *m, const uint8_t *w, const void *xq, float *y) {
    int id = omp_get_thread_num(), n = omp_get_num_threads();
    int64_t r0 = m->nrows * id / n, r1 = m->nrows * (id + 1) / n;
    hmoe_cpu_gemv(m->type, m->ncols, w, m->row_bytes, r0, r1, xq, y + r0);
}

int main(int argc, char **argv) {
    int nthreads = hmoe_cpu_physical_cores(), reps = 3, ntok = 512, iq2 = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-H"))
            bench_hugepages = 1;
        else if (!strcmp(argv[i], "-t") && i + 1 < argc)
            nthreads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-r") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-p") && i + 1 < argc)
            ntok = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-x") && i + 1 < argc && (!strcmp(argv[i + 1], "iq2_xxs") || !strcmp(argv[i + 1], "q4_k_m")))
            iq2 = !strcmp(argv[++i], "iq2_xxs");
        else {
            fprintf(stderr, "usage: %s [-t threads] [-r reps (3)] [-p prompt tokens (512)] [-x q4_k_m|iq2_xxs] [-H]\n",
                    argv[0]);
            return 2;
        }
    }
    if (nthreads < 1 || reps < 1 || ntok < 1 || ntok > 4096) {
        fprintf(stderr, "bench_moe: need -t >= 1, -r >= 1, 1 <= -p <= 4096\n");
        return 2;
    }
    hmoe_cpu_init();
    omp_set_num_threads(nthreads);

    struct layer L[LAYERS];
    size_t total = 0, per_tok = 0;
    for (int l = 0; l < LAYERS; l++) {
        int more_bits = l == 2 || l == 5; /* llama-quantize's Q4_K_M rule for 6 layers */
        total += mat_init(&L[l].q, HMOE_TYPE_Q4_K, EMBD, QDIM, 1);
        total += mat_init(&L[l].k, HMOE_TYPE_Q4_K, EMBD, KVDIM, 1);
        total += mat_init(&L[l].v, more_bits ? HMOE_TYPE_Q6_K : HMOE_TYPE_Q4_K, EMBD, KVDIM, 1);
        total += mat_init(&L[l].o, HMOE_TYPE_Q4_K, QDIM, EMBD, 1);
        total += mat_init(&L[l].router, HMOE_TYPE_F32, EMBD, NEXP, 1);
        const enum hmoe_type ex = iq2 ? HMOE_TYPE_IQ2_XXS : HMOE_TYPE_Q4_K, exm = iq2 ? HMOE_TYPE_IQ3_XXS : HMOE_TYPE_Q6_K;
        total += mat_init(&L[l].gate, ex, EMBD, FF, NEXP);
        total += mat_init(&L[l].up, ex, EMBD, FF, NEXP);
        total += mat_init(&L[l].down, more_bits ? exm : ex, FF, EMBD, NEXP);
        const struct layer *y = &L[l];
        per_tok += (y->q.row_bytes * QDIM + y->k.row_bytes * KVDIM + y->v.row_bytes * KVDIM + y->o.row_bytes * EMBD +
                    y->router.row_bytes * NEXP) +
                   TOPK * (2 * y->gate.row_bytes * FF + y->down.row_bytes * EMBD);
    }
    struct mat out;
    total += mat_init(&out, HMOE_TYPE_Q6_K, EMBD, VOCAB, 1);
    per_tok += out.row_bytes * VOCAB;
    printf("bench_moe: %s mix, %s path, %d threads, weights %.2f GiB, decode reads %.1f MB/token\n",
           iq2 ? "iq2_xxs" : "q4_k_m", hmoe_cpu_path_name(hmoe_cpu_path()), nthreads, total / 1073741824.0,
           per_tok / 1e6);

    /* activations: random, quantized per matrix type as the engine would */
    const size_t xb_k = hmoe_cpu_act_bytes(HMOE_TYPE_Q4_K, QDIM); /* Q8_K rows, widest input */
    const size_t xb_f = hmoe_cpu_act_bytes(HMOE_TYPE_F32, EMBD);
    const size_t xb_ff = hmoe_cpu_act_bytes(HMOE_TYPE_Q4_K, FF);
    float *x = malloc(sizeof(float) * QDIM * (size_t)ntok);
    uint8_t *xq = malloc(xb_k * (size_t)ntok), *xf = malloc(xb_f * (size_t)ntok);
    uint8_t *xe = malloc(xb_k * (size_t)ntok * TOPK), *xd = malloc(xb_ff * (size_t)ntok * TOPK);
    float *y = malloc(sizeof(float) * (size_t)VOCAB), *yb = malloc(sizeof(float) * ((size_t)ntok + 4) * QDIM);
    float *ye = malloc(sizeof(float) * (size_t)ntok * TOPK * EMBD);
    int *route = malloc(sizeof(int) * (size_t)ntok * TOPK * LAYERS);
    if (!x || !xq || !xf || !xe || !xd || !y || !yb || !ye || !route)
        return fprintf(stderr, "bench_moe: out of memory\n"), 1;
    for (size_t i = 0; i < (size_t)QDIM * ntok; i++) x[i] = bench_normal();
    for (int t = 0; t < ntok; t++) {
        hmoe_cpu_quantize_act(HMOE_TYPE_Q4_K, x + (size_t)t * QDIM, xq + (size_t)t * xb_k, QDIM);
        hmoe_cpu_quantize_act(HMOE_TYPE_F32, x + (size_t)t * QDIM, xf + (size_t)t * xb_f, EMBD);
    }
    for (size_t i = 0; i < (size_t)ntok * TOPK; i++) {
        memcpy(xe + i * xb_k, xq + (i / TOPK) * xb_k, xb_k);
        hmoe_cpu_quantize_act(HMOE_TYPE_Q4_K, x + (i % (size_t)ntok) * QDIM, xd + i * xb_ff, FF);
    }
    for (size_t i = 0; i < (size_t)ntok * LAYERS; i++) /* 8 distinct experts per token and layer */
        for (int k = 0; k < TOPK; k++) {
            int e, dup;
            do {
                e = (int)(bench_u64() % NEXP);
                dup = 0;
                for (int j = 0; j < k; j++) dup |= route[i * TOPK + (size_t)j] == e;
            } while (dup);
            route[i * TOPK + (size_t)k] = e;
        }

    /* ---- decode: one token at a time, every matrix split by rows over the threads ---- */
    double roof = 0, best_tg = 1e30;
    {
        uint8_t *probe = bench_alloc_touched((size_t)2 << 30, nthreads);
        for (int r = 0; r < reps; r++) {
            if (probe) roof = HMOE_MAX(roof, bench_read_gbs(probe, (size_t)2 << 30, nthreads, 1));
            const int ntg = 16;
            double t0 = hmoe_time_s();
            for (int tok = 0; tok < ntg; tok++) {
#pragma omp parallel
                {
                    for (int l = 0; l < LAYERS; l++) {
                        const struct layer *ly = &L[l];
                        const int *rt = route + ((size_t)(tok % ntok) * LAYERS + (size_t)l) * TOPK;
                        /* the activations are quantized once per matrix input, as in the engine */
#pragma omp single
                        hmoe_cpu_quantize_act(HMOE_TYPE_Q4_K, x, xq, EMBD);
                        par_gemv(&ly->q, ly->q.w, xq, yb);
                        par_gemv(&ly->k, ly->k.w, xq, yb + QDIM);
                        par_gemv(&ly->v, ly->v.w, xq, yb + QDIM + KVDIM);
                        par_gemv(&ly->router, ly->router.w, xf, yb + QDIM + 2 * KVDIM);
#pragma omp single
                        hmoe_cpu_quantize_act(HMOE_TYPE_Q4_K, x, xq, QDIM);
                        par_gemv(&ly->o, ly->o.w, xq, yb + 2 * QDIM);
#pragma omp single
                        hmoe_cpu_quantize_act(HMOE_TYPE_Q4_K, x, xq, EMBD);
                        for (int k = 0; k < TOPK; k++) {
                            size_t eb = ly->gate.row_bytes * FF * (size_t)rt[k];
                            par_gemv(&ly->gate, ly->gate.w + eb, xq, ye + (size_t)k * FF);
                            par_gemv(&ly->up, ly->up.w + eb, xq, ye + (size_t)(TOPK + k) * FF);
                        }
#pragma omp single
                        for (int k = 0; k < TOPK; k++)
                            hmoe_cpu_quantize_act(HMOE_TYPE_Q4_K, x + (size_t)k * FF, xd + (size_t)k * xb_ff, FF);
                        for (int k = 0; k < TOPK; k++)
                            par_gemv(&ly->down, ly->down.w + ly->down.row_bytes * EMBD * (size_t)rt[k], xd,
                                     ye + (size_t)k * EMBD);
#pragma omp barrier
                    }
                    par_gemv(&out, out.w, xq, y);
                }
            }
            best_tg = HMOE_MIN(best_tg, (hmoe_time_s() - t0) / ntg);
        }
        free(probe);
    }
    double tg = 1.0 / best_tg, gbs = per_tok / best_tg / 1e9;
    printf("decode: %.1f tok/s (%.2f ms/token), weights read at %.2f GB/s = %.1f%% of the %.2f GB/s read roofline\n",
           tg, best_tg * 1e3, gbs, 100 * gbs / roof, roof);

    /* ---- prefill: ntok tokens; dense matrices as gemm over all tokens, experts per expert ---- */
    int *cnt = calloc(NEXP, sizeof(int)), *list = malloc(sizeof(int) * (size_t)ntok * TOPK);
    int off[NEXP + 1];
    double best_pp = 1e30;
    for (int r = 0; r < reps; r++) {
        double t0 = hmoe_time_s();
        for (int l = 0; l < LAYERS; l++) {
            const struct layer *ly = &L[l];
            /* group (token, slot) pairs by expert, as the engine's MoE path does */
            memset(cnt, 0, sizeof(int) * NEXP);
            for (size_t i = 0; i < (size_t)ntok * TOPK; i++)
                cnt[route[((i / TOPK) * LAYERS + (size_t)l) * TOPK + i % TOPK]]++;
            off[0] = 0;
            for (int e = 0; e < NEXP; e++) off[e + 1] = off[e] + cnt[e], cnt[e] = 0;
            for (size_t i = 0; i < (size_t)ntok * TOPK; i++) {
                int e = route[((i / TOPK) * LAYERS + (size_t)l) * TOPK + i % TOPK];
                list[off[e] + cnt[e]++] = (int)i;
            }
            const struct mat *dense[] = {&ly->q, &ly->k, &ly->v, &ly->router};
            for (int m = 0; m < 4; m++) {
                const struct mat *d = dense[m];
                const uint8_t *xa = d->type == HMOE_TYPE_F32 ? xf : xq;
                size_t xs = d->type == HMOE_TYPE_F32 ? xb_f : xb_k;
#pragma omp parallel
                {
                    int id = omp_get_thread_num(), n = omp_get_num_threads();
                    int64_t r0 = d->nrows * id / n, r1 = d->nrows * (id + 1) / n;
                    hmoe_cpu_gemm(d->type, d->ncols, d->w, d->row_bytes, r0, r1, xa, xs, ntok, yb + r0,
                                  (size_t)d->nrows);
                }
            }
#pragma omp parallel
            {
                int id = omp_get_thread_num(), n = omp_get_num_threads();
                int64_t r0 = EMBD * id / n, r1 = EMBD * (id + 1) / n;
                hmoe_cpu_gemm(ly->o.type, QDIM, ly->o.w, ly->o.row_bytes, r0, r1, xq, xb_k, ntok, yb + r0, EMBD);
            }
            /* experts: (expert, 64-row chunk) work items; the activations of an expert's tokens
             * are taken as contiguous rows (the engine gathers them) */
#pragma omp parallel for schedule(dynamic, 1)
            for (int item = 0; item < NEXP * (FF / 64); item++) {
                int e = item / (FF / 64), c = item % (FF / 64);
                int nt = off[e + 1] - off[e];
                if (!nt) continue;
                size_t eb = ly->gate.row_bytes * FF * (size_t)e;
                hmoe_cpu_gemm(ly->gate.type, EMBD, ly->gate.w + eb, ly->gate.row_bytes, 64 * c, 64 * c + 64,
                              xe + (size_t)off[e] * xb_k, xb_k, nt, ye + (size_t)off[e] * FF + 64 * c, FF);
                hmoe_cpu_gemm(ly->up.type, EMBD, ly->up.w + eb, ly->up.row_bytes, 64 * c, 64 * c + 64,
                              xe + (size_t)off[e] * xb_k, xb_k, nt, ye + (size_t)off[e] * FF + 64 * c, FF);
            }
#pragma omp parallel for schedule(dynamic, 1)
            for (int item = 0; item < NEXP * (EMBD / 128); item++) {
                int e = item / (EMBD / 128), c = item % (EMBD / 128);
                int nt = off[e + 1] - off[e];
                if (!nt) continue;
                size_t eb = ly->down.row_bytes * EMBD * (size_t)e;
                hmoe_cpu_gemm(ly->down.type, FF, ly->down.w + eb, ly->down.row_bytes, 128 * c, 128 * c + 128,
                              xd + (size_t)off[e] * xb_ff, xb_ff, nt, ye + (size_t)off[e] * EMBD + 128 * c, EMBD);
            }
        }
#pragma omp parallel
        par_gemv(&out, out.w, xq, y); /* logits of the last token only, as llama-bench does */
        best_pp = HMOE_MIN(best_pp, hmoe_time_s() - t0);
    }
    double macs = (double)LAYERS *
                  ((double)EMBD * (QDIM + 2 * KVDIM + NEXP) + (double)QDIM * EMBD + (double)TOPK * 3 * EMBD * FF);
    printf("prefill pp%d: %.1f tok/s (%.1f ms), %.1f GMAC/s over %.0f M MAC/token\n", ntok, ntok / best_pp,
           best_pp * 1e3, macs * ntok / best_pp / 1e9, macs / 1e6);
    if (iq2)
        printf("llama.cpp on the same file, 2 threads: pp512 75.8 tok/s, tg64 25.5 tok/s\n");
    else
        printf("llama.cpp on the same file, 2 threads (baselines.md): pp512 159.9 tok/s, tg64 26.2 tok/s\n");
    return 0;
}
