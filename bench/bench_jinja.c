/* bench_jinja.c — chat template render time: a 100-turn conversation with tools (system
 * prompt, three tool definitions, user turns, assistant answers with reasoning, tool calls with
 * object arguments and tool results) rendered with each real template of tests/jinja/templates.
 * Goal: under 1 ms per render of the whole conversation (what `chat` and the server do every turn).
 *
 *   make bench && ./build/bench/bench_jinja [-d tests/jinja/templates] [-o json]
 *
 * Reports compile time, render time (median and best of 50 renders) and output size. The
 * template is compiled once, as the CLI and the server do; each render converts the JSON
 * conversation to template values, so that cost is included.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hmoe/jinja.h"
#include "hmoe/json.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The conversation as JSON text: 100 turns = 100 user messages, each answered. */
static char *make_conversation(void) {
    size_t cap = 1 << 20, n = 0;
    char *s = malloc(cap);
    if (!s) return NULL;
#define ADD(...) n += (size_t)snprintf(s + n, cap - n, __VA_ARGS__)
    ADD("{\"tools\": [");
    static const char *const names[] = {"get_weather", "search", "run_code"};
    for (int t = 0; t < 3; t++)
        ADD("%s{\"type\": \"function\", \"function\": {\"name\": \"%s\", \"description\": \"Tool number %d, which does "
            "something useful.\", \"parameters\": {\"type\": \"object\", \"properties\": {\"query\": {\"type\": \"string\", "
            "\"description\": \"What to look for\"}, \"limit\": {\"type\": \"integer\", \"description\": \"At most this many\"}}, "
            "\"required\": [\"query\"]}}}", t ? ", " : "", names[t], t);
    ADD("], \"messages\": [{\"role\": \"system\", \"content\": \"You are a helpful assistant. Answer briefly.\"}");
    for (int i = 0; i < 100; i++) {
        ADD(", {\"role\": \"user\", \"content\": \"Question %d: what is the weather in city number %d, and why?\"}", i, i);
        if (i % 3 == 0) {
            ADD(", {\"role\": \"assistant\", \"content\": \"\", \"reasoning_content\": \"I should call a tool for %d.\", "
                "\"tool_calls\": [{\"type\": \"function\", \"function\": {\"name\": \"%s\", \"arguments\": {\"query\": "
                "\"city %d\", \"limit\": 3}}}]}, {\"role\": \"tool\", \"content\": \"{\\\"temperature\\\": %d, "
                "\\\"sky\\\": \\\"clear\\\"}\"}", i, names[i % 3], i, 10 + i % 20);
        }
        ADD(", {\"role\": \"assistant\", \"content\": \"<think>\\nThinking about question %d.\\n</think>\\n\\nThe answer to "
            "question %d is that it is sunny, %d degrees, because of a high-pressure system.\"}", i, i, 10 + i % 20);
    }
    ADD("]}");
#undef ADD
    return s;
}

int main(int argc, char **argv) {
    const char *dir = "tests/jinja/templates";
    int json = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-d") && i + 1 < argc) dir = argv[++i];
        else if (!strcmp(argv[i], "-o") && i + 1 < argc && !strcmp(argv[i + 1], "json")) { json = 1; i++; }
        else { fprintf(stderr, "usage: %s [-d TEMPLATE_DIR] [-o json]\n", argv[0]); return 2; }
    }
    static const char *const templates[] = {"qwen3", "qwen3.5", "nemotron-3-nano", "gpt-oss", "glm-4.6", "deepseek-v3.1"};
    char *conv_text = make_conversation();
    struct hmoe_err err = {0};
    struct hmoe_json *conv = conv_text ? hmoe_json_parse(conv_text, strlen(conv_text), &err) : NULL;
    if (!conv) { fprintf(stderr, "bench_jinja: conversation: %s\n", err.msg); return 1; }
    int worst_ok = 1;
    if (json) printf("[");
    else printf("%-18s %10s %12s %12s %10s\n", "template", "compile", "render med", "render best", "output");
    for (size_t k = 0; k < sizeof templates / sizeof templates[0]; k++) {
        char path[512], *src;
        size_t len;
        snprintf(path, sizeof path, "%s/%s.jinja", dir, templates[k]);
        if (hmoe_read_file(path, &src, &len, &err) != HMOE_OK) { fprintf(stderr, "bench_jinja: %s\n", err.msg); return 1; }
        struct hmoe_jinja *t = NULL;
        double t0 = now_s();
        if (hmoe_jinja_compile(src, len, &t, &err) != HMOE_OK) { fprintf(stderr, "bench_jinja: %s\n", err.msg); return 1; }
        double compile_s = now_s() - t0;
        struct hmoe_jinja_chat chat = {.messages = hmoe_json_get(conv, "messages"), .tools = hmoe_json_get(conv, "tools"),
                                       .add_generation_prompt = true, .enable_thinking = true, .bos_token = "<s>",
                                       .eos_token = "</s>"};
        enum { RUNS = 50 };
        double times[RUNS];
        size_t out_len = 0;
        for (int r = 0; r < RUNS; r++) {
            char *out = NULL;
            t0 = now_s();
            if (hmoe_jinja_render_chat(t, &chat, NULL, &out, &err) != HMOE_OK) {
                fprintf(stderr, "bench_jinja: %s: %s\n", templates[k], err.msg);
                return 1;
            }
            times[r] = now_s() - t0;
            out_len = strlen(out);
            free(out);
        }
        qsort(times, RUNS, sizeof times[0], cmp_d);
        double med = times[RUNS / 2], best = times[0];
        worst_ok &= med < 1e-3;
        if (json)
            printf("%s{\"template\": \"%s\", \"compile_ms\": %.4f, \"render_median_ms\": %.4f, \"render_best_ms\": %.4f, "
                   "\"output_bytes\": %zu}", k ? ", " : "", templates[k], compile_s * 1e3, med * 1e3, best * 1e3, out_len);
        else
            printf("%-18s %8.3f ms %9.3f ms %9.3f ms %8zu B\n", templates[k], compile_s * 1e3, med * 1e3, best * 1e3, out_len);
        hmoe_jinja_free(t);
        free(src);
    }
    if (json) printf("]\n");
    else printf("goal: render median < 1 ms for a 100-turn conversation with tools: %s\n", worst_ok ? "met" : "NOT met");
    hmoe_json_free(conv);
    free(conv_text);
    return 0;
}
