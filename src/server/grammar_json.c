/* grammar_json.c — the JSON grammar that constrains sampling for response_format json_object /
 * json_schema (and Ollama's `format`): a schema subset compiled to a tree of nodes, and a
 * byte-level pushdown matcher over it.
 *
 * The matcher is a stack of frames (a value not started, an object, an array, a string, a
 * number, a literal, an enum or property name being matched); each byte goes to the top frame,
 * and a frame that can end without a byte of its own (a number, an enum value that is a prefix
 * of a longer one) hands the byte on to its parent. Besides "is this byte allowed", the matcher
 * knows how many bytes at least are needed to finish the value from where it stands (every
 * frame's cost of closing, required members included): the sampler allows only tokens after
 * which that distance still fits in the tokens left, so an answer cut by max_tokens is still
 * whole JSON (each byte of a shortest completion is a single-byte token of a byte-level vocab).
 *
 * Bounds: at most SRV_JSON_MAX_NEST nested containers, SRV_JSON_MAX_WS whitespace bytes in a
 * row, 64 properties / enum values per schema node. Numbers have at most 15 digits before and
 * after the point and 2 in the exponent, and \u escapes name no surrogate, so that every answer
 * reads back exactly in any JSON library (64-bit integers, doubles, no lone surrogates, no NUL).
 *
 * Trials (does this token fit?) run on an overlay of the stack: only the frames a token
 * touches are copied, so testing the whole vocabulary stays cheap.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/server_impl.h"

enum {
    T_OBJECT = 1, T_ARRAY = 2, T_STRING = 4, T_NUMBER = 8, T_INTEGER = 16, T_BOOLEAN = 32, T_NULL = 64,
    T_ANY = 127,
};

struct srv_json_node {
    unsigned types;
    int n_props;                   /* > 0: an object with exactly these properties (any order) */
    char **names;
    int *name_len;
    struct srv_json_node **props;
    uint64_t required;
    struct srv_json_node *items;   /* array items; NULL: any value */
    int n_enum;                    /* > 0: the value is one of these JSON texts */
    char **enum_txt;
    int *enum_len;
    int minlen;                    /* bytes of the shortest value */
};

static struct srv_json_node any_node = {.types = T_ANY, .minlen = 1};
static struct srv_json_node object_node = {.types = T_OBJECT, .minlen = 2};

enum { F_VALUE, F_OBJECT, F_ARRAY, F_STRING, F_NUMBER, F_LITERAL, F_ENUM, F_KEY };
enum { O_START, O_KEY, O_COLON, O_AFTER, O_NEXT };
enum { A_START, A_AFTER };
enum { S_NORMAL, S_ESC, S_HEX, S_UTF8 };
enum { N_START, N_MINUS, N_ZERO, N_INT, N_DOT, N_FRAC, N_E, N_ESIGN, N_EXP };

struct srv_json_frame {
    uint8_t kind, st, ws, nest;
    uint8_t is_key, integer, lead; /* string: an object key; number: integer only; UTF-8 lead byte */
    uint16_t pos;                  /* literal / enum / key position, digits of the number's part, bytes left of a UTF-8 char */
    int16_t cur;                   /* object: the property being written */
    const struct srv_json_node *node;
    const char *lit;               /* literal text */
    uint64_t used;                 /* object: properties written; key: the object's, for its cost */
    uint64_t alive;                /* enum / key: candidates still matching */
};

struct srv_json_matcher {
    struct srv_json_node *root;
    struct srv_json_node **nodes;  /* every compiled node, freed together */
    size_t n_nodes, cap_nodes;
    int depth;
    struct srv_json_frame f[SRV_JSON_MAX_FRAMES];
    int below[SRV_JSON_MAX_FRAMES + 1]; /* below[i]: closing cost of frames [0, i) */
};

/* ---------------------------------------------------------------------------------------
 * Schema compilation
 * ------------------------------------------------------------------------------------ */

static struct srv_json_node *node_new(struct srv_json_matcher *m) {
    if (m->n_nodes == m->cap_nodes) {
        const size_t cap = m->cap_nodes ? 2 * m->cap_nodes : 16;
        struct srv_json_node **v = realloc(m->nodes, cap * sizeof *v);
        if (!v) return NULL;
        m->nodes = v;
        m->cap_nodes = cap;
    }
    struct srv_json_node *n = calloc(1, sizeof *n);
    if (n) m->nodes[m->n_nodes++] = n;
    return n;
}

static void node_free(struct srv_json_node *n) {
    for (int i = 0; i < n->n_props; i++) free(n->names[i]);
    for (int i = 0; i < n->n_enum; i++) free(n->enum_txt[i]);
    free(n->names), free(n->name_len), free(n->props), free(n->enum_txt), free(n->enum_len);
    free(n);
}

/* Bytes of one required member written after others: ,"name":V */
static int member_cost(const struct srv_json_node *o, int i) { return 1 + o->name_len[i] + 3 + o->props[i]->minlen; }

static int missing_cost(const struct srv_json_node *o, uint64_t used) {
    int c = 0;
    for (int i = 0; i < o->n_props; i++)
        if ((o->required >> i & 1) && !(used >> i & 1)) c += member_cost(o, i);
    return c;
}

static int type_bit(const char *t) {
    static const char *const names[] = {"object", "array", "string", "number", "integer", "boolean", "null"};
    for (int i = 0; i < 7; i++)
        if (strcmp(t, names[i]) == 0) return 1 << i;
    return 0;
}

static bool compile(struct srv_json_matcher *m, json_t *sch, const char *path, int depth, struct srv_json_node **out,
                    struct srv_error *e);

static bool compile_object(struct srv_json_matcher *m, struct srv_json_node *n, json_t *props, json_t *req,
                           const char *path, int depth, struct srv_error *e) {
    if (!json_is_object(props) || json_object_size(props) == 0 || json_object_size(props) > 64) {
        srv_error_set(e, 400, "response_format", "%s.properties must be an object of 1 to 64 property schemas", path);
        return false;
    }
    const int np = (int)json_object_size(props);
    n->names = calloc((size_t)np, sizeof *n->names);
    n->name_len = calloc((size_t)np, sizeof *n->name_len);
    n->props = calloc((size_t)np, sizeof *n->props);
    if (!n->names || !n->name_len || !n->props) {
        srv_error_set(e, 500, NULL, "out of memory");
        return false;
    }
    const char *key;
    json_t *v;
    json_object_foreach(props, key, v) {
        const size_t len = strlen(key);
        for (size_t k = 0; k < len; k++)
            if ((unsigned char)key[k] < 0x20 || (unsigned char)key[k] >= 0x7f || key[k] == '"' || key[k] == '\\') {
                srv_error_set(e, 400, "response_format", "%s.properties: property name '%.60s' must be printable "
                              "ASCII without quotes or backslashes", path, key);
                return false;
            }
        if (len == 0 || len > 256) {
            srv_error_set(e, 400, "response_format", "%s.properties: property names must be 1 to 256 bytes", path);
            return false;
        }
        const int i = n->n_props;
        if (!(n->names[i] = strdup(key))) {
            srv_error_set(e, 500, NULL, "out of memory");
            return false;
        }
        n->name_len[i] = (int)len;
        n->n_props++;
        char sub[192];
        snprintf(sub, sizeof sub, "%.100s.properties.%.60s", path, key);
        if (!compile(m, v, sub, depth + 1, &n->props[i], e)) return false;
    }
    if (req && !json_is_null(req)) {
        if (!json_is_array(req)) {
            srv_error_set(e, 400, "response_format", "%s.required must be an array of property names", path);
            return false;
        }
        for (size_t k = 0; k < json_array_size(req); k++) {
            json_t *r = json_array_get(req, k);
            int i = 0;
            while (json_is_string(r) && i < n->n_props && strcmp(n->names[i], json_string_value(r)) != 0) i++;
            if (!json_is_string(r) || i == n->n_props) {
                srv_error_set(e, 400, "response_format", "%s.required[%zu] is not one of its properties", path, k);
                return false;
            }
            n->required |= 1ull << i;
        }
    }
    return true;
}

static bool compile_enum(struct srv_json_node *n, json_t *en, const char *path, struct srv_error *e) {
    if (!json_is_array(en) || json_array_size(en) == 0 || json_array_size(en) > 64) {
        srv_error_set(e, 400, "response_format", "%s.enum must be an array of 1 to 64 values", path);
        return false;
    }
    const size_t ne = json_array_size(en);
    n->enum_txt = calloc(ne, sizeof *n->enum_txt);
    n->enum_len = calloc(ne, sizeof *n->enum_len);
    if (!n->enum_txt || !n->enum_len) {
        srv_error_set(e, 500, NULL, "out of memory");
        return false;
    }
    n->minlen = 1 << 30;
    for (size_t k = 0; k < ne; k++) {
        char *txt = json_dumps(json_array_get(en, k), JSON_COMPACT | JSON_ENCODE_ANY);
        if (!txt || strlen(txt) > 1024) {
            free(txt);
            srv_error_set(e, 400, "response_format", "%s.enum[%zu] is longer than 1024 bytes as JSON", path, k);
            return false;
        }
        n->enum_txt[k] = txt;
        n->enum_len[k] = (int)strlen(txt);
        n->n_enum++;
        n->minlen = HMOE_MIN(n->minlen, n->enum_len[k]);
    }
    return true;
}

static bool compile(struct srv_json_matcher *m, json_t *sch, const char *path, int depth, struct srv_json_node **out,
                    struct srv_error *e) {
    if (depth > SRV_JSON_MAX_NEST) {
        srv_error_set(e, 400, "response_format", "the schema is nested deeper than %d levels", SRV_JSON_MAX_NEST);
        return false;
    }
    if (json_is_true(sch)) { /* "true" is the schema every value matches */
        *out = &any_node;
        return true;
    }
    if (!json_is_object(sch)) {
        srv_error_set(e, 400, "response_format", "%s must be a JSON schema object", path);
        return false;
    }
    static const char *const known[] = {"type", "properties", "required", "enum", "items", "additionalProperties",
                                        "title", "description", "$schema", "$id", "$comment", "examples", "default"};
    const char *key;
    json_t *v;
    json_object_foreach(sch, key, v) {
        size_t k = 0;
        while (k < HMOE_ARRAY_LEN(known) && strcmp(key, known[k]) != 0) k++;
        if (k == HMOE_ARRAY_LEN(known)) {
            srv_error_set(e, 400, "response_format", "%s: the JSON schema keyword '%.60s' is not supported (supported: "
                          "type, properties, required, enum, items, additionalProperties, and the annotations title, "
                          "description, default, examples)", path, key);
            return false;
        }
    }
    struct srv_json_node *n = node_new(m);
    if (!n) {
        srv_error_set(e, 500, NULL, "out of memory");
        return false;
    }
    *out = n;
    json_t *type = json_object_get(sch, "type"), *props = json_object_get(sch, "properties"),
           *items = json_object_get(sch, "items"), *en = json_object_get(sch, "enum"),
           *addl = json_object_get(sch, "additionalProperties");
    if (addl && !json_is_boolean(addl)) {
        srv_error_set(e, 400, "response_format", "%s.additionalProperties: only true or false is supported", path);
        return false;
    }
    if (json_is_string(type)) {
        n->types = (unsigned)type_bit(json_string_value(type));
    } else if (json_is_array(type) && json_array_size(type) > 0) {
        for (size_t k = 0; k < json_array_size(type); k++) {
            json_t *t = json_array_get(type, k);
            const int b = json_is_string(t) ? type_bit(json_string_value(t)) : 0;
            if (!b) {
                n->types = 0;
                break;
            }
            n->types |= (unsigned)b;
        }
    } else if (!type) {
        n->types = props ? T_OBJECT : items ? T_ARRAY : T_ANY;
    }
    if (!n->types) {
        srv_error_set(e, 400, "response_format", "%s.type must be object, array, string, number, integer, boolean or "
                      "null (or an array of them)", path);
        return false;
    }
    if (en) return compile_enum(n, en, path, e);
    if (props && !(n->types & T_OBJECT)) {
        srv_error_set(e, 400, "response_format", "%s has properties but its type is not object", path);
        return false;
    }
    if (props && !compile_object(m, n, props, json_object_get(sch, "required"), path, depth, e)) return false;
    if (items) {
        char sub[192];
        snprintf(sub, sizeof sub, "%.170s.items", path);
        if (!compile(m, items, sub, depth + 1, &n->items, e)) return false;
    }
    /* the shortest value of the allowed types */
    int ml = 1 << 30;
    if (n->types & (T_NUMBER | T_INTEGER)) ml = 1;
    if (n->types & T_OBJECT) {
        int c = 2;
        if (n->required) c = 2 + missing_cost(n, 0) - 1;
        ml = HMOE_MIN(ml, c);
    }
    if (n->types & (T_ARRAY | T_STRING)) ml = HMOE_MIN(ml, 2);
    if (n->types & (T_BOOLEAN | T_NULL)) ml = HMOE_MIN(ml, 4);
    n->minlen = ml;
    return true;
}

/* ---------------------------------------------------------------------------------------
 * The matcher on an overlay: frames [lo, depth) copied from the base state when touched
 * ------------------------------------------------------------------------------------ */

struct trial {
    const struct srv_json_matcher *base;
    int depth, lo;
    struct srv_json_frame f[SRV_JSON_MAX_FRAMES];
};

static struct srv_json_frame *fr(struct trial *t, int i) {
    if (i < t->lo) {
        memcpy(&t->f[i], &t->base->f[i], (size_t)(t->lo - i) * sizeof t->f[0]);
        t->lo = i;
    }
    return &t->f[i];
}

static bool push(struct trial *t, struct srv_json_frame x) {
    if (t->depth >= SRV_JSON_MAX_FRAMES) return false;
    t->f[t->depth] = x;
    if (t->lo > t->depth) t->lo = t->depth;
    t->depth++;
    return true;
}

static bool is_ws(unsigned c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }
static bool is_digit(unsigned c) { return c >= '0' && c <= '9'; }
static bool is_hex(unsigned c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

static int frame_cost(const struct srv_json_frame *f) {
    const struct srv_json_node *o = f->node;
    switch (f->kind) {
    case F_VALUE: return o->minlen;
    case F_LITERAL: return (int)strlen(f->lit) - f->pos;
    case F_ENUM: {
        int c = 1 << 30;
        for (int i = 0; i < o->n_enum; i++)
            if (f->alive >> i & 1) c = HMOE_MIN(c, o->enum_len[i] - f->pos);
        return c;
    }
    case F_KEY: { /* name, '"', ':', the value, the required members left, '}' */
        int c = 1 << 30;
        for (int i = 0; i < o->n_props; i++)
            if (f->alive >> i & 1)
                c = HMOE_MIN(c, o->name_len[i] - f->pos + 2 + o->props[i]->minlen + missing_cost(o, f->used | 1ull << i) + 1);
        return c;
    }
    case F_STRING: {
        const int close = f->st == S_NORMAL ? 1 : f->st == S_ESC ? 2 : f->st == S_HEX ? 4 - f->pos + 1 : f->pos + 1;
        return f->is_key ? close + 3 : close; /* a free object's key: '"', ':', "0", '}' */
    }
    case F_NUMBER:
        return f->st == N_START || f->st == N_MINUS || f->st == N_DOT || f->st == N_E || f->st == N_ESIGN;
    case F_ARRAY: return 1;
    case F_OBJECT:
        switch (f->st) {
        case O_START: return o->n_props && o->required ? missing_cost(o, f->used) - 1 + 1 : 1;
        case O_KEY: return 0; /* the key frame above counts the rest */
        case O_COLON: return 1 + (o->n_props ? o->props[f->cur]->minlen + missing_cost(o, f->used) : 1) + 1;
        case O_AFTER: return (o->n_props ? missing_cost(o, f->used) : 0) + 1;
        case O_NEXT: {
            if (!o->n_props) return 4 + 1; /* "":0} */
            if (missing_cost(o, f->used)) return missing_cost(o, f->used) - 1 + 1;
            int c = 1 << 30;
            for (int i = 0; i < o->n_props; i++)
                if (!(f->used >> i & 1)) c = HMOE_MIN(c, member_cost(o, i) - 1);
            return c + 1;
        }
        }
    }
    return 0;
}

static int trial_dist(struct trial *t) {
    const int lo = HMOE_MIN(t->lo, t->depth);
    int d = t->base->below[lo];
    for (int i = lo; i < t->depth; i++) d += frame_cost(&t->f[i]);
    return d;
}

/* The key of a member: a property name of a schema object, or any string in a free one. */
static bool start_key(struct trial *t, struct srv_json_frame *obj) {
    const struct srv_json_node *o = obj->node;
    obj->st = O_KEY;
    if (!o->n_props) return push(t, (struct srv_json_frame){.kind = F_STRING, .is_key = 1, .nest = obj->nest});
    const uint64_t all = o->n_props == 64 ? ~0ull : (1ull << o->n_props) - 1;
    const uint64_t free_props = all & ~obj->used;
    if (!free_props) return false;
    return push(t, (struct srv_json_frame){.kind = F_KEY, .node = o, .used = obj->used, .alive = free_props,
                                           .nest = obj->nest});
}

/* A key string ended: the object expects ':' (a schema object records which property). */
static void key_done(struct trial *t, int prop) {
    t->depth--;
    struct srv_json_frame *obj = fr(t, t->depth - 1);
    obj->st = O_COLON;
    if (prop >= 0) {
        obj->cur = (int16_t)prop;
        obj->used |= 1ull << prop;
    }
}

static bool ws_ok(struct srv_json_frame *f) { return ++f->ws <= SRV_JSON_MAX_WS; }

static bool utf8_next_ok(const struct srv_json_frame *f, unsigned c) {
    unsigned lo = 0x80, hi = 0xBF;
    const bool first = (f->lead >= 0xE0 && f->lead < 0xF0) ? f->pos == 2 : f->lead >= 0xF0 ? f->pos == 3 : true;
    if (first) {
        if (f->lead == 0xE0) lo = 0xA0;
        else if (f->lead == 0xED) hi = 0x9F;
        else if (f->lead == 0xF0) lo = 0x90;
        else if (f->lead == 0xF4) hi = 0x8F;
    }
    return c >= lo && c <= hi;
}

static bool step(struct trial *t, unsigned c) {
    for (;;) {
        if (t->depth == 0) return false; /* the value is complete: nothing may follow */
        struct srv_json_frame *f = fr(t, t->depth - 1);
        const struct srv_json_node *o = f->node;
        switch (f->kind) {
        case F_VALUE:
            if (is_ws(c)) return ws_ok(f);
            if (o->n_enum) {
                *f = (struct srv_json_frame){.kind = F_ENUM, .node = o, .nest = f->nest,
                                             .alive = o->n_enum == 64 ? ~0ull : (1ull << o->n_enum) - 1};
                continue;
            }
            if (c == '{' && (o->types & T_OBJECT)) {
                if (f->nest >= SRV_JSON_MAX_NEST) return false;
                *f = (struct srv_json_frame){.kind = F_OBJECT, .st = O_START, .node = o->n_props ? o : &object_node,
                                             .nest = (uint8_t)(f->nest + 1), .cur = -1};
                return true;
            }
            if (c == '[' && (o->types & T_ARRAY)) {
                if (f->nest >= SRV_JSON_MAX_NEST) return false;
                *f = (struct srv_json_frame){.kind = F_ARRAY, .st = A_START, .node = o->items ? o->items : &any_node,
                                             .nest = (uint8_t)(f->nest + 1)};
                return true;
            }
            if (c == '"' && (o->types & T_STRING)) {
                *f = (struct srv_json_frame){.kind = F_STRING, .st = S_NORMAL, .nest = f->nest};
                return true;
            }
            if ((c == '-' || is_digit(c)) && (o->types & (T_NUMBER | T_INTEGER))) {
                *f = (struct srv_json_frame){.kind = F_NUMBER, .st = N_START, .nest = f->nest,
                                             .integer = !(o->types & T_NUMBER)};
                continue;
            }
            if ((c == 't' || c == 'f') && (o->types & T_BOOLEAN)) {
                *f = (struct srv_json_frame){.kind = F_LITERAL, .lit = c == 't' ? "true" : "false", .pos = 1};
                return true;
            }
            if (c == 'n' && (o->types & T_NULL)) {
                *f = (struct srv_json_frame){.kind = F_LITERAL, .lit = "null", .pos = 1};
                return true;
            }
            return false;
        case F_LITERAL:
            if (c != (unsigned char)f->lit[f->pos]) return false;
            if (!f->lit[++f->pos]) t->depth--;
            return true;
        case F_ENUM: {
            uint64_t next = 0;
            bool complete = false;
            for (int i = 0; i < o->n_enum; i++) {
                if (!(f->alive >> i & 1)) continue;
                if (o->enum_len[i] == f->pos) complete = true;
                else if ((unsigned char)o->enum_txt[i][f->pos] == c) next |= 1ull << i;
            }
            if (!next) {
                if (!complete) return false;
                t->depth--; /* a whole value matched: the byte is the parent's */
                continue;
            }
            f->alive = next;
            f->pos++;
            bool longer = false;
            for (int i = 0; i < o->n_enum; i++)
                if ((next >> i & 1) && o->enum_len[i] > f->pos) longer = true;
            if (!longer) t->depth--;
            return true;
        }
        case F_KEY: {
            if (c == '"') {
                for (int i = 0; i < o->n_props; i++)
                    if ((f->alive >> i & 1) && o->name_len[i] == f->pos) {
                        key_done(t, i);
                        return true;
                    }
                return false;
            }
            uint64_t next = 0;
            for (int i = 0; i < o->n_props; i++)
                if ((f->alive >> i & 1) && o->name_len[i] > f->pos && (unsigned char)o->names[i][f->pos] == c)
                    next |= 1ull << i;
            if (!next) return false;
            f->alive = next;
            f->pos++;
            return true;
        }
        case F_STRING:
            switch (f->st) {
            case S_NORMAL:
                if (c == '"') {
                    if (f->is_key) key_done(t, -1);
                    else t->depth--;
                    return true;
                }
                if (c == '\\') f->st = S_ESC;
                else if (c < 0x20) return false;
                else if (c >= 0x80) {
                    if (c >= 0xC2 && c <= 0xDF) f->pos = 1;
                    else if (c >= 0xE0 && c <= 0xEF) f->pos = 2;
                    else if (c >= 0xF0 && c <= 0xF4) f->pos = 3;
                    else return false;
                    f->lead = (uint8_t)c;
                    f->st = S_UTF8;
                }
                return true;
            case S_ESC:
                if (c == 'u') {
                    f->st = S_HEX;
                    f->pos = 0;
                    f->lead = 0;
                    return true;
                }
                if (!strchr("\"\\/bfnrt", (int)c) || !c) return false;
                f->st = S_NORMAL;
                return true;
            case S_HEX: /* no \uD800-\uDFFF (a surrogate alone is not a character), no \u0000 */
                if (!is_hex(c)) return false;
                if (f->pos == 0) f->lead = (uint8_t)((c == 'd' || c == 'D') | (c == '0') << 1);
                else if (f->pos == 1 && (f->lead & 1) && c >= '8') return false; /* D8..DF (hex digits >= '8') */
                if (f->pos > 0 && c != '0') f->lead &= 1;
                if (f->pos == 3 && (f->lead & 2) && c == '0') return false;
                if (++f->pos == 4) f->st = S_NORMAL;
                return true;
            case S_UTF8:
                if (!utf8_next_ok(f, c)) return false;
                if (--f->pos == 0) f->st = S_NORMAL;
                return true;
            }
            return false;
        case F_NUMBER: {
            int next = -1;
            switch (f->st) {
            case N_START: next = c == '-' ? N_MINUS : c == '0' ? N_ZERO : is_digit(c) ? N_INT : -1; break;
            case N_MINUS: next = c == '0' ? N_ZERO : is_digit(c) ? N_INT : -1; break;
            case N_ZERO: next = c == '.' && !f->integer ? N_DOT : (c == 'e' || c == 'E') && !f->integer ? N_E : -1; break;
            case N_INT:
                next = is_digit(c) ? N_INT : c == '.' && !f->integer ? N_DOT : (c == 'e' || c == 'E') && !f->integer ? N_E : -1;
                break;
            case N_DOT: next = is_digit(c) ? N_FRAC : -1; break;
            case N_FRAC: next = is_digit(c) ? N_FRAC : c == 'e' || c == 'E' ? N_E : -1; break;
            case N_E: next = c == '+' || c == '-' ? N_ESIGN : is_digit(c) ? N_EXP : -1; break;
            case N_ESIGN: case N_EXP: next = is_digit(c) ? N_EXP : -1; break;
            }
            if (next >= 0) { /* digits counted per part: integer, fraction, exponent */
                const int d = (next == f->st ? f->pos : 0) + is_digit(c);
                if (d <= (next == N_EXP ? 2 : 15)) {
                    f->st = (uint8_t)next;
                    f->pos = (uint16_t)d;
                    return true;
                }
            }
            if (f->st == N_ZERO || f->st == N_INT || f->st == N_FRAC || f->st == N_EXP) {
                t->depth--; /* the number ended: the byte is the parent's */
                continue;
            }
            return false;
        }
        case F_ARRAY:
            if (is_ws(c)) return ws_ok(f);
            f->ws = 0;
            if (c == ']') {
                t->depth--;
                return true;
            }
            if (f->st == A_AFTER) {
                if (c != ',') return false;
                return push(t, (struct srv_json_frame){.kind = F_VALUE, .node = o, .nest = f->nest});
            }
            f->st = A_AFTER;
            if (!push(t, (struct srv_json_frame){.kind = F_VALUE, .node = o, .nest = f->nest})) return false;
            continue;
        case F_OBJECT:
            if (is_ws(c)) return ws_ok(f);
            f->ws = 0;
            switch (f->st) {
            case O_START:
            case O_AFTER:
                if (c == '}') {
                    if (o->n_props && missing_cost(o, f->used)) return false;
                    t->depth--;
                    return true;
                }
                if (f->st == O_AFTER) {
                    if (c != ',') return false;
                    if (o->n_props) {
                        const uint64_t all = o->n_props == 64 ? ~0ull : (1ull << o->n_props) - 1;
                        if (!(all & ~f->used)) return false;
                    }
                    f->st = O_NEXT;
                    return true;
                }
                if (c != '"') return false; /* O_START: the first key */
                return start_key(t, f);
            case O_NEXT:
                if (c != '"') return false;
                return start_key(t, f);
            case O_COLON:
                if (c != ':') return false;
                f->st = O_AFTER;
                return push(t, (struct srv_json_frame){.kind = F_VALUE, .nest = f->nest,
                                                       .node = o->n_props ? o->props[f->cur] : &any_node});
            }
            return false;
        }
        return false;
    }
}

/* ---------------------------------------------------------------------------------------
 * The public side (server_impl.h)
 * ------------------------------------------------------------------------------------ */

static void recompute_below(struct srv_json_matcher *m) {
    m->below[0] = 0;
    for (int i = 0; i < m->depth; i++) m->below[i + 1] = m->below[i] + frame_cost(&m->f[i]);
}

struct srv_json_matcher *srv_json_matcher_new(json_t *schema, struct srv_error *e) {
    struct srv_json_matcher *m = calloc(1, sizeof *m);
    if (!m) {
        srv_error_set(e, 500, NULL, "out of memory");
        return NULL;
    }
    if (!schema) m->root = &object_node; /* json_object: any object */
    else if (!compile(m, schema, "schema", 0, &m->root, e)) {
        srv_json_matcher_free(m);
        return NULL;
    }
    m->depth = 1;
    m->f[0] = (struct srv_json_frame){.kind = F_VALUE, .node = m->root};
    recompute_below(m);
    return m;
}

void srv_json_matcher_free(struct srv_json_matcher *m) {
    if (!m) return;
    for (size_t i = 0; i < m->n_nodes; i++) node_free(m->nodes[i]);
    free(m->nodes);
    free(m);
}

int srv_json_matcher_try(const struct srv_json_matcher *m, const char *s, size_t n) {
    struct trial t;
    t.base = m;
    t.depth = m->depth;
    t.lo = m->depth;
    for (size_t i = 0; i < n; i++)
        if (!step(&t, (unsigned char)s[i])) return -1;
    return trial_dist(&t);
}

bool srv_json_matcher_feed(struct srv_json_matcher *m, const char *s, size_t n) {
    struct trial t;
    t.base = m;
    t.depth = m->depth;
    t.lo = m->depth;
    for (size_t i = 0; i < n; i++)
        if (!step(&t, (unsigned char)s[i])) return false;
    const int lo = HMOE_MIN(t.lo, t.depth);
    memcpy(&m->f[lo], &t.f[lo], (size_t)(t.depth - lo) * sizeof t.f[0]);
    m->depth = t.depth;
    recompute_below(m);
    return true;
}

int srv_json_matcher_dist(const struct srv_json_matcher *m) { return m->below[m->depth]; }
