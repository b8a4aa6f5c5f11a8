/* gguf_check.h — what must hold for any file the loader accepts, re-derived here from
 * gguf.md (§4–§7, §11) rather than from the loader's own code: every string, array and
 * tensor lies inside the image, sizes follow the type table, offsets are aligned, tensors
 * do not overlap, and every key and name can be found again. Used by the truncation and
 * byte-flip tests and by tests/fuzz_gguf.c (which traps on a violation).
 */
#ifndef HMOE_TEST_GGUF_CHECK_H
#define HMOE_TEST_GGUF_CHECK_H

#include <stdio.h>
#include <string.h>

#include "hmoe/gguf.h"

static inline int gcheck_in(const uint8_t *base, uint64_t size, const void *p, uint64_t n) {
    const uint8_t *q = p;
    return q >= base && (uint64_t)(q - base) <= size && n <= size - (uint64_t)(q - base);
}

/* NULL when every invariant holds, else a description of the first violation (static buffer). */
static inline const char *gguf_check_invariants(const struct hmoe_gguf *g, const uint8_t *base, uint64_t size) {
    static char why[256];
    static const uint8_t esize[HMOE_GGUF_VTYPE_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    if (g->base != base || g->file_size != size) return "base/size differ from the image";
    if (g->version != 2 && g->version != 3) return "version not 2 or 3";
    if (!g->alignment || (g->alignment & (g->alignment - 1))) return "alignment not a power of two";
    if (g->data_start % g->alignment) return "data_start not aligned";
    if (g->n_tensors && g->data_start > size) return "data_start past the end with tensors present";
    for (uint64_t i = 0; i < g->n_kv; i++) {
        const struct hmoe_gguf_kv *kv = &g->kv[i];
        if (!kv->key || !kv->key[0]) return "empty key accepted";
        if (hmoe_gguf_find_kv(g, kv->key) != kv) {
            snprintf(why, sizeof why, "find_kv('%.60s') does not return its record", kv->key);
            return why;
        }
        if ((unsigned)kv->type >= HMOE_GGUF_VTYPE_COUNT) return "bad value type accepted";
        if (kv->type == HMOE_GGUF_STRING && !gcheck_in(base, size, kv->v.str.ptr, kv->v.str.len))
            return "string value outside the image";
        if (kv->type != HMOE_GGUF_ARRAY) continue;
        if ((unsigned)kv->arr_type >= HMOE_GGUF_VTYPE_COUNT || kv->arr_type == HMOE_GGUF_ARRAY)
            return "bad array element type accepted";
        if (kv->arr_n > ((uint64_t)1 << 30)) return "array count above 2^30 accepted";
        if (kv->arr_type == HMOE_GGUF_STRING) {
            if (kv->arr_n && !kv->arr_str) return "string array without elements";
            for (uint64_t j = 0; j < kv->arr_n; j++)
                if (!gcheck_in(base, size, kv->arr_str[j].ptr, kv->arr_str[j].len)) return "string element outside the image";
        } else if (kv->arr_n && !gcheck_in(base, size, kv->arr_data, kv->arr_n * esize[kv->arr_type])) {
            return "numeric array outside the image";
        }
    }
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const struct hmoe_gguf_tensor *t = &g->tensors[i];
        size_t nl = strlen(t->name);
        if (nl == 0 || nl > 63) return "tensor name length outside 1..63";
        if (hmoe_gguf_find_tensor(g, t->name) != t) return "find_tensor does not return its tensor";
        const struct hmoe_type_info *ti = hmoe_type_get((uint32_t)t->type);
        if (!ti) return "unknown tensor type accepted";
        if (t->n_dims > 4) return "n_dims > 4 accepted";
        unsigned __int128 nel = 1;
        for (int j = 0; j < 4; j++) {
            if (t->ne[j] < 0) return "negative ne accepted";
            if (j >= (int)t->n_dims && t->ne[j] != 1) return "unused dimension is not 1";
            nel *= (unsigned __int128)t->ne[j];
        }
        if (nel > (unsigned __int128)INT64_MAX || (uint64_t)nel != t->n_elements) return "n_elements wrong";
        if (t->ne[0] % ti->blck) return "ne[0] not a multiple of the block size";
        unsigned __int128 nb = (unsigned __int128)(t->ne[0] / ti->blck) * (unsigned)ti->type_size;
        if (t->nb[0] != (uint64_t)ti->type_size || t->nb[1] != (uint64_t)nb) return "nb[0] or nb[1] wrong";
        if (t->nb[2] != t->nb[1] * (uint64_t)t->ne[1] || t->nb[3] != t->nb[2] * (uint64_t)t->ne[2]) return "nb[2] or nb[3] wrong";
        nb *= (unsigned __int128)t->ne[1] * (unsigned __int128)t->ne[2];
        nb *= (unsigned __int128)t->ne[3];
        if (nb != t->n_bytes) return "n_bytes differs from (ne0/blck)*tsize*ne1*ne2*ne3";
        if (t->offset % g->alignment) return "tensor offset not aligned";
        if ((const uint8_t *)t->data != base + g->data_start + t->offset) return "data pointer != base + data_start + offset";
        if (!gcheck_in(base, size, t->data, t->n_bytes)) return "tensor data outside the image";
        for (uint64_t k = 0; k < i && g->n_tensors <= 4096; k++) {
            const struct hmoe_gguf_tensor *u = &g->tensors[k];
            if (t->n_bytes && u->n_bytes && t->offset < u->offset + u->n_bytes && u->offset < t->offset + t->n_bytes) {
                snprintf(why, sizeof why, "tensors '%s' and '%s' overlap", t->name, u->name);
                return why;
            }
        }
    }
    return NULL;
}

#endif
