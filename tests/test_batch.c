/* test_batch.c — several sequences stepped together (model.h hmoe_ctx_decode_batch) give
 * each sequence the logits it gets alone, on every moe-tiny architecture (qwen3moe, the
 * qwen35moe recurrent state, gpt-oss's sliding window and sinks, nemotron_h_moe with and
 * without the latent MoE, dense nemotron_h) with an F32 KV cache.
 *
 * A schedule of steps mixes prefill chunks and decode tokens of four sequences at different
 * depths: one joins late, one is cancelled mid-way and its slot reused for a new prompt
 * from position 0, one rewinds into its own history. Each batched step's logits are compared
 * with the same sequence's history run alone (one prefill, all rows) in a one-sequence
 * context: max |d| below 2e-3 (the fixtures call 1e-2 a bug; prefill against decode of the
 * same engine differs by ~1e-4) and the same argmax. A micro-batch smaller than a step's rows
 * splits shares across forward passes. Then greedy generation of four sequences at once
 * against each alone: the same tokens. Bad steps are refused with messages.
 */
#include "harness.h"
#include "model_check.h"

enum { N_TOK = 70, N_VOCAB = 256, N_SEQ = 4, MAX_HIST = 96, N_GEN = 12 };

static int32_t g_ids[N_TOK];

/* Token i of sequence stream k (distinct streams from the fixture's ids). */
static int32_t stream_tok(int k, int i) { return g_ids[(i * (k + 1) + 11 * k) % N_TOK]; }

struct seq_hist {
    int stream;        /* which token stream the slot runs now */
    int n;             /* tokens in its history */
    int32_t ids[MAX_HIST];
};

/* One step of the schedule: per slot the tokens to add (0: not in this step), a rewind to
 * position `rewind` first (-1: none), or a restart on a new stream. */
struct step {
    int add[N_SEQ];
    int rewind[N_SEQ];
    int restart[N_SEQ]; /* > 0: forget the slot's history, run stream restart-1 from 0 */
};

static const struct step g_steps[] = {
    {{20, 5, 0, 0}, {-1, -1, -1, -1}, {0, 0, 0, 0}},  /* two prefills of different lengths */
    {{1, 12, 16, 0}, {-1, -1, -1, -1}, {0, 0, 0, 0}}, /* a decode token beside two prefill chunks */
    {{1, 1, 1, 0}, {-1, -1, -1, -1}, {0, 0, 0, 0}},   /* three decodes */
    {{1, 1, 1, 9}, {-1, -1, -1, -1}, {0, 0, 0, 0}},   /* a late join mid-stream of the others */
    {{1, 0, 1, 1}, {-1, -1, -1, -1}, {0, 0, 0, 0}},   /* slot 1 cancelled: the others go on */
    {{1, 7, 1, 1}, {-1, -1, -1, -1}, {0, 5, 0, 0}},   /* slot 1 reused for a new prompt from 0 */
    {{2, 1, 1, 1}, {10, -1, -1, -1}, {0, 0, 0, 0}},   /* slot 0 rewinds into its history */
    {{1, 1, 1, 1}, {-1, -1, -1, -1}, {0, 0, 0, 0}},
    {{1, 1, 30, 1}, {-1, -1, -1, -1}, {0, 0, 0, 0}},  /* a long chunk past the micro-batch */
};

static void apply_edit(struct seq_hist *h, const struct step *s, int q) {
    if (s->restart[q] > 0) {
        h->stream = s->restart[q] - 1;
        h->n = 0;
    }
    if (s->rewind[q] >= 0) h->n = s->rewind[q];
}

/* The logits after a history's last token, with it run alone as one prefill. */
static int alone_logits(struct hmoe_ctx *solo, const int32_t *ids, int n, float *out_all, struct hmoe_err *err) {
    hmoe_ctx_reset(solo);
    return hmoe_ctx_decode(solo, ids, n, 0, HMOE_LOGITS_ALL, out_all, err) == HMOE_OK;
}

static void run_schedule(const char *name, struct hmoe_model *m, int n_ubatch) {
    struct hmoe_err err = {0};
    struct hmoe_ctx_params cp;
    hmoe_ctx_params_default(&cp);
    cp.type_k = cp.type_v = HMOE_TYPE_F32;
    cp.n_threads = 2;
    cp.n_ubatch = n_ubatch;
    cp.n_seq = N_SEQ;
    cp.n_ctx = N_SEQ * 128;
    struct hmoe_ctx *c = NULL, *solo = NULL;
    char label[200];
    snprintf(label, sizeof label, "%s: %d-sequence context (ubatch %d)", name, N_SEQ, n_ubatch);
    struct hmoe_ctx_params sp = cp;
    sp.n_seq = 1;
    sp.n_ctx = 128;
    if (hmoe_ctx_init(m, &cp, &c, &err) || hmoe_ctx_init(m, &sp, &solo, &err)) {
        t_check(0, label, "%s", err.msg);
        hmoe_ctx_free(c);
        return;
    }
    t_check(hmoe_ctx_n_seq(c) == N_SEQ && hmoe_ctx_n_ctx(c) == 128, label, "n_seq %d n_ctx %d", hmoe_ctx_n_seq(c),
            hmoe_ctx_n_ctx(c));
    struct seq_hist h[N_SEQ];
    for (int q = 0; q < N_SEQ; q++) h[q] = (struct seq_hist){.stream = q};
    float *lg = malloc(sizeof(float) * N_SEQ * N_VOCAB), *all = malloc(sizeof(float) * MAX_HIST * N_VOCAB);
    double worst = 0;
    int flips = 0, checked = 0, fail_step = -1;
    for (size_t si = 0; si < HMOE_ARRAY_LEN(g_steps); si++) {
        const struct step *s = &g_steps[si];
        struct hmoe_seq_tokens sh[N_SEQ];
        int n_sh = 0, who[N_SEQ];
        for (int q = 0; q < N_SEQ; q++) {
            apply_edit(&h[q], s, q);
            if (!s->add[q]) continue;
            const int pos0 = h[q].n;
            for (int i = 0; i < s->add[q]; i++) h[q].ids[h[q].n + i] = stream_tok(h[q].stream, h[q].n + i);
            h[q].n += s->add[q];
            /* shares in a varying order: the order must not matter */
            const int at = si % 2 ? 0 : n_sh;
            if (at == 0)
                for (int j = n_sh; j > 0; j--) sh[j] = sh[j - 1], who[j] = who[j - 1];
            sh[at] = (struct hmoe_seq_tokens){.seq = q, .ids = h[q].ids + pos0, .n = s->add[q], .pos0 = pos0,
                                              .logits = true};
            who[at] = q;
            n_sh++;
        }
        if (hmoe_ctx_decode_batch(c, sh, n_sh, lg, &err)) {
            t_check(0, label, "step %zu: %s", si, err.msg);
            break;
        }
        for (int j = 0; j < n_sh; j++) {
            const int q = who[j];
            if (hmoe_ctx_use_seq(c, q, &err) || hmoe_ctx_n_past(c) != h[q].n) {
                t_check(0, label, "step %zu: sequence %d holds %d positions, want %d", si, q, hmoe_ctx_n_past(c),
                        h[q].n);
                fail_step = (int)si;
            }
            if (!alone_logits(solo, h[q].ids, h[q].n, all, &err)) {
                t_check(0, label, "alone: %s", err.msg);
                break;
            }
            const float *ref = all + (size_t)(h[q].n - 1) * N_VOCAB, *got = lg + (size_t)j * N_VOCAB;
            struct mc_row r = mc_compare_row(got, ref, N_VOCAB);
            if (r.max_abs > worst) worst = r.max_abs;
            if (mc_argmax(got, N_VOCAB) != mc_argmax(ref, N_VOCAB)) flips++;
            if ((r.max_abs >= 2e-3 || flips) && fail_step < 0) fail_step = (int)si;
            checked++;
        }
        hmoe_ctx_use_seq(c, 0, &err);
    }
    snprintf(label, sizeof label, "%s: batched steps equal each sequence alone (ubatch %d, %d rows, max |d| %.2g)",
             name, n_ubatch, checked, worst);
    t_check(worst < 2e-3 && flips == 0 && fail_step < 0 && checked > 20, label,
            "%d argmax flips, first bad step %d", flips, fail_step);
    free(lg);
    free(all);
    hmoe_ctx_free(c);
    hmoe_ctx_free(solo);
}

/* Greedy generation of N_SEQ prompts together against each alone. */
static void run_greedy(const char *name, struct hmoe_model *m) {
    struct hmoe_err err = {0};
    struct hmoe_ctx_params cp;
    hmoe_ctx_params_default(&cp);
    cp.type_k = cp.type_v = HMOE_TYPE_F32;
    cp.n_threads = 2;
    cp.n_seq = N_SEQ;
    cp.n_ctx = N_SEQ * 64;
    struct hmoe_ctx *c = NULL, *solo = NULL;
    struct hmoe_ctx_params sp = cp;
    sp.n_seq = 1;
    sp.n_ctx = 64;
    char label[200];
    snprintf(label, sizeof label, "%s: greedy tokens of %d sequences together equal each alone", name, N_SEQ);
    if (hmoe_ctx_init(m, &cp, &c, &err) || hmoe_ctx_init(m, &sp, &solo, &err)) {
        t_check(0, label, "%s", err.msg);
        hmoe_ctx_free(c);
        return;
    }
    int32_t prompt[N_SEQ][16], gen_b[N_SEQ][N_GEN], gen_a[N_SEQ][N_GEN];
    int plen[N_SEQ];
    float *lg = malloc(sizeof(float) * N_SEQ * N_VOCAB);
    for (int q = 0; q < N_SEQ; q++) {
        plen[q] = 4 + 3 * q;
        for (int i = 0; i < plen[q]; i++) prompt[q][i] = stream_tok(q + 2, i);
    }
    bool ok = true;
    /* together: the prompts in one step, then one token each per step */
    struct hmoe_seq_tokens sh[N_SEQ];
    for (int q = 0; q < N_SEQ; q++)
        sh[q] = (struct hmoe_seq_tokens){.seq = q, .ids = prompt[q], .n = plen[q], .pos0 = 0, .logits = true};
    for (int g = 0; g < N_GEN && ok; g++) {
        ok = hmoe_ctx_decode_batch(c, sh, N_SEQ, lg, &err) == HMOE_OK;
        for (int q = 0; q < N_SEQ && ok; q++) {
            gen_b[q][g] = hmoe_argmax(lg + (size_t)q * N_VOCAB, N_VOCAB);
            sh[q] = (struct hmoe_seq_tokens){.seq = q, .ids = &gen_b[q][g], .n = 1, .pos0 = plen[q] + g, .logits = true};
        }
    }
    /* alone */
    for (int q = 0; q < N_SEQ && ok; q++) {
        hmoe_ctx_reset(solo);
        ok = hmoe_ctx_decode(solo, prompt[q], plen[q], 0, HMOE_LOGITS_LAST, lg, &err) == HMOE_OK;
        for (int g = 0; g < N_GEN && ok; g++) {
            gen_a[q][g] = hmoe_argmax(lg, N_VOCAB);
            ok = hmoe_ctx_decode(solo, &gen_a[q][g], 1, plen[q] + g, HMOE_LOGITS_LAST, lg, &err) == HMOE_OK;
        }
    }
    int diff = -1;
    for (int q = 0; q < N_SEQ && ok && diff < 0; q++)
        if (memcmp(gen_a[q], gen_b[q], sizeof gen_a[q]) != 0) diff = q;
    t_check(ok && diff < 0, label, "%s sequence %d differs", ok ? "" : err.msg, diff);
    free(lg);
    hmoe_ctx_free(c);
    hmoe_ctx_free(solo);
}

/* Steps the API refuses, each with a message and nothing run. */
static void run_errors(struct hmoe_model *m) {
    struct hmoe_err err = {0};
    struct hmoe_ctx_params cp;
    hmoe_ctx_params_default(&cp);
    cp.n_threads = 2;
    cp.n_seq = 2;
    cp.n_ctx = 64; /* 32 per sequence */
    struct hmoe_ctx *c = NULL;
    if (hmoe_ctx_init(m, &cp, &c, &err)) {
        t_check(0, "batch errors: context", "%s", err.msg);
        return;
    }
    float lg[2 * N_VOCAB];
    int32_t ids[40] = {0};
    struct hmoe_seq_tokens two[2] = {{.seq = 0, .ids = ids, .n = 2, .pos0 = 0, .logits = true},
                                     {.seq = 0, .ids = ids, .n = 2, .pos0 = 0, .logits = true}};
    enum hmoe_status st = hmoe_ctx_decode_batch(c, two, 2, lg, &err);
    t_check(st == HMOE_ERR_ARG && strstr(err.msg, "twice"), "batch: a sequence twice in one step is refused", "%d %s",
            st, err.msg);
    two[1].seq = 2;
    st = hmoe_ctx_decode_batch(c, two, 2, lg, &err);
    t_check(st == HMOE_ERR_RANGE && strstr(err.msg, "-np"), "batch: a sequence past -np is refused", "%d %s", st,
            err.msg);
    two[1] = (struct hmoe_seq_tokens){.seq = 1, .ids = ids, .n = 40, .pos0 = 0};
    st = hmoe_ctx_decode_batch(c, two, 2, lg, &err);
    t_check(st == HMOE_ERR_RANGE && strstr(err.msg, "context full") && strstr(err.msg, "32"),
            "batch: a sequence past its share of -c is refused, naming the share", "%d %s", st, err.msg);
    two[1] = (struct hmoe_seq_tokens){.seq = 1, .ids = ids, .n = 1, .pos0 = 5};
    st = hmoe_ctx_decode_batch(c, two, 2, lg, &err);
    t_check(st == HMOE_ERR_ARG && strstr(err.msg, "sequence 1"), "batch: a position past a sequence's cache is refused",
            "%d %s", st, err.msg);
    ids[3] = N_VOCAB;
    two[1] = (struct hmoe_seq_tokens){.seq = 1, .ids = ids, .n = 4, .pos0 = 0};
    st = hmoe_ctx_decode_batch(c, two, 2, lg, &err);
    t_check(st == HMOE_ERR_RANGE && strstr(err.msg, "out of range"), "batch: a bad token id is refused", "%d %s", st,
            err.msg);
    t_check(hmoe_ctx_use_seq(c, 2, &err) == HMOE_ERR_RANGE, "use_seq: a sequence past -np is refused", "%s", err.msg);
    hmoe_ctx_free(c);
    cp.n_seq = HMOE_MAX_SEQ + 1;
    st = hmoe_ctx_init(m, &cp, &c, &err);
    t_check(st == HMOE_ERR_ARG && !c, "ctx: more sequences than HMOE_MAX_SEQ is refused", "%d %s", st, err.msg);
    cp.n_seq = 8;
    cp.n_ctx = 4;
    st = hmoe_ctx_init(m, &cp, &c, &err);
    t_check(st == HMOE_ERR_ARG && !c && strstr(err.msg, "-c"), "ctx: -c smaller than -np is refused", "%d %s", st,
            err.msg);
}

int main(void) {
    char path[8192];
    struct hmoe_err err = {0};
    FILE *f = fopen(t_shared("fixtures/moe-tiny/tokens.txt"), "r");
    int n = 0;
    while (f && n < N_TOK && fscanf(f, "%d", &g_ids[n]) == 1) n++;
    if (f) fclose(f);
    t_check(n == N_TOK, "moe-tiny tokens.txt has 70 ids", "read %d", n);
    static const char *names[] = {"qwen3moe-tiny",       "qwen35moe-tiny",           "gpt-oss-tiny",
                                  "nemotron_h_moe-tiny", "nemotron_h_moe-latent-tiny", "nemotron_h-tiny"};
    for (size_t i = 0; i < HMOE_ARRAY_LEN(names) && n == N_TOK; i++) {
        char rel[128];
        snprintf(rel, sizeof rel, "fixtures/moe-tiny/%s.gguf", names[i]);
        snprintf(path, sizeof path, "%s", t_shared(rel));
        struct hmoe_model *m = NULL;
        if (hmoe_model_load(path, NULL, &m, &err)) {
            t_check(0, names[i], "load: %s", err.msg);
            continue;
        }
        run_schedule(names[i], m, 512);
        run_schedule(names[i], m, 16);
        run_greedy(names[i], m);
        if (i == 0) run_errors(m);
        hmoe_model_free(m);
    }
    return t_summary();
}
