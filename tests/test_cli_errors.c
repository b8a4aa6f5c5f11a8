/* test_cli_errors.c — the messages a user gets from ./hmoe, one class at a time, for every
 * subcommand that opens a model: a missing file, a file that is not a GGUF, an unsupported
 * architecture (named, supported list given), an unsupported quant type (a copy of the tiny
 * golden model with one tensor retyped to TQ2_0: type named, supported types listed), not
 * enough memory for the KV cache (error with the size and -c) or for weights + KV (warning),
 * the context overflow of `run`; and --help (exit 0, usage line) for every subcommand.
 * Exit codes: 1 for these runtime errors, 2 for usage errors (cli.h).
 */
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "hmoe/common.h"

/* Run a shell command with stderr folded into stdout; output malloc'd, exit status in *rc. */
static char *run(const char *cmd, int *rc) {
    char full[8400];
    snprintf(full, sizeof full, "%s 2>&1", cmd);
    FILE *p = popen(full, "r");
    if (!p) {
        *rc = -1;
        return strdup("");
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    for (size_t got; (got = fread(buf + n, 1, cap - n - 1, p)) > 0;) {
        n += got;
        if (n + 1 == cap) buf = realloc(buf, cap *= 2);
    }
    buf[n] = 0;
    int st = pclose(p);
    *rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    return buf;
}

/* Run `cmd` and check its exit code and that every needle (NULL-terminated list) is in the output. */
static void expect(const char *name, const char *cmd, int want_rc, const char *const *needles) {
    int rc;
    char *out = run(cmd, &rc);
    bool ok = rc == want_rc;
    const char *missing = NULL;
    for (int i = 0; ok && needles[i]; i++)
        if (!strstr(out, needles[i])) ok = false, missing = needles[i];
    t_check(ok, name, "exit %d (want %d)%s%s: %.600s", rc, want_rc, missing ? ", missing: " : "",
            missing ? missing : "", out);
    free(out);
}

#define NEEDLES(...) ((const char *const[]){__VA_ARGS__, NULL})

/* Commands that take a model, each with what it needs besides -m. */
static const struct {
    const char *name, *args;
} model_cmds[] = {
    {"run", "-p hi -n 1 -t 1"},
    {"chat", "-n 1 -t 1 </dev/null"},
    {"bench", "-p 0 -n 1 -r 1 -t 1"},
    {"logits", "--ids 1 -t 1"},
    {"info", ""},
    {"tokenize", "hi"},
};

/* Offset just past the GGUF string `s` (u64 length + bytes) in buf, or 0. */
static size_t find_gguf_str(const unsigned char *buf, size_t n, const char *s) {
    size_t len = strlen(s);
    for (size_t i = 0; i + 8 + len <= n; i++) {
        uint64_t l;
        memcpy(&l, buf + i, 8);
        if (l == len && memcmp(buf + i + 8, s, len) == 0) return i + 8 + len;
    }
    return 0;
}

/* A copy of `src` with tensor `name` (2-D) retyped to `type`; false if it cannot be made. */
static bool write_retyped(const char *src, const char *dst, const char *name, uint32_t type) {
    FILE *f = fopen(src, "rb");
    if (!f) return false;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = malloc((size_t)n);
    bool ok = buf && fread(buf, 1, (size_t)n, f) == (size_t)n;
    fclose(f);
    size_t o = ok ? find_gguf_str(buf, (size_t)n, name) : 0;
    uint32_t n_dims = 0;
    if (o) memcpy(&n_dims, buf + o, 4);
    ok = ok && o && n_dims == 2; /* tensor info: name, u32 n_dims, u64 ne[n_dims], u32 type */
    if (ok) memcpy(buf + o + 4 + 8 * n_dims, &type, 4);
    FILE *g = ok ? fopen(dst, "wb") : NULL;
    ok = g && fwrite(buf, 1, (size_t)n, g) == (size_t)n;
    if (g) ok &= fclose(g) == 0;
    free(buf);
    return ok;
}

int main(void) {
    char model[4096], archx[4096], dir[] = "/tmp/hmoe-errors-XXXXXX", cmd[8192], name[256];
    snprintf(model, sizeof model, "%s", t_shared("fixtures/models/tiny-qwen3moe-A-Q4_K_M.gguf"));
    snprintf(archx, sizeof archx, "%s", t_shared("fixtures/moe-tiny/deepseek2-tiny.gguf"));
    if (!mkdtemp(dir)) {
        t_check(0, "cli errors: temporary directory", "mkdtemp failed");
        return t_summary();
    }
    char missing[4200], text[4200], tq2[4200];
    snprintf(missing, sizeof missing, "%s/missing.gguf", dir);
    snprintf(text, sizeof text, "%s/notes.gguf", dir);
    snprintf(tq2, sizeof tq2, "%s/tq2.gguf", dir);
    FILE *f = fopen(text, "w");
    if (f) fputs("these are notes, not a model\n", f), fclose(f);

    for (size_t i = 0; i < HMOE_ARRAY_LEN(model_cmds); i++) {
        snprintf(cmd, sizeof cmd, "./hmoe %s -m %s %s", model_cmds[i].name, missing, model_cmds[i].args);
        snprintf(name, sizeof name, "%s: missing model file: exit 1, path named, 'cannot open'", model_cmds[i].name);
        expect(name, cmd, 1, NEEDLES(missing, "cannot open: No such file or directory"));
        snprintf(cmd, sizeof cmd, "./hmoe %s -m %s %s", model_cmds[i].name, text, model_cmds[i].args);
        snprintf(name, sizeof name, "%s: a text file: exit 1, 'not a GGUF file'", model_cmds[i].name);
        expect(name, cmd, 1, NEEDLES(text, "not a GGUF file"));
    }
    /* Architecture and quant type matter to the commands that run the model. */
    for (size_t i = 0; i < 4; i++) {
        snprintf(cmd, sizeof cmd, "./hmoe %s -m %s %s", model_cmds[i].name, archx, model_cmds[i].args);
        snprintf(name, sizeof name, "%s: unsupported architecture named with the supported list", model_cmds[i].name);
        expect(name, cmd, 1, NEEDLES("unsupported architecture 'deepseek2' (supported: qwen3moe, qwen35moe"));
    }
    bool made = write_retyped(model, tq2, "blk.0.attn_q.weight", 35 /* TQ2_0 */);
    t_check(made, "cli errors: tiny model copy with blk.0.attn_q.weight retyped to TQ2_0", "cannot write %s", tq2);
    for (size_t i = 0; made && i < 4; i++) {
        snprintf(cmd, sizeof cmd, "./hmoe %s -m %s %s", model_cmds[i].name, tq2, model_cmds[i].args);
        snprintf(name, sizeof name, "%s: unsupported quant type named with the supported types", model_cmds[i].name);
        expect(name, cmd, 1,
               NEEDLES("tensor blk.0.attn_q.weight has type TQ2_0", "supported weight types: F32, F16, Q4_0",
                       "Q4_K", "Q6_K", "IQ2_XS"));
    }
    /* Memory: HMOE_MEM_AVAILABLE_MIB stands for a small machine. The tiny model's f16 KV cache
     * for -c 4096 is 4 layers x 4096 x 2 heads x 256 bytes = 8 MiB; its file is 9.6 MiB. These
     * are the CPU path's RAM checks (--gpu off: on a GPU host the KV cache would be in VRAM). */
    for (size_t i = 0; i < 3; i++) {
        snprintf(cmd, sizeof cmd, "HMOE_MEM_AVAILABLE_MIB=4 ./hmoe %s -m %s -c 4096 --gpu off %s", model_cmds[i].name, model,
                 model_cmds[i].args);
        if (i == 2) /* bench sizes its context from -p/-n/-d: ask for 4096 positions with -d */
            snprintf(cmd, sizeof cmd, "HMOE_MEM_AVAILABLE_MIB=4 ./hmoe bench -m %s -d 4000 -p 0 -n 1 -r 1 -t 1 --gpu off",
                     model);
        snprintf(name, sizeof name, "%s: KV cache larger than memory: error with the size and the flags",
                 model_cmds[i].name);
        expect(name, cmd, 1,
               NEEDLES("not enough memory: the KV cache for -c ", "needs ", "MiB but only 4.0 MiB is available",
                       "lower -c/--ctx-size or use -ctk q8_0 -ctv q8_0"));
    }
    snprintf(cmd, sizeof cmd, "HMOE_MEM_AVAILABLE_MIB=12 ./hmoe run -m %s -c 4096 -p hi -n 1 -t 1 --gpu off", model);
    expect("run: weights + KV larger than memory: a warning with the sizes, the run goes on", cmd, 0,
           NEEDLES("warning: the model (9.6 MiB) plus the KV cache (8.0 MiB for -c 4096) need more than the 12.0 MiB",
                   "lower -c/--ctx-size", "prompt eval time"));
    snprintf(cmd, sizeof cmd, "./hmoe run -m %s -p 'a b c d e f g h i j k l' -c 8 -t 1", model);
    expect("run: prompt longer than the context: error with both sizes and -c", cmd, 1,
           NEEDLES("but the context holds 8; raise -c/--ctx-size"));
    snprintf(cmd, sizeof cmd, "./hmoe run -m %s -p hi -ctk q3_k", model);
    expect("run: unknown KV cache type: usage error listing the types", cmd, 2,
           NEEDLES("unknown KV cache type 'q3_k' (use f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1 or iq4_nl"));

    /* --help for every subcommand; no arguments and an unknown command are usage errors. */
    static const char *const cmds[] = {"run", "chat", "bench", "info", "tokenize", "template", "logits", "synth"};
    for (size_t i = 0; i < HMOE_ARRAY_LEN(cmds); i++) {
        char usage[64];
        snprintf(usage, sizeof usage, "usage: hmoe %s", cmds[i]);
        snprintf(cmd, sizeof cmd, "./hmoe %s --help", cmds[i]);
        snprintf(name, sizeof name, "%s --help: exit 0 with the usage line and options", cmds[i]);
        expect(name, cmd, 0, NEEDLES(usage, "options:", "-h, --help"));
        snprintf(cmd, sizeof cmd, "./hmoe %s --no-such-flag", cmds[i]);
        snprintf(name, sizeof name, "%s --no-such-flag: usage error naming the flag", cmds[i]);
        expect(name, cmd, 2, NEEDLES("unknown option '--no-such-flag'", usage));
    }
    expect("hmoe with no command: usage (exit 2)", "./hmoe", 2, NEEDLES("usage: hmoe <command>", "bench", "chat"));
    expect("hmoe --help lists the commands (exit 0)", "./hmoe --help", 0, NEEDLES("chat", "bench", "synth"));
    expect("hmoe frobnicate: unknown command (exit 2)", "./hmoe frobnicate", 2, NEEDLES("unknown command 'frobnicate'"));

    unlink(missing);
    unlink(text);
    unlink(tq2);
    rmdir(dir);
    return t_summary();
}
