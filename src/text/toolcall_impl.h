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
};

/* The whitespace that the trimming rules drop (JSON's and Python's str.strip()'s ASCII set). */
static inline bool hmoe_tc_is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

/* Remove the first n bytes of s->pend (and forget how far it was searched). */
void hmoe_tc_consume(struct hmoe_toolcall_stream *s, size_t n);
/* Release text into an output, applying the whitespace rule. */
void hmoe_tc_emit(struct hmoe_toolcall_stream *s, struct tc_out *o, const char *p, size_t n);
/* Forget held whitespace (before a tool call, at </think>, at the end). */
void hmoe_tc_drop_ws(struct tc_out *o);
/* Append a closed call (name and arguments are copied; the id is drawn from the stream's rng). */
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

#endif
