/* pretok_gpt4o.c — the "gpt-4o" pre-tokenizer of o200k vocabularies (gpt-oss.md, tokenizer.md
 * §6) as a hand-written scanner over code points that reproduces the regex's leftmost-first
 * alternation with backtracking:
 *   1. [^\r\n\p{L}\p{N}]? [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]* [\p{Ll}\p{Lm}\p{Lo}\p{M}]+ contraction?
 *   2. [^\r\n\p{L}\p{N}]? [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+ [\p{Ll}\p{Lm}\p{Lo}\p{M}]* contraction?
 *   3. \p{N}{1,3}
 *   4. ' '? [^\s\p{L}\p{N}]+ [\r\n/]*
 *   5. \s*[\r\n]+   6. \s+(?!\S)   7. \s+
 * where contraction = 's|'t|'re|'ve|'m|'ll|'d in any ASCII case. Call the first bracket class
 * "upper-like" (U) and the second "lower-like" (W): Lm, Lo and marks are in both. Rules 1 and 2
 * then split "HelloWorld" into Hello|World and "ABCdef" stays whole. Linear in the input.
 * Relies on the code point classes and the letter case of unicode_impl.h. */
#include "text/text_impl.h"
#include "text/unicode_impl.h"

#define OUT_OF_RANGE UINT32_MAX

/* Class of one code point for rules 1 and 2. */
enum { CLS_NONE = 0, CLS_U = 1, CLS_W = 2, CLS_BOTH = CLS_U | CLS_W };

static unsigned word_class(uint32_t cpt, uint8_t flags) {
    if (flags & HMOE_UCD_M) return CLS_BOTH;
    if (!(flags & HMOE_UCD_L)) return CLS_NONE;
    switch (hmoe_ucd_case(cpt)) {
    case HMOE_UCD_CASE_UPPER: return CLS_U; /* Lu, Lt */
    case HMOE_UCD_CASE_LOWER: return CLS_W; /* Ll */
    default: return CLS_BOTH;               /* Lm, Lo */
    }
}

static uint32_t lower_ascii(uint32_t c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }

/* Length of a contraction at i (0 when none). */
static size_t contraction(const uint32_t *cpts, size_t n, size_t i) {
    if (i + 1 >= n || cpts[i] != '\'') return 0;
    uint32_t c1 = lower_ascii(cpts[i + 1]);
    if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return 2;
    if (i + 2 >= n) return 0;
    uint32_t c2 = lower_ascii(cpts[i + 2]);
    if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) return 3;
    return 0;
}

/* Rule 1 (U* W+) from s without the optional prefix: the end of the match, or 0 if none.
 * U* is greedy: if the upper-like run [s, a) is followed by a lower-only letter, W+ takes
 * the lower-like run from there; otherwise U* gives back characters until W+ can start on
 * one that is in both classes, i.e. the match ends right after the last such character. */
static size_t rule1_at(const uint32_t *cpts, const uint8_t *flags, size_t n, size_t s) {
    size_t a = s, last_both = OUT_OF_RANGE;
    unsigned c = CLS_NONE;
    while (a < n && ((c = word_class(cpts[a], flags[a])) & CLS_U)) {
        if (c == CLS_BOTH) last_both = a;
        a++;
    }
    if (a < n && c == CLS_W) {
        while (a < n && (word_class(cpts[a], flags[a]) & CLS_W)) a++;
        return a;
    }
    return last_both == OUT_OF_RANGE ? 0 : last_both + 1;
}

/* Rule 2 (U+ W*) from s without the prefix: the end of the match, or 0 if none. */
static size_t rule2_at(const uint32_t *cpts, const uint8_t *flags, size_t n, size_t s) {
    size_t a = s;
    while (a < n && (word_class(cpts[a], flags[a]) & CLS_U)) a++;
    if (a == s) return 0;
    while (a < n && (word_class(cpts[a], flags[a]) & CLS_W)) a++;
    return a;
}

bool hmoe_pretok_gpt4o_split(const uint32_t *cpts, const uint8_t *flags, size_t n, hmoe_pretok_emit_fn emit,
                             void *ctx) {
    const uint8_t not_punct = HMOE_UCD_WS | HMOE_UCD_L | HMOE_UCD_N;
#define CPT(i) ((i) < n ? cpts[i] : OUT_OF_RANGE)
#define FLG(i) ((i) < n ? flags[i] : 0)
    size_t pos = 0, start = 0;
    while (pos < n) {
        uint32_t c = cpts[pos];
        uint8_t f = flags[pos];
        /* 1-2. The optional prefix is one character that is not CR, LF, letter or number; the
         * regex tries it taken first, then not taken, for rule 1 before rule 2. */
        {
            bool prefix = !(c == '\r' || c == '\n' || (f & (HMOE_UCD_L | HMOE_UCD_N)));
            size_t end = prefix ? rule1_at(cpts, flags, n, pos + 1) : 0;
            if (!end) end = rule1_at(cpts, flags, n, pos);
            if (!end && prefix) end = rule2_at(cpts, flags, n, pos + 1);
            if (!end) end = rule2_at(cpts, flags, n, pos);
            if (end) {
                pos = end + contraction(cpts, n, end);
                goto add;
            }
        }
        /* 3. one to three number characters. */
        if (f & HMOE_UCD_N) {
            pos++;
            for (int k = 1; k < 3 && (FLG(pos) & HMOE_UCD_N); k++) pos++;
            goto add;
        }
        /* 4. optional space, a run of "other" characters, then any CR / LF / '/'. */
        {
            size_t p = pos + (c == ' ');
            if (p < n && !(flags[p] & not_punct)) {
                while (p < n && !(flags[p] & not_punct)) p++;
                while (CPT(p) == '\r' || CPT(p) == '\n' || CPT(p) == '/') p++;
                pos = p;
                goto add;
            }
        }
        /* 5-7. whitespace runs. */
        pos = hmoe_pretok_ws_end(cpts, flags, n, pos);
    add:
        if (pos > start && !emit(ctx, start, pos)) return false;
        start = pos;
    }
    return true;
#undef CPT
#undef FLG
}
