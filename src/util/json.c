/* json.c — recursive-descent JSON parser and string writer (json.h).
 * Input is untrusted (user conversation files): every read is bounds-checked and the
 * nesting depth is capped so a hostile file cannot exhaust the stack. */
#include "hmoe/json.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define JSON_MAX_DEPTH 512

struct parser {
    const char *s;
    size_t len, pos;
    struct hmoe_err *err;
    bool failed;
};

static void fail(struct parser *p, const char *what) {
    if (p->failed) return;
    p->failed = true;
    size_t line = 1, col = 1;
    for (size_t i = 0; i < p->pos && i < p->len; i++) {
        if (p->s[i] == '\n') { line++; col = 1; } else col++;
    }
    HMOE_RAISE(p->err, HMOE_ERR_FORMAT, "JSON error at line %zu column %zu: %s", line, col, what);
}

static void skip_ws(struct parser *p) {
    while (p->pos < p->len) {
        char c = p->s[p->pos];
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r') p->pos++;
        else break;
    }
}

static struct hmoe_json *new_node(struct parser *p, enum hmoe_json_kind k) {
    struct hmoe_json *j = calloc(1, sizeof *j);
    if (!j) { fail(p, "out of memory"); return NULL; }
    j->kind = k;
    return j;
}

/* Growable byte buffer for decoded strings. */
struct buf { char *d; size_t n, cap; };
static bool buf_put(struct buf *b, const void *src, size_t n) {
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 32;
        while (cap < b->n + n + 1) cap *= 2;
        char *d = realloc(b->d, cap);
        if (!d) return false;
        b->d = d;
        b->cap = cap;
    }
    memcpy(b->d + b->n, src, n);
    b->n += n;
    b->d[b->n] = 0;
    return true;
}

static size_t utf8_encode(uint32_t cp, char out[4]) {
    if (cp < 0x80) { out[0] = (char)cp; return 1; }
    if (cp < 0x800) { out[0] = (char)(0xC0 | (cp >> 6)); out[1] = (char)(0x80 | (cp & 0x3F)); return 2; }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12)); out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F)); return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18)); out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F)); out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static bool read_hex4(struct parser *p, uint32_t *out) {
    if (p->len - p->pos < 4) return false;
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        int h = hexval(p->s[p->pos + i]);
        if (h < 0) return false;
        v = v * 16 + (uint32_t)h;
    }
    p->pos += 4;
    *out = v;
    return true;
}

/* Parse a string literal starting at the opening quote; returns a malloc'd buffer. */
static char *parse_string_raw(struct parser *p, size_t *out_len) {
    struct buf b = {0};
    p->pos++; /* opening quote */
    if (!buf_put(&b, "", 0)) { fail(p, "out of memory"); return NULL; }
    while (1) {
        if (p->pos >= p->len) { fail(p, "unterminated string"); free(b.d); return NULL; }
        unsigned char c = (unsigned char)p->s[p->pos];
        if (c == '"') { p->pos++; break; }
        if (c < 0x20) { fail(p, "control character in string"); free(b.d); return NULL; }
        if (c != '\\') {
            size_t start = p->pos;
            while (p->pos < p->len && p->s[p->pos] != '"' && p->s[p->pos] != '\\' &&
                   (unsigned char)p->s[p->pos] >= 0x20)
                p->pos++;
            if (!buf_put(&b, p->s + start, p->pos - start)) { fail(p, "out of memory"); free(b.d); return NULL; }
            continue;
        }
        p->pos++;
        if (p->pos >= p->len) { fail(p, "unterminated escape"); free(b.d); return NULL; }
        char e = p->s[p->pos++];
        char tmp[4];
        size_t tn = 1;
        switch (e) {
        case '"': tmp[0] = '"'; break;
        case '\\': tmp[0] = '\\'; break;
        case '/': tmp[0] = '/'; break;
        case 'b': tmp[0] = '\b'; break;
        case 'f': tmp[0] = '\f'; break;
        case 'n': tmp[0] = '\n'; break;
        case 'r': tmp[0] = '\r'; break;
        case 't': tmp[0] = '\t'; break;
        case 'u': {
            uint32_t cp;
            if (!read_hex4(p, &cp)) { fail(p, "bad \\u escape"); free(b.d); return NULL; }
            if (cp >= 0xD800 && cp <= 0xDBFF && p->len - p->pos >= 6 && p->s[p->pos] == '\\' &&
                p->s[p->pos + 1] == 'u') {
                size_t save = p->pos;
                uint32_t lo;
                p->pos += 2;
                if (read_hex4(p, &lo) && lo >= 0xDC00 && lo <= 0xDFFF)
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                else
                    p->pos = save;
            }
            /* A surrogate without its partner has no UTF-8 form: U+FFFD, as a UTF-8 decoder
             * does with a broken sequence, so that every string this parser returns is valid UTF-8. */
            if (cp >= 0xD800 && cp <= 0xDFFF) cp = 0xFFFD;
            tn = utf8_encode(cp, tmp);
            break;
        }
        default: fail(p, "bad escape"); free(b.d); return NULL;
        }
        if (!buf_put(&b, tmp, tn)) { fail(p, "out of memory"); free(b.d); return NULL; }
    }
    *out_len = b.n;
    return b.d;
}

static struct hmoe_json *parse_value(struct parser *p, int depth);

static bool push_child(struct parser *p, struct hmoe_json *parent, struct hmoe_json *child, char *key, size_t *cap) {
    if (parent->n == *cap) {
        size_t nc = *cap ? *cap * 2 : 4;
        struct hmoe_json **items = realloc(parent->items, nc * sizeof *items);
        if (!items) { fail(p, "out of memory"); return false; }
        parent->items = items;
        if (parent->kind == HMOE_JSON_OBJECT) {
            char **keys = realloc(parent->keys, nc * sizeof *keys);
            if (!keys) { fail(p, "out of memory"); return false; }
            parent->keys = keys;
        }
        *cap = nc;
    }
    parent->items[parent->n] = child;
    if (parent->kind == HMOE_JSON_OBJECT) parent->keys[parent->n] = key;
    parent->n++;
    return true;
}

static struct hmoe_json *parse_container(struct parser *p, int depth, bool is_obj) {
    struct hmoe_json *j = new_node(p, is_obj ? HMOE_JSON_OBJECT : HMOE_JSON_ARRAY);
    if (!j) return NULL;
    size_t cap = 0;
    char close = is_obj ? '}' : ']';
    p->pos++;
    skip_ws(p);
    if (p->pos < p->len && p->s[p->pos] == close) { p->pos++; return j; }
    while (1) {
        char *key = NULL;
        skip_ws(p);
        if (is_obj) {
            if (p->pos >= p->len || p->s[p->pos] != '"') { fail(p, "expected a string key"); goto bad; }
            size_t kl;
            key = parse_string_raw(p, &kl);
            if (!key) goto bad;
            skip_ws(p);
            if (p->pos >= p->len || p->s[p->pos] != ':') { free(key); fail(p, "expected ':'"); goto bad; }
            p->pos++;
        }
        struct hmoe_json *child = parse_value(p, depth + 1);
        if (!child) { free(key); goto bad; }
        if (!push_child(p, j, child, key, &cap)) { free(key); hmoe_json_free(child); goto bad; }
        skip_ws(p);
        if (p->pos >= p->len) { fail(p, "unterminated array or object"); goto bad; }
        char c = p->s[p->pos++];
        if (c == close) return j;
        if (c != ',') { p->pos--; fail(p, is_obj ? "expected ',' or '}'" : "expected ',' or ']'"); goto bad; }
    }
bad:
    hmoe_json_free(j);
    return NULL;
}

static struct hmoe_json *parse_number(struct parser *p) {
    size_t start = p->pos;
    if (p->pos < p->len && p->s[p->pos] == '-') p->pos++;
    size_t digits = 0;
    while (p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9') { p->pos++; digits++; }
    if (!digits) { fail(p, "bad number"); return NULL; }
    if (p->pos < p->len && p->s[p->pos] == '.') {
        p->pos++;
        size_t fd = 0;
        while (p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9') { p->pos++; fd++; }
        if (!fd) { fail(p, "bad number"); return NULL; }
    }
    if (p->pos < p->len && (p->s[p->pos] == 'e' || p->s[p->pos] == 'E')) {
        p->pos++;
        if (p->pos < p->len && (p->s[p->pos] == '+' || p->s[p->pos] == '-')) p->pos++;
        size_t ed = 0;
        while (p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9') { p->pos++; ed++; }
        if (!ed) { fail(p, "bad number"); return NULL; }
    }
    struct hmoe_json *j = new_node(p, HMOE_JSON_NUMBER);
    if (!j) return NULL;
    size_t n = p->pos - start;
    j->str = malloc(n + 1);
    if (!j->str) { free(j); fail(p, "out of memory"); return NULL; }
    memcpy(j->str, p->s + start, n);
    j->str[n] = 0;
    j->str_len = n;
    j->num = strtod(j->str, NULL);
    return j;
}

static bool match_word(struct parser *p, const char *w) {
    size_t n = strlen(w);
    if (p->len - p->pos < n || memcmp(p->s + p->pos, w, n) != 0) return false;
    p->pos += n;
    return true;
}

static struct hmoe_json *parse_value(struct parser *p, int depth) {
    if (depth > JSON_MAX_DEPTH) { fail(p, "nesting too deep"); return NULL; }
    skip_ws(p);
    if (p->pos >= p->len) { fail(p, "unexpected end of input"); return NULL; }
    char c = p->s[p->pos];
    if (c == '{') return parse_container(p, depth, true);
    if (c == '[') return parse_container(p, depth, false);
    if (c == '"') {
        struct hmoe_json *j = new_node(p, HMOE_JSON_STRING);
        if (!j) return NULL;
        j->str = parse_string_raw(p, &j->str_len);
        if (!j->str) { free(j); return NULL; }
        return j;
    }
    if (c == '-' || (c >= '0' && c <= '9')) return parse_number(p);
    if (match_word(p, "true")) { struct hmoe_json *j = new_node(p, HMOE_JSON_BOOL); if (j) j->b = true; return j; }
    if (match_word(p, "false")) return new_node(p, HMOE_JSON_BOOL);
    if (match_word(p, "null")) return new_node(p, HMOE_JSON_NULL);
    fail(p, "unexpected character");
    return NULL;
}

struct hmoe_json *hmoe_json_parse(const char *text, size_t len, struct hmoe_err *err) {
    struct parser p = {.s = text, .len = len, .err = err};
    /* A UTF-8 byte order mark (editors on Windows write one) is not JSON but means nothing: skip it. */
    if (len >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0) p.pos = 3;
    struct hmoe_json *j = parse_value(&p, 0);
    if (!j) return NULL;
    skip_ws(&p);
    if (p.pos != p.len) {
        fail(&p, "trailing characters after the JSON value");
        hmoe_json_free(j);
        return NULL;
    }
    return j;
}

enum hmoe_status hmoe_read_file(const char *path, char **out, size_t *out_len, struct hmoe_err *err) {
    FILE *f = fopen(path, "rb");
    if (!f) return HMOE_RAISE(err, HMOE_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
        fclose(f);
        return HMOE_RAISE(err, HMOE_ERR_IO, "%s: is a directory (give a file)", path);
    }
    struct buf b = {0};
    char chunk[65536];
    size_t n;
    if (!buf_put(&b, "", 0)) { fclose(f); return HMOE_RAISE(err, HMOE_ERR_NOMEM, "%s: out of memory", path); }
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) {
        if (!buf_put(&b, chunk, n)) {
            free(b.d);
            fclose(f);
            return HMOE_RAISE(err, HMOE_ERR_NOMEM, "%s: out of memory reading the file", path);
        }
    }
    bool bad = ferror(f);
    fclose(f);
    if (bad) { free(b.d); return HMOE_RAISE(err, HMOE_ERR_IO, "%s: read error", path); }
    *out = b.d;
    if (out_len) *out_len = b.n;
    return HMOE_OK;
}

struct hmoe_json *hmoe_json_parse_file(const char *path, struct hmoe_err *err) {
    char *text;
    size_t len;
    if (hmoe_read_file(path, &text, &len, err) != HMOE_OK) return NULL;
    struct hmoe_err inner = {0};
    struct hmoe_json *j = hmoe_json_parse(text, len, &inner);
    free(text);
    if (!j) HMOE_RAISE(err, inner.code, "%s: %s", path, inner.msg);
    return j;
}

void hmoe_json_free(struct hmoe_json *j) {
    if (!j) return;
    for (size_t i = 0; i < j->n; i++) {
        hmoe_json_free(j->items[i]);
        if (j->keys) free(j->keys[i]);
    }
    free(j->items);
    free(j->keys);
    free(j->str);
    free(j);
}

const struct hmoe_json *hmoe_json_get(const struct hmoe_json *obj, const char *key) {
    if (!obj || obj->kind != HMOE_JSON_OBJECT) return NULL;
    for (size_t i = 0; i < obj->n; i++)
        if (strcmp(obj->keys[i], key) == 0) return obj->items[i];
    return NULL;
}

double hmoe_json_get_num(const struct hmoe_json *obj, const char *key, double dflt) {
    const struct hmoe_json *v = hmoe_json_get(obj, key);
    return v && v->kind == HMOE_JSON_NUMBER ? v->num : dflt;
}

const char *hmoe_json_get_str(const struct hmoe_json *obj, const char *key, const char *dflt) {
    const struct hmoe_json *v = hmoe_json_get(obj, key);
    return v && v->kind == HMOE_JSON_STRING ? v->str : dflt;
}

bool hmoe_json_get_bool(const struct hmoe_json *obj, const char *key, bool dflt) {
    const struct hmoe_json *v = hmoe_json_get(obj, key);
    return v && v->kind == HMOE_JSON_BOOL ? v->b : dflt;
}

size_t hmoe_utf8_seq_len(const unsigned char *s, size_t n) {
    unsigned char c = s[0];
    size_t len;
    uint32_t min;
    if (c < 0x80) return 1;
    if ((c & 0xE0) == 0xC0) { len = 2; min = 0x80; }
    else if ((c & 0xF0) == 0xE0) { len = 3; min = 0x800; }
    else if ((c & 0xF8) == 0xF0) { len = 4; min = 0x10000; }
    else return 0;
    if (n < len) return 0;
    uint32_t cp = c & (0x3F >> (len - 1));
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return len;
}

void hmoe_json_write_str(FILE *f, const char *s, size_t len) {
    const unsigned char *u = (const unsigned char *)s;
    fputc('"', f);
    size_t i = 0;
    while (i < len) {
        unsigned char c = u[i];
        if (c == '"') { fputs("\\\"", f); i++; }
        else if (c == '\\') { fputs("\\\\", f); i++; }
        else if (c == '\n') { fputs("\\n", f); i++; }
        else if (c == '\r') { fputs("\\r", f); i++; }
        else if (c == '\t') { fputs("\\t", f); i++; }
        else if (c < 0x20) { fprintf(f, "\\u%04x", c); i++; }
        else if (c < 0x80) { fputc(c, f); i++; }
        else {
            size_t sl = hmoe_utf8_seq_len(u + i, len - i);
            if (sl == 0) { fprintf(f, "\\u%04x", c); i++; }
            else { fwrite(u + i, 1, sl, f); i += sl; }
        }
    }
    fputc('"', f);
}

long hmoe_hex_decode(const char *hex, unsigned char *out, size_t out_cap) {
    size_t n = strlen(hex);
    if (n % 2) return -1;
    if (n / 2 > out_cap) return -1;
    for (size_t i = 0; i < n / 2; i++) {
        int hi = hexval(hex[2 * i]), lo = hexval(hex[2 * i + 1]);
        if (hi < 0 || lo < 0) return -1;
        out[i] = (unsigned char)(hi * 16 + lo);
    }
    return (long)(n / 2);
}
