/* gpu_test_vram.c — the VRAM budget as the device counts it, and running out of device memory
 * (gpu_init.c plan, cuda_mem.cu measurement and fault hook), on the Q4_K_M golden model:
 *  - a budget below the fixed part (context, cuBLAS, reserve, attention, KV, buffers) is refused
 *    with its numbers and the flag to change; a budget past what the card can give is planned at
 *    what it can give, with a warning;
 *  - all-GPU and hybrid (experts in RAM with cache slots): the plan fits the budget, the process's
 *    measured peak on the device (context included) stays within the budget after a prefill and
 *    a few decoded tokens;
 *  - out of memory at every device allocation in turn (hmoe_cuda_fail_alloc_at: the load, the
 *    cuBLAS workspace, the expert cache, the decode graph's instantiation): each is an error that
 *    names --vram-budget, never a crash, and the same context opens and runs afterwards;
 *  - the MTP block of a qwen35moe file (nextn tensors) costs no VRAM: the file without it plans
 *    and allocates the same bytes and gives the same logits.
 * Without a CUDA device it prints one "skipped" line and counts nothing.
 */
#include <unistd.h>

#include "harness.h"
#include "hmoe/cuda.h"
#include "hmoe/synth.h"
#include "model_check.h"

#define MiB 1048576.0

enum { N_PROMPT = 40, N_DECODE = 3 };

static struct hmoe_ctx *open_ctx(const struct hmoe_model *m, int64_t budget_mib, int n_ctx, int n_ub,
                                 struct hmoe_err *err) {
    struct hmoe_ctx_params cp;
    hmoe_ctx_params_default(&cp);
    cp.n_ctx = n_ctx;
    cp.type_k = cp.type_v = HMOE_TYPE_F16;
    cp.n_threads = 2;
    cp.n_ubatch = n_ub;
    cp.gpu = HMOE_GPU_ON;
    cp.sched.vram_budget_mib = budget_mib;
    cp.sched.no_profile = true;
    cp.sched.moe_miss = HMOE_MOE_MISS_CPU; /* no transfer-rate measurement at each open */
    struct hmoe_ctx *c = NULL;
    if (hmoe_ctx_init(m, &cp, &c, err)) return NULL;
    return c;
}

/* Open, prefill N_PROMPT tokens (the grouped-GEMM path at n_ub 512), decode N_DECODE tokens (the
 * decode graph is captured at the first). Returns the stage that failed (0 = none: 1 open,
 * 2 prefill, 3 decode) and the last logits in `last` (V floats). */
static int workload(const struct hmoe_model *m, int64_t budget, float *last, struct hmoe_ctx_stats *cs,
                    struct hmoe_err *err) {
    struct hmoe_ctx *c = open_ctx(m, budget, 512, 512, err);
    if (!c) return 1;
    int32_t ids[N_PROMPT];
    for (int i = 0; i < N_PROMPT; i++) ids[i] = (int32_t)((i * 7919 + 13) % m->cfg.n_vocab);
    int stage = 0;
    if (hmoe_ctx_decode(c, ids, N_PROMPT, 0, HMOE_LOGITS_LAST, last, err)) stage = 2;
    for (int t = 0; !stage && t < N_DECODE; t++) {
        const int32_t id = mc_argmax(last, m->cfg.n_vocab);
        if (hmoe_ctx_decode(c, &id, 1, N_PROMPT + t, HMOE_LOGITS_LAST, last, err)) stage = 3;
    }
    if (cs) hmoe_ctx_get_stats(c, cs);
    hmoe_ctx_free(c);
    return stage;
}

static void check_too_small(const struct hmoe_model *m) {
    struct hmoe_err err = {0};
    struct hmoe_ctx *c = open_ctx(m, 64, 512, 512, &err);
    t_check(!c && strstr(err.msg, "--vram-budget") && strstr(err.msg, "CUDA context") && strstr(err.msg, "KV cache"),
            "--vram-budget 64: refused with the fixed part's numbers and the flag", "%s",
            c ? "opened" : err.msg);
    hmoe_ctx_free(c);
    /* far past the card: planned at what the device can give */
    c = open_ctx(m, (int64_t)1 << 30, 512, 512, &err);
    struct hmoe_ctx_stats cs = {0};
    if (c) hmoe_ctx_get_stats(c, &cs);
    struct hmoe_cuda_device_info di = {0};
    hmoe_cuda_device_info(0, &di, &err);
    t_check(c && cs.vram_budget_bytes <= di.total_bytes && cs.vram_plan_bytes <= cs.vram_budget_bytes,
            "--vram-budget 1 PiB: planned within the card", "budget %.0f MiB, card %.0f MiB: %s",
            cs.vram_budget_bytes / MiB, di.total_bytes / MiB, c ? "" : err.msg);
    hmoe_ctx_free(c);
}

/* The plan and the measured peak against the budget; returns the all-GPU plan's bytes. */
static void check_budget(const struct hmoe_model *m, const char *label, int64_t budget, const char *want_backend,
                         int64_t *plan_out, int64_t *resident_out) {
    struct hmoe_err err = {0};
    const int V = m->cfg.n_vocab;
    float *last = malloc((size_t)V * sizeof *last);
    struct hmoe_ctx_stats cs = {0};
    const int stage = workload(m, budget, last, &cs, &err);
    bool finite = true;
    for (int i = 0; !stage && i < V; i++) finite &= isfinite(last[i]);
    char name[200];
    struct hmoe_ctx *c = open_ctx(m, budget, 512, 512, &err);
    const char *be = c ? hmoe_ctx_backend(c) : "?";
    snprintf(name, sizeof name, "%s: plan within the budget, measured device peak within the budget, %s", label,
             want_backend);
    t_check(!stage && finite && c && !strcmp(be, want_backend) && cs.vram_plan_bytes <= cs.vram_budget_bytes &&
                cs.vram_device_peak_bytes <= cs.vram_budget_bytes && cs.vram_context_bytes > 0,
            name, "stage %d %s; backend %s; plan %.0f, measured peak %.0f (context %.0f), budget %.0f MiB", stage,
            stage ? err.msg : "", be, cs.vram_plan_bytes / MiB, cs.vram_device_peak_bytes / MiB,
            cs.vram_context_bytes / MiB, cs.vram_budget_bytes / MiB);
    printf("  %s: budget %.0f MiB, plan %.0f MiB, measured peak %.0f MiB (context %.0f, reserve+cuBLAS+rounding "
           "%.0f, KV %.0f, resident %.0f, cache %.0f in %d slots, buffers %.0f)\n",
           label, cs.vram_budget_bytes / MiB, cs.vram_plan_bytes / MiB, cs.vram_device_peak_bytes / MiB,
           cs.vram_context_bytes / MiB, cs.vram_reserve_bytes / MiB, cs.vram_kv_bytes / MiB,
           cs.vram_resident_bytes / MiB, cs.vram_cache_bytes / MiB, cs.vram_cache_slots, cs.vram_buffers_bytes / MiB);
    if (plan_out) *plan_out = (int64_t)cs.vram_plan_bytes;
    if (resident_out) *resident_out = (int64_t)cs.vram_resident_bytes;
    hmoe_ctx_free(c);
    free(last);
}

/* Every device allocation of the workload fails once, in turn. */
static void check_oom(const struct hmoe_model *m, const char *label, int64_t budget) {
    struct hmoe_err err = {0};
    const int V = m->cfg.n_vocab;
    float *ref = malloc((size_t)V * sizeof *ref), *last = malloc((size_t)V * sizeof *last);
    hmoe_cuda_fail_alloc_at(0);
    const int st0 = workload(m, budget, ref, NULL, &err);
    const int n = hmoe_cuda_alloc_calls();
    int by_stage[4] = {0}, named = 0, recovered = 0;
    char first_bad[800] = "";
    for (int i = 1; !st0 && i <= n; i++) {
        hmoe_cuda_fail_alloc_at(i);
        err = (struct hmoe_err){0};
        const int stage = workload(m, budget, last, NULL, &err);
        hmoe_cuda_fail_alloc_at(0);
        by_stage[stage]++;
        if (stage && strstr(err.msg, "--vram-budget")) named++;
        else if (!first_bad[0]) snprintf(first_bad, sizeof first_bad, "allocation %d: stage %d: %s", i, stage, err.msg);
        /* the next context opens and gives the logits of the first run */
        if (workload(m, budget, last, NULL, &err) == 0 && t_first_mismatch(last, ref, V, 0, 0) < 0) recovered++;
    }
    char name[240];
    snprintf(name, sizeof name,
             "%s: each of the %d device allocations failing is an error naming --vram-budget (open %d, prefill %d, "
             "decode %d), and the next context runs as before",
             label, n, by_stage[1], by_stage[2], by_stage[3]);
    t_check(!st0 && n > 0 && named == n && recovered == n && by_stage[1] > 0 && by_stage[3] > 0, name,
            "first run stage %d (%s); %d named; %d recovered; %s", st0, st0 ? err.msg : "", named, recovered, first_bad);
    free(ref);
    free(last);
}

/* The qwen35-tiny preset writes one MTP block; the same file without it must cost the same VRAM. */
static int write_synth(const char *path, bool drop_mtp, struct hmoe_err *err) {
    struct hmoe_synth_plan p;
    struct hmoe_synth_opts o = {.preset = "qwen35-tiny", .mix = "q4_k_m", .seed = 11};
    enum hmoe_status st = hmoe_synth_plan_init(&p, &o, err);
    if (st) return -1;
    int mtp = 0;
    if (drop_mtp) {
        size_t w = 0;
        for (size_t i = 0; i < p.n_tensors; i++) {
            if (p.tensors[i].layer >= (int)p.preset.n_layer) {
                mtp++;
                p.data_bytes -= (p.tensors[i].n_bytes + 31) / 32 * 32;
                continue;
            }
            p.tensors[w++] = p.tensors[i];
        }
        p.n_tensors = w;
        p.preset.n_nextn = 0;
    }
    st = hmoe_synth_write(&p, path, NULL, NULL, err);
    hmoe_synth_plan_free(&p);
    return st ? -1 : mtp;
}

static void check_mtp(void) {
    char pa[] = "/tmp/hmoe-vram-mtp-XXXXXX", pb[] = "/tmp/hmoe-vram-nomtp-XXXXXX";
    int fa = mkstemp(pa), fb = mkstemp(pb);
    if (fa >= 0) close(fa);
    if (fb >= 0) close(fb);
    struct hmoe_err err = {0};
    const int ra = write_synth(pa, false, &err), rb = ra >= 0 ? write_synth(pb, true, &err) : -1;
    struct hmoe_model *ma = NULL, *mb = NULL;
    if (rb > 0) {
        enum hmoe_log_level lv = hmoe_log_level;
        hmoe_log_level = HMOE_LOG_ERROR; /* "MTP block(s) present: ..." */
        if (!hmoe_model_load(pa, NULL, &ma, &err)) hmoe_model_load(pb, NULL, &mb, &err);
        hmoe_log_level = lv;
    }
    t_check(ma && mb && ma->cfg.n_nextn == 1 && mb->cfg.n_nextn == 0 && ma->cfg.n_layer == mb->cfg.n_layer,
            "qwen35-tiny with and without its MTP block written and loaded", "%d MTP tensors dropped: %s", rb, err.msg);
    if (ma && mb) {
        /* one after the other: the measured context of a second live context would include the first */
        const int V = ma->cfg.n_vocab;
        float *la = malloc((size_t)V * 4), *lb = malloc((size_t)V * 4);
        int32_t ids[8] = {1, 5, 9, 77, 300, 12, 4, 2};
        struct hmoe_ctx_stats sa = {0}, sb = {0};
        bool ran = true;
        for (int k = 0; k < 2; k++) {
            struct hmoe_ctx *c = open_ctx(k ? mb : ma, 0, 512, 512, &err);
            if (c) hmoe_ctx_get_stats(c, k ? &sb : &sa);
            ran = ran && c && !hmoe_ctx_decode(c, ids, 8, 0, HMOE_LOGITS_LAST, k ? lb : la, &err);
            hmoe_ctx_free(c);
        }
        /* the planned bytes without the measured context and reserve (which vary by a few MiB) */
        const uint64_t plan_a = sa.vram_plan_bytes - sa.vram_context_bytes - sa.vram_reserve_bytes,
                       plan_b = sb.vram_plan_bytes - sb.vram_context_bytes - sb.vram_reserve_bytes;
        const bool same = ran && t_first_mismatch(la, lb, V, 0, 0) < 0;
        t_check(ran && sa.vram_used_bytes == sb.vram_used_bytes && plan_a == plan_b && same,
                "MTP block (nextn tensors) costs no VRAM: same allocations, same plan, same logits",
                "%s with MTP %.1f MiB allocated / %.1f planned, without %.1f / %.1f; logits same %d", err.msg,
                sa.vram_used_bytes / MiB, plan_a / MiB, sb.vram_used_bytes / MiB, plan_b / MiB, same);
        free(la);
        free(lb);
    }
    hmoe_model_free(ma);
    hmoe_model_free(mb);
    unlink(pa);
    unlink(pb);
}

int main(void) {
    if (!hmoe_cuda_available()) {
        printf("gpu_test_vram ... skipped: no CUDA device\n");
        return t_summary();
    }
    struct hmoe_model *m = NULL;
    struct hmoe_err err = {0};
    if (hmoe_model_load(t_shared("fixtures/models/tiny-qwen3moe-A-Q4_K_M.gguf"), NULL, &m, &err)) {
        t_check(0, "tiny-qwen3moe-A-Q4_K_M loads", "%s", err.msg);
        return t_summary();
    }
    check_too_small(m);
    int64_t plan = 0, resident = 0;
    check_budget(m, "all-GPU, default budget", 0, "cuda", &plan, &resident);
    /* the smallest budget above the fixed part that opens in hybrid mode (experts in RAM with cache
     * slots); the context's measured size moves by a few MiB between contexts, so search upwards */
    int64_t hyb = 0;
    for (int64_t b = (int64_t)((plan - resident) / MiB) - 16; !hyb && b <= (int64_t)(plan / MiB) + 16; b++) {
        struct hmoe_ctx *c = open_ctx(m, b, 512, 512, &err);
        if (c && !strcmp(hmoe_ctx_backend(c), "cuda+cpu")) hyb = b + 2; /* a little above the edge */
        hmoe_ctx_free(c);
    }
    t_check(hyb > 0, "a budget that keeps the experts in RAM exists", "%s", err.msg);
    char label[96];
    snprintf(label, sizeof label, "hybrid, --vram-budget %lld", (long long)hyb);
    check_oom(m, "all-GPU", 0);
    if (hyb) {
        check_budget(m, label, hyb, "cuda+cpu", NULL, NULL);
        check_oom(m, label, hyb);
    }
    hmoe_model_free(m);
    check_mtp();
    return t_summary();
}
