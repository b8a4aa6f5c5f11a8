/* gpu_test_attn.c — decode and prefill attention over the VRAM KV cache (cuda_attn.cu) against
 * a scalar float64 attention written here from qwen3moe.md §4.3 steps 7-9 (GQA head mapping
 * h / (H/Hkv), scale, causal mask inclusive of the query's own position, softmax, weighted V).
 *
 * The cache is filled on the host (random rows, encoded to f16 or with the type table's Q8_0
 * quantizer) and the reference reads the same decoded values, so only the kernels' f32
 * arithmetic separates the two: |out - ref| <= 3e-5 + 1e-5 |ref| (outputs are convex
 * combinations of V rows of size ~1). Decode covers lengths 1..5000 with the default 64-way
 * split, 1 and 7 splits; prefill (the CUDA-core kernel, hmoe_cuda_attn_prefill_old; the tensor-core
 * one is gpu_test_attn_prefill.c) covers 1..200 tokens, with and without earlier context, and
 * the f16 output. Sliding windows (below, at and above the fused launchers' 128-position range,
 * lengths on both sides of the window) and sink logits (far below the scores, above them, mixed
 * per head) run through the plain, fused and qkv decode launchers.
 */
#include "harness.h"
#include "gpu_util.h"

/* window > 0: position pos sees t > pos - window; sinks (host, one per q head, or NULL): a logit
 * in the softmax denominator with no value row. */
static void ref_attn_ws(const struct gpu_kv_cache *c, const float *q, int h, int G, int pos, float scale, int window,
                        const float *sinks, double *out) {
    const int D = c->D, hk = h / G, lo = window > 0 && pos - window + 1 > 0 ? pos - window + 1 : 0;
    double *s = malloc(sizeof(double) * (size_t)(pos + 1)), m = sinks ? sinks[h] : -INFINITY, sum = 0;
    for (int t = lo; t <= pos; t++) {
        const float *k = c->kd + ((size_t)hk * c->n_ctx + t) * D;
        double d = 0;
        for (int i = 0; i < D; i++) d += (double)q[i] * k[i];
        s[t] = d * scale;
        m = fmax(m, s[t]);
    }
    for (int i = 0; i < D; i++) out[i] = 0;
    for (int t = lo; t <= pos; t++) {
        const double p = exp(s[t] - m);
        sum += p;
        const float *v = c->vd + ((size_t)hk * c->n_ctx + t) * D;
        for (int i = 0; i < D; i++) out[i] += p * v[i];
    }
    if (sinks) sum += exp(sinks[h] - m);
    for (int i = 0; i < D; i++) out[i] /= sum;
    free(s);
}

static void ref_attn(const struct gpu_kv_cache *c, const float *q, int h, int G, int pos, float scale, double *out) {
    ref_attn_ws(c, q, h, G, pos, scale, 0, NULL, out);
}

/* Sink logits of one case: none, small (far below the scores: almost no effect), large (above
 * them: most of the mass goes to the sink) or mixed (per head around the scores). */
enum sink_kind { SINK_NONE, SINK_SMALL, SINK_LARGE, SINK_MIXED };
static const char *sink_name(enum sink_kind k) {
    return k == SINK_SMALL ? ", small sinks" : k == SINK_LARGE ? ", large sinks" : k == SINK_MIXED ? ", mixed sinks" : "";
}
/* Host sinks for H heads (NULL for SINK_NONE) and their device copy in *dev. */
static float *make_sinks(enum sink_kind k, int H, float **dev) {
    *dev = NULL;
    if (k == SINK_NONE) return NULL;
    float *s = malloc((size_t)H * 4);
    for (int h = 0; h < H; h++)
        s[h] = k == SINK_SMALL ? -12.0f + rng_normal() : k == SINK_LARGE ? 5.0f + rng_normal() : 3.0f * rng_normal();
    *dev = dup_dev(s, (size_t)H * 4);
    return s;
}

/* "F16" for one type, "K Q8_0 V Q4_0" for two. */
static const char *kv_name(enum hmoe_type tk, enum hmoe_type tv) {
    static char buf[4][48];
    static int n;
    char *b = buf[n++ % 4];
    if (tk == tv) snprintf(b, 48, "%s", hmoe_type_name(tk));
    else snprintf(b, 48, "K %s V %s", hmoe_type_name(tk), hmoe_type_name(tv));
    return b;
}

static int compare(const float *got, const double *ref, int D, char *why, size_t wl, const char *where) {
    for (int i = 0; i < D; i++)
        if (!(fabs(got[i] - ref[i]) <= 3e-5 + 1e-5 * fabs(ref[i]))) {
            snprintf(why, wl, "%s dim %d: %.9g, want %.9g", where, i, got[i], ref[i]);
            return 0;
        }
    return 1;
}

/* fused: hmoe_cuda_attn_decode_fused with max_split = n_split (0 = its default), the lengths in
 * sequence through the same counters (each call must leave them at zero for the next). */
static void test_decode_kv(int H, int Hkv, int D, enum hmoe_type t, enum hmoe_type tv, const int *lens, int nlens, int n_split,
                           float qmul, int fused, int window, enum sink_kind sk) {
    struct gpu_kv_cache c;
    int maxl = 0;
    for (int i = 0; i < nlens; i++) maxl = lens[i] > maxl ? lens[i] : maxl;
    gpu_kv_cache_init2(&c, Hkv, D, maxl + 3, t, tv, INT64_MAX);
    float *d_sinks, *sinks = make_sinks(sk, H, &d_sinks);
    c.kv.window = window, c.kv.sinks = d_sinks;
    const int G = H / Hkv;
    const float scale = 1.0f / sqrtf((float)D);
    float *q = malloc((size_t)H * D * 4), *out = malloc((size_t)H * D * 4);
    double *ref = malloc((size_t)D * 8);
    float *d_q = dalloc((size_t)H * D * 4), *d_out = dalloc((size_t)H * D * 4);
    const size_t qb = hmoe_cuda_q8_1_row_bytes((int64_t)H * D);
    void *d_outq = dalloc(qb);
    uint8_t *outq = malloc(qb), *wantq = malloc(qb);
    int32_t *d_pos = dalloc(4);
    void *d_scr = dalloc(hmoe_cuda_attn_decode_scratch_bytes(H, D, fused && n_split <= 0 ? 32 : n_split));
    unsigned int *d_cnt = dalloc((size_t)H * 4);
    struct hmoe_err merr = {0};
    hmoe_cuda_memset(g_ctx, d_cnt, 0, (size_t)H * 4, &merr);
    for (int li = 0; li < nlens; li++) {
        char name[200], why[200] = "";
        char wname[32] = "";
        if (window > 0) snprintf(wname, sizeof wname, ", window %d", window);
        snprintf(name, sizeof name, "attn decode%s H=%d Hkv=%d D=%d %s cache, length %d, %d splits%s%s", fused ? " fused" : "", H,
                 Hkv, D, kv_name(t, tv), lens[li], n_split > 0 ? n_split : fused ? 32 : 64, wname, sink_name(sk));
        for (int i = 0; i < H * D; i++) q[i] = rng_normal() * qmul;
        const int32_t pos = lens[li] - 1;
        to_dev(d_q, q, (size_t)H * D * 4);
        to_dev(d_pos, &pos, 4);
        struct hmoe_err err = {0};
        const enum hmoe_status st =
            fused ? hmoe_cuda_attn_decode_fused(d_q, &c.kv, d_pos, H, scale, n_split, d_scr, d_cnt, d_out, d_outq, g_stream, &err)
                  : hmoe_cuda_attn_decode(d_q, &c.kv, d_pos, H, scale, n_split, d_scr, d_out, d_outq, g_stream, &err);
        if (!launched(st, &err, name) ||
            !from_dev(out, d_out, (size_t)H * D * 4, name) || !from_dev(outq, d_outq, qb, name))
            continue;
        int ok = 1;
        for (int h = 0; h < H && ok; h++) {
            ref_attn_ws(&c, q + (size_t)h * D, h, G, pos, scale, window, sinks, ref);
            char where[64];
            snprintf(where, sizeof where, "head %d", h);
            ok = compare(out + (size_t)h * D, ref, D, why, sizeof why, where);
        }
        /* the fused q8_1 output is the f32 output quantized (tests/gpu_util.h reference) */
        ref_quantize_q8_1(out, (int64_t)H * D, wantq);
        if (ok && memcmp(outq, wantq, (size_t)H * D + 8 * (size_t)(H * D / 32)) != 0) {
            snprintf(why, sizeof why, "q8_1 output differs from quantizing the f32 output");
            ok = 0;
        }
        t_check(ok, name, "%s", why);
    }
    free(q), free(out), free(ref), free(outq), free(wantq), free(sinks);
    gpu_kv_cache_free(&c);
}

static void test_decode_impl(int H, int Hkv, int D, enum hmoe_type t, const int *lens, int nlens, int n_split, float qmul,
                             int fused, int window, enum sink_kind sk) {
    test_decode_kv(H, Hkv, D, t, t, lens, nlens, n_split, qmul, fused, window, sk);
}
static void test_decode(int H, int Hkv, int D, enum hmoe_type t, const int *lens, int nlens, int n_split, float qmul) {
    test_decode_impl(H, Hkv, D, t, lens, nlens, n_split, qmul, 0, 0, SINK_NONE);
}
static void test_decode_fused(int H, int Hkv, int D, enum hmoe_type t, const int *lens, int nlens, int n_split, float qmul) {
    test_decode_impl(H, Hkv, D, t, lens, nlens, n_split, qmul, 1, 0, SINK_NONE);
}

/* q, k: RMS-normalised (weights nw) and NEOX-rotated head in float64 (qwen3moe.md §4.3, §5). */
static void ref_norm_rope(const float *src, int D, const float *nw, int pos, double *out) {
    double ss = 0;
    for (int i = 0; i < D; i++) ss += (double)src[i] * src[i];
    const double r = 1.0 / sqrt(ss / D + 1e-6);
    for (int i = 0; i < D; i++) out[i] = (double)src[i] * r * nw[i];
    for (int i = 0; i < D / 2; i++) {
        const double th = pos * pow(1e6, -2.0 * i / D), c = cos(th), sn = sin(th);
        const double x0 = out[i], x1 = out[i + D / 2];
        out[i] = x0 * c - x1 * sn;
        out[i + D / 2] = x0 * sn + x1 * c;
    }
}

/* hmoe_cuda_attn_decode_qkv: raw q/k/v of the new token in, QK-norm + RoPE + KV store + attention
 * in one launch. Checks: the stored K row against the float64 norm + rope (one fp16 rounding /
 * half a q8_0 step), the stored V row byte-exact against the type table's quantizer, and the
 * output against the float64 attention over the cache as stored (earlier rows + the new one)
 * with the float64 normalised, rotated q. The lengths run in sequence over the same cache and
 * counters. */
static void test_decode_qkv_kv(int H, int Hkv, int D, enum hmoe_type t, enum hmoe_type tv, const int *lens, int nlens,
                               int max_split, int window, enum sink_kind sk) {
    struct gpu_kv_cache c;
    int maxl = 0;
    for (int i = 0; i < nlens; i++) maxl = lens[i] > maxl ? lens[i] : maxl;
    gpu_kv_cache_init2(&c, Hkv, D, maxl + 3, t, tv, INT64_MAX);
    float *d_sinks, *sinks = make_sinks(sk, H, &d_sinks);
    c.kv.window = window, c.kv.sinks = d_sinks;
    const int G = H / Hkv;
    const float scale = 1.0f / sqrtf((float)D);
    const size_t rb = gpu_kv_row_bytes(t, D), rbv = gpu_kv_row_bytes(tv, D), qb = hmoe_cuda_q8_1_row_bytes((int64_t)H * D);
    float *q = malloc((size_t)H * D * 4), *k = malloc((size_t)Hkv * D * 4), *v = malloc((size_t)Hkv * D * 4);
    float *qn = malloc((size_t)D * 4), *kn = malloc((size_t)D * 4), *out = malloc((size_t)H * D * 4), *qf = malloc((size_t)D * 4);
    double *ref = malloc((size_t)D * 8);
    uint8_t *krow = malloc(rb), *vrow = malloc(rbv), *vwant = malloc(rbv), *outq = malloc(qb), *wantq = malloc(qb);
    for (int i = 0; i < D; i++) qn[i] = 1.0f + 0.2f * rng_normal(), kn[i] = 1.0f + 0.2f * rng_normal();
    float *d_q = dalloc((size_t)H * D * 4), *d_k = dalloc((size_t)Hkv * D * 4), *d_v = dalloc((size_t)Hkv * D * 4);
    float *d_out = dalloc((size_t)H * D * 4), *d_qn = dup_dev(qn, (size_t)D * 4), *d_kn = dup_dev(kn, (size_t)D * 4);
    void *d_outq = dalloc(qb), *d_scr = dalloc(hmoe_cuda_attn_decode_scratch_bytes(H, D, max_split > 0 ? max_split : 32));
    int32_t *d_pos = dalloc(4);
    unsigned int *d_cnt = dalloc((size_t)H * 4);
    struct hmoe_err err = {0};
    hmoe_cuda_memset(g_ctx, d_cnt, 0, (size_t)H * 4, &err);
    for (int li = 0; li < nlens; li++) {
        char name[200], why[200] = "";
        char wname[32] = "";
        if (window > 0) snprintf(wname, sizeof wname, ", window %d", window);
        snprintf(name, sizeof name, "attn decode qkv (norm+rope+store fused) H=%d Hkv=%d D=%d %s cache, length %d, %d splits%s%s", H,
                 Hkv, D, kv_name(t, tv), lens[li], max_split > 0 ? max_split : 32, wname, sink_name(sk));
        const int32_t pos = lens[li] - 1;
        for (int i = 0; i < H * D; i++) q[i] = rng_normal();
        for (int i = 0; i < Hkv * D; i++) k[i] = rng_normal() * 2.0f, v[i] = rng_normal();
        to_dev(d_q, q, (size_t)H * D * 4);
        to_dev(d_k, k, (size_t)Hkv * D * 4);
        to_dev(d_v, v, (size_t)Hkv * D * 4);
        to_dev(d_pos, &pos, 4);
        const struct hmoe_cuda_qkv_args a = {.q = d_q, .k = d_k, .v = d_v, .q_stride = H * D, .kv_stride = Hkv * D, .ntok = 1,
                                             .n_head = H, .n_head_kv = Hkv, .head_dim = D, .q_norm = d_qn, .k_norm = d_kn,
                                             .eps = 1e-6f, .pos = d_pos,
                                             .rope = {.n_rot = D, .freq_base = 1e6f, .freq_scale = 1.0f, .mscale = 1.0f},
                                             .kv = c.kv};
        if (!launched(hmoe_cuda_attn_decode_qkv(&a, scale, max_split, d_scr, d_cnt, d_out, d_outq, g_stream, &err), &err, name) ||
            !from_dev(out, d_out, (size_t)H * D * 4, name) || !from_dev(outq, d_outq, qb, name))
            continue;
        int ok = 1;
        for (int h = 0; h < Hkv && ok; h++) {
            const size_t off = ((size_t)h * c.n_ctx + pos) * rb, offv = ((size_t)h * c.n_ctx + pos) * rbv;
            if (!from_dev(krow, (const uint8_t *)c.kv.k + off, rb, name) || !from_dev(vrow, (const uint8_t *)c.kv.v + offv, rbv, name)) {
                ok = -1;
                break;
            }
            ref_norm_rope(k + (size_t)h * D, D, kn, pos, ref);
            float *kd = c.kd + ((size_t)h * c.n_ctx + pos) * D, *vd = c.vd + ((size_t)h * c.n_ctx + pos) * D;
            hmoe_type_info[t].dequant_ref(krow, kd, D);
            hmoe_type_info[tv].dequant_ref(vrow, vd, D);
            for (int i = 0; i < D && ok; i++) {
                const double tol = kv_store_tol(t, krow, i, ref[i]) + 2e-5;
                if (!(fabs(kd[i] - ref[i]) <= tol))
                    snprintf(why, sizeof why, "k head %d dim %d stored %.9g, want %.9g (tol %.3g)", h, i, kd[i], ref[i], tol), ok = 0;
            }
            hmoe_cpu_attn_kv_store(tv, v + (size_t)h * D, vwant, D);
            for (size_t i = 0; ok && i < rbv; i++)
                if (vrow[i] != vwant[i])
                    snprintf(why, sizeof why, "v head %d: stored byte %zu is 0x%02x, the CPU cache store writes 0x%02x", h, i,
                             vrow[i], vwant[i]), ok = 0;
        }
        if (ok < 0) continue;
        for (int h = 0; h < H && ok; h++) {
            ref_norm_rope(q + (size_t)h * D, D, qn, pos, ref);
            for (int i = 0; i < D; i++) qf[i] = (float)ref[i];
            ref_attn_ws(&c, qf, h, G, pos, scale, window, sinks, ref);
            char where[64];
            snprintf(where, sizeof where, "head %d", h);
            ok = compare(out + (size_t)h * D, ref, D, why, sizeof why, where);
        }
        ref_quantize_q8_1(out, (int64_t)H * D, wantq);
        if (ok && memcmp(outq, wantq, (size_t)H * D + 8 * (size_t)(H * D / 32)) != 0)
            snprintf(why, sizeof why, "q8_1 output differs from quantizing the f32 output"), ok = 0;
        t_check(ok, name, "%s", why);
    }
    free(q), free(k), free(v), free(qn), free(kn), free(out), free(qf), free(ref);
    free(krow), free(vrow), free(vwant), free(outq), free(wantq), free(sinks);
    gpu_kv_cache_free(&c);
}

static void test_decode_qkv_ws(int H, int Hkv, int D, enum hmoe_type t, const int *lens, int nlens, int max_split, int window,
                               enum sink_kind sk) {
    test_decode_qkv_kv(H, Hkv, D, t, t, lens, nlens, max_split, window, sk);
}
static void test_decode_qkv(int H, int Hkv, int D, enum hmoe_type t, const int *lens, int nlens, int max_split) {
    test_decode_qkv_kv(H, Hkv, D, t, t, lens, nlens, max_split, 0, SINK_NONE);
}

static void test_prefill_kv(int H, int Hkv, int D, enum hmoe_type t, enum hmoe_type tv, int p0, int T, int f16_out) {
    char name[200], why[200] = "";
    snprintf(name, sizeof name, "attn prefill (CUDA cores) H=%d Hkv=%d D=%d %s cache, %d tokens after %d%s", H, Hkv, D, kv_name(t, tv), T,
             p0, f16_out ? ", f32 + f16 out" : "");
    struct gpu_kv_cache c;
    gpu_kv_cache_init2(&c, Hkv, D, p0 + T + 5, t, tv, INT64_MAX);
    const int G = H / Hkv;
    const float scale = 1.0f / sqrtf((float)D);
    const int64_t qs = (int64_t)H * D + 8, os = (int64_t)H * D + 16; /* padded strides */
    float *q = malloc((size_t)(T * qs) * 4), *out = malloc((size_t)(T * os) * 4);
    uint16_t *out16 = malloc((size_t)(T * os) * 2);
    int32_t *pos = malloc((size_t)T * 4);
    double *ref = malloc((size_t)D * 8);
    for (int i = 0; i < T * qs; i++) q[i] = rng_normal() * 2.0f;
    for (int i = 0; i < T; i++) pos[i] = p0 + i;
    float *d_q = dup_dev(q, (size_t)(T * qs) * 4), *d_out = dalloc((size_t)(T * os) * 4);
    uint16_t *d_out16 = f16_out ? dalloc((size_t)(T * os) * 2) : NULL;
    int32_t *d_pos = dup_dev(pos, (size_t)T * 4);
    struct hmoe_err err = {0};
    if (launched(hmoe_cuda_attn_prefill_old(d_q, qs, T, d_pos, &c.kv, H, scale, d_out, d_out16, os, g_stream, &err), &err, name) &&
        from_dev(out, d_out, (size_t)(T * os) * 4, name) && (!f16_out || from_dev(out16, d_out16, (size_t)(T * os) * 2, name))) {
        int ok = 1;
        for (int tk = 0; tk < T && ok; tk++)
            for (int h = 0; h < H && ok; h++) {
                ref_attn(&c, q + tk * qs + (size_t)h * D, h, G, pos[tk], scale, ref);
                char where[64];
                snprintf(where, sizeof where, "token %d head %d", tk, h);
                ok = compare(out + tk * os + (size_t)h * D, ref, D, why, sizeof why, where);
                for (int i = 0; ok && f16_out && i < D; i++)
                    if (out16[tk * os + h * D + i] != hmoe_f32_to_fp16(out[tk * os + h * D + i])) {
                        snprintf(why, sizeof why, "token %d head %d dim %d: f16 out != fp16(f32 out)", tk, h, i);
                        ok = 0;
                    }
            }
        t_check(ok, name, "%s", why);
    }
    free(q), free(out), free(out16), free(pos), free(ref);
    gpu_kv_cache_free(&c);
}

static void test_prefill(int H, int Hkv, int D, enum hmoe_type t, int p0, int T, int f16_out) {
    test_prefill_kv(H, Hkv, D, t, t, p0, T, f16_out);
}

static void test_bad_args(void) {
    struct hmoe_err err = {0};
    void *d = dalloc(4096);
    struct hmoe_cuda_kv kv = {.type_k = HMOE_TYPE_F16, .type_v = HMOE_TYPE_F16, .k = d, .v = d, .n_ctx = 4, .n_head_kv = 4,
                              .head_dim = 96};
    enum hmoe_status st = hmoe_cuda_attn_decode(d, &kv, d, 32, 1.0f, 0, d, d, NULL, g_stream, &err);
    t_check(st == HMOE_ERR_ARG, "attn refuses head_dim 96", "status %d: %s", st, err.msg);
    kv.head_dim = 128;
    kv.type_k = HMOE_TYPE_Q4_K;
    st = hmoe_cuda_attn_decode(d, &kv, d, 32, 1.0f, 0, d, d, NULL, g_stream, &err);
    t_check(st == HMOE_ERR_ARG, "attn refuses a Q4_K K cache", "status %d: %s", st, err.msg);
    kv.type_k = HMOE_TYPE_F16, kv.type_v = HMOE_TYPE_Q2_K;
    st = hmoe_cuda_attn_decode(d, &kv, d, 32, 1.0f, 0, d, d, NULL, g_stream, &err);
    t_check(st == HMOE_ERR_ARG, "attn refuses a Q2_K V cache", "status %d: %s", st, err.msg);
    gpu_free_all();
}

/* K / V type pairs: each cache type for both, then mixed pairs. */
static const enum hmoe_type kv_pairs[][2] = {
    {HMOE_TYPE_F32, HMOE_TYPE_F32},   {HMOE_TYPE_F16, HMOE_TYPE_F16},       {HMOE_TYPE_BF16, HMOE_TYPE_BF16},
    {HMOE_TYPE_Q8_0, HMOE_TYPE_Q8_0}, {HMOE_TYPE_Q4_0, HMOE_TYPE_Q4_0},     {HMOE_TYPE_Q4_1, HMOE_TYPE_Q4_1},
    {HMOE_TYPE_Q5_0, HMOE_TYPE_Q5_0}, {HMOE_TYPE_Q5_1, HMOE_TYPE_Q5_1},     {HMOE_TYPE_IQ4_NL, HMOE_TYPE_IQ4_NL},
    {HMOE_TYPE_Q8_0, HMOE_TYPE_Q4_0}, {HMOE_TYPE_F16, HMOE_TYPE_Q5_1},      {HMOE_TYPE_Q4_0, HMOE_TYPE_F16},
    {HMOE_TYPE_F16, HMOE_TYPE_Q8_0},  {HMOE_TYPE_BF16, HMOE_TYPE_IQ4_NL},   {HMOE_TYPE_F32, HMOE_TYPE_Q4_1},
};
#define N_KV_PAIRS ((int)(sizeof kv_pairs / sizeof kv_pairs[0]))

int main(void) {
    if (!gpu_open_or_skip("gpu_test_attn")) return t_summary();
    rng_seed(4242);
    const int l30[] = {1, 5, 257, 1000, 5000};
    test_decode(32, 4, 128, HMOE_TYPE_F16, l30, 5, 0, 1.0f);
    const int l30q[] = {1, 300, 2049};
    test_decode(32, 4, 128, HMOE_TYPE_Q8_0, l30q, 3, 0, 1.0f);
    const int lsplit[] = {1000};
    test_decode(32, 4, 128, HMOE_TYPE_F16, lsplit, 1, 1, 3.0f);
    const int l7[] = {100, 33};
    test_decode(32, 4, 128, HMOE_TYPE_F16, l7, 2, 7, 3.0f);
    const int ltiny[] = {1, 33, 100};
    test_decode(8, 2, 64, HMOE_TYPE_F16, ltiny, 3, 0, 1.0f);
    const int l235[] = {2000};
    test_decode(64, 4, 128, HMOE_TYPE_F16, l235, 1, 0, 1.0f);
    const int l35[] = {300};
    test_decode(16, 2, 256, HMOE_TYPE_F16, l35, 1, 0, 1.0f);
    test_decode(16, 2, 256, HMOE_TYPE_Q8_0, l35, 1, 0, 1.0f);
    const int lmini[] = {50};
    test_decode(4, 4, 32, HMOE_TYPE_F16, lmini, 1, 0, 1.0f);
    /* fused: one range (<= 128 positions), several ranges merged by the last block, the cap */
    const int lf[] = {1, 64, 128, 129, 257, 1000, 5000, 77};
    test_decode_fused(32, 4, 128, HMOE_TYPE_F16, lf, 8, 0, 1.0f);
    test_decode_fused(32, 4, 128, HMOE_TYPE_Q8_0, lf, 8, 0, 3.0f);
    const int lf3[] = {2000, 130, 1};
    test_decode_fused(32, 4, 128, HMOE_TYPE_F16, lf3, 3, 3, 1.0f);
    test_decode_fused(8, 2, 64, HMOE_TYPE_F16, lf, 8, 0, 1.0f);
    test_decode_fused(4, 4, 32, HMOE_TYPE_F16, lf3, 3, 0, 1.0f);
    test_decode_fused(16, 2, 256, HMOE_TYPE_Q8_0, lf3, 3, 0, 1.0f);
    /* sliding window and sinks: windows below, at and above the fused range size (128 positions),
     * lengths below and above the window; several ranges (window 300, 1000 with 3 splits) */
    const int lw[] = {1, 100, 128, 129, 200, 1000, 5000, 77};
    const int lw3[] = {1, 299, 300, 301, 1000, 64};
    const int lw1000[] = {500, 1000, 2000, 1001};
    test_decode_impl(16, 2, 64, HMOE_TYPE_F16, lw, 8, 0, 1.0f, 1, 128, SINK_MIXED);
    test_decode_impl(16, 2, 64, HMOE_TYPE_F16, lw, 8, 0, 1.0f, 1, 100, SINK_LARGE);
    test_decode_impl(16, 2, 64, HMOE_TYPE_Q8_0, lw3, 6, 0, 3.0f, 1, 300, SINK_SMALL);
    test_decode_impl(32, 4, 128, HMOE_TYPE_F16, lw1000, 4, 3, 1.0f, 1, 1000, SINK_MIXED);
    test_decode_impl(32, 4, 128, HMOE_TYPE_Q8_0, lw, 8, 0, 1.0f, 1, 0, SINK_LARGE);
    test_decode_impl(8, 2, 64, HMOE_TYPE_F16, lw3, 6, 0, 1.0f, 1, 50, SINK_NONE);
    test_decode_impl(16, 2, 64, HMOE_TYPE_F16, lw, 8, 7, 1.0f, 0, 128, SINK_MIXED);
    test_decode_impl(32, 4, 128, HMOE_TYPE_Q8_0, lw1000, 4, 0, 1.0f, 0, 300, SINK_LARGE);
    const int lqw[] = {1, 2, 100, 129, 300, 2001, 97};
    test_decode_qkv_ws(16, 2, 64, HMOE_TYPE_F16, lqw, 7, 0, 128, SINK_MIXED);
    test_decode_qkv_ws(16, 2, 64, HMOE_TYPE_Q8_0, lqw, 7, 0, 300, SINK_LARGE);
    test_decode_qkv_ws(32, 4, 128, HMOE_TYPE_F16, lqw, 7, 3, 1000, SINK_SMALL);
    const int lq[] = {1, 2, 65, 128, 129, 300, 2001, 97};
    test_decode_qkv(32, 4, 128, HMOE_TYPE_F16, lq, 8, 0);
    test_decode_qkv(32, 4, 128, HMOE_TYPE_Q8_0, lq, 8, 0);
    test_decode_qkv(8, 2, 64, HMOE_TYPE_F16, lq, 8, 5);
    test_decode_qkv(4, 4, 32, HMOE_TYPE_Q8_0, lq, 8, 0);
    test_decode_qkv(16, 2, 256, HMOE_TYPE_F16, lq, 4, 0);

    test_prefill(32, 4, 128, HMOE_TYPE_F16, 0, 1, 0);
    test_prefill(32, 4, 128, HMOE_TYPE_F16, 0, 7, 0);
    test_prefill(32, 4, 128, HMOE_TYPE_F16, 0, 200, 1);
    test_prefill(32, 4, 128, HMOE_TYPE_F16, 50, 37, 0);
    test_prefill(32, 4, 128, HMOE_TYPE_Q8_0, 20, 45, 0);
    test_prefill(8, 2, 64, HMOE_TYPE_F16, 0, 33, 0);
    test_prefill(64, 4, 128, HMOE_TYPE_F16, 3, 17, 0);
    test_prefill(16, 2, 256, HMOE_TYPE_F16, 0, 20, 1);
    test_prefill(4, 4, 32, HMOE_TYPE_F16, 0, 10, 0);

    /* every cache type for K and V, and mixed pairs: plain, fused (with a window and sinks) and
     * qkv decode (the store checked byte for byte against the CPU cache store), CUDA-core prefill */
    for (int i = 0; i < N_KV_PAIRS; i++) {
        const enum hmoe_type tk = kv_pairs[i][0], tv = kv_pairs[i][1];
        const int lt[] = {1, 77, 300, 2049};
        test_decode_kv(32, 4, 128, tk, tv, lt, 4, 0, 1.0f, 0, 0, SINK_NONE);
        test_decode_kv(8, 2, 64, tk, tv, lt, 4, 7, 3.0f, 0, 0, SINK_NONE);
        test_decode_kv(32, 4, 128, tk, tv, lt, 4, 0, 1.0f, 1, 0, SINK_NONE);
        test_decode_kv(16, 2, 64, tk, tv, lt, 4, 0, 1.0f, 1, 128, SINK_MIXED);
        test_decode_kv(16, 2, 256, tk, tv, lt, 4, 3, 1.0f, 1, 300, SINK_LARGE);
        test_decode_kv(4, 4, 32, tk, tv, lt, 4, 0, 1.0f, 1, 0, SINK_NONE);
        const int lqt[] = {1, 2, 129, 300, 97};
        test_decode_qkv_kv(32, 4, 128, tk, tv, lqt, 5, 0, 0, SINK_NONE);
        test_decode_qkv_kv(16, 2, 64, tk, tv, lqt, 5, 0, 128, SINK_MIXED);
        test_decode_qkv_kv(4, 4, 32, tk, tv, lqt, 5, 3, 0, SINK_NONE);
        test_prefill_kv(32, 4, 128, tk, tv, 20, 45, 0);
        test_prefill_kv(8, 2, 64, tk, tv, 0, 33, 1);
        test_prefill_kv(16, 2, 256, tk, tv, 3, 17, 0);
    }
    test_bad_args();
    gpu_close();
    return t_summary();
}
