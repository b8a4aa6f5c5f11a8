/* override.c — llama.cpp's -ot / --override-tensor rules, "REGEX=BUFFER" (BUFFER CPU, or GPU /
 * CUDA<n> for the device), matched with POSIX extended regexes searched anywhere in a tensor
 * name (llama.cpp uses std::regex_search). The ECMAScript shorthands \d \w \s people put in
 * those patterns are rewritten to bracket classes first. Used by the placement planner
 * (place.c); tests/test_sched_place.c covers parsing and matching.
 */
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "hmoe/sched.h"

/* \d -> [0-9], \w -> [A-Za-z0-9_], \s -> [[:space:]]; other escapes kept. */
static bool translate(const char *in, size_t len, char *out, size_t cap) {
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        const char *rep = NULL;
        if (in[i] == '\\' && i + 1 < len) {
            if (in[i + 1] == 'd') rep = "[0-9]";
            else if (in[i + 1] == 'w') rep = "[A-Za-z0-9_]";
            else if (in[i + 1] == 's') rep = "[[:space:]]";
        }
        if (rep) {
            size_t n = strlen(rep);
            if (o + n >= cap) return false;
            memcpy(out + o, rep, n);
            o += n;
            i++;
            continue;
        }
        if (o + 1 >= cap) return false;
        out[o++] = in[i];
    }
    out[o] = 0;
    return true;
}

enum hmoe_status hmoe_sched_override_parse(const char *spec, struct hmoe_sched_override *out, struct hmoe_err *err) {
    memset(out, 0, sizeof *out);
    const char *eq = spec ? strrchr(spec, '=') : NULL;
    if (!eq || eq == spec || !eq[1])
        return HMOE_RAISE(err, HMOE_ERR_ARG, "-ot '%s': expected REGEX=CPU or REGEX=GPU (e.g. -ot '\\.ffn_.*_exps\\.=CPU')",
                          spec ? spec : "");
    const char *buf = eq + 1;
    if (strcasecmp(buf, "CPU") == 0) out->to_gpu = false;
    else if (strcasecmp(buf, "GPU") == 0 || strncasecmp(buf, "CUDA", 4) == 0) out->to_gpu = true;
    else
        return HMOE_RAISE(err, HMOE_ERR_ARG, "-ot '%s': unknown buffer type '%s' (use CPU, GPU or CUDA0)", spec, buf);
    char pat[1024];
    if (!translate(spec, (size_t)(eq - spec), pat, sizeof pat))
        return HMOE_RAISE(err, HMOE_ERR_ARG, "-ot '%s': pattern too long", spec);
    regex_t *re = malloc(sizeof *re);
    if (!re) return HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory");
    int rc = regcomp(re, pat, REG_EXTENDED | REG_NOSUB);
    if (rc) {
        char msg[128];
        regerror(rc, re, msg, sizeof msg);
        free(re);
        return HMOE_RAISE(err, HMOE_ERR_ARG, "-ot '%s': bad regular expression: %s", spec, msg);
    }
    out->re = re;
    snprintf(out->text, sizeof out->text, "%s", spec);
    return HMOE_OK;
}

void *hmoe_sched_regex_compile(const char *pat, size_t len, char *why, size_t why_cap) {
    char buf[1024];
    if (!translate(pat, len, buf, sizeof buf)) {
        snprintf(why, why_cap, "pattern too long");
        return NULL;
    }
    regex_t *re = malloc(sizeof *re);
    if (!re) {
        snprintf(why, why_cap, "out of memory");
        return NULL;
    }
    const int rc = regcomp(re, buf, REG_EXTENDED | REG_NOSUB);
    if (rc) {
        regerror(rc, re, why, why_cap);
        free(re);
        return NULL;
    }
    return re;
}

bool hmoe_sched_regex_search(const void *re, const char *s) { return re && regexec(re, s, 0, NULL, 0) == 0; }

void hmoe_sched_regex_free(void *re) {
    if (!re) return;
    regfree(re);
    free(re);
}

void hmoe_sched_override_free(struct hmoe_sched_override *o) {
    if (!o || !o->re) return;
    regfree(o->re);
    free(o->re);
    o->re = NULL;
}

int hmoe_sched_override_match(const struct hmoe_sched_override *rules, int n_rules, const char *name) {
    for (int i = 0; i < n_rules; i++)
        if (rules[i].re && regexec(rules[i].re, name, 0, NULL, 0) == 0) return i;
    return -1;
}
