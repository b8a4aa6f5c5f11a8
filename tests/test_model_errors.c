/* test_model_errors.c — the loader's messages for bad models (model.h, qwen3moe.md §1-§2):
 * a missing file, an unsupported architecture (named, with the supported list), and copies
 * of the shipped mini model patched in memory: a tensor with the wrong shape, a missing
 * tensor, a missing required key, inconsistent head counts. Each must fail with a status
 * and a message naming the object, never crash.
 */
#include "harness.h"
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

/* Offset just past the GGUF string `s` (u64 length + bytes) in buf, or 0 if absent. */
static size_t find_gguf_str(const unsigned char *buf, size_t n, const char *s) {
    size_t len = strlen(s);
    for (size_t i = 0; i + 8 + len <= n; i++) {
        uint64_t l;
        memcpy(&l, buf + i, 8);
        if (l == len && memcmp(buf + i + 8, s, len) == 0) return i + 8 + len;
    }
    return 0;
}

/* Load a patched copy; return the status and fill err. */
static enum hmoe_status load_patched(const unsigned char *buf, size_t n, struct hmoe_err *err) {
    struct hmoe_gguf *g = NULL;
    struct hmoe_model *m = NULL;
    enum hmoe_status st = hmoe_gguf_open_memory(buf, n, "patched.gguf", &g, err);
    if (st) return st;
    st = hmoe_model_load_gguf(g, NULL, &m, err);
    if (st) hmoe_gguf_free(g);
    hmoe_model_free(m);
    return st;
}

int main(void) {
    struct hmoe_err err = {0};
    struct hmoe_model *m = NULL;
    enum hmoe_status st = hmoe_model_load("/nonexistent/dir/model.gguf", NULL, &m, &err);
    t_check(st != HMOE_OK && m == NULL && strstr(err.msg, "/nonexistent/dir/model.gguf"),
            "missing file: error names the path", "status %d, message '%s'", st, err.msg);

    st = hmoe_model_load(t_shared("fixtures/moe-tiny/deepseek2-tiny.gguf"), NULL, &m, &err);
    t_check(st == HMOE_ERR_UNSUPPORTED && strstr(err.msg, "'deepseek2'") &&
                strstr(err.msg, "supported: qwen3moe, qwen35moe"),
            "unsupported architecture: named, supported list given", "status %d, message '%s'", st, err.msg);

    size_t n = 0;
    unsigned char *orig = file_bytes(t_shared("fixtures/models/tiny-qwen3moe-A-mini-F32.gguf"), &n);
    t_check(orig && n > 0, "mini-F32 model bytes read", "cannot read the file");
    if (!orig || !n) return t_summary();
    unsigned char *buf = malloc(n);

    memcpy(buf, orig, n);
    st = load_patched(buf, n, &err);
    t_check(st == HMOE_OK, "unpatched in-memory copy loads", "%s", err.msg);

    /* blk.1.attn_q.weight {64, 128} -> {128, 64}: same bytes, wrong shape. */
    memcpy(buf, orig, n);
    size_t o = find_gguf_str(buf, n, "blk.1.attn_q.weight");
    if (o) {
        uint64_t ne0, ne1;
        memcpy(&ne0, buf + o + 4, 8);
        memcpy(&ne1, buf + o + 12, 8);
        memcpy(buf + o + 4, &ne1, 8);
        memcpy(buf + o + 12, &ne0, 8);
    }
    st = load_patched(buf, n, &err);
    t_check(o && st == HMOE_ERR_FORMAT &&
                strstr(err.msg, "tensor blk.1.attn_q.weight has shape [128, 64] but qwen3moe needs [64, 128]"),
            "wrong tensor shape: names tensor, shape found and shape needed", "status %d, message '%s'", st,
            err.msg);

    /* Rename blk.2.ffn_up_exps.weight so it is missing. */
    memcpy(buf, orig, n);
    o = find_gguf_str(buf, n, "blk.2.ffn_up_exps.weight");
    if (o) buf[o - 1] = 'X';
    st = load_patched(buf, n, &err);
    t_check(o && st == HMOE_ERR_NOT_FOUND && strstr(err.msg, "tensor blk.2.ffn_up_exps.weight is missing") &&
                strstr(err.msg, "[64, 64, 8]"),
            "missing tensor: named with the shape it needs", "status %d, message '%s'", st, err.msg);

    /* Rename the required key qwen3moe.expert_count. */
    memcpy(buf, orig, n);
    o = find_gguf_str(buf, n, "qwen3moe.expert_count");
    if (o) buf[o - 1] = 'X';
    st = load_patched(buf, n, &err);
    t_check(o && st == HMOE_ERR_NOT_FOUND && strstr(err.msg, "'qwen3moe.expert_count' is missing"),
            "missing required key: named", "status %d, message '%s'", st, err.msg);

    /* head_count_kv 4 -> 3: 4 query heads cannot be grouped over 3 KV heads. */
    memcpy(buf, orig, n);
    o = find_gguf_str(buf, n, "qwen3moe.attention.head_count_kv");
    uint32_t vt = 0, three = 3;
    if (o) memcpy(&vt, buf + o, 4);
    if (o && vt == HMOE_GGUF_U32) memcpy(buf + o + 4, &three, 4);
    st = load_patched(buf, n, &err);
    t_check(o && vt == HMOE_GGUF_U32 && st == HMOE_ERR_FORMAT && strstr(err.msg, "head_count_kv 3"),
            "inconsistent head counts: rejected with both values", "status %d, message '%s'", st, err.msg);

    free(buf);
    free(orig);
    return t_summary();
}
