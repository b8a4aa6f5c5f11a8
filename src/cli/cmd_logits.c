/* cmd_logits.c — `hmoe logits`. Placeholder until its issue lands: says so and exits 2. */
#include <stdio.h>

#include "cli.h"

int hmoe_cmd_logits(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "hmoe logits: not implemented yet in this build\n");
    return HMOE_EXIT_USAGE;
}
