/* tool_choice.c — tool_choice "required" and a named function: the answer is forced to be a
 * tool call. The generation starts inside the model's tool-call syntax (the rendered prompt ends
 * with "<tool_call>\n", which the answer's parser is fed as if the model had written it) and the
 * JSON grammar constrains what follows to {"name": one of the tools (or the named one),
 * "arguments": an object of that tool's parameters schema}; the closing "\n</tool_call>" is
 * fed to the parser when the JSON is complete. So even a random-weight model answers with a
 * parsed call and finish_reason "tool_calls". A parameters schema outside the grammar's subset
 * constrains the arguments to any JSON object.
 *
 * The call starts as the template writes one, {"name":  (and with a single function to choose,
 * its name and "arguments": too), fed to the grammar as well: the name then comes first, so a
 * streamed call shows its start before its arguments.
 *
 * That is the Qwen3 JSON call format (<tool_call>{...}</tool_call>). The XML form (Qwen3.5 / 3.6,
 * Nemotron-3) and harmony (gpt-oss) start inside their call instead and follow the call grammar of
 * grammar_call.c; other formats refuse a forced call with a 400 that says so.
 * parallel_tool_calls is accepted (a forced answer holds one call).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/server_impl.h"

static const char CALL_PREFIX[] = "<tool_call>\n", CALL_SUFFIX[] = "\n</tool_call>";
/* harmony: a commentary message to a function (gpt-oss.md); the XML form: the function tag opened */
static const char HARMONY_PREFIX[] = "<|channel|>commentary to=functions.", HARMONY_SUFFIX[] = "<|call|>";
static const char XML_PREFIX[] = "<tool_call>\n<function=", XML_SUFFIX[] = "\n</tool_call>";

/* The schema of a call to the tools in `names` (arguments: `params`, stolen, or any object). */
static json_t *call_schema(json_t *names, json_t *params) {
    return json_pack("{s:s, s:{s:{s:O}, s:o}, s:[s, s]}", "type", "object", "properties", "name", "enum", names,
                     "arguments", params ? params : json_pack("{s:s}", "type", "object"), "required", "name", "arguments");
}

/* Append `lead` to the prompt and feed it to the answer's parser, as if the model had written it. */
static bool lead_in(struct srv_job *j, char **prompt, const char *lead, size_t n, struct srv_error *e) {
    char *p = realloc(*prompt, strlen(*prompt) + n + 1);
    if (!p) {
        srv_error_set(e, 500, NULL, "out of memory");
        return false;
    }
    strncat(p, lead, n);
    *prompt = p;
    srv_emit_text(j, lead, n);
    return true;
}

/* Harmony and the XML form: the call grammar of grammar_call.c, the prompt ending inside the call. */
static bool force_call(struct hmoe_server *s, struct srv_job *j, enum hmoe_toolcall_format fmt, json_t *tools,
                       const char *want, char **prompt, struct srv_error *e) {
    const bool harmony = fmt == HMOE_TOOLCALL_HARMONY;
    if (!(j->gp.call = srv_call_matcher_new(s->vocab, fmt, tools, want, e))) return false;
    if (!(j->gp.grammar_logits = malloc((size_t)s->model->cfg.n_vocab * sizeof *j->gp.grammar_logits))) {
        srv_error_set(e, 500, NULL, "out of memory");
        return false;
    }
    j->gp.ignore_eos = false;
    struct srv_buf lead = {0};
    srv_buf_add(&lead, harmony ? HARMONY_PREFIX : XML_PREFIX, strlen(harmony ? HARMONY_PREFIX : XML_PREFIX));
    const bool ok = srv_call_matcher_lead(j->gp.call, s->vocab, &lead);
    if (!ok) srv_error_set(e, 500, NULL, "out of memory");
    const bool done = ok && lead_in(j, prompt, lead.s, lead.n, e);
    srv_buf_free(&lead);
    j->forced_suffix = harmony ? HARMONY_SUFFIX : XML_SUFFIX;
    return done;
}

bool srv_tool_choice(struct hmoe_server *s, json_t *req, struct srv_job *j, char **prompt, struct srv_error *e) {
    json_t *choice = json_object_get(req, "tool_choice"), *tools = json_object_get(req, "tools");
    json_t *ptc = json_object_get(req, "parallel_tool_calls");
    if (ptc && !json_is_null(ptc) && !json_is_boolean(ptc)) {
        srv_error_set(e, 400, "parallel_tool_calls", "'parallel_tool_calls' must be true or false");
        return false;
    }
    if (!choice || json_is_null(choice) || (json_is_string(choice) && (strcmp(json_string_value(choice), "auto") == 0 ||
                                                                       strcmp(json_string_value(choice), "none") == 0)))
        return true;
    const char *want = NULL; /* NULL: any tool ("required") */
    if (json_is_object(choice)) {
        json_t *fn = json_object_get(choice, "function");
        want = json_string_value(json_object_get(fn, "name"));
        if (!want) {
            srv_error_set(e, 400, "tool_choice", "tool_choice must be \"auto\", \"none\", \"required\" or "
                          "{\"type\": \"function\", \"function\": {\"name\": \"...\"}}");
            return false;
        }
    } else if (!json_is_string(choice) || strcmp(json_string_value(choice), "required") != 0) {
        srv_error_set(e, 400, "tool_choice", "tool_choice must be \"auto\", \"none\", \"required\" or "
                      "{\"type\": \"function\", \"function\": {\"name\": \"...\"}}");
        return false;
    }
    if (!json_is_array(tools) || json_array_size(tools) == 0) {
        srv_error_set(e, 400, "tool_choice", "tool_choice asks for a tool call but the request has no 'tools'");
        return false;
    }
    if (j->gp.grammar) {
        srv_error_set(e, 400, "tool_choice", "a forced tool call cannot be combined with response_format");
        return false;
    }
    const enum hmoe_toolcall_format fmt = hmoe_toolcall_format_for(hmoe_chat_fmt_family(s->fmt), s->vocab->chat_template);
    /* Nemotron-3 writes the Qwen3.5 XML form (its <think> opens in the prompt, and a forced call is
     * rendered with thinking off) */
    if (fmt == HMOE_TOOLCALL_HARMONY || fmt == HMOE_TOOLCALL_QWEN35_XML || fmt == HMOE_TOOLCALL_NEMOTRON)
        return force_call(s, j, fmt, tools, want, prompt, e);
    if (fmt != HMOE_TOOLCALL_QWEN3_JSON) {
        srv_error_set(e, 400, "tool_choice", "tool_choice \"required\" or a named function is supported for the "
                      "qwen3-json, qwen35-xml, nemotron and harmony call formats; this model writes calls as %s (use "
                      "\"auto\")",
                      hmoe_toolcall_format_name(fmt));
        return false;
    }
    json_t *names = json_array(), *params = NULL;
    for (size_t k = 0; k < json_array_size(tools); k++) {
        json_t *fn = json_object_get(json_array_get(tools, k), "function");
        const char *name = json_string_value(json_object_get(fn, "name"));
        if (!name || (want && strcmp(name, want) != 0)) continue;
        json_array_append_new(names, json_string(name));
        if (want || json_array_size(tools) == 1) params = json_object_get(fn, "parameters");
    }
    if (json_array_size(names) == 0) {
        json_decref(names);
        srv_error_set(e, 400, "tool_choice", "tool_choice names the function '%.80s', which is not in 'tools'", want);
        return false;
    }
    struct srv_error ignored = {0};
    json_t *schema = call_schema(names, json_is_object(params) ? json_incref(params) : NULL);
    j->gp.grammar = srv_json_matcher_new(schema, &ignored);
    json_decref(schema);
    if (!j->gp.grammar) { /* the parameters use keywords outside the subset: any object */
        schema = call_schema(names, NULL);
        j->gp.grammar = srv_json_matcher_new(schema, e);
        json_decref(schema);
    }
    /* the template's start of a call, as far as it is fixed: the name's member first */
    struct srv_buf lead = {0};
    srv_buf_add(&lead, CALL_PREFIX, sizeof CALL_PREFIX - 1);
    const size_t n_prefix = lead.n;
    srv_buf_add(&lead, "{\"name\": ", 9);
    const size_t n_short = lead.n;
    char *q = json_array_size(names) == 1 ? json_dumps(json_array_get(names, 0), JSON_ENCODE_ANY) : NULL;
    if (q) {
        srv_buf_add(&lead, q, strlen(q)); /* the only name, as a JSON string */
        srv_buf_add(&lead, ", \"arguments\": ", 15);
    }
    free(q);
    json_decref(names);
    if (!j->gp.grammar) {
        srv_buf_free(&lead);
        return false;
    }
    if (lead.oom) {
        srv_buf_free(&lead);
        srv_error_set(e, 500, NULL, "out of memory");
        return false;
    }
    /* a name the grammar spells another way (escapes): the model writes it */
    if (!srv_json_matcher_feed(j->gp.grammar, lead.s + n_prefix, lead.n - n_prefix))
        lead.n = srv_json_matcher_feed(j->gp.grammar, lead.s + n_prefix, n_short - n_prefix) ? n_short : n_prefix;
    if (!(j->gp.grammar_logits = malloc((size_t)s->model->cfg.n_vocab * sizeof *j->gp.grammar_logits))) {
        srv_buf_free(&lead);
        srv_error_set(e, 500, NULL, "out of memory");
        return false;
    }
    j->gp.ignore_eos = false;
    const bool ok = lead_in(j, prompt, lead.s, lead.n, e); /* the parser starts inside the call */
    srv_buf_free(&lead);
    j->forced_suffix = CALL_SUFFIX;
    return ok;
}
