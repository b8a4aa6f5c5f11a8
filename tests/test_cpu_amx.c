/* test_cpu_amx.c — the AMX int8 GEMM for Q4_K / Q6_K (src/cpu/amx_gemm_impl.h) against
 * llama.cpp and the references.
 *
 * The kernel body is built twice: on the tile emulator (always checked here) and on the
 * real AMX instructions (checked when this CPU passes the run-time AMX check; with
 * HMOE_EXPECT_AMX=1 a missing AMX is a failure, for the run on AMX hardware). For each:
 *   - fixtures/kernels/{Q4_K,Q6_K}.json: fixture rows × fixture activations reproduce
 *     llama.cpp's `vec_dot` (1e-5 rel or 1e-6 abs, fixtures README §5.4);
 *   - random blocks × random activations (outliers, zero blocks) against vec_dot_ref: ntok
 *     1..70 (ragged token tiles), row counts off the 16-row tile, a row sub-range, padded
 *     activation strides;
 * and the dispatch: HMOE_AMX parsing, and hmoe_cpu_gemm() routing batches to the (emulated)
 * AMX kernel with correct results on both sides of the token threshold.
 */
#include <stddef.h>
#include <stdint.h>

#include "cpu/amx_impl.h"
#define KERNEL_RNG_SEED 0x6a09e667f3bcc909ull
#include "harness.h"
#include "kernel_rng.h"
#include "hmoe/cpu.h"
#include "hmoe/fp16.h"
#include "hmoe/json.h"
#include "hmoe/quant_blocks.h"

/* Random blocks with finite fp16 scales (fp16 subnormals up to 0.1, either sign). */
static void rng_weights(enum hmoe_type t, int64_t ncols, int64_t nrows, uint8_t *w) {
    const size_t bb = (size_t)hmoe_type_info[t].type_size, nblk = hmoe_row_bytes(t, ncols) * (size_t)nrows / bb;
    for (size_t i = 0; i < nblk * bb; i++) w[i] = (uint8_t)rng_u64();
    for (size_t b = 0; b < nblk; b++) {
        uint8_t *blk = w + b * bb;
        for (int f = 0; f < (t == HMOE_TYPE_Q4_K ? 2 : 1); f++) {
            float mag = powf(10.0f, -7.0f + 6.0f * rng_unit());
            uint16_t h = hmoe_f32_to_fp16(rng_u64() & 1 ? -mag : mag);
            size_t off = t == HMOE_TYPE_Q4_K ? (f ? offsetof(struct hmoe_block_q4_k, dmin)
                                                  : offsetof(struct hmoe_block_q4_k, d))
                                             : offsetof(struct hmoe_block_q6_k, d);
            memcpy(blk + off, &h, 2);
        }
    }
}


struct backend {
    const char *name;
    hmoe_cpu_gemm_fn q4k, q6k;
};

static hmoe_cpu_gemm_fn kernel_of(const struct backend *be, enum hmoe_type t) {
    return t == HMOE_TYPE_Q4_K ? be->q4k : be->q6k;
}

/* Fixture rows × activations through the kernel == llama.cpp's vec_dot. */
static void check_fixture(const struct backend *be, const char *tname, enum hmoe_type wt) {
    char name[160], file[64];
    snprintf(name, sizeof name, "[%s] fixture %s: gemm matches vec_dot", be->name, tname);
    snprintf(file, sizeof file, "fixtures/kernels/%s.json", tname);
    struct hmoe_err err = {0};
    struct hmoe_json *j = hmoe_json_parse_file(t_shared(file), &err);
    if (!j) {
        t_check(0, name, "%s", err.msg);
        return;
    }
    const int64_t ncols = (int64_t)hmoe_json_get_num(j, "row_elems", 0);
    const size_t row_bytes = (size_t)hmoe_json_get_num(j, "row_bytes", 0), act_bytes = hmoe_cpu_act_bytes(wt, ncols);
    const struct hmoe_json *rows = hmoe_json_get(j, "rows"), *acts = hmoe_json_get(j, "activations"),
                           *dots = hmoe_json_get(j, "dots");
    if (!rows || !acts || !dots || ncols <= 0 || row_bytes != hmoe_row_bytes(wt, ncols)) {
        t_check(0, name, "missing rows/activations/dots or inconsistent row size");
        hmoe_json_free(j);
        return;
    }
    const size_t nr = rows->n, na = acts->n;
    uint8_t *w = calloc(nr, row_bytes), *xq = calloc(na, act_bytes);
    float *y = calloc(nr * na, sizeof(float));
    int bad = -1;
    for (size_t r = 0; r < nr; r++)
        if (hmoe_hex_decode(hmoe_json_get_str(rows->items[r], "raw_hex", ""), w + r * row_bytes, row_bytes) !=
            (long)row_bytes)
            bad = 0;
    for (size_t a = 0; a < na; a++)
        if (hmoe_hex_decode(hmoe_json_get_str(acts->items[a], "x_quant_hex", ""), xq + a * act_bytes, act_bytes) !=
            (long)act_bytes)
            bad = 0;
    float got = 0, want = 0;
    if (bad < 0) {
        kernel_of(be, wt)(ncols, w, row_bytes, (int64_t)nr, xq, act_bytes, (int64_t)na, y, nr);
        for (size_t k = 0; k < dots->n && bad < 0; k++) {
            int ri = (int)hmoe_json_get_num(dots->items[k], "row_index", -1);
            int ai = (int)hmoe_json_get_num(dots->items[k], "act_index", -1);
            want = (float)hmoe_json_get_num(dots->items[k], "vec_dot", 0);
            if (ri < 0 || ai < 0 || (size_t)ri >= nr || (size_t)ai >= na) {
                bad = (int)k;
                continue;
            }
            got = y[(size_t)ai * nr + (size_t)ri];
            if (!close_enough(got, want)) bad = (int)k;
        }
    }
    t_check(bad < 0, name, "dot %d: got %.9g want %.9g", bad, got, want);
    free(w);
    free(xq);
    free(y);
    hmoe_json_free(j);
}

/* Random weights against vec_dot_ref through `fn` (NULL: hmoe_cpu_gemm, the dispatcher). */
static void check_random(const char *tag, hmoe_cpu_gemm_fn fn, enum hmoe_type wt, const int64_t *ntoks, int n_ntok) {
    const struct hmoe_type_info *ti = &hmoe_type_info[wt];
    char name[160];
    snprintf(name, sizeof name, "[%s] %s gemm matches vec_dot_ref (ragged rows/tokens, padded stride)", tag, ti->name);
    /* (ncols, nrows, r0): one block; a tile plus one row; a sub-range; expert-like widths */
    const int64_t shapes[][3] = {{256, 1, 0}, {512, 17, 0}, {2048, 19, 1}, {768, 33, 0}, {1024, 16, 0}, {256, 40, 5}};
    const int64_t ntok_max = 70;
    int bad = 0;
    char detail[200] = "";
    for (size_t s = 0; s < HMOE_ARRAY_LEN(shapes) && !bad; s++) {
        const int64_t ncols = shapes[s][0], nrows = shapes[s][1], r0 = shapes[s][2];
        const size_t row_bytes = hmoe_row_bytes(wt, ncols), act_bytes = hmoe_cpu_act_bytes(wt, ncols);
        const size_t stride = act_bytes + 4 * (s + 1); /* padding between activation rows */
        uint8_t *w = malloc(row_bytes * (size_t)nrows), *xq = calloc((size_t)ntok_max, stride);
        float *x = malloc(sizeof(float) * (size_t)ncols);
        float *ref = malloc(sizeof(float) * (size_t)(nrows * ntok_max));
        const size_t ys = (size_t)nrows + 3;
        float *y = malloc(sizeof(float) * ys * (size_t)ntok_max);
        rng_weights(wt, ncols, nrows, w);
        for (int64_t t = 0; t < ntok_max; t++) {
            rng_acts(x, ncols);
            hmoe_type_info[ti->vec_dot_type].quantize_ref(x, xq + (size_t)t * stride, ncols);
            for (int64_t r = 0; r < nrows; r++)
                ref[t * nrows + r] = ti->vec_dot_ref(ncols, w + (size_t)r * row_bytes, xq + (size_t)t * stride);
        }
        for (int k = 0; k < n_ntok && !bad; k++) {
            const int64_t ntok = ntoks[k];
            for (size_t i = 0; i < ys * (size_t)ntok_max; i++) y[i] = NAN;
            if (fn)
                fn(ncols, w + (size_t)r0 * row_bytes, row_bytes, nrows - r0, xq, stride, ntok, y, ys);
            else
                hmoe_cpu_gemm(wt, ncols, w, row_bytes, r0, nrows, xq, stride, ntok, y, ys);
            for (int64_t t = 0; t < ntok_max && !bad; t++)
                for (int64_t r = r0; r < (int64_t)ys + r0 && !bad; r++) {
                    const float got = y[(size_t)t * ys + (size_t)(r - r0)];
                    const int inside = t < ntok && r < nrows;
                    if (inside && !close_enough(got, ref[t * nrows + r]))
                        bad = snprintf(detail, sizeof detail, "ncols %lld rows %lld..%lld ntok %lld: row %lld tok %lld: %.9g vs ref %.9g",
                                       (long long)ncols, (long long)r0, (long long)nrows, (long long)ntok,
                                       (long long)r, (long long)t, got, ref[t * nrows + r]);
                    else if (!inside && !isnan(got))
                        bad = snprintf(detail, sizeof detail, "ncols %lld ntok %lld: wrote outside (row %lld tok %lld)",
                                       (long long)ncols, (long long)ntok, (long long)r, (long long)t);
                }
        }
        free(w);
        free(xq);
        free(x);
        free(ref);
        free(y);
    }
    t_check(!bad, name, "%s", detail);
}

/* HMOE_AMX=0 keeps AMX off; HMOE_AMX=emu selects the emulator; the status line says so. */
static void check_env(void) {
    setenv("HMOE_AMX", "0", 1);
    hmoe_cpu_init();
    const int off = !hmoe_cpu_amx() && strstr(hmoe_cpu_amx_status(), "amx off") != NULL;
    setenv("HMOE_AMX", "emu", 1);
    hmoe_cpu_init();
    const int emu = !hmoe_cpu_amx() && (hmoe_cpu_path() != HMOE_CPU_AVX512 ||
                                        strstr(hmoe_cpu_amx_status(), "emulated") != NULL);
    char status[160];
    snprintf(status, sizeof status, "%s", hmoe_cpu_amx_status());
    unsetenv("HMOE_AMX");
    hmoe_cpu_init();
    t_check(off && emu, "HMOE_AMX=0 turns AMX off, HMOE_AMX=emu selects the emulator", "off %d emu %d (%s)", off, emu,
            status);
}

int main(void) {
    hmoe_cpu_init();
    check_env();
    if (hmoe_cpu_path() != HMOE_CPU_AVX512) {
        printf("AMX kernels ... skipped: they need the AVX-512 path (this CPU: %s)\n",
               hmoe_cpu_path_name(hmoe_cpu_path()));
        return t_summary();
    }
    const enum hmoe_cpu_amx_mode real = hmoe_cpu_force_amx(HMOE_CPU_AMX_ON, 0);
    printf("AMX hardware: %s\n", hmoe_cpu_amx_status());
    const char *expect = getenv("HMOE_EXPECT_AMX");
    if (expect && !strcmp(expect, "1"))
        t_check(real == HMOE_CPU_AMX_ON, "AMX is usable (HMOE_EXPECT_AMX=1)", "%s", hmoe_cpu_amx_status());

    struct backend bes[2] = {{"amx-emulated", hmoe_cpu_gemm_q4_k_amxemu, hmoe_cpu_gemm_q6_k_amxemu},
                             {"amx-real", hmoe_cpu_gemm_q4_k_amx, hmoe_cpu_gemm_q6_k_amx}};
    const int64_t all_ntok[] = {1, 2, 3, 5, 8, 15, 16, 17, 31, 32, 33, 47, 48, 49, 64, 65, 70};
    const int64_t few_ntok[] = {1, 16, 17, 33, 70};
    for (int b = 0; b < 2; b++) {
        if (b == 1 && real != HMOE_CPU_AMX_ON) {
            printf("[amx-real] kernels ... skipped: %s\n", hmoe_cpu_amx_status());
            continue;
        }
        printf("running the %s kernels\n", bes[b].name);
        check_fixture(&bes[b], "Q4_K", HMOE_TYPE_Q4_K);
        check_fixture(&bes[b], "Q6_K", HMOE_TYPE_Q6_K);
        check_random(bes[b].name, bes[b].q4k, HMOE_TYPE_Q4_K, all_ntok, (int)HMOE_ARRAY_LEN(all_ntok));
        check_random(bes[b].name, bes[b].q6k, HMOE_TYPE_Q6_K, all_ntok, (int)HMOE_ARRAY_LEN(all_ntok));
    }
    /* hmoe_cpu_gemm() with the emulated AMX kernels from 16 tokens: both sides of the threshold */
    const enum hmoe_cpu_amx_mode m = hmoe_cpu_force_amx(HMOE_CPU_AMX_EMULATED, 16);
    t_check(m == HMOE_CPU_AMX_EMULATED, "test hook selects the emulated AMX kernels", "got mode %d", (int)m);
    check_random("dispatch, amx-emulated", NULL, HMOE_TYPE_Q4_K, few_ntok, (int)HMOE_ARRAY_LEN(few_ntok));
    check_random("dispatch, amx-emulated", NULL, HMOE_TYPE_Q6_K, few_ntok, (int)HMOE_ARRAY_LEN(few_ntok));
    hmoe_cpu_force_amx(HMOE_CPU_AMX_OFF, 0);
    hmoe_cpu_init();
    return t_summary();
}
