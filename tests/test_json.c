/* test_json.c — the JSON reader on fixture files and on malformed input. */
#include "harness.h"
#include "hmoe/json.h"

static void parse_bad(const char *name, const char *text) {
    struct hmoe_err err = {0};
    struct hmoe_json *j = hmoe_json_parse(text, strlen(text), &err);
    t_check(j == NULL && err.code == HMOE_ERR_FORMAT, name, "malformed input was accepted: %s", text);
    hmoe_json_free(j);
}

int main(void) {
    struct hmoe_err err = {0};
    const char *s = "{\"a\": [1, -2.5e3, true, null], \"b\": \"x\\u00e9\\ud83d\\ude00\\n\", \"c\": {}}";
    struct hmoe_json *j = hmoe_json_parse(s, strlen(s), &err);
    t_check(j != NULL, "json parse object", "%s", err.msg);
    if (j) {
        const struct hmoe_json *a = hmoe_json_get(j, "a");
        t_check(a && a->kind == HMOE_JSON_ARRAY && a->n == 4 && a->items[1]->num == -2500.0 &&
                    a->items[2]->b && a->items[3]->kind == HMOE_JSON_NULL,
                "json array members", "wrong array contents");
        const char *b = hmoe_json_get_str(j, "b", NULL);
        t_check(b && strcmp(b, "x\xc3\xa9\xf0\x9f\x98\x80\n") == 0, "json string escapes + surrogate pair",
                "got '%s'", b ? b : "(null)");
    }
    hmoe_json_free(j);

    parse_bad("json rejects trailing comma", "[1,2,]");
    parse_bad("json rejects unterminated string", "\"abc");
    parse_bad("json rejects trailing garbage", "{} x");
    parse_bad("json rejects bad escape", "\"\\q\"");
    char deep[2000];
    memset(deep, '[', sizeof deep - 1);
    deep[sizeof deep - 1] = 0;
    parse_bad("json rejects nesting deeper than 512", deep);

    /* Every line of the tokenizer fixture is one JSON object with "text" and "ids". */
    char *text;
    size_t len;
    if (hmoe_read_file(t_shared("fixtures/tokenizer/cases.jsonl"), &text, &len, &err) != HMOE_OK) {
        t_check(0, "json parses every fixture line", "%s", err.msg);
        return t_summary();
    }
    int lines = 0, bad = 0;
    for (char *p = text, *nl; *p; p = nl + 1) {
        nl = strchr(p, '\n');
        if (!nl) nl = p + strlen(p);
        if (nl > p) {
            struct hmoe_json *c = hmoe_json_parse(p, (size_t)(nl - p), &err);
            if (!c || !hmoe_json_get(c, "ids") || !hmoe_json_get_str(c, "text", NULL)) bad++;
            hmoe_json_free(c);
            lines++;
        }
        if (!*nl) break;
    }
    free(text);
    t_check(lines == 203 && bad == 0, "json parses every fixture line", "%d lines, %d bad", lines, bad);
    return t_summary();
}
