/* test_decode_threads.c — token-by-token decoding with 2 threads against llama.cpp's goldens
 * (fixtures/README.md §4, thresholds of §5.4), for the decode-only job layouts that
 * test_model_golden (1 thread for decode) does not run threaded: the MoE's gate/up and down
 * in one job with per-expert readiness and the last expert's down rows in short items
 * (src/sched/moe_cpu.c; model A's expert FFN 256 is a whole Q8_K block, which that path
 * needs). Model A (d 256, 16 experts, top-4), Q4_K_M, F32 KV cache, every prompt
 * of the sidecar; max |Δ| <= 0.06 and cosine >= 0.999 on the stored rows, top-1 >= 90 %.
 */
#include "harness.h"
#include "model_check.h"

#define Q_MAX_ABS 0.06
#define Q_MIN_COS 0.999
#define Q_TOP1 0.90

static void run(const char *golden, int n_tail) {
    char path[8192], name[256];
    struct hmoe_err err = {0};
    snprintf(path, sizeof path, "%s%s.json", t_shared("fixtures/golden/"), golden);
    struct hmoe_json *side = hmoe_json_parse_file(path, &err);
    if (!side) {
        t_check(0, golden, "cannot read sidecar: %s", err.msg);
        return;
    }
    snprintf(path, sizeof path, "%s%s", t_shared("fixtures/models/"), hmoe_json_get_str(side, "model_file", "?"));
    struct hmoe_model *m = NULL;
    struct hmoe_ctx *c = NULL;
    struct hmoe_ctx_params cp;
    hmoe_ctx_params_default(&cp);
    cp.n_ctx = 512;
    cp.type_k = cp.type_v = HMOE_TYPE_F32;
    cp.n_threads = 2;
    enum hmoe_status st = hmoe_model_load(path, NULL, &m, &err);
    if (!st) st = hmoe_ctx_init(m, &cp, &c, &err);
    snprintf(name, sizeof name, "%s load, 2-thread context", golden);
    t_check(!st, name, "%s", err.msg);
    const struct hmoe_json *prompts = st ? NULL : hmoe_json_get(side, "prompts");
    for (size_t pi = 0; prompts && pi < prompts->n; pi++) {
        const struct hmoe_json *pr = prompts->items[pi];
        const int V = m->cfg.n_vocab;
        int n_pos, n_rows = (int)hmoe_json_get_num(pr, "n_rows", 0);
        int32_t *ids = mc_ids(hmoe_json_get(pr, "ids"), &n_pos);
        snprintf(path, sizeof path, "%s%s", t_shared("fixtures/golden/"), hmoe_json_get_str(pr, "logits_file", "?"));
        float *ref = mc_read_f32(path, (size_t)n_rows * V);
        float *dec = malloc((size_t)n_pos * V * sizeof(float));
        hmoe_ctx_reset(c);
        st = ref && dec ? HMOE_OK : HMOE_ERR_IO;
        for (int i = 0; i < n_pos && !st; i++)
            st = hmoe_ctx_decode(c, &ids[i], 1, i, HMOE_LOGITS_LAST, dec + (size_t)i * V, &err);
        double worst_abs = 0, worst_cos = 1;
        int worst_pos = -1, top1 = 0;
        const struct hmoe_json *lp = hmoe_json_get(pr, "logits_positions");
        const struct hmoe_json *t5 = hmoe_json_get(pr, "top5_ids");
        for (size_t r = 0; !st && r < lp->n; r++) {
            const int pos = (int)lp->items[r]->num;
            struct mc_row s = mc_compare_row(dec + (size_t)pos * V, ref + r * V, V);
            if (s.max_abs > worst_abs || !(s.cos >= worst_cos)) worst_pos = pos;
            if (s.max_abs > worst_abs) worst_abs = s.max_abs;
            if (!(s.cos >= worst_cos)) worst_cos = s.cos;
        }
        for (int p = 0; !st && p < n_pos; p++) top1 += mc_argmax(dec + (size_t)p * V, V) == (int)t5->items[p]->items[0]->num;
        snprintf(name, sizeof name, "%s %s: 2-thread decode (down tail %d) vs golden (max |d| %.3g)", golden,
                 hmoe_json_get_str(pr, "name", "?"), n_tail, worst_abs);
        t_check(!st && worst_abs <= Q_MAX_ABS && worst_cos >= Q_MIN_COS && top1 >= Q_TOP1 * n_pos, name,
                "%s worst row at position %d: max |d| %.3g (limit %.3g), cosine %.7f; top-1 %d of %d",
                st ? (ref ? err.msg : "cannot read the golden .f32 file") : "", worst_pos, worst_abs, Q_MAX_ABS,
                worst_cos, top1, n_pos);
        free(ids);
        free(ref);
        free(dec);
    }
    hmoe_ctx_free(c);
    hmoe_model_free(m);
    hmoe_json_free(side);
}

int main(void) {
    /* The default tail (the last expert's down rows in 4 items); test_sched_moe_subset runs a
     * finer one (16 items) on 2 threads against this layout's bits. */
    run("tiny-qwen3moe-A-Q4_K_M", 4);
    return t_summary();
}
