/* iq_scratch.c — a per-thread, grow-only scratch buffer for the I-quant activation
 * relayout (iq_act_impl.h). Kernels are single-threaded work units called from OpenMP
 * threads that live as long as the process, so one buffer per thread is allocated on
 * first use, grown when a larger call comes and kept (no malloc per call).
 */
#include <stdlib.h>

#include "iq_act_impl.h"

static _Thread_local void *scratch;
static _Thread_local size_t scratch_bytes;

void *hmoe_cpu_iq_scratch(size_t bytes) {
    if (bytes <= scratch_bytes) return scratch;
    size_t want = bytes < 65536 ? 65536 : (bytes + 65535) & ~(size_t)65535;
    void *p = NULL;
    if (posix_memalign(&p, 64, want) != 0) return NULL;
    free(scratch);
    scratch = p;
    scratch_bytes = want;
    return p;
}
