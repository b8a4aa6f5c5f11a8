/* toolcall_args.c — the text of one tool call into a function name and JSON arguments
 * (text.h): Qwen3's JSON object (chat-templates.md §1.2), the XML form of Qwen3.5 / Qwen3.6 /
 * Nemotron-3 (§2.3) with parameter values typed from the tool's JSON schema the way llama.cpp
 * types them (a string parameter keeps its text, any other is read as JSON), and the call ids. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/toolcall_impl.h"

static void trim(const char **p, size_t *n) {
    while (*n && hmoe_tc_is_ws(**p)) (*p)++, (*n)--;
    while (*n && hmoe_tc_is_ws((*p)[*n - 1])) (*n)--;
}

/* --- call ids --------------------------------------------------------------------------- */

static uint64_t splitmix64(uint64_t *state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void hmoe_tc_next_id(struct hmoe_toolcall_stream *s, char out[30]) {
    static const char alnum[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    memcpy(out, "call_", 5);
    for (int i = 0; i < 24; i++) out[5 + i] = alnum[splitmix64(&s->rng) % 62];
    out[29] = 0;
}

/* --- compact JSON writer ---------------------------------------------------------------- */

/* Length of the well-formed UTF-8 sequence at p (n bytes left), 0 when it is not one. */
static size_t utf8_len(const unsigned char *p, size_t n) {
    unsigned c = p[0];
    size_t len = c < 0x80 ? 1 : c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
    if (!len || len > n) return 0;
    for (size_t i = 1; i < len; i++)
        if ((p[i] & 0xC0) != 0x80) return 0;
    if (len == 3 && ((c == 0xE0 && p[1] < 0xA0) || (c == 0xED && p[1] >= 0xA0))) return 0; /* overlong, surrogate */
    if (len == 4 && ((c == 0xF0 && p[1] < 0x90) || (c == 0xF4 && p[1] >= 0x90))) return 0; /* overlong, > U+10FFFF */
    return len;
}

/* A JSON string literal's text without its quotes; bytes that are not UTF-8 become U+FFFD so the
 * arguments stay valid JSON. Each character is written alone, so a text cut between characters
 * writes the start of what the whole text writes. */
static void json_str_body(struct hmoe_strbuf *b, const char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        char esc[8];
        if (c == '"' || c == '\\') {
            esc[0] = '\\', esc[1] = (char)c;
            hmoe_strbuf_addn(b, esc, 2);
        } else if (c == '\n') hmoe_strbuf_add(b, "\\n");
        else if (c == '\r') hmoe_strbuf_add(b, "\\r");
        else if (c == '\t') hmoe_strbuf_add(b, "\\t");
        else if (c < 0x20 || c == 0x7F) {
            snprintf(esc, sizeof esc, "\\u%04x", c);
            hmoe_strbuf_add(b, esc);
        } else {
            size_t l = utf8_len((const unsigned char *)s + i, n - i);
            if (l) hmoe_strbuf_addn(b, s + i, l);
            else hmoe_strbuf_add(b, "\xEF\xBF\xBD");
            i += l ? l : 1;
            continue;
        }
        i++;
    }
}

static void json_str(struct hmoe_strbuf *b, const char *s, size_t n) {
    hmoe_strbuf_add(b, "\"");
    json_str_body(b, s, n);
    hmoe_strbuf_add(b, "\"");
}

static void json_compact(struct hmoe_strbuf *b, const struct hmoe_json *j) {
    switch (j->kind) {
    case HMOE_JSON_NULL: hmoe_strbuf_add(b, "null"); break;
    case HMOE_JSON_BOOL: hmoe_strbuf_add(b, j->b ? "true" : "false"); break;
    case HMOE_JSON_NUMBER: hmoe_strbuf_add(b, j->str); break; /* as written: 64-bit integers survive */
    case HMOE_JSON_STRING: json_str(b, j->str, j->str_len); break;
    case HMOE_JSON_ARRAY:
    case HMOE_JSON_OBJECT:
        hmoe_strbuf_add(b, j->kind == HMOE_JSON_ARRAY ? "[" : "{");
        for (size_t i = 0; i < j->n; i++) {
            if (i) hmoe_strbuf_add(b, ",");
            if (j->kind == HMOE_JSON_OBJECT) {
                json_str(b, j->keys[i], strlen(j->keys[i]));
                hmoe_strbuf_add(b, ":");
            }
            json_compact(b, j->items[i]);
        }
        hmoe_strbuf_add(b, j->kind == HMOE_JSON_ARRAY ? "]" : "}");
        break;
    }
}

/* --- Qwen3: {"name": ..., "arguments": {...}} ------------------------------------------- */

static struct hmoe_json *parse_json(const char *p, size_t n) {
    struct hmoe_err perr = {0};
    return hmoe_json_parse(p, n, &perr);
}

bool hmoe_tc_parse_json_call(struct hmoe_toolcall_stream *s, const char *p, size_t n, char **name, char **args) {
    *name = *args = NULL;
    trim(&p, &n);
    struct hmoe_json *j = parse_json(p, n);
    const struct hmoe_json *nm = hmoe_json_get(j, "name");
    const struct hmoe_json *a = hmoe_json_get(j, "arguments");
    if (!a) a = hmoe_json_get(j, "parameters");
    bool ok = nm && nm->kind == HMOE_JSON_STRING && nm->str_len && !memchr(nm->str, 0, nm->str_len);
    if (ok && a && a->kind == HMOE_JSON_STRING) {
        /* Arguments already given as JSON text: kept when they are JSON. */
        struct hmoe_json *inner = parse_json(a->str, a->str_len);
        ok = inner != NULL;
        hmoe_json_free(inner);
        if (ok) *args = strdup(a->str);
    } else if (ok) {
        /* The template writes the arguments back with HF tojson (", " / ": "): the same form here
         * makes a resent call render as the tokens the model wrote, so a prompt cache keeps it. */
        *args = a ? hmoe_json_to_hf_string(a) : strdup("{}");
    }
    if (ok) *name = strdup(nm->str);
    hmoe_json_free(j);
    if (ok && (!*name || !*args)) {
        s->oom = true;
        ok = false;
    }
    if (!ok) {
        free(*name);
        free(*args);
        *name = *args = NULL;
    }
    return ok;
}

/* The key of member k of a scanned object, decoded, equals `want`. */
static bool member_is(const char *p, const struct tc_json_scan *sc, size_t k, const char *want) {
    struct hmoe_json *key = parse_json(p + sc->members[k].key, sc->members[k].key_end - sc->members[k].key);
    bool is = key && key->kind == HMOE_JSON_STRING && strcmp(key->str, want) == 0 && strlen(want) == key->str_len;
    hmoe_json_free(key);
    return is;
}

/* The first "name" and "arguments" members (the ones hmoe_tc_parse_json_call reads); SIZE_MAX
 * when not there. */
static void call_members(const char *p, const struct tc_json_scan *sc, size_t *k_name, size_t *k_args) {
    *k_name = *k_args = SIZE_MAX;
    for (size_t k = 0; k < sc->n_members; k++) {
        if (*k_name == SIZE_MAX && member_is(p, sc, k, "name")) *k_name = k;
        else if (*k_args == SIZE_MAX && member_is(p, sc, k, "arguments")) *k_args = k;
    }
}

/* The name a call object gives once its "name" member is whole: a non-empty string. */
static struct hmoe_json *call_name(const char *p, const struct tc_json_scan *sc, size_t k) {
    if (k == SIZE_MAX || !sc->members[k].val_end) return NULL;
    struct hmoe_json *nm = parse_json(p + sc->members[k].val, sc->members[k].val_end - sc->members[k].val);
    if (nm && nm->kind == HMOE_JSON_STRING && nm->str_len && !memchr(nm->str, 0, nm->str_len)) return nm;
    hmoe_json_free(nm);
    return NULL;
}

bool hmoe_tc_json_call_begun(const char *p, size_t n) {
    struct tc_json_scan sc = {0};
    hmoe_tc_json_scan_init(&sc, false);
    hmoe_tc_json_scan(&sc, p, n);
    size_t k_name, k_args;
    call_members(p, &sc, &k_name, &k_args);
    struct hmoe_json *nm = call_name(p, &sc, k_name);
    hmoe_json_free(nm);
    hmoe_tc_json_scan_free(&sc);
    return nm != NULL;
}

bool hmoe_tc_partial_json_call(struct hmoe_toolcall_stream *s, const char *p, size_t n, char **name,
                               const char **args, size_t *args_len) {
    *name = NULL;
    *args = NULL;
    *args_len = 0;
    struct tc_live *l = &s->live;
    if (!l->scan_on) {
        hmoe_tc_json_scan_init(&l->scan, true);
        l->scan_on = true;
    }
    struct tc_json_scan *sc = &l->scan;
    hmoe_tc_json_scan(sc, p, n);
    if (sc->out.oom) s->oom = true;
    size_t k_name, k_args;
    call_members(p, sc, &k_name, &k_args);
    struct hmoe_json *nm = call_name(p, sc, k_name);
    if (!nm) return false;
    *name = strdup(nm->str);
    hmoe_json_free(nm);
    if (!*name) {
        s->oom = true;
        return false;
    }
    /* Arguments given as a JSON string go out whole when the call closes; so do arguments while
     * the text is no longer JSON (the call will not parse). */
    if (k_args == SIZE_MAX || !sc->members[k_args].val || p[sc->members[k_args].val] == '"' || sc->status == TC_JSON_BAD)
        return true;
    const size_t from = sc->members[k_args].out_val, to = sc->members[k_args].val_end ? sc->members[k_args].out_end : sc->out.n;
    *args = sc->out.s + from;
    *args_len = to - from;
    return true;
}

/* --- Qwen3.5 / Nemotron-3 XML ----------------------------------------------------------- */

/* Does this JSON schema describe a string (type "string", ["string", "null"], a string enum or
 * const, or an anyOf / oneOf of such)? */
static bool schema_is_string(const struct hmoe_json *sch, int depth) {
    if (!sch || sch->kind != HMOE_JSON_OBJECT || depth > 8) return false;
    const struct hmoe_json *t = hmoe_json_get(sch, "type");
    if (t && t->kind == HMOE_JSON_STRING) return strcmp(t->str, "string") == 0;
    if (t && t->kind == HMOE_JSON_ARRAY) {
        bool any = false;
        for (size_t i = 0; i < t->n; i++) {
            const struct hmoe_json *e = t->items[i];
            if (e->kind != HMOE_JSON_STRING) return false;
            if (strcmp(e->str, "string") == 0) any = true;
            else if (strcmp(e->str, "null") != 0) return false;
        }
        return any;
    }
    const struct hmoe_json *c = hmoe_json_get(sch, "const");
    if (c) return c->kind == HMOE_JSON_STRING;
    const struct hmoe_json *e = hmoe_json_get(sch, "enum");
    if (e && e->kind == HMOE_JSON_ARRAY && e->n) {
        for (size_t i = 0; i < e->n; i++)
            if (e->items[i]->kind != HMOE_JSON_STRING) return false;
        return true;
    }
    const char *alts[] = {"anyOf", "oneOf"};
    for (int k = 0; k < 2; k++) {
        const struct hmoe_json *a = hmoe_json_get(sch, alts[k]);
        if (!a || a->kind != HMOE_JSON_ARRAY || !a->n) continue;
        for (size_t i = 0; i < a->n; i++) {
            const struct hmoe_json *ti = hmoe_json_get(a->items[i], "type");
            bool is_null = ti && ti->kind == HMOE_JSON_STRING && strcmp(ti->str, "null") == 0;
            if (!is_null && !schema_is_string(a->items[i], depth + 1)) return false;
        }
        return true;
    }
    return false;
}

/* The schema of parameter `key` of function `fn` among the stream's tools, or NULL. */
static const struct hmoe_json *param_schema(const struct hmoe_toolcall_stream *s, const char *fn, size_t fn_len,
                                            const char *key, size_t key_len) {
    for (size_t i = 0; i < s->n_tools; i++) {
        const struct hmoe_json *t = s->tools[i], *f = hmoe_json_get(t, "function");
        if (f && f->kind == HMOE_JSON_OBJECT) t = f;
        const struct hmoe_json *nm = hmoe_json_get(t, "name");
        if (!nm || nm->kind != HMOE_JSON_STRING || nm->str_len != fn_len || memcmp(nm->str, fn, fn_len) != 0) continue;
        const struct hmoe_json *props = hmoe_json_get(hmoe_json_get(t, "parameters"), "properties");
        for (size_t k = 0; props && props->kind == HMOE_JSON_OBJECT && k < props->n; k++)
            if (strlen(props->keys[k]) == key_len && memcmp(props->keys[k], key, key_len) == 0) return props->items[k];
        return NULL;
    }
    return NULL;
}

static bool starts(const char *p, const char *end, const char *lit) {
    size_t l = strlen(lit);
    return (size_t)(end - p) >= l && memcmp(p, lit, l) == 0;
}

static const char *skip_ws(const char *p, const char *end) {
    while (p < end && hmoe_tc_is_ws(*p)) p++;
    return p;
}

/* "NAME>" at p: the trimmed name (no '<', '>' or newline inside) and the byte after '>'. */
static const char *tag_name(const char *p, const char *end, const char **name, size_t *len) {
    const char *q = p;
    while (q < end && *q != '>' && *q != '<' && *q != '\n' && *q != 0) q++;
    if (q == end || *q != '>') return NULL;
    *name = p;
    *len = (size_t)(q - p);
    trim(name, len);
    return *len ? q + 1 : NULL;
}

/* One parameter value as JSON into b: typed by the schema when known, else JSON when it is JSON. */
static void xml_value(struct hmoe_strbuf *b, const struct hmoe_json *sch, const char *v, size_t n) {
    if (!schema_is_string(sch, 0)) {
        const char *t = v;
        size_t tn = n;
        trim(&t, &tn);
        /* The templates write earlier calls' scalars with Python's str() (True, False, None), so a
         * model may answer in that spelling too. */
        static const char *const py[][2] = {{"True", "true"}, {"False", "false"}, {"None", "null"}};
        for (size_t i = 0; i < 3; i++)
            if (tn == strlen(py[i][0]) && memcmp(t, py[i][0], tn) == 0) {
                hmoe_strbuf_add(b, py[i][1]);
                return;
            }
        struct hmoe_json *j = tn ? parse_json(t, tn) : NULL;
        if (j) {
            json_compact(b, j);
            hmoe_json_free(j);
            return;
        }
    }
    json_str(b, v, n);
}

/* How many bytes at the end of an XML value so far may still turn out not to be value text: the
 * start of a tag that would end it, the framing newline ("\n", "\r\n" or "\r", which the end
 * drops), a UTF-8 character not complete yet (json_str would write it as U+FFFD). */
static size_t value_hold(const char *v, size_t n) {
    static const char *const ends[] = {"</parameter>", "<parameter=", "</function>", "</tool_call>"};
    size_t hold = 0;
    for (size_t k = 0; k < 4; k++) {
        size_t h = hmoe_tc_partial_tag(v, n, ends[k]);
        if (h > hold) hold = h;
    }
    n -= hold;
    if (n && v[n - 1] == '\n') n--, hold++;
    if (n && v[n - 1] == '\r') n--, hold++;
    size_t whole = hmoe_utf8_complete_prefix(v, n);
    return hold + (n - whole);
}

/* The first of the tags that end a parameter's value in p[0..n): </parameter>, or (when the model
 * left that out) the next parameter or the end of the function; NULL when none is there. */
static void value_ends(const char *p, size_t n, const char **close, const char **next, const char **fend) {
    *close = hmoe_tc_find(p, n, "</parameter>");
    *next = hmoe_tc_find(p, n, "<parameter=");
    *fend = hmoe_tc_find(p, n, "</function>");
}

/* One whole parameter of function fn: its value starts at p (right after the tag) and ends at
 * the first tag that ends it (or `end`); `,"key":value` into b. Returns where the next one may
 * start. */
static const char *xml_param(struct hmoe_toolcall_stream *s, struct hmoe_strbuf *b, bool first, const char *fn,
                             size_t fn_len, const char *key, size_t key_len, const char *p, const char *end) {
    const char *close, *next, *fend;
    value_ends(p, (size_t)(end - p), &close, &next, &fend);
    const char *v_end = close;
    if (!close || (next && next < close) || (fend && fend < close)) {
        v_end = next && (!fend || next < fend) ? next : fend ? fend : end;
        close = NULL;
    }
    const char *v = p;
    size_t vn = (size_t)(v_end - v);
    /* The template frames each value with one newline on either side. */
    if (vn && v[0] == '\n') v++, vn--;
    else if (vn >= 2 && v[0] == '\r' && v[1] == '\n') v += 2, vn -= 2;
    if (vn && v[vn - 1] == '\n') vn--;
    if (vn && v[vn - 1] == '\r') vn--;
    if (!first) hmoe_strbuf_add(b, ",");
    json_str(b, key, key_len);
    hmoe_strbuf_add(b, ":");
    xml_value(b, param_schema(s, fn, fn_len, key, key_len), v, vn);
    return close ? close + 12 : v_end;
}

/* "<function=NAME>" after whitespace at the start of p[0..n): the name and the byte after it. */
static const char *function_tag(const char *p, size_t n, const char **fn, size_t *fn_len) {
    const char *end = p + n;
    p = skip_ws(p, end);
    return starts(p, end, "<function=") ? tag_name(p + 10, end, fn, fn_len) : NULL;
}

bool hmoe_tc_parse_xml_call(struct hmoe_toolcall_stream *s, const char *p, size_t n, char **name, char **args) {
    *name = *args = NULL;
    const char *end = p + n, *fn;
    size_t fn_len;
    if (!(p = function_tag(p, n, &fn, &fn_len))) return false;
    struct hmoe_strbuf b = {0};
    hmoe_strbuf_add(&b, "{");
    bool closed = false, first = true;
    for (;;) {
        p = skip_ws(p, end);
        if (p == end) break; /* </function> left out before </tool_call>: the call is still whole */
        if (starts(p, end, "</function>")) {
            closed = true;
            p += 11;
            break;
        }
        const char *key;
        size_t key_len;
        if (!starts(p, end, "<parameter=") || !(p = tag_name(p + 11, end, &key, &key_len))) goto bad;
        p = xml_param(s, &b, first, fn, fn_len, key, key_len, p, end);
        first = false;
    }
    if (closed && skip_ws(p, end) != end) goto bad; /* text after </function> inside the call */
    hmoe_strbuf_add(&b, "}");
    *name = malloc(fn_len + 1);
    if (b.oom || !*name) {
        s->oom = true;
        goto bad;
    }
    memcpy(*name, fn, fn_len);
    (*name)[fn_len] = 0;
    *args = b.s;
    return true;
bad:
    free(b.s);
    free(*name);
    *name = NULL;
    return false;
}

bool hmoe_tc_xml_call_begun(const char *p, size_t n) {
    const char *fn;
    size_t fn_len;
    return function_tag(p, n, &fn, &fn_len) != NULL;
}

/* Parse on from x->at as far as the text p[0..n) decides: whole parameters into x->json, then a
 * string value in progress as far as it is known. Stops at what is not written out yet (and at
 * text that makes the call no call: it will not close as one). */
static void xml_advance(struct hmoe_toolcall_stream *s, struct tc_xml_part *x, const char *p, size_t n, const char *fn,
                        size_t fn_len) {
    const char *end = p + n;
    for (;;) {
        if (x->in_value) {
            const char *v = p + x->v_at, *close, *next, *fend;
            const size_t avail = n - x->v_at, from = x->v_searched > 11 ? x->v_searched - 11 : 0;
            value_ends(v + from, avail - from, &close, &next, &fend);
            if (!close && !next && !fend) {
                x->v_searched = avail;
                const size_t m = avail - value_hold(v, avail);
                if (m > x->v_sent) {
                    json_str_body(&x->json, v + x->v_sent, m - x->v_sent);
                    x->v_sent = m;
                }
                return;
            }
            /* the value is whole: written again from its start, as the whole call writes it */
            x->json.n = x->before;
            x->in_value = false;
        }
        const char *q = skip_ws(p + x->at, end), *key, *vs;
        size_t key_len;
        if (q == end || !starts(q, end, "<parameter=") || !(vs = tag_name(q + 11, end, &key, &key_len))) return;
        const char *close, *next, *fend;
        value_ends(vs, (size_t)(end - vs), &close, &next, &fend);
        if (close || next || fend) {
            x->at = (size_t)(xml_param(s, &x->json, x->first, fn, fn_len, key, key_len, vs, end) - p);
            x->first = false;
            continue;
        }
        if (!schema_is_string(param_schema(s, fn, fn_len, key, key_len), 0)) return; /* typed when whole */
        size_t vn = (size_t)(end - vs), skip = vn && vs[0] == '\n' ? 1 : vn >= 2 && vs[0] == '\r' && vs[1] == '\n' ? 2 : 0;
        if (!vn || (vn == 1 && vs[0] == '\r')) return; /* a framing newline or not: the next byte tells */
        x->before = x->json.n;
        if (!x->first) hmoe_strbuf_add(&x->json, ",");
        json_str(&x->json, key, key_len);
        hmoe_strbuf_add(&x->json, ":\"");
        x->in_value = true;
        x->v_at = (size_t)(vs - p) + skip;
        x->v_sent = x->v_searched = 0;
    }
}

bool hmoe_tc_partial_xml_call(struct hmoe_toolcall_stream *s, const char *p, size_t n, char **name,
                              const char **args, size_t *args_len) {
    *name = NULL;
    *args = NULL;
    *args_len = 0;
    const char *fn, *after;
    size_t fn_len;
    if (!(after = function_tag(p, n, &fn, &fn_len))) return false;
    struct tc_xml_part *x = &s->live.xml;
    if (!x->named) {
        x->named = true;
        x->at = (size_t)(after - p);
        x->json.n = 0;
        hmoe_strbuf_add(&x->json, "{");
        x->first = true;
        x->in_value = false;
    }
    xml_advance(s, x, p, n, fn, fn_len);
    if (x->json.oom || !(*name = malloc(fn_len + 1))) {
        s->oom = true;
        return false;
    }
    memcpy(*name, fn, fn_len);
    (*name)[fn_len] = 0;
    *args = x->json.s;
    *args_len = x->json.n;
    return true;
}
