/* test_synth_mix.c — hmoe_synth_type_for_tensor() against (1) the types llama-quantize
 * actually wrote into every quantized fixture model (fixtures/models/manifest.json: 4-layer
 * 16-expert model A in 8 presets, 3-layer 8-expert "wide" Q4_K_M) and (2) the 48-layer,
 * 128-expert examples of quants.md §9.3 and the layer sets of §9.1 / qwen3moe.md §9.1.
 */
#include "harness.h"

#include "hmoe/json.h"
#include "hmoe/synth.h"

/* ---- (1) the fixture manifest ------------------------------------------------------ */

static const char *mix_for_ftype(int ftype) {
    switch (ftype) { /* general.file_type values, gguf.md §10.1 */
    case 1: return "f16";
    case 7: return "q8_0";
    case 15: return "q4_k_m";
    case 18: return "q6_k";
    case 19: return "iq2_xxs";
    case 20: return "iq2_xs";
    case 28: return "iq2_s";
    case 29: return "iq2_m";
    default: return NULL;
    }
}

static int layer_of(const char *name) {
    int l;
    return sscanf(name, "blk.%d.", &l) == 1 ? l : -1;
}

static void test_manifest(void) {
    struct hmoe_err err = {0};
    struct hmoe_json *m = hmoe_json_parse_file(t_shared("fixtures/models/manifest.json"), &err);
    if (!m) { t_check(0, "manifest.json loads", "%s", err.msg); return; }
    const struct hmoe_json *models = hmoe_json_get(m, "models");
    int n_files = 0;
    for (size_t i = 0; models && i < models->n; i++) {
        const struct hmoe_json *f = models->items[i], *md = hmoe_json_get(f, "metadata");
        const char *mixname = mix_for_ftype((int)hmoe_json_get_num(md, "general.file_type", -1));
        const char *file = hmoe_json_get_str(f, "file", "?");
        if (!mixname || !strstr(hmoe_json_get_str(f, "produced_by", ""), "llama-quantize")) continue;
        struct hmoe_synth_preset p = {
            .n_layer = (uint32_t)hmoe_json_get_num(md, "qwen3moe.block_count", 0),
            .n_head = (uint32_t)hmoe_json_get_num(md, "qwen3moe.attention.head_count", 0),
            .n_head_kv = (uint32_t)hmoe_json_get_num(md, "qwen3moe.attention.head_count_kv", 0),
            .n_expert = (uint32_t)hmoe_json_get_num(md, "qwen3moe.expert_count", 0),
        };
        const struct hmoe_synth_mix *mix = hmoe_synth_find_mix(mixname);
        const struct hmoe_json *ts = hmoe_json_get(f, "tensors");
        int bad = 0, n = 0;
        char detail[256] = "";
        for (size_t k = 0; ts && k < ts->n; k++) {
            const struct hmoe_json *t = ts->items[k], *ne = hmoe_json_get(t, "ne");
            const char *name = hmoe_json_get_str(t, "name", "?"), *want = hmoe_json_get_str(t, "type", "?");
            enum hmoe_type got = hmoe_synth_type_for_tensor(&p, mix, name, layer_of(name), (uint32_t)ne->n,
                                                            (int64_t)ne->items[0]->num);
            n++;
            if (strcmp(hmoe_type_name(got), want) != 0 && bad++ == 0)
                snprintf(detail, sizeof detail, "%s: got %s, llama-quantize wrote %s", name, hmoe_type_name(got), want);
        }
        char case_name[160];
        snprintf(case_name, sizeof case_name, "mix %s matches llama-quantize's %s (%d tensors)", mixname, file, n);
        t_check(mix && n > 0 && bad == 0, case_name, "%d mismatches, first %s", bad, detail);
        n_files++;
    }
    t_check(n_files == 9, "manifest has the 9 llama-quantize files", "found %d", n_files);
    hmoe_json_free(m);
}

/* ---- (2) quants.md §9.3 / §9.1, qwen3moe.md §9.1 ----------------------------------- */

static const struct hmoe_synth_preset *p30(void) { return hmoe_synth_find_preset("qwen3-30b-a3b"); }

static const char *type_of(const struct hmoe_synth_preset *p, const char *mix, const char *tensor, int layer, int64_t ne0) {
    char name[64];
    if (layer >= 0) snprintf(name, sizeof name, "blk.%d.%s", layer, tensor);
    else snprintf(name, sizeof name, "%s", tensor);
    uint32_t n_dims = strstr(tensor, "_exps") ? 3 : strstr(tensor, "norm") ? 1 : 2;
    return hmoe_type_name(hmoe_synth_type_for_tensor(p, hmoe_synth_find_mix(mix), name, layer, n_dims, ne0));
}

/* Layers of `tensor` that get type `more` (else `normal`) must be exactly `set`. */
static void check_layers(const struct hmoe_synth_preset *p, const char *mix, const char *tensor, int64_t ne0,
                         const char *more, const char *normal, const int *set, int n_set, const char *case_name) {
    int bad = -1;
    const char *got = "";
    for (int l = 0; l < (int)p->n_layer && bad < 0; l++) {
        bool in = false;
        for (int k = 0; k < n_set; k++) in |= set[k] == l;
        got = type_of(p, mix, tensor, l, ne0);
        if (strcmp(got, in ? more : normal) != 0) bad = l;
    }
    t_check(bad < 0, case_name, "layer %d got %s", bad, got);
}

static void test_q4_k_m_48(void) {
    const struct hmoe_synth_preset *p = p30();
    /* "attn_v Q6_K in layers {0–5, 8, 11, 14, ..., 38, 41–47} else Q4_K" */
    static const int more[] = {0, 1, 2, 3, 4, 5, 8, 11, 14, 17, 20, 23, 26, 29, 32, 35, 38, 41, 42, 43, 44, 45, 46, 47};
    int n = (int)HMOE_ARRAY_LEN(more);
    check_layers(p, "q4_k_m", "attn_v.weight", 2048, "Q6_K", "Q4_K", more, n, "§9.3 Q4_K_M attn_v layer set (48 layers)");
    check_layers(p, "q4_k_m", "ffn_down_exps.weight", 768, "Q6_K", "Q4_K", more, n,
                 "§9.3 Q4_K_M ffn_down_exps layer set (48 layers)");
    const char *fixed[][2] = {{"token_embd.weight", "Q4_K"}, {"output.weight", "Q6_K"}, {"attn_q.weight", "Q4_K"},
                              {"attn_k.weight", "Q4_K"}, {"attn_output.weight", "Q4_K"}, {"ffn_gate_exps.weight", "Q4_K"},
                              {"ffn_up_exps.weight", "Q4_K"}, {"ffn_gate_inp.weight", "F32"}, {"attn_norm.weight", "F32"},
                              {"attn_q_norm.weight", "F32"}, {"output_norm.weight", "F32"}};
    int bad = -1;
    for (int i = 0; i < (int)HMOE_ARRAY_LEN(fixed) && bad < 0; i++) {
        bool global = strstr(fixed[i][0], "token_embd") || strstr(fixed[i][0], "output");
        int l_end = global ? 1 : 48;
        for (int l = 0; l < l_end; l++)
            if (strcmp(type_of(p, "q4_k_m", fixed[i][0], global ? -1 : l, 2048), fixed[i][1]) != 0) bad = i;
    }
    t_check(bad < 0, "§9.3 Q4_K_M other tensors (token_embd, output, q/k/o, gate/up, router, norms)", "%s",
            bad >= 0 ? fixed[bad][0] : "");
}

static void test_iq2_m_48(void) {
    const struct hmoe_synth_preset *p = p30();
    static const int first6[] = {0, 1, 2, 3, 4, 5}; /* "first 6 = 48/8 ffn_down tensors" */
    check_layers(p, "iq2_m", "ffn_down_exps.weight", 768, "IQ3_S", "IQ2_S", first6, 6,
                 "§9.3 IQ2_M ffn_down_exps: IQ3_S in layers 0-5, IQ2_S elsewhere");
    check_layers(p, "iq2_m", "attn_v.weight", 2048, "", "Q4_K", NULL, 0, "§9.3 IQ2_M attn_v Q4_K (n_gqa >= 4)");
    const char *fixed[][2] = {{"token_embd.weight", "IQ3_S"}, {"output.weight", "Q5_K"}, {"attn_q.weight", "IQ2_S"},
                              {"attn_k.weight", "IQ2_S"}, {"attn_output.weight", "IQ3_S"},
                              {"ffn_gate_exps.weight", "IQ2_S"}, {"ffn_up_exps.weight", "IQ2_S"}};
    int bad = -1;
    for (int i = 0; i < (int)HMOE_ARRAY_LEN(fixed) && bad < 0; i++) {
        bool global = strstr(fixed[i][0], "token_embd") || strstr(fixed[i][0], "output.");
        if (strcmp(type_of(p, "iq2_m", fixed[i][0], global ? -1 : 7, 2048), fixed[i][1]) != 0) bad = i;
    }
    t_check(bad < 0, "§9.3 IQ2_M token_embd IQ3_S, output Q5_K, q/k IQ2_S, o IQ3_S, gate/up IQ2_S", "%s",
            bad >= 0 ? fixed[bad][0] : "");
    /* §9.2 rows for the other IQ2 presets on the same model */
    static const int first6b[] = {0, 1, 2, 3, 4, 5};
    check_layers(p, "iq2_xxs", "ffn_down_exps.weight", 768, "Q2_K", "IQ2_XXS", first6b, 6,
                 "§9.2 IQ2_XXS ffn_down_exps: Q2_K for the first n/8, IQ2_XXS elsewhere");
    check_layers(p, "iq2_xs", "ffn_down_exps.weight", 768, "Q2_K", "IQ2_XS", first6b, 6,
                 "§9.2 IQ2_XS ffn_down_exps: Q2_K for the first n/8, IQ2_XS elsewhere");
    t_check(strcmp(type_of(p, "iq2_xxs", "token_embd.weight", -1, 2048), "Q2_K") == 0 &&
                strcmp(type_of(p, "iq2_xxs", "attn_v.weight", 3, 2048), "Q4_K") == 0 &&
                strcmp(type_of(p, "iq2_xxs", "output.weight", -1, 2048), "Q5_K") == 0,
            "§9.2 IQ2_XXS token_embd Q2_K, attn_v Q4_K, output Q5_K", "wrong type");
}

static void test_fallback_1408(void) {
    /* §9.3: n_ff_exp = 1408: ffn_down_exps rows fall back; gate/up rows (n_embd) do not */
    const struct hmoe_synth_preset *p = p30();
    static const int more[] = {0, 1, 2, 3, 4, 5, 8, 11, 14, 17, 20, 23, 26, 29, 32, 35, 38, 41, 42, 43, 44, 45, 46, 47};
    check_layers(p, "q4_k_m", "ffn_down_exps.weight", 1408, "Q8_0", "Q5_0", more, (int)HMOE_ARRAY_LEN(more),
                 "§9.3 n_ff_exp 1408: Q4_K_M ffn_down Q8_0 in more-bits layers, Q5_0 elsewhere");
    check_layers(p, "iq2_m", "ffn_down_exps.weight", 1408, "", "IQ4_NL", NULL, 0,
                 "§9.3 n_ff_exp 1408: IQ2_M ffn_down IQ4_NL everywhere");
    t_check(strcmp(type_of(p, "q4_k_m", "ffn_gate_exps.weight", 3, 2048), "Q4_K") == 0 &&
                strcmp(type_of(p, "iq2_m", "ffn_up_exps.weight", 3, 2048), "IQ2_S") == 0,
            "§9.3 n_ff_exp 1408: gate/up keep their types", "changed");
    t_check(strcmp(type_of(p, "q4_k_m", "attn_q.weight", 3, 48), "F16") == 0, "§9.1 row of 48 elements falls back to F16",
            "got %s", type_of(p, "q4_k_m", "attn_q.weight", 3, 48));
}

static void test_layer_sets(void) {
    /* §9.1: n = 32 selects 0–3, 6, 9, 12, 15, 18, 21, 24, 27, 28–31 */
    struct hmoe_synth_preset p32 = *p30();
    p32.n_layer = 32;
    static const int set32[] = {0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 28, 29, 30, 31};
    check_layers(&p32, "q4_k_m", "attn_v.weight", 2048, "Q6_K", "Q4_K", set32, (int)HMOE_ARRAY_LEN(set32),
                 "§9.1 use_more_bits layer set for n = 32");
    /* qwen3moe.md §9.1: n = 94 → 46 layers (0–10, 13, 16, …, 79, 82–93) */
    const struct hmoe_synth_preset *p235 = hmoe_synth_find_preset("qwen3-235b-a22b");
    int set94[94], n94 = 0;
    for (int l = 0; l <= 10; l++) set94[n94++] = l;
    for (int l = 13; l <= 79; l += 3) set94[n94++] = l;
    for (int l = 82; l <= 93; l++) set94[n94++] = l;
    check_layers(p235, "q4_k_m", "ffn_down_exps.weight", 1536, "Q6_K", "Q4_K", set94, n94,
                 "qwen3moe.md §9.1 more-bits layers of the 94-layer model");
    t_check(n94 == 46, "qwen3moe.md §9.1 the 94-layer set has 46 layers", "%d", n94);
}

static void test_lookup(void) {
    t_check(hmoe_synth_find_mix("q4_k_m") && hmoe_synth_find_mix("synth-iq2_xxs") && !hmoe_synth_find_mix("q4_k_x") &&
                hmoe_synth_mix_file_type(hmoe_synth_find_mix("iq2_m")) == 29 &&
                hmoe_synth_mix_file_type(hmoe_synth_find_mix("q4_k_m")) == 15,
            "mix lookup and general.file_type (gguf.md §10.1)", "wrong");
    const struct hmoe_synth_preset *p = p30(), *q = hmoe_synth_find_preset("qwen3-235b-a22b");
    /* qwen3moe.md §8 */
    t_check(p && p->n_layer == 48 && p->n_embd == 2048 && p->n_head == 32 && p->n_head_kv == 4 && p->head_dim == 128 &&
                p->n_expert == 128 && p->n_expert_used == 8 && p->n_ff_exp == 768 && p->n_vocab == 151936 &&
                p->n_ctx == 40960 && p->n_ff == 6144,
            "30B-A3B hyperparameters (qwen3moe.md §8)", "wrong");
    t_check(q && q->n_layer == 94 && q->n_embd == 4096 && q->n_head == 64 && q->n_head_kv == 4 && q->head_dim == 128 &&
                q->n_expert == 128 && q->n_expert_used == 8 && q->n_ff_exp == 1536 && q->n_ff == 12288,
            "235B-A22B hyperparameters (qwen3moe.md §8)", "wrong");
    t_check(!hmoe_synth_find_preset("qwen3-31b"), "unknown preset is not found", "found");
}

int main(void) {
    test_manifest();
    test_q4_k_m_48();
    test_iq2_m_48();
    test_fallback_1408();
    test_layer_sets();
    test_lookup();
    return t_summary();
}
