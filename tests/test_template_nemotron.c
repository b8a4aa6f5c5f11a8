/* test_template_nemotron.c — the NVIDIA Nemotron-3 chat format (nemotron_h_moe.md §10). There
 * is no rendered fixture for it, so every expected string below is written out by hand from
 * the template's logic: the system turn always first (empty without a system message) with
 * the XML tool list; "<think></think>" in front of assistant content without think tags;
 * reasoning dropped from assistant turns before the last user message, kept after it; tool
 * calls and tool results in XML; both generation prompts. Detection runs on a string with
 * the template's marker lines (the real template is not in the fixtures).
 */
#include "harness.h"
#include "hmoe/json.h"
#include "hmoe/text.h"

static char *render(const char *conv_json, bool gen, bool think, struct hmoe_err *err) {
    struct hmoe_json *j = hmoe_json_parse(conv_json, strlen(conv_json), err);
    if (!j) return NULL;
    struct hmoe_chat_conv conv;
    char *out = NULL;
    if (hmoe_chat_conv_from_json(j, &conv, err) == HMOE_OK) {
        struct hmoe_chat_opts o = {.add_generation_prompt = gen,
                                   .enable_thinking = think,
                                   .tools = (const char *const *)conv.tools,
                                   .n_tools = conv.n_tools};
        hmoe_chat_render(HMOE_CHAT_TEMPLATE_NEMOTRON, conv.msgs, conv.n_msgs, &o, &out, err);
        hmoe_chat_conv_free(&conv);
    }
    hmoe_json_free(j);
    return out;
}

static void expect(const char *name, const char *conv, bool gen, bool think, const char *want) {
    struct hmoe_err err = {0};
    char *got = render(conv, gen, think, &err);
    t_check(got && strcmp(got, want) == 0, name, "got '%s' (%s)", got ? got : "(null)", got ? "" : err.msg);
    free(got);
}

#define SYS0 "<|im_start|>system\n<|im_end|>\n"
#define IMPORTANT                                                                                                      \
    "\n\nIf you choose to call a function ONLY reply in the following format with NO suffix:\n\n<tool_call>\n"        \
    "<function=example_function_name>\n<parameter=example_parameter_1>\nvalue_1\n</parameter>\n"                       \
    "<parameter=example_parameter_2>\nThis is the value for the second parameter\nthat can span\nmultiple lines\n"     \
    "</parameter>\n</function>\n</tool_call>\n\n<IMPORTANT>\nReminder:\n- Function calls MUST follow the specified "   \
    "format: an inner <function=...></function> block must be nested within <tool_call></tool_call> XML tags\n- "     \
    "Required parameters MUST be specified\n- You may provide optional reasoning for your function call in natural "  \
    "language BEFORE the function call, but NOT after\n- If there is no function call available, answer the "         \
    "question like normal with your current knowledge and do not tell the user about function calls\n</IMPORTANT>"

int main(void) {
    expect("nemotron: one user turn, thinking on: empty system turn first, '<think>\\n' opens the answer",
           "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}]}", true, true,
           SYS0 "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n");
    expect("nemotron: thinking off closes an empty think block",
           "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}]}", true, false,
           SYS0 "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think></think>");
    expect("nemotron: system text, no generation prompt",
           "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", \"content\": "
           "\"Hi\"}]}",
           false, true, "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n");
    /* Before the last user turn: reasoning folded into content, then cut to what follows </think>. */
    expect("nemotron: history reasoning truncated to <think></think> before the last user turn",
           "{\"messages\": [{\"role\": \"user\", \"content\": \"Q1\"}, {\"role\": \"assistant\", \"content\": "
           "\"A1\", \"reasoning_content\": \"plan\"}, {\"role\": \"assistant\", \"content\": \"  plain  \"}, "
           "{\"role\": \"user\", \"content\": \"Q2\"}]}",
           true, true,
           SYS0 "<|im_start|>user\nQ1<|im_end|>\n<|im_start|>assistant\n<think></think>\nA1<|im_end|>\n"
                "<|im_start|>assistant\n<think></think>  plain<|im_end|>\n<|im_start|>user\nQ2<|im_end|>\n"
                "<|im_start|>assistant\n<think>\n");
    expect("nemotron: an assistant turn after the last user turn keeps its reasoning (trimmed)",
           "{\"messages\": [{\"role\": \"user\", \"content\": \"Q\"}, {\"role\": \"assistant\", \"content\": "
           "\"A \", \"reasoning_content\": \"plan\"}]}",
           false, true, SYS0 "<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n<think>\nplan\n</think>\nA<|im_end|>\n");
    expect("nemotron: tool call in XML, tool result in a user turn",
           "{\"messages\": [{\"role\": \"user\", \"content\": \"Weather?\"}, {\"role\": \"assistant\", \"content\": "
           "\"\", \"tool_calls\": [{\"function\": {\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", "
           "\"days\": 2}}}]}, {\"role\": \"tool\", \"content\": \"sunny\"}]}",
           true, true,
           SYS0 "<|im_start|>user\nWeather?<|im_end|>\n<|im_start|>assistant\n<think></think>\n<tool_call>\n"
                "<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n2\n</parameter>\n"
                "</function>\n</tool_call>\n<|im_end|>\n<|im_start|>user\n<tool_response>\nsunny\n</tool_response>\n"
                "<|im_end|>\n<|im_start|>assistant\n<think>\n");
    expect("nemotron: tool list in the system turn after the system text",
           "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", \"content\": "
           "\"Hi\"}], \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": "
           "\" Weather now \", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": "
           "\"string\", \"description\": \"City\", \"enum\": [\"Paris\", \"Rome\"], \"default\": \"Paris\"}}, "
           "\"required\": [\"city\"]}}}]}",
           false, true,
           "<|im_start|>system\nBe brief.\n\n# Tools\n\nYou have access to the following functions:\n\n<tools>\n"
           "<function>\n<name>get_weather</name>\n<description>Weather now</description>\n<parameters>\n<parameter>\n"
           "<name>city</name>\n<type>string</type>\n<description>City</description>\n<enum>[\"Paris\", \"Rome\"]</enum>\n"
           "<default>Paris</default>\n</parameter>\n<required>[\"city\"]</required>\n</parameters>\n</function>\n"
           "</tools>" IMPORTANT "<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n");
    const char *marks = "{%- set truncate_history_thinking = ... %}{% macro render_extra_keys(json_dict, handled_keys) "
                        "%}<|im_start|>{{- '<|im_start|>assistant\\n<think>\\n' }}{{- "
                        "'<|im_start|>assistant\\n<think></think>' }}<tool_call>\\n<function=<tool_response>";
    t_check(hmoe_chat_template_detect(marks) == HMOE_CHAT_TEMPLATE_NEMOTRON &&
                hmoe_chat_template_from_name("nemotron") == HMOE_CHAT_TEMPLATE_NEMOTRON,
            "nemotron: template detected from its marker lines, --chat-template nemotron", "not detected");
    return t_summary();
}
