/* harness.h — the tiny test harness every tests/test_*.c uses.
 *
 * Each case prints one line, "name ... ok" or "name ... FAIL: detail"; the binary ends
 * with "N passed, N failed" and exits non-zero on any failure. tests/run.sh sums the
 * binaries' summaries into the suite's last line. Expected values always come from
 * ../shared/fixtures (llama.cpp), never from hmoe's own output (house style 15).
 */
#ifndef HMOE_TEST_HARNESS_H
#define HMOE_TEST_HARNESS_H

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int t_passed, t_failed;

/* Record one case. `detail` is printed only on failure. */
static inline void t_check(int ok, const char *name, const char *detail_fmt, ...) __attribute__((format(printf, 3, 4)));
static inline void t_check(int ok, const char *name, const char *detail_fmt, ...) {
    if (ok) {
        printf("%s ... ok\n", name);
        t_passed++;
    } else {
        printf("%s ... FAIL: ", name);
        va_list ap;
        va_start(ap, detail_fmt);
        vprintf(detail_fmt, ap);
        va_end(ap);
        printf("\n");
        t_failed++;
    }
    fflush(stdout);
}

/* Print this binary's summary and return its exit code. */
static inline int t_summary(void) {
    printf("%d passed, %d failed\n", t_passed, t_failed);
    return t_failed ? 1 : 0;
}

/* Path of a file under the shared fixtures directory ($HMOE_SHARED, default tests: the copy in the repository).
 * Returns a static buffer: copy it if you need two at once. */
static inline const char *t_shared(const char *rel) {
    static char buf[4096];
    const char *root = getenv("HMOE_SHARED");
    if (!root || !*root) root = "tests";
    snprintf(buf, sizeof buf, "%s/%s", root, rel);
    return buf;
}

/* First index where |a-b| > abs_tol + rel_tol*|b|, or -1 if all within. */
static inline long t_first_mismatch(const float *a, const float *b, long n, double abs_tol, double rel_tol) {
    for (long i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (!(d <= abs_tol + rel_tol * fabs((double)b[i]))) return i;
    }
    return -1;
}

#endif
