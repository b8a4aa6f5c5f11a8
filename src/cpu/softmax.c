/* softmax.c — hmoe_cpu_softmax_scaled (cpu.h): the attention's softmax of one row of scores,
 * as ggml's soft_max: scaled, max-subtracted, binary32 exponentials, their sum in double, one
 * multiply by the inverse. The AVX-512 and AVX2 paths (softmax_avx512.c, softmax_avx2.c)
 * evaluate the exponentials 16 / 8 at a time with their own exp (within 2 ulp of expf); this
 * loop is the portable one.
 */
#include <math.h>

#include "cpu_impl.h"

void hmoe_cpu_softmax_scaled(float *s, int64_t n, float scale) {
    if (n <= 0) return;
    if (hmoe_cpu_path() == HMOE_CPU_AVX512) {
        hmoe_cpu_softmax_scaled_avx512(s, n, scale, -INFINITY);
        return;
    }
    if (hmoe_cpu_path() == HMOE_CPU_AVX2) {
        hmoe_cpu_softmax_scaled_avx2(s, n, scale, -INFINITY);
        return;
    }
    float mx = -INFINITY;
    for (int64_t i = 0; i < n; i++) {
        s[i] *= scale;
        mx = s[i] > mx ? s[i] : mx;
    }
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) {
        s[i] = expf(s[i] - mx);
        sum += (double)s[i];
    }
    const float inv = (float)(1.0 / sum);
    for (int64_t i = 0; i < n; i++) s[i] *= inv;
}

/* The same softmax with one extra logit `sink` that joins the maximum and the denominator
 * but has no entry of its own (gpt-oss.md, attention sinks): the probabilities sum to less
 * than one. The sink is a logit as it is, not multiplied by `scale`. */
void hmoe_cpu_softmax_scaled_sink(float *s, int64_t n, float scale, float sink) {
    if (n <= 0) return;
    if (hmoe_cpu_path() == HMOE_CPU_AVX512 && sink != -INFINITY) {
        hmoe_cpu_softmax_scaled_avx512(s, n, scale, sink);
        return;
    }
    if (hmoe_cpu_path() == HMOE_CPU_AVX2 && sink != -INFINITY) {
        hmoe_cpu_softmax_scaled_avx2(s, n, scale, sink);
        return;
    }
    float mx = sink;
    for (int64_t i = 0; i < n; i++) {
        s[i] *= scale;
        mx = s[i] > mx ? s[i] : mx;
    }
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) {
        s[i] = expf(s[i] - mx);
        sum += (double)s[i];
    }
    sum += (double)expf(sink - mx);
    const float inv = (float)(1.0 / sum);
    for (int64_t i = 0; i < n; i++) s[i] *= inv;
}
