/* bench_synth_routing.c — how skewed the routing of synthetic files is: for each
 * file, expert-selection frequencies per layer over a stream of random token ids (top-10
 * share, entropy, share of experts reused by the next token), next to the ideal of the
 * file's hmoe.synth.routing (zipf:S: Gumbel top-k sampling with p ∝ 1/rank^S, simulated).
 * Not a speed benchmark: it measures the inputs that expert-cache benchmarks will see.
 *
 *   make bench && build/bench/bench_synth_routing [-n TOKENS] FILE.gguf...
 * Exact for every layer of zipf files. For uniform files it ignores attention, and is only
 * what the routers would do on bare embeddings: in a real forward pass a random-weight model's
 * hidden state is dominated by attention output that changes slowly from token to token, so
 * such a file routes far more skewed (30B shapes, layers 1-3: top-10 share 0.63-0.78) and
 * with far more reuse (0.54-0.73 vs 8/128) than the numbers printed here.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hmoe/synth.h"

static uint64_t rng_state = 0x123456789abcdefull;
static uint64_t rnd(void) { /* splitmix64 */
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static double unif(void) { return ((double)(rnd() >> 11) + 0.5) * 0x1.0p-53; }

static int cmp_desc(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* Ideal top-10 share and entropy of Gumbel top-k sampling with p_r ∝ 1/(r+1)^s. */
static void ideal(double s, uint32_t n_e, uint32_t k, double *top10, double *entropy) {
    double *cnt = calloc(n_e, sizeof *cnt), *g = malloc(n_e * sizeof *g);
    const int trials = 200000;
    for (int t = 0; t < trials; t++) {
        for (uint32_t e = 0; e < n_e; e++) g[e] = -s * log(1.0 + e) - log(-log(unif()));
        for (uint32_t j = 0; j < k; j++) {
            uint32_t b = 0;
            for (uint32_t e = 1; e < n_e; e++)
                if (g[e] > g[b]) b = e;
            cnt[b] += 1;
            g[b] = -INFINITY;
        }
    }
    qsort(cnt, n_e, sizeof *cnt, cmp_desc);
    double tot = (double)trials * k, top = 0, h = 0;
    for (uint32_t e = 0; e < n_e; e++) {
        if (e < 10) top += cnt[e];
        if (cnt[e] > 0) h -= cnt[e] / tot * log2(cnt[e] / tot);
    }
    *top10 = top / tot;
    *entropy = h;
    free(cnt);
    free(g);
}

int main(int argc, char **argv) {
    uint64_t n_tokens = 8192;
    int first = 1;
    if (argc > 2 && strcmp(argv[1], "-n") == 0) {
        n_tokens = strtoull(argv[2], NULL, 10);
        first = 3;
    }
    if (first >= argc || n_tokens < 2) {
        fprintf(stderr, "usage: %s [-n TOKENS] FILE.gguf...\n", argv[0]);
        return 2;
    }
    printf("%-34s %-10s %5s %9s %9s %9s %9s %9s\n", "file", "routing", "layer", "top10", "entropy", "reuse", "ideal_t10",
           "ideal_H");
    for (int f = first; f < argc; f++) {
        struct hmoe_err err = {0};
        struct hmoe_gguf *g;
        if (hmoe_gguf_open(argv[f], &g, &err) != HMOE_OK) {
            fprintf(stderr, "%s\n", err.msg);
            return 1;
        }
        const struct hmoe_gguf_tensor *emb = hmoe_gguf_find_tensor(g, "token_embd.weight");
        int32_t *tok = malloc(n_tokens * sizeof *tok);
        rng_state = 0x123456789abcdefull;
        for (uint64_t i = 0; i < n_tokens; i++) tok[i] = emb ? (int32_t)(rnd() % (uint64_t)emb->ne[1]) : 0;
        struct hmoe_synth_route_stats s;
        if (hmoe_synth_route_stats_init(&s, g, tok, n_tokens, &err) != HMOE_OK) {
            fprintf(stderr, "%s\n", err.msg);
            return 1;
        }
        struct hmoe_gguf_str rs = {"?", 1};
        hmoe_gguf_get_str(g, "hmoe.synth.routing", &rs, NULL);
        char routing[32];
        snprintf(routing, sizeof routing, "%.*s", (int)rs.len, rs.ptr);
        double it10 = 0, ih = 0;
        struct hmoe_synth_routing r;
        if (hmoe_synth_parse_routing(routing, &r, NULL) == HMOE_OK && r.kind == HMOE_SYNTH_ROUTING_ZIPF)
            ideal(r.zipf_s, s.n_expert, s.n_used, &it10, &ih);
        else ideal(0.0, s.n_expert, s.n_used, &it10, &ih);
        const char *base = strrchr(argv[f], '/') ? strrchr(argv[f], '/') + 1 : argv[f];
        double m10 = 0, mh = 0, mr = 0;
        for (uint32_t l = 0; l < s.n_layer; l++) {
            double t10 = hmoe_synth_route_top_share(&s, l, 10), h = hmoe_synth_route_entropy_bits(&s, l);
            printf("%-34s %-10s %5u %9.3f %9.3f %9.3f %9.3f %9.3f   hottest expert %u\n", base, routing, l, t10, h,
                   s.reuse[l], it10, ih, hmoe_synth_route_hottest(&s, l));
            m10 += t10;
            mh += h;
            mr += s.reuse[l];
        }
        printf("%-34s %-10s %5s %9.3f %9.3f %9.3f %9.3f %9.3f   (%llu tokens, %u experts, top-%u; uniform: top10 "
               "%.3f, entropy %.3f)\n",
               base, routing, "mean", m10 / s.n_layer, mh / s.n_layer, mr / s.n_layer, it10, ih,
               (unsigned long long)n_tokens, s.n_expert, s.n_used, 10.0 / s.n_expert, log2((double)s.n_expert));
        hmoe_synth_route_stats_free(&s);
        free(tok);
        hmoe_gguf_free(g);
    }
    return 0;
}
