/* test_gguf_ram.c — hmoe_gguf_open_ram (--no-mmap): the shipped fixture models read into
 * RAM must hold the file's bytes (compared with the file read by stdio), their tensors the
 * data sha256 of shared/fixtures/models/manifest.json, the copy must start on a 2 MiB
 * boundary (so transparent huge pages can back it) and be read-only; a missing file and
 * a directory fail with a message, as hmoe_gguf_open does.
 */
#include <inttypes.h>
#include <setjmp.h>
#include <signal.h>

#include "harness.h"
#include "hmoe/gguf.h"
#include "hmoe/json.h"
#include "sha256.h"

static sigjmp_buf write_trap;
static void on_segv(int sig) {
    (void)sig;
    siglongjmp(write_trap, 1);
}

/* true when a write to p faults (the copy is read-only, like the mapping) */
static int write_faults(const uint8_t *p) {
    struct sigaction sa = {0}, old;
    sa.sa_handler = on_segv;
    sigaction(SIGSEGV, &sa, &old);
    int faulted = 1;
    if (sigsetjmp(write_trap, 1) == 0) {
        *(volatile uint8_t *)p = *p;
        faulted = 0;
    }
    sigaction(SIGSEGV, &old, NULL);
    return faulted;
}

static void fixture_models(void) {
    struct hmoe_err err = {0};
    struct hmoe_json *man = hmoe_json_parse_file(t_shared("fixtures/models/manifest.json"), &err);
    const struct hmoe_json *models = hmoe_json_get(man, "models");
    t_check(models && models->kind == HMOE_JSON_ARRAY && models->n > 0, "manifest.json parses", "%s", err.msg);
    for (size_t m = 0; models && m < models->n; m++) {
        const struct hmoe_json *mo = models->items[m];
        if (!hmoe_json_get_bool(mo, "included", false)) continue;
        const char *file = hmoe_json_get_str(mo, "file", "?");
        char rel[512], path[4096], name[700], why[700] = "";
        snprintf(rel, sizeof rel, "fixtures/models/%s", file);
        snprintf(path, sizeof path, "%s", t_shared(rel));
        struct hmoe_gguf *g = NULL;
        enum hmoe_status st = hmoe_gguf_open_ram(path, &g, &err);
        snprintf(name, sizeof name, "gguf open_ram %s", file);
        t_check(st == HMOE_OK, name, "%s", err.msg);
        if (st) continue;

        snprintf(name, sizeof name, "gguf open_ram %s: 2 MiB aligned, size = manifest, read-only", file);
        t_check(((uintptr_t)g->base & (((uintptr_t)2 << 20) - 1)) == 0 &&
                    (double)g->file_size == hmoe_json_get_num(mo, "size_bytes", -1) && write_faults(g->base),
                name, "base %p, size %" PRIu64, (const void *)g->base, g->file_size);

        FILE *f = fopen(path, "rb");
        uint64_t off = 0;
        if (!f) snprintf(why, sizeof why, "cannot reopen %s", rel);
        for (uint8_t buf[1 << 16]; f && !why[0];) {
            const size_t n = fread(buf, 1, sizeof buf, f);
            if (n == 0) break;
            if (off + n > g->file_size || memcmp(buf, g->base + off, n) != 0)
                snprintf(why, sizeof why, "bytes differ from the file near offset %" PRIu64, off);
            off += n;
        }
        if (f) fclose(f);
        if (!why[0] && off != g->file_size) snprintf(why, sizeof why, "file has %" PRIu64 " bytes", off);
        snprintf(name, sizeof name, "gguf open_ram %s: every byte equals the file", file);
        t_check(!why[0], name, "%s", why);

        const struct hmoe_json *ts = hmoe_json_get(mo, "tensors");
        size_t n_hashed = 0;
        why[0] = 0;
        for (size_t i = 0; ts && i < ts->n && !why[0]; i++) {
            const char *tn = hmoe_json_get_str(ts->items[i], "name", "");
            const char *sha = hmoe_json_get_str(ts->items[i], "data_sha256", NULL);
            const struct hmoe_gguf_tensor *t = hmoe_gguf_find_tensor(g, tn);
            if (!t) {
                snprintf(why, sizeof why, "tensor '%s' missing", tn);
            } else if (sha) {
                char hex[65];
                sha256_hex(t->data, t->n_bytes, hex);
                if (strcmp(hex, sha) != 0) snprintf(why, sizeof why, "'%s': data sha256 %s, manifest %s", tn, hex, sha);
                n_hashed++;
            }
        }
        snprintf(name, sizeof name, "gguf open_ram %s: tensors found, %zu data sha256 match manifest", file, n_hashed);
        t_check(!why[0], name, "%s", why);
        hmoe_gguf_free(g);
    }
    hmoe_json_free(man);
}

static void bad_paths(void) {
    struct hmoe_err err = {0};
    struct hmoe_gguf *g = (struct hmoe_gguf *)1;
    enum hmoe_status st = hmoe_gguf_open_ram("tests/data/no-such-file.gguf", &g, &err);
    t_check(st == HMOE_ERR_NOT_FOUND && !g && strstr(err.msg, "no-such-file.gguf"), "gguf open_ram: missing file",
            "status %d, msg '%s'", (int)st, err.msg);
    err = (struct hmoe_err){0};
    st = hmoe_gguf_open_ram("tests", &g, &err);
    t_check(st != HMOE_OK && !g && strstr(err.msg, "directory"), "gguf open_ram: a directory is refused",
            "status %d, msg '%s'", (int)st, err.msg);
}

int main(void) {
    fixture_models();
    bad_paths();
    return t_summary();
}
