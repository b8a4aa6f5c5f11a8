/* jj_eval.c — execute statements and evaluate expressions with Jinja2's scoping: a for
 * body gets a fresh scope each iteration (so `set` inside a loop does not leak out, which
 * is why templates use namespace()), if-blocks share their scope, a macro runs in a scope
 * whose parent is where it was defined. Every step counts against the render limits.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "text/jinja/jinja_impl.h"

enum flow { FLOW_NEXT, FLOW_BREAK, FLOW_CONTINUE };

struct jj_frame *jj_frame_new(struct jj_ctx *c, struct jj_frame *parent) {
    struct jj_frame *f = jj_alloc(c, sizeof *f);
    memset(f, 0, sizeof *f);
    f->parent = parent;
    f->vars = f->inline_vars;
    f->cap = HMOE_ARRAY_LEN(f->inline_vars);
    return f;
}

void jj_frame_set(struct jj_ctx *c, struct jj_frame *f, const char *name, size_t len, struct jv v) {
    for (size_t i = 0; i < f->n; i++)
        if (f->vars[i].len == len && memcmp(f->vars[i].name, name, len) == 0) { f->vars[i].val = v; return; }
    if (f->n == f->cap) {
        size_t cap = f->cap * 2;
        struct jj_var *nv = jj_alloc(c, cap * sizeof *nv);
        memcpy(nv, f->vars, f->n * sizeof *nv);
        f->vars = nv;
        f->cap = cap;
    }
    f->vars[f->n++] = (struct jj_var){name, (uint32_t)len, v};
}

struct jj_frame *jj_cur_frame(struct jj_ctx *c) { return c->frame; }

static struct jv lookup(struct jj_ctx *c, struct jj_frame *f, const char *name, size_t len) {
    for (; f; f = f->parent)
        for (size_t i = f->n; i-- > 0;)
            if (f->vars[i].len == len && memcmp(f->vars[i].name, name, len) == 0) return f->vars[i].val;
    int g = jj_global_id(name, len);
    if (g >= 0) return (struct jv){.k = JV_FUNC, .fn = g};
    (void)c;
    return jv_undef();
}

static void at(struct jj_ctx *c, const struct jn *n) { c->line = n->line; c->col = n->col; }

void jj_count_iteration(struct jj_ctx *c) {
    if (++c->iterations > c->lim.max_iterations)
        jj_fail_here(c, HMOE_ERR_RANGE, "more than %llu loop iterations (limit for untrusted templates)",
                     (unsigned long long)c->lim.max_iterations);
    if ((c->iterations & 1023) == 0 && hmoe_time_s() > c->deadline)
        jj_fail_here(c, HMOE_ERR_RANGE, "rendering took longer than %.1f s (limit for untrusted templates)",
                     c->lim.max_seconds);
}

struct jj_list *jj_iter_list(struct jj_ctx *c, struct jv v) {
    switch (v.k) {
    case JV_LIST: return v.l;
    case JV_UNDEF: return jv_new_list(c, 0).l;
    case JV_DICT: case JV_NS: {
        struct jv l = jv_new_list(c, v.d->n);
        for (size_t i = 0; i < v.d->n; i++) l.l->v[l.l->n++] = v.d->key[i];
        return l.l;
    }
    case JV_STR: {
        struct jv l = jv_new_list(c, v.n);
        for (size_t i = 0; i < v.n;) {
            size_t e = jj_utf8_offset(v.s + i, v.n - i, 1);
            l.l->v[l.l->n++] = jv_str(v.s + i, e);
            i += e;
        }
        return l.l;
    }
    default: jj_fail_here(c, HMOE_ERR_FORMAT, "'%s' object is not iterable", jv_kind_name(v));
    }
}

/* ---- output --------------------------------------------------------------------------- */
static void emit(struct jj_ctx *c, const char *s, size_t n) {
    hmoe_strbuf_addn(&c->out, s, n);
    if (c->out.oom) jj_fail_here(c, HMOE_ERR_NOMEM, "out of memory writing the template output");
    if (c->out.n > c->lim.max_output)
        jj_fail_here(c, HMOE_ERR_RANGE, "the output is larger than %zu bytes (limit for untrusted templates)",
                     c->lim.max_output);
}

static void emit_value(struct jj_ctx *c, struct jv v) {
    if (v.k == JV_STR) { emit(c, v.s, v.n); return; }
    struct hmoe_strbuf b = {0};
    jv_to_str(c, &b, v);
    if (b.oom) { free(b.s); jj_fail_here(c, HMOE_ERR_NOMEM, "out of memory"); }
    if (b.n) emit(c, b.s, b.n);
    free(b.s);
}

/* A macro or `set` block renders into its own buffer; the outer ones wait on a stack in
 * the arena so that an error at any depth can free them all (jj_api.c). */
void jj_push_output(struct jj_ctx *c) {
    struct jj_saved_out *so = jj_alloc(c, sizeof *so);
    so->buf = c->out;
    so->prev = c->saved;
    c->saved = so;
    c->out = (struct hmoe_strbuf){0};
}

struct jv jj_pop_output(struct jj_ctx *c) {
    struct jv r = jv_str_copy(c, c->out.s ? c->out.s : "", c->out.n);
    free(c->out.s);
    c->out = c->saved->buf;
    c->saved = c->saved->prev;
    return r;
}

/* ---- macros --------------------------------------------------------------------------- */
static enum flow exec(struct jj_ctx *c, const struct jn *s, struct jj_frame *f);

static struct jv call_macro(struct jj_ctx *c, const struct jj_macro *m, struct jv *args, size_t n, const struct jn_kw *kw,
                            struct jv *kw_vals, size_t n_kw) {
    const struct jn *def = m->node;
    if (n > def->n_kw) jj_fail_here(c, HMOE_ERR_FORMAT, "macro '%.*s' takes not more than %u argument(s)",
                                    (int)def->name_len, def->name, def->n_kw);
    struct jj_frame *f = jj_frame_new(c, m->closure);
    for (size_t i = 0; i < n_kw; i++) {
        bool found = false;
        for (size_t p = 0; p < def->n_kw; p++)
            found |= def->kw[p].len == kw[i].len && memcmp(def->kw[p].name, kw[i].name, kw[i].len) == 0;
        if (!found) jj_fail_here(c, HMOE_ERR_FORMAT, "macro '%.*s' has no parameter '%.*s'", (int)def->name_len,
                                 def->name, (int)kw[i].len, kw[i].name);
    }
    struct jj_frame *saved = c->frame;
    c->frame = f;
    for (size_t p = 0; p < def->n_kw; p++) {
        struct jv v = jv_undef();
        bool set = false;
        if (p < n) v = args[p], set = true;
        for (size_t i = 0; i < n_kw && !set; i++)
            if (def->kw[p].len == kw[i].len && memcmp(def->kw[p].name, kw[i].name, kw[i].len) == 0) v = kw_vals[i], set = true;
        if (!set && def->kw[p].val) v = jj_eval(c, def->kw[p].val);
        jj_frame_set(c, f, def->kw[p].name, def->kw[p].len, v);
    }
    jj_push_output(c);
    if (++c->depth > c->lim.max_depth)
        jj_fail_here(c, HMOE_ERR_RANGE, "macro calls nested deeper than %u (limit for untrusted templates)", c->lim.max_depth);
    if (hmoe_time_s() > c->deadline)
        jj_fail_here(c, HMOE_ERR_RANGE, "rendering took longer than %.1f s (limit for untrusted templates)", c->lim.max_seconds);
    exec(c, def->c, f);
    c->depth--;
    struct jv r = jj_pop_output(c);
    c->frame = saved;
    return r;
}

struct jv jj_call_value(struct jj_ctx *c, struct jv fn, struct jv *args, size_t n, const struct jn_kw *kw,
                        struct jv *kw_vals, size_t n_kw) {
    struct jv r;
    switch (fn.k) {
    case JV_MACRO: return call_macro(c, fn.macro, args, n, kw, kw_vals, n_kw);
    case JV_FUNC: return jj_call_global(c, fn.fn, args, n, kw, kw_vals, n_kw);
    case JV_METHOD:
        if (jj_call_method(c, fn.bound->self, fn.bound->name, fn.bound->name_len, args, n, kw, kw_vals, n_kw, &r)) return r;
        break;
    case JV_UNDEF: jj_fail_here(c, HMOE_ERR_FORMAT, "call of an undefined value (no such function or macro)");
    default: break;
    }
    jj_fail_here(c, HMOE_ERR_FORMAT, "'%s' object is not callable", jv_kind_name(fn));
}

/* ---- attribute / item access ---------------------------------------------------------- */
static struct jv loop_attr(struct jj_ctx *c, const struct jj_loop *L, const char *name, size_t len) {
#define IS(w) (len == sizeof(w) - 1 && memcmp(name, w, len) == 0)
    size_t n = L->items->n, i = L->index0;
    if (IS("index")) return jv_int((int64_t)i + 1);
    if (IS("index0")) return jv_int((int64_t)i);
    if (IS("revindex")) return jv_int((int64_t)(n - i));
    if (IS("revindex0")) return jv_int((int64_t)(n - i - 1));
    if (IS("first")) return jv_bool(i == 0);
    if (IS("last")) return jv_bool(i + 1 == n);
    if (IS("length")) return jv_int((int64_t)n);
    if (IS("previtem")) return i > 0 ? L->items->v[i - 1] : jv_undef();
    if (IS("nextitem")) return i + 1 < n ? L->items->v[i + 1] : jv_undef();
    if (IS("depth")) return jv_int(1);
    if (IS("depth0")) return jv_int(0);
    if (IS("cycle")) {
        struct jj_bound *b = jj_alloc(c, sizeof *b);
        b->self = (struct jv){.k = JV_LOOP, .loop = (struct jj_loop *)L};
        b->name = "cycle";
        b->name_len = 5;
        return (struct jv){.k = JV_METHOD, .bound = b};
    }
#undef IS
    return jv_undef();
}

static struct jv get_attr(struct jj_ctx *c, struct jv obj, const char *name, size_t len) {
    switch (obj.k) {
    case JV_UNDEF: jj_fail_here(c, HMOE_ERR_FORMAT, "'%.*s' of an undefined value (the object before '.' is undefined)",
                                (int)len, name);
    case JV_DICT: case JV_NS: {
        const struct jv *v = jv_dict_get(obj.d, name, len);
        if (v) return *v;
        break;
    }
    case JV_LOOP: return loop_attr(c, obj.loop, name, len);
    default: break;
    }
    if (jj_has_method(obj, name, len)) {
        struct jj_bound *b = jj_alloc(c, sizeof *b);
        b->self = obj;
        b->name = name;
        b->name_len = (uint32_t)len;
        return (struct jv){.k = JV_METHOD, .bound = b};
    }
    return jv_undef();
}

static int64_t norm_index(int64_t i, size_t n) { return i < 0 ? i + (int64_t)n : i; }

static struct jv get_item(struct jj_ctx *c, struct jv obj, struct jv key) {
    switch (obj.k) {
    case JV_UNDEF: jj_fail_here(c, HMOE_ERR_FORMAT, "subscript of an undefined value");
    case JV_DICT: case JV_NS: {
        const struct jv *v = jv_dict_get_v(obj.d, key);
        return v ? *v : jv_undef();
    }
    case JV_LIST:
        if (key.k == JV_INT || key.k == JV_BOOL) {
            int64_t i = norm_index(key.k == JV_INT ? key.i : key.b, obj.l->n);
            return i >= 0 && (size_t)i < obj.l->n ? obj.l->v[i] : jv_undef();
        }
        break;
    case JV_STR:
        if (key.k == JV_INT) {
            size_t n = jj_utf8_len(obj.s, obj.n);
            int64_t i = norm_index(key.i, n);
            if (i < 0 || (size_t)i >= n) return jv_undef();
            size_t b = jj_utf8_offset(obj.s, obj.n, (size_t)i);
            return jv_str(obj.s + b, jj_utf8_offset(obj.s + b, obj.n - b, 1));
        }
        break;
    case JV_LOOP: break;
    default: break;
    }
    if (key.k == JV_STR) return get_attr(c, obj, key.s, key.n);
    return jv_undef();
}

/* Python slice bounds for a sequence of n items. */
static void slice_bounds(struct jj_ctx *c, struct jv a, struct jv b, struct jv st, size_t n, int64_t *start, int64_t *stop,
                         int64_t *step) {
    *step = st.k == JV_INT ? st.i : 1;
    if (st.k != JV_INT && st.k != JV_NONE && st.k != JV_UNDEF) jj_fail_here(c, HMOE_ERR_FORMAT, "slice step must be an integer");
    if (*step == 0) jj_fail_here(c, HMOE_ERR_FORMAT, "slice step cannot be zero");
    int64_t len = (int64_t)n;
    int64_t lo = *step < 0 ? -1 : 0, hi = *step < 0 ? len - 1 : len;
    for (int k = 0; k < 2; k++) {
        struct jv v = k ? b : a;
        int64_t *out = k ? stop : start;
        if (v.k == JV_INT) {
            int64_t x = v.i < 0 ? v.i + len : v.i;
            *out = x < lo ? lo : x > hi ? hi : x;
        } else if (v.k == JV_NONE || v.k == JV_UNDEF) {
            *out = (*step < 0) == (k == 0) ? hi : lo;
        } else jj_fail_here(c, HMOE_ERR_FORMAT, "slice indices must be integers or none");
    }
}

static struct jv do_slice(struct jj_ctx *c, struct jv obj, struct jv a, struct jv b, struct jv st) {
    int64_t start, stop, step;
    if (obj.k == JV_LIST) {
        slice_bounds(c, a, b, st, obj.l->n, &start, &stop, &step);
        struct jv r = jv_new_list(c, 0);
        for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) jv_list_push(c, r.l, obj.l->v[i]);
        return r;
    }
    if (obj.k == JV_STR) {
        size_t n = jj_utf8_len(obj.s, obj.n);
        slice_bounds(c, a, b, st, n, &start, &stop, &step);
        if (step == 1) {
            if (stop <= start) return jv_str("", 0);
            size_t bs = jj_utf8_offset(obj.s, obj.n, (size_t)start);
            size_t be = bs + jj_utf8_offset(obj.s + bs, obj.n - bs, (size_t)(stop - start));
            return jv_str(obj.s + bs, be - bs);
        }
        struct hmoe_strbuf out = {0};
        for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
            size_t bs = jj_utf8_offset(obj.s, obj.n, (size_t)i);
            hmoe_strbuf_addn(&out, obj.s + bs, jj_utf8_offset(obj.s + bs, obj.n - bs, 1));
        }
        struct jv r = jv_str_copy(c, out.s ? out.s : "", out.n);
        free(out.s);
        return r;
    }
    if (obj.k == JV_UNDEF) return jv_undef();
    jj_fail_here(c, HMOE_ERR_FORMAT, "'%s' object cannot be sliced", jv_kind_name(obj));
}

/* ---- operators ------------------------------------------------------------------------ */
static bool num(struct jv v) { return v.k == JV_INT || v.k == JV_FLOAT || v.k == JV_BOOL; }
static double fnum(struct jv v) { return v.k == JV_FLOAT ? v.f : v.k == JV_INT ? (double)v.i : (double)v.b; }
static int64_t inum(struct jv v) { return v.k == JV_INT ? v.i : v.k == JV_BOOL ? (int64_t)v.b : 0; }

_Noreturn static void type_error(struct jj_ctx *c, const char *op, struct jv a, struct jv b) {
    jj_fail_here(c, HMOE_ERR_FORMAT, "unsupported operand types for %s: '%s' and '%s'", op, jv_kind_name(a), jv_kind_name(b));
}

static struct jv concat_lists(struct jj_ctx *c, struct jv a, struct jv b) {
    struct jv r = jv_new_list(c, a.l->n + b.l->n);
    memcpy(r.l->v, a.l->v, a.l->n * sizeof *r.l->v);
    if (b.l->n) memcpy(r.l->v + a.l->n, b.l->v, b.l->n * sizeof *r.l->v);
    r.l->n = a.l->n + b.l->n;
    return r;
}

static struct jv repeat(struct jj_ctx *c, struct jv s, int64_t times) {
    if (times <= 0) return s.k == JV_STR ? jv_str("", 0) : jv_new_list(c, 0);
    size_t unit = s.k == JV_STR ? s.n : s.l->n;
    if (unit && (uint64_t)times > (c->lim.max_output + 1) / unit)
        jj_fail_here(c, HMOE_ERR_RANGE, "repetition result too large");
    if (s.k == JV_STR) {
        char *p = jj_alloc(c, unit * (size_t)times + 1);
        for (int64_t i = 0; i < times; i++) memcpy(p + unit * (size_t)i, s.s, unit);
        p[unit * (size_t)times] = 0;
        return jv_str(p, unit * (size_t)times);
    }
    struct jv r = jv_new_list(c, unit * (size_t)times);
    for (int64_t i = 0; i < times; i++) memcpy(r.l->v + unit * (size_t)i, s.l->v, unit * sizeof *r.l->v);
    r.l->n = unit * (size_t)times;
    return r;
}

static struct jv binop(struct jj_ctx *c, uint8_t op, struct jv a, struct jv b) {
    static const char *const names[] = {"+", "-", "*", "/", "//", "%", "**", "~"};
    if (op == OP_CONCAT) {
        struct hmoe_strbuf s = {0};
        jv_to_str(c, &s, a);
        jv_to_str(c, &s, b);
        struct jv r = jv_str_copy(c, s.s ? s.s : "", s.n);
        free(s.s);
        return r;
    }
    if (num(a) && num(b)) {
        bool ints = a.k != JV_FLOAT && b.k != JV_FLOAT;
        int64_t x = inum(a), y = inum(b), r;
        double fx = fnum(a), fy = fnum(b);
        switch (op) {
        case OP_ADD: if (ints && !__builtin_add_overflow(x, y, &r)) return jv_int(r); return jv_float(fx + fy);
        case OP_SUB: if (ints && !__builtin_sub_overflow(x, y, &r)) return jv_int(r); return jv_float(fx - fy);
        case OP_MUL: if (ints && !__builtin_mul_overflow(x, y, &r)) return jv_int(r); return jv_float(fx * fy);
        case OP_DIV:
            if (fy == 0) jj_fail_here(c, HMOE_ERR_FORMAT, "division by zero");
            return jv_float(fx / fy);
        case OP_FLOORDIV: case OP_MOD:
            if (fy == 0) jj_fail_here(c, HMOE_ERR_FORMAT, "integer division or modulo by zero");
            if (ints && !(x == INT64_MIN && y == -1)) {
                int64_t q = x / y, m = x % y;
                if (m != 0 && ((m < 0) != (y < 0))) { q--; m += y; }
                return jv_int(op == OP_FLOORDIV ? q : m);
            }
            if (op == OP_FLOORDIV) return jv_float(floor(fx / fy));
            { double m = fmod(fx, fy); if (m != 0 && ((m < 0) != (fy < 0))) m += fy; return jv_float(m); }
        case OP_POW:
            if (ints && y >= 0) {
                int64_t acc = 1;
                bool ovf = false;
                for (int64_t i = 0; i < y && !ovf; i++) ovf = __builtin_mul_overflow(acc, x, &acc) || i > 64;
                if (!ovf) return jv_int(acc);
            }
            return jv_float(pow(fx, fy));
        default: break;
        }
    }
    if (op == OP_ADD && a.k == JV_STR && b.k == JV_STR) {
        char *p = jj_alloc(c, (size_t)a.n + b.n + 1);
        memcpy(p, a.s, a.n);
        memcpy(p + a.n, b.s, b.n);
        p[a.n + b.n] = 0;
        return jv_str(p, (size_t)a.n + b.n);
    }
    if (op == OP_ADD && a.k == JV_LIST && b.k == JV_LIST) return concat_lists(c, a, b);
    if (op == OP_MUL && (a.k == JV_STR || a.k == JV_LIST) && (b.k == JV_INT || b.k == JV_BOOL)) return repeat(c, a, inum(b));
    if (op == OP_MUL && (b.k == JV_STR || b.k == JV_LIST) && (a.k == JV_INT || a.k == JV_BOOL)) return repeat(c, b, inum(a));
    type_error(c, names[op], a, b);
}

static int compare_order(struct jj_ctx *c, struct jv a, struct jv b, const char *op) {
    if (num(a) && num(b)) {
        if (a.k != JV_FLOAT && b.k != JV_FLOAT) return inum(a) < inum(b) ? -1 : inum(a) > inum(b);
        return fnum(a) < fnum(b) ? -1 : fnum(a) > fnum(b);
    }
    if (a.k == JV_STR && b.k == JV_STR) {
        int r = memcmp(a.s, b.s, a.n < b.n ? a.n : b.n);
        return r ? (r < 0 ? -1 : 1) : (a.n < b.n ? -1 : a.n > b.n);
    }
    if (a.k == JV_LIST && b.k == JV_LIST) {
        for (size_t i = 0; i < a.l->n && i < b.l->n; i++) {
            if (jv_equal(a.l->v[i], b.l->v[i])) continue;
            return compare_order(c, a.l->v[i], b.l->v[i], op);
        }
        return a.l->n < b.l->n ? -1 : a.l->n > b.l->n;
    }
    jj_fail_here(c, HMOE_ERR_FORMAT, "'%s' not supported between '%s' and '%s'", op, jv_kind_name(a), jv_kind_name(b));
}

static bool contains(struct jj_ctx *c, struct jv hay, struct jv needle) {
    switch (hay.k) {
    case JV_STR:
        if (needle.k != JV_STR)
            jj_fail_here(c, HMOE_ERR_FORMAT, "'in <string>' requires a string as left operand, not '%s'", jv_kind_name(needle));
        if (needle.n == 0) return true;
        for (size_t i = 0; i + needle.n <= hay.n; i++)
            if (hay.s[i] == needle.s[0] && memcmp(hay.s + i, needle.s, needle.n) == 0) return true;
        return false;
    case JV_LIST:
        for (size_t i = 0; i < hay.l->n; i++)
            if (jv_equal(hay.l->v[i], needle)) return true;
        return false;
    case JV_DICT: case JV_NS: return jv_dict_get_v(hay.d, needle) != NULL;
    case JV_UNDEF: return false;
    default: jj_fail_here(c, HMOE_ERR_FORMAT, "argument of type '%s' is not iterable", jv_kind_name(hay));
    }
}

static bool cmp(struct jj_ctx *c, uint8_t op, struct jv a, struct jv b) {
    switch (op) {
    case OP_EQ: return jv_equal(a, b);
    case OP_NE: return !jv_equal(a, b);
    case OP_LT: return compare_order(c, a, b, "<") < 0;
    case OP_LE: return compare_order(c, a, b, "<=") <= 0;
    case OP_GT: return compare_order(c, a, b, ">") > 0;
    case OP_GE: return compare_order(c, a, b, ">=") >= 0;
    case OP_IN: return contains(c, b, a);
    default: return !contains(c, b, a);
    }
}

/* ---- expressions ---------------------------------------------------------------------- */
#define MAX_ARGS 16

static size_t eval_args(struct jj_ctx *c, const struct jn *n, struct jv *args, struct jv *kw_vals) {
    if (n->n_kids > MAX_ARGS || n->n_kw > MAX_ARGS) jj_fail_here(c, HMOE_ERR_FORMAT, "more than %d arguments", MAX_ARGS);
    for (uint32_t i = 0; i < n->n_kids; i++) args[i] = jj_eval(c, n->kids[i]);
    for (uint32_t i = 0; i < n->n_kw; i++) kw_vals[i] = jj_eval(c, n->kw[i].val);
    return n->n_kids;
}

static struct jv eval_call(struct jj_ctx *c, const struct jn *n) {
    struct jv args[MAX_ARGS], kw_vals[MAX_ARGS], r;
    if (n->a->k == JN_ATTR) {
        struct jv self = jj_eval(c, n->a->a);
        size_t na = eval_args(c, n, args, kw_vals);
        at(c, n);
        if (self.k != JV_DICT && self.k != JV_NS && self.k != JV_LOOP &&
            jj_call_method(c, self, n->a->name, n->a->name_len, args, na, n->kw, kw_vals, n->n_kw, &r))
            return r;
        struct jv fn = get_attr(c, self, n->a->name, n->a->name_len);
        if (fn.k == JV_UNDEF && (self.k == JV_DICT || self.k == JV_NS) &&
            jj_call_method(c, self, n->a->name, n->a->name_len, args, na, n->kw, kw_vals, n->n_kw, &r))
            return r;
        if (fn.k == JV_UNDEF)
            jj_fail_here(c, HMOE_ERR_FORMAT, "'%s' object has no attribute '%.*s'", jv_kind_name(self),
                         (int)n->a->name_len, n->a->name);
        return jj_call_value(c, fn, args, na, n->kw, kw_vals, n->n_kw);
    }
    struct jv fn = jj_eval(c, n->a);
    size_t na = eval_args(c, n, args, kw_vals);
    at(c, n);
    if (fn.k == JV_UNDEF && n->a->k == JN_NAME)
        jj_fail_here(c, HMOE_ERR_FORMAT, "'%.*s' is undefined (no such function or macro)", (int)n->a->name_len, n->a->name);
    return jj_call_value(c, fn, args, na, n->kw, kw_vals, n->n_kw);
}

struct jv jj_eval(struct jj_ctx *c, const struct jn *n) {
    if (++c->depth > c->lim.max_depth) {
        at(c, n);
        jj_fail_here(c, HMOE_ERR_RANGE, "evaluation nested deeper than %u (limit for untrusted templates)", c->lim.max_depth);
    }
    struct jv r, a, b;
    switch (n->k) {
    case JN_LIT: r = n->lit; break;
    case JN_NAME: r = lookup(c, c->frame, n->name, n->name_len); break;
    case JN_ATTR: a = jj_eval(c, n->a); at(c, n); r = get_attr(c, a, n->name, n->name_len); break;
    case JN_INDEX: a = jj_eval(c, n->a); b = jj_eval(c, n->b); at(c, n); r = get_item(c, a, b); break;
    case JN_SLICE: {
        a = jj_eval(c, n->a);
        struct jv lo = n->b ? jj_eval(c, n->b) : jv_none(), hi = n->c ? jj_eval(c, n->c) : jv_none(),
                  st = n->d ? jj_eval(c, n->d) : jv_none();
        at(c, n);
        r = do_slice(c, a, lo, hi, st);
        break;
    }
    case JN_CALL: r = eval_call(c, n); break;
    case JN_FILTER: {
        struct jv args[MAX_ARGS], kw_vals[MAX_ARGS];
        a = jj_eval(c, n->a);
        size_t na = eval_args(c, n, args, kw_vals);
        at(c, n);
        r = jj_apply_filter(c, n->id, a, args, na, n->kw, kw_vals, n->n_kw);
        break;
    }
    case JN_TEST: {
        struct jv args[MAX_ARGS], kw_vals[MAX_ARGS];
        a = jj_eval(c, n->a);
        size_t na = eval_args(c, n, args, kw_vals);
        at(c, n);
        r = jv_bool(jj_apply_test(c, n->id, a, args, na) != (bool)n->op);
        break;
    }
    case JN_NEG: case JN_POS:
        a = jj_eval(c, n->a);
        at(c, n);
        if (!num(a)) jj_fail_here(c, HMOE_ERR_FORMAT, "bad operand type for unary %c: '%s'", n->k == JN_NEG ? '-' : '+',
                                  jv_kind_name(a));
        if (n->k == JN_POS) r = a.k == JV_BOOL ? jv_int(a.b) : a;
        else if (a.k == JV_FLOAT) r = jv_float(-a.f);
        else r = inum(a) == INT64_MIN ? jv_float(-(double)INT64_MIN) : jv_int(-inum(a));
        break;
    case JN_NOT: r = jv_bool(!jv_truthy(jj_eval(c, n->a))); break;
    case JN_AND: a = jj_eval(c, n->a); r = jv_truthy(a) ? jj_eval(c, n->b) : a; break;
    case JN_OR: a = jj_eval(c, n->a); r = jv_truthy(a) ? a : jj_eval(c, n->b); break;
    case JN_COND: r = jv_truthy(jj_eval(c, n->b)) ? jj_eval(c, n->a) : n->c ? jj_eval(c, n->c) : jv_undef(); break;
    case JN_BIN: a = jj_eval(c, n->a); b = jj_eval(c, n->b); at(c, n); r = binop(c, n->op, a, b); break;
    case JN_COMPARE: {
        a = jj_eval(c, n->kids[0]);
        r = jv_bool(true);
        for (uint32_t i = 1; i < n->n_kids; i++) {
            b = jj_eval(c, n->kids[i]);
            at(c, n);
            if (!cmp(c, n->cmp_ops[i - 1], a, b)) { r = jv_bool(false); break; }
            a = b;
        }
        break;
    }
    case JN_LIST: case JN_TUPLE:
        r = n->k == JN_TUPLE ? jv_new_tuple(c, n->n_kids) : jv_new_list(c, n->n_kids);
        for (uint32_t i = 0; i < n->n_kids; i++) r.l->v[r.l->n++] = jj_eval(c, n->kids[i]);
        break;
    case JN_DICT:
        r = jv_new_dict(c, JV_DICT, n->n_kids / 2);
        for (uint32_t i = 0; i + 1 < n->n_kids; i += 2) {
            a = jj_eval(c, n->kids[i]);
            jv_dict_set(c, r.d, a, jj_eval(c, n->kids[i + 1]));
        }
        break;
    default: at(c, n); jj_fail_here(c, HMOE_ERR_INTERNAL, "statement node in an expression");
    }
    c->depth--;
    return r;
}

/* ---- statements ----------------------------------------------------------------------- */
static void bind_targets(struct jj_ctx *c, const struct jn *s, struct jj_frame *f, struct jv item) {
    if (s->n_kw == 1) { jj_frame_set(c, f, s->kw[0].name, s->kw[0].len, item); return; }
    struct jj_list *l = item.k == JV_LIST ? item.l : NULL;
    if (!l && item.k == JV_STR) l = jj_iter_list(c, item);
    if (!l || l->n != s->n_kw)
        jj_fail_here(c, HMOE_ERR_FORMAT, "cannot unpack a %s into %u loop variables", jv_kind_name(item), s->n_kw);
    for (uint32_t i = 0; i < s->n_kw; i++) jj_frame_set(c, f, s->kw[i].name, s->kw[i].len, l->v[i]);
}

static void exec_for(struct jj_ctx *c, const struct jn *s, struct jj_frame *f) {
    struct jv seq = jj_eval(c, s->a);
    at(c, s);
    struct jj_list *items = jj_iter_list(c, seq);
    if (s->b) { /* `for x in xs if cond`: loop.* counts the filtered items */
        struct jv kept = jv_new_list(c, items->n);
        for (size_t i = 0; i < items->n; i++) {
            jj_count_iteration(c);
            struct jj_frame *tf = jj_frame_new(c, f);
            bind_targets(c, s, tf, items->v[i]);
            struct jj_frame *saved = c->frame;
            c->frame = tf;
            bool keep = jv_truthy(jj_eval(c, s->b));
            c->frame = saved;
            if (keep) kept.l->v[kept.l->n++] = items->v[i];
        }
        items = kept.l;
    } else if (seq.k == JV_LIST) { /* iterate a snapshot: the body may append to the list */
        struct jv snap = jv_new_list(c, items->n);
        if (items->n) memcpy(snap.l->v, items->v, items->n * sizeof *items->v);
        snap.l->n = items->n;
        items = snap.l;
    }
    struct jj_loop *L = jj_alloc(c, sizeof *L);
    L->items = items;
    struct jj_frame *bf = NULL;
    for (size_t i = 0; i < items->n; i++) {
        jj_count_iteration(c);
        L->index0 = i;
        /* A fresh scope per iteration; the last one is recycled unless a macro kept it. */
        if (!bf || bf->captured) bf = jj_frame_new(c, f);
        else {
            bf->n = 0;
            bf->vars = bf->inline_vars;
            bf->cap = HMOE_ARRAY_LEN(bf->inline_vars);
        }
        jj_frame_set(c, bf, "loop", 4, (struct jv){.k = JV_LOOP, .loop = L});
        at(c, s);
        bind_targets(c, s, bf, items->v[i]);
        enum flow fl = exec(c, s->c, bf);
        if (fl == FLOW_BREAK) break;
    }
    if (items->n == 0 && s->d) exec(c, s->d, f);
}

static enum flow exec(struct jj_ctx *c, const struct jn *s, struct jj_frame *f) {
    struct jj_frame *saved = c->frame;
    c->frame = f;
    enum flow fl = FLOW_NEXT;
    switch (s->k) {
    case JN_BODY:
        for (uint32_t i = 0; i < s->n_kids && fl == FLOW_NEXT; i++) fl = exec(c, s->kids[i], f);
        break;
    case JN_TEXT: emit(c, s->name, s->name_len); break;
    case JN_OUTPUT: emit_value(c, jj_eval(c, s->a)); break;
    case JN_IF:
        if (jv_truthy(jj_eval(c, s->a))) fl = exec(c, s->b, f);
        else if (s->c) fl = exec(c, s->c, f);
        break;
    case JN_FOR: exec_for(c, s, f); break;
    case JN_SET: {
        struct jv v = jj_eval(c, s->b);
        at(c, s);
        if (s->a) {
            struct jv ns = lookup(c, f, s->name, s->name_len);
            if (ns.k != JV_NS)
                jj_fail_here(c, HMOE_ERR_FORMAT, "cannot assign attribute '%.*s' on '%.*s': not a namespace()",
                             (int)s->a->name_len, s->a->name, (int)s->name_len, s->name);
            jv_dict_set(c, ns.d, jv_str(s->a->name, s->a->name_len), v);
        } else if (s->n_kw) {
            struct jv item = v;
            struct jn tmp = *s;
            bind_targets(c, &tmp, f, item);
        } else jj_frame_set(c, f, s->name, s->name_len, v);
        break;
    }
    case JN_SET_BLOCK: {
        jj_push_output(c);
        exec(c, s->c, f);
        struct jv v = jj_pop_output(c);
        jj_frame_set(c, f, s->name, s->name_len, v);
        break;
    }
    case JN_MACRO: {
        struct jj_macro *m = jj_alloc(c, sizeof *m);
        m->node = s;
        m->closure = f;
        f->captured = true;
        jj_frame_set(c, f, s->name, s->name_len, (struct jv){.k = JV_MACRO, .macro = m});
        break;
    }
    case JN_FILTER_BLOCK: {
        jj_push_output(c);
        exec(c, s->c, f);
        struct jv body = jj_pop_output(c);
        const struct jn *fn = s->a;
        struct jv args[MAX_ARGS], kw_vals[MAX_ARGS];
        size_t na = eval_args(c, fn, args, kw_vals);
        at(c, fn);
        emit_value(c, jj_apply_filter(c, fn->id, body, args, na, fn->kw, kw_vals, fn->n_kw));
        break;
    }
    case JN_BREAK: fl = FLOW_BREAK; break;
    case JN_CONTINUE: fl = FLOW_CONTINUE; break;
    default: at(c, s); jj_fail_here(c, HMOE_ERR_INTERNAL, "expression node as a statement");
    }
    c->frame = saved;
    return fl;
}

void jj_exec_body(struct jj_ctx *c, const struct jn *body, struct jj_frame *fr) {
    exec(c, body, fr);
}
