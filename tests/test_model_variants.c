/* test_model_variants.c — layouts the loader accepts beyond the shipped files, and RoPE
 * scaling (qwen3moe.md §2 "optional tensors", §5.1-5.2):
 *   - the F32 mini model rewritten with fused blk.N.attn_qkv.weight {d, H*D + 2*Hkv*D}
 *     (rows [Q | K | V]) and a zero attn_qkv.bias must reproduce llama.cpp's golden logits
 *     (1e-4); with a non-zero bias the logits must move (the bias is applied);
 *   - the RoPE angle table for linear and YaRN scaling against the formulas of §5.1-5.2
 *     evaluated in double, including the worked example (factor 4 over 32768, base 1e6:
 *     low 23, high 40, mscale 1.13863).
 */
#include "gguf_build.h"
#include "harness.h"
#include "model/model_impl.h"
#include "model_check.h"

static unsigned char *file_bytes(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)sz);
    *n = b && fread(b, 1, (size_t)sz, f) == (size_t)sz ? (size_t)sz : 0;
    fclose(f);
    return b;
}

/* Offset of the GGUF string `s` (its u64 length) in buf, or SIZE_MAX. */
static size_t find_gguf_str(const unsigned char *buf, size_t n, const char *s) {
    size_t len = strlen(s);
    for (size_t i = 0; i + 8 + len <= n; i++) {
        uint64_t l;
        memcpy(&l, buf + i, 8);
        if (l == len && memcmp(buf + i + 8, s, len) == 0) return i;
    }
    return SIZE_MAX;
}

static bool starts_with(const char *s, const char *p) { return strncmp(s, p, strlen(p)) == 0; }
static bool ends_with(const char *s, const char *x) {
    size_t a = strlen(s), b = strlen(x);
    return a >= b && strcmp(s + a - b, x) == 0;
}

/* Rewrite `g` (the mini model) with fused QKV tensors whose bias is `bias` everywhere. The
 * metadata records are copied byte for byte; tensors keep their order, data 32-aligned. */
static struct gguf_build fuse_qkv(const struct hmoe_gguf *g, const unsigned char *orig, float bias) {
    struct gguf_build b = {0};
    size_t kv_end = find_gguf_str(orig, g->file_size, g->tensors[0].name);
    int n_layers = 0;
    for (uint64_t i = 0; i < g->n_tensors; i++) n_layers += ends_with(g->tensors[i].name, "attn_q.weight");
    gb_header(&b, 3, g->n_tensors - (uint64_t)n_layers, g->n_kv);
    gb_raw(&b, orig + 24, kv_end - 24);
    /* Pass 1: tensor infos with running offsets; pass 2: the data. */
    for (int pass = 0; pass < 2; pass++) {
        uint64_t off = 0;
        if (pass == 1) gb_pad(&b, 32);
        for (uint64_t i = 0; i < g->n_tensors; i++) {
            const struct hmoe_gguf_tensor *t = &g->tensors[i];
            if (starts_with(t->name, "blk.") && (ends_with(t->name, "attn_k.weight") || ends_with(t->name, "attn_v.weight")))
                continue;
            if (ends_with(t->name, "attn_q.weight")) {
                char base[64], nm[80];
                snprintf(base, sizeof base, "%.*s", (int)(strlen(t->name) - strlen("attn_q.weight")), t->name);
                snprintf(nm, sizeof nm, "%sattn_k.weight", base);
                const struct hmoe_gguf_tensor *tk = hmoe_gguf_find_tensor(g, nm);
                snprintf(nm, sizeof nm, "%sattn_v.weight", base);
                const struct hmoe_gguf_tensor *tv = hmoe_gguf_find_tensor(g, nm);
                const uint64_t rows = (uint64_t)(t->ne[1] + tk->ne[1] + tv->ne[1]);
                const uint64_t wbytes = t->n_bytes + tk->n_bytes + tv->n_bytes, bbytes = rows * 4;
                if (pass == 0) {
                    snprintf(nm, sizeof nm, "%sattn_qkv.weight", base);
                    gb_tensor_info(&b, nm, 2, (const uint64_t[]){(uint64_t)t->ne[0], rows}, 0, off);
                    snprintf(nm, sizeof nm, "%sattn_qkv.bias", base);
                    gb_tensor_info(&b, nm, 1, (const uint64_t[]){rows}, 0, (off + wbytes + 31) / 32 * 32);
                } else {
                    gb_raw(&b, t->data, t->n_bytes);
                    gb_raw(&b, tk->data, tk->n_bytes);
                    gb_raw(&b, tv->data, tv->n_bytes);
                    gb_pad(&b, 32);
                    for (uint64_t r = 0; r < rows; r++) gb_f32(&b, bias);
                    gb_pad(&b, 32);
                }
                off = ((off + wbytes + 31) / 32 * 32 + bbytes + 31) / 32 * 32;
                continue;
            }
            if (pass == 0) {
                uint64_t ne[4] = {(uint64_t)t->ne[0], (uint64_t)t->ne[1], (uint64_t)t->ne[2], (uint64_t)t->ne[3]};
                gb_tensor_info(&b, t->name, t->n_dims, ne, t->type, off);
            } else {
                gb_raw(&b, t->data, t->n_bytes);
                gb_pad(&b, 32);
            }
            off = (off + t->n_bytes + 31) / 32 * 32;
        }
    }
    return b;
}

static void fused_qkv_case(void) {
    struct hmoe_err err = {0};
    size_t n = 0;
    char path[8192];
    snprintf(path, sizeof path, "%s", t_shared("fixtures/models/tiny-qwen3moe-A-mini-F32.gguf"));
    unsigned char *orig = file_bytes(path, &n);
    struct hmoe_gguf *g = NULL;
    if (!orig || hmoe_gguf_open_memory(orig, n, "mini", &g, &err)) {
        t_check(0, "fused QKV: read the mini model", "%s", err.msg);
        free(orig);
        return;
    }
    /* p05_text with every position stored: the golden to compare with. */
    snprintf(path, sizeof path, "%s", t_shared("fixtures/golden/tiny-qwen3moe-A-mini-F32.json"));
    struct hmoe_json *side = hmoe_json_parse_file(path, &err);
    const struct hmoe_json *pr = side ? hmoe_json_get(side, "prompts")->items[4] : NULL;
    int n_pos = 0;
    int32_t *ids = pr ? mc_ids(hmoe_json_get(pr, "ids"), &n_pos) : NULL;
    const int V = 4101;
    snprintf(path, sizeof path, "%s%s", t_shared("fixtures/golden/"), pr ? hmoe_json_get_str(pr, "logits_file", "?") : "?");
    float *ref = mc_read_f32(path, (size_t)n_pos * V), *out = malloc(sizeof(float) * (size_t)(n_pos ? n_pos : 1) * V);
    for (int with_bias = 0; with_bias < 2; with_bias++) {
        struct gguf_build b = fuse_qkv(g, orig, with_bias ? 0.05f : 0.0f);
        struct hmoe_gguf *gf = NULL;
        struct hmoe_model *m = NULL;
        struct hmoe_ctx *c = NULL;
        struct hmoe_ctx_params cp;
        hmoe_ctx_params_default(&cp);
        cp.n_ctx = 64;
        cp.type_k = cp.type_v = HMOE_TYPE_F32;
        cp.n_threads = 1;
        enum hmoe_status st = hmoe_gguf_open_memory(b.d, b.n, "fused.gguf", &gf, &err);
        if (!st) st = hmoe_model_load_gguf(gf, NULL, &m, &err);
        if (st) hmoe_gguf_free(gf);
        bool fused = !st && !hmoe_gguf_find_tensor(m->gguf, "blk.0.attn_q.weight") &&
                     m->w.layers[0].attn_q_bias != NULL;
        if (!st) st = hmoe_ctx_init(m, &cp, &c, &err);
        if (!st) st = hmoe_ctx_decode(c, ids, n_pos, 0, HMOE_LOGITS_ALL, out, &err);
        double worst = 0;
        for (size_t i = 0; !st && ref && i < (size_t)n_pos * V; i++) {
            double d = fabs((double)out[i] - ref[i]);
            worst = d > worst || d != d ? d : worst;
        }
        if (!with_bias)
            t_check(!st && fused && ref && worst <= 1e-4,
                    "fused attn_qkv (+ zero bias) reproduces the golden p05 logits", "%s fused %d, max |d| %.3g",
                    st ? err.msg : "", fused, worst);
        else
            t_check(!st && fused && ref && worst > 1e-3, "fused attn_qkv: a non-zero bias is applied",
                    "%s max |d| vs the unbiased golden %.3g", st ? err.msg : "", worst);
        hmoe_ctx_free(c);
        hmoe_model_free(m);
        free(b.d);
    }
    hmoe_json_free(side);
    free(ids);
    free(ref);
    free(out);
    hmoe_gguf_free(g);
    free(orig);
}

/* §5.2 in double: angle and magnitude of pair i at position p. */
static void rope_expect(const struct hmoe_model_config *c, int p, int i, double *theta, double *mscale) {
    const double base = c->rope_freq_base, s = 1.0 / c->rope_freq_scale;
    const double te = p * pow(base, -2.0 * i / c->n_rot);
    *mscale = c->rope_attn_factor;
    *theta = te * c->rope_freq_scale;
    if (c->rope_scaling == HMOE_ROPE_SCALING_YARN) {
        const double two_pi = 2 * M_PI;
        double lo = floor(c->n_rot * log(c->rope_n_ctx_orig / (32 * two_pi)) / (2 * log(base)));
        double hi = ceil(c->n_rot * log(c->rope_n_ctx_orig / (1 * two_pi)) / (2 * log(base)));
        lo = lo > 0 ? lo : 0;
        hi = hi < c->n_rot - 1 ? hi : c->n_rot - 1;
        double y = (i - lo) / fmax(0.001, hi - lo), ramp = 1 - fmin(1, fmax(0, y));
        *theta = te / s * (1 - ramp) + te * ramp;
        *mscale *= 1 + 0.1 * log(s);
    }
}

static void rope_case(enum hmoe_rope_scaling type, float factor, const char *name) {
    struct hmoe_model_config c = {0};
    c.n_rot = 128;
    c.rope_freq_base = 1e6f;
    c.rope_scaling = type;
    c.rope_freq_scale = 1.0f / factor;
    c.rope_n_ctx_orig = 32768;
    c.rope_attn_factor = 1.0f;
    const int32_t pos[4] = {0, 1, 77, 3000};
    float co[4 * 64], si[4 * 64];
    hmoe_model_rope_table(&c, pos, 4, co, si);
    double worst = 0, ms = 0;
    for (int t = 0; t < 4; t++)
        for (int i = 0; i < 64; i++) {
            double th, m;
            rope_expect(&c, pos[t], i, &th, &m);
            ms = m;
            /* f32 angles built by repeated multiplication: allow relative angle error ~1e-6. */
            double tol = 1e-5 + 2e-6 * fabs(th);
            double d = fmax(fabs(co[t * 64 + i] - m * cos(th)), fabs(si[t * 64 + i] - m * sin(th)));
            worst = fmax(worst, d / tol);
        }
    t_check(worst <= 1.0, name, "worst error %.2f x tolerance (mscale %.5f)", worst, ms);
}

int main(void) {
    fused_qkv_case();
    rope_case(HMOE_ROPE_SCALING_NONE, 1.0f, "RoPE table without scaling matches §5 (base 1e6, 128 dims)");
    rope_case(HMOE_ROPE_SCALING_LINEAR, 4.0f, "RoPE table with linear scaling x4 matches §5.1");
    rope_case(HMOE_ROPE_SCALING_YARN, 4.0f, "RoPE table with YaRN x4 over 32768 matches §5.2");
    /* The worked example's constants: mscale 1 + 0.1 ln 4 = 1.13863, pair 0 unscaled
     * (ramp 1 below low = 23), pair 63 fully interpolated (above high = 40). */
    struct hmoe_model_config c = {0};
    c.n_rot = 128;
    c.rope_freq_base = 1e6f;
    c.rope_scaling = HMOE_ROPE_SCALING_YARN;
    c.rope_freq_scale = 0.25f;
    c.rope_n_ctx_orig = 32768;
    c.rope_attn_factor = 1.0f;
    const int32_t p = 1000;
    float co[64], si[64];
    hmoe_model_rope_table(&c, &p, 1, co, si);
    double mag = hypot(co[0], si[0]);
    double th63 = 1000 * pow(1e6, -2.0 * 63 / 128) / 4, th22 = 1000 * pow(1e6, -2.0 * 22 / 128);
    t_check(fabs(mag - 1.13863) < 1e-5 && fabs(atan2(si[63], co[63]) - th63) < 1e-5 &&
                fabs(remainder(atan2(si[22], co[22]) - th22, 2 * M_PI)) < 1e-3,
            "YaRN worked example: mscale 1.13863, pair 22 extrapolated, pair 63 interpolated",
            "mscale %.6f, angle63 %.6g (want %.6g)", mag, atan2(si[63], co[63]), th63);
    return t_summary();
}
