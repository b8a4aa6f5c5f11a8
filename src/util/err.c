/* err.c — status names, the error-raise function and the log sink (common.h).
 * hmoe_log_level is the one writable global here: the CLI sets it once from
 * --verbose/--quiet before any work starts; everything else only reads it. */
#define _POSIX_C_SOURCE 200809L
#include "hmoe/common.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum hmoe_log_level hmoe_log_level = HMOE_LOG_WARN;

static const char *const status_names[HMOE_STATUS_COUNT] = {
    [HMOE_OK] = "ok",
    [HMOE_ERR_IO] = "I/O error",
    [HMOE_ERR_FORMAT] = "format error",
    [HMOE_ERR_UNSUPPORTED] = "unsupported",
    [HMOE_ERR_NOMEM] = "out of memory",
    [HMOE_ERR_ARG] = "bad argument",
    [HMOE_ERR_NOT_FOUND] = "not found",
    [HMOE_ERR_RANGE] = "out of range",
    [HMOE_ERR_DEVICE] = "device error",
    [HMOE_ERR_INTERNAL] = "internal error",
};

const char *hmoe_status_str(enum hmoe_status st) {
    if ((unsigned)st >= HMOE_STATUS_COUNT) return "unknown status";
    return status_names[st];
}

/* A message longer than the buffer usually holds a long path (or two) before its reason, and the
 * reason is what the reader needs: shorten the longest space-free words (paths) in their middle,
 * "/very/long/.../file.gguf", until it fits; only then cut the head. */
static void fit_message(char *out, size_t size, char *msg, size_t len) {
    static const char dots[] = "...";
    while (len >= size) {
        size_t best = 0, best_len = 0;
        for (size_t i = 0; i < len;) {
            size_t j = i;
            while (j < len && msg[j] != ' ') j++;
            if (j - i > best_len) best = i, best_len = j - i;
            i = j + 1;
        }
        if (best_len <= 40) break; /* no long word left: cut below */
        /* keep the word's first and last quarter of what remains, at least 16 bytes each side */
        size_t keep = best_len - (len - (size - 1)) - (sizeof dots - 1);
        if (keep > best_len || keep < 32) keep = 32;
        const size_t head = keep / 2, tail = keep - head;
        memmove(msg + best + head + sizeof dots - 1, msg + best + best_len - tail, len - (best + best_len - tail) + 1);
        memcpy(msg + best + head, dots, sizeof dots - 1);
        len = strlen(msg);
    }
    if (len >= size) { /* keep the end, where the reason is */
        memcpy(out, dots, sizeof dots - 1);
        memcpy(out + sizeof dots - 1, msg + len - (size - sizeof dots), size - sizeof dots + 1);
        return;
    }
    memcpy(out, msg, len + 1);
}

enum hmoe_status hmoe_err_set(struct hmoe_err *err, enum hmoe_status code, const char *src_file,
                              int src_line, const char *fmt, ...) {
    if (!err) return code;
    err->code = code;
    err->src_file = src_file;
    err->src_line = src_line;
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    const int n = vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    char *full = n >= (int)sizeof err->msg ? malloc((size_t)n + 1) : NULL;
    if (full) {
        vsnprintf(full, (size_t)n + 1, fmt, ap2);
        fit_message(err->msg, sizeof err->msg, full, (size_t)n);
        free(full);
    }
    va_end(ap2);
    return code;
}

void hmoe_log(enum hmoe_log_level level, const char *fmt, ...) {
    if (level > hmoe_log_level) return;
    static const char *const prefix[] = {"error: ", "warning: ", "", ""};
    fputs(prefix[level], stderr);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    size_t n = strlen(fmt);
    if (n == 0 || fmt[n - 1] != '\n') fputc('\n', stderr);
}

double hmoe_time_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
