/* unicode.c — UTF-8 decode/encode, code point classes and the GPT-2 byte map.
 * Relies on the generated ranges in unicode_tables.c (Unicode 15.1, as llama.cpp).
 * Implements tokenizer.md §3 (byte <-> unicode) and the character classes of §4.3. */
#include "text/unicode_impl.h"

/* Latin-1 is looked up on every character of ordinary text: a direct table for it,
 * a binary search over the ranges above it. */
static uint8_t latin1_flags[256];
static int latin1_ready;

static uint8_t ucd_search(uint32_t cpt) {
    uint32_t lo = 0, hi = hmoe_ucd_n_ranges; /* find the last range with start <= cpt */
    while (hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (hmoe_ucd_range_start[mid] <= cpt) lo = mid;
        else hi = mid;
    }
    return hmoe_ucd_range_flags[lo];
}

uint8_t hmoe_ucd_flags(uint32_t cpt) {
    if (cpt < 256) {
        /* Benign race: every thread writes the same bytes before setting the flag. */
        if (!__atomic_load_n(&latin1_ready, __ATOMIC_ACQUIRE)) {
            for (uint32_t c = 0; c < 256; c++) latin1_flags[c] = ucd_search(c);
            __atomic_store_n(&latin1_ready, 1, __ATOMIC_RELEASE);
        }
        return latin1_flags[cpt];
    }
    if (cpt > 0x10FFFF) return 0;
    return ucd_search(cpt);
}

uint8_t hmoe_ucd_case(uint32_t cpt) {
    if (cpt < 0x41) return 0;
    if (cpt < 0x80) return cpt <= 'Z' ? HMOE_UCD_CASE_UPPER : cpt >= 'a' && cpt <= 'z' ? HMOE_UCD_CASE_LOWER : 0;
    if (cpt > 0x10FFFF) return 0;
    uint32_t lo = 0, hi = hmoe_ucd_case_n_ranges; /* the last range with start <= cpt */
    while (hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (hmoe_ucd_case_start[mid] <= cpt) lo = mid;
        else hi = mid;
    }
    return hmoe_ucd_case_class[lo];
}

uint32_t hmoe_utf8_decode(const unsigned char *s, size_t len, size_t *pos) {
    size_t i = *pos;
    unsigned c = s[i];
    size_t need;
    uint32_t cpt;
    if (c < 0x80) {
        *pos = i + 1;
        return c;
    }
    if ((c & 0xE0) == 0xC0) { need = 1; cpt = c & 0x1F; }
    else if ((c & 0xF0) == 0xE0) { need = 2; cpt = c & 0x0F; }
    else if ((c & 0xF8) == 0xF0) { need = 3; cpt = c & 0x07; }
    else goto bad; /* a continuation byte or F8..FF cannot start a character */
    if (len - i <= need) goto bad;
    for (size_t k = 1; k <= need; k++) {
        if ((s[i + k] & 0xC0) != 0x80) goto bad;
        cpt = (cpt << 6) | (s[i + k] & 0x3F);
    }
    /* llama.cpp accepts F4 90.. / F5..F7 leads here but then fails to re-encode them (an
     * exception out of llama_tokenize); we treat them as invalid bytes instead. */
    if (cpt > 0x10FFFF) goto bad;
    *pos = i + need + 1;
    return cpt;
bad:
    *pos = i + 1;
    return 0xFFFD;
}

size_t hmoe_utf8_encode(uint32_t cpt, char *out) {
    unsigned char *o = (unsigned char *)out;
    if (cpt < 0x80) { o[0] = (unsigned char)cpt; return 1; }
    if (cpt < 0x800) {
        o[0] = (unsigned char)(0xC0 | (cpt >> 6));
        o[1] = (unsigned char)(0x80 | (cpt & 0x3F));
        return 2;
    }
    if (cpt < 0x10000) {
        o[0] = (unsigned char)(0xE0 | (cpt >> 12));
        o[1] = (unsigned char)(0x80 | ((cpt >> 6) & 0x3F));
        o[2] = (unsigned char)(0x80 | (cpt & 0x3F));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | (cpt >> 18));
    o[1] = (unsigned char)(0x80 | ((cpt >> 12) & 0x3F));
    o[2] = (unsigned char)(0x80 | ((cpt >> 6) & 0x3F));
    o[3] = (unsigned char)(0x80 | (cpt & 0x3F));
    return 4;
}

/* tokenizer.md §3: printable bytes 0x21-0x7E, 0xA1-0xAC, 0xAE-0xFF stand for themselves;
 * the other 68, in increasing order, for U+0100, U+0101, ... */
static int byte_is_self(unsigned b) {
    return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
}

uint32_t hmoe_byte_to_cpt(uint8_t b) {
    if (byte_is_self(b)) return b;
    uint32_t n = 0; /* rank of b among the non-self bytes */
    for (unsigned x = 0; x < b; x++) n += !byte_is_self(x);
    return 0x100 + n;
}

int hmoe_cpt_to_byte(uint32_t cpt) {
    if (cpt < 0x100) return byte_is_self(cpt) ? (int)cpt : -1;
    if (cpt >= 0x100 + 68) return -1;
    uint32_t n = cpt - 0x100;
    for (unsigned x = 0; x < 256; x++)
        if (!byte_is_self(x) && n-- == 0) return (int)x;
    return -1;
}
