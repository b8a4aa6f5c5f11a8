/* test_gguf.c — the GGUF loader on valid files: the worked example of gguf.md §12, the
 * shipped fixture models against shared/fixtures/models/manifest.json (tensor names,
 * types, ne, n_bytes, data sha256, metadata), the Qwen3 vocabulary and the moe-tiny files
 * against their READMEs, and the typed getters on tests/data/gguf-good/all-types.gguf
 * (whose values are written by tools/gen_gguf_corpus.c).
 */
#include <inttypes.h>

#include "gguf_build.h"
#include "gguf_check.h"
#include "harness.h"
#include "hmoe/json.h"
#include "sha256.h"

static int streq(struct hmoe_gguf_str s, const char *c) { return s.len == strlen(c) && memcmp(s.ptr, c, s.len) == 0; }

/* gguf.md §12, every field of the table. */
static void worked_example(void) {
    struct gguf_build b = {0};
    gguf_build_worked_example(&b);
    static const struct { size_t off; const char *hex; } bytes[] = {
        {0, "47475546"}, {4, "03000000"}, {8, "0200000000000000"}, {16, "0300000000000000"}, {24, "1400000000000000"},
        {32, "67656e6572616c2e"}, {52, "08000000"}, {56, "0500000000000000"}, {64, "6c6c616d61"},
        {69, "1100000000000000"}, {94, "04000000"}, {98, "20000000"}, {102, "1500000000000000"},
        {110, "746f6b656e697a65"}, {131, "09000000"}, {135, "06000000"}, {139, "0200000000000000"},
        {147, "00000000"}, {151, "0000c0bf"}, {155, "0800000000000000"}, {163, "612e776569676874"},
        {171, "02000000"}, {175, "0300"}, {183, "0200"}, {191, "00000000"}, {195, "0000"},
        {203, "0600000000000000"}, {211, "622e65787073"}, {217, "03000000"}, {221, "2000"}, {229, "0100"},
        {237, "0200"}, {245, "08000000"}, {249, "2000"}, {257, "00"}, {288, "0000803f00000040"}, {312, "00"},
        {320, "0038f0f1f2"}, {354, "003cf0f1f2"}, {388, "00"},
    };
    int bytes_ok = b.n == 416;
    for (size_t i = 0; i < sizeof bytes / sizeof bytes[0] && bytes_ok; i++) {
        unsigned char want[16];
        long n = hmoe_hex_decode(bytes[i].hex, want, sizeof want);
        bytes_ok = n > 0 && memcmp(b.d + bytes[i].off, want, (size_t)n) == 0;
        if (!bytes_ok) printf("  byte mismatch at offset %zu\n", bytes[i].off);
    }
    t_check(bytes_ok, "gguf §12 example: built bytes match the table", "size %zu (want 416) or bytes differ", b.n);

    struct hmoe_err err = {0};
    struct hmoe_gguf *g = NULL;
    enum hmoe_status st = hmoe_gguf_open_memory(b.d, b.n, "example.gguf", &g, &err);
    t_check(st == HMOE_OK, "gguf §12 example: opens", "%s", err.msg);
    if (st != HMOE_OK) { free(b.d); return; }
    t_check(g->version == 3 && g->n_kv == 3 && g->n_tensors == 2 && g->file_size == 416 && !g->is_mapped,
            "gguf §12 example: header", "version %u n_kv %" PRIu64 " n_tensors %" PRIu64, g->version, g->n_kv,
            g->n_tensors);
    t_check(g->alignment == 32 && g->data_start == 288, "gguf §12 example: alignment 32, data_start 288",
            "alignment %u data_start %" PRIu64, g->alignment, g->data_start);
    struct hmoe_gguf_str arch = {0};
    uint32_t al = 0;
    const struct hmoe_gguf_kv *sc = NULL;
    int kv_ok = hmoe_gguf_get_str(g, "general.architecture", &arch, &err) == HMOE_OK && streq(arch, "llama") &&
                arch.ptr == (const char *)b.d + 64 && hmoe_gguf_get_u32(g, "general.alignment", &al, &err) == HMOE_OK &&
                al == 32 && hmoe_gguf_get_arr(g, "tokenizer.ggml.scores", &sc, &err) == HMOE_OK &&
                sc->arr_type == HMOE_GGUF_F32 && sc->arr_n == 2 && hmoe_gguf_arr_f64(sc, 0) == 0.0 &&
                hmoe_gguf_arr_f64(sc, 1) == -1.5 && sc->arr_data == b.d + 147 && g->kv[0].file_offset == 24 &&
                g->kv[1].file_offset == 69 && g->kv[2].file_offset == 102;
    t_check(kv_ok, "gguf §12 example: metadata values and offsets", "%s", err.msg);

    const struct hmoe_gguf_tensor *a = hmoe_gguf_find_tensor(g, "a.weight"), *e = hmoe_gguf_find_tensor(g, "b.exps");
    int ta = a && a->type == HMOE_TYPE_F32 && a->n_dims == 2 && a->ne[0] == 3 && a->ne[1] == 2 && a->ne[2] == 1 &&
             a->ne[3] == 1 && a->nb[0] == 4 && a->nb[1] == 12 && a->nb[2] == 24 && a->nb[3] == 24 && a->n_elements == 6 &&
             a->n_bytes == 24 && a->offset == 0 && a->data == b.d + 288 && a->info_offset == 155;
    if (ta) {
        float v[6];
        memcpy(v, a->data, sizeof v);
        for (int i = 0; i < 6; i++) ta = ta && v[i] == (float)(i + 1);
    }
    t_check(ta, "gguf §12 example: a.weight F32 [3,2] at offset 0 holds 1..6", "wrong fields or data");
    int tb = e && e->type == HMOE_TYPE_Q8_0 && e->n_dims == 3 && e->ne[0] == 32 && e->ne[1] == 1 && e->ne[2] == 2 &&
             e->ne[3] == 1 && e->nb[0] == 34 && e->nb[1] == 34 && e->nb[2] == 34 && e->nb[3] == 68 && e->n_elements == 64 &&
             e->n_bytes == 68 && e->offset == 32 && e->data == b.d + 320 && e->info_offset == 203;
    if (tb) {
        const uint8_t *d = e->data;
        /* expert 0: d = fp16 0x3800, qs = -16..15; expert 1 starts at nb[2] = 34 with 0x3c00 */
        tb = d[0] == 0x00 && d[1] == 0x38 && (int8_t)d[2] == -16 && (int8_t)d[33] == 15 && d[34] == 0x00 && d[35] == 0x3c &&
             (int8_t)d[36] == -16;
    }
    t_check(tb, "gguf §12 example: b.exps Q8_0 [32,1,2], nb = [34,34,34,68], expert data", "wrong fields or data");
    t_check(!hmoe_gguf_find_tensor(g, "c") && !hmoe_gguf_find_kv(g, "general.name") && !hmoe_gguf_find_tensor(g, "a.weigh"),
            "gguf §12 example: absent names are not found", "lookup returned something");
    hmoe_gguf_free(g);

    /* The committed corpus copy is the same bytes; open it through the mmap path. */
    char *f = NULL;
    size_t fn = 0;
    int same = hmoe_read_file("tests/data/gguf-good/worked-example.gguf", &f, &fn, &err) == HMOE_OK && fn == b.n &&
               memcmp(f, b.d, fn) == 0;
    free(f);
    st = hmoe_gguf_open("tests/data/gguf-good/worked-example.gguf", &g, &err);
    t_check(same && st == HMOE_OK && g->is_mapped && g->data_start == 288 &&
                ((const uint8_t *)hmoe_gguf_find_tensor(g, "b.exps")->data)[1] == 0x38,
            "gguf §12 example: file copy matches and opens via mmap", "%s", same ? err.msg : "file differs from table");
    hmoe_gguf_free(g);
    free(b.d);
}

/* One manifest metadata value against the file's record. */
static int meta_equal(const struct hmoe_gguf_kv *kv, const struct hmoe_json *j, char *why, size_t wn) {
    switch (kv->type) {
    case HMOE_GGUF_STRING:
        if (j->kind == HMOE_JSON_STRING && kv->v.str.len == j->str_len && memcmp(kv->v.str.ptr, j->str, j->str_len) == 0)
            return 1;
        break;
    case HMOE_GGUF_BOOL:
        if (j->kind == HMOE_JSON_BOOL && j->b == kv->v.b) return 1;
        break;
    case HMOE_GGUF_F32:
    case HMOE_GGUF_F64:
        if (j->kind == HMOE_JSON_NUMBER && j->num == kv->v.f64) return 1;
        break;
    case HMOE_GGUF_ARRAY: {
        if (j->kind != HMOE_JSON_ARRAY || j->n != kv->arr_n) break;
        for (size_t i = 0; i < j->n; i++)
            if (j->items[i]->num != hmoe_gguf_arr_f64(kv, i)) {
                snprintf(why, wn, "element %zu differs", i);
                return 0;
            }
        return 1;
    }
    case HMOE_GGUF_I8:
    case HMOE_GGUF_I16:
    case HMOE_GGUF_I32:
    case HMOE_GGUF_I64:
        if (j->kind == HMOE_JSON_NUMBER && strtoll(j->str, NULL, 10) == kv->v.i64 && !strpbrk(j->str, ".eE")) return 1;
        break;
    default: /* unsigned integers: compare the JSON text so 64-bit values survive */
        if (j->kind == HMOE_JSON_NUMBER && strtoull(j->str, NULL, 10) == kv->v.u64 && !strpbrk(j->str, ".eE-")) return 1;
        break;
    }
    snprintf(why, wn, "key '%s' (%s) differs from manifest value '%s'", kv->key, hmoe_gguf_vtype_name(kv->type),
             j->kind == HMOE_JSON_STRING || j->kind == HMOE_JSON_NUMBER ? j->str : "(non-scalar)");
    return 0;
}

static void manifest_models(void) {
    struct hmoe_err err = {0};
    struct hmoe_json *man = hmoe_json_parse_file(t_shared("fixtures/models/manifest.json"), &err);
    const struct hmoe_json *models = hmoe_json_get(man, "models");
    t_check(models && models->kind == HMOE_JSON_ARRAY && models->n > 0, "manifest.json parses", "%s", err.msg);
    if (!models) { hmoe_json_free(man); return; }
    int n_shipped = 0;
    for (size_t m = 0; m < models->n; m++) {
        const struct hmoe_json *mo = models->items[m];
        if (!hmoe_json_get_bool(mo, "included", false)) continue;
        n_shipped++;
        const char *file = hmoe_json_get_str(mo, "file", "?");
        char rel[512], name[600];
        snprintf(rel, sizeof rel, "fixtures/models/%s", file);
        struct hmoe_gguf *g = NULL;
        enum hmoe_status st = hmoe_gguf_open(t_shared(rel), &g, &err);
        snprintf(name, sizeof name, "gguf opens %s", file);
        t_check(st == HMOE_OK, name, "%s", err.msg);
        if (st) continue;
        const char *inv = gguf_check_invariants(g, g->base, g->file_size);
        snprintf(name, sizeof name, "gguf %s: loader invariants", file);
        t_check(!inv, name, "%s", inv);
        snprintf(name, sizeof name, "gguf %s: file size = manifest size_bytes", file);
        t_check((double)g->file_size == hmoe_json_get_num(mo, "size_bytes", -1), name, "%" PRIu64, g->file_size);

        /* Tensors: name, type, ne, n_bytes and (F32 masters) the sha256 of the data. */
        const struct hmoe_json *ts = hmoe_json_get(mo, "tensors");
        char why[600] = "";
        size_t n_hashed = 0;
        if (!ts || ts->n != g->n_tensors)
            snprintf(why, sizeof why, "tensor count %" PRIu64 " vs manifest %zu", g->n_tensors, ts ? ts->n : 0);
        for (size_t i = 0; ts && i < ts->n && !why[0]; i++) {
            const struct hmoe_json *tj = ts->items[i];
            const char *tn = hmoe_json_get_str(tj, "name", "");
            const struct hmoe_gguf_tensor *t = hmoe_gguf_find_tensor(g, tn);
            const struct hmoe_json *ne = hmoe_json_get(tj, "ne");
            if (!t) { snprintf(why, sizeof why, "tensor '%s' missing", tn); break; }
            if (strcmp(hmoe_type_name(t->type), hmoe_json_get_str(tj, "type", "")) != 0)
                snprintf(why, sizeof why, "'%s': type %s vs %s", tn, hmoe_type_name(t->type), hmoe_json_get_str(tj, "type", ""));
            else if (!ne || ne->n != t->n_dims)
                snprintf(why, sizeof why, "'%s': n_dims %u vs manifest ne length %zu", tn, t->n_dims, ne ? ne->n : 0);
            else if ((double)t->n_bytes != hmoe_json_get_num(tj, "n_bytes", -1))
                snprintf(why, sizeof why, "'%s': n_bytes %" PRIu64, tn, t->n_bytes);
            for (size_t d = 0; !why[0] && d < 4; d++)
                if ((d < ne->n && (double)t->ne[d] != ne->items[d]->num) || (d >= ne->n && t->ne[d] != 1))
                    snprintf(why, sizeof why, "'%s': ne[%zu] = %" PRId64, tn, d, t->ne[d]);
            const char *sha = hmoe_json_get_str(tj, "data_sha256", NULL);
            if (sha && !why[0]) {
                char hex[65];
                sha256_hex(t->data, t->n_bytes, hex);
                if (strcmp(hex, sha) != 0) snprintf(why, sizeof why, "'%s': data sha256 %s, manifest %s", tn, hex, sha);
                n_hashed++;
            }
        }
        snprintf(name, sizeof name, "gguf %s: %zu tensors match manifest (name, type, ne, n_bytes; %zu data sha256)",
                 file, ts ? ts->n : 0, n_hashed);
        t_check(!why[0], name, "%s", why);

        /* Metadata: the manifest lists every non-tokenizer key with its value. */
        const struct hmoe_json *md = hmoe_json_get(mo, "metadata");
        why[0] = 0;
        size_t n_file_keys = 0;
        for (size_t k = 0; md && k < md->n && !why[0]; k++) {
            const struct hmoe_gguf_kv *kv = hmoe_gguf_find_kv(g, md->keys[k]);
            if (!kv) snprintf(why, sizeof why, "key '%s' missing", md->keys[k]);
            else meta_equal(kv, md->items[k], why, sizeof why);
        }
        for (uint64_t k = 0; k < g->n_kv && !why[0]; k++) {
            if (strncmp(g->kv[k].key, "tokenizer.", 10) == 0) continue;
            n_file_keys++;
            if (!hmoe_json_get(md, g->kv[k].key)) snprintf(why, sizeof why, "file key '%s' not in manifest", g->kv[k].key);
        }
        if (!why[0] && (!md || n_file_keys != md->n)) snprintf(why, sizeof why, "%zu non-tokenizer keys in file", n_file_keys);
        snprintf(name, sizeof name, "gguf %s: %zu metadata keys match manifest", file, md ? md->n : 0);
        t_check(!why[0], name, "%s", why);
        hmoe_gguf_free(g);
    }
    t_check(n_shipped == 3, "manifest lists the 3 shipped models", "%d shipped", n_shipped);
    hmoe_json_free(man);
}

/* tokenizer/qwen3-vocab.gguf: facts from fixtures/README.md §1. */
static void vocab(void) {
    struct hmoe_err err = {0};
    struct hmoe_gguf *g = NULL;
    enum hmoe_status st = hmoe_gguf_open(t_shared("fixtures/tokenizer/qwen3-vocab.gguf"), &g, &err);
    t_check(st == HMOE_OK, "gguf opens tokenizer/qwen3-vocab.gguf", "%s", err.msg);
    if (st) return;
    const struct hmoe_gguf_kv *tok = NULL, *mer = NULL, *tt = NULL;
    struct hmoe_gguf_str model = {0}, pre = {0}, arch = {0};
    uint32_t eos = 0, pad = 0, bos = 0;
    int ok = g->n_tensors == 0 && hmoe_gguf_get_arr(g, "tokenizer.ggml.tokens", &tok, &err) == HMOE_OK &&
             tok->arr_type == HMOE_GGUF_STRING && tok->arr_n == 151936 &&
             hmoe_gguf_get_arr(g, "tokenizer.ggml.merges", &mer, &err) == HMOE_OK && mer->arr_n == 151387 &&
             hmoe_gguf_get_arr(g, "tokenizer.ggml.token_type", &tt, &err) == HMOE_OK && tt->arr_type == HMOE_GGUF_I32 &&
             tt->arr_n == 151936 && hmoe_gguf_get_str(g, "tokenizer.ggml.model", &model, &err) == HMOE_OK &&
             streq(model, "gpt2") && hmoe_gguf_get_str(g, "tokenizer.ggml.pre", &pre, &err) == HMOE_OK &&
             streq(pre, "qwen2") && hmoe_gguf_get_str(g, "general.architecture", &arch, &err) == HMOE_OK &&
             streq(arch, "qwen3moe") && hmoe_gguf_get_u32(g, "tokenizer.ggml.eos_token_id", &eos, &err) == HMOE_OK &&
             eos == 151645 && hmoe_gguf_get_u32(g, "tokenizer.ggml.padding_token_id", &pad, &err) == HMOE_OK &&
             pad == 151643 && hmoe_gguf_get_u32(g, "tokenizer.ggml.bos_token_id", &bos, &err) == HMOE_OK &&
             bos == 151643 && hmoe_gguf_get_bool_or(g, "tokenizer.ggml.add_bos_token", true) == false;
    t_check(ok, "gguf qwen3-vocab: counts, ids and tokenizer keys", "%s", err.msg);
    ok = tok && tt && streq(tok->arr_str[151645], "<|im_end|>") && streq(tok->arr_str[151669], "[PAD151669]") &&
         streq(tok->arr_str[151643], "<|endoftext|>") && hmoe_gguf_arr_i64(tt, 151645) == 3 &&
         hmoe_gguf_arr_i64(tt, 151669) == 5 && hmoe_gguf_arr_i64(tt, 0) == 1 && hmoe_gguf_arr_i64(tt, 151935) == 5;
    /* Merge k makes token 256 + k: the merge's two halves concatenated are that token. */
    for (uint64_t k = 0; ok && mer && k < mer->arr_n; k += 9973) {
        struct hmoe_gguf_str m = mer->arr_str[k], t = tok->arr_str[256 + k];
        const char *sp = memchr(m.ptr + 1, ' ', m.len - 1);
        ok = sp && m.len - 1 == t.len && memcmp(m.ptr, t.ptr, (size_t)(sp - m.ptr)) == 0 &&
             memcmp(sp + 1, t.ptr + (sp - m.ptr), m.len - (size_t)(sp - m.ptr) - 1) == 0;
    }
    t_check(ok, "gguf qwen3-vocab: special tokens, token types, merge k = token 256+k", "mismatch");
    hmoe_gguf_free(g);
}

/* The moe-tiny files: configuration from fixtures/moe-tiny/README.md. */
static void moe_tiny(void) {
    static const struct {
        const char *file, *arch;
        uint32_t n_embd, n_layer, n_expert, n_used;
    } cases[] = {
        {"qwen3moe-tiny.gguf", "qwen3moe", 64, 2, 8, 3},
        {"qwen35moe-tiny.gguf", "qwen35moe", 64, 4, 8, 3},
        {"gpt-oss-tiny.gguf", "gpt-oss", 64, 4, 8, 3},
        {"deepseek2-tiny.gguf", "deepseek2", 64, 3, 16, 4},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char rel[256], key[128], name[300];
        snprintf(rel, sizeof rel, "fixtures/moe-tiny/%s", cases[i].file);
        snprintf(name, sizeof name, "gguf opens moe-tiny/%s (arch, n_embd, layers, experts)", cases[i].file);
        struct hmoe_err err = {0};
        struct hmoe_gguf *g = NULL;
        enum hmoe_status st = hmoe_gguf_open(t_shared(rel), &g, &err);
        int ok = st == HMOE_OK;
        struct hmoe_gguf_str arch = {0};
        const char *a = cases[i].arch;
        uint32_t v[4] = {0};
        const char *keys[4] = {"embedding_length", "block_count", "expert_count", "expert_used_count"};
        ok = ok && hmoe_gguf_get_str(g, "general.architecture", &arch, &err) == HMOE_OK && streq(arch, a);
        for (int k = 0; ok && k < 4; k++) {
            snprintf(key, sizeof key, "%s.%s", a, keys[k]);
            ok = hmoe_gguf_get_u32(g, key, &v[k], &err) == HMOE_OK;
        }
        ok = ok && v[0] == cases[i].n_embd && v[1] == cases[i].n_layer && v[2] == cases[i].n_expert &&
             v[3] == cases[i].n_used && !gguf_check_invariants(g, g->base, g->file_size);
        /* token_embd is [n_embd, 256 byte tokens] F32 in every file. */
        const struct hmoe_gguf_tensor *te = ok ? hmoe_gguf_find_tensor(g, "token_embd.weight") : NULL;
        ok = ok && te && te->type == HMOE_TYPE_F32 && te->ne[0] == 64 && te->ne[1] == 256;
        t_check(ok, name, "%s (values %u %u %u %u)", err.msg, v[0], v[1], v[2], v[3]);
        if (ok && strcmp(a, "qwen35moe") == 0) {
            const struct hmoe_gguf_kv *s = NULL;
            ok = hmoe_gguf_get_arr(g, "qwen35moe.rope.dimension_sections", &s, &err) == HMOE_OK && s->arr_n == 4 &&
                 hmoe_gguf_arr_i64(s, 0) == 3 && hmoe_gguf_arr_i64(s, 1) == 3 && hmoe_gguf_arr_i64(s, 2) == 2 &&
                 hmoe_gguf_arr_i64(s, 3) == 0;
            t_check(ok, "gguf qwen35moe-tiny: rope.dimension_sections = [3,3,2,0]", "%s", err.msg);
        }
        hmoe_gguf_free(g);
    }
}

/* The typed getters on the all-types file (values from tools/gen_gguf_corpus.c). */
static void getters(void) {
    struct hmoe_err err = {0};
    struct hmoe_gguf *g = NULL;
    enum hmoe_status st = hmoe_gguf_open("tests/data/gguf-good/all-types.gguf", &g, &err);
    t_check(st == HMOE_OK, "gguf opens all-types.gguf", "%s", err.msg);
    if (st) return;
    uint32_t u32 = 0;
    uint64_t u64 = 0;
    int64_t i64 = 0;
    float f = 0;
    bool b = false;
    struct hmoe_gguf_str s = {0};
    t_check(hmoe_gguf_get_u32(g, "testarch.u8", &u32, &err) == HMOE_OK && u32 == 200 &&
                hmoe_gguf_get_u32(g, "testarch.u16", &u32, &err) == HMOE_OK && u32 == 60000 &&
                hmoe_gguf_get_i64(g, "testarch.i8", &i64, &err) == HMOE_OK && i64 == -5 &&
                hmoe_gguf_get_i64(g, "testarch.i16", &i64, &err) == HMOE_OK && i64 == -30000 &&
                hmoe_gguf_get_i64(g, "testarch.i32", &i64, &err) == HMOE_OK && i64 == -2000000000 &&
                hmoe_gguf_get_i64(g, "testarch.i64", &i64, &err) == HMOE_OK && i64 == -9000000000ll &&
                hmoe_gguf_get_u64(g, "testarch.u64", &u64, &err) == HMOE_OK && u64 == UINT64_MAX &&
                hmoe_gguf_get_u64(g, "testarch.u8", &u64, &err) == HMOE_OK && u64 == 200 &&
                hmoe_gguf_get_u32(g, "general.alignment", &u32, &err) == HMOE_OK && u32 == 64 && g->alignment == 64,
            "gguf getters: every integer width widens", "%s", err.msg);
    t_check(hmoe_gguf_get_f32(g, "testarch.f32", &f, &err) == HMOE_OK && f == 1e-6f &&
                hmoe_gguf_get_f32(g, "testarch.u16", &f, &err) == HMOE_OK && f == 60000.0f &&
                hmoe_gguf_get_bool(g, "testarch.bool_true", &b, &err) == HMOE_OK && b &&
                hmoe_gguf_get_bool(g, "testarch.bool_two", &b, &err) == HMOE_OK && b &&
                hmoe_gguf_get_str(g, "general.name", &s, &err) == HMOE_OK && s.len == 0 &&
                hmoe_gguf_get_str(g, "general.architecture", &s, &err) == HMOE_OK && streq(s, "testarch"),
            "gguf getters: f32, bool (2 = true, §11 #10), empty string", "%s", err.msg);
    struct { const char *key; int which; enum hmoe_status want; const char *msg; } bad[] = {
        {"testarch.i8", 0, HMOE_ERR_FORMAT, "key 'testarch.i8': value -5 does not fit in u32"},
        {"testarch.u64", 0, HMOE_ERR_FORMAT, "value 18446744073709551615 does not fit in u32"},
        {"testarch.u64", 2, HMOE_ERR_FORMAT, "does not fit in i64"},
        {"testarch.i64", 1, HMOE_ERR_FORMAT, "value -9000000000 does not fit"},
        {"testarch.f64", 3, HMOE_ERR_FORMAT, "does not fit in f32"},
        {"general.name", 0, HMOE_ERR_FORMAT, "key 'general.name': stored as string, expected an integer"},
        {"testarch.u8", 4, HMOE_ERR_FORMAT, "stored as u8, expected bool"},
        {"testarch.u8", 5, HMOE_ERR_FORMAT, "stored as u8, expected string"},
        {"testarch.u8", 6, HMOE_ERR_FORMAT, "stored as u8, expected an array"},
        {"testarch.arr_i16", 0, HMOE_ERR_FORMAT, "stored as array, expected an integer"},
        {"no.such.key", 0, HMOE_ERR_NOT_FOUND, "all-types.gguf: metadata key 'no.such.key' not found"},
        {"no.such.key", 5, HMOE_ERR_NOT_FOUND, "not found"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct hmoe_err e2 = {0};
        const struct hmoe_gguf_kv *kv = NULL;
        switch (bad[i].which) {
        case 0: st = hmoe_gguf_get_u32(g, bad[i].key, &u32, &e2); break;
        case 1: st = hmoe_gguf_get_u64(g, bad[i].key, &u64, &e2); break;
        case 2: st = hmoe_gguf_get_i64(g, bad[i].key, &i64, &e2); break;
        case 3: st = hmoe_gguf_get_f32(g, bad[i].key, &f, &e2); break;
        case 4: st = hmoe_gguf_get_bool(g, bad[i].key, &b, &e2); break;
        case 5: st = hmoe_gguf_get_str(g, bad[i].key, &s, &e2); break;
        default: st = hmoe_gguf_get_arr(g, bad[i].key, &kv, &e2); break;
        }
        char name[200];
        snprintf(name, sizeof name, "gguf getter error: %s", bad[i].msg);
        t_check(st == bad[i].want && strstr(e2.msg, bad[i].msg), name, "status %s, message '%s'", hmoe_status_str(st), e2.msg);
    }
    t_check(hmoe_gguf_get_u32_or(g, "missing", 7) == 7 && hmoe_gguf_get_u32_or(g, "general.name", 9) == 9 &&
                hmoe_gguf_get_u32_or(g, "testarch.u8", 9) == 200 && hmoe_gguf_get_f32_or(g, "testarch.f32", 0) == 1e-6f &&
                hmoe_gguf_get_f32_or(g, "missing", 2.5f) == 2.5f && hmoe_gguf_get_bool_or(g, "missing", true) &&
                !hmoe_gguf_get_bool_or(g, "testarch.u8", false),
            "gguf getters: _or defaults for absent and mistyped keys", "wrong default");

    const struct hmoe_gguf_kv *a16 = hmoe_gguf_find_kv(g, "testarch.arr_i16"), *au8 = hmoe_gguf_find_kv(g, "testarch.arr_u8");
    const struct hmoe_gguf_kv *a32 = hmoe_gguf_find_kv(g, "testarch.arr_i32"), *af = hmoe_gguf_find_kv(g, "testarch.arr_f64");
    const struct hmoe_gguf_kv *ab = hmoe_gguf_find_kv(g, "testarch.arr_bool"), *ae = hmoe_gguf_find_kv(g, "testarch.arr_empty");
    const struct hmoe_gguf_kv *tk = hmoe_gguf_find_kv(g, "tokenizer.ggml.tokens");
    int ok = a16 && au8 && a32 && af && ab && ae && tk && a16->arr_n == 3 && hmoe_gguf_arr_i64(a16, 0) == 1 &&
             hmoe_gguf_arr_i64(a16, 1) == -2 && hmoe_gguf_arr_i64(a16, 2) == 32767 && hmoe_gguf_arr_f64(a16, 1) == -2.0 &&
             hmoe_gguf_arr_i64(a16, 3) == 0 && hmoe_gguf_arr_i64(au8, 0) == 255 && hmoe_gguf_arr_i64(au8, 1) == 0 &&
             hmoe_gguf_arr_i64(a32, 0) == -10 && hmoe_gguf_arr_i64(a32, 3) == 11 && hmoe_gguf_arr_f64(af, 0) == 0.25 &&
             hmoe_gguf_arr_f64(af, 1) == -1e10 && hmoe_gguf_arr_i64(af, 1) == -10000000000ll &&
             hmoe_gguf_arr_i64(ab, 0) == 0 && hmoe_gguf_arr_i64(ab, 2) == 1 && ae->arr_n == 0 && ae->arr_type == HMOE_GGUF_U32 &&
             hmoe_gguf_arr_i64(ae, 0) == 0 && tk->arr_n == 4 && tk->arr_str[0].len == 1 && tk->arr_str[1].len == 0 &&
             streq(tk->arr_str[2], "\xc4\xa0the") && tk->arr_str[3].len == 3 && tk->arr_str[3].ptr[1] == 0 &&
             hmoe_gguf_arr_i64(tk, 0) == 0;
    t_check(ok, "gguf arrays: element widening, bool, empty, string elements (incl. NUL)", "wrong element");

    /* Tensors of odd shapes (gguf.md §6): 0 dims, a zero dimension, 4-D, trailing 1s. */
    const struct hmoe_gguf_tensor *t0 = hmoe_gguf_find_tensor(g, "scalar.n_dims0"), *te = hmoe_gguf_find_tensor(g, "empty.ne1_0");
    const struct hmoe_gguf_tensor *t4 = hmoe_gguf_find_tensor(g, "f16.4d"), *tq = hmoe_gguf_find_tensor(g, "q4k.trailing1");
    const struct hmoe_gguf_tensor *tx = hmoe_gguf_find_tensor(g, "blk.0.ffn_down_exps.weight");
    const struct hmoe_gguf_tensor *ti = hmoe_gguf_find_tensor(g, "iq2xs.row"), *tb = hmoe_gguf_find_tensor(g, "bf16.v");
    ok = t0 && te && t4 && tq && tx && ti && tb && g->n_tensors == 7 && g->data_start % 64 == 0 && t0->n_dims == 0 &&
         t0->n_elements == 1 && t0->n_bytes == 4 && t0->ne[0] == 1 && te->n_elements == 0 && te->n_bytes == 0 &&
         t4->type == HMOE_TYPE_F16 && t4->ne[3] == 2 && t4->nb[1] == 4 && t4->nb[2] == 12 && t4->nb[3] == 12 &&
         t4->n_bytes == 24 && tq->n_dims == 3 && tq->nb[1] == 144 && tq->nb[2] == 288 && tq->n_bytes == 288 &&
         tq->offset == 128 && ((const uint8_t *)tq->data)[0] == (uint8_t)(128 * 37 + 11) && ti->n_bytes == 74 &&
         ti->type == HMOE_TYPE_IQ2_XS && tb->n_bytes == 10 && tb->type == HMOE_TYPE_BF16 && tx->type == HMOE_TYPE_Q8_0 &&
         tx->nb[2] == 68 && tx->nb[3] == 204 && tx->n_bytes == 204 && tx->offset == 640;
    t_check(ok, "gguf tensors: n_dims 0, zero dimension, 4-D, trailing 1, sizes from the type table", "wrong field");
    hmoe_gguf_free(g);
}

static void open_errors(void) {
    struct hmoe_err err = {0};
    struct hmoe_gguf *g = (struct hmoe_gguf *)&err; /* must be reset to NULL */
    enum hmoe_status st = hmoe_gguf_open("tests/data/no-such-file.gguf", &g, &err);
    t_check(st == HMOE_ERR_NOT_FOUND && !g && strstr(err.msg, "tests/data/no-such-file.gguf: cannot open: No such file"),
            "gguf open: missing file", "%s: %s", hmoe_status_str(st), err.msg);
    st = hmoe_gguf_open("tests/data", &g, &err);
    t_check(st == HMOE_ERR_IO && !g && strstr(err.msg, "tests/data: is a directory"), "gguf open: directory", "%s: %s",
            hmoe_status_str(st), err.msg);
    st = hmoe_gguf_open("tests/data/gguf-bad/trunc-000.gguf", &g, &err);
    t_check(st == HMOE_ERR_FORMAT && !g && strstr(err.msg, "offset 0: magic: the file has only 0 bytes"),
            "gguf open: empty file", "%s: %s", hmoe_status_str(st), err.msg);
    st = hmoe_gguf_open(t_shared("fixtures/models/manifest.json"), &g, &err);
    t_check(st == HMOE_ERR_FORMAT && !g && strstr(err.msg, "manifest.json: offset 0: magic:") &&
                strstr(err.msg, "not a GGUF file"),
            "gguf open: a JSON file is not a GGUF", "%s: %s", hmoe_status_str(st), err.msg);
    st = hmoe_gguf_open("/dev/null", &g, &err);
    t_check(st == HMOE_ERR_IO && !g && strstr(err.msg, "not a regular file"), "gguf open: character device", "%s: %s",
            hmoe_status_str(st), err.msg);
    hmoe_gguf_free(NULL);
}

int main(void) {
    worked_example();
    manifest_models();
    vocab();
    moe_tiny();
    getters();
    open_errors();
    return t_summary();
}
