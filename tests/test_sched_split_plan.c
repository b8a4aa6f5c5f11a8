/* test_sched_split_plan.c — hmoe_sched_split_plan (src/sched/split_plan.c), the planner of the
 * hybrid prefill split (issue #6), on hand-worked cases shaped like the H200 measurements of
 * bench/gpu_results.md (pp512: 3.06 MB experts at ~55 GB/s = 0.056 ms each, CPU ~0.25 ms per
 * expert; pp4096: 2.8 ms per CPU expert and a 33 MB sum to add). Expected values are worked out by
 * hand from the documented rule (sched.h), not taken from the code's output.
 */
#include "harness.h"
#include "hmoe/sched.h"

/* A 2 GiB pp512 layer: 122 uncached experts, 5 ms of GPU work after the router. */
static struct hmoe_sched_split_plan_in base(void) {
    return (struct hmoe_sched_split_plan_in){.window_ms = 5.0, .fixed_ms = 0.15, .cpu_ms = 0.25, .stream_ms = 0.056,
                                             .add_ms = 0.08, .layer_ms = 6.4, .margin_ms = 0.1, .min_gain = 0.02,
                                             .damping = 0.5, .prev = 0, .nu = 122};
}

static void expect(const struct hmoe_sched_split_plan_in *p, double want, const char *name) {
    const double got = hmoe_sched_split_plan(p);
    t_check(fabs(got - want) < 1e-9, name, "got %.6f, expected %.6f", got, want);
}

int main(void) {
    struct hmoe_sched_split_plan_in p = base();
    /* (5.0 - 0.15 - 0.1) / (0.25 + 0.056) = 15.52 -> 15; saves 15 * 0.056 - 0.08 = 0.76 ms > 2 % of 6.4 */
    expect(&p, 15, "balance: CPU ends margin_ms before the GPU's groups (15 of 122)");
    /* the 10 GiB layer of the lead's analysis: window 1.4 ms, 59 uncached -> 1.15 / 0.306 = 3.76 -> 3 */
    p.window_ms = 1.4, p.layer_ms = 3.1, p.nu = 59;
    expect(&p, 3, "small window: 3 of 59");
    /* a faster CPU (0.12 ms per expert): 1.15 / 0.176 = 6.53 -> 6 */
    p.cpu_ms = 0.12;
    expect(&p, 6, "faster CPU widens the split (6 of 59)");
    p = base();
    p.window_ms = 1000;
    expect(&p, 122, "clamped to the uncached experts");
    p.nu = 0;
    expect(&p, 0, "no uncached expert: nothing");
    p = base();
    p.cpu_ms = 0;
    expect(&p, 0, "CPU rate not measured: nothing");
    p = base();
    p.window_ms = 0;
    expect(&p, 0, "window not measured: nothing");
    p = base();
    p.fixed_ms = 4.95;
    expect(&p, 0, "fixed CPU costs fill the window: nothing");
    /* pp4096 at 2 GiB: (7.0 - 1.0 - 0.1) / 2.856 = 2.07 -> 2, saves 2 * 0.056 - 0.6 < 0 */
    p = base();
    p.window_ms = 7.0, p.fixed_ms = 1.0, p.cpu_ms = 2.8, p.add_ms = 0.6, p.layer_ms = 7.8;
    expect(&p, 0, "pp4096: adding the sum costs more than it saves: nothing");
    /* the threshold itself: 15 experts save 0.84 ms - add; 2 % of 6.4 = 0.128 */
    p = base();
    p.add_ms = 0.84 - 0.129;
    expect(&p, 15, "saving 0.129 ms of a 6.4 ms layer (> 2 %): taken");
    p.add_ms = 0.84 - 0.127;
    expect(&p, 0, "saving 0.127 ms of a 6.4 ms layer (< 2 %): nothing");
    p = base();
    p.layer_ms = 0; /* unknown: the window (5 ms) stands for the layer, 2 % = 0.1 ms */
    p.add_ms = 0.84 - 0.101;
    expect(&p, 15, "layer time unknown: 0.101 ms saved of a 5 ms window: taken");
    p.add_ms = 0.84 - 0.099;
    expect(&p, 0, "layer time unknown: 0.099 ms saved of a 5 ms window: nothing");
    p = base();
    p.prev = 5;
    expect(&p, 10, "growing: half of the way from 5 to 15");
    p.prev = 14.5;
    expect(&p, 14.75, "growing: half of the way from 14.5 to 15");
    p.prev = 20;
    expect(&p, 15, "shrinking: at once from 20 to 15");
    p.prev = 5, p.damping = 0;
    expect(&p, 15, "damping 0 (unset): the whole way");
    p = base();
    p.prev = 5, p.window_ms = 0.2;
    expect(&p, 0, "the window closed: from 5 to nothing at once");
    return t_summary();
}
