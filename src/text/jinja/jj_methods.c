/* jj_methods.c — Python methods templates call on values (str.strip/split/startswith/...,
 * dict.items/get/keys/values, list.index/count, loop.cycle) and the globals transformers
 * provides (range, namespace, dict, raise_exception, strftime_now). str methods follow
 * CPython: strip() without arguments removes Unicode whitespace (str.isspace), split()
 * without a separator splits on whitespace runs, find/index count code points. Case
 * mapping (upper/lower/title/capitalize) covers ASCII letters only.
 * Lists can be changed with append/extend/insert/pop as llama.cpp's engine allows (templates
 * such as Kimi-K2's rely on it; transformers' sandbox would refuse).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "text/jinja/jinja_impl.h"

#define EQ(name, len, w) ((len) == sizeof(w) - 1 && memcmp((name), (w), (len)) == 0)

static struct jv arg_or(struct jv *args, size_t n, size_t i, const struct jn_kw *kw, struct jv *kw_vals, size_t n_kw,
                        const char *name, struct jv dflt) {
    if (i < n) return args[i];
    for (size_t k = 0; k < n_kw; k++)
        if (EQ(kw[k].name, kw[k].len, name) || (strlen(name) == kw[k].len && memcmp(kw[k].name, name, kw[k].len) == 0))
            return kw_vals[k];
    return dflt;
}

static void need_str(struct jj_ctx *c, struct jv v, const char *what) {
    if (v.k != JV_STR) jj_fail_here(c, HMOE_ERR_FORMAT, "%s must be a string, not '%s'", what, jv_kind_name(v));
}

/* Is the code point at s (len bytes) one of `chars`? */
static bool in_chars(const char *s, size_t len, struct jv chars) {
    for (size_t i = 0; i < chars.n;) {
        size_t l = jj_utf8_offset(chars.s + i, chars.n - i, 1);
        if (l == len && memcmp(chars.s + i, s, len) == 0) return true;
        i += l;
    }
    return false;
}

static size_t prev_cp_start(const char *s, size_t end) {
    size_t i = end - 1;
    while (i > 0 && ((unsigned char)s[i] & 0xC0) == 0x80 && end - i < 4) i--;
    return i;
}

struct jv jj_str_strip(struct jj_ctx *c, struct jv s, const struct jv *chars, bool left, bool right) {
    bool ws = !chars || chars->k == JV_NONE || chars->k == JV_UNDEF;
    if (!ws) need_str(c, *chars, "strip() argument");
    size_t b = 0, e = s.n, l;
    while (left && b < e) {
        l = jj_utf8_offset(s.s + b, e - b, 1);
        if (ws ? !jj_is_space(s.s + b, e - b, &l) : !in_chars(s.s + b, l, *chars)) break;
        b += l;
    }
    while (right && e > b) {
        size_t p = prev_cp_start(s.s, e);
        if (p < b) p = b;
        if (ws ? !(jj_is_space(s.s + p, e - p, &l) && p + l == e) : !in_chars(s.s + p, e - p, *chars)) break;
        e = p;
    }
    return jv_str(s.s + b, e - b);
}

static const char *find_bytes(const char *h, size_t hn, const char *nd, size_t nn) {
    if (nn == 0) return h;
    for (size_t i = 0; i + nn <= hn; i++)
        if (h[i] == nd[0] && memcmp(h + i, nd, nn) == 0) return h + i;
    return NULL;
}

static struct jv str_split(struct jj_ctx *c, struct jv s, struct jv sep, int64_t maxsplit) {
    struct jv out = jv_new_list(c, 4);
    if (sep.k == JV_NONE || sep.k == JV_UNDEF) {
        size_t i = 0, l;
        for (;;) {
            while (i < s.n && jj_is_space(s.s + i, s.n - i, &l)) i += l;
            if (i >= s.n) break;
            size_t b = i;
            if (maxsplit >= 0 && (int64_t)out.l->n >= maxsplit) {
                size_t e = s.n;
                while (e > b) { size_t p = prev_cp_start(s.s, e); if (!(jj_is_space(s.s + p, e - p, &l) && p + l == e)) break; e = p; }
                jv_list_push(c, out.l, jv_str(s.s + b, e - b));
                break;
            }
            while (i < s.n && !jj_is_space(s.s + i, s.n - i, &l)) i += jj_utf8_offset(s.s + i, s.n - i, 1);
            jv_list_push(c, out.l, jv_str(s.s + b, i - b));
        }
        return out;
    }
    need_str(c, sep, "split() separator");
    if (sep.n == 0) jj_fail_here(c, HMOE_ERR_FORMAT, "split(): empty separator");
    size_t i = 0;
    for (;;) {
        jj_count_iteration(c);
        const char *h = (maxsplit >= 0 && (int64_t)out.l->n >= maxsplit) ? NULL : find_bytes(s.s + i, s.n - i, sep.s, sep.n);
        if (!h) { jv_list_push(c, out.l, jv_str(s.s + i, s.n - i)); break; }
        jv_list_push(c, out.l, jv_str(s.s + i, (size_t)(h - (s.s + i))));
        i = (size_t)(h - s.s) + sep.n;
    }
    return out;
}

static struct jv str_rsplit(struct jj_ctx *c, struct jv s, struct jv sep, int64_t maxsplit) {
    if (maxsplit < 0 || sep.k == JV_NONE || sep.k == JV_UNDEF) return str_split(c, s, sep, maxsplit);
    need_str(c, sep, "rsplit() separator");
    if (sep.n == 0) jj_fail_here(c, HMOE_ERR_FORMAT, "rsplit(): empty separator");
    struct jv parts[65];
    size_t np = 0, e = s.n;
    if (maxsplit > 64) maxsplit = 64;
    while ((int64_t)np < maxsplit) {
        const char *h = NULL;
        for (size_t i = e + 1; i-- > 0;)
            if (i + sep.n <= e && memcmp(s.s + i, sep.s, sep.n) == 0) { h = s.s + i; break; }
        if (!h) break;
        parts[np++] = jv_str(h + sep.n, (size_t)(s.s + e - h - sep.n));
        e = (size_t)(h - s.s);
    }
    struct jv out = jv_new_list(c, np + 1);
    out.l->v[out.l->n++] = jv_str(s.s, e);
    while (np) out.l->v[out.l->n++] = parts[--np];
    return out;
}

static struct jv str_replace(struct jj_ctx *c, struct jv s, struct jv old, struct jv new, int64_t count) {
    need_str(c, old, "replace() argument 1");
    need_str(c, new, "replace() argument 2");
    struct hmoe_strbuf b = {0};
    size_t i = 0;
    int64_t done = 0;
    if (old.n == 0) { /* Python inserts `new` before every code point and at the end */
        while (i <= s.n && (count < 0 || done < count)) {
            hmoe_strbuf_addn(&b, new.s, new.n);
            done++;
            if (i == s.n) { i++; break; }
            size_t l = jj_utf8_offset(s.s + i, s.n - i, 1);
            hmoe_strbuf_addn(&b, s.s + i, l);
            i += l;
        }
        if (i < s.n) hmoe_strbuf_addn(&b, s.s + i, s.n - i);
    } else {
        for (;;) {
            const char *h = (count >= 0 && done >= count) ? NULL : find_bytes(s.s + i, s.n - i, old.s, old.n);
            if (!h) break;
            hmoe_strbuf_addn(&b, s.s + i, (size_t)(h - s.s - i));
            hmoe_strbuf_addn(&b, new.s, new.n);
            i = (size_t)(h - s.s) + old.n;
            done++;
        }
        hmoe_strbuf_addn(&b, s.s + i, s.n - i);
    }
    if (b.oom || b.n > c->lim.max_output) { free(b.s); jj_fail_here(c, HMOE_ERR_RANGE, "replace(): result too large"); }
    struct jv r = jv_str_copy(c, b.s ? b.s : "", b.n);
    free(b.s);
    return r;
}

static bool affix_match(struct jj_ctx *c, struct jv s, struct jv affix, bool start) {
    if (affix.k == JV_LIST) {
        for (size_t i = 0; i < affix.l->n; i++)
            if (affix_match(c, s, affix.l->v[i], start)) return true;
        return false;
    }
    need_str(c, affix, start ? "startswith() argument" : "endswith() argument");
    if (affix.n > s.n) return false;
    return memcmp(start ? s.s : s.s + s.n - affix.n, affix.s, affix.n) == 0;
}

static struct jv map_case(struct jj_ctx *c, struct jv s, int mode) { /* 0 upper, 1 lower, 2 title, 3 capitalize */
    char *p = jj_alloc(c, (size_t)s.n + 1);
    bool word_start = true;
    for (size_t i = 0; i < s.n; i++) {
        char ch = s.s[i];
        bool alpha = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z');
        bool up = mode == 0 || (mode == 2 && word_start && alpha) || (mode == 3 && i == 0);
        if (up && ch >= 'a' && ch <= 'z') ch = (char)(ch - 32);
        else if (!up && ch >= 'A' && ch <= 'Z') ch = (char)(ch + 32);
        p[i] = ch;
        word_start = !alpha && !((unsigned char)ch >= 0x80) && !(ch >= '0' && ch <= '9');
    }
    p[s.n] = 0;
    return jv_str(p, s.n);
}

struct jv jj_str_case(struct jj_ctx *c, struct jv s, int mode) { return map_case(c, s, mode); }

static bool str_method(struct jj_ctx *c, struct jv s, const char *m, size_t ml, struct jv *a, size_t n, const struct jn_kw *kw,
                       struct jv *kv, size_t nk, struct jv *r) {
    struct jv a0 = arg_or(a, n, 0, kw, kv, nk, "", jv_undef());
    if (EQ(m, ml, "strip")) *r = jj_str_strip(c, s, &a0, true, true);
    else if (EQ(m, ml, "lstrip")) *r = jj_str_strip(c, s, &a0, true, false);
    else if (EQ(m, ml, "rstrip")) *r = jj_str_strip(c, s, &a0, false, true);
    else if (EQ(m, ml, "split") || EQ(m, ml, "rsplit")) {
        struct jv sep = arg_or(a, n, 0, kw, kv, nk, "sep", jv_none());
        struct jv mx = arg_or(a, n, 1, kw, kv, nk, "maxsplit", jv_int(-1));
        if (mx.k != JV_INT) jj_fail_here(c, HMOE_ERR_FORMAT, "split(): maxsplit must be an integer");
        *r = EQ(m, ml, "split") ? str_split(c, s, sep, mx.i) : str_rsplit(c, s, sep, mx.i);
    } else if (EQ(m, ml, "startswith") || EQ(m, ml, "endswith")) *r = jv_bool(affix_match(c, s, a0, m[0] == 's'));
    else if (EQ(m, ml, "replace")) {
        struct jv cnt = arg_or(a, n, 2, kw, kv, nk, "count", jv_int(-1));
        *r = str_replace(c, s, a0, arg_or(a, n, 1, kw, kv, nk, "new", jv_undef()), cnt.k == JV_INT ? cnt.i : -1);
    } else if (EQ(m, ml, "upper")) *r = map_case(c, s, 0);
    else if (EQ(m, ml, "lower")) *r = map_case(c, s, 1);
    else if (EQ(m, ml, "title")) *r = map_case(c, s, 2);
    else if (EQ(m, ml, "capitalize")) *r = map_case(c, s, 3);
    else if (EQ(m, ml, "find") || EQ(m, ml, "rfind") || EQ(m, ml, "index") || EQ(m, ml, "count")) {
        need_str(c, a0, "the argument");
        if (EQ(m, ml, "count")) {
            int64_t k = 0;
            if (a0.n == 0) k = (int64_t)jj_utf8_len(s.s, s.n) + 1;
            else for (const char *h = s.s; (h = find_bytes(h, (size_t)(s.s + s.n - h), a0.s, a0.n)); h += a0.n) k++;
            *r = jv_int(k);
            return true;
        }
        const char *h = NULL;
        if (m[0] == 'r') {
            for (size_t i = s.n + 1; i-- > 0;)
                if (i + a0.n <= s.n && memcmp(s.s + i, a0.s, a0.n) == 0) { h = s.s + i; break; }
        } else h = find_bytes(s.s, s.n, a0.s, a0.n);
        if (!h && m[0] == 'i') jj_fail_here(c, HMOE_ERR_FORMAT, "index(): substring not found");
        *r = jv_int(h ? (int64_t)jj_utf8_len(s.s, (size_t)(h - s.s)) : -1);
    } else if (EQ(m, ml, "join")) {
        struct jj_list *l = jj_iter_list(c, a0);
        struct hmoe_strbuf b = {0};
        for (size_t i = 0; i < l->n; i++) {
            if (l->v[i].k != JV_STR) { free(b.s); jj_fail_here(c, HMOE_ERR_FORMAT, "join(): item %zu is a %s, not a string", i, jv_kind_name(l->v[i])); }
            if (i) hmoe_strbuf_addn(&b, s.s, s.n);
            hmoe_strbuf_addn(&b, l->v[i].s, l->v[i].n);
        }
        *r = jv_str_copy(c, b.s ? b.s : "", b.n);
        free(b.s);
    } else if (EQ(m, ml, "splitlines")) {
        struct jv out = jv_new_list(c, 4);
        size_t i = 0, b = 0;
        for (; i < s.n; i++)
            if (s.s[i] == '\n' || s.s[i] == '\r') {
                jv_list_push(c, out.l, jv_str(s.s + b, i - b));
                if (s.s[i] == '\r' && i + 1 < s.n && s.s[i + 1] == '\n') i++;
                b = i + 1;
            }
        if (b < s.n) jv_list_push(c, out.l, jv_str(s.s + b, s.n - b));
        *r = out;
    } else if (EQ(m, ml, "removeprefix") || EQ(m, ml, "removesuffix")) {
        need_str(c, a0, "the argument");
        bool pre = m[6] == 'p';
        *r = affix_match(c, s, a0, pre) ? (pre ? jv_str(s.s + a0.n, s.n - a0.n) : jv_str(s.s, s.n - a0.n)) : s;
    } else if (EQ(m, ml, "isdigit") || EQ(m, ml, "isalpha") || EQ(m, ml, "isspace") || EQ(m, ml, "isupper") ||
               EQ(m, ml, "islower") || EQ(m, ml, "isalnum")) {
        bool ok = s.n > 0, cased = false;
        for (size_t i = 0; i < s.n && ok; i++) {
            char ch = s.s[i];
            bool lo = ch >= 'a' && ch <= 'z', up = ch >= 'A' && ch <= 'Z', dg = ch >= '0' && ch <= '9';
            size_t l;
            if (m[2] == 'd') ok = dg;
            else if (m[2] == 'a' && m[5] == 'a') ok = lo || up;
            else if (m[2] == 'a') ok = lo || up || dg;
            else if (m[2] == 's') ok = jj_is_space(s.s + i, s.n - i, &l);
            else if (m[2] == 'u') { if (lo) ok = false; cased |= up; }
            else { if (up) ok = false; cased |= lo; }
        }
        if (m[2] == 'u' || m[2] == 'l') ok = ok && cased;
        *r = jv_bool(ok);
    } else return false;
    return true;
}

bool jj_has_method(struct jv self, const char *name, size_t len) {
    static const char *const str_m[] = {"strip", "lstrip", "rstrip", "split", "rsplit", "startswith", "endswith", "replace",
                                        "upper", "lower", "title", "capitalize", "find", "rfind", "index", "count", "join",
                                        "splitlines", "removeprefix", "removesuffix", "isdigit", "isalpha", "isspace",
                                        "isupper", "islower", "isalnum", NULL};
    static const char *const dict_m[] = {"items", "keys", "values", "get", NULL};
    static const char *const list_m[] = {"index", "count", "append", "pop", "extend", "insert", NULL};
    const char *const *set = self.k == JV_STR ? str_m : self.k == JV_DICT || self.k == JV_NS ? dict_m
                           : self.k == JV_LIST ? list_m : NULL;
    for (; set && *set; set++)
        if (strlen(*set) == len && memcmp(*set, name, len) == 0) return true;
    return false;
}

bool jj_call_method(struct jj_ctx *c, struct jv self, const char *m, size_t ml, struct jv *a, size_t n,
                    const struct jn_kw *kw, struct jv *kv, size_t nk, struct jv *r) {
    if (self.k == JV_STR) return str_method(c, self, m, ml, a, n, kw, kv, nk, r);
    if (self.k == JV_DICT || self.k == JV_NS) {
        struct jj_dict *d = self.d;
        if (EQ(m, ml, "items") || EQ(m, ml, "keys") || EQ(m, ml, "values")) {
            struct jv out = jv_new_list(c, d->n);
            for (size_t i = 0; i < d->n; i++) {
                if (m[0] == 'k') out.l->v[i] = d->key[i];
                else if (m[0] == 'v') out.l->v[i] = d->val[i];
                else {
                    struct jv pair = jv_new_tuple(c, 2);
                    pair.l->v[0] = d->key[i];
                    pair.l->v[1] = d->val[i];
                    pair.l->n = 2;
                    out.l->v[i] = pair;
                }
            }
            out.l->n = d->n;
            *r = out;
            return true;
        }
        if (EQ(m, ml, "get")) {
            const struct jv *v = jv_dict_get_v(d, arg_or(a, n, 0, kw, kv, nk, "key", jv_undef()));
            *r = v ? *v : arg_or(a, n, 1, kw, kv, nk, "default", jv_none());
            return true;
        }
        return false;
    }
    if (self.k == JV_LIST) {
        if (EQ(m, ml, "index") || EQ(m, ml, "count")) {
            struct jv x = arg_or(a, n, 0, kw, kv, nk, "", jv_undef());
            int64_t k = 0;
            for (size_t i = 0; i < self.l->n; i++)
                if (jv_equal(self.l->v[i], x)) {
                    if (m[0] == 'i') { *r = jv_int((int64_t)i); return true; }
                    k++;
                }
            if (m[0] == 'i') jj_fail_here(c, HMOE_ERR_FORMAT, "list.index(x): x not in list");
            *r = jv_int(k);
            return true;
        }
        struct jj_list *l = self.l;
        if (EQ(m, ml, "append")) {
            if (n != 1) jj_fail_here(c, HMOE_ERR_FORMAT, "list.append() takes exactly one argument");
            jv_list_push(c, l, a[0]);
            *r = jv_none();
            return true;
        }
        if (EQ(m, ml, "extend")) {
            struct jj_list *src = jj_iter_list(c, arg_or(a, n, 0, kw, kv, nk, "", jv_undef()));
            size_t cnt = src->n; /* a list extended by itself grows by its length once */
            for (size_t i = 0; i < cnt; i++) jv_list_push(c, l, src->v[i]);
            *r = jv_none();
            return true;
        }
        if (EQ(m, ml, "pop") || EQ(m, ml, "insert")) {
            struct jv at = arg_or(a, n, 0, kw, kv, nk, "", m[0] == 'p' ? jv_int(-1) : jv_undef());
            if (at.k != JV_INT) jj_fail_here(c, HMOE_ERR_FORMAT, "list.%.*s(): the index must be an integer", (int)ml, m);
            int64_t i = at.i < 0 ? at.i + (int64_t)l->n : at.i;
            if (m[0] == 'p') {
                if (i < 0 || (size_t)i >= l->n) jj_fail_here(c, HMOE_ERR_FORMAT, "pop from an empty list or index out of range");
                *r = l->v[i];
                memmove(l->v + i, l->v + i + 1, (l->n - (size_t)i - 1) * sizeof *l->v);
                l->n--;
                return true;
            }
            if (n != 2) jj_fail_here(c, HMOE_ERR_FORMAT, "list.insert() takes an index and a value");
            i = i < 0 ? 0 : (size_t)i > l->n ? (int64_t)l->n : i;
            jv_list_push(c, l, a[1]);
            memmove(l->v + i + 1, l->v + i, (l->n - (size_t)i - 1) * sizeof *l->v);
            l->v[i] = a[1];
            *r = jv_none();
            return true;
        }
        return false;
    }
    if (self.k == JV_LOOP && EQ(m, ml, "cycle")) {
        if (n == 0) jj_fail_here(c, HMOE_ERR_FORMAT, "loop.cycle() needs at least one argument");
        *r = a[self.loop->index0 % n];
        return true;
    }
    return false;
}

/* ---- globals -------------------------------------------------------------------------- */
enum { G_RANGE, G_NAMESPACE, G_DICT, G_RAISE, G_STRFTIME, G_COUNT };
static const char *const global_names[G_COUNT] = {"range", "namespace", "dict", "raise_exception", "strftime_now"};

int jj_global_id(const char *name, size_t len) {
    for (int i = 0; i < G_COUNT; i++)
        if (strlen(global_names[i]) == len && memcmp(global_names[i], name, len) == 0) return i;
    return -1;
}

struct jv jj_call_global(struct jj_ctx *c, int id, struct jv *a, size_t n, const struct jn_kw *kw, struct jv *kv, size_t nk) {
    switch (id) {
    case G_RANGE: {
        int64_t v[3] = {0, 0, 1};
        if (n < 1 || n > 3) jj_fail_here(c, HMOE_ERR_FORMAT, "range() takes 1 to 3 arguments");
        for (size_t i = 0; i < n; i++) {
            if (a[i].k != JV_INT && a[i].k != JV_BOOL) jj_fail_here(c, HMOE_ERR_FORMAT, "range() arguments must be integers");
            v[n == 1 ? 1 : i] = a[i].k == JV_INT ? a[i].i : a[i].b;
        }
        if (v[2] == 0) jj_fail_here(c, HMOE_ERR_FORMAT, "range() step must not be zero");
        double count = v[2] > 0 ? ((double)v[1] - (double)v[0]) / (double)v[2] : ((double)v[0] - (double)v[1]) / (double)-v[2];
        if (count > (double)(c->lim.max_iterations - c->iterations))
            jj_fail_here(c, HMOE_ERR_RANGE, "range() of more items than the limit of %llu loop iterations", (unsigned long long)c->lim.max_iterations);
        struct jv out = jv_new_list(c, count > 0 ? (size_t)count + 1 : 0);
        for (int64_t x = v[0]; v[2] > 0 ? x < v[1] : x > v[1]; x += v[2]) out.l->v[out.l->n++] = jv_int(x);
        return out;
    }
    case G_NAMESPACE: case G_DICT: {
        struct jv d = jv_new_dict(c, id == G_NAMESPACE ? JV_NS : JV_DICT, n + nk);
        for (size_t i = 0; i < n; i++) {
            if (a[i].k != JV_DICT && a[i].k != JV_NS) jj_fail_here(c, HMOE_ERR_FORMAT, "%s() takes a mapping or keywords",
                                                                   global_names[id]);
            for (size_t k = 0; k < a[i].d->n; k++) jv_dict_set(c, d.d, a[i].d->key[k], a[i].d->val[k]);
        }
        for (size_t k = 0; k < nk; k++) jv_dict_set(c, d.d, jv_str(kw[k].name, kw[k].len), kv[k]);
        return d;
    }
    case G_RAISE: {
        struct jv msg = n ? jv_stringify(c, a[0]) : jv_str("", 0);
        jj_fail_here(c, HMOE_ERR_ARG, "the template raised an error: %.*s", (int)(msg.n < 300 ? msg.n : 300), msg.s);
    }
    case G_STRFTIME: {
        if (n < 1 || a[0].k != JV_STR) jj_fail_here(c, HMOE_ERR_FORMAT, "strftime_now(format) needs a format string");
        char fmt[256], out[512];
        if (a[0].n >= sizeof fmt) jj_fail_here(c, HMOE_ERR_FORMAT, "strftime_now(): format too long");
        memcpy(fmt, a[0].s, a[0].n);
        fmt[a[0].n] = 0;
        struct tm tm;
        time_t now = c->now;
        if (!localtime_r(&now, &tm)) jj_fail_here(c, HMOE_ERR_INTERNAL, "strftime_now(): no local time");
        size_t k = fmt[0] ? strftime(out, sizeof out, fmt, &tm) : 0;
        return jv_str_copy(c, out, k);
    }
    default: jj_fail_here(c, HMOE_ERR_INTERNAL, "unknown global %d", id);
    }
}
