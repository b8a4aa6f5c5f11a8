/* toolcall_scan.c — a JSON value that is still being written (toolcall_impl.h). A byte scanner
 * that resumes where it stopped when more of the text comes (so a long call costs its length,
 * not its length squared): it finds where the value ends, where a top-level object's members lie,
 * and writes the value's HF tojson form (hmoe_json_to_hf_string of hmoe_json_parse) as it goes,
 * a separator or a string's character as soon as it is read. What it has written is always the
 * start of the form of the whole value, so a call's arguments can stream in the form the call
 * closes with. Whether the text is JSON is decided in the end by hmoe_json_parse; the scanner only
 * has to agree with it on JSON text (a string's escapes decode as parse_string_raw decodes them). */
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

static void out_add(struct tc_json_scan *o, const char *p, size_t n) {
    if (o->hf) hmoe_strbuf_addn(&o->out, p, n);
}

/* A decoded string byte: escaped as tojson escapes it (a key's bytes after a NUL are dropped,
 * as tojson writes a key with strlen). */
static void out_str_bytes(struct tc_json_scan *o, const char *p, size_t n) {
    if (!o->hf || o->key_nul) return;
    if (o->key) {
        const char *z = memchr(p, 0, n);
        if (z) {
            n = (size_t)(z - p);
            o->key_nul = true;
        }
    }
    hmoe_hf_str_bytes(&o->out, p, n);
}

static void out_cp(struct tc_json_scan *o, unsigned cp) {
    char u[4];
    size_t n;
    if (cp < 0x80) u[0] = (char)cp, n = 1;
    else if (cp < 0x800) u[0] = (char)(0xC0 | cp >> 6), u[1] = (char)(0x80 | (cp & 0x3F)), n = 2;
    else if (cp < 0x10000)
        u[0] = (char)(0xE0 | cp >> 12), u[1] = (char)(0x80 | (cp >> 6 & 0x3F)), u[2] = (char)(0x80 | (cp & 0x3F)), n = 3;
    else
        u[0] = (char)(0xF0 | cp >> 18), u[1] = (char)(0x80 | (cp >> 12 & 0x3F)), u[2] = (char)(0x80 | (cp >> 6 & 0x3F)),
        u[3] = (char)(0x80 | (cp & 0x3F)), n = 4;
    out_str_bytes(o, u, n);
}

/* A high surrogate that no low one follows is U+FFFD, as in parse_string_raw. */
static void flush_high(struct tc_json_scan *o) {
    if (o->high) out_cp(o, 0xFFFD);
    o->high = 0;
}

/* A value ended just before `at`: the top-level one ends the scan (true). */
static bool value_done(struct tc_json_scan *o, size_t at) {
    if (o->depth == 0) {
        o->status = TC_JSON_DONE;
        o->end = at;
        return true;
    }
    if (o->depth == 1 && o->member >= 0) {
        o->members[o->member].val_end = at;
        o->members[o->member].out_end = o->out.n;
        o->member = -1;
    }
    o->st = JS_AFTER;
    return false;
}

static int hexval(unsigned char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

void hmoe_tc_json_scan_init(struct tc_json_scan *o, bool hf) {
    free(o->out.s);
    memset(o, 0, sizeof *o);
    o->hf = hf;
    o->member = -1;
    o->st = JS_VALUE;
}

void hmoe_tc_json_scan_free(struct tc_json_scan *o) {
    free(o->out.s);
    memset(o, 0, sizeof *o);
}

void hmoe_tc_json_scan(struct tc_json_scan *o, const char *p, size_t n) {
    if (o->status != TC_JSON_MORE) return;
    for (size_t i = o->pos; i < n; i++) {
        const unsigned char c = (unsigned char)p[i];
        o->pos = i + 1;
        switch (o->st) {
        case JS_STR:
            if (o->esc == 1) {
                static const char simple[] = "\"\\/bfnrt", decoded[] = "\"\\/\b\f\n\r\t";
                const char *e = c ? strchr(simple, c) : NULL;
                if (c == 'u') {
                    o->esc = 2;
                    o->cp = 0;
                } else if (!e) {
                    goto bad;
                } else {
                    o->esc = 0;
                    flush_high(o);
                    out_str_bytes(o, &decoded[e - simple], 1);
                }
            } else if (o->esc >= 2) {
                const int h = hexval(c);
                if (h < 0) goto bad;
                o->cp = o->cp * 16 + (unsigned)h;
                if (++o->esc < 6) continue;
                o->esc = 0;
                if (o->high && o->cp >= 0xDC00 && o->cp <= 0xDFFF) { /* the pair's second half */
                    out_cp(o, 0x10000 + ((o->high - 0xD800) << 10) + (o->cp - 0xDC00));
                    o->high = 0;
                } else {
                    flush_high(o);
                    if (o->cp >= 0xD800 && o->cp <= 0xDBFF) o->high = o->cp; /* its partner may follow */
                    else out_cp(o, o->cp >= 0xDC00 && o->cp <= 0xDFFF ? 0xFFFD : o->cp);
                }
            } else if (c == '\\') {
                o->esc = 1;
            } else if (c == '"') {
                flush_high(o);
                out_add(o, "\"", 1);
                if (!o->key) {
                    if (value_done(o, i + 1)) return;
                } else {
                    if (o->depth == 1 && o->stack[0] == '}' && o->n_members < TC_JSON_MEMBERS) {
                        o->member = (int)o->n_members++;
                        o->members[o->member].key = o->str_at;
                        o->members[o->member].key_end = i + 1;
                    }
                    o->st = JS_COLON;
                }
            } else if (c < 0x20) {
                goto bad;
            } else {
                flush_high(o);
                out_str_bytes(o, (const char *)&c, 1);
            }
            continue;
        case JS_NUM:
            if ((c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E') {
                out_add(o, (const char *)&c, 1); /* tojson writes a number as its source text */
                continue;
            }
            if (value_done(o, i)) return;
            i--; /* the byte after the number is read again as what follows a value */
            continue;
        case JS_LIT:
            if (c != (unsigned char)*o->lit++) goto bad;
            out_add(o, (const char *)&c, 1);
            if (!*o->lit && value_done(o, i + 1)) return;
            continue;
        default: break;
        }
        if (hmoe_tc_is_ws((char)c)) continue;
        switch (o->st) {
        case JS_ARR_FIRST:
            if (c == ']') goto closed;
            /* anything else is the array's first value */
            /* fall through */
        case JS_VALUE:
            if (o->depth == 1 && o->member >= 0 && !o->members[o->member].val) {
                o->members[o->member].val = i;
                o->members[o->member].out_val = o->out.n;
            }
            if (c == '{' || c == '[') {
                if (o->depth == TC_JSON_DEPTH) goto bad; /* deeper than a stream follows: wait for the end */
                o->stack[o->depth++] = c == '{' ? '}' : ']';
                o->st = c == '{' ? JS_OBJ_FIRST : JS_ARR_FIRST;
                out_add(o, (const char *)&c, 1);
            } else if (c == '"') {
                o->st = JS_STR;
                o->key = o->key_nul = false;
                o->high = 0;
                o->esc = 0;
                out_add(o, "\"", 1);
            } else if (c == '-' || (c >= '0' && c <= '9')) {
                o->st = JS_NUM;
                out_add(o, (const char *)&c, 1);
            } else if (c == 't' || c == 'f' || c == 'n') {
                o->lit = c == 't' ? "rue" : c == 'f' ? "alse" : "ull";
                o->st = JS_LIT;
                out_add(o, (const char *)&c, 1);
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
            o->st = JS_STR;
            o->key = true;
            o->key_nul = false;
            o->high = 0;
            o->esc = 0;
            o->str_at = i;
            out_add(o, "\"", 1);
            continue;
        case JS_COLON:
            if (c != ':') goto bad;
            o->st = JS_VALUE;
            o->key_nul = false;
            out_add(o, ": ", 2);
            continue;
        case JS_AFTER:
            if (c == ',') {
                o->st = o->stack[o->depth - 1] == '}' ? JS_KEY : JS_VALUE;
                out_add(o, ", ", 2);
                continue;
            }
            if (c != (unsigned char)o->stack[o->depth - 1]) goto bad;
            goto closed;
        default: goto bad;
        }
    closed:
        out_add(o, (const char *)&c, 1);
        o->depth--;
        if (value_done(o, i + 1)) return;
        continue;
    }
    return;
bad:
    o->status = TC_JSON_BAD;
}
