/* text.h — the text layer: vocabulary from the GGUF tokenizer.* keys, byte-level BPE
 * tokenization (tokenizer.md §1–4), detokenization with UTF-8-safe streaming (§5), and
 * chat formats: the model's own Jinja template (jinja.h) or built-in renderers of the
 * Qwen3, Qwen3.5/3.6, Nemotron-3 and ChatML families (chat-templates.md §1, §2).
 *
 * Serves src/cli and src/model; relies on gguf (reading the keys) and util (errors, JSON).
 * Behaviour follows llama.cpp, which produced the fixtures: same pre-tokenizer splits,
 * same special-token partitioning, same token attributes and EOG set.
 */
#ifndef HMOE_TEXT_H
#define HMOE_TEXT_H

#include "hmoe/common.h"
#include "hmoe/gguf.h"

/* ---------------------------------------------------------------------------------------
 * Vocabulary
 * ------------------------------------------------------------------------------------ */

/* Token attributes (a bit set: llama.cpp may add CONTROL to a NORMAL token, e.g. "</s>").
 * From tokenizer.ggml.token_type (tokenizer.md §2) plus the by-text overrides. */
enum hmoe_token_attr {
    HMOE_TOKEN_NORMAL = 1u << 0,       /* byte-level BPE text: decoded through the byte map */
    HMOE_TOKEN_UNKNOWN = 1u << 1,      /* like CONTROL */
    HMOE_TOKEN_CONTROL = 1u << 2,      /* <|im_start|>...: parsed only with parse_special, hidden unless rendered */
    HMOE_TOKEN_USER_DEFINED = 1u << 3, /* <think>...: always matched, always rendered raw */
    HMOE_TOKEN_UNUSED = 1u << 4,       /* [PADn]: renders as nothing */
    HMOE_TOKEN_BYTE = 1u << 5,         /* SPM-style byte token (not used by gpt2 vocabularies) */
};

/* Pre-tokenizers implemented (tokenizer.ggml.pre). */
enum hmoe_vocab_pre {
    HMOE_VOCAB_PRE_QWEN2,  /* "qwen2" (+ "deepseek-r1-qwen", "kormo", "f2llmv2"): Qwen2/2.5/3, Qwen3-MoE */
    HMOE_VOCAB_PRE_QWEN35, /* "qwen35": Qwen3.5 / 3.6 (letter runs absorb \p{M}) */
    HMOE_VOCAB_PRE_LLAMA3, /* "pixtral" (Nemotron-3), "llama3", "llama-v3", "llama-bpe": numbers in runs of
                              up to 3 digits, a word that is itself a token is emitted whole (ignore_merges),
                              BOS added unless tokenizer.ggml.add_bos_token is false */
    HMOE_VOCAB_PRE_GPT4O,  /* "gpt-4o": o200k (gpt-oss); case-split letter runs, numbers in runs of up to 3 */
};

#define HMOE_TOKEN_NONE (-1)

/* A loaded vocabulary. Read-only after hmoe_vocab_load; safe to share between threads. */
struct hmoe_vocab {
    uint32_t n_tokens;
    const char **text;       /* [n_tokens] token text as stored in the GGUF (byte-level form for NORMAL) */
    uint32_t *text_len;      /* [n_tokens] bytes of text[i] (texts are also NUL-terminated) */
    uint8_t *attr;           /* [n_tokens] enum hmoe_token_attr bits */
    const char **piece;      /* [n_tokens] detokenized bytes with specials rendered (empty for UNUSED) */
    uint32_t *piece_len;     /* [n_tokens] */
    uint32_t n_merges;
    enum hmoe_vocab_pre pre;
    int32_t bos_id, eos_id, eot_id, eom_id, unk_id, pad_id; /* HMOE_TOKEN_NONE when absent */
    int32_t fim_pre_id, fim_suf_id, fim_mid_id, fim_pad_id, fim_rep_id, fim_sep_id;
    bool add_bos, add_eos;   /* tokenizer.ggml.add_bos_token / add_eos_token (false for Qwen) */
    int32_t *eog_ids;        /* [n_eog] end-of-generation ids, ascending */
    uint32_t n_eog;
    char *chat_template;     /* tokenizer.chat_template (NUL-terminated copy), or NULL */
    void *impl;              /* private: hash maps, merge table, special-token list */
};

/* Load the vocabulary of `g` (tokenizer.ggml.model must be "gpt2", pre one of the above).
 * A missing or mistyped required key (model, tokens, merges), an unsupported tokenizer or
 * pre-tokenizer is an error that names the file and the key. The vocab copies what it
 * needs: `g` may be freed afterwards. */
enum hmoe_status hmoe_vocab_load(const struct hmoe_gguf *g, struct hmoe_vocab **out, struct hmoe_err *err);
void hmoe_vocab_free(struct hmoe_vocab *v);

/* True when `id` ends generation (tokenizer.md §2: <|im_end|>, <|endoftext|>, FIM pad/repo/sep, EOS, ...). */
bool hmoe_vocab_is_eog(const struct hmoe_vocab *v, int32_t id);
/* Id of the token whose text is exactly `text`, or HMOE_TOKEN_NONE. */
int32_t hmoe_vocab_find(const struct hmoe_vocab *v, const char *text, size_t len);
/* Name of the pre-tokenizer ("qwen2", "qwen35"). */
const char *hmoe_vocab_pre_name(enum hmoe_vocab_pre pre);

/* ---------------------------------------------------------------------------------------
 * Tokenization
 * ------------------------------------------------------------------------------------ */

/* Tokenize `len` bytes of `text` (need not be NUL-terminated, may be empty, may be invalid
 * UTF-8: as llama.cpp, each byte that does not start a well-formed sequence becomes U+FFFD).
 * add_special: prepend BOS / append EOS when the vocab asks for them (never for Qwen).
 * parse_special: match CONTROL tokens such as <|im_start|> in the text (USER_DEFINED ones
 * such as <think> are matched either way). On success *ids is malloc'd (free() it; NULL
 * when *n_ids is 0). */
enum hmoe_status hmoe_tokenize(const struct hmoe_vocab *v, const char *text, size_t len, bool add_special,
                               bool parse_special, int32_t **ids, size_t *n_ids, struct hmoe_err *err);

/* ---------------------------------------------------------------------------------------
 * Detokenization
 * ------------------------------------------------------------------------------------ */

/* Bytes of one token (tokenizer.md §5): NORMAL decoded through the byte map (possibly an
 * incomplete UTF-8 sequence), USER_DEFINED raw, CONTROL/UNKNOWN raw only when
 * render_special (else empty), UNUSED empty. Out-of-range ids give an empty piece.
 * The returned bytes belong to the vocab. */
const char *hmoe_token_to_piece(const struct hmoe_vocab *v, int32_t id, bool render_special, size_t *len);

/* Concatenated pieces of `n` ids into a malloc'd NUL-terminated buffer (*out, *out_len).
 * remove_special drops a leading BOS / trailing EOS the vocab auto-adds (llama_detokenize). */
enum hmoe_status hmoe_detokenize(const struct hmoe_vocab *v, const int32_t *ids, size_t n, bool remove_special,
                                 bool render_special, char **out, size_t *out_len, struct hmoe_err *err);

/* Streaming detokenizer for `run` / `chat`: push one id at a time and print only what is
 * returned, which always ends on a complete UTF-8 character; an incomplete trailing
 * sequence is held back until the next token completes it (or flush). */
struct hmoe_detok_stream {
    const struct hmoe_vocab *vocab;
    bool render_special;
    char pending[4];   /* bytes of an incomplete UTF-8 sequence held back */
    size_t n_pending;
    char *buf;         /* output buffer returned by push/flush */
    size_t cap;
};
void hmoe_detok_stream_init(struct hmoe_detok_stream *s, const struct hmoe_vocab *v, bool render_special);
void hmoe_detok_stream_free(struct hmoe_detok_stream *s);
/* Append token `id`; returns the printable bytes (valid until the next call) and their
 * count in *len. NULL only when out of memory. */
const char *hmoe_detok_stream_push(struct hmoe_detok_stream *s, int32_t id, size_t *len);
/* End of stream: returns whatever is held back (an incomplete sequence, as raw bytes). */
const char *hmoe_detok_stream_flush(struct hmoe_detok_stream *s, size_t *len);

/* Length of the longest prefix of s[0..len) that does not end inside a multi-byte UTF-8
 * sequence which could still be completed (the server's incomplete-UTF-8 check, §5). */
size_t hmoe_utf8_complete_prefix(const char *s, size_t len);

/* ---------------------------------------------------------------------------------------
 * Chat templates
 * ------------------------------------------------------------------------------------ */

enum hmoe_chat_template {
    HMOE_CHAT_TEMPLATE_CHATML, /* plain <|im_start|>role\ncontent<|im_end|>\n, no think handling */
    HMOE_CHAT_TEMPLATE_QWEN3,  /* Qwen3 hybrid thinking (chat-templates.md §1) */
    HMOE_CHAT_TEMPLATE_QWEN35, /* Qwen3.5 / Qwen3.6: thinking on by default, XML tool calls (§2) */
    HMOE_CHAT_TEMPLATE_NEMOTRON, /* NVIDIA Nemotron-3: system turn always, <think></think> history (nemotron_h_moe.md §10) */
    HMOE_CHAT_TEMPLATE_HARMONY,  /* gpt-oss harmony: system/developer messages, analysis/final/commentary channels (§3) */
    HMOE_CHAT_TEMPLATE_COUNT,
    HMOE_CHAT_TEMPLATE_UNKNOWN = -1,
};

/* Recognise a GGUF tokenizer.chat_template as one of the built-in families. Returns
 * HMOE_CHAT_TEMPLATE_UNKNOWN for a template the built-in code does not render exactly. */
enum hmoe_chat_template hmoe_chat_template_detect(const char *jinja_text);
/* "chatml", "qwen3", "qwen35", "nemotron", "harmony"; NULL for an invalid value. */
const char *hmoe_chat_template_name(enum hmoe_chat_template t);
/* Parse a name as given to --chat-template; HMOE_CHAT_TEMPLATE_UNKNOWN when not known. */
enum hmoe_chat_template hmoe_chat_template_from_name(const char *name);

/* One tool call of an assistant message (OpenAI shape: {"function": {"name", "arguments"}}). */
struct hmoe_chat_tool_call {
    const char *name;
    const char *arguments;       /* rendered verbatim: a JSON string's value or compact JSON (tojson) */
};

struct hmoe_chat_msg {
    const char *role;              /* "system", "user", "assistant", "tool" ("developer": harmony only) */
    const char *content;           /* never NULL ("" for none) */
    const char *reasoning_content; /* assistant only; NULL when absent */
    const struct hmoe_chat_tool_call *tool_calls;
    size_t n_tool_calls;
};

struct hmoe_json;
struct hmoe_chat_opts {
    bool add_generation_prompt;  /* append "<|im_start|>assistant\n" (default true) */
    bool enable_thinking;        /* false: empty think block after the generation prompt (Qwen3, Qwen3.5) */
    bool preserve_thinking;      /* Qwen3.6 option: keep the reasoning of every assistant turn (Qwen3.5) */
    const char *const *tools;    /* tool definitions as JSON text (tojson form), or NULL */
    size_t n_tools;
    const char *reasoning_effort; /* harmony: "low", "medium" (NULL: the template's default), "high" */
    const char *current_date;     /* harmony: "YYYY-MM-DD" for the system message; NULL = today (local time) */
    const struct hmoe_json *kwargs; /* a request's template variables (an object or NULL): set after the format's
                                       own, so they win (hmoe_chat_fmt_render; the built-in families read
                                       enable_thinking and reasoning_effort of it) */
};

/* Render `n` messages into a malloc'd NUL-terminated prompt (*out). An unknown role, or
 * tools/tool messages for a template that has no tool format, is HMOE_ERR_ARG. */
enum hmoe_status hmoe_chat_render(enum hmoe_chat_template tmpl, const struct hmoe_chat_msg *msgs, size_t n,
                                  const struct hmoe_chat_opts *opts, char **out, struct hmoe_err *err);

/* The parts of one assistant turn as a gpt-oss model writes it after "<|start|>assistant"
 * (harmony header tokens rendered): the text of the last analysis message and of the last final
 * message, as views into the text. Text without any <|channel|> is all final. Used to keep a
 * chat's history in the shape the harmony template expects (reasoning apart from content). */
struct hmoe_harmony_span {
    const char *p;
    size_t n;
};
struct hmoe_harmony_reply {
    struct hmoe_harmony_span analysis, final;
    bool has_final; /* false: the turn ended before its final message (cut, or a tool call) */
};
void hmoe_chat_harmony_reply(const char *text, struct hmoe_harmony_reply *out);

/* Streaming classification of a gpt-oss answer's tokens (harmony_stream.c): push each
 * generated id; the result says whether it is header structure (not shown), analysis text
 * (the reasoning), final text, or text of another channel (commentary). */
enum hmoe_harmony_part { HMOE_HARMONY_HEADER, HMOE_HARMONY_ANALYSIS, HMOE_HARMONY_FINAL, HMOE_HARMONY_OTHER };
struct hmoe_harmony_stream {
    int32_t start, channel, message, constrain, end, ret, call; /* ids, HMOE_TOKEN_NONE when absent */
    bool in_header, naming;
    char name[16];
    size_t name_len;
    enum hmoe_harmony_part part; /* channel of the current message body */
};
void hmoe_harmony_stream_init(struct hmoe_harmony_stream *h, const struct hmoe_vocab *v);
enum hmoe_harmony_part hmoe_harmony_stream_push(struct hmoe_harmony_stream *h, const struct hmoe_vocab *v, int32_t id);

/* Build messages from an OpenAI-style conversation object {"messages": [...], "tools": [...]}
 * (hmoe/json.h DOM). *msgs, the tool-call arrays and *tools (JSON text) are malloc'd and
 * point into `conv` for strings; free them with hmoe_chat_conv_free. Errors name the
 * message index and field. */
struct hmoe_json;
struct hmoe_chat_conv {
    struct hmoe_chat_msg *msgs;
    size_t n_msgs;
    char **tools;
    size_t n_tools;
    struct hmoe_chat_tool_call *calls; /* storage for every message's tool_calls */
    char **owned;                      /* strings allocated by conversion (tojson of arguments) */
    size_t n_owned;
};
enum hmoe_status hmoe_chat_conv_from_json(const struct hmoe_json *conv_json, struct hmoe_chat_conv *conv,
                                          struct hmoe_err *err);
void hmoe_chat_conv_free(struct hmoe_chat_conv *conv);

/* ---------------------------------------------------------------------------------------
 * The chat format of a model: its own Jinja template (jinja.h) or a built-in family
 * ------------------------------------------------------------------------------------ */

/* Where the format comes from. The file's template renders by default; a built-in family
 * is used for a file without one (Qwen3.5 for a qwen35 vocabulary, else ChatML with a
 * warning), for a template the interpreter rejects (warning with its line:col) and when
 * `name` is a built-in family name. */
struct hmoe_chat_fmt_src {
    const char *template_text;   /* tokenizer.chat_template or the --chat-template-file contents; NULL: none */
    const char *template_origin; /* for messages: "tokenizer.chat_template", the file's path */
    bool template_required;      /* the user gave the template: an error in it is an error, not a fallback */
    const char *name;            /* --chat-template: a built-in family name or a Jinja template string; NULL */
    const char *kwargs_json;     /* --chat-template-kwargs: a JSON object of template variables; NULL */
    const char *bos_token, *eos_token; /* the vocabulary's texts, NULL when it has none */
    enum hmoe_chat_template default_family; /* without a template: the architecture's format (UNKNOWN: ChatML, warned) */
};
struct hmoe_chat_fmt;
/* *warning gets a one-line warning for the user ("" when none). Errors: unknown name, bad
 * kwargs JSON, a required template that does not compile. */
enum hmoe_status hmoe_chat_fmt_open(const struct hmoe_chat_fmt_src *src, struct hmoe_chat_fmt **out, char *warning,
                                    size_t warning_cap, struct hmoe_err *err);
void hmoe_chat_fmt_free(struct hmoe_chat_fmt *f);
/* "jinja" when the template renders, else the built-in family's name. */
const char *hmoe_chat_fmt_name(const struct hmoe_chat_fmt *f);
/* The built-in family in use, or the one the template is recognised as (UNKNOWN when
 * neither): which tool-call format to parse back. */
enum hmoe_chat_template hmoe_chat_fmt_family(const struct hmoe_chat_fmt *f);
/* Render messages (opts->tools: tool definitions as JSON text). */
enum hmoe_status hmoe_chat_fmt_render(const struct hmoe_chat_fmt *f, const struct hmoe_chat_msg *msgs, size_t n,
                                      const struct hmoe_chat_opts *opts, char **out, struct hmoe_err *err);
/* Render an OpenAI-style request as the server receives it: `messages` (JSON array),
 * `tools` (array or NULL; opts->tools is ignored) and the request's chat_template_kwargs
 * (an object or NULL), which override the format's own kwargs. The template's
 * raise_exception is HMOE_ERR_ARG with its message (an HTTP 400). */
enum hmoe_status hmoe_chat_fmt_render_json(const struct hmoe_chat_fmt *f, const struct hmoe_json *messages,
                                           const struct hmoe_json *tools, const struct hmoe_chat_opts *opts,
                                           const struct hmoe_json *kwargs, char **out, struct hmoe_err *err);

/* HF-style tojson of a JSON value (", " and ": " separators, key order kept, non-ASCII kept),
 * appended to a malloc'd string. */
char *hmoe_json_to_hf_string(const struct hmoe_json *j);

/* ---------------------------------------------------------------------------------------
 * Tool calls and reasoning in generated text (toolcall*.c)
 *
 * Splits what a model wrote after the generation prompt into the assistant message's content,
 * its reasoning (<think>...</think>, or gpt-oss's analysis channel) and its tool calls, per
 * template family (chat-templates.md §1.5, §2.3, §3; nemotron_h_moe.md §10; gpt-oss.md).
 * Whitespace around the reasoning, at the ends of the content and next to tool calls is dropped
 * (as llama-server does). Tool-call text that does not parse (bad JSON, a missing name, a call
 * cut off by the token limit) stays in the content verbatim.
 * ------------------------------------------------------------------------------------ */

/* One parsed call: id "call_" + 24 letters/digits, the function name, the arguments as JSON text. */
struct hmoe_toolcall {
    char *id;
    char *name;
    char *arguments;
};
/* A parsed assistant message; every string malloc'd and NUL-terminated ("" when empty). */
struct hmoe_toolcalls {
    char *content;
    char *reasoning;
    struct hmoe_toolcall *calls;
    size_t n_calls;
};
enum hmoe_toolcall_format {
    HMOE_TOOLCALL_NONE,        /* reasoning split only; no tool calls */
    HMOE_TOOLCALL_QWEN3_JSON,  /* <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call> */
    HMOE_TOOLCALL_QWEN35_XML,  /* <tool_call>\n<function=F>\n<parameter=P>\nV\n</parameter>\n</function>\n</tool_call> */
    HMOE_TOOLCALL_NEMOTRON,    /* the XML form above (Nemotron-3 opens <think> in the prompt) */
    HMOE_TOOLCALL_HARMONY,     /* gpt-oss: <|channel|>analysis / commentary to=functions.F / final */
};

/* The format of a template family; `jinja_text` (the GGUF's tokenizer.chat_template, NULL allowed)
 * decides when the family is unknown or ChatML (harmony headers, <function= or <tool_call> in it). */
enum hmoe_toolcall_format hmoe_toolcall_format_for(enum hmoe_chat_template tmpl, const char *jinja_text);
/* "none", "qwen3-json", "qwen35-xml", "nemotron", "harmony"; NULL for an invalid value. */
const char *hmoe_toolcall_format_name(enum hmoe_toolcall_format fmt);
/* True when the rendered prompt ends inside an open <think> (Qwen3.5 / Nemotron-3 thinking on,
 * Qwen3 Thinking-2507): the generated text then starts with reasoning. */
bool hmoe_toolcall_prompt_in_think(const char *prompt, size_t len);

struct hmoe_toolcall_opts {
    /* Tool definitions as JSON text, as given to hmoe_chat_opts.tools ({"type": "function",
     * "function": {...}} or the bare function). They type XML parameter values as llama.cpp does:
     * a parameter whose schema is a string stays a string, others are parsed as JSON (a value that
     * is not JSON stays a string). Untyped parameters: JSON when the value parses, else a string.
     * NULL / 0: no schemas. A definition that is not JSON is ignored. */
    const char *const *tools;
    size_t n_tools;
    bool in_think;    /* the text starts inside <think> (hmoe_toolcall_prompt_in_think of the prompt) */
    bool think_in_content; /* --reasoning-format none: the think block stays in the content as written
                              (tags included); `reasoning` stays empty; tool calls are still parsed */
    uint64_t id_seed; /* 0: call ids from /dev/urandom; else the same ids for the same seed (tests) */
};

/* Parse a whole generated text. `in_think` is inferred: a </think> with no <think> before it means
 * the text began inside the think block. Returns HMOE_OK or HMOE_ERR_NOMEM (malformed text is never
 * an error); on error *out is zeroed. Free *out with hmoe_toolcalls_free. */
int hmoe_toolcall_parse(enum hmoe_toolcall_format fmt, const char *text, size_t len, struct hmoe_toolcalls *out,
                        struct hmoe_err *err);
/* The same with options (opts NULL: all defaults, in_think false). */
int hmoe_toolcall_parse_opts(enum hmoe_toolcall_format fmt, const struct hmoe_toolcall_opts *opts, const char *text,
                             size_t len, struct hmoe_toolcalls *out, struct hmoe_err *err);
void hmoe_toolcalls_free(struct hmoe_toolcalls *tc);

/* Streaming form: feed the detokenized pieces as they come; each call returns what may be shown
 * now. Text that could be the start of a tag (a "<", "<tool_c", "<|") is held back until the next
 * piece decides it, tool-call text is held until the call closes, and trailing whitespace until
 * more text follows, so a stream never shows a partial tag. Feeding a text in any split, byte by
 * byte included, then finishing gives the same message as hmoe_toolcall_parse_opts.
 *
 * A call also streams while it is written (`pieces`): its start (id and name) once the name is
 * known, then its arguments text as it grows, so that a client that appends the pieces of a call
 * holds exactly the arguments the call closes with. Qwen3's JSON arguments go out in their final
 * HF form as they are read (separators, keys, numbers, a string's characters); the XML form's JSON
 * is built a parameter at a time, a string parameter's value character by character; harmony's
 * arguments are the model's text as written. A call whose start went out and that then does not
 * close (cut off by the token limit) or does not parse keeps what was sent; as in the whole-text
 * parse it is no call and its text is content. */
struct hmoe_toolcall_stream;
/* One piece of a call being written. `index` numbers the calls whose start was streamed, from 0 in
 * the order they began; `id` and `name` are set on a call's first piece only (NULL after); `args`
 * continues the arguments text of the call's earlier pieces ("" possible on the first). */
struct hmoe_toolcall_piece {
    size_t index;
    const char *id, *name;
    const char *args;
    size_t args_len;
};
/* What one feed / finish released. The pointers stay valid until the next call on the stream.
 * Within one delta the reasoning came before the content; `calls` are the calls that closed
 * during this piece, in order (calls[i].id etc. are owned by the stream); `pieces` are what the
 * calls being written gained during it, in order (the piece of a call that closes in this delta is
 * there too, with the rest of its arguments). */
struct hmoe_toolcall_delta {
    const char *reasoning;
    size_t reasoning_len;
    const char *content;
    size_t content_len;
    const struct hmoe_toolcall *calls;
    size_t n_calls;
    const struct hmoe_toolcall_piece *pieces;
    size_t n_pieces;
};
int hmoe_toolcall_stream_new(enum hmoe_toolcall_format fmt, const struct hmoe_toolcall_opts *opts,
                             struct hmoe_toolcall_stream **out, struct hmoe_err *err);
int hmoe_toolcall_stream_feed(struct hmoe_toolcall_stream *s, const char *piece, size_t len,
                              struct hmoe_toolcall_delta *delta, struct hmoe_err *err);
/* End of the generated text: releases what was held back (an unclosed tool call as content; a
 * gpt-oss call whose <|call|> was the stop token as a call). Feeding after finish is HMOE_ERR_ARG. */
int hmoe_toolcall_stream_finish(struct hmoe_toolcall_stream *s, struct hmoe_toolcall_delta *delta,
                                struct hmoe_err *err);
/* The whole message so far (after finish: the final one), as copies the caller frees. */
int hmoe_toolcall_stream_result(const struct hmoe_toolcall_stream *s, struct hmoe_toolcalls *out,
                                struct hmoe_err *err);
void hmoe_toolcall_stream_free(struct hmoe_toolcall_stream *s);

#endif
