/* json_grammar_check.h — shared by test_server_grammar.c and fuzz_grammar.c: a JSON schema
 * validator over jansson values (the subset the server's grammar compiles), and a walk that
 * plays a random-weight model under the grammar: from a pool of "tokens" (every single byte
 * plus multi-byte chunks) it picks at random among those the matcher allows with the rule the
 * sampler uses (the shortest completion still fits in the tokens left), until the value is
 * complete. The walk's text must then parse (jansson) and match the schema.
 */
#ifndef HMOE_JSON_GRAMMAR_CHECK_H
#define HMOE_JSON_GRAMMAR_CHECK_H

#include <jansson.h>
#include <stdint.h>
#include <string.h>

#include "server/server_impl.h"

static int jg_type_ok(json_t *sch, json_t *v) {
    json_t *t = json_object_get(sch, "type");
    if (!t) return 1;
    json_t *one[1] = {t};
    const size_t n = json_is_array(t) ? json_array_size(t) : 1;
    for (size_t i = 0; i < n; i++) {
        json_t *x = json_is_array(t) ? json_array_get(t, i) : one[0];
        const char *s = json_string_value(x);
        if (!s) continue;
        if ((!strcmp(s, "object") && json_is_object(v)) || (!strcmp(s, "array") && json_is_array(v)) ||
            (!strcmp(s, "string") && json_is_string(v)) || (!strcmp(s, "number") && json_is_number(v)) ||
            (!strcmp(s, "integer") && json_is_integer(v)) || (!strcmp(s, "boolean") && json_is_boolean(v)) ||
            (!strcmp(s, "null") && json_is_null(v)))
            return 1;
    }
    return 0;
}

/* v matches sch (NULL sch: json_object mode, any object). */
static int jg_valid(json_t *sch, json_t *v) {
    if (!sch) return json_is_object(v);
    if (json_is_true(sch)) return 1;
    json_t *en = json_object_get(sch, "enum");
    if (en) {
        for (size_t i = 0; i < json_array_size(en); i++)
            if (json_equal(json_array_get(en, i), v)) return 1;
        return 0;
    }
    if (!jg_type_ok(sch, v)) return 0;
    json_t *props = json_object_get(sch, "properties"), *items = json_object_get(sch, "items");
    if (props && json_is_object(v)) {
        const char *k;
        json_t *x;
        json_object_foreach(v, k, x) {
            json_t *ps = json_object_get(props, k);
            if (!ps || !jg_valid(ps, x)) return 0;
        }
        json_t *req = json_object_get(sch, "required");
        for (size_t i = 0; i < json_array_size(req); i++)
            if (!json_object_get(v, json_string_value(json_array_get(req, i)))) return 0;
    }
    if (items && json_is_array(v))
        for (size_t i = 0; i < json_array_size(v); i++)
            if (!jg_valid(items, json_array_get(v, i))) return 0;
    return 1;
}

static uint64_t jg_rng(uint64_t *s) {
    *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
    return *s;
}

static const char *const jg_chunks[] = {"{\"", "\":", "\", \"", "\"}", "true", "false", "null", "123", "-0.5e+3",
                                        "\\u00e9", "\\ud83d", "\xc3\xa9", "\xe4\xb8\xad", "\xf0\x9f\x98\x80", " \"",
                                        "\n  ", "[]", "{}", "],", "}]", "\"a\"", "\"bb\"", "ccc", "1,", "\\\"",
                                        "\xed\xa0\x80", "\xc0\x80", "0123"};

/* Walk up to `budget` tokens; the text into out[cap]. Returns its length, or -1 when the
 * walk got stuck (no token allowed before the value was complete: a grammar bug). */
static long jg_walk(struct srv_json_matcher *m, uint64_t seed, int budget, char *out, size_t cap) {
    size_t n = 0;
    uint64_t rng = seed * 0x9E3779B97F4A7C15ull + 1;
    const size_t n_chunks = sizeof jg_chunks / sizeof jg_chunks[0];
    for (int t = 0; t < budget; t++) {
        if (srv_json_matcher_dist(m) == 0) return (long)n;
        /* candidates: 256 single bytes + the chunks; pick a random allowed one */
        int ok[256 + sizeof jg_chunks / sizeof jg_chunks[0]], n_ok = 0;
        for (int i = 0; i < 256 + (int)n_chunks; i++) {
            char b = (char)i;
            const char *p = i < 256 ? &b : jg_chunks[i - 256];
            const size_t len = i < 256 ? 1 : strlen(p);
            const int d = srv_json_matcher_try(m, p, len);
            if (d >= 0 && d <= budget - t - 1) ok[n_ok++] = i;
        }
        if (!n_ok) return -1;
        const int i = ok[jg_rng(&rng) % (uint64_t)n_ok];
        char b = (char)i;
        const char *p = i < 256 ? &b : jg_chunks[i - 256];
        const size_t len = i < 256 ? 1 : strlen(p);
        if (!srv_json_matcher_feed(m, p, len) || n + len >= cap) return -1;
        memcpy(out + n, p, len);
        n += len;
    }
    return srv_json_matcher_dist(m) == 0 ? (long)n : -1;
}

#endif
