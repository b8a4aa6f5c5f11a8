/* gpu_test_batch.c — parallel sequences on the GPU backend (model.h hmoe_ctx_decode_batch with
 * --gpu on and n_seq 4): each sequence's logits in a batched step equal the same sequence's
 * shares run alone in a one-sequence GPU context of the same placement (quantized criteria:
 * cosine >= 0.999, rel RMS <= 3 %, top-1 >= 90 %; every row of every step counted).
 *
 * The schedule mixes prefill chunks with decode rows of sequences at different depths, a late
 * join, a sequence that leaves mid-run and a new prompt on its slot from position 0, and a
 * micro-batch smaller than a step (shares split across forward passes). Models: the Q4_K_M
 * qwen3moe fixture (fixtures/models) and the synth gpt-oss-tiny (sliding window, sinks, biases);
 * placements: all experts on the GPU, --n-cpu-moe 2 (RAM layers with cache slots), --cpu-moe
 * (every expert a miss, read by CPU threads). Also: --gpu auto with 4 sequences picks the GPU,
 * and an architecture with recurrent state stays refused with --gpu on. One context is open at a
 * time. Without a CUDA device it prints one "skipped" line.
 */
#include <unistd.h>

#include "harness.h"
#include "hmoe/cuda.h"
#include "hmoe/synth.h"
#include "model_check.h"

enum { N_SEQ = 4, MAX_HIST = 80 };

struct place {
    const char *name;
    bool cpu_moe;
    int n_cpu_moe;
    const char *backend;
};

static struct hmoe_ctx_params params(const struct place *pl, int n_seq, int n_ubatch) {
    struct hmoe_ctx_params cp;
    hmoe_ctx_params_default(&cp);
    cp.n_ctx = 128 * n_seq;
    cp.n_seq = n_seq;
    cp.type_k = cp.type_v = HMOE_TYPE_F16;
    cp.n_threads = 2;
    cp.n_ubatch = n_ubatch;
    cp.gpu = HMOE_GPU_ON;
    cp.sched.cpu_moe = pl->cpu_moe;
    cp.sched.n_cpu_moe = pl->n_cpu_moe;
    cp.sched.no_profile = true;
    return cp;
}

/* Per step and slot: tokens to add (0: not in this step); restart > 0: a new prompt from 0. */
struct step {
    int add[N_SEQ];
    int restart[N_SEQ];
};
static const struct step g_steps[] = {
    {{20, 5, 0, 0}, {0, 0, 0, 0}},  /* two prefills of different lengths */
    {{1, 12, 16, 0}, {0, 0, 0, 0}}, /* a decode row beside two prefill chunks */
    {{1, 1, 1, 0}, {0, 0, 0, 0}},   /* three decode rows at different depths */
    {{1, 1, 1, 9}, {0, 0, 0, 0}},   /* a late join */
    {{1, 0, 1, 1}, {0, 0, 0, 0}},   /* slot 1 leaves: the others go on */
    {{1, 7, 1, 1}, {0, 1, 0, 0}},   /* slot 1 reused for a new prompt from 0 */
    {{1, 1, 1, 1}, {0, 0, 0, 0}},
    {{1, 1, 1, 1}, {0, 0, 0, 0}},
    {{1, 1, 14, 1}, {0, 0, 0, 0}},  /* a chunk past the 16-row micro-batch of the split run */
    {{1, 1, 1, 1}, {0, 0, 0, 0}},
};
enum { N_STEPS = sizeof g_steps / sizeof g_steps[0], MAX_ROWS = N_STEPS * N_SEQ };

static int32_t tok_of(int stream, int i, int V) { return (int32_t)((i * 37 + stream * 101 + 5) % V); }

/* The schedule on a 4-sequence context (batched), then each slot's shares replayed in order on
 * a one-sequence context (each share through hmoe_ctx_decode; a restart from position 0): the
 * logits rows side by side. One context is open at a time. */
static void run_schedule(const struct hmoe_model *m, const struct place *pl, int n_ubatch, const char *model_name) {
    const int V = m->cfg.n_vocab;
    char name[300];
    snprintf(name, sizeof name, "gpu batch %s [%s, ubatch %d]: batched steps vs each sequence alone", model_name,
             pl->name, n_ubatch);
    struct hmoe_err err = {0};
    struct hmoe_ctx *c = NULL;
    struct hmoe_ctx_params cp = params(pl, N_SEQ, n_ubatch), sp = params(pl, 1, 512);
    enum hmoe_status st = hmoe_ctx_init(m, &cp, &c, &err);
    const char *stage = st ? "4-sequence context" : "";
    if (!st && strcmp(hmoe_ctx_backend(c), pl->backend))
        st = HMOE_RAISE(&err, HMOE_ERR_INTERNAL, "backend %s, want %s", hmoe_ctx_backend(c), pl->backend);
    float *got = malloc((size_t)MAX_ROWS * V * sizeof *got), *ref = malloc((size_t)MAX_ROWS * V * sizeof *ref);
    static int32_t ids[MAX_ROWS][MAX_HIST]; /* each share's history up to its end */
    struct hmoe_seq_tokens all[MAX_ROWS];    /* every share in step order */
    int n_past[N_SEQ] = {0}, stream[N_SEQ] = {0, 1, 2, 3}, rows = 0;
    for (int s = 0; s < N_STEPS && !st; s++) {
        const int r0 = rows;
        for (int q = 0; q < N_SEQ; q++) {
            const int add = g_steps[s].add[q];
            if (g_steps[s].restart[q]) {
                n_past[q] = 0;
                stream[q] += N_SEQ;
            }
            if (!add) continue;
            for (int i = 0; i < n_past[q] + add; i++) ids[rows][i] = tok_of(stream[q], i, V);
            all[rows] = (struct hmoe_seq_tokens){.seq = q, .ids = ids[rows] + n_past[q], .n = add, .pos0 = n_past[q],
                                                 .logits = true};
            rows++;
            n_past[q] += add;
        }
        st = hmoe_ctx_decode_batch(c, all + r0, rows - r0, got + (size_t)r0 * V, &err);
        if (st) stage = "batched step";
    }
    bool pos_ok = !st; /* the positions each sequence ended at */
    for (int q = 0; q < N_SEQ && pos_ok; q++) {
        pos_ok = !hmoe_ctx_use_seq(c, q, &err) && hmoe_ctx_n_past(c) == n_past[q];
    }
    hmoe_ctx_free(c);
    for (int q = 0; q < N_SEQ && !st; q++) {
        struct hmoe_ctx *solo = NULL;
        st = hmoe_ctx_init(m, &sp, &solo, &err);
        if (st) stage = "one-sequence context";
        for (int r = 0; r < rows && !st; r++)
            if (all[r].seq == q)
                st = hmoe_ctx_decode(solo, all[r].ids, all[r].n, all[r].pos0, HMOE_LOGITS_LAST, ref + (size_t)r * V,
                                     &err);
        if (st && !*stage) stage = "sequence alone";
        hmoe_ctx_free(solo);
    }
    double wcos = 1, sq_d = 0, sq_r = 0;
    int top = 0;
    for (int r = 0; !st && r < rows; r++) {
        const struct mc_row mr = mc_compare_row(got + (size_t)r * V, ref + (size_t)r * V, V);
        if (!(mr.cos >= wcos)) wcos = mr.cos;
        sq_d += mr.sq_diff;
        sq_r += mr.sq_ref;
        top += mc_argmax(got + (size_t)r * V, V) == mc_argmax(ref + (size_t)r * V, V);
    }
    const double rr = sq_r > 0 ? sqrt(sq_d / sq_r) : 1.0;
    t_check(!st && rows > 0 && wcos >= 0.999 && rr <= 0.03 && top >= 0.9 * rows, name,
            "%s%s%s rows %d, min cosine %.6f, rel RMS %.4f, top-1 %d/%d", stage, *stage ? ": " : "",
            st ? err.msg : "", rows, wcos, rr, top, rows);
    snprintf(name, sizeof name, "gpu batch %s [%s, ubatch %d]: each sequence's cached positions", model_name, pl->name,
             n_ubatch);
    t_check(pos_ok, name, "%s", err.msg);
    free(got);
    free(ref);
}

static void all_placements(const struct hmoe_model *m, const char *model_name) {
    const struct place pl[] = {{"all GPU", false, 0, "cuda"},
                               {"--n-cpu-moe 2", false, 2, "cuda+cpu"},
                               {"--cpu-moe", true, 0, "cuda+cpu"}};
    for (size_t i = 0; i < HMOE_ARRAY_LEN(pl); i++) run_schedule(m, &pl[i], 512, model_name);
    run_schedule(m, &pl[0], 16, model_name);
    run_schedule(m, &pl[2], 16, model_name);
}

static void auto_picks_gpu(const struct hmoe_model *m) {
    struct hmoe_ctx_params cp = params(&(struct place){"auto", false, 0, "cuda"}, N_SEQ, 512);
    cp.gpu = HMOE_GPU_AUTO;
    struct hmoe_ctx *c = NULL;
    struct hmoe_err err = {0};
    enum hmoe_status st = hmoe_ctx_init(m, &cp, &c, &err);
    t_check(!st && strcmp(hmoe_ctx_backend(c), "cuda") == 0, "gpu batch: --gpu auto with 4 sequences picks the GPU",
            "%d %s %s", st, err.msg, c ? hmoe_ctx_backend(c) : "-");
    hmoe_ctx_free(c);
}

static struct hmoe_model *synth(const char *preset, const char *mix, char *path) {
    int fd = mkstemp(path);
    if (fd >= 0) close(fd);
    struct hmoe_synth_plan p;
    struct hmoe_err err = {0};
    struct hmoe_synth_opts o = {.preset = preset, .mix = mix, .seed = 7};
    enum hmoe_status st = fd < 0 ? HMOE_ERR_IO : hmoe_synth_plan_init(&p, &o, &err);
    if (!st) {
        st = hmoe_synth_write(&p, path, NULL, NULL, &err);
        hmoe_synth_plan_free(&p);
    }
    struct hmoe_model *m = NULL;
    if (!st) st = hmoe_model_load(path, NULL, &m, &err);
    char name[200];
    snprintf(name, sizeof name, "gpu batch: synth %s %s written and loaded", preset, mix);
    t_check(!st, name, "%s", err.msg);
    return st ? NULL : m;
}

/* An architecture whose recurrent state the GPU keeps for one sequence: --gpu on with 2 is
 * refused naming -np. */
static void recurrent_refused(void) {
    char path[] = "/tmp/hmoe-gpubatch-q35-XXXXXX";
    struct hmoe_model *m = synth("qwen35-tiny", "q4_k_m", path);
    if (m) {
        struct hmoe_ctx_params cp = params(&(struct place){"on", false, 0, "cuda"}, 2, 512);
        struct hmoe_ctx *c = NULL;
        struct hmoe_err err = {0};
        enum hmoe_status st = hmoe_ctx_init(m, &cp, &c, &err);
        t_check(st == HMOE_ERR_UNSUPPORTED && !c && strstr(err.msg, "-np"),
                "gpu batch: qwen35moe --gpu on with 2 sequences is refused naming -np", "%d %s", st, err.msg);
        hmoe_ctx_free(c);
        hmoe_model_free(m);
    }
    unlink(path);
}

int main(void) {
    if (!hmoe_cuda_available()) {
        printf("gpu_test_batch ... skipped: no CUDA device\n");
        return t_summary();
    }
    struct hmoe_err err = {0};
    struct hmoe_model *m = NULL;
    if (hmoe_model_load(t_shared("fixtures/models/tiny-qwen3moe-A-Q4_K_M.gguf"), NULL, &m, &err)) {
        t_check(0, "gpu batch: load tiny-qwen3moe-A-Q4_K_M", "%s", err.msg);
    } else {
        auto_picks_gpu(m);
        all_placements(m, "qwen3moe Q4_K_M");
        hmoe_model_free(m);
    }
    char path[] = "/tmp/hmoe-gpubatch-oss-XXXXXX";
    m = synth("gpt-oss-tiny", "mxfp4_moe", path);
    if (m) {
        all_placements(m, "gpt-oss-tiny mxfp4");
        hmoe_model_free(m);
    }
    unlink(path);
    recurrent_refused();
    return t_summary();
}
