/* gguf_impl.h — private to src/gguf: the bounds-checked read cursor over an untrusted
 * GGUF image, the error helper that prefixes "<file>: offset N: ", and the parse stages
 * that gguf_open.c runs in order (header+metadata, index, tensor infos, data layout).
 * Every read goes through gguf_cur_*, which never touches a byte at or past `size`
 * (gguf.md §11 #4). All arithmetic on file values is 64-bit and overflow-checked.
 */
#ifndef HMOE_GGUF_IMPL_H
#define HMOE_GGUF_IMPL_H

#include <string.h>

#include "hmoe/gguf.h"

/* Limits from gguf.md §4, §5, §6 (llama.cpp's reader uses the same numbers). */
#define GGUF_MAX_STRING_BYTES ((uint64_t)1 << 30) /* any string, key or value */
#define GGUF_MAX_ARRAY_COUNT ((uint64_t)1 << 30)  /* elements of one array */
#define GGUF_MAX_NAME_BYTES 63                    /* tensor name, GGML_MAX_NAME - 1 */
#define GGUF_MAX_DIMS 4
#define GGUF_DEFAULT_ALIGNMENT 32
/* Smallest possible records, for the early "count cannot fit" check (§11 #3):
 * key = u64 length + >= 1 byte, u32 value type, >= 1 value byte (U8/I8/BOOL);
 * tensor info = u64 name length + >= 1 byte, u32 n_dims (0 dims), u32 type, u64 offset. */
#define GGUF_MIN_KV_BYTES 14u
#define GGUF_MIN_TENSOR_INFO_BYTES 25u

struct gguf_cur {
    const uint8_t *base;
    uint64_t size;     /* bytes in the image */
    uint64_t pos;      /* next byte to read; always <= size */
    const char *file;  /* name used in messages */
    struct hmoe_err *err;
};

static inline uint64_t gguf_cur_left(const struct gguf_cur *c) { return c->size - c->pos; }

/* Fixed-width little-endian reads. Return false (and do not move) when fewer than the
 * needed bytes remain; the caller raises the error, since only it knows the field. */
static inline bool gguf_cur_bytes(struct gguf_cur *c, void *dst, uint64_t n) {
    if (n > gguf_cur_left(c)) return false;
    memcpy(dst, c->base + c->pos, (size_t)n);
    c->pos += n;
    return true;
}
static inline bool gguf_cur_u32(struct gguf_cur *c, uint32_t *v) {
    uint8_t b[4];
    if (!gguf_cur_bytes(c, b, 4)) return false;
    *v = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
    return true;
}
static inline bool gguf_cur_u64(struct gguf_cur *c, uint64_t *v) {
    uint32_t lo, hi;
    uint64_t save = c->pos;
    if (!gguf_cur_u32(c, &lo) || !gguf_cur_u32(c, &hi)) { c->pos = save; return false; }
    *v = (uint64_t)lo | (uint64_t)hi << 32;
    return true;
}

/* What the bytes of a metadata value type are (gguf.md §5): one table, read by the
 * parser, the getters and the array accessors instead of switching on the type. */
enum gguf_vclass { GGUF_VC_UINT, GGUF_VC_INT, GGUF_VC_FLOAT, GGUF_VC_BOOL, GGUF_VC_STRING, GGUF_VC_ARRAY };
struct gguf_vtype_info {
    const char *name;
    uint8_t bytes;  /* size of one value; 0 for STRING and ARRAY (variable) */
    uint8_t vclass; /* enum gguf_vclass */
};
extern const struct gguf_vtype_info hmoe_gguf_vtypes[HMOE_GGUF_VTYPE_COUNT];

/* Decode one little-endian scalar of `n` bytes (1, 2, 4 or 8). */
static inline uint64_t gguf_le_uint(const uint8_t *p, unsigned n) {
    uint64_t v = 0;
    for (unsigned i = 0; i < n; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}
static inline int64_t gguf_le_int(const uint8_t *p, unsigned n) {
    uint64_t v = gguf_le_uint(p, n);
    if (n < 8 && (v >> (8 * n - 1)) & 1) v |= ~(uint64_t)0 << (8 * n); /* sign-extend */
    return (int64_t)v;
}
static inline double gguf_le_float(const uint8_t *p, unsigned n) {
    if (n == 4) {
        uint32_t u = (uint32_t)gguf_le_uint(p, 4);
        float f;
        memcpy(&f, &u, 4);
        return (double)f;
    }
    uint64_t u = gguf_le_uint(p, 8);
    double d;
    memcpy(&d, &u, 8);
    return d;
}

/* Raise HMOE_ERR_FORMAT as "<file>: offset <off>: <detail>", recording the caller's
 * source line (the GGUF_FAIL macro). Always returns HMOE_ERR_FORMAT. */
enum hmoe_status hmoe_gguf_fail(const struct gguf_cur *c, uint64_t off, const char *src_file, int src_line,
                                const char *fmt, ...) __attribute__((format(printf, 5, 6)));
#define GGUF_FAIL(c, off, ...) hmoe_gguf_fail((c), (off), __FILE__, __LINE__, __VA_ARGS__)

/* "the file ends at byte N" error for a field of `need` bytes starting at c->pos. */
enum hmoe_status hmoe_gguf_fail_short(const struct gguf_cur *c, const char *src_file, int src_line, uint64_t need,
                                      const char *field_fmt, ...) __attribute__((format(printf, 5, 6)));
#define GGUF_FAIL_SHORT(c, need, ...) hmoe_gguf_fail_short((c), __FILE__, __LINE__, (need), __VA_ARGS__)

/* Write `len` bytes of untrusted text as a short printable quote for messages: at most
 * ~40 characters, control and non-ASCII bytes as \xNN, "..." when cut. */
const char *hmoe_gguf_quote(char *buf, size_t cap, const char *s, uint64_t len);

/* Parse stages, in the order gguf_open.c calls them. Each fills part of *g and on
 * failure leaves everything it allocated reachable from g, so hmoe_gguf_free cleans up. */
enum hmoe_status hmoe_gguf_read_header(struct gguf_cur *c, struct hmoe_gguf *g);     /* gguf_read.c */
enum hmoe_status hmoe_gguf_read_kvs(struct gguf_cur *c, struct hmoe_gguf *g);        /* gguf_read.c */
enum hmoe_status hmoe_gguf_index_kvs(struct gguf_cur *c, struct hmoe_gguf *g);       /* gguf_index.c */
enum hmoe_status hmoe_gguf_read_alignment(struct gguf_cur *c, struct hmoe_gguf *g);  /* gguf_tensors.c */
enum hmoe_status hmoe_gguf_read_tensors(struct gguf_cur *c, struct hmoe_gguf *g);    /* gguf_tensors.c */
enum hmoe_status hmoe_gguf_index_tensors(struct gguf_cur *c, struct hmoe_gguf *g);   /* gguf_index.c */
enum hmoe_status hmoe_gguf_check_layout(struct gguf_cur *c, struct hmoe_gguf *g);    /* gguf_tensors.c */
void hmoe_gguf_index_free(void *index);                                             /* gguf_index.c */
void hmoe_gguf_index_drop_tensors(void *index); /* forget the tensor index (before rebuilding it) */
/* All the stages on g->base / g->file_size (gguf_open.c). */
enum hmoe_status hmoe_gguf_parse(struct hmoe_gguf *g, struct hmoe_err *err);
/* Given the parsed first shard of a split model (split.count > 1), open every shard into one
 * merged struct (gguf_split.c). `first` stays the caller's to free. */
enum hmoe_status hmoe_gguf_open_split(struct hmoe_gguf *first, bool to_ram, struct hmoe_gguf **out,
                                      struct hmoe_err *err);

/* Stable O(n log n) merge sort of idx[0..n) by cmp(ctx, a, b) (gguf_index.c). Used for
 * duplicate detection and the overlap check, where hostile files may hold millions of
 * entries and a hash table could be driven quadratic by colliding names. */
typedef int (*hmoe_gguf_cmp_fn)(const void *ctx, size_t a, size_t b);
bool hmoe_gguf_sort_idx(size_t *idx, size_t n, hmoe_gguf_cmp_fn cmp, const void *ctx);

#endif
