/* test_info.c — `./hmoe info` end to end (run from the repository root by tests/run.sh).
 * --json output of every shipped model is compared with shared/fixtures/models/manifest.json:
 * metadata key by key, every tensor's type / ne / n_bytes, and the histogram and MoE
 * numbers re-derived here from the manifest's tensor list. Then the text report, the
 * vocabulary file, and the error paths (missing file, not a GGUF, truncated, bad flags):
 * non-zero exit and a single line on stderr.
 */
#include <sys/wait.h>

#include "harness.h"
#include "hmoe/json.h"

/* Run a shell command; capture stdout (or stderr when want_stderr) and the exit code. */
static char *run(const char *cmd, bool want_stderr, int *code) {
    char full[4096];
    snprintf(full, sizeof full, want_stderr ? "%s 2>&1 >/dev/null" : "%s 2>/dev/null", cmd);
    FILE *p = popen(full, "r");
    if (!p) { *code = -1; return NULL; }
    size_t n = 0, cap = 1 << 16;
    char *buf = malloc(cap);
    size_t r;
    while (buf && (r = fread(buf + n, 1, cap - n - 1, p)) > 0) {
        n += r;
        if (cap - n < 4096) {
            char *nb = realloc(buf, cap *= 2);
            if (!nb) { free(buf); buf = NULL; break; }
            buf = nb;
        }
    }
    int st = pclose(p);
    *code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    if (buf) buf[n] = 0;
    return buf;
}

static bool is_int_text(const char *s) { return s && !strpbrk(s, ".eE"); }

/* JSON values equal as the manifest means them: integers exactly (by text), other numbers
 * as doubles, strings byte for byte, arrays element-wise. */
static bool json_eq(const struct hmoe_json *a, const struct hmoe_json *b) {
    if (a->kind != b->kind) return false;
    switch (a->kind) {
    case HMOE_JSON_NUMBER:
        if (is_int_text(a->str) && is_int_text(b->str)) return strcmp(a->str, b->str) == 0;
        return a->num == b->num;
    case HMOE_JSON_STRING: return a->str_len == b->str_len && memcmp(a->str, b->str, a->str_len) == 0;
    case HMOE_JSON_BOOL: return a->b == b->b;
    case HMOE_JSON_NULL: return true;
    case HMOE_JSON_ARRAY:
        if (a->n != b->n) return false;
        for (size_t i = 0; i < a->n; i++)
            if (!json_eq(a->items[i], b->items[i])) return false;
        return true;
    default: return false;
    }
}

static double num(const struct hmoe_json *o, const char *k) { return hmoe_json_get_num(o, k, -1.0); }

static int layer_of(const char *name) {
    int l = -1;
    if (sscanf(name, "blk.%d.", &l) != 1) return -1;
    return l;
}

static void compare_model(const struct hmoe_json *mo) {
    const char *file = hmoe_json_get_str(mo, "file", "?");
    char rel[512], cmd[5000], name[600], why[700] = "";
    snprintf(rel, sizeof rel, "fixtures/models/%s", file);
    snprintf(cmd, sizeof cmd, "./hmoe info --json -m '%s'", t_shared(rel));
    int code;
    char *out = run(cmd, false, &code);
    struct hmoe_err err = {0};
    struct hmoe_json *j = out ? hmoe_json_parse(out, strlen(out), &err) : NULL;
    snprintf(name, sizeof name, "info --json %s: exit 0, one JSON object", file);
    t_check(code == 0 && j && j->kind == HMOE_JSON_OBJECT, name, "exit %d, %s", code, err.msg);
    free(out);
    if (!j) return;

    const struct hmoe_json *md = hmoe_json_get(mo, "metadata"), *jm = hmoe_json_get(j, "metadata");
    for (size_t k = 0; md && jm && k < md->n && !why[0]; k++) {
        const struct hmoe_json *v = hmoe_json_get(jm, md->keys[k]);
        if (!v) snprintf(why, sizeof why, "key '%s' missing", md->keys[k]);
        else if (!json_eq(v, md->items[k]))
            snprintf(why, sizeof why, "key '%s': '%s' vs manifest '%s'", md->keys[k], v->str ? v->str : "?",
                     md->items[k]->str ? md->items[k]->str : "?");
    }
    if (!why[0] && (!md || !jm || md->n != jm->n)) snprintf(why, sizeof why, "%zu keys vs manifest %zu", jm ? jm->n : 0, md ? md->n : 0);
    snprintf(name, sizeof name, "info --json %s: metadata equals manifest", file);
    t_check(!why[0], name, "%s", why);

    const struct hmoe_json *mt = hmoe_json_get(mo, "tensors"), *jt = hmoe_json_get(j, "tensors");
    why[0] = 0;
    if (!mt || !jt || mt->n != jt->n || num(j, "n_tensors") != (double)mt->n)
        snprintf(why, sizeof why, "tensor count differs");
    for (size_t i = 0; !why[0] && i < mt->n; i++) {
        const char *tn = hmoe_json_get_str(mt->items[i], "name", "");
        const struct hmoe_json *x = NULL;
        for (size_t k = 0; k < jt->n && !x; k++)
            if (strcmp(hmoe_json_get_str(jt->items[k], "name", ""), tn) == 0) x = jt->items[k];
        if (!x) snprintf(why, sizeof why, "tensor '%s' missing", tn);
        else if (strcmp(hmoe_json_get_str(x, "type", ""), hmoe_json_get_str(mt->items[i], "type", "?")) != 0 ||
                 !json_eq(hmoe_json_get(x, "ne"), hmoe_json_get(mt->items[i], "ne")) ||
                 num(x, "n_bytes") != num(mt->items[i], "n_bytes") || num(x, "offset") < 0)
            snprintf(why, sizeof why, "tensor '%s': type/ne/n_bytes differ", tn);
    }
    snprintf(name, sizeof name, "info --json %s: %zu tensors' type, ne, n_bytes equal manifest", file, mt ? mt->n : 0);
    t_check(!why[0], name, "%s", why);

    /* Histogram, totals and MoE numbers, re-derived from the manifest's tensor list. */
    why[0] = 0;
    double total = 0, experts = 0, per_layer[64] = {0}, per_expert[64] = {0}, embd = 0, embd_row = 0;
    int n_layer = 0;
    const struct hmoe_json *hist = hmoe_json_get(j, "type_histogram");
    size_t hist_sum = 0;
    for (size_t i = 0; i < mt->n; i++) {
        const struct hmoe_json *t = mt->items[i];
        const char *tn = hmoe_json_get_str(t, "name", "");
        const struct hmoe_json *ne = hmoe_json_get(t, "ne");
        double nb = num(t, "n_bytes");
        total += nb;
        int l = layer_of(tn);
        if (l + 1 > n_layer && l < 64) n_layer = l + 1;
        if (strstr(tn, "_exps") && l >= 0 && l < 64) {
            experts += nb;
            per_layer[l] += nb;
            per_expert[l] += nb / ne->items[ne->n - 1]->num;
        }
        if (strcmp(tn, "token_embd.weight") == 0) { embd = nb; embd_row = nb / ne->items[1]->num; }
    }
    for (size_t h = 0; hist && h < hist->n; h++) {
        double cnt = 0, bytes = 0;
        for (size_t i = 0; i < mt->n; i++)
            if (strcmp(hmoe_json_get_str(mt->items[i], "type", ""), hist->keys[h]) == 0) { cnt++; bytes += num(mt->items[i], "n_bytes"); }
        hist_sum += (size_t)cnt;
        if (cnt != num(hist->items[h], "count") || bytes != num(hist->items[h], "bytes"))
            snprintf(why, sizeof why, "histogram %s: %g/%g vs manifest %g/%g", hist->keys[h], num(hist->items[h], "count"),
                     num(hist->items[h], "bytes"), cnt, bytes);
    }
    if (!why[0] && (hist_sum != mt->n || num(j, "total_tensor_bytes") != total))
        snprintf(why, sizeof why, "histogram covers %zu tensors, total %g vs %g", hist_sum, num(j, "total_tensor_bytes"), total);
    const struct hmoe_json *moe = hmoe_json_get(j, "moe");
    double used = num(md, "qwen3moe.expert_used_count"), active = total - experts - embd + embd_row;
    for (int l = 0; l < n_layer; l++) active += used * per_expert[l];
    if (!why[0] && (!moe || num(moe, "n_expert") != num(md, "qwen3moe.expert_count") || num(moe, "n_expert_used") != used ||
                    num(moe, "expert_bytes_total") != experts || num(moe, "non_expert_bytes") != total - experts ||
                    num(moe, "active_bytes_per_token") != active))
        snprintf(why, sizeof why, "moe totals differ (expected experts %g, active %g)", experts, active);
    const struct hmoe_json *pl = hmoe_json_get(moe, "expert_bytes_per_layer"), *pe = hmoe_json_get(moe, "bytes_per_expert_per_layer");
    if (!why[0] && (!pl || !pe || pl->n != (size_t)n_layer || pe->n != (size_t)n_layer)) snprintf(why, sizeof why, "per-layer lists");
    for (int l = 0; !why[0] && l < n_layer; l++)
        if (pl->items[l]->num != per_layer[l] || pe->items[l]->num != per_expert[l])
            snprintf(why, sizeof why, "layer %d: %g / %g vs %g / %g", l, pl->items[l]->num, pe->items[l]->num, per_layer[l], per_expert[l]);
    snprintf(name, sizeof name, "info --json %s: type histogram and MoE bytes agree with manifest", file);
    t_check(!why[0], name, "%s", why);

    snprintf(name, sizeof name, "info --json %s: size, version, architecture, name, n_vocab", file);
    t_check(num(j, "size_bytes") == num(mo, "size_bytes") && num(j, "gguf_version") == 3 && num(j, "n_vocab") == 4101 &&
                strcmp(hmoe_json_get_str(j, "architecture", ""), hmoe_json_get_str(md, "general.architecture", "?")) == 0 &&
                strcmp(hmoe_json_get_str(j, "name", ""), hmoe_json_get_str(md, "general.name", "?")) == 0,
            name, "field differs");
    hmoe_json_free(j);
}

static void text_and_vocab(void) {
    char cmd[5000];
    int code;
    snprintf(cmd, sizeof cmd, "./hmoe info -m '%s'", t_shared("fixtures/models/tiny-qwen3moe-A-Q4_K_M.gguf"));
    char *out = run(cmd, false, &code);
    t_check(code == 0 && out && strstr(out, "15 (Q4_K_M)") && strstr(out, "[array of 4101 strings]") &&
                strstr(out, "qwen3moe.expert_used_count") && strstr(out, "Q6_K") && strstr(out, "everything else"),
            "info text: file type name, summarised vocab, hyperparameters, histogram, MoE", "exit %d:\n%s", code, out ? out : "");
    free(out);
    snprintf(cmd, sizeof cmd, "./hmoe info --json -m '%s'", t_shared("fixtures/tokenizer/qwen3-vocab.gguf"));
    out = run(cmd, false, &code);
    struct hmoe_err err = {0};
    struct hmoe_json *j = out ? hmoe_json_parse(out, strlen(out), &err) : NULL;
    const struct hmoe_json *tok = hmoe_json_get(hmoe_json_get(j, "tokenizer"), "tokenizer.ggml.tokens");
    t_check(code == 0 && j && num(j, "n_vocab") == 151936 && num(j, "n_tensors") == 0 && num(tok, "length") == 151936 &&
                strcmp(hmoe_json_get_str(tok, "element_type", ""), "string") == 0 &&
                hmoe_json_get(j, "moe")->kind == HMOE_JSON_NULL,
            "info --json qwen3-vocab: 151936 tokens summarised, no tensors, no moe", "exit %d %s", code, err.msg);
    hmoe_json_free(j);
    free(out);
    snprintf(cmd, sizeof cmd, "./hmoe info -m '%s'", t_shared("fixtures/tokenizer/qwen3-vocab.gguf"));
    out = run(cmd, false, &code);
    t_check(code == 0 && out && strstr(out, "[array of 151936 strings]") && strstr(out, "[array of 151387 strings]"),
            "info text qwen3-vocab: [array of 151936 strings]", "exit %d", code);
    free(out);
}

/* Errors: exit status and exactly one line on stderr containing `want`. */
static void error_case(const char *label, const char *args, int want_code, const char *want) {
    char cmd[5000];
    int code;
    snprintf(cmd, sizeof cmd, "./hmoe info %s", args);
    char *err = run(cmd, true, &code);
    size_t lines = 0;
    for (const char *p = err; p && *p; p++) lines += *p == '\n';
    char name[300];
    snprintf(name, sizeof name, "info error: %s", label);
    /* Usage errors also print the usage line; file errors are a single line. */
    t_check(code == want_code && err && strstr(err, want) && (want_code != 1 || lines == 1), name,
            "exit %d (want %d), stderr: %s", code, want_code, err ? err : "");
    free(err);
}

int main(void) {
    struct hmoe_err err = {0};
    struct hmoe_json *man = hmoe_json_parse_file(t_shared("fixtures/models/manifest.json"), &err);
    const struct hmoe_json *models = hmoe_json_get(man, "models");
    t_check(models != NULL, "info: manifest.json parses", "%s", err.msg);
    int shipped = 0;
    for (size_t m = 0; models && m < models->n; m++)
        if (hmoe_json_get_bool(models->items[m], "included", false)) {
            compare_model(models->items[m]);
            shipped++;
        }
    t_check(shipped == 3, "info: compared all 3 shipped models", "%d", shipped);
    hmoe_json_free(man);
    text_and_vocab();

    char args[1024];
    error_case("missing file", "-m tests/data/no-such-model.gguf", 1, "tests/data/no-such-model.gguf: cannot open: No such file");
    snprintf(args, sizeof args, "-m '%s'", t_shared("fixtures/models/manifest.json"));
    error_case("not a GGUF (a JSON file)", args, 1, "offset 0: magic: first bytes are '{\\x0a \"', not 'GGUF' (not a GGUF file)");
    error_case("truncated file", "--json -m tests/data/gguf-bad/trunc-288.gguf", 1,
               "hmoe: error: tests/data/gguf-bad/trunc-288.gguf: offset 155: tensor 'a.weight': data ends at byte 312");
    error_case("empty file", "-m tests/data/gguf-bad/trunc-000.gguf", 1, "the file has only 0 bytes");
    error_case("directory", "-m tests/data", 1, "tests/data: is a directory");
    error_case("no model given", "--json", 2, "info needs a model file");
    error_case("unknown flag", "-m x.gguf --frobnicate", 2, "unknown option '--frobnicate'");
    int code;
    char *help = run("./hmoe info --help", false, &code);
    t_check(code == 0 && help && strstr(help, "--model") && strstr(help, "--json"), "info --help lists -m and --json", "exit %d", code);
    free(help);
    return t_summary();
}
