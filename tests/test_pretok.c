/* test_pretok.c — the qwen2 / qwen35 pre-tokenizer word splits on the examples spelled out
 * in tokenizer.md §4.3 (the regex semantics llama.cpp implements), including the one place
 * the two differ (combining marks), the llama3 ("pixtral") digit runs of nemotron_h_moe.md §10, and the Unicode 15.1 class table on sample code points. */
#include "harness.h"
#include "text/text_impl.h"
#include "text/unicode_impl.h"

struct words {
    char s[512];
    size_t at;
    const uint32_t *cpts;
};

static bool collect(void *ctx, size_t start, size_t end) {
    struct words *w = ctx;
    if (w->at) w->s[w->at++] = '|';
    for (size_t i = start; i < end; i++) w->at += hmoe_utf8_encode(w->cpts[i], w->s + w->at);
    w->s[w->at] = 0;
    return true;
}

static void split_case(enum hmoe_vocab_pre pre, const char *text, const char *want) {
    uint32_t cpts[256];
    uint8_t flags[256];
    size_t n = 0, len = strlen(text);
    for (size_t pos = 0; pos < len; n++) {
        cpts[n] = hmoe_utf8_decode((const unsigned char *)text, len, &pos);
        flags[n] = hmoe_ucd_flags(cpts[n]);
    }
    struct words w = {.cpts = cpts};
    hmoe_pretok_qwen_split(pre, cpts, flags, n, collect, &w);
    char name[160];
    snprintf(name, sizeof name, "%s split of '%s'", hmoe_vocab_pre_name(pre), text);
    t_check(strcmp(w.s, want) == 0, name, "expected '%s' got '%s'", want, w.s);
}

int main(void) {
    const enum hmoe_vocab_pre Q2 = HMOE_VOCAB_PRE_QWEN2, Q35 = HMOE_VOCAB_PRE_QWEN35;
    /* tokenizer.md §4.3 rules 1-7 and its worked examples. */
    split_case(Q2, "   Hello", "  | Hello");
    split_case(Q2, "ied 4 \xc2\xbd months", "ied| |4| |\xc2\xbd| months");
    split_case(Q2, "333", "3|3|3");
    split_case(Q2, "don't I'LL", "don|'t| I|'LL");
    split_case(Q2, "\tfoo (bar)!!!\n\nx", "\tfoo| (|bar|)!!!\n\n|x");
    split_case(Q2, "a \n\n b", "a| \n\n| b");
    split_case(Q2, "end  ", "end|  ");
    split_case(Q35, "   Hello", "  | Hello");
    /* The difference: letters + combining marks stay one word in qwen35 only. */
    split_case(Q2, "re\xcc\x81sume\xcc\x81", "re|\xcc\x81sume|\xcc\x81");
    split_case(Q35, "re\xcc\x81sume\xcc\x81", "re\xcc\x81sume\xcc\x81");
    /* llama3 ("pixtral", nemotron_h_moe.md §10): \p{N}{1,3}, every other rule as qwen2. */
    const enum hmoe_vocab_pre L3 = HMOE_VOCAB_PRE_LLAMA3;
    split_case(L3, "12345", "123|45");
    split_case(L3, "a1234567b", "a|123|456|7|b");
    split_case(L3, " 2026 year", " |202|6| year");
    split_case(L3, "don't 3.14159", "don|'t| |3|.|141|59");
    split_case(L3, "ied 4 \xc2\xbd\xc2\xbd months", "ied| |4| |\xc2\xbd\xc2\xbd| months");
    split_case(L3, "\tfoo (bar)!!!\n\nx", "\tfoo| (|bar|)!!!\n\n|x");
    split_case(L3, "end  ", "end|  ");

    /* Unicode 15.1 classes (the version of llama.cpp's tables): CJK Ext. I (new in 15.1)
     * is a letter, U+1C89 (new in 16.0) is not; White_Space has NBSP and U+3000. */
    t_check(hmoe_ucd_flags(0x2EBF0) == HMOE_UCD_L && hmoe_ucd_flags(0x1C89) == 0 &&
                hmoe_ucd_flags(0xA0) == HMOE_UCD_WS && hmoe_ucd_flags(0x3000) == HMOE_UCD_WS &&
                hmoe_ucd_flags(0xBD) == HMOE_UCD_N && hmoe_ucd_flags(0x301) == HMOE_UCD_M &&
                hmoe_ucd_flags('a') == HMOE_UCD_L && hmoe_ucd_flags(0x110000) == 0,
            "unicode class table samples", "unexpected flags");
    /* llama.cpp's lenient decoder: bad bytes -> U+FFFD one at a time; overlongs accepted. */
    size_t pos = 0;
    const unsigned char bad[] = {0xE4, 0xBD, 'A', 0xC0, 0x80, 0xF5, 0x80, 0x80, 0x80};
    uint32_t got[9];
    size_t n = 0;
    while (pos < sizeof bad) got[n++] = hmoe_utf8_decode(bad, sizeof bad, &pos);
    t_check(n == 8 && got[0] == 0xFFFD && got[1] == 0xFFFD && got[2] == 'A' && got[3] == 0 && got[4] == 0xFFFD &&
                got[7] == 0xFFFD,
            "utf-8 decode of invalid input", "n %zu", n);
    return t_summary();
}
