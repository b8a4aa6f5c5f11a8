/* test_synth_cli.c — `./hmoe synth` end to end (run from the repository root by run.sh):
 * the summary it prints (tensor count, per-type histogram of the tiny Q4_K_M layout of
 * qwen3moe.md §2 / quants.md §9.2), no progress bar when stderr is not a terminal, --quiet,
 * and the error paths: unknown preset / mix / routing, missing flags, unwritable path, full
 * disk (/dev/full), a file-size limit hit mid-write (partial file removed).
 */
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <stdbool.h>

#include "harness.h"

/* Run a shell command; capture its stdout and stderr separately. */
static int run(const char *cmd, char *out, size_t out_cap, char *err, size_t err_cap) {
    char full[2048], errfile[64];
    snprintf(errfile, sizeof errfile, "/tmp/hmoe-synth-cli-%d.err", (int)getpid());
    snprintf(full, sizeof full, "%s 2>%s", cmd, errfile);
    FILE *p = popen(full, "r");
    if (!p) return -1;
    size_t n = fread(out, 1, out_cap - 1, p);
    out[n] = 0;
    int st = pclose(p);
    FILE *f = fopen(errfile, "r");
    n = f ? fread(err, 1, err_cap - 1, f) : 0;
    err[n] = 0;
    if (f) fclose(f);
    unlink(errfile);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int count_lines(const char *s) {
    int n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

static bool exists(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0;
}

static char out[16384], err[16384], cmd[1024], path[256];

static void expect_error(const char *args, int want_code, const char *needle, const char *name) {
    snprintf(cmd, sizeof cmd, "./hmoe synth %s", args);
    int rc = run(cmd, out, sizeof out, err, sizeof err);
    t_check(rc == want_code && strstr(err, needle) && strncmp(err, "hmoe: ", 6) == 0, name,
            "exit %d (want %d), stderr '%s' (want '%s')", rc, want_code, err, needle);
}

int main(void) {
    snprintf(path, sizeof path, "/tmp/hmoe-test-synth-cli-%d.gguf", (int)getpid());

    snprintf(cmd, sizeof cmd, "./hmoe synth --preset tiny -o %s", path);
    int rc = run(cmd, out, sizeof out, err, sizeof err);
    /* tiny Q4_K_M: 3 + 12*4 tensors; F32: output_norm + 5 per layer; Q6_K: output + attn_v and
     * ffn_down of the 2 more-bits layers (use_more_bits(i, 4) = {2, 3}); Q4_K: the rest */
    t_check(rc == 0 && strstr(out, "51 tensors") && strstr(out, "F32         21 tensors") &&
                strstr(out, "Q4_K        25 tensors") && strstr(out, "Q6_K         5 tensors") && strstr(out, "wrote ") &&
                exists(path),
            "synth tiny: summary with 51 tensors and the Q4_K_M histogram", "exit %d, stdout:\n%s", rc, out);
    t_check(err[0] == 0, "synth: no progress bar when stderr is not a terminal", "stderr '%s'", err);
    snprintf(cmd, sizeof cmd, "./hmoe info %s", path);
    rc = run(cmd, out, sizeof out, err, sizeof err);
    t_check(rc == 0 && strstr(out, "qwen3moe"), "hmoe info reads the synth file", "exit %d: %s", rc, err);
    unlink(path);

    snprintf(cmd, sizeof cmd, "./hmoe synth --preset tiny --mix q8_0 --routing zipf:1.0 --seed 9 --quiet -o %s", path);
    rc = run(cmd, out, sizeof out, err, sizeof err);
    t_check(rc == 0 && out[0] == 0 && err[0] == 0 && exists(path), "synth --quiet prints nothing", "exit %d '%s' '%s'",
            rc, out, err);
    unlink(path);

    expect_error("--preset qwen3-31b -o /tmp/x.gguf", 1, "valid: qwen3-30b-a3b, qwen3-235b-a22b, tiny",
                 "unknown preset: one line listing the valid presets");
    expect_error("--preset tiny --mix q4_k_x -o /tmp/x.gguf", 1, "valid: q4_k_m", "unknown mix: one line listing the valid mixes");
    expect_error("--preset tiny --routing zipf:-1 -o /tmp/x.gguf", 1, "zipf:S", "bad --routing is explained");
    expect_error("--preset tiny --routing zipf:1 -o /tmp/x.gguf", 1, "--mix q8_0",
                 "zipf on tiny Q4_K explains why and what to use");
    expect_error("--preset tiny", 2, "needs -o", "missing -o is a usage error");
    expect_error("-o /tmp/x.gguf", 2, "needs --preset", "missing --preset is a usage error");
    expect_error("--preset tiny --layers x -o /tmp/x.gguf", 2, "invalid integer", "bad --layers value is a usage error");
    expect_error("--preset tiny -o /nonexistent-dir/x.gguf", 1, "cannot create the output file", "unwritable path");
    expect_error("--preset tiny -o /dev/full", 1, "disk full", "full disk (/dev/full)");
    t_check(count_lines(err) == 1, "errors are one line", "%d lines: %s", count_lines(err), err);

    /* A write that fails half-way (file-size limit: EFBIG with SIGXFSZ ignored) must leave no file. */
    snprintf(cmd, sizeof cmd, "sh -c \"ulimit -f 20000; trap '' XFSZ; exec ./hmoe synth --preset tiny -q -o %s\"", path);
    rc = run(cmd, out, sizeof out, err, sizeof err);
    t_check(rc == 1 && strstr(err, "failed at byte") && !exists(path), "a write failing half-way removes the partial file",
            "exit %d, stderr '%s', file %s", rc, err, exists(path) ? "left behind" : "removed");
    unlink(path);
    return t_summary();
}
