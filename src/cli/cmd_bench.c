/* cmd_bench.c — `hmoe bench`. Placeholder until its issue lands: says so and exits 2. */
#include <stdio.h>

#include "cli.h"

int hmoe_cmd_bench(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "hmoe bench: not implemented yet in this build\n");
    return HMOE_EXIT_USAGE;
}
