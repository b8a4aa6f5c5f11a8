/* cpu_dispatch.c — the CPU kernel entry points of cpu.h.
 * For now every path runs the type table's scalar reference kernels (types.c); the
 * SIMD kernels plug in here, chosen once by hmoe_cpu_init(). */
#include "hmoe/cpu.h"

#include <omp.h>
#include <unistd.h>

static enum hmoe_cpu_path cpu_path = HMOE_CPU_SCALAR; /* written once by hmoe_cpu_init */

void hmoe_cpu_init(void) { cpu_path = HMOE_CPU_SCALAR; }

enum hmoe_cpu_path hmoe_cpu_path(void) { return cpu_path; }

const char *hmoe_cpu_path_name(enum hmoe_cpu_path p) {
    static const char *const names[] = {"scalar", "avx2", "avx512"};
    return (unsigned)p < 3 ? names[p] : "?";
}

int hmoe_cpu_physical_cores(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

size_t hmoe_cpu_act_bytes(enum hmoe_type wtype, int64_t n) {
    return hmoe_row_bytes(hmoe_type_info[wtype].vec_dot_type, n);
}

void hmoe_cpu_quantize_act(enum hmoe_type wtype, const float *x, void *dst, int64_t n) {
    hmoe_type_info[hmoe_type_info[wtype].vec_dot_type].quantize_ref(x, dst, n);
}

void hmoe_cpu_gemv(enum hmoe_type wtype, int64_t ncols, const void *w, size_t row_bytes, int64_t r0, int64_t r1,
                   const void *xq, float *y) {
    hmoe_vec_dot_fn dot = hmoe_type_info[wtype].vec_dot_ref;
    for (int64_t r = r0; r < r1; r++) y[r - r0] = dot(ncols, (const char *)w + (size_t)r * row_bytes, xq);
}

void hmoe_cpu_gemm(enum hmoe_type wtype, int64_t ncols, const void *w, size_t row_bytes, int64_t r0, int64_t r1,
                   const void *xq, size_t xq_stride_bytes, int64_t ntok, float *y, size_t y_stride) {
    for (int64_t t = 0; t < ntok; t++)
        hmoe_cpu_gemv(wtype, ncols, w, row_bytes, r0, r1, (const char *)xq + (size_t)t * xq_stride_bytes,
                      y + (size_t)t * y_stride);
}

void hmoe_cpu_matmul(enum hmoe_type wtype, int64_t ncols, int64_t nrows, const void *w, size_t row_bytes,
                     const float *x, size_t x_stride, int64_t ntok, float *y, size_t y_stride, void *scratch) {
    size_t act_bytes = hmoe_cpu_act_bytes(wtype, ncols);
#pragma omp parallel
    {
#pragma omp for schedule(static)
        for (int64_t t = 0; t < ntok; t++)
            hmoe_cpu_quantize_act(wtype, x + (size_t)t * x_stride, (char *)scratch + (size_t)t * act_bytes, ncols);
        /* Rows in chunks of 16 so each thread streams contiguous weight memory. */
        const int64_t chunk = 16;
#pragma omp for schedule(static)
        for (int64_t r0 = 0; r0 < nrows; r0 += chunk) {
            int64_t r1 = r0 + chunk < nrows ? r0 + chunk : nrows;
            hmoe_cpu_gemm(wtype, ncols, w, row_bytes, r0, r1, scratch, act_bytes, ntok, y + r0, y_stride);
        }
    }
}
