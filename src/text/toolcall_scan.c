/* toolcall_scan.c — a JSON value that is still being written (toolcall_impl.h): a byte scanner that
 * finds where the value ends, or else the longest prefix that closing its open string and brackets
 * turns into JSON, and where a top-level object's members lie; and the HF tojson form of such a
 * prefix. That form is always the start of the form of the whole value (the closed prefix is the
 * whole value with its last path cut short), which is what lets a call's arguments stream in the
 * form the call closes with. The scanner only has to be right about where it is; whether the text
 * is JSON is decided by hmoe_json_parse on the closed prefix. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "text/toolcall_impl.h"

enum js_state {
    JS_VALUE,     /* a value must start */
    JS_ARR_FIRST, /* after '[': a value or ']' */
    JS_OBJ_FIRST, /* after '{': a key or '}' */
    JS_KEY,       /* after ',' in an object: a key */
    JS_COLON,     /* after a key */
    JS_AFTER,     /* after a value in a container: ',' or its closer */
    JS_STR,       /* inside a string (a key or a value) */
    JS_NUM,       /* inside a number: it ends at the first byte that is not part of one */
    JS_LIT,       /* inside true / false / null */
};

struct js {
    struct tc_json_scan *o;
    char stack[TC_JSON_DEPTH]; /* the closers of the open containers */
    int depth;
    int member;                /* the top-level member being written, -1: none */
};

/* p[0..cut) can be closed here: remember how. */
static void mark(struct js *j, size_t cut, bool in_string) {
    struct tc_json_scan *o = j->o;
    o->cut = cut;
    o->n_close = 0;
    if (in_string) o->close[o->n_close++] = '"';
    for (int k = j->depth - 1; k >= 0; k--) o->close[o->n_close++] = j->stack[k];
    o->close[o->n_close] = 0;
}

/* A value ended just before `at`: the top-level one ends the scan (true). */
static bool value_done(struct js *j, size_t at, enum js_state *st) {
    if (j->depth == 0) {
        j->o->status = TC_JSON_DONE;
        j->o->end = at;
        return true;
    }
    if (j->depth == 1 && j->member >= 0) {
        j->o->members[j->member].val_end = at;
        j->member = -1;
    }
    *st = JS_AFTER;
    mark(j, at, false);
    return false;
}

static int hexval(unsigned char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

void hmoe_tc_json_scan(const char *p, size_t n, struct tc_json_scan *o) {
    memset(o, 0, sizeof *o);
    struct js j = {.o = o, .member = -1};
    enum js_state st = JS_VALUE;
    bool key = false, high = false; /* the string is a key; the last escape was a high surrogate */
    int esc = 0;                    /* 1: after '\', 2..5: inside \uXXXX */
    unsigned cp = 0;
    const char *lit = NULL;
    size_t str_at = 0;
    for (size_t i = 0; i < n; i++) {
        const unsigned char c = (unsigned char)p[i];
        switch (st) {
        case JS_STR:
            if (esc == 1) {
                if (c == 'u') {
                    esc = 2;
                    cp = 0;
                    continue;
                }
                if (!c || !strchr("\"\\/bfnrt", c)) goto bad;
                esc = 0;
                high = false;
            } else if (esc >= 2) {
                const int h = hexval(c);
                if (h < 0) goto bad;
                cp = cp * 16 + (unsigned)h;
                if (++esc < 6) continue;
                esc = 0;
                /* a high surrogate pairs with a low one that may follow: no cut between them */
                high = cp >= 0xD800 && cp <= 0xDBFF;
                if (high) continue;
            } else if (c == '\\') {
                esc = 1;
                continue;
            } else if (c == '"') {
                if (!key) {
                    if (value_done(&j, i + 1, &st)) return;
                    continue;
                }
                if (j.depth == 1 && j.stack[0] == '}' && o->n_members < TC_JSON_MEMBERS) {
                    j.member = (int)o->n_members++;
                    o->members[j.member].key = str_at;
                    o->members[j.member].key_end = i + 1;
                }
                st = JS_COLON;
                continue;
            } else if (c < 0x20) {
                goto bad;
            } else {
                high = false;
            }
            if (!key) mark(&j, i + 1, true);
            continue;
        case JS_NUM:
            if ((c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E') continue;
            if (value_done(&j, i, &st)) return;
            i--; /* the byte after the number is read again as what follows a value */
            continue;
        case JS_LIT:
            if (c != (unsigned char)*lit++) goto bad;
            if (!*lit && value_done(&j, i + 1, &st)) return;
            continue;
        default: break;
        }
        if (hmoe_tc_is_ws((char)c)) continue;
        switch (st) {
        case JS_ARR_FIRST:
            if (c == ']') goto closed;
            /* anything else is the array's first value */
            /* fall through */
        case JS_VALUE:
            if (j.depth == 1 && j.member >= 0 && !o->members[j.member].val) o->members[j.member].val = i;
            if (c == '{' || c == '[') {
                if (j.depth == TC_JSON_DEPTH) goto bad; /* deeper than a stream follows: wait for the end */
                j.stack[j.depth++] = c == '{' ? '}' : ']';
                st = c == '{' ? JS_OBJ_FIRST : JS_ARR_FIRST;
                mark(&j, i + 1, false);
            } else if (c == '"') {
                st = JS_STR;
                key = high = false;
                esc = 0;
                mark(&j, i + 1, true);
            } else if (c == '-' || (c >= '0' && c <= '9')) {
                st = JS_NUM;
            } else if (c == 't' || c == 'f' || c == 'n') {
                lit = c == 't' ? "rue" : c == 'f' ? "alse" : "ull";
                st = JS_LIT;
            } else {
                goto bad;
            }
            continue;
        case JS_OBJ_FIRST:
            if (c == '}') goto closed;
            /* anything else is the object's first key */
            /* fall through */
        case JS_KEY:
            if (c != '"') goto bad;
            st = JS_STR;
            key = true;
            high = false;
            esc = 0;
            str_at = i;
            continue;
        case JS_COLON:
            if (c != ':') goto bad;
            st = JS_VALUE;
            continue;
        case JS_AFTER:
            if (c == ',') {
                st = j.stack[j.depth - 1] == '}' ? JS_KEY : JS_VALUE;
                continue;
            }
            if (c != (unsigned char)j.stack[j.depth - 1]) goto bad;
            goto closed;
        default: goto bad;
        }
    closed:
        j.depth--;
        if (value_done(&j, i + 1, &st)) return;
        continue;
    }
    o->status = TC_JSON_MORE;
    return;
bad:
    o->status = TC_JSON_BAD;
}

bool hmoe_tc_json_prefix_hf(const char *p, size_t n, struct hmoe_strbuf *out, bool *whole) {
    struct tc_json_scan sc;
    hmoe_tc_json_scan(p, n, &sc);
    *whole = sc.status == TC_JSON_DONE;
    if (sc.status == TC_JSON_BAD || (sc.status == TC_JSON_MORE && !sc.cut)) return false;
    const size_t len_in = *whole ? sc.end : sc.cut, n_close = *whole ? 0 : sc.n_close;
    char *t = malloc(len_in + n_close + 1);
    if (!t) {
        out->oom = true;
        return false;
    }
    memcpy(t, p, len_in);
    memcpy(t + len_in, sc.close, n_close);
    struct hmoe_err perr = {0};
    struct hmoe_json *v = hmoe_json_parse(t, len_in + n_close, &perr);
    free(t);
    char *hf = v ? hmoe_json_to_hf_string(v) : NULL;
    hmoe_json_free(v);
    if (!hf) return false;
    size_t len = strlen(hf);
    /* the closers are the form's last bytes (the cut path is the last member at each level) */
    const size_t drop = *whole ? 0 : sc.n_close;
    bool ok = len >= drop && memcmp(hf + len - drop, sc.close, drop) == 0;
    if (ok) hmoe_strbuf_addn(out, hf, len - drop);
    free(hf);
    return ok;
}
