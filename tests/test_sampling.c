/* test_sampling.c — the sampler (src/model/sampling.c) and the MoE router (src/sched) on
 * hand-made inputs whose answers follow from the specs: llama.cpp's sampler chain order and
 * greedy rule (lowest id on ties), and qwen3moe.md §4.4 (softmax over all experts, top-k
 * descending with the lowest index first on ties, renormalised weights = softmax over the
 * selected logits).
 */
#include "harness.h"
#include "hmoe/model.h"

static struct hmoe_sampler *mk(float temp, int top_k, float top_p, float min_p, float pen, int last_n, int n) {
    struct hmoe_sampler_params p;
    hmoe_sampler_params_default(&p);
    p.temp = temp;
    p.top_k = top_k;
    p.top_p = top_p;
    p.min_p = min_p;
    p.repeat_penalty = pen;
    p.repeat_last_n = last_n;
    p.seed = 1234;
    struct hmoe_sampler *s = NULL;
    struct hmoe_err err;
    hmoe_sampler_init(&p, n, &s, &err);
    return s;
}

static void sampler_tests(void) {
    float tie[5] = {0.1f, 0.7f, 0.3f, 0.7f, 0.7f};
    struct hmoe_sampler *s = mk(0.0f, 40, 0.95f, 0.05f, 1.0f, 64, 5);
    t_check(hmoe_sampler_sample(s, tie) == 1 && hmoe_argmax(tie, 5) == 1, "greedy (temp 0): lowest id wins ties",
            "got %d", hmoe_sampler_sample(s, tie));
    hmoe_sampler_free(s);

    float l[6] = {1.0f, 2.5f, 2.4f, 0.0f, -1.0f, 2.0f};
    s = mk(0.8f, 1, 1.0f, 0.0f, 1.0f, 64, 6);
    int ok = 1;
    for (int i = 0; i < 200; i++) ok &= hmoe_sampler_sample(s, l) == 1;
    t_check(ok, "top-k 1 always picks the argmax", "another token was drawn");
    hmoe_sampler_free(s);

    /* min-p 0.05 keeps tokens with p >= 0.05 p_max. Relative to id 1: id 2 e^-0.1, id 5
     * e^-0.5, id 0 e^-1.5, id 3 e^-2.5 = 0.082 are kept; id 4 e^-3.5 = 0.030 is dropped. */
    s = mk(1.0f, 0, 1.0f, 0.05f, 1.0f, 64, 6);
    int seen[6] = {0};
    for (int i = 0; i < 20000; i++) seen[hmoe_sampler_sample(s, l)]++;
    t_check(seen[4] == 0 && seen[3] > 0 && seen[0] > 0, "min-p 0.05 drops exactly the tokens below 0.05 p_max",
            "counts %d %d %d %d %d %d", seen[0], seen[1], seen[2], seen[3], seen[4], seen[5]);
    hmoe_sampler_free(s);

    /* top-p 0.7 over p = {0.5, 0.3, 0.2}: the smallest prefix reaching 0.7 is {0, 1}. */
    float tp[3] = {logf(0.5f), logf(0.3f), logf(0.2f)};
    s = mk(1.0f, 0, 0.7f, 0.0f, 1.0f, 64, 3);
    int c3[3] = {0};
    for (int i = 0; i < 20000; i++) c3[hmoe_sampler_sample(s, tp)]++;
    double f0 = c3[0] / 20000.0;
    t_check(c3[2] == 0 && c3[1] > 0 && fabs(f0 - 0.625) < 0.02, "top-p 0.7 keeps {0,1}, renormalised 0.625/0.375",
            "counts %d %d %d", c3[0], c3[1], c3[2]);
    hmoe_sampler_free(s);

    /* Plain distribution: p(1) = 0.75. And temperature 0.5 squares the odds: 0.9. */
    float two[2] = {logf(0.25f), logf(0.75f)};
    s = mk(1.0f, 0, 1.0f, 0.0f, 1.0f, 64, 2);
    int c1 = 0;
    for (int i = 0; i < 20000; i++) c1 += hmoe_sampler_sample(s, two);
    hmoe_sampler_free(s);
    s = mk(0.5f, 0, 1.0f, 0.0f, 1.0f, 64, 2);
    int c2 = 0;
    for (int i = 0; i < 20000; i++) c2 += hmoe_sampler_sample(s, two);
    hmoe_sampler_free(s);
    t_check(fabs(c1 / 20000.0 - 0.75) < 0.015 && fabs(c2 / 20000.0 - 0.9) < 0.015,
            "softmax draw follows the probabilities, temperature 0.5 sharpens them", "p1 %.3f (0.75), %.3f (0.9)",
            c1 / 20000.0, c2 / 20000.0);

    /* Repeat penalty: positive logits divided, negative multiplied, window of last_n. */
    float pos2[3] = {1.0f, 0.9f, -5.0f}, neg2[3] = {-1.0f, -1.2f, -5.0f};
    s = mk(0.0f, 40, 0.95f, 0.05f, 1.5f, 2, 3);
    hmoe_sampler_accept(s, 0);
    int a = hmoe_sampler_sample(s, pos2), b = hmoe_sampler_sample(s, neg2);
    hmoe_sampler_accept(s, 2);
    hmoe_sampler_accept(s, 2); /* id 0 leaves the 2-token window */
    int c = hmoe_sampler_sample(s, pos2);
    t_check(a == 1 && b == 1 && c == 0, "repeat penalty 1.5 over the last 2 tokens", "got %d %d %d (want 1 1 0)", a,
            b, c);
    hmoe_sampler_free(s);

    /* top-k 5 of 1000 random logits (ties included): every draw is one of the 5 largest. */
    float big[1000];
    unsigned x = 99;
    for (int i = 0; i < 1000; i++) {
        x = x * 1103515245u + 12345u;
        big[i] = (float)((x >> 16) % 200) / 50.0f; /* 200 distinct values: many ties */
    }
    float fifth; /* the 5th largest value (with multiplicity) */
    {
        float top[5] = {-1, -1, -1, -1, -1};
        for (int i = 0; i < 1000; i++) {
            float v = big[i];
            for (int j = 0; j < 5; j++)
                if (v > top[j]) {
                    float t = top[j];
                    top[j] = v;
                    v = t;
                }
        }
        fifth = top[4];
    }
    s = mk(1.0f, 5, 1.0f, 0.0f, 1.0f, 64, 1000);
    ok = 1;
    int distinct = 0, seen5[1000] = {0};
    for (int i = 0; i < 5000; i++) {
        int id = hmoe_sampler_sample(s, big);
        ok &= big[id] >= fifth;
        distinct += !seen5[id];
        seen5[id] = 1;
    }
    t_check(ok && distinct <= 5 && distinct >= 2, "top-k 5 of 1000 draws only among the 5 largest",
            "%d distinct ids, ok %d", distinct, ok);
    hmoe_sampler_free(s);

    /* Same seed, same draws. */
    struct hmoe_sampler *s1 = mk(1.0f, 0, 1.0f, 0.0f, 1.0f, 64, 6), *s2 = mk(1.0f, 0, 1.0f, 0.0f, 1.0f, 64, 6);
    ok = 1;
    for (int i = 0; i < 100; i++) ok &= hmoe_sampler_sample(s1, l) == hmoe_sampler_sample(s2, l);
    t_check(ok, "same seed gives the same sequence", "sequences differ");
    hmoe_sampler_free(s1);
    hmoe_sampler_free(s2);
}

static void route_tests(void) {
    float probs[128], w[128];
    int32_t sel[128];
    float lg[6] = {1.0f, 3.0f, 3.0f, 2.0f, 0.0f, 3.0f};
    hmoe_sched_route(lg, 6, 2, probs, sel, w);
    t_check(sel[0] == 1 && sel[1] == 2 && fabsf(w[0] - 0.5f) < 1e-7f && fabsf(w[1] - 0.5f) < 1e-7f,
            "router: ties go to the lowest expert index, weights renormalised", "sel %d %d w %g %g", sel[0], sel[1],
            w[0], w[1]);

    /* Random logits: descending order, and w = softmax over the selected logits only. */
    float big[128];
    unsigned x = 12345;
    for (int e = 0; e < 128; e++) {
        x = x * 1103515245u + 12345u;
        big[e] = ((x >> 8) & 0xffff) / 65536.0f * 6.0f - 3.0f;
    }
    hmoe_sched_route(big, 128, 8, probs, sel, w);
    int ok = 1;
    double den = 0;
    for (int i = 0; i < 8; i++) den += exp(big[sel[i]]);
    for (int i = 0; i < 8; i++) {
        ok &= fabs(w[i] - exp(big[sel[i]]) / den) < 1e-6;
        if (i) ok &= big[sel[i]] <= big[sel[i - 1]];
    }
    int bigger = 0; /* no unselected expert beats the 8th */
    for (int e = 0; e < 128; e++) {
        int chosen = 0;
        for (int i = 0; i < 8; i++) chosen |= sel[i] == e;
        bigger += !chosen && big[e] > big[sel[7]];
    }
    t_check(ok && bigger == 0, "router: top-8 of 128 descending, weights = softmax of the selected logits",
            "order or weights wrong (%d larger unselected)", bigger);

    /* k = E: every expert once, descending. */
    hmoe_sched_route(lg, 6, 6, probs, sel, w);
    t_check(sel[0] == 1 && sel[1] == 2 && sel[2] == 5 && sel[3] == 3 && sel[4] == 0 && sel[5] == 4,
            "router: k = n_expert orders all experts", "sel %d %d %d %d %d %d", sel[0], sel[1], sel[2], sel[3],
            sel[4], sel[5]);
}

int main(void) {
    sampler_tests();
    route_tests();
    return t_summary();
}
