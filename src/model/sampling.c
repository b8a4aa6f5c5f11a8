/* sampling.c — next-token selection in the order of llama.cpp's default sampler chain:
 * repeat penalty over the last repeat_last_n accepted tokens -> top-k -> top-p -> min-p ->
 * temperature -> random draw (typical-p, DRY, XTC are off by default and not implemented).
 * temp <= 0 is greedy: argmax after the penalty, lowest id on ties. The RNG is xoshiro256**
 * seeded by splitmix64 (not llama.cpp's mt19937, so seeded runs differ from llama.cpp's).
 * All buffers are allocated by hmoe_sampler_init.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hmoe/model.h"

struct cand {
    int32_t id;
    float logit;
    float p;
};

struct hmoe_sampler {
    struct hmoe_sampler_params p;
    int n_vocab;
    struct cand *cand;  /* [n_vocab] working candidates */
    float *logits;      /* [n_vocab] penalised copy of the input logits */
    int32_t *hist;      /* ring of the last repeat_last_n accepted tokens */
    int hist_len, hist_pos;
    uint32_t *seen;     /* [n_vocab] stamp: penalise each distinct token once per call */
    uint32_t stamp;
    uint64_t rng[4];
};

void hmoe_sampler_params_default(struct hmoe_sampler_params *p) {
    p->temp = 0.8f;
    p->top_k = 40;
    p->top_p = 0.95f;
    p->min_p = 0.05f;
    p->repeat_penalty = 1.0f;
    p->repeat_last_n = 64;
    p->seed = 0;
}

static uint64_t splitmix64(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

/* xoshiro256**: uniform double in [0, 1) from the top 53 bits. */
static double rng_uniform(uint64_t *s) {
    const uint64_t r = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return (double)(r >> 11) * (1.0 / 9007199254740992.0);
}

enum hmoe_status hmoe_sampler_init(const struct hmoe_sampler_params *p, int n_vocab, struct hmoe_sampler **out,
                                   struct hmoe_err *err) {
    *out = NULL;
    if (n_vocab <= 0) return HMOE_RAISE(err, HMOE_ERR_ARG, "sampler: vocabulary size %d", n_vocab);
    if (!(p->top_p >= 0.0f) || !(p->min_p >= 0.0f) || !(p->repeat_penalty > 0.0f) || isnan(p->temp))
        return HMOE_RAISE(err, HMOE_ERR_ARG,
                          "sampler: bad settings (top-p %g and min-p %g must be >= 0, repeat penalty %g > 0)",
                          p->top_p, p->min_p, p->repeat_penalty);
    struct hmoe_sampler *s = calloc(1, sizeof *s);
    if (!s) return HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory");
    s->p = *p;
    if (s->p.repeat_last_n < 0) s->p.repeat_last_n = 0;
    s->n_vocab = n_vocab;
    s->cand = malloc((size_t)n_vocab * sizeof *s->cand);
    s->logits = malloc((size_t)n_vocab * sizeof *s->logits);
    s->seen = calloc((size_t)n_vocab, sizeof *s->seen);
    s->hist = calloc((size_t)(s->p.repeat_last_n ? s->p.repeat_last_n : 1), sizeof *s->hist);
    if (!s->cand || !s->logits || !s->seen || !s->hist) {
        hmoe_sampler_free(s);
        return HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory for the sampler (%d tokens)", n_vocab);
    }
    uint64_t seed = p->seed;
    for (int i = 0; i < 4; i++) s->rng[i] = splitmix64(&seed);
    *out = s;
    return HMOE_OK;
}

void hmoe_sampler_free(struct hmoe_sampler *s) {
    if (!s) return;
    free(s->cand);
    free(s->logits);
    free(s->seen);
    free(s->hist);
    free(s);
}

void hmoe_sampler_accept(struct hmoe_sampler *s, int32_t id) {
    if (s->p.repeat_last_n == 0) return;
    s->hist[s->hist_pos] = id;
    s->hist_pos = (s->hist_pos + 1) % s->p.repeat_last_n;
    if (s->hist_len < s->p.repeat_last_n) s->hist_len++;
}

int32_t hmoe_argmax(const float *x, int n) {
    int32_t best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

/* Repeat penalty: each distinct token of the window once; positive logits are divided,
 * the others multiplied (llama.cpp's penalties sampler with frequency/presence 0). */
static void apply_penalty(struct hmoe_sampler *s) {
    if (s->p.repeat_penalty == 1.0f || s->hist_len == 0) return;
    if (++s->stamp == 0) {
        memset(s->seen, 0, (size_t)s->n_vocab * sizeof *s->seen);
        s->stamp = 1;
    }
    for (int i = 0; i < s->hist_len; i++) {
        const int32_t id = s->hist[i];
        if (id < 0 || id >= s->n_vocab || s->seen[id] == s->stamp) continue;
        s->seen[id] = s->stamp;
        float *l = &s->logits[id];
        *l = *l <= 0.0f ? *l * s->p.repeat_penalty : *l / s->p.repeat_penalty;
    }
}

/* Descending by logit, lowest id first on ties (a total order, so results are stable). */
static int cand_cmp(const void *a, const void *b) {
    const struct cand *x = a, *y = b;
    if (x->logit != y->logit) return x->logit > y->logit ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

static bool cand_before(const struct cand *x, const struct cand *y) { return cand_cmp(x, y) < 0; }

/* Keep the k best of the n candidates, sorted. A min-heap of size k (the worst kept at
 * the root) makes this O(n log k) instead of sorting the whole vocabulary. */
static int top_k_sorted(struct cand *c, int n, int k) {
    if (k <= 0 || k >= n) {
        qsort(c, (size_t)n, sizeof *c, cand_cmp);
        return n;
    }
    /* heap in c[0..k-1]: parent is "after" (worse than or equal to) its children */
    for (int i = 0; i < n; i++) {
        struct cand x = c[i];
        int pos;
        if (i < k) {
            pos = i;
            while (pos > 0 && cand_before(&c[(pos - 1) / 2], &x)) {
                c[pos] = c[(pos - 1) / 2];
                pos = (pos - 1) / 2;
            }
            c[pos] = x;
            continue;
        }
        if (!cand_before(&x, &c[0])) continue;
        pos = 0; /* replace the root, sift down */
        for (;;) {
            int l = 2 * pos + 1, r = l + 1, w = l;
            if (l >= k) break;
            if (r < k && cand_before(&c[l], &c[r])) w = r;
            if (!cand_before(&x, &c[w])) break;
            c[pos] = c[w];
            pos = w;
        }
        c[pos] = x;
    }
    qsort(c, (size_t)k, sizeof *c, cand_cmp);
    return k;
}

/* Softmax of the (sorted) candidates' logits into p. */
static void cand_softmax(struct cand *c, int n) {
    const float mx = c[0].logit;
    double sum = 0.0;
    for (int i = 0; i < n; i++) {
        c[i].p = expf(c[i].logit - mx);
        sum += c[i].p;
    }
    for (int i = 0; i < n; i++) c[i].p = (float)(c[i].p / sum);
}

int32_t hmoe_sampler_sample(struct hmoe_sampler *s, const float *logits) {
    const int V = s->n_vocab;
    memcpy(s->logits, logits, (size_t)V * sizeof *logits);
    apply_penalty(s);
    if (s->p.temp <= 0.0f) return hmoe_argmax(s->logits, V);

    for (int i = 0; i < V; i++) s->cand[i] = (struct cand){i, s->logits[i], 0.0f};
    int n = top_k_sorted(s->cand, V, s->p.top_k);
    if (s->p.top_p < 1.0f) {
        /* Smallest prefix whose probability mass reaches top_p (at least one token). */
        cand_softmax(s->cand, n);
        double cum = 0.0;
        for (int i = 0; i < n; i++) {
            cum += s->cand[i].p;
            if (cum >= s->p.top_p) {
                n = i + 1;
                break;
            }
        }
    }
    if (s->p.min_p > 0.0f) {
        /* p_i >= min_p * p_max  <=>  logit_i >= logit_max + ln(min_p). */
        const float floor_logit = s->cand[0].logit + logf(s->p.min_p);
        int keep = 1;
        while (keep < n && s->cand[keep].logit >= floor_logit) keep++;
        n = keep;
    }
    for (int i = 0; i < n; i++) s->cand[i].logit /= s->p.temp;
    cand_softmax(s->cand, n);
    const double u = rng_uniform(s->rng);
    double cum = 0.0;
    for (int i = 0; i < n; i++) {
        cum += s->cand[i].p;
        if (u < cum) return s->cand[i].id;
    }
    return s->cand[n - 1].id;
}
