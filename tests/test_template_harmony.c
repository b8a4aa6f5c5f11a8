/* test_template_harmony.c — the gpt-oss harmony chat format (chat-templates.md §3) byte for
 * byte against the model's own Jinja template: fixtures/chat/gpt-oss-renders.jsonl holds 57
 * conversations rendered by @huggingface/jinja from fixtures/chat/gpt-oss-template.jinja
 * (tests/chat/gen_gptoss_renders.mjs): system/developer messages, reasoning effort, tools as
 * a TypeScript namespace, tool calls and results, reasoning dropped from history, the
 * template's refusals. Also: that template file is detected as harmony, --chat-template
 * harmony parses, today's date is used when none is given, and a render tokenizes with the
 * harmony header tokens as single ids. */
#include <time.h>

#include "harness.h"
#include "hmoe/gguf.h"
#include "hmoe/json.h"
#include "hmoe/text.h"

static enum hmoe_status render_case(const struct hmoe_json *c, const char *date, char **out, struct hmoe_err *err) {
    struct hmoe_chat_conv conv;
    *out = NULL;
    enum hmoe_status st = hmoe_chat_conv_from_json(c, &conv, err);
    if (st != HMOE_OK) return st;
    struct hmoe_chat_opts o = {
        .add_generation_prompt = hmoe_json_get_bool(c, "add_generation_prompt", true),
        .enable_thinking = true,
        .tools = (const char *const *)conv.tools,
        .n_tools = conv.n_tools,
        .reasoning_effort = hmoe_json_get_str(c, "reasoning_effort", NULL),
        .current_date = date,
    };
    st = hmoe_chat_render(HMOE_CHAT_TEMPLATE_HARMONY, conv.msgs, conv.n_msgs, &o, out, err);
    hmoe_chat_conv_free(&conv);
    return st;
}

/* Position of the first differing byte (for the failure message). */
static size_t first_diff(const char *a, const char *b) {
    size_t i = 0;
    while (a[i] && a[i] == b[i]) i++;
    return i;
}

static void run_renders(void) {
    struct hmoe_err err = {0};
    char *text;
    size_t len;
    if (hmoe_read_file(t_shared("fixtures/chat/gpt-oss-renders.jsonl"), &text, &len, &err) != HMOE_OK) {
        t_check(0, "gpt-oss-renders.jsonl readable", "%s", err.msg);
        return;
    }
    int lines = 0, errors = 0;
    for (char *p = text, *nl; *p; p = nl + 1) {
        nl = strchr(p, '\n');
        if (!nl) nl = p + strlen(p);
        if (nl > p) {
            lines++;
            struct hmoe_json *c = hmoe_json_parse(p, (size_t)(nl - p), &err);
            const char *name = hmoe_json_get_str(c, "name", "?");
            const char *want = hmoe_json_get_str(c, "rendered", NULL);
            char tname[160], *got = NULL;
            struct hmoe_err rerr = {0};
            enum hmoe_status st = c ? render_case(c, hmoe_json_get_str(c, "current_date", NULL), &got, &rerr)
                                    : HMOE_ERR_FORMAT;
            if (want) {
                snprintf(tname, sizeof tname, "harmony render '%s' byte-identical", name);
                size_t at = got ? first_diff(got, want) : 0;
                t_check(st == HMOE_OK && got && strcmp(got, want) == 0, tname,
                        "differs at byte %zu: got '%.80s' want '%.80s' (%s)", at, got ? got + at : "(null)", want + at,
                        st ? rerr.msg : "");
            } else {
                errors++;
                snprintf(tname, sizeof tname, "harmony '%s' refused as the template refuses", name);
                t_check(st == HMOE_ERR_ARG && !got && rerr.msg[0], tname, "status %d, got '%.80s'", (int)st,
                        got ? got : "(null)");
            }
            free(got);
            hmoe_json_free(c);
        }
        if (!*nl) break;
    }
    free(text);
    t_check(lines >= 50, "gpt-oss-renders.jsonl has at least 50 conversations", "found %d", lines);
    t_check(errors == 5, "gpt-oss-renders.jsonl has the 5 refusal cases", "found %d", errors);
}

static void run_detect(void) {
    struct hmoe_err err = {0};
    char *jinja;
    size_t len;
    if (hmoe_read_file(t_shared("fixtures/chat/gpt-oss-template.jinja"), &jinja, &len, &err) != HMOE_OK) {
        t_check(0, "gpt-oss-template.jinja readable", "%s", err.msg);
        return;
    }
    t_check(hmoe_chat_template_detect(jinja) == HMOE_CHAT_TEMPLATE_HARMONY, "the gpt-oss Jinja template is detected "
            "as harmony", "got %d", (int)hmoe_chat_template_detect(jinja));
    /* A template that only looks like harmony (no tool namespace) is not claimed. */
    char *cut = strstr(jinja, "render_tool_namespace(\"functions\", tools)");
    if (cut) cut[0] = 'X';
    t_check(hmoe_chat_template_detect(jinja) == HMOE_CHAT_TEMPLATE_UNKNOWN,
            "a harmony-like template without the functions namespace stays unknown", "got %d",
            (int)hmoe_chat_template_detect(jinja));
    free(jinja);
    t_check(hmoe_chat_template_from_name("harmony") == HMOE_CHAT_TEMPLATE_HARMONY &&
                strcmp(hmoe_chat_template_name(HMOE_CHAT_TEMPLATE_HARMONY), "harmony") == 0,
            "--chat-template harmony", "not known by name");
}

static void run_today_and_tokens(void) {
    const char *conv = "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}]}";
    struct hmoe_err err = {0};
    struct hmoe_json *c = hmoe_json_parse(conv, strlen(conv), &err);
    char *got = NULL;
    render_case(c, NULL, &got, &err);
    char today[16], want[64];
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    strftime(today, sizeof today, "%Y-%m-%d", &tm);
    snprintf(want, sizeof want, "Current date: %s\n\n", today);
    t_check(got && strstr(got, want), "without a date the system message carries today's date", "got '%.200s'",
            got ? got : "(null)");

    struct hmoe_gguf *g = NULL;
    struct hmoe_vocab *v = NULL;
    if (got && hmoe_gguf_open(t_shared("fixtures/tokenizer/gptoss-vocab.gguf"), &g, &err) == HMOE_OK &&
        hmoe_vocab_load(g, &v, &err) == HMOE_OK) {
        int32_t *ids = NULL;
        size_t n = 0;
        hmoe_tokenize(v, got, strlen(got), true, true, &ids, &n, &err);
        size_t starts = 0, ends = 0, msgs = 0;
        for (size_t i = 0; i < n; i++) starts += ids[i] == 200006, ends += ids[i] == 200007, msgs += ids[i] == 200008;
        t_check(starts == 3 && ends == 2 && msgs == 2 && n > 0 && ids[0] == 200006,
                "a render tokenizes with <|start|> <|message|> <|end|> as single ids", "starts %zu ends %zu msgs %zu",
                starts, ends, msgs);
        free(ids);
    } else {
        t_check(0, "load gptoss-vocab.gguf", "%s", err.msg);
    }
    hmoe_vocab_free(v);
    hmoe_gguf_free(g);
    free(got);
    hmoe_json_free(c);
}

static bool span_is(struct hmoe_harmony_span s, const char *want) {
    return want ? s.p && s.n == strlen(want) && memcmp(s.p, want, s.n) == 0 : s.p == NULL;
}

/* A generated turn split into analysis and final text (what chat keeps as history). */
static void run_reply_split(void) {
    static const struct {
        const char *text, *analysis, *final;
        bool has_final;
    } cases[] = {
        {"<|channel|>analysis<|message|>think<|end|><|start|>assistant<|channel|>final<|message|>answer", "think",
         "answer", true},
        {"<|channel|>final<|message|>answer<|return|>", NULL, "answer", true},
        {"plain text", NULL, "plain text", true},
        {"<|channel|>analysis<|message|>cut off", "cut off", NULL, false},
        {"<|channel|>analysis<|message|>a1<|end|><|start|>assistant<|channel|>analysis<|message|>a2<|end|>", "a2",
         NULL, false},
        {"<|channel|>commentary to=functions.f <|constrain|>json<|message|>{}<|call|>", NULL, NULL, false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct hmoe_harmony_reply r;
        hmoe_chat_harmony_reply(cases[i].text, &r);
        char name[160];
        snprintf(name, sizeof name, "harmony reply split %zu: analysis / final / has_final", i);
        t_check(span_is(r.analysis, cases[i].analysis) && span_is(r.final, cases[i].final) &&
                    r.has_final == cases[i].has_final,
                name, "analysis '%.*s' final '%.*s' has_final %d", (int)r.analysis.n, r.analysis.p ? r.analysis.p : "",
                (int)r.final.n, r.final.p ? r.final.p : "", r.has_final);
    }
}

/* Streaming classification of generated tokens (the chat display): the text of each part. */
static void run_stream(void) {
    struct hmoe_err err = {0};
    struct hmoe_gguf *g = NULL;
    struct hmoe_vocab *v = NULL;
    if (hmoe_gguf_open(t_shared("fixtures/tokenizer/gptoss-vocab.gguf"), &g, &err) || hmoe_vocab_load(g, &v, &err)) {
        t_check(0, "load gptoss-vocab.gguf", "%s", err.msg);
        hmoe_gguf_free(g);
        return;
    }
    static const struct {
        const char *text, *analysis, *final, *other;
    } cases[] = {
        {"<|channel|>analysis<|message|>Let me think.<|end|><|start|>assistant<|channel|>final<|message|>Hi there"
         "<|return|>", "Let me think.", "Hi there", ""},
        {"<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Paris\"}<|call|>", "",
         "", "{\"city\": \"Paris\"}"},
        {"<|channel|>analysis<|message|>a<|end|><|start|>assistant to=functions.f<|channel|>commentary json<|message|>"
         "{}<|call|>", "a", "", "{}"},
        {"plain answer, no header", "", "plain answer, no header", ""},
        {"<|channel|>final<|message|>analysis is a word here<|end|>", "", "analysis is a word here", ""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int32_t *ids = NULL;
        size_t n = 0;
        hmoe_tokenize(v, cases[i].text, strlen(cases[i].text), false, true, &ids, &n, &err);
        struct hmoe_harmony_stream h;
        hmoe_harmony_stream_init(&h, v);
        char part[3][256] = {{0}};
        size_t len[3] = {0};
        for (size_t k = 0; k < n; k++) {
            enum hmoe_harmony_part p = hmoe_harmony_stream_push(&h, v, ids[k]);
            int slot = p == HMOE_HARMONY_ANALYSIS ? 0 : p == HMOE_HARMONY_FINAL ? 1 : p == HMOE_HARMONY_OTHER ? 2 : -1;
            size_t pl;
            const char *pc = hmoe_token_to_piece(v, ids[k], true, &pl);
            if (slot >= 0 && len[slot] + pl < sizeof part[0]) memcpy(part[slot] + len[slot], pc, pl), len[slot] += pl;
        }
        char name[96];
        snprintf(name, sizeof name, "harmony stream case %zu: analysis / final / commentary text", i);
        t_check(strcmp(part[0], cases[i].analysis) == 0 && strcmp(part[1], cases[i].final) == 0 &&
                    strcmp(part[2], cases[i].other) == 0,
                name, "analysis '%s' final '%s' other '%s'", part[0], part[1], part[2]);
        free(ids);
    }
    hmoe_vocab_free(v);
    hmoe_gguf_free(g);
}

int main(void) {
    run_stream();
    run_reply_split();
    run_renders();
    run_detect();
    run_today_and_tokens();
    return t_summary();
}
