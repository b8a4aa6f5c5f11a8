/* text_impl.h — private to src/text: the vocabulary's lookup structures and the steps of
 * the tokenizer (special-token partition, pre-tokenizer, BPE) that tokenize.c chains.
 * See tokenizer.md §4 for the pipeline these pieces implement. */
#ifndef HMOE_TEXT_IMPL_H
#define HMOE_TEXT_IMPL_H

#include "hmoe/text.h"

/* A growable array of token ids. */
struct hmoe_idvec {
    int32_t *v;
    size_t n, cap;
};
bool hmoe_idvec_push(struct hmoe_idvec *iv, int32_t id);

/* One merge rule keyed by its two symbols. */
struct hmoe_merge_slot {
    uint64_t key;     /* (left symbol + 1) << 32 | (right symbol + 1); 0 = empty slot */
    uint32_t rank;    /* index in tokenizer.ggml.merges (0 = applied first) */
    uint32_t result;  /* symbol of the concatenation */
};

/* BPE works on "symbols": integers standing for strings. Symbols [0, n_tokens) are the
 * vocab's texts (the id llama.cpp's text->id map keeps for a duplicated text); symbols
 * from n_tokens on are strings that no token has but that a merge produces or that stands
 * for a single byte — they let merges chain exactly as llama.cpp's string-keyed map does. */
struct hmoe_vocab_impl {
    uint32_t n_sym, cap_sym;
    const char **sym_text;     /* [n_sym] */
    uint32_t *sym_len;         /* [n_sym] */
    uint32_t *str_slots;       /* open addressing: symbol + 1, 0 = empty */
    uint32_t str_mask;
    struct hmoe_merge_slot *merges;
    uint64_t merge_mask;
    uint32_t byte_sym[256];    /* symbol of each raw byte's byte-level character */
    int32_t *specials;         /* CONTROL / USER_DEFINED / UNKNOWN ids, longest text first */
    uint32_t n_specials;
    char **blocks;             /* owned string storage */
    size_t n_blocks, cap_blocks;
};

/* String -> symbol lookup of the concatenation a+b (either part may be empty); -1 if absent. */
int64_t hmoe_vocab_sym_find2(const struct hmoe_vocab_impl *im, const char *a, size_t alen, const char *b,
                             size_t blen);

/* Merge rule for the adjacent symbols (l, r), or NULL. */
const struct hmoe_merge_slot *hmoe_vocab_merge_find(const struct hmoe_vocab_impl *im, uint32_t l, uint32_t r);

/* BPE-encode one pre-tokenized word (raw UTF-8 bytes, before byte-level mapping) and append
 * its token ids (tokenizer.md §4.4). `scratch` is reused between calls. */
struct hmoe_bpe_scratch;
struct hmoe_bpe_scratch *hmoe_bpe_scratch_new(void);
void hmoe_bpe_scratch_free(struct hmoe_bpe_scratch *s);
bool hmoe_bpe_encode_word(const struct hmoe_vocab *v, struct hmoe_bpe_scratch *s, const unsigned char *word,
                          size_t len, struct hmoe_idvec *out);

/* Pre-tokenizer (tokenizer.md §4.3): split n code points into words; calls emit(start, end)
 * for each [start, end) in order. `flags` are hmoe_ucd_flags of each code point. */
typedef bool (*hmoe_pretok_emit_fn)(void *ctx, size_t start, size_t end);
bool hmoe_pretok_qwen_split(enum hmoe_vocab_pre pre, const uint32_t *cpts, const uint8_t *flags, size_t n,
                            hmoe_pretok_emit_fn emit, void *ctx);
/* pretok_qwen.c: the trailing whitespace rules shared by the GPT-2-family splitters. */
size_t hmoe_pretok_ws_end(const uint32_t *cpts, const uint8_t *flags, size_t n, size_t pos);

/* pretok_gpt4o.c: the same contract for the "gpt-4o" pre-tokenizer (o200k vocabularies). */
bool hmoe_pretok_gpt4o_split(const uint32_t *cpts, const uint8_t *flags, size_t n, hmoe_pretok_emit_fn emit,
                             void *ctx);

/* Detect special ids by token text, fix attributes and build the EOG set and the
 * special-token list, as llama.cpp does after reading the keys (tokenizer.md §2). */
enum hmoe_status hmoe_vocab_setup_specials(struct hmoe_vocab *v, struct hmoe_err *err);
/* Fill v->piece / v->piece_len for every token (after attributes are final). */
enum hmoe_status hmoe_vocab_build_pieces(struct hmoe_vocab *v, struct hmoe_err *err);
/* Keep a malloc'd block for freeing with the vocab. */
bool hmoe_vocab_own(struct hmoe_vocab_impl *im, void *block);

/* template_qwen35.c — append the Qwen3.5/3.6 rendering of msgs (chat-templates.md §2);
 * HMOE_ERR_ARG for what that template refuses (no user message, a late system message,
 * tool-call arguments that are not a JSON object). */
struct hmoe_strbuf;
struct hmoe_json;
enum hmoe_status hmoe_text_render_qwen35(struct hmoe_strbuf *b, const struct hmoe_chat_msg *msgs, size_t n,
                                         const struct hmoe_chat_opts *o, struct hmoe_err *err);
/* template_qwen35.c — Jinja's |trim (Python str.strip(), Unicode whitespace) on p[0..n) in
 * place; a JSON value as a template prints it: strings raw, objects/arrays as tojson, other
 * scalars as Python's str() (`| string`). */
void hmoe_text_strip(const char **p, size_t *n);
void hmoe_text_py_value(struct hmoe_strbuf *b, const struct hmoe_json *v);

/* template_nemotron.c — append the NVIDIA Nemotron-3 rendering of msgs (nemotron_h_moe.md
 * §10); HMOE_ERR_ARG for tool definitions or calls that are not JSON objects. */
enum hmoe_status hmoe_text_render_nemotron(struct hmoe_strbuf *b, const struct hmoe_chat_msg *msgs, size_t n,
                                           const struct hmoe_chat_opts *o, struct hmoe_err *err);

/* template_harmony.c — append the gpt-oss harmony rendering of msgs (chat-templates.md §3);
 * HMOE_ERR_ARG for what that template refuses (channel tags in a field, content and
 * reasoning on one tool-call turn, a tool result without a call, a malformed tool). */
enum hmoe_status hmoe_text_render_harmony(struct hmoe_strbuf *b, const struct hmoe_chat_msg *msgs, size_t n,
                                          const struct hmoe_chat_opts *o, struct hmoe_err *err);

#endif
