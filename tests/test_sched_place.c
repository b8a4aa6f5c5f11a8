/* test_sched_place.c — the placement planner and the llama.cpp-compatible placement flags
 * (src/sched/place.c, override.c) with made-up sizes: a 48-layer, 128-expert model whose expert
 * costs 3 MiB (1 GiB of attention etc. fixed). Expected placements follow the documented rules
 * (sched.h; llama.cpp's --cpu-moe / --n-cpu-moe / -ot meanings), not this code's output.
 */
#include "harness.h"
#include "hmoe/sched.h"

#define MiB ((uint64_t)1 << 20)
enum { L = 48, E = 128 };
static uint64_t eb[L];
#define SLOTS(i) (p.n_slots ? p.n_slots[i] : -1)

static struct hmoe_sched_place_req req(uint64_t budget_mib) {
    for (int i = 0; i < L; i++) eb[i] = 3 * MiB;
    return (struct hmoe_sched_place_req){.n_layer = L, .n_expert = E, .expert_bytes = eb, .fixed_bytes = 1024 * MiB,
                                         .stream_bytes = 200 * MiB, .budget_bytes = budget_mib * MiB};
}

static int count(const struct hmoe_sched_plan *p, enum hmoe_place w) {
    int n = 0;
    for (int i = 0; p->where && i < p->n_layer; i++) n += p->where[i] == w;
    return n;
}

static void test_auto(void) {
    struct hmoe_err err = {0};
    struct hmoe_sched_plan p;
    enum hmoe_status st;
    /* everything: 1024 + 48*128*3 = 19456 MiB */
    struct hmoe_sched_place_req r = req(20000);
    st = hmoe_sched_place(&r, &p, &err);
    t_check(st == HMOE_OK && p.where && count(&p, HMOE_PLACE_GPU) == L && !p.stream &&
                p.total_bytes == (1024 + 18432) * MiB,
            "auto: all experts fit -> every layer resident, no streaming buffer", "gpu layers %d, total %llu MiB",
            count(&p, HMOE_PLACE_GPU), (unsigned long long)(p.total_bytes / MiB));
    hmoe_sched_plan_free(&p);

    /* 10 GiB: 10240 - 1024 = 9216 left; streaming 200 <= 4608 -> 9016 for slots: 9016 / (48*3) = 62 slots */
    r = req(10240);
    st = hmoe_sched_place(&r, &p, &err);
    t_check(st == HMOE_OK && p.where && count(&p, HMOE_PLACE_RAM) == L && p.stream &&
                p.n_slots[0] == 62 && p.n_slots[L - 1] == 62 && p.total_bytes <= r.budget_bytes,
            "auto 10 GiB: experts in RAM, streaming buffer, 62 cache slots per layer", "ram %d, stream %d, slots %d",
            count(&p, HMOE_PLACE_RAM), p.stream, SLOTS(0));
    hmoe_sched_plan_free(&p);

    /* 1.2 GiB: 1228 - 1024 = 204 left: the 200 MiB streaming buffer would take more than half -> none;
     * 204 / 144 = 1 slot */
    r = req(1228);
    st = hmoe_sched_place(&r, &p, &err);
    t_check(st == HMOE_OK && p.where && !p.stream && p.n_slots[0] == 1 && strstr(p.notes, "streaming"),
            "auto 1.2 GiB: no room for streaming (noted), 1 slot per layer", "stream %d, slots %d, notes '%s'",
            p.stream, SLOTS(0), p.notes);
    hmoe_sched_plan_free(&p);

    /* no expert cache behind the plan (whole_layers): 10 GiB leaves 9216 MiB = 24 layers of 384 MiB,
     * the last 24 resident, the first 24 in RAM, no slots and no streaming buffer */
    r = req(10240);
    r.whole_layers = true;
    r.stream_bytes = 0;
    st = hmoe_sched_place(&r, &p, &err);
    t_check(st == HMOE_OK && p.where && count(&p, HMOE_PLACE_GPU) == 24 && p.where[L - 1] == HMOE_PLACE_GPU &&
                p.where[23] == HMOE_PLACE_RAM && p.where[24] == HMOE_PLACE_GPU && p.n_slots[0] == 0 && !p.stream &&
                p.resident_bytes == 24 * 384 * MiB && p.total_bytes <= r.budget_bytes && strstr(p.notes, "cache"),
            "auto whole layers 10 GiB: layers 24-47 resident, 0-23 in RAM without cache slots (noted)",
            "gpu layers %d, slots %d, resident %llu MiB, notes '%s'", count(&p, HMOE_PLACE_GPU), SLOTS(0),
            (unsigned long long)(p.resident_bytes / MiB), p.notes);
    hmoe_sched_plan_free(&p);
    /* whole layers with a 200 MiB streaming buffer: it is kept first, 9016 MiB hold 23 layers */
    r = req(10240);
    r.whole_layers = true;
    st = hmoe_sched_place(&r, &p, &err);
    t_check(st == HMOE_OK && p.where && count(&p, HMOE_PLACE_GPU) == 23 && p.where[24] == HMOE_PLACE_RAM &&
                p.where[25] == HMOE_PLACE_GPU && p.stream && p.total_bytes <= r.budget_bytes,
            "auto whole layers 10 GiB + streaming: the buffer first, layers 25-47 resident", "gpu layers %d, stream %d",
            count(&p, HMOE_PLACE_GPU), p.stream);
    hmoe_sched_plan_free(&p);
    /* whole layers, all fit: as without the flag */
    r = req(20000);
    r.whole_layers = true;
    st = hmoe_sched_place(&r, &p, &err);
    t_check(st == HMOE_OK && count(&p, HMOE_PLACE_GPU) == L, "auto whole layers: all fit -> every layer resident",
            "gpu layers %d", count(&p, HMOE_PLACE_GPU));
    hmoe_sched_plan_free(&p);

    /* below the fixed part: a clear error naming the flag */
    r = req(1000);
    st = hmoe_sched_place(&r, &p, &err);
    t_check(st == HMOE_ERR_RANGE && strstr(err.msg, "--vram-budget") && strstr(err.msg, "1024 MiB"),
            "budget below the fixed part: error with the size and --vram-budget", "status %d: %s", (int)st, err.msg);
}

static void test_explicit(void) {
    struct hmoe_err err = {0};
    struct hmoe_sched_plan p;
    enum hmoe_status st;
    struct hmoe_sched_place_req r = req(80000);
    r.cpu_moe = true;
    st = hmoe_sched_place(&r, &p, &err);
    t_check(st == HMOE_OK && p.where && count(&p, HMOE_PLACE_RAM) == L && p.n_slots[5] == 0 &&
                p.explicit_placement && p.resident_bytes == 0,
            "--cpu-moe: every layer's experts in RAM, no cache slots", "ram %d slots %d", count(&p, HMOE_PLACE_RAM),
            SLOTS(5));
    hmoe_sched_plan_free(&p);

    r = req(80000);
    r.n_cpu_moe = 24;
    st = hmoe_sched_place(&r, &p, &err);
    t_check(st == HMOE_OK && p.where && p.where[0] == HMOE_PLACE_RAM && p.where[23] == HMOE_PLACE_RAM &&
                p.where[24] == HMOE_PLACE_GPU && p.where[47] == HMOE_PLACE_GPU && count(&p, HMOE_PLACE_RAM) == 24 &&
                p.resident_bytes == 24ull * 128 * 3 * MiB,
            "--n-cpu-moe 24: layers 0-23 in RAM, 24-47 resident", "layer0 %d layer24 %d ram %d",
            p.where ? (int)p.where[0] : -1, p.where ? (int)p.where[24] : -1, count(&p, HMOE_PLACE_RAM));
    hmoe_sched_plan_free(&p);

    /* --n-cpu-moe 12 with a 10 GiB budget: 36 resident layers need 13824 MiB -> error */
    r = req(10240);
    r.n_cpu_moe = 12;
    st = hmoe_sched_place(&r, &p, &err);
    t_check(st == HMOE_ERR_RANGE && strstr(err.msg, "--n-cpu-moe"),
            "--n-cpu-moe that leaves too much on the GPU: error suggesting --n-cpu-moe", "status %d: %s", (int)st,
            err.msg);

    /* -ot: layers 10-19 to CPU; a later GPU rule does not override the first match */
    struct hmoe_sched_override ot[2];
    st = hmoe_sched_override_parse("blk\\.1\\d\\.ffn_.*_exps\\.=CPU", &ot[0], &err);
    if (!st) st = hmoe_sched_override_parse("ffn_up_exps=CUDA0", &ot[1], &err);
    t_check(st == HMOE_OK && ot[0].re && !ot[0].to_gpu && ot[1].to_gpu, "-ot parses REGEX=CPU and REGEX=CUDA0 (\\d accepted)",
            "%s", err.msg);
    if (st) return;
    t_check(hmoe_sched_override_match(ot, 2, "blk.12.ffn_down_exps.weight") == 0 &&
                hmoe_sched_override_match(ot, 2, "blk.2.ffn_down_exps.weight") == -1 &&
                hmoe_sched_override_match(ot, 2, "blk.2.ffn_up_exps.weight") == 1 &&
                hmoe_sched_override_match(ot, 2, "blk.1.attn_q.weight") == -1,
            "-ot matching: searched anywhere in the name, first rule wins", "%s", "wrong rule index");
    r = req(80000);
    r.ot = ot;
    r.n_ot = 2;
    st = hmoe_sched_place(&r, &p, &err);
    t_check(st == HMOE_OK && p.where && count(&p, HMOE_PLACE_RAM) == 10 &&
                p.where[10] == HMOE_PLACE_RAM && p.where[19] == HMOE_PLACE_RAM && p.where[9] == HMOE_PLACE_GPU &&
                p.where[20] == HMOE_PLACE_GPU && p.explicit_placement,
            "-ot 'blk\\.1\\d\\.ffn_.*_exps\\.=CPU': layers 10-19 in RAM, the rest resident", "ram %d", count(&p, HMOE_PLACE_RAM));
    hmoe_sched_plan_free(&p);
    hmoe_sched_override_free(&ot[0]);
    hmoe_sched_override_free(&ot[1]);

    /* -ot on an attention tensor is noted and ignored */
    st = hmoe_sched_override_parse("attn_q=CPU", &ot[0], &err);
    r = req(80000);
    r.ot = ot;
    r.n_ot = 1;
    if (!st) st = hmoe_sched_place(&r, &p, &err);
    t_check(!st && p.where && count(&p, HMOE_PLACE_GPU) == L &&
                strstr(p.notes, "attn_q=CPU"),
            "-ot on a non-expert tensor: noted, attention stays on the GPU", "notes '%s'", p.notes);
    hmoe_sched_plan_free(&p);
    hmoe_sched_override_free(&ot[0]);

    /* bad specs: clear errors */
    const char *bad[] = {"no_equals", "=CPU", "x=TPU", "blk(=CPU"};
    for (size_t i = 0; i < HMOE_ARRAY_LEN(bad); i++) {
        char name[128];
        snprintf(name, sizeof name, "-ot '%s' is rejected with a message", bad[i]);
        struct hmoe_err e = {0};
        st = hmoe_sched_override_parse(bad[i], &ot[0], &e);
        t_check(st == HMOE_ERR_ARG && strstr(e.msg, "-ot"), name, "status %d: %s", (int)st, e.msg);
        hmoe_sched_override_free(&ot[0]);
    }
}

static void test_describe(void) {
    struct hmoe_err err = {0};
    struct hmoe_sched_plan p;
    struct hmoe_sched_place_req r = req(80000);
    r.n_cpu_moe = 3;
    char buf[2048];
    if (hmoe_sched_place(&r, &p, &err)) {
        t_check(0, "plan description", "%s", err.msg);
        return;
    }
    hmoe_sched_plan_describe(&p, eb, buf, sizeof buf);
    t_check(strstr(buf, "layers 0-2: experts in RAM") && strstr(buf, "layers 3-47: experts resident"),
            "plan description groups layers", "%s", buf);
    hmoe_sched_plan_free(&p);
}

int main(void) {
    test_auto();
    test_explicit();
    test_describe();
    return t_summary();
}
