/* err.c — status names, the error-raise function and the log sink (common.h).
 * hmoe_log_level is the one writable global here: the CLI sets it once from
 * --verbose/--quiet before any work starts; everything else only reads it. */
#define _POSIX_C_SOURCE 200809L
#include "hmoe/common.h"

#include <stdio.h>
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

enum hmoe_status hmoe_err_set(struct hmoe_err *err, enum hmoe_status code, const char *src_file,
                              int src_line, const char *fmt, ...) {
    if (!err) return code;
    err->code = code;
    err->src_file = src_file;
    err->src_line = src_line;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
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
