/* gpu_test_forward.c — the whole forward pass on the GPU (src/model/gpu_forward.c) and in hybrid
 * CPU+GPU mode (src/sched/hybrid*.c) against llama.cpp's goldens (fixtures/README.md §4), for the
 * three shipped golden models and all 6 prompts, F16 KV cache (the GPU cache types are f16/q8_0).
 * Thresholds from fixtures §5.4: quantized models rel RMS <= 3 % over the stored rows, per-row
 * cosine >= 0.999, max |d| <= 0.06, top-1 >= 90 % of positions; the F32 model with an F16 KV
 * cache "up to ~1e-2" max |d| (llama.cpp's own F16-KV run differs by 7.6e-3), top-1 >= 90 %.
 * Per model: one prefill (grouped-GEMM path, logits of every position), token-by-token decode
 * (the captured graph), 7-token micro-batches (matvec path), prefill then decode, GPU vs CPU
 * (CPU backend, F16 KV, same thresholds against each other), and hybrid mode with experts in RAM
 * (--cpu-moe; --n-cpu-moe 2; an automatic VRAM budget small enough to leave experts in RAM with
 * cache slots) for decode and for both hybrid prefill paths (CPU threads, streamed chunks), the
 * latter also with --moe-miss transfer, --prefetch on and both (and that those paths ran), and the
 * prefill split between CPU threads and streaming (forced CPU shares 0 / 0.3 / 1.0 and the planned
 * default: logits vs golden, every uncached expert prefetched, skipped, on the CPU or streamed; the
 * default gives CPU threads a part and streamed + CPU + skipped experts cover the uncached ones).
 * HMOE_TEST_HYBRID_CACHE=1 runs only the expert-cache modes of the Q4_K_M model (compute-sanitizer),
 * HMOE_TEST_HYBRID_DECODE=1 only its --cpu-moe decode cases (CPU team sizes, handoff statistics),
 * HMOE_TEST_XFER_ONLY=1 only its transfer / prefetch cases (HMOE_TEST_HYB_BUDGET=N: that budget, no search).
 * Without a CUDA device it prints one "skipped" line and counts nothing.
 */
#include "harness.h"
#include "hmoe/cuda.h"
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

#define F16KV_MAX_ABS 1e-2 /* §5.4: F32 model, F16 KV cache */
#define Q_MAX_ABS 0.06
#define Q_MIN_COS 0.999
#define Q_REL_RMS 0.03
#define Q_TOP1 0.90

struct golden {
    struct hmoe_json *side;
    const struct hmoe_json *prompts;
    char model_path[8192];
};

/* Compare stored rows of one prompt: max |d|, min cosine, rel RMS, top-1 of every position. */
struct cmp {
    double worst_abs, worst_cos, sq_diff, sq_ref;
    int top1_ok, top1_n, worst_pos;
};

static void cmp_rows(struct cmp *c, const struct hmoe_json *pr, const float *ours, const float *ref, int V, int n_pos) {
    const struct hmoe_json *lp = hmoe_json_get(pr, "logits_positions");
    for (size_t r = 0; r < lp->n; r++) {
        int pos = (int)lp->items[r]->num;
        if (pos >= n_pos) continue;
        struct mc_row s = mc_compare_row(ours + (size_t)pos * V, ref + r * V, V);
        c->sq_diff += s.sq_diff;
        c->sq_ref += s.sq_ref;
        if (s.max_abs > c->worst_abs || !(s.cos >= c->worst_cos)) c->worst_pos = pos;
        if (s.max_abs > c->worst_abs) c->worst_abs = s.max_abs;
        if (!(s.cos >= c->worst_cos)) c->worst_cos = s.cos;
    }
    const struct hmoe_json *t5 = hmoe_json_get(pr, "top5_ids");
    for (int p = 0; p < n_pos; p++) {
        c->top1_n++;
        if (mc_argmax(ours + (size_t)p * V, V) == (int)t5->items[p]->items[0]->num) c->top1_ok++;
    }
}

static bool cmp_ok(const struct kind *k, const struct cmp *c, char *why, size_t cap) {
    const double rr = c->sq_ref > 0 ? sqrt(c->sq_diff / c->sq_ref) : 1.0;
    const double top1 = c->top1_n ? (double)c->top1_ok / c->top1_n : 0.0;
    snprintf(why, cap, "max |d| %.3g (limit %.3g, at position %d), min cosine %.6f, rel RMS %.4f, top-1 %d/%d",
             c->worst_abs, k->f32 ? F16KV_MAX_ABS : Q_MAX_ABS, c->worst_pos, c->worst_cos, rr, c->top1_ok, c->top1_n);
    if (k->f32) return c->worst_abs <= F16KV_MAX_ABS && top1 >= Q_TOP1;
    return c->worst_abs <= Q_MAX_ABS && c->worst_cos >= Q_MIN_COS && rr <= Q_REL_RMS && top1 >= Q_TOP1;
}

/* How a context runs: backend and placement settings. */
struct mode {
    const char *label;
    enum hmoe_gpu_mode gpu;
    int n_ubatch;
    bool cpu_moe;
    int n_cpu_moe;
    int64_t budget_mib;
    int stream_min;
    const char *want_backend; /* checked after init */
    const char *moe_miss;     /* NULL: the default (auto) */
    bool prefetch;
};
static int ctx_threads = 2;          /* CPU threads of the contexts opened next */
static double ctx_cpu_share = 0;     /* their prefill_cpu_share (0: planned, the default; < 0: none) */
static int ctx_stream_chunk = 0;     /* their stream_chunk_experts (0: the default) */

static struct hmoe_ctx *open_ctx(const struct hmoe_model *m, const struct mode *md, struct hmoe_err *err) {
    struct hmoe_ctx_params cp;
    hmoe_ctx_params_default(&cp);
    cp.n_ctx = 512;
    cp.type_k = cp.type_v = HMOE_TYPE_F16;
    cp.n_threads = ctx_threads;
    cp.n_ubatch = md->n_ubatch;
    cp.gpu = md->gpu;
    cp.sched.cpu_moe = md->cpu_moe;
    cp.sched.n_cpu_moe = md->n_cpu_moe;
    cp.sched.vram_budget_mib = md->budget_mib;
    cp.sched.stream_min_tokens = md->stream_min;
    cp.sched.no_profile = true;
    if (md->moe_miss && !hmoe_moe_miss_from_name(md->moe_miss, &cp.sched.moe_miss)) {
        HMOE_RAISE(err, HMOE_ERR_ARG, "bad moe_miss %s", md->moe_miss);
        return NULL;
    }
    cp.sched.prefetch = md->prefetch;
    cp.sched.prefill_cpu_share = ctx_cpu_share;
    cp.sched.stream_chunk_experts = ctx_stream_chunk;
    struct hmoe_ctx *c = NULL;
    if (hmoe_ctx_init(m, &cp, &c, err)) return NULL;
    return c;
}

/* Run every prompt through one mode: prefill (all logits) and, unless prefill_only, token-by-token
 * decode; both compared with the goldens. */
static void run_mode(const struct kind *k, struct golden *gd, const struct hmoe_model *m, const struct mode *md,
                     bool decode_too) {
    char name[512], why[512];
    struct hmoe_err err = {0};
    struct hmoe_ctx *c = open_ctx(m, md, &err);
    snprintf(name, sizeof name, "%s [%s] context", k->name, md->label);
    if (!c || (md->want_backend && strcmp(hmoe_ctx_backend(c), md->want_backend))) {
        t_check(0, name, "%s", c ? hmoe_ctx_backend(c) : err.msg);
        hmoe_ctx_free(c);
        return;
    }
    const int V = m->cfg.n_vocab;
    struct cmp pf = {.worst_cos = 1}, dc = {.worst_cos = 1};
    bool ok_run = true;
    for (size_t pi = 0; pi < gd->prompts->n && ok_run; pi++) {
        const struct hmoe_json *pr = gd->prompts->items[pi];
        int n_pos, n_rows = (int)hmoe_json_get_num(pr, "n_rows", 0);
        int32_t *ids = mc_ids(hmoe_json_get(pr, "ids"), &n_pos);
        char path[8192];
        snprintf(path, sizeof path, "%s%s", t_shared("fixtures/golden/"), hmoe_json_get_str(pr, "logits_file", "?"));
        float *ref = mc_read_f32(path, (size_t)n_rows * V);
        float *ours = malloc((size_t)n_pos * V * sizeof(float));
        if (!ref) {
            t_check(0, name, "cannot read %s", path);
            ok_run = false;
        }
        hmoe_ctx_reset(c);
        if (ok_run && hmoe_ctx_decode(c, ids, n_pos, 0, HMOE_LOGITS_ALL, ours, &err)) {
            snprintf(name, sizeof name, "%s [%s] prefill", k->name, md->label);
            t_check(0, name, "%s", err.msg);
            ok_run = false;
        }
        if (ok_run) cmp_rows(&pf, pr, ours, ref, V, n_pos);
        if (ok_run && decode_too) {
            hmoe_ctx_reset(c);
            for (int i = 0; i < n_pos && ok_run; i++)
                if (hmoe_ctx_decode(c, &ids[i], 1, i, HMOE_LOGITS_LAST, ours + (size_t)i * V, &err)) {
                    snprintf(name, sizeof name, "%s [%s] decode", k->name, md->label);
                    t_check(0, name, "token %d: %s", i, err.msg);
                    ok_run = false;
                }
            if (ok_run) cmp_rows(&dc, pr, ours, ref, V, n_pos);
        }
        free(ids);
        free(ref);
        free(ours);
    }
    if (ok_run) {
        snprintf(name, sizeof name, "%s [%s] prefill logits vs golden (6 prompts)", k->name, md->label);
        t_check(cmp_ok(k, &pf, why, sizeof why), name, "%s", why);
        if (decode_too) {
            snprintf(name, sizeof name, "%s [%s] token-by-token decode vs golden", k->name, md->label);
            t_check(cmp_ok(k, &dc, why, sizeof why), name, "%s", why);
        }
    }
    hmoe_ctx_free(c);
}

/* GPU vs CPU on the longest prompt (both F16 KV), and prefill of n-1 tokens then one decode
 * against the full prefill's last row (both must match the golden at that position). */
/* Index of the golden prompt with the most tokens. */
static size_t longest_prompt(const struct golden *gd) {
    size_t best = 0;
    int best_n = 0;
    for (size_t pi = 0; pi < gd->prompts->n; pi++) {
        int n;
        int32_t *ids = mc_ids(hmoe_json_get(gd->prompts->items[pi], "ids"), &n);
        if (n > best_n) best_n = n, best = pi;
        free(ids);
    }
    return best;
}

static void run_cross(const struct kind *k, struct golden *gd, const struct hmoe_model *m) {
    char name[512], why[512];
    struct hmoe_err err = {0};
    const struct mode mg = {"gpu", HMOE_GPU_ON, 512, false, 0, 0, 0, "cuda", NULL, false};
    const struct mode mc = {"cpu", HMOE_GPU_OFF, 512, false, 0, 0, 0, "cpu", NULL, false};
    struct hmoe_ctx *cg = open_ctx(m, &mg, &err), *cc = cg ? open_ctx(m, &mc, &err) : NULL;
    snprintf(name, sizeof name, "%s GPU vs CPU logits (prefill, all positions)", k->name);
    if (!cg || !cc) {
        t_check(0, name, "%s", err.msg);
        hmoe_ctx_free(cg);
        hmoe_ctx_free(cc);
        return;
    }
    const int V = m->cfg.n_vocab;
    const size_t best = longest_prompt(gd);
    int n;
    int32_t *ids = mc_ids(hmoe_json_get(gd->prompts->items[best], "ids"), &n);
    float *a = malloc((size_t)n * V * 4), *b = malloc((size_t)n * V * 4), *last = malloc((size_t)V * 4);
    bool ok = !hmoe_ctx_decode(cg, ids, n, 0, HMOE_LOGITS_ALL, a, &err) &&
              !hmoe_ctx_decode(cc, ids, n, 0, HMOE_LOGITS_ALL, b, &err);
    if (ok) {
        struct cmp c = {.worst_cos = 1};
        for (int p = 0; p < n; p++) {
            struct mc_row s = mc_compare_row(a + (size_t)p * V, b + (size_t)p * V, V);
            c.sq_diff += s.sq_diff;
            c.sq_ref += s.sq_ref;
            if (s.max_abs > c.worst_abs) c.worst_abs = s.max_abs, c.worst_pos = p;
            if (!(s.cos >= c.worst_cos)) c.worst_cos = s.cos;
            c.top1_n++;
            c.top1_ok += mc_argmax(a + (size_t)p * V, V) == mc_argmax(b + (size_t)p * V, V);
        }
        t_check(cmp_ok(k, &c, why, sizeof why), name, "%s", why);
    } else {
        t_check(0, name, "%s", err.msg);
    }
    /* prefill n-1, decode the last token: same row as the one-shot prefill */
    snprintf(name, sizeof name, "%s GPU prefill %d then decode 1 == one prefill (last row)", k->name, n - 1);
    hmoe_ctx_reset(cg);
    ok = ok && !hmoe_ctx_decode(cg, ids, n - 1, 0, HMOE_LOGITS_NONE, NULL, &err) &&
         !hmoe_ctx_decode(cg, ids + n - 1, 1, n - 1, HMOE_LOGITS_LAST, last, &err);
    if (ok) {
        struct mc_row s = mc_compare_row(last, a + (size_t)(n - 1) * V, V);
        const double lim = k->f32 ? F16KV_MAX_ABS : Q_MAX_ABS;
        t_check(s.max_abs <= lim && s.cos >= Q_MIN_COS, name, "max |d| %.3g (limit %.3g), cosine %.6f", s.max_abs, lim,
                s.cos);
    } else {
        t_check(0, name, "%s", err.msg);
    }
    free(ids), free(a), free(b), free(last);
    hmoe_ctx_free(cg);
    hmoe_ctx_free(cc);
}

/* 0: no context at this budget (the fixed part does not fit), 1: hybrid, 2: everything on the GPU. */
static int probe_budget(const struct hmoe_model *m, int64_t b) {
    struct hmoe_err err = {0};
    const struct mode md = {"probe", HMOE_GPU_ON, 512, false, 0, b, 0, NULL, NULL, false};
    struct hmoe_ctx *c = open_ctx(m, &md, &err);
    if (!c) return 0;
    int r = strcmp(hmoe_ctx_backend(c), "cuda+cpu") == 0 ? 1 : 2;
    if (r == 1 && strstr(hmoe_ctx_report(c), "no room for the prefill streaming buffer")) r = 3;
    hmoe_ctx_free(c);
    return r;
}

/* A budget (MiB) halfway between "the fixed part just fits" and "every expert fits": the automatic
 * placement then keeps the experts in RAM with about half of them in VRAM cache slots; moved up
 * where the prefill streaming buffer does not fit there yet (the split tests need it), while
 * some experts stay in RAM. probe_budget: 0 does not open, 1 hybrid, 2 all GPU, 3 hybrid without
 * the streaming buffer. */
static int64_t hybrid_budget(const struct hmoe_model *m) {
    int64_t lo = 1, hi = 1 << 16; /* probe(lo) == 0 assumed, probe(hi) == 2 */
    if (probe_budget(m, hi) != 2) return 0;
    int64_t a = lo, b = hi; /* smallest budget that opens at all */
    while (b - a > 1) {
        int64_t mid = (a + b) / 2;
        if (probe_budget(m, mid) == 0) a = mid;
        else b = mid; /* 1, 2 or 3: it opens */
    }
    const int64_t b_ok = b;
    a = b_ok, b = hi; /* smallest budget that holds every expert */
    while (b - a > 1) {
        int64_t mid = (a + b) / 2;
        if (probe_budget(m, mid) == 2) b = mid;
        else a = mid;
    }
    int64_t mid = b_ok + (b - b_ok) / 2;
    int r = probe_budget(m, mid);
    while (r == 3 && mid + 1 < b) r = probe_budget(m, ++mid);
    return r == 1 ? mid : 0;
}

/* The totals of the split by count from the report (hybrid.c): -1 each when the line is missing. */
struct count_totals {
    long long layers, n0, skip, cpu, pairs, after, dry, bad;
};
static struct count_totals count_totals(const char *rep) {
    struct count_totals t = {-1, -1, -1, -1, -1, -1, -1, -1};
    const char *at = strstr(rep, "prefill split by count: ");
    if (at && sscanf(at,
                     "prefill split by count: %lld layers; totals: %lld prefetched, %lld skipped (no tokens), %lld on "
                     "CPU threads (%lld pairs), %lld streamed after the router; copy engine dry at the decision in "
                     "%lld; lightest-first violations %lld",
                     &t.layers, &t.n0, &t.skip, &t.cpu, &t.pairs, &t.after, &t.dry, &t.bad) != 8)
        t.layers = -1;
    return t;
}

/* The expert cache is filled at load even without a routing profile, and a streamed prefill then
 * copies only experts that are not in it: with no CPU part (share 0), one micro-batch streams each
 * RAM layer's uncached experts once except those the split skips (no tokens), i.e. cached experts
 * are read from VRAM and the first prompt does not stream everything. */
static void check_preseeded(const struct kind *k, struct golden *gd, const struct hmoe_model *m, const struct mode *md) {
    char name[512];
    struct hmoe_err err = {0};
    ctx_cpu_share = -1; /* no CPU part; the CPU's part is checked by check_count_split */
    struct hmoe_ctx *c = open_ctx(m, md, &err);
    ctx_cpu_share = 0;
    snprintf(name, sizeof name, "%s [%s] cache filled at load (no profile)", k->name, md->label);
    if (!c) {
        t_check(0, name, "%s", err.msg);
        return;
    }
    struct hmoe_ctx_stats s0, s1;
    hmoe_ctx_get_stats(c, &s0);
    t_check(s0.ram_experts > 0 && s0.cached_experts > 0 && s0.cached_experts < s0.ram_experts, name,
            "%llu of %llu RAM-layer experts cached before the first token", (unsigned long long)s0.cached_experts,
            (unsigned long long)s0.ram_experts);
    const size_t best = longest_prompt(gd); /* a 1-token prompt is a decode step, which never streams */
    int n_pos;
    int32_t *ids = mc_ids(hmoe_json_get(gd->prompts->items[best], "ids"), &n_pos);
    const bool streams = strstr(hmoe_ctx_report(c), "prefill streams experts") != NULL;
    hmoe_ctx_reset_stats(c);
    enum hmoe_status st = ids ? hmoe_ctx_decode(c, ids, n_pos, 0, HMOE_LOGITS_NONE, NULL, &err) : HMOE_ERR_FORMAT;
    hmoe_ctx_get_stats(c, &s1);
    const struct count_totals t = count_totals(hmoe_ctx_report(c));
    snprintf(name, sizeof name, "%s [%s] first prefill streams only the uncached experts", k->name, md->label);
    if (st) t_check(0, name, "%s", ids ? err.msg : "no prompt ids");
    else if (!streams) t_check(s1.prefill_streamed_experts == 0, name, "no streaming buffer, yet %llu streamed",
                               (unsigned long long)s1.prefill_streamed_experts);
    else t_check(n_pos >= md->stream_min && t.layers > 0 && t.cpu == 0 &&
                     s1.prefill_streamed_experts + (uint64_t)t.skip == s0.ram_experts - s0.cached_experts,
                 name, "%d tokens: streamed %llu + skipped %lld experts, expected %llu (%llu RAM-layer experts, %llu "
                 "cached), CPU %lld", n_pos, (unsigned long long)s1.prefill_streamed_experts, t.skip,
                 (unsigned long long)(s0.ram_experts - s0.cached_experts), (unsigned long long)s0.ram_experts,
                 (unsigned long long)s0.cached_experts, t.cpu);
    free(ids);
    hmoe_ctx_free(c);
}

/* The prefill split (a forced CPU share set by the caller, 0 = none) on a
 * prompt of n_tok tokens (0: the longest): per RAM layer every uncached expert is in exactly one of
 * the prefetched first chunk, skipped (no tokens), the CPU's or streamed after the router; exactly
 * the prefetched and streamed ones were copied; the CPU took the lightest, and none with share 0;
 * with share 1.0 nothing streams after the router; a 2-token prompt (at most 2k experts with
 * tokens) skips experts. */
static void check_count_split(const struct kind *k, struct golden *gd, const struct hmoe_model *m,
                              const struct mode *md, double share, int n_tok) {
    char name[512];
    struct hmoe_err err = {0};
    char what[32] = "longest prompt";
    if (n_tok > 0) snprintf(what, sizeof what, "%d-token prompt", n_tok);
    snprintf(name, sizeof name, "%s [%s] split by count, CPU share %.1f, %s: every uncached expert "
             "prefetched, skipped, on the CPU or streamed; lightest on the CPU", k->name, md->label, share, what);
    struct hmoe_ctx *c = open_ctx(m, md, &err);
    if (!c) {
        t_check(0, name, "%s", err.msg);
        return;
    }
    struct hmoe_ctx_stats s0, s1;
    hmoe_ctx_get_stats(c, &s0);
    const int E = m->cfg.n_expert, kk = m->cfg.n_expert_used;
    const int n_ram = (int)(s0.ram_experts / (uint64_t)E);
    const long long nu = n_ram ? (long long)((s0.ram_experts - s0.cached_experts) / (uint64_t)n_ram) : 0;
    const size_t best = longest_prompt(gd);
    int n_pos;
    int32_t *ids = mc_ids(hmoe_json_get(gd->prompts->items[best], "ids"), &n_pos);
    if (ids && n_tok > 0 && n_tok < n_pos) n_pos = n_tok;
    hmoe_ctx_reset_stats(c);
    enum hmoe_status st = ids ? hmoe_ctx_decode(c, ids, n_pos, 0, HMOE_LOGITS_NONE, NULL, &err) : HMOE_ERR_FORMAT;
    hmoe_ctx_get_stats(c, &s1);
    const char *rep = hmoe_ctx_report(c);
    const struct count_totals t = count_totals(rep);
    const long long streamed = (long long)s1.prefill_streamed_experts;
    bool ok = n_ram > 0 && n_pos >= md->stream_min && t.layers == n_ram && t.n0 + t.skip + t.cpu + t.after == t.layers * nu &&
              streamed == t.n0 + t.after && t.bad == 0 && (n_tok > 0 || share == 0 || t.cpu > 0) && t.pairs >= t.cpu;
    if (share >= 1.0) ok = ok && t.after == 0;
    else ok = ok && t.cpu <= t.layers * lround(share * (double)nu);
    /* the first chunk is at most half the layer (rounded up): of the other half at most n k experts
     * have tokens */
    if ((long long)n_pos * kk < nu / 2) ok = ok && t.skip >= t.layers * (nu / 2 - (long long)n_pos * kk);
    if (st) t_check(0, name, "%s", ids ? err.msg : "no prompt ids");
    else t_check(ok, name, "%d tokens, %d RAM layers x %lld uncached: layers %lld, prefetched %lld, skipped %lld, CPU %lld "
                 "(%lld pairs), after %lld, streamed %lld, lightest-first violations %lld; report: %s",
                 n_pos, n_ram, nu, t.layers, t.n0, t.skip, t.cpu, t.pairs, t.after, streamed, t.bad, rep);
    free(ids);
    hmoe_ctx_free(c);
}

/* The default (no forced share) is the planned split: the report says so, and a first
 * streamed prefill already gives CPU threads some experts (the planner measures the CPU before it
 * plans), and streams the rest: streamed + CPU experts cover every uncached one. The logits of the
 * default are checked against the goldens by run_mode. */
static void check_default_split(const struct kind *k, struct golden *gd, const struct hmoe_model *m,
                                const struct mode *md) {
    char name[512];
    struct hmoe_err err = {0};
    snprintf(name, sizeof name, "%s [%s] default split: planned, CPU threads take part in the first prefill", k->name,
             md->label);
    struct hmoe_ctx *c = open_ctx(m, md, &err);
    if (!c) {
        t_check(0, name, "%s", err.msg);
        return;
    }
    struct hmoe_ctx_stats s0, s1;
    hmoe_ctx_get_stats(c, &s0);
    const int E = m->cfg.n_expert;
    const int n_ram = (int)(s0.ram_experts / (uint64_t)E);
    const uint64_t nu = s0.ram_experts - s0.cached_experts;
    const size_t best = longest_prompt(gd);
    int n_pos;
    int32_t *ids = mc_ids(hmoe_json_get(gd->prompts->items[best], "ids"), &n_pos);
    hmoe_ctx_reset_stats(c);
    enum hmoe_status st = ids ? hmoe_ctx_decode(c, ids, n_pos, 0, HMOE_LOGITS_NONE, NULL, &err) : HMOE_ERR_FORMAT;
    hmoe_ctx_get_stats(c, &s1);
    const char *rep = hmoe_ctx_report(c);
    const char *at = strstr(rep, "layers: per layer ");
    double cpu_per_layer = -1;
    if (at) sscanf(at, "layers: per layer %lf experts on CPU threads", &cpu_per_layer);
    /* the split also skips experts without tokens */
    const struct count_totals t = count_totals(rep);
    const double covered = (double)s1.prefill_streamed_experts + cpu_per_layer * n_ram + (t.layers > 0 ? (double)t.skip : 0);
    if (st) t_check(0, name, "%s", ids ? err.msg : "no prompt ids");
    else t_check(n_ram > 0 && n_pos >= md->stream_min && strstr(rep, "prefill split: adaptive (the default") &&
                     cpu_per_layer > 0 && fabs(covered - (double)nu) < 0.5 * n_ram,
                 name, "%d RAM layers, %llu uncached experts: streamed %llu, CPU %.2f per layer; report: %s", n_ram,
                 (unsigned long long)nu, (unsigned long long)s1.prefill_streamed_experts, cpu_per_layer, rep);
    free(ids);
    hmoe_ctx_free(c);
}

/* Logits of the split against the goldens and the split's accounting (check_count_split) for the
 * forced CPU shares 0 (no CPU part; experts without tokens still skipped), 0.3 and 1.0 (every
 * uncached expert after the first chunk on CPU threads), then the planned default (logits only;
 * check_default_split checks its accounting). */
static void run_split(const struct kind *k, struct golden *gd, const struct hmoe_model *m, const struct mode *md) {
    static const double shares[] = {-1.0, 0.3, 1.0, 0.0}; /* none, forced, forced, planned */
    for (size_t i = 0; i < HMOE_ARRAY_LEN(shares); i++) {
        char label[256];
        if (shares[i] != 0) snprintf(label, sizeof label, "%s, prefill CPU share %.1f", md->label, HMOE_MAX(shares[i], 0.0));
        else snprintf(label, sizeof label, "%s, prefill CPU share planned (measured)", md->label);
        struct mode sm = *md;
        sm.label = label;
        ctx_cpu_share = shares[i];
        run_mode(k, gd, m, &sm, false);
        if (shares[i] != 0) {
            check_count_split(k, gd, m, &sm, HMOE_MAX(shares[i], 0.0), 0);
            check_count_split(k, gd, m, &sm, HMOE_MAX(shares[i], 0.0), 2);
        }
        ctx_cpu_share = 0;
    }
}

/* The decode-time PCIe paths really ran: with --moe-miss transfer the GPU computed missed experts
 * (and the CPU none), with --prefetch on the next-layer predictions were made and scored. Decode of
 * the longest prompt, token by token. */
static void check_decode_paths(const struct kind *k, struct golden *gd, const struct hmoe_model *m,
                               const struct mode *md) {
    char name[512];
    struct hmoe_err err = {0};
    struct hmoe_ctx *c = open_ctx(m, md, &err);
    snprintf(name, sizeof name, "%s [%s] %s", k->name, md->label,
             md->prefetch ? "predictions made and scored" : "misses computed by the GPU, none by the CPU");
    if (!c) {
        t_check(0, name, "%s", err.msg);
        return;
    }
    const size_t best = longest_prompt(gd);
    int n;
    int32_t *ids = mc_ids(hmoe_json_get(gd->prompts->items[best], "ids"), &n);
    float *lg = malloc((size_t)m->cfg.n_vocab * sizeof *lg);
    hmoe_ctx_reset_stats(c);
    bool ok = ids && lg;
    for (int i = 0; i < n && ok; i++) ok = !hmoe_ctx_decode(c, &ids[i], 1, i, HMOE_LOGITS_LAST, lg, &err);
    struct hmoe_ctx_stats s;
    hmoe_ctx_get_stats(c, &s);
    if (!ok) t_check(0, name, "%s", err.msg);
    else if (md->prefetch)
        t_check(s.prefetch_pred > 0 && s.prefetch_correct <= s.prefetch_pred, name,
                "%llu predictions, %llu confirmed, %llu copies over %d tokens", (unsigned long long)s.prefetch_pred,
                (unsigned long long)s.prefetch_correct, (unsigned long long)s.prefetch_fills, n);
    else
        t_check(s.xfer_experts > 0 && s.cpu_expert_ms_per_token == 0.0, name,
                "%llu experts transferred, CPU expert time %.3f ms/token over %d tokens (hit rate %.2f)",
                (unsigned long long)s.xfer_experts, s.cpu_expert_ms_per_token, n, s.cache_hit_rate);
    free(ids);
    free(lg);
    hmoe_ctx_free(c);
}

/* Hybrid decode's CPU half (src/sched/hybrid_cpu.c) on the real handoff: every expert in RAM
 * (--cpu-moe), so every layer of every token goes GPU -> CPU -> GPU; with 5 threads (work items
 * split unevenly, several per expert) against the goldens. Then the statistics of that handoff: the CPU
 * expert phase and the handoff latencies in -v (hybrid.c) are present, finite and below the
 * 10 s give-up time (a missing stamp or a bad clock calibration shows up as 0 or nonsense). */
static void check_hybrid_decode(const struct kind *k, struct golden *gd, const struct hmoe_model *m) {
    const struct mode items5 = {"hybrid --cpu-moe, 5 CPU threads", HMOE_GPU_ON, 512, true, 0, 0, 100000, "cuda+cpu",
                                NULL, false};
    ctx_threads = 5;
    run_mode(k, gd, m, &items5, true);
    char name[512];
    struct hmoe_err err = {0};
    snprintf(name, sizeof name, "%s [hybrid --cpu-moe] CPU expert phase and handoff latency reported", k->name);
    struct hmoe_ctx *c = open_ctx(m, &items5, &err);
    ctx_threads = 2;
    if (!c) {
        t_check(0, name, "%s", err.msg);
        return;
    }
    const size_t best = longest_prompt(gd);
    int n;
    int32_t *ids = mc_ids(hmoe_json_get(gd->prompts->items[best], "ids"), &n);
    float *lg = malloc((size_t)m->cfg.n_vocab * sizeof *lg);
    bool ok = ids && lg;
    hmoe_ctx_reset_stats(c);
    for (int i = 0; i < n && ok; i++) ok = !hmoe_ctx_decode(c, &ids[i], 1, i, HMOE_LOGITS_LAST, lg, &err);
    if (!ok) {
        t_check(0, name, "%s", ids && lg ? err.msg : "out of memory");
    } else {
        const char *rep = hmoe_ctx_report(c);
        const char *a = strstr(rep, "CPU expert phase: "), *b = strstr(rep, "GPU publish -> CPU sees ");
        const char *r = strstr(rep, "sum of both ");
        double gbps = -1, in_us = -1e9, rt_us = -1e9;
        if (a) sscanf(a + strlen("CPU expert phase: "), "%lf", &gbps);
        if (b) sscanf(b + strlen("GPU publish -> CPU sees "), "%lf", &in_us);
        if (r) sscanf(r + strlen("sum of both "), "%lf", &rt_us);
        t_check(gbps > 0 && gbps < 1e4 && fabs(in_us) < 1e7 && rt_us > -1e3 && rt_us < 1e7, name,
                "phase %.3g GB/s, publish -> CPU %.3g us, round trip %.3g us; report:\n%s", gbps, in_us, rt_us, rep);
    }
    free(ids);
    free(lg);
    hmoe_ctx_free(c);
}

/* The decode-time PCIe paths at the expert-cache budget b: --moe-miss transfer, --prefetch on and
 * both, each with logits vs golden (prefill and token-by-token decode), and that they really ran. */
static void run_xfer_modes(const struct kind *k, struct golden *gd, const struct hmoe_model *m, int64_t b,
                           const char *label) {
    char l2[160], l3[160], l4[200];
    snprintf(l2, sizeof l2, "%s, --moe-miss transfer", label);
    snprintf(l3, sizeof l3, "%s, --prefetch on", label);
    snprintf(l4, sizeof l4, "%s, --moe-miss transfer --prefetch on", label);
    const struct mode xfer = {l2, HMOE_GPU_ON, 512, false, 0, b, 1, "cuda+cpu", "transfer", false};
    const struct mode pf = {l3, HMOE_GPU_ON, 512, false, 0, b, 1, "cuda+cpu", NULL, true};
    const struct mode both = {l4, HMOE_GPU_ON, 512, false, 0, b, 1, "cuda+cpu", "transfer", true};
    run_mode(k, gd, m, &xfer, true);
    check_decode_paths(k, gd, m, &xfer);
    run_mode(k, gd, m, &pf, true);
    check_decode_paths(k, gd, m, &pf);
    run_mode(k, gd, m, &both, true);
    check_decode_paths(k, gd, m, &both);
}

static void run_kind(const struct kind *k) {
    struct hmoe_err err = {0};
    struct golden gd = {0};
    char path[8192];
    snprintf(path, sizeof path, "%s%s.json", t_shared("fixtures/golden/"), k->name);
    gd.side = hmoe_json_parse_file(path, &err);
    if (!gd.side) {
        t_check(0, k->name, "cannot read sidecar: %s", err.msg);
        return;
    }
    gd.prompts = hmoe_json_get(gd.side, "prompts");
    snprintf(gd.model_path, sizeof gd.model_path, "%s%s", t_shared("fixtures/models/"),
             hmoe_json_get_str(gd.side, "model_file", "?"));
    struct hmoe_model *m = NULL;
    if (hmoe_model_load(gd.model_path, NULL, &m, &err)) {
        t_check(0, k->name, "load: %s", err.msg);
        hmoe_json_free(gd.side);
        return;
    }
    const struct mode all_gpu = {"gpu", HMOE_GPU_ON, 512, false, 0, 0, 0, "cuda", NULL, false};
    const struct mode ub7 = {"gpu, 7-token micro-batches", HMOE_GPU_ON, 7, false, 0, 0, 0, "cuda", NULL, false};
    const bool quick = getenv("HMOE_TEST_QUICK") != NULL; /* compute-sanitizer runs: one path each */
    const bool xfer_only = getenv("HMOE_TEST_XFER_ONLY") != NULL; /* sanitizer: transfer, prefetch */
    const bool hyb_only = xfer_only || getenv("HMOE_TEST_HYBRID_CACHE") != NULL; /* sanitizer: cache, transfer, prefetch */
    if (getenv("HMOE_TEST_HYBRID_DECODE")) { /* sanitizer: the decode handoff alone */
        check_hybrid_decode(k, &gd, m);
        hmoe_model_free(m);
        hmoe_json_free(gd.side);
        return;
    }
    if (!hyb_only) {
        run_mode(k, &gd, m, &all_gpu, true);
        run_mode(k, &gd, m, &ub7, false);
    }
    if (!quick && !hyb_only) run_cross(k, &gd, m);
    if (quick && !k->f32) {
        const struct mode ncmoe = {"hybrid --n-cpu-moe 2, streamed prefill", HMOE_GPU_ON, 512, false, 2, 0, 1,
                                   "cuda+cpu", NULL, false};
        run_mode(k, &gd, m, &ncmoe, true);
    } else if (!k->f32) {
        const struct mode cpumoe = {"hybrid --cpu-moe, CPU prefill", HMOE_GPU_ON, 512, true, 0, 0, 100000, "cuda+cpu", NULL, false};
        const struct mode ncmoe = {"hybrid --n-cpu-moe 2, streamed prefill", HMOE_GPU_ON, 512, false, 2, 0, 1,
                                   "cuda+cpu", NULL, false};
        if (!hyb_only) {
            run_mode(k, &gd, m, &cpumoe, true);
            check_hybrid_decode(k, &gd, m);
            run_mode(k, &gd, m, &ncmoe, true);
            /* the tiny models have 16 experts: 4-expert chunks make a layer stream in four steps, the
             * shape a small --vram-budget with a large -ub gets (gpu_init.c halves the chunk to fit) */
            ctx_stream_chunk = 4;
            const struct mode ncmoe4 = {"hybrid --n-cpu-moe 2, streamed prefill in 4-expert chunks", HMOE_GPU_ON, 512,
                                        false, 2, 0, 1, "cuda+cpu", NULL, false};
            run_mode(k, &gd, m, &ncmoe4, true);
            run_split(k, &gd, m, &ncmoe4); /* several chunks with the CPU's part taken off the end */
            ctx_stream_chunk = 0;
            run_split(k, &gd, m, &ncmoe);
            check_default_split(k, &gd, m, &ncmoe); /* logits of the default: run_mode(ncmoe) above */
            /* a share outside 0..1 is refused with a message */
            ctx_cpu_share = 1.5;
            struct hmoe_err e1 = {0};
            struct hmoe_ctx *cb = open_ctx(m, &ncmoe, &e1);
            ctx_cpu_share = 0;
            t_check(!cb && strstr(e1.msg, "prefill CPU share 1.5"), "prefill CPU share 1.5 refused", "%s",
                    cb ? "opened (expected a refusal)" : e1.msg);
            hmoe_ctx_free(cb);
        }
        /* HMOE_TEST_HYB_BUDGET=N skips the search (compute-sanitizer runs: N from a plain run's label) */
        const int64_t b = getenv("HMOE_TEST_HYB_BUDGET") ? atoll(getenv("HMOE_TEST_HYB_BUDGET")) : hybrid_budget(m);
        char label[128];
        snprintf(label, sizeof label, "hybrid, VRAM budget %lld MiB (expert cache)", (long long)b);
        const struct mode cache = {label, HMOE_GPU_ON, 512, false, 0, b, 1, "cuda+cpu", NULL, false};
        if (b > 0 && xfer_only) {
            run_xfer_modes(k, &gd, m, b, label);
        } else if (b > 0) {
            run_mode(k, &gd, m, &cache, true);
            check_preseeded(k, &gd, m, &cache);
            run_split(k, &gd, m, &cache); /* cached group + streamed chunks + CPU part in one layer */
            run_xfer_modes(k, &gd, m, b, label);
        }
        else t_check(0, label, "no budget between 'everything fits' and 'attention does not fit' found");
    } else if (!quick) {
        /* F32 experts: no cache slots can hold them (the cache kernels need quantized types), but
         * --cpu-moe layers have none, so they run: decode misses on CPU threads, prefill on CPU
         * threads or streamed to the GPU GEMM (which takes F32 like the all-GPU path). */
        const struct mode cpumoe = {"hybrid --cpu-moe (F32 experts), CPU prefill", HMOE_GPU_ON, 512, true, 0, 0, 100000,
                                    "cuda+cpu", NULL, false};
        const struct mode streamed = {"hybrid --cpu-moe (F32 experts), streamed prefill", HMOE_GPU_ON, 512, true, 0, 0,
                                      1, "cuda+cpu", NULL, false};
        run_mode(k, &gd, m, &cpumoe, true);
        run_mode(k, &gd, m, &streamed, true);
        run_split(k, &gd, m, &streamed); /* F32 experts: the CPU part takes f32 rows */
    }
    hmoe_model_free(m);
    hmoe_json_free(gd.side);
}

int main(void) {
    if (!hmoe_cuda_available()) {
        printf("gpu_test_forward ... skipped: no CUDA device\n");
        return t_summary();
    }
    for (size_t i = 0; i < HMOE_ARRAY_LEN(kinds); i++)
        if (!(getenv("HMOE_TEST_QUICK") || getenv("HMOE_TEST_HYBRID_CACHE") || getenv("HMOE_TEST_HYBRID_DECODE") ||
              getenv("HMOE_TEST_XFER_ONLY")) ||
            i == 1)
            run_kind(&kinds[i]);
    return t_summary();
}
