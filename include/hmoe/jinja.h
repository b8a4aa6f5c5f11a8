/* jinja.h — a Jinja2 interpreter for the chat templates stored in GGUF files
 * (tokenizer.chat_template), with the environment Hugging Face transformers renders them in:
 * trim_blocks and lstrip_blocks on, loop controls (break/continue), the `generation` block
 * as a no-op, `tojson` with transformers' separators, `raise_exception` and `strftime_now`.
 *
 * Values follow Python: True/False/None print as such, strings are indexed and sliced by
 * code point, str methods (strip, split, startswith, ...) behave as CPython's. A template
 * is untrusted input (it comes from the model file): parsing and rendering are bounded in
 * nesting depth, loop iterations, output size and time, and every error is returned with
 * the template line:column, never a crash.
 *
 * Used by src/text (the chat render entry point) and src/cli; relies on util (JSON DOM).
 */
#ifndef HMOE_JINJA_H
#define HMOE_JINJA_H

#include <time.h>

#include "hmoe/common.h"

struct hmoe_json;
struct hmoe_jinja; /* a parsed template; read-only after compile, shareable between threads */

/* Parse `len` bytes of template source. A syntax error (unknown tag, unclosed block,
 * unknown filter or test, ...) is HMOE_ERR_FORMAT with "line L:C: what". */
enum hmoe_status hmoe_jinja_compile(const char *src, size_t len, struct hmoe_jinja **out, struct hmoe_err *err);
void hmoe_jinja_free(struct hmoe_jinja *t);

/* Bounds for one render; 0 picks the default shown. */
struct hmoe_jinja_limits {
    uint32_t max_depth;       /* macro call + expression nesting (default 200) */
    uint64_t max_iterations;  /* loop iterations over the whole render (default 1,000,000) */
    size_t max_output;        /* bytes of output (default 64 MiB) */
    double max_seconds;       /* wall time (default 10 s) */
};

struct hmoe_jinja_render_opts {
    struct hmoe_jinja_limits limits;
    time_t now;               /* the date strftime_now formats (local time); 0 = the current time */
};

/* Render with the members of the JSON object `vars` as template variables (NULL: none).
 * On success *out is malloc'd and NUL-terminated (*out_len bytes, may contain NUL; out_len
 * may be NULL). raise_exception(msg) in the template is HMOE_ERR_ARG with its message;
 * other render errors (type errors, limits) are HMOE_ERR_FORMAT / HMOE_ERR_RANGE, each
 * with the template line:column. */
enum hmoe_status hmoe_jinja_render(const struct hmoe_jinja *t, const struct hmoe_json *vars,
                                   const struct hmoe_jinja_render_opts *opts, char **out, size_t *out_len,
                                   struct hmoe_err *err);

/* The chat prompt as transformers' apply_chat_template builds it: messages (a JSON array
 * of OpenAI-style objects), tools (array or NULL), add_generation_prompt, enable_thinking,
 * bos_token / eos_token (NULL: not defined), then every member of `kwargs` (an object or
 * NULL: --chat-template-kwargs), which overrides the variables before it. */
struct hmoe_jinja_chat {
    const struct hmoe_json *messages;
    const struct hmoe_json *tools;
    bool add_generation_prompt;
    bool enable_thinking;
    const char *bos_token;
    const char *eos_token;
    const struct hmoe_json *kwargs;
};
enum hmoe_status hmoe_jinja_render_chat(const struct hmoe_jinja *t, const struct hmoe_jinja_chat *chat,
                                        const struct hmoe_jinja_render_opts *opts, char **out,
                                        struct hmoe_err *err);

#endif
