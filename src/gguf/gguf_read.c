/* gguf_read.c — parse the 24-byte header and the metadata records of an untrusted GGUF
 * image (gguf.md §3, §4, §5), applying the checks of §11 #1–#9: magic, version, counts
 * against the bytes left, string and array sizes before any allocation, value types.
 * Relies on the bounded cursor of gguf_impl.h; scalar values are decoded, strings and
 * numeric arrays stay pointers into the image. Duplicate keys are found by gguf_index.c.
 */
#include "gguf_impl.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

const struct gguf_vtype_info hmoe_gguf_vtypes[HMOE_GGUF_VTYPE_COUNT] = {
    [HMOE_GGUF_U8] = {"u8", 1, GGUF_VC_UINT},       [HMOE_GGUF_I8] = {"i8", 1, GGUF_VC_INT},
    [HMOE_GGUF_U16] = {"u16", 2, GGUF_VC_UINT},     [HMOE_GGUF_I16] = {"i16", 2, GGUF_VC_INT},
    [HMOE_GGUF_U32] = {"u32", 4, GGUF_VC_UINT},     [HMOE_GGUF_I32] = {"i32", 4, GGUF_VC_INT},
    [HMOE_GGUF_F32] = {"f32", 4, GGUF_VC_FLOAT},    [HMOE_GGUF_BOOL] = {"bool", 1, GGUF_VC_BOOL},
    [HMOE_GGUF_STRING] = {"string", 0, GGUF_VC_STRING}, [HMOE_GGUF_ARRAY] = {"array", 0, GGUF_VC_ARRAY},
    [HMOE_GGUF_U64] = {"u64", 8, GGUF_VC_UINT},     [HMOE_GGUF_I64] = {"i64", 8, GGUF_VC_INT},
    [HMOE_GGUF_F64] = {"f64", 8, GGUF_VC_FLOAT},
};

const char *hmoe_gguf_vtype_name(enum hmoe_gguf_vtype t) {
    return (unsigned)t < HMOE_GGUF_VTYPE_COUNT ? hmoe_gguf_vtypes[t].name : "?";
}

enum hmoe_status hmoe_gguf_fail(const struct gguf_cur *c, uint64_t off, const char *src_file, int src_line,
                                const char *fmt, ...) {
    char detail[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    return hmoe_err_set(c->err, HMOE_ERR_FORMAT, src_file, src_line, "%s: offset %" PRIu64 ": %s", c->file, off,
                        detail);
}

enum hmoe_status hmoe_gguf_fail_short(const struct gguf_cur *c, const char *src_file, int src_line, uint64_t need,
                                      const char *field_fmt, ...) {
    char field[300];
    va_list ap;
    va_start(ap, field_fmt);
    vsnprintf(field, sizeof field, field_fmt, ap);
    va_end(ap);
    return hmoe_gguf_fail(c, c->pos, src_file, src_line,
                          "%s: needs %" PRIu64 " bytes but the file ends at byte %" PRIu64
                          " (truncated download or not a GGUF file)",
                          field, need, c->size);
}

const char *hmoe_gguf_quote(char *buf, size_t cap, const char *s, uint64_t len) {
    size_t o = 0;
    uint64_t i = 0;
    for (; i < len && o + 8 < cap && i < 40; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch >= 0x20 && ch < 0x7f && ch != '\'' && ch != '\\') buf[o++] = (char)ch;
        else o += (size_t)snprintf(buf + o, cap - o, "\\x%02x", ch);
    }
    if (i < len && o + 4 <= cap) { memcpy(buf + o, "...", 3); o += 3; }
    buf[o < cap ? o : cap - 1] = 0;
    return buf;
}

enum hmoe_status hmoe_gguf_read_header(struct gguf_cur *c, struct hmoe_gguf *g) {
    /* §11 #1: compare bytes, not a host-order integer. */
    if (c->size < 4)
        return GGUF_FAIL(c, 0, "magic: the file has only %" PRIu64 " bytes, too short for a GGUF header (not a GGUF file)",
                         c->size);
    if (memcmp(c->base, "GGUF", 4) != 0) {
        char q[64];
        return GGUF_FAIL(c, 0, "magic: first bytes are '%s', not 'GGUF' (not a GGUF file)",
                         hmoe_gguf_quote(q, sizeof q, (const char *)c->base, 4));
    }
    c->pos = 4;
    uint32_t version;
    if (!gguf_cur_u32(c, &version)) return GGUF_FAIL_SHORT(c, 4, "version");
    /* §3 / §11 #2, in llama.cpp's order: the byte-swap test catches big-endian v2/v3. */
    if (version == 0) return GGUF_FAIL(c, 4, "version: 0 is not a GGUF version (corrupt file)");
    if ((version & 0xFFFF) == 0)
        return GGUF_FAIL(c, 4,
                         "version: 0x%08" PRIx32 " looks byte-swapped: this is a big-endian GGUF, which hmoe cannot read "
                         "(convert it to little-endian)",
                         version);
    if (version == 1)
        return GGUF_FAIL(c, 4,
                         "version: 1 is GGUF v1, which hmoe cannot read (re-convert the model with a current llama.cpp)");
    if (version > 3)
        return GGUF_FAIL(c, 4,
                         "version: %" PRIu32 " is newer than the GGUF v3 that hmoe understands (update hmoe, or "
                         "re-convert the model with a llama.cpp that writes v3)",
                         version);
    g->version = version;

    uint64_t n_tensors, n_kv;
    if (!gguf_cur_u64(c, &n_tensors)) return GGUF_FAIL_SHORT(c, 8, "tensor_count");
    if (!gguf_cur_u64(c, &n_kv)) return GGUF_FAIL_SHORT(c, 8, "kv_count");
    /* §11 #3: negative as int64, then the cheap size check that keeps a hostile count
     * from sizing an allocation. */
    if (n_tensors >> 63)
        return GGUF_FAIL(c, 8, "tensor_count: 0x%016" PRIx64 " is negative as int64 (corrupt file)", n_tensors);
    if (n_kv >> 63) return GGUF_FAIL(c, 16, "kv_count: 0x%016" PRIx64 " is negative as int64 (corrupt file)", n_kv);
    uint64_t kv_min, ti_min, total_min;
    uint64_t left = gguf_cur_left(c);
    if (!hmoe_mul_u64(n_kv, GGUF_MIN_KV_BYTES, &kv_min) || kv_min > left)
        return GGUF_FAIL(c, 16,
                         "kv_count: %" PRIu64 " metadata records need at least %u bytes each, but only %" PRIu64
                         " bytes follow the header (corrupt or truncated file)",
                         n_kv, GGUF_MIN_KV_BYTES, left);
    if (!hmoe_mul_u64(n_tensors, GGUF_MIN_TENSOR_INFO_BYTES, &ti_min) || !hmoe_add_u64(kv_min, ti_min, &total_min) ||
        total_min > left)
        return GGUF_FAIL(c, 8,
                         "tensor_count: %" PRIu64 " tensor-info records (at least %u bytes each) and %" PRIu64
                         " metadata records cannot fit in the %" PRIu64
                         " bytes after the header (corrupt or truncated file)",
                         n_tensors, GGUF_MIN_TENSOR_INFO_BYTES, n_kv, left);
    g->n_tensors = n_tensors;
    g->n_kv = n_kv;
    return HMOE_OK;
}

/* Read one GGUF string (u64 length + bytes) whose bytes stay in the image; `elem` is the
 * array index for messages, or -1 for a plain string value. §11 #5: the length is
 * checked against the limit and against the bytes left. */
static enum hmoe_status read_str(struct gguf_cur *c, struct hmoe_gguf_str *out, const char *key, int64_t elem) {
    char what[48] = "string";
    uint64_t off = c->pos, len;
    bool ok = gguf_cur_u64(c, &len);
    bool bad = !ok || len > GGUF_MAX_STRING_BYTES || len > gguf_cur_left(c);
    if (!bad) {
        out->ptr = (const char *)c->base + c->pos;
        out->len = len;
        c->pos += len;
        return HMOE_OK;
    }
    if (elem >= 0) snprintf(what, sizeof what, "array element %" PRId64, elem);
    if (!ok) return GGUF_FAIL_SHORT(c, 8, "key '%s': %s length", key, what);
    if (len > GGUF_MAX_STRING_BYTES)
        return GGUF_FAIL(c, off, "key '%s': %s length %" PRIu64 " exceeds the 1 GiB string limit (corrupt file)", key,
                         what, len);
    return GGUF_FAIL(c, off,
                     "key '%s': %s length %" PRIu64 " runs past the end of the file (%" PRIu64
                     " bytes left; truncated or corrupt file)",
                     key, what, len, gguf_cur_left(c));
}

static enum hmoe_status read_array(struct gguf_cur *c, struct hmoe_gguf_kv *kv, const char *key) {
    uint64_t toff = c->pos;
    uint32_t et;
    if (!gguf_cur_u32(c, &et)) return GGUF_FAIL_SHORT(c, 4, "key '%s': array element type", key);
    /* §11 #7, #8 */
    if (et == HMOE_GGUF_ARRAY)
        return GGUF_FAIL(c, toff, "key '%s': array of arrays is not supported (llama.cpp rejects nested arrays too)", key);
    if (et >= HMOE_GGUF_VTYPE_COUNT)
        return GGUF_FAIL(c, toff, "key '%s': array element type %" PRIu32 " is not a GGUF value type (0..12)", key, et);
    kv->arr_type = (enum hmoe_gguf_vtype)et;
    uint64_t coff = c->pos, n;
    if (!gguf_cur_u64(c, &n)) return GGUF_FAIL_SHORT(c, 8, "key '%s': array count", key);
    /* §11 #9: the count is checked against the limit and against the bytes left (each
     * string needs at least its 8-byte length) before anything is allocated. */
    if (n > GGUF_MAX_ARRAY_COUNT)
        return GGUF_FAIL(c, coff, "key '%s': array count %" PRIu64 " exceeds the 2^30 element limit (corrupt file)", key,
                         n);
    bool is_str = et == HMOE_GGUF_STRING;
    uint64_t esize = is_str ? 8 : hmoe_gguf_vtypes[et].bytes, need = n * esize; /* n <= 2^30: no overflow */
    if (need > gguf_cur_left(c))
        return GGUF_FAIL(c, coff,
                         "key '%s': array of %" PRIu64 " %s needs at least %" PRIu64 " bytes but only %" PRIu64
                         " remain (truncated or corrupt file)",
                         key, n, hmoe_gguf_vtypes[et].name, need, gguf_cur_left(c));
    kv->arr_n = n;
    if (!is_str) {
        kv->arr_data = c->base + c->pos;
        c->pos += need;
        return HMOE_OK;
    }
    if (n == 0) return HMOE_OK;
    kv->arr_str = calloc((size_t)n, sizeof *kv->arr_str);
    if (!kv->arr_str)
        return HMOE_RAISE(c->err, HMOE_ERR_NOMEM, "%s: out of memory for the %" PRIu64 " strings of key '%s'", c->file, n,
                          key);
    for (uint64_t i = 0; i < n; i++) {
        enum hmoe_status st = read_str(c, &kv->arr_str[i], key, (int64_t)i);
        if (st) return st;
    }
    return HMOE_OK;
}

static enum hmoe_status read_kv(struct gguf_cur *c, struct hmoe_gguf_kv *kv, uint64_t i, uint64_t n) {
    uint64_t off = c->pos, len;
    kv->file_offset = off;
    if (!gguf_cur_u64(c, &len)) return GGUF_FAIL_SHORT(c, 8, "metadata record %" PRIu64 " of %" PRIu64 ": key length", i, n);
    /* §11 #6 (empty), #5 (length). */
    if (len == 0)
        return GGUF_FAIL(c, off, "metadata record %" PRIu64 ": key is empty (GGUF keys must be non-empty)", i);
    if (len > GGUF_MAX_STRING_BYTES)
        return GGUF_FAIL(c, off, "metadata record %" PRIu64 ": key length %" PRIu64 " exceeds the 1 GiB string limit", i,
                         len);
    if (len > gguf_cur_left(c))
        return GGUF_FAIL(c, off,
                         "metadata record %" PRIu64 ": key length %" PRIu64 " runs past the end of the file (%" PRIu64
                         " bytes left; truncated or corrupt file)",
                         i, len, gguf_cur_left(c));
    const char *kp = (const char *)c->base + c->pos;
    /* Keys become C strings for lookup; an embedded NUL would make two different keys
     * look equal, so it is rejected (the spec says keys are ASCII). */
    const char *nul = memchr(kp, 0, (size_t)len);
    if (nul)
        return GGUF_FAIL(c, c->pos + (uint64_t)(nul - kp), "metadata record %" PRIu64 ": key contains a NUL byte", i);
    kv->key = malloc((size_t)len + 1);
    if (!kv->key) return HMOE_RAISE(c->err, HMOE_ERR_NOMEM, "%s: out of memory for a metadata key", c->file);
    memcpy(kv->key, kp, (size_t)len);
    kv->key[len] = 0;
    c->pos += len;

    char key[200];
    hmoe_gguf_quote(key, sizeof key, kv->key, len);
    uint64_t toff = c->pos;
    uint32_t t;
    if (!gguf_cur_u32(c, &t)) return GGUF_FAIL_SHORT(c, 4, "key '%s': value type", key);
    if (t >= HMOE_GGUF_VTYPE_COUNT) /* §11 #7: without the size the rest cannot be parsed */
        return GGUF_FAIL(c, toff, "key '%s': value type %" PRIu32 " is not a GGUF value type (0..12)", key, t);
    kv->type = (enum hmoe_gguf_vtype)t;
    const struct gguf_vtype_info *vi = &hmoe_gguf_vtypes[t];
    switch (vi->vclass) {
    case GGUF_VC_STRING: return read_str(c, &kv->v.str, key, -1);
    case GGUF_VC_ARRAY: return read_array(c, kv, key);
    default: break;
    }
    if (vi->bytes > gguf_cur_left(c)) return GGUF_FAIL_SHORT(c, vi->bytes, "key '%s': %s value", key, vi->name);
    const uint8_t *p = c->base + c->pos;
    c->pos += vi->bytes;
    switch (vi->vclass) {
    case GGUF_VC_UINT: kv->v.u64 = gguf_le_uint(p, vi->bytes); break;
    case GGUF_VC_INT: kv->v.i64 = gguf_le_int(p, vi->bytes); break;
    case GGUF_VC_FLOAT: kv->v.f64 = gguf_le_float(p, vi->bytes); break;
    default: kv->v.b = p[0] != 0; break; /* §11 #10: any non-zero byte is true, as llama.cpp */
    }
    return HMOE_OK;
}

enum hmoe_status hmoe_gguf_read_kvs(struct gguf_cur *c, struct hmoe_gguf *g) {
    if (g->n_kv == 0) return HMOE_OK;
    /* n_kv * GGUF_MIN_KV_BYTES fits in the file (header check), so this is bounded. */
    g->kv = calloc((size_t)g->n_kv, sizeof *g->kv);
    if (!g->kv)
        return HMOE_RAISE(c->err, HMOE_ERR_NOMEM, "%s: out of memory for %" PRIu64 " metadata records", c->file, g->n_kv);
    for (uint64_t i = 0; i < g->n_kv; i++) {
        enum hmoe_status st = read_kv(c, &g->kv[i], i, g->n_kv);
        if (st) return st;
    }
    return HMOE_OK;
}
