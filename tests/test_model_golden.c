/* test_model_golden.c — the qwen3moe forward pass against llama.cpp's goldens
 * (fixtures/README.md §4, thresholds from §5.4) for every shipped golden model and each
 * of the 6 prompts, F32 KV cache as the goldens were made:
 *   - one prefill with logits at every position: stored rows within the thresholds
 *     (F32 mini: max |Δ| <= 1e-4; quantized: max |Δ| <= 0.06, cosine >= 0.999, rel RMS
 *     <= 3 % per model), top-1 vs top5_ids at every position (F32: all, quantized: >= 90 %);
 *   - the 24-step greedy continuation, fed token by token with llama.cpp's tokens; a step is
 *     compared when its recorded top-1 margin is >= 2x the logit tolerance (F32: all 24);
 *   - token-by-token decoding and a prefill split into 7-token micro-batches, both against
 *     the same goldens.
 */
#include "harness.h"
#include "model_check.h"

struct kind {
    const char *name;
    bool f32;
};
static const struct kind kinds[] = {
    {"tiny-qwen3moe-A-mini-F32", true},
    {"tiny-qwen3moe-A-Q4_K_M", false},
    {"tiny-qwen3moe-A-IQ2_XS", false},
};

/* §5.4 thresholds. */
#define F32_MAX_ABS 1e-4
#define Q_MAX_ABS 0.06
#define Q_MIN_COS 0.999
#define Q_REL_RMS 0.03
#define Q_TOP1 0.90

struct agg {
    double sq_diff, sq_ref;
    int top1_ok, top1_n;
};

/* Check the stored rows of one prompt against ours (n_pos rows of V). Returns a detail
 * string in `why` on failure. */
static bool check_rows(const struct kind *k, const struct hmoe_json *pr, const float *ours, const float *ref, int V,
                       struct agg *ag, char *why, size_t why_cap) {
    const struct hmoe_json *lp = hmoe_json_get(pr, "logits_positions");
    bool ok = true;
    double worst_abs = 0, worst_cos = 1;
    int worst_pos = -1;
    for (size_t r = 0; r < lp->n; r++) {
        int pos = (int)lp->items[r]->num;
        struct mc_row s = mc_compare_row(ours + (size_t)pos * V, ref + r * V, V);
        ag->sq_diff += s.sq_diff;
        ag->sq_ref += s.sq_ref;
        bool row_ok = k->f32 ? s.max_abs <= F32_MAX_ABS : (s.max_abs <= Q_MAX_ABS && s.cos >= Q_MIN_COS);
        if (s.max_abs > worst_abs || !(s.cos >= worst_cos)) worst_pos = pos;
        if (s.max_abs > worst_abs) worst_abs = s.max_abs;
        if (!(s.cos >= worst_cos)) worst_cos = s.cos;
        ok = ok && row_ok;
    }
    snprintf(why, why_cap, "worst row at position %d: max |d| %.3g (limit %.3g), min cosine %.7f", worst_pos,
             worst_abs, k->f32 ? F32_MAX_ABS : Q_MAX_ABS, worst_cos);
    return ok;
}

/* top-1 of ours vs top5_ids[pos][0] at every position. */
static int count_top1(const struct hmoe_json *pr, const float *ours, int V, int n_pos, int *first_bad) {
    const struct hmoe_json *t5 = hmoe_json_get(pr, "top5_ids");
    int good = 0;
    *first_bad = -1;
    for (int p = 0; p < n_pos; p++) {
        int want = (int)t5->items[p]->items[0]->num;
        if (mc_argmax(ours + (size_t)p * V, V) == want) good++;
        else if (*first_bad < 0) *first_bad = p;
    }
    return good;
}

static void run_kind(const struct kind *k) {
    char path[8192], name[256], why[512];
    struct hmoe_err err = {0};
    snprintf(path, sizeof path, "%s", t_shared("fixtures/golden/"));
    size_t plen = strlen(path);
    snprintf(path + plen, sizeof path - plen, "%s.json", k->name);
    struct hmoe_json *side = hmoe_json_parse_file(path, &err);
    if (!side) {
        t_check(0, k->name, "cannot read sidecar: %s", err.msg);
        return;
    }
    char model_path[8192];
    snprintf(model_path, sizeof model_path, "%s%s", t_shared("fixtures/models/"),
             hmoe_json_get_str(side, "model_file", "?"));
    struct hmoe_model *m = NULL;
    struct hmoe_ctx *c = NULL, *c7 = NULL;
    snprintf(name, sizeof name, "%s load", k->name);
    if (hmoe_model_load(model_path, NULL, &m, &err)) {
        t_check(0, name, "%s%s", strstr(err.msg, "missing kernel") ? "missing kernel: " : "", err.msg);
        hmoe_json_free(side);
        return;
    }
    struct hmoe_ctx_params cp;
    hmoe_ctx_params_default(&cp);
    cp.n_ctx = 512;
    cp.type_k = cp.type_v = HMOE_TYPE_F32;
    /* One thread for the long sequential runs (the suite shares a 2-core machine, where an
     * OpenMP barrier waits on descheduled threads); two for the micro-batched prefill so
     * the threaded paths are compared with the goldens too (test_moe_tiny decodes with 2). */
    cp.n_threads = 1;
    enum hmoe_status st = hmoe_ctx_init(m, &cp, &c, &err);
    cp.n_threads = 2;
    cp.n_ubatch = 7;
    if (!st) st = hmoe_ctx_init(m, &cp, &c7, &err);
    t_check(st == HMOE_OK && m->cfg.n_vocab == 4101, name, "%s (n_vocab %d)", err.msg, m->cfg.n_vocab);
    if (st) goto out;

    const int V = m->cfg.n_vocab;
    const double tol = k->f32 ? F32_MAX_ABS : Q_MAX_ABS;
    struct agg ag = {0}, ag_dec = {0};
    const struct hmoe_json *prompts = hmoe_json_get(side, "prompts");
    for (size_t pi = 0; pi < prompts->n; pi++) {
        const struct hmoe_json *pr = prompts->items[pi];
        const char *pname = hmoe_json_get_str(pr, "name", "?");
        int n_pos, n_rows = (int)hmoe_json_get_num(pr, "n_rows", 0);
        int32_t *ids = mc_ids(hmoe_json_get(pr, "ids"), &n_pos);
        snprintf(path, sizeof path, "%s%s", t_shared("fixtures/golden/"), hmoe_json_get_str(pr, "logits_file", "?"));
        float *ref = mc_read_f32(path, (size_t)n_rows * V);
        float *ours = malloc((size_t)n_pos * V * sizeof(float));
        float *cur = malloc((size_t)V * sizeof(float));
        int bad;

        /* 1. One prefill, logits everywhere. */
        snprintf(name, sizeof name, "%s %s prefill logits vs golden", k->name, pname);
        hmoe_ctx_reset(c);
        st = hmoe_ctx_decode(c, ids, n_pos, 0, HMOE_LOGITS_ALL, ours, &err);
        if (!ref || st) {
            t_check(0, name, "%s", !ref ? "cannot read the golden .f32 file" : err.msg);
            goto next;
        }
        t_check(check_rows(k, pr, ours, ref, V, &ag, why, sizeof why), name, "%s", why);
        int good = count_top1(pr, ours, V, n_pos, &bad);
        ag.top1_ok += good;
        ag.top1_n += n_pos;
        if (k->f32) {
            snprintf(name, sizeof name, "%s %s top-1 at all %d positions", k->name, pname, n_pos);
            t_check(good == n_pos, name, "%d of %d agree; first mismatch at position %d", good, n_pos, bad);
        }

        /* 2. Greedy continuation, teacher-forced with llama.cpp's tokens so every step sees
         *    the same context; compared where the golden's top-1 margin allows. */
        {
            const struct hmoe_json *gc = hmoe_json_get(pr, "greedy_continuation");
            const struct hmoe_json *gm = hmoe_json_get(pr, "greedy_top1_margin");
            memcpy(cur, ours + (size_t)(n_pos - 1) * V, (size_t)V * sizeof(float));
            int compared = 0, first_fail = -1, got = -1, want = -1;
            for (size_t s = 0; s < gc->n && !st; s++) {
                const int32_t tok = (int32_t)gc->items[s]->num;
                if (k->f32 || gm->items[s]->num >= 2 * tol) {
                    compared++;
                    int a = mc_argmax(cur, V);
                    if (a != tok && first_fail < 0) first_fail = (int)s, got = a, want = tok;
                }
                if (s + 1 < gc->n) st = hmoe_ctx_decode(c, &tok, 1, n_pos + (int)s, HMOE_LOGITS_LAST, cur, &err);
            }
            snprintf(name, sizeof name, "%s %s greedy continuation (%d of 24 steps compared)", k->name, pname,
                     compared);
            t_check(!st && first_fail < 0 && (!k->f32 || compared == 24), name,
                    "%s step %d: argmax %d, llama.cpp %d", st ? err.msg : "", first_fail, got, want);
        }

        /* 3. Token-by-token decoding from an empty cache, vs the same goldens. */
        {
            snprintf(name, sizeof name, "%s %s token-by-token decode vs golden", k->name, pname);
            hmoe_ctx_reset(c);
            float *dec = malloc((size_t)n_pos * V * sizeof(float));
            st = HMOE_OK;
            for (int i = 0; i < n_pos && !st; i++)
                st = hmoe_ctx_decode(c, &ids[i], 1, i, HMOE_LOGITS_LAST, dec + (size_t)i * V, &err);
            if (st) t_check(0, name, "%s", err.msg);
            else {
                bool ok = check_rows(k, pr, dec, ref, V, &ag_dec, why, sizeof why);
                int g2 = count_top1(pr, dec, V, n_pos, &bad);
                t_check(ok && (k->f32 ? g2 == n_pos : g2 >= Q_TOP1 * n_pos), name, "%s; top-1 %d of %d", why, g2,
                        n_pos);
            }
            free(dec);
        }

        /* 4. The longest prompt again in 7-token micro-batches (KV reuse across batches). */
        if (n_pos >= 30) {
            struct agg dummy = {0};
            snprintf(name, sizeof name, "%s %s prefill in 7-token micro-batches vs golden", k->name, pname);
            st = hmoe_ctx_decode(c7, ids, n_pos, 0, HMOE_LOGITS_ALL, ours, &err);
            t_check(!st && check_rows(k, pr, ours, ref, V, &dummy, why, sizeof why), name, "%s",
                    st ? err.msg : why);
        }
    next:
        free(ids);
        free(ref);
        free(ours);
        free(cur);
    }
    if (!k->f32) {
        double rr = sqrt(ag.sq_diff / ag.sq_ref), rd = sqrt(ag_dec.sq_diff / ag_dec.sq_ref);
        snprintf(name, sizeof name, "%s rel RMS over all stored rows (prefill %.5f, decode %.5f)", k->name, rr, rd);
        t_check(rr <= Q_REL_RMS && rd <= Q_REL_RMS, name, "limit %.2f", Q_REL_RMS);
        snprintf(name, sizeof name, "%s top-1 agreement over all positions (%d of %d)", k->name, ag.top1_ok,
                 ag.top1_n);
        t_check(ag.top1_ok >= Q_TOP1 * ag.top1_n, name, "limit %.0f %%", Q_TOP1 * 100);
    }
out:
    hmoe_ctx_free(c);
    hmoe_ctx_free(c7);
    hmoe_model_free(m);
    hmoe_json_free(side);
}

int main(void) {
    for (size_t i = 0; i < HMOE_ARRAY_LEN(kinds); i++) run_kind(&kinds[i]);
    return t_summary();
}
