/* jj_value.c — the arena, value constructors, Python truthiness / equality, str() and repr()
 * as CPython prints them, transformers' tojson, and the JSON DOM -> value conversion.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hmoe/json.h"
#include "text/jinja/jinja_impl.h"

/* ---- arena ---------------------------------------------------------------------------- */
struct jj_block {
    struct jj_block *next;
    size_t cap, used;
    max_align_t data[];
};

void *jj_arena_alloc(struct jj_arena *a, size_t n) {
    n = (n + sizeof(max_align_t) - 1) / sizeof(max_align_t) * sizeof(max_align_t);
    struct jj_block *b = a->head;
    if (!b || b->cap - b->used < n) {
        size_t cap = b ? b->cap * 2 : 16384;
        if (cap > (1u << 24)) cap = 1u << 24;
        if (cap < n) cap = n;
        struct jj_block *nb = malloc(sizeof *nb + cap);
        if (!nb) return NULL;
        nb->next = b;
        nb->cap = cap;
        nb->used = 0;
        a->head = b = nb;
    }
    void *p = (char *)b->data + b->used;
    b->used += n;
    a->used_total += n;
    return p;
}

void jj_arena_free(struct jj_arena *a) {
    for (struct jj_block *b = a->head, *nx; b; b = nx) {
        nx = b->next;
        free(b);
    }
    a->head = NULL;
    a->used_total = 0;
}

void *jj_alloc(struct jj_ctx *c, size_t n) {
    /* The output bound also caps memory: a template can grow values without printing them. */
    if (c->arena.used_total + n > c->lim.max_output * 4 + (64u << 20))
        jj_fail_here(c, HMOE_ERR_RANGE, "the template uses more memory than allowed (%zu MiB)",
                     (c->lim.max_output * 4 + (64u << 20)) >> 20);
    void *p = jj_arena_alloc(&c->arena, n ? n : 1);
    if (!p) jj_fail_here(c, HMOE_ERR_NOMEM, "out of memory rendering the template");
    return p;
}

_Noreturn void jj_fail_at(struct jj_fail *f, enum hmoe_status code, uint32_t line, uint32_t col, const char *fmt, ...) {
    int k = snprintf(f->msg, sizeof f->msg, "line %u:%u: ", line, col);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->msg + k, sizeof f->msg - (size_t)k, fmt, ap);
    va_end(ap);
    f->code = code;
    longjmp(f->jb, 1);
}

_Noreturn void jj_fail_here(struct jj_ctx *c, enum hmoe_status code, const char *fmt, ...) {
    char m[360];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m, sizeof m, fmt, ap);
    va_end(ap);
    jj_fail_at(&c->fail, code, c->line, c->col, "%s", m);
}

/* ---- constructors --------------------------------------------------------------------- */
struct jv jv_str_copy(struct jj_ctx *c, const char *s, size_t n) {
    char *p = jj_alloc(c, n + 1);
    if (n) memcpy(p, s, n);
    p[n] = 0;
    return jv_str(p, n);
}

struct jv jv_new_list(struct jj_ctx *c, size_t cap) {
    struct jj_list *l = jj_alloc(c, sizeof *l);
    l->n = 0;
    l->cap = cap;
    l->v = cap ? jj_alloc(c, cap * sizeof *l->v) : NULL;
    l->tuple = false;
    return (struct jv){.k = JV_LIST, .l = l};
}

struct jv jv_new_tuple(struct jj_ctx *c, size_t cap) {
    struct jv t = jv_new_list(c, cap);
    t.l->tuple = true;
    return t;
}

struct jv jv_new_dict(struct jj_ctx *c, uint8_t kind, size_t cap) {
    struct jj_dict *d = jj_alloc(c, sizeof *d);
    d->n = 0;
    d->cap = cap;
    d->key = cap ? jj_alloc(c, cap * sizeof *d->key) : NULL;
    d->val = cap ? jj_alloc(c, cap * sizeof *d->val) : NULL;
    return (struct jv){.k = kind, .d = d};
}

void jv_list_push(struct jj_ctx *c, struct jj_list *l, struct jv v) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 8;
        struct jv *nv = jj_alloc(c, cap * sizeof *nv);
        if (l->n) memcpy(nv, l->v, l->n * sizeof *nv);
        l->v = nv;
        l->cap = cap;
    }
    l->v[l->n++] = v;
}

const struct jv *jv_dict_get(const struct jj_dict *d, const char *key, size_t len) {
    for (size_t i = 0; i < d->n; i++)
        if (d->key[i].k == JV_STR && d->key[i].n == len && memcmp(d->key[i].s, key, len) == 0) return &d->val[i];
    return NULL;
}

const struct jv *jv_dict_get_v(const struct jj_dict *d, struct jv key) {
    if (key.k == JV_STR) return jv_dict_get(d, key.s, key.n);
    for (size_t i = 0; i < d->n; i++)
        if (jv_equal(d->key[i], key)) return &d->val[i];
    return NULL;
}

void jv_dict_set(struct jj_ctx *c, struct jj_dict *d, struct jv key, struct jv val) {
    const struct jv *old = jv_dict_get_v(d, key);
    if (old) {
        d->val[old - d->val] = val;
        return;
    }
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 8;
        struct jv *nk = jj_alloc(c, cap * sizeof *nk), *nv = jj_alloc(c, cap * sizeof *nv);
        if (d->n) {
            memcpy(nk, d->key, d->n * sizeof *nk);
            memcpy(nv, d->val, d->n * sizeof *nv);
        }
        d->key = nk;
        d->val = nv;
        d->cap = cap;
    }
    d->key[d->n] = key;
    d->val[d->n++] = val;
}

/* ---- Python semantics ----------------------------------------------------------------- */
bool jv_truthy(struct jv v) {
    switch (v.k) {
    case JV_UNDEF: case JV_NONE: return false;
    case JV_BOOL: return v.b;
    case JV_INT: return v.i != 0;
    case JV_FLOAT: return v.f != 0.0;
    case JV_STR: return v.n > 0;
    case JV_LIST: return v.l->n > 0;
    case JV_DICT: return v.d->n > 0;
    default: return true;
    }
}

static bool is_num(struct jv v) { return v.k == JV_INT || v.k == JV_FLOAT || v.k == JV_BOOL; }
static double num_of(struct jv v) { return v.k == JV_FLOAT ? v.f : v.k == JV_INT ? (double)v.i : (double)v.b; }

bool jv_equal(struct jv a, struct jv b) {
    if (is_num(a) && is_num(b)) {
        if (a.k != JV_FLOAT && b.k != JV_FLOAT) return (a.k == JV_INT ? a.i : a.b) == (b.k == JV_INT ? b.i : b.b);
        return num_of(a) == num_of(b);
    }
    if (a.k != b.k) return false;
    switch (a.k) {
    case JV_UNDEF: case JV_NONE: return true;
    case JV_STR: return a.n == b.n && memcmp(a.s, b.s, a.n) == 0;
    case JV_LIST:
        if (a.l->n != b.l->n || a.l->tuple != b.l->tuple) return false;
        for (size_t i = 0; i < a.l->n; i++)
            if (!jv_equal(a.l->v[i], b.l->v[i])) return false;
        return true;
    case JV_DICT: case JV_NS:
        if (a.d->n != b.d->n) return false;
        for (size_t i = 0; i < a.d->n; i++) {
            const struct jv *o = jv_dict_get_v(b.d, a.d->key[i]);
            if (!o || !jv_equal(a.d->val[i], *o)) return false;
        }
        return true;
    case JV_MACRO: return a.macro == b.macro;
    case JV_FUNC: return a.fn == b.fn;
    default: return false;
    }
}

const char *jv_kind_name(struct jv v) {
    static const char *const names[] = {"undefined", "NoneType", "bool", "int", "float", "str", "list", "dict",
                                        "Namespace", "macro", "function", "method", "LoopContext"};
    return v.k < sizeof names / sizeof names[0] ? names[v.k] : "?";
}

/* ---- UTF-8 ---------------------------------------------------------------------------- */
static size_t seq_len(unsigned char b) { return b < 0x80 ? 1 : b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : b >= 0xC0 ? 2 : 1; }

size_t jj_utf8_len(const char *s, size_t n) {
    size_t k = 0;
    for (size_t i = 0; i < n; k++) {
        size_t l = seq_len((unsigned char)s[i]);
        i += l > n - i ? n - i : l;
    }
    return k;
}

size_t jj_utf8_offset(const char *s, size_t n, size_t cp) {
    size_t i = 0;
    for (size_t k = 0; k < cp && i < n; k++) {
        size_t l = seq_len((unsigned char)s[i]);
        i += l > n - i ? n - i : l;
    }
    return i;
}

static uint32_t decode_cp(const char *s, size_t n, size_t *len) {
    const unsigned char *u = (const unsigned char *)s;
    size_t l = seq_len(u[0]);
    if (l > n) l = 1;
    *len = l;
    if (l == 1) return u[0];
    uint32_t cp = u[0] & (0x7F >> l);
    for (size_t i = 1; i < l; i++) cp = cp << 6 | (u[i] & 0x3F);
    return cp;
}

bool jj_is_space(const char *s, size_t n, size_t *len) {
    uint32_t cp = decode_cp(s, n, len);
    if (cp == ' ' || (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x1F)) return true;
    return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 ||
           cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

/* ---- printing ------------------------------------------------------------------------- */
static void add_fmt(struct hmoe_strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add_fmt(struct hmoe_strbuf *b, const char *fmt, ...) {
    char tmp[64];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (k > 0) hmoe_strbuf_addn(b, tmp, (size_t)k < sizeof tmp ? (size_t)k : sizeof tmp - 1);
}

/* float.__repr__: the shortest digits that read back to the same double, in fixed notation
 * for exponents -4..15 and scientific otherwise, always with a '.0' or exponent. */
static void float_repr(struct hmoe_strbuf *b, double f, bool json) {
    if (isnan(f)) { hmoe_strbuf_add(b, json ? "NaN" : "nan"); return; }
    if (isinf(f)) { hmoe_strbuf_add(b, f > 0 ? (json ? "Infinity" : "inf") : (json ? "-Infinity" : "-inf")); return; }
    char e[40];
    for (int p = 1; p <= 17; p++) {
        snprintf(e, sizeof e, "%.*e", p - 1, f);
        if (strtod(e, NULL) == f) break;
    }
    /* e = [-]d[.ddd]e[+-]XX */
    const char *q = e;
    bool neg = *q == '-';
    if (neg) q++;
    char digits[24];
    size_t nd = 0;
    for (; *q && *q != 'e'; q++)
        if (*q != '.') digits[nd++] = *q;
    int exp = atoi(q + 1);
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    if (neg) hmoe_strbuf_add(b, "-");
    if (exp >= -4 && exp < 16) {
        if (exp < 0) {
            hmoe_strbuf_add(b, "0.");
            for (int i = 0; i < -exp - 1; i++) hmoe_strbuf_add(b, "0");
            hmoe_strbuf_addn(b, digits, nd);
        } else {
            for (int i = 0; i <= exp; i++) hmoe_strbuf_addn(b, (size_t)i < nd ? &digits[i] : "0", 1);
            hmoe_strbuf_add(b, ".");
            if ((size_t)exp + 1 < nd) hmoe_strbuf_addn(b, digits + exp + 1, nd - (size_t)exp - 1);
            else hmoe_strbuf_add(b, "0");
        }
    } else {
        hmoe_strbuf_addn(b, digits, 1);
        if (nd > 1) {
            hmoe_strbuf_add(b, ".");
            hmoe_strbuf_addn(b, digits + 1, nd - 1);
        }
        add_fmt(b, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    }
}

static void str_repr(struct hmoe_strbuf *b, const char *s, size_t n) {
    bool has_sq = memchr(s, '\'', n) != NULL, has_dq = memchr(s, '"', n) != NULL;
    char q = has_sq && !has_dq ? '"' : '\'';
    hmoe_strbuf_addn(b, &q, 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == (unsigned char)q || ch == '\\') { hmoe_strbuf_add(b, "\\"); hmoe_strbuf_addn(b, s + i, 1); }
        else if (ch == '\n') hmoe_strbuf_add(b, "\\n");
        else if (ch == '\r') hmoe_strbuf_add(b, "\\r");
        else if (ch == '\t') hmoe_strbuf_add(b, "\\t");
        else if (ch < 0x20 || ch == 0x7F) add_fmt(b, "\\x%02x", ch);
        else hmoe_strbuf_addn(b, s + i, 1);
    }
    hmoe_strbuf_addn(b, &q, 1);
}

void jv_repr(struct jj_ctx *c, struct hmoe_strbuf *b, struct jv v) {
    if (++c->depth > c->lim.max_depth) jj_fail_here(c, HMOE_ERR_RANGE, "value nested too deeply to print");
    switch (v.k) {
    case JV_STR: str_repr(b, v.s, v.n); break;
    case JV_LIST:
        hmoe_strbuf_add(b, v.l->tuple ? "(" : "[");
        for (size_t i = 0; i < v.l->n; i++) {
            if (i) hmoe_strbuf_add(b, ", ");
            jv_repr(c, b, v.l->v[i]);
        }
        hmoe_strbuf_add(b, v.l->tuple ? (v.l->n == 1 ? ",)" : ")") : "]");
        break;
    case JV_DICT: case JV_NS:
        hmoe_strbuf_add(b, v.k == JV_NS ? "<Namespace {" : "{");
        for (size_t i = 0; i < v.d->n; i++) {
            if (i) hmoe_strbuf_add(b, ", ");
            jv_repr(c, b, v.d->key[i]);
            hmoe_strbuf_add(b, ": ");
            jv_repr(c, b, v.d->val[i]);
        }
        hmoe_strbuf_add(b, v.k == JV_NS ? "}>" : "}");
        break;
    default: jv_to_str(c, b, v); break;
    }
    c->depth--;
}

void jv_to_str(struct jj_ctx *c, struct hmoe_strbuf *b, struct jv v) {
    switch (v.k) {
    case JV_UNDEF: break;
    case JV_NONE: hmoe_strbuf_add(b, "None"); break;
    case JV_BOOL: hmoe_strbuf_add(b, v.b ? "True" : "False"); break;
    case JV_INT: add_fmt(b, "%" PRId64, v.i); break;
    case JV_FLOAT: float_repr(b, v.f, false); break;
    case JV_STR: hmoe_strbuf_addn(b, v.s, v.n); break;
    case JV_LIST: case JV_DICT: case JV_NS: jv_repr(c, b, v); break;
    case JV_MACRO: hmoe_strbuf_add(b, "<Macro>"); break;
    case JV_LOOP: hmoe_strbuf_add(b, "<LoopContext>"); break;
    default: hmoe_strbuf_add(b, "<function>"); break;
    }
}

struct jv jv_stringify(struct jj_ctx *c, struct jv v) {
    if (v.k == JV_STR) return v;
    struct hmoe_strbuf b = {0};
    jv_to_str(c, &b, v);
    if (b.oom) { free(b.s); jj_fail_here(c, HMOE_ERR_NOMEM, "out of memory"); }
    struct jv r = jv_str_copy(c, b.s ? b.s : "", b.n);
    free(b.s);
    return r;
}

/* ---- tojson --------------------------------------------------------------------------- */
static void json_str(struct hmoe_strbuf *b, const char *s, size_t n, bool ensure_ascii) {
    hmoe_strbuf_add(b, "\"");
    size_t run = 0; /* bytes copied verbatim in one go: the common case is plain text */
    for (size_t i = 0; i < n;) {
        unsigned char ch = (unsigned char)s[i];
        const char *esc = NULL;
        char tmp[16];
        size_t l = 1;
        if (ch == '"') esc = "\\\"";
        else if (ch == '\\') esc = "\\\\";
        else if (ch == '\n') esc = "\\n";
        else if (ch == '\r') esc = "\\r";
        else if (ch == '\t') esc = "\\t";
        else if (ch == '\b') esc = "\\b";
        else if (ch == '\f') esc = "\\f";
        else if (ch < 0x20) { snprintf(tmp, sizeof tmp, "\\u%04x", ch); esc = tmp; }
        else if (ch >= 0x80 && ensure_ascii) {
            uint32_t cp = decode_cp(s + i, n - i, &l);
            if (cp >= 0x10000) {
                cp -= 0x10000;
                snprintf(tmp, sizeof tmp, "\\u%04x\\u%04x", 0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF));
            } else snprintf(tmp, sizeof tmp, "\\u%04x", cp);
            esc = tmp;
        }
        if (esc) {
            hmoe_strbuf_addn(b, s + i - run, run);
            run = 0;
            hmoe_strbuf_add(b, esc);
        } else run += l;
        i += l;
    }
    hmoe_strbuf_addn(b, s + n - run, run);
    hmoe_strbuf_add(b, "\"");
}

static void json_newline(struct hmoe_strbuf *b, const struct jj_json_fmt *fmt, int level) {
    hmoe_strbuf_add(b, "\n");
    for (int i = 0; i < level * fmt->indent; i++) hmoe_strbuf_add(b, " ");
}

void jv_to_json(struct jj_ctx *c, struct hmoe_strbuf *b, struct jv v, const struct jj_json_fmt *fmt, int level) {
    if (level > (int)c->lim.max_depth) jj_fail_here(c, HMOE_ERR_RANGE, "value nested too deeply for tojson");
    switch (v.k) {
    case JV_UNDEF: case JV_NONE: hmoe_strbuf_add(b, "null"); break;
    case JV_BOOL: hmoe_strbuf_add(b, v.b ? "true" : "false"); break;
    case JV_INT: add_fmt(b, "%" PRId64, v.i); break;
    case JV_FLOAT: float_repr(b, v.f, true); break;
    case JV_STR: json_str(b, v.s, v.n, fmt->ensure_ascii); break;
    case JV_LIST:
        hmoe_strbuf_add(b, "[");
        for (size_t i = 0; i < v.l->n; i++) {
            if (i) hmoe_strbuf_add(b, fmt->item_sep);
            if (fmt->indent >= 0) json_newline(b, fmt, level + 1);
            jv_to_json(c, b, v.l->v[i], fmt, level + 1);
        }
        if (fmt->indent >= 0 && v.l->n) json_newline(b, fmt, level);
        hmoe_strbuf_add(b, "]");
        break;
    case JV_DICT: case JV_NS: {
        size_t n = v.d->n;
        size_t *order = jj_alloc(c, (n ? n : 1) * sizeof *order);
        for (size_t i = 0; i < n; i++) order[i] = i;
        if (fmt->sort_keys) /* insertion sort by key bytes: dicts in templates are small */
            for (size_t i = 1; i < n; i++)
                for (size_t j = i; j > 0; j--) {
                    struct jv x = v.d->key[order[j - 1]], y = v.d->key[order[j]];
                    if (x.k != JV_STR || y.k != JV_STR) break;
                    int r = memcmp(x.s, y.s, x.n < y.n ? x.n : y.n);
                    if (r < 0 || (r == 0 && x.n <= y.n)) break;
                    size_t t = order[j]; order[j] = order[j - 1]; order[j - 1] = t;
                }
        hmoe_strbuf_add(b, "{");
        for (size_t i = 0; i < n; i++) {
            if (i) hmoe_strbuf_add(b, fmt->item_sep);
            if (fmt->indent >= 0) json_newline(b, fmt, level + 1);
            struct jv k = v.d->key[order[i]];
            if (k.k == JV_STR) json_str(b, k.s, k.n, fmt->ensure_ascii);
            else { /* json.dumps turns int/bool/None keys into strings */
                struct hmoe_strbuf kb = {0};
                if (k.k == JV_NONE) hmoe_strbuf_add(&kb, "null");
                else if (k.k == JV_BOOL) hmoe_strbuf_add(&kb, k.b ? "true" : "false");
                else jv_to_str(c, &kb, k);
                json_str(b, kb.s ? kb.s : "", kb.n, fmt->ensure_ascii);
                free(kb.s);
            }
            hmoe_strbuf_add(b, fmt->key_sep);
            jv_to_json(c, b, v.d->val[order[i]], fmt, level + 1);
        }
        if (fmt->indent >= 0 && n) json_newline(b, fmt, level);
        hmoe_strbuf_add(b, "}");
        break;
    }
    default: jj_fail_here(c, HMOE_ERR_FORMAT, "tojson: a %s is not JSON serializable", jv_kind_name(v));
    }
}

/* ---- JSON input ----------------------------------------------------------------------- */
struct jv jv_from_json(struct jj_ctx *c, const struct hmoe_json *j) {
    if (!j) return jv_undef();
    switch (j->kind) {
    case HMOE_JSON_NULL: return jv_none();
    case HMOE_JSON_BOOL: return jv_bool(j->b);
    case HMOE_JSON_NUMBER: {
        /* As json.loads: an integer literal stays an int (exactly), anything else is a float. */
        if (j->str && !strpbrk(j->str, ".eE")) {
            char *end;
            errno = 0;
            long long v = strtoll(j->str, &end, 10);
            if (*end == 0 && errno == 0) return jv_int(v); /* beyond 64 bits: a float (no big integers) */
        }
        return jv_float(j->num);
    }
    case HMOE_JSON_STRING: return jv_str(j->str, j->str_len);
    case HMOE_JSON_ARRAY: {
        struct jv l = jv_new_list(c, j->n);
        for (size_t i = 0; i < j->n; i++) l.l->v[l.l->n++] = jv_from_json(c, j->items[i]);
        return l;
    }
    case HMOE_JSON_OBJECT: {
        struct jv d = jv_new_dict(c, JV_DICT, j->n);
        for (size_t i = 0; i < j->n; i++) jv_dict_set(c, d.d, jv_str(j->keys[i], strlen(j->keys[i])),
                                                      jv_from_json(c, j->items[i]));
        return d;
    }
    }
    return jv_undef();
}
