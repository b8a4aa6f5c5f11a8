/* jj_lex.c — template source -> tokens, with Jinja's whitespace rules as transformers
 * configures them: trim_blocks (the newline after a block or comment tag is dropped),
 * lstrip_blocks (spaces and tabs before a block or comment tag that starts its line are
 * dropped; `{%+` keeps them), `-` on either side of a tag strips all whitespace on that
 * side, one trailing newline of the template is dropped (keep_trailing_newline off) and
 * line endings read as "\n". Comments disappear here, `{% raw %}` bodies become text.
 */
#include <stdlib.h>
#include <string.h>

#include "text/jinja/jinja_impl.h"

struct lexer {
    struct jj_arena *a;
    struct jj_fail *f;
    const char *src;
    size_t len;
    struct jt *toks;
    size_t n, cap;
    /* position cache for line:column (offsets are asked for in increasing order, mostly) */
    size_t at, line, line_start;
};

static void where(struct lexer *lx, size_t off, uint32_t *line, uint32_t *col) {
    if (off < lx->at) lx->at = 0, lx->line = 1, lx->line_start = 0;
    for (; lx->at < off && lx->at < lx->len; lx->at++)
        if (lx->src[lx->at] == '\n') lx->line++, lx->line_start = lx->at + 1;
    *line = (uint32_t)lx->line;
    *col = (uint32_t)(off - lx->line_start + 1);
}

_Noreturn static void lex_fail(struct lexer *lx, size_t off, const char *msg) {
    uint32_t l, c;
    where(lx, off, &l, &c);
    jj_fail_at(lx->f, HMOE_ERR_FORMAT, l, c, "%s", msg);
}

static struct jt *push(struct lexer *lx, uint8_t k, size_t off) {
    if (lx->n == lx->cap) {
        size_t cap = lx->cap ? lx->cap * 2 : 256;
        struct jt *nt = jj_arena_alloc(lx->a, cap * sizeof *nt);
        if (!nt) lex_fail(lx, off, "out of memory reading the template");
        if (lx->n) memcpy(nt, lx->toks, lx->n * sizeof *nt);
        lx->toks = nt;
        lx->cap = cap;
    }
    struct jt *t = &lx->toks[lx->n++];
    memset(t, 0, sizeof *t);
    t->k = k;
    where(lx, off, &t->line, &t->col);
    return t;
}

static bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
static bool is_name0(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static bool is_digit(char c) { return c >= '0' && c <= '9'; }

static void put_utf8(char *o, size_t *k, uint32_t cp) {
    if (cp < 0x80) o[(*k)++] = (char)cp;
    else if (cp < 0x800) { o[(*k)++] = (char)(0xC0 | cp >> 6); o[(*k)++] = (char)(0x80 | (cp & 0x3F)); }
    else if (cp < 0x10000) {
        o[(*k)++] = (char)(0xE0 | cp >> 12); o[(*k)++] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[(*k)++] = (char)(0x80 | (cp & 0x3F));
    } else {
        o[(*k)++] = (char)(0xF0 | cp >> 18); o[(*k)++] = (char)(0x80 | ((cp >> 12) & 0x3F));
        o[(*k)++] = (char)(0x80 | ((cp >> 6) & 0x3F)); o[(*k)++] = (char)(0x80 | (cp & 0x3F));
    }
}

static int hexval(char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* A quoted string literal at src[p] (Python escapes); returns the offset after it. */
static size_t lex_string(struct lexer *lx, size_t p) {
    char q = lx->src[p];
    size_t start = p++;
    char *o = jj_arena_alloc(lx->a, lx->len - p + 1);
    if (!o) lex_fail(lx, start, "out of memory reading the template");
    size_t k = 0;
    for (;; p++) {
        if (p >= lx->len) lex_fail(lx, start, "unterminated string literal");
        char ch = lx->src[p];
        if (ch == q) break;
        if (ch != '\\') { o[k++] = ch; continue; }
        if (++p >= lx->len) lex_fail(lx, start, "unterminated string literal");
        ch = lx->src[p];
        int digits = 0;
        switch (ch) {
        case 'n': o[k++] = '\n'; break;
        case 't': o[k++] = '\t'; break;
        case 'r': o[k++] = '\r'; break;
        case 'b': o[k++] = '\b'; break;
        case 'f': o[k++] = '\f'; break;
        case 'v': o[k++] = '\v'; break;
        case 'a': o[k++] = '\a'; break;
        case '0': o[k++] = '\0'; break;
        case '\\': case '\'': case '"': o[k++] = ch; break;
        case '\n': break; /* line continuation */
        case 'x': digits = 2; break;
        case 'u': digits = 4; break;
        case 'U': digits = 8; break;
        default: o[k++] = '\\'; o[k++] = ch; break; /* unknown escapes stay as written */
        }
        if (digits) {
            uint32_t cp = 0;
            for (int i = 0; i < digits; i++) {
                int h = p + 1 < lx->len ? hexval(lx->src[p + 1]) : -1;
                if (h < 0) lex_fail(lx, p, "truncated \\x / \\u escape in a string literal");
                cp = cp << 4 | (uint32_t)h;
                p++;
            }
            if (cp > 0x10FFFF) lex_fail(lx, p, "\\U escape beyond U+10FFFF");
            put_utf8(o, &k, cp);
        }
    }
    struct jt *t = push(lx, JT_STR, start);
    t->s = o;
    t->n = (uint32_t)k;
    o[k] = 0;
    return p + 1;
}

static const char *const ops2[] = {"**", "//", "==", "!=", "<=", ">=", NULL};
static const char ops1[] = "+-*/%~<>=()[]{},.:|!";

/* Tokens inside {{ }} or {% %} from src[p]; returns the offset after the closing tag and
 * whether it ended with '-'. */
static size_t lex_tag(struct lexer *lx, size_t p, char kind, size_t tag_start, bool *strip_after) {
    int braces = 0;
    for (;;) {
        while (p < lx->len && is_ws(lx->src[p])) p++;
        if (p >= lx->len) lex_fail(lx, tag_start, kind == '{' ? "'{{' is never closed by '}}'" : "'{%' is never closed by '%}'");
        const char *s = lx->src + p;
        char close = kind == '{' ? '}' : '%';
        size_t rest = lx->len - p;
        if (braces == 0 || kind == '%') {
            if (rest >= 3 && s[0] == '-' && s[1] == close && s[2] == '}') { *strip_after = true; return p + 3; }
            if (rest >= 2 && s[0] == close && s[1] == '}') { *strip_after = false; return p + 2; }
        }
        char ch = s[0];
        if (ch == '\'' || ch == '"') { p = lex_string(lx, p); continue; }
        if (is_name0(ch)) {
            size_t q = p;
            while (q < lx->len && (is_name0(lx->src[q]) || is_digit(lx->src[q]))) q++;
            struct jt *t = push(lx, JT_NAME, p);
            t->s = s;
            t->n = (uint32_t)(q - p);
            p = q;
            continue;
        }
        if (is_digit(ch)) {
            size_t q = p;
            bool is_float = false;
            while (q < lx->len && (is_digit(lx->src[q]) || lx->src[q] == '_')) q++;
            if (q + 1 < lx->len && lx->src[q] == '.' && is_digit(lx->src[q + 1])) {
                is_float = true;
                q++;
                while (q < lx->len && (is_digit(lx->src[q]) || lx->src[q] == '_')) q++;
            }
            if (q < lx->len && (lx->src[q] == 'e' || lx->src[q] == 'E')) {
                size_t e = q + 1;
                if (e < lx->len && (lx->src[e] == '+' || lx->src[e] == '-')) e++;
                if (e < lx->len && is_digit(lx->src[e])) {
                    is_float = true;
                    q = e;
                    while (q < lx->len && is_digit(lx->src[q])) q++;
                }
            }
            char buf[64];
            size_t k = 0;
            for (size_t i = p; i < q && k < sizeof buf - 1; i++)
                if (lx->src[i] != '_') buf[k++] = lx->src[i];
            buf[k] = 0;
            struct jt *t = push(lx, is_float ? JT_FLOAT : JT_INT, p);
            if (is_float) t->f = strtod(buf, NULL);
            else {
                char *end;
                unsigned long long v = strtoull(buf, &end, 10);
                if (k >= 20 || v > (unsigned long long)INT64_MAX) lex_fail(lx, p, "integer literal too large");
                t->i = (int64_t)v;
            }
            p = q;
            continue;
        }
        size_t n = 0;
        for (int i = 0; ops2[i]; i++)
            if (rest >= 2 && s[0] == ops2[i][0] && s[1] == ops2[i][1]) n = 2;
        if (!n && strchr(ops1, ch) && ch) n = 1;
        if (!n || (n == 1 && ch == '!')) lex_fail(lx, p, "unexpected character in a tag");
        if (ch == '{' || ch == '(' || ch == '[') braces++;
        if ((ch == '}' || ch == ')' || ch == ']') && braces > 0) braces--;
        struct jt *t = push(lx, JT_OP, p);
        t->s = s;
        t->n = (uint32_t)n;
        p += n;
    }
}

static void emit_text(struct lexer *lx, size_t b, size_t e) {
    if (e <= b) return;
    struct jt *t = push(lx, JT_TEXT, b);
    t->s = lx->src + b;
    t->n = (uint32_t)(e - b);
}

/* Is the statement just lexed (tokens from `first`) exactly `{% word %}`? */
static bool stmt_is(struct lexer *lx, size_t first, const char *word) {
    return lx->n == first + 3 && lx->toks[first + 1].k == JT_NAME && lx->toks[first + 1].n == strlen(word) &&
           memcmp(lx->toks[first + 1].s, word, strlen(word)) == 0;
}

/* Find `{% endraw %}` (any whitespace control) from p; its start, body-strip flag, end. */
static bool find_endraw(struct lexer *lx, size_t p, size_t *tag, bool *strip_before, size_t *end, bool *strip_after) {
    for (const char *s; (s = memchr(lx->src + p, '{', lx->len - p)); p = (size_t)(s - lx->src) + 1) {
        size_t q = (size_t)(s - lx->src) + 1;
        if (q >= lx->len || lx->src[q] != '%') continue;
        q++;
        bool minus = q < lx->len && lx->src[q] == '-';
        if (q < lx->len && (lx->src[q] == '-' || lx->src[q] == '+')) q++;
        while (q < lx->len && is_ws(lx->src[q])) q++;
        if (lx->len - q < 6 || memcmp(lx->src + q, "endraw", 6) != 0) continue;
        q += 6;
        while (q < lx->len && is_ws(lx->src[q])) q++;
        bool m2 = q < lx->len && lx->src[q] == '-';
        if (m2) q++;
        if (lx->len - q < 2 || lx->src[q] != '%' || lx->src[q + 1] != '}') continue;
        *tag = (size_t)(s - lx->src);
        *strip_before = minus;
        *end = q + 2;
        *strip_after = m2;
        return true;
    }
    return false;
}

struct jt *jj_lex(struct jj_arena *a, struct jj_fail *f, const char *src_in, size_t len_in, size_t *n_tokens) {
    /* Line endings become "\n" (Jinja reads the source by lines) and one trailing newline goes. */
    char *src = jj_arena_alloc(a, len_in + 1);
    if (!src) jj_fail_at(f, HMOE_ERR_NOMEM, 1, 1, "out of memory reading the template");
    size_t len = 0;
    for (size_t i = 0; i < len_in; i++) {
        if (src_in[i] == '\r') {
            src[len++] = '\n';
            if (i + 1 < len_in && src_in[i + 1] == '\n') i++;
        } else src[len++] = src_in[i];
    }
    if (len && src[len - 1] == '\n') len--;
    src[len] = 0;
    struct lexer lx = {.a = a, .f = f, .src = src, .len = len, .line = 1};
    size_t pos = 0;
    bool strip_next = false, trim_nl_next = false;
    while (pos <= len) {
        size_t tstart = pos;
        for (;;) {
            const char *s = tstart < len ? memchr(src + tstart, '{', len - tstart) : NULL;
            if (!s) { tstart = len; break; }
            tstart = (size_t)(s - src);
            if (tstart + 1 < len && (src[tstart + 1] == '{' || src[tstart + 1] == '%' || src[tstart + 1] == '#')) break;
            tstart++;
        }
        size_t tb = pos, te = tstart;
        if (strip_next) while (tb < te && is_ws(src[tb])) tb++;
        else if (trim_nl_next && tb < te && src[tb] == '\n') tb++;
        strip_next = trim_nl_next = false;
        if (tstart >= len) {
            emit_text(&lx, tb, te);
            break;
        }
        char kind = src[tstart + 1];
        char mod = tstart + 2 < len ? src[tstart + 2] : 0;
        if (mod == '-') {
            while (te > tb && is_ws(src[te - 1])) te--;
        } else if (kind != '{' && mod != '+') {
            size_t j = tstart;
            while (j > tb && (src[j - 1] == ' ' || src[j - 1] == '\t')) j--;
            if (j == 0 || src[j - 1] == '\n') te = j < te ? j : te;
        }
        emit_text(&lx, tb, te);
        size_t p = tstart + 2 + (mod == '-' || mod == '+');
        bool strip_after = false;
        if (kind == '#') {
            const char *e = NULL;
            for (size_t q = p; q + 1 < len; q++)
                if (src[q] == '#' && src[q + 1] == '}') { e = src + q; break; }
            if (!e) lex_fail(&lx, tstart, "'{#' comment is never closed by '#}'");
            strip_after = e > src + p && e[-1] == '-';
            pos = (size_t)(e - src) + 2;
        } else {
            size_t first = lx.n;
            push(&lx, kind == '{' ? JT_OUT_BEGIN : JT_STMT_BEGIN, tstart);
            pos = lex_tag(&lx, p, kind, tstart, &strip_after);
            push(&lx, kind == '{' ? JT_OUT_END : JT_STMT_END, pos - 2);
            if (kind == '%' && stmt_is(&lx, first, "raw")) {
                lx.n = first;
                size_t tag, end;
                bool sb, sa;
                if (!find_endraw(&lx, pos, &tag, &sb, &end, &sa)) lex_fail(&lx, tstart, "'{% raw %}' without '{% endraw %}'");
                size_t rb = pos, re = tag;
                if (strip_after) while (rb < re && is_ws(src[rb])) rb++;
                else if (rb < re && src[rb] == '\n') rb++;
                if (sb) while (re > rb && is_ws(src[re - 1])) re--;
                else {
                    size_t j = tag;
                    while (j > rb && (src[j - 1] == ' ' || src[j - 1] == '\t')) j--;
                    if (j == 0 || src[j - 1] == '\n') re = j < re ? j : re;
                }
                emit_text(&lx, rb, re);
                pos = end;
                strip_after = sa;
            }
        }
        if (strip_after) strip_next = true;
        else if (kind != '{') trim_nl_next = true;
    }
    push(&lx, JT_EOF, len);
    *n_tokens = lx.n;
    return lx.toks;
}
