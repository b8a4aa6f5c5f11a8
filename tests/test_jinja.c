/* test_jinja.c — the Jinja interpreter (include/hmoe/jinja.h).
 *
 * 1. The language, case by case: each template and variables with the output Python's
 *    Jinja2 (as transformers configures it) gives, or the error it raises.
 * 2. Real chat templates (tests/jinja/templates: Qwen3, Qwen3.5 in two versions, Qwen3-Coder,
 *    Nemotron-3 in two versions, gpt-oss, GLM-4.6 / 4.7-Flash, DeepSeek-V3 / V3.1, Llama 3.3,
 *    MiniMax-M2, Mistral-Small-3.2, Gemma 4) over the generated conversations
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
static const char *const templates[] = {"qwen3", "qwen3.5", "qwen3.5-think-if-reasoning", "qwen3-coder", "nemotron-3-nano",
                                        "nemotron-3-nano-v1", "gpt-oss", "glm-4.6", "glm-4.7-flash", "deepseek-v3",
                                        "deepseek-v3.1", "llama-3.3", "minimax-m2", "mistral-small-3.2", "gemma-4"};

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

/* ---- 3. agreement with the built-in renderers --------------------------------------- */
static bool has_reasoning(const struct hmoe_json *conv) {
    const struct hmoe_json *msgs = hmoe_json_get(conv, "messages");
    for (size_t i = 0; msgs && msgs->kind == HMOE_JSON_ARRAY && i < msgs->n; i++) {
        if (hmoe_json_get(msgs->items[i], "reasoning_content")) return true;
    }
    return false;
}

static bool has_string_arguments(const struct hmoe_json *conv) {
    const struct hmoe_json *msgs = hmoe_json_get(conv, "messages");
    for (size_t i = 0; msgs && msgs->kind == HMOE_JSON_ARRAY && i < msgs->n; i++) {
        const struct hmoe_json *calls = hmoe_json_get(msgs->items[i], "tool_calls");
        for (size_t k = 0; calls && calls->kind == HMOE_JSON_ARRAY && k < calls->n; k++) {
            const struct hmoe_json *args = hmoe_json_get(hmoe_json_get(calls->items[k], "function"), "arguments");
            if (args && args->kind == HMOE_JSON_STRING) return true;
        }
    }
    return false;
}

static void test_builtin_agreement(const char *name, const struct conv_set *cs) {
    char path[256], tname[200];
    snprintf(path, sizeof path, "tests/jinja/templates/%s.jinja", name);
    struct hmoe_err err = {0};
    char *src;
    size_t len;
    if (hmoe_read_file(path, &src, &len, &err) != HMOE_OK) { t_check(0, name, "%s", err.msg); return; }
    enum hmoe_chat_template fam = hmoe_chat_template_detect(src);
    struct hmoe_jinja *t = NULL;
    hmoe_jinja_compile(src, len, &t, &err);
    bool has_preserve = strstr(src, "preserve_thinking") != NULL; /* a Qwen3.6 option the 3.5 template ignores */
    free(src);
    if (fam == HMOE_CHAT_TEMPLATE_UNKNOWN || !t) { hmoe_jinja_free(t); return; }
    size_t n_same = 0, n_diff = 0, n_skip = 0, n_excl = 0; /* excluded: not comparable by design */
    char first[200] = "";
    for (size_t i = 0; i < cs->n; i++) {
        const struct hmoe_json *kw = hmoe_json_get(cs->conv[i], "kwargs");
        /* the built-in renderers model enable_thinking and preserve_thinking only */
        if (hmoe_json_get(kw, "truncate_history_thinking")) { n_skip++; continue; }
        /* Built-in harmony follows llama.cpp where it prepares messages for this template:
         * tool-call arguments given as a JSON string are the object they hold (the template
         * would print the string quoted), and reasoning_content is the template's `thinking`
         * (which it reads instead). Conversations with either are not comparable here. */
        if (fam == HMOE_CHAT_TEMPLATE_HARMONY && (has_string_arguments(cs->conv[i]) || has_reasoning(cs->conv[i]))) {
            n_excl++;
            continue;
        }
        struct hmoe_chat_conv conv;
        if (hmoe_chat_conv_from_json(cs->conv[i], &conv, &err) != HMOE_OK) { n_skip++; continue; }
        struct hmoe_chat_opts o = {
            .add_generation_prompt = hmoe_json_get_bool(cs->conv[i], "add_generation_prompt", true),
            .enable_thinking = hmoe_json_get_bool(cs->conv[i], "enable_thinking", true),
            .preserve_thinking = has_preserve && hmoe_json_get_bool(kw, "preserve_thinking", false),
            .reasoning_effort = hmoe_json_get_str(kw, "reasoning_effort", NULL),
            .current_date = "2026-01-27", /* the day of NOW, which the Jinja side renders */
            .tools = (const char *const *)conv.tools, .n_tools = conv.n_tools};
        char *builtin = NULL;
        struct hmoe_err e2 = {0};
        enum hmoe_status st = hmoe_chat_render(fam, conv.msgs, conv.n_msgs, &o, &builtin, &e2);
        char *jinja = render_conv(t, cs->conv[i], &families[0], &e2);
        if (st == HMOE_OK && jinja) {
            if (strcmp(builtin, jinja) == 0) n_same++;
            else {
                if (!n_diff) snprintf(first, sizeof first, "conversation %zu", i);
                n_diff++;
            }
        } else n_skip++;
        free(builtin);
        free(jinja);
        hmoe_chat_conv_free(&conv);
    }
    snprintf(tname, sizeof tname, "jinja: %s = built-in %s on %zu conversations (%zu not renderable by both, %zu not comparable)",
             name, hmoe_chat_template_name(fam), n_same + n_diff, n_skip, n_excl);
    t_check(n_diff == 0 && n_same >= (cs->n - n_excl) / 2, tname, "%zu differ; first: %s", n_diff, first);
    hmoe_jinja_free(t);
}

/* ---- 4. limits and malformed input --------------------------------------------------- */
static bool fails_with(const char *src, const struct hmoe_jinja_limits *lim, const char *want) {
    struct hmoe_jinja *t = NULL;
    struct hmoe_err err = {0};
    char *out = NULL;
    if (hmoe_jinja_compile(src, strlen(src), &t, &err) == HMOE_OK) {
        struct hmoe_jinja_render_opts o = {.now = NOW};
        if (lim) o.limits = *lim;
        hmoe_jinja_render(t, NULL, &o, &out, NULL, &err);
    }
    hmoe_jinja_free(t);
    bool ok = !out && strstr(err.msg, want) && strstr(err.msg, "line ");
    if (!ok) printf("  (got: %s)\n", out ? "a render" : err.msg);
    free(out);
    return ok;
}

static void test_limits(void) {
    char *deep = malloc(4000);
    size_t k = 0;
    k += (size_t)sprintf(deep, "{{ ");
    for (int i = 0; i < 1000; i++) deep[k++] = '(';
    deep[k++] = '1';
    for (int i = 0; i < 1000; i++) deep[k++] = ')';
    strcpy(deep + k, " }}");
    t_check(fails_with(deep, NULL, "nested too deeply"), "jinja limit: 1000 nested parentheses", "no depth error");
    free(deep);
    t_check(fails_with("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", NULL, "nested deeper"), "jinja limit: endless macro recursion",
            "no depth error");
    t_check(fails_with("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", NULL, "loop iterations"),
            "jinja limit: 10^10 loop iterations", "no iteration error");
    struct hmoe_jinja_limits small = {.max_output = 1 << 20};
    t_check(fails_with("{% for i in range(100000) %}{{ 'x' * 1000 }}{% endfor %}", &small, "output is larger"),
            "jinja limit: output size", "no output error");
    t_check(fails_with("{{ 'x' * 10000000000 }}", NULL, "too large"), "jinja limit: huge string repetition", "no error");
    t_check(fails_with("{% set ns = namespace(s='xxxxxxxxxxxxxxxx') %}{% for i in range(40) %}{% set ns.s = ns.s + ns.s %}{% endfor %}",
                       NULL, "memory"),
            "jinja limit: memory of values never printed", "no error");
    struct hmoe_jinja_limits quick = {.max_seconds = 0.05};
    t_check(fails_with("{% for i in range(900000) %}{{ i|string|length }}{% endfor %}", &quick, "longer than"),
            "jinja limit: render time", "no time error");

    /* Every prefix of a real template, and byte mutations of another: a clean error or a
     * render, never a crash (the sanitizer build checks the memory side). */
    struct hmoe_err err = {0};
    char *src;
    size_t len;
    size_t n_fail = 0, n_total = 0;
    if (hmoe_read_file("tests/jinja/templates/qwen3.5.jinja", &src, &len, &err) == HMOE_OK) {
        for (size_t cut = 0; cut <= len; cut += 7) {
            struct hmoe_jinja *t = NULL;
            if (hmoe_jinja_compile(src, cut, &t, &err) == HMOE_OK) {
                char *out = NULL;
                hmoe_jinja_render(t, NULL, NULL, &out, NULL, &err);
                free(out);
            } else n_fail += strstr(err.msg, "line ") != NULL;
            n_total++;
            hmoe_jinja_free(t);
        }
        free(src);
    }
    t_check(n_total > 1000 && n_fail > 0, "jinja: every prefix of the qwen3.5 template compiles or fails with line:col",
            "%zu prefixes, %zu errors", n_total, n_fail);
    n_total = 0;
    if (hmoe_read_file("tests/jinja/templates/gpt-oss.jinja", &src, &len, &err) == HMOE_OK) {
        uint32_t rng = 12345;
        static const char bytes[] = "{}%#-+()[]|.,'\"\\ \nxa0=~*";
        for (int i = 0; i < 1500; i++) {
            char *m = malloc(len + 1);
            memcpy(m, src, len);
            for (int j = 0; j < 3; j++) {
                rng = rng * 1103515245u + 12345u;
                m[(rng >> 8) % len] = bytes[(rng >> 20) % (sizeof bytes - 1)];
            }
            struct hmoe_jinja *t = NULL;
            if (hmoe_jinja_compile(m, len, &t, &err) == HMOE_OK) {
                char *out = NULL;
                hmoe_jinja_render(t, NULL, NULL, &out, NULL, &err);
                free(out);
            }
            hmoe_jinja_free(t);
            free(m);
            n_total++;
        }
        free(src);
    }
    t_check(n_total == 1500, "jinja: 1500 mutated gpt-oss templates never crash", "%zu rendered", n_total);
}

/* ---- 5. the chat format wiring (hmoe_chat_fmt, text.h) -------------------------------- */
static char *read_text(const char *path) {
    char *s = NULL;
    size_t n;
    struct hmoe_err err = {0};
    hmoe_read_file(path, &s, &n, &err);
    return s;
}

static void test_chat_fmt(void) {
    struct hmoe_err err = {0};
    char warn[640];
    char *qwen3 = read_text("tests/jinja/templates/qwen3.jinja");
    struct hmoe_chat_fmt *f = NULL;
    struct hmoe_chat_fmt_src src = {.template_text = qwen3, .template_origin = "tokenizer.chat_template"};
    t_check(qwen3 && hmoe_chat_fmt_open(&src, &f, warn, sizeof warn, &err) == HMOE_OK && !warn[0] &&
                strcmp(hmoe_chat_fmt_name(f), "jinja") == 0 && hmoe_chat_fmt_family(f) == HMOE_CHAT_TEMPLATE_QWEN3,
            "chat fmt: the file's qwen3 template renders through jinja (family qwen3)", "%s %s", err.msg, warn);
    /* messages built in memory (the chat command's path), tool call arguments as JSON text */
    struct hmoe_chat_tool_call call = {.name = "get_weather", .arguments = "{\"city\": \"Paris\"}"};
    struct hmoe_chat_msg msgs[] = {{.role = "system", .content = "Be brief."}, {.role = "user", .content = "Weather?"},
                                   {.role = "assistant", .content = "", .tool_calls = &call, .n_tool_calls = 1},
                                   {.role = "tool", .content = "sunny"}};
    const char *tool = "{\"type\": \"function\", \"function\": {\"name\": \"get_weather\"}}";
    struct hmoe_chat_opts o = {.add_generation_prompt = true, .enable_thinking = false, .tools = &tool, .n_tools = 1};
    char *a = NULL, *b = NULL;
    if (f) hmoe_chat_fmt_render(f, msgs, 4, &o, &a, &err);
    hmoe_chat_render(HMOE_CHAT_TEMPLATE_QWEN3, msgs, 4, &o, &b, &err);
    t_check(a && b && strcmp(a, b) == 0, "chat fmt: in-memory messages with a tool call = built-in qwen3", "%s\n---\n%s",
            a ? a : err.msg, b ? b : "");
    free(a);
    free(b);
    hmoe_chat_fmt_free(f);

    /* a template that does not compile: warning with line:col, the family it is recognised as */
    size_t n = strlen(qwen3 ? qwen3 : "");
    char *broken = malloc(n + 32);
    snprintf(broken, n + 32, "%s{%% frob %%}", qwen3 ? qwen3 : "");
    src.template_text = broken;
    f = NULL;
    t_check(hmoe_chat_fmt_open(&src, &f, warn, sizeof warn, &err) == HMOE_OK && strstr(warn, "line ") &&
                strstr(warn, "unknown or unexpected tag 'frob'") && strcmp(hmoe_chat_fmt_name(f), "qwen3") == 0,
            "chat fmt: a template that does not compile -> warning with line:col, built-in qwen3", "warning '%s'", warn);
    hmoe_chat_fmt_free(f);
    free(broken);
    /* one that compiles but cannot render a plain exchange: ChatML with a warning */
    src.template_text = "{% for m in messages %}{{ m.content.encode() }}{% endfor %}";
    f = NULL;
    t_check(hmoe_chat_fmt_open(&src, &f, warn, sizeof warn, &err) == HMOE_OK && strstr(warn, "line 1:") &&
                strcmp(hmoe_chat_fmt_name(f), "chatml") == 0,
            "chat fmt: a template the interpreter cannot render -> warning, chatml", "warning '%s'", warn);
    hmoe_chat_fmt_free(f);
    /* the template's own raise_exception is its verdict on a conversation, not a fallback */
    src.template_text = "{{ raise_exception('only tools') }}";
    f = NULL;
    t_check(hmoe_chat_fmt_open(&src, &f, warn, sizeof warn, &err) == HMOE_OK && !warn[0] &&
                strcmp(hmoe_chat_fmt_name(f), "jinja") == 0,
            "chat fmt: a template that raises keeps rendering through jinja", "warning '%s'", warn);
    hmoe_chat_fmt_free(f);
    /* a required template file with an error is an error */
    src.template_required = true;
    src.template_text = "{% if %}";
    src.template_origin = "t.jinja";
    f = NULL;
    t_check(hmoe_chat_fmt_open(&src, &f, warn, sizeof warn, &err) == HMOE_ERR_FORMAT && strstr(err.msg, "t.jinja: ") &&
                strstr(err.msg, "line 1:7"),
            "chat fmt: --chat-template-file with an error -> error naming file and line:col", "%s", err.msg);
    /* names, kwargs */
    struct hmoe_chat_fmt_src by_name = {.name = "qwen35"};
    f = NULL;
    t_check(hmoe_chat_fmt_open(&by_name, &f, warn, sizeof warn, &err) == HMOE_OK && strcmp(hmoe_chat_fmt_name(f), "qwen35") == 0,
            "chat fmt: --chat-template qwen35 is the built-in", "%s", err.msg);
    hmoe_chat_fmt_free(f);
    by_name.name = "llama9";
    t_check(hmoe_chat_fmt_open(&by_name, &f, warn, sizeof warn, &err) == HMOE_ERR_ARG && strstr(err.msg, "unknown chat template"),
            "chat fmt: an unknown name is an argument error", "%s", err.msg);
    struct hmoe_chat_fmt_src kw = {.name = "{{ bos_token }}|{{ enable_thinking }}|{{ extra }}", .bos_token = "<s>",
                                   .kwargs_json = "{\"bos_token\": \"[B]\", \"enable_thinking\": false, \"extra\": [1]}"};
    f = NULL;
    char *out = NULL;
    struct hmoe_chat_msg hi = {.role = "user", .content = "hi"};
    if (hmoe_chat_fmt_open(&kw, &f, warn, sizeof warn, &err) == HMOE_OK) hmoe_chat_fmt_render(f, &hi, 1, NULL, &out, &err);
    t_check(out && strcmp(out, "[B]|False|[1]") == 0, "chat fmt: kwargs override bos_token and enable_thinking",
            "got '%s' (%s)", out ? out : "", err.msg);
    free(out);
    out = NULL;
    /* the server's per-request chat_template_kwargs override the format's own */
    static const char req[] = "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"kw\": {\"extra\": 2}}";
    struct hmoe_json *rj = hmoe_json_parse(req, sizeof req - 1, &err);
    if (f && rj) hmoe_chat_fmt_render_json(f, hmoe_json_get(rj, "messages"), NULL, NULL, hmoe_json_get(rj, "kw"), &out, &err);
    t_check(out && strcmp(out, "[B]|False|2") == 0, "chat fmt: a request's kwargs override the format's", "got '%s' (%s)",
            out ? out : "", err.msg);
    free(out);
    hmoe_json_free(rj);
    hmoe_chat_fmt_free(f);
    kw.kwargs_json = "[1, 2]";
    t_check(hmoe_chat_fmt_open(&kw, &f, warn, sizeof warn, &err) == HMOE_ERR_ARG && strstr(err.msg, "JSON object"),
            "chat fmt: kwargs that are not a JSON object are refused", "%s", err.msg);
    free(qwen3);
}

/* A harmony template reads an assistant turn's analysis from `thinking`; the format copies a
 * request's reasoning_content there (and drops the content of a tool-call turn), as llama.cpp
 * prepares messages for it. The raw render of the same conversation shows what it would lose. */
static void test_harmony_thinking(void) {
    struct hmoe_err err = {0};
    char *src = NULL;
    size_t len;
    if (hmoe_read_file("tests/jinja/templates/gpt-oss.jinja", &src, &len, &err) != HMOE_OK) {
        t_check(0, "harmony thinking: template", "%s", err.msg);
        return;
    }
    static const char conv[] =
        "[{\"role\": \"user\", \"content\": \"weather?\"},"
        " {\"role\": \"assistant\", \"content\": \"\", \"reasoning_content\": \"ANALYSIS-TEXT\","
        "  \"tool_calls\": [{\"type\": \"function\", \"function\": {\"name\": \"get\", \"arguments\": {\"c\": 1}}}]},"
        " {\"role\": \"tool\", \"content\": \"sunny\"}]";
    struct hmoe_json *msgs = hmoe_json_parse(conv, sizeof conv - 1, &err);
    struct hmoe_chat_fmt_src fs = {.template_text = src, .template_origin = "gpt-oss.jinja", .template_required = true};
    struct hmoe_chat_fmt *f = NULL;
    char warn[256], *out = NULL, *raw = NULL;
    if (msgs && hmoe_chat_fmt_open(&fs, &f, warn, sizeof warn, &err) == HMOE_OK)
        hmoe_chat_fmt_render_json(f, msgs, NULL, NULL, NULL, &out, &err);
    struct hmoe_jinja *t = NULL;
    if (hmoe_jinja_compile(src, len, &t, &err) == HMOE_OK) {
        struct hmoe_jinja_chat chat = {.messages = msgs, .add_generation_prompt = true, .enable_thinking = true};
        hmoe_jinja_render_chat(t, &chat, NULL, &raw, &err);
    }
    t_check(out && strstr(out, "<|channel|>analysis<|message|>ANALYSIS-TEXT<|end|>"),
            "harmony thinking: reasoning_content of a tool-call turn renders as its analysis", "%s",
            out ? out : err.msg);
    t_check(raw && !strstr(raw, "ANALYSIS-TEXT"), "harmony thinking: the template itself ignores reasoning_content",
            "%s", raw ? raw : err.msg);
    free(out);
    free(raw);
    hmoe_jinja_free(t);
    hmoe_chat_fmt_free(f);
    hmoe_json_free(msgs);
    free(src);
}

int main(void) {
    setenv("TZ", "UTC", 1);
    tzset();
    test_language();
    test_limits();
    test_chat_fmt();
    test_harmony_thinking();
    struct conv_set cs = load_convs();
    for (size_t i = 0; i < HMOE_ARRAY_LEN(templates); i++) test_template(templates[i], &cs);
    for (size_t i = 0; i < HMOE_ARRAY_LEN(templates); i++) test_builtin_agreement(templates[i], &cs);
    for (size_t i = 0; i < cs.n; i++) hmoe_json_free(cs.conv[i]);
    free(cs.conv);
    return t_summary();
}
