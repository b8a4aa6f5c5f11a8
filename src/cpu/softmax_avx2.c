/* softmax_avx2.c — hmoe_cpu_softmax_scaled on 8 scores at a time with AVX2 + FMA (cpu.h;
 * softmax.c has the definition, softmax_avx512.c the same scheme in 16 lanes), the
 * exponentials by exp_avx2_impl.h's exp8. The sum of the exponentials in double. An optional sink
 * logit (gpt-oss; -inf: none) joins the maximum and the denominator, as in softmax.c.
 */
#include <immintrin.h>
#include <math.h>

#include "cpu_impl.h"
#include "exp_avx2_impl.h"

static inline __m256d sum_pd(__m256d acc, __m256 e) {
    return _mm256_add_pd(_mm256_add_pd(acc, _mm256_cvtps_pd(_mm256_castps256_ps128(e))),
                         _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
}

void hmoe_cpu_softmax_scaled_avx2(float *s, int64_t n, float scale, float sink) {
    const __m256 sc = _mm256_set1_ps(scale);
    __m256 mx = _mm256_set1_ps(sink); /* the sink joins the maximum (-inf: none) */
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(s + i), sc);
        _mm256_storeu_ps(s + i, v);
        mx = _mm256_max_ps(mx, v);
    }
    float m = -INFINITY;
    _Alignas(32) float lanes[8];
    _mm256_store_ps(lanes, mx);
    for (int j = 0; j < 8; j++) m = lanes[j] > m ? lanes[j] : m;
    for (int64_t t = i; t < n; t++) { /* the last n % 8 */
        s[t] *= scale;
        m = s[t] > m ? s[t] : m;
    }
    const __m256 mv = _mm256_set1_ps(m);
    __m256d sum = _mm256_setzero_pd();
    for (i = 0; i + 8 <= n; i += 8) {
        const __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(s + i), mv));
        _mm256_storeu_ps(s + i, e);
        sum = sum_pd(sum, e);
    }
    if (i < n) { /* the tail through a zero-padded chunk: exp of the padding is dropped */
        _Alignas(32) float t8[8];
        for (int j = 0; j < 8; j++) t8[j] = i + j < n ? s[i + j] - m : -INFINITY;
        const __m256 e = exp8(_mm256_load_ps(t8));
        _mm256_store_ps(t8, e);
        for (int j = 0; i + j < n; j++) s[i + j] = t8[j];
        for (int j = (int)(n - i); j < 8; j++) t8[j] = 0.0f;
        sum = sum_pd(sum, _mm256_load_ps(t8));
    }
    _Alignas(32) double d4[4];
    _mm256_store_pd(d4, sum);
    double total = (d4[0] + d4[1]) + (d4[2] + d4[3]);
    if (sink != -INFINITY) total += (double)expf(sink - m); /* ... and the denominator */
    const __m256 inv = _mm256_set1_ps((float)(1.0 / total));
    for (i = 0; i + 8 <= n; i += 8) _mm256_storeu_ps(s + i, _mm256_mul_ps(_mm256_loadu_ps(s + i), inv));
    const float invf = _mm256_cvtss_f32(inv);
    for (; i < n; i++) s[i] *= invf;
}
