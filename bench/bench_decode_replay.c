/* bench_decode_replay.c — the memory roofline of one decoded token of a Qwen3-MoE GGUF file,
 * measured by replaying the token's weight reads without computing anything: the same byte
 * ranges of the mapped file (hmoe's loader mapping, 2 MiB aligned), in the same phases with a
 * barrier where the forward pass has one (per layer: Q/K/V | output projection | router |
 * 8 experts' gate, up and down; then the LM head), shared over T threads as the decode
 * shares them (matrices in one contiguous run per thread, experts whole, dealt round-robin),
 * read with 64-byte loads and the page look-ahead of bench_membw's "page-ahead" probe.
 * Why: the contiguous probes read one long run per thread; a token reads ~200 runs of
 * 0.6-4.7 MB at scattered offsets (each run starts a new stream) plus the 255 MB LM head,
 * with ~30 points where every thread waits for the others. This is the best time those reads
 * can take on the machine, so hmoe's decode tok/s divided by this tok/s says how much of
 * the reachable memory rate decode uses (bench/README.md).
 * Experts are drawn uniformly (8 distinct of 128 per layer and token, fixed seed).
 *
 * Build: make bench CUDA=0
 * Run:   ./build/bench/bench_decode_replay -m FILE [-t threads (2)] [-n tokens (64)] [-r reps (5)]
 */
#include <immintrin.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "hmoe/gguf.h"

enum { MAX_PIECES = 64, MAX_THREADS = 64, PAGE_AHEAD = 48 * 1024 };

struct piece {
    const uint8_t *p;
    size_t n;
};
/* One phase: pieces read by all threads, then a barrier. split = true: the pieces' bytes end
 * to end are cut into T contiguous shares; false: an expert phase (read_experts). */
enum { K_QKV, K_WO, K_ROUTER, K_EXPERTS, K_HEAD, K_COUNT };
static const char *const kind_name[K_COUNT] = {"attn q/k/v", "attn output", "router", "experts", "LM head"};
struct phase {
    struct piece pc[MAX_PIECES];
    int n_pc, kind;
    bool split;
};

static struct phase *phases;
static int n_phases, n_threads = 2;
static _Atomic int bar_count, bar_gen;
static uint64_t sink[MAX_THREADS * 8];
static size_t line_ahead = 8192; /* -l: every line prefetched this far ahead (0: page look-ahead only) */

static void barrier(void) {
    const int g = atomic_load(&bar_gen);
    if (atomic_fetch_add(&bar_count, 1) == n_threads - 1) {
        atomic_store(&bar_count, 0);
        atomic_fetch_add(&bar_gen, 1);
    } else {
        while (atomic_load(&bar_gen) == g) _mm_pause();
    }
}

/* Read n bytes at p: 64-byte loads, one prefetch per 4 KiB page PAGE_AHEAD ahead (clamped). */
__attribute__((target("avx512f"))) static uint64_t read_run(const uint8_t *p, size_t n) {
    __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
    /* whole lines only: the first partial line (tensor data are 32-byte aligned) is read by
     * the line loads of the previous run or not at all; loads that split lines cost twice */
    const size_t skip = (64 - ((uintptr_t)p & 63)) & 63;
    if (skip >= n) return 0;
    p += skip;
    n -= skip;
    size_t i = 0;
    const size_t pf = line_ahead;
    for (size_t o = 0; o < pf && o < n; o += 64) __builtin_prefetch(p + o, 0, 3);
    for (; i + 256 <= n; i += 256) {
        if (((uintptr_t)(p + i) & 4095) < 256 && i + PAGE_AHEAD < n) __builtin_prefetch(p + i + PAGE_AHEAD, 0, 3);
        if (pf && i + pf + 256 <= n) {
            __builtin_prefetch(p + i + pf, 0, 3);
            __builtin_prefetch(p + i + pf + 64, 0, 3);
            __builtin_prefetch(p + i + pf + 128, 0, 3);
            __builtin_prefetch(p + i + pf + 192, 0, 3);
        }
        a0 = _mm512_add_epi64(a0, _mm512_load_si512((const void *)(p + i)));
        a1 = _mm512_add_epi64(a1, _mm512_load_si512((const void *)(p + i + 64)));
        a2 = _mm512_add_epi64(a2, _mm512_load_si512((const void *)(p + i + 128)));
        a3 = _mm512_add_epi64(a3, _mm512_load_si512((const void *)(p + i + 192)));
    }
    for (; i + 64 <= n; i += 64) a0 = _mm512_add_epi64(a0, _mm512_load_si512((const void *)(p + i)));
    a0 = _mm512_add_epi64(_mm512_add_epi64(a0, a1), _mm512_add_epi64(a2, a3));
    return (uint64_t)_mm512_reduce_add_epi64(a0);
}

/* This thread's share of a split phase: bytes [n*t/T, n*(t+1)/T) of the pieces end to end. */
static uint64_t read_share(const struct phase *ph, int t) {
    size_t total = 0;
    for (int i = 0; i < ph->n_pc; i++) total += ph->pc[i].n;
    const size_t lo = total * (size_t)t / (size_t)n_threads, hi = total * (size_t)(t + 1) / (size_t)n_threads;
    uint64_t s = 0;
    size_t at = 0;
    for (int i = 0; i < ph->n_pc; i++) {
        const size_t a = at > lo ? at : lo, b = at + ph->pc[i].n < hi ? at + ph->pc[i].n : hi;
        if (a < b) s += read_run(ph->pc[i].p + (a - at), b - a);
        at += ph->pc[i].n;
    }
    return s;
}

static double kind_s[K_COUNT]; /* thread 0's time per phase kind, barrier wait included */
/* This thread's experts of an expert phase (pieces: gate, up of expert 0, 1, .., then the
 * downs): experts j with j % T == t, gate and up of each, then their downs. */
static uint64_t read_experts(const struct phase *ph, int t) {
    const int ne = ph->n_pc / 3;
    uint64_t s = 0;
    for (int j = t; j < ne; j += n_threads) s += read_run(ph->pc[2 * j].p, ph->pc[2 * j].n) + read_run(ph->pc[2 * j + 1].p, ph->pc[2 * j + 1].n);
    for (int j = t; j < ne; j += n_threads) s += read_run(ph->pc[2 * ne + j].p, ph->pc[2 * ne + j].n);
    return s;
}

static void *worker(void *arg) {
    const int t = (int)(intptr_t)arg;
    uint64_t s = 0;
    double tp = hmoe_time_s();
    for (int k = 0; k < n_phases; k++) {
        const struct phase *ph = &phases[k];
        if (ph->split)
            s += read_share(ph, t);
        else
            s += read_experts(ph, t);
        barrier();
        if (t == 0) {
            const double now = hmoe_time_s();
            kind_s[ph->kind] += now - tp;
            tp = now;
        }
    }
    sink[t * 8] += s;
    return NULL;
}

static const struct hmoe_gguf_tensor *tensor(const struct hmoe_gguf *g, const char *fmt, int il) {
    char name[96];
    snprintf(name, sizeof name, fmt, il);
    const struct hmoe_gguf_tensor *t = hmoe_gguf_find_tensor(g, name);
    if (!t) {
        fprintf(stderr, "bench_decode_replay: tensor %s missing (a qwen3moe file is needed)\n", name);
        exit(1);
    }
    return t;
}

static void add(struct phase *ph, const void *p, size_t n) {
    ph->pc[ph->n_pc++] = (struct piece){(const uint8_t *)p, n};
}

int main(int argc, char **argv) {
    const char *path = NULL;
    int n_tok = 64, reps = 5;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-m") && i + 1 < argc) path = argv[++i];
        else if (!strcmp(argv[i], "-t") && i + 1 < argc) n_threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-n") && i + 1 < argc) n_tok = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-r") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-l") && i + 1 < argc) line_ahead = (size_t)atol(argv[++i]);
        else {
            fprintf(stderr, "usage: %s -m FILE [-t threads (2)] [-n tokens (64)] [-r reps (5)]\n", argv[0]);
            return 2;
        }
    }
    if (!path || n_threads < 1 || n_threads > MAX_THREADS || n_tok < 1 || reps < 1) {
        fprintf(stderr, "usage: %s -m FILE [-t threads (2)] [-n tokens (64)] [-r reps (5)]\n", argv[0]);
        return 2;
    }
    hmoe_cpu_init();
    if (hmoe_cpu_path() != HMOE_CPU_AVX512) {
        fprintf(stderr, "bench_decode_replay: needs AVX-512 (the probe's page-ahead loads)\n");
        return 1;
    }
    struct hmoe_err err = {0};
    struct hmoe_gguf *g = NULL;
    if (hmoe_gguf_open(path, &g, &err)) {
        fprintf(stderr, "bench_decode_replay: %s\n", err.msg);
        return 1;
    }
    const int n_layer = (int)hmoe_gguf_get_u32_or(g, "qwen3moe.block_count", 0);
    const int k_used = (int)hmoe_gguf_get_u32_or(g, "qwen3moe.expert_used_count", 8);
    if (n_layer < 1 || k_used < 1 || k_used > MAX_PIECES / 3) {
        fprintf(stderr, "bench_decode_replay: %s is not a qwen3moe file with 1..%d experts per token\n", path,
                MAX_PIECES / 3);
        return 1;
    }
    /* bring the file into the page cache and the mapping (as hmoe's preload does) */
    for (uint64_t o = 0; o < g->file_size; o += 4096) sink[0] += g->base[o];

    const int per_tok = 4 * n_layer + 1;
    phases = calloc((size_t)per_tok * (size_t)n_tok, sizeof *phases);
    if (!phases) return 1;
    double bytes_tok = 0.0;
    for (int tk = 0; tk < n_tok; tk++)
        for (int il = 0; il <= n_layer; il++) {
            struct phase *ph = &phases[n_phases];
            if (il == n_layer) {
                const struct hmoe_gguf_tensor *o = hmoe_gguf_find_tensor(g, "output.weight");
                if (!o) o = tensor(g, "token_embd.weight", 0); /* tied embeddings */
                add(ph, o->data, o->n_bytes);
                ph->split = true;
                ph->kind = K_HEAD;
                n_phases++;
                continue;
            }
            const struct hmoe_gguf_tensor *q = tensor(g, "blk.%d.attn_q.weight", il), *k = tensor(g, "blk.%d.attn_k.weight", il),
                                          *v = tensor(g, "blk.%d.attn_v.weight", il);
            add(ph, q->data, q->n_bytes);
            add(ph, k->data, k->n_bytes);
            add(ph, v->data, v->n_bytes);
            ph->split = true;
            ph->kind = K_QKV;
            ph++;
            const struct hmoe_gguf_tensor *wo = tensor(g, "blk.%d.attn_output.weight", il);
            add(ph, wo->data, wo->n_bytes);
            ph->split = true;
            ph->kind = K_WO;
            ph++;
            const struct hmoe_gguf_tensor *r = tensor(g, "blk.%d.ffn_gate_inp.weight", il);
            add(ph, r->data, r->n_bytes);
            ph->split = true;
            ph->kind = K_ROUTER;
            ph++;
            const struct hmoe_gguf_tensor *ge = tensor(g, "blk.%d.ffn_gate_exps.weight", il),
                                          *ue = tensor(g, "blk.%d.ffn_up_exps.weight", il),
                                          *de = tensor(g, "blk.%d.ffn_down_exps.weight", il);
            const int64_t E = ge->ne[2];
            int sel[MAX_PIECES];
            for (int j = 0; j < k_used; j++) {
                int e, dup;
                do {
                    e = (int)(bench_u64() % (uint64_t)E);
                    dup = 0;
                    for (int i = 0; i < j; i++) dup |= sel[i] == e;
                } while (dup);
                sel[j] = e;
            }
            /* gate and up of an expert, then the downs, each thread its experts (round-robin) */
            for (int j = 0; j < k_used; j++) {
                add(ph, (const uint8_t *)ge->data + (size_t)sel[j] * ge->nb[2], ge->nb[2]);
                add(ph, (const uint8_t *)ue->data + (size_t)sel[j] * ue->nb[2], ue->nb[2]);
            }
            for (int j = 0; j < k_used; j++) add(ph, (const uint8_t *)de->data + (size_t)sel[j] * de->nb[2], de->nb[2]);
            ph->split = false;
            ph->kind = K_EXPERTS;
            n_phases += 4;
        }
    for (int k = 0; k < per_tok; k++)
        for (int i = 0; i < phases[k].n_pc; i++) bytes_tok += (double)phases[k].pc[i].n;
    printf("bench_decode_replay: %s, %d layers, %d experts per token, %d threads, %d tokens per pass\n", path, n_layer,
           k_used, n_threads, n_tok);
    printf("  %.1f MB of weights per token (router, attention, %d experts per layer, LM head)\n", bytes_tok / 1e6,
           k_used);
    double best = 1e30, sum = 0;
    for (int r = 0; r < reps; r++) {
        atomic_store(&bar_count, 0);
        pthread_t th[MAX_THREADS];
        const double t0 = hmoe_time_s();
        for (int t = 1; t < n_threads; t++) pthread_create(&th[t], NULL, worker, (void *)(intptr_t)t);
        worker((void *)0);
        for (int t = 1; t < n_threads; t++) pthread_join(th[t], NULL);
        const double dt = hmoe_time_s() - t0;
        best = dt < best ? dt : best;
        sum += dt;
        printf("  pass %d: %.2f tok/s, %.2f GB/s\n", r + 1, n_tok / dt, bytes_tok * n_tok / dt / 1e9);
    }
    for (int i = 0; i < K_COUNT; i++)
        printf("  %-12s %8.1f us per token (thread 0, its barrier waits included)\n", kind_name[i],
               kind_s[i] / reps / n_tok * 1e6);
    printf("replay best: %.2f tok/s = %.2f GB/s (mean %.2f tok/s)\n", n_tok / best, bytes_tok * n_tok / best / 1e9,
           n_tok * reps / sum);
    hmoe_gguf_free(g);
    return 0;
}
