/* jj_filters.c — Jinja2's filters and tests, with transformers' tojson (json.dumps with
 * ensure_ascii=False, ", " / ": " separators unless indent is given, keys in insertion
 * order) in place of Jinja's HTML-safe one. Filters on strings use Python semantics:
 * trim is str.strip (Unicode whitespace), length counts code points.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/jinja/jinja_impl.h"

struct jv jj_str_case(struct jj_ctx *c, struct jv s, int mode);

enum {
    F_ABS, F_ATTR, F_CAPITALIZE, F_COUNT, F_D, F_DEFAULT, F_DICTSORT, F_E, F_ESCAPE, F_FIRST, F_FLOAT, F_INDENT, F_INT,
    F_ITEMS, F_JOIN, F_LAST, F_LENGTH, F_LIST, F_LOWER, F_MAP, F_MAX, F_MIN, F_REJECT, F_REJECTATTR, F_REPLACE,
    F_REVERSE, F_ROUND, F_SAFE, F_SELECT, F_SELECTATTR, F_SORT, F_STRING, F_SUM, F_TITLE, F_TOJSON, F_TRIM, F_UNIQUE,
    F_UPPER, F_WORDCOUNT, F_COUNT_ALL
};
static const char *const filter_names[F_COUNT_ALL] = {
    "abs", "attr", "capitalize", "count", "d", "default", "dictsort", "e", "escape", "first", "float", "indent", "int",
    "items", "join", "last", "length", "list", "lower", "map", "max", "min", "reject", "rejectattr", "replace",
    "reverse", "round", "safe", "select", "selectattr", "sort", "string", "sum", "title", "tojson", "trim", "unique",
    "upper", "wordcount"};

enum {
    T_BOOLEAN, T_CALLABLE, T_DEFINED, T_DIVISIBLEBY, T_EQ, T_EQUALTO, T_EQSYM, T_EVEN, T_FALSE, T_FLOAT, T_GE, T_GESYM,
    T_GT, T_GREATERTHAN, T_GTSYM, T_IN, T_INTEGER, T_ITERABLE, T_LE, T_LESYM, T_LOWER, T_LT, T_LESSTHAN, T_LTSYM,
    T_MAPPING, T_NE, T_NESYM, T_NONE, T_NUMBER, T_ODD, T_SAMEAS, T_SEQUENCE, T_STRING, T_TRUE, T_UNDEFINED, T_UPPER,
    T_COUNT_ALL
};
static const char *const test_names[T_COUNT_ALL] = {
    "boolean", "callable", "defined", "divisibleby", "eq", "equalto", "==", "even", "false", "float", "ge", ">=",
    "gt", "greaterthan", ">", "in", "integer", "iterable", "le", "<=", "lower", "lt", "lessthan", "<",
    "mapping", "ne", "!=", "none", "number", "odd", "sameas", "sequence", "string", "true", "undefined", "upper"};

static int find_name(const char *const *names, int n, const char *s, size_t len) {
    for (int i = 0; i < n; i++)
        if (strlen(names[i]) == len && memcmp(names[i], s, len) == 0) return i;
    return -1;
}
int jj_filter_id(const char *name, size_t len) { return find_name(filter_names, F_COUNT_ALL, name, len); }
int jj_test_id(const char *name, size_t len) { return find_name(test_names, T_COUNT_ALL, name, len); }

/* Positional argument i, or the keyword `name`, or dflt. */
static struct jv arg(struct jv *a, size_t n, size_t i, const struct jn_kw *kw, struct jv *kv, size_t nk, const char *name,
                     struct jv dflt) {
    if (i < n) return a[i];
    for (size_t k = 0; k < nk; k++)
        if (strlen(name) == kw[k].len && memcmp(kw[k].name, name, kw[k].len) == 0) return kv[k];
    return dflt;
}

static struct jv to_str(struct jj_ctx *c, struct jv v) { return jv_stringify(c, v); }

static int64_t as_int(struct jv v) { return v.k == JV_INT ? v.i : v.k == JV_BOOL ? v.b : 0; }

/* attribute lookup for map/selectattr/sort/join: "a.b" walks dicts (and list indexes). */
static struct jv attr_path(struct jj_ctx *c, struct jv v, struct jv path) {
    if (path.k == JV_INT) return v.k == JV_LIST && path.i >= 0 && (size_t)path.i < v.l->n ? v.l->v[path.i] : jv_undef();
    if (path.k != JV_STR) jj_fail_here(c, HMOE_ERR_FORMAT, "attribute name must be a string");
    size_t b = 0;
    while (b <= path.n) {
        size_t e = b;
        while (e < path.n && path.s[e] != '.') e++;
        if (v.k == JV_DICT || v.k == JV_NS) {
            const struct jv *x = jv_dict_get(v.d, path.s + b, e - b);
            v = x ? *x : jv_undef();
        } else if (v.k == JV_LIST && e > b && path.s[b] >= '0' && path.s[b] <= '9') {
            size_t idx = (size_t)strtoul(path.s + b, NULL, 10);
            v = idx < v.l->n ? v.l->v[idx] : jv_undef();
        } else v = jv_undef();
        b = e + 1;
    }
    return v;
}

static int sort_cmp(struct jj_ctx *c, struct jv a, struct jv b, bool case_sensitive) {
    if (a.k == JV_STR && b.k == JV_STR && !case_sensitive) {
        a = jj_str_case(c, a, 1);
        b = jj_str_case(c, b, 1);
    }
    if (a.k == JV_STR && b.k == JV_STR) {
        int r = memcmp(a.s, b.s, a.n < b.n ? a.n : b.n);
        return r ? r : (a.n > b.n) - (a.n < b.n);
    }
    bool an = a.k == JV_INT || a.k == JV_FLOAT || a.k == JV_BOOL, bn = b.k == JV_INT || b.k == JV_FLOAT || b.k == JV_BOOL;
    if (an && bn) {
        double x = a.k == JV_FLOAT ? a.f : (double)as_int(a), y = b.k == JV_FLOAT ? b.f : (double)as_int(b);
        return (x > y) - (x < y);
    }
    jj_fail_here(c, HMOE_ERR_FORMAT, "cannot order '%s' and '%s'", jv_kind_name(a), jv_kind_name(b));
}

/* Stable insertion sort of l by key (keys[i] belongs to l[i]). */
static void sort_by(struct jj_ctx *c, struct jv *items, struct jv *keys, size_t n, bool cs, bool reverse) {
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0; j--) {
            int r = sort_cmp(c, keys[j - 1], keys[j], cs);
            if (reverse ? r >= 0 : r <= 0) break;
            struct jv t = items[j]; items[j] = items[j - 1]; items[j - 1] = t;
            t = keys[j]; keys[j] = keys[j - 1]; keys[j - 1] = t;
            jj_count_iteration(c);
        }
}

static struct jv select_items(struct jj_ctx *c, int id, struct jv v, struct jv *a, size_t n) {
    bool by_attr = id == F_SELECTATTR || id == F_REJECTATTR, reject = id == F_REJECT || id == F_REJECTATTR;
    struct jj_list *l = jj_iter_list(c, v);
    size_t first_test = by_attr ? 1 : 0;
    if (by_attr && n < 1) jj_fail_here(c, HMOE_ERR_FORMAT, "%s needs an attribute name", filter_names[id]);
    int test = -1;
    if (n > first_test) {
        if (a[first_test].k != JV_STR) jj_fail_here(c, HMOE_ERR_FORMAT, "%s: the test name must be a string", filter_names[id]);
        test = jj_test_id(a[first_test].s, a[first_test].n);
        if (test < 0) jj_fail_here(c, HMOE_ERR_FORMAT, "%s: unknown test '%.*s'", filter_names[id], (int)a[first_test].n,
                                   a[first_test].s);
    }
    struct jv out = jv_new_list(c, l->n);
    for (size_t i = 0; i < l->n; i++) {
        jj_count_iteration(c);
        struct jv x = by_attr ? attr_path(c, l->v[i], a[0]) : l->v[i];
        bool ok = test < 0 ? jv_truthy(x) : jj_apply_test(c, test, x, a + first_test + 1, n - first_test - 1);
        if (ok != reject) out.l->v[out.l->n++] = l->v[i];
    }
    return out;
}

static struct jv do_tojson(struct jj_ctx *c, struct jv v, struct jv *a, size_t n, const struct jn_kw *kw, struct jv *kv,
                           size_t nk) {
    struct jv indent = arg(a, n, 0, kw, kv, nk, "indent", jv_none());
    struct jv ea = arg(a, n, 1, kw, kv, nk, "ensure_ascii", jv_bool(false));
    struct jv seps = arg(a, n, 2, kw, kv, nk, "separators", jv_none());
    struct jv sk = arg(a, n, 3, kw, kv, nk, "sort_keys", jv_bool(false));
    struct jj_json_fmt f = {.ensure_ascii = jv_truthy(ea), .sort_keys = jv_truthy(sk), .indent = -1};
    if (indent.k == JV_INT) f.indent = indent.i < 0 ? 0 : indent.i > 64 ? 64 : (int)indent.i;
    else if (indent.k != JV_NONE && indent.k != JV_UNDEF) jj_fail_here(c, HMOE_ERR_FORMAT, "tojson: indent must be an integer");
    f.item_sep = f.indent >= 0 ? "," : ", ";
    f.key_sep = ": ";
    if (seps.k == JV_LIST) {
        if (seps.l->n != 2 || seps.l->v[0].k != JV_STR || seps.l->v[1].k != JV_STR)
            jj_fail_here(c, HMOE_ERR_FORMAT, "tojson: separators must be two strings");
        f.item_sep = jv_str_copy(c, seps.l->v[0].s, seps.l->v[0].n).s;
        f.key_sep = jv_str_copy(c, seps.l->v[1].s, seps.l->v[1].n).s;
    }
    struct hmoe_strbuf b = {0};
    jv_to_json(c, &b, v, &f, 0);
    struct jv r = jv_str_copy(c, b.s ? b.s : "", b.n);
    free(b.s);
    return r;
}

static struct jv do_indent(struct jj_ctx *c, struct jv s, struct jv *a, size_t n, const struct jn_kw *kw, struct jv *kv, size_t nk) {
    struct jv width = arg(a, n, 0, kw, kv, nk, "width", jv_int(4));
    bool first = jv_truthy(arg(a, n, 1, kw, kv, nk, "first", jv_bool(false)));
    bool blank = jv_truthy(arg(a, n, 2, kw, kv, nk, "blank", jv_bool(false)));
    struct jv pad = width.k == JV_STR ? width : jv_str("    ", (size_t)(width.k == JV_INT && width.i >= 0 && width.i <= 4 ? width.i : 4));
    char spaces[65];
    if (width.k == JV_INT && width.i > 4) {
        size_t w = width.i > 64 ? 64 : (size_t)width.i;
        memset(spaces, ' ', w);
        pad = jv_str_copy(c, spaces, w);
    }
    /* As Jinja: lines split at "\n"; an empty line gets no indentation unless blank=True;
     * the first line only with first=True. */
    struct hmoe_strbuf b = {0};
    if (first) hmoe_strbuf_addn(&b, pad.s, pad.n);
    for (size_t i = 0, line = 0; i <= s.n; line++) {
        size_t e = i;
        while (e < s.n && s.s[e] != '\n') e++;
        if (line > 0) {
            hmoe_strbuf_add(&b, "\n");
            if (blank || e > i) hmoe_strbuf_addn(&b, pad.s, pad.n);
        }
        hmoe_strbuf_addn(&b, s.s + i, e - i);
        i = e + 1;
    }
    struct jv r = jv_str_copy(c, b.s ? b.s : "", b.n);
    free(b.s);
    return r;
}

struct jv jj_apply_filter(struct jj_ctx *c, int id, struct jv v, struct jv *a, size_t n, const struct jn_kw *kw,
                          struct jv *kv, size_t nk) {
    switch (id) {
    case F_SAFE: return v;
    case F_STRING: return to_str(c, v);
    case F_TOJSON: return do_tojson(c, v, a, n, kw, kv, nk);
    case F_TRIM: {
        struct jv chars = arg(a, n, 0, kw, kv, nk, "chars", jv_none());
        return jj_str_strip(c, to_str(c, v), &chars, true, true);
    }
    case F_D: case F_DEFAULT: {
        bool boolean = jv_truthy(arg(a, n, 1, kw, kv, nk, "boolean", jv_bool(false)));
        if (v.k == JV_UNDEF || (boolean && !jv_truthy(v))) return arg(a, n, 0, kw, kv, nk, "default_value", jv_str("", 0));
        return v;
    }
    case F_LENGTH: case F_COUNT:
        switch (v.k) {
        case JV_STR: return jv_int((int64_t)jj_utf8_len(v.s, v.n));
        case JV_LIST: return jv_int((int64_t)v.l->n);
        case JV_DICT: case JV_NS: return jv_int((int64_t)v.d->n);
        case JV_UNDEF: return jv_int(0);
        default: jj_fail_here(c, HMOE_ERR_FORMAT, "object of type '%s' has no len()", jv_kind_name(v));
        }
    case F_FIRST: case F_LAST: {
        struct jj_list *l = jj_iter_list(c, v);
        if (!l->n) return jv_undef();
        return id == F_FIRST ? l->v[0] : l->v[l->n - 1];
    }
    case F_LIST: {
        struct jj_list *l = jj_iter_list(c, v);
        struct jv out = jv_new_list(c, l->n);
        if (l->n) memcpy(out.l->v, l->v, l->n * sizeof *l->v);
        out.l->n = l->n;
        return out;
    }
    case F_ITEMS: {
        if (v.k == JV_UNDEF) return jv_new_list(c, 0);
        if (v.k != JV_DICT && v.k != JV_NS) jj_fail_here(c, HMOE_ERR_FORMAT, "items: can only get item pairs from a mapping, not a %s", jv_kind_name(v));
        struct jv r;
        jj_call_method(c, v, "items", 5, NULL, 0, NULL, NULL, 0, &r);
        return r;
    }
    case F_JOIN: {
        struct jv sep = arg(a, n, 0, kw, kv, nk, "d", jv_str("", 0));
        struct jv attr = arg(a, n, 1, kw, kv, nk, "attribute", jv_undef());
        struct jj_list *l = jj_iter_list(c, v);
        struct hmoe_strbuf b = {0};
        sep = to_str(c, sep);
        for (size_t i = 0; i < l->n; i++) {
            if (i) hmoe_strbuf_addn(&b, sep.s, sep.n);
            jv_to_str(c, &b, attr.k == JV_UNDEF ? l->v[i] : attr_path(c, l->v[i], attr));
        }
        struct jv r = jv_str_copy(c, b.s ? b.s : "", b.n);
        free(b.s);
        return r;
    }
    case F_MAP: {
        struct jj_list *l = jj_iter_list(c, v);
        struct jv attr = arg(NULL, 0, 0, kw, kv, nk, "attribute", jv_undef());
        struct jv out = jv_new_list(c, l->n);
        int fid = -1;
        if (attr.k == JV_UNDEF) {
            if (n < 1 || a[0].k != JV_STR) jj_fail_here(c, HMOE_ERR_FORMAT, "map needs a filter name or attribute=");
            fid = jj_filter_id(a[0].s, a[0].n);
            if (fid < 0) jj_fail_here(c, HMOE_ERR_FORMAT, "map: unknown filter '%.*s'", (int)a[0].n, a[0].s);
        }
        struct jv dflt = arg(NULL, 0, 0, kw, kv, nk, "default", jv_undef());
        for (size_t i = 0; i < l->n; i++) {
            jj_count_iteration(c);
            struct jv x;
            if (fid >= 0) x = jj_apply_filter(c, fid, l->v[i], a + 1, n - 1, NULL, NULL, 0);
            else {
                x = attr_path(c, l->v[i], attr);
                if (x.k == JV_UNDEF) x = dflt;
            }
            out.l->v[out.l->n++] = x;
        }
        return out;
    }
    case F_SELECT: case F_REJECT: case F_SELECTATTR: case F_REJECTATTR: return select_items(c, id, v, a, n);
    case F_UPPER: return jj_str_case(c, to_str(c, v), 0);
    case F_LOWER: return jj_str_case(c, to_str(c, v), 1);
    case F_TITLE: return jj_str_case(c, to_str(c, v), 2);
    case F_CAPITALIZE: { /* Jinja: first letter upper, the rest lower */
        struct jv s = jj_str_case(c, to_str(c, v), 1);
        return jj_str_case(c, s, 3);
    }
    case F_REPLACE: {
        struct jv r, args3[3] = {arg(a, n, 0, kw, kv, nk, "old", jv_undef()), arg(a, n, 1, kw, kv, nk, "new", jv_undef()),
                                 arg(a, n, 2, kw, kv, nk, "count", jv_int(-1))};
        if (args3[2].k == JV_NONE) args3[2] = jv_int(-1);
        jj_call_method(c, to_str(c, v), "replace", 7, args3, 3, NULL, NULL, 0, &r);
        return r;
    }
    case F_INT: case F_FLOAT: {
        struct jv dflt = arg(a, n, 0, kw, kv, nk, "default", id == F_INT ? jv_int(0) : jv_float(0));
        double f;
        if (v.k == JV_INT || v.k == JV_BOOL) f = (double)as_int(v);
        else if (v.k == JV_FLOAT) f = v.f;
        else if (v.k == JV_STR) {
            char buf[64];
            size_t k = v.n < sizeof buf - 1 ? v.n : sizeof buf - 1;
            memcpy(buf, v.s, k);
            buf[k] = 0;
            char *end;
            if (id == F_INT) {
                long long i = strtoll(buf, &end, 10);
                while (*end == ' ' || *end == '\n' || *end == '\t') end++;
                if (end != buf && *end == 0) return jv_int(i);
            }
            f = strtod(buf, &end);
            while (*end == ' ' || *end == '\n' || *end == '\t') end++;
            if (end == buf || *end || k != v.n) return dflt;
        } else return dflt;
        if (id == F_FLOAT) return jv_float(f);
        if (!(f > -9.2e18 && f < 9.2e18)) return dflt;
        return jv_int((int64_t)f);
    }
    case F_ABS:
        if (v.k == JV_FLOAT) return jv_float(fabs(v.f));
        if (v.k == JV_INT || v.k == JV_BOOL) return jv_int(as_int(v) < 0 && as_int(v) != INT64_MIN ? -as_int(v) : as_int(v));
        jj_fail_here(c, HMOE_ERR_FORMAT, "bad operand type for abs(): '%s'", jv_kind_name(v));
    case F_ROUND: {
        struct jv prec = arg(a, n, 0, kw, kv, nk, "precision", jv_int(0));
        struct jv method = arg(a, n, 1, kw, kv, nk, "method", jv_str("common", 6));
        double f = v.k == JV_FLOAT ? v.f : (double)as_int(v), m = pow(10, (double)as_int(prec));
        if (method.k == JV_STR && method.n && method.s[0] == 'c' && method.n == 4) return jv_float(ceil(f * m) / m);
        if (method.k == JV_STR && method.n && method.s[0] == 'f') return jv_float(floor(f * m) / m);
        return jv_float(round(f * m) / m);
    }
    case F_REVERSE: {
        if (v.k == JV_STR) {
            struct jv st = jv_int(-1), none = jv_none();
            struct jj_list *chars = jj_iter_list(c, v);
            (void)st, (void)none;
            char *p = jj_alloc(c, (size_t)v.n + 1);
            size_t k = 0;
            for (size_t i = chars->n; i-- > 0;) { memcpy(p + k, chars->v[i].s, chars->v[i].n); k += chars->v[i].n; }
            p[k] = 0;
            return jv_str(p, k);
        }
        struct jj_list *l = jj_iter_list(c, v);
        struct jv out = jv_new_list(c, l->n);
        for (size_t i = l->n; i-- > 0;) out.l->v[out.l->n++] = l->v[i];
        return out;
    }
    case F_SORT: case F_DICTSORT: case F_UNIQUE: case F_MIN: case F_MAX: {
        bool dict = id == F_DICTSORT;
        bool reverse = jv_truthy(arg(a, n, dict ? 2 : 0, kw, kv, nk, "reverse", jv_bool(false)));
        bool cs = jv_truthy(arg(a, n, dict ? 0 : id == F_SORT ? 1 : 0, kw, kv, nk, "case_sensitive", jv_bool(false)));
        struct jv attr = arg(a, n, id == F_SORT ? 2 : 99, kw, kv, nk, "attribute", jv_undef());
        struct jv items;
        if (dict) {
            if (v.k != JV_DICT && v.k != JV_NS) jj_fail_here(c, HMOE_ERR_FORMAT, "dictsort: a %s is not a mapping", jv_kind_name(v));
            jj_call_method(c, v, "items", 5, NULL, 0, NULL, NULL, 0, &items);
        } else {
            struct jj_list *l = jj_iter_list(c, v);
            items = jv_new_list(c, l->n);
            if (l->n) memcpy(items.l->v, l->v, l->n * sizeof *l->v);
            items.l->n = l->n;
        }
        size_t cnt = items.l->n;
        struct jv *keys = jj_alloc(c, (cnt ? cnt : 1) * sizeof *keys);
        struct jv by = arg(a, n, 1, kw, kv, nk, "by", jv_str("key", 3));
        for (size_t i = 0; i < cnt; i++) {
            struct jv x = items.l->v[i];
            if (dict) keys[i] = x.l->v[by.k == JV_STR && by.n == 5 ? 1 : 0];
            else keys[i] = attr.k == JV_UNDEF ? x : attr_path(c, x, attr);
        }
        if (id == F_UNIQUE) {
            struct jv out = jv_new_list(c, cnt);
            for (size_t i = 0; i < cnt; i++) {
                bool seen = false;
                for (size_t j = 0; j < out.l->n && !seen; j++) seen = jv_equal(out.l->v[j], items.l->v[i]);
                if (!seen) out.l->v[out.l->n++] = items.l->v[i];
            }
            return out;
        }
        sort_by(c, items.l->v, keys, cnt, cs, reverse);
        if (id == F_MIN || id == F_MAX) return cnt ? items.l->v[id == F_MIN ? 0 : cnt - 1] : jv_undef();
        return items;
    }
    case F_SUM: {
        struct jj_list *l = jj_iter_list(c, v);
        struct jv attr = arg(a, n, 0, kw, kv, nk, "attribute", jv_undef());
        struct jv acc = arg(a, n, 1, kw, kv, nk, "start", jv_int(0));
        for (size_t i = 0; i < l->n; i++) {
            struct jv x = attr.k == JV_UNDEF ? l->v[i] : attr_path(c, l->v[i], attr);
            if (acc.k == JV_INT && x.k == JV_INT && !__builtin_add_overflow(acc.i, x.i, &acc.i)) continue;
            if ((acc.k != JV_INT && acc.k != JV_FLOAT) || (x.k != JV_INT && x.k != JV_FLOAT))
                jj_fail_here(c, HMOE_ERR_FORMAT, "sum: cannot add '%s'", jv_kind_name(x));
            acc = jv_float((acc.k == JV_FLOAT ? acc.f : (double)acc.i) + (x.k == JV_FLOAT ? x.f : (double)x.i));
        }
        return acc;
    }
    case F_ATTR: return attr_path(c, v, arg(a, n, 0, kw, kv, nk, "name", jv_str("", 0)));
    case F_INDENT: return do_indent(c, to_str(c, v), a, n, kw, kv, nk);
    case F_WORDCOUNT: {
        struct jv parts;
        jj_call_method(c, to_str(c, v), "split", 5, NULL, 0, NULL, NULL, 0, &parts);
        return jv_int((int64_t)parts.l->n);
    }
    case F_E: case F_ESCAPE: {
        struct jv s = to_str(c, v);
        struct hmoe_strbuf b = {0};
        for (size_t i = 0; i < s.n; i++) {
            switch (s.s[i]) {
            case '&': hmoe_strbuf_add(&b, "&amp;"); break;
            case '<': hmoe_strbuf_add(&b, "&lt;"); break;
            case '>': hmoe_strbuf_add(&b, "&gt;"); break;
            case '"': hmoe_strbuf_add(&b, "&#34;"); break;
            case '\'': hmoe_strbuf_add(&b, "&#39;"); break;
            default: hmoe_strbuf_addn(&b, s.s + i, 1);
            }
        }
        struct jv r = jv_str_copy(c, b.s ? b.s : "", b.n);
        free(b.s);
        return r;
    }
    default: jj_fail_here(c, HMOE_ERR_INTERNAL, "unknown filter id %d", id);
    }
}

bool jj_apply_test(struct jj_ctx *c, int id, struct jv v, struct jv *a, size_t n) {
    struct jv x = n ? a[0] : jv_undef();
    bool is_num = v.k == JV_INT || v.k == JV_FLOAT || v.k == JV_BOOL;
    switch (id) {
    case T_DEFINED: return v.k != JV_UNDEF;
    case T_UNDEFINED: return v.k == JV_UNDEF;
    case T_NONE: return v.k == JV_NONE;
    case T_BOOLEAN: return v.k == JV_BOOL;
    case T_TRUE: return v.k == JV_BOOL && v.b;
    case T_FALSE: return v.k == JV_BOOL && !v.b;
    case T_STRING: return v.k == JV_STR;
    case T_NUMBER: return is_num;
    case T_INTEGER: return v.k == JV_INT;
    case T_FLOAT: return v.k == JV_FLOAT;
    case T_MAPPING: return v.k == JV_DICT;
    /* Jinja's Undefined is iterable (empty) and has len() and __getitem__. */
    case T_ITERABLE: return v.k == JV_STR || v.k == JV_LIST || v.k == JV_DICT || v.k == JV_UNDEF;
    case T_SEQUENCE: return v.k == JV_STR || v.k == JV_LIST || v.k == JV_DICT || v.k == JV_UNDEF;
    case T_CALLABLE: return v.k == JV_MACRO || v.k == JV_FUNC || v.k == JV_METHOD;
    case T_LOWER: case T_UPPER: {
        if (v.k != JV_STR) return false;
        struct jv r;
        jj_call_method(c, v, id == T_LOWER ? "islower" : "isupper", 7, NULL, 0, NULL, NULL, 0, &r);
        return r.b;
    }
    case T_ODD: case T_EVEN: case T_DIVISIBLEBY: {
        if (v.k != JV_INT && v.k != JV_BOOL) jj_fail_here(c, HMOE_ERR_FORMAT, "test '%s' needs an integer", test_names[id]);
        int64_t d = id == T_DIVISIBLEBY ? as_int(x) : 2;
        if (d == 0) jj_fail_here(c, HMOE_ERR_FORMAT, "divisibleby(0)");
        int64_t m = as_int(v) % d;
        return id == T_ODD ? m != 0 : m == 0;
    }
    case T_EQ: case T_EQUALTO: case T_EQSYM: return jv_equal(v, x);
    case T_NE: case T_NESYM: return !jv_equal(v, x);
    case T_SAMEAS:
        return v.k == x.k && (v.k == JV_NONE || v.k == JV_UNDEF || (v.k == JV_BOOL && v.b == x.b) ||
                              (v.k == JV_LIST && v.l == x.l) || ((v.k == JV_DICT || v.k == JV_NS) && v.d == x.d) ||
                              (v.k == JV_INT && v.i == x.i) || (v.k == JV_STR && v.s == x.s && v.n == x.n));
    case T_IN: {
        if (x.k == JV_STR) {
            if (v.k != JV_STR) jj_fail_here(c, HMOE_ERR_FORMAT, "'in <string>' requires a string");
            for (size_t i = 0; i + v.n <= x.n; i++)
                if (memcmp(x.s + i, v.s, v.n) == 0) return true;
            return false;
        }
        if (x.k == JV_DICT || x.k == JV_NS) return jv_dict_get_v(x.d, v) != NULL;
        struct jj_list *l = jj_iter_list(c, x);
        for (size_t i = 0; i < l->n; i++)
            if (jv_equal(l->v[i], v)) return true;
        return false;
    }
    case T_LT: case T_LESSTHAN: case T_LTSYM: return sort_cmp(c, v, x, true) < 0;
    case T_LE: case T_LESYM: return sort_cmp(c, v, x, true) <= 0;
    case T_GT: case T_GREATERTHAN: case T_GTSYM: return sort_cmp(c, v, x, true) > 0;
    case T_GE: case T_GESYM: return sort_cmp(c, v, x, true) >= 0;
    default: jj_fail_here(c, HMOE_ERR_INTERNAL, "unknown test id %d", id);
    }
}
