/* cmd_template.c — `hmoe template`: render a conversation file (OpenAI shape:
 * {"messages": [...], "tools": [...]}) with the model's chat template and print the prompt
 * exactly, nothing added. The template family is detected from tokenizer.chat_template;
 * an unrecognised one falls back to ChatML with a one-line warning (chat-templates.md §4). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "hmoe/gguf.h"
#include "hmoe/json.h"
#include "hmoe/text.h"

static const char *usage =
    "hmoe template -m FILE -i conversation.json [--no-generation-prompt] [--no-think] [--chat-template chatml|qwen3|qwen35|nemotron|harmony] "
    "[--chat-template-kwargs JSON]";

/* --chat-template-kwargs as llama.cpp takes it: a JSON object of template variables. The
 * rendered families read enable_thinking (a bool) and reasoning_effort (a string: harmony's
 * "Reasoning:" line); other keys have no effect here and are named in a warning. */
static int apply_kwargs(const char *text, struct hmoe_json **keep, struct hmoe_chat_opts *o) {
    struct hmoe_err err = {0};
    struct hmoe_json *j = hmoe_json_parse(text, strlen(text), &err);
    if (!j || j->kind != HMOE_JSON_OBJECT) {
        fprintf(stderr, "hmoe: --chat-template-kwargs must be a JSON object, e.g. '{\"reasoning_effort\": \"high\"}'%s%s\n",
                j ? "" : ": ", j ? "" : err.msg);
        hmoe_json_free(j);
        return HMOE_EXIT_USAGE;
    }
    for (size_t i = 0; i < j->n; i++) {
        const char *k = j->keys[i];
        const struct hmoe_json *v = j->items[i];
        if (strcmp(k, "reasoning_effort") == 0 && v->kind == HMOE_JSON_STRING) o->reasoning_effort = v->str;
        else if (strcmp(k, "enable_thinking") == 0 && v->kind == HMOE_JSON_BOOL) o->enable_thinking = v->b;
        else if (strcmp(k, "reasoning_effort") == 0 || strcmp(k, "enable_thinking") == 0) {
            fprintf(stderr, "hmoe: --chat-template-kwargs: \"%s\" must be a %s\n", k,
                    strcmp(k, "enable_thinking") == 0 ? "boolean" : "string (low, medium, high)");
            hmoe_json_free(j);
            return HMOE_EXIT_USAGE;
        } else {
            fprintf(stderr, "hmoe: warning: --chat-template-kwargs: \"%s\" is not used by the built-in templates; ignored\n", k);
        }
    }
    *keep = j; /* the options point into it */
    return HMOE_EXIT_OK;
}

int hmoe_cmd_template(int argc, char **argv) {
    const char *model = NULL, *input = NULL, *tmpl_name = NULL, *kwargs = NULL;
    bool no_gen = false, no_think = false;
    const struct hmoe_opt opts[] = {
        {"--model", "-m", "FILE", "GGUF file whose tokenizer.chat_template picks the format", HMOE_OPT_STR, &model},
        {"--input", "-i", "FILE", "conversation JSON: {\"messages\": [{\"role\": ..., \"content\": ...}], \"tools\": [...]}",
         HMOE_OPT_STR, &input},
        {"--no-generation-prompt", NULL, NULL, "do not open an assistant turn at the end (default: open it)",
         HMOE_OPT_FLAG, &no_gen},
        {"--no-think", NULL, NULL, "thinking off: Qwen3 gets an empty <think></think> block (enable_thinking=false)",
         HMOE_OPT_FLAG, &no_think},
        {"--chat-template", NULL, "NAME", "use this format instead of detecting it: chatml, qwen3, qwen35, nemotron, harmony", HMOE_OPT_STR,
         &tmpl_name},
        {"--chat-template-kwargs", NULL, "JSON", "template variables, e.g. '{\"reasoning_effort\": \"high\"}' (harmony) or "
         "'{\"enable_thinking\": false}'", HMOE_OPT_STR, &kwargs},
        {NULL, NULL, NULL, NULL, HMOE_OPT_FLAG, NULL},
    };
    const char *pos[1];
    int n_pos = 0;
    int rc = hmoe_opts_parse(usage, opts, argc, argv, pos, 0, &n_pos);
    if (rc) return rc < 0 ? HMOE_EXIT_OK : rc;
    if (!input || (!model && !tmpl_name)) {
        fprintf(stderr, "hmoe: -i FILE and -m FILE (or --chat-template NAME) are required\nusage: %s\n", usage);
        return HMOE_EXIT_USAGE;
    }
    enum hmoe_chat_template tmpl = HMOE_CHAT_TEMPLATE_UNKNOWN;
    if (tmpl_name && (tmpl = hmoe_chat_template_from_name(tmpl_name)) == HMOE_CHAT_TEMPLATE_UNKNOWN) {
        fprintf(stderr, "hmoe: unknown chat template '%s' (supported: chatml, qwen3, qwen35, nemotron, harmony)\nusage: %s\n", tmpl_name,
                usage);
        return HMOE_EXIT_USAGE;
    }
    struct hmoe_err err = {0};
    if (!tmpl_name) {
        struct hmoe_gguf *g = NULL;
        if (hmoe_gguf_open(model, &g, &err) != HMOE_OK) return hmoe_cli_fail(&err);
        struct hmoe_gguf_str s;
        char *jinja = NULL;
        if (hmoe_gguf_get_str(g, "tokenizer.chat_template", &s, NULL) == HMOE_OK && (jinja = malloc(s.len + 1))) {
            memcpy(jinja, s.ptr, s.len);
            jinja[s.len] = 0;
        }
        tmpl = hmoe_chat_template_detect(jinja);
        /* No template at all but a Qwen3.5 vocabulary: the Qwen3.5 format (as cli_gen.c). */
        struct hmoe_gguf_str pre;
        if (!jinja && hmoe_gguf_get_str(g, "tokenizer.ggml.pre", &pre, NULL) == HMOE_OK && pre.len == 6 &&
            memcmp(pre.ptr, "qwen35", 6) == 0)
            tmpl = HMOE_CHAT_TEMPLATE_QWEN35;
        if (!jinja && hmoe_gguf_get_str(g, "tokenizer.ggml.pre", &pre, NULL) == HMOE_OK && pre.len == 6 &&
            memcmp(pre.ptr, "gpt-4o", 6) == 0)
            tmpl = HMOE_CHAT_TEMPLATE_HARMONY; /* an o200k vocabulary (gpt-oss) speaks harmony */
        free(jinja);
        hmoe_gguf_free(g);
        if (tmpl == HMOE_CHAT_TEMPLATE_UNKNOWN) {
            fprintf(stderr,
                    "hmoe: warning: %s: chat template not recognised (hmoe renders: qwen3, qwen35, nemotron, harmony); using plain "
                    "ChatML (choose with --chat-template chatml|qwen3|qwen35|nemotron|harmony)\n",
                    model);
            tmpl = HMOE_CHAT_TEMPLATE_CHATML;
        }
    }
    struct hmoe_json *conv_json = hmoe_json_parse_file(input, &err);
    if (!conv_json) return hmoe_cli_fail(&err);
    struct hmoe_chat_conv conv;
    char *out = NULL;
    if (hmoe_chat_conv_from_json(conv_json, &conv, &err) != HMOE_OK) {
        rc = hmoe_cli_fail(&err);
        hmoe_json_free(conv_json);
        return rc;
    }
    struct hmoe_chat_opts o = {.add_generation_prompt = !no_gen, .enable_thinking = !no_think,
                               .tools = (const char *const *)conv.tools, .n_tools = conv.n_tools};
    struct hmoe_json *kw = NULL;
    if (kwargs && (rc = apply_kwargs(kwargs, &kw, &o)) != HMOE_EXIT_OK) {
        hmoe_chat_conv_free(&conv);
        hmoe_json_free(conv_json);
        return rc;
    }
    if (hmoe_chat_render(tmpl, conv.msgs, conv.n_msgs, &o, &out, &err) != HMOE_OK) rc = hmoe_cli_fail(&err);
    else {
        fwrite(out, 1, strlen(out), stdout);
        rc = fflush(stdout) == 0 ? HMOE_EXIT_OK : HMOE_EXIT_ERROR;
    }
    free(out);
    hmoe_json_free(kw);
    hmoe_chat_conv_free(&conv);
    hmoe_json_free(conv_json);
    return rc;
}
