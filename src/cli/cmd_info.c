/* cmd_info.c — `hmoe info -m FILE [--json]`: open and validate a GGUF (gguf.h), then print
 * what is in it — every metadata key, the tensor-type histogram and, for MoE models, how
 * the bytes split between experts and everything else (info_stats.c). Text by default
 * (info_text.c), one JSON object with --json (info_json.c). Exit 0, 1 on a bad file, 2 on
 * bad flags; errors are one line on stderr.
 */
#include <stdio.h>

#include "cli.h"
#include "info_impl.h"

static const char usage[] = "hmoe info -m FILE [--json]";

int hmoe_cmd_info(int argc, char **argv) {
    const char *model = NULL;
    bool json = false;
    const struct hmoe_opt opts[] = {
        {"--model", "-m", "FILE", "GGUF file to describe (required; may also be given as the only argument)",
         HMOE_OPT_STR, &model},
        {"--json", NULL, NULL, "print one JSON object instead of text (default: text)", HMOE_OPT_FLAG, &json},
        {NULL, NULL, NULL, NULL, HMOE_OPT_FLAG, NULL},
    };
    const char *pos[1];
    int n_pos = 0;
    int rc = hmoe_opts_parse(usage, opts, argc, argv, pos, 1, &n_pos);
    if (rc) return rc < 0 ? HMOE_EXIT_OK : rc;
    if (n_pos == 1) {
        if (model) {
            fprintf(stderr, "hmoe: give the model once, either with -m or as the argument\nusage: %s\n", usage);
            return HMOE_EXIT_USAGE;
        }
        model = pos[0];
    }
    if (!model) {
        fprintf(stderr, "hmoe: info needs a model file (-m FILE)\nusage: %s\n", usage);
        return HMOE_EXIT_USAGE;
    }

    struct hmoe_err err = {0};
    struct hmoe_gguf *g = NULL;
    if (hmoe_gguf_open(model, &g, &err) != HMOE_OK) return hmoe_cli_fail(&err);
    struct hmoe_info_stats st;
    if (hmoe_info_stats_init(&st, g, &err) != HMOE_OK) {
        hmoe_info_stats_free(&st);
        hmoe_gguf_free(g);
        return hmoe_cli_fail(&err);
    }
    if (json) hmoe_info_print_json(stdout, g, &st);
    else hmoe_info_print_text(stdout, g, &st);
    hmoe_info_stats_free(&st);
    hmoe_gguf_free(g);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "hmoe: error writing the report to stdout\n");
        return HMOE_EXIT_ERROR;
    }
    return HMOE_EXIT_OK;
}
