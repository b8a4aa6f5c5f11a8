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
    p->unit = NULL;
    p->total_bytes = total_bytes;
    p->start_s = hmoe_time_s();
    p->last_draw_s = 0;
    p->enabled = enabled;
    p->drawn = false;
}

void hmoe_progress_init_count(struct hmoe_progress *p, const char *label, uint64_t total, const char *unit,
                              bool enabled) {
    hmoe_progress_init(p, label, total, enabled);
    p->unit = unit;
}

/* "[#####.....]  45%" and the ETA of done/total at the average rate so far. */
static void bar_and_eta(char *bar, char *eta, size_t eta_size, int *pct, uint64_t done, uint64_t total,
                        double elapsed_s) {
    double frac = total ? (double)done / (double)total : 1.0;
    if (frac > 1.0) frac = 1.0;
    int full = (int)(frac * BAR_WIDTH);
    for (int i = 0; i < BAR_WIDTH; i++) bar[i] = i < full ? '#' : '.';
    bar[BAR_WIDTH] = 0;
    *pct = (int)(frac * 100.0);
    double rate = elapsed_s > 0 ? (double)done / elapsed_s : 0;
    snprintf(eta, eta_size, "--:--");
    if (rate > 0 && done < total) {
        long s = (long)((double)(total - done) / rate + 0.5);
        if (s >= 3600) snprintf(eta, eta_size, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
        else snprintf(eta, eta_size, "%ld:%02ld", s / 60, s % 60);
    } else if (done >= total) snprintf(eta, eta_size, "0:00");
}

void hmoe_progress_format_count(char *buf, size_t buf_size, const char *label, uint64_t done, uint64_t total,
                                const char *unit, double elapsed_s) {
    char bar[BAR_WIDTH + 1], eta[32];
    int pct;
    bar_and_eta(bar, eta, sizeof eta, &pct, done, total, elapsed_s);
    snprintf(buf, buf_size, "%s [%s] %3d%%  %llu/%llu %s  %.0f %s/s  ETA %s", label, bar, pct,
             (unsigned long long)done, (unsigned long long)total, unit, elapsed_s > 0 ? (double)done / elapsed_s : 0.0,
             unit, eta);
}

void hmoe_progress_format(char *buf, size_t buf_size, const char *label, uint64_t done_bytes, uint64_t total_bytes,
                          double elapsed_s) {
    char bar[BAR_WIDTH + 1], eta[32];
    int pct;
    bar_and_eta(bar, eta, sizeof eta, &pct, done_bytes, total_bytes, elapsed_s);
    double rate = elapsed_s > 0 ? (double)done_bytes / elapsed_s : 0; /* bytes/s */
    const double gib = 1024.0 * 1024.0 * 1024.0;
    snprintf(buf, buf_size, "%s [%s] %3d%%  %.2f/%.2f GiB  %.0f MB/s  ETA %s", label, bar, pct,
             (double)done_bytes / gib, (double)total_bytes / gib, rate / 1e6, eta);
}

static void draw(struct hmoe_progress *p, uint64_t done_bytes, double now) {
    char line[256];
    if (p->unit) hmoe_progress_format_count(line, sizeof line, p->label, done_bytes, p->total_bytes, p->unit,
                                            now - p->start_s);
    else hmoe_progress_format(line, sizeof line, p->label, done_bytes, p->total_bytes, now - p->start_s);
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
