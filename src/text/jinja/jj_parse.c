/* jj_parse.c — tokens -> syntax tree (struct jn). Precedence as Jinja2's parser, lowest
 * first: `a if c else b`, or, and, not, comparisons (== != < <= > >= in, not in; chained),
 * + -, ~, * / // %, **, unary - +, then a primary with its postfix (.attr, [index / slice],
 * (call)) and filters / tests (`|f(args)`, `is [not] t`), which bind tightest.
 *
 * Children by node kind: IF a=cond b=body c=else (a BODY or the IF of an elif);
 * FOR kw=targets a=iterable b=`if` filter c=body d=else; SET name or a=attribute target,
 * kw=unpack targets, b=value; SET_BLOCK name c=body; MACRO name kw=params (val=default)
 * c=body; FILTER_BLOCK a=the filter (a FILTER node whose value is the body) c=body; ATTR a.name; INDEX a[b]; SLICE a[b:c:d]; CALL a(kids, kw); FILTER a|name(kids, kw);
 * TEST a is name(kids), op=negated; COND a if b else c; DICT kids = key, value, ...
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/jinja/jinja_impl.h"

#define MAX_PARSE_DEPTH 200

struct parser {
    struct jj_arena *a;
    struct jj_fail *f;
    const struct jt *t;
    size_t n, i;
    int depth;
};

_Noreturn static void perr(struct parser *p, const struct jt *t, const char *fmt, const char *arg) {
    jj_fail_at(p->f, HMOE_ERR_FORMAT, t->line, t->col, fmt, arg);
}

static void *palloc(struct parser *p, size_t n) {
    void *m = jj_arena_alloc(p->a, n);
    if (!m) jj_fail_at(p->f, HMOE_ERR_NOMEM, p->t[p->i].line, p->t[p->i].col, "out of memory parsing the template");
    memset(m, 0, n);
    return m;
}

static struct jn *node(struct parser *p, uint8_t k, const struct jt *at) {
    struct jn *n = palloc(p, sizeof *n);
    n->k = k;
    n->line = at->line;
    n->col = at->col;
    return n;
}

/* Growable arrays of children built in the arena. */
struct kids { struct jn **v; uint32_t n, cap; };
static void kids_push(struct parser *p, struct kids *k, struct jn *x) {
    if (k->n == k->cap) {
        uint32_t cap = k->cap ? k->cap * 2 : 4;
        struct jn **nv = palloc(p, cap * sizeof *nv);
        if (k->n) memcpy(nv, k->v, k->n * sizeof *nv);
        k->v = nv;
        k->cap = cap;
    }
    k->v[k->n++] = x;
}
struct kws { struct jn_kw *v; uint32_t n, cap; };
static void kws_push(struct parser *p, struct kws *k, const char *name, uint32_t len, struct jn *val) {
    if (k->n == k->cap) {
        uint32_t cap = k->cap ? k->cap * 2 : 4;
        struct jn_kw *nv = palloc(p, cap * sizeof *nv);
        if (k->n) memcpy(nv, k->v, k->n * sizeof *nv);
        k->v = nv;
        k->cap = cap;
    }
    k->v[k->n++] = (struct jn_kw){name, len, val};
}

static const struct jt *cur(struct parser *p) { return &p->t[p->i]; }
static const struct jt *next(struct parser *p) {
    const struct jt *t = &p->t[p->i];
    if (t->k != JT_EOF) p->i++;
    return t;
}
static bool is_op(const struct jt *t, const char *op) {
    return t->k == JT_OP && t->n == strlen(op) && memcmp(t->s, op, t->n) == 0;
}
static bool is_name(const struct jt *t, const char *w) {
    return t->k == JT_NAME && t->n == strlen(w) && memcmp(t->s, w, t->n) == 0;
}
static bool accept_op(struct parser *p, const char *op) {
    if (!is_op(cur(p), op)) return false;
    p->i++;
    return true;
}
static bool accept_name(struct parser *p, const char *w) {
    if (!is_name(cur(p), w)) return false;
    p->i++;
    return true;
}
static void expect_op(struct parser *p, const char *op) {
    if (!accept_op(p, op)) perr(p, cur(p), "expected '%s'", op);
}
static const struct jt *expect_ident(struct parser *p, const char *what) {
    if (cur(p)->k != JT_NAME) perr(p, cur(p), "expected %s", what);
    return next(p);
}

static struct jn *parse_expr(struct parser *p, bool with_cond);

static void enter(struct parser *p) {
    if (++p->depth > MAX_PARSE_DEPTH) perr(p, cur(p), "expression nested too deeply (more than %s levels)", "200");
}

/* (args) after '(' : positional then keyword arguments. */
static void parse_args(struct parser *p, struct kids *args, struct kws *kw) {
    while (!accept_op(p, ")")) {
        if (args->n + kw->n > 0) {
            expect_op(p, ",");
            if (accept_op(p, ")")) break;
        }
        if (cur(p)->k == JT_NAME && is_op(&p->t[p->i + 1], "=")) {
            const struct jt *nm = next(p);
            p->i++;
            kws_push(p, kw, nm->s, nm->n, parse_expr(p, true));
        } else {
            if (kw->n) perr(p, cur(p), "%s", "a positional argument after a keyword argument");
            kids_push(p, args, parse_expr(p, true));
        }
    }
}

static struct jn *parse_primary(struct parser *p) {
    const struct jt *t = cur(p);
    struct jn *n;
    switch (t->k) {
    case JT_STR: {
        n = node(p, JN_LIT, t);
        p->i++;
        if (cur(p)->k != JT_STR) { n->lit = jv_str(t->s, t->n); return n; }
        /* adjacent literals concatenate, as in Python */
        size_t len = t->n;
        for (size_t j = p->i; p->t[j].k == JT_STR; j++) len += p->t[j].n;
        char *s = palloc(p, len + 1);
        memcpy(s, t->s, t->n);
        size_t k = t->n;
        while (cur(p)->k == JT_STR) { memcpy(s + k, cur(p)->s, cur(p)->n); k += cur(p)->n; p->i++; }
        n->lit = jv_str(s, len);
        return n;
    }
    case JT_INT: n = node(p, JN_LIT, t); n->lit = jv_int(t->i); p->i++; return n;
    case JT_FLOAT: n = node(p, JN_LIT, t); n->lit = jv_float(t->f); p->i++; return n;
    case JT_NAME:
        p->i++;
        n = node(p, JN_LIT, t);
        if (is_name(t, "true") || is_name(t, "True")) n->lit = jv_bool(true);
        else if (is_name(t, "false") || is_name(t, "False")) n->lit = jv_bool(false);
        else if (is_name(t, "none") || is_name(t, "None")) n->lit = jv_none();
        else { n->k = JN_NAME; n->name = t->s; n->name_len = t->n; }
        return n;
    case JT_OP:
        if (accept_op(p, "(")) {
            if (accept_op(p, ")")) return node(p, JN_TUPLE, t);
            struct jn *e = parse_expr(p, true);
            if (!is_op(cur(p), ",")) { expect_op(p, ")"); return e; }
            struct kids k = {0};
            kids_push(p, &k, e);
            while (accept_op(p, ",")) {
                if (is_op(cur(p), ")")) break;
                kids_push(p, &k, parse_expr(p, true));
            }
            expect_op(p, ")");
            n = node(p, JN_TUPLE, t);
            n->kids = k.v;
            n->n_kids = k.n;
            return n;
        }
        if (accept_op(p, "[")) {
            struct kids k = {0};
            while (!accept_op(p, "]")) {
                if (k.n) { expect_op(p, ","); if (accept_op(p, "]")) break; }
                kids_push(p, &k, parse_expr(p, true));
            }
            n = node(p, JN_LIST, t);
            n->kids = k.v;
            n->n_kids = k.n;
            return n;
        }
        if (accept_op(p, "{")) {
            struct kids k = {0};
            while (!accept_op(p, "}")) {
                if (k.n) { expect_op(p, ","); if (accept_op(p, "}")) break; }
                kids_push(p, &k, parse_expr(p, true));
                expect_op(p, ":");
                kids_push(p, &k, parse_expr(p, true));
            }
            n = node(p, JN_DICT, t);
            n->kids = k.v;
            n->n_kids = k.n;
            return n;
        }
        break;
    default: break;
    }
    perr(p, t, "%s", t->k == JT_OUT_END || t->k == JT_STMT_END ? "expected an expression before the end of the tag"
                                                                : "unexpected token in an expression");
}

static struct jn *parse_postfix(struct parser *p, struct jn *n) {
    for (;;) {
        const struct jt *t = cur(p);
        if (accept_op(p, ".")) {
            const struct jt *nm = next(p);
            if (nm->k != JT_NAME && nm->k != JT_INT) perr(p, nm, "%s", "expected an attribute name after '.'");
            struct jn *x = node(p, nm->k == JT_INT ? JN_INDEX : JN_ATTR, t);
            x->a = n;
            if (nm->k == JT_INT) { x->b = node(p, JN_LIT, nm); x->b->lit = jv_int(nm->i); }
            else { x->name = nm->s; x->name_len = nm->n; }
            n = x;
        } else if (accept_op(p, "[")) {
            struct jn *parts[3] = {NULL, NULL, NULL};
            bool slice = false;
            for (int k = 0; k < 3; k++) {
                if (!is_op(cur(p), ":") && !is_op(cur(p), "]")) parts[k] = parse_expr(p, true);
                if (k < 2 && accept_op(p, ":")) slice = true;
                else break;
            }
            expect_op(p, "]");
            struct jn *x = node(p, slice ? JN_SLICE : JN_INDEX, t);
            x->a = n;
            x->b = parts[0];
            x->c = parts[1];
            x->d = parts[2];
            if (!slice && !parts[0]) perr(p, t, "%s", "empty subscript '[]'");
            n = x;
        } else if (accept_op(p, "(")) {
            struct kids k = {0};
            struct kws kw = {0};
            parse_args(p, &k, &kw);
            struct jn *x = node(p, JN_CALL, t);
            x->a = n;
            x->kids = k.v;
            x->n_kids = k.n;
            x->kw = kw.v;
            x->n_kw = kw.n;
            n = x;
        } else return n;
    }
}

static bool starts_test_arg(const struct jt *t) {
    if (t->k == JT_STR || t->k == JT_INT || t->k == JT_FLOAT) return true;
    if (t->k == JT_NAME) {
        static const char *const stop[] = {"else", "or", "and", "if", "is", "in", "not", NULL};
        for (int i = 0; stop[i]; i++)
            if (is_name(t, stop[i])) return false;
        return true;
    }
    return is_op(t, "[") || is_op(t, "{");
}

/* A filter name and its optional (args), applied to n (NULL for a filter block's body). */
static struct jn *parse_filter_call(struct parser *p, struct jn *n) {
    const struct jt *nm = expect_ident(p, "a filter name");
    struct jn *x = node(p, JN_FILTER, nm);
    x->a = n;
    x->name = nm->s;
    x->name_len = nm->n;
    x->id = (int16_t)jj_filter_id(nm->s, nm->n);
    if (x->id < 0) {
        char nb[64];
        snprintf(nb, sizeof nb, "%.*s", (int)(nm->n < 60 ? nm->n : 60), nm->s);
        perr(p, nm, "unknown filter '%s'", nb);
    }
    if (accept_op(p, "(")) {
        struct kids k = {0};
        struct kws kw = {0};
        parse_args(p, &k, &kw);
        x->kids = k.v;
        x->n_kids = k.n;
        x->kw = kw.v;
        x->n_kw = kw.n;
    }
    return x;
}

static struct jn *parse_filters(struct parser *p, struct jn *n) {
    for (;;) {
        const struct jt *t = cur(p);
        if (accept_op(p, "|")) {
            n = parse_filter_call(p, n);
        } else if (accept_name(p, "is")) {
            bool neg = accept_name(p, "not");
            const struct jt *nm = expect_ident(p, "a test name after 'is'");
            struct jn *x = node(p, JN_TEST, nm);
            x->a = n;
            x->op = neg;
            x->name = nm->s;
            x->name_len = nm->n;
            x->id = (int16_t)jj_test_id(nm->s, nm->n);
            if (x->id < 0) {
                char nb[64];
                snprintf(nb, sizeof nb, "%.*s", (int)(nm->n < 60 ? nm->n : 60), nm->s);
                perr(p, nm, "unknown test '%s'", nb);
            }
            struct kids k = {0};
            if (accept_op(p, "(")) {
                struct kws kw = {0};
                parse_args(p, &k, &kw);
                if (kw.n) perr(p, nm, "%s", "tests take no keyword arguments");
            } else if (starts_test_arg(cur(p))) {
                kids_push(p, &k, parse_postfix(p, parse_primary(p)));
            }
            x->kids = k.v;
            x->n_kids = k.n;
            n = x;
        } else if (is_op(t, "(")) {
            n = parse_postfix(p, n);
        } else return n;
    }
}

static struct jn *parse_unary(struct parser *p, bool with_filter) {
    enter(p);
    const struct jt *t = cur(p);
    struct jn *n;
    if (accept_op(p, "-") || accept_op(p, "+")) {
        n = node(p, is_op(t, "-") ? JN_NEG : JN_POS, t);
        n->a = parse_unary(p, false);
    } else n = parse_postfix(p, parse_primary(p));
    if (with_filter) n = parse_filters(p, n);
    p->depth--;
    return n;
}

static struct jn *bin(struct parser *p, const struct jt *t, uint8_t op, struct jn *a, struct jn *b) {
    struct jn *n = node(p, JN_BIN, t);
    n->op = op;
    n->a = a;
    n->b = b;
    return n;
}

static struct jn *parse_pow(struct parser *p) {
    struct jn *n = parse_unary(p, true);
    while (is_op(cur(p), "**")) { const struct jt *t = next(p); n = bin(p, t, OP_POW, n, parse_unary(p, true)); }
    return n;
}
static struct jn *parse_math2(struct parser *p) {
    struct jn *n = parse_pow(p);
    for (;;) {
        const struct jt *t = cur(p);
        uint8_t op;
        if (is_op(t, "*")) op = OP_MUL;
        else if (is_op(t, "/")) op = OP_DIV;
        else if (is_op(t, "//")) op = OP_FLOORDIV;
        else if (is_op(t, "%")) op = OP_MOD;
        else return n;
        p->i++;
        n = bin(p, t, op, n, parse_pow(p));
    }
}
static struct jn *parse_concat(struct parser *p) {
    struct jn *n = parse_math2(p);
    while (is_op(cur(p), "~")) { const struct jt *t = next(p); n = bin(p, t, OP_CONCAT, n, parse_math2(p)); }
    return n;
}
static struct jn *parse_math1(struct parser *p) {
    struct jn *n = parse_concat(p);
    for (;;) {
        const struct jt *t = cur(p);
        if (!is_op(t, "+") && !is_op(t, "-")) return n;
        p->i++;
        n = bin(p, t, is_op(t, "+") ? OP_ADD : OP_SUB, n, parse_concat(p));
    }
}
static struct jn *parse_compare(struct parser *p) {
    const struct jt *t0 = cur(p);
    struct jn *first = parse_math1(p);
    struct kids k = {0};
    uint8_t ops[64];
    uint32_t n_ops = 0;
    for (;;) {
        const struct jt *t = cur(p);
        uint8_t op;
        if (is_op(t, "==")) op = OP_EQ;
        else if (is_op(t, "!=")) op = OP_NE;
        else if (is_op(t, "<")) op = OP_LT;
        else if (is_op(t, "<=")) op = OP_LE;
        else if (is_op(t, ">")) op = OP_GT;
        else if (is_op(t, ">=")) op = OP_GE;
        else if (is_name(t, "in")) op = OP_IN;
        else if (is_name(t, "not") && is_name(&p->t[p->i + 1], "in")) { op = OP_NOTIN; p->i++; }
        else break;
        p->i++;
        if (n_ops == 64) perr(p, t, "%s", "comparison chain too long");
        if (!k.n) kids_push(p, &k, first);
        ops[n_ops++] = op;
        kids_push(p, &k, parse_math1(p));
    }
    if (!n_ops) return first;
    struct jn *n = node(p, JN_COMPARE, t0);
    n->kids = k.v;
    n->n_kids = k.n;
    n->cmp_ops = palloc(p, n_ops);
    memcpy(n->cmp_ops, ops, n_ops);
    return n;
}
static struct jn *parse_not(struct parser *p) {
    const struct jt *t = cur(p);
    if (accept_name(p, "not")) {
        enter(p);
        struct jn *n = node(p, JN_NOT, t);
        n->a = parse_not(p);
        p->depth--;
        return n;
    }
    return parse_compare(p);
}
static struct jn *parse_and(struct parser *p) {
    struct jn *n = parse_not(p);
    while (is_name(cur(p), "and")) {
        const struct jt *t = next(p);
        struct jn *x = node(p, JN_AND, t);
        x->a = n;
        x->b = parse_not(p);
        n = x;
    }
    return n;
}
static struct jn *parse_or(struct parser *p) {
    struct jn *n = parse_and(p);
    while (is_name(cur(p), "or")) {
        const struct jt *t = next(p);
        struct jn *x = node(p, JN_OR, t);
        x->a = n;
        x->b = parse_and(p);
        n = x;
    }
    return n;
}
static struct jn *parse_expr(struct parser *p, bool with_cond) {
    enter(p);
    struct jn *n = parse_or(p);
    while (with_cond && is_name(cur(p), "if")) {
        const struct jt *t = next(p);
        struct jn *x = node(p, JN_COND, t);
        x->a = n;
        x->b = parse_or(p);
        if (accept_name(p, "else")) x->c = parse_expr(p, true);
        n = x;
    }
    p->depth--;
    return n;
}

/* ---- statements ----------------------------------------------------------------------- */
static void expect_stmt_end(struct parser *p) {
    if (cur(p)->k != JT_STMT_END) perr(p, cur(p), "%s", "expected '%}' to end the tag");
    p->i++;
}

/* At `{%` followed by one of `words`? */
static bool at_stmt(struct parser *p, const char *const *words) {
    if (cur(p)->k != JT_STMT_BEGIN) return false;
    for (; *words; words++)
        if (is_name(&p->t[p->i + 1], *words)) return true;
    return false;
}

static struct jn *parse_body(struct parser *p, const char *const *ends, const char *opener, const struct jt *open);

static struct jn *parse_if(struct parser *p, const struct jt *at) {
    static const char *const ends[] = {"elif", "else", "endif", NULL};
    struct jn *n = node(p, JN_IF, at);
    n->a = parse_expr(p, true);
    expect_stmt_end(p);
    n->b = parse_body(p, ends, "if", at);
    p->i++; /* {% */
    const struct jt *w = next(p);
    if (is_name(w, "elif")) n->c = parse_if(p, w);
    else if (is_name(w, "else")) {
        static const char *const end2[] = {"endif", NULL};
        expect_stmt_end(p);
        n->c = parse_body(p, end2, "if", at);
        p->i += 2;
        expect_stmt_end(p);
    } else expect_stmt_end(p);
    return n;
}

static struct jn *parse_for(struct parser *p, const struct jt *at) {
    static const char *const ends[] = {"else", "endfor", NULL}, *const end2[] = {"endfor", NULL};
    struct jn *n = node(p, JN_FOR, at);
    struct kws kw = {0};
    do {
        const struct jt *nm = expect_ident(p, "a loop variable name after 'for'");
        kws_push(p, &kw, nm->s, nm->n, NULL);
    } while (accept_op(p, ","));
    n->kw = kw.v;
    n->n_kw = kw.n;
    if (!accept_name(p, "in")) perr(p, cur(p), "%s", "expected 'in' in the for tag");
    n->a = parse_expr(p, false);
    if (accept_name(p, "if")) n->b = parse_expr(p, false);
    accept_name(p, "recursive");
    expect_stmt_end(p);
    n->c = parse_body(p, ends, "for", at);
    p->i++;
    if (is_name(next(p), "else")) {
        expect_stmt_end(p);
        n->d = parse_body(p, end2, "for", at);
        p->i += 2;
    }
    expect_stmt_end(p);
    return n;
}

static struct jn *parse_set(struct parser *p, const struct jt *at) {
    static const char *const ends[] = {"endset", NULL};
    const struct jt *nm = expect_ident(p, "a variable name after 'set'");
    struct jn *n = node(p, JN_SET, at);
    n->name = nm->s;
    n->name_len = nm->n;
    if (accept_op(p, ".")) {
        const struct jt *attr = expect_ident(p, "an attribute name");
        n->a = node(p, JN_ATTR, attr);
        n->a->name = attr->s;
        n->a->name_len = attr->n;
    } else if (is_op(cur(p), ",")) {
        struct kws kw = {0};
        kws_push(p, &kw, nm->s, nm->n, NULL);
        while (accept_op(p, ",")) {
            const struct jt *t = expect_ident(p, "a variable name");
            kws_push(p, &kw, t->s, t->n, NULL);
        }
        n->kw = kw.v;
        n->n_kw = kw.n;
    }
    if (cur(p)->k == JT_STMT_END && !n->a && !n->kw) {
        p->i++;
        n->k = JN_SET_BLOCK;
        n->c = parse_body(p, ends, "set", at);
        p->i += 2;
        expect_stmt_end(p);
        return n;
    }
    expect_op(p, "=");
    n->b = parse_expr(p, true);
    if (is_op(cur(p), ",")) { /* set x = a, b builds a tuple */
        struct kids k = {0};
        kids_push(p, &k, n->b);
        while (accept_op(p, ",")) kids_push(p, &k, parse_expr(p, true));
        n->b = node(p, JN_TUPLE, at);
        n->b->kids = k.v;
        n->b->n_kids = k.n;
    }
    expect_stmt_end(p);
    return n;
}

static struct jn *parse_macro(struct parser *p, const struct jt *at) {
    static const char *const ends[] = {"endmacro", NULL};
    const struct jt *nm = expect_ident(p, "a macro name");
    struct jn *n = node(p, JN_MACRO, at);
    n->name = nm->s;
    n->name_len = nm->n;
    expect_op(p, "(");
    struct kws kw = {0};
    while (!accept_op(p, ")")) {
        if (kw.n) { expect_op(p, ","); if (accept_op(p, ")")) break; }
        const struct jt *pn = expect_ident(p, "a parameter name");
        struct jn *dflt = accept_op(p, "=") ? parse_expr(p, true) : NULL;
        kws_push(p, &kw, pn->s, pn->n, dflt);
    }
    n->kw = kw.v;
    n->n_kw = kw.n;
    expect_stmt_end(p);
    n->c = parse_body(p, ends, "macro", at);
    p->i += 2;
    if (cur(p)->k == JT_NAME) p->i++; /* {% endmacro name %} */
    expect_stmt_end(p);
    return n;
}

/* Statements up to one of `ends` (left unconsumed, at its '{%'); `ends` NULL: to the end. */
static struct jn *parse_body(struct parser *p, const char *const *ends, const char *opener, const struct jt *open) {
    enter(p);
    struct kids k = {0};
    const struct jt *start = cur(p);
    for (;;) {
        const struct jt *t = cur(p);
        if (t->k == JT_EOF) {
            if (!ends) break;
            perr(p, open, "'{%% %s %%}' is never closed", opener);
        }
        if (ends && at_stmt(p, ends)) break;
        struct jn *s = NULL;
        if (t->k == JT_TEXT) {
            s = node(p, JN_TEXT, t);
            s->name = t->s;
            s->name_len = t->n;
            p->i++;
        } else if (t->k == JT_OUT_BEGIN) {
            p->i++;
            s = node(p, JN_OUTPUT, t);
            s->a = parse_expr(p, true);
            if (cur(p)->k != JT_OUT_END) perr(p, cur(p), "%s", "expected '}}' to end the expression");
            p->i++;
        } else if (t->k == JT_STMT_BEGIN) {
            p->i++;
            const struct jt *w = expect_ident(p, "a tag name after '{%'");
            if (is_name(w, "if")) s = parse_if(p, w);
            else if (is_name(w, "for")) s = parse_for(p, w);
            else if (is_name(w, "set")) s = parse_set(p, w);
            else if (is_name(w, "macro")) s = parse_macro(p, w);
            else if (is_name(w, "break") || is_name(w, "continue")) {
                s = node(p, is_name(w, "break") ? JN_BREAK : JN_CONTINUE, w);
                expect_stmt_end(p);
            } else if (is_name(w, "filter")) { /* {% filter name(args) %}body{% endfilter %} */
                static const char *const fe[] = {"endfilter", NULL};
                struct jn *fnode = parse_filter_call(p, NULL);
                expect_stmt_end(p);
                s = node(p, JN_FILTER_BLOCK, w);
                s->a = fnode;
                s->c = parse_body(p, fe, "filter", w);
                p->i += 2;
                expect_stmt_end(p);
            } else if (is_name(w, "generation")) { /* transformers' assistant-mask marker: no output */
                static const char *const ge[] = {"endgeneration", NULL};
                expect_stmt_end(p);
                s = parse_body(p, ge, "generation", w);
                p->i += 2;
                expect_stmt_end(p);
            } else {
                char nb[64];
                snprintf(nb, sizeof nb, "%.*s", (int)(w->n < 60 ? w->n : 60), w->s);
                perr(p, w, "unknown or unexpected tag '%s'", nb);
            }
        } else perr(p, t, "%s", "unexpected token");
        kids_push(p, &k, s);
    }
    struct jn *b = node(p, JN_BODY, start);
    b->kids = k.v;
    b->n_kids = k.n;
    p->depth--;
    return b;
}

struct jn *jj_parse(struct jj_arena *a, struct jj_fail *f, const struct jt *toks, size_t n) {
    struct parser p = {.a = a, .f = f, .t = toks, .n = n};
    return parse_body(&p, NULL, NULL, NULL);
}
