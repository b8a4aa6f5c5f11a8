/* kernel_rng.h — what the CPU kernel tests share: deterministic random numbers (xorshift64*,
 * seeded by KERNEL_RNG_SEED before the include), the random activations the kernels are fed
 * and the kernel tolerance of the fixtures README §5.4. Header-only, static inline.
 */
#ifndef HMOE_TESTS_KERNEL_RNG_H
#define HMOE_TESTS_KERNEL_RNG_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#ifndef KERNEL_RNG_SEED
#define KERNEL_RNG_SEED 0x9e3779b97f4a7c15ull
#endif

static uint64_t rng_state = KERNEL_RNG_SEED;
static inline uint64_t rng_u64(void) {
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545f4914f6cdd1dull;
}
static inline float rng_unit(void) { return (float)((rng_u64() >> 40) * (1.0 / 16777216.0)); } /* [0,1) */
static inline float rng_normal(void) {                                                         /* ~N(0,1) */
    float s = 0;
    for (int i = 0; i < 12; i++) s += rng_unit();
    return s - 6.0f;
}

/* Random activations: N(0,1) times a per-row scale, a few outliers (×40), and every so
 * often an all-zero 256-block (Q8_K's d = 0 case). */
static inline void rng_acts(float *x, int64_t n) {
    float scale = rng_u64() & 1 ? 1.0f : 0.05f;
    for (int64_t i = 0; i < n; i++) x[i] = scale * rng_normal();
    for (int k = 0; k < 3; k++) x[rng_u64() % (uint64_t)n] = 40.0f * (rng_u64() & 1 ? 1.0f : -1.0f);
    if (n >= 512 && rng_u64() % 2 == 0) memset(x + 256, 0, 256 * sizeof(float));
}

/* |got - want| <= 1e-6 + 1e-5 |want| (fixtures README §5.4 kernel tolerance). */
static inline int close_enough(float got, float want) { return fabsf(got - want) <= 1e-6f + 1e-5f * fabsf(want); }

#endif
