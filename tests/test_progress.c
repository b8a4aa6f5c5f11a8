/* test_progress.c — the progress bar's text (progress.h): percentage, GiB done/total, MB/s
 * from the average rate and ETA; disabled bars never print. The values follow from the
 * inputs by arithmetic, so the expected strings are written out here. */
#include "harness.h"

#include "hmoe/progress.h"

int main(void) {
    char line[256];
    const uint64_t gib = 1ull << 30;
    hmoe_progress_format(line, sizeof line, "synth", gib, 2 * gib, 1.0);
    t_check(strstr(line, "synth [############............]  50%") && strstr(line, "1.00/2.00 GiB") &&
                strstr(line, "1074 MB/s") && strstr(line, "ETA 0:01"),
            "progress: half done after 1 s", "'%s'", line);
    hmoe_progress_format(line, sizeof line, "load", gib / 100, 40 * gib, 2.0);
    t_check(strstr(line, "  0%") && strstr(line, "ETA 2:13:18"), "progress: hours in the ETA", "'%s'", line);
    hmoe_progress_format(line, sizeof line, "x", 5, 5, 0.5);
    t_check(strstr(line, "100%") && strstr(line, "ETA 0:00"), "progress: complete", "'%s'", line);
    hmoe_progress_format(line, sizeof line, "x", 0, 5, 0.0);
    t_check(strstr(line, "  0%") && strstr(line, "ETA --:--"), "progress: no rate yet", "'%s'", line);
    hmoe_progress_format_count(line, sizeof line, "prefill", 256, 512, "tok", 0.5);
    t_check(strstr(line, "prefill [############............]  50%  256/512 tok  512 tok/s  ETA 0:01") != NULL,
            "progress: counted units (a prefill in tokens)", "'%s'", line);
    struct hmoe_progress p;
    hmoe_progress_init(&p, "x", 100, false);
    hmoe_progress_update(&p, 50);
    hmoe_progress_finish(&p, 100);
    t_check(!p.drawn, "progress: a disabled bar draws nothing", "drawn");
    return t_summary();
}
