/* test_server_call_grammar.c — the grammar of a forced call in the Qwen3.5 XML form
 * (src/server/grammar_call.c): random walks under the sampler's rule (every allowed byte, the
 * shortest completion still within the budget) always end in a call that the XML call parser
 * (src/text) reads as one call to an offered function whose arguments are a JSON object with the
 * function's required parameters and no other names; the distance is exact (a shortest
 * completion takes exactly that many bytes); texts that break the form are refused byte by byte.
 * (Harmony's part after the name is the JSON grammar, tested in test_server_grammar.c; its
 * header tokens and the whole call go through the server in test_server_tools.sh.)
 */
#include "harness.h"
#include "json_grammar_check.h"
#include "text/strbuf_impl.h"

static const char TOOLS[] =
    "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":{\"type\":\"object\",\"properties\":"
    "{\"city\":{\"type\":\"string\"},\"days\":{\"type\":\"integer\"},\"unit\":{\"type\":\"string\"}},\"required\":"
    "[\"city\",\"days\"]}}},{\"type\":\"function\",\"function\":{\"name\":\"get\",\"parameters\":{\"type\":\"object\"}}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"add\",\"parameters\":{\"type\":\"object\",\"properties\":{\"a\":"
    "{\"type\":\"number\"}},\"required\":[\"a\"]}}}]";

static struct srv_call_matcher *new_matcher(json_t *tools, const char *want) {
    static const struct hmoe_vocab v = {0}; /* the XML form needs no tokens */
    struct srv_error e = {0};
    return srv_call_matcher_new(&v, HMOE_TOOLCALL_QWEN35_XML, tools, want, &e);
}

/* One call from "<function=" on, checked with the parser; 0 and *why when it is not as promised. */
static int call_ok(json_t *tools, const char *body, size_t n, const char *want, char *why, size_t why_n) {
    struct hmoe_strbuf b = {0};
    hmoe_strbuf_add(&b, "<tool_call>\n<function=");
    hmoe_strbuf_addn(&b, body, n);
    hmoe_strbuf_add(&b, "\n</tool_call>");
    char *defs[3];
    for (size_t i = 0; i < 3; i++) defs[i] = json_dumps(json_array_get(tools, i), JSON_COMPACT);
    struct hmoe_toolcall_opts o = {.tools = (const char **)defs, .n_tools = 3};
    struct hmoe_toolcalls tc = {0};
    struct hmoe_err err = {0};
    int ok = hmoe_toolcall_parse_opts(HMOE_TOOLCALL_QWEN35_XML, &o, b.s, b.n, &tc, &err) == HMOE_OK && tc.n_calls == 1 &&
             !tc.content[0];
    json_t *args = ok ? json_loads(tc.calls[0].arguments, 0, NULL) : NULL;
    ok = ok && json_is_object(args) && (!want || strcmp(tc.calls[0].name, want) == 0);
    for (size_t i = 0; ok && i < 3; i++) {
        json_t *fn = json_object_get(json_array_get(tools, i), "function"), *params = json_object_get(fn, "parameters");
        if (strcmp(json_string_value(json_object_get(fn, "name")), tc.calls[0].name) != 0) continue;
        json_t *props = json_object_get(params, "properties"), *req = json_object_get(params, "required"), *x;
        const char *k;
        json_object_foreach(args, k, x) ok = ok && json_object_get(props, k);
        for (size_t r = 0; r < json_array_size(req); r++) ok = ok && json_object_get(args, json_string_value(json_array_get(req, r)));
        goto checked;
    }
    ok = 0; /* not an offered function */
checked:
    if (!ok) snprintf(why, why_n, "'%.*s' -> %zu calls, %s", (int)HMOE_MIN(b.n, 300), b.s, tc.n_calls,
                      tc.n_calls ? tc.calls[0].arguments : "-");
    json_decref(args);
    hmoe_toolcalls_free(&tc);
    for (size_t i = 0; i < 3; i++) free(defs[i]);
    free(b.s);
    return ok;
}

int main(void) {
    (void)jg_walk; /* the JSON walk of the shared header: this test walks bytes itself */
    (void)jg_valid;
    json_t *tools = json_loads(TOOLS, 0, NULL);
    char text[8192], why[512] = "";
    /* walks: random bytes (printable, newlines, '<' and '/' often, so tags get tried) */
    static const char pool[] = "<</>\n\nparmeter=fuction_abcdgetwhrysuni 0123\t\"{}";
    for (int named = 0; named < 2; named++) {
        int bad = 0;
        for (uint64_t seed = 1; seed <= 300 && !bad; seed++) {
            struct srv_call_matcher *m = new_matcher(tools, named ? "get_weather" : NULL);
            uint64_t rng = seed;
            const int budget = srv_call_matcher_dist(m) + (int)(seed % 5) * 20;
            size_t n = 0;
            for (int left = budget; srv_call_matcher_dist(m) > 0 && !bad; left--) {
                char ok[256];
                int n_ok = 0;
                for (size_t i = 0; i < sizeof pool - 1; i++) {
                    const int d = srv_call_matcher_try(m, &pool[i], 1);
                    if (d >= 0 && d <= left - 1) ok[n_ok++] = pool[i];
                }
                for (int c = 1; c < 256 && !n_ok; c++) { /* none of the pool fits: any byte that does */
                    const char b = (char)c;
                    const int d = srv_call_matcher_try(m, &b, 1);
                    if (d >= 0 && d <= left - 1) ok[n_ok++] = b;
                }
                if (!n_ok || n + 1 >= sizeof text) {
                    snprintf(why, sizeof why, "seed %llu: stuck after '%.*s'", (unsigned long long)seed, (int)n, text);
                    bad = 1;
                    break;
                }
                const char b = ok[jg_rng(&rng) % (uint64_t)n_ok];
                bad = !srv_call_matcher_feed(m, &b, 1);
                text[n++] = b;
            }
            if (!bad && !call_ok(tools, text, n, named ? "get_weather" : NULL, why, sizeof why)) bad = 1;
            if (!bad && (int)n > budget) snprintf(why, sizeof why, "over budget: %zu > %d", n, budget), bad = 1;
            srv_call_matcher_free(m);
        }
        t_check(!bad, named ? "call grammar: 300 walks to a named function end in its call within budget"
                            : "call grammar: 300 walks end in one call to an offered function within budget", "%s", why);
    }
    /* exact distance after a random prefix */
    {
        int bad = 0;
        for (uint64_t seed = 1; seed <= 100 && !bad; seed++) {
            struct srv_call_matcher *m = new_matcher(tools, NULL);
            uint64_t rng = seed;
            size_t n = 0;
            for (int steps = (int)(seed % 60); steps > 0; steps--) {
                const char b = pool[jg_rng(&rng) % (sizeof pool - 1)];
                if (srv_call_matcher_try(m, &b, 1) >= 0) srv_call_matcher_feed(m, &b, 1), text[n++] = b;
            }
            for (int d = srv_call_matcher_dist(m); d > 0 && !bad; d--) {
                int found = -1;
                for (int c = 1; c < 256 && found < 0; c++) {
                    const char b = (char)c;
                    if (srv_call_matcher_try(m, &b, 1) == d - 1) found = c;
                }
                if (found < 0) {
                    snprintf(why, sizeof why, "no byte lowers the distance %d after '%.*s'", d, (int)n, text);
                    bad = 1;
                    break;
                }
                const char b = (char)found;
                srv_call_matcher_feed(m, &b, 1);
                text[n++] = b;
            }
            if (!bad && !call_ok(tools, text, n, NULL, why, sizeof why)) bad = 1;
            srv_call_matcher_free(m);
        }
        t_check(!bad, "call grammar: a shortest completion is exactly the distance, and a call", "%s", why);
    }
    /* refusals: the text stops being accepted before its end, or does not finish */
    static const char *const refused[] = {
        "nope>\n", "get_weather>", "get_weather>\n<parameter=town>\n", "get_weather>\n</function>",
        "get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=city>\n",
        "get_weather>\n<parameter=city>\nParis</parameter>\n", "get_weather>\n<parameter=city>\na</function>",
        "get_weather>\n<parameter=city>\na<parameter=days>", "get_weather>\n<parameter=city>\n</tool_call>",
        "get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n</parameter>\n</function>x",
        "get>\n <parameter=", "add>\n<parameter=a>\n1\n</parameter>",
    };
    for (size_t k = 0; k < sizeof refused / sizeof refused[0]; k++) {
        struct srv_call_matcher *m = new_matcher(tools, NULL);
        const char *t = refused[k];
        size_t i = 0;
        while (t[i] && srv_call_matcher_feed(m, t + i, 1)) i++;
        char name[200];
        snprintf(name, sizeof name, "call grammar: refuses '%s'", t);
        for (char *p = name; *p; p++)
            if (*p == '\n') *p = '|';
        t_check(t[i] != 0 || srv_call_matcher_dist(m) != 0, name, "accepted it whole");
        srv_call_matcher_free(m);
    }
    static const char *const accepted[] = {
        "get_weather>\n<parameter=days>\n3\n</parameter>\n<parameter=city>\na < b\n</parameter>\n</function>",
        "get>\n</function>",
        "add>\n<parameter=a>\n\n</parameter>\n</function>",
    };
    for (size_t k = 0; k < sizeof accepted / sizeof accepted[0]; k++) {
        struct srv_call_matcher *m = new_matcher(tools, NULL);
        const int ok = srv_call_matcher_feed(m, accepted[k], strlen(accepted[k])) && srv_call_matcher_dist(m) == 0 &&
                       call_ok(tools, accepted[k], strlen(accepted[k]), NULL, why, sizeof why);
        char name[200];
        snprintf(name, sizeof name, "call grammar: accepts and parses '%s'", accepted[k]);
        for (char *p = name; *p; p++)
            if (*p == '\n') *p = '|';
        t_check(ok, name, "%s", why);
        srv_call_matcher_free(m);
    }
    /* refused at creation: a named function not offered, a name the grammar cannot hold */
    {
        json_t *odd = json_loads("[{\"type\":\"function\",\"function\":{\"name\":\"a b\"}}]", 0, NULL);
        t_check(!new_matcher(tools, "nope") && !new_matcher(odd, NULL), "call grammar: refuses an unknown or unusable name",
                "created");
        json_decref(odd);
    }
    json_decref(tools);
    return t_summary();
}
