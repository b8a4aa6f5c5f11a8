/* test_quant_props.c — properties of the reference kernels: activation quantizers obey
 * quants.md §8.1-§8.3 on hand-made inputs (ties, signs, bsums, zero blocks); weight
 * quantizers are exact on grid inputs and within half a step / nearest code on random
 * ones; and for every table type with a vec_dot_ref, on random blocks, vec_dot_ref(w, q(x))
 * equals the f64 dot of dequant_ref(w) with dequantized q(x) (vec_dot and dequant decode
 * each layout independently, so this ties the two codings; fixtures tie dequant to ggml). */
#include <stdint.h>

#include "harness.h"
#include "hmoe/common.h"
#include "hmoe/fp16.h"
#include "hmoe/quant_blocks.h"
#include "hmoe/types.h"

static uint64_t rng_state = 0x2545f4914f6cdd1dULL;
static uint32_t rnd32(void) {
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (uint32_t)((rng_state * 0x2545F4914F6CDD1DULL) >> 32);
}
static int rnd_int(int lo, int hi) { return lo + (int)(rnd32() % (uint32_t)(hi - lo + 1)); }
static double rnd_unit(void) { return (rnd32() + 0.5) / 4294967296.0; }
static float rnd_gauss(void) { return (float)(sqrt(-2.0 * log(rnd_unit())) * cos(6.283185307179586 * rnd_unit())); }

/* ---------- 1. activation quantizers ---------- */

static void act_cases(void) {
    float x[256];
    struct hmoe_block_q8_0 q0;
    struct hmoe_block_q8_1 q1;
    struct hmoe_block_q8_k qk;

    /* Q8_0 (§8.1, AVX2 path): amax 127 -> multiplier exactly 1; ties round to even. */
    static const float tie_x[9] = {127.0f, 0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 3.5f, 126.5f};
    static const int tie_q[9] = {127, 0, 2, 2, 0, -2, -2, 4, 126};
    memset(x, 0, sizeof x);
    memcpy(x, tie_x, sizeof tie_x);
    hmoe_type_info[HMOE_TYPE_Q8_0].quantize_ref(x, &q0, 32);
    int bad = q0.d == 0x3c00 ? -1 : 99;
    for (int j = 0; j < 9 && bad < 0; j++)
        if (q0.qs[j] != tie_q[j]) bad = j;
    t_check(bad < 0, "Q8_0 activations: ties to even, d = fp16(amax/127)", "element %d", bad);

    /* Multiplier 127/amax, not 1/fp16(d): amax 100 gives d = 0.787401..., stored as fp16
     * 0.78759765625. x = 50.0079: 127/100 * x = 63.510 -> 64, x / d16 = 63.494 -> 63. */
    memset(x, 0, sizeof x);
    x[0] = 100.0f;
    x[1] = 50.0079f;
    hmoe_type_info[HMOE_TYPE_Q8_0].quantize_ref(x, &q0, 32);
    t_check(q0.qs[0] == 127 && q0.qs[1] == 64 && q0.d == 0x3a4d, "Q8_0 activations: multiplier 127/amax (AVX2 path)",
            "q = %d, %d, d = 0x%04x", q0.qs[0], q0.qs[1], q0.d);

    /* Q8_1 (§8.2): same quants; s = fp16(d * Σq) with the unrounded d = 1: Σq = 257 -> 0x5c04 */
    memset(x, 0, sizeof x);
    memcpy(x, tie_x, sizeof tie_x);
    hmoe_type_info[HMOE_TYPE_Q8_1].quantize_ref(x, &q1, 32);
    bad = -1;
    for (int j = 0; j < 9 && bad < 0; j++)
        if (q1.qs[j] != tie_q[j]) bad = j;
    t_check(bad < 0 && q1.d == 0x3c00 && q1.s == 0x5c04, "Q8_1 activations: Q8_0 quants plus s = fp16(d * sum q)",
            "element %d, d 0x%04x, s 0x%04x", bad, q1.d, q1.s);

    /* Q8_K (§8.3): x_max = -127 -> iscale = 1, d = 1.0; x[30] = +127 ties |x_max| but comes
     * later, so it keeps iscale = 1 -> q = 127; half-way values go to even. */
    memset(x, 0, sizeof x);
    x[10] = -127.0f;
    x[11] = 0.5f;
    x[12] = 1.5f;
    x[13] = 2.5f;
    x[14] = -2.5f;
    x[20] = 126.5f;
    x[30] = 127.0f;
    hmoe_type_info[HMOE_TYPE_Q8_K].quantize_ref(x, &qk, 256);
    bool ok = qk.d == 1.0f && qk.qs[10] == -127 && qk.qs[11] == 0 && qk.qs[12] == 2 && qk.qs[13] == 2 &&
              qk.qs[14] == -2 && qk.qs[20] == 126 && qk.qs[30] == 127 && qk.bsums[0] == -125 && qk.bsums[1] == 253;
    for (int b = 2; b < 16; b++) ok = ok && qk.bsums[b] == 0;
    t_check(ok, "Q8_K activations: first largest |x| sets iscale, ties to even, bsums", "d %g, bsums %d %d", qk.d,
            qk.bsums[0], qk.bsums[1]);

    /* a positive x_max gives a negative d and flips every sign: x_max = 2 -> iscale -63.5,
     * -1.0 -> 63.5 -> 64 (even), d = 1/-63.5 = -2/127 in binary32 */
    memset(x, 0, sizeof x);
    x[0] = 2.0f;
    x[1] = -1.0f;
    hmoe_type_info[HMOE_TYPE_Q8_K].quantize_ref(x, &qk, 256);
    t_check(qk.qs[0] == -127 && qk.qs[1] == 64 && qk.d == (float)(-2.0 / 127.0) && qk.bsums[0] == -63,
            "Q8_K activations: positive maximum gives negative d", "q %d %d d %.9g", qk.qs[0], qk.qs[1], qk.d);

    /* all-zero blocks: d = 0, quants 0 (Q8_K: bsums 0 too) */
    memset(x, 0, sizeof x);
    memset(&qk, 0x5a, sizeof qk);
    memset(&q0, 0x5a, sizeof q0);
    hmoe_type_info[HMOE_TYPE_Q8_K].quantize_ref(x, &qk, 256);
    hmoe_type_info[HMOE_TYPE_Q8_0].quantize_ref(x, &q0, 32);
    ok = qk.d == 0.0f && q0.d == 0;
    for (int j = 0; j < 256; j++) ok = ok && qk.qs[j] == 0 && (j >= 32 || q0.qs[j] == 0);
    for (int b = 0; b < 16; b++) ok = ok && qk.bsums[b] == 0;
    t_check(ok, "Q8_0 / Q8_K activations: an all-zero block quantizes to zeros", "non-zero byte");

    /* BF16 (RNE): 1 + 2^-8 ties to 1.0 (0x3f80); 1 + 3*2^-8 ties to 1 + 2^-6 (0x3f82) */
    uint16_t h[4];
    const float bx[4] = {1.0f, 1.00390625f, 1.01171875f, -2.0f};
    hmoe_type_info[HMOE_TYPE_BF16].quantize_ref(bx, h, 4);
    t_check(h[0] == 0x3f80 && h[1] == 0x3f80 && h[2] == 0x3f82 && h[3] == 0xc000, "BF16 activations: round to nearest even",
            "0x%04x 0x%04x 0x%04x 0x%04x", h[0], h[1], h[2], h[3]);
    /* F16 (RNE): 1 + 2^-11 ties to 1.0; 1 + 3*2^-11 ties to 1 + 2^-9 */
    const float hx[4] = {1.0f, 1.00048828125f, 1.00146484375f, -0.5f};
    hmoe_type_info[HMOE_TYPE_F16].quantize_ref(hx, h, 4);
    t_check(h[0] == 0x3c00 && h[1] == 0x3c00 && h[2] == 0x3c02 && h[3] == 0xb800, "F16 activations: round to nearest even",
            "0x%04x 0x%04x 0x%04x 0x%04x", h[0], h[1], h[2], h[3]);
}

/* ---------- 2. weight quantizers ---------- */

static const int8_t iq4nl_book[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
static const int8_t mxfp4_book[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

/* Inputs on the grid of each format (quants.md §3, §5.8, §5.9, §6.1) such that the
 * quantizer's scale choice (documented in quant_weight.c) lands exactly on the grid's. */
static void grid_input(enum hmoe_type t, float *x, int n) {
    for (int b0 = 0; b0 < n; b0 += 256) {
        float *v = x + b0;
        switch (t) {
        case HMOE_TYPE_Q4_0:
            for (int j = 0; j < 256; j++) v[j] = (float)(j % 32 == 0 ? -8 : rnd_int(-8, 7)) * 0.25f;
            break;
        case HMOE_TYPE_Q5_0:
            for (int j = 0; j < 256; j++) v[j] = (float)(j % 32 == 0 ? -16 : rnd_int(-16, 15)) * 0.125f;
            break;
        case HMOE_TYPE_Q8_0:
            for (int j = 0; j < 256; j++) v[j] = (float)(j % 32 == 0 ? -127 : rnd_int(-127, 127)) * 0.015625f;
            break;
        case HMOE_TYPE_Q4_1:
            for (int j = 0; j < 256; j++) v[j] = (float)(j % 32 == 0 ? 0 : j % 32 == 1 ? 15 : rnd_int(0, 15)) * 0.125f - 1.0f;
            break;
        case HMOE_TYPE_Q5_1:
            for (int j = 0; j < 256; j++) v[j] = (float)(j % 32 == 0 ? 0 : j % 32 == 1 ? 31 : rnd_int(0, 31)) * 0.0625f - 1.0f;
            break;
        case HMOE_TYPE_IQ4_NL:
            for (int j = 0; j < 256; j++) v[j] = 0.5f * (float)iq4nl_book[j % 32 == 0 ? 0 : rnd_int(0, 15)];
            break;
        case HMOE_TYPE_IQ4_XS: /* d = 1/16; sub-block 0 has the 6-bit scale -32, the others any */
            for (int ib = 0; ib < 8; ib++) {
                int l = ib == 0 ? -32 : rnd_int(-31, 31);
                for (int j = 0; j < 32; j++) v[32 * ib + j] = 0.0625f * (float)l * (float)iq4nl_book[j == 0 ? 0 : rnd_int(0, 15)];
            }
            break;
        case HMOE_TYPE_MXFP4: /* e = 125 (scale 1/8): a code 7 (12) in each block fixes e */
            for (int j = 0; j < 256; j++) v[j] = 0.125f * (float)mxfp4_book[j % 32 == 0 ? 7 : rnd_int(0, 15)];
            break;
        default:
            break;
        }
    }
}

/* Scale of element e as stored in the block, read by this test from the quants.md layout:
 * fills *step (distance between neighbouring codes for linear formats, the code-book
 * multiplier for the others) and *m (offset). */
static void stored_scale(enum hmoe_type t, const uint8_t *row, int e, float *step, float *m) {
    const struct hmoe_type_info *ti = &hmoe_type_info[t];
    const uint8_t *b = row + (size_t)(e / ti->blck) * (size_t)ti->type_size;
    *m = 0.0f;
    if (t == HMOE_TYPE_MXFP4) {
        *step = (float)ldexp(1.0, b[0] - 128);
        return;
    }
    *step = hmoe_fp16_to_f32((uint16_t)(b[0] | (b[1] << 8)));
    if (t == HMOE_TYPE_Q4_1 || t == HMOE_TYPE_Q5_1) *m = hmoe_fp16_to_f32((uint16_t)(b[2] | (b[3] << 8)));
    if (t == HMOE_TYPE_IQ4_XS) {
        int ib = (e % 256) / 32;
        int ls = ((b[4 + ib / 2] >> (4 * (ib % 2))) & 15) | ((((b[2] | (b[3] << 8)) >> (2 * ib)) & 3) << 4);
        *step *= (float)(ls - 32);
    }
}

static void weight_quant_cases(void) {
    enum { N = 1024 };
    static float x[N], y[N];
    static uint8_t row[N * 2];
    /* rel RMS error limits on Gaussian data (N(0,1) blocks; the outlier's 256-block is left
     * out): about 1.3x what these simple quantizers reach, to catch a badly chosen scale */
    static const struct {
        enum hmoe_type t;
        int qmin, qmax; /* code range of the linear formats (0, 0 = code book) */
        double max_rel_rms;
    } types[] = {
        {HMOE_TYPE_Q4_0, -8, 7, 0.12},      {HMOE_TYPE_Q4_1, 0, 15, 0.10},   {HMOE_TYPE_Q5_0, -16, 15, 0.055},
        {HMOE_TYPE_Q5_1, 0, 31, 0.055},     {HMOE_TYPE_Q8_0, -127, 127, 0.007}, {HMOE_TYPE_IQ4_NL, 0, 0, 0.11},
        {HMOE_TYPE_IQ4_XS, 0, 0, 0.11},     {HMOE_TYPE_MXFP4, 0, 0, 0.15},
    };
    for (size_t k = 0; k < HMOE_ARRAY_LEN(types); k++) {
        enum hmoe_type t = types[k].t;
        const struct hmoe_type_info *ti = &hmoe_type_info[t];
        char name[128];
        if (!ti->quantize_weight_ref || !ti->dequant_ref) {
            snprintf(name, sizeof name, "%s weight quantizer registered", ti->name);
            t_check(0, name, "quantize_weight_ref missing");
            continue;
        }
        /* on-grid inputs come back bit for bit */
        grid_input(t, x, N);
        ti->quantize_weight_ref(x, row, N);
        ti->dequant_ref(row, y, N);
        long bad = t_first_mismatch(y, x, N, 0.0, 0.0);
        snprintf(name, sizeof name, "%s weight quantizer: grid values round-trip exactly", ti->name);
        t_check(bad < 0, name, "element %ld: %.9g -> %.9g", bad, bad >= 0 ? x[bad] : 0.0f, bad >= 0 ? y[bad] : 0.0f);

        /* Gaussian inputs, one block with an outlier, one all-zero block */
        for (int j = 0; j < N; j++) x[j] = rnd_gauss();
        x[300] = 40.0f;
        for (int j = 512; j < 768; j++) x[j] = 0.0f;
        ti->quantize_weight_ref(x, row, N);
        ti->dequant_ref(row, y, N);
        double se = 0.0, sx = 0.0;
        bad = -1;
        for (int j = 0; j < N && bad < 0; j++) {
            float step, m;
            stored_scale(t, row, j, &step, &m);
            double err = fabs((double)x[j] - y[j]), allowed;
            if (types[k].qmax > types[k].qmin) { /* half a step inside the range, plus the overshoot */
                double lo = HMOE_MIN(types[k].qmin * (double)step, types[k].qmax * (double)step) + m;
                double hi = HMOE_MAX(types[k].qmin * (double)step, types[k].qmax * (double)step) + m;
                allowed = 0.5 * fabs(step) + HMOE_MAX(0.0, HMOE_MAX(x[j] - hi, lo - x[j]));
            } else { /* the nearest value of the code book for the stored scale */
                const int8_t *book = t == HMOE_TYPE_MXFP4 ? mxfp4_book : iq4nl_book;
                allowed = INFINITY;
                for (int c = 0; c < 16; c++) allowed = HMOE_MIN(allowed, fabs((double)x[j] - (double)step * book[c]));
            }
            if (!(err <= allowed + 1e-6 * (fabs(x[j]) + fabs(step)))) bad = j;
            if (j / 256 != 300 / 256) { /* quality figure over the plain Gaussian blocks */
                se += err * err;
                sx += (double)x[j] * x[j];
            }
        }
        double rel_rms = sqrt(se / sx);
        snprintf(name, sizeof name, "%s weight quantizer: random data within bound, rel RMS %.3f <= %.2f", ti->name,
                 rel_rms, types[k].max_rel_rms);
        t_check(bad < 0 && rel_rms <= types[k].max_rel_rms, name, "element %ld: %.9g -> %.9g", bad,
                bad >= 0 ? x[bad] : 0.0f, bad >= 0 ? y[bad] : 0.0f);
    }
}

/* ---------- 3. vec_dot_ref vs float64 dot of the dequantized operands ---------- */

static uint16_t rnd_fp16_scale(void) {
    /* mostly 2^-8 .. 2^1 with either sign, sometimes an fp16 subnormal (common in K-quants) */
    int exp = rnd_int(0, 9) == 0 ? 0 : rnd_int(7, 16);
    return (uint16_t)((rnd32() & 1) << 15 | exp << 10 | (rnd32() & 1023));
}

static void put16(uint8_t *p, uint16_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

/* Random bytes with the scale fields replaced by finite values. Returns false for a type
 * whose scale fields this test does not know (so a new table row forces an update here). */
static bool random_weight_row(enum hmoe_type t, uint8_t *row, int n) {
    const struct hmoe_type_info *ti = &hmoe_type_info[t];
    size_t bytes = hmoe_row_bytes(t, n);
    if (t == HMOE_TYPE_F32) {
        for (int j = 0; j < n; j++) ((float *)row)[j] = rnd_gauss();
        return true;
    }
    if (t == HMOE_TYPE_F16 || t == HMOE_TYPE_BF16) {
        for (int j = 0; j < n; j++) {
            float v = rnd_gauss();
            put16(row + 2 * j, t == HMOE_TYPE_F16 ? hmoe_f32_to_fp16(v) : hmoe_f32_to_bf16(v));
        }
        return true;
    }
    for (size_t i = 0; i < bytes; i++) row[i] = (uint8_t)rnd32();
    int fp16_at[2] = {-1, -1}; /* byte offsets of the fp16 fields (quants.md tables) */
    switch (t) {
    case HMOE_TYPE_Q4_1: case HMOE_TYPE_Q5_1: case HMOE_TYPE_Q4_K: case HMOE_TYPE_Q5_K:
        fp16_at[0] = 0, fp16_at[1] = 2;
        break;
    case HMOE_TYPE_Q2_K:
        fp16_at[0] = 80, fp16_at[1] = 82;
        break;
    case HMOE_TYPE_Q3_K:
        fp16_at[0] = 108;
        break;
    case HMOE_TYPE_Q6_K:
        fp16_at[0] = 208;
        break;
    case HMOE_TYPE_Q4_0: case HMOE_TYPE_Q5_0: case HMOE_TYPE_Q8_0: case HMOE_TYPE_IQ2_XXS: case HMOE_TYPE_IQ2_XS:
    case HMOE_TYPE_IQ2_S: case HMOE_TYPE_IQ3_XXS: case HMOE_TYPE_IQ3_S: case HMOE_TYPE_IQ1_S: case HMOE_TYPE_IQ4_NL:
    case HMOE_TYPE_IQ4_XS: case HMOE_TYPE_Q1_0: case HMOE_TYPE_Q2_0:
        fp16_at[0] = 0;
        break;
    case HMOE_TYPE_IQ1_M: /* d is the top nibble of the four u16 scale words at 48..55 */
        for (size_t b = 0; b < bytes; b += (size_t)ti->type_size) {
            uint16_t d = rnd_fp16_scale();
            for (int w = 0; w < 4; w++) row[b + 48 + 2 * w + 1] = (uint8_t)((row[b + 48 + 2 * w + 1] & 0x0F) | (((d >> (4 * w)) & 15) << 4));
        }
        return true;
    case HMOE_TYPE_MXFP4:
        for (size_t b = 0; b < bytes; b += (size_t)ti->type_size) row[b] = (uint8_t)rnd_int(118, 132);
        return true;
    case HMOE_TYPE_NVFP4: /* every UE4M3 byte is a finite scale */
        return true;
    default:
        return false;
    }
    for (size_t b = 0; b < bytes; b += (size_t)ti->type_size)
        for (int f = 0; f < 2; f++)
            if (fp16_at[f] >= 0) put16(row + b + fp16_at[f], rnd_fp16_scale());
    return true;
}

static void vec_dot_cases(void) {
    enum { N = 512, ROWS = 12 };
    static float x[N], w[N], a[N];
    static uint8_t wrow[N * 4], arow[N * 4];
    for (int t = 0; t < HMOE_TYPE_COUNT; t++) {
        const struct hmoe_type_info *ti = &hmoe_type_info[t];
        if (!ti->vec_dot_ref) continue;
        enum hmoe_type vt = ti->vec_dot_type;
        const struct hmoe_type_info *vi = &hmoe_type_info[vt];
        char name[128];
        snprintf(name, sizeof name, "%s vec_dot_ref = f64 dot of dequant(w) and dequant(%s(x)), %d rows", ti->name,
                 vi->name, ROWS);
        if (!ti->dequant_ref || !vi->quantize_ref || !vi->dequant_ref || N % ti->blck || N % vi->blck) {
            t_check(0, name, "kernels missing");
            continue;
        }
        int bad = -1;
        double worst = 0.0;
        for (int r = 0; r < ROWS && bad < 0; r++) {
            if (!random_weight_row((enum hmoe_type)t, wrow, N)) {
                bad = 1000;
                break;
            }
            for (int j = 0; j < N; j++) x[j] = (r % 3 == 2 ? 0.05f : 1.0f) * rnd_gauss();
            if (r % 4 == 3) x[rnd_int(0, N - 1)] = 40.0f; /* outlier: a coarse activation scale */
            vi->quantize_ref(x, arow, N);
            ti->dequant_ref(wrow, w, N);
            vi->dequant_ref(arow, a, N);
            double exact = 0.0, mag = 0.0;
            for (int j = 0; j < N; j++) {
                exact += (double)w[j] * a[j];
                mag += fabs((double)w[j] * a[j]);
            }
            if (vt == HMOE_TYPE_Q8_1) {
                /* llama.cpp's offset term is m * s with the activation block's stored
                 * s = fp16(d * Σq) (§8.2), not m * fp16(d) * Σq: account for the difference */
                for (int b = 0; b < N / 32; b++) {
                    const uint8_t *wb = wrow + (size_t)b * (size_t)ti->type_size;
                    const struct hmoe_block_q8_1 *ab = (const struct hmoe_block_q8_1 *)arow + b;
                    double m = hmoe_fp16_to_f32((uint16_t)(wb[2] | (wb[3] << 8))), sq = 0.0;
                    for (int j = 0; j < 32; j++) sq += ab->qs[j];
                    exact += m * (hmoe_fp16_to_f32(ab->s) - (double)hmoe_fp16_to_f32(ab->d) * sq);
                    mag += fabs(m * hmoe_fp16_to_f32(ab->s));
                }
            }
            double got = ti->vec_dot_ref(N, wrow, arow);
            double rel = mag > 0 ? fabs(got - exact) / mag : fabs(got - exact);
            worst = HMOE_MAX(worst, rel);
            if (!(rel <= 1e-6)) bad = r;
        }
        t_check(bad < 0, name, bad == 1000 ? "no random-row recipe for this type in the test" : "row %d: error %.3g of sum|w*a|",
                bad, worst);
    }
}

int main(void) {
    act_cases();
    weight_quant_cases();
    vec_dot_cases();
    return t_summary();
}
