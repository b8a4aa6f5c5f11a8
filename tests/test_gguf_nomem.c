/* test_gguf_nomem.c — allocation-failure injection into the GGUF loader (SQLite-style
 * anomaly testing). This binary defines malloc/calloc/realloc/free itself (forwarding to
 * glibc's __libc_* entry points), so every allocation inside libhmoe goes through here:
 * the k-th allocation is made to fail for k = 0, 1, 2, ... until the open succeeds.
 * Each failing open must return HMOE_ERR_NOMEM with a message and free everything it had
 * allocated (live allocation count back to where it was).
 */
#include <stdint.h>

#include "gguf_build.h"
#include "harness.h"
#include "hmoe/gguf.h"
#include "hmoe/json.h"

extern void *__libc_malloc(size_t n);
extern void *__libc_calloc(size_t n, size_t size);
extern void *__libc_realloc(void *p, size_t n);
extern void __libc_free(void *p);

static long fail_at = -1; /* index of the allocation to fail, -1 = none */
static long n_calls, n_live;

static int should_fail(void) { return fail_at >= 0 && n_calls++ == fail_at; }

void *malloc(size_t n) {
    if (should_fail()) return NULL;
    void *p = __libc_malloc(n);
    if (p) n_live++;
    return p;
}
void *calloc(size_t n, size_t size) {
    if (should_fail()) return NULL;
    void *p = __libc_calloc(n, size);
    if (p) n_live++;
    return p;
}
void *realloc(void *old, size_t n) {
    if (should_fail()) return NULL;
    void *p = __libc_realloc(old, n);
    if (p && !old) n_live++;
    return p;
}
void free(void *p) {
    if (p) n_live--;
    __libc_free(p);
}

static void inject(const char *label, const uint8_t *img, size_t len) {
    char name[300], why[600] = "";
    long k = 0;
    for (;; k++) {
        struct hmoe_err err = {0};
        struct hmoe_gguf *g = NULL;
        long live0 = n_live;
        n_calls = 0;
        fail_at = k;
        enum hmoe_status st = hmoe_gguf_open_memory(img, len, "m.gguf", &g, &err);
        long calls = n_calls;
        fail_at = -1;
        hmoe_gguf_free(g);
        if (n_live != live0) {
            snprintf(why, sizeof why, "failing allocation %ld: %ld allocations leaked (status %s)", k, n_live - live0,
                     hmoe_status_str(st));
            break;
        }
        if (k >= calls) { /* no allocation failed: the open must have succeeded */
            if (st != HMOE_OK) snprintf(why, sizeof why, "with no failure injected: %s", err.msg);
            break;
        }
        if (st != HMOE_ERR_NOMEM || !err.msg[0] || g) {
            snprintf(why, sizeof why, "failing allocation %ld of %ld: status %s, message '%s'", k, calls,
                     hmoe_status_str(st), err.msg);
            break;
        }
    }
    snprintf(name, sizeof name, "gguf out of memory at each of the %ld allocations of %s: NOMEM, nothing leaked", k,
             label);
    t_check(!why[0] && k > 3, name, "%s", why);
}

int main(void) {
    struct gguf_build b = {0};
    gguf_build_worked_example(&b);
    inject("the §12 example", b.d, b.n);
    free(b.d);
    char *img = NULL;
    size_t len = 0;
    struct hmoe_err err = {0};
    if (hmoe_read_file("tests/data/gguf-good/all-types.gguf", &img, &len, &err) == HMOE_OK)
        inject("all-types.gguf", (const uint8_t *)img, len);
    else t_check(0, "read all-types.gguf", "%s", err.msg);
    free(img);
    if (hmoe_read_file(t_shared("fixtures/moe-tiny/qwen3moe-tiny.gguf"), &img, &len, &err) == HMOE_OK)
        inject("qwen3moe-tiny.gguf", (const uint8_t *)img, len);
    else t_check(0, "read qwen3moe-tiny.gguf", "%s", err.msg);
    free(img);
    return t_summary();
}
