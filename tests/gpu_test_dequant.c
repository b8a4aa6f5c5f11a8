/* gpu_test_dequant.c — GPU dequantization (cuda_dequant.cu) and q8_1 activation quantization
 * (cuda_quant_act.cu) against the CPU references.
 *
 * Dequant f32 must be bit-identical to the type table's dequant_ref for every GPU type, on
 * random blocks with sane scales (fp16 subnormal scales included, quants.md §0.1) and on every
 * row of ../shared/fixtures/kernels/<TYPE>.json (llama.cpp's own dequantized values; the
 * fixtures drop the sign of zero, so +0/-0 are accepted there only). Dequant f16 must equal the
 * f32 value rounded to nearest even. q8_1 bytes must equal tests/gpu_util.h ref_quantize_q8_1.
 * Bad arguments must be refused with HMOE_ERR_ARG.
 */
#include "harness.h"
#include "gpu_util.h"
#include "hmoe/json.h"

static uint32_t fbits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static const enum hmoe_type k_types[] = {
    HMOE_TYPE_F32,     HMOE_TYPE_F16,    HMOE_TYPE_BF16,   HMOE_TYPE_Q4_0,    HMOE_TYPE_Q4_1,   HMOE_TYPE_Q5_0,
    HMOE_TYPE_Q5_1,    HMOE_TYPE_Q8_0,   HMOE_TYPE_Q2_K,   HMOE_TYPE_Q3_K,    HMOE_TYPE_Q4_K,   HMOE_TYPE_Q5_K,
    HMOE_TYPE_Q6_K,    HMOE_TYPE_IQ2_XXS, HMOE_TYPE_IQ2_XS, HMOE_TYPE_IQ2_S,  HMOE_TYPE_IQ3_XXS, HMOE_TYPE_IQ3_S,
    HMOE_TYPE_IQ1_S,   HMOE_TYPE_IQ1_M,  HMOE_TYPE_IQ4_NL, HMOE_TYPE_IQ4_XS,  HMOE_TYPE_MXFP4,
};

/* Dequantize n elements of `raw` on the GPU to f32 and f16 and compare with dequant_ref. */
static void check_raw(enum hmoe_type t, const uint8_t *raw, int64_t n, const char *what, int signed_zero_exact) {
    char name[200];
    const struct hmoe_type_info *ti = &hmoe_type_info[t];
    size_t bytes = hmoe_row_bytes(t, n);
    float *ref = malloc((size_t)n * 4), *got = malloc((size_t)n * 4);
    uint16_t *got16 = malloc((size_t)n * 2);
    ti->dequant_ref(raw, ref, n);
    void *d_src = dup_dev(raw, bytes);
    float *d_f32 = dalloc((size_t)n * 4);
    uint16_t *d_f16 = dalloc((size_t)n * 2);
    struct hmoe_err err = {0};
    snprintf(name, sizeof name, "%s dequant f32 %s (%lld values) bit-exact", ti->name, what, (long long)n);
    if (launched(hmoe_cuda_dequant_f32(t, d_src, n, d_f32, g_stream, &err), &err, name) &&
        from_dev(got, d_f32, (size_t)n * 4, name)) {
        long bad = -1;
        for (int64_t i = 0; i < n && bad < 0; i++)
            if (fbits(got[i]) != fbits(ref[i]) && !(!signed_zero_exact && got[i] == 0.0f && ref[i] == 0.0f)) bad = (long)i;
        t_check(bad < 0, name, "element %ld: got %.9g (0x%08x), want %.9g (0x%08x)", bad, bad >= 0 ? got[bad] : 0.0,
                bad >= 0 ? fbits(got[bad]) : 0u, bad >= 0 ? ref[bad] : 0.0, bad >= 0 ? fbits(ref[bad]) : 0u);
    }
    snprintf(name, sizeof name, "%s dequant f16 %s = fp16(dequant_ref)", ti->name, what);
    if (launched(hmoe_cuda_dequant_f16(t, d_src, n, d_f16, g_stream, &err), &err, name) &&
        from_dev(got16, d_f16, (size_t)n * 2, name)) {
        long bad = -1;
        for (int64_t i = 0; i < n && bad < 0; i++) {
            uint16_t want = hmoe_f32_to_fp16(ref[i]);
            if (got16[i] != want && !(!signed_zero_exact && (got16[i] & 0x7fff) == 0 && (want & 0x7fff) == 0)) bad = (long)i;
        }
        t_check(bad < 0, name, "element %ld: got 0x%04x, want 0x%04x", bad, bad >= 0 ? got16[bad] : 0,
                bad >= 0 ? hmoe_f32_to_fp16(ref[bad]) : 0);
    }
    free(ref), free(got), free(got16);
}

static void test_random_blocks(void) {
    for (size_t i = 0; i < HMOE_ARRAY_LEN(k_types); i++) {
        enum hmoe_type t = k_types[i];
        const int blck = hmoe_type_info[t].blck;
        /* 4099 blocks: not a multiple of the 256-thread launch, exercises the tail */
        int64_t n = (int64_t)(blck >= 8 ? blck : 8) * 4099;
        uint8_t *raw = malloc(hmoe_row_bytes(t, n));
        rng_seed(1000 + (uint64_t)t);
        rand_blocks(t, raw, n);
        check_raw(t, raw, n, "random blocks", 1);
        free(raw);
    }
}

/* The fixture rows: raw bytes -> llama.cpp's dequant (via dequant_ref, itself pinned to the
 * fixture by test_quant_fixtures.c) and directly against the fixture values. */
static void test_fixtures(void) {
    struct hmoe_err err = {0};
    struct hmoe_json *idx = hmoe_json_parse_file(t_shared("fixtures/kernels/index.json"), &err);
    t_check(idx != NULL && idx->kind == HMOE_JSON_ARRAY, "fixtures/kernels/index.json parses", "%s", err.msg);
    if (!idx) return;
    for (size_t f = 0; f < idx->n; f++) {
        char path[256], name[200];
        snprintf(path, sizeof path, "fixtures/kernels/%s", hmoe_json_get_str(idx->items[f], "file", "?"));
        struct hmoe_json *j = hmoe_json_parse_file(t_shared(path), &err);
        if (!j) {
            t_check(0, path, "%s", err.msg);
            continue;
        }
        enum hmoe_type t;
        const char *tname = hmoe_json_get_str(j, "type", "?");
        const int64_t n = (int64_t)hmoe_json_get_num(j, "row_elems", 0);
        const struct hmoe_json *rows = hmoe_json_get(j, "rows");
        if (!hmoe_type_from_name(tname, &t) || !rows || n <= 0) {
            t_check(0, path, "unknown type %s or no rows", tname);
            hmoe_json_free(j);
            continue;
        }
        const size_t rb = hmoe_row_bytes(t, n);
        uint8_t *raw = malloc(rb * rows->n);
        float *want = malloc((size_t)n * rows->n * 4), *got = malloc((size_t)n * rows->n * 4);
        int ok_parse = 1;
        for (size_t r = 0; r < rows->n; r++) {
            const char *hex = hmoe_json_get_str(rows->items[r], "raw_hex", "");
            const struct hmoe_json *dq = hmoe_json_get(rows->items[r], "dequant");
            if (strlen(hex) != 2 * rb || hmoe_hex_decode(hex, raw + r * rb, rb) != (long)rb || !dq || dq->n != (size_t)n) {
                ok_parse = 0;
                break;
            }
            for (int64_t i = 0; i < n; i++) want[r * n + i] = strtof(dq->items[i]->str, NULL);
        }
        snprintf(name, sizeof name, "%s fixture rows dequant on GPU == llama.cpp values", hmoe_type_info[t].name);
        if (!ok_parse) {
            t_check(0, name, "malformed fixture %s", path);
        } else {
            const int64_t total = n * (int64_t)rows->n;
            void *d_src = dup_dev(raw, rb * rows->n);
            float *d_out = dalloc((size_t)total * 4);
            if (launched(hmoe_cuda_dequant_f32(t, d_src, total, d_out, g_stream, &err), &err, name) &&
                from_dev(got, d_out, (size_t)total * 4, name)) {
                long bad = -1;
                for (int64_t i = 0; i < total && bad < 0; i++)
                    if (fbits(got[i]) != fbits(want[i]) && !(got[i] == 0.0f && want[i] == 0.0f)) bad = (long)i;
                t_check(bad < 0, name, "value %ld: got %.9g, want %.9g", bad, bad >= 0 ? got[bad] : 0.0,
                        bad >= 0 ? want[bad] : 0.0);
            }
            check_raw(t, raw, total, "fixture rows", 0);
        }
        free(raw), free(want), free(got);
        hmoe_json_free(j);
    }
    hmoe_json_free(idx);
}

static void test_q8_1(void) {
    const int64_t rows = 7, ncols = 4096 + 96;
    const size_t rbytes = hmoe_cuda_q8_1_row_bytes(ncols);
    t_check(rbytes == ref_q8_1_row_bytes(ncols) && rbytes % 16 == 0, "q8_1 row size", "%zu", rbytes);
    float *x = malloc((size_t)(rows * ncols) * 4);
    rng_seed(77);
    for (int64_t i = 0; i < rows * ncols; i++) x[i] = rng_normal() * (i % 97 == 0 ? 30.0f : 1.0f);
    for (int64_t i = 0; i < 32; i++) x[i] = 0.0f; /* an all-zero block: d = 0 */
    x[40] = 1e-30f;                                /* a tiny block max */
    uint8_t *want = calloc((size_t)rows, rbytes), *got = calloc((size_t)rows, rbytes);
    for (int64_t r = 0; r < rows; r++) ref_quantize_q8_1(x + r * ncols, ncols, want + r * rbytes);
    float *d_x = dup_dev(x, (size_t)(rows * ncols) * 4);
    void *d_q = dalloc(rows * rbytes);
    struct hmoe_err err = {0};
    const char *name = "q8_1 quantization of 7 rows == reference bytes (quants, d, s)";
    if (launched(hmoe_cuda_quantize_q8_1(d_x, ncols, rows, ncols, d_q, g_stream, &err), &err, name) &&
        from_dev(got, d_q, rows * rbytes, name)) {
        long bad = -1;
        for (int64_t r = 0; r < rows && bad < 0; r++) /* compare the data, not the padding */
            for (size_t b = 0; b < (size_t)ncols + 8 * (size_t)(ncols / 32) && bad < 0; b++)
                if (got[r * rbytes + b] != want[r * rbytes + b]) bad = (long)(r * rbytes + b);
        t_check(bad < 0, name, "byte %ld: got 0x%02x, want 0x%02x", bad, bad >= 0 ? got[bad] : 0, bad >= 0 ? want[bad] : 0);
    }
    free(x), free(want), free(got);
}

static void test_bad_args(void) {
    struct hmoe_err err = {0};
    float *d = dalloc(1024 * 4);
    enum hmoe_status st = hmoe_cuda_dequant_f32(HMOE_TYPE_Q4_K, d, 100, d, g_stream, &err);
    t_check(st == HMOE_ERR_ARG && strstr(err.msg, "Q4_K"), "dequant refuses a partial Q4_K block", "status %d: %s", st, err.msg);
    st = hmoe_cuda_dequant_f32(HMOE_TYPE_TQ1_0, d, 256, d, g_stream, &err);
    t_check(st == HMOE_ERR_ARG && strstr(err.msg, "TQ1_0"), "dequant refuses a type without GPU kernels", "status %d: %s", st, err.msg);
    st = hmoe_cuda_quantize_q8_1(d, 100, 1, 100, d, g_stream, &err);
    t_check(st == HMOE_ERR_ARG, "quantize_q8_1 refuses ncols % 32 != 0", "status %d: %s", st, err.msg);
    t_check(hmoe_cuda_type_supported(HMOE_TYPE_IQ2_XXS) && !hmoe_cuda_type_supported(HMOE_TYPE_NVFP4),
            "type_supported follows the GPU table", "IQ2_XXS %d NVFP4 %d", hmoe_cuda_type_supported(HMOE_TYPE_IQ2_XXS),
            hmoe_cuda_type_supported(HMOE_TYPE_NVFP4));
}

int main(void) {
    if (!gpu_open_or_skip("gpu_test_dequant")) return t_summary();
    test_random_blocks();
    gpu_free_all();
    test_fixtures();
    gpu_free_all();
    test_q8_1();
    test_bad_args();
    gpu_close();
    return t_summary();
}
