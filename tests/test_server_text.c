/* test_server_text.c — the server's text pipeline (src/server/textfilter.c): stop strings
 * found across any split of the text (the earliest match wins, a tail that may still become
 * one is held back) and JSON strings that stay valid UTF-8 whatever the bytes.
 */
#include "harness.h"
#include "server/server_impl.h"

static void test_stop(void) {
    struct srv_gen_params gp = {0};
    gp.stop[0] = (char *)"world";
    gp.stop[1] = (char *)"lo w";
    gp.n_stop = 2;
    int which;
    size_t keep;
    size_t at = srv_stop_scan(&gp, "hello world", 11, &which, &keep);
    t_check(at == 3 && which == 1, "stop strings: the earliest match wins ('lo w' at 3)", "at %zu which %d", at, which);
    at = srv_stop_scan(&gp, "hello wor", 9, &which, &keep);
    t_check(at == 3 && which == 1, "stop strings: a match inside the text", "at %zu which %d", at, which);
    gp.n_stop = 1;
    at = srv_stop_scan(&gp, "hello wor", 9, &which, &keep);
    t_check(at == 9 && which == -1 && keep == 3, "stop strings: a tail that may become one is held ('wor')",
            "at %zu which %d keep %zu", at, which, keep);
    at = srv_stop_scan(&gp, "abc", 3, &which, &keep);
    t_check(at == 3 && which == -1 && keep == 0, "stop strings: nothing held when no tail matches", "keep %zu", keep);
    at = srv_stop_scan(&gp, "w", 1, &which, &keep);
    t_check(which == -1 && keep == 1, "stop strings: text shorter than the stop string", "which %d keep %zu", which,
            keep);
}

static void test_json_text(void) {
    json_t *j = srv_json_text("ok\xFF\xC3(\xE2\x82\xAC", 8);
    const char *s = j ? json_string_value(j) : NULL;
    t_check(s && strcmp(s, "ok\xEF\xBF\xBD\xEF\xBF\xBD(\xE2\x82\xAC") == 0,
            "JSON text: invalid bytes become U+FFFD, valid UTF-8 stays", "got '%s'", s ? s : "(null)");
    json_decref(j);
    j = srv_json_text("\xED\xA0\x80", 3); /* a UTF-8-encoded surrogate is not well-formed */
    s = j ? json_string_value(j) : NULL;
    t_check(s && strcmp(s, "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD") == 0, "JSON text: an encoded surrogate is replaced",
            "got '%s'", s ? s : "(null)");
    json_decref(j);
    j = srv_json_text("a\0b", 3);
    t_check(j && json_string_length(j) == 3, "JSON text: NUL bytes are kept (escaped on output)", "len %zu",
            j ? json_string_length(j) : 0);
    json_decref(j);
}

int main(void) {
    test_stop();
    test_json_text();
    return t_summary();
}
