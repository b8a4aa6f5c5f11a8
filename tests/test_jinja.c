/* test_jinja.c — the Jinja interpreter (include/hmoe/jinja.h).
 *
 * 1. The language, case by case: each template and variables with the output Python's
 *    Jinja2 (as transformers configures it) gives, or the error it raises.
 * 2. Real chat templates (tests/jinja/templates: Qwen3, Qwen3.5 in two versions, Nemotron-3
 *    in two versions, gpt-oss, GLM-4.6, DeepSeek-V3 / V3.1) over the generated conversations
 *    of tests/jinja/conversations.jsonl: every render byte-identical to the one
 *    @huggingface/jinja made with Python's semantics (tests/jinja/gen.mjs), raising where it raises.
 * 3. Where hmoe also renders a template with built-in code (hmoe_chat_render), both agree.
 * 4. Limits and malformed templates: an error with line:column, never a crash.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"
#include "hmoe/jinja.h"
#include "hmoe/json.h"
#include "hmoe/text.h"
#include "sha256.h"

/* The instant gen.mjs fixes strftime_now to (2026-01-27 09:30 UTC); TZ=UTC is set in main. */
static const time_t NOW = 1769506200;

static char *render_src(const char *src, const char *vars_json, struct hmoe_err *err) {
    struct hmoe_jinja *t = NULL;
    if (hmoe_jinja_compile(src, strlen(src), &t, err) != HMOE_OK) return NULL;
    struct hmoe_json *v = vars_json ? hmoe_json_parse(vars_json, strlen(vars_json), err) : NULL;
    char *out = NULL;
    struct hmoe_jinja_render_opts o = {.now = NOW};
    if (!vars_json || v) hmoe_jinja_render(t, v, &o, &out, NULL, err);
    hmoe_json_free(v);
    hmoe_jinja_free(t);
    return out;
}

/* ---- 1. the language ------------------------------------------------------------------ */
struct lang_case { const char *name, *src, *vars, *want; /* want NULL: must fail; err: substring of the error */ const char *err; };

#include "jinja/lang_cases.h"

static void test_language(void) {
    size_t n = sizeof lang_cases / sizeof lang_cases[0];
    for (size_t i = 0; i < n; i++) {
        const struct lang_case *lc = &lang_cases[i];
        struct hmoe_err err = {0};
        char *out = render_src(lc->src, lc->vars, &err);
        char name[160];
        snprintf(name, sizeof name, "jinja: %s", lc->name);
        if (lc->want)
            t_check(out && strcmp(out, lc->want) == 0, name, "got %s%s%s (error: %s), want \"%s\"", out ? "\"" : "",
                    out ? out : "nothing", out ? "\"" : "", out ? "none" : err.msg, lc->want);
        else
            t_check(!out && strstr(err.msg, lc->err), name, "%s%s%s; want an error containing \"%s\", got \"%s\"",
                    out ? "rendered \"" : "failed", out ? out : "", out ? "\"" : "", lc->err, err.msg);
        free(out);
    }
}

/* ---- 2. real templates ---------------------------------------------------------------- */
struct family { const char *prefix, *bos, *eos; };
static const struct family families[] = {
    {"qwen", "<|endoftext|>", "<|im_end|>"},  {"nemotron", "<s>", "<|im_end|>"},
    {"gpt-oss", "<|startoftext|>", "<|return|>"}, {"glm", "[gMASK]<sop>", "<|endoftext|>"},
    {"deepseek", "<\xef\xbd\x9c" "begin\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>",
     "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>"},
};
static const char *const templates[] = {"qwen3", "qwen3.5", "qwen3.5-think-if-reasoning", "nemotron-3-nano",
                                        "nemotron-3-nano-v1", "gpt-oss", "glm-4.6", "deepseek-v3", "deepseek-v3.1"};

struct conv_set { struct hmoe_json **conv; size_t n; };

static struct conv_set load_convs(void) {
    struct conv_set cs = {0};
    struct hmoe_err err = {0};
    char *text;
    size_t len;
    if (hmoe_read_file("tests/jinja/conversations.jsonl", &text, &len, &err) != HMOE_OK) {
        t_check(0, "jinja: read conversations.jsonl", "%s", err.msg);
        return cs;
    }
    for (char *line = text, *nl; *line; line = nl + 1) {
        nl = strchr(line, '\n');
        if (!nl) nl = line + strlen(line) - 1;
        if (nl > line) {
            cs.conv = realloc(cs.conv, (cs.n + 1) * sizeof *cs.conv);
            cs.conv[cs.n] = hmoe_json_parse(line, (size_t)(nl - line), &err);
            if (cs.conv[cs.n]) cs.n++;
        }
        if (!nl[1]) break;
    }
    free(text);
    return cs;
}

static char *render_conv(const struct hmoe_jinja *t, const struct hmoe_json *conv, const struct family *fam,
                         struct hmoe_err *err) {
    const struct hmoe_json *kw = hmoe_json_get(conv, "kwargs");
    struct hmoe_jinja_chat chat = {
        .messages = hmoe_json_get(conv, "messages"),
        .tools = hmoe_json_get(conv, "tools"),
        .add_generation_prompt = hmoe_json_get_bool(conv, "add_generation_prompt", true),
        .enable_thinking = hmoe_json_get_bool(conv, "enable_thinking", true),
        .bos_token = fam->bos,
        .eos_token = fam->eos,
        .kwargs = kw,
    };
    struct hmoe_jinja_render_opts o = {.now = NOW};
    char *out = NULL;
    if (hmoe_jinja_render_chat(t, &chat, &o, &out, err) != HMOE_OK) return NULL;
    return out;
}

static void test_template(const char *name, const struct conv_set *cs) {
    char path[256], tname[200];
    snprintf(tname, sizeof tname, "jinja: %s renders all %zu conversations as expected", name, cs->n);
    const struct family *fam = &families[0];
    for (size_t i = 0; i < HMOE_ARRAY_LEN(families); i++)
        if (strncmp(name, families[i].prefix, strlen(families[i].prefix)) == 0) fam = &families[i];
    struct hmoe_err err = {0};
    char *src, *exp_text;
    size_t len, exp_len;
    snprintf(path, sizeof path, "tests/jinja/templates/%s.jinja", name);
    if (hmoe_read_file(path, &src, &len, &err) != HMOE_OK) { t_check(0, tname, "%s", err.msg); return; }
    snprintf(path, sizeof path, "tests/jinja/expected/%s.jsonl", name);
    if (hmoe_read_file(path, &exp_text, &exp_len, &err) != HMOE_OK) { free(src); t_check(0, tname, "%s", err.msg); return; }
    struct hmoe_jinja *t = NULL;
    if (hmoe_jinja_compile(src, len, &t, &err) != HMOE_OK) {
        free(src);
        free(exp_text);
        t_check(0, tname, "compile: %s", err.msg);
        return;
    }
    size_t n_ok = 0, n_bad = 0, n_raise = 0, id = 0;
    char first_bad[400] = "";
    for (char *line = exp_text, *nl; *line && id < cs->n; line = nl + 1, id++) {
        nl = strchr(line, '\n');
        if (!nl) break;
        struct hmoe_json *exp = hmoe_json_parse(line, (size_t)(nl - line), &err);
        if (!exp) break;
        struct hmoe_err rerr = {0};
        char *out = render_conv(t, cs->conv[id], fam, &rerr);
        const char *want_sha = hmoe_json_get_str(exp, "sha256", NULL);
        bool ok;
        if (!want_sha) {
            ok = out == NULL;
            n_raise += ok;
        } else {
            char hex[65] = "";
            if (out) sha256_hex(out, strlen(out), hex);
            ok = out && strcmp(hex, want_sha) == 0;
        }
        if (ok) n_ok++;
        else {
            if (!n_bad) {
                const char *want = hmoe_json_get_str(exp, "out", NULL);
                size_t at = 0;
                if (out && want) while (out[at] && out[at] == want[at]) at++;
                snprintf(first_bad, sizeof first_bad, "conversation %zu: %s%.200s (want %s)", id,
                         out ? "output differs" : "failed: ", out ? "" : rerr.msg, want_sha ? "a render" : "an error");
                if (out && want) {
                    char tail[160];
                    snprintf(tail, sizeof tail, " at byte %zu: got \"%.40s\" want \"%.40s\"", at, out + at, want + at);
                    strncat(first_bad, tail, sizeof first_bad - strlen(first_bad) - 1);
                }
            }
            n_bad++;
        }
        free(out);
        hmoe_json_free(exp);
    }
    t_check(n_bad == 0 && n_ok == cs->n, tname, "%zu of %zu differ; first: %s", n_bad, cs->n, first_bad);
    (void)n_raise;
    hmoe_jinja_free(t);
    free(src);
    free(exp_text);
}

int main(void) {
    setenv("TZ", "UTC", 1);
    tzset();
    test_language();
    struct conv_set cs = load_convs();
    for (size_t i = 0; i < HMOE_ARRAY_LEN(templates); i++) test_template(templates[i], &cs);
    for (size_t i = 0; i < cs.n; i++) hmoe_json_free(cs.conv[i]);
    free(cs.conv);
    return t_summary();
}
