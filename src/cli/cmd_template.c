/* cmd_template.c — `hmoe template`: render a conversation file (OpenAI shape:
 * {"messages": [...], "tools": [...]}) with the model's chat template and print the prompt
 * exactly, nothing added. The model's own Jinja template (tokenizer.chat_template) renders by
 * default; --chat-template NAME picks a built-in format, --chat-template-file a template file
 * (hmoe_chat_fmt, text.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "hmoe/gguf.h"
#include "hmoe/json.h"
#include "hmoe/text.h"

static const char *usage =
    "hmoe template -m FILE -i conversation.json [--no-generation-prompt] [--no-think] [--chat-template NAME] "
    "[--chat-template-file FILE] [--chat-template-kwargs JSON]";

/* The format without a model file: a built-in name or a template file given on the command line. */
static int format_without_model(const struct hmoe_cli_chat_args *ca, struct hmoe_chat_fmt **fmt) {
    struct hmoe_vocab none = {.bos_id = HMOE_TOKEN_NONE, .eos_id = HMOE_TOKEN_NONE, .pre = HMOE_VOCAB_PRE_QWEN2};
    return hmoe_cli_chat_format(&none, HMOE_CHAT_TEMPLATE_UNKNOWN, ca, fmt);
}

int hmoe_cmd_template(int argc, char **argv) {
    const char *model = NULL, *input = NULL;
    bool no_gen = false, no_think = false, jinja_flag = false;
    struct hmoe_cli_chat_args ca = {0};
    const struct hmoe_opt opts[] = {
        {"--model", "-m", "FILE", "GGUF file whose tokenizer.chat_template renders the conversation", HMOE_OPT_STR, &model},
        {"--input", "-i", "FILE", "conversation JSON: {\"messages\": [{\"role\": ..., \"content\": ...}], \"tools\": [...]}",
         HMOE_OPT_STR, &input},
        {"--no-generation-prompt", NULL, NULL, "do not open an assistant turn at the end (default: open it)",
         HMOE_OPT_FLAG, &no_gen},
        {"--no-think", NULL, NULL, "thinking off: the template variable enable_thinking=false", HMOE_OPT_FLAG, &no_think},
        HMOE_CLI_CHAT_TEMPLATE_OPTS(ca),
        /* run, chat and bench take --jinja among llama.cpp's flags; template has no model options */
        {"--jinja", NULL, NULL, "accepted: the model's own Jinja template is the default", HMOE_OPT_FLAG, &jinja_flag},
        {NULL, NULL, NULL, NULL, HMOE_OPT_FLAG, NULL},
    };
    const char *pos[1];
    int n_pos = 0;
    int rc = hmoe_opts_parse(usage, opts, argc, argv, pos, 0, &n_pos);
    if (rc) return rc < 0 ? HMOE_EXIT_OK : rc;
    if (!input || (!model && !ca.name && !ca.file)) {
        fprintf(stderr, "hmoe: -i FILE and -m FILE (or --chat-template NAME / --chat-template-file FILE) are required\n"
                        "usage: %s\n", usage);
        return HMOE_EXIT_USAGE;
    }
    struct hmoe_err err = {0};
    struct hmoe_chat_fmt *fmt = NULL;
    if (!model) {
        if ((rc = format_without_model(&ca, &fmt))) return rc;
    } else {
        struct hmoe_gguf *g = NULL;
        if (hmoe_gguf_open(model, &g, &err) != HMOE_OK) return hmoe_cli_fail(&err);
        struct hmoe_vocab *vocab = NULL;
        struct hmoe_err verr = {0};
        if (hmoe_vocab_load(g, &vocab, &verr) == HMOE_OK) rc = hmoe_cli_chat_format(vocab, hmoe_arch_default_chat_family(g), &ca, &fmt);
        else {
            /* A tokenizer hmoe does not load still has a template to show. */
            struct hmoe_vocab none = {.bos_id = HMOE_TOKEN_NONE, .eos_id = HMOE_TOKEN_NONE, .pre = HMOE_VOCAB_PRE_QWEN2};
            struct hmoe_gguf_str s;
            char *jinja = NULL;
            if (hmoe_gguf_get_str(g, "tokenizer.chat_template", &s, NULL) == HMOE_OK && (jinja = malloc(s.len + 1))) {
                memcpy(jinja, s.ptr, s.len);
                jinja[s.len] = 0;
            }
            none.chat_template = jinja;
            rc = hmoe_cli_chat_format(&none, hmoe_arch_default_chat_family(g), &ca, &fmt);
            free(jinja);
        }
        hmoe_vocab_free(vocab);
        hmoe_gguf_free(g);
        if (rc) return rc;
    }
    struct hmoe_json *conv_json = hmoe_json_parse_file(input, &err);
    if (!conv_json) {
        hmoe_chat_fmt_free(fmt);
        return hmoe_cli_fail(&err);
    }
    char *out = NULL;
    struct hmoe_chat_opts o = {.add_generation_prompt = !no_gen, .enable_thinking = !no_think};
    if (hmoe_chat_fmt_render_json(fmt, hmoe_json_get(conv_json, "messages"), hmoe_json_get(conv_json, "tools"), &o, NULL,
                                  &out, &err) != HMOE_OK)
        rc = hmoe_cli_fail(&err);
    else {
        fwrite(out, 1, strlen(out), stdout);
        rc = fflush(stdout) == 0 ? HMOE_EXIT_OK : HMOE_EXIT_ERROR;
    }
    free(out);
    hmoe_chat_fmt_free(fmt);
    hmoe_json_free(conv_json);
    return rc;
}
