/* test_chat_pty.c — `hmoe chat` on a pseudo-terminal (POSIX posix_openpt, no -lutil), as a
 * person uses it: the line editor's keys (arrows, Home/End, Backspace, Delete, Ctrl+A/E/F/U/K/W,
 * history, UTF-8 cursor movement) checked through what /save writes, Ctrl+C clearing a line,
 * Ctrl+C stopping an answer and returning to the prompt, Ctrl+C twice and Ctrl+D exiting.
 * Runs ./hmoe from the repository root (tests/run.sh) on the tiny golden model, greedy.
 */
#define _XOPEN_SOURCE 700
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "hmoe/json.h"

struct proc {
    pid_t pid;
    int fd;
    char out[1 << 20];
    size_t len, mark; /* wait_for searches output after `mark` */
};

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int spawn(struct proc *p, char *const argv[]) {
    memset(p, 0, sizeof *p);
    int m = posix_openpt(O_RDWR | O_NOCTTY);
    if (m < 0 || grantpt(m) != 0 || unlockpt(m) != 0) return -1;
    const char *slave = ptsname(m);
    if (!slave) return -1;
    struct winsize ws = {.ws_row = 40, .ws_col = 200};
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        setsid();
        int s = open(slave, O_RDWR);
        if (s < 0) _exit(126);
        ioctl(s, TIOCSCTTY, 0);
        ioctl(s, TIOCSWINSZ, &ws);
        dup2(s, 0);
        dup2(s, 1);
        dup2(s, 2);
        close(m);
        if (s > 2) close(s);
        execv("./hmoe", argv);
        _exit(127);
    }
    p->pid = pid;
    p->fd = m;
    return 0;
}

/* Read what is there for up to `wait_s` seconds; false once the child closed the terminal. */
static bool pump(struct proc *p, double wait_s) {
    struct pollfd pf = {.fd = p->fd, .events = POLLIN};
    if (poll(&pf, 1, (int)(wait_s * 1000)) <= 0) return true;
    char buf[4096];
    ssize_t n = read(p->fd, buf, sizeof buf);
    if (n <= 0) return false;
    size_t room = sizeof p->out - 1 - p->len;
    if ((size_t)n > room) n = (ssize_t)room;
    memcpy(p->out + p->len, buf, (size_t)n);
    p->len += (size_t)n;
    p->out[p->len] = 0;
    return true;
}

/* Wait until `needle` appears after the mark; the mark then moves past it. */
static bool wait_for(struct proc *p, const char *needle, double timeout_s) {
    const double end = now_s() + timeout_s;
    for (;;) {
        const char *hit = strstr(p->out + p->mark, needle);
        if (hit) {
            p->mark = (size_t)(hit - p->out) + strlen(needle);
            return true;
        }
        if (now_s() > end || !pump(p, 0.05)) return strstr(p->out + p->mark, needle) != NULL;
    }
}

static void type(struct proc *p, const char *s) {
    for (size_t n = strlen(s); n;) {
        ssize_t w = write(p->fd, s, n);
        if (w <= 0 && errno != EINTR) return;
        if (w > 0) s += w, n -= (size_t)w;
    }
}

/* Exit status of the child, or -1 if it did not end within timeout_s (then it is killed). */
static int finish(struct proc *p, double timeout_s) {
    const double end = now_s() + timeout_s;
    int status = 0;
    for (;;) {
        pid_t r = waitpid(p->pid, &status, WNOHANG);
        if (r == p->pid) break;
        if (now_s() > end) {
            kill(p->pid, SIGKILL);
            waitpid(p->pid, &status, 0);
            close(p->fd);
            return -1;
        }
        pump(p, 0.05);
    }
    close(p->fd);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* The prompt is drawn after the editor switched the terminal to raw mode: keys typed before
 * that would be cooked by the line discipline (Ctrl+C a signal, Ctrl+D an end of file). */
static bool wait_prompt(struct proc *p, double timeout_s) { return wait_for(p, "> \033[0m", timeout_s); }

static const char *tail(const struct proc *p) { return p->len > 600 ? p->out + p->len - 600 : p->out; }

int main(void) {
    char model[4096];
    snprintf(model, sizeof model, "%s", t_shared("fixtures/models/tiny-qwen3moe-A-Q4_K_M.gguf"));
    char dir[] = "/tmp/hmoe-pty-XXXXXX";
    if (!mkdtemp(dir)) {
        t_check(0, "pty: temporary directory", "mkdtemp failed");
        return t_summary();
    }
    char save_path[4200], save_cmd[4300];
    snprintf(save_path, sizeof save_path, "%s/conv.json", dir);
    snprintf(save_cmd, sizeof save_cmd, "/save %s\r", save_path);

    /* 1. Line editing, judged by the user messages /save writes. */
    static struct proc p;
    char *argv1[] = {"hmoe", "chat", "-m", model, "--temp", "0", "-t", "1", "--no-think", "-n", "4", NULL};
    t_check(spawn(&p, argv1) == 0, "pty: hmoe chat starts on a pseudo-terminal", "posix_openpt/fork failed");
    bool ok = wait_for(&p, "Ctrl+D exits.", 20) && wait_prompt(&p, 20);
    t_check(ok, "pty: banner and prompt on a terminal", "output: %s", tail(&p));
    static const struct {
        const char *keys, *want, *what;
    } lines[] = {
        {"helo\033[Dl\r", "hello", "left arrow then insert"},
        {"caf\xc3\xa9\033[D\x7f\033[HX\033[FY\r", "Xca\xc3\xa9Y", "UTF-8 aware left, backspace, Home, End"},
        {"one two three\x17\x01\033[3~\x05" "end\r", "ne two end", "Ctrl+W, Ctrl+A, Delete, Ctrl+E"},
        {"abc\x15xyz\x01\x06\x0b\r", "x", "Ctrl+U, Ctrl+A, Ctrl+F, Ctrl+K"},
        {"\033[A\033[A\r", "ne two end", "history: up twice"},
        {"junk\x03ok\r", "ok", "Ctrl+C drops the line being typed"},
    };
    const size_t n_lines = sizeof lines / sizeof lines[0];
    for (size_t i = 0; ok && i < n_lines; i++) {
        type(&p, lines[i].keys);
        ok = wait_for(&p, "[prompt ", 20) && wait_for(&p, "tok/s | ctx", 20) && wait_prompt(&p, 20);
        t_check(ok, "pty: a typed line is answered with a timing line", "line %zu, output: %s", i, tail(&p));
    }
    type(&p, save_cmd);
    ok = ok && wait_for(&p, "[saved", 20) && wait_prompt(&p, 20);
    t_check(strstr(p.out, "(Ctrl+C again or Ctrl+D to exit)") != NULL, "pty: Ctrl+C at the prompt says how to exit",
            "output: %s", tail(&p));
    type(&p, "\x04");
    int rc = finish(&p, 20);
    t_check(rc == 0, "pty: Ctrl+D on an empty line exits 0", "status %d, output: %s", rc, tail(&p));
    struct hmoe_err err = {0};
    struct hmoe_json *conv = hmoe_json_parse_file(save_path, &err);
    const struct hmoe_json *msgs = hmoe_json_get(conv, "messages");
    t_check(msgs && msgs->kind == HMOE_JSON_ARRAY && msgs->n == 2 * n_lines, "pty: /save wrote every exchange",
            "%s", conv ? "wrong message count" : err.msg);
    for (size_t i = 0; msgs && i < n_lines && 2 * i < msgs->n; i++) {
        const char *got = hmoe_json_get_str(msgs->items[2 * i], "content", "?");
        char name[160];
        snprintf(name, sizeof name, "pty line editor: %s", lines[i].what);
        t_check(strcmp(got, lines[i].want) == 0, name, "got '%s', want '%s'", got, lines[i].want);
    }
    hmoe_json_free(conv);
    unlink(save_path);

    /* 2. Ctrl+C stops an answer that would run to the full context, then twice exits. */
    char *argv2[] = {"hmoe", "chat", "-m", model, "--temp", "0", "-t", "1", "--no-think", NULL};
    ok = spawn(&p, argv2) == 0 && wait_for(&p, "Ctrl+D exits.", 20) && wait_prompt(&p, 20);
    type(&p, "Hello\r");
    ok = ok && wait_for(&p, "Hello", 10);
    /* Let the answer stream for a while (it would run to the full 4096-token context). */
    for (const double until = now_s() + 10; ok && p.len < p.mark + 400 && now_s() < until;) pump(&p, 0.05);
    t_check(ok && p.len >= p.mark + 400, "pty: the answer streams", "output: %s", tail(&p));
    const double t0 = now_s();
    type(&p, "\x03");
    ok = ok && wait_for(&p, "[interrupted]", 10);
    const double dt = now_s() - t0;
    t_check(ok && dt < 5, "pty: Ctrl+C stops the answer", "after %.1f s, output: %s", dt, tail(&p));
    ok = ok && wait_prompt(&p, 10);
    t_check(ok, "pty: the prompt comes back after the interrupted answer", "output: %s", tail(&p));
    /* The Ctrl+C that stopped the answer does not count: one more at the prompt only warns,
     * and the conversation survives until the second one in a row. */
    type(&p, "\x03");
    /* The prompt is drawn once the line editor is back in raw mode: a Ctrl+C typed before that
     * is the terminal's SIGINT, which counts as the second one. */
    ok = ok && wait_for(&p, "Ctrl+C again or Ctrl+D to exit", 10) && wait_prompt(&p, 10);
    t_check(ok && p.pid > 0 && waitpid(p.pid, NULL, WNOHANG) == 0,
            "pty: one Ctrl+C at the prompt after an interrupted answer does not exit", "output: %s", tail(&p));
    type(&p, "\x03");
    rc = finish(&p, 20);
    t_check(rc == 0, "pty: a second Ctrl+C in a row then exits 0", "status %d, output: %s", rc, tail(&p));

    /* 3. Ctrl+C twice in a row at an empty prompt exits. */
    ok = spawn(&p, argv2) == 0 && wait_for(&p, "Ctrl+D exits.", 20) && wait_prompt(&p, 20);
    type(&p, "\x03");
    ok = ok && wait_for(&p, "(Ctrl+C again or Ctrl+D to exit)", 10) && wait_prompt(&p, 10);
    type(&p, "\x03");
    rc = finish(&p, 20);
    t_check(ok && rc == 0, "pty: Ctrl+C twice at the prompt exits 0", "status %d, output: %s", rc, tail(&p));
    rmdir(dir);
    return t_summary();
}
