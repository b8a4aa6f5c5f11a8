/* cmd_run.c — `hmoe run`. Placeholder until its issue lands: says so and exits 2. */
#include <stdio.h>

#include "cli.h"

int hmoe_cmd_run(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "hmoe run: not implemented yet in this build\n");
    return HMOE_EXIT_USAGE;
}
