/* test_quant_fixtures.c — the type table's reference kernels against llama.cpp: for every
 * fixtures/kernels/<TYPE>.json (fixtures/README.md §3) the table geometry, bit-exact
 * dequant of each row, byte-exact activation quantization (and its dequant), vec_dot within
 * 1e-5 relative; plus the three worked blocks of quants.md §11 (FNV-1a, first 32 bits). */
#include <stdint.h>

#include "harness.h"
#include "hmoe/fp16.h"
#include "hmoe/json.h"
#include "hmoe/types.h"

/* binary32 from a fixture number: the JSON text is %.9g, which strtof reads back exactly. */
static float num_f32(const struct hmoe_json *j) { return strtof(j->str, NULL); }

static uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* Read a JSON array of numbers into a new float array of exactly n entries, or NULL. */
static float *read_floats(const struct hmoe_json *arr, size_t n) {
    if (!arr || arr->kind != HMOE_JSON_ARRAY || arr->n != n) return NULL;
    float *v = malloc(n * sizeof *v);
    for (size_t i = 0; i < n; i++) v[i] = num_f32(arr->items[i]);
    return v;
}

/* Decode a hex string that must be exactly n bytes; NULL otherwise. */
static unsigned char *read_hex(const char *hex, size_t n) {
    if (!hex || strlen(hex) != 2 * n) return NULL;
    unsigned char *b = malloc(n ? n : 1);
    if (hmoe_hex_decode(hex, b, n) != (long)n) {
        free(b);
        return NULL;
    }
    return b;
}

/* First element whose bits differ, or -1. The one exception is the sign of zero: the
 * fixture files never contain "-0" (their writer dropped it: Q6_K.json alone has 15
 * elements where ggml's reference gives -0, e.g. a negative scale times q = 0), so +0 and
 * -0 are accepted for each other here. The signed zeros themselves are pinned by the
 * FNV-1a hashes of quants.md §11 (the Q6_K example has two -0 outputs), checked below. */
static long first_bit_mismatch(const float *a, const float *b, long n) {
    for (long i = 0; i < n; i++)
        if (f32_bits(a[i]) != f32_bits(b[i]) && !(a[i] == 0.0f && b[i] == 0.0f)) return i;
    return -1;
}

static float fp16_val(const unsigned char *p) {
    uint16_t h = (uint16_t)(p[0] | (p[1] << 8));
    return hmoe_fp16_to_f32(h);
}

/* The F16 x F16 dot of the fixture build. That machine has AVX512-FP16, and with it
 * llama.cpp accumulates F16 dots in fp16 (fixtures/README.md: "the F16 file differs only
 * because that build lacks AVX512-FP16"); every F16.json vec_dot is an exact fp16 value.
 * Emulation: 128 fp16 accumulators (element k goes to k % 128, one fp16 rounding per
 * fused multiply-add), then a halving tree in fp16 (offsets 64, 32, ..., 1). It reproduces
 * all 18 fixture dots bit for bit. This is NOT hmoe's reference (that one sums in f32 or
 * better, quants.md §8.4, as llama.cpp does on CPUs without AVX512-FP16); it shows the
 * fixture is understood, and it bounds how far the reference may be from the fixture. */
/* Round a double to the nearest fp16 value (ties to even), returned as float. Exact for
 * the magnitudes here: the quantum is 2^(floor(log2|v|) - 10), at least 2^-24. */
static float round_to_fp16(double v) {
    if (v == 0.0) return (float)v;
    int e;
    frexp(v, &e); /* |v| in [2^(e-1), 2^e) */
    int q = e - 1 - 10 < -24 ? -24 : e - 1 - 10;
    return (float)ldexp(nearbyint(ldexp(v, -q)), q);
}

static float f16_dot_fp16_accumulate(int64_t n, const unsigned char *w, const unsigned char *a) {
    double acc[128] = {0};
    int64_t n128 = n - n % 128;
    for (int64_t k = 0; k < n128; k++) /* a*b + acc in double is exact, then one fp16 rounding */
        acc[k % 128] = round_to_fp16((double)fp16_val(w + 2 * k) * fp16_val(a + 2 * k) + acc[k % 128]);
    for (int off = 64; off >= 1; off /= 2)
        for (int l = 0; l < off; l++) acc[l] = round_to_fp16(acc[l] + acc[l + off]);
    double tail = 0.0;
    for (int64_t k = n128; k < n; k++) tail += (double)fp16_val(w + 2 * k) * fp16_val(a + 2 * k);
    return (float)(acc[0] + tail);
}

static void check_fixture(const char *file) {
    char name[160];
    struct hmoe_err err = {0};
    struct hmoe_json *j = hmoe_json_parse_file(t_shared(file), &err);
    snprintf(name, sizeof name, "%s: parse", file);
    if (!j) {
        t_check(0, name, "%s", err.msg);
        return;
    }
    const char *tname = hmoe_json_get_str(j, "type", "?");
    enum hmoe_type t, vt;
    bool known = hmoe_type_from_name(tname, &t) && hmoe_type_from_name(hmoe_json_get_str(j, "vec_dot_type", "?"), &vt);
    const int64_t n = (int64_t)hmoe_json_get_num(j, "row_elems", 0);
    const struct hmoe_type_info *ti = known ? &hmoe_type_info[t] : NULL;

    snprintf(name, sizeof name, "%s table row: id, block size, bytes, vec_dot_type", tname);
    t_check(known && (int)hmoe_json_get_num(j, "ggml_type_id", -1) == (int)t &&
                ti->blck == (int)hmoe_json_get_num(j, "block_size", 0) &&
                ti->type_size == (int)hmoe_json_get_num(j, "type_size", 0) && ti->vec_dot_type == vt &&
                hmoe_row_bytes(t, n) == (size_t)hmoe_json_get_num(j, "row_bytes", 0) &&
                hmoe_row_bytes(vt, n) == (size_t)hmoe_json_get_num(j, "vec_dot_row_bytes", 0),
            name, "type table disagrees with the fixture header");
    if (!known || !ti->dequant_ref || !hmoe_type_info[vt].quantize_ref || !ti->vec_dot_ref || n <= 0) {
        snprintf(name, sizeof name, "%s kernels registered", tname);
        t_check(0, name, "dequant_ref / quantize_ref / vec_dot_ref missing");
        hmoe_json_free(j);
        return;
    }
    const size_t rb = hmoe_row_bytes(t, n), ab = hmoe_row_bytes(vt, n);

    /* rows: raw bytes -> dequant, bit for bit */
    const struct hmoe_json *rows = hmoe_json_get(j, "rows");
    size_t nrows = rows ? rows->n : 0;
    unsigned char **raw = calloc(nrows + 1, sizeof *raw);
    float *y = malloc((size_t)n * sizeof *y);
    int bad_rows = 0;
    char detail[256] = "";
    for (size_t r = 0; r < nrows; r++) {
        raw[r] = read_hex(hmoe_json_get_str(rows->items[r], "raw_hex", NULL), rb);
        float *want = read_floats(hmoe_json_get(rows->items[r], "dequant"), (size_t)n);
        if (!raw[r] || !want) {
            bad_rows++;
            snprintf(detail, sizeof detail, "row %zu: malformed fixture", r);
            free(want);
            continue;
        }
        ti->dequant_ref(raw[r], y, n);
        long k = first_bit_mismatch(y, want, n);
        if (k >= 0) {
            if (!bad_rows)
                snprintf(detail, sizeof detail, "row %zu elem %ld: got %.9g (0x%08x), want %.9g (0x%08x)", r, k,
                         y[k], f32_bits(y[k]), want[k], f32_bits(want[k]));
            bad_rows++;
        }
        free(want);
    }
    snprintf(name, sizeof name, "%s dequant_ref of %zu rows bit-exact", tname, nrows);
    t_check(nrows > 0 && bad_rows == 0, name, "%d bad rows; first: %s", bad_rows, detail);

    /* activations: x -> vec_dot_type bytes, and those bytes -> floats */
    const struct hmoe_json *acts = hmoe_json_get(j, "activations");
    size_t nacts = acts ? acts->n : 0;
    unsigned char **xq = calloc(nacts + 1, sizeof *xq);
    unsigned char *mine = malloc(ab);
    int bad_q = 0, bad_qd = 0, n_xqd = 0;
    char dq[256] = "", dqd[256] = "";
    for (size_t a = 0; a < nacts; a++) {
        float *x = read_floats(hmoe_json_get(acts->items[a], "x"), (size_t)n);
        /* x_quant_dequant is absent for Q8_K activations (the fixtures give it for F16, Q8_0) */
        const struct hmoe_json *xqd_j = hmoe_json_get(acts->items[a], "x_quant_dequant");
        float *xqd = xqd_j ? read_floats(xqd_j, (size_t)n) : NULL;
        if (xqd_j) n_xqd++;
        xq[a] = read_hex(hmoe_json_get_str(acts->items[a], "x_quant_hex", NULL), ab);
        if (!x || (xqd_j && !xqd) || !xq[a]) {
            bad_q++;
            snprintf(dq, sizeof dq, "activation %zu: malformed fixture", a);
        } else {
            hmoe_type_info[vt].quantize_ref(x, mine, n);
            for (size_t k = 0; k < ab; k++)
                if (mine[k] != xq[a][k]) {
                    if (!bad_q) snprintf(dq, sizeof dq, "act %zu byte %zu: got %02x want %02x", a, k, mine[k], xq[a][k]);
                    bad_q++;
                    break;
                }
            hmoe_type_info[vt].dequant_ref(xq[a], y, n);
            long k = xqd ? first_bit_mismatch(y, xqd, n) : -1;
            if (k >= 0) {
                if (!bad_qd) snprintf(dqd, sizeof dqd, "act %zu elem %ld: got %.9g want %.9g", a, k, y[k], xqd[k]);
                bad_qd++;
            }
        }
        free(x);
        free(xqd);
    }
    snprintf(name, sizeof name, "%s activations quantize to %s byte-exact (%zu vectors)", tname,
             hmoe_type_info[vt].name, nacts);
    t_check(nacts > 0 && bad_q == 0, name, "%d bad; first: %s", bad_q, dq);
    if (n_xqd > 0) {
        snprintf(name, sizeof name, "%s activation %s bytes dequantize bit-exact (%d vectors)", tname,
                 hmoe_type_info[vt].name, n_xqd);
        t_check(bad_qd == 0, name, "%d bad; first: %s", bad_qd, dqd);
    }

    /* dots: vec_dot_ref(row, fixture's x_quant) vs llama.cpp's vec_dot */
    const struct hmoe_json *dots = hmoe_json_get(j, "dots");
    size_t ndots = dots ? dots->n : 0;
    int bad_dots = 0, bad_emu = 0;
    double worst_rel = 0.0;
    char dd[256] = "", de[256] = "";
    for (size_t d = 0; d < ndots; d++) {
        size_t ri = (size_t)hmoe_json_get_num(dots->items[d], "row_index", -1);
        size_t ai = (size_t)hmoe_json_get_num(dots->items[d], "act_index", -1);
        const struct hmoe_json *vd = hmoe_json_get(dots->items[d], "vec_dot");
        if (ri >= nrows || ai >= nacts || !raw[ri] || !xq[ai] || !vd) {
            bad_dots++;
            snprintf(dd, sizeof dd, "dot %zu: malformed fixture", d);
            continue;
        }
        double want = num_f32(vd), got = ti->vec_dot_ref(n, raw[ri], xq[ai]);
        double diff = fabs(got - want);
        if (fabs(want) > 0) worst_rel = HMOE_MAX(worst_rel, diff / fabs(want));
        /* 1e-5 relative (1e-6 absolute near zero), fixtures/README.md §5.4. For F16 the
         * fixture itself carries fp16 accumulation error (see f16_dot_fp16_accumulate), so
         * the allowed distance is that path's rounding-error bound instead: each product
         * passes through at most n/128 + 7 fp16 roundings (relative 2^-11 each, or an
         * absolute 2^-25 in the fp16 subnormal range). */
        double allowed = HMOE_MAX(1e-5 * fabs(want), 1e-6);
        if (t == HMOE_TYPE_F16) {
            double sum_abs = 0.0;
            for (int64_t k = 0; k < n; k++)
                sum_abs += fabs((double)fp16_val(raw[ri] + 2 * k) * fp16_val(xq[ai] + 2 * k));
            allowed = 1.01 * (double)(n / 128 + 7) * ldexp(sum_abs, -11) + (double)(n + 127) * ldexp(1.0, -25);
            float emu = f16_dot_fp16_accumulate(n, raw[ri], xq[ai]);
            if (f32_bits(emu) != f32_bits((float)want)) {
                if (!bad_emu) snprintf(de, sizeof de, "dot %zu: emulation %.9g, fixture %.9g", d, emu, want);
                bad_emu++;
            }
        }
        if (!(diff <= allowed)) {
            if (!bad_dots)
                snprintf(dd, sizeof dd, "dot %zu (row %zu, act %zu): got %.9g want %.9g (allowed %.3g)", d, ri, ai, got,
                         want, allowed);
            bad_dots++;
        }
    }
    if (t == HMOE_TYPE_F16) {
        snprintf(name, sizeof name, "%s fixture dots = AVX512-FP16 fp16-accumulation emulation, bit-exact (%zu)", tname,
                 ndots);
        t_check(ndots > 0 && bad_emu == 0, name, "%d differ; first: %s", bad_emu, de);
        snprintf(name, sizeof name, "%s vec_dot_ref of %zu dots within the fixture's fp16-accumulation error bound",
                 tname, ndots);
    } else {
        snprintf(name, sizeof name, "%s vec_dot_ref of %zu dots within 1e-5 rel / 1e-6 abs", tname, ndots);
    }
    t_check(ndots > 0 && bad_dots == 0, name, "%d bad (worst rel %.3g); first: %s", bad_dots, worst_rel, dd);

    for (size_t r = 0; r < nrows; r++) free(raw[r]);
    for (size_t a = 0; a < nacts; a++) free(xq[a]);
    free(raw);
    free(xq);
    free(mine);
    free(y);
    hmoe_json_free(j);
}

/* quants.md §11: block bytes, FNV-1a-32 of the 256 little-endian outputs, first 32 bit patterns. */
struct worked_example {
    enum hmoe_type type;
    const char *hex;
    uint32_t fnv;
    uint32_t bits[32];
};

static const struct worked_example examples[] = {
    {HMOE_TYPE_Q4_K,
     "66225c1f702989c5d33a694efc358cf6cdeee7402dea29cff7f4acc1ea4c0ff8c0cb979884cfe57a68d777442c1c3428681496be2d6f86"
     "c978be236afdafbd0e906a74942186e595a27eec917a8e9616cec23d966b4de64e28ec1e0970844cfec4a053c9c90e32dd519c3f484f02"
     "478c8bc799804715c8c78db010cedf66ccf62dc6db94cae487b5096844c6aa512cd0",
     0x7b5fd2cb,
     {0x40f52b60, 0x41042eb0, 0x4081ff60, 0xbe0bd400, 0x40f52b60, 0x40bb9560, 0x40a86360, 0x410dc7b0,
      0x4081ff60, 0x4010d2c0, 0x40e1f960, 0x3eed3600, 0x40bb9560, 0x40e1f960, 0x410dc7b0, 0x40953160,
      0xbe0bd400, 0x40cec760, 0x4081ff60, 0x40953160, 0x4010d2c0, 0x410dc7b0, 0x403736c0, 0x40bb9560,
      0x40953160, 0x4081ff60, 0x4081ff60, 0x4010d2c0, 0x40e1f960, 0x40e1f960, 0x4010d2c0, 0x40953160}},
    {HMOE_TYPE_Q6_K,
     "2df52d086badd378bfcc3d122d3fefbb24273e8ee4eb1720f2e9f3eb89ddb00ffe87353a1ee56915e5678cdefb3706a71698e33edee6af"
     "a440bb06e2136783b32ce58dae6e2bb6715bd4f94d84235161b175a427fff600cd26edd162d6e61d098137bccdc738efbbdc64e25e21ae"
     "9d4af18030e06d8d9f580f9123bde62d05126d7a88108f0c3c10c2190cb02f02fee089a32a0800519f60d4b606e7e8805f2886e376d56f"
     "d1413e5fb1173a27fe18132937685d65d51c12526553368974ef0ecf69eef05fa185fb83fd7e8dcca924e82a1c",
     0xc3a05871,
     {0x3f190780, 0xbf7f0c80, 0x40724be0, 0x40990780, 0xc0ac2870, 0x40724be0, 0x40b8e910, 0x40990780,
      0xc03f4960, 0x3f4c0a00, 0x40724be0, 0x40bf4960, 0xc0b8e910, 0xc03f4960, 0xc03f4960, 0x4085e690,
      0xc0a3f5c0, 0x411d20d8, 0x40bf4960, 0xc0f5f0a0, 0xc13f4960, 0xc008a220, 0x411d20d8, 0xc15a9d00,
      0xc14cf330, 0x4075f0a0, 0x3fa3f5c0, 0x41387478, 0xc11d20d8, 0xc101cd38, 0x40da9d00, 0xc0e846d0}},
    {HMOE_TYPE_IQ2_XXS,
     "c225d4affd192db0da0d094cd3c374a7ad0958fcfbeb1b83f17efb44c75483844ef592596fcafad96d2f07e137896b75542f89c9347c80"
     "3ad3efef0295cdc5cea282",
     0x1ad66ded,
     {0xbdf79600, 0x3df79600, 0xbcb84000, 0xbcb84000, 0x3cb84000, 0xbcb84000, 0x3cb84000, 0x3df79600,
      0x3cb84000, 0x3df79600, 0x3cb84000, 0x3cb84000, 0x3cb84000, 0xbcb84000, 0xbd8ff200, 0x3d8ff200,
      0x3cb84000, 0xbdf79600, 0x3d8ff200, 0xbcb84000, 0x3cb84000, 0xbd8ff200, 0xbdf79600, 0x3df79600,
      0x3cb84000, 0xbcb84000, 0xbcb84000, 0xbd8ff200, 0x3d8ff200, 0xbcb84000, 0xbcb84000, 0xbcb84000}},
};

static void check_worked_example(const struct worked_example *ex) {
    const struct hmoe_type_info *ti = &hmoe_type_info[ex->type];
    char name[128];
    snprintf(name, sizeof name, "quants.md §11 worked %s block: FNV-1a and first 32 bit patterns", ti->name);
    unsigned char *blk = read_hex(ex->hex, (size_t)ti->type_size);
    if (!blk || !ti->dequant_ref) {
        t_check(0, name, "bad embedded block or no dequant_ref");
        free(blk);
        return;
    }
    float y[256];
    ti->dequant_ref(blk, y, 256);
    uint32_t h = 0x811c9dc5u;
    for (int e = 0; e < 256; e++) {
        uint32_t u = f32_bits(y[e]);
        for (int k = 0; k < 4; k++) {
            h ^= (u >> (8 * k)) & 0xFF;
            h *= 0x01000193u;
        }
    }
    int bad = -1;
    for (int e = 0; e < 32 && bad < 0; e++)
        if (f32_bits(y[e]) != ex->bits[e]) bad = e;
    t_check(h == ex->fnv && bad < 0, name, "fnv 0x%08x (want 0x%08x), first bad element %d", h, ex->fnv, bad);
    free(blk);
}

int main(void) {
    static const char *const files[] = {
        "fixtures/kernels/F16.json",  "fixtures/kernels/Q8_0.json",    "fixtures/kernels/Q2_K.json",
        "fixtures/kernels/Q4_K.json", "fixtures/kernels/Q5_K.json",    "fixtures/kernels/Q6_K.json",
        "fixtures/kernels/IQ2_XXS.json", "fixtures/kernels/IQ2_XS.json", "fixtures/kernels/IQ2_S.json",
        "fixtures/kernels/IQ3_S.json",
    };
    /* index.json must not list a type this test skips */
    struct hmoe_err err = {0};
    struct hmoe_json *idx = hmoe_json_parse_file(t_shared("fixtures/kernels/index.json"), &err);
    size_t listed = idx && idx->kind == HMOE_JSON_ARRAY ? idx->n : 0, covered = 0;
    for (size_t i = 0; i < listed; i++) {
        const char *f = hmoe_json_get_str(idx->items[i], "file", "");
        for (size_t k = 0; k < HMOE_ARRAY_LEN(files); k++)
            if (strcmp(files[k] + strlen("fixtures/kernels/"), f) == 0) covered++;
    }
    t_check(listed == HMOE_ARRAY_LEN(files) && covered == listed, "kernel fixtures: every file of index.json covered",
            "index lists %zu files, %zu covered here (%s)", listed, covered, idx ? "" : err.msg);
    hmoe_json_free(idx);

    for (size_t k = 0; k < HMOE_ARRAY_LEN(files); k++) check_fixture(files[k]);
    for (size_t k = 0; k < HMOE_ARRAY_LEN(examples); k++) check_worked_example(&examples[k]);
    return t_summary();
}
