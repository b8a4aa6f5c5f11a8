/* gguf_meta.c — typed metadata getters and array element accessors (gguf.h).
 * gguf.md §5 recommends a tolerant reader: any integer width is converted to the width
 * the caller asks for and range-checked, floats likewise; a wrong kind (string for a
 * number, ...) or a value that does not fit is HMOE_ERR_FORMAT naming file, key and value.
 */
#include "gguf_impl.h"

#include <float.h>
#include <inttypes.h>
#include <math.h>

static enum hmoe_status find(const struct hmoe_gguf *g, const char *key, const struct hmoe_gguf_kv **out,
                             struct hmoe_err *err) {
    *out = hmoe_gguf_find_kv(g, key);
    if (*out) return HMOE_OK;
    return HMOE_RAISE(err, HMOE_ERR_NOT_FOUND, "%s: metadata key '%s' not found", g ? g->path : "?", key ? key : "(null)");
}

static enum hmoe_status wrong(const struct hmoe_gguf *g, const struct hmoe_gguf_kv *kv, const char *want,
                              struct hmoe_err *err) {
    return HMOE_RAISE(err, HMOE_ERR_FORMAT, "%s: offset %" PRIu64 ": key '%s': stored as %s, expected %s", g->path,
                      kv->file_offset, kv->key, hmoe_gguf_vtype_name(kv->type), want);
}

/* Integer value of kv as sign + magnitude, so every target range can be checked. */
static enum hmoe_status get_int(const struct hmoe_gguf *g, const char *key, bool *neg, uint64_t *mag,
                                const struct hmoe_gguf_kv **kv_out, struct hmoe_err *err) {
    const struct hmoe_gguf_kv *kv;
    enum hmoe_status st = find(g, key, &kv, err);
    if (st) return st;
    *kv_out = kv;
    switch (hmoe_gguf_vtypes[kv->type].vclass) {
    case GGUF_VC_UINT:
        *neg = false;
        *mag = kv->v.u64;
        return HMOE_OK;
    case GGUF_VC_INT:
        *neg = kv->v.i64 < 0;
        *mag = *neg ? (uint64_t)0 - (uint64_t)kv->v.i64 : (uint64_t)kv->v.i64;
        return HMOE_OK;
    default: return wrong(g, kv, "an integer", err);
    }
}

static enum hmoe_status no_fit(const struct hmoe_gguf *g, const struct hmoe_gguf_kv *kv, bool neg, uint64_t mag,
                               const char *target, struct hmoe_err *err) {
    return HMOE_RAISE(err, HMOE_ERR_FORMAT, "%s: offset %" PRIu64 ": key '%s': value %s%" PRIu64 " does not fit in %s",
                      g->path, kv->file_offset, kv->key, neg ? "-" : "", mag, target);
}

enum hmoe_status hmoe_gguf_get_u64(const struct hmoe_gguf *g, const char *key, uint64_t *out, struct hmoe_err *err) {
    const struct hmoe_gguf_kv *kv;
    bool neg;
    uint64_t mag;
    enum hmoe_status st = get_int(g, key, &neg, &mag, &kv, err);
    if (st) return st;
    if (neg && mag) return no_fit(g, kv, neg, mag, "an unsigned 64-bit integer", err);
    *out = mag;
    return HMOE_OK;
}

enum hmoe_status hmoe_gguf_get_u32(const struct hmoe_gguf *g, const char *key, uint32_t *out, struct hmoe_err *err) {
    const struct hmoe_gguf_kv *kv;
    bool neg;
    uint64_t mag;
    enum hmoe_status st = get_int(g, key, &neg, &mag, &kv, err);
    if (st) return st;
    if ((neg && mag) || mag > UINT32_MAX) return no_fit(g, kv, neg, mag, "u32", err);
    *out = (uint32_t)mag;
    return HMOE_OK;
}

enum hmoe_status hmoe_gguf_get_i64(const struct hmoe_gguf *g, const char *key, int64_t *out, struct hmoe_err *err) {
    const struct hmoe_gguf_kv *kv;
    bool neg;
    uint64_t mag;
    enum hmoe_status st = get_int(g, key, &neg, &mag, &kv, err);
    if (st) return st;
    if (!neg && mag > (uint64_t)INT64_MAX) return no_fit(g, kv, neg, mag, "i64", err);
    *out = neg ? kv->v.i64 : (int64_t)mag;
    return HMOE_OK;
}

enum hmoe_status hmoe_gguf_get_f32(const struct hmoe_gguf *g, const char *key, float *out, struct hmoe_err *err) {
    const struct hmoe_gguf_kv *kv;
    enum hmoe_status st = find(g, key, &kv, err);
    if (st) return st;
    double v;
    switch (hmoe_gguf_vtypes[kv->type].vclass) {
    case GGUF_VC_FLOAT: v = kv->v.f64; break;
    case GGUF_VC_UINT: v = (double)kv->v.u64; break; /* tolerated: an epsilon written as an integer is still a number */
    case GGUF_VC_INT: v = (double)kv->v.i64; break;
    default: return wrong(g, kv, "a number", err);
    }
    if (isfinite(v) && fabs(v) > FLT_MAX)
        return HMOE_RAISE(err, HMOE_ERR_FORMAT, "%s: offset %" PRIu64 ": key '%s': value %g does not fit in f32", g->path,
                          kv->file_offset, kv->key, v);
    *out = (float)v;
    return HMOE_OK;
}

enum hmoe_status hmoe_gguf_get_bool(const struct hmoe_gguf *g, const char *key, bool *out, struct hmoe_err *err) {
    const struct hmoe_gguf_kv *kv;
    enum hmoe_status st = find(g, key, &kv, err);
    if (st) return st;
    if (kv->type != HMOE_GGUF_BOOL) return wrong(g, kv, "bool", err);
    *out = kv->v.b;
    return HMOE_OK;
}

enum hmoe_status hmoe_gguf_get_str(const struct hmoe_gguf *g, const char *key, struct hmoe_gguf_str *out,
                                   struct hmoe_err *err) {
    const struct hmoe_gguf_kv *kv;
    enum hmoe_status st = find(g, key, &kv, err);
    if (st) return st;
    if (kv->type != HMOE_GGUF_STRING) return wrong(g, kv, "string", err);
    *out = kv->v.str;
    return HMOE_OK;
}

enum hmoe_status hmoe_gguf_get_arr(const struct hmoe_gguf *g, const char *key, const struct hmoe_gguf_kv **out,
                                   struct hmoe_err *err) {
    const struct hmoe_gguf_kv *kv;
    enum hmoe_status st = find(g, key, &kv, err);
    if (st) return st;
    if (kv->type != HMOE_GGUF_ARRAY) return wrong(g, kv, "an array", err);
    *out = kv;
    return HMOE_OK;
}

uint32_t hmoe_gguf_get_u32_or(const struct hmoe_gguf *g, const char *key, uint32_t dflt) {
    uint32_t v = dflt;
    return hmoe_gguf_get_u32(g, key, &v, NULL) == HMOE_OK ? v : dflt;
}

float hmoe_gguf_get_f32_or(const struct hmoe_gguf *g, const char *key, float dflt) {
    float v = dflt;
    return hmoe_gguf_get_f32(g, key, &v, NULL) == HMOE_OK ? v : dflt;
}

bool hmoe_gguf_get_bool_or(const struct hmoe_gguf *g, const char *key, bool dflt) {
    bool v = dflt;
    return hmoe_gguf_get_bool(g, key, &v, NULL) == HMOE_OK ? v : dflt;
}

/* Element i of a numeric array, or NULL (string arrays, out of range, not an array). */
static const uint8_t *elem(const struct hmoe_gguf_kv *kv, uint64_t i, const struct gguf_vtype_info **vi) {
    if (!kv || kv->type != HMOE_GGUF_ARRAY || i >= kv->arr_n || !kv->arr_data) return NULL;
    if ((unsigned)kv->arr_type >= HMOE_GGUF_VTYPE_COUNT) return NULL;
    *vi = &hmoe_gguf_vtypes[kv->arr_type];
    if (!(*vi)->bytes) return NULL;
    return kv->arr_data + i * (*vi)->bytes;
}

int64_t hmoe_gguf_arr_i64(const struct hmoe_gguf_kv *kv, uint64_t i) {
    const struct gguf_vtype_info *vi;
    const uint8_t *p = elem(kv, i, &vi);
    if (!p) return 0;
    switch (vi->vclass) {
    case GGUF_VC_UINT: return (int64_t)gguf_le_uint(p, vi->bytes); /* u64 above INT64_MAX wraps */
    case GGUF_VC_INT: return gguf_le_int(p, vi->bytes);
    case GGUF_VC_BOOL: return p[0] != 0;
    default: {
        /* Float elements: truncate toward zero, saturating (a plain cast of NaN or of an
         * out-of-range value is undefined behaviour in C). */
        double d = gguf_le_float(p, vi->bytes);
        if (isnan(d)) return 0;
        if (d >= 9223372036854775807.0) return INT64_MAX;
        if (d <= -9223372036854775808.0) return INT64_MIN;
        return (int64_t)d;
    }
    }
}

double hmoe_gguf_arr_f64(const struct hmoe_gguf_kv *kv, uint64_t i) {
    const struct gguf_vtype_info *vi;
    const uint8_t *p = elem(kv, i, &vi);
    if (!p) return 0.0;
    switch (vi->vclass) {
    case GGUF_VC_UINT: return (double)gguf_le_uint(p, vi->bytes);
    case GGUF_VC_INT: return (double)gguf_le_int(p, vi->bytes);
    case GGUF_VC_BOOL: return p[0] != 0;
    default: return gguf_le_float(p, vi->bytes);
    }
}
