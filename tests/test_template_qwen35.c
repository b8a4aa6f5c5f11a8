/* test_template_qwen35.c — the Qwen3.5 / Qwen3.6 chat format (chat-templates.md §2). There
 * is no rendered fixture for it, so every expected string below is written out by hand from
 * that section (thinking on by default: "<think>\n" after the generation prompt; contents
 * trimmed; reasoning kept after the last real user query, empty or not; tools before the
 * system text; XML tool calls; the template's errors) and from §1.4's example, which §2
 * says Qwen3.5 shares apart from those differences. Detection runs on excerpts of the
 * template lines §2 describes (the real template is not in the fixtures either).
 */
#include "harness.h"
#include "hmoe/json.h"
#include "hmoe/text.h"

/* Render a JSON conversation ({"messages": [...], "tools": [...]}) with the given options. */
static char *render(const char *conv_json, bool gen, bool think, bool preserve, struct hmoe_err *err) {
    struct hmoe_json *j = hmoe_json_parse(conv_json, strlen(conv_json), err);
    if (!j) return NULL;
    struct hmoe_chat_conv conv;
    char *out = NULL;
    if (hmoe_chat_conv_from_json(j, &conv, err) == HMOE_OK) {
        struct hmoe_chat_opts o = {.add_generation_prompt = gen,
                                   .enable_thinking = think,
                                   .preserve_thinking = preserve,
                                   .tools = (const char *const *)conv.tools,
                                   .n_tools = conv.n_tools};
        hmoe_chat_render(HMOE_CHAT_TEMPLATE_QWEN35, conv.msgs, conv.n_msgs, &o, &out, err);
        hmoe_chat_conv_free(&conv);
    }
    hmoe_json_free(j);
    return out;
}

static void expect(const char *name, const char *conv, bool gen, bool think, bool preserve, const char *want) {
    struct hmoe_err err = {0};
    char *got = render(conv, gen, think, preserve, &err);
    t_check(got && strcmp(got, want) == 0, name, "got '%s' (%s)", got ? got : "(null)", got ? "" : err.msg);
    free(got);
}

static void expect_error(const char *name, const char *conv, const char *needle) {
    struct hmoe_err err = {0};
    char *got = render(conv, true, true, false, &err);
    t_check(!got && err.code == HMOE_ERR_ARG && strstr(err.msg, needle), name, "got '%s', message '%s'",
            got ? got : "(null)", err.msg);
    free(got);
}

static const char tools_block[] =
    "<|im_start|>system\n# Tools\n\nYou have access to the following functions:\n\n<tools>\n"
    "{\"type\": \"function\", \"function\": {\"name\": \"get_weather\"}}\n</tools>"
    "\n\nIf you choose to call a function ONLY reply in the following format with NO suffix:\n\n"
    "<tool_call>\n<function=example_function_name>\n<parameter=example_parameter_1>\nvalue_1\n</parameter>\n"
    "<parameter=example_parameter_2>\nThis is the value for the second parameter\nthat can span\nmultiple lines\n"
    "</parameter>\n</function>\n</tool_call>\n\n<IMPORTANT>\nReminder:\n- Function calls MUST follow the specified "
    "format: an inner <function=...></function> block must be nested within <tool_call></tool_call> XML tags\n- "
    "Required parameters MUST be specified\n- You may provide optional reasoning for your function call in natural "
    "language BEFORE the function call, but NOT after\n- If there is no function call available, answer the question "
    "like normal with your current knowledge and do not tell the user about function calls\n</IMPORTANT>";

static void renders(void) {
    const char *sys_user = "{\"messages\": [{\"role\": \"system\", \"content\": \"You are a helpful assistant.\"}, "
                           "{\"role\": \"user\", \"content\": \"What is 2+2?\"}]}";
    expect("qwen35: system + user, thinking on (default): prompt ends with <think>\\n", sys_user, true, true, false,
           "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n"
           "<|im_start|>assistant\n<think>\n");
    expect("qwen35: thinking off: empty think block after the generation prompt", sys_user, true, false, false,
           "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n"
           "<|im_start|>assistant\n<think>\n\n</think>\n\n");
    expect("qwen35: no generation prompt", sys_user, false, true, false,
           "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n");
    expect("qwen35: every content trimmed (spaces, newlines, U+3000, NBSP)",
           "{\"messages\": [{\"role\": \"system\", \"content\": \"\\n  sys \\t\"}, "
           "{\"role\": \"user\", \"content\": \"\\u3000\\u00a0 hi there \\n\\n\"}]}",
           true, true, false,
           "<|im_start|>system\nsys<|im_end|>\n<|im_start|>user\nhi there<|im_end|>\n<|im_start|>assistant\n<think>\n");
    /* History: the earlier assistant turn (before the last user query) loses its reasoning. */
    const char *multi = "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}, "
                        "{\"role\": \"assistant\", \"content\": \"<think>\\nThe user greets.\\n</think>\\n\\nHello!\"}, "
                        "{\"role\": \"user\", \"content\": \"Bye\"}]}";
    expect("qwen35: earlier assistant turn without its reasoning", multi, true, true, false,
           "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n"
           "<|im_start|>assistant\n<think>\n");
    expect("qwen35: preserve_thinking (Qwen3.6) keeps the earlier reasoning", multi, true, true, true,
           "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\nThe user greets.\n</think>\n\nHello!"
           "<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\n<think>\n");
    /* Generated answer appended as is: no <think> (it was in the prompt), reasoning then </think>. */
    expect("qwen35: answer text without the opening <think> splits at </think>",
           "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}, "
           "{\"role\": \"assistant\", \"content\": \"Greeting.\\n</think>\\n\\nHello!\"}, "
           "{\"role\": \"user\", \"content\": \"Bye\"}]}",
           false, true, false,
           "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n");
    /* After the last query (tool loop): the block is always there, even with no reasoning. */
    expect("qwen35: assistant after the last query keeps an empty reasoning block",
           "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}, {\"role\": \"assistant\", \"content\": \"Hello!\"}]}",
           false, true, false,
           "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nHello!<|im_end|>\n");
    /* Tools: the list first, then the system text; an XML call; grouped tool results. */
    const char *tool_conv =
        "{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\"}}], \"messages\": ["
        "{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", \"content\": \"Weather?\"}, "
        "{\"role\": \"assistant\", \"content\": \"Let me check.\", \"reasoning_content\": \" Need the tool. \", "
        "\"tool_calls\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"arguments\": "
        "{\"city\": \"Paris\", \"days\": 3, \"temp\": 1.5, \"big\": 1e20, \"metric\": true, \"unit\": null, "
        "\"opts\": {\"a\": [1, 2]}}}}, {\"function\": {\"name\": \"get_time\", \"arguments\": \"{\\\"tz\\\": "
        "\\\"CET\\\"}\"}}]}, {\"role\": \"tool\", \"content\": \"sunny\"}, {\"role\": \"tool\", \"content\": "
        "\"12:00\"}]}";
    char want[4096];
    snprintf(want, sizeof want,
             "%s\n\nBe brief.<|im_end|>\n<|im_start|>user\nWeather?<|im_end|>\n<|im_start|>assistant\n<think>\n"
             "Need the tool.\n</think>\n\nLet me check.\n\n<tool_call>\n<function=get_weather>\n<parameter=city>\n"
             "Paris\n</parameter>\n<parameter=days>\n3\n</parameter>\n<parameter=temp>\n1.5\n</parameter>\n"
             "<parameter=big>\n1e+20\n</parameter>\n<parameter=metric>\nTrue\n</parameter>\n<parameter=unit>\nNone\n"
             "</parameter>\n<parameter=opts>\n{\"a\": [1, 2]}\n</parameter>\n</function>\n</tool_call>\n<tool_call>\n"
             "<function=get_time>\n<parameter=tz>\nCET\n</parameter>\n</function>\n</tool_call><|im_end|>\n"
             "<|im_start|>user\n<tool_response>\nsunny\n</tool_response>\n<tool_response>\n12:00\n</tool_response>"
             "<|im_end|>\n<|im_start|>assistant\n<think>\n",
             tools_block);
    expect("qwen35: tools before the system text, XML calls, Python str() values, grouped results", tool_conv, true,
           true, false, want);
    expect("qwen35: a call with empty content has no blank line before it",
           "{\"messages\": [{\"role\": \"user\", \"content\": \"Go\"}, {\"role\": \"assistant\", \"content\": \"\", "
           "\"tool_calls\": [{\"name\": \"f\", \"arguments\": {}}]}]}",
           false, true, false,
           "<|im_start|>user\nGo<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n<tool_call>\n<function=f>\n"
           "</function>\n</tool_call><|im_end|>\n");

    expect_error("qwen35: system message not first is refused",
                 "{\"messages\": [{\"role\": \"user\", \"content\": \"a\"}, {\"role\": \"system\", \"content\": \"b\"}]}",
                 "only at the beginning");
    expect_error("qwen35: no user query is refused",
                 "{\"messages\": [{\"role\": \"system\", \"content\": \"a\"}]}", "needs a user message");
    expect_error("qwen35: a wrapped tool response is not a user query",
                 "{\"messages\": [{\"role\": \"user\", \"content\": \" <tool_response>x</tool_response>\\n\"}]}",
                 "needs a user message");
    expect_error("qwen35: tool-call arguments must be a JSON object",
                 "{\"messages\": [{\"role\": \"user\", \"content\": \"a\"}, {\"role\": \"assistant\", \"content\": "
                 "\"\", \"tool_calls\": [{\"name\": \"f\", \"arguments\": \"not json\"}]}]}",
                 "JSON object");
}

/* Excerpts of the Qwen3.5 template lines chat-templates.md §2 describes. */
static const char qwen35_excerpt[] =
    "{%- macro render_content(content, do_vision_count, is_system_content=false) %}...{%- endmacro %}\n"
    "{{- '<|im_start|>system\\n' }}\n"
    "{%- set ns = namespace(multi_step_tool=true, last_query_index=messages|length - 1) %}\n"
    "{%- set reasoning_content = reasoning_content|trim %}\n"
    "HISTORY\n"
    "{{- '<|im_start|>' + message.role + '\\n<think>\\n' + reasoning_content + '\\n</think>\\n\\n' + content }}\n"
    "{{- '<tool_call>\\n<function=' + tool_call.name + '>\\n' }}\n"
    "{{- '<parameter=' + args_name + '>\\n' }}\n"
    "{%- if enable_thinking is defined and enable_thinking is false %}\n"
    "{{- '<think>\\n\\n</think>\\n\\n' }}\n{%- else %}\n{{- '<think>\\n' }}\n{%- endif %}\n";

static enum hmoe_chat_template detect_with(const char *history) {
    char buf[4096];
    const char *at = strstr(qwen35_excerpt, "HISTORY");
    snprintf(buf, sizeof buf, "%.*s%s%s", (int)(at - qwen35_excerpt), qwen35_excerpt, history, at + 7);
    return hmoe_chat_template_detect(buf);
}

static void detection(void) {
    t_check(detect_with("{%- if loop.index0 > ns.last_query_index %}") == HMOE_CHAT_TEMPLATE_QWEN35,
            "qwen35 template (reasoning after the last query) detected", "detected %d",
            detect_with("{%- if loop.index0 > ns.last_query_index %}"));
    const char *q36 = "{%- if (preserve_thinking is defined and preserve_thinking is true) or (loop.index0 > "
                      "ns.last_query_index) %}";
    t_check(detect_with(q36) == HMOE_CHAT_TEMPLATE_QWEN35, "qwen3.6 template (preserve_thinking) detected as qwen35",
            "detected %d", detect_with(q36));
    const char *variant = "{%- if loop.index0 > ns.last_query_index and reasoning_content %}";
    t_check(detect_with(variant) == HMOE_CHAT_TEMPLATE_UNKNOWN,
            "qwen35 variant that drops empty reasoning blocks is unknown (renders differently)", "detected %d",
            detect_with(variant));
    t_check(hmoe_chat_template_from_name("qwen35") == HMOE_CHAT_TEMPLATE_QWEN35 &&
                strcmp(hmoe_chat_template_name(HMOE_CHAT_TEMPLATE_QWEN35), "qwen35") == 0,
            "qwen35 template name round trip", "name mismatch");
}

int main(void) {
    renders();
    detection();
    return t_summary();
}
