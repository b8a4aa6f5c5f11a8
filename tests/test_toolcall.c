/* test_toolcall.c — generated text into content, reasoning and tool calls (text.h), for each
 * template family. Expected values are written out from the formats in chat-templates.md
 * (§1.5 Qwen3, §2.3 Qwen3.5 XML, §3 harmony) and nemotron_h_moe.md §10, not taken from hmoe's
 * output. Every case is also streamed byte by byte, 3 bytes at a time, in uneven and in random
 * pieces: the deltas must add up to the whole-text result, show no partial tag, and give the same
 * calls, and each call's pieces (start once with id and name, indices 0, 1, ... in order) must add
 * up to the arguments it closes with. */
#include <stdint.h>

#include "harness.h"
#include "hmoe/json.h"
#include "hmoe/text.h"

struct want {
    const char *content, *reasoning;
    size_t n_calls;
    const char *names[4], *args[4];
};

static const char *fmt_name(enum hmoe_toolcall_format f) { return hmoe_toolcall_format_name(f); }

static int same_msg(const struct hmoe_toolcalls *a, const struct hmoe_toolcalls *b, char *why, size_t why_len) {
    if (strcmp(a->content, b->content)) return snprintf(why, why_len, "content '%s' vs '%s'", a->content, b->content), 0;
    if (strcmp(a->reasoning, b->reasoning))
        return snprintf(why, why_len, "reasoning '%s' vs '%s'", a->reasoning, b->reasoning), 0;
    if (a->n_calls != b->n_calls) return snprintf(why, why_len, "%zu calls vs %zu", a->n_calls, b->n_calls), 0;
    for (size_t i = 0; i < a->n_calls; i++)
        if (strcmp(a->calls[i].id, b->calls[i].id) || strcmp(a->calls[i].name, b->calls[i].name) ||
            strcmp(a->calls[i].arguments, b->calls[i].arguments))
            return snprintf(why, why_len, "call %zu: %s %s %s vs %s %s %s", i, a->calls[i].id, a->calls[i].name,
                            a->calls[i].arguments, b->calls[i].id, b->calls[i].name, b->calls[i].arguments), 0;
    return 1;
}

/* The calls a stream showed while they were written (the delta's pieces), as a client sums them. */
struct live_calls {
    size_t n;            /* calls begun */
    char *id[64], *name[64], *args[64];
    int closed[64];
    size_t pieces[64];   /* pieces of each call */
};

static void live_free(struct live_calls *l) {
    for (size_t i = 0; i < l->n; i++) free(l->id[i]), free(l->name[i]), free(l->args[i]);
    memset(l, 0, sizeof *l);
}

/* Add a delta's pieces: a call's first piece (id, name) opens the next index, later pieces carry
 * only arguments for the call being written; closed calls must match what their pieces summed to. */
static int live_add(struct live_calls *l, const struct hmoe_toolcall_delta *d, char *why, size_t why_len) {
    for (size_t i = 0; i < d->n_pieces; i++) {
        const struct hmoe_toolcall_piece *pc = &d->pieces[i];
        if (pc->id || pc->name) {
            if (!pc->id || !pc->name || !*pc->name || pc->index != l->n || l->n >= 64)
                return snprintf(why, why_len, "a call start with index %zu (%zu begun) id %s name %s", pc->index, l->n,
                                pc->id ? pc->id : "-", pc->name ? pc->name : "-"), 0;
            l->id[l->n] = strdup(pc->id);
            l->name[l->n] = strdup(pc->name);
            l->args[l->n] = calloc(1, 1);
            l->closed[l->n] = 0;
            l->pieces[l->n] = 0;
            l->n++;
        } else if (!l->n || pc->index != l->n - 1 || l->closed[pc->index]) {
            return snprintf(why, why_len, "arguments for index %zu, not the open call (%zu begun)", pc->index, l->n), 0;
        }
        if (memchr(pc->args, 0, pc->args_len)) return snprintf(why, why_len, "a NUL in a piece"), 0;
        l->pieces[pc->index]++;
        char **a = &l->args[pc->index];
        size_t n = strlen(*a);
        *a = realloc(*a, n + pc->args_len + 1);
        memcpy(*a + n, pc->args, pc->args_len);
        (*a)[n + pc->args_len] = 0;
    }
    for (size_t i = 0; i < d->n_calls; i++) {
        size_t k = 0;
        while (k < l->n && strcmp(l->id[k], d->calls[i].id) != 0) k++;
        if (k == l->n) return snprintf(why, why_len, "call %s closed without its pieces", d->calls[i].id), 0;
        for (size_t j = k + 1; j < l->n; j++)
            if (l->closed[j]) return snprintf(why, why_len, "call %zu closed after call %zu", k, j), 0;
        if (l->closed[k]) return snprintf(why, why_len, "call %zu closed twice", k), 0;
        if (strcmp(l->name[k], d->calls[i].name) || strcmp(l->args[k], d->calls[i].arguments))
            return snprintf(why, why_len, "call %zu streamed as %s '%s', closed as %s '%s'", k, l->name[k], l->args[k],
                            d->calls[i].name, d->calls[i].arguments), 0;
        l->closed[k] = 1;
    }
    return 1;
}

enum { STEP_RANDOM = 1000 }; /* random piece sizes 1..16 */

/* Stream `text` in pieces of `step` bytes (0: uneven sizes 1, 2, 3, 5, 8, ...; STEP_RANDOM: random
 * sizes). The deltas are collected into *got (and the calls as they streamed into *live when it is
 * not NULL); returns 0 and a reason on any inconsistency. */
static int stream_text_live(enum hmoe_toolcall_format fmt, const struct hmoe_toolcall_opts *opts, const char *text,
                            size_t len, size_t step, struct hmoe_toolcalls *got, struct live_calls *live, char *why,
                            size_t why_len) {
    struct hmoe_err err = {0};
    struct hmoe_toolcall_stream *s = NULL;
    memset(got, 0, sizeof *got);
    if (hmoe_toolcall_stream_new(fmt, opts, &s, &err)) { snprintf(why, why_len, "new: %s", err.msg); return 0; }
    size_t cap = len + 64;
    char *content = calloc(1, cap), *reasoning = calloc(1, cap);
    size_t nc = 0, nr = 0, n_calls = 0;
    struct hmoe_toolcall calls[16];
    int ok = 1;
    size_t sizes[] = {1, 2, 3, 5, 8, 13, 4, 1, 1, 7};
    uint64_t rng = len * 2654435761u + 1;
    struct live_calls lc = {0};
    for (size_t at = 0, k = 0; at <= len && ok; k++) {
        struct hmoe_toolcall_delta d;
        int rc;
        if (at == len) {
            rc = hmoe_toolcall_stream_finish(s, &d, &err);
            at++;
        } else {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            size_t n = step == STEP_RANDOM ? 1 + (size_t)((rng >> 33) % 16) : step ? step : sizes[k % 10];
            if (n > len - at) n = len - at;
            rc = hmoe_toolcall_stream_feed(s, text + at, n, &d, &err);
            at += n;
        }
        if (rc) { snprintf(why, why_len, "feed: %s", err.msg); ok = 0; break; }
        if (nc + d.content_len >= cap || nr + d.reasoning_len >= cap) { snprintf(why, why_len, "delta too long"); ok = 0; break; }
        memcpy(content + nc, d.content, d.content_len), nc += d.content_len;
        memcpy(reasoning + nr, d.reasoning, d.reasoning_len), nr += d.reasoning_len;
        if (!live_add(&lc, &d, why, why_len)) { ok = 0; break; }
        for (size_t i = 0; i < d.n_calls && n_calls < 16; i++) {
            calls[n_calls].id = strdup(d.calls[i].id);
            calls[n_calls].name = strdup(d.calls[i].name);
            calls[n_calls].arguments = strdup(d.calls[i].arguments);
            n_calls++;
        }
    }
    struct hmoe_toolcalls res;
    if (ok && hmoe_toolcall_stream_result(s, &res, &err)) { snprintf(why, why_len, "result: %s", err.msg); ok = 0; }
    if (ok) {
        /* What the deltas showed must be exactly the final message. */
        got->content = content;
        got->reasoning = reasoning;
        got->calls = calls;
        got->n_calls = n_calls;
        ok = same_msg(got, &res, why, why_len);
        hmoe_toolcalls_free(&res);
    }
    for (size_t i = 0; i < n_calls; i++) free(calls[i].id), free(calls[i].name), free(calls[i].arguments);
    /* got keeps only the texts (the calls were compared above) */
    got->calls = NULL;
    got->n_calls = 0;
    if (!ok) free(content), free(reasoning), got->content = got->reasoning = NULL;
    hmoe_toolcall_stream_free(s);
    if (live) *live = lc;
    else live_free(&lc);
    return ok;
}

static int stream_text(enum hmoe_toolcall_format fmt, const struct hmoe_toolcall_opts *opts, const char *text,
                       size_t len, size_t step, struct hmoe_toolcalls *got, char *why, size_t why_len) {
    return stream_text_live(fmt, opts, text, len, step, got, NULL, why, why_len);
}

/* Parse `text` whole, compare with `w`, then stream it three ways and compare again. */
static void check_case(const char *name, enum hmoe_toolcall_format fmt, const struct hmoe_toolcall_opts *opts_in,
                       const char *text, const struct want *w) {
    char label[256], why[1024] = "";
    struct hmoe_toolcall_opts opts = opts_in ? *opts_in : (struct hmoe_toolcall_opts){0};
    if (!opts.id_seed) opts.id_seed = 12345;
    struct hmoe_toolcalls tc;
    struct hmoe_err err = {0};
    int rc = hmoe_toolcall_parse_opts(fmt, &opts, text, strlen(text), &tc, &err);
    int ok = rc == 0;
    if (!ok) snprintf(why, sizeof why, "rc %d: %s", rc, err.msg);
    if (ok && strcmp(tc.content, w->content)) ok = 0, snprintf(why, sizeof why, "content '%s', want '%s'", tc.content, w->content);
    if (ok && strcmp(tc.reasoning, w->reasoning ? w->reasoning : ""))
        ok = 0, snprintf(why, sizeof why, "reasoning '%s', want '%s'", tc.reasoning, w->reasoning);
    if (ok && tc.n_calls != w->n_calls) ok = 0, snprintf(why, sizeof why, "%zu calls, want %zu", tc.n_calls, w->n_calls);
    for (size_t i = 0; ok && i < w->n_calls; i++) {
        if (strcmp(tc.calls[i].name, w->names[i]) || strcmp(tc.calls[i].arguments, w->args[i]))
            ok = 0, snprintf(why, sizeof why, "call %zu: %s %s, want %s %s", i, tc.calls[i].name, tc.calls[i].arguments,
                             w->names[i], w->args[i]);
        /* every arguments text is JSON */
        struct hmoe_err jerr = {0};
        struct hmoe_json *j = ok ? hmoe_json_parse(tc.calls[i].arguments, strlen(tc.calls[i].arguments), &jerr) : NULL;
        if (ok && !j) ok = 0, snprintf(why, sizeof why, "call %zu arguments not JSON: %s", i, jerr.msg);
        hmoe_json_free(j);
    }
    snprintf(label, sizeof label, "toolcall %s: %s", fmt_name(fmt), name);
    t_check(ok, label, "%s", why);
    if (rc) return;
    static const size_t steps[] = {1, 3, 0, STEP_RANDOM, 4096};
    static const char *const step_names[] = {"byte by byte", "3 bytes at a time", "in uneven pieces",
                                             "in random pieces", "in one piece"};
    for (int k = 0; k < 5; k++) {
        struct hmoe_toolcalls st;
        why[0] = 0;
        int sok = stream_text(fmt, &opts, text, strlen(text), steps[k], &st, why, sizeof why);
        /* the streamed deltas add up to the whole-text result (stream_text compared the calls) */
        if (sok && (strcmp(st.content, tc.content) || strcmp(st.reasoning, tc.reasoning)))
            sok = 0, snprintf(why, sizeof why, "streamed content '%s' reasoning '%s'", st.content, st.reasoning);
        snprintf(label, sizeof label, "toolcall %s: %s, streamed %s", fmt_name(fmt), name, step_names[k]);
        t_check(sok, label, "%s", why);
        free(st.content);
        free(st.reasoning);
    }
    hmoe_toolcalls_free(&tc);
}

#define W(...) (&(struct want){__VA_ARGS__})

static void test_qwen3(void) {
    enum hmoe_toolcall_format f = HMOE_TOOLCALL_QWEN3_JSON;
    check_case("plain answer", f, NULL, "Hello world!", W(.content = "Hello world!"));
    check_case("think block then answer", f, NULL, "<think>\nLet me add.\n2+2=4.\n</think>\n\nThe answer is 4.",
               W(.content = "The answer is 4.", .reasoning = "Let me add.\n2+2=4."));
    check_case("empty think block (thinking off)", f, NULL, "<think>\n\n</think>\n\nHi.", W(.content = "Hi."));
    check_case("one call", f, NULL,
               "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
               W(.content = "", .n_calls = 1, .names = {"get_weather"}, .args = {"{\"city\": \"Paris\"}"}));
    check_case("think, content, two calls in a row", f, NULL,
               "<think>\nI need the weather.\n</think>\n\nLet me check.\n<tool_call>\n{\"name\": \"get_weather\", "
               "\"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_weather\", "
               "\"arguments\": {\"city\": \"London\", \"days\": 3}}\n</tool_call>",
               W(.content = "Let me check.", .reasoning = "I need the weather.", .n_calls = 2,
                 .names = {"get_weather", "get_weather"},
                 .args = {"{\"city\": \"Paris\"}", "{\"city\": \"London\", \"days\": 3}"}));
    check_case("nested JSON arguments", f, NULL,
               "<tool_call>\n{\"name\":\"search\",\"arguments\":{\"filter\":{\"tags\":[\"a\",\"b\"],\"range\":{\"min\":1,"
               "\"max\":2.5e3}},\"flag\":true,\"none\":null,\"big\":12345678901234567890}}\n</tool_call>",
               W(.content = "", .n_calls = 1, .names = {"search"},
                 .args = {"{\"filter\": {\"tags\": [\"a\", \"b\"], \"range\": {\"min\": 1, \"max\": 2.5e3}}, "
                          "\"flag\": true, \"none\": null, \"big\": 12345678901234567890}"}));
    check_case("unicode in content and arguments", f, NULL,
               "Grüße 😀\n<tool_call>\n{\"name\": \"translate\", \"arguments\": {\"text\": \"日本語\", \"to\": "
               "\"Zürich \\u00e9\"}}\n</tool_call>",
               W(.content = "Grüße 😀", .n_calls = 1, .names = {"translate"},
                 .args = {"{\"text\": \"日本語\", \"to\": \"Zürich é\"}"}));
    check_case("text after a call", f, NULL,
               "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>\n\nDone.",
               W(.content = "Done.", .n_calls = 1, .names = {"f"}, .args = {"{}"}));
    check_case("arguments as a JSON string", f, NULL,
               "<tool_call>\n{\"name\": \"f\", \"arguments\": \"{\\\"x\\\":1}\"}\n</tool_call>",
               W(.content = "", .n_calls = 1, .names = {"f"}, .args = {"{\"x\":1}"}));
    check_case("no arguments", f, NULL, "<tool_call>\n{\"name\": \"now\"}\n</tool_call>",
               W(.content = "", .n_calls = 1, .names = {"now"}, .args = {"{}"}));
    check_case("truncated call stays content", f, NULL, "Sure.\n<tool_call>\n{\"name\": \"f\", \"argu",
               W(.content = "Sure.\n<tool_call>\n{\"name\": \"f\", \"argu"));
    check_case("bad JSON stays content", f, NULL,
               "Try:\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": }}\n</tool_call>\nok",
               W(.content = "Try:\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": }}\n</tool_call>\nok"));
    check_case("a call without a name stays content", f, NULL, "<tool_call>\n{\"arguments\": {}}\n</tool_call>",
               W(.content = "<tool_call>\n{\"arguments\": {}}\n</tool_call>"));
    check_case("a bad call between good ones", f, NULL,
               "<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n[1]\n</tool_call>\n"
               "<tool_call>\n{\"name\": \"b\", \"arguments\": {\"k\": [1, {\"z\": \"}\"}]}}\n</tool_call>",
               W(.content = "<tool_call>\n[1]\n</tool_call>", .n_calls = 2, .names = {"a", "b"},
                 .args = {"{}", "{\"k\": [1, {\"z\": \"}\"}]}"}));
    check_case("a call inside the think block is reasoning", f, NULL,
               "<think>\nmaybe <tool_call>x</tool_call>\n</think>\nNo call.",
               W(.content = "No call.", .reasoning = "maybe <tool_call>x</tool_call>"));
    check_case("angle brackets that are no tag", f, NULL, "a < b, <b>bold</b> and <tool",
               W(.content = "a < b, <b>bold</b> and <tool"));
    check_case("unclosed think is all reasoning", f, NULL, "<think>\nstill thinking about",
               W(.content = "", .reasoning = "still thinking about"));
    check_case("<think> after text is content", f, NULL, "Hi <think>x</think>", W(.content = "Hi <think>x</think>"));
    check_case("empty text", f, NULL, "", W(.content = ""));
    struct hmoe_toolcall_opts keep = {.think_in_content = true};
    check_case("think block kept in the content (--reasoning-format none)", f, &keep,
               "<think>\nLet me add.\n</think>\n\nIt is 4.\n<tool_call>\n{\"name\": \"f\"}\n</tool_call>",
               W(.content = "<think>\nLet me add.\n</think>\n\nIt is 4.", .n_calls = 1, .names = {"f"}, .args = {"{}"}));
    struct hmoe_toolcall_opts keep_open = {.think_in_content = true, .in_think = true};
    check_case("open think kept in the content", f, &keep_open, "Hmm.\n</think>\nYes.",
               W(.content = "Hmm.\n</think>\nYes."));
    struct hmoe_toolcall_opts in_think = {.in_think = true};
    check_case("prompt opened <think>", f, &in_think, "Thinking 2507 style.\n</think>\n\nAnswer.",
               W(.content = "Answer.", .reasoning = "Thinking 2507 style."));
}

static const char *const WEATHER_TOOLS[] = {
    "{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Weather\", \"parameters\": "
    "{\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}, \"days\": {\"type\": \"integer\"}, "
    "\"zip\": {\"type\": \"string\"}, \"opts\": {\"type\": \"object\"}, \"units\": {\"enum\": [\"c\", \"f\"]}, "
    "\"note\": {\"type\": [\"string\", \"null\"]}, \"tags\": {\"type\": \"array\", \"items\": {\"type\": "
    "\"string\"}}}, \"required\": [\"city\"]}}}",
    /* a bare function (no "type": "function" wrapper) */
    "{\"name\": \"write_file\", \"parameters\": {\"type\": \"object\", \"properties\": {\"path\": {\"type\": "
    "\"string\"}, \"content\": {\"type\": \"string\"}, \"mode\": {\"anyOf\": [{\"type\": \"string\"}, {\"type\": "
    "\"null\"}]}}}}",
    "not json",
};

static void test_xml(enum hmoe_toolcall_format f) {
    struct hmoe_toolcall_opts tools = {.tools = WEATHER_TOOLS, .n_tools = 3};
    check_case("one call, values typed by the schema", f, &tools,
               "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n"
               "</parameter>\n</function>\n</tool_call>",
               W(.content = "", .n_calls = 1, .names = {"get_weather"}, .args = {"{\"city\":\"Paris\",\"days\":3}"}));
    check_case("string parameters stay strings", f, &tools,
               "<tool_call>\n<function=get_weather>\n<parameter=city>\n42\n</parameter>\n<parameter=zip>\n01234\n"
               "</parameter>\n<parameter=units>\nc\n</parameter>\n<parameter=note>\nnull\n</parameter>\n</function>\n"
               "</tool_call>",
               W(.content = "", .n_calls = 1, .names = {"get_weather"},
                 .args = {"{\"city\":\"42\",\"zip\":\"01234\",\"units\":\"c\",\"note\":\"null\"}"}));
    check_case("object and array parameters are JSON", f, &tools,
               "<tool_call>\n<function=get_weather>\n<parameter=city>\nRome\n</parameter>\n<parameter=opts>\n"
               "{\"hourly\": true, \"n\": [1, 2]}\n</parameter>\n<parameter=tags>\n[\"a\", \"b\"]\n</parameter>\n"
               "</function>\n</tool_call>",
               W(.content = "", .n_calls = 1, .names = {"get_weather"},
                 .args = {"{\"city\":\"Rome\",\"opts\":{\"hourly\":true,\"n\":[1,2]},\"tags\":[\"a\",\"b\"]}"}));
    check_case("Python's True / None (how the template writes them) are JSON true / null", f, &tools,
               "<tool_call>\n<function=get_weather>\n<parameter=opts>\nTrue\n</parameter>\n<parameter=x>\nNone\n"
               "</parameter>\n<parameter=city>\nTrue\n</parameter>\n<parameter=days>\n2.0\n</parameter>\n</function>\n"
               "</tool_call>",
               W(.content = "", .n_calls = 1, .names = {"get_weather"},
                 .args = {"{\"opts\":true,\"x\":null,\"city\":\"True\",\"days\":2.0}"}));
    check_case("a non-JSON value for a typed parameter stays a string", f, &tools,
               "<tool_call>\n<function=get_weather>\n<parameter=days>\nthree\n</parameter>\n</function>\n</tool_call>",
               W(.content = "", .n_calls = 1, .names = {"get_weather"}, .args = {"{\"days\":\"three\"}"}));
    check_case("multi-line string value, quotes and backslashes", f, &tools,
               "<tool_call>\n<function=write_file>\n<parameter=path>\n/tmp/a \"b\".txt\n</parameter>\n<parameter=content>\n"
               "line 1\n\tline 2 \\ end\n\n</parameter>\n<parameter=mode>\n644\n</parameter>\n</function>\n</tool_call>",
               W(.content = "", .n_calls = 1, .names = {"write_file"},
                 .args = {"{\"path\":\"/tmp/a \\\"b\\\".txt\",\"content\":\"line 1\\n\\tline 2 \\\\ end\\n\",\"mode\":\"644\"}"}));
    check_case("untyped parameters: JSON when they parse", f, NULL,
               "<tool_call>\n<function=f>\n<parameter=n>\n42\n</parameter>\n<parameter=s>\nParis\n</parameter>\n"
               "<parameter=b>\ntrue\n</parameter>\n<parameter=o>\n{\"a\": [1, 2]}\n</parameter>\n</function>\n</tool_call>",
               W(.content = "", .n_calls = 1, .names = {"f"},
                 .args = {"{\"n\":42,\"s\":\"Paris\",\"b\":true,\"o\":{\"a\":[1,2]}}"}));
    check_case("reasoning, content and two calls", f, &tools,
               "<think>\nTwo cities.\n</think>\n\nChecking both.\n\n<tool_call>\n<function=get_weather>\n"
               "<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=get_weather>\n"
               "<parameter=city>\nSão Paulo\n</parameter>\n<parameter=days>\n2\n</parameter>\n</function>\n</tool_call>",
               W(.content = "Checking both.", .reasoning = "Two cities.", .n_calls = 2,
                 .names = {"get_weather", "get_weather"},
                 .args = {"{\"city\":\"Paris\"}", "{\"city\":\"São Paulo\",\"days\":2}"}));
    check_case("no parameters", f, NULL, "<tool_call>\n<function=now>\n</function>\n</tool_call>",
               W(.content = "", .n_calls = 1, .names = {"now"}, .args = {"{}"}));
    check_case("a missing </parameter>", f, NULL,
               "<tool_call>\n<function=f>\n<parameter=a>\n1\n<parameter=b>\nx y\n</function>\n</tool_call>",
               W(.content = "", .n_calls = 1, .names = {"f"}, .args = {"{\"a\":1,\"b\":\"x y\"}"}));
    check_case("unicode names and values", f, NULL,
               "<tool_call>\n<function=übersetze>\n<parameter=text>\n日本語 😀\n</parameter>\n</function>\n</tool_call>",
               W(.content = "", .n_calls = 1, .names = {"übersetze"}, .args = {"{\"text\":\"日本語 😀\"}"}));
    check_case("text after </function> stays content", f, NULL,
               "<tool_call>\n<function=f>\n<parameter=x>\n1\n</parameter>\n</function>\ngarbage\n</tool_call>",
               W(.content = "<tool_call>\n<function=f>\n<parameter=x>\n1\n</parameter>\n</function>\ngarbage\n</tool_call>"));
    check_case("JSON inside <tool_call> is not the XML form", f, NULL,
               "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>",
               W(.content = "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>"));
    check_case("a call cut off stays content", f, &tools,
               "Calling.\n\n<tool_call>\n<function=get_weather>\n<parameter=city>\nPar",
               W(.content = "Calling.\n\n<tool_call>\n<function=get_weather>\n<parameter=city>\nPar"));
    check_case("an empty function name stays content", f, NULL, "<tool_call>\n<function=>\n</function>\n</tool_call>",
               W(.content = "<tool_call>\n<function=>\n</function>\n</tool_call>"));
    struct hmoe_toolcall_opts in_think = {.tools = WEATHER_TOOLS, .n_tools = 3, .in_think = true};
    check_case("the prompt opened <think>", f, &in_think,
               "The user wants weather.\n</think>\n\n<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n"
               "</parameter>\n</function>\n</tool_call>",
               W(.content = "", .reasoning = "The user wants weather.", .n_calls = 1, .names = {"get_weather"},
                 .args = {"{\"city\":\"Oslo\"}"}));
    check_case("the prompt opened <think>, cut off inside it", f, &in_think, "Still thinking <tool_call>",
               W(.content = "", .reasoning = "Still thinking <tool_call>"));
}

static void test_harmony(void) {
    enum hmoe_toolcall_format f = HMOE_TOOLCALL_HARMONY;
    check_case("analysis then final", f, NULL,
               "<|channel|>analysis<|message|>User asks 2+2. Answer 4.<|end|><|start|>assistant<|channel|>final"
               "<|message|>2 + 2 = 4.",
               W(.content = "2 + 2 = 4.", .reasoning = "User asks 2+2. Answer 4."));
    check_case("final ended by <|return|>", f, NULL, "<|channel|>final<|message|>Hello there.<|return|>",
               W(.content = "Hello there."));
    check_case("a call after analysis (stopped at <|call|>)", f, NULL,
               "<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant<|channel|>commentary "
               "to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Paris\"}",
               W(.content = "", .reasoning = "Need the weather.", .n_calls = 1, .names = {"get_weather"},
                 .args = {"{\"city\":\"Paris\"}"}));
    check_case("recipient before the channel, <|call|> present", f, NULL,
               "<|start|>assistant to=functions.lookup<|channel|>commentary json<|message|>{\"q\": \"日本\", "
               "\"n\": [1, {\"x\": null}]}<|call|>",
               W(.content = "", .n_calls = 1, .names = {"lookup"}, .args = {"{\"q\": \"日本\", \"n\": [1, {\"x\": null}]}"}));
    check_case("commentary preamble is content", f, NULL,
               "<|channel|>commentary<|message|>Let me look that up.<|end|><|start|>assistant<|channel|>commentary "
               "to=functions.search<|message|>{}",
               W(.content = "Let me look that up.", .n_calls = 1, .names = {"search"}, .args = {"{}"}));
    check_case("bad JSON arguments stay content", f, NULL,
               "<|channel|>commentary to=functions.f<|message|>{\"a\": <|call|>",
               W(.content = "{\"a\":"));
    check_case("plain text without harmony headers", f, NULL, "Just text, no channels.",
               W(.content = "Just text, no channels."));
    check_case("a header cut off shows nothing", f, NULL,
               "<|channel|>analysis<|message|>Hmm.<|end|><|start|>assistant<|channel|>fin",
               W(.content = "", .reasoning = "Hmm."));
    check_case("analysis cut off", f, NULL, "<|channel|>analysis<|message|>Thinking about <|",
               W(.content = "", .reasoning = "Thinking about <|"));
    check_case("a <| inside the final text", f, NULL, "<|channel|>final<|message|>a <|b|> c",
               W(.content = "a <|b|> c"));
    check_case("two analysis messages", f, NULL,
               "<|channel|>analysis<|message|>One.<|end|><|start|>assistant<|channel|>analysis<|message|> Two.<|end|>"
               "<|start|>assistant<|channel|>final<|message|>Done.",
               W(.content = "Done.", .reasoning = "One. Two."));
    /* A model ignoring harmony for more than a header's worth of text: all of it is content. */
    static char long_text[3000];
    for (size_t i = 0; i < sizeof long_text - 1; i++) long_text[i] = "abcdefg <xyz> "[i % 14];
    long_text[sizeof long_text - 1] = 0;
    size_t end = sizeof long_text - 2;
    while (long_text[end] == ' ') long_text[end--] = 0;
    check_case("long text without headers", f, NULL, long_text, W(.content = long_text));
    /* Past a header's worth of text the decision is made on the first 1024 bytes alone, so every
     * split of the text agrees; the headers after it still work. */
    static char junk[2000];
    memset(junk, 'x', 1500);
    strcpy(junk + 1500, "<|channel|>final<|message|>Hi<|end|><|start|>assistant<|channel|>commentary "
                        "to=functions.f<|message|>{\"a\":1}");
    struct hmoe_toolcall_opts o = {.id_seed = 3};
    struct hmoe_toolcalls whole, st;
    struct hmoe_err err = {0};
    char why[1024] = "";
    int ok = hmoe_toolcall_parse_opts(f, &o, junk, strlen(junk), &whole, &err) == 0;
    ok = ok && whole.n_calls == 1 && strcmp(whole.calls[0].name, "f") == 0 && strncmp(whole.content, junk, 1024) == 0 &&
         strcmp(whole.content + strlen(whole.content) - 2, "Hi") == 0;
    for (size_t step = 0; ok && step < 3; step++) {
        ok = stream_text(f, &o, junk, strlen(junk), step, &st, why, sizeof why) && strcmp(st.content, whole.content) == 0;
        free(st.content);
        free(st.reasoning);
    }
    t_check(ok, "toolcall harmony: 1500 bytes without a header, then headers", "%s", why);
    if (whole.content) hmoe_toolcalls_free(&whole);
}

static void test_none(void) {
    enum hmoe_toolcall_format f = HMOE_TOOLCALL_NONE;
    check_case("think split, calls left alone", f, NULL,
               "<think>a</think>b <tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>",
               W(.content = "b <tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>", .reasoning = "a"));
}

static void test_nemotron(void) {
    /* Nemotron-3 opens <think> in its generation prompt; thinking off renders <think></think>. */
    const char *on = "<|im_start|>assistant\n<think>\n", *off = "<|im_start|>assistant\n<think></think>";
    t_check(hmoe_toolcall_prompt_in_think(on, strlen(on)), "toolcall prompt_in_think: Nemotron thinking on", "false");
    t_check(!hmoe_toolcall_prompt_in_think(off, strlen(off)), "toolcall prompt_in_think: Nemotron thinking off", "true");
    const char *q35 = "<|im_start|>assistant\n<think>\n\n</think>\n\n", *q3 = "<|im_start|>assistant\n";
    t_check(!hmoe_toolcall_prompt_in_think(q35, strlen(q35)) && !hmoe_toolcall_prompt_in_think(q3, strlen(q3)) &&
                !hmoe_toolcall_prompt_in_think(NULL, 0),
            "toolcall prompt_in_think: closed or no think block", "true");
    struct hmoe_toolcall_opts o = {.in_think = hmoe_toolcall_prompt_in_think(on, strlen(on))};
    check_case("thinking on: reasoning then a call", HMOE_TOOLCALL_NEMOTRON, &o,
               "Need files.\n</think>\nListing.\n<tool_call>\n<function=ls>\n<parameter=dir>\n/tmp\n</parameter>\n"
               "</function>\n</tool_call>\n",
               W(.content = "Listing.", .reasoning = "Need files.", .n_calls = 1, .names = {"ls"},
                 .args = {"{\"dir\":\"/tmp\"}"}));
}

/* The whole-text form finds the open <think> by itself. */
static void test_parse_infers_think(void) {
    struct hmoe_toolcalls tc;
    struct hmoe_err err = {0};
    const char *t = "Reasoning here.\n</think>\n\nAnswer.";
    int rc = hmoe_toolcall_parse(HMOE_TOOLCALL_QWEN35_XML, t, strlen(t), &tc, &err);
    t_check(rc == 0 && strcmp(tc.reasoning, "Reasoning here.") == 0 && strcmp(tc.content, "Answer.") == 0,
            "toolcall parse: a lone </think> means the prompt opened <think>", "rc %d '%s' '%s'", rc,
            rc ? "" : tc.reasoning, rc ? "" : tc.content);
    if (!rc) hmoe_toolcalls_free(&tc);
    t = "<think>\na\n</think>\nb</think>c";
    rc = hmoe_toolcall_parse(HMOE_TOOLCALL_QWEN3_JSON, t, strlen(t), &tc, &err);
    t_check(rc == 0 && strcmp(tc.reasoning, "a") == 0 && strcmp(tc.content, "b</think>c") == 0,
            "toolcall parse: <think> first is an ordinary block", "rc %d", rc);
    if (!rc) hmoe_toolcalls_free(&tc);
}

static int is_id(const char *id) {
    if (strlen(id) != 29 || strncmp(id, "call_", 5) != 0) return 0;
    for (int i = 5; i < 29; i++)
        if (!((id[i] >= 'a' && id[i] <= 'z') || (id[i] >= 'A' && id[i] <= 'Z') || (id[i] >= '0' && id[i] <= '9')))
            return 0;
    return 1;
}

static void test_ids(void) {
    const char *t = "<tool_call>\n{\"name\": \"a\"}\n</tool_call><tool_call>\n{\"name\": \"b\"}\n</tool_call>";
    struct hmoe_toolcalls a, b, c, d;
    struct hmoe_err err = {0};
    struct hmoe_toolcall_opts s1 = {.id_seed = 7}, s2 = {.id_seed = 8};
    int rc = hmoe_toolcall_parse_opts(HMOE_TOOLCALL_QWEN3_JSON, &s1, t, strlen(t), &a, &err) |
             hmoe_toolcall_parse_opts(HMOE_TOOLCALL_QWEN3_JSON, &s1, t, strlen(t), &b, &err) |
             hmoe_toolcall_parse_opts(HMOE_TOOLCALL_QWEN3_JSON, &s2, t, strlen(t), &c, &err) |
             hmoe_toolcall_parse(HMOE_TOOLCALL_QWEN3_JSON, t, strlen(t), &d, &err);
    t_check(rc == 0 && a.n_calls == 2 && c.n_calls == 2 && d.n_calls == 2, "toolcall ids: parsed", "rc %d", rc);
    if (rc || a.n_calls != 2 || c.n_calls != 2 || d.n_calls != 2) return;
    t_check(is_id(a.calls[0].id) && is_id(a.calls[1].id) && is_id(c.calls[0].id) && is_id(d.calls[0].id),
            "toolcall ids: call_ + 24 letters and digits", "%s %s", a.calls[0].id, d.calls[0].id);
    t_check(strcmp(a.calls[0].id, a.calls[1].id) != 0, "toolcall ids: two calls differ", "%s", a.calls[0].id);
    t_check(strcmp(a.calls[0].id, b.calls[0].id) == 0 && strcmp(a.calls[1].id, b.calls[1].id) == 0,
            "toolcall ids: the same seed gives the same ids", "%s %s", a.calls[0].id, b.calls[0].id);
    t_check(strcmp(a.calls[0].id, c.calls[0].id) != 0, "toolcall ids: another seed, other ids", "%s", a.calls[0].id);
    hmoe_toolcalls_free(&a), hmoe_toolcalls_free(&b), hmoe_toolcalls_free(&c), hmoe_toolcalls_free(&d);
}

/* What a stream may show before the rest arrives. */
static void test_hold_back(void) {
    struct hmoe_toolcall_stream *s = NULL;
    struct hmoe_err err = {0};
    struct hmoe_toolcall_delta d;
    int ok = hmoe_toolcall_stream_new(HMOE_TOOLCALL_QWEN3_JSON, NULL, &s, &err) == 0;
    ok = ok && hmoe_toolcall_stream_feed(s, "Hello <tool_", 12, &d, &err) == 0 && d.content_len == 5 &&
         memcmp(d.content, "Hello", 5) == 0;
    t_check(ok, "toolcall stream: a possible tag start is held back", "got '%.*s'", (int)d.content_len, d.content);
    ok = ok && hmoe_toolcall_stream_feed(s, "call>\n{\"name\": \"f\"}\n</tool_call", 31, &d, &err) == 0 &&
         d.content_len == 0 && d.n_calls == 0;
    t_check(ok, "toolcall stream: an open call shows no content", "got '%.*s' %zu calls", (int)d.content_len, d.content,
            d.n_calls);
    ok = ok && hmoe_toolcall_stream_feed(s, ">", 1, &d, &err) == 0 && d.n_calls == 1 && strcmp(d.calls[0].name, "f") == 0;
    t_check(ok, "toolcall stream: the call comes out when it closes", "%zu calls", d.n_calls);
    ok = ok && hmoe_toolcall_stream_feed(s, " <t", 3, &d, &err) == 0 && d.content_len == 0 &&
         hmoe_toolcall_stream_feed(s, ">x", 2, &d, &err) == 0 && d.content_len == 5 && memcmp(d.content, " <t>x", 5) == 0;
    t_check(ok, "toolcall stream: '<t' is released once it cannot be a tag", "got '%.*s'", (int)d.content_len, d.content);
    ok = ok && hmoe_toolcall_stream_finish(s, &d, &err) == 0;
    int again = hmoe_toolcall_stream_feed(s, "x", 1, &d, &err);
    t_check(ok && again == HMOE_ERR_ARG, "toolcall stream: feeding after finish is an error", "rc %d", again);
    hmoe_toolcall_stream_free(s);
    int bad = hmoe_toolcall_stream_new((enum hmoe_toolcall_format)99, NULL, &s, &err);
    t_check(bad == HMOE_ERR_ARG && s == NULL, "toolcall stream: an unknown format is an error", "rc %d", bad);
}

static void test_format_for(void) {
    t_check(hmoe_toolcall_format_for(HMOE_CHAT_TEMPLATE_QWEN3, NULL) == HMOE_TOOLCALL_QWEN3_JSON &&
                hmoe_toolcall_format_for(HMOE_CHAT_TEMPLATE_QWEN35, NULL) == HMOE_TOOLCALL_QWEN35_XML &&
                hmoe_toolcall_format_for(HMOE_CHAT_TEMPLATE_NEMOTRON, NULL) == HMOE_TOOLCALL_NEMOTRON &&
                hmoe_toolcall_format_for(HMOE_CHAT_TEMPLATE_HARMONY, NULL) == HMOE_TOOLCALL_HARMONY &&
                hmoe_toolcall_format_for(HMOE_CHAT_TEMPLATE_CHATML, NULL) == HMOE_TOOLCALL_NONE,
            "toolcall format_for: the built-in families", "mismatch");
    char *jinja = NULL;
    size_t n = 0;
    struct hmoe_err err = {0};
    int rc = hmoe_read_file(t_shared("fixtures/chat/qwen3-template.jinja"), &jinja, &n, &err);
    t_check(rc == 0 && hmoe_toolcall_format_for(hmoe_chat_template_detect(jinja), jinja) == HMOE_TOOLCALL_QWEN3_JSON &&
                hmoe_toolcall_format_for(HMOE_CHAT_TEMPLATE_UNKNOWN, jinja) == HMOE_TOOLCALL_QWEN3_JSON,
            "toolcall format_for: the Qwen3 fixture template", "rc %d %s", rc, err.msg);
    free(jinja);
    const char *harmony = "{{- '<|start|>assistant<|channel|>final<|message|>' + m.content + '<|end|>' }}";
    const char *xml = "{{- '<tool_call>\\n<function=' + tool_call.name + '>\\n' }}";
    t_check(hmoe_toolcall_format_for(HMOE_CHAT_TEMPLATE_UNKNOWN, harmony) == HMOE_TOOLCALL_HARMONY &&
                hmoe_toolcall_format_for(HMOE_CHAT_TEMPLATE_CHATML, xml) == HMOE_TOOLCALL_QWEN35_XML &&
                hmoe_toolcall_format_for(HMOE_CHAT_TEMPLATE_UNKNOWN, "{{ messages }}") == HMOE_TOOLCALL_NONE,
            "toolcall format_for: from the GGUF's own template", "mismatch");
    t_check(!hmoe_toolcall_format_name((enum hmoe_toolcall_format)42) &&
                strcmp(hmoe_toolcall_format_name(HMOE_TOOLCALL_HARMONY), "harmony") == 0,
            "toolcall format_name", "mismatch");
}

/* Feed `parts` one by one; the pieces of each delta, written as "[index id? name? args]" ("#" for
 * an id), then "|" after each feed, and the closed calls as "=name". */
static void check_pieces(const char *label, enum hmoe_toolcall_format fmt, const struct hmoe_toolcall_opts *opts,
                         const char *const *parts, size_t n_parts, const char *want) {
    struct hmoe_toolcall_stream *s = NULL;
    struct hmoe_err err = {0};
    char got[2048] = "";
    size_t n = 0;
    int ok = hmoe_toolcall_stream_new(fmt, opts, &s, &err) == 0;
    for (size_t i = 0; ok && i <= n_parts; i++) {
        struct hmoe_toolcall_delta d;
        ok = (i < n_parts ? hmoe_toolcall_stream_feed(s, parts[i], strlen(parts[i]), &d, &err)
                          : hmoe_toolcall_stream_finish(s, &d, &err)) == 0;
        for (size_t k = 0; ok && k < d.n_pieces; k++)
            n += (size_t)snprintf(got + n, sizeof got - n, "[%zu%s%s%s %.*s]", d.pieces[k].index,
                                  d.pieces[k].id ? " #" : "", d.pieces[k].name ? " " : "",
                                  d.pieces[k].name ? d.pieces[k].name : "", (int)d.pieces[k].args_len, d.pieces[k].args);
        for (size_t k = 0; ok && k < d.n_calls; k++) n += (size_t)snprintf(got + n, sizeof got - n, "=%s", d.calls[k].name);
        if (i < n_parts) n += (size_t)snprintf(got + n, sizeof got - n, "|");
    }
    hmoe_toolcall_stream_free(s);
    t_check(ok && strcmp(got, want) == 0, label, "got  %s\n  want %s", got, want);
}

static void test_pieces(void) {
    struct hmoe_toolcall_opts tools = {.tools = WEATHER_TOOLS, .n_tools = 3, .id_seed = 1};
    const char *q3[] = {"Let me see.\n<tool_call>\n{\"name\": \"get_", "weather\", \"argu", "ments\": {\"ci",
                        "ty\": \"Par", "is\", \"days\": 1", "2}}\n</tool", "_call>"};
    check_pieces("toolcall pieces qwen3-json: the name, then the arguments in their final form as they are read",
                 HMOE_TOOLCALL_QWEN3_JSON, &tools, q3, HMOE_ARRAY_LEN(q3),
                 "|[0 # get_weather ]|[0 {\"ci]|[0 ty\": \"Par]|[0 is\", \"days\": 1]|[0 2}]|=get_weather|");
    const char *q3c[] = {"<tool_call>\n{\"name\":\"f\",\"arguments\":{\"a\":[1,", "\"\\u00e9\\ud83d", "\\ude00x\"",
                         "]}}\n</tool_call>"};
    check_pieces("toolcall pieces qwen3-json: compact JSON goes out in HF form, escapes once decoded",
                 HMOE_TOOLCALL_QWEN3_JSON, &tools, q3c, HMOE_ARRAY_LEN(q3c),
                 "[0 # f {\"a\": [1, ]|[0 \"é]|[0 😀x\"]|[0 ]}]=f|");
    const char *two[] = {"<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": "
                         "\"b\", \"argum",
                         "ents\": {\"x\": true}}\n</tool_call>\n<tool_call>\n{\"name\": \"c\"", "}\n</tool_call>"};
    check_pieces("toolcall pieces qwen3-json: three calls are indices 0, 1, 2", HMOE_TOOLCALL_QWEN3_JSON, &tools, two,
                 HMOE_ARRAY_LEN(two), "[0 # a {}][1 # b ]=a|[1 {\"x\": true}][2 # c ]=b|[2 {}]=c|");
    const char *cut[] = {"<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": \"xy"};
    check_pieces("toolcall pieces qwen3-json: a call cut off keeps what went out, and is content",
                 HMOE_TOOLCALL_QWEN3_JSON, &tools, cut, HMOE_ARRAY_LEN(cut), "[0 # f {\"a\": \"xy]|");
    const char *xml[] = {"<tool_call>\n<function=get_wea", "ther>\n<parameter=city>\nSão", " Paulo\n", "</parameter>\n"
                         "<parameter=days>\n3", "\n</parameter>\n<parameter=note>\r\n", "a\\\"b\n</param", "eter>\n"
                         "</function>\n</tool_call>"};
    check_pieces("toolcall pieces qwen35-xml: a parameter at a time, a string one as it is written",
                 HMOE_TOOLCALL_QWEN35_XML, &tools, xml, HMOE_ARRAY_LEN(xml),
                 "|[0 # get_weather {\"city\":\"São]|[0  Paulo]|[0 \"]|[0 ,\"days\":3,\"note\":\"]|"
                 "[0 a\\\\\\\"b]|[0 \"}]=get_weather|");
    const char *utf[] = {"<tool_call>\n<function=get_weather>\n<parameter=city>\n\xe6\x97", "\xa5\n</parameter>\n</function>"
                         "\n</tool_call>"};
    check_pieces("toolcall pieces qwen35-xml: a character split between feeds waits for its last byte",
                 HMOE_TOOLCALL_QWEN35_XML, &tools, utf, HMOE_ARRAY_LEN(utf),
                 "[0 # get_weather {\"city\":\"]|[0 日\"}]=get_weather|");
    const char *harmony[] = {"<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>", " {\"city\"",
                             ": \"Paris\" ", " }<|ca", "ll|>"};
    check_pieces("toolcall pieces harmony: the arguments as written, whitespace at the ends held",
                 HMOE_TOOLCALL_HARMONY, &tools, harmony, HMOE_ARRAY_LEN(harmony),
                 "|[0 # get_weather {\"city\"]|[0 : \"Paris\"]|[0   }]|=get_weather|");
    const char *hbad[] = {"<|channel|>commentary to=functions.f<|message|>nope", "<|call|>"};
    check_pieces("toolcall pieces harmony: a body that is no JSON never starts a call", HMOE_TOOLCALL_HARMONY, &tools,
                 hbad, HMOE_ARRAY_LEN(hbad), "||");
}

/* Random texts made of tag fragments: never a crash, the same message however the text is split. */
static void test_random(void) {
    static const char *const bits[] = {
        "<tool_call>", "</tool_call>", "<think>", "</think>", "<function=f>", "</function>", "<parameter=p>",
        "</parameter>", "{\"name\": \"f\", \"arguments\": {\"a\": 1}}", "{", "}", "\"", "\n", " ", "x", "é", "<",
        "<|channel|>", "analysis", "final", "commentary to=functions.g", "<|message|>", "<|end|>", "<|call|>",
        "<|start|>assistant", "<|constrain|>json", "[1,2]", "<tool", "</tool_c", "\\", "\xff", "\xe6\x97",
        "<parameter=", "<|", "true", "\"日本\"",
        /* pieces of calls being written */
        "{\"name\": \"f\", \"arguments\": ", "{\"a\": ", "\"x", "\\u00e9", "\\ud83d", "\\ude00", "12", ",", ":",
        "]", "<function=get_weather>", "<parameter=city>", "\r", "\"name\"", "\"arguments\"",
    };
    uint64_t rng = 99;
    int failures = 0;
    char first_why[2048] = "";
    for (int iter = 0; iter < 1500; iter++) {
        char text[600];
        size_t n = 0;
        int parts = 1 + (int)((rng >> 33) % 40);
        for (int k = 0; k < parts; k++) {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            const char *b = bits[(rng >> 33) % HMOE_ARRAY_LEN(bits)];
            size_t l = strlen(b);
            if (n + l >= sizeof text) break;
            memcpy(text + n, b, l);
            n += l;
        }
        text[n] = 0;
        enum hmoe_toolcall_format f = (enum hmoe_toolcall_format)(iter % 5);
        struct hmoe_toolcall_opts o = {.in_think = iter % 3 == 0, .think_in_content = iter % 7 == 1, .id_seed = 5,
                                       .tools = WEATHER_TOOLS, .n_tools = 3};
        struct hmoe_toolcalls whole, st;
        struct hmoe_err err = {0};
        char why[1024] = "";
        if (hmoe_toolcall_parse_opts(f, &o, text, n, &whole, &err)) {
            failures++;
            continue;
        }
        static const size_t steps[] = {0, 1, 2, STEP_RANDOM};
        for (size_t si = 0; si < 4; si++) {
            const size_t step = steps[si];
            if (!stream_text(f, &o, text, n, step, &st, why, sizeof why) || strcmp(st.content, whole.content) ||
                strcmp(st.reasoning, whole.reasoning)) {
                if (!failures++) snprintf(first_why, sizeof first_why, "fmt %d step %zu text '%.300s': %.1000s", (int)f, step, text, why);
            }
            free(st.content);
            free(st.reasoning);
        }
        hmoe_toolcalls_free(&whole);
    }
    t_check(failures == 0, "toolcall: 1500 random tag soups, streamed four ways, agree", "%d failures, first: %s",
            failures, first_why);
}

static size_t rnd(uint64_t *rng, size_t k) {
    *rng = *rng * 6364136223846793005ull + 1442695040888963407ull;
    return (size_t)((*rng >> 33) % k);
}

static void put(char *out, size_t *n, size_t cap, const char *str) {
    size_t l = strlen(str);
    if (*n + l < cap) memcpy(out + *n, str, l), *n += l;
    out[*n] = 0;
}

/* A random JSON value written the way a model might: spacing varies, strings hold escapes
 * (surrogate pairs included), non-ASCII text and brackets. */
static void rand_json(char *out, size_t *n, size_t cap, uint64_t *rng, int depth, bool object) {
    static const char *const str_bits[] = {"a", "Paris", " ", "é", "日本", "😀", "\\n", "\\\"", "\\u00e9",
                                           "\\ud83d\\ude00", "<", "}", "]", ",", ":", "\\\\", "\\/", "\\ud83d",
                                           "\\ude00", "\\u0000", "\\b\\f", "\\u001f", "\x7f", "\xff", "\\uD83D\\uDE00x"};
    static const char *const scalars[] = {"12", "-0.5", "1e3", "0", "true", "false", "null", "12345678901234567890"};
    static const char *const spaces[] = {"", "", " ", "\n  ", "\t", "\r\n"};
    size_t kind = object ? 0 : depth >= 3 ? 2 + rnd(rng, 2) : rnd(rng, 4);
    if (kind == 0 || kind == 1) {
        put(out, n, cap, kind ? "[" : "{");
        size_t m = rnd(rng, 4);
        for (size_t i = 0; i < m; i++) {
            if (i) {
                put(out, n, cap, ",");
                put(out, n, cap, spaces[rnd(rng, HMOE_ARRAY_LEN(spaces))]);
            }
            if (!kind) {
                put(out, n, cap, "\"k");
                put(out, n, cap, str_bits[rnd(rng, HMOE_ARRAY_LEN(str_bits))]);
                put(out, n, cap, "\":");
                put(out, n, cap, spaces[rnd(rng, HMOE_ARRAY_LEN(spaces))]);
            }
            rand_json(out, n, cap, rng, depth + 1, false);
        }
        put(out, n, cap, kind ? "]" : "}");
    } else if (kind == 2) {
        put(out, n, cap, "\"");
        for (size_t i = rnd(rng, 6); i > 0; i--) put(out, n, cap, str_bits[rnd(rng, HMOE_ARRAY_LEN(str_bits))]);
        put(out, n, cap, "\"");
    } else {
        put(out, n, cap, scalars[rnd(rng, HMOE_ARRAY_LEN(scalars))]);
    }
}

/* Calls with random arguments in each format, streamed byte by byte, 3 bytes at a time and in
 * random pieces: the call's pieces add up to its arguments, and a long call comes in many. */
static void test_random_args(void) {
    struct hmoe_toolcall_opts tools = {.tools = WEATHER_TOOLS, .n_tools = 3, .id_seed = 9};
    static const char *const xml_bits[] = {"a", "São Paulo", " ", "\n", "\r\n", "<", "</param", "\"", "\\", "日",
                                           "😀", "\t", "{", "<parameter"};
    uint64_t rng = 4242;
    int failures = 0, short_streams = 0;
    char first_why[2048] = "";
    for (int iter = 0; iter < 1500; iter++) {
        char args[1200], text[2048];
        size_t n = 0;
        enum hmoe_toolcall_format f = iter % 3 == 0 ? HMOE_TOOLCALL_QWEN3_JSON : iter % 3 == 1 ? HMOE_TOOLCALL_HARMONY
                                                                                              : HMOE_TOOLCALL_QWEN35_XML;
        rand_json(args, &n, sizeof args - 1, &rng, 0, true);
        if (f == HMOE_TOOLCALL_QWEN3_JSON) {
            snprintf(text, sizeof text, "Sure.\n<tool_call>\n{\"name\": \"f\",%s\"arguments\": %s}\n</tool_call>",
                     iter % 2 ? " " : "", args);
        } else if (f == HMOE_TOOLCALL_HARMONY) {
            snprintf(text, sizeof text, "<|channel|>commentary to=functions.f <|constrain|>json<|message|>%s%s<|call|>",
                     iter % 2 ? " " : "", args);
        } else {
            char value[600];
            size_t vn = 0;
            value[0] = 0;
            for (size_t i = 1 + rnd(&rng, 12); i > 0; i--) put(value, &vn, sizeof value, xml_bits[rnd(&rng, HMOE_ARRAY_LEN(xml_bits))]);
            snprintf(text, sizeof text, "<tool_call>\n<function=get_weather>\n<parameter=city>\n%s\n</parameter>\n"
                     "<parameter=opts>\n%s\n</parameter>\n<parameter=note>\n%s\n</parameter>\n</function>\n</tool_call>",
                     value, args, value);
        }
        struct hmoe_toolcalls whole;
        struct hmoe_err err = {0};
        if (hmoe_toolcall_parse_opts(f, &tools, text, strlen(text), &whole, &err) || whole.n_calls != 1) {
            if (!failures++) snprintf(first_why, sizeof first_why, "not one call: '%.500s'", text);
            if (!err.code) hmoe_toolcalls_free(&whole);
            continue;
        }
        static const size_t steps[] = {1, 3, STEP_RANDOM};
        for (size_t si = 0; si < 3; si++) {
            struct hmoe_toolcalls st;
            struct live_calls live = {0};
            char why[1024] = "";
            int ok = stream_text_live(f, &tools, text, strlen(text), steps[si], &st, &live, why, sizeof why);
            if (ok && (live.n != 1 || !live.closed[0]))
                ok = 0, snprintf(why, sizeof why, "%zu calls begun", live.n);
            if (ok && steps[si] == 1 && strlen(whole.calls[0].arguments) > 40 && live.pieces[0] < 4) short_streams++;
            if (!ok && !failures++)
                snprintf(first_why, sizeof first_why, "fmt %s step %zu text '%.600s': %.1000s", fmt_name(f), steps[si],
                         text, why);
            live_free(&live);
            free(st.content);
            free(st.reasoning);
        }
        hmoe_toolcalls_free(&whole);
    }
    t_check(failures == 0, "toolcall pieces: 1500 calls with random arguments, streamed three ways, add up",
            "%d failures, first: %s", failures, first_why);
    t_check(short_streams == 0, "toolcall pieces: long arguments fed byte by byte come in many pieces",
            "%d calls in fewer than 4 pieces", short_streams);
}

/* The other direction: an assistant turn with calls as each template renders it (the renderers are
 * checked against llama.cpp's templates in test_template*.c) parses back to the same message. */
static void test_roundtrip(enum hmoe_chat_template tmpl, const char *want_args1) {
    const char *tools[] = {WEATHER_TOOLS[0]};
    const struct hmoe_chat_tool_call calls[] = {
        {.name = "get_weather", .arguments = "{\"city\": \"Paris\"}"},
        {.name = "get_weather", .arguments = "{\"city\": \"São Paulo\", \"days\": 3, \"opts\": {\"hourly\": true}}"},
    };
    const struct hmoe_chat_msg msgs[] = {
        {.role = "user", .content = "Weather in Paris and São Paulo?"},
        {.role = "assistant", .content = "Checking both.", .reasoning_content = "Two cities.", .tool_calls = calls,
         .n_tool_calls = 2},
    };
    struct hmoe_chat_opts co = {.add_generation_prompt = false, .enable_thinking = true, .tools = tools, .n_tools = 1};
    char *prompt = NULL, label[128];
    struct hmoe_err err = {0};
    snprintf(label, sizeof label, "toolcall round trip: %s's rendering parses back", hmoe_chat_template_name(tmpl));
    if (hmoe_chat_render(tmpl, msgs, 2, &co, &prompt, &err)) {
        t_check(0, label, "render: %s", err.msg);
        return;
    }
    const char *turn = NULL;
    for (const char *q = strstr(prompt, "<|im_start|>assistant\n"); q; q = strstr(q + 1, "<|im_start|>assistant\n")) turn = q;
    const char *end = turn ? strstr(turn, "<|im_end|>") : NULL;
    struct hmoe_toolcalls tc = {0};
    struct hmoe_toolcall_opts o = {.tools = tools, .n_tools = 1};
    int rc = -1;
    if (end) {
        turn += strlen("<|im_start|>assistant\n");
        rc = hmoe_toolcall_parse_opts(hmoe_toolcall_format_for(tmpl, NULL), &o, turn, (size_t)(end - turn), &tc, &err);
    }
    int ok = rc == 0 && strcmp(tc.content, "Checking both.") == 0 && strcmp(tc.reasoning, "Two cities.") == 0 &&
             tc.n_calls == 2 && strcmp(tc.calls[0].name, "get_weather") == 0 &&
             strcmp(tc.calls[1].arguments, want_args1) == 0;
    t_check(ok, label, "rc %d, turn '%.*s' -> content '%s' reasoning '%s' %zu calls, second '%s'", rc,
            end ? (int)(end - turn) : 0, turn ? turn : "", rc ? "" : tc.content, rc ? "" : tc.reasoning, tc.n_calls,
            tc.n_calls > 1 ? tc.calls[1].arguments : "");
    if (!rc) hmoe_toolcalls_free(&tc);
    free(prompt);
}

int main(void) {
    test_qwen3();
    test_xml(HMOE_TOOLCALL_QWEN35_XML);
    test_nemotron();
    test_harmony();
    test_none();
    test_parse_infers_think();
    test_ids();
    test_hold_back();
    test_pieces();
    test_format_for();
    test_random();
    test_random_args();
    test_roundtrip(HMOE_CHAT_TEMPLATE_QWEN3, "{\"city\": \"São Paulo\", \"days\": 3, \"opts\": {\"hourly\": true}}");
    test_roundtrip(HMOE_CHAT_TEMPLATE_QWEN35, "{\"city\":\"São Paulo\",\"days\":3,\"opts\":{\"hourly\":true}}");
    test_roundtrip(HMOE_CHAT_TEMPLATE_NEMOTRON, "{\"city\":\"São Paulo\",\"days\":3,\"opts\":{\"hourly\":true}}");
    return t_summary();
}
