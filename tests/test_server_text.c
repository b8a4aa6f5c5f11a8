/* test_server_text.c — the server's text pipeline (src/server/textfilter.c): stop strings
 * found across any split of the text, the <think> splitter (reasoning_content / content as
 * llama-server's deepseek format returns them) giving the same result whether the text
 * comes whole or one byte at a time, JSON strings that stay valid UTF-8 whatever the
 * bytes, and the check whether a rendered prompt leaves a think block open. Expected values
 * are written from the formats' definitions (chat-templates.md §1.5, §2.1).
 */
#include "harness.h"
#include "server/server_impl.h"

struct out2 {
    struct srv_buf content, reasoning;
};

static void emit(struct srv_job *j, const char *s, size_t n, bool reasoning) {
    struct out2 *o = (struct out2 *)(void *)j;
    srv_buf_add(reasoning ? &o->reasoning : &o->content, s, n);
}

/* Run text through the splitter in pieces of `step` bytes (0 = whole). */
static void split(const char *text, bool enabled, bool inside, size_t step, struct out2 *o) {
    memset(o, 0, sizeof *o);
    struct srv_think t;
    srv_think_init(&t, enabled, inside);
    const size_t n = strlen(text);
    if (!step) step = n ? n : 1;
    for (size_t i = 0; i < n; i += step) srv_think_push(&t, (struct srv_job *)(void *)o, text + i, HMOE_MIN(step, n - i), emit);
    srv_think_flush(&t, (struct srv_job *)(void *)o, emit);
}

static const char *str(const struct srv_buf *b) { return b->s ? b->s : ""; }

static void case_think(const char *name, const char *text, bool enabled, bool inside, const char *want_reasoning,
                       const char *want_content) {
    const size_t steps[] = {0, 1, 2, 3, 7};
    for (size_t k = 0; k < HMOE_ARRAY_LEN(steps); k++) {
        struct out2 o;
        split(text, enabled, inside, steps[k], &o);
        char label[160];
        snprintf(label, sizeof label, "think split: %s (pieces of %zu bytes)", name, steps[k]);
        t_check(strcmp(str(&o.reasoning), want_reasoning) == 0 && strcmp(str(&o.content), want_content) == 0, label,
                "reasoning '%s' content '%s', want '%s' / '%s'", str(&o.reasoning), str(&o.content), want_reasoning,
                want_content);
        srv_buf_free(&o.content);
        srv_buf_free(&o.reasoning);
    }
}

static void test_think(void) {
    case_think("Qwen3 answer", "<think>\nLet me see.\n</think>\n\nHello!", true, false, "Let me see.", "Hello!");
    case_think("prompt opened the block (Qwen3.5)", "plan a\n\nplan b\n</think>\n\nDone.", true, true,
               "plan a\n\nplan b", "Done.");
    case_think("empty block (enable_thinking false)", "<think>\n\n</think>\n\nHi", true, false, "", "Hi");
    case_think("no block", "Just text, no tags.", true, false, "", "Just text, no tags.");
    case_think("tag after content stays content", "Answer <think>x</think>", true, false, "",
               "Answer <think>x</think>");
    case_think("unterminated block", "<think>still thinking", true, false, "still thinking", "");
    case_think("a tag look-alike", "<thinking> is a word", true, false, "", "<thinking> is a word");
    case_think("splitter off keeps the tags", "<think>a</think>b", false, false, "", "<think>a</think>b");
    case_think("multibyte text", "<think>\xC3\xA9t\xC3\xA9\n</think>\n\xE2\x9C\x93", true, false, "\xC3\xA9t\xC3\xA9",
               "\xE2\x9C\x93");
}

static void test_stop(void) {
    struct srv_gen_params gp = {0};
    gp.stop[0] = (char *)"world";
    gp.stop[1] = (char *)"lo w";
    gp.n_stop = 2;
    int which;
    size_t keep;
    size_t at = srv_stop_scan(&gp, "hello world", 11, &which, &keep);
    t_check(at == 3 && which == 1, "stop strings: the earliest match wins ('lo w' at 3)", "at %zu which %d", at, which);
    at = srv_stop_scan(&gp, "hello wor", 9, &which, &keep);
    t_check(at == 3 && which == 1, "stop strings: a match inside the text", "at %zu which %d", at, which);
    gp.n_stop = 1;
    at = srv_stop_scan(&gp, "hello wor", 9, &which, &keep);
    t_check(at == 9 && which == -1 && keep == 3, "stop strings: a tail that may become one is held ('wor')",
            "at %zu which %d keep %zu", at, which, keep);
    at = srv_stop_scan(&gp, "abc", 3, &which, &keep);
    t_check(at == 3 && which == -1 && keep == 0, "stop strings: nothing held when no tail matches", "keep %zu", keep);
    at = srv_stop_scan(&gp, "w", 1, &which, &keep);
    t_check(which == -1 && keep == 1, "stop strings: text shorter than the stop string", "which %d keep %zu", which,
            keep);
}

static void test_json_text(void) {
    json_t *j = srv_json_text("ok\xFF\xC3(\xE2\x82\xAC", 8);
    const char *s = j ? json_string_value(j) : NULL;
    t_check(s && strcmp(s, "ok\xEF\xBF\xBD\xEF\xBF\xBD(\xE2\x82\xAC") == 0,
            "JSON text: invalid bytes become U+FFFD, valid UTF-8 stays", "got '%s'", s ? s : "(null)");
    json_decref(j);
    j = srv_json_text("\xED\xA0\x80", 3); /* a UTF-8-encoded surrogate is not well-formed */
    s = j ? json_string_value(j) : NULL;
    t_check(s && strcmp(s, "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD") == 0, "JSON text: an encoded surrogate is replaced",
            "got '%s'", s ? s : "(null)");
    json_decref(j);
    j = srv_json_text("a\0b", 3);
    t_check(j && json_string_length(j) == 3, "JSON text: NUL bytes are kept (escaped on output)", "len %zu",
            j ? json_string_length(j) : 0);
    json_decref(j);
}

static void test_opens_think(void) {
    t_check(srv_prompt_opens_think("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n"),
            "open think: Qwen3.5 generation prompt", "false");
    t_check(!srv_prompt_opens_think("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"),
            "open think: closed empty block (thinking off)", "true");
    t_check(!srv_prompt_opens_think("<|im_start|>assistant\n<think>\n</think>\nx<|im_end|>\n<|im_start|>assistant\n"),
            "open think: an earlier turn's block does not count", "true");
}

int main(void) {
    test_think();
    test_stop();
    test_json_text();
    test_opens_think();
    return t_summary();
}
