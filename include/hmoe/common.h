/* common.h — status codes, error context and logging shared by every hmoe module.
 *
 * Library code never prints and never exits: it returns an enum hmoe_status and
 * fills a caller-owned struct hmoe_err with what went wrong, where and what to do.
 * Only src/cli turns that into a message and an exit code (house style 10).
 */
#ifndef HMOE_COMMON_H
#define HMOE_COMMON_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

enum hmoe_status {
    HMOE_OK = 0,
    HMOE_ERR_IO,          /* open/read/mmap failed */
    HMOE_ERR_FORMAT,      /* the file is not what it claims (bad GGUF, bad JSON, ...) */
    HMOE_ERR_UNSUPPORTED, /* valid input we do not handle (architecture, quant type) */
    HMOE_ERR_NOMEM,       /* host allocation failed */
    HMOE_ERR_ARG,         /* bad argument from the user or caller */
    HMOE_ERR_NOT_FOUND,   /* missing key / tensor / file */
    HMOE_ERR_RANGE,       /* value out of range (context full, id too large, ...) */
    HMOE_ERR_DEVICE,      /* CUDA / GPU failure */
    HMOE_ERR_INTERNAL,    /* a bug in hmoe */
    HMOE_STATUS_COUNT
};

/* Short name of a status ("format error", ...). Never NULL. */
const char *hmoe_status_str(enum hmoe_status st);

/* Error context filled by the function that detects the problem. `msg` is a full
 * sentence that names the file, the byte offset or object, what is wrong and, where
 * known, what the user can do. `src_file`/`src_line` record where it was raised. */
struct hmoe_err {
    enum hmoe_status code;
    const char *src_file;
    int src_line;
    char msg[512];
};

/* Fill `err` (may be NULL) and return `code`. One function to break on in a debugger. */
enum hmoe_status hmoe_err_set(struct hmoe_err *err, enum hmoe_status code, const char *src_file,
                              int src_line, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* Raise an error with the current source location: `return HMOE_RAISE(err, HMOE_ERR_FORMAT, "...", ...);` */
#define HMOE_RAISE(err, code, ...) hmoe_err_set((err), (code), __FILE__, __LINE__, __VA_ARGS__)

/* Logging to stderr. The level is one of the documented globals (src/util/log.c):
 * written by the CLI when it parses --verbose / --quiet, read everywhere else. */
enum hmoe_log_level { HMOE_LOG_ERROR = 0, HMOE_LOG_WARN = 1, HMOE_LOG_INFO = 2, HMOE_LOG_DEBUG = 3 };
extern enum hmoe_log_level hmoe_log_level;
void hmoe_log(enum hmoe_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define HMOE_WARN(...) hmoe_log(HMOE_LOG_WARN, __VA_ARGS__)
#define HMOE_INFO(...) hmoe_log(HMOE_LOG_INFO, __VA_ARGS__)
#define HMOE_DEBUG(...) hmoe_log(HMOE_LOG_DEBUG, __VA_ARGS__)

/* Monotonic wall clock in seconds, for timings printed by run/bench. */
double hmoe_time_s(void);

/* Overflow-checked size arithmetic for untrusted input: return false on overflow. */
static inline bool hmoe_mul_u64(uint64_t a, uint64_t b, uint64_t *out) {
    if (a != 0 && b > UINT64_MAX / a) return false;
    *out = a * b;
    return true;
}
static inline bool hmoe_add_u64(uint64_t a, uint64_t b, uint64_t *out) {
    if (b > UINT64_MAX - a) return false;
    *out = a + b;
    return true;
}

#define HMOE_MIN(a, b) ((a) < (b) ? (a) : (b))
#define HMOE_MAX(a, b) ((a) > (b) ? (a) : (b))
#define HMOE_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

#endif
