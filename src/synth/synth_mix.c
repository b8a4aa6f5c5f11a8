/* synth_mix.c — which ggml type llama-quantize gives each tensor under a preset
 * ("mixture"), as one table row per mix and one rule function (quants.md §9.1–§9.3), and
 * per-tensor rule lists REGEX=TYPE on top of a mix (the "dynamic" community quantizations).
 * Checked in tests against the types llama-quantize really wrote into the fixture
 * models (fixtures/models/manifest.json) and against the 48-layer examples of §9.3.
 * `synth-iq2_xxs` is not a llama-quantize preset: it is gguf_synth.py's own IQ2 mix.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hmoe/sched.h"
#include "synth_impl.h"

enum bump {
    BUMP_NEVER,
    BUMP_MORE_BITS,    /* use_more_bits(index, n_layer) (§9.1) */
    BUMP_FIRST_EIGHTH, /* the first n/8 tensors of the kind: index < n_layer/8 (§9.2, IQ1/IQ2 presets) */
};

/* A type slot that is "not set". */
#define NONE HMOE_TYPE_COUNT

struct hmoe_synth_mix {
    const char *name;
    uint32_t file_type;            /* general.file_type (llama_ftype) */
    enum hmoe_type base;           /* matrices no rule names */
    enum hmoe_type token_embd, output;
    enum hmoe_type attn_q, attn_k, attn_output, ffn_gate_up;
    enum hmoe_type attn_v, attn_v_bumped;
    enum bump attn_v_when;
    enum hmoe_type attn_v_gqa;     /* attn_v when n_gqa >= 4 ... */
    bool attn_v_gqa_or_experts;    /* ... or expert_count >= 4 (IQ2 presets) */
    enum hmoe_type ffn_down, ffn_down_bumped;
    enum bump ffn_down_when;
    bool eight_expert_rules;       /* the expert_count == 8 modifiers of §9.2 apply */
    bool iq12;                     /* IQ1/IQ2 preset: Q4_K (not Q8_0) for attn_v/attn_k with 8 experts */
    enum hmoe_type attn_output_8x; /* attn_output with 8 experts, NONE = unchanged */
    bool mxfp4_moe;                /* MXFP4_MOE (gpt-oss.md "MXFP4"): 3-D expert stacks MXFP4, other matrices Q8_0 */
};

#define T(x) HMOE_TYPE_##x
static const struct hmoe_synth_mix mixes[] = {
    {.name = "q4_k_m", .file_type = 15, .base = T(Q4_K), .token_embd = T(Q4_K), .output = T(Q6_K), .attn_q = T(Q4_K),
     .attn_k = T(Q4_K), .attn_output = T(Q4_K), .ffn_gate_up = T(Q4_K), .attn_v = T(Q4_K), .attn_v_bumped = T(Q6_K),
     .attn_v_when = BUMP_MORE_BITS, .attn_v_gqa = NONE, .ffn_down = T(Q4_K), .ffn_down_bumped = T(Q6_K),
     .ffn_down_when = BUMP_MORE_BITS, .eight_expert_rules = true, .attn_output_8x = T(Q5_K)},
    {.name = "q6_k", .file_type = 18, .base = T(Q6_K), .token_embd = T(Q6_K), .output = T(Q6_K), .attn_q = T(Q6_K),
     .attn_k = T(Q6_K), .attn_output = T(Q6_K), .ffn_gate_up = T(Q6_K), .attn_v = T(Q6_K), .attn_v_bumped = T(Q6_K),
     .attn_v_gqa = NONE, .ffn_down = T(Q6_K), .ffn_down_bumped = T(Q6_K), .eight_expert_rules = true,
     .attn_output_8x = NONE},
    /* Q8_0 keeps Q8_0 everywhere, output and token_embd included (fixture A-Q8_0). */
    {.name = "q8_0", .file_type = 7, .base = T(Q8_0), .token_embd = T(Q8_0), .output = T(Q8_0), .attn_q = T(Q8_0),
     .attn_k = T(Q8_0), .attn_output = T(Q8_0), .ffn_gate_up = T(Q8_0), .attn_v = T(Q8_0), .attn_v_bumped = T(Q8_0),
     .attn_v_gqa = NONE, .ffn_down = T(Q8_0), .ffn_down_bumped = T(Q8_0), .attn_output_8x = NONE},
    {.name = "f16", .file_type = 1, .base = T(F16), .token_embd = T(F16), .output = T(F16), .attn_q = T(F16),
     .attn_k = T(F16), .attn_output = T(F16), .ffn_gate_up = T(F16), .attn_v = T(F16), .attn_v_bumped = T(F16),
     .attn_v_gqa = NONE, .ffn_down = T(F16), .ffn_down_bumped = T(F16), .attn_output_8x = NONE},
    {.name = "iq2_xxs", .file_type = 19, .base = T(IQ2_XXS), .token_embd = T(Q2_K), .output = T(Q5_K),
     .attn_q = T(IQ2_XXS), .attn_k = T(IQ2_XXS), .attn_output = T(IQ2_XXS), .ffn_gate_up = T(IQ2_XXS),
     .attn_v = T(Q2_K), .attn_v_bumped = T(Q2_K), .attn_v_gqa = T(Q4_K), .attn_v_gqa_or_experts = true,
     .ffn_down = T(IQ2_XXS), .ffn_down_bumped = T(Q2_K), .ffn_down_when = BUMP_FIRST_EIGHTH,
     .eight_expert_rules = true, .iq12 = true, .attn_output_8x = T(Q5_K)},
    {.name = "iq2_xs", .file_type = 20, .base = T(IQ2_XS), .token_embd = T(Q2_K), .output = T(Q5_K), .attn_q = T(IQ2_XS),
     .attn_k = T(IQ2_XS), .attn_output = T(IQ2_XS), .ffn_gate_up = T(IQ2_XS), .attn_v = T(Q2_K),
     .attn_v_bumped = T(Q2_K), .attn_v_gqa = T(Q4_K), .attn_v_gqa_or_experts = true, .ffn_down = T(IQ2_XS),
     .ffn_down_bumped = T(Q2_K), .ffn_down_when = BUMP_FIRST_EIGHTH, .eight_expert_rules = true, .iq12 = true,
     .attn_output_8x = T(Q5_K)},
    /* llama.cpp's IQ2_S preset stores its big tensors as IQ2_XS (fixtures/README.md). */
    {.name = "iq2_s", .file_type = 28, .base = T(IQ2_XS), .token_embd = T(IQ3_S), .output = T(Q5_K), .attn_q = T(IQ2_XS),
     .attn_k = T(IQ2_XS), .attn_output = T(IQ3_S), .ffn_gate_up = T(IQ2_XS), .attn_v = T(IQ3_S),
     .attn_v_bumped = T(IQ3_S), .attn_v_gqa = T(Q4_K), .attn_v_gqa_or_experts = true, .ffn_down = T(IQ2_XS),
     .ffn_down_bumped = T(IQ3_S), .ffn_down_when = BUMP_FIRST_EIGHTH, .eight_expert_rules = true, .iq12 = true,
     .attn_output_8x = T(Q5_K)},
    {.name = "iq2_m", .file_type = 29, .base = T(IQ2_S), .token_embd = T(IQ3_S), .output = T(Q5_K), .attn_q = T(IQ2_S),
     .attn_k = T(IQ2_S), .attn_output = T(IQ3_S), .ffn_gate_up = T(IQ2_S), .attn_v = T(IQ3_S), .attn_v_bumped = T(IQ3_S),
     .attn_v_gqa = T(Q4_K), .attn_v_gqa_or_experts = true, .ffn_down = T(IQ2_S), .ffn_down_bumped = T(IQ3_S),
     .ffn_down_when = BUMP_FIRST_EIGHTH, .eight_expert_rules = true, .iq12 = true, .attn_output_8x = T(Q5_K)},
    /* gguf_synth.py --mix iq2_xxs (the file of the peers' IQ2 baseline, baselines.md run C):
     * experts IQ2_XXS with IQ3_XXS ffn_down in the more-bits layers; attention as Q4_K_M. */
    {.name = "synth-iq2_xxs", .file_type = 19, .base = T(Q4_K), .token_embd = T(IQ4_XS), .output = T(Q6_K),
     .attn_q = T(Q4_K), .attn_k = T(Q4_K), .attn_output = T(Q4_K), .ffn_gate_up = T(IQ2_XXS), .attn_v = T(Q4_K),
     .attn_v_bumped = T(Q6_K), .attn_v_when = BUMP_MORE_BITS, .attn_v_gqa = NONE, .ffn_down = T(IQ2_XXS),
     .ffn_down_bumped = T(IQ3_XXS), .ffn_down_when = BUMP_MORE_BITS, .attn_output_8x = NONE},
    /* llama-quantize MXFP4_MOE, the mix of the published gpt-oss GGUFs (the experts keep the
     * checkpoint's MXFP4 blocks); token_embd and output are Q8_0 too. */
    {.name = "mxfp4_moe", .file_type = 38, .base = T(Q8_0), .token_embd = T(Q8_0), .output = T(Q8_0),
     .attn_q = T(Q8_0), .attn_k = T(Q8_0), .attn_output = T(Q8_0), .ffn_gate_up = T(Q8_0), .attn_v = T(Q8_0),
     .attn_v_bumped = T(Q8_0), .attn_v_gqa = NONE, .ffn_down = T(Q8_0), .ffn_down_bumped = T(Q8_0),
     .attn_output_8x = NONE, .mxfp4_moe = true},
};
#undef T

const struct hmoe_synth_mix *hmoe_synth_find_mix(const char *name) {
    for (size_t i = 0; name && i < HMOE_ARRAY_LEN(mixes); i++)
        if (strcmp(mixes[i].name, name) == 0) return &mixes[i];
    return NULL;
}

const char *hmoe_synth_mix_names(void) {
    return "q4_k_m, q6_k, q8_0, f16, iq2_xxs, iq2_xs, iq2_s, iq2_m, synth-iq2_xxs, mxfp4_moe";
}
const char *hmoe_synth_mix_name(const struct hmoe_synth_mix *mix) { return mix->name; }
uint32_t hmoe_synth_mix_file_type(const struct hmoe_synth_mix *mix) { return mix->file_type; }

/* §9.1: i < n/8 || i >= 7n/8 || (i - n/8) % 3 == 2, integer division. */
static bool use_more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

static enum hmoe_type bumped(enum hmoe_type normal, enum hmoe_type more, enum bump when, int index, int n) {
    bool hit = (when == BUMP_MORE_BITS && use_more_bits(index, n)) || (when == BUMP_FIRST_EIGHTH && index < n / 8);
    return hit ? more : normal;
}

/* §9.1 fallback when a row does not hold whole blocks of the chosen type. */
static enum hmoe_type fallback(enum hmoe_type t, int64_t ne0) {
    static const struct {
        enum hmoe_type from, to;
    } map[] = {
        {HMOE_TYPE_IQ1_S, HMOE_TYPE_IQ4_NL},  {HMOE_TYPE_IQ1_M, HMOE_TYPE_IQ4_NL},   {HMOE_TYPE_IQ2_XXS, HMOE_TYPE_IQ4_NL},
        {HMOE_TYPE_IQ2_XS, HMOE_TYPE_IQ4_NL}, {HMOE_TYPE_IQ2_S, HMOE_TYPE_IQ4_NL},   {HMOE_TYPE_IQ3_XXS, HMOE_TYPE_IQ4_NL},
        {HMOE_TYPE_IQ3_S, HMOE_TYPE_IQ4_NL},  {HMOE_TYPE_IQ4_XS, HMOE_TYPE_IQ4_NL},  {HMOE_TYPE_Q2_K, HMOE_TYPE_Q4_0},
        {HMOE_TYPE_Q3_K, HMOE_TYPE_Q4_0},     {HMOE_TYPE_Q4_K, HMOE_TYPE_Q5_0},      {HMOE_TYPE_Q5_K, HMOE_TYPE_Q5_1},
        {HMOE_TYPE_Q6_K, HMOE_TYPE_Q8_0},
    };
    if (ne0 % hmoe_type_info[t].blck == 0) return t;
    for (size_t i = 0; i < HMOE_ARRAY_LEN(map); i++)
        if (map[i].from == t) {
            t = map[i].to;
            break;
        }
    return ne0 % hmoe_type_info[t].blck == 0 ? t : HMOE_TYPE_F16;
}

static bool has(const char *name, const char *part) { return strstr(name, part) != NULL; }

enum hmoe_type hmoe_synth_type_for_tensor(const struct hmoe_synth_preset *p, const struct hmoe_synth_mix *mix,
                                          const char *name, int index, uint32_t n_dims, int64_t ne0) {
    /* Never quantized: 1-D tensors, non-weights, norms, the MoE router and SSM conv1d (§9.1,
     * quants.md §2); the converter writes them F32. */
    size_t len = strlen(name);
    if (n_dims < 2 || len < 6 || strcmp(name + len - 6, "weight") != 0 || has(name, "_norm.weight") ||
        has(name, "ffn_gate_inp") || has(name, "ssm_conv1d"))
        return HMOE_TYPE_F32;
    if (mix->mxfp4_moe) return fallback(n_dims == 3 ? HMOE_TYPE_MXFP4 : HMOE_TYPE_Q8_0, ne0);
    int n = (int)(p->n_layer + p->n_nextn); /* block_count: MTP blocks count too */
    bool gqa4 = p->n_head_kv > 0 && p->n_head / p->n_head_kv >= 4;
    bool eight = mix->eight_expert_rules && p->n_expert == 8;
    enum hmoe_type t;
    if (strcmp(name, "output.weight") == 0) {
        t = mix->output;
        /* a row that is not whole 256-blocks makes the output head Q8_0 (§9.1) */
        if (ne0 % hmoe_type_info[t].blck != 0) t = HMOE_TYPE_Q8_0;
    } else if (strcmp(name, "token_embd.weight") == 0) {
        t = mix->token_embd;
    } else if (has(name, "attn_v") || has(name, "attn_qkv") || has(name, "attn_kv_b")) {
        /* llama-quantize counts attn_v tensors: with a layer pattern (nemotron_h_moe) only
         * the attention layers have one, so the index is the attention layer's ordinal. */
        int iv = index, nv = n;
        if (p->layer_pattern) {
            iv = nv = 0;
            for (int i = 0; i < (int)p->n_layer; i++)
                if (hmoe_synth_layer_kind(p, i) == '*') iv += i < index, nv++;
        }
        t = bumped(mix->attn_v, mix->attn_v_bumped, mix->attn_v_when, iv, nv);
        if (mix->attn_v_gqa != NONE && (gqa4 || (mix->attn_v_gqa_or_experts && p->n_expert >= 4))) t = mix->attn_v_gqa;
        if (eight) t = mix->iq12 ? HMOE_TYPE_Q4_K : HMOE_TYPE_Q8_0;
    } else if (has(name, "attn_k")) {
        t = eight ? (mix->iq12 ? HMOE_TYPE_Q4_K : HMOE_TYPE_Q8_0) : mix->attn_k;
    } else if (has(name, "attn_q")) {
        t = mix->attn_q;
    } else if (has(name, "attn_output")) {
        t = eight && mix->attn_output_8x != NONE ? mix->attn_output_8x : mix->attn_output;
    } else if (has(name, "ffn_down")) {
        t = bumped(mix->ffn_down, mix->ffn_down_bumped, mix->ffn_down_when, index, n);
    } else if (has(name, "ffn_gate") || has(name, "ffn_up")) {
        t = mix->ffn_gate_up;
    } else {
        t = mix->base;
    }
    return fallback(t, ne0);
}

/* ---- per-tensor rule lists ("REGEX=TYPE,...") ----------------------------------------------
 * The spelling of llama-quantize's --tensor-type and of -ot: a regex searched anywhere in the
 * tensor name, '=', a type name; items separated by commas (so a pattern cannot hold one); the
 * first rule that matches decides. One item without '=' names the mix for the tensors no rule
 * matches (default q4_k_m). Named rule presets expand to such a list. */

struct synth_rule {
    void *re;
    enum hmoe_type type;
    int uses;                          /* tensors it typed (a user's rule that types none is an error) */
    char text[160];
};

struct hmoe_synth_rules {
    bool preset;                       /* a named preset: rules for tensors a preset lacks are fine */
    int n;
    struct synth_rule *r;
    char label[64];
};

/* Modelled on the published tensor table of a "dynamic" Q4_K_XL file of Qwen3-30B-A3B (Unsloth's
 * UD-Q4_K_XL): every attention matrix Q8_0, Q6_K token embeddings and output head, BF16 norm
 * vectors, and expert types that differ by layer: ffn_down Q6_K in the first four blocks and Q5_K
 * elsewhere, ffn_gate/ffn_up IQ4_XS in odd blocks and Q4_K in even ones; routers stay F32. */
static const struct {
    const char *name, *rules;
} rule_presets[] = {
    {"ud-q4_k_xl", "q4_k_m,(attn_norm|attn_q_norm|attn_k_norm|ffn_norm|output_norm)\\.weight=bf16,"
                   "token_embd\\.weight=q6_k,^output\\.weight=q6_k,attn_(q|k|v|qkv|output|gate)\\.weight=q8_0,"
                   "blk\\.[0-3]\\.ffn_down_exps=q6_k,ffn_down_exps=q5_k,"
                   "blk\\.[0-9]*[13579]\\.ffn_(gate|up)_exps=iq4_xs,ffn_(gate|up)_exps=q4_k"},
};

const char *hmoe_synth_rule_preset_names(void) { return "ud-q4_k_xl"; }

bool hmoe_synth_mix_is_rules(const char *spec) {
    if (!spec) return false;
    for (size_t i = 0; i < HMOE_ARRAY_LEN(rule_presets); i++)
        if (!strcmp(spec, rule_presets[i].name)) return true;
    return strchr(spec, '=') != NULL;
}

void hmoe_synth_rules_free(struct hmoe_synth_rules *r) {
    if (!r) return;
    for (int i = 0; i < r->n; i++) hmoe_sched_regex_free(r->r[i].re);
    free(r->r);
    free(r);
}

enum hmoe_status hmoe_synth_rules_parse(const char *spec, struct hmoe_synth_rules **out,
                                        const struct hmoe_synth_mix **base, struct hmoe_err *err) {
    *out = NULL;
    *base = hmoe_synth_find_mix("q4_k_m");
    const char *label = "rules";
    for (size_t i = 0; i < HMOE_ARRAY_LEN(rule_presets); i++)
        if (!strcmp(spec, rule_presets[i].name)) label = spec, spec = rule_presets[i].rules;
    const bool preset = strcmp(label, "rules") != 0;
    struct hmoe_synth_rules *rs = calloc(1, sizeof *rs);
    size_t cap = 1;
    for (const char *p = spec; *p; p++) cap += *p == ',';
    if (rs) rs->r = calloc(cap, sizeof *rs->r);
    if (!rs || !rs->r) {
        hmoe_synth_rules_free(rs);
        return HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory");
    }
    snprintf(rs->label, sizeof rs->label, "%s", label);
    rs->preset = preset;
    bool have_base = false;
    for (const char *item = spec; item;) {
        const char *end = strchr(item, ',');
        const size_t len = end ? (size_t)(end - item) : strlen(item);
        const char *eq = memchr(item, '=', len);
        char text[160];
        snprintf(text, sizeof text, "%.*s", (int)HMOE_MIN(len, sizeof text - 1), item);
        enum hmoe_status st = HMOE_OK;
        if (len == 0) {
            st = HMOE_RAISE(err, HMOE_ERR_ARG, "--mix: empty item in '%s' (items are REGEX=TYPE or a mix name, "
                            "separated by single commas)", spec);
        } else if (!eq) {
            const struct hmoe_synth_mix *m = hmoe_synth_find_mix(text);
            if (!m || have_base)
                st = HMOE_RAISE(err, HMOE_ERR_ARG,
                                m ? "--mix: '%s' is a second base mix (give at most one)"
                                  : "--mix: '%s' is neither REGEX=TYPE nor a mix name (%s)",
                                text, hmoe_synth_mix_names());
            else *base = m, have_base = true;
        } else {
            struct synth_rule *r = &rs->r[rs->n];
            char tname[32], why[128] = "";
            snprintf(tname, sizeof tname, "%.*s", (int)HMOE_MIN((size_t)(item + len - eq - 1), sizeof tname - 1), eq + 1);
            if (eq == item || !hmoe_type_from_name(tname, &r->type))
                st = HMOE_RAISE(err, HMOE_ERR_ARG, "--mix: rule '%s': %s (expected REGEX=TYPE, e.g. 'attn_.*=q8_0')",
                                text, eq == item ? "empty pattern" : "unknown type name");
            else if (!(r->re = hmoe_sched_regex_compile(item, (size_t)(eq - item), why, sizeof why)))
                st = HMOE_RAISE(err, HMOE_ERR_ARG, "--mix: rule '%s': bad regular expression: %s", text, why);
            else snprintf(r->text, sizeof r->text, "%s", text), rs->n++;
        }
        if (st) {
            hmoe_synth_rules_free(rs);
            return st;
        }
        item = end ? end + 1 : NULL;
    }
    *out = rs;
    return HMOE_OK;
}

const char *hmoe_synth_rules_label(const struct hmoe_synth_rules *r) { return r->label; }

void hmoe_synth_rules_apply(struct hmoe_synth_rules *rs, const char *name, uint32_t n_dims, int64_t ne0,
                            enum hmoe_type *type) {
    /* what the converter keeps in float (norms, routers, vectors) is not quantizable, so as in
     * llama-quantize a rule with a quantized type passes it by; a float-type rule may set it */
    const bool vector_like = *type == HMOE_TYPE_F32 || n_dims < 2;
    for (int i = 0; i < rs->n; i++) {
        struct synth_rule *r = &rs->r[i];
        if ((vector_like && hmoe_type_info[r->type].is_quantized) || !hmoe_sched_regex_search(r->re, name)) continue;
        *type = vector_like ? r->type : fallback(r->type, ne0);
        r->uses++;
        return;
    }
}

enum hmoe_status hmoe_synth_rules_check_used(const struct hmoe_synth_rules *rs, struct hmoe_err *err) {
    for (int i = 0; !rs->preset && i < rs->n; i++)
        if (!rs->r[i].uses)
            return HMOE_RAISE(err, HMOE_ERR_ARG,
                              "--mix: rule '%s' types no tensor of this file (an earlier rule takes them, the pattern "
                              "matches no name, or it gives a quantized type to norms/routers, which stay float); "
                              "'hmoe info' lists the tensor names",
                              rs->r[i].text);
    return HMOE_OK;
}
