/* fuzz_grammar.c — libFuzzer target for the JSON grammar of `hmoe serve` (grammar_json.c).
 * Input: a schema (JSON text up to the first NUL byte; none: json_object mode) and the bytes a
 * model would write. The schema compiles or is refused with a 4xx and a message; the bytes are
 * fed one at a time (refused ones skipped, the matcher must stay unchanged); then a shortest
 * completion must take exactly the distance the matcher reports, and the whole text must parse
 * (jansson) and match the schema (json_grammar_check.h). ASan/UBSan catch the rest.
 * Build and run (Makefile `fuzz`):  make fuzz && build/fuzz/fuzz_grammar -max_total_time=600
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "json_grammar_check.h"

void srv_error_set(struct srv_error *e, int status, const char *param, const char *fmt, ...) {
    e->status = status;
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *nul = memchr(data, 0, size);
    json_t *sch = NULL;
    if (nul) {
        sch = json_loadb((const char *)data, (size_t)(nul - data), JSON_DECODE_ANY, NULL);
        if (!sch) return 0;
        size -= (size_t)(nul - data) + 1;
        data = nul + 1;
    }
    struct srv_error e = {0};
    struct srv_json_matcher *m = srv_json_matcher_new(sch, &e);
    if (!m) {
        if (e.status < 400 || e.status >= 600 || !e.msg[0]) __builtin_trap();
        json_decref(sch);
        return 0;
    }
    static char text[1 << 16];
    size_t n = 0;
    for (size_t i = 0; i < size && n + 1 < sizeof text; i++) {
        const int before = srv_json_matcher_dist(m), tried = srv_json_matcher_try(m, (const char *)data + i, 1);
        const bool fed = srv_json_matcher_feed(m, (const char *)data + i, 1);
        if (fed != (tried >= 0) || (fed && srv_json_matcher_dist(m) != tried) || (!fed && srv_json_matcher_dist(m) != before))
            __builtin_trap();
        if (fed) text[n++] = (char)data[i];
    }
    for (int d = srv_json_matcher_dist(m); d > 0; d--) {
        int found = -1;
        for (int c = 1; c < 256 && found < 0; c++) {
            char b = (char)c;
            if (srv_json_matcher_try(m, &b, 1) == d - 1) found = c;
        }
        if (found < 0 || n + 1 >= sizeof text) __builtin_trap(); /* the distance was wrong */
        char b = (char)found;
        srv_json_matcher_feed(m, &b, 1);
        text[n++] = b;
    }
    json_t *v = json_loadb(text, n, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
    if (!v || !jg_valid(sch, v)) __builtin_trap();
    json_decref(v);
    srv_json_matcher_free(m);
    json_decref(sch);
    return 0;
}
