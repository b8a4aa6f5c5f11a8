/* softmax_avx512.c — hmoe_cpu_softmax_scaled on 16 scores at a time (cpu.h; softmax.c has the
 * definition). Why: with expf one at a time the softmax of a long context cost as much as its
 * dot products (8 heads x 4000 positions = 32k exponentials per work item). exp(x) = 2^n·e^r
 * with n = round(x·log2 e), r = x - n·ln 2 in two parts (|r| <= ln2/2), e^r by its degree-6
 * Taylor polynomial (truncation < 1.3e-7 relative), 2^n applied by vscalefps (exact, and
 * 0 / denormals for very negative x). Inputs below -104 are taken as -104 (e^-104 is 0 in
 * binary32 either way); NaN stays NaN. The sum of the exponentials in double, 16 lanes at a time.
 * An optional sink logit (gpt-oss; -inf: none) joins the maximum and the denominator (softmax.c).
 */
#include <immintrin.h>
#include <math.h>

#include "cpu_impl.h"

static inline __m512 exp16(__m512 x) {
    x = _mm512_max_ps(_mm512_set1_ps(-104.0f), x); /* max(a, NaN) = NaN: NaN passes */
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), x); /* ln2 high part: 0x3f317200 */
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.428606765330187045e-06f), r); /* ln2 - high part */
    __m512 p = _mm512_set1_ps(1.0f / 720.0f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, n);
}

void hmoe_cpu_softmax_scaled_avx512(float *s, int64_t n, float scale, float sink) {
    const __m512 sc = _mm512_set1_ps(scale);
    __m512 mx = _mm512_set1_ps(sink); /* the sink joins the maximum (-inf: none) */
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 v = _mm512_mul_ps(_mm512_loadu_ps(s + i), sc);
        _mm512_storeu_ps(s + i, v);
        mx = _mm512_max_ps(mx, v);
    }
    const __mmask16 mt = (__mmask16)((1u << (n - i)) - 1);
    if (i < n) {
        const __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(mt, s + i), sc);
        _mm512_mask_storeu_ps(s + i, mt, v);
        mx = _mm512_mask_max_ps(mx, mt, mx, v);
    }
    const __m512 m = _mm512_set1_ps(_mm512_reduce_max_ps(mx));
    __m512d sum0 = _mm512_setzero_pd(), sum1 = _mm512_setzero_pd();
    for (i = 0; i + 16 <= n; i += 16) {
        const __m512 e = exp16(_mm512_sub_ps(_mm512_loadu_ps(s + i), m));
        _mm512_storeu_ps(s + i, e);
        sum0 = _mm512_add_pd(sum0, _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
        sum1 = _mm512_add_pd(sum1, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(e), 1))));
    }
    if (i < n) {
        const __m512 e = _mm512_maskz_mov_ps(mt, exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(mt, s + i), m)));
        _mm512_mask_storeu_ps(s + i, mt, e);
        sum0 = _mm512_add_pd(sum0, _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
        sum1 = _mm512_add_pd(sum1, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(e), 1))));
    }
    double total = _mm512_reduce_add_pd(_mm512_add_pd(sum0, sum1));
    if (sink != -INFINITY) total += (double)expf(sink - _mm512_cvtss_f32(m)); /* ... and the denominator */
    const __m512 inv = _mm512_set1_ps((float)(1.0 / total));
    for (i = 0; i + 16 <= n; i += 16) _mm512_storeu_ps(s + i, _mm512_mul_ps(_mm512_loadu_ps(s + i), inv));
    if (i < n) _mm512_mask_storeu_ps(s + i, mt, _mm512_mul_ps(_mm512_maskz_loadu_ps(mt, s + i), inv));
}
