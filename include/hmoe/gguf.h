/* gguf.h — GGUF v2/v3 reader (gguf.md): parse and validate the header, metadata and
 * tensor infos of an untrusted file, memory-map it, and point tensors into the map.
 *
 * File layout (gguf.md §2): 24-byte header (magic "GGUF", u32 version, u64 tensor_count,
 * u64 kv_count), kv_count metadata records, tensor_count tensor-info records, zero
 * padding to ALIGN (general.alignment, default 32), then the tensor data. Every count,
 * length and offset is checked against the bytes that remain before it is used
 * (gguf.md §11); a violation is an HMOE_ERR_FORMAT whose message names the file, the
 * byte offset, the field and what is wrong ("model.gguf: offset 4: version: 1 is GGUF v1, ...").
 *
 * Policy where the spec leaves a choice (implemented in src/gguf/):
 *  - data layout: the spec rule, not llama.cpp's packed order — offsets must be multiples of
 *    ALIGN, inside the file and non-overlapping (any order, gaps allowed);
 *  - stricter than llama.cpp: empty tensor names and NUL bytes inside keys or tensor names
 *    are rejected (no writer produces them; they would make lookups ambiguous);
 *  - as llama.cpp: n_dims 0 (one element) and zero-sized dimensions are accepted, BOOL is
 *    any non-zero byte, trailing padding after the last tensor is optional, tensor type ids
 *    are accepted when the type table knows them even if no kernel exists (the model loader
 *    decides what it can run).
 */
#ifndef HMOE_GGUF_H
#define HMOE_GGUF_H

#include "hmoe/common.h"
#include "hmoe/types.h"

/* Metadata value types (gguf.md §5). */
enum hmoe_gguf_vtype {
    HMOE_GGUF_U8 = 0,
    HMOE_GGUF_I8 = 1,
    HMOE_GGUF_U16 = 2,
    HMOE_GGUF_I16 = 3,
    HMOE_GGUF_U32 = 4,
    HMOE_GGUF_I32 = 5,
    HMOE_GGUF_F32 = 6,
    HMOE_GGUF_BOOL = 7,
    HMOE_GGUF_STRING = 8,
    HMOE_GGUF_ARRAY = 9,
    HMOE_GGUF_U64 = 10,
    HMOE_GGUF_I64 = 11,
    HMOE_GGUF_F64 = 12,
    HMOE_GGUF_VTYPE_COUNT
};

/* A string inside the mapped file: not NUL-terminated. */
struct hmoe_gguf_str {
    const char *ptr;
    uint64_t len;
};

/* One metadata record. Scalars are decoded; strings and arrays point into the map. */
struct hmoe_gguf_kv {
    char *key;                   /* NUL-terminated copy of the key */
    enum hmoe_gguf_vtype type;   /* value type; HMOE_GGUF_ARRAY for arrays */
    enum hmoe_gguf_vtype arr_type; /* element type when type == ARRAY */
    uint64_t arr_n;              /* element count when type == ARRAY */
    union {
        uint64_t u64;            /* any unsigned integer type, widened */
        int64_t i64;             /* any signed integer type, widened */
        double f64;              /* F32 or F64, widened */
        bool b;                  /* BOOL (any non-zero byte is true, as llama.cpp) */
        struct hmoe_gguf_str str;/* STRING */
    } v;
    const uint8_t *arr_data;     /* numeric arrays: first element, little-endian, unaligned */
    struct hmoe_gguf_str *arr_str; /* string arrays: arr_n entries (allocated), each into the map */
    uint64_t file_offset;        /* byte offset of the record's key in the file (for messages) */
};

/* One tensor, normalised to four dimensions (gguf.md §6). */
struct hmoe_gguf_tensor {
    char *name;                  /* NUL-terminated copy, < 64 bytes */
    enum hmoe_type type;
    uint32_t n_dims;             /* as stored; use ne[] for reasoning */
    int64_t ne[4];               /* elements per dimension, ne[0] contiguous; unused dims are 1 */
    uint64_t nb[4];              /* byte strides: nb[0] = block bytes, nb[1] = row bytes, ... */
    uint64_t n_elements;
    uint64_t n_bytes;
    uint64_t offset;             /* relative to data_start */
    const void *data;            /* into the mapping: base + data_start + offset */
    uint64_t info_offset;        /* byte offset of the tensor-info record in the file (for messages) */
};

/* One file of a split model (gguf.md §10.2), in shard order. */
struct hmoe_gguf_shard {
    char *path;
    uint64_t size;               /* bytes of the file */
    uint64_t offset;             /* where it starts from hmoe_gguf.base */
    uint64_t n_tensors;          /* tensors it holds */
};

struct hmoe_gguf {
    char *path;                  /* as given to open (used in messages) */
    const uint8_t *base;         /* mapped (or caller-owned) bytes of the whole file */
    uint64_t file_size;
    bool is_mapped;              /* true when hmoe owns an mmap of the file (or its RAM copy) */
    bool in_ram;                 /* the bytes are an anonymous copy (hmoe_gguf_open_ram), not file pages */
    bool locked;                 /* mlock'ed (hmoe_gguf_mlock) */
    /* a split model: n_shards > 1 files placed one after another (2 MiB aligned, zero pages
     * between) in [base, base + file_size); the metadata is the first shard's; 0 for one file */
    uint32_t n_shards;
    struct hmoe_gguf_shard *shards;
    uint32_t version;
    uint64_t n_kv;
    struct hmoe_gguf_kv *kv;
    uint64_t n_tensors;
    struct hmoe_gguf_tensor *tensors;
    uint32_t alignment;          /* general.alignment or 32 */
    uint64_t data_start;         /* absolute offset of the data section */
    void *index;                 /* private lookup tables (keys, tensor names) */
};

/* Open, mmap (read-only) and validate a GGUF file. On failure *out is NULL and err says
 * why (missing file, not a GGUF, malformed at byte N, ...). */
enum hmoe_status hmoe_gguf_open(const char *path, struct hmoe_gguf **out, struct hmoe_err *err);

/* The same, but the whole file is read into anonymous memory backed by transparent huge
 * pages where the kernel allows (is_mapped stays true: hmoe owns that memory). Costs the
 * file's size in RAM and a read at open; CPU decode streams the weights faster (fewer TLB
 * misses). Out of memory is HMOE_ERR_NOMEM. */
enum hmoe_status hmoe_gguf_open_ram(const char *path, struct hmoe_gguf **out, struct hmoe_err *err);

/* Parse a GGUF image already in memory (fuzzing, tests). `data` must outlive the result;
 * `name` is used in messages. */
enum hmoe_status hmoe_gguf_open_memory(const void *data, uint64_t size, const char *name,
                                       struct hmoe_gguf **out, struct hmoe_err *err);

void hmoe_gguf_free(struct hmoe_gguf *g);

/* Split models (gguf.md §10.2). Whether `path` is named PREFIX-NNNNN-of-MMMMM.gguf (then the
 * prefix length, the 1-based shard number and the count); the path of shard `no` of such a name
 * into out; and the bytes on disk of every shard when path names shard 1 (else first_bytes). */
bool hmoe_gguf_split_name(const char *path, size_t *prefix_len, int *no, int *count);
void hmoe_gguf_split_path(char *out, size_t cap, const char *path, size_t prefix_len, int no, int count);
uint64_t hmoe_gguf_split_total_bytes(const char *path, uint64_t first_bytes);
/* Bytes of the model's files on disk: the shards' sum for a split model, else file_size. */
uint64_t hmoe_gguf_disk_bytes(const struct hmoe_gguf *g);

/* Lock the file's bytes in RAM (mlock: reads every page now; they are never evicted or swapped
 * until hmoe_gguf_free). HMOE_ERR_NOMEM with the size, the reason and the limit to raise
 * (RLIMIT_MEMLOCK) when the system refuses; nothing stays locked then. */
enum hmoe_status hmoe_gguf_mlock(struct hmoe_gguf *g, struct hmoe_err *err);

/* Name of a metadata value type ("u32", "string", ...). */
const char *hmoe_gguf_vtype_name(enum hmoe_gguf_vtype t);

/* --- metadata lookup -------------------------------------------------------------- */

/* The record for `key`, or NULL if absent. */
const struct hmoe_gguf_kv *hmoe_gguf_find_kv(const struct hmoe_gguf *g, const char *key);

/* Typed getters. Each converts from any integer (resp. float) width, range-checks, and
 * returns HMOE_ERR_NOT_FOUND if the key is absent, HMOE_ERR_FORMAT if it has the wrong
 * type or does not fit (message names the file, key, stored type and value). get_f32 also
 * accepts integer values; get_bool accepts only BOOL, get_str only STRING. */
enum hmoe_status hmoe_gguf_get_u32(const struct hmoe_gguf *g, const char *key, uint32_t *out, struct hmoe_err *err);
enum hmoe_status hmoe_gguf_get_u64(const struct hmoe_gguf *g, const char *key, uint64_t *out, struct hmoe_err *err);
enum hmoe_status hmoe_gguf_get_i64(const struct hmoe_gguf *g, const char *key, int64_t *out, struct hmoe_err *err);
enum hmoe_status hmoe_gguf_get_f32(const struct hmoe_gguf *g, const char *key, float *out, struct hmoe_err *err);
enum hmoe_status hmoe_gguf_get_bool(const struct hmoe_gguf *g, const char *key, bool *out, struct hmoe_err *err);
/* String value: pointer into the map (not NUL-terminated) and its length. */
enum hmoe_status hmoe_gguf_get_str(const struct hmoe_gguf *g, const char *key, struct hmoe_gguf_str *out, struct hmoe_err *err);

/* Same, with a default when the key is absent (a present key of the wrong type still
 * returns the default; use the getters above when that must be an error). */
uint32_t hmoe_gguf_get_u32_or(const struct hmoe_gguf *g, const char *key, uint32_t dflt);
float hmoe_gguf_get_f32_or(const struct hmoe_gguf *g, const char *key, float dflt);
bool hmoe_gguf_get_bool_or(const struct hmoe_gguf *g, const char *key, bool dflt);

/* Arrays: element type and count of an ARRAY key (HMOE_ERR_NOT_FOUND / FORMAT as above). */
enum hmoe_status hmoe_gguf_get_arr(const struct hmoe_gguf *g, const char *key, const struct hmoe_gguf_kv **out,
                                   struct hmoe_err *err);
/* Element i of a numeric array, widened (i < arr_n; integer or float element types). */
int64_t hmoe_gguf_arr_i64(const struct hmoe_gguf_kv *kv, uint64_t i);
double hmoe_gguf_arr_f64(const struct hmoe_gguf_kv *kv, uint64_t i);

/* --- tensors ---------------------------------------------------------------------- */

/* The tensor called `name`, or NULL. */
const struct hmoe_gguf_tensor *hmoe_gguf_find_tensor(const struct hmoe_gguf *g, const char *name);

#endif
