/* pretok_qwen.c — the qwen2 / qwen35 / llama3 pre-tokenizers (tokenizer.md §4.3,
 * nemotron_h_moe.md §10) as a hand-written scanner over code points, reproducing the regex's
 * leftmost-first alternation
 *   contraction | [^\r\n\p{L}\p{N}]?\p{L}+ | \p{N} | ' '?[^\s\p{L}\p{N}]+[\r\n]*
 *   | \s*[\r\n]+ | \s+(?!\S) | \s+
 * (qwen35: letter runs also take \p{M}, and the punctuation class excludes it; llama3, the
 * pre-tokenizer of "pixtral" vocabularies: \p{N}{1,3}, numbers in runs of up to three) the way
 * llama.cpp's own scanner does, which produced the fixtures. Linear in the input.
 * Relies on the code point classes of unicode_impl.h. */
#include "text/text_impl.h"
#include "text/unicode_impl.h"

#define OUT_OF_RANGE UINT32_MAX

static uint32_t lower_ascii(uint32_t c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }

/* The whitespace alternatives that end the GPT-2-family regexes, at pos:
 * \s*[\r\n]+ | \s+(?!\S) | \s+, else one character that no rule took. Returns the end. */
size_t hmoe_pretok_ws_end(const uint32_t *cpts, const uint8_t *flags, size_t n, size_t pos) {
    size_t nws = 0, last_nl = 0;
    while (pos + nws < n && (flags[pos + nws] & HMOE_UCD_WS)) {
        uint32_t w = cpts[pos + nws];
        if (w == '\r' || w == '\n') last_nl = pos + nws + 1;
        nws++;
    }
    if (last_nl > 0) return last_nl;                     /* \s*[\r\n]+ */
    if (nws > 1 && pos + nws < n) return pos + nws - 1;  /* \s+(?!\S): leave one */
    if (nws > 0) return pos + nws;                       /* \s+ */
    return pos + 1;                                      /* no rule: one character */
}

bool hmoe_pretok_qwen_split(enum hmoe_vocab_pre pre, const uint32_t *cpts, const uint8_t *flags, size_t n,
                            hmoe_pretok_emit_fn emit, void *ctx) {
    /* Classes: what a letter run absorbs, and what ends a punctuation run. */
    const uint8_t word = pre == HMOE_VOCAB_PRE_QWEN35 ? (HMOE_UCD_L | HMOE_UCD_M) : HMOE_UCD_L;
    const uint8_t not_punct = HMOE_UCD_WS | HMOE_UCD_N | word;
#define CPT(i) ((i) < n ? cpts[i] : OUT_OF_RANGE)
#define FLG(i) ((i) < n ? flags[i] : 0)
    size_t pos = 0, start = 0;
    while (pos < n) {
        uint32_t c = cpts[pos];
        uint8_t f = flags[pos];
        /* 1. 's 't 're 've 'm 'll 'd, any case (only ASCII letters lower-case to these). */
        if (c == '\'' && pos + 1 < n) {
            uint32_t c1 = lower_ascii(cpts[pos + 1]);
            if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') {
                pos += 2;
                goto add;
            }
            if (pos + 2 < n) {
                uint32_t c2 = lower_ascii(cpts[pos + 2]);
                if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) {
                    pos += 3;
                    goto add;
                }
            }
        }
        /* 2. one optional non-CR/LF/letter/number character, then a letter run. */
        if (!(c == '\r' || c == '\n' || (f & HMOE_UCD_N)) && ((f & word) || (FLG(pos + 1) & word))) {
            pos++;
            while (FLG(pos) & word) pos++;
            goto add;
        }
        /* 3. one number character (llama3: up to three). */
        if (f & HMOE_UCD_N) {
            pos++;
            if (pre == HMOE_VOCAB_PRE_LLAMA3)
                for (int k = 1; k < 3 && (FLG(pos) & HMOE_UCD_N); k++) pos++;
            goto add;
        }
        /* 4. optional space, a run of "other" characters, then any CR/LF. */
        {
            size_t p = pos + (c == ' ');
            if (!(FLG(p) & not_punct)) {
                while (p < n && !(flags[p] & not_punct)) p++;
                while (CPT(p) == '\r' || CPT(p) == '\n') p++;
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
