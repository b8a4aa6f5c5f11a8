/* gguf_tensors.c — general.alignment, the tensor-info records and the data-section
 * layout (gguf.md §6, §7; checks §11 #11–#22). Shapes are normalised to four ne values;
 * element and byte counts are computed with overflow checks; block geometry comes from
 * the type table (hmoe_type_get), so retired or unknown type ids are rejected here.
 * Layout policy (§7, #19–#20): hmoe accepts the spec's rule — every offset a multiple of
 * ALIGN, every tensor inside the file, no two tensors overlapping — rather than requiring
 * llama.cpp's packed order, so a file llama.cpp accepts is always accepted here.
 */
#include "gguf_impl.h"

#include <inttypes.h>
#include <stdlib.h>

enum hmoe_status hmoe_gguf_read_alignment(struct gguf_cur *c, struct hmoe_gguf *g) {
    g->alignment = GGUF_DEFAULT_ALIGNMENT;
    const struct hmoe_gguf_kv *kv = hmoe_gguf_find_kv(g, "general.alignment");
    if (!kv) return HMOE_OK;
    /* §7 / §11 #11: llama.cpp requires exactly UINT32 and a non-zero power of two. */
    if (kv->type != HMOE_GGUF_U32)
        return GGUF_FAIL(c, kv->file_offset,
                         "key 'general.alignment': stored as %s, but GGUF requires u32 (re-convert the file)",
                         hmoe_gguf_vtype_name(kv->type));
    uint64_t a = kv->v.u64;
    if (a == 0 || (a & (a - 1)) != 0)
        return GGUF_FAIL(c, kv->file_offset, "key 'general.alignment': %" PRIu64 " is not a non-zero power of two", a);
    g->alignment = (uint32_t)a;
    return HMOE_OK;
}

/* Element count, strides and byte size of t (type and ne already set). §11 #15, #17, #18. */
static enum hmoe_status size_tensor(struct gguf_cur *c, struct hmoe_gguf_tensor *t, const char *q, uint64_t off,
                                    const struct hmoe_type_info *ti) {
    uint64_t ne[4];
    for (int j = 0; j < 4; j++) ne[j] = (uint64_t)t->ne[j];
    uint64_t nel = ne[0];
    for (int j = 1; j < 4; j++)
        if (!hmoe_mul_u64(nel, ne[j], &nel) || nel > (uint64_t)INT64_MAX)
            return GGUF_FAIL(c, off, "tensor '%s': element count overflows int64 (ne = %" PRIu64 " x %" PRIu64 " x %" PRIu64
                             " x %" PRIu64 ")", q, ne[0], ne[1], ne[2], ne[3]);
    if (ne[0] % (uint64_t)ti->blck != 0)
        return GGUF_FAIL(c, off,
                         "tensor '%s': ne[0] = %" PRIu64 " is not a multiple of the %s block size %d (corrupt file)", q,
                         ne[0], ti->name, ti->blck);
    /* nb[j] for every j, not only the total: a later zero dimension would hide an
     * overflow in a stride that code indexing this tensor might still compute. */
    uint64_t nb[4];
    nb[0] = (uint64_t)ti->type_size;
    bool ok = hmoe_mul_u64(ne[0] / (uint64_t)ti->blck, nb[0], &nb[1]);
    for (int j = 2; ok && j < 4; j++) ok = hmoe_mul_u64(nb[j - 1], ne[j - 1], &nb[j]);
    uint64_t nbytes = 0;
    if (!ok || !hmoe_mul_u64(nb[3], ne[3], &nbytes) || nbytes > (uint64_t)INT64_MAX)
        return GGUF_FAIL(c, off, "tensor '%s': byte size overflows (ne = %" PRIu64 " x %" PRIu64 " x %" PRIu64 " x %" PRIu64
                         " of %s)", q, ne[0], ne[1], ne[2], ne[3], ti->name);
    memcpy(t->nb, nb, sizeof nb);
    t->n_elements = nel;
    t->n_bytes = nbytes;
    return HMOE_OK;
}

static enum hmoe_status read_tensor_info(struct gguf_cur *c, struct hmoe_gguf *g, uint64_t i) {
    struct hmoe_gguf_tensor *t = &g->tensors[i];
    uint64_t off = c->pos, len;
    t->info_offset = off;
    if (!gguf_cur_u64(c, &len))
        return GGUF_FAIL_SHORT(c, 8, "tensor-info record %" PRIu64 " of %" PRIu64 ": name length", i, g->n_tensors);
    /* §4 / §11 #12: llama.cpp's name buffer is 64 bytes with the NUL, so at most 63. An
     * empty name is accepted by llama.cpp but written by no tool; hmoe rejects it. */
    if (len == 0) return GGUF_FAIL(c, off, "tensor-info record %" PRIu64 ": tensor name is empty", i);
    if (len > GGUF_MAX_NAME_BYTES)
        return GGUF_FAIL(c, off,
                         "tensor-info record %" PRIu64 ": tensor name length %" PRIu64
                         " is too long (at most %d bytes; llama.cpp's limit)",
                         i, len, GGUF_MAX_NAME_BYTES);
    if (len > gguf_cur_left(c)) return GGUF_FAIL_SHORT(c, len, "tensor-info record %" PRIu64 ": name", i);
    const char *np = (const char *)c->base + c->pos;
    if (memchr(np, 0, (size_t)len))
        return GGUF_FAIL(c, off, "tensor-info record %" PRIu64 ": tensor name contains a NUL byte", i);
    t->name = malloc((size_t)len + 1);
    if (!t->name) return HMOE_RAISE(c->err, HMOE_ERR_NOMEM, "%s: out of memory for a tensor name", c->file);
    memcpy(t->name, np, (size_t)len);
    t->name[len] = 0;
    c->pos += len;
    char q[200];
    hmoe_gguf_quote(q, sizeof q, t->name, len);

    uint64_t doff = c->pos;
    uint32_t n_dims;
    if (!gguf_cur_u32(c, &n_dims)) return GGUF_FAIL_SHORT(c, 4, "tensor '%s': n_dims", q);
    /* §6 / §11 #13: 0 is accepted (one element), as llama.cpp does. */
    if (n_dims > GGUF_MAX_DIMS)
        return GGUF_FAIL(c, doff, "tensor '%s': n_dims = %" PRIu32 " exceeds the maximum of %d", q, n_dims, GGUF_MAX_DIMS);
    t->n_dims = n_dims;
    for (int j = 0; j < 4; j++) t->ne[j] = 1;
    for (uint32_t j = 0; j < n_dims; j++) {
        uint64_t eoff = c->pos, v;
        if (!gguf_cur_u64(c, &v)) return GGUF_FAIL_SHORT(c, 8, "tensor '%s': ne[%" PRIu32 "]", q, j);
        if (v >> 63) /* §11 #14 */
            return GGUF_FAIL(c, eoff, "tensor '%s': ne[%" PRIu32 "] = 0x%016" PRIx64 " is negative as int64", q, j, v);
        t->ne[j] = (int64_t)v;
    }
    uint64_t toff = c->pos;
    uint32_t type;
    if (!gguf_cur_u32(c, &type)) return GGUF_FAIL_SHORT(c, 4, "tensor '%s': type", q);
    const struct hmoe_type_info *ti = hmoe_type_get(type); /* §11 #16 */
    if (!ti)
        return GGUF_FAIL(c, toff,
                         "tensor '%s': type id %" PRIu32 " is %s", q, type,
                         type < HMOE_TYPE_COUNT ? "a retired ggml type (re-quantize the model with a current llama.cpp)"
                                                : "not a known ggml type (the file may need a newer hmoe)");
    t->type = (enum hmoe_type)type;
    enum hmoe_status st = size_tensor(c, t, q, off, ti);
    if (st) return st;
    uint64_t ooff = c->pos;
    if (!gguf_cur_u64(c, &t->offset)) return GGUF_FAIL_SHORT(c, 8, "tensor '%s': offset", q);
    if (t->offset % g->alignment != 0) /* §11 #19 */
        return GGUF_FAIL(c, ooff, "tensor '%s': data offset %" PRIu64 " is not a multiple of the alignment %" PRIu32, q,
                         t->offset, g->alignment);
    return HMOE_OK;
}

enum hmoe_status hmoe_gguf_read_tensors(struct gguf_cur *c, struct hmoe_gguf *g) {
    if (g->n_tensors) {
        /* Bounded: n_tensors * GGUF_MIN_TENSOR_INFO_BYTES fits in the file (header check). */
        g->tensors = calloc((size_t)g->n_tensors, sizeof *g->tensors);
        if (!g->tensors)
            return HMOE_RAISE(c->err, HMOE_ERR_NOMEM, "%s: out of memory for %" PRIu64 " tensor infos", c->file,
                              g->n_tensors);
    }
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        enum hmoe_status st = read_tensor_info(c, g, i);
        if (st) return st;
    }
    return HMOE_OK;
}

static int cmp_offset(const void *ctx, size_t a, size_t b) {
    const struct hmoe_gguf_tensor *t = ctx;
    return t[a].offset < t[b].offset ? -1 : t[a].offset > t[b].offset;
}

enum hmoe_status hmoe_gguf_check_layout(struct gguf_cur *c, struct hmoe_gguf *g) {
    /* §7: data_start = align_up(end of tensor infos) on the absolute offset; computed only
     * now because general.alignment may appear anywhere in the metadata. */
    uint64_t end_infos = c->pos, a = g->alignment, ds;
    if (!hmoe_add_u64(end_infos, a - 1, &ds))
        return GGUF_FAIL(c, end_infos, "data section: start offset overflows");
    ds -= ds % a;
    g->data_start = ds;
    if (g->n_tensors == 0) return HMOE_OK; /* vocab-only files may omit the final padding */
    if (ds > c->size) /* §11 #22 */
        return GGUF_FAIL(c, end_infos,
                         "data section: starts at byte %" PRIu64 " (after padding to %" PRIu64
                         ") but the file has only %" PRIu64 " bytes (truncated file)",
                         ds, a, c->size);
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        struct hmoe_gguf_tensor *t = &g->tensors[i];
        uint64_t start, end;
        char q[200];
        /* §11 #21 */
        if (!hmoe_add_u64(ds, t->offset, &start) || !hmoe_add_u64(start, t->n_bytes, &end))
            return GGUF_FAIL(c, t->info_offset, "tensor '%s': data offset %" PRIu64 " + size %" PRIu64 " overflows",
                             hmoe_gguf_quote(q, sizeof q, t->name, strlen(t->name)), t->offset, t->n_bytes);
        if (end > c->size)
            return GGUF_FAIL(c, t->info_offset,
                             "tensor '%s': data ends at byte %" PRIu64 " but the file has only %" PRIu64
                             " bytes (truncated download?)",
                             hmoe_gguf_quote(q, sizeof q, t->name, strlen(t->name)), end, c->size);
        t->data = c->base + start;
    }
    /* §11 #20, the looser rule: sort by offset and require each non-empty tensor to start
     * at or after the end of every earlier one. Empty tensors occupy no bytes. */
    size_t n = (size_t)g->n_tensors, *idx = malloc(n * sizeof *idx);
    if (!idx) return HMOE_RAISE(c->err, HMOE_ERR_NOMEM, "%s: out of memory for the overlap check", c->file);
    for (size_t i = 0; i < n; i++) idx[i] = i;
    if (!hmoe_gguf_sort_idx(idx, n, cmp_offset, g->tensors)) {
        free(idx);
        return HMOE_RAISE(c->err, HMOE_ERR_NOMEM, "%s: out of memory for the overlap check", c->file);
    }
    const struct hmoe_gguf_tensor *prev = NULL;
    for (size_t j = 0; j < n; j++) {
        const struct hmoe_gguf_tensor *t = &g->tensors[idx[j]];
        if (t->n_bytes == 0) continue;
        if (prev && t->offset < prev->offset + prev->n_bytes) {
            char q1[200], q2[200];
            enum hmoe_status st = GGUF_FAIL(
                c, t->info_offset,
                "tensor '%s': data [%" PRIu64 ", %" PRIu64 ") overlaps tensor '%s' [%" PRIu64 ", %" PRIu64
                ") (offsets relative to the data section; corrupt file)",
                hmoe_gguf_quote(q1, sizeof q1, t->name, strlen(t->name)), t->offset, t->offset + t->n_bytes,
                hmoe_gguf_quote(q2, sizeof q2, prev->name, strlen(prev->name)), prev->offset,
                prev->offset + prev->n_bytes);
            free(idx);
            return st;
        }
        if (!prev || t->offset + t->n_bytes > prev->offset + prev->n_bytes) prev = t;
    }
    free(idx);
    return HMOE_OK;
}
