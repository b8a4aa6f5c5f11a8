/* opts.c — table-driven flag parsing and --help for every subcommand (house style 14).
 * Accepts "--flag value", "--flag=value", the llama.cpp short forms ("-m FILE", "-ngl 99",
 * "-n=4") and, as llama.cpp does, '_' for '-' in long names ("--n_predict"); a bad flag or
 * value is named with the usage line and exits 2. */
#include "cli.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

static const struct hmoe_opt *find_opt(const struct hmoe_opt *opts, const char *name, size_t name_len) {
    char spelled[64];
    if (name_len > 2 && name[1] == '-' && name_len < sizeof spelled) {
        for (size_t i = 0; i < name_len; i++) spelled[i] = name[i] == '_' ? '-' : name[i];
        name = spelled;
    }
    for (const struct hmoe_opt *o = opts; o->long_name; o++) {
        if (o->kind == HMOE_OPT_SECTION) continue;
        if (strlen(o->long_name) == name_len && strncmp(o->long_name, name, name_len) == 0) return o;
        if (o->short_name && strlen(o->short_name) == name_len && strncmp(o->short_name, name, name_len) == 0)
            return o;
    }
    return NULL;
}

static int usage_error(const char *usage, const char *fmt, const char *a, const char *b) {
    fprintf(stderr, "hmoe: ");
    fprintf(stderr, fmt, a, b);
    fprintf(stderr, "\nusage: %s\n(see --help)\n", usage);
    return HMOE_EXIT_USAGE;
}

static int set_value(const char *usage, const struct hmoe_opt *o, const char *val) {
    char *end = NULL;
    errno = 0;
    switch (o->kind) {
    case HMOE_OPT_INT: {
        long v = strtol(val, &end, 10);
        if (errno || end == val || *end || v < INT_MIN || v > INT_MAX)
            return usage_error(usage, "invalid integer '%s' for %s", val, o->long_name);
        *(int *)o->dest = (int)v;
        return 0;
    }
    case HMOE_OPT_I64: {
        long long v = strtoll(val, &end, 10);
        if (errno || end == val || *end) return usage_error(usage, "invalid integer '%s' for %s", val, o->long_name);
        *(int64_t *)o->dest = (int64_t)v;
        return 0;
    }
    case HMOE_OPT_FLOAT: {
        float v = strtof(val, &end);
        if (errno || end == val || *end) return usage_error(usage, "invalid number '%s' for %s", val, o->long_name);
        *(float *)o->dest = v;
        return 0;
    }
    case HMOE_OPT_STR:
        *(const char **)o->dest = val;
        return 0;
    case HMOE_OPT_STRS: {
        struct hmoe_opt_strs *s = o->dest;
        if (s->n >= (int)(sizeof s->v / sizeof s->v[0]))
            return usage_error(usage, "too many %s options (at most 32)%s", o->long_name, "");
        s->v[s->n++] = val;
        return 0;
    }
    case HMOE_OPT_FLAG:
    case HMOE_OPT_SECTION:
        break;
    }
    return usage_error(usage, "internal: bad option kind for %s%s", o->long_name, "");
}

int hmoe_opts_parse(const char *usage, const struct hmoe_opt *opts, int argc, char **argv, const char **pos,
                    int max_pos, int *n_pos) {
    *n_pos = 0;
    bool only_pos = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!only_pos && strcmp(a, "--") == 0) { only_pos = true; continue; }
        if (!only_pos && a[0] == '-' && a[1] != 0) {
            if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
                hmoe_opts_print_help(stdout, usage, opts);
                return -1;
            }
            const char *eq = strchr(a, '=');
            size_t name_len = eq ? (size_t)(eq - a) : strlen(a);
            const struct hmoe_opt *o = find_opt(opts, a, name_len);
            if (!o) {
                /* A negative number is a positional value, not a flag. */
                if ((a[1] >= '0' && a[1] <= '9') || a[1] == '.') goto positional;
                return usage_error(usage, "unknown option '%s'%s", a, "");
            }
            if (o->kind == HMOE_OPT_FLAG) {
                if (eq) return usage_error(usage, "option %s takes no value%s", o->long_name, "");
                *(bool *)o->dest = true;
                continue;
            }
            const char *val;
            if (eq) val = eq + 1;
            else {
                if (i + 1 >= argc) return usage_error(usage, "option %s needs a value (%s)", o->long_name, o->hint ? o->hint : "VALUE");
                val = argv[++i];
            }
            int rc = set_value(usage, o, val);
            if (rc) return rc;
            continue;
        }
    positional:
        if (*n_pos >= max_pos) return usage_error(usage, "unexpected argument '%s'%s", a, "");
        pos[(*n_pos)++] = a;
    }
    return 0;
}

enum { HELP_LEFT = 34 }; /* width of the flag column */

static void print_row(FILE *f, const char *left, const char *help) {
    /* A flag wider than its column gets a line of its own, so that the help column stays aligned. */
    if (strlen(left) > HELP_LEFT) fprintf(f, "  %s\n  %-*s %s\n", left, HELP_LEFT, "", help);
    else fprintf(f, "  %-*s %s\n", HELP_LEFT, left, help);
}

void hmoe_opts_print_help(FILE *f, const char *usage, const struct hmoe_opt *opts) {
    fprintf(f, "usage: %s\n", usage);
    if (opts->long_name && opts->kind != HMOE_OPT_SECTION) fprintf(f, "\noptions:\n");
    for (const struct hmoe_opt *o = opts; o->long_name; o++) {
        if (o->kind == HMOE_OPT_SECTION) {
            fprintf(f, "\n%s:\n", o->help);
            continue;
        }
        char left[96];
        snprintf(left, sizeof left, "%s%s%s%s%s", o->short_name ? o->short_name : "", o->short_name ? ", " : "",
                 o->long_name, o->hint ? " " : "", o->hint ? o->hint : "");
        print_row(f, left, o->help);
    }
    fprintf(f, "\n");
    print_row(f, "-h, --help", "show this help and exit");
}

int hmoe_cli_fail(const struct hmoe_err *err) {
    fprintf(stderr, "hmoe: error: %s\n", err->msg[0] ? err->msg : hmoe_status_str(err->code));
    return HMOE_EXIT_ERROR;
}
