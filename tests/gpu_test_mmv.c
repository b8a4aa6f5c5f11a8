/* gpu_test_mmv.c — the decode matvec (cuda_mmv.cu) for every GPU weight type.
 *
 * The GPU quantizes activations to q8_1 (32-value blocks), the CPU's llama.cpp path to Q8_K, so
 * results are not compared with vec_dot_ref but with float64 sums over dequant_ref weights:
 *  (a) against the same q8_1 activations (downloaded from the GPU; their bytes are pinned by
 *      gpu_test_dequant): |y - sum w*a| <= 1e-5 * sum |w*a|   (f32 accumulation only)
 *  (b) against the unquantized x: |y - sum w*x| <= sum |w_i| * d_b(i)/2 * 1.0001 + 1e-5 * sum |w*a|
 *      where d_b = amax/127 of x's 32-block: a rounding error of at most half a step per value,
 *      the bound stated in the assignment.
 * F32/F16/BF16 weights take f32 activations: |y - sum w*x| <= 1e-5 * sum |w*x|.
 * Also the fixture rows of ../shared/fixtures/kernels (llama.cpp's weights and activations,
 * compared with their exact_f64_dequant_dot_x under bound (b)), 1 and 11 tokens, the residual
 * add (in place and from another buffer), a per-row bias, the normed input (an f32 row
 * normalised inside the matvec), odd row counts, and refused shapes.
 */
#include "harness.h"
#include "gpu_util.h"
#include "hmoe/json.h"

static const enum hmoe_type k_types[] = {
    HMOE_TYPE_F32,     HMOE_TYPE_F16,    HMOE_TYPE_BF16,   HMOE_TYPE_Q4_0,    HMOE_TYPE_Q4_1,   HMOE_TYPE_Q5_0,
    HMOE_TYPE_Q5_1,    HMOE_TYPE_Q8_0,   HMOE_TYPE_Q2_K,   HMOE_TYPE_Q3_K,    HMOE_TYPE_Q4_K,   HMOE_TYPE_Q5_K,
    HMOE_TYPE_Q6_K,    HMOE_TYPE_IQ2_XXS, HMOE_TYPE_IQ2_XS, HMOE_TYPE_IQ2_S,  HMOE_TYPE_IQ3_XXS, HMOE_TYPE_IQ3_S,
    HMOE_TYPE_IQ1_S,   HMOE_TYPE_IQ1_M,  HMOE_TYPE_IQ4_NL, HMOE_TYPE_IQ4_XS,  HMOE_TYPE_MXFP4,
};

/* Check y (ntok x nrows) against float64 references; w is the dequantized matrix. xq: the
 * q8_1 rows the GPU used (NULL for float weights). Returns a message for the first failure. */
static int check_results(const float *y, const float *w, int64_t nrows, int64_t ncols, const float *x,
                         const uint8_t *xq, size_t xq_stride, int64_t ntok, const float *add, char *why, size_t whylen) {
    for (int64_t t = 0; t < ntok; t++) {
        const float *xt = x + t * ncols;
        const uint8_t *qt = xq ? xq + t * xq_stride : NULL;
        for (int64_t r = 0; r < nrows; r++) {
            const float *wr = w + r * ncols;
            double sa = 0, mag = 0, sx = 0, bound = 0;
            for (int64_t i = 0; i < ncols; i++) {
                double a = qt ? ref_q8_1_value(qt, ncols, i) : (double)xt[i];
                sa += (double)wr[i] * a;
                mag += fabs((double)wr[i] * a);
                sx += (double)wr[i] * xt[i];
                if (qt) bound += fabs((double)wr[i]) * ((const float *)(qt + ncols))[2 * (i / 32)] * 0.5;
            }
            const double base = add ? (double)add[t * nrows + r] : 0.0;
            const double got = (double)y[t * nrows + r] - base;
            const double tol_a = 1e-5 * mag + 1e-30, tol_b = bound * 1.0001 + tol_a;
            if (!(fabs(got - sa) <= tol_a + 1e-6 * fabs(base))) {
                snprintf(why, whylen, "tok %lld row %lld: got %.9g, sum w*a %.9g (tol %.3g)", (long long)t,
                         (long long)r, got, sa, tol_a);
                return 0;
            }
            if (!(fabs(got - sx) <= tol_b + 1e-6 * fabs(base))) {
                snprintf(why, whylen, "tok %lld row %lld: got %.9g, sum w*x %.9g beyond the q8_1 bound %.3g",
                         (long long)t, (long long)r, got, sx, tol_b);
                return 0;
            }
        }
    }
    return 1;
}

/* Upload W (raw) and x, run mmv, check. add_mode: 0 none, 1 in place (y preloaded), 2 separate,
 * 3 in place plus a per-row bias. */
static void run_case(enum hmoe_type t, const uint8_t *raw, int64_t nrows, int64_t ncols, const float *x, int64_t ntok,
                     int add_mode, const char *what) {
    char name[256], why[256] = "";
    const struct hmoe_type_info *ti = &hmoe_type_info[t];
    const size_t rb = hmoe_row_bytes(t, ncols);
    const bool quant = ti->is_quantized;
    snprintf(name, sizeof name, "%s mmv %s: %lld x %lld, %lld token(s)%s", ti->name, what, (long long)nrows,
             (long long)ncols, (long long)ntok, add_mode == 1 ? ", += in place" : add_mode == 2 ? ", + add" : add_mode == 3 ? ", + bias += in place" : "");
    float *w = malloc((size_t)(nrows * ncols) * 4), *y = malloc((size_t)(ntok * nrows) * 4);
    float *addv = malloc((size_t)(ntok * nrows) * 4), *biasv = malloc((size_t)nrows * 4);
    float *basev = malloc((size_t)(ntok * nrows) * 4); /* what the product is expected on top of */
    for (int64_t r = 0; r < nrows; r++) ti->dequant_ref(raw + r * rb, w + r * ncols, ncols);
    for (int64_t i = 0; i < ntok * nrows; i++) addv[i] = rng_normal();
    for (int64_t r = 0; r < nrows; r++) biasv[r] = 3.0f * rng_normal();
    for (int64_t i = 0; i < ntok * nrows; i++) basev[i] = addv[i] + (add_mode == 3 ? biasv[i % nrows] : 0.0f);
    float *d_bias = add_mode == 3 ? dup_dev(biasv, (size_t)nrows * 4) : NULL;
    void *d_w = dup_dev(raw, rb * (size_t)nrows);
    float *d_x = dup_dev(x, (size_t)(ntok * ncols) * 4);
    const size_t xq_stride = hmoe_cuda_q8_1_row_bytes(ncols);
    void *d_xq = quant ? dalloc(xq_stride * (size_t)ntok) : NULL;
    float *d_y = add_mode == 1 || add_mode == 3 ? dup_dev(addv, (size_t)(ntok * nrows) * 4) : dalloc((size_t)(ntok * nrows) * 4);
    float *d_add = add_mode == 2 ? dup_dev(addv, (size_t)(ntok * nrows) * 4) : add_mode == 1 || add_mode == 3 ? d_y : NULL;
    struct hmoe_err err = {0};
    uint8_t *xq = NULL;
    if (quant) {
        if (!launched(hmoe_cuda_quantize_q8_1(d_x, ncols, ntok, ncols, d_xq, g_stream, &err), &err, name)) goto out;
        xq = malloc(xq_stride * (size_t)ntok);
        if (!from_dev(xq, d_xq, xq_stride * (size_t)ntok, name)) goto out;
    }
    struct hmoe_cuda_mmv_args a = {.type = t, .w = d_w, .row_bytes = rb, .nrows = nrows, .ncols = ncols,
                                   .x = quant ? d_xq : (const void *)d_x,
                                   .x_stride_bytes = quant ? xq_stride : (size_t)ncols * 4, .ntok = ntok, .y = d_y,
                                   .y_stride = nrows, .add = d_add, .add_stride = nrows, .bias = d_bias};
    if (!launched(hmoe_cuda_mmv(&a, g_stream, &err), &err, name) || !from_dev(y, d_y, (size_t)(ntok * nrows) * 4, name))
        goto out;
    t_check(check_results(y, w, nrows, ncols, x, xq, xq_stride, ntok, add_mode ? basev : NULL, why, sizeof why), name, "%s", why);
out:
    free(w), free(y), free(addv), free(biasv), free(basev), free(xq);
}

static void test_random(void) {
    for (size_t i = 0; i < HMOE_ARRAY_LEN(k_types); i++) {
        enum hmoe_type t = k_types[i];
        rng_seed(2000 + (uint64_t)t);
        const int blck = hmoe_type_info[t].blck;
        int64_t shapes[2][2] = {{37, 2048}, {21, blck == 256 ? 768 : 96}};
        for (int s = 0; s < 2; s++) {
            const int64_t nrows = shapes[s][0], ncols = shapes[s][1];
            const int64_t ntok = s == 0 ? 1 : 11;
            uint8_t *raw = malloc(hmoe_row_bytes(t, ncols) * (size_t)nrows);
            rand_blocks(t, raw, ncols * nrows);
            float *x = malloc((size_t)(ntok * ncols) * 4);
            for (int64_t j = 0; j < ntok * ncols; j++) x[j] = rng_normal() * (j % 61 == 0 ? 20.0f : 1.0f);
            run_case(t, raw, nrows, ncols, x, ntok, s == 0 ? 1 : 2, "random");
            if (s == 0 && (t == HMOE_TYPE_Q4_K || t == HMOE_TYPE_Q6_K || t == HMOE_TYPE_IQ2_XXS))
                run_case(t, raw, nrows, ncols, x, 1, 0, "random");
            /* biased projections (gpt-oss q|k|v and o), one token and a batch */
            if (t == HMOE_TYPE_Q8_0 || t == HMOE_TYPE_MXFP4 || t == HMOE_TYPE_F32 || t == HMOE_TYPE_Q4_K)
                run_case(t, raw, nrows, ncols, x, ntok, 3, "random");
            free(raw), free(x);
        }
        gpu_free_all();
    }
}

static void test_fixtures(void) {
    struct hmoe_err err = {0};
    struct hmoe_json *idx = hmoe_json_parse_file(t_shared("fixtures/kernels/index.json"), &err);
    if (!idx) {
        t_check(0, "fixtures/kernels/index.json", "%s", err.msg);
        return;
    }
    for (size_t f = 0; f < idx->n; f++) {
        char path[256], name[200], why[256] = "";
        snprintf(path, sizeof path, "fixtures/kernels/%s", hmoe_json_get_str(idx->items[f], "file", "?"));
        struct hmoe_json *j = hmoe_json_parse_file(t_shared(path), &err);
        if (!j) {
            t_check(0, path, "%s", err.msg);
            continue;
        }
        enum hmoe_type t;
        hmoe_type_from_name(hmoe_json_get_str(j, "type", "?"), &t);
        const int64_t n = (int64_t)hmoe_json_get_num(j, "row_elems", 0);
        const struct hmoe_json *rows = hmoe_json_get(j, "rows"), *acts = hmoe_json_get(j, "activations"),
                               *dots = hmoe_json_get(j, "dots");
        const size_t rb = hmoe_row_bytes(t, n);
        const int64_t nr = (int64_t)rows->n, na = (int64_t)acts->n;
        uint8_t *raw = malloc(rb * (size_t)nr);
        float *x = malloc((size_t)(na * n) * 4), *y = malloc((size_t)(na * nr) * 4), *w = malloc((size_t)(nr * n) * 4);
        for (int64_t r = 0; r < nr; r++) {
            hmoe_hex_decode(hmoe_json_get_str(rows->items[r], "raw_hex", ""), raw + r * rb, rb);
            hmoe_type_info[t].dequant_ref(raw + r * rb, w + r * n, n);
        }
        for (int64_t a = 0; a < na; a++) {
            const struct hmoe_json *xa = hmoe_json_get(acts->items[a], "x");
            for (int64_t i = 0; i < n; i++) x[a * n + i] = strtof(xa->items[i]->str, NULL);
        }
        snprintf(name, sizeof name, "%s mmv on fixture rows vs exact_f64_dequant_dot_x", hmoe_type_info[t].name);
        const bool quant = hmoe_type_info[t].is_quantized;
        const size_t xs = quant ? hmoe_cuda_q8_1_row_bytes(n) : (size_t)n * 4;
        void *d_w = dup_dev(raw, rb * (size_t)nr);
        float *d_x = dup_dev(x, (size_t)(na * n) * 4);
        void *d_xq = quant ? dalloc(xs * (size_t)na) : d_x;
        float *d_y = dalloc((size_t)(na * nr) * 4);
        uint8_t *xq = quant ? malloc(xs * (size_t)na) : NULL;
        int ok = 1;
        if (quant)
            ok = launched(hmoe_cuda_quantize_q8_1(d_x, n, na, n, d_xq, g_stream, &err), &err, name) &&
                 from_dev(xq, d_xq, xs * (size_t)na, name);
        struct hmoe_cuda_mmv_args ma = {.type = t, .w = d_w, .row_bytes = rb, .nrows = nr, .ncols = n, .x = d_xq,
                                        .x_stride_bytes = xs, .ntok = na, .y = d_y, .y_stride = nr};
        if (ok && launched(hmoe_cuda_mmv(&ma, g_stream, &err), &err, name) && from_dev(y, d_y, (size_t)(na * nr) * 4, name)) {
            /* every recorded dot, row_index/act_index into the arrays above */
            int good = check_results(y, w, nr, n, x, xq, xs, na, NULL, why, sizeof why);
            for (size_t d = 0; good && d < dots->n; d++) {
                const int64_t ri = (int64_t)hmoe_json_get_num(dots->items[d], "row_index", -1);
                const int64_t ai = (int64_t)hmoe_json_get_num(dots->items[d], "act_index", -1);
                const double exact = hmoe_json_get_num(dots->items[d], "exact_f64_dequant_dot_x", 0);
                if (ri < 0 || ri >= nr || ai < 0 || ai >= na) continue;
                double bound = 0, mag = 0;
                for (int64_t i = 0; i < n; i++) {
                    const double wi = w[ri * n + i];
                    mag += fabs(wi * x[ai * n + i]);
                    if (xq) bound += fabs(wi) * ((const float *)(xq + ai * xs + n))[2 * (i / 32)] * 0.5;
                }
                const double tol = bound * 1.0001 + 1e-5 * mag + 1e-6;
                if (!(fabs(y[ai * nr + ri] - exact) <= tol)) {
                    snprintf(why, sizeof why, "row %lld act %lld: got %.9g, llama.cpp exact %.9g (bound %.3g)", (long long)ri,
                             (long long)ai, y[ai * nr + ri], exact, tol);
                    good = 0;
                }
            }
            t_check(good, name, "%s", why);
        }
        free(raw), free(x), free(y), free(w), free(xq);
        hmoe_json_free(j);
        gpu_free_all();
    }
    hmoe_json_free(idx);
}

/* The normed input (norm_w): one f32 row normalised, scaled and quantized inside the matvec.
 * Checked against the float64 product with the exactly normalised row, within the q8_1
 * rounding bound of the row hmoe_cuda_rmsnorm quantizes (the same quantization, summed in
 * another order). */
static void test_normed(void) {
    const enum hmoe_type types[] = {HMOE_TYPE_Q8_0, HMOE_TYPE_Q4_K, HMOE_TYPE_Q6_K, HMOE_TYPE_MXFP4, HMOE_TYPE_Q5_0};
    const int64_t widths[] = {2880, 2048, 4096};
    for (size_t ti = 0; ti < HMOE_ARRAY_LEN(types); ti++)
        for (size_t wi = 0; wi < HMOE_ARRAY_LEN(widths); wi++) {
            const enum hmoe_type t = types[ti];
            const int64_t nrows = 45, ncols = widths[wi];
            if (ncols % hmoe_type_info[t].blck) continue;
            char name[160], why[200] = "";
            snprintf(name, sizeof name, "%s mmv normed input: %lld x %lld, + bias", hmoe_type_name(t), (long long)nrows,
                     (long long)ncols);
            rng_seed(7000 + (uint64_t)t * 16 + wi);
            const size_t rb = hmoe_row_bytes(t, ncols), qb = hmoe_cuda_q8_1_row_bytes(ncols);
            uint8_t *raw = malloc(rb * (size_t)nrows), *xq = malloc(qb);
            float *w = malloc((size_t)(nrows * ncols) * 4), *x = malloc((size_t)ncols * 4), *nw = malloc((size_t)ncols * 4);
            float *bias = malloc((size_t)nrows * 4), *y = malloc((size_t)nrows * 4);
            double *h = malloc((size_t)ncols * 8);
            rand_blocks(t, raw, ncols * nrows);
            for (int64_t r = 0; r < nrows; r++) hmoe_type_info[t].dequant_ref(raw + r * rb, w + r * ncols, ncols);
            double ss = 0;
            for (int64_t i = 0; i < ncols; i++) {
                x[i] = rng_normal() * (i % 53 == 0 ? 30.0f : 2.0f);
                nw[i] = 0.5f + (float)(i % 7) * 0.25f;
                ss += (double)x[i] * x[i];
            }
            for (int64_t r = 0; r < nrows; r++) bias[r] = rng_normal();
            const float eps = 1e-6f;
            const double rs = 1.0 / sqrt(ss / (double)ncols + eps);
            for (int64_t i = 0; i < ncols; i++) h[i] = (double)x[i] * rs * nw[i];
            void *d_w = dup_dev(raw, rb * (size_t)nrows);
            float *d_x = dup_dev(x, (size_t)ncols * 4), *d_nw = dup_dev(nw, (size_t)ncols * 4);
            float *d_b = dup_dev(bias, (size_t)nrows * 4), *d_y = dalloc((size_t)nrows * 4);
            void *d_xq = dalloc(qb);
            struct hmoe_err err = {0};
            struct hmoe_cuda_rmsnorm_args na = {.x = d_x, .x_stride = ncols, .w = d_nw, .eps = eps, .nrows = 1, .n = ncols,
                                                .out_q8_1 = d_xq};
            struct hmoe_cuda_mmv_args a = {.type = t, .w = d_w, .row_bytes = rb, .nrows = nrows, .ncols = ncols, .x = d_x,
                                           .x_stride_bytes = (size_t)ncols * 4, .ntok = 1, .y = d_y, .y_stride = nrows,
                                           .bias = d_b, .norm_w = d_nw, .norm_eps = eps};
            if (!launched(hmoe_cuda_rmsnorm(&na, g_stream, &err), &err, name) || !from_dev(xq, d_xq, qb, name) ||
                !launched(hmoe_cuda_mmv(&a, g_stream, &err), &err, name) || !from_dev(y, d_y, (size_t)nrows * 4, name))
                goto next;
            int ok = 1;
            for (int64_t r = 0; r < nrows && ok; r++) {
                double sx = bias[r], bound = 0, mag = 0;
                for (int64_t i = 0; i < ncols; i++) {
                    const double wv = w[r * ncols + i];
                    sx += wv * h[i];
                    mag += fabs(wv * h[i]);
                    bound += fabs(wv) * ((const float *)(xq + ncols))[2 * (i / 32)] * 0.5;
                }
                const double tol = bound * 1.01 + 1e-5 * mag + 1e-6;
                if (!(fabs((double)y[r] - sx) <= tol)) {
                    snprintf(why, sizeof why, "row %lld: got %.9g, float64 %.9g, q8_1 bound %.3g", (long long)r, y[r], sx, tol);
                    ok = 0;
                }
            }
            t_check(ok, name, "%s", why);
        next:
            free(raw), free(xq), free(w), free(x), free(nw), free(bias), free(y), free(h);
            gpu_free_all();
        }
    struct hmoe_err err = {0};
    void *d = dalloc(1 << 16);
    struct hmoe_cuda_mmv_args a = {.type = HMOE_TYPE_Q8_0, .w = d, .row_bytes = 34 * 8, .nrows = 4, .ncols = 256, .x = d,
                                   .x_stride_bytes = 1024, .ntok = 2, .y = d, .y_stride = 4, .norm_w = d, .norm_eps = 1e-6f};
    enum hmoe_status st = hmoe_cuda_mmv(&a, g_stream, &err);
    t_check(st == HMOE_ERR_ARG, "mmv refuses a normed input of two tokens", "status %d: %s", st, err.msg);
    gpu_free_all();
}

static void test_bad_args(void) {
    struct hmoe_err err = {0};
    void *d = dalloc(1 << 16);
    struct hmoe_cuda_mmv_args a = {.type = HMOE_TYPE_Q4_K, .w = d, .row_bytes = 144, .nrows = 4, .ncols = 200, .x = d,
                                   .x_stride_bytes = 512, .ntok = 1, .y = d, .y_stride = 4};
    enum hmoe_status st = hmoe_cuda_mmv(&a, g_stream, &err);
    t_check(st == HMOE_ERR_ARG, "mmv refuses ncols that is not a whole number of blocks", "status %d: %s", st, err.msg);
    a.ncols = 256;
    a.w = (const char *)d + 8;
    st = hmoe_cuda_mmv(&a, g_stream, &err);
    t_check(st == HMOE_ERR_ARG, "mmv refuses misaligned weights", "status %d: %s", st, err.msg);
    a.w = d;
    a.x_stride_bytes = 64;
    st = hmoe_cuda_mmv(&a, g_stream, &err);
    t_check(st == HMOE_ERR_ARG, "mmv refuses a too short activation stride", "status %d: %s", st, err.msg);
}

int main(void) {
    if (!gpu_open_or_skip("gpu_test_mmv")) return t_summary();
    test_random();
    test_fixtures();
    test_normed();
    test_bad_args();
    gpu_close();
    return t_summary();
}
