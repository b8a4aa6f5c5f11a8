/* test_cli_interrupt.c — Ctrl+C during a long prefill, typed on a pseudo-terminal as a person
 * does (the terminal's line discipline turns it into SIGINT for the foreground process): `run`
 * stops after the micro-batch in progress, says how far the prompt got, prints its timings and
 * exits 130; `chat` stops the turn's prefill, says the message was not answered, keeps the
 * session and exits 0 on Ctrl+D. The model is a synthetic `tiny` file and the prompt ~3900
 * tokens at -ub 16 on one thread, so that the prefill takes seconds and a micro-batch ~20 ms.
 * Runs ./hmoe from the repository root (tests/run.sh).
 */
#define _XOPEN_SOURCE 700
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

struct pty_proc {
    pid_t pid;
    int fd;
    char out[1 << 18];
    size_t len, mark; /* wait_for looks after `mark` and moves it past what it found */
};

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ./hmoe argv on a new terminal (its controlling one, so Ctrl+C is a SIGINT to it). */
static int start(struct pty_proc *p, char *const argv[]) {
    memset(p, 0, sizeof *p);
    const int m = posix_openpt(O_RDWR | O_NOCTTY);
    if (m < 0 || grantpt(m) || unlockpt(m)) return -1;
    const char *name = ptsname(m);
    if (!name) return -1;
    const pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        setsid();
        const int s = open(name, O_RDWR);
        if (s < 0) _exit(126);
        ioctl(s, TIOCSCTTY, 0);
        struct winsize ws = {.ws_row = 40, .ws_col = 200};
        ioctl(s, TIOCSWINSZ, &ws);
        dup2(s, 0), dup2(s, 1), dup2(s, 2);
        close(m);
        if (s > 2) close(s);
        execv("./hmoe", argv);
        _exit(127);
    }
    p->pid = pid, p->fd = m;
    return 0;
}

static bool pump(struct pty_proc *p, double wait_s) {
    struct pollfd pf = {.fd = p->fd, .events = POLLIN};
    if (poll(&pf, 1, (int)(wait_s * 1000)) <= 0) return true;
    char buf[4096];
    ssize_t n = read(p->fd, buf, sizeof buf);
    if (n <= 0) return false;
    const size_t room = sizeof p->out - 1 - p->len;
    if ((size_t)n > room) n = (ssize_t)room;
    memcpy(p->out + p->len, buf, (size_t)n);
    p->len += (size_t)n;
    p->out[p->len] = 0;
    return true;
}

static bool wait_for(struct pty_proc *p, const char *needle, double timeout_s) {
    const char *hit;
    for (const double end = now_s() + timeout_s; !(hit = strstr(p->out + p->mark, needle));)
        if (now_s() > end || !pump(p, 0.05)) {
            if (!(hit = strstr(p->out + p->mark, needle))) return false;
            break;
        }
    p->mark = (size_t)(hit - p->out) + strlen(needle);
    return true;
}

static void keys(struct pty_proc *p, const char *s) {
    for (size_t n = strlen(s); n;) {
        const ssize_t w = write(p->fd, s, n);
        if (w <= 0 && errno != EINTR) return;
        if (w > 0) s += w, n -= (size_t)w;
    }
}

/* Exit status, or -1 when it did not end within timeout_s (then it is killed). */
static int finish(struct pty_proc *p, double timeout_s) {
    int status = 0;
    for (const double end = now_s() + timeout_s;;) {
        if (waitpid(p->pid, &status, WNOHANG) == p->pid) break;
        if (now_s() > end) {
            kill(p->pid, SIGKILL);
            waitpid(p->pid, &status, 0);
            close(p->fd);
            return -1;
        }
        pump(p, 0.05);
    }
    while (pump(p, 0.05) && p->len < sizeof p->out - 1) {
        struct pollfd pf = {.fd = p->fd, .events = POLLIN};
        if (poll(&pf, 1, 0) <= 0) break;
    }
    close(p->fd);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static const char *tail(const struct pty_proc *p) { return p->len > 700 ? p->out + p->len - 700 : p->out; }

int main(void) {
    char dir[] = "/tmp/hmoe-int-XXXXXX";
    if (!mkdtemp(dir)) return t_check(0, "interrupt: temporary directory", "mkdtemp failed"), t_summary();
    char model[300], prompt_path[300], cmd[700];
    snprintf(model, sizeof model, "%s/tiny.gguf", dir);
    snprintf(prompt_path, sizeof prompt_path, "%s/prompt.txt", dir);
    snprintf(cmd, sizeof cmd, "./hmoe synth --preset tiny -q -o '%s' >/dev/null 2>&1", model);
    const bool made = system(cmd) == 0;
    /* ~3900 tokens of the generated vocabulary: words it splits into several pieces */
    static const char *const words[] = {"alpha", "beta", "gamma", "delta", "river", "stone", "light", "cloud", "maple"};
    static char text[16384];
    size_t o = 0;
    uint32_t x = 7;
    for (int i = 0; i < 1050 && o + 16 < sizeof text; i++) {
        x = x * 1103515245u + 12345u;
        o += (size_t)snprintf(text + o, sizeof text - o, "%s%s", i ? " " : "", words[(x >> 16) % 9]);
    }
    FILE *f = fopen(prompt_path, "w");
    const bool wrote = f && fputs(text, f) >= 0 && fclose(f) == 0;
    t_check(made && wrote, "interrupt: synthetic model and long prompt written", "synth %d, prompt %d", made, wrote);

    /* run: Ctrl+C 0.5 s into the prefill of ~4k tokens in micro-batches of 8 on one thread
     * (over a second even on a fast AVX-512 core) */
    static struct pty_proc p;
    char *run_argv[] = {"hmoe", "run", "-m", model, "-f", prompt_path, "-n", "4", "-t", "1", "-ub", "8",
                        "--gpu", "off", "--no-display-prompt", NULL};
    bool ok = made && wrote && start(&p, run_argv) == 0;
    const double t_start = now_s();
    for (; ok && now_s() < t_start + 0.5;) ok = pump(&p, 0.05);
    keys(&p, "\x03");
    const double t_int = now_s();
    int rc = ok ? finish(&p, 20) : -1;
    const double dt = now_s() - t_int;
    int done = -1, total = -1;
    const char *line = strstr(p.out, "[interrupted during the prompt: ");
    if (line) sscanf(line, "[interrupted during the prompt: %d of %d tokens prefilled]", &done, &total);
    t_check(rc == 130 && line && done > 0 && done < total && done % 8 == 0 && total > 3000,
            "interrupt: run stops inside the prefill at a micro-batch boundary and exits 130",
            "status %d, %d of %d: %s", rc, done, total, tail(&p));
    t_check(rc == 130 && dt < 2.0, "interrupt: run exits within 2 s of the Ctrl+C", "%.2f s", dt);
    t_check(strstr(p.out, "prompt eval time =") && strstr(p.out, "total time ="),
            "interrupt: run prints its timings after the Ctrl+C", "%s", tail(&p));

    /* chat: the same prompt as the system prompt of the first turn */
    char *chat_argv[] = {"hmoe", "chat", "-m", model, "-t", "1", "-ub", "16", "--gpu", "off", "--no-think", "-n", "4",
                         "-sys", text, NULL};
    ok = made && start(&p, chat_argv) == 0 && wait_for(&p, "Ctrl+D exits.", 30) && wait_for(&p, "> \033[0m", 30);
    t_check(ok, "interrupt: chat starts with a long system prompt", "%s", tail(&p));
    const size_t before = p.len;
    keys(&p, "hi\r");
    ok = ok && wait_for(&p, "prefill [", 30);
    const bool answered_early = strstr(p.out + before, "[prompt ") != NULL;
    keys(&p, "\x03");
    const double t_int2 = now_s();
    ok = ok && wait_for(&p, "[interrupted: the message was not answered]", 10);
    const double dt2 = now_s() - t_int2;
    t_check(ok && !answered_early && dt2 < 2.0, "interrupt: chat stops the prefill within 2 s and says so",
            "%.2f s (answered before Ctrl+C: %d): %s", dt2, answered_early, tail(&p));
    ok = ok && wait_for(&p, "> \033[0m", 10);
    keys(&p, "\x04");
    rc = finish(&p, 20);
    t_check(ok && rc == 0, "interrupt: chat keeps the session after it and exits 0 on Ctrl+D", "status %d: %s", rc,
            tail(&p));

    unlink(model);
    unlink(prompt_path);
    rmdir(dir);
    return t_summary();
}
