/* test_synth.c — synthetic models (synth.h): the planned tensor list against the layout and
 * mixes of the docs (qwen3moe.md §2, quants.md §9.2, gguf_synth.py's table, re-derived here),
 * a written `tiny` file read back with the GGUF reader (tensor infos, packed offsets, sizes
 * adding up, metadata), block sanity through the reference dequantizers, distinct expert
 * bytes, the generated vocabulary against the real Qwen3 vocab (fixtures/tokenizer), and
 * the zipf routing channel.
 */
#include "harness.h"

#include <unistd.h>

#include "hmoe/gguf.h"
#include "hmoe/json.h"
#include "hmoe/synth.h"

static char tmp_path[256];

/* ---- the expected layout, from the docs ------------------------------------------------ */

static bool more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

struct expect {
    char name[64];
    uint32_t n_dims;
    int64_t ne[3];
    const char *type;
};

/* qwen3moe.md §2 shapes in gguf_synth.py's order; types of quants.md §9.2 Q4_K_M (mix
 * "q4_k_m") or of gguf_synth.py --mix iq2_xxs (mix "synth-iq2_xxs"). */
static int expected_list(const struct hmoe_synth_preset *p, int n_layer, bool script_iq2, struct expect *out) {
    int64_t d = p->n_embd, q = p->n_head * p->head_dim, kv = p->n_head_kv * p->head_dim, f = p->n_ff_exp,
            e = p->n_expert, v = p->n_vocab;
    int n = 0;
#define E(nm, nd, a, b, c, ty)                                                                                         \
    do {                                                                                                               \
        snprintf(out[n].name, sizeof out[n].name, "%s", nm);                                                           \
        out[n].n_dims = nd;                                                                                            \
        out[n].ne[0] = a;                                                                                              \
        out[n].ne[1] = b;                                                                                              \
        out[n].ne[2] = c;                                                                                              \
        out[n].type = ty;                                                                                              \
        n++;                                                                                                           \
    } while (0)
    E("token_embd.weight", 2, d, v, 1, script_iq2 ? "IQ4_XS" : "Q4_K");
    E("output_norm.weight", 1, d, 1, 1, "F32");
    E("output.weight", 2, d, v, 1, "Q6_K");
    for (int i = 0; i < n_layer; i++) {
        char nm[64];
        bool mb = more_bits(i, n_layer);
#define L(suffix, nd, a, b, c, ty)                                                                                     \
    do {                                                                                                               \
        snprintf(nm, sizeof nm, "blk.%d.%s", i, suffix);                                                               \
        E(nm, nd, a, b, c, ty);                                                                                        \
    } while (0)
        L("attn_norm.weight", 1, d, 1, 1, "F32");
        L("attn_q.weight", 2, d, q, 1, "Q4_K");
        L("attn_k.weight", 2, d, kv, 1, "Q4_K");
        L("attn_v.weight", 2, d, kv, 1, mb ? "Q6_K" : "Q4_K");
        L("attn_output.weight", 2, q, d, 1, "Q4_K");
        L("attn_q_norm.weight", 1, p->head_dim, 1, 1, "F32");
        L("attn_k_norm.weight", 1, p->head_dim, 1, 1, "F32");
        L("ffn_norm.weight", 1, d, 1, 1, "F32");
        L("ffn_gate_inp.weight", 2, d, e, 1, "F32");
        L("ffn_gate_exps.weight", 3, d, f, e, script_iq2 ? "IQ2_XXS" : "Q4_K");
        L("ffn_up_exps.weight", 3, d, f, e, script_iq2 ? "IQ2_XXS" : "Q4_K");
        L("ffn_down_exps.weight", 3, f, d, e, script_iq2 ? (mb ? "IQ3_XXS" : "IQ2_XXS") : (mb ? "Q6_K" : "Q4_K"));
#undef L
    }
#undef E
    return n;
}

static void check_plan(const char *preset, int layers, const char *mix, bool script_iq2, const char *case_name) {
    struct hmoe_err err = {0};
    struct hmoe_synth_opts o = {.preset = preset, .mix = mix, .n_layers = (uint32_t)layers, .seed = 1};
    struct hmoe_synth_plan plan;
    if (hmoe_synth_plan_init(&plan, &o, &err) != HMOE_OK) {
        t_check(0, case_name, "%s", err.msg);
        return;
    }
    int n_layer = layers ? layers : (int)plan.preset.n_layer;
    struct expect *ex = calloc(3 + 12 * (size_t)n_layer, sizeof *ex);
    int n = expected_list(&plan.preset, n_layer, script_iq2, ex);
    int bad = -1;
    uint64_t bytes = 0;
    for (int i = 0; i < n && bad < 0 && (size_t)i < plan.n_tensors; i++) {
        const struct hmoe_synth_tensor *t = &plan.tensors[i];
        enum hmoe_type want;
        hmoe_type_from_name(ex[i].type, &want);
        if (strcmp(t->name, ex[i].name) != 0 || t->n_dims != ex[i].n_dims || t->ne[0] != ex[i].ne[0] ||
            t->ne[1] != ex[i].ne[1] || t->ne[2] != ex[i].ne[2] || t->type != want)
            bad = i;
        /* gguf.md §6: nbytes = ne0 / blck * tsize * ne1 * ne2 */
        bytes += ((uint64_t)ex[i].ne[0] / hmoe_type_info[want].blck * hmoe_type_info[want].type_size * ex[i].ne[1] *
                      ex[i].ne[2] + 31) / 32 * 32;
    }
    t_check(bad < 0 && (size_t)n == plan.n_tensors && bytes == plan.data_bytes, case_name,
            "%zu tensors (want %d), data %llu (want %llu), first mismatch %d: %s %s (want %s %s)", plan.n_tensors, n,
            (unsigned long long)plan.data_bytes, (unsigned long long)bytes, bad, bad >= 0 ? plan.tensors[bad].name : "",
            bad >= 0 ? hmoe_type_name(plan.tensors[bad].type) : "", bad >= 0 ? ex[bad].name : "",
            bad >= 0 ? ex[bad].type : "");
    free(ex);
    hmoe_synth_plan_free(&plan);
}

static void test_plans(void) {
    check_plan("tiny", 0, "q4_k_m", false, "plan tiny q4_k_m = qwen3moe.md §2 layout with §9.2 Q4_K_M types");
    check_plan("qwen3-30b-a3b", 6, "q4_k_m", false, "plan 30B --layers 6 q4_k_m = gguf_synth.py's tensor list");
    check_plan("qwen3-30b-a3b", 0, NULL, false, "plan 30B (48 layers, default mix) = gguf_synth.py's tensor list");
    check_plan("qwen3-30b-a3b", 0, "synth-iq2_xxs", true, "plan 30B synth-iq2_xxs = gguf_synth.py --mix iq2_xxs");
    /* qwen3moe.md §9.2: "Whole-file size from the same rules ≈ 18.55 GB"; baselines.md: 17.28 GiB */
    struct hmoe_err err = {0};
    struct hmoe_synth_opts o = {.preset = "qwen3-30b-a3b"};
    struct hmoe_synth_plan plan;
    bool ok = hmoe_synth_plan_init(&plan, &o, &err) == HMOE_OK;
    double gib = ok ? (double)plan.data_bytes / (1024.0 * 1024.0 * 1024.0) : 0;
    t_check(ok && gib > 17.275 && gib < 17.285, "30B q4_k_m data is 17.28 GiB (baselines.md)", "%.4f GiB %s", gib,
            err.msg);
    if (ok) hmoe_synth_plan_free(&plan);
}

static void test_plan_errors(void) {
    struct hmoe_err err = {0};
    struct hmoe_synth_plan plan;
    struct hmoe_synth_opts o = {.preset = "qwen3-31b"};
    t_check(hmoe_synth_plan_init(&plan, &o, &err) == HMOE_ERR_ARG && strstr(err.msg, "qwen3-30b-a3b, qwen3-235b-a22b, tiny"),
            "unknown preset lists the valid ones", "%s", err.msg);
    o.preset = "tiny";
    o.mix = "q5_k_q";
    t_check(hmoe_synth_plan_init(&plan, &o, &err) == HMOE_ERR_ARG && strstr(err.msg, "iq2_m") && strstr(err.msg, "q4_k_m"),
            "unknown mix lists the valid ones", "%s", err.msg);
    struct hmoe_synth_routing r;
    t_check(hmoe_synth_parse_routing("zipf:0", &r, &err) == HMOE_ERR_ARG &&
                hmoe_synth_parse_routing("zipf", &r, &err) == HMOE_ERR_ARG &&
                hmoe_synth_parse_routing("zipf:1.5x", &r, &err) == HMOE_ERR_ARG &&
                hmoe_synth_parse_routing("zipf:1.5", &r, &err) == HMOE_OK && r.kind == HMOE_SYNTH_ROUTING_ZIPF &&
                r.zipf_s == 1.5 && hmoe_synth_parse_routing("uniform", &r, &err) == HMOE_OK &&
                r.kind == HMOE_SYNTH_ROUTING_UNIFORM,
            "routing parser: uniform, zipf:S with S > 0", "%s", err.msg);
    o.mix = NULL;
    o.routing.kind = HMOE_SYNTH_ROUTING_ZIPF;
    o.routing.zipf_s = 1.0;
    t_check(hmoe_synth_plan_init(&plan, &o, &err) == HMOE_ERR_UNSUPPORTED && strstr(err.msg, "two Q4_K blocks"),
            "zipf routing on tiny Q4_K (one block per row) is refused with a hint", "%s", err.msg);
    o.vocab_path = "/nonexistent.gguf";
    o.routing.kind = HMOE_SYNTH_ROUTING_UNIFORM;
    t_check(hmoe_synth_plan_init(&plan, &o, &err) != HMOE_OK && strstr(err.msg, "/nonexistent.gguf"),
            "missing --vocab file is named", "%s", err.msg);
}

/* ---- blocks ----------------------------------------------------------------------------- */

static void test_blocks(void) {
    /* Every type any mix uses: sane values through the (llama.cpp-verified) reference dequantizers. */
    static const enum hmoe_type types[] = {HMOE_TYPE_Q4_K, HMOE_TYPE_Q5_K, HMOE_TYPE_Q6_K, HMOE_TYPE_Q8_0,
                                           HMOE_TYPE_Q2_K, HMOE_TYPE_Q3_K, HMOE_TYPE_IQ2_XXS, HMOE_TYPE_IQ2_XS,
                                           HMOE_TYPE_IQ2_S, HMOE_TYPE_IQ3_XXS, HMOE_TYPE_IQ3_S, HMOE_TYPE_IQ4_XS,
                                           HMOE_TYPE_IQ4_NL, HMOE_TYPE_F16, HMOE_TYPE_F32, HMOE_TYPE_Q4_0,
                                           HMOE_TYPE_Q5_0, HMOE_TYPE_Q5_1};
    for (size_t k = 0; k < HMOE_ARRAY_LEN(types); k++) {
        const struct hmoe_type_info *ti = &hmoe_type_info[types[k]];
        size_t nb = 2048, n = nb * (size_t)ti->blck;
        uint8_t *raw = malloc(nb * (size_t)ti->type_size), *raw2 = malloc(nb * (size_t)ti->type_size);
        float *v = malloc(n * sizeof *v);
        struct hmoe_err err = {0};
        bool ok = hmoe_synth_fill_blocks(types[k], 7, raw, nb, &err) == HMOE_OK &&
                  hmoe_synth_fill_blocks(types[k], 7, raw2, nb, &err) == HMOE_OK && ti->dequant_ref;
        bool same = ok && memcmp(raw, raw2, nb * (size_t)ti->type_size) == 0;
        hmoe_synth_fill_blocks(types[k], 8, raw2, nb, &err);
        bool differs = memcmp(raw, raw2, nb * (size_t)ti->type_size) != 0;
        double s = 0, ss = 0;
        long bad = 0;
        if (ok) {
            ti->dequant_ref(raw, v, (int64_t)n);
            for (size_t i = 0; i < n; i++) {
                if (!isfinite(v[i])) bad++;
                s += v[i];
                ss += (double)v[i] * v[i];
            }
        }
        double mean = s / (double)n, sd = sqrt(ss / (double)n - mean * mean);
        char name[96];
        snprintf(name, sizeof name, "%s random blocks: finite, std ~0.02, deterministic in the seed", ti->name);
        /* 0.015..0.035: gguf_synth.py's own K-quant ranges give 0.031 (Q4_K) */
        t_check(ok && same && differs && bad == 0 && sd > 0.015 && sd < 0.035 && fabs(mean) < 0.005, name,
                "%s std %.4f mean %.4f nonfinite %ld same-seed %d other-seed-differs %d", err.msg, sd, mean, bad, same,
                differs);
        free(raw);
        free(raw2);
        free(v);
    }
}

/* ---- a written file, read back ----------------------------------------------------------- */

static void test_written_tiny(void) {
    struct hmoe_err err = {0};
    struct hmoe_synth_opts o = {.preset = "tiny", .seed = 3};
    struct hmoe_synth_plan plan;
    if (hmoe_synth_plan_init(&plan, &o, &err) != HMOE_OK || hmoe_synth_write(&plan, tmp_path, NULL, NULL, &err) != HMOE_OK) {
        t_check(0, "synth tiny writes", "%s", err.msg);
        return;
    }
    struct hmoe_gguf *g;
    if (hmoe_gguf_open(tmp_path, &g, &err) != HMOE_OK) {
        t_check(0, "our reader opens the synth tiny file", "%s", err.msg);
        hmoe_synth_plan_free(&plan);
        return;
    }
    t_check(1, "our reader opens the synth tiny file", "%s", "");
    /* tensor infos as planned, offsets packed (gguf.md §7), sizes add up to the file size */
    uint64_t expect_off = 0;
    int bad = -1;
    for (uint64_t i = 0; i < g->n_tensors && bad < 0; i++) {
        const struct hmoe_gguf_tensor *t = &g->tensors[i];
        const struct hmoe_synth_tensor *p = &plan.tensors[i];
        if (strcmp(t->name, p->name) != 0 || t->type != p->type || t->ne[0] != p->ne[0] || t->ne[1] != p->ne[1] ||
            t->ne[2] != p->ne[2] || t->n_bytes != p->n_bytes || t->offset != expect_off)
            bad = (int)i;
        expect_off += (t->n_bytes + 31) / 32 * 32;
    }
    t_check(bad < 0 && g->n_tensors == plan.n_tensors && g->data_start + expect_off == g->file_size &&
                g->data_start % 32 == 0,
            "tiny file: tensor infos as planned, packed offsets, data_start + sizes = file size",
            "tensor %d, %llu tensors, data_start %llu + %llu vs size %llu", bad, (unsigned long long)g->n_tensors,
            (unsigned long long)g->data_start, (unsigned long long)expect_off, (unsigned long long)g->file_size);
    uint32_t u = 0;
    struct hmoe_gguf_str arch = {0};
    const struct hmoe_gguf_kv *toks = hmoe_gguf_find_kv(g, "tokenizer.ggml.tokens");
    bool meta = hmoe_gguf_get_str(g, "general.architecture", &arch, &err) == HMOE_OK && arch.len == 8 &&
                memcmp(arch.ptr, "qwen3moe", 8) == 0 && hmoe_gguf_get_u32_or(g, "qwen3moe.block_count", 0) == 4 &&
                hmoe_gguf_get_u32_or(g, "qwen3moe.embedding_length", 0) == 256 &&
                hmoe_gguf_get_u32_or(g, "qwen3moe.expert_count", 0) == 16 &&
                hmoe_gguf_get_u32_or(g, "qwen3moe.expert_used_count", 0) == 4 &&
                hmoe_gguf_get_u32_or(g, "qwen3moe.attention.key_length", 0) == 64 &&
                hmoe_gguf_get_u32_or(g, "general.file_type", 0) == 15 && toks && toks->arr_n == 151936 &&
                hmoe_gguf_get_u32(g, "tokenizer.ggml.eos_token_id", &u, &err) == HMOE_OK && u == 151645;
    t_check(meta, "tiny file: qwen3moe hyperparameters, file_type 15, 151936 tokens, eos 151645", "%s", err.msg);

    /* norms 1 ± 0.02, router N(0, 0.05): as gguf_synth.py */
    const struct hmoe_gguf_tensor *norm = hmoe_gguf_find_tensor(g, "blk.2.ffn_norm.weight"),
                                  *router = hmoe_gguf_find_tensor(g, "blk.2.ffn_gate_inp.weight");
    double s = 0, ss = 0;
    for (int i = 0; norm && i < 256; i++) s += ((const float *)norm->data)[i];
    for (int i = 0; router && i < 256 * 16; i++) ss += pow(((const float *)router->data)[i], 2);
    t_check(norm && router && fabs(s / 256 - 1.0) < 0.01 && fabs(sqrt(ss / 4096) - 0.05) < 0.005,
            "tiny file: norms ~1, router std ~0.05", "norm mean %.4f router std %.4f", s / 256, sqrt(ss / 4096));

    /* no two experts (and no two layers) share bytes: a cache or dedup must not get lucky */
    const struct hmoe_gguf_tensor *g0 = hmoe_gguf_find_tensor(g, "blk.0.ffn_gate_exps.weight"),
                                  *g1 = hmoe_gguf_find_tensor(g, "blk.1.ffn_gate_exps.weight");
    int dup = 0;
    for (int a = 0; g0 && a < 16; a++) {
        for (int b = a + 1; b < 16; b++)
            dup += memcmp((const uint8_t *)g0->data + a * g0->nb[2], (const uint8_t *)g0->data + b * g0->nb[2], g0->nb[2]) == 0;
        dup += memcmp((const uint8_t *)g0->data + a * g0->nb[2], (const uint8_t *)g1->data + a * g1->nb[2], g0->nb[2]) == 0;
    }
    t_check(g0 && g1 && dup == 0, "tiny file: all 16 experts and both layers hold different bytes", "%d identical", dup);

    /* same seed, same bytes */
    char path2[300];
    snprintf(path2, sizeof path2, "%s.2", tmp_path);
    struct hmoe_gguf *g2 = NULL;
    bool same = hmoe_synth_write(&plan, path2, NULL, NULL, &err) == HMOE_OK && hmoe_gguf_open(path2, &g2, &err) == HMOE_OK &&
                g2->file_size == g->file_size && memcmp(g2->base, g->base, g->file_size) == 0;
    t_check(same, "same seed writes the same bytes", "%s", err.msg);
    hmoe_gguf_free(g2);
    unlink(path2);
    hmoe_gguf_free(g);
    hmoe_synth_plan_free(&plan);
    unlink(tmp_path);
}

/* ---- vocabulary --------------------------------------------------------------------- */

static bool str_eq(struct hmoe_gguf_str a, struct hmoe_gguf_str b) { return a.len == b.len && memcmp(a.ptr, b.ptr, a.len) == 0; }

/* Inverse of GPT-2 bytes_to_unicode (tokenizer.md §3): is code point cp one of the 256? */
static bool byte_cp(uint32_t cp) {
    if ((cp >= 0x21 && cp <= 0x7e) || (cp >= 0xa1 && cp <= 0xac) || (cp >= 0xae && cp <= 0xff)) return true;
    return cp >= 0x100 && cp < 0x100 + 68;
}

/* Every character of a normal token must decode to a byte (else llama.cpp fails to load it). */
static bool decodes(struct hmoe_gguf_str s) {
    const unsigned char *p = (const unsigned char *)s.ptr;
    for (uint64_t i = 0; i < s.len;) {
        uint32_t cp;
        if (p[i] < 0x80) cp = p[i++];
        else if ((p[i] & 0xe0) == 0xc0 && i + 1 < s.len) {
            cp = (uint32_t)(p[i] & 0x1f) << 6 | (p[i + 1] & 0x3f);
            i += 2;
        } else return false;
        if (!byte_cp(cp)) return false;
    }
    return s.len > 0;
}

static const struct hmoe_synth_vocab *sorted_vocab;

static int cmp_str(struct hmoe_gguf_str a, struct hmoe_gguf_str b) {
    int c = memcmp(a.ptr, b.ptr, a.len < b.len ? a.len : b.len);
    return c ? c : (a.len < b.len ? -1 : a.len > b.len);
}

static int cmp_tok(const void *x, const void *y) {
    return cmp_str(sorted_vocab->tokens[*(const uint32_t *)x], sorted_vocab->tokens[*(const uint32_t *)y]);
}

/* Id of token text s via the sorted index, or -1. */
static long find_tok(const struct hmoe_synth_vocab *v, const uint32_t *idx, struct hmoe_gguf_str s) {
    size_t lo = 0, hi = v->n_tokens;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = cmp_str(v->tokens[idx[mid]], s);
        if (c == 0) return idx[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return -1;
}

static void test_vocab(void) {
    struct hmoe_err err = {0};
    struct hmoe_synth_vocab v;
    if (hmoe_synth_vocab_init(&v, 151936, &err) != HMOE_OK) {
        t_check(0, "vocab: generates 151936 tokens", "%s", err.msg);
        return;
    }
    /* all token texts unique; every merge "a b" has tokens a and b and makes token 256 + k = a+b */
    uint32_t *idx = malloc(v.n_tokens * sizeof *idx);
    for (uint32_t i = 0; i < v.n_tokens; i++) idx[i] = i;
    sorted_vocab = &v;
    qsort(idx, v.n_tokens, sizeof *idx, cmp_tok);
    long dup = -1;
    for (uint32_t i = 1; i < v.n_tokens && dup < 0; i++)
        if (str_eq(v.tokens[idx[i]], v.tokens[idx[i - 1]])) dup = idx[i];
    t_check(dup < 0, "vocab: all 151936 token texts are distinct", "token %ld repeats", dup);
    long bad_merge = -1;
    for (uint32_t k = 0; k < v.n_merges && bad_merge < 0; k++) {
        struct hmoe_gguf_str m = v.merges[k], res = v.tokens[256 + k];
        const char *sp = memchr(m.ptr, ' ', m.len);
        if (!sp || sp == m.ptr) { bad_merge = k; break; }
        struct hmoe_gguf_str a = {m.ptr, (uint64_t)(sp - m.ptr)}, b = {sp + 1, m.len - a.len - 1};
        if (find_tok(&v, idx, a) < 0 || find_tok(&v, idx, b) < 0 || res.len != a.len + b.len ||
            memcmp(res.ptr, a.ptr, a.len) != 0 || memcmp(res.ptr + a.len, b.ptr, b.len) != 0)
            bad_merge = k;
    }
    free(idx);
    long not_decodable = -1;
    for (uint32_t id = 0; id < 151643 && not_decodable < 0; id++)
        if (!decodes(v.tokens[id]) || v.token_type[id] != 1) not_decodable = id;
    t_check(not_decodable < 0, "vocab: every BPE token is normal and decodes to bytes (tokenizer.md §3)", "token %ld",
            not_decodable);
    t_check(v.n_merges == 151387 && bad_merge < 0,
            "vocab: 151387 merges; every merge 'a b' joins two tokens into token 256 + k", "merge %ld bad", bad_merge);
    /* against the real Qwen3 vocabulary (converted by llama.cpp's rules) */
    struct hmoe_gguf *g;
    if (hmoe_gguf_open(t_shared("fixtures/tokenizer/qwen3-vocab.gguf"), &g, &err) != HMOE_OK) {
        t_check(0, "qwen3-vocab.gguf opens", "%s", err.msg);
        hmoe_synth_vocab_free(&v);
        return;
    }
    const struct hmoe_gguf_kv *toks = hmoe_gguf_find_kv(g, "tokenizer.ggml.tokens"),
                              *types = hmoe_gguf_find_kv(g, "tokenizer.ggml.token_type");
    long bad = -1;
    for (uint32_t id = 0; id < 256 && bad < 0; id++)
        if (!str_eq(v.tokens[id], toks->arr_str[id])) bad = id;
    t_check(bad < 0, "vocab: byte tokens 0..255 equal Qwen3's (GPT-2 order)", "id %ld", bad);
    bad = -1;
    for (uint32_t id = 151643; id < 151936 && bad < 0; id++)
        if (!str_eq(v.tokens[id], toks->arr_str[id]) || v.token_type[id] != (int32_t)hmoe_gguf_arr_i64(types, id))
            bad = id;
    t_check(bad < 0, "vocab: added tokens and [PADn] at 151643..151935 equal Qwen3's (text and type)", "id %ld", bad);
    t_check(v.bos_id == hmoe_gguf_get_u32_or(g, "tokenizer.ggml.bos_token_id", 0) &&
                v.eos_id == hmoe_gguf_get_u32_or(g, "tokenizer.ggml.eos_token_id", 0) &&
                v.pad_id == hmoe_gguf_get_u32_or(g, "tokenizer.ggml.padding_token_id", 0),
            "vocab: bos / eos / pad ids equal Qwen3's", "%u %u %u", v.bos_id, v.eos_id, v.pad_id);
    struct hmoe_gguf_str tmpl = {0};
    const char *ours = hmoe_synth_qwen3_chat_template();
    char *jinja = NULL;
    size_t jlen = 0;
    hmoe_gguf_get_str(g, "tokenizer.chat_template", &tmpl, &err);
    hmoe_read_file(t_shared("fixtures/chat/qwen3-template.jinja"), &jinja, &jlen, &err);
    t_check(jinja && strlen(ours) == jlen && memcmp(ours, jinja, jlen) == 0 && tmpl.len == jlen &&
                memcmp(tmpl.ptr, jinja, jlen) == 0,
            "chat template equals qwen3-template.jinja and the vocab's tokenizer.chat_template", "%zu vs %zu bytes",
            strlen(ours), jlen);
    free(jinja);
    hmoe_gguf_free(g);
    hmoe_synth_vocab_free(&v);

    /* a small vocabulary puts the added tokens at the end, nothing padded */
    bool small = hmoe_synth_vocab_init(&v, 4101, &err) == HMOE_OK && v.n_merges == 4101 - 26 - 256 && v.bos_id == 4075 &&
                 v.eos_id == 4077 && v.tokens[4100].len == 8 && memcmp(v.tokens[4100].ptr, "</think>", 8) == 0;
    t_check(small, "vocab of 4101: added tokens at 4075..4100", "%s", err.msg);
    hmoe_synth_vocab_free(&v);
    t_check(hmoe_synth_vocab_init(&v, 200, &err) == HMOE_ERR_ARG, "vocab smaller than 282 is refused", "accepted");
}

/* ---- zipf routing ------------------------------------------------------------------------ */

static double mean_top_share(const char *routing, uint32_t *hot, struct hmoe_err *err) {
    struct hmoe_synth_opts o = {.preset = "tiny", .mix = "q8_0", .seed = 5};
    if (hmoe_synth_parse_routing(routing, &o.routing, err) != HMOE_OK) return -1;
    struct hmoe_synth_plan plan;
    if (hmoe_synth_plan_init(&plan, &o, err) != HMOE_OK) return -1;
    enum hmoe_status st = hmoe_synth_write(&plan, tmp_path, NULL, NULL, err);
    hmoe_synth_plan_free(&plan);
    struct hmoe_gguf *g;
    if (st != HMOE_OK || hmoe_gguf_open(tmp_path, &g, err) != HMOE_OK) return -1;
    enum { N = 3000 };
    static int32_t tok[N];
    uint64_t x = 99;
    for (int i = 0; i < N; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        tok[i] = (int32_t)((x >> 33) % 151936);
    }
    struct hmoe_synth_route_stats s;
    double share = -1;
    if (hmoe_synth_route_stats_init(&s, g, tok, N, err) == HMOE_OK) {
        share = 0;
        for (uint32_t l = 0; l < s.n_layer; l++) {
            share += hmoe_synth_route_top_share(&s, l, 2) / s.n_layer;
            hot[l] = hmoe_synth_route_hottest(&s, l);
        }
        hmoe_synth_route_stats_free(&s);
    }
    hmoe_gguf_free(g);
    return share;
}

static void test_zipf(void) {
    struct hmoe_err err = {0};
    struct hmoe_synth_channel ch;
    t_check(hmoe_synth_routing_channel(2048, HMOE_TYPE_Q4_K, &ch, &err) == HMOE_OK && ch.ch0 == 0 && ch.n_ch0 == 32 &&
                ch.ch1 == 256 && ch.n_ch1 == 128 && ch.stride1 == 14,
            "routing channel of a 2048-wide Q4_K model", "%s", err.msg);
    uint32_t hot_u[4] = {0}, hot_z[4] = {0};
    double u = mean_top_share("uniform", hot_u, &err), z = mean_top_share("zipf:1.2", hot_z, &err);
    /* 16 experts, top-4: uniform share of the top 2 is ~2/16; Gumbel top-4 with p ∝ 1/rank^1.2
     * gives ~0.37 (simulated). */
    t_check(u > 0.10 && u < 0.16 && z > 0.30 && z < 0.45, "zipf:1.2 concentrates routing, uniform does not (tiny q8_0)",
            "top-2 share uniform %.3f zipf %.3f (%s)", u, z, err.msg);
    int distinct = 0;
    for (int a = 0; a < 4; a++) {
        bool seen = false;
        for (int b = 0; b < a; b++) seen |= hot_z[a] == hot_z[b];
        distinct += !seen;
    }
    t_check(distinct >= 3, "zipf: the hottest expert differs between layers", "hottest %u %u %u %u", hot_z[0], hot_z[1],
            hot_z[2], hot_z[3]);
    /* the channel is private: attention / output do not read it, no layer writes it */
    struct hmoe_gguf *g;
    bool ok = hmoe_gguf_open(tmp_path, &g, &err) == HMOE_OK;
    const struct hmoe_gguf_tensor *an = ok ? hmoe_gguf_find_tensor(g, "blk.1.attn_norm.weight") : NULL,
                                  *fn = ok ? hmoe_gguf_find_tensor(g, "blk.1.ffn_norm.weight") : NULL,
                                  *on = ok ? hmoe_gguf_find_tensor(g, "output_norm.weight") : NULL,
                                  *dn = ok ? hmoe_gguf_find_tensor(g, "blk.3.ffn_down_exps.weight") : NULL,
                                  *ao = ok ? hmoe_gguf_find_tensor(g, "blk.0.attn_output.weight") : NULL,
                                  *em = ok ? hmoe_gguf_find_tensor(g, "token_embd.weight") : NULL;
    struct hmoe_synth_channel c;
    hmoe_synth_routing_channel(256, HMOE_TYPE_Q8_0, &c, &err);
    bool priv = an && fn && on && dn && ao && em;
    float row[256];
    for (uint32_t i = 0; priv && i < 256; i++) {
        bool in = i < c.n_ch0 || (i >= c.ch1 && (i - c.ch1) % c.stride1 == 0 && (i - c.ch1) / c.stride1 < c.n_ch1);
        const float *a = an->data, *f = fn->data, *o = on->data;
        if (in && (a[i] != 0 || o[i] != 0 || f[i] != 1)) priv = false;
        if (!in && (a[i] == 0 || o[i] == 0)) priv = false;
        /* row i of expert 7 of ffn_down and of attn_output */
        hmoe_type_info[dn->type].dequant_ref((const uint8_t *)dn->data + 7 * dn->nb[2] + i * dn->nb[1], row, dn->ne[0]);
        float mx = 0;
        for (int k = 0; k < dn->ne[0]; k++) mx = fmaxf(mx, fabsf(row[k]));
        if (in != (mx == 0)) priv = false;
    }
    /* every token_embd row starts with the same 32 values */
    priv = priv && memcmp(em->data, (const uint8_t *)em->data + 12345 * em->nb[1], 34) == 0 &&
           memcmp((const uint8_t *)em->data + 34, (const uint8_t *)em->data + 12345 * em->nb[1] + 34, 34) != 0;
    t_check(priv, "zipf: channel dims zero in attn/output norms, one in ffn_norm, zero rows in ffn_down; shared embd block",
            "%s", err.msg);
    if (ok) hmoe_gguf_free(g);
    unlink(tmp_path);
}

int main(void) {
    snprintf(tmp_path, sizeof tmp_path, "/tmp/hmoe-test-synth-%d.gguf", (int)getpid());
    test_plans();
    test_plan_errors();
    test_blocks();
    test_written_tiny();
    test_vocab();
    test_zipf();
    return t_summary();
}
