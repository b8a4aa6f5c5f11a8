/* progress.h — a one-line progress bar on stderr for long operations (writing, loading,
 * prefill): "label [#####.....]  45%  1.10/2.46 GiB  850 MB/s  ETA 0:03", or for counted
 * work (tokens of a prefill) "label [#####.....]  45%  230/512 tok  410 tok/s  ETA 0:01".
 *
 * Drawn only when the caller enables it (the CLI does so when stderr is a terminal and
 * --quiet is not given) and only once the operation has run for more than a second, so
 * quick operations and logs stay clean. Redraws at most 10 times a second.
 */
#ifndef HMOE_PROGRESS_H
#define HMOE_PROGRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct hmoe_progress {
    const char *label;
    const char *unit;      /* NULL: bytes (GiB, MB/s); else the name of a counted unit ("tok") */
    uint64_t total_bytes;  /* total of the unit when `unit` is set */
    double start_s, last_draw_s;
    bool enabled, drawn;
};

/* True when stderr is a terminal (the default for `enabled`). */
bool hmoe_progress_stderr_is_tty(void);

void hmoe_progress_init(struct hmoe_progress *p, const char *label, uint64_t total_bytes, bool enabled);
/* A bar that counts `unit`s instead of bytes; update/finish then take counts. */
void hmoe_progress_init_count(struct hmoe_progress *p, const char *label, uint64_t total, const char *unit,
                              bool enabled);
/* Report `done_bytes` of total; cheap enough to call for every chunk. */
void hmoe_progress_update(struct hmoe_progress *p, uint64_t done_bytes);
/* Draw the final state and end the line, if the bar was ever shown. */
void hmoe_progress_finish(struct hmoe_progress *p, uint64_t done_bytes);

/* The text of one bar (no "\r"), for tests and for callers that print elsewhere. */
void hmoe_progress_format(char *buf, size_t buf_size, const char *label, uint64_t done_bytes, uint64_t total_bytes,
                          double elapsed_s);
void hmoe_progress_format_count(char *buf, size_t buf_size, const char *label, uint64_t done, uint64_t total,
                                const char *unit, double elapsed_s);

#endif
