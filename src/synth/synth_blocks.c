/* synth_blocks.c — random but numerically sane quant blocks for synthetic models.
 * Every byte is random except the fp16 (and Q6_K int8) scale fields, which are set so the
 * dequantized weights have a standard deviation of about 0.02, like a trained LLM's and
 * like gguf_synth.py's K-quants; scales are always finite and positive. Field offsets are
 * from quants.md §3–§5. This table knows only where the scales sit and what size gives
 * std ≈ 0.02 — data-generation knowledge that has no place in the kernel type table.
 */
#include <stdlib.h>
#include <string.h>

#include "hmoe/fp16.h"
#include "synth_impl.h"

/* How to make a block of one type: random bytes, then
 *   fp16 d      at d_off, uniform in [d_lo, 2 d_lo)
 *   fp16 second at m_off (dmin / m), = m_ratio * d, so that the mean weight is about 0
 *   int8 i8_n sub-scales at i8_off, uniform in [i8_lo, i8_hi)   (Q6_K)
 *   an E8M0 shared exponent in byte 0                           (MXFP4)
 * or, for plain float types, N(0, 0.02) elements. The d_lo values follow from each type's
 * formula with uniformly random quants and sub-scales (rms values in the comments). */
struct recipe {
    uint16_t d_off;
    float d_lo;
    int16_t m_off;
    float m_ratio;
    int16_t i8_off;
    uint8_t i8_n;
    int8_t i8_lo, i8_hi;
    uint8_t float_bytes; /* 4 = F32, 2 = F16 (or BF16) elements */
    bool bf16;
    uint8_t e8m0_lo;     /* MXFP4: byte 0 is an E8M0 exponent, e8m0_lo or e8m0_lo + 1 (0 = none) */
};

#define NO_M .m_off = -1
#define NO_I8 .i8_off = -1
static const struct recipe recipes[HMOE_TYPE_COUNT] = {
    [HMOE_TYPE_F32] = {.float_bytes = 4, NO_M, NO_I8},
    [HMOE_TYPE_F16] = {.float_bytes = 2, NO_M, NO_I8},
    [HMOE_TYPE_BF16] = {.float_bytes = 2, NO_M, NO_I8, .bf16 = true},
    /* (q - 8) d, q in 0..15: rms 4.6 d */
    [HMOE_TYPE_Q4_0] = {.d_off = 0, .d_lo = 3e-3f, NO_M, NO_I8},
    /* q d + m, m = -7.5 d centres it */
    [HMOE_TYPE_Q4_1] = {.d_off = 0, .d_lo = 3e-3f, .m_off = 2, .m_ratio = -7.5f, NO_I8},
    /* (q - 16) d, q in 0..31: rms 9.2 d */
    [HMOE_TYPE_Q5_0] = {.d_off = 0, .d_lo = 1.5e-3f, NO_M, NO_I8},
    [HMOE_TYPE_Q5_1] = {.d_off = 0, .d_lo = 1.5e-3f, .m_off = 2, .m_ratio = -15.5f, NO_I8},
    /* q d, q int8: rms 74 d (gguf_synth.py's range) */
    [HMOE_TYPE_Q8_0] = {.d_off = 0, .d_lo = 2e-4f, NO_M, NO_I8},
    /* d sc q - dmin m, sc, m in 0..15, q in 0..3: dmin = 1.5 d centres it, rms ~14 d */
    [HMOE_TYPE_Q2_K] = {.d_off = 80, .d_lo = 1e-3f, .m_off = 82, .m_ratio = 1.5f, NO_I8},
    /* d (sc - 32) q, sc 6-bit, q in -4..3: rms ~43 d */
    [HMOE_TYPE_Q3_K] = {.d_off = 108, .d_lo = 3e-4f, NO_M, NO_I8},
    /* d SC q - dmin MN: gguf_synth.py's ranges */
    [HMOE_TYPE_Q4_K] = {.d_off = 0, .d_lo = 0.8e-4f, .m_off = 2, .m_ratio = 7.5f, NO_I8},
    [HMOE_TYPE_Q5_K] = {.d_off = 0, .d_lo = 0.4e-4f, .m_off = 2, .m_ratio = 15.5f, NO_I8},
    /* d sc q, sc int8 in 8..63, q in -32..31: gguf_synth.py's ranges */
    [HMOE_TYPE_Q6_K] = {.d_off = 208, .d_lo = 2e-5f, NO_M, .i8_off = 192, .i8_n = 16, .i8_lo = 8, .i8_hi = 64},
    /* d (0.5 + s)/4 * grid value (8, 25, 43): rms ~60 d */
    [HMOE_TYPE_IQ2_XXS] = {.d_off = 0, .d_lo = 2.5e-4f, NO_M, NO_I8},
    [HMOE_TYPE_IQ2_XS] = {.d_off = 0, .d_lo = 2.5e-4f, NO_M, NO_I8},
    [HMOE_TYPE_IQ2_S] = {.d_off = 0, .d_lo = 2.5e-4f, NO_M, NO_I8},
    /* d (0.5 + s)/2 * grid value (4..62): rms ~160 d */
    [HMOE_TYPE_IQ3_XXS] = {.d_off = 0, .d_lo = 1e-4f, NO_M, NO_I8},
    /* d (1 + 2s) * grid value (odd 1..15): rms ~150 d */
    [HMOE_TYPE_IQ3_S] = {.d_off = 0, .d_lo = 1e-4f, NO_M, NO_I8},
    /* d * kvalues_iq4nl: rms 67 d */
    [HMOE_TYPE_IQ4_NL] = {.d_off = 0, .d_lo = 2e-4f, NO_M, NO_I8},
    /* d (ls - 32) * kvalues_iq4nl: rms ~1250 d */
    [HMOE_TYPE_IQ4_XS] = {.d_off = 0, .d_lo = 1.1e-5f, NO_M, NO_I8},
    /* random e2m1 codes have rms 5.85 (quants.md, gpt-oss.md "MXFP4"): 2^(e-128) of 2^-9 .. 2^-8 */
    [HMOE_TYPE_MXFP4] = {NO_M, NO_I8, .e8m0_lo = 119},
};

bool hmoe_synth_can_fill(enum hmoe_type t) {
    return (unsigned)t < HMOE_TYPE_COUNT && (recipes[t].d_lo > 0 || recipes[t].float_bytes > 0 || recipes[t].e8m0_lo > 0);
}

static void put_fp16(uint8_t *p, float v) {
    uint16_t h = hmoe_f32_to_fp16(v);
    memcpy(p, &h, 2);
}

enum hmoe_status hmoe_synth_fill_blocks(enum hmoe_type t, uint64_t seed, void *dst, size_t n_blocks,
                                        struct hmoe_err *err) {
    if (!hmoe_synth_can_fill(t))
        return HMOE_RAISE(err, HMOE_ERR_UNSUPPORTED, "synth cannot generate tensors of type %s", hmoe_type_name(t));
    const struct recipe *rc = &recipes[t];
    size_t bytes = (size_t)hmoe_type_info[t].type_size;
    struct synth_rng rng;
    synth_rng_init(&rng, seed, 0x5eed0000u + (uint64_t)t);
    uint8_t *p = dst;
    for (size_t b = 0; b < n_blocks; b++, p += bytes) {
        if (rc->float_bytes) {
            float v = (float)(0.02 * synth_rng_normal(&rng));
            if (rc->float_bytes == 4) memcpy(p, &v, 4);
            else if (rc->bf16) {
                const uint16_t h = hmoe_f32_to_bf16(v);
                memcpy(p, &h, 2);
            } else put_fp16(p, v);
            continue;
        }
        for (size_t k = 0; k < bytes; k += 8) {
            uint64_t r = synth_rng_u64(&rng);
            memcpy(p + k, &r, bytes - k < 8 ? bytes - k : 8);
        }
        if (rc->e8m0_lo) {
            p[0] = (uint8_t)(rc->e8m0_lo + synth_rng_below(&rng, 2));
            continue;
        }
        float d = rc->d_lo * (float)(1.0 + synth_rng_uniform(&rng));
        put_fp16(p + rc->d_off, d);
        if (rc->m_off >= 0) put_fp16(p + rc->m_off, rc->m_ratio * d);
        for (int k = 0; rc->i8_off >= 0 && k < rc->i8_n; k++)
            p[rc->i8_off + k] = (uint8_t)(int8_t)(rc->i8_lo + (int)synth_rng_below(&rng, (uint64_t)(rc->i8_hi - rc->i8_lo)));
    }
    return HMOE_OK;
}

static bool is_prime(size_t n) {
    if (n < 2) return false;
    for (size_t k = 2; k * k <= n; k++)
        if (n % k == 0) return false;
    return true;
}

/* The pool length is prime and at least 4093 blocks (and 1 MiB): an expert slice of B blocks
 * starts at phase (p0 + e*B) mod P, distinct for every e < P unless P divides B — so experts
 * of one tensor never repeat each other's bytes, while each write is still ≥ 1 MiB. */
enum hmoe_status synth_pool_init(struct synth_pool *pool, enum hmoe_type t, uint64_t seed, struct hmoe_err *err) {
    memset(pool, 0, sizeof *pool);
    if (!hmoe_synth_can_fill(t))
        return HMOE_RAISE(err, HMOE_ERR_UNSUPPORTED, "synth cannot generate tensors of type %s", hmoe_type_name(t));
    size_t bytes = (size_t)hmoe_type_info[t].type_size, n = (1u << 20) / bytes;
    if (n < 4093) n = 4093;
    while (!is_prime(n)) n++;
    pool->data = malloc(2 * n * bytes);
    if (!pool->data) return HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory for a %zu-byte block pool", 2 * n * bytes);
    pool->type = t;
    pool->block_bytes = bytes;
    pool->n_blocks = n;
    enum hmoe_status st = hmoe_synth_fill_blocks(t, seed, pool->data, n, err);
    if (st != HMOE_OK) {
        synth_pool_free(pool);
        return st;
    }
    memcpy(pool->data + n * bytes, pool->data, n * bytes);
    return HMOE_OK;
}

void synth_pool_free(struct synth_pool *pool) {
    free(pool->data);
    pool->data = NULL;
}
