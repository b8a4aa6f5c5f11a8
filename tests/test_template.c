/* test_template.c — chat template rendering and detection (chat-templates.md §1, §4):
 * every case of ../shared/fixtures/chat/qwen3-renders.jsonl byte-identical, the Qwen3
 * template recognised in the vocab GGUF and in qwen3-template.jinja, unknown templates
 * rejected (the CLI then falls back to ChatML), bad conversations rejected clearly. */
#include "harness.h"
#include "hmoe/gguf.h"
#include "hmoe/json.h"
#include "hmoe/text.h"

/* Render one JSON conversation line; returns the malloc'd prompt or NULL (err filled). */
static char *render_json(enum hmoe_chat_template t, const struct hmoe_json *c, struct hmoe_err *err) {
    struct hmoe_chat_conv conv;
    if (hmoe_chat_conv_from_json(c, &conv, err) != HMOE_OK) return NULL;
    struct hmoe_chat_opts o = {
        .add_generation_prompt = hmoe_json_get_bool(c, "add_generation_prompt", true),
        .enable_thinking = hmoe_json_get_bool(c, "enable_thinking", true),
        .tools = (const char *const *)conv.tools,
        .n_tools = conv.n_tools,
    };
    char *out = NULL;
    hmoe_chat_render(t, conv.msgs, conv.n_msgs, &o, &out, err);
    hmoe_chat_conv_free(&conv);
    return out;
}

static void run_renders(void) {
    struct hmoe_err err = {0};
    char *text;
    size_t len;
    if (hmoe_read_file(t_shared("fixtures/chat/qwen3-renders.jsonl"), &text, &len, &err) != HMOE_OK) {
        t_check(0, "qwen3-renders.jsonl readable", "%s", err.msg);
        return;
    }
    int lines = 0;
    for (char *p = text, *nl; *p; p = nl + 1) {
        nl = strchr(p, '\n');
        if (!nl) nl = p + strlen(p);
        if (nl > p) {
            lines++;
            struct hmoe_json *c = hmoe_json_parse(p, (size_t)(nl - p), &err);
            const char *want = hmoe_json_get_str(c, "rendered", "");
            char name[128];
            snprintf(name, sizeof name, "qwen3 render '%s' byte-identical", hmoe_json_get_str(c, "name", "?"));
            char *got = c ? render_json(HMOE_CHAT_TEMPLATE_QWEN3, c, &err) : NULL;
            t_check(got && strcmp(got, want) == 0, name, "got '%s' (%s)", got ? got : "(null)", got ? "" : err.msg);
            free(got);
            /* Without assistant history, tools or a disabled think block, Qwen3 is plain
             * ChatML: the fallback must give the same bytes on those cases. */
            const struct hmoe_json *msgs = hmoe_json_get(c, "messages");
            bool plain = hmoe_json_get_bool(c, "enable_thinking", true);
            for (size_t i = 0; msgs && i < msgs->n; i++)
                plain &= strcmp(hmoe_json_get_str(msgs->items[i], "role", ""), "assistant") != 0;
            if (plain) {
                snprintf(name, sizeof name, "chatml render '%s' equals the Qwen3 fixture", hmoe_json_get_str(c, "name", "?"));
                got = render_json(HMOE_CHAT_TEMPLATE_CHATML, c, &err);
                t_check(got && strcmp(got, want) == 0, name, "got '%s'", got ? got : "(null)");
                free(got);
            }
            hmoe_json_free(c);
        }
        if (!*nl) break;
    }
    free(text);
    t_check(lines == 7, "qwen3-renders.jsonl has 7 cases", "found %d", lines);
}

/* Tool use, written out by hand from the Qwen3 Jinja template (chat-templates.md §1.2–1.3):
 * the tools system block, an assistant turn with a tool call whose arguments are an object
 * (tojson), two consecutive tool results sharing one user turn, then the final assistant
 * turn after the last real query (think block kept). */
static void run_tools(void) {
    const char *conv =
        "{\"messages\": ["
        "{\"role\": \"system\", \"content\": \"Be brief.\"},"
        "{\"role\": \"user\", \"content\": \"Weather in Paris?\"},"
        "{\"role\": \"assistant\", \"content\": \"\", \"reasoning_content\": \"need tool\", \"tool_calls\": "
        "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 2}}}]},"
        "{\"role\": \"tool\", \"content\": \"{\\\"temp\\\": 21}\"},"
        "{\"role\": \"tool\", \"content\": \"sunny\"},"
        "{\"role\": \"assistant\", \"content\": \"<think>\\nok\\n</think>\\n\\n21 and sunny.\"}],"
        "\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": "
        "{\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\", \"description\": \"Stadt \\u00e9\"}}}}}],"
        "\"add_generation_prompt\": false}";
    const char *want =
        "<|im_start|>system\nBe brief.\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
        "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
        "{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": {\"type\": \"object\", "
        "\"properties\": {\"city\": {\"type\": \"string\", \"description\": \"Stadt \xc3\xa9\"}}}}}\n</tools>\n\n"
        "For each function call, return a json object with function name and arguments within <tool_call></tool_call> "
        "XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n"
        "<|im_start|>user\nWeather in Paris?<|im_end|>\n"
        "<|im_start|>assistant\n<think>\nneed tool\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
        "{\"city\": \"Paris\", \"days\": 2}}\n</tool_call><|im_end|>\n"
        "<|im_start|>user\n<tool_response>\n{\"temp\": 21}\n</tool_response>\n<tool_response>\nsunny\n</tool_response>"
        "<|im_end|>\n"
        "<|im_start|>assistant\n<think>\nok\n</think>\n\n21 and sunny.<|im_end|>\n";
    struct hmoe_err err = {0};
    struct hmoe_json *c = hmoe_json_parse(conv, strlen(conv), &err);
    char *got = c ? render_json(HMOE_CHAT_TEMPLATE_QWEN3, c, &err) : NULL;
    t_check(got && strcmp(got, want) == 0, "qwen3 render with tools, tool calls and tool results (§1.2-1.3)",
            "got '%s' (%s)", got ? got : "(null)", err.msg);
    free(got);
    hmoe_json_free(c);
}

static void expect_conv_error(const char *name, const char *conv, const char *must_mention) {
    struct hmoe_err err = {0};
    struct hmoe_json *c = hmoe_json_parse(conv, strlen(conv), &err);
    char *got = c ? render_json(HMOE_CHAT_TEMPLATE_QWEN3, c, &err) : NULL;
    t_check(!got && strstr(err.msg, must_mention), name, "got '%s', message '%s'", got ? got : "(null)", err.msg);
    free(got);
    hmoe_json_free(c);
}

int main(void) {
    run_renders();
    run_tools();

    /* Detection: the vocab GGUF's tokenizer.chat_template and the .jinja fixture. */
    struct hmoe_err err = {0};
    struct hmoe_gguf *g = NULL;
    struct hmoe_vocab *v = NULL;
    if (hmoe_gguf_open(t_shared("fixtures/tokenizer/qwen3-vocab.gguf"), &g, &err) == HMOE_OK &&
        hmoe_vocab_load(g, &v, &err) == HMOE_OK) {
        t_check(v->chat_template && hmoe_chat_template_detect(v->chat_template) == HMOE_CHAT_TEMPLATE_QWEN3,
                "qwen3 template detected in qwen3-vocab.gguf", "detected %d",
                hmoe_chat_template_detect(v->chat_template));
    } else {
        t_check(0, "qwen3 template detected in qwen3-vocab.gguf", "%s", err.msg);
    }
    hmoe_vocab_free(v);
    hmoe_gguf_free(g);
    char *jinja = NULL;
    size_t jl;
    if (hmoe_read_file(t_shared("fixtures/chat/qwen3-template.jinja"), &jinja, &jl, &err) == HMOE_OK) {
        t_check(hmoe_chat_template_detect(jinja) == HMOE_CHAT_TEMPLATE_QWEN3, "qwen3 template detected in .jinja",
                "not detected");
        /* The same template turned into a Qwen3-Coder-like one (XML calls) must not pass as Qwen3. */
        size_t n = strlen(jinja);
        char *mod = malloc(n + 32);
        memcpy(mod, jinja, n + 1);
        strcat(mod, "{{ '<function=' }}");
        t_check(hmoe_chat_template_detect(mod) == HMOE_CHAT_TEMPLATE_UNKNOWN, "modified qwen3 template is unknown",
                "detected %d", hmoe_chat_template_detect(mod));
        free(mod);
        free(jinja);
    } else {
        t_check(0, "qwen3 template detected in .jinja", "%s", err.msg);
    }
    const char *gpt_oss_like = "{{- '<|start|>system<|message|>' }}{%- for m in messages %}{{ m.content }}{%- endfor %}";
    t_check(hmoe_chat_template_detect(gpt_oss_like) == HMOE_CHAT_TEMPLATE_UNKNOWN, "unknown template -> UNKNOWN",
            "detected %d", hmoe_chat_template_detect(gpt_oss_like));
    t_check(hmoe_chat_template_detect(NULL) == HMOE_CHAT_TEMPLATE_UNKNOWN, "no template -> UNKNOWN", "detected");
    const char *classic = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] "
                          "+ '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
                          "{% endif %}";
    t_check(hmoe_chat_template_detect(classic) == HMOE_CHAT_TEMPLATE_CHATML, "classic ChatML template -> chatml",
            "detected %d", hmoe_chat_template_detect(classic));
    t_check(hmoe_chat_template_from_name("qwen3") == HMOE_CHAT_TEMPLATE_QWEN3 &&
                hmoe_chat_template_from_name("chatml") == HMOE_CHAT_TEMPLATE_CHATML &&
                hmoe_chat_template_from_name("llama3") == HMOE_CHAT_TEMPLATE_UNKNOWN,
            "template names", "mismatch");

    expect_conv_error("unknown role is rejected", "{\"messages\": [{\"role\": \"robot\", \"content\": \"x\"}]}",
                      "unknown role 'robot'");
    expect_conv_error("missing messages is rejected", "{\"msgs\": []}", "\"messages\"");
    expect_conv_error("missing role is rejected", "{\"messages\": [{\"content\": \"x\"}]}", "missing \"role\"");
    expect_conv_error("content array is rejected clearly",
                      "{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"text\"}]}]}", "must be a string");
    expect_conv_error("empty conversation is rejected", "{\"messages\": []}", "no messages");
    return t_summary();
}
