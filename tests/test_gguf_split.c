/* test_gguf_split.c — split models (src/gguf/gguf_split.c, gguf.md §10.2): a fixture model cut
 * into shards by the repository's GGUF writer the way llama.cpp's gguf-split cuts it (the whole
 * metadata and split.no / split.count / split.tensors.count in the first shard, the split keys in
 * every shard, each tensor in one shard, names PREFIX-0000i-of-0000N.gguf). Opening the first
 * shard gives every tensor with the bytes of the original file, the shard table, and the same
 * logits as the one-file model (also with --no-mmap's RAM copy); every bad case is a clear error
 * naming the file: a missing shard, a wrong split.count, a wrong split.no, a shard without split
 * keys, a tensor in two shards, a tensor in no shard, a non-first shard opened, a first shard
 * renamed away from gguf-split's name, and an empty shard.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "harness.h"
#include "hmoe/gguf.h"
#include "hmoe/gguf_write.h"
#include "hmoe/model.h"

static char dir[256];

enum fault { OK, WRONG_COUNT, WRONG_NO, NO_KEYS, DUPLICATE, LOST_TENSOR };

/* Cut src into n shards (shard 0 holds no tensors when empty_first) at dir/name-0000i-of-0000n.gguf;
 * `fault` spoils shard `bad` (1-based) as named. 0 on success. */
static int write_split(const struct hmoe_gguf *src, const char *name, int n, bool empty_first, enum fault fault,
                       int bad) {
    struct hmoe_err err = {0};
    const uint64_t T = src->n_tensors;
    const int tensor_shards = empty_first ? n - 1 : n;
    for (int s = 0; s < n; s++) {
        const int ts = empty_first ? s - 1 : s;
        uint64_t lo = ts < 0 ? 0 : T * (uint64_t)ts / (uint64_t)tensor_shards;
        uint64_t hi = ts < 0 ? 0 : T * (uint64_t)(ts + 1) / (uint64_t)tensor_shards;
        const bool spoil = s + 1 == bad;
        if (spoil && fault == DUPLICATE && lo > 0) lo--;            /* the previous shard's last tensor again */
        if (spoil && fault == LOST_TENSOR && hi > lo) hi--;         /* its last tensor nowhere */
        struct hmoe_gguf_writer *w;
        if (hmoe_gguf_writer_init(&w, src->alignment, &err)) return -1;
        enum hmoe_status st = HMOE_OK;
        if (s == 0)
            for (uint64_t k = 0; k < src->n_kv && !st; k++) st = hmoe_gguf_writer_copy_kv(w, &src->kv[k], &err);
        else if (src->alignment != 32)
            st = hmoe_gguf_writer_add_u32(w, "general.alignment", src->alignment, &err);
        if (!(spoil && fault == NO_KEYS) && !st) {
            st = hmoe_gguf_writer_add_u16(w, "split.no", (uint16_t)(spoil && fault == WRONG_NO ? s + 1 : s), &err);
            if (!st)
                st = hmoe_gguf_writer_add_u16(w, "split.count", (uint16_t)(spoil && fault == WRONG_COUNT ? n + 1 : n),
                                              &err);
            if (!st) st = hmoe_gguf_writer_add_i32(w, "split.tensors.count", (int32_t)T, &err);
        }
        for (uint64_t t = lo; t < hi && !st; t++) {
            const struct hmoe_gguf_tensor *x = &src->tensors[t];
            st = hmoe_gguf_writer_add_tensor(w, x->name, x->type, x->n_dims ? x->n_dims : 1, x->ne, &err);
        }
        char path[512];
        snprintf(path, sizeof path, "%s/%s-%05d-of-%05d.gguf", dir, name, s + 1, n);
        if (!st) st = hmoe_gguf_writer_open(w, path, &err);
        for (uint64_t t = lo; t < hi && !st; t++)
            st = hmoe_gguf_writer_write(w, src->tensors[t].data, (size_t)src->tensors[t].n_bytes, &err);
        if (!st) st = hmoe_gguf_writer_finish(w, &err);
        hmoe_gguf_writer_free(w);
        if (st) {
            fprintf(stderr, "write_split: %s\n", err.msg);
            return -1;
        }
    }
    return 0;
}

static const char *shard(const char *name, int i, int n) {
    static char p[512];
    snprintf(p, sizeof p, "%s/%s-%05d-of-%05d.gguf", dir, name, i, n);
    return p;
}

/* Opening `path` fails with `code` and a message holding each of the given parts. */
static void expect_error(const char *label, const char *path, enum hmoe_status code, const char *part1,
                         const char *part2) {
    struct hmoe_gguf *g = NULL;
    struct hmoe_err err = {0};
    const enum hmoe_status st = hmoe_gguf_open(path, &g, &err);
    t_check(st == code && !g && strstr(err.msg, part1) && (!part2 || strstr(err.msg, part2)), label,
            "status %d (want %d), message '%s'", st, code, err.msg);
    hmoe_gguf_free(g);
}

static bool same_tensors(const struct hmoe_gguf *a, const struct hmoe_gguf *b, char *why, size_t cap) {
    if (a->n_tensors != b->n_tensors) return snprintf(why, cap, "%llu vs %llu tensors", (unsigned long long)a->n_tensors,
                                                      (unsigned long long)b->n_tensors), false;
    for (uint64_t t = 0; t < a->n_tensors; t++) {
        const struct hmoe_gguf_tensor *x = &a->tensors[t], *y = hmoe_gguf_find_tensor(b, x->name);
        if (!y || y->type != x->type || y->n_bytes != x->n_bytes || memcmp(x->ne, y->ne, sizeof x->ne) ||
            memcmp(x->data, y->data, (size_t)x->n_bytes))
            return snprintf(why, cap, "tensor %s differs", x->name), false;
    }
    return true;
}

/* Last-token logits of a few tokens on the CPU; NULL on failure. */
static float *logits_of(const char *path, bool no_mmap, int *n_vocab) {
    struct hmoe_err err = {0};
    struct hmoe_model *m = NULL;
    struct hmoe_model_params mp = {.no_mmap = no_mmap};
    if (hmoe_model_load(path, &mp, &m, &err)) {
        fprintf(stderr, "load %s: %s\n", path, err.msg);
        return NULL;
    }
    struct hmoe_ctx_params cp;
    hmoe_ctx_params_default(&cp);
    cp.n_ctx = 64, cp.n_threads = 1, cp.type_k = cp.type_v = HMOE_TYPE_F32;
    struct hmoe_ctx *c = NULL;
    *n_vocab = m->cfg.n_vocab;
    float *lo = malloc((size_t)*n_vocab * sizeof *lo);
    const int32_t ids[5] = {71, 301, 385, 9, 1000};
    if (!lo || hmoe_ctx_init(m, &cp, &c, &err) || hmoe_ctx_decode(c, ids, 5, 0, HMOE_LOGITS_LAST, lo, &err)) {
        fprintf(stderr, "decode %s: %s\n", path, err.msg);
        free(lo);
        lo = NULL;
    }
    hmoe_ctx_free(c);
    hmoe_model_free(m);
    return lo;
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/hmoe_split_XXXXXX");
    if (!mkdtemp(dir)) return fprintf(stderr, "mkdtemp failed\n"), 1;
    const char *orig = t_shared("fixtures/models/tiny-qwen3moe-A-Q4_K_M.gguf");
    char orig_path[4096];
    snprintf(orig_path, sizeof orig_path, "%s", orig);
    struct hmoe_err err = {0};
    struct hmoe_gguf *src = NULL;
    if (hmoe_gguf_open(orig_path, &src, &err)) return fprintf(stderr, "%s\n", err.msg), 1;

    /* good splits: 3 shards with tensors everywhere, 4 with an empty first shard (gguf-split's
     * --no-tensor-first-split) */
    const struct { const char *name; int n; bool empty_first; } good[] = {{"m3", 3, false}, {"m4e", 4, true}};
    for (int i = 0; i < 2; i++) {
        char label[160];
        snprintf(label, sizeof label, "split %d shards%s: the first shard opens every tensor, byte-identical", good[i].n,
                 good[i].empty_first ? " (first without tensors)" : "");
        struct hmoe_gguf *g = NULL;
        char why[200] = "";
        const int wr = write_split(src, good[i].name, good[i].n, good[i].empty_first, OK, 0);
        const enum hmoe_status st = wr ? HMOE_ERR_IO : hmoe_gguf_open(shard(good[i].name, 1, good[i].n), &g, &err);
        t_check(!st && same_tensors(src, g, why, sizeof why), label, "%s %s", st ? err.msg : "", why);
        if (g) {
            uint64_t sum = 0;
            bool offsets = true;
            for (uint32_t s = 0; s < g->n_shards; s++) {
                sum += g->shards[s].n_tensors;
                offsets &= g->shards[s].offset % ((uint64_t)2 << 20) == 0 && strstr(g->shards[s].path, "-of-0000") &&
                           (s == 0 || g->shards[s].offset >= g->shards[s - 1].offset + g->shards[s - 1].size);
            }
            snprintf(label, sizeof label, "split %d shards: shard table (paths, 2 MiB-aligned offsets, tensor counts)",
                     good[i].n);
            t_check((int)g->n_shards == good[i].n && sum == src->n_tensors && offsets &&
                        (!good[i].empty_first || g->shards[0].n_tensors == 0) &&
                        g->file_size >= g->shards[g->n_shards - 1].offset + g->shards[g->n_shards - 1].size &&
                        hmoe_gguf_find_kv(g, "general.architecture"),
                    label, "%u shards, %llu tensors", g->n_shards, (unsigned long long)sum);
            /* the whole span is readable: gaps between shards are zero pages */
            uint8_t acc = 0;
            for (uint64_t off = 0; off < g->file_size; off += 4096) acc ^= g->base[off];
            (void)acc;
        }
        hmoe_gguf_free(g);
    }
    int nv0 = 0, nv1 = 0, nv2 = 0;
    float *a = logits_of(orig_path, false, &nv0), *b = logits_of(shard("m3", 1, 3), false, &nv1),
          *c = logits_of(shard("m4e", 1, 4), true, &nv2);
    t_check(a && b && c && nv0 == nv1 && nv0 == nv2 && !memcmp(a, b, (size_t)nv0 * 4) && !memcmp(a, c, (size_t)nv0 * 4),
            "split: the model from its shards (mapped, and --no-mmap) gives the one-file logits bit for bit", "%s",
            !a || !b || !c ? "a load failed" : "logits differ");
    free(a), free(b), free(c);

    /* bad cases */
    if (write_split(src, "miss", 3, false, OK, 0) == 0) unlink(shard("miss", 2, 3));
    expect_error("split: a missing shard names it", shard("miss", 1, 3), HMOE_ERR_NOT_FOUND, "miss-00002-of-00003.gguf: shard 2 of 3",
                 "is missing");
    write_split(src, "cnt", 3, false, WRONG_COUNT, 3);
    expect_error("split: a wrong split.count in a shard", shard("cnt", 1, 3), HMOE_ERR_FORMAT,
                 "cnt-00003-of-00003.gguf: split.count is 4 but the first shard says 3", "different splits");
    write_split(src, "no", 3, false, WRONG_NO, 2);
    expect_error("split: a wrong split.no in a shard", shard("no", 1, 3), HMOE_ERR_FORMAT,
                 "no-00002-of-00003.gguf: split.no is 2 (shard 3) but its name says shard 2", NULL);
    write_split(src, "nokeys", 3, false, NO_KEYS, 2);
    expect_error("split: a shard without split keys", shard("nokeys", 1, 3), HMOE_ERR_FORMAT,
                 "nokeys-00002-of-00003.gguf: not a shard of a split model", NULL);
    write_split(src, "dup", 3, false, DUPLICATE, 3);
    expect_error("split: a tensor in two shards", shard("dup", 1, 3), HMOE_ERR_FORMAT, "dup-00003-of-00003.gguf: tensor '",
                 "is also in shard 2");
    write_split(src, "lost", 3, false, LOST_TENSOR, 2);
    expect_error("split: a tensor in no shard", shard("lost", 1, 3), HMOE_ERR_FORMAT, "split.tensors.count says",
                 "the rest are in no shard");
    expect_error("split: opening a later shard points to the first", shard("m3", 2, 3), HMOE_ERR_ARG,
                 "this is shard 2 of 3 of a split model; open its first shard", "m3-00001-of-00003.gguf");
    char renamed[600];
    snprintf(renamed, sizeof renamed, "%s/renamed.gguf", dir);
    if (write_split(src, "ren", 2, false, OK, 0) == 0) rename(shard("ren", 1, 2), renamed);
    expect_error("split: a first shard without gguf-split's name", renamed, HMOE_ERR_FORMAT,
                 "split.count says the model has 2 shards, but the file name does not end in -00001-of-00002.gguf", NULL);
    if (write_split(src, "empty", 2, false, OK, 0) == 0) truncate(shard("empty", 2, 2), 0);
    expect_error("split: an empty shard", shard("empty", 1, 2), HMOE_ERR_FORMAT, "empty-00002-of-00002.gguf: shard 2 of 2 is empty",
                 NULL);
    if (write_split(src, "short", 2, false, OK, 0) == 0) truncate(shard("short", 2, 2), 100);
    expect_error("split: a truncated shard is a parse error naming it", shard("short", 1, 2), HMOE_ERR_FORMAT,
                 "short-00002-of-00002.gguf", NULL);
    /* the bytes on disk of every shard, for the memory check before loading */
    uint64_t sz[4] = {0};
    for (int i = 1; i <= 3; i++) {
        FILE *f = fopen(shard("m3", i, 3), "rb");
        if (f) fseek(f, 0, SEEK_END), sz[i] = (uint64_t)ftell(f), fclose(f);
    }
    t_check(sz[1] && hmoe_gguf_split_total_bytes(shard("m3", 1, 3), sz[1]) == sz[1] + sz[2] + sz[3] &&
                hmoe_gguf_split_total_bytes(orig_path, 77) == 77 && hmoe_gguf_split_total_bytes(shard("m3", 2, 3), 5) == 5,
            "split: bytes on disk of all shards from the first one's name (one file and later shards: as given)",
            "%llu", (unsigned long long)hmoe_gguf_split_total_bytes(shard("m3", 1, 3), sz[1]));
    /* the CLI: info lists the shards (text and --json), run loads them, a later shard is refused */
    char cmd[1400], out[16384];
    const char *forms[3] = {"./hmoe info -m '%s' 2>&1", "./hmoe info --json -m '%s' 2>&1",
                            "./hmoe run -m '%s' -p hello -n 2 -t 1 --temp 0 --gpu off -q 2>&1"};
    const char *expect[3] = {"m3-00003-of-00003.gguf", "\"shards\": [{\"path\": ", "load time ="};
    for (int i = 0; i < 3; i++) {
        snprintf(cmd, sizeof cmd, forms[i], shard("m3", 1, 3));
        FILE *pp = popen(cmd, "r");
        size_t n = pp ? fread(out, 1, sizeof out - 1, pp) : 0;
        out[n] = 0;
        const int rc = pp ? pclose(pp) : -1;
        char label[100];
        snprintf(label, sizeof label, "split: %s on the first shard", i == 0 ? "info" : i == 1 ? "info --json" : "run");
        bool ok = rc == 0 && strstr(out, expect[i]);
        if (i == 0) ok = ok && strstr(out, "shards           1 of 3: ") && strstr(out, "3 of 3: ");
        if (i == 1) ok = ok && strstr(out, "\"n_tensors\": ") && strstr(out, "m3-00002-of-00003.gguf");
        t_check(ok, label, "rc %d: %.600s", rc, out);
    }
    snprintf(cmd, sizeof cmd, "./hmoe info -m '%s' 2>&1", shard("m3", 2, 3));
    FILE *pp = popen(cmd, "r");
    size_t n = pp ? fread(out, 1, sizeof out - 1, pp) : 0;
    out[n] = 0;
    const int rc = pp ? pclose(pp) : -1;
    t_check(rc != 0 && strstr(out, "open its first shard"), "split: info on a later shard exits non-zero and names the first",
            "rc %d: %.400s", rc, out);
    hmoe_gguf_free(src);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd)) fprintf(stderr, "could not remove %s\n", dir);
    return t_summary();
}
