/* test_server_grammar.c — the JSON grammar of `hmoe serve` (src/server/grammar_json.c): schemas
 * compiled or refused with the keyword named; texts that are not JSON (or not the schema) refused
 * byte by byte; the distance to completion exact (a shortest completion takes exactly that many
 * bytes); and random walks under the sampler's rule (json_grammar_check.h) always ending, within
 * their token budget, in text that jansson parses and that matches the schema.
 */
#include "harness.h"
#include "json_grammar_check.h"

static const char *const schemas[] = {
    NULL, /* json_object */
    "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},\"age\":{\"type\":\"integer\"},"
    "\"ok\":{\"type\":\"boolean\"},\"tags\":{\"type\":\"array\",\"items\":{\"enum\":[\"a\",\"bb\",\"ccc\"]}},"
    "\"kind\":{\"enum\":[\"x\",1,12,null,{\"k\":2}]},\"opt\":{\"type\":[\"number\",\"null\"]}},"
    "\"required\":[\"name\",\"age\",\"ok\",\"tags\",\"kind\"],\"additionalProperties\":false}",
    "{\"type\":\"array\",\"items\":{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"number\"},\"ab\":"
    "{\"type\":\"null\"}},\"required\":[\"ab\"]}}",
    "{\"type\":\"integer\"}",
    "{\"type\":\"string\",\"title\":\"t\",\"description\":\"d\"}",
    "{\"enum\":[1,12,123]}",
    "{\"type\":[\"boolean\",\"null\",\"number\"]}",
    "{\"properties\":{\"deep\":{\"properties\":{\"deeper\":{\"type\":\"array\",\"items\":{\"type\":\"array\"}}},"
    "\"required\":[\"deeper\"]}},\"required\":[\"deep\"]}",
    "{}",
};

static json_t *load(const char *txt) { return txt ? json_loads(txt, 0, NULL) : NULL; }

/* Feed a shortest completion byte by byte: each step must lower the distance by exactly 1. */
static int complete_exactly(struct srv_json_matcher *m, char *out, size_t cap, size_t *n) {
    int d = srv_json_matcher_dist(m);
    while (d > 0) {
        int found = -1;
        for (int c = 1; c < 256 && found < 0; c++) {
            char b = (char)c;
            if (srv_json_matcher_try(m, &b, 1) == d - 1) found = c;
        }
        if (found < 0 || *n + 1 >= cap) return 0;
        char b = (char)found;
        srv_json_matcher_feed(m, &b, 1);
        out[(*n)++] = b;
        d--;
    }
    return 1;
}

int main(void) {
    char text[65536];
    /* walks: every schema, many seeds and budgets */
    for (size_t k = 0; k < sizeof schemas / sizeof schemas[0]; k++) {
        json_t *sch = load(schemas[k]);
        int bad = 0, done = 0;
        char detail[512] = "";
        for (uint64_t seed = 1; seed <= 300 && !bad; seed++) {
            struct srv_error e = {0};
            struct srv_json_matcher *m = srv_json_matcher_new(sch, &e);
            if (!m) {
                snprintf(detail, sizeof detail, "compile: %.400s", e.msg);
                bad = 1;
                break;
            }
            const int budget = srv_json_matcher_dist(m) + (int)(seed % 7) * 15;
            const long n = jg_walk(m, seed, budget, text, sizeof text);
            json_error_t je;
            json_t *v = n >= 0 ? json_loadb(text, (size_t)n, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je) : NULL;
            if (n < 0) snprintf(detail, sizeof detail, "seed %llu: the walk got stuck", (unsigned long long)seed), bad = 1;
            else if (!v) snprintf(detail, sizeof detail, "seed %llu: '%.*s' does not parse: %s", (unsigned long long)seed,
                                  (int)HMOE_MIN(n, 300), text, je.text), bad = 1;
            else if (!jg_valid(sch, v)) snprintf(detail, sizeof detail, "seed %llu: '%.*s' does not match the schema",
                                                 (unsigned long long)seed, (int)HMOE_MIN(n, 300), text), bad = 1;
            done += !bad;
            json_decref(v);
            srv_json_matcher_free(m);
        }
        char name[96];
        snprintf(name, sizeof name, "grammar: schema %zu: 300 random walks end in valid, matching JSON", k);
        t_check(!bad && done == 300, name, "%s", detail);
        json_decref(sch);
    }

    /* exact distance: after random prefixes, a shortest completion takes exactly dist bytes */
    {
        json_t *sch = load(schemas[1]);
        int bad = 0;
        for (uint64_t seed = 1; seed <= 200 && !bad; seed++) {
            struct srv_error e = {0};
            struct srv_json_matcher *m = srv_json_matcher_new(sch, &e);
            uint64_t rng = seed;
            size_t n = 0;
            for (int steps = (int)(seed % 40); steps > 0; steps--) { /* a random allowed prefix */
                char b = (char)(jg_rng(&rng) % 128);
                if (srv_json_matcher_try(m, &b, 1) >= 0) srv_json_matcher_feed(m, &b, 1), text[n++] = b;
            }
            if (!complete_exactly(m, text, sizeof text, &n)) bad = 1;
            json_t *v = bad ? NULL : json_loadb(text, n, JSON_DECODE_ANY, NULL);
            if (!v || !jg_valid(sch, v)) bad = 1;
            json_decref(v);
            srv_json_matcher_free(m);
        }
        t_check(!bad, "grammar: a shortest completion is exactly the distance, and valid", "%.*s", 200, text);
        json_decref(sch);
    }

    /* refusals, byte by byte */
    static const struct {
        int schema;
        const char *text;
    } refused[] = {
        {0, "[1]"}, {0, "{\"a\":}"}, {0, "{\"a\":1,}"}, {0, "{\"a\" 1}"}, {0, "{\"a\":01}"}, {0, "{\"a\":\"\x01\"}"},
        {0, "{\"a\":\"\xc0\x80\"}"}, {0, "{\"a\":\"\xed\xa0\x80\"}"}, {0, "{\"a\":\"\\x\"}"}, {0, "{\"a\":\"\\ud800\"}"},
        {0, "{\"a\":1.}"}, {0, "{\"a\":1e}"}, {0, "{\"a\":tru}"}, {0, "{}x"}, {0, "{\"a\":1234567890123456}"},
        {0, "{\"a\":1e123}"}, {0, "{          }"}, {1, "{\"name\":\"x\"}"}, {1, "{\"other\":1}"},
        {1, "{\"age\":1.5"}, {1, "{\"tags\":[\"d\"]"}, {1, "{\"kind\":2"}, {1, "{\"name\":\"a\",\"name\""},
        {3, "1.0"}, {3, "\"1\""}, {5, "2"}, {5, "1234"}, {6, "\"s\""},
    };
    for (size_t k = 0; k < sizeof refused / sizeof refused[0]; k++) {
        json_t *sch = load(schemas[refused[k].schema]);
        struct srv_error e = {0};
        struct srv_json_matcher *m = srv_json_matcher_new(sch, &e);
        const char *t = refused[k].text;
        size_t i = 0;
        while (t[i] && srv_json_matcher_feed(m, t + i, 1)) i++;
        const int stopped = t[i] != 0 || srv_json_matcher_dist(m) != 0;
        char name[160];
        snprintf(name, sizeof name, "grammar: refuses '%s' (schema %d)", t, refused[k].schema);
        for (char *p = name; *p; p++)
            if ((unsigned char)*p < 0x20 || (unsigned char)*p >= 0x7f) *p = '?';
        t_check(stopped, name, "accepted it whole");
        srv_json_matcher_free(m);
        json_decref(sch);
    }
    /* accepted whole */
    static const struct {
        int schema;
        const char *text;
    } accepted[] = {
        {0, "{\"a\": [1, -0.5e+3, true, null, {\"b\": \"\\u00e9\\n\xe4\xb8\xad\"}]}"}, {3, "-12"}, {5, "12"},
        {1, "{\"kind\":{\"k\":2},\"tags\":[],\"ok\":false,\"age\":3,\"name\":\"\"}"}, {6, "null"},
    };
    for (size_t k = 0; k < sizeof accepted / sizeof accepted[0]; k++) {
        json_t *sch = load(schemas[accepted[k].schema]);
        struct srv_error e = {0};
        struct srv_json_matcher *m = srv_json_matcher_new(sch, &e);
        const char *t = accepted[k].text;
        const int ok = srv_json_matcher_feed(m, t, strlen(t)) && srv_json_matcher_dist(m) == 0;
        char name[200];
        snprintf(name, sizeof name, "grammar: accepts '%.120s' (schema %d)", t, accepted[k].schema);
        for (char *p = name; *p; p++)
            if ((unsigned char)*p < 0x20 || (unsigned char)*p >= 0x7f) *p = '?';
        t_check(ok, name, "refused");
        srv_json_matcher_free(m);
        json_decref(sch);
    }
    /* nesting bound */
    {
        struct srv_error e = {0};
        struct srv_json_matcher *m = srv_json_matcher_new(NULL, &e);
        int depth = 0;
        const char *p = "{\"a\":";
        while (depth < 100 && srv_json_matcher_feed(m, p, strlen(p))) depth++;
        t_check(depth == SRV_JSON_MAX_NEST, "grammar: objects nest at most SRV_JSON_MAX_NEST deep", "depth %d", depth);
        srv_json_matcher_free(m);
    }
    /* schemas refused with the keyword or field named */
    static const struct {
        const char *schema, *word;
    } bad[] = {
        {"{\"type\":\"string\",\"minLength\":3}", "minLength"}, {"{\"anyOf\":[{\"type\":\"string\"}]}", "anyOf"},
        {"{\"$ref\":\"#/x\"}", "$ref"}, {"{\"type\":\"date\"}", "type"}, {"{\"type\":\"object\",\"properties\":{\"a\":{}},"
        "\"required\":[\"b\"]}", "required"}, {"{\"properties\":{\"a\\\"b\":{}}}", "property name"},
        {"{\"enum\":[]}", "enum"}, {"{\"type\":\"string\",\"properties\":{\"a\":{}}}", "not object"},
        {"{\"additionalProperties\":{}}", "additionalProperties"}, {"[1]", "schema"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        json_t *sch = json_loads(bad[k].schema, 0, NULL);
        struct srv_error e = {0};
        struct srv_json_matcher *m = srv_json_matcher_new(sch, &e);
        char name[160];
        snprintf(name, sizeof name, "grammar: schema %s -> 400 naming '%s'", bad[k].schema, bad[k].word);
        t_check(!m && e.status == 400 && strstr(e.msg, bad[k].word), name, "%d '%s'", e.status, e.msg);
        srv_json_matcher_free(m);
        json_decref(sch);
    }
    /* a schema nested too deep */
    {
        char deep[4096] = "";
        for (int i = 0; i < 40; i++) strcat(deep, "{\"items\":");
        strcat(deep, "{}");
        for (int i = 0; i < 40; i++) strcat(deep, "}");
        json_t *sch = json_loads(deep, 0, NULL);
        struct srv_error e = {0};
        struct srv_json_matcher *m = srv_json_matcher_new(sch, &e);
        t_check(!m && e.status == 400 && strstr(e.msg, "deeper"), "grammar: a schema nested 40 deep -> 400", "%s", e.msg);
        srv_json_matcher_free(m);
        json_decref(sch);
    }
    return t_summary();
}
