/* progress.c — the stderr progress bar of progress.h: rate and ETA from the average
 * speed since the start (steadier than an instantaneous rate when writes come in bursts
 * through the page cache). Relies on hmoe_time_s() for a monotonic clock.
 */
#include "hmoe/progress.h"

#include <stdio.h>
#include <unistd.h>

#include "hmoe/common.h"

#define SHOW_AFTER_S 1.0
#define REDRAW_EVERY_S 0.1
#define BAR_WIDTH 24

bool hmoe_progress_stderr_is_tty(void) { return isatty(STDERR_FILENO) == 1; }

void hmoe_progress_init(struct hmoe_progress *p, const char *label, uint64_t total_bytes, bool enabled) {
    p->label = label;
    p->total_bytes = total_bytes;
    p->start_s = hmoe_time_s();
    p->last_draw_s = 0;
    p->enabled = enabled;
    p->drawn = false;
}

void hmoe_progress_format(char *buf, size_t buf_size, const char *label, uint64_t done_bytes, uint64_t total_bytes,
                          double elapsed_s) {
    double frac = total_bytes ? (double)done_bytes / (double)total_bytes : 1.0;
    if (frac > 1.0) frac = 1.0;
    char bar[BAR_WIDTH + 1];
    int full = (int)(frac * BAR_WIDTH);
    for (int i = 0; i < BAR_WIDTH; i++) bar[i] = i < full ? '#' : '.';
    bar[BAR_WIDTH] = 0;
    double rate = elapsed_s > 0 ? (double)done_bytes / elapsed_s : 0; /* bytes/s */
    char eta[32] = "--:--";
    if (rate > 0 && done_bytes < total_bytes) {
        long s = (long)((double)(total_bytes - done_bytes) / rate + 0.5);
        if (s >= 3600) snprintf(eta, sizeof eta, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
        else snprintf(eta, sizeof eta, "%ld:%02ld", s / 60, s % 60);
    } else if (done_bytes >= total_bytes) snprintf(eta, sizeof eta, "0:00");
    const double gib = 1024.0 * 1024.0 * 1024.0;
    snprintf(buf, buf_size, "%s [%s] %3d%%  %.2f/%.2f GiB  %.0f MB/s  ETA %s", label, bar, (int)(frac * 100.0),
             (double)done_bytes / gib, (double)total_bytes / gib, rate / 1e6, eta);
}

static void draw(struct hmoe_progress *p, uint64_t done_bytes, double now) {
    char line[256];
    hmoe_progress_format(line, sizeof line, p->label, done_bytes, p->total_bytes, now - p->start_s);
    /* \r and clear-to-end-of-line: the line may get shorter (ETA digits). */
    fprintf(stderr, "\r%s\033[K", line);
    fflush(stderr);
    p->drawn = true;
    p->last_draw_s = now;
}

void hmoe_progress_update(struct hmoe_progress *p, uint64_t done_bytes) {
    if (!p->enabled) return;
    double now = hmoe_time_s();
    if (now - p->start_s < SHOW_AFTER_S || now - p->last_draw_s < REDRAW_EVERY_S) return;
    draw(p, done_bytes, now);
}

void hmoe_progress_finish(struct hmoe_progress *p, uint64_t done_bytes) {
    if (!p->enabled || !p->drawn) return;
    draw(p, done_bytes, hmoe_time_s());
    fputc('\n', stderr);
    p->drawn = false;
}
