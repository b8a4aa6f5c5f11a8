/* gguf_split.c — split models (gguf.md §10.2): llama.cpp's gguf-split writes
 * PREFIX-00001-of-0000N.gguf (five digits each, shard numbers from 1), every shard a whole GGUF
 * file with split.no (0-based), split.count and split.tensors.count, the metadata in the first,
 * each tensor in exactly one. Opening the first shard opens all: they are placed in one address
 * range (struct hmoe_gguf's base/file_size then cover every shard) and their tensors merged into
 * one table; a missing shard, a shard of another split (count, number or a tensor twice) and
 * tensors in no shard are errors naming the file. Also the shard names and the bytes on disk of
 * all shards, for memory checks made before anything is opened.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf_impl.h"

bool hmoe_gguf_split_name(const char *path, size_t *prefix_len, int *no, int *count) {
    const size_t n = strlen(path);
    static const char tail[] = "-00000-of-00000.gguf";
    const size_t tl = sizeof tail - 1;
    if (n < tl) return false;
    const char *t = path + n - tl;
    for (size_t i = 0; i < tl; i++) {
        const bool digit = tail[i] == '0';
        if (digit ? (t[i] < '0' || t[i] > '9') : t[i] != tail[i]) return false;
    }
    const int a = atoi(t + 1), b = atoi(t + 10);
    if (a < 1 || b < 1 || a > b) return false;
    *prefix_len = n - tl, *no = a, *count = b;
    return true;
}

void hmoe_gguf_split_path(char *out, size_t cap, const char *path, size_t prefix_len, int no, int count) {
    snprintf(out, cap, "%.*s-%05d-of-%05d.gguf", (int)prefix_len, path, no, count);
}

uint64_t hmoe_gguf_split_total_bytes(const char *path, uint64_t first_bytes) {
    size_t pl;
    int no, count;
    if (!hmoe_gguf_split_name(path, &pl, &no, &count) || no != 1 || count == 1) return first_bytes;
    uint64_t total = first_bytes;
    char *p = malloc(pl + 32);
    if (!p) return first_bytes;
    for (int i = 2; i <= count; i++) {
        struct stat st;
        hmoe_gguf_split_path(p, pl + 32, path, pl, i, count);
        if (stat(p, &st) == 0) total += (uint64_t)st.st_size;
    }
    free(p);
    return total;
}

uint64_t hmoe_gguf_disk_bytes(const struct hmoe_gguf *g) {
    if (g->n_shards < 2) return g->file_size;
    uint64_t sum = 0;
    for (uint32_t i = 0; i < g->n_shards; i++) sum += g->shards[i].size;
    return sum;
}

/* ---- loading every shard ------------------------------------------------------------------ */

#define SPLIT_ALIGN ((uint64_t)2 << 20) /* each shard starts 2 MiB-aligned: huge pages, as one file */

struct shard_src {
    char *path;
    int fd;
    uint64_t size, off; /* bytes, and where it sits from the start of the span */
};

static void close_srcs(struct shard_src *s, int n) {
    for (int i = 0; i < n; i++) {
        if (s[i].fd >= 0) close(s[i].fd);
        free(s[i].path);
    }
    free(s);
}

/* One address range for all shards: an aligned reservation, each shard mapped (or read) at its
 * offset, the gaps between them read-only zero pages, so that code which walks the model's bytes
 * (preload, pinning, --mlock) sees one readable range, as for a single file. */
static enum hmoe_status place_shards(struct shard_src *s, int n, bool to_ram, const char *first, uint8_t **out,
                                     uint64_t *span_out, struct hmoe_err *err) {
    const uint64_t span = s[n - 1].off + s[n - 1].size, len = (span + 4095) & ~(uint64_t)4095;
    if (len > SIZE_MAX - SPLIT_ALIGN)
        return HMOE_RAISE(err, HMOE_ERR_UNSUPPORTED, "%s: the %d shards (%" PRIu64 " bytes) are too large to map",
                          first, n, span);
    const int prot = to_ram ? PROT_READ | PROT_WRITE : PROT_NONE;
    uint8_t *raw = mmap(NULL, (size_t)(len + SPLIT_ALIGN), prot, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (raw == MAP_FAILED)
        return HMOE_RAISE(err, to_ram ? HMOE_ERR_NOMEM : HMOE_ERR_IO,
                          "%s: cannot reserve %" PRIu64 " bytes for its %d shards%s", first, span, n,
                          to_ram ? " (--no-mmap); without --no-mmap the files are mapped instead" : "");
    uint8_t *a = (uint8_t *)(((uintptr_t)raw + SPLIT_ALIGN - 1) & ~(uintptr_t)(SPLIT_ALIGN - 1));
    if (a > raw) munmap(raw, (size_t)(a - raw));
    if (raw + SPLIT_ALIGN > a) munmap(a + len, (size_t)(raw + SPLIT_ALIGN - a));
    madvise(a, (size_t)len, MADV_HUGEPAGE); /* advice only */
    for (int i = 0; i < n; i++) {
        uint8_t *at = a + s[i].off;
        if (to_ram) {
            for (uint64_t done = 0; done < s[i].size;) {
                const size_t want = (size_t)HMOE_MIN(s[i].size - done, (uint64_t)64 << 20);
                const ssize_t got = pread(s[i].fd, at + done, want, (off_t)done);
                if (got <= 0) {
                    const int e = got < 0 ? errno : 0;
                    munmap(a, (size_t)len);
                    return HMOE_RAISE(err, HMOE_ERR_IO, "%s: read failed at byte %" PRIu64 " of %" PRIu64 ": %s",
                                      s[i].path, done, s[i].size, got < 0 ? strerror(e) : "file shrank while reading");
                }
                done += (uint64_t)got;
            }
            continue;
        }
        if (mmap(at, (size_t)s[i].size, PROT_READ, MAP_PRIVATE | MAP_FIXED, s[i].fd, 0) == MAP_FAILED) {
            const int e = errno;
            munmap(a, (size_t)len);
            return HMOE_RAISE(err, HMOE_ERR_IO, "%s: cannot mmap %" PRIu64 " bytes: %s", s[i].path, s[i].size,
                              strerror(e));
        }
        const uint64_t end = (s[i].off + s[i].size + 4095) & ~(uint64_t)4095;
        const uint64_t next = i + 1 < n ? s[i + 1].off : end;
        if (next > end &&
            mmap(a + end, (size_t)(next - end), PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED) {
            munmap(a, (size_t)len);
            return HMOE_RAISE(err, HMOE_ERR_NOMEM, "%s: cannot map the gap after shard %d", first, i + 1);
        }
    }
    if (to_ram) mprotect(a, (size_t)len, PROT_READ); /* weights are never written */
    *out = a;
    *span_out = span;
    return HMOE_OK;
}

/* The split keys of shard `want` (0-based) as written by gguf-split, or a message naming it. */
static enum hmoe_status check_shard_keys(const struct hmoe_gguf *s, int want, int count, struct hmoe_err *err) {
    uint32_t no = 0, cnt = 0;
    const bool has_no = hmoe_gguf_get_u32(s, "split.no", &no, NULL) == HMOE_OK;
    const bool has_cnt = hmoe_gguf_get_u32(s, "split.count", &cnt, NULL) == HMOE_OK;
    if (!has_no || !has_cnt)
        return HMOE_RAISE(err, HMOE_ERR_FORMAT,
                          "%s: not a shard of a split model (no split.no / split.count keys), but its name says it is "
                          "shard %d of %d; replace it with the shard from the same split",
                          s->path, want + 1, count);
    if ((int)cnt != count)
        return HMOE_RAISE(err, HMOE_ERR_FORMAT,
                          "%s: split.count is %u but the first shard says %d: the shards come from different splits; "
                          "download all shards of one split again",
                          s->path, cnt, count);
    if ((int)no != want)
        return HMOE_RAISE(err, HMOE_ERR_FORMAT,
                          "%s: split.no is %u (shard %u) but its name says shard %d: the file was renamed or comes from "
                          "another split",
                          s->path, no, no + 1, want + 1);
    return HMOE_OK;
}

enum hmoe_status hmoe_gguf_open_split(struct hmoe_gguf *first, bool to_ram, struct hmoe_gguf **out,
                                      struct hmoe_err *err) {
    *out = NULL;
    uint32_t count = 0, no = 0;
    int64_t total = -1;
    if (hmoe_gguf_get_u32(first, "split.count", &count, err)) return HMOE_ERR_FORMAT;
    if (hmoe_gguf_get_u32(first, "split.no", &no, NULL) != HMOE_OK) no = 0;
    size_t pl;
    int name_no, name_count;
    const bool named = hmoe_gguf_split_name(first->path, &pl, &name_no, &name_count);
    if (no != 0) {
        char p1[4096];
        if (named) hmoe_gguf_split_path(p1, sizeof p1, first->path, pl, 1, (int)count);
        return HMOE_RAISE(err, HMOE_ERR_ARG,
                          "%s: this is shard %u of %u of a split model; open its first shard%s%s (it loads all of them)",
                          first->path, no + 1, count, named ? ", " : "", named ? p1 : "");
    }
    if (count > 99999)
        return HMOE_RAISE(err, HMOE_ERR_FORMAT, "%s: split.count %u is beyond the 5-digit shard names of gguf-split",
                          first->path, count);
    if (!named || name_no != 1 || name_count != (int)count)
        return HMOE_RAISE(err, HMOE_ERR_FORMAT,
                          "%s: split.count says the model has %u shards, but the file name does not end in "
                          "-00001-of-%05u.gguf, so the other shards cannot be found; keep gguf-split's file names",
                          first->path, count, count);
    if (hmoe_gguf_get_i64(first, "split.tensors.count", &total, NULL) != HMOE_OK || total < 0)
        return HMOE_RAISE(err, HMOE_ERR_FORMAT,
                          "%s: split model without a valid split.tensors.count key (gguf-split writes it in every shard)",
                          first->path);

    const int n = (int)count;
    struct shard_src *src = calloc((size_t)n, sizeof *src);
    if (!src) return HMOE_RAISE(err, HMOE_ERR_NOMEM, "%s: out of memory", first->path);
    for (int i = 0; i < n; i++) src[i].fd = -1;
    enum hmoe_status st = HMOE_OK;
    for (int i = 0; i < n && !st; i++) {
        const size_t cap = pl + 32;
        if (!(src[i].path = malloc(cap))) {
            st = HMOE_RAISE(err, HMOE_ERR_NOMEM, "%s: out of memory", first->path);
            break;
        }
        hmoe_gguf_split_path(src[i].path, cap, first->path, pl, i + 1, n);
        struct stat sb;
        if ((src[i].fd = open(src[i].path, O_RDONLY | O_CLOEXEC)) < 0 || fstat(src[i].fd, &sb) != 0) {
            const int e = errno;
            st = HMOE_RAISE(err, e == ENOENT ? HMOE_ERR_NOT_FOUND : HMOE_ERR_IO,
                            "%s: shard %d of %d of the split model %s is %s (%s); all shards must sit in one folder "
                            "under gguf-split's names",
                            src[i].path, i + 1, n, first->path, e == ENOENT ? "missing" : "unreadable", strerror(e));
            break;
        }
        if (!S_ISREG(sb.st_mode) || sb.st_size == 0) {
            st = HMOE_RAISE(err, HMOE_ERR_FORMAT, "%s: shard %d of %d is %s", src[i].path, i + 1, n,
                            S_ISREG(sb.st_mode) ? "empty (an interrupted download?)" : "not a regular file");
            break;
        }
        src[i].size = (uint64_t)sb.st_size;
        src[i].off = i ? (src[i - 1].off + src[i - 1].size + SPLIT_ALIGN - 1) & ~(SPLIT_ALIGN - 1) : 0;
    }
    uint8_t *base = NULL;
    uint64_t span = 0;
    if (!st) st = place_shards(src, n, to_ram, first->path, &base, &span, err);
    for (int i = 0; i < n; i++)
        if (src[i].fd >= 0) close(src[i].fd), src[i].fd = -1; /* the mappings keep their files */
    if (st) {
        close_srcs(src, n);
        return st;
    }

    /* Parse every shard where it now sits; the parse checks each one as a whole file. */
    struct hmoe_gguf **sub = calloc((size_t)n, sizeof *sub);
    struct hmoe_gguf *g = calloc(1, sizeof *g);
    if (!sub || !g) st = HMOE_RAISE(err, HMOE_ERR_NOMEM, "%s: out of memory", first->path);
    uint64_t n_tensors = 0;
    for (int i = 0; i < n && !st; i++) {
        if (!(sub[i] = calloc(1, sizeof *sub[i]))) {
            st = HMOE_RAISE(err, HMOE_ERR_NOMEM, "%s: out of memory", first->path);
            break;
        }
        sub[i]->path = src[i].path, src[i].path = NULL; /* the shard owns its name now */
        sub[i]->base = base + src[i].off;
        sub[i]->file_size = src[i].size;
        if ((st = hmoe_gguf_parse(sub[i], err))) break;
        if ((st = check_shard_keys(sub[i], i, n, err))) break;
        /* a tensor lives in exactly one shard */
        for (uint64_t t = 0; t < sub[i]->n_tensors && !st; t++)
            for (int j = 0; j < i && !st; j++)
                if (hmoe_gguf_find_tensor(sub[j], sub[i]->tensors[t].name))
                    st = HMOE_RAISE(err, HMOE_ERR_FORMAT,
                                    "%s: tensor '%s' is also in shard %d (%s); a tensor lives in exactly one shard: the "
                                    "shards come from different splits",
                                    sub[i]->path, sub[i]->tensors[t].name, j + 1, sub[j]->path);
        n_tensors += sub[i]->n_tensors;
    }
    if (!st && n_tensors != (uint64_t)total)
        st = HMOE_RAISE(err, HMOE_ERR_FORMAT,
                        "%s: split.tensors.count says %" PRId64 " tensors but the %d shards hold %" PRIu64 "%s", first->path,
                        total, n, n_tensors,
                        n_tensors < (uint64_t)total ? ": the rest are in no shard (a shard from another split?)"
                                                    : " (a shard from another split?)");
    /* The merged view: the first shard's metadata, every shard's tensors, one span. */
    if (!st) {
        g->path = first->path, first->path = NULL;
        g->base = base;
        g->file_size = span;
        g->is_mapped = true;
        g->in_ram = to_ram;
        g->version = sub[0]->version;
        g->kv = sub[0]->kv, g->n_kv = sub[0]->n_kv, sub[0]->kv = NULL, sub[0]->n_kv = 0;
        g->index = sub[0]->index, sub[0]->index = NULL; /* its key index; the tensor index is rebuilt */
        g->alignment = sub[0]->alignment;
        g->data_start = sub[0]->data_start;
        base = NULL; /* g owns the span */
        g->tensors = calloc(n_tensors ? n_tensors : 1, sizeof *g->tensors);
        g->shards = calloc((size_t)n, sizeof *g->shards);
        if (!g->tensors || !g->shards) st = HMOE_RAISE(err, HMOE_ERR_NOMEM, "%s: out of memory", g->path);
    }
    for (int i = 0; i < n && !st; i++) {
        for (uint64_t t = 0; t < sub[i]->n_tensors; t++) {
            g->tensors[g->n_tensors++] = sub[i]->tensors[t];
            sub[i]->tensors[t].name = NULL; /* moved */
        }
        g->shards[i] = (struct hmoe_gguf_shard){.path = sub[i]->path, .size = src[i].size, .offset = src[i].off,
                                                .n_tensors = sub[i]->n_tensors};
        sub[i]->path = NULL;
        g->n_shards++;
    }
    if (!st) {
        hmoe_gguf_index_drop_tensors(g->index);
        struct gguf_cur c = {.base = g->base, .size = g->file_size, .file = g->path, .err = err};
        st = hmoe_gguf_index_tensors(&c, g);
    }
    for (int i = 0; sub && i < n; i++) hmoe_gguf_free(sub[i]); /* not mapped: frees only tables */
    free(sub);
    if (base) munmap(base, (size_t)((span + 4095) & ~(uint64_t)4095));
    close_srcs(src, n);
    if (st) {
        hmoe_gguf_free(g);
        return st;
    }
    *out = g;
    return HMOE_OK;
}
