/* split_plan.c — how many of a streamed RAM layer's uncached experts CPU threads take in the
 * hybrid prefill split (sched.h, issue #6). Pure arithmetic on MEASURED times (hybrid_prefill.c
 * feeds it from CUDA events and host stamps): the CPU part may only use the GPU's own remaining
 * work after the router (the window), else layer L+1 waits for it. Kept free of CUDA so that
 * tests/test_sched_split_plan.c can check its clamps, gain threshold and damping on the CPU.
 */
#include <math.h>

#include "hmoe/sched.h"

double hmoe_sched_split_plan(const struct hmoe_sched_split_plan_in *p) {
    if (p->nu <= 0 || !(p->window_ms > 0) || !(p->cpu_ms > 0) || !(p->stream_ms >= 0)) return 0;
    /* CPU done at fixed + n * cpu; GPU groups done at window - n * stream (each expert moved off
     * the stream shortens it by its copy): balance them, margin_ms early */
    const double room = p->window_ms - p->fixed_ms - p->margin_ms;
    if (!(room > 0)) return 0;
    double target = floor(room / (p->cpu_ms + p->stream_ms));
    if (target > p->nu) target = p->nu;
    if (target < 0) target = 0;
    /* not worth it: the stream time saved, less adding the CPU's sum, must beat min_gain of the
     * layer; below that the layer keeps the plain streaming path */
    const double layer = p->layer_ms > 0 ? p->layer_ms : p->window_ms;
    if (target <= 0 || target * p->stream_ms - p->add_ms < p->min_gain * layer) return 0;
    /* grow by a share of the way (a measured CPU rate from few experts is noisy); shrink at
     * once (the GPU would wait for the CPU) */
    if (p->prev > 0 && target > p->prev) {
        const double d = p->damping > 0 && p->damping <= 1 ? p->damping : 1;
        return p->prev + d * (target - p->prev);
    }
    return target;
}
