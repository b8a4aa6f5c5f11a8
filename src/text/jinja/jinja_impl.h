/* jinja_impl.h — private to src/text/jinja: values, the syntax tree, the arena every render
 * and parse allocates from, and the error escape (setjmp/longjmp: every allocation lives in
 * an arena, so unwinding from any depth leaks nothing).
 */
#ifndef HMOE_TEXT_JINJA_IMPL_H
#define HMOE_TEXT_JINJA_IMPL_H

#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>

#include "hmoe/jinja.h"
#include "text/strbuf_impl.h"

/* ---- arena ---------------------------------------------------------------------------- */
struct jj_block;
struct jj_arena {
    struct jj_block *head;
    size_t used_total; /* bytes handed out, for the memory bound */
};
void *jj_arena_alloc(struct jj_arena *a, size_t n); /* NULL when out of memory */
void jj_arena_free(struct jj_arena *a);

/* ---- values --------------------------------------------------------------------------- */
enum jv_kind {
    JV_UNDEF, JV_NONE, JV_BOOL, JV_INT, JV_FLOAT, JV_STR, JV_LIST, JV_DICT,
    JV_NS,     /* namespace(): a dict whose attributes can be assigned */
    JV_MACRO,  /* a {% macro %}: node + the frame it was defined in */
    JV_FUNC,   /* a global function (range, namespace, raise_exception, ...) */
    JV_METHOD, /* a bound method (self + name) taken without calling it */
    JV_LOOP,   /* the `loop` object of a for */
};

struct jj_list;
struct jj_dict;
struct jj_loop;
struct jj_bound;
struct jj_macro;

struct jv {
    uint8_t k;    /* enum jv_kind */
    uint32_t n;   /* JV_STR: byte length */
    union {
        bool b;
        int64_t i;
        double f;
        const char *s;
        struct jj_list *l;
        struct jj_dict *d;
        struct jj_loop *loop;
        struct jj_bound *bound;
        const struct jj_macro *macro;
        int fn;
    };
};

struct jj_list { size_t n, cap; struct jv *v; bool tuple; /* prints as (a, b); never equal to a list */ };
struct jj_dict { size_t n, cap; struct jv *key, *val; };
struct jj_loop {
    const struct jj_list *items; /* the (filtered) sequence being iterated */
    size_t index0;
};
struct jj_bound { struct jv self; const char *name; uint32_t name_len; };

/* ---- syntax tree ---------------------------------------------------------------------- */
enum jn_kind {
    /* statements */
    JN_BODY, JN_TEXT, JN_OUTPUT, JN_IF, JN_FOR, JN_SET, JN_SET_BLOCK, JN_MACRO, JN_BREAK, JN_CONTINUE, JN_FILTER_BLOCK,
    /* expressions */
    JN_LIT, JN_NAME, JN_ATTR, JN_INDEX, JN_SLICE, JN_CALL, JN_FILTER, JN_TEST, JN_NEG, JN_POS, JN_NOT,
    JN_BIN, JN_AND, JN_OR, JN_COND, JN_LIST, JN_TUPLE, JN_DICT, JN_COMPARE,
};

enum jn_op { /* JN_BIN and JN_COMPARE operators */
    OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_FLOORDIV, OP_MOD, OP_POW, OP_CONCAT,
    OP_EQ, OP_NE, OP_LT, OP_LE, OP_GT, OP_GE, OP_IN, OP_NOTIN,
};

struct jn;
struct jn_kw { const char *name; uint32_t len; struct jn *val; }; /* keyword argument / macro parameter */

struct jn {
    uint8_t k;          /* enum jn_kind */
    uint8_t op;         /* JN_BIN: enum jn_op; JN_TEST: negated; JN_FILTER/JN_TEST: builtin id in `id` */
    int16_t id;         /* JN_FILTER / JN_TEST: index into the builtin table */
    uint32_t line, col;
    const char *name;   /* JN_NAME, JN_ATTR, JN_SET, JN_MACRO, JN_FILTER, JN_TEST; JN_TEXT: the text */
    uint32_t name_len;
    struct jn *a, *b, *c, *d; /* children, meaning by kind (jj_parse.c documents each) */
    struct jn **kids;   /* statements of a body; call/filter/test positional args; list/tuple/dict items */
    uint32_t n_kids;
    struct jn_kw *kw;   /* call/filter keyword args; macro parameters; for/set target names */
    uint32_t n_kw;
    uint8_t *cmp_ops;   /* JN_COMPARE: n_kids-1 operators */
    struct jv lit;      /* JN_LIT */
};

struct jj_macro { const struct jn *node; struct jj_frame *closure; };

struct hmoe_jinja {
    struct jj_arena arena; /* the tree and its strings */
    struct jn *root;
};

/* ---- errors --------------------------------------------------------------------------- */
struct jj_fail {
    jmp_buf jb;
    enum hmoe_status code;
    char msg[400];
};
_Noreturn void jj_fail_at(struct jj_fail *f, enum hmoe_status code, uint32_t line, uint32_t col, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* ---- lexer / parser ------------------------------------------------------------------- */
enum jt_kind {
    JT_EOF, JT_TEXT, JT_OUT_BEGIN, JT_OUT_END, JT_STMT_BEGIN, JT_STMT_END,
    JT_NAME, JT_STR, JT_INT, JT_FLOAT, JT_OP, /* JT_OP: punctuation / operator, text in s */
};
struct jt {
    uint8_t k;
    uint32_t line, col;
    const char *s; /* JT_TEXT: the text (whitespace control applied); JT_NAME/JT_OP: source; JT_STR: decoded */
    uint32_t n;
    int64_t i;
    double f;
};
/* Tokenize the whole template (whitespace control, comments and raw blocks resolved). */
struct jt *jj_lex(struct jj_arena *a, struct jj_fail *f, const char *src, size_t len, size_t *n_tokens);
struct jn *jj_parse(struct jj_arena *a, struct jj_fail *f, const struct jt *toks, size_t n);

/* ---- rendering ------------------------------------------------------------------------ */
struct jj_var { const char *name; uint32_t len; struct jv val; };
struct jj_frame {
    struct jj_frame *parent;
    size_t n, cap;
    struct jj_var *vars;
    bool captured; /* a macro was defined here: the scope must outlive its loop iteration */
    struct jj_var inline_vars[4]; /* most scopes hold a loop variable or two */
};

struct jj_saved_out { struct hmoe_strbuf buf; struct jj_saved_out *prev; };

struct jj_ctx {
    struct jj_arena arena;
    struct jj_frame *frame;       /* the scope expressions are evaluated in */
    struct jj_saved_out *saved;   /* output buffers of the callers of the macro being rendered */
    struct jj_fail fail;
    struct hmoe_strbuf out;
    struct jj_frame *globals;
    struct hmoe_jinja_limits lim;
    uint32_t depth;
    uint64_t iterations;
    double deadline;
    time_t now;
    uint32_t line, col; /* position of the node being evaluated, for errors raised by builtins */
};

_Noreturn void jj_fail_here(struct jj_ctx *c, enum hmoe_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void *jj_alloc(struct jj_ctx *c, size_t n);

/* Values (jj_value.c). */
static inline struct jv jv_undef(void) { return (struct jv){.k = JV_UNDEF}; }
static inline struct jv jv_none(void) { return (struct jv){.k = JV_NONE}; }
static inline struct jv jv_bool(bool b) { return (struct jv){.k = JV_BOOL, .b = b}; }
static inline struct jv jv_int(int64_t i) { return (struct jv){.k = JV_INT, .i = i}; }
static inline struct jv jv_float(double f) { return (struct jv){.k = JV_FLOAT, .f = f}; }
static inline struct jv jv_str(const char *s, size_t n) { return (struct jv){.k = JV_STR, .n = (uint32_t)n, .s = s}; }
struct jv jv_str_copy(struct jj_ctx *c, const char *s, size_t n);
struct jv jv_new_list(struct jj_ctx *c, size_t cap);
struct jv jv_new_tuple(struct jj_ctx *c, size_t cap);
struct jv jv_new_dict(struct jj_ctx *c, uint8_t kind, size_t cap);
void jv_list_push(struct jj_ctx *c, struct jj_list *l, struct jv v);
void jv_dict_set(struct jj_ctx *c, struct jj_dict *d, struct jv key, struct jv val);
const struct jv *jv_dict_get(const struct jj_dict *d, const char *key, size_t len);
const struct jv *jv_dict_get_v(const struct jj_dict *d, struct jv key);
bool jv_truthy(struct jv v);
bool jv_equal(struct jv a, struct jv b);
const char *jv_kind_name(struct jv v);
/* Python str(v) / repr(v) appended to b. */
void jv_to_str(struct jj_ctx *c, struct hmoe_strbuf *b, struct jv v);
void jv_repr(struct jj_ctx *c, struct hmoe_strbuf *b, struct jv v);
/* transformers' tojson: json.dumps(v, ensure_ascii, indent, separators, sort_keys). */
struct jj_json_fmt { bool ensure_ascii, sort_keys; int indent; /* <0: none */ const char *item_sep, *key_sep; };
void jv_to_json(struct jj_ctx *c, struct hmoe_strbuf *b, struct jv v, const struct jj_json_fmt *fmt, int level);
/* str(v) as a value (strings returned as is). */
struct jv jv_stringify(struct jj_ctx *c, struct jv v);
struct jv jv_from_json(struct jj_ctx *c, const struct hmoe_json *j);
/* Code points of a UTF-8 string; byte offset of code point `cp`. */
size_t jj_utf8_len(const char *s, size_t n);
size_t jj_utf8_offset(const char *s, size_t n, size_t cp);
/* Python's str.isspace() for the code point starting at s (bytes in *len). */
bool jj_is_space(const char *s, size_t n, size_t *len);

/* Evaluation (jj_eval.c). */
struct jv jj_eval(struct jj_ctx *c, const struct jn *e);
void jj_exec_body(struct jj_ctx *c, const struct jn *body, struct jj_frame *fr);
struct jv jj_call_value(struct jj_ctx *c, struct jv fn, struct jv *args, size_t n_args, const struct jn_kw *kw,
                        struct jv *kw_vals, size_t n_kw);
struct jj_frame *jj_frame_new(struct jj_ctx *c, struct jj_frame *parent);
void jj_frame_set(struct jj_ctx *c, struct jj_frame *f, const char *name, size_t len, struct jv v);
struct jj_frame *jj_cur_frame(struct jj_ctx *c);
void jj_push_output(struct jj_ctx *c);
struct jv jj_pop_output(struct jj_ctx *c);
/* Iterate: a list of the items of a list / dict keys / string characters. */
struct jj_list *jj_iter_list(struct jj_ctx *c, struct jv v);
void jj_count_iteration(struct jj_ctx *c);

/* Builtins (jj_filters.c, jj_methods.c). */
int jj_filter_id(const char *name, size_t len); /* -1 when unknown */
int jj_test_id(const char *name, size_t len);
struct jv jj_apply_filter(struct jj_ctx *c, int id, struct jv v, struct jv *args, size_t n, const struct jn_kw *kw,
                          struct jv *kw_vals, size_t n_kw);
bool jj_apply_test(struct jj_ctx *c, int id, struct jv v, struct jv *args, size_t n);
/* obj.name(args): true and *res set when obj has such a method. */
bool jj_call_method(struct jj_ctx *c, struct jv self, const char *name, size_t len, struct jv *args, size_t n,
                    const struct jn_kw *kw, struct jv *kw_vals, size_t n_kw, struct jv *res);
bool jj_has_method(struct jv self, const char *name, size_t len);
/* Global functions (range, namespace, dict, raise_exception, strftime_now, ...). */
int jj_global_id(const char *name, size_t len);
struct jv jj_call_global(struct jj_ctx *c, int id, struct jv *args, size_t n, const struct jn_kw *kw,
                         struct jv *kw_vals, size_t n_kw);
/* Python str methods shared by filters and methods. */
struct jv jj_str_strip(struct jj_ctx *c, struct jv s, const struct jv *chars, bool left, bool right);

#endif
