/* test_cpu_kernels.c — the SIMD CPU kernels (cpu.h) against llama.cpp and the references.
 *
 * For every kernel set this CPU has (scalar, avx2-novnni, avx2+vnni, avx512; forced through
 * the test hooks; a set the CPU lacks prints "skipped" with the reason) and every
 * accelerated type:
 *   - fixtures/kernels/<TYPE>.json: activations quantize to x_quant_hex byte for byte and
 *     the fixture rows × fixture activations reproduce `vec_dot` (1e-5 rel or 1e-6 abs,
 *     fixtures README §5.4) through gemv, gemm and matmul;
 *   - random blocks (random bytes, finite fp16 scales incl. subnormals) × random
 *     activations with outliers: quantized activations byte-identical to quantize_ref,
 *     gemv / gemm (ntok 1..9, row counts that are not multiples of the tiles) / matmul
 *     within tolerance of vec_dot_ref;
 *   - decode gemv of the 32-block types, IQ4_XS and Q6_K, and the Q4_K / Q5_K prefill gemm, at
 *     the bounds of their integer sums.
 * A type or path that cannot be checked prints "... skipped: why" and counts as neither.
 */
#include <stddef.h>
#include <stdint.h>

#include "harness.h"
#include "kernel_rng.h"
#include "hmoe/cpu.h"
#include "hmoe/fp16.h"
#include "hmoe/json.h"
#include "hmoe/quant_blocks.h"

#include "kernel_sets.h"


/* A finite fp16 scale: magnitudes from fp16 subnormals (K-quant files have many) to 0.1. */
static uint16_t rng_fp16_scale(void) {
    float mag = powf(10.0f, -7.0f + 6.0f * rng_unit());
    return hmoe_f32_to_fp16(rng_u64() & 1 ? -mag : mag);
}

/* Offsets of the fp16 fields inside one block of each quantized weight type; random bytes
 * there would often be Inf/NaN, which tells nothing about the kernels. */
struct fp16_fields {
    enum hmoe_type type;
    int n;
    size_t off[2];
};
static const struct fp16_fields fp16_fields[] = {
    {HMOE_TYPE_Q4_K, 2, {offsetof(struct hmoe_block_q4_k, d), offsetof(struct hmoe_block_q4_k, dmin)}},
    {HMOE_TYPE_Q5_K, 2, {offsetof(struct hmoe_block_q5_k, d), offsetof(struct hmoe_block_q5_k, dmin)}},
    {HMOE_TYPE_Q6_K, 1, {offsetof(struct hmoe_block_q6_k, d)}},
    {HMOE_TYPE_Q2_K, 2, {offsetof(struct hmoe_block_q2_k, d), offsetof(struct hmoe_block_q2_k, dmin)}},
    {HMOE_TYPE_Q3_K, 1, {offsetof(struct hmoe_block_q3_k, d)}},
    {HMOE_TYPE_Q8_0, 1, {offsetof(struct hmoe_block_q8_0, d)}},
    {HMOE_TYPE_Q5_0, 1, {offsetof(struct hmoe_block_q5_0, d)}},
    {HMOE_TYPE_Q4_0, 1, {offsetof(struct hmoe_block_q4_0, d)}},
    {HMOE_TYPE_Q4_1, 2, {offsetof(struct hmoe_block_q4_1, d), offsetof(struct hmoe_block_q4_1, m)}},
    {HMOE_TYPE_Q5_1, 2, {offsetof(struct hmoe_block_q5_1, d), offsetof(struct hmoe_block_q5_1, m)}},
    {HMOE_TYPE_IQ2_XXS, 1, {offsetof(struct hmoe_block_iq2_xxs, d)}},
    {HMOE_TYPE_IQ2_XS, 1, {offsetof(struct hmoe_block_iq2_xs, d)}},
    {HMOE_TYPE_IQ2_S, 1, {offsetof(struct hmoe_block_iq2_s, d)}},
    {HMOE_TYPE_IQ3_XXS, 1, {offsetof(struct hmoe_block_iq3_xxs, d)}},
    {HMOE_TYPE_IQ3_S, 1, {offsetof(struct hmoe_block_iq3_s, d)}},
    {HMOE_TYPE_IQ4_XS, 1, {offsetof(struct hmoe_block_iq4_xs, d)}},
    {HMOE_TYPE_IQ4_NL, 1, {offsetof(struct hmoe_block_iq4_nl, d)}},
    {HMOE_TYPE_IQ1_S, 1, {offsetof(struct hmoe_block_iq1_s, d)}},
};

/* Fill `nrows` rows of `ncols` random weights of type t. */
static void rng_weights(enum hmoe_type t, int64_t ncols, int64_t nrows, uint8_t *w) {
    const struct hmoe_type_info *ti = &hmoe_type_info[t];
    size_t bytes = hmoe_row_bytes(t, ncols) * (size_t)nrows;
    if (t == HMOE_TYPE_F32 || t == HMOE_TYPE_F16 || t == HMOE_TYPE_BF16) {
        for (size_t e = 0; e < bytes / (size_t)ti->type_size; e++) {
            float v = 0.05f * rng_normal();
            if (t == HMOE_TYPE_F32)
                memcpy(w + 4 * e, &v, 4);
            else {
                uint16_t h = t == HMOE_TYPE_F16 ? hmoe_f32_to_fp16(v) : hmoe_f32_to_bf16(v);
                memcpy(w + 2 * e, &h, 2);
            }
        }
        return;
    }
    for (size_t i = 0; i < bytes; i++) w[i] = (uint8_t)rng_u64();
    for (size_t k = 0; k < HMOE_ARRAY_LEN(fp16_fields); k++) {
        if (fp16_fields[k].type != t) continue;
        for (size_t b = 0; b < bytes / (size_t)ti->type_size; b++)
            for (int f = 0; f < fp16_fields[k].n; f++) {
                uint16_t h = rng_fp16_scale();
                memcpy(w + b * (size_t)ti->type_size + fp16_fields[k].off[f], &h, 2);
            }
    }
    if (t == HMOE_TYPE_MXFP4) /* E8M0 scales 2^-128 .. 2^7: the binary32 subnormals of e = 0, 1 included */
        for (size_t b = 0; b < bytes / (size_t)ti->type_size; b++) {
            const uint64_t u = rng_u64();
            w[b * (size_t)ti->type_size] = (uint8_t)(u % 8 == 0 ? (u >> 8) % 2 : 100 + (u >> 8) % 36);
        }
    if (t == HMOE_TYPE_IQ1_M) /* d is scattered over the top nibbles of the four scale words (§5.7) */
        for (size_t b = 0; b < bytes / (size_t)ti->type_size; b++) {
            uint8_t *sc = w + b * (size_t)ti->type_size + offsetof(struct hmoe_block_iq1_m, scales);
            uint16_t h = rng_fp16_scale();
            for (int j = 0; j < 4; j++) sc[2 * j + 1] = (uint8_t)((sc[2 * j + 1] & 0x0f) | ((h >> (4 * j)) & 15) << 4);
        }
}


/* The kernel set in use in words (avx2 / avx2+vnni tell the AVX2 path's two sets apart). */
static const char *path_tag(enum hmoe_cpu_path p) {
    (void)p;
    return hmoe_cpu_isa_name();
}

/* ---------------- fixture checks ---------------- */

static const char *const fixture_types[] = {"Q4_K", "Q6_K",    "Q5_K",   "Q8_0",  "F16",
                                            "Q2_K", "IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ3_S"};

static void check_fixture(const char *tname, enum hmoe_cpu_path path) {
    char name[160], file[64];
    snprintf(file, sizeof file, "fixtures/kernels/%s.json", tname);
    struct hmoe_err err = {0};
    struct hmoe_json *j = hmoe_json_parse_file(t_shared(file), &err);
    snprintf(name, sizeof name, "[%s] fixture %s loads", path_tag(path), tname);
    if (!j) {
        t_check(0, name, "%s", err.msg);
        return;
    }
    enum hmoe_type wt;
    if (!hmoe_type_from_name(tname, &wt)) {
        t_check(0, name, "unknown type name");
        hmoe_json_free(j);
        return;
    }
    enum hmoe_type at = hmoe_type_info[wt].vec_dot_type;
    int64_t ncols = (int64_t)hmoe_json_get_num(j, "row_elems", 0);
    size_t row_bytes = (size_t)hmoe_json_get_num(j, "row_bytes", 0);
    size_t act_bytes = hmoe_cpu_act_bytes(wt, ncols);
    const struct hmoe_json *rows = hmoe_json_get(j, "rows"), *acts = hmoe_json_get(j, "activations"),
                           *dots = hmoe_json_get(j, "dots");
    if (!rows || !acts || !dots || ncols <= 0 || row_bytes != hmoe_row_bytes(wt, ncols)) {
        t_check(0, name, "missing rows/activations/dots or inconsistent row size");
        hmoe_json_free(j);
        return;
    }
    if (!hmoe_cpu_supports(wt)) {
        printf("[%s] fixture %s ... skipped: no reference kernels for %s yet\n", path_tag(path), tname, tname);
        hmoe_json_free(j);
        return;
    }
    size_t nr = rows->n, na = acts->n;
    uint8_t *w = calloc(nr, row_bytes), *xq = calloc(na, act_bytes), *xq_ours = calloc(na, act_bytes);
    float *x = calloc(na * (size_t)ncols, sizeof(float));
    int bad_hex = 0;
    for (size_t r = 0; r < nr; r++)
        bad_hex |= hmoe_hex_decode(hmoe_json_get_str(rows->items[r], "raw_hex", ""), w + r * row_bytes, row_bytes) !=
                   (long)row_bytes;
    for (size_t a = 0; a < na; a++) {
        bad_hex |= hmoe_hex_decode(hmoe_json_get_str(acts->items[a], "x_quant_hex", ""), xq + a * act_bytes,
                                   act_bytes) != (long)act_bytes;
        const struct hmoe_json *xa = hmoe_json_get(acts->items[a], "x");
        if (!xa || xa->n != (size_t)ncols)
            bad_hex = 1;
        else
            for (int64_t i = 0; i < ncols; i++) x[a * (size_t)ncols + (size_t)i] = (float)xa->items[i]->num;
    }
    t_check(!bad_hex, name, "bad hex or activation length");
    if (bad_hex) goto done;

    /* Activation quantization through the dispatched (SIMD) quantizer: byte-exact. */
    int qbad = -1;
    for (size_t a = 0; a < na; a++) {
        hmoe_cpu_quantize_act(wt, x + a * (size_t)ncols, xq_ours + a * act_bytes, ncols);
        if (memcmp(xq_ours + a * act_bytes, xq + a * act_bytes, act_bytes) != 0 && qbad < 0) qbad = (int)a;
    }
    snprintf(name, sizeof name, "[%s] fixture %s: x quantizes to x_quant_hex (%s)", path_tag(path), tname,
             hmoe_type_info[at].name);
    t_check(qbad < 0, name, "activation %d differs", qbad);

    /* Dot products: gemv per row range, gemm over all activations, matmul. */
    float *y = calloc(nr * na, sizeof(float)), *y2 = calloc(nr * na, sizeof(float));
    for (size_t a = 0; a < na; a++)
        hmoe_cpu_gemv(wt, ncols, w, row_bytes, 0, (int64_t)nr, xq + a * act_bytes, y + a * nr);
    hmoe_cpu_gemm(wt, ncols, w, row_bytes, 0, (int64_t)nr, xq, act_bytes, (int64_t)na, y2, nr);
    int gv_bad = -1, gm_bad = -1;
    float gv_got = 0, gm_got = 0, want_at = 0;
    for (size_t k = 0; k < dots->n; k++) {
        int ri = (int)hmoe_json_get_num(dots->items[k], "row_index", -1);
        int ai = (int)hmoe_json_get_num(dots->items[k], "act_index", -1);
        float want = (float)hmoe_json_get_num(dots->items[k], "vec_dot", 0);
        if (ri < 0 || ai < 0 || (size_t)ri >= nr || (size_t)ai >= na) {
            gv_bad = (int)k;
            continue;
        }
        if (wt == HMOE_TYPE_F16) {
            /* The fixture machine accumulated F16 dots in fp16 (AVX512-FP16; every F16.json
             * vec_dot is an fp16 value, see tests/test_quant_fixtures.c), which no 1e-5
             * tolerance can meet. Compare with the exact dot of llama.cpp's own dequantized
             * row and quantized activation instead (both from the fixture). */
            const struct hmoe_json *dq = hmoe_json_get(rows->items[ri], "dequant");
            const struct hmoe_json *xd = hmoe_json_get(acts->items[ai], "x_quant_dequant");
            double exact = 0;
            for (int64_t e = 0; dq && xd && e < ncols && (size_t)e < dq->n && (size_t)e < xd->n; e++)
                exact += dq->items[e]->num * xd->items[e]->num;
            want = (float)exact;
        }
        float g1 = y[(size_t)ai * nr + (size_t)ri], g2 = y2[(size_t)ai * nr + (size_t)ri];
        if (!close_enough(g1, want) && gv_bad < 0) gv_bad = (int)k, gv_got = g1, want_at = want;
        if (!close_enough(g2, want) && gm_bad < 0) gm_bad = (int)k, gm_got = g2, want_at = want;
    }
    const char *what = wt == HMOE_TYPE_F16 ? "the exact dot of dequant and x_quant_dequant" : "vec_dot";
    snprintf(name, sizeof name, "[%s] fixture %s: gemv matches %s", path_tag(path), tname, what);
    t_check(gv_bad < 0, name, "dot %d: got %.9g want %.9g", gv_bad, gv_got, want_at);
    snprintf(name, sizeof name, "[%s] fixture %s: gemm matches %s", path_tag(path), tname, what);
    t_check(gm_bad < 0, name, "dot %d: got %.9g want %.9g", gm_bad, gm_got, want_at);
    free(y);
    free(y2);
done:
    free(w);
    free(xq);
    free(xq_ours);
    free(x);
    hmoe_json_free(j);
}

/* ---------------- random checks against the references ---------------- */

static const enum hmoe_type random_types[] = {
    HMOE_TYPE_Q4_K,    HMOE_TYPE_Q6_K,    HMOE_TYPE_Q5_K,  HMOE_TYPE_Q8_0,    HMOE_TYPE_F32,    HMOE_TYPE_F16,
    HMOE_TYPE_BF16,    HMOE_TYPE_Q2_K,    HMOE_TYPE_Q3_K,  HMOE_TYPE_IQ2_XXS, HMOE_TYPE_IQ2_XS, HMOE_TYPE_IQ2_S,
    HMOE_TYPE_IQ3_XXS, HMOE_TYPE_IQ3_S,   HMOE_TYPE_IQ4_XS, HMOE_TYPE_IQ4_NL, HMOE_TYPE_IQ1_S,  HMOE_TYPE_IQ1_M,  HMOE_TYPE_Q5_0,
    HMOE_TYPE_MXFP4,   HMOE_TYPE_Q4_0,    HMOE_TYPE_Q4_1,  HMOE_TYPE_Q5_1};

/* Quantized activations of the dispatched quantizer are byte-identical to quantize_ref. */
static void check_quantize(enum hmoe_type at, enum hmoe_cpu_path path) {
    char name[160];
    const struct hmoe_type_info *ai = &hmoe_type_info[at];
    snprintf(name, sizeof name, "[%s] quantize %s matches quantize_ref", path_tag(path), ai->name);
    if (!ai->quantize_ref) {
        printf("%s ... skipped: no quantize_ref for %s yet\n", name, ai->name);
        return;
    }
    /* Any weight type whose activation type is `at`. */
    enum hmoe_type wt = at;
    for (int t = 0; t < HMOE_TYPE_COUNT; t++)
        if (hmoe_type_info[t].vec_dot_type == at && hmoe_type_info[t].blck) {
            wt = (enum hmoe_type)t;
            break;
        }
    const int64_t b = ai->blck;
    const int64_t sizes[] = {b, 2 * b, 7 * b, 16 * b, b == 1 ? 17 : 3 * b, b == 1 ? 1001 : 11 * b};
    int bad = 0;
    char detail[128] = "";
    for (int rep = 0; rep < 24 && !bad; rep++) {
        for (size_t s = 0; s < HMOE_ARRAY_LEN(sizes) && !bad; s++) {
            int64_t n = sizes[s];
            float *x = malloc((size_t)n * sizeof(float));
            rng_acts(x, n);
            if (rep == 1) /* specials: ties at ±max, subnormals, huge values */
                for (int64_t i = 0; i < n; i++)
                    x[i] = (i % 3 == 0) ? 1e-40f * (float)(i + 1) : (i % 3 == 1 ? 2.5f : -2.5f);
            if (rep == 2)
                for (int64_t i = 0; i < n; i++) x[i] = (i & 1 ? -1.0f : 1.0f) * (65519.0f + (float)i);
            if (rep == 3) /* non-finite values: the SIMD code must treat them as the reference does */
                for (int64_t i = 0; i < n; i += 7) x[i] = i % 3 == 0 ? NAN : (i % 3 == 1 ? INFINITY : -NAN);
            if (rep == 4) /* a tie of |x| between +m and -m: the first one sets the sign of d */
                for (int64_t i = 0; i < n; i += 13) x[i] = (i / 13) % 2 ? 50.0f : -50.0f;
            if (rep == 5) /* an all-NaN block */
                for (int64_t i = 0; i < n && i < 256; i++) x[i] = NAN;
            if (rep == 6) { /* bit patterns: signalling / payload NaNs, subnormals, max, bf16 and fp16 ties */
                static const uint32_t pat[] = {0x7f800001u, 0xff800123u, 0x7fc01234u, 0x00000001u, 0x807fffffu,
                                               0x7f7fffffu, 0x3f808000u, 0x3f818000u, 0x33000000u, 0x477ff000u,
                                               0x38800000u, 0x387fe000u, 0x00400000u, 0xc0000000u};
                for (int64_t i = 0; i < n; i++) memcpy(&x[i], &pat[(size_t)i % HMOE_ARRAY_LEN(pat)], 4);
            }
            size_t nb = hmoe_row_bytes(at, n);
            uint8_t *q1 = malloc(nb), *q2 = malloc(nb);
            memset(q1, 0xa5, nb);
            memset(q2, 0xa5, nb);
            ai->quantize_ref(x, q1, n);
            hmoe_cpu_quantize_act(wt, x, q2, n);
            if (memcmp(q1, q2, nb) != 0) {
                size_t k = 0;
                while (q1[k] == q2[k]) k++;
                snprintf(detail, sizeof detail, "rep %d n=%lld: byte %zu is %02x, ref %02x", rep, (long long)n, k,
                         q2[k], q1[k]);
                bad = 1;
            }
            free(x);
            free(q1);
            free(q2);
        }
    }
    t_check(!bad, name, "%s", detail);
}

/* gemv, gemm and matmul of random weights against vec_dot_ref, for several shapes. */
static void check_dots(enum hmoe_type wt, enum hmoe_cpu_path path) {
    const struct hmoe_type_info *ti = &hmoe_type_info[wt];
    char name[160];
    snprintf(name, sizeof name, "[%s] %s gemv/gemm/matmul match vec_dot_ref", path_tag(path), ti->name);
    if (!hmoe_cpu_supports(wt)) {
        printf("%s ... skipped: no reference kernels for %s yet\n", name, ti->name);
        return;
    }
    const int64_t b = ti->blck == 1 ? 16 : ti->blck;
    /* (ncols, nrows): one block; many blocks; rows off every tile multiple (4 in gemv, 16 and
     * 64 in gemm chunks); rows too long for the prepared-activation buffers of gemm and of the
     * decode kernels (their fallbacks, with fewer and with more rows than one decode tile) */
    const int64_t shapes[][2] = {
        {b, 1}, {b, 5}, {8 * b, 17}, {3 * b, 33}, {11 * b, 7}, {2048 / b * b, 19}, {2 * b, 67}, {232 * 256 / b * b, 3},
        {232 * 256 / b * b, 5}};
    const int64_t float_shapes[][2] = {{1, 3}, {17, 5}, {100, 9}, {1001, 4}}; /* tails: ncols % 16 != 0 */
    int bad = 0;
    char detail[200] = "";
    for (size_t s = 0; s < HMOE_ARRAY_LEN(shapes) + (ti->blck == 1 ? HMOE_ARRAY_LEN(float_shapes) : 0) && !bad; s++) {
        int64_t ncols = s < HMOE_ARRAY_LEN(shapes) ? shapes[s][0] : float_shapes[s - HMOE_ARRAY_LEN(shapes)][0];
        int64_t nrows = s < HMOE_ARRAY_LEN(shapes) ? shapes[s][1] : float_shapes[s - HMOE_ARRAY_LEN(shapes)][1];
        size_t row_bytes = hmoe_row_bytes(wt, ncols), act_bytes = hmoe_cpu_act_bytes(wt, ncols);
        const int64_t ntok_max = 9;
        uint8_t *w = malloc(row_bytes * (size_t)nrows), *xq = malloc(act_bytes * (size_t)ntok_max);
        float *x = malloc(sizeof(float) * (size_t)(ncols * ntok_max));
        float *ref = malloc(sizeof(float) * (size_t)(nrows * ntok_max)),
              *y = malloc(sizeof(float) * (size_t)(nrows * ntok_max));
        rng_weights(wt, ncols, nrows, w);
        for (int64_t t = 0; t < ntok_max; t++) {
            rng_acts(x + t * ncols, ncols);
            hmoe_type_info[ti->vec_dot_type].quantize_ref(x + t * ncols, xq + (size_t)t * act_bytes, ncols);
            for (int64_t r = 0; r < nrows; r++)
                ref[t * nrows + r] = ti->vec_dot_ref(ncols, w + (size_t)r * row_bytes, xq + (size_t)t * act_bytes);
        }
        /* Float weights: f32 sums of tens of thousands of products in another order differ from
         * the reference by rounding relative to sum |w x|, not to the (possibly cancelled) result.
         * Q4_1 / Q5_1 (x = d q + m) against Q8_1: relative to the block terms the kernels sum,
         * sum |d da sum q a| + |m s|, which cancel when d q and m do. */
        float *mag = NULL;
        if (wt == HMOE_TYPE_Q4_1 || wt == HMOE_TYPE_Q5_1) {
            mag = calloc((size_t)(nrows * ntok_max), sizeof *mag);
            const bool five = wt == HMOE_TYPE_Q5_1;
            for (int64_t r = 0; r < nrows; r++)
                for (int64_t t = 0; t < ntok_max; t++) {
                    const uint8_t *wr = w + (size_t)r * row_bytes;
                    const struct hmoe_block_q8_1 *a = (const struct hmoe_block_q8_1 *)(xq + (size_t)t * act_bytes);
                    double m = 0;
                    for (int64_t i = 0; i < ncols / 32; i++) {
                        const uint8_t *blk = wr + (size_t)i * ti->type_size;
                        uint16_t d, mn;
                        memcpy(&d, blk, 2), memcpy(&mn, blk + 2, 2);
                        uint32_t qh = 0;
                        if (five) memcpy(&qh, blk + 4, 4);
                        const uint8_t *qs = blk + (five ? 8 : 4);
                        double sq = 0;
                        for (int e = 0; e < 32; e++) {
                            const int q = (e < 16 ? qs[e] & 15 : qs[e - 16] >> 4) | (int)(((qh >> e) & 1) << 4);
                            sq += q * fabs((double)a[i].qs[e]);
                        }
                        m += fabs((double)hmoe_fp16_to_f32(d) * hmoe_fp16_to_f32(a[i].d)) * sq +
                             fabs((double)hmoe_fp16_to_f32(mn) * hmoe_fp16_to_f32(a[i].s));
                    }
                    mag[t * nrows + r] = (float)m;
                }
        }
        if (ti->blck == 1) {
            mag = calloc((size_t)(nrows * ntok_max), sizeof *mag);
            float *wr = malloc(sizeof(float) * (size_t)ncols);
            for (int64_t r = 0; r < nrows; r++) {
                ti->dequant_ref(w + (size_t)r * row_bytes, wr, ncols);
                for (int64_t t = 0; t < ntok_max; t++) {
                    double m = 0;
                    for (int64_t i = 0; i < ncols; i++) m += fabs((double)wr[i] * x[t * ncols + i]);
                    mag[t * nrows + r] = (float)m;
                }
            }
            free(wr);
        }
#define DOT_OK(got, at) (close_enough((got), ref[at]) || (mag && fabsf((got) - ref[at]) <= 1e-6f * mag[at]))
        /* gemv over a sub-range too (r0 > 0) */
        for (int64_t t = 0; t < ntok_max && !bad; t++) {
            int64_t r0 = nrows > 2 ? 1 : 0;
            hmoe_cpu_gemv(wt, ncols, w, row_bytes, r0, nrows, xq + (size_t)t * act_bytes, y);
            for (int64_t r = r0; r < nrows && !bad; r++)
                if (!DOT_OK(y[r - r0], t * nrows + r))
                    bad = snprintf(detail, sizeof detail, "gemv ncols %lld row %lld tok %lld: %.9g vs ref %.9g",
                                   (long long)ncols, (long long)r, (long long)t, y[r - r0], ref[t * nrows + r]);
        }
        for (int64_t ntok = 1; ntok <= ntok_max && !bad; ntok++) {
            for (size_t i = 0; i < (size_t)(nrows * ntok_max); i++) y[i] = NAN;
            hmoe_cpu_gemm(wt, ncols, w, row_bytes, 0, nrows, xq, act_bytes, ntok, y, (size_t)nrows);
            for (int64_t t = 0; t < ntok && !bad; t++)
                for (int64_t r = 0; r < nrows && !bad; r++)
                    if (!DOT_OK(y[t * nrows + r], t * nrows + r))
                        bad = snprintf(detail, sizeof detail,
                                       "gemm ntok %lld ncols %lld row %lld tok %lld: %.9g vs ref %.9g", (long long)ntok,
                                       (long long)ncols, (long long)r, (long long)t, y[t * nrows + r],
                                       ref[t * nrows + r]);
        }
        if (!bad) {
            uint8_t *scratch = malloc(act_bytes * (size_t)ntok_max);
            hmoe_cpu_matmul(wt, ncols, nrows, w, row_bytes, x, (size_t)ncols, ntok_max, y, (size_t)nrows, scratch);
            for (int64_t i = 0; i < nrows * ntok_max && !bad; i++)
                if (!DOT_OK(y[i], i))
                    bad = snprintf(detail, sizeof detail, "matmul ncols %lld out %lld: %.9g vs ref %.9g",
                                   (long long)ncols, (long long)i, y[i], ref[i]);
            free(scratch);
        }
#undef DOT_OK
        free(mag);
        free(w);
        free(xq);
        free(x);
        free(ref);
        free(y);
    }
    t_check(!bad, name, "%s", detail);
}

/* Prefill gemm of the K-quants and the 32-element block types over token counts past
 * check_dots' 9: whole tiles of 4-token groups (up to 16 tokens), a tile of fewer groups and
 * 1..3 tokens after them, and rows long enough (8192 columns) that the prepared-activation
 * buffer holds fewer tokens per tile, in more than one row chunk (117 rows: the Q4_K gemm's
 * 512 KiB chunks hold 113, the 32-element types' chunks 64 rows). */
static void check_wide_gemm(enum hmoe_type wt, enum hmoe_cpu_path path) {
    const struct hmoe_type_info *ti = &hmoe_type_info[wt];
    char name[160], detail[200] = "";
    snprintf(name, sizeof name, "[%s] %s gemm over 12..37 tokens matches vec_dot_ref", path_tag(path), ti->name);
    const int64_t shapes[][2] = {{2048, 67}, {8192, 117}, {768, 9}};
    const int64_t ntoks[] = {12, 16, 17, 23, 37};
    enum { NTOK_MAX = 37 };
    int bad = 0;
    for (size_t s = 0; s < HMOE_ARRAY_LEN(shapes) && !bad; s++) {
        const int64_t ncols = shapes[s][0], nrows = shapes[s][1];
        const size_t rb = hmoe_row_bytes(wt, ncols), ab = hmoe_cpu_act_bytes(wt, ncols);
        uint8_t *w = malloc(rb * (size_t)nrows), *xq = malloc(ab * NTOK_MAX);
        float *x = malloc(sizeof(float) * (size_t)ncols), *ref = malloc(sizeof(float) * (size_t)(nrows * NTOK_MAX)),
              *y = malloc(sizeof(float) * (size_t)(nrows * NTOK_MAX));
        rng_weights(wt, ncols, nrows, w);
        for (int64_t t = 0; t < NTOK_MAX; t++) {
            rng_acts(x, ncols);
            hmoe_type_info[ti->vec_dot_type].quantize_ref(x, xq + (size_t)t * ab, ncols);
            for (int64_t r = 0; r < nrows; r++)
                ref[t * nrows + r] = ti->vec_dot_ref(ncols, w + (size_t)r * rb, xq + (size_t)t * ab);
        }
        for (size_t k = 0; k < HMOE_ARRAY_LEN(ntoks) && !bad; k++) {
            const int64_t ntok = ntoks[k];
            for (int64_t i = 0; i < nrows * NTOK_MAX; i++) y[i] = NAN;
            hmoe_cpu_gemm(wt, ncols, w, rb, 0, nrows, xq, ab, ntok, y, (size_t)nrows);
            for (int64_t t = 0; t < ntok && !bad; t++)
                for (int64_t r = 0; r < nrows && !bad; r++)
                    if (!close_enough(y[t * nrows + r], ref[t * nrows + r]))
                        bad = snprintf(detail, sizeof detail, "ncols %lld ntok %lld row %lld tok %lld: %.9g vs ref %.9g",
                                       (long long)ncols, (long long)ntok, (long long)r, (long long)t,
                                       y[t * nrows + r], ref[t * nrows + r]);
        }
        free(w), free(xq), free(x), free(ref), free(y);
    }
    t_check(!bad, name, "%s", detail);
}

/* Decode gemv at the bounds of the integer sums: every weight at the type's largest
 * magnitude (Q8_0 -128, Q5_0 -16, MXFP4 code -12, IQ4_NL value -127, IQ4_XS value -127 with
 * scale -32, Q6_K 0 with scale -128), activations all +127 or all -127, 9 rows (two 4-row tiles and a remainder) of
 * 2048 columns: the kernels' exact-sum bounds (no saturating vpmaddubsw pair, exact packs,
 * unsigned offsets) hold or the result moves far from vec_dot_ref. */
static void check_extreme_dec(enum hmoe_type wt, enum hmoe_cpu_path path) {
    const struct hmoe_type_info *ti = &hmoe_type_info[wt];
    char name[160], detail[200] = "";
    snprintf(name, sizeof name, "[%s] %s decode gemv: largest weights x activations +127 / -127 exact", path_tag(path),
             ti->name);
    const int64_t ncols = 2048, nrows = 9;
    const size_t rb = hmoe_row_bytes(wt, ncols), bs = (size_t)ti->type_size, nblk = rb * (size_t)nrows / bs;
    uint8_t *w = malloc(rb * (size_t)nrows), *xq = malloc(hmoe_cpu_act_bytes(wt, ncols));
    float *x = malloc(sizeof(float) * (size_t)ncols), y[9];
    const uint16_t one = hmoe_f32_to_fp16(1.0f);
    for (size_t b = 0; b < nblk; b++) {
        uint8_t *blk = w + b * bs;
        switch (wt) {
        case HMOE_TYPE_Q8_0: memcpy(blk, &one, 2), memset(blk + 2, 0x80, bs - 2); break;
        case HMOE_TYPE_Q5_0: memcpy(blk, &one, 2), memset(blk + 2, 0x00, bs - 2); break;
        case HMOE_TYPE_Q4_0: memcpy(blk, &one, 2), memset(blk + 2, 0x00, bs - 2); break; /* all -8 */
        case HMOE_TYPE_IQ4_NL: memcpy(blk, &one, 2), memset(blk + 2, 0x00, bs - 2); break; /* all -127 */
        case HMOE_TYPE_MXFP4: blk[0] = 128, memset(blk + 1, 0xff, bs - 1); break;
        case HMOE_TYPE_IQ4_XS: memcpy(blk, &one, 2), memset(blk + 2, 0x00, bs - 2); break;
        case HMOE_TYPE_Q6_K:
            memset(blk, 0x00, bs);
            memset(blk + offsetof(struct hmoe_block_q6_k, scales), 0x80, 16);
            memcpy(blk + offsetof(struct hmoe_block_q6_k, d), &one, 2);
            break;
        default: break;
        }
    }
    int ok = 1;
    for (int sgn = 0; sgn < 2 && ok; sgn++) {
        for (int64_t i = 0; i < ncols; i++) x[i] = sgn ? -1.0f : 1.0f;
        hmoe_cpu_quantize_act(wt, x, xq, ncols);
        hmoe_cpu_gemv(wt, ncols, w, rb, 0, nrows, xq, y);
        for (int64_t r = 0; r < nrows && ok; r++) {
            const float want = ti->vec_dot_ref(ncols, w + (size_t)r * rb, xq);
            if (!close_enough(y[r], want)) {
                snprintf(detail, sizeof detail, "activations %s1, row %lld: %.9g vs ref %.9g", sgn ? "-" : "+",
                         (long long)r, y[r], want);
                ok = 0;
            }
        }
    }
    t_check(ok, name, "%s", detail);
    free(w), free(xq), free(x);
}

/* Prefill gemm of Q4_K / Q5_K / Q6_K at the bounds of their integer sums: every quant, qh bit,
 * scale and min at its largest magnitude (all bytes 0xff: Q6_K values 63, scales -1; d = dmin
 * = 1), activations all +127 or all -127,
 * 19 tokens (a full 16-token tile of 4-token groups and a 3-token remainder; 8-token tiles
 * for the 1-row tile) × 5 rows of 2048 columns: the int16 sums of the plain-AVX2 tiles and the
 * packed int32 sums of the AVX-VNNI ones stay exact, or the result moves far from vec_dot_ref. */
static void check_extreme_gemm(enum hmoe_type wt, enum hmoe_cpu_path path) {
    const struct hmoe_type_info *ti = &hmoe_type_info[wt];
    char name[160], detail[200] = "";
    snprintf(name, sizeof name, "[%s] %s gemm: largest weights x activations +127 / -127 exact", path_tag(path),
             ti->name);
    enum { NCOLS = 2048, NROWS = 5, NTOK = 19 };
    const size_t rb = hmoe_row_bytes(wt, NCOLS), bs = (size_t)ti->type_size, nblk = rb * NROWS / bs;
    const size_t ab = hmoe_cpu_act_bytes(wt, NCOLS);
    uint8_t *w = malloc(rb * NROWS), *xq = malloc(ab * NTOK);
    float *x = malloc(sizeof(float) * NCOLS), *y = malloc(sizeof(float) * NROWS * NTOK);
    const uint16_t one = hmoe_f32_to_fp16(1.0f);
    int ok = w && xq && x && y;
    for (size_t b = 0; ok && b < nblk; b++) {
        memset(w + b * bs, 0xff, bs);
        if (wt == HMOE_TYPE_Q6_K) {
            memcpy(w + b * bs + offsetof(struct hmoe_block_q6_k, d), &one, 2);
            continue;
        }
        memcpy(w + b * bs, &one, 2);     /* d */
        memcpy(w + b * bs + 2, &one, 2); /* dmin */
    }
    for (int sgn = 0; sgn < 2 && ok; sgn++) {
        for (int64_t i = 0; i < NCOLS; i++) x[i] = sgn ? -1.0f : 1.0f;
        for (int t = 0; t < NTOK; t++) hmoe_cpu_quantize_act(wt, x, xq + (size_t)t * ab, NCOLS);
        hmoe_cpu_gemm(wt, NCOLS, w, rb, 0, NROWS, xq, ab, NTOK, y, NROWS);
        for (int t = 0; t < NTOK && ok; t++)
            for (int64_t r = 0; r < NROWS && ok; r++) {
                const float want = ti->vec_dot_ref(NCOLS, w + (size_t)r * rb, xq + (size_t)t * ab);
                if (!close_enough(y[t * NROWS + r], want)) {
                    snprintf(detail, sizeof detail, "activations %s1, token %d row %lld: %.9g vs ref %.9g",
                             sgn ? "-" : "+", t, (long long)r, y[t * NROWS + r], want);
                    ok = 0;
                }
            }
    }
    t_check(ok, name, "%s", ok || detail[0] ? detail : "out of memory");
    free(w), free(xq), free(x), free(y);
}

/* hmoe_cpu_init() reads HMOE_CPU: a valid name picks that path (capped at the CPU's best),
 * anything else keeps the best path. */
static void check_env_override(void) {
    const enum hmoe_cpu_path best = hmoe_cpu_force_path(HMOE_CPU_AVX512);
    static const struct {
        const char *value;
        enum hmoe_cpu_path want;
    } cases[] = {{"scalar", HMOE_CPU_SCALAR},
                 {"AVX2", HMOE_CPU_AVX2},
                 {"avx2-novnni", HMOE_CPU_AVX2},
                 {"avx512", HMOE_CPU_AVX512},
                 {"sse9", 99}};
    int bad = -1;
    enum hmoe_log_level saved = hmoe_log_level;
    hmoe_log_level = HMOE_LOG_ERROR; /* the bad value's warning is expected */
    for (size_t i = 0; i < HMOE_ARRAY_LEN(cases); i++) {
        setenv("HMOE_CPU", cases[i].value, 1);
        hmoe_cpu_init();
        enum hmoe_cpu_path want = cases[i].want == 99 ? best : cases[i].want;
        if (want > best) want = best;
        if (hmoe_cpu_path() != want && bad < 0) bad = (int)i;
    }
    hmoe_log_level = saved;
    /* avx2-novnni keeps the AVX-VNNI kernels out; avx2 uses them where the CPU has them */
    setenv("HMOE_CPU", "avx2-novnni", 1);
    hmoe_cpu_init();
    const bool novnni = !hmoe_cpu_vnni();
    setenv("HMOE_CPU", "avx2", 1);
    hmoe_cpu_init();
    const bool vnni_avx2 = hmoe_cpu_vnni();
    const char *isa = hmoe_cpu_isa_name();
    const bool isa_ok = best < HMOE_CPU_AVX2 || !strcmp(isa, vnni_avx2 ? "avx2+vnni" : "avx2");
    t_check(novnni && isa_ok, "HMOE_CPU=avx2-novnni turns AVX-VNNI off; avx2 names it when in use",
            "avx2-novnni vnni %d, avx2 isa '%s'", !novnni, isa);
    printf("(this CPU: best %s, AVX-VNNI %s)\n", hmoe_cpu_path_name(best), vnni_avx2 ? "yes" : "no");
    unsetenv("HMOE_CPU");
    hmoe_cpu_init();
    t_check(bad < 0 && hmoe_cpu_path() == best, "HMOE_CPU selects a path, capped at the CPU's best",
            "HMOE_CPU=%s gave %s (best %s)", bad >= 0 ? cases[bad].value : "(unset)",
            hmoe_cpu_path_name(hmoe_cpu_path()), hmoe_cpu_path_name(best));
    int cores = hmoe_cpu_physical_cores();
    t_check(cores >= 1 && cores <= 4096, "physical core count is sane", "got %d", cores);
    t_check(!hmoe_cpu_supports(HMOE_TYPE_I32) && !hmoe_cpu_supports((enum hmoe_type)4) &&
                !hmoe_cpu_supports((enum hmoe_type)HMOE_TYPE_COUNT) && hmoe_cpu_supports(HMOE_TYPE_Q4_K),
            "hmoe_cpu_supports: kernel types yes, plain ints / retired / out-of-range ids no", "wrong answer");
}

int main(void) {
    check_env_override();
    for (size_t p = 0; p < HMOE_ARRAY_LEN(kernel_sets); p++) {
        if (!select_kernel_set(p, "all kernels")) continue;
        const enum hmoe_cpu_path got = kernel_sets[p].path;
        for (size_t k = 0; k < HMOE_ARRAY_LEN(fixture_types); k++) check_fixture(fixture_types[k], got);
        const enum hmoe_type act_types[] = {HMOE_TYPE_Q8_K, HMOE_TYPE_Q8_0, HMOE_TYPE_F16, HMOE_TYPE_BF16};
        for (size_t k = 0; k < HMOE_ARRAY_LEN(act_types); k++) check_quantize(act_types[k], got);
        for (size_t k = 0; k < HMOE_ARRAY_LEN(random_types); k++) check_dots(random_types[k], got);
        const enum hmoe_type extreme_types[] = {HMOE_TYPE_Q8_0,   HMOE_TYPE_Q5_0,   HMOE_TYPE_Q4_0, HMOE_TYPE_MXFP4,
                                                HMOE_TYPE_IQ4_NL, HMOE_TYPE_IQ4_XS, HMOE_TYPE_Q6_K};
        for (size_t k = 0; k < HMOE_ARRAY_LEN(extreme_types); k++) check_extreme_dec(extreme_types[k], got);
        check_extreme_gemm(HMOE_TYPE_Q4_K, got);
        check_extreme_gemm(HMOE_TYPE_Q5_K, got);
        check_extreme_gemm(HMOE_TYPE_Q6_K, got);
        const enum hmoe_type wide_types[] = {HMOE_TYPE_Q4_K, HMOE_TYPE_Q5_K, HMOE_TYPE_Q6_K, HMOE_TYPE_Q8_0,
                                             HMOE_TYPE_Q5_0,  HMOE_TYPE_Q4_0, HMOE_TYPE_MXFP4, HMOE_TYPE_IQ4_NL};
        for (size_t k = 0; k < HMOE_ARRAY_LEN(wide_types); k++) check_wide_gemm(wide_types[k], got);
    }
    hmoe_cpu_init();
    return t_summary();
}
