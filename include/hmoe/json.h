/* json.h — a small JSON reader (DOM) and writer helpers.
 *
 * Used by tests (fixtures are JSON), by `template -i conversation.json`, chat
 * /save and /load, and by every `--json` / `-o json` output. RFC 8259: strings are
 * decoded to UTF-8 (\uXXXX and surrogate pairs; a lone surrogate is encoded as its
 * 3-byte WTF-8 form rather than rejected), numbers are kept as double and as the
 * original text (so 64-bit integers survive).
 */
#ifndef HMOE_JSON_H
#define HMOE_JSON_H

#include <stdio.h>

#include "hmoe/common.h"

enum hmoe_json_kind { HMOE_JSON_NULL, HMOE_JSON_BOOL, HMOE_JSON_NUMBER, HMOE_JSON_STRING, HMOE_JSON_ARRAY, HMOE_JSON_OBJECT };

struct hmoe_json {
    enum hmoe_json_kind kind;
    bool b;                   /* BOOL */
    double num;               /* NUMBER */
    char *str;                /* STRING: decoded UTF-8, NUL-terminated; NUMBER: the source text */
    size_t str_len;           /* bytes in str (a decoded string may contain NUL) */
    size_t n;                 /* ARRAY / OBJECT: number of children */
    struct hmoe_json **items; /* children */
    char **keys;              /* OBJECT: key of each child (NUL-terminated) */
};

/* Parse `len` bytes. Returns NULL and fills err (with line:column) on malformed input.
 * Nesting deeper than 512 levels is rejected (no unbounded recursion on hostile input). */
struct hmoe_json *hmoe_json_parse(const char *text, size_t len, struct hmoe_err *err);
/* Read and parse a whole file. */
struct hmoe_json *hmoe_json_parse_file(const char *path, struct hmoe_err *err);
void hmoe_json_free(struct hmoe_json *j);

/* Member of an object by key (first match), or NULL (also when obj is not an object). */
const struct hmoe_json *hmoe_json_get(const struct hmoe_json *obj, const char *key);
/* Convenience readers with defaults for absent/mistyped members. */
double hmoe_json_get_num(const struct hmoe_json *obj, const char *key, double dflt);
const char *hmoe_json_get_str(const struct hmoe_json *obj, const char *key, const char *dflt);
bool hmoe_json_get_bool(const struct hmoe_json *obj, const char *key, bool dflt);

/* Write `s` (len bytes) as a JSON string literal with quotes and escapes. Bytes that are
 * not valid UTF-8 are written as \u00XX of the byte value (lossy but always valid JSON). */
void hmoe_json_write_str(FILE *f, const char *s, size_t len);

/* Bytes of the well-formed UTF-8 sequence at s[0..n) (shortest form, no surrogates, at most
 * U+10FFFF; n >= 1), or 0 when s does not start with one. */
size_t hmoe_utf8_seq_len(const unsigned char *s, size_t n);

/* Decode a hex string ("0a1b...") into bytes; returns the byte count or -1 on bad input. */
long hmoe_hex_decode(const char *hex, unsigned char *out, size_t out_cap);

/* Read a whole file into a malloc'd NUL-terminated buffer. */
enum hmoe_status hmoe_read_file(const char *path, char **out, size_t *out_len, struct hmoe_err *err);

#endif
