/* main.c — `hmoe <command> [options]`: the table of contents of the program.
 * Each subcommand lives in its own cmd_<name>.c and owns its flag table. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

struct command {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *summary;
};

static const struct command commands[] = {
    {"run", hmoe_cmd_run, "one-shot completion of a prompt"},
    {"chat", hmoe_cmd_chat, "interactive multi-turn chat"},
    {"serve", hmoe_cmd_serve, "OpenAI-compatible HTTP server (llama-server endpoints)"},
    {"bench", hmoe_cmd_bench, "tokens/s self-benchmark (llama-bench conventions)"},
    {"info", hmoe_cmd_info, "print a GGUF model's architecture, hyperparameters and tensor sizes"},
    {"tokenize", hmoe_cmd_tokenize, "text -> token ids (llama-tokenize format)"},
    {"template", hmoe_cmd_template, "render a conversation with the model's chat template"},
    {"logits", hmoe_cmd_logits, "logits at every position of a token sequence"},
    {"synth", hmoe_cmd_synth, "write a random-weight GGUF with a real model's layout"},
};

static void print_usage(FILE *f) {
    fprintf(f, "hmoe — Mixture-of-Experts inference for GGUF models on a small GPU plus RAM\n\n"
               "usage: hmoe <command> [options]   (hmoe <command> --help for its options; hmoe --version)\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        print_usage(stderr);
        return HMOE_EXIT_USAGE;
    }
    if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "version") == 0) return hmoe_cli_print_version(stdout);
    if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "help") == 0) {
        print_usage(stdout);
        return HMOE_EXIT_OK;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(argv[1], commands[i].name) == 0) return commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "hmoe: unknown command '%s'\n\n", argv[1]);
    print_usage(stderr);
    return HMOE_EXIT_USAGE;
}
