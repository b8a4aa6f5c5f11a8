/* template_detect.c — recognise the chat template stored in tokenizer.chat_template
 * (chat-templates.md §4 option A): we render known families in C, so a template is only
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
/* The classic ChatML template (one turn per message, nothing else). */
static const char *const chatml_marks[] = {
    "'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'",
    NULL,
};
static const char *const chatml_not[] = {"think", "tool", "system_message", NULL};

enum hmoe_chat_template hmoe_chat_template_detect(const char *t) {
    if (!t) return HMOE_CHAT_TEMPLATE_UNKNOWN;
    if (has_all(t, qwen3_marks) && !has_any(t, qwen3_not)) return HMOE_CHAT_TEMPLATE_QWEN3;
    if (has_all(t, chatml_marks) && !has_any(t, chatml_not)) return HMOE_CHAT_TEMPLATE_CHATML;
    return HMOE_CHAT_TEMPLATE_UNKNOWN;
}

static const char *const names[HMOE_CHAT_TEMPLATE_COUNT] = {
    [HMOE_CHAT_TEMPLATE_CHATML] = "chatml",
    [HMOE_CHAT_TEMPLATE_QWEN3] = "qwen3",
};

const char *hmoe_chat_template_name(enum hmoe_chat_template t) {
    return t >= 0 && t < HMOE_CHAT_TEMPLATE_COUNT ? names[t] : NULL;
}

enum hmoe_chat_template hmoe_chat_template_from_name(const char *name) {
    for (int t = 0; name && t < HMOE_CHAT_TEMPLATE_COUNT; t++)
        if (strcmp(name, names[t]) == 0) return (enum hmoe_chat_template)t;
    return HMOE_CHAT_TEMPLATE_UNKNOWN;
}
