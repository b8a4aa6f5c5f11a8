/* template_detect.c — recognise the chat template stored in tokenizer.chat_template
 * (chat-templates.md §4 option A; families of §1 and §2): we render known families in C, so a template is only
 * accepted when it carries every marker of a family we reproduce byte for byte; anything
 * else is UNKNOWN and the caller falls back to ChatML with a warning. */
#include <string.h>

#include "hmoe/text.h"

static bool has_all(const char *t, const char *const *marks) {
    for (; *marks; marks++)
        if (!strstr(t, *marks)) return false;
    return true;
}

static bool has_any(const char *t, const char *const *marks) {
    for (; *marks; marks++)
        if (strstr(t, *marks)) return true;
    return false;
}

/* Qwen3 hybrid thinking (Qwen3-0.6B ... Qwen3-235B-A22B, Qwen3-30B-A3B): chat-templates.md §1.
 * These strings are quoted from that template (they appear as written in the Jinja source). */
static const char *const qwen3_marks[] = {
    "<|im_start|>",
    "ns.last_query_index",
    "reasoning_content",
    "enable_thinking is defined and enable_thinking is false",
    "'<think>\\n\\n</think>\\n\\n'",
    "'\\n<think>\\n' + reasoning_content.strip('\\n') + '\\n</think>\\n\\n'",
    "<tool_call>\\n{\"name\": \"",
    "'<|im_start|>user'",
    NULL,
};
/* Markers of related families that render differently (Qwen3.5/3.6, Qwen3-Coder XML calls,
 * Thinking-2507's forced "<think>\n" generation prompt). */
static const char *const qwen3_not[] = {
    "<function=",
    "preserve_thinking",
    "'<|im_start|>assistant\\n<think>\\n' }}",
    NULL,
};
/* Qwen3.5 / Qwen3.6 (chat-templates.md §2), quoted from that template: content macro with
 * trim, thinking-on generation prompt, reasoning block of the current tool loop, XML calls. */
static const char *const qwen35_marks[] = {
    "<|im_start|>",
    "render_content(",
    "ns.last_query_index",
    "reasoning_content|trim",
    "'\\n<think>\\n' + reasoning_content + '\\n</think>\\n\\n' + content",
    "'<think>\\n\\n</think>\\n\\n'",
    "'<think>\\n' }}",
    "<tool_call>\\n<function=",
    "<parameter=",
    NULL,
};
/* Which assistant turns keep their reasoning: Qwen3.5 "after the last query", Qwen3.6 the
 * same or every turn with preserve_thinking. Other variants (e.g. "... and reasoning_content")
 * render differently, so they stay unknown. */
static const char *const qwen35_history[] = {
    "{%- if loop.index0 > ns.last_query_index %}",
    "{%- if (preserve_thinking is defined and preserve_thinking is true) or (loop.index0 > ns.last_query_index) %}",
    NULL,
};
/* NVIDIA Nemotron-3 (nemotron_h_moe.md §10), quoted from its template: the history-thinking
 * switch, the XML tool list macro, the empty-think generation prompt, XML calls. */
static const char *const nemotron_marks[] = {
    "<|im_start|>",
    "truncate_history_thinking",
    "render_extra_keys",
    "'<|im_start|>assistant\\n<think></think>'",
    "'<|im_start|>assistant\\n<think>\\n'",
    "<tool_call>\\n<function=",
    "<tool_response>",
    NULL,
};
/* gpt-oss harmony (chat-templates.md §3), quoted from the model's template: the system
 * message builder, the developer message, the TypeScript tool namespace, calls addressed
 * to functions.NAME on the commentary channel, and the bare generation prompt. */
static const char *const harmony_marks[] = {
    "{{- \"<|start|>system<|message|>\" }}",
    "{%- macro build_system_message() -%}",
    "{{- \"Knowledge cutoff: 2024-06\\n\" }}",
    "strftime_now(\"%Y-%m-%d\")",
    "{{- \"<|start|>developer<|message|>\" }}",
    "{{- render_tool_namespace(\"functions\", tools) }}",
    "{{- \"<|start|>assistant to=\" }}",
    "<|channel|>commentary<|message|>\" + message.content|tojson",
    "<|start|>assistant\n{%- endif -%}",
    NULL,
};
/* The classic ChatML template (one turn per message, nothing else). */
static const char *const chatml_marks[] = {
    "'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'",
    NULL,
};
static const char *const chatml_not[] = {"think", "tool", "system_message", NULL};

enum hmoe_chat_template hmoe_chat_template_detect(const char *t) {
    if (!t) return HMOE_CHAT_TEMPLATE_UNKNOWN;
    if (has_all(t, qwen3_marks) && !has_any(t, qwen3_not)) return HMOE_CHAT_TEMPLATE_QWEN3;
    if (has_all(t, qwen35_marks) && has_any(t, qwen35_history)) return HMOE_CHAT_TEMPLATE_QWEN35;
    if (has_all(t, nemotron_marks)) return HMOE_CHAT_TEMPLATE_NEMOTRON;
    if (has_all(t, harmony_marks)) return HMOE_CHAT_TEMPLATE_HARMONY;
    if (has_all(t, chatml_marks) && !has_any(t, chatml_not)) return HMOE_CHAT_TEMPLATE_CHATML;
    return HMOE_CHAT_TEMPLATE_UNKNOWN;
}

static const char *const names[HMOE_CHAT_TEMPLATE_COUNT] = {
    [HMOE_CHAT_TEMPLATE_CHATML] = "chatml",
    [HMOE_CHAT_TEMPLATE_QWEN3] = "qwen3",
    [HMOE_CHAT_TEMPLATE_QWEN35] = "qwen35",
    [HMOE_CHAT_TEMPLATE_NEMOTRON] = "nemotron",
    [HMOE_CHAT_TEMPLATE_HARMONY] = "harmony",
};

const char *hmoe_chat_template_name(enum hmoe_chat_template t) {
    return t >= 0 && t < HMOE_CHAT_TEMPLATE_COUNT ? names[t] : NULL;
}

enum hmoe_chat_template hmoe_chat_template_from_name(const char *name) {
    for (int t = 0; name && t < HMOE_CHAT_TEMPLATE_COUNT; t++)
        if (strcmp(name, names[t]) == 0) return (enum hmoe_chat_template)t;
    return HMOE_CHAT_TEMPLATE_UNKNOWN;
}
