/* gguf_index.c — sorted lookup tables for metadata keys and tensor names, built once at
 * open: they reject duplicate keys and duplicate tensor names (gguf.md §5, §11 #6, #12)
 * and serve hmoe_gguf_find_kv / hmoe_gguf_find_tensor by binary search.
 * A stable merge sort keeps this O(n log n) even for hostile files with millions of
 * entries (a hash table could be driven quadratic by crafted collisions).
 */
#include "gguf_impl.h"

#include <inttypes.h>
#include <stdlib.h>

struct gguf_index {
    size_t *kv_by_key;      /* kv indices in key order */
    size_t *tensor_by_name; /* tensor indices in name order */
};

bool hmoe_gguf_sort_idx(size_t *idx, size_t n, hmoe_gguf_cmp_fn cmp, const void *ctx) {
    if (n < 2) return true;
    size_t *tmp = malloc(n * sizeof *tmp);
    if (!tmp) return false;
    size_t *src = idx, *dst = tmp;
    for (size_t w = 1; w < n; w *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * w) {
            size_t mid = HMOE_MIN(lo + w, n), hi = HMOE_MIN(lo + 2 * w, n);
            size_t a = lo, b = mid, o = lo;
            /* "<= 0" takes the left run first on ties: stable, so equal names stay in
             * file order and the second one is the duplicate reported. */
            while (a < mid && b < hi) dst[o++] = cmp(ctx, src[a], src[b]) <= 0 ? src[a++] : src[b++];
            while (a < mid) dst[o++] = src[a++];
            while (b < hi) dst[o++] = src[b++];
        }
        size_t *t = src;
        src = dst;
        dst = t;
    }
    if (src != idx) memcpy(idx, src, n * sizeof *idx);
    free(tmp);
    return true;
}

static int cmp_key(const void *ctx, size_t a, size_t b) {
    const struct hmoe_gguf_kv *kv = ctx;
    return strcmp(kv[a].key, kv[b].key);
}

static int cmp_name(const void *ctx, size_t a, size_t b) {
    const struct hmoe_gguf_tensor *t = ctx;
    return strcmp(t[a].name, t[b].name);
}

static size_t *sorted_identity(size_t n, hmoe_gguf_cmp_fn cmp, const void *ctx) {
    size_t *idx = malloc((n ? n : 1) * sizeof *idx);
    if (!idx) return NULL;
    for (size_t i = 0; i < n; i++) idx[i] = i;
    if (!hmoe_gguf_sort_idx(idx, n, cmp, ctx)) {
        free(idx);
        return NULL;
    }
    return idx;
}

enum hmoe_status hmoe_gguf_index_kvs(struct gguf_cur *c, struct hmoe_gguf *g) {
    struct gguf_index *ix = calloc(1, sizeof *ix);
    if (!ix) return HMOE_RAISE(c->err, HMOE_ERR_NOMEM, "%s: out of memory for the metadata index", c->file);
    g->index = ix;
    size_t n = (size_t)g->n_kv;
    ix->kv_by_key = sorted_identity(n, cmp_key, g->kv);
    if (!ix->kv_by_key) return HMOE_RAISE(c->err, HMOE_ERR_NOMEM, "%s: out of memory for the metadata index", c->file);
    for (size_t j = 1; j < n; j++) {
        const struct hmoe_gguf_kv *a = &g->kv[ix->kv_by_key[j - 1]], *b = &g->kv[ix->kv_by_key[j]];
        if (strcmp(a->key, b->key) == 0) {
            char q[200];
            return GGUF_FAIL(c, b->file_offset,
                             "key '%s': duplicate key (first defined at offset %" PRIu64 "); GGUF keys must be unique",
                             hmoe_gguf_quote(q, sizeof q, b->key, strlen(b->key)), a->file_offset);
        }
    }
    return HMOE_OK;
}

enum hmoe_status hmoe_gguf_index_tensors(struct gguf_cur *c, struct hmoe_gguf *g) {
    struct gguf_index *ix = g->index;
    size_t n = (size_t)g->n_tensors;
    ix->tensor_by_name = sorted_identity(n, cmp_name, g->tensors);
    if (!ix->tensor_by_name)
        return HMOE_RAISE(c->err, HMOE_ERR_NOMEM, "%s: out of memory for the tensor index", c->file);
    for (size_t j = 1; j < n; j++) {
        const struct hmoe_gguf_tensor *a = &g->tensors[ix->tensor_by_name[j - 1]];
        const struct hmoe_gguf_tensor *b = &g->tensors[ix->tensor_by_name[j]];
        if (strcmp(a->name, b->name) == 0) {
            char q[200];
            return GGUF_FAIL(c, b->info_offset,
                             "tensor '%s': duplicate tensor name (first defined at offset %" PRIu64
                             "); tensor names must be unique",
                             hmoe_gguf_quote(q, sizeof q, b->name, strlen(b->name)), a->info_offset);
        }
    }
    return HMOE_OK;
}

void hmoe_gguf_index_drop_tensors(void *index) {
    struct gguf_index *ix = index;
    if (!ix) return;
    free(ix->tensor_by_name);
    ix->tensor_by_name = NULL;
}

void hmoe_gguf_index_free(void *index) {
    struct gguf_index *ix = index;
    if (!ix) return;
    free(ix->kv_by_key);
    free(ix->tensor_by_name);
    free(ix);
}

const struct hmoe_gguf_kv *hmoe_gguf_find_kv(const struct hmoe_gguf *g, const char *key) {
    if (!g || !key || !g->index) return NULL;
    const struct gguf_index *ix = g->index;
    size_t lo = 0, hi = (size_t)g->n_kv;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const struct hmoe_gguf_kv *kv = &g->kv[ix->kv_by_key[mid]];
        int r = strcmp(key, kv->key);
        if (r == 0) return kv;
        if (r < 0) hi = mid;
        else lo = mid + 1;
    }
    return NULL;
}

const struct hmoe_gguf_tensor *hmoe_gguf_find_tensor(const struct hmoe_gguf *g, const char *name) {
    if (!g || !name || !g->index) return NULL;
    const struct gguf_index *ix = g->index;
    if (!ix->tensor_by_name) return NULL;
    size_t lo = 0, hi = (size_t)g->n_tensors;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const struct hmoe_gguf_tensor *t = &g->tensors[ix->tensor_by_name[mid]];
        int r = strcmp(name, t->name);
        if (r == 0) return t;
        if (r < 0) hi = mid;
        else lo = mid + 1;
    }
    return NULL;
}
