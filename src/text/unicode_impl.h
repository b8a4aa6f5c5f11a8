/* unicode_impl.h — private to src/text: UTF-8 decoding as llama.cpp does it, code point
 * classes from the generated Unicode 15.1 tables, and the GPT-2 byte <-> code point map
 * (tokenizer.md §3, §4.3). */
#ifndef HMOE_TEXT_UNICODE_IMPL_H
#define HMOE_TEXT_UNICODE_IMPL_H

#include <stddef.h>
#include <stdint.h>

/* Code point class flags (one byte per range in unicode_tables.c). */
enum {
    HMOE_UCD_L = 1,  /* \p{L} letter */
    HMOE_UCD_N = 2,  /* \p{N} number */
    HMOE_UCD_M = 4,  /* \p{M} mark */
    HMOE_UCD_WS = 8, /* White_Space (\s) */
};

extern const uint32_t hmoe_ucd_n_ranges;
extern const uint32_t hmoe_ucd_range_start[];
extern const uint8_t hmoe_ucd_range_flags[];

/* HMOE_UCD_* flags of a code point (0 for anything above U+10FFFF). */
uint8_t hmoe_ucd_flags(uint32_t cpt);

/* Letter case for the gpt-4o pre-tokenizer (unicode_case_tables.c): Lu or Lt, Ll, or
 * neither (0: every other letter, and everything that is not a letter). */
enum { HMOE_UCD_CASE_UPPER = 1, HMOE_UCD_CASE_LOWER = 2 };
extern const uint32_t hmoe_ucd_case_n_ranges;
extern const uint32_t hmoe_ucd_case_start[];
extern const uint8_t hmoe_ucd_case_class[];
uint8_t hmoe_ucd_case(uint32_t cpt);

/* Decode one code point at s[*pos] (pos < len) the way llama.cpp's tokenizer does: a lead
 * byte must be followed by enough continuation bytes, but overlong forms and surrogates
 * are accepted. A byte that does not start such a sequence, or a sequence above U+10FFFF,
 * yields U+FFFD and advances by one byte. */
uint32_t hmoe_utf8_decode(const unsigned char *s, size_t len, size_t *pos);

/* Write cpt (<= U+10FFFF) as UTF-8 into out (4 bytes room); returns the byte count. */
size_t hmoe_utf8_encode(uint32_t cpt, char *out);

/* GPT-2 bytes_to_unicode: the code point that stands for byte b in token text. */
uint32_t hmoe_byte_to_cpt(uint8_t b);
/* Inverse: the byte for a code point of token text, or -1 if it stands for none. */
int hmoe_cpt_to_byte(uint32_t cpt);

#endif
