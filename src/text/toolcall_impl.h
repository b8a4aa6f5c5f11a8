/* toolcall_impl.h — private to src/text: the state of the generated-text parser (toolcall.c for
 * the <think> / <tool_call> families, toolcall_harmony.c for gpt-oss) and the helpers that turn a
 * call's text into a name and JSON arguments (toolcall_args.c). */
#ifndef HMOE_TEXT_TOOLCALL_IMPL_H
#define HMOE_TEXT_TOOLCALL_IMPL_H

#include "hmoe/json.h"
#include "hmoe/text.h"
#include "text/strbuf_impl.h"

/* One output stream (content or reasoning): everything released so far, what this feed released,
 * and whitespace held back until text follows it (dropped at the stream's start and end). */
struct tc_out {
    struct hmoe_strbuf all, delta, ws;
    bool started;
};

enum tc_state {
    TC_START,   /* before anything but whitespace: a <think> may open */
    TC_THINK,   /* inside <think>: reasoning until </think> */
    TC_CONTENT, /* content, watching for <tool_call> */
    TC_CALL,    /* inside <tool_call>: collected until </tool_call> */
    TC_H_HEAD,  /* harmony: a message header, until <|message|> */
    TC_H_BODY,  /* harmony: a message body, until <|end|> / <|call|> / <|return|> */
};

enum tc_body { TC_BODY_CONTENT, TC_BODY_REASONING, TC_BODY_CALL };

/* A JSON value being written, scanned as far as it has come: where it ends, where a top-level
 * object's first members lie (in the text and in `out`), and with `hf` its HF tojson form so far in
 * `out` (which the form of the whole value starts with). Scanning resumes at `pos`: each scan is
 * given the text the one before it was given, with more after it. */
enum { TC_JSON_DEPTH = 64, TC_JSON_MEMBERS = 8 };
enum tc_json_status { TC_JSON_MORE, TC_JSON_DONE, TC_JSON_BAD };
struct tc_json_scan {
    enum tc_json_status status;
    size_t pos;                    /* bytes scanned */
    size_t end;                    /* DONE: the bytes of the value, leading whitespace included */
    size_t n_members;
    struct {
        size_t key, key_end;       /* the key in the text, quotes included */
        size_t val, val_end;       /* the value in the text; val 0: not begun, val_end 0: still open */
        size_t out_val, out_end;   /* the value's form in `out` (out_end set with val_end) */
    } members[TC_JSON_MEMBERS];
    bool hf;
    struct hmoe_strbuf out;
    /* the machine */
    int st, depth, esc, member;    /* esc 1: after '\', 2..5: inside \uXXXX; member: the top-level one being written */
    char stack[TC_JSON_DEPTH];     /* the closers of the open containers */
    bool key, key_nul;             /* the string is a key; a NUL was in it (tojson ends the key there) */
    unsigned cp, high;             /* the escape being read; a high surrogate waiting for its partner */
    const char *lit;
    size_t str_at;
};

/* A piece of the delta being built: offsets into the stream's piece text (id and name NUL-ended). */
struct tc_piece {
    size_t index, id, name, args, args_len;
    bool first;
};

/* Where the XML form's partial parse of the call being written stands: the parameters before
 * `at` are in `json`; a string parameter's value may be in progress. */
struct tc_xml_part {
    bool named;               /* the function tag was read: `at` is past it */
    size_t at;                /* the text before this is parsed */
    struct hmoe_strbuf json;  /* "{" and the whole parameters, then the open value's start */
    bool first;               /* no parameter yet */
    bool in_value;            /* a string value is being written */
    size_t before;            /* json's length before the open parameter */
    size_t v_at, v_sent, v_searched; /* the open value: its start, bytes in json, bytes searched for its end */
};

/* The call being written, as far as the stream has shown it (toolcall_live.c), and what its
 * format's parser has read of it. */
struct tc_live {
    bool on;                  /* its start (id, name) has gone out */
    size_t index;             /* its number among the calls whose start went out */
    char id[30];
    struct hmoe_strbuf sent;  /* the arguments text sent so far */
    struct tc_json_scan scan; /* Qwen3 JSON: the call's object; harmony: its arguments */
    bool scan_on;
    struct tc_xml_part xml;
};

struct hmoe_toolcall_stream {
    enum hmoe_toolcall_format fmt;
    enum tc_state state;
    bool finished, oom;
    struct hmoe_strbuf pend;  /* input not yet released (a possible tag start, an open call) */
    size_t scanned;           /* bytes of pend already searched for the closing tag (TC_CALL, TC_H_BODY call) */
    enum tc_body body;        /* harmony: what the current message body is */
    char *recipient;          /* harmony: "functions.NAME" of a call message, or NULL */
    struct tc_out content, reasoning;
    bool think_in_content;    /* the think block goes to content, tags and all */
    struct hmoe_strbuf call_ws; /* content whitespace held when <tool_call> opened: shown if the call fails */
    struct hmoe_toolcall *calls;
    size_t n_calls, cap_calls, first_new; /* calls[first_new..n_calls) closed during this feed */
    struct hmoe_json **tools; /* parsed tool definitions (NULL entries: not JSON) */
    size_t n_tools;
    uint64_t rng;             /* splitmix64 state for call ids */
    struct tc_live live;
    size_t n_begun;           /* calls whose start went out */
    struct hmoe_strbuf piece_text; /* this delta's pieces: ids, names, arguments text */
    struct tc_piece *pieces;
    struct hmoe_toolcall_piece *out_pieces;
    size_t n_pieces, cap_pieces;
};

/* The whitespace that the trimming rules drop (JSON's and Python's str.strip()'s ASCII set). */
static inline bool hmoe_tc_is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

/* Remove the first n bytes of s->pend (and forget how far it was searched). */
void hmoe_tc_consume(struct hmoe_toolcall_stream *s, size_t n);
/* Release text into an output, applying the whitespace rule. */
void hmoe_tc_emit(struct hmoe_toolcall_stream *s, struct tc_out *o, const char *p, size_t n);
/* Forget held whitespace (before a tool call, at </think>, at the end). */
void hmoe_tc_drop_ws(struct tc_out *o);
/* Append a closed call (name and arguments are copied; the id is the streamed call's, else drawn
 * from the stream's rng). */
void hmoe_tc_add_call(struct hmoe_toolcall_stream *s, const char *name, size_t name_len, const char *args);
/* Longest k < strlen(tag) such that the last k bytes of p[0..n) are the first k bytes of tag. */
size_t hmoe_tc_partial_tag(const char *p, size_t n, const char *tag);
/* First occurrence of tag in p[0..n), or NULL. */
const char *hmoe_tc_find(const char *p, size_t n, const char *tag);

/* Parse the text between <tool_call> and </tool_call>. On success *name / *args are malloc'd
 * (args: JSON text) and true is returned; false: malformed (or out of memory: s->oom set). */
bool hmoe_tc_parse_json_call(struct hmoe_toolcall_stream *s, const char *p, size_t n, char **name, char **args);
bool hmoe_tc_parse_xml_call(struct hmoe_toolcall_stream *s, const char *p, size_t n, char **name, char **args);
/* The id for the next call: "call_" + 24 letters/digits into out[30]. */
void hmoe_tc_next_id(struct hmoe_toolcall_stream *s, char out[30]);

/* Harmony: process pend (final: the text has ended). */
void hmoe_tc_harmony_step(struct hmoe_toolcall_stream *s, bool final);

/* --- a call while it is written (toolcall_live.c, toolcall_scan.c) --------------------------- */

/* The call being written has got this far: name (NULL: not known yet) and the arguments text so
 * far (a prefix of what the call closes with). Sends its start the first time a name comes, then
 * what the arguments gained. */
void hmoe_tc_live_update(struct hmoe_toolcall_stream *s, const char *name, size_t name_len, const char *args,
                         size_t args_len);
/* The call closed and parsed: the rest of its arguments goes out and it joins the calls. */
void hmoe_tc_live_close(struct hmoe_toolcall_stream *s, const char *name, size_t name_len, const char *args);
/* The call failed (cut off, or not a call). `begun`: its text had reached its name, so it drew an
 * id, whether or not a piece of it went out (ids then agree however the text was split). */
void hmoe_tc_live_drop(struct hmoe_toolcall_stream *s, bool begun);
/* Forget the delta's pieces (start of a feed) / point out_pieces at them (its end). */
void hmoe_tc_pieces_begin(struct hmoe_toolcall_stream *s);
void hmoe_tc_pieces_end(struct hmoe_toolcall_stream *s);

void hmoe_tc_json_scan_init(struct tc_json_scan *sc, bool hf);
void hmoe_tc_json_scan(struct tc_json_scan *sc, const char *p, size_t n);
void hmoe_tc_json_scan_free(struct tc_json_scan *sc);
/* tojson's string escaping without the quotes (template_json.c). */
void hmoe_hf_str_bytes(struct hmoe_strbuf *b, const char *s, size_t n);

/* The call text after <tool_call> so far (no closing tag in it; the text of the earlier calls for
 * this call with more after it): its name once known (malloc'd) and its arguments as far as they
 * can be sent (pointing into the stream's state, valid until the next call). False while the name
 * is not known. */
bool hmoe_tc_partial_json_call(struct hmoe_toolcall_stream *s, const char *p, size_t n, char **name,
                               const char **args, size_t *args_len);
bool hmoe_tc_partial_xml_call(struct hmoe_toolcall_stream *s, const char *p, size_t n, char **name,
                              const char **args, size_t *args_len);
/* Has the whole call text p[0..n) reached its name (the partial parsers' first answer)? */
bool hmoe_tc_json_call_begun(const char *p, size_t n);
bool hmoe_tc_xml_call_begun(const char *p, size_t n);
/* Forget what the parsers read of the call being written. */
void hmoe_tc_live_reset(struct hmoe_toolcall_stream *s);

#endif
