/* gguf_write.c — streaming GGUF v3 writer (gguf_write.h; gguf.md §2–§7).
 * Metadata and tensor infos are serialised into one memory buffer as they are added (a
 * Qwen3 vocabulary is ~6 MB of it); tensor data goes from the caller to the file directly
 * (big pieces) or through a 4 MiB staging buffer (small ones), so a 17 GB model costs no
 * more memory than that.
 * Relies on a little-endian host (x86-64), like every other module of hmoe.
 */
#include "hmoe/gguf_write.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the GGUF writer copies host integers as little-endian");

#define STAGE_BYTES (4u << 20)
#define DIRECT_BYTES (256u << 10) /* pieces this big skip the stage: no extra copy */
#define MAX_NAME_BYTES 63 /* llama.cpp's GGML_MAX_NAME (64) includes the NUL (gguf.md §4) */

struct wbuf {
    uint8_t *p;
    size_t n, cap;
};

struct tinfo {
    char name[MAX_NAME_BYTES + 1];
    enum hmoe_type type;
    uint32_t n_dims;
    int64_t ne[4];
    uint64_t n_bytes, offset;
};

struct hmoe_gguf_writer {
    uint32_t alignment;
    struct wbuf kv;        /* serialised metadata records */
    uint64_t n_kv;
    char **keys;           /* copies, for the uniqueness check */
    size_t keys_cap;
    bool have_align_key;
    uint32_t align_key_value;
    struct tinfo *t;
    uint64_t n_t, t_cap;
    uint64_t data_bytes;   /* running packed size of the data section */

    /* output state */
    char *path;
    int fd;
    bool opened, finished, remove_on_fail;
    uint64_t file_off;     /* bytes handed to the file (staged included) */
    uint64_t file_total;   /* expected final size */
    uint64_t cur;          /* tensor being written */
    uint64_t cur_done;     /* bytes of it written */
    uint8_t *stage;
    size_t stage_n;
};

/* ---- small helpers ------------------------------------------------------------------ */

static bool wbuf_put(struct wbuf *b, const void *src, size_t n) {
    if (n > SIZE_MAX - b->n) return false;
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->n + n) {
            if (cap > SIZE_MAX / 2) return false;
            cap *= 2;
        }
        uint8_t *p = realloc(b->p, cap);
        if (!p) return false;
        b->p = p;
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->n, src, n);
    b->n += n;
    return true;
}

static bool wbuf_u32(struct wbuf *b, uint32_t v) { return wbuf_put(b, &v, 4); }
static bool wbuf_u64(struct wbuf *b, uint64_t v) { return wbuf_put(b, &v, 8); }
static bool wbuf_str(struct wbuf *b, const char *s, uint64_t len) {
    return wbuf_u64(b, len) && (len == 0 || wbuf_put(b, s, (size_t)len));
}

static uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

/* Bytes of one element of a numeric metadata type; 0 for STRING/ARRAY/unknown. */
static size_t vtype_size(enum hmoe_gguf_vtype t) {
    static const uint8_t size[HMOE_GGUF_VTYPE_COUNT] = {
        [HMOE_GGUF_U8] = 1,  [HMOE_GGUF_I8] = 1,  [HMOE_GGUF_U16] = 2, [HMOE_GGUF_I16] = 2,
        [HMOE_GGUF_U32] = 4, [HMOE_GGUF_I32] = 4, [HMOE_GGUF_F32] = 4, [HMOE_GGUF_BOOL] = 1,
        [HMOE_GGUF_U64] = 8, [HMOE_GGUF_I64] = 8, [HMOE_GGUF_F64] = 8,
    };
    return (unsigned)t < HMOE_GGUF_VTYPE_COUNT ? size[t] : 0;
}

enum hmoe_status hmoe_gguf_writer_init(struct hmoe_gguf_writer **out, uint32_t alignment, struct hmoe_err *err) {
    *out = NULL;
    if (alignment == 0 || (alignment & (alignment - 1)) != 0)
        return HMOE_RAISE(err, HMOE_ERR_ARG, "GGUF alignment %u is not a power of two (gguf.md §7)", alignment);
    struct hmoe_gguf_writer *w = calloc(1, sizeof *w);
    if (!w) return HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory creating a GGUF writer");
    w->alignment = alignment;
    w->fd = -1;
    *out = w;
    return HMOE_OK;
}

static void close_and_remove(struct hmoe_gguf_writer *w) {
    if (w->fd >= 0) close(w->fd);
    w->fd = -1;
    /* Only a regular file we created or truncated is removed: never /dev/null or a FIFO. */
    if (w->remove_on_fail && w->path) unlink(w->path);
    w->remove_on_fail = false;
}

void hmoe_gguf_writer_free(struct hmoe_gguf_writer *w) {
    if (!w) return;
    if (w->opened && !w->finished) close_and_remove(w);
    for (uint64_t i = 0; i < w->n_kv; i++) free(w->keys[i]);
    free(w->keys);
    free(w->kv.p);
    free(w->t);
    free(w->path);
    free(w->stage);
    free(w);
}

/* ---- metadata ----------------------------------------------------------------------- */

/* Validate the key, remember it, and serialise "key, value type". */
static enum hmoe_status kv_begin(struct hmoe_gguf_writer *w, const char *key, enum hmoe_gguf_vtype type,
                                 struct hmoe_err *err) {
    if (w->opened) return HMOE_RAISE(err, HMOE_ERR_INTERNAL, "GGUF writer: metadata '%s' added after open", key ? key : "");
    if (!key || !key[0]) return HMOE_RAISE(err, HMOE_ERR_ARG, "GGUF writer: empty metadata key (gguf.md §5)");
    for (uint64_t i = 0; i < w->n_kv; i++)
        if (strcmp(w->keys[i], key) == 0)
            return HMOE_RAISE(err, HMOE_ERR_ARG, "GGUF writer: duplicate metadata key '%s' (gguf.md §5)", key);
    if (w->n_kv == w->keys_cap) {
        size_t cap = w->keys_cap ? w->keys_cap * 2 : 32;
        char **k = realloc(w->keys, cap * sizeof *k);
        if (!k) return HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory adding metadata key '%s'", key);
        w->keys = k;
        w->keys_cap = cap;
    }
    char *copy = strdup(key);
    if (!copy) return HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory adding metadata key '%s'", key);
    if (!wbuf_str(&w->kv, key, strlen(key)) || !wbuf_u32(&w->kv, (uint32_t)type)) {
        free(copy);
        return HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory adding metadata key '%s'", key);
    }
    w->keys[w->n_kv++] = copy;
    return HMOE_OK;
}

static enum hmoe_status add_scalar(struct hmoe_gguf_writer *w, const char *key, enum hmoe_gguf_vtype type,
                                   const void *v, struct hmoe_err *err) {
    enum hmoe_status st = kv_begin(w, key, type, err);
    if (st != HMOE_OK) return st;
    if (!wbuf_put(&w->kv, v, vtype_size(type)))
        return HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory adding metadata key '%s'", key);
    if (strcmp(key, "general.alignment") == 0) {
        w->have_align_key = true;
        w->align_key_value = type == HMOE_GGUF_U32 ? *(const uint32_t *)v : 0;
        /* llama.cpp rejects any other type for this key (gguf.md §7). */
        if (type != HMOE_GGUF_U32)
            return HMOE_RAISE(err, HMOE_ERR_ARG, "GGUF writer: general.alignment must be a u32 (gguf.md §7)");
    }
    return HMOE_OK;
}

#define SCALAR_ADDER(suffix, ctype, vtype)                                                                         \
    enum hmoe_status hmoe_gguf_writer_add_##suffix(struct hmoe_gguf_writer *w, const char *key, ctype v,        \
                                                   struct hmoe_err *err) {                                      \
        return add_scalar(w, key, vtype, &v, err);                                                               \
    }
SCALAR_ADDER(u8, uint8_t, HMOE_GGUF_U8)
SCALAR_ADDER(i8, int8_t, HMOE_GGUF_I8)
SCALAR_ADDER(u16, uint16_t, HMOE_GGUF_U16)
SCALAR_ADDER(i16, int16_t, HMOE_GGUF_I16)
SCALAR_ADDER(u32, uint32_t, HMOE_GGUF_U32)
SCALAR_ADDER(i32, int32_t, HMOE_GGUF_I32)
SCALAR_ADDER(u64, uint64_t, HMOE_GGUF_U64)
SCALAR_ADDER(i64, int64_t, HMOE_GGUF_I64)
SCALAR_ADDER(f32, float, HMOE_GGUF_F32)
SCALAR_ADDER(f64, double, HMOE_GGUF_F64)

enum hmoe_status hmoe_gguf_writer_add_bool(struct hmoe_gguf_writer *w, const char *key, bool v, struct hmoe_err *err) {
    uint8_t b = v ? 1 : 0; /* the spec's only valid encodings (gguf.md §5) */
    return add_scalar(w, key, HMOE_GGUF_BOOL, &b, err);
}

enum hmoe_status hmoe_gguf_writer_add_strn(struct hmoe_gguf_writer *w, const char *key, const char *s, uint64_t len,
                                           struct hmoe_err *err) {
    enum hmoe_status st = kv_begin(w, key, HMOE_GGUF_STRING, err);
    if (st != HMOE_OK) return st;
    if (!wbuf_str(&w->kv, s, len)) return HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory adding metadata key '%s'", key);
    return HMOE_OK;
}

enum hmoe_status hmoe_gguf_writer_add_str(struct hmoe_gguf_writer *w, const char *key, const char *s,
                                          struct hmoe_err *err) {
    return hmoe_gguf_writer_add_strn(w, key, s, strlen(s), err);
}

enum hmoe_status hmoe_gguf_writer_add_arr(struct hmoe_gguf_writer *w, const char *key, enum hmoe_gguf_vtype elem_type,
                                          const void *data, uint64_t n, struct hmoe_err *err) {
    size_t es = vtype_size(elem_type);
    if (es == 0)
        return HMOE_RAISE(err, HMOE_ERR_ARG, "GGUF writer: '%s': arrays of value type %d cannot be written with add_arr",
                          key, (int)elem_type);
    uint64_t bytes;
    if (!hmoe_mul_u64(n, es, &bytes) || bytes > SIZE_MAX)
        return HMOE_RAISE(err, HMOE_ERR_ARG, "GGUF writer: '%s': array of %llu elements is too large", key,
                          (unsigned long long)n);
    enum hmoe_status st = kv_begin(w, key, HMOE_GGUF_ARRAY, err);
    if (st != HMOE_OK) return st;
    if (!wbuf_u32(&w->kv, (uint32_t)elem_type) || !wbuf_u64(&w->kv, n) || !wbuf_put(&w->kv, data, (size_t)bytes))
        return HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory adding metadata key '%s'", key);
    return HMOE_OK;
}

enum hmoe_status hmoe_gguf_writer_add_arr_str(struct hmoe_gguf_writer *w, const char *key,
                                              const struct hmoe_gguf_str *strs, uint64_t n, struct hmoe_err *err) {
    enum hmoe_status st = kv_begin(w, key, HMOE_GGUF_ARRAY, err);
    if (st != HMOE_OK) return st;
    if (!wbuf_u32(&w->kv, (uint32_t)HMOE_GGUF_STRING) || !wbuf_u64(&w->kv, n))
        return HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory adding metadata key '%s'", key);
    for (uint64_t i = 0; i < n; i++)
        if (!wbuf_str(&w->kv, strs[i].ptr, strs[i].len))
            return HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory adding element %llu of '%s'", (unsigned long long)i,
                              key);
    return HMOE_OK;
}

enum hmoe_status hmoe_gguf_writer_copy_kv(struct hmoe_gguf_writer *w, const struct hmoe_gguf_kv *kv,
                                          struct hmoe_err *err) {
    if (kv->type == HMOE_GGUF_STRING) return hmoe_gguf_writer_add_strn(w, kv->key, kv->v.str.ptr, kv->v.str.len, err);
    if (kv->type == HMOE_GGUF_ARRAY) {
        if (kv->arr_type == HMOE_GGUF_STRING) return hmoe_gguf_writer_add_arr_str(w, kv->key, kv->arr_str, kv->arr_n, err);
        return hmoe_gguf_writer_add_arr(w, kv->key, kv->arr_type, kv->arr_data, kv->arr_n, err);
    }
    /* Scalars were widened by the reader: narrow back to the stored width (the low bytes of
     * the widened integer on a little-endian host; floats need a real conversion). */
    size_t es = vtype_size(kv->type);
    if (es == 0) return HMOE_RAISE(err, HMOE_ERR_ARG, "GGUF writer: '%s' has an unknown value type %d", kv->key, (int)kv->type);
    if (kv->type == HMOE_GGUF_F32) return hmoe_gguf_writer_add_f32(w, kv->key, (float)kv->v.f64, err);
    if (kv->type == HMOE_GGUF_F64) return hmoe_gguf_writer_add_f64(w, kv->key, kv->v.f64, err);
    if (kv->type == HMOE_GGUF_BOOL) return hmoe_gguf_writer_add_bool(w, kv->key, kv->v.b, err);
    uint64_t bits = kv->v.u64;
    return add_scalar(w, kv->key, kv->type, &bits, err);
}

/* ---- tensor infos -------------------------------------------------------------------- */

enum hmoe_status hmoe_gguf_writer_add_tensor(struct hmoe_gguf_writer *w, const char *name, enum hmoe_type type,
                                             uint32_t n_dims, const int64_t *ne, struct hmoe_err *err) {
    if (w->opened) return HMOE_RAISE(err, HMOE_ERR_INTERNAL, "GGUF writer: tensor '%s' added after open", name);
    size_t len = name ? strlen(name) : 0;
    if (len == 0 || len > MAX_NAME_BYTES)
        return HMOE_RAISE(err, HMOE_ERR_ARG, "GGUF writer: tensor name '%s' must have 1..%d bytes (gguf.md §4)",
                          name ? name : "", MAX_NAME_BYTES);
    const struct hmoe_type_info *ti = hmoe_type_get((uint32_t)type);
    if (!ti) return HMOE_RAISE(err, HMOE_ERR_ARG, "GGUF writer: tensor '%s': unknown type id %d", name, (int)type);
    if (n_dims < 1 || n_dims > 4)
        return HMOE_RAISE(err, HMOE_ERR_ARG, "GGUF writer: tensor '%s': %u dimensions (1..4 allowed)", name, n_dims);
    uint64_t n_el = 1;
    for (uint32_t d = 0; d < n_dims; d++) {
        if (ne[d] < 0 || !hmoe_mul_u64(n_el, (uint64_t)ne[d], &n_el) || n_el > (uint64_t)INT64_MAX)
            return HMOE_RAISE(err, HMOE_ERR_ARG, "GGUF writer: tensor '%s': bad or overflowing dimension %u", name, d);
    }
    if (ne[0] % ti->blck != 0)
        return HMOE_RAISE(err, HMOE_ERR_ARG, "GGUF writer: tensor '%s': ne[0] = %lld is not a multiple of the %s block size %d",
                          name, (long long)ne[0], ti->name, ti->blck);
    uint64_t n_bytes, padded, total;
    if (!hmoe_mul_u64(n_el / (uint64_t)ti->blck, (uint64_t)ti->type_size, &n_bytes) ||
        !hmoe_add_u64(n_bytes, w->alignment - 1, &padded) ||
        !hmoe_add_u64(w->data_bytes, padded / w->alignment * w->alignment, &total))
        return HMOE_RAISE(err, HMOE_ERR_ARG, "GGUF writer: tensor '%s': byte size overflows", name);
    for (uint64_t i = 0; i < w->n_t; i++)
        if (strcmp(w->t[i].name, name) == 0)
            return HMOE_RAISE(err, HMOE_ERR_ARG, "GGUF writer: duplicate tensor name '%s'", name);
    if (w->n_t == w->t_cap) {
        uint64_t cap = w->t_cap ? w->t_cap * 2 : 256;
        struct tinfo *t = realloc(w->t, cap * sizeof *t);
        if (!t) return HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory adding tensor '%s'", name);
        w->t = t;
        w->t_cap = cap;
    }
    struct tinfo *t = &w->t[w->n_t++];
    memset(t, 0, sizeof *t);
    memcpy(t->name, name, len);
    t->type = type;
    t->n_dims = n_dims;
    for (int d = 0; d < 4; d++) t->ne[d] = d < (int)n_dims ? ne[d] : 1;
    t->n_bytes = n_bytes;
    t->offset = w->data_bytes;
    w->data_bytes = total;
    return HMOE_OK;
}

uint64_t hmoe_gguf_writer_n_tensors(const struct hmoe_gguf_writer *w) { return w->n_t; }
uint64_t hmoe_gguf_writer_tensor_bytes(const struct hmoe_gguf_writer *w, uint64_t i) { return i < w->n_t ? w->t[i].n_bytes : 0; }
uint64_t hmoe_gguf_writer_tensor_offset(const struct hmoe_gguf_writer *w, uint64_t i) { return i < w->n_t ? w->t[i].offset : 0; }
uint64_t hmoe_gguf_writer_data_bytes(const struct hmoe_gguf_writer *w) { return w->data_bytes; }
uint64_t hmoe_gguf_writer_current_tensor(const struct hmoe_gguf_writer *w) { return w->cur; }
uint64_t hmoe_gguf_writer_file_offset(const struct hmoe_gguf_writer *w) { return w->file_off; }

/* ---- output -------------------------------------------------------------------------- */

static enum hmoe_status io_fail(struct hmoe_gguf_writer *w, int e, const char *what, struct hmoe_err *err) {
    double gib = 1024.0 * 1024.0 * 1024.0;
    enum hmoe_status st;
    if (e == ENOSPC || e == EDQUOT)
        st = HMOE_RAISE(err, HMOE_ERR_IO,
                        "%s: disk full after %.2f of %.2f GiB (%s); free some space or write elsewhere with -o",
                        w->path, (double)w->file_off / gib, (double)w->file_total / gib, strerror(e));
    else
        st = HMOE_RAISE(err, HMOE_ERR_IO, "%s: %s failed at byte %llu: %s", w->path, what,
                        (unsigned long long)w->file_off, strerror(e));
    close_and_remove(w);
    w->finished = true; /* nothing more can be written; free() has nothing left to do */
    return st;
}

static enum hmoe_status write_all(struct hmoe_gguf_writer *w, const uint8_t *p, size_t n, struct hmoe_err *err) {
    while (n > 0) {
        ssize_t k = write(w->fd, p, n > (1u << 30) ? (1u << 30) : n);
        if (k < 0) {
            if (errno == EINTR) continue;
            return io_fail(w, errno, "write", err);
        }
        if (k == 0) return io_fail(w, ENOSPC, "write", err);
        p += k;
        n -= (size_t)k;
    }
    return HMOE_OK;
}

static enum hmoe_status stage_flush(struct hmoe_gguf_writer *w, struct hmoe_err *err) {
    enum hmoe_status st = write_all(w, w->stage, w->stage_n, err);
    w->stage_n = 0;
    return st;
}

/* Small pieces are gathered in the stage; big ones go straight to write(2). */
static enum hmoe_status emit(struct hmoe_gguf_writer *w, const void *data, size_t n, struct hmoe_err *err) {
    enum hmoe_status st = HMOE_OK;
    if (n < DIRECT_BYTES && n <= STAGE_BYTES - w->stage_n) {
        memcpy(w->stage + w->stage_n, data, n);
        w->stage_n += n;
    } else if ((st = stage_flush(w, err)) == HMOE_OK) {
        if (n < DIRECT_BYTES) {
            memcpy(w->stage, data, n);
            w->stage_n = n;
        } else st = write_all(w, data, n, err);
    }
    if (st == HMOE_OK) w->file_off += n;
    return st;
}

static enum hmoe_status emit_zeros(struct hmoe_gguf_writer *w, size_t n, struct hmoe_err *err) {
    static const uint8_t zeros[256];
    while (n > 0) {
        size_t k = n < sizeof zeros ? n : sizeof zeros;
        enum hmoe_status st = emit(w, zeros, k, err);
        if (st != HMOE_OK) return st;
        n -= k;
    }
    return HMOE_OK;
}

/* Tensors of zero bytes are complete as soon as they are reached. */
static enum hmoe_status skip_empty(struct hmoe_gguf_writer *w, struct hmoe_err *err) {
    while (w->cur < w->n_t && w->cur_done == w->t[w->cur].n_bytes) {
        uint64_t pad = align_up(w->t[w->cur].n_bytes, w->alignment) - w->t[w->cur].n_bytes;
        enum hmoe_status st = emit_zeros(w, (size_t)pad, err);
        if (st != HMOE_OK) return st;
        w->cur++;
        w->cur_done = 0;
    }
    return HMOE_OK;
}

enum hmoe_status hmoe_gguf_writer_open(struct hmoe_gguf_writer *w, const char *path, struct hmoe_err *err) {
    if (w->opened) return HMOE_RAISE(err, HMOE_ERR_INTERNAL, "GGUF writer: opened twice");
    uint32_t file_align = w->have_align_key ? w->align_key_value : 32;
    if (file_align != w->alignment)
        return HMOE_RAISE(err, HMOE_ERR_ARG,
                          "GGUF writer: the file would declare alignment %u but the writer was set up for %u", file_align,
                          w->alignment);
    struct wbuf head = {0};
    bool ok = wbuf_put(&head, "GGUF", 4) && wbuf_u32(&head, 3) && wbuf_u64(&head, w->n_t) && wbuf_u64(&head, w->n_kv) &&
              wbuf_put(&head, w->kv.p, w->kv.n);
    for (uint64_t i = 0; ok && i < w->n_t; i++) {
        const struct tinfo *t = &w->t[i];
        ok = wbuf_str(&head, t->name, strlen(t->name)) && wbuf_u32(&head, t->n_dims);
        for (uint32_t d = 0; ok && d < t->n_dims; d++) ok = wbuf_u64(&head, (uint64_t)t->ne[d]);
        ok = ok && wbuf_u32(&head, (uint32_t)t->type) && wbuf_u64(&head, t->offset);
    }
    if (!ok) {
        free(head.p);
        return HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory building the GGUF header for %s", path);
    }
    w->path = strdup(path);
    w->stage = malloc(STAGE_BYTES);
    if (!w->path || !w->stage) {
        free(head.p);
        return HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory opening %s", path);
    }
    uint64_t data_start = align_up(head.n, w->alignment);
    w->file_total = data_start + w->data_bytes;
    w->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (w->fd < 0) {
        int e = errno;
        free(head.p);
        return HMOE_RAISE(err, HMOE_ERR_IO, "%s: cannot create the output file: %s", path, strerror(e));
    }
    struct stat sb;
    w->remove_on_fail = fstat(w->fd, &sb) == 0 && S_ISREG(sb.st_mode);
    w->opened = true;
    enum hmoe_status st = emit(w, head.p, head.n, err);
    free(head.p);
    if (st == HMOE_OK) st = emit_zeros(w, (size_t)(data_start - head.n), err);
    if (st == HMOE_OK) st = skip_empty(w, err);
    return st;
}

enum hmoe_status hmoe_gguf_writer_write(struct hmoe_gguf_writer *w, const void *data, size_t n_bytes,
                                        struct hmoe_err *err) {
    if (!w->opened || w->finished) return HMOE_RAISE(err, HMOE_ERR_INTERNAL, "GGUF writer: write on a writer that is not open");
    if (n_bytes == 0) return HMOE_OK;
    if (w->cur >= w->n_t)
        return HMOE_RAISE(err, HMOE_ERR_INTERNAL, "GGUF writer: %zu bytes written after the last tensor of %s", n_bytes, w->path);
    const struct tinfo *t = &w->t[w->cur];
    if (n_bytes > t->n_bytes - w->cur_done)
        return HMOE_RAISE(err, HMOE_ERR_INTERNAL, "GGUF writer: %zu bytes run past the end of tensor '%s' (%llu of %llu written)",
                          n_bytes, t->name, (unsigned long long)w->cur_done, (unsigned long long)t->n_bytes);
    enum hmoe_status st = emit(w, data, n_bytes, err);
    if (st != HMOE_OK) return st;
    w->cur_done += n_bytes;
    return skip_empty(w, err);
}

enum hmoe_status hmoe_gguf_writer_finish(struct hmoe_gguf_writer *w, struct hmoe_err *err) {
    if (!w->opened || w->finished) return HMOE_RAISE(err, HMOE_ERR_INTERNAL, "GGUF writer: finish on a writer that is not open");
    if (w->cur < w->n_t) {
        enum hmoe_status st = HMOE_RAISE(err, HMOE_ERR_INTERNAL,
                                         "%s: tensor '%s' has %llu of %llu bytes; the file is incomplete and was removed",
                                         w->path, w->t[w->cur].name, (unsigned long long)w->cur_done,
                                         (unsigned long long)w->t[w->cur].n_bytes);
        close_and_remove(w);
        w->finished = true;
        return st;
    }
    enum hmoe_status st = stage_flush(w, err);
    if (st != HMOE_OK) return st;
    /* close() is where NFS and some full file systems report a failed write. */
    if (close(w->fd) != 0) {
        int e = errno;
        w->fd = -1;
        return io_fail(w, e, "close", err);
    }
    w->fd = -1;
    w->finished = true;
    return HMOE_OK;
}
