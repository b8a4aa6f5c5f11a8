/* test_model_kv.c — KV cache behaviour against the goldens (fixtures/README.md §4-§5):
 *   - f16 / bf16 / q8_0 caches run and stay close. Limits: F32 mini with f16 K/V: max |Δ|
 *     <= 1e-2 (§5.4: "with an F16 KV cache expect up to ~1e-2"; llama.cpp's own F16-KV run
 *     is 7.6e-3 off); every other case uses the quantized-model thresholds of §5.4 (max |Δ|
 *     <= 0.06, cosine >= 0.999, rel RMS <= 3 %); top-1 >= 90 % of positions throughout.
 *   - context full is an HMOE_ERR_RANGE naming -c and leaves the cache as it was;
 *     -c above context_length is allowed (llama.cpp warns and keeps it); rewinding (decode from an earlier position)
 *     reproduces the goldens.
 */
#include "harness.h"
#include "model_check.h"

static struct hmoe_json *load_side(const char *kind) {
    char path[8192];
    struct hmoe_err err = {0};
    snprintf(path, sizeof path, "%s%s.json", t_shared("fixtures/golden/"), kind);
    return hmoe_json_parse_file(path, &err);
}

static struct hmoe_model *load_model(const struct hmoe_json *side, struct hmoe_err *err) {
    char path[8192];
    struct hmoe_model *m = NULL;
    snprintf(path, sizeof path, "%s%s", t_shared("fixtures/models/"), hmoe_json_get_str(side, "model_file", "?"));
    hmoe_model_load(path, NULL, &m, err);
    return m;
}

static struct hmoe_ctx *make_ctx(struct hmoe_model *m, int n_ctx, enum hmoe_type kv, struct hmoe_err *err) {
    struct hmoe_ctx_params cp;
    hmoe_ctx_params_default(&cp);
    cp.n_ctx = n_ctx;
    cp.type_k = cp.type_v = kv;
    cp.n_threads = 2;
    struct hmoe_ctx *c = NULL;
    hmoe_ctx_init(m, &cp, &c, err);
    return c;
}

/* All prompts, one prefill each, stored rows vs golden under the given limits. */
static void kv_type_case(const char *kind, struct hmoe_model *m, const struct hmoe_json *side, enum hmoe_type kv,
                         double max_abs_lim, bool quant_limits) {
    char name[256];
    struct hmoe_err err = {0};
    snprintf(name, sizeof name, "%s with %s K/V cache vs golden", kind, hmoe_type_name(kv));
    struct hmoe_ctx *c = make_ctx(m, 512, kv, &err);
    if (!c) {
        t_check(0, name, "%s", err.msg);
        return;
    }
    const int V = m->cfg.n_vocab;
    const struct hmoe_json *prompts = hmoe_json_get(side, "prompts");
    double worst = 0, min_cos = 1, sq_d = 0, sq_r = 0;
    int top1 = 0, npos_all = 0;
    bool ok = true;
    for (size_t pi = 0; pi < prompts->n && ok; pi++) {
        const struct hmoe_json *pr = prompts->items[pi];
        int n_pos, n_rows = (int)hmoe_json_get_num(pr, "n_rows", 0);
        int32_t *ids = mc_ids(hmoe_json_get(pr, "ids"), &n_pos);
        char path[8192];
        snprintf(path, sizeof path, "%s%s", t_shared("fixtures/golden/"), hmoe_json_get_str(pr, "logits_file", "?"));
        float *ref = mc_read_f32(path, (size_t)n_rows * V), *ours = malloc((size_t)n_pos * V * sizeof(float));
        hmoe_ctx_reset(c);
        if (!ref || hmoe_ctx_decode(c, ids, n_pos, 0, HMOE_LOGITS_ALL, ours, &err)) ok = false;
        const struct hmoe_json *lp = hmoe_json_get(pr, "logits_positions"), *t5 = hmoe_json_get(pr, "top5_ids");
        for (size_t r = 0; ok && r < lp->n; r++) {
            struct mc_row s = mc_compare_row(ours + (size_t)lp->items[r]->num * V, ref + r * V, V);
            worst = s.max_abs > worst ? s.max_abs : worst;
            min_cos = s.cos < min_cos ? s.cos : min_cos;
            sq_d += s.sq_diff;
            sq_r += s.sq_ref;
        }
        for (int p = 0; ok && p < n_pos; p++) top1 += mc_argmax(ours + (size_t)p * V, V) == (int)t5->items[p]->items[0]->num;
        npos_all += n_pos;
        free(ids);
        free(ref);
        free(ours);
    }
    double rr = sq_r > 0 ? sqrt(sq_d / sq_r) : 1;
    snprintf(name, sizeof name, "%s with %s K/V cache vs golden (max |d| %.3g, rel RMS %.4f, top-1 %d/%d)", kind,
             hmoe_type_name(kv), worst, rr, top1, npos_all);
    ok = ok && worst <= max_abs_lim && top1 >= 0.9 * npos_all;
    if (quant_limits) ok = ok && min_cos >= 0.999 && rr <= 0.03;
    t_check(ok, name, "%s limit max |d| %.3g, min cosine %.6f", err.msg, max_abs_lim, min_cos);
    hmoe_ctx_free(c);
}

/* A full cache rejects more tokens and keeps what it has. */
static void context_full_case(struct hmoe_model *m) {
    struct hmoe_err err = {0};
    struct hmoe_ctx *c = make_ctx(m, 8, HMOE_TYPE_F32, &err);
    int32_t ids[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    float *lo = malloc(sizeof(float) * (size_t)m->cfg.n_vocab);
    enum hmoe_status st1 = hmoe_ctx_decode(c, ids, 9, 0, HMOE_LOGITS_LAST, lo, &err);
    bool msg_ok = st1 == HMOE_ERR_RANGE && strstr(err.msg, "-c/--ctx-size") && strstr(err.msg, "9");
    enum hmoe_status st2 = hmoe_ctx_decode(c, ids, 8, 0, HMOE_LOGITS_LAST, lo, &err);
    enum hmoe_status st3 = hmoe_ctx_decode(c, ids + 8, 1, 8, HMOE_LOGITS_LAST, lo, &err);
    t_check(msg_ok && st2 == HMOE_OK && st3 == HMOE_ERR_RANGE && hmoe_ctx_n_past(c) == 8,
            "context full: 9 tokens into -c 8 fail with a message naming -c, 8 fit, the 9th fails",
            "status %d/%d/%d, n_past %d, message '%s'", st1, st2, st3, hmoe_ctx_n_past(c), err.msg);
    enum hmoe_status st4 = hmoe_ctx_decode(c, ids, 1, 9, HMOE_LOGITS_LAST, lo, &err);
    int32_t bad = m->cfg.n_vocab;
    enum hmoe_status st5 = hmoe_ctx_decode(c, &bad, 1, 0, HMOE_LOGITS_LAST, lo, &err);
    t_check(st4 == HMOE_ERR_ARG && st5 == HMOE_ERR_RANGE && hmoe_ctx_n_past(c) == 8,
            "decode past n_past and an out-of-vocabulary id are rejected", "status %d/%d", st4, st5);
    free(lo);
    hmoe_ctx_free(c);
    enum hmoe_log_level lv = hmoe_log_level;
    hmoe_log_level = HMOE_LOG_ERROR; /* the warning is checked by test_cli_model.sh */
    c = make_ctx(m, 100000, HMOE_TYPE_F16, &err);
    hmoe_log_level = lv;
    t_check(c && hmoe_ctx_n_ctx(c) == 100000 && m->cfg.n_ctx_train == 4096,
            "-c 100000 is kept past the model's context_length 4096", "n_ctx %d", c ? hmoe_ctx_n_ctx(c) : -1);
    hmoe_ctx_free(c);
}

/* Decode 20 tokens, rewind to 10, decode the rest from 10: the rows after the rewind point
 * must match llama.cpp's single prefill (F32 cache, F32 limits). */
static void rewind_case(struct hmoe_model *m, const struct hmoe_json *side) {
    struct hmoe_err err = {0};
    const struct hmoe_json *pr = hmoe_json_get(side, "prompts")->items[4]; /* p05_text, dense rows */
    const int V = m->cfg.n_vocab;
    int n_pos, n_rows = (int)hmoe_json_get_num(pr, "n_rows", 0);
    int32_t *ids = mc_ids(hmoe_json_get(pr, "ids"), &n_pos);
    char path[8192];
    snprintf(path, sizeof path, "%s%s", t_shared("fixtures/golden/"), hmoe_json_get_str(pr, "logits_file", "?"));
    float *ref = mc_read_f32(path, (size_t)n_rows * V), *ours = malloc((size_t)n_pos * V * sizeof(float));
    struct hmoe_ctx *c = make_ctx(m, 64, HMOE_TYPE_F32, &err);
    int32_t junk[10] = {7, 7, 7, 7, 7, 7, 7, 7, 7, 7};
    enum hmoe_status st = hmoe_ctx_decode(c, ids, 10, 0, HMOE_LOGITS_NONE, NULL, &err);
    if (!st) st = hmoe_ctx_decode(c, junk, 10, 10, HMOE_LOGITS_NONE, NULL, &err);
    hmoe_ctx_truncate(c, 10);
    if (!st) st = hmoe_ctx_decode(c, ids + 10, n_pos - 10, 10, HMOE_LOGITS_ALL, ours, &err);
    double worst = 0;
    const struct hmoe_json *lp = hmoe_json_get(pr, "logits_positions");
    for (size_t r = 0; !st && ref && r < lp->n; r++) {
        int p = (int)lp->items[r]->num;
        if (p < 10) continue;
        struct mc_row s = mc_compare_row(ours + (size_t)(p - 10) * V, ref + r * V, V);
        worst = s.max_abs > worst ? s.max_abs : worst;
    }
    t_check(!st && ref && n_rows == n_pos && worst <= 1e-4,
            "rewind: truncate to 10 positions, decode the rest, matches the golden (F32 mini)", "%s max |d| %.3g",
            st ? err.msg : "", worst);
    hmoe_ctx_free(c);
    free(ids);
    free(ref);
    free(ours);
}

int main(void) {
    struct hmoe_err err = {0};
    struct hmoe_json *mini = load_side("tiny-qwen3moe-A-mini-F32"), *q4 = load_side("tiny-qwen3moe-A-Q4_K_M");
    struct hmoe_model *mm = mini ? load_model(mini, &err) : NULL;
    t_check(mm != NULL, "mini-F32 model loads", "%s", err.msg);
    struct hmoe_model *mq = q4 ? load_model(q4, &err) : NULL;
    t_check(mq != NULL, "Q4_K_M model loads", "%s", err.msg);
    if (mm) {
        kv_type_case("mini-F32", mm, mini, HMOE_TYPE_F16, 1e-2, false);
        kv_type_case("mini-F32", mm, mini, HMOE_TYPE_BF16, 0.06, true);
        kv_type_case("mini-F32", mm, mini, HMOE_TYPE_Q8_0, 0.06, true);
        context_full_case(mm);
        rewind_case(mm, mini);
    }
    if (mq) {
        kv_type_case("Q4_K_M", mq, q4, HMOE_TYPE_F16, 0.06, true);
        kv_type_case("Q4_K_M", mq, q4, HMOE_TYPE_Q8_0, 0.06, true);
    }
    hmoe_model_free(mm);
    hmoe_model_free(mq);
    hmoe_json_free(mini);
    hmoe_json_free(q4);
    return t_summary();
}
