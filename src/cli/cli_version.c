/* cli_version.c — what `hmoe --version` and bench's build_commit report: the git commit and
 * the build options, baked in by the Makefile (build/gen/build_info.h, "unknown" outside a
 * git checkout). */
#include "cli.h"

#include "build_info.h"

const char *hmoe_cli_build_commit(void) { return HMOE_BUILD_COMMIT; }

int hmoe_cli_build_number(void) { return HMOE_BUILD_NUMBER; }

const char *hmoe_cli_build_options(void) { return HMOE_BUILD_OPTIONS; }

int hmoe_cli_print_version(FILE *f) {
    /* llama.cpp's two lines ("version: ...", "built with ..."), on stdout so that scripts can read them. */
    fprintf(f, "version: %d (%s)\nbuilt with %s\n", HMOE_BUILD_NUMBER, HMOE_BUILD_COMMIT, HMOE_BUILD_OPTIONS);
    return fflush(f) == 0 && !ferror(f) ? HMOE_EXIT_OK : HMOE_EXIT_ERROR;
}
