/* swiglu.c — hmoe_cpu_swiglu (cpu.h): the gated MLP's g·sigmoid(g)·u over one row, the
 * portable loop and the dispatch to the AVX2 kernel (swiglu_avx2.c). The AVX-512 path keeps
 * this loop.
 */
#include <math.h>

#include "cpu_impl.h"

void hmoe_cpu_swiglu(float *g, const float *u, int64_t n) {
    if (hmoe_cpu_path() == HMOE_CPU_AVX2) {
        hmoe_cpu_swiglu_avx2(g, u, n);
        return;
    }
    for (int64_t i = 0; i < n; i++) g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}
