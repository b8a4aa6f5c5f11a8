/* test_gguf_bad.c — the loader against hostile input (gguf.md §11).
 *
 * 1. Every file in tests/data/gguf-bad/ (written by tools/gen_gguf_corpus.c) is rejected
 *    with HMOE_ERR_FORMAT and a message "<file>: offset N: ..." that contains the text of
 *    its .expect sidecar (offset and field), both through open() and open_memory().
 * 2. Every file in tests/data/gguf-good/ opens and satisfies tests/gguf_check.h.
 * 3. Valid files truncated at every length: rejected below the end of the last tensor,
 *    accepted from there on (§7: trailing padding is optional); never a crash.
 * 4. Random byte flips in the header/metadata/tensor-info region never crash, and what is
 *    accepted still satisfies gguf_check.h.
 * 5. The committed fuzzing corpus (tests/data/fuzz-corpus, from tests/fuzz_gguf.c) replays
 *    the same way: accepted files satisfy gguf_check.h, rejected ones report an offset.
 * Images are copied so they end exactly at a PROT_NONE page: a read past the end faults.
 */
#include <dirent.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#include "gguf_check.h"
#include "harness.h"
#include "hmoe/json.h"

#define BAD_DIR "tests/data/gguf-bad"
#define GOOD_DIR "tests/data/gguf-good"

/* A buffer whose last byte is followed by an inaccessible page. */
struct guarded {
    uint8_t *map;
    size_t map_len, cap;
};
static int guarded_init(struct guarded *gd, size_t cap) {
    size_t pg = (size_t)sysconf(_SC_PAGESIZE), body = (cap + pg - 1) / pg * pg;
    if (body == 0) body = pg;
    void *m = mmap(NULL, body + pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return -1;
    if (mprotect((uint8_t *)m + body, pg, PROT_NONE) != 0) return -1;
    gd->map = m;
    gd->map_len = body + pg;
    gd->cap = body;
    return 0;
}
/* Copy n bytes so that they end at the guard page; returns where they start. */
static uint8_t *guarded_put(struct guarded *gd, const void *src, size_t n) {
    uint8_t *dst = gd->map + gd->cap - n;
    memcpy(dst, src, n);
    return dst;
}
static void guarded_free(struct guarded *gd) { munmap(gd->map, gd->map_len); }

static int read_all(const char *path, uint8_t **out, size_t *n) {
    char *t;
    struct hmoe_err err = {0};
    if (hmoe_read_file(path, &t, n, &err) != HMOE_OK) return -1;
    *out = (uint8_t *)t;
    return 0;
}

static int is_gguf(const struct dirent *d) {
    size_t n = strlen(d->d_name);
    return n > 5 && strcmp(d->d_name + n - 5, ".gguf") == 0;
}

static void bad_corpus(void) {
    struct dirent **ents;
    int n = scandir(BAD_DIR, &ents, is_gguf, alphasort);
    /* The generator writes 93 cases; fewer means files went missing. */
    t_check(n >= 90, "gguf-bad corpus present", "found %d .gguf files in %s (expected >= 90)", n, BAD_DIR);
    int n_ok = 0;
    for (int i = 0; i < n; i++) {
        char path[512], xpath[512], name[300];
        snprintf(path, sizeof path, "%s/%s", BAD_DIR, ents[i]->d_name);
        snprintf(name, sizeof name, "gguf rejects %s", ents[i]->d_name);
        size_t nl = strlen(path);
        snprintf(xpath, sizeof xpath, "%.*s.expect", (int)(nl - 5), path);
        uint8_t *expect = NULL, *img = NULL;
        size_t elen = 0, ilen = 0;
        if (read_all(xpath, &expect, &elen) != 0 || read_all(path, &img, &ilen) != 0) {
            t_check(0, name, "cannot read %s or its .expect", path);
            free(expect);
            free(img);
            free(ents[i]);
            continue;
        }
        while (elen && (expect[elen - 1] == '\n' || expect[elen - 1] == '\r')) expect[--elen] = 0;

        struct hmoe_err err = {0};
        struct hmoe_gguf *g = NULL;
        enum hmoe_status st = hmoe_gguf_open(path, &g, &err);
        char prefix[600];
        snprintf(prefix, sizeof prefix, "%s: offset ", path);
        int ok = st == HMOE_ERR_FORMAT && g == NULL && strncmp(err.msg, prefix, strlen(prefix)) == 0 &&
                 strstr(err.msg, (const char *)expect) != NULL;
        /* Same verdict from memory, through a guarded copy. */
        struct guarded gd;
        struct hmoe_err err2 = {0};
        enum hmoe_status st2 = HMOE_ERR_INTERNAL;
        if (guarded_init(&gd, ilen) == 0) {
            uint8_t *p = guarded_put(&gd, img, ilen);
            struct hmoe_gguf *g2 = NULL;
            st2 = hmoe_gguf_open_memory(p, ilen, "mem.gguf", &g2, &err2);
            hmoe_gguf_free(g2);
            guarded_free(&gd);
        }
        ok = ok && st2 == HMOE_ERR_FORMAT && strstr(err2.msg, (const char *)expect) != NULL;
        t_check(ok, name, "status %s / %s, message '%s' / '%s', expected to contain '%s'", hmoe_status_str(st),
                hmoe_status_str(st2), err.msg, err2.msg, (const char *)expect);
        n_ok += ok;
        hmoe_gguf_free(g);
        free(expect);
        free(img);
        free(ents[i]);
    }
    if (n > 0) free(ents);
}

/* Truncate `img` at every length; lengths below `valid_from` must fail with a FORMAT
 * error naming an offset, the others must open and satisfy the invariants. */
static void truncate_every_byte(const char *label, const uint8_t *img, size_t n, size_t valid_from) {
    struct guarded gd;
    char name[300];
    snprintf(name, sizeof name, "gguf truncation at every byte: %s (%zu lengths)", label, n + 1);
    if (guarded_init(&gd, n) != 0) {
        t_check(0, name, "mmap failed");
        return;
    }
    char fail[700] = "";
    for (size_t len = 0; len <= n && !fail[0]; len++) {
        uint8_t *p = guarded_put(&gd, img, len);
        struct hmoe_err err = {0};
        struct hmoe_gguf *g = NULL;
        enum hmoe_status st = hmoe_gguf_open_memory(p, len, "t.gguf", &g, &err);
        if (len < valid_from) {
            if (st != HMOE_ERR_FORMAT || g || !strstr(err.msg, "t.gguf: offset "))
                snprintf(fail, sizeof fail, "length %zu: status %s, message '%s'", len, hmoe_status_str(st), err.msg);
        } else if (st != HMOE_OK) {
            snprintf(fail, sizeof fail, "length %zu (>= end of last tensor %zu) rejected: %s", len, valid_from, err.msg);
        } else {
            const char *why = gguf_check_invariants(g, p, len);
            if (why) snprintf(fail, sizeof fail, "length %zu: %s", len, why);
        }
        hmoe_gguf_free(g);
    }
    guarded_free(&gd);
    t_check(!fail[0], name, "%s", fail);
}

/* End of the last tensor's data, from a successful parse of the full image. */
static size_t last_tensor_end(const uint8_t *img, size_t n) {
    struct hmoe_gguf *g = NULL;
    struct hmoe_err err = {0};
    if (hmoe_gguf_open_memory(img, n, "x", &g, &err) != HMOE_OK) return SIZE_MAX;
    size_t end = g->n_tensors ? 0 : n;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        size_t e = (size_t)(g->data_start + g->tensors[i].offset + g->tensors[i].n_bytes);
        if (e > end) end = e;
    }
    hmoe_gguf_free(g);
    return end;
}

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rng(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* Flip 1-4 random bytes (random values, or single bits) in [0, region) `iters` times. */
static void flip_bytes(const char *label, const uint8_t *img, size_t n, size_t region, int iters) {
    struct guarded gd;
    char name[300];
    snprintf(name, sizeof name, "gguf random byte flips: %s (%d images, first %zu bytes)", label, iters, region);
    if (guarded_init(&gd, n) != 0) {
        t_check(0, name, "mmap failed");
        return;
    }
    char fail[700] = "";
    int accepted = 0;
    for (int it = 0; it < iters && !fail[0]; it++) {
        uint8_t *p = guarded_put(&gd, img, n);
        int flips = 1 + (int)(rng() % 4);
        for (int k = 0; k < flips; k++) {
            size_t at = (size_t)(rng() % region);
            if (rng() & 1) p[at] ^= (uint8_t)(1u << (rng() % 8));
            else p[at] = (uint8_t)rng();
        }
        struct hmoe_err err = {0};
        struct hmoe_gguf *g = NULL;
        enum hmoe_status st = hmoe_gguf_open_memory(p, n, "f.gguf", &g, &err);
        if (st == HMOE_OK) {
            accepted++;
            const char *why = gguf_check_invariants(g, p, n);
            if (why) snprintf(fail, sizeof fail, "iteration %d: accepted image violates: %s", it, why);
        } else if (st != HMOE_ERR_FORMAT || !strstr(err.msg, "f.gguf: offset ")) {
            snprintf(fail, sizeof fail, "iteration %d: status %s, message '%s'", it, hmoe_status_str(st), err.msg);
        }
        hmoe_gguf_free(g);
    }
    guarded_free(&gd);
    t_check(!fail[0], name, "%s", fail);
    printf("  (%d of %d flipped images were still valid)\n", accepted, iters);
}

static void good_corpus(void) {
    struct dirent **ents;
    int n = scandir(GOOD_DIR, &ents, is_gguf, alphasort);
    t_check(n >= 7, "gguf-good corpus present", "found %d files in %s", n, GOOD_DIR);
    for (int i = 0; i < n; i++) {
        char path[512], name[300];
        snprintf(path, sizeof path, "%s/%s", GOOD_DIR, ents[i]->d_name);
        uint8_t *img = NULL;
        size_t len = 0;
        struct hmoe_gguf *g = NULL;
        struct hmoe_err err = {0};
        snprintf(name, sizeof name, "gguf accepts %s", ents[i]->d_name);
        enum hmoe_status st = hmoe_gguf_open(path, &g, &err);
        const char *why = st == HMOE_OK ? gguf_check_invariants(g, g->base, g->file_size) : err.msg;
        t_check(st == HMOE_OK && !why, name, "%s", why);
        hmoe_gguf_free(g);
        if (read_all(path, &img, &len) == 0) {
            size_t end = last_tensor_end(img, len);
            truncate_every_byte(ents[i]->d_name, img, len, end);
            size_t region = len < 512 ? len : 512;
            flip_bytes(ents[i]->d_name, img, len, region, 3000);
            free(img);
        }
        free(ents[i]);
    }
    if (n > 0) free(ents);
}

/* A real converter-written file: truncation through its header region and at every
 * tensor boundary, and byte flips in the header region. */
static void real_file(const char *rel) {
    uint8_t *img = NULL;
    size_t len = 0;
    if (read_all(t_shared(rel), &img, &len) != 0) {
        t_check(0, rel, "cannot read %s", t_shared(rel));
        return;
    }
    struct hmoe_gguf *g = NULL;
    struct hmoe_err err = {0};
    if (hmoe_gguf_open_memory(img, len, rel, &g, &err) != HMOE_OK) {
        t_check(0, rel, "%s", err.msg);
        free(img);
        return;
    }
    size_t ds = (size_t)g->data_start, end = last_tensor_end(img, len);
    /* Every length up to data_start + 64, then each tensor's end -1, end, end +1. */
    struct guarded gd;
    char name[300], fail[700] = "";
    snprintf(name, sizeof name, "gguf truncation: %s (every byte to %zu, then tensor ends)", rel, ds + 64);
    if (guarded_init(&gd, len) == 0) {
        size_t n_lens = ds + 65 + 3 * (size_t)g->n_tensors;
        for (size_t k = 0; k < n_lens && !fail[0]; k++) {
            size_t L;
            if (k <= ds + 64) L = k;
            else {
                size_t ti = (k - ds - 65) / 3, d = (k - ds - 65) % 3;
                L = (size_t)(g->data_start + g->tensors[ti].offset + g->tensors[ti].n_bytes) + d - 1;
            }
            if (L > len) continue;
            uint8_t *p = guarded_put(&gd, img, L);
            struct hmoe_gguf *h = NULL;
            struct hmoe_err e2 = {0};
            enum hmoe_status st = hmoe_gguf_open_memory(p, L, "t.gguf", &h, &e2);
            if (L < end && (st != HMOE_ERR_FORMAT || !strstr(e2.msg, "t.gguf: offset ")))
                snprintf(fail, sizeof fail, "length %zu: status %s '%s'", L, hmoe_status_str(st), e2.msg);
            if (L >= end && st != HMOE_OK) snprintf(fail, sizeof fail, "length %zu rejected: %s", L, e2.msg);
            hmoe_gguf_free(h);
        }
        guarded_free(&gd);
    }
    t_check(!fail[0], name, "%s", fail);
    hmoe_gguf_free(g);
    flip_bytes(rel, img, len, ds, 4000);
    free(img);
}

static int any_file(const struct dirent *d) { return d->d_name[0] != '.'; }

static void fuzz_corpus_replay(void) {
    struct dirent **ents;
    int n = scandir("tests/data/fuzz-corpus", &ents, any_file, alphasort);
    char fail[1200] = "";
    int accepted = 0;
    for (int i = 0; i < n; i++) {
        char path[512];
        snprintf(path, sizeof path, "tests/data/fuzz-corpus/%s", ents[i]->d_name);
        uint8_t *img = NULL;
        size_t len = 0;
        struct guarded gd;
        if (!fail[0] && read_all(path, &img, &len) == 0 && guarded_init(&gd, len) == 0) {
            uint8_t *p = guarded_put(&gd, img, len);
            struct hmoe_err err = {0};
            struct hmoe_gguf *g = NULL;
            enum hmoe_status st = hmoe_gguf_open_memory(p, len, "z.gguf", &g, &err);
            const char *why = st == HMOE_OK ? gguf_check_invariants(g, p, len) : NULL;
            accepted += st == HMOE_OK;
            if (why) snprintf(fail, sizeof fail, "%s: %s", ents[i]->d_name, why);
            else if (st != HMOE_OK && (st != HMOE_ERR_FORMAT || !strstr(err.msg, "z.gguf: offset ")))
                snprintf(fail, sizeof fail, "%s: %s '%s'", ents[i]->d_name, hmoe_status_str(st), err.msg);
            hmoe_gguf_free(g);
            guarded_free(&gd);
        }
        free(img);
        free(ents[i]);
    }
    if (n > 0) free(ents);
    char name[200];
    snprintf(name, sizeof name, "gguf replays the fuzzing corpus (%d files, %d valid)", n, accepted);
    t_check(n >= 100 && !fail[0], name, "%s", n < 100 ? "corpus missing" : fail);
}

int main(void) {
    bad_corpus();
    fuzz_corpus_replay();
    good_corpus();
    real_file("fixtures/moe-tiny/qwen3moe-tiny.gguf");
    real_file("fixtures/moe-tiny/qwen35moe-tiny.gguf");
    return t_summary();
}
