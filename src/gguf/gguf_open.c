/* gguf_open.c — open a GGUF file (read-only mmap, or read into huge-page RAM) or an
 * in-memory image, run the parse stages of gguf_impl.h in order (gguf.md §13), and free
 * everything again. Relies on POSIX open/fstat/mmap/pread and Linux madvise. Tensors point
 * into the MAP_PRIVATE, PROT_READ mapping (or the read-only anonymous copy), which lives as
 * long as the struct hmoe_gguf.
 */
#include "gguf_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

void hmoe_gguf_free(struct hmoe_gguf *g) {
    if (!g) return;
    for (uint64_t i = 0; g->kv && i < g->n_kv; i++) {
        free(g->kv[i].key);
        free(g->kv[i].arr_str);
    }
    free(g->kv);
    for (uint64_t i = 0; g->tensors && i < g->n_tensors; i++) free(g->tensors[i].name);
    free(g->tensors);
    hmoe_gguf_index_free(g->index);
    for (uint32_t i = 0; g->shards && i < g->n_shards; i++) free(g->shards[i].path);
    free(g->shards);
    if (g->locked) munlock(g->base, (size_t)g->file_size);
    if (g->is_mapped && g->base) munmap((void *)g->base, (size_t)g->file_size);
    free(g->path);
    free(g);
}

enum hmoe_status hmoe_gguf_mlock(struct hmoe_gguf *g, struct hmoe_err *err) {
    if (!g->base || !g->file_size) return HMOE_OK;
    if (mlock(g->base, (size_t)g->file_size) != 0) {
        const int e = errno;
        struct rlimit rl = {0};
        getrlimit(RLIMIT_MEMLOCK, &rl);
        char lim[32];
        if (rl.rlim_cur == RLIM_INFINITY) snprintf(lim, sizeof lim, "unlimited");
        else snprintf(lim, sizeof lim, "%llu MiB", (unsigned long long)(rl.rlim_cur >> 20));
        return HMOE_RAISE(err, HMOE_ERR_NOMEM,
                          "--mlock: cannot lock the %llu MiB of %s in RAM (%s; the lock limit is %s): the weights stay "
                          "evictable; raise the limit with 'ulimit -l unlimited' (or memlock in "
                          "/etc/security/limits.conf) or free memory",
                          (unsigned long long)(g->file_size >> 20), g->path, strerror(e), lim);
    }
    g->locked = true;
    return HMOE_OK;
}

enum hmoe_status hmoe_gguf_parse(struct hmoe_gguf *g, struct hmoe_err *err) {
    struct gguf_cur c = {.base = g->base, .size = g->file_size, .pos = 0, .file = g->path, .err = err};
    enum hmoe_status st;
    if ((st = hmoe_gguf_read_header(&c, g))) return st;
    if ((st = hmoe_gguf_read_kvs(&c, g))) return st;
    if ((st = hmoe_gguf_index_kvs(&c, g))) return st;
    if ((st = hmoe_gguf_read_alignment(&c, g))) return st;
    if ((st = hmoe_gguf_read_tensors(&c, g))) return st;
    if ((st = hmoe_gguf_index_tensors(&c, g))) return st;
    return hmoe_gguf_check_layout(&c, g);
}

static struct hmoe_gguf *new_gguf(const char *name, struct hmoe_err *err) {
    struct hmoe_gguf *g = calloc(1, sizeof *g);
    size_t n = strlen(name);
    if (g) g->path = malloc(n + 1);
    if (!g || !g->path) {
        free(g);
        HMOE_RAISE(err, HMOE_ERR_NOMEM, "%s: out of memory", name);
        return NULL;
    }
    memcpy(g->path, name, n + 1);
    return g;
}

enum hmoe_status hmoe_gguf_open_memory(const void *data, uint64_t size, const char *name, struct hmoe_gguf **out,
                                       struct hmoe_err *err) {
    *out = NULL;
    if (!name) name = "<memory>";
    if (!data && size) return HMOE_RAISE(err, HMOE_ERR_ARG, "%s: NULL data with size %" PRIu64, name, size);
    struct hmoe_gguf *g = new_gguf(name, err);
    if (!g) return HMOE_ERR_NOMEM;
    static const uint8_t empty[1];
    g->base = data ? data : empty;
    g->file_size = size;
    enum hmoe_status st = hmoe_gguf_parse(g, err);
    if (st) {
        hmoe_gguf_free(g);
        return st;
    }
    *out = g;
    return HMOE_OK;
}

/* The whole file read into anonymous memory, 2 MiB aligned and advised for transparent
 * huge pages, then made read-only. Why: CPU decode streams ~0.5 GB of weights per token of
 * Qwen3-30B-A3B, and page-cache pages of a file are mapped in 4 KiB pages here (the kernel
 * collapses no file THPs for ext4), i.e. ~10^5 TLB misses per token — in a VM each one a
 * two-level page walk. The length mapped is the file size rounded up to 4 KiB, so
 * munmap(base, file_size) in hmoe_gguf_free releases exactly this. */
static enum hmoe_status read_to_ram(int fd, const char *path, uint64_t size, void **out, struct hmoe_err *err) {
    const size_t huge = (size_t)2 << 20, len = ((size_t)size + 4095) & ~(size_t)4095;
    if (len > SIZE_MAX - huge)
        return HMOE_RAISE(err, HMOE_ERR_UNSUPPORTED, "%s: %" PRIu64 " bytes is too large to read into memory", path, size);
    char *raw = mmap(NULL, len + huge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED)
        return HMOE_RAISE(err, HMOE_ERR_NOMEM, "%s: cannot allocate %" PRIu64 " bytes to read the model into RAM "
                          "(--no-mmap); without --no-mmap the file is mapped instead", path, size);
    char *a = (char *)(((uintptr_t)raw + huge - 1) & ~(uintptr_t)(huge - 1));
    if (a > raw) munmap(raw, (size_t)(a - raw));
    if (raw + huge > a) munmap(a + len, (size_t)(raw + huge - a));
    madvise(a, len, MADV_HUGEPAGE); /* advice only: without THP this is a plain copy */
    for (size_t done = 0; done < (size_t)size;) {
        const size_t want = HMOE_MIN((size_t)size - done, (size_t)64 << 20);
        const ssize_t got = pread(fd, a + done, want, (off_t)done);
        if (got <= 0) {
            const int e = got < 0 ? errno : 0;
            munmap(a, len);
            return HMOE_RAISE(err, HMOE_ERR_IO, "%s: read failed at byte %zu of %" PRIu64 ": %s", path, done, size,
                              got < 0 ? strerror(e) : "file shrank while reading");
        }
        done += (size_t)got;
    }
    mprotect(a, len, PROT_READ); /* the same protection as the mapping: weights are never written */
    *out = a;
    return HMOE_OK;
}

/* The file mapped read-only at a 2 MiB-aligned address and advised for transparent huge
 * pages (HMOE_MMAP_HUGE=0: a plain mapping). Why: CPU decode streams ~0.5 GB of weights per
 * token, and in 4 KiB pages every page is a TLB miss and a page walk (~6 % of decode CPU
 * time, measured with perf on a 2-core machine). Faults in a MADV_HUGEPAGE mapping read the file into the page
 * cache in 2 MiB folios, and with file offset and address congruent modulo 2 MiB the kernel
 * maps such a folio with one PMD entry (FilePmdMapped in /proc/PID/smaps). Measured on this
 * machine's kernel (6.18, ext4): a model read from an evicted cache lands 100 % in 2 MiB
 * folios this way (31 % with a plain mapping), and decode is ~6 % faster over it. Pages the
 * cache already holds in small folios stay mapped in 4 KiB pages (evicting the file's cache,
 * e.g. `dd if=MODEL iflag=nocache count=0`, lets the next run re-read it). The mapping is
 * `size` bytes at the aligned address, so munmap(base, file_size) releases exactly it. */
static void *map_file(int fd, size_t size) {
    const char *e = getenv("HMOE_MMAP_HUGE");
    const size_t huge = (size_t)2 << 20;
    if ((e && strcmp(e, "0") == 0) || size < huge || size > SIZE_MAX - huge)
        return mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    char *raw = mmap(NULL, size + huge, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (raw == MAP_FAILED) return mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    char *a = (char *)(((uintptr_t)raw + huge - 1) & ~(uintptr_t)(huge - 1));
    void *base = mmap(a, size, PROT_READ, MAP_PRIVATE | MAP_FIXED, fd, 0);
    if (base == MAP_FAILED) {
        const int err = errno;
        munmap(raw, size + huge);
        errno = err;
        return MAP_FAILED;
    }
    /* Give back the reservation around the file mapping (page-rounded ends). */
    const size_t end = ((uintptr_t)a + size + 4095) & ~(uintptr_t)4095;
    if (a > raw) munmap(raw, (size_t)(a - raw));
    if ((uintptr_t)raw + size + huge > end) munmap((void *)end, (uintptr_t)raw + size + huge - end);
    madvise(base, size, MADV_HUGEPAGE); /* advice only */
    return base;
}

/* split.count of a parsed file: 1 for one file, 0 with err set when the key is bad. */
static uint32_t split_count(const struct hmoe_gguf *g, struct hmoe_err *err) {
    uint32_t count = 1;
    if (!hmoe_gguf_find_kv(g, "split.count")) return 1;
    if (hmoe_gguf_get_u32(g, "split.count", &count, err)) return 0;
    if (!count) HMOE_RAISE(err, HMOE_ERR_FORMAT, "%s: split.count is 0 (a split model has at least one shard)", g->path);
    return count;
}

/* follow_split: the first shard of a split model opens every shard (mapped). */
static enum hmoe_status open_file(const char *path, bool to_ram, bool follow_split, struct hmoe_gguf **out,
                                  struct hmoe_err *err) {
    *out = NULL;
    if (!path) return HMOE_RAISE(err, HMOE_ERR_ARG, "no model file given");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        return HMOE_RAISE(err, e == ENOENT ? HMOE_ERR_NOT_FOUND : HMOE_ERR_IO, "%s: cannot open: %s", path, strerror(e));
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        return HMOE_RAISE(err, HMOE_ERR_IO, "%s: cannot stat: %s", path, strerror(e));
    }
    if (S_ISDIR(sb.st_mode)) {
        close(fd);
        return HMOE_RAISE(err, HMOE_ERR_IO, "%s: is a directory, not a GGUF file (give the .gguf file itself)", path);
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return HMOE_RAISE(err, HMOE_ERR_IO, "%s: not a regular file (hmoe maps the model file; pipes and devices "
                          "cannot be read)", path);
    }
    if (sb.st_size == 0) {
        close(fd);
        return HMOE_RAISE(err, HMOE_ERR_FORMAT,
                          "%s: offset 0: magic: the file has only 0 bytes, too short for a GGUF header (empty file, "
                          "not a GGUF file)", path);
    }
    uint64_t size = (uint64_t)sb.st_size;
    if (size > SIZE_MAX) {
        close(fd);
        return HMOE_RAISE(err, HMOE_ERR_UNSUPPORTED, "%s: %" PRIu64 " bytes is too large to map on this system", path, size);
    }
    void *base = NULL;
    if (to_ram) {
        enum hmoe_status rs = read_to_ram(fd, path, size, &base, err);
        close(fd);
        if (rs) return rs;
    } else {
        /* Read-only private mapping: pages come from the page cache on demand and the file
         * can never be modified through it. */
        base = map_file(fd, (size_t)size);
        int e = errno;
        close(fd); /* the mapping keeps its own reference to the file */
        if (base == MAP_FAILED)
            return HMOE_RAISE(err, HMOE_ERR_IO, "%s: cannot mmap %" PRIu64 " bytes: %s", path, size, strerror(e));
    }
    struct hmoe_gguf *g = new_gguf(path, err);
    if (!g) {
        munmap(base, (size_t)size);
        return HMOE_ERR_NOMEM;
    }
    g->base = base;
    g->file_size = size;
    g->is_mapped = true;
    g->in_ram = to_ram;
    enum hmoe_status st = hmoe_gguf_parse(g, err);
    if (st) {
        hmoe_gguf_free(g);
        return st;
    }
    const uint32_t count = follow_split ? split_count(g, err) : 1;
    if (!count) {
        hmoe_gguf_free(g);
        return HMOE_ERR_FORMAT;
    }
    if (count > 1) { /* a split model: this shard's metadata says where the rest are */
        struct hmoe_gguf *all = NULL;
        st = hmoe_gguf_open_split(g, to_ram, &all, err);
        hmoe_gguf_free(g);
        if (st) return st;
        g = all;
    }
    *out = g;
    return HMOE_OK;
}

enum hmoe_status hmoe_gguf_open(const char *path, struct hmoe_gguf **out, struct hmoe_err *err) {
    return open_file(path, false, true, out, err);
}

enum hmoe_status hmoe_gguf_open_ram(const char *path, struct hmoe_gguf **out, struct hmoe_err *err) {
    /* The metadata from the mapped file first: a split model is then read shard by shard into
     * one buffer, without a RAM copy of its first shard on the side. */
    *out = NULL;
    struct hmoe_gguf *first = NULL;
    enum hmoe_status st = open_file(path, false, false, &first, err);
    if (st) return st;
    const uint32_t count = split_count(first, err);
    if (count == 1) {
        hmoe_gguf_free(first);
        return open_file(path, true, false, out, err);
    }
    st = count ? hmoe_gguf_open_split(first, true, out, err) : HMOE_ERR_FORMAT;
    hmoe_gguf_free(first);
    return st;
}
