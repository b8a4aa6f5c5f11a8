/* grammar_call.c — the grammar of a forced tool call in the formats whose call is not one JSON
 * value: gpt-oss harmony (the prompt ends "to=functions.", then the function's name and a space,
 * then the header tokens "<|constrain|>json<|message|>", which are forced, then the JSON arguments
 * under the JSON grammar of that function's parameters) and the XML form of Qwen3.5 / Qwen3.6
 * (the prompt ends "<function=", then the name and ">\n", then parameters
 * "<parameter=P>\n" VALUE "\n</parameter>\n" with P among the function's parameter names, each at
 * most once, every required one before "</function>").
 *
 * Like the JSON matcher it works on bytes and knows the distance (bytes, each forced token one)
 * to the shortest finished call, so the sampler keeps the call finishable within max_tokens.
 * Its state is small and held by value: a trial runs the bytes on a copy. An XML value may hold
 * any text but the tags that would end it early for the call parser (<parameter=, </function>,
 * <tool_call>, </tool_call>) and a </parameter> that is not the value's end.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/server_impl.h"

#define CALL_MAX_TOOLS 64
#define CALL_MAX_PARAMS 64
#define CALL_MAX_NAME 128          /* bytes of a function or parameter name */
#define CALL_LIT_MAX (CALL_MAX_NAME + 16)
#define CALL_MAX_FORCED 64           /* header tokens (a byte-level vocabulary spells them out) */

static const char PARAM_OPEN[] = "<parameter=", PARAM_CLOSE[] = "\n</parameter>", FN_CLOSE[] = "</function>";
static const char *const VALUE_BAD[] = {"<parameter=", "</function>", "<tool_call>", "</tool_call>", NULL};
enum { PARAM_COST_FIXED = 11 + 2 + 13 + 1 }; /* "<parameter=" ">\n" "\n</parameter>" "\n" */

enum call_stage { CS_NAME, CS_FORCED, CS_JSON, CS_XML_TAG, CS_XML_VALUE, CS_XML_NL, CS_DONE };

struct call_tool {
    char *name;
    size_t name_len;
    struct srv_json_matcher *args; /* harmony: the arguments' grammar */
    int n_params;
    char *params[CALL_MAX_PARAMS];
    size_t param_len[CALL_MAX_PARAMS];
    uint64_t required;
    int tail;                      /* distance from the end of the name's terminator */
};

struct call_state {
    enum call_stage stage;
    int tool;                      /* the chosen one, -1 before */
    char lit[CALL_LIT_MAX];        /* bytes of the literal being matched (name + terminator, a tag) */
    size_t n_lit;
    uint64_t used;                 /* XML: parameters written */
    char tail[16];                 /* XML: the last bytes of the value */
    size_t n_tail;
    int n_forced_done;
};

struct srv_call_matcher {
    bool xml;
    const char *term;              /* after the name: " " (harmony) or ">\n" (XML) */
    struct call_tool tools[CALL_MAX_TOOLS];
    int n_tools;
    int32_t forced[CALL_MAX_FORCED];
    int n_forced;
    int32_t end_id;
    struct call_state st;
};

static int param_cost(const struct call_tool *t, int p) { return (int)t->param_len[p] + PARAM_COST_FIXED; }

/* XML: bytes at least from a tag position to "</function>" with `used` written. */
static int xml_rest(const struct call_tool *t, uint64_t used) {
    int d = (int)sizeof FN_CLOSE - 1;
    for (int p = 0; p < t->n_params; p++)
        if ((t->required >> p & 1) && !(used >> p & 1)) d += param_cost(t, p);
    return d;
}

/* Is lit[0..n) a prefix of a+b+c (a, c NUL-terminated, b of bn bytes)? *whole: it is all of it. */
static bool lit_prefix(const char *lit, size_t n, const char *a, const char *b, size_t bn, const char *c, bool *whole) {
    const size_t an = strlen(a), cn = strlen(c);
    *whole = n == an + bn + cn;
    if (n > an + bn + cn) return false;
    for (size_t i = 0; i < n; i++) {
        const char want = i < an ? a[i] : i < an + bn ? b[i - an] : c[i - an - bn];
        if (lit[i] != want) return false;
    }
    return true;
}

static bool ends_with(const char *s, size_t n, const char *tag) {
    const size_t t = strlen(tag);
    return n >= t && memcmp(s + n - t, tag, t) == 0;
}

/* Longest k < strlen(tag) such that the last k bytes of s[0..n) begin tag. */
static size_t partial_tail(const char *s, size_t n, const char *tag) {
    const size_t t = strlen(tag);
    for (size_t k = t - 1 < n ? t - 1 : n; k > 0; k--)
        if (memcmp(s + n - k, tag, k) == 0) return k;
    return 0;
}

static int st_dist(const struct srv_call_matcher *m, const struct call_state *st) {
    const struct call_tool *t = st->tool >= 0 ? &m->tools[st->tool] : NULL;
    const size_t tn = strlen(m->term);
    switch (st->stage) {
    case CS_NAME: {
        int best = -1;
        for (int k = 0; k < m->n_tools; k++) {
            bool whole;
            const struct call_tool *c = &m->tools[k];
            if (!lit_prefix(st->lit, st->n_lit, "", c->name, c->name_len, m->term, &whole)) continue;
            const int d = (int)(c->name_len + tn - st->n_lit) + c->tail;
            if (best < 0 || d < best) best = d;
        }
        return best;
    }
    case CS_FORCED: return m->n_forced - st->n_forced_done + srv_json_matcher_dist(t->args);
    case CS_JSON: return srv_json_matcher_dist(t->args);
    case CS_XML_TAG: {
        const int rest = xml_rest(t, st->used);
        int best = -1;
        bool whole;
        if (rest == (int)sizeof FN_CLOSE - 1 && lit_prefix(st->lit, st->n_lit, FN_CLOSE, "", 0, "", &whole))
            best = rest - (int)st->n_lit;
        for (int p = 0; p < t->n_params; p++) {
            if ((st->used >> p & 1) || !lit_prefix(st->lit, st->n_lit, PARAM_OPEN, t->params[p], t->param_len[p], ">\n", &whole))
                continue;
            const int after = (t->required >> p & 1) ? rest - param_cost(t, p) : rest;
            const int d = (int)(11 + t->param_len[p] + 2 - st->n_lit) + 13 + 1 + after;
            if (best < 0 || d < best) best = d;
        }
        return best;
    }
    case CS_XML_VALUE: {
        const size_t k = partial_tail(st->tail, st->n_tail, PARAM_CLOSE);
        return (int)(sizeof PARAM_CLOSE - 1 - k) + 1 + xml_rest(t, st->used);
    }
    case CS_XML_NL: return 1 + xml_rest(t, st->used);
    case CS_DONE: return 0;
    }
    return -1;
}

/* One byte on st; false when the grammar refuses it (st is then unusable). */
static bool st_byte(const struct srv_call_matcher *m, struct call_state *st, char c) {
    const struct call_tool *t = st->tool >= 0 ? &m->tools[st->tool] : NULL;
    bool whole;
    switch (st->stage) {
    case CS_NAME: {
        if (st->n_lit == sizeof st->lit) return false;
        st->lit[st->n_lit++] = c;
        bool any = false;
        for (int k = 0; k < m->n_tools; k++) {
            const struct call_tool *cand = &m->tools[k];
            if (!lit_prefix(st->lit, st->n_lit, "", cand->name, cand->name_len, m->term, &whole)) continue;
            any = true;
            if (whole) {
                st->tool = k;
                st->n_lit = 0;
                st->stage = m->xml ? CS_XML_TAG : m->n_forced ? CS_FORCED : CS_JSON;
                return true;
            }
        }
        return any;
    }
    case CS_XML_TAG: {
        if (st->n_lit == sizeof st->lit) return false;
        st->lit[st->n_lit++] = c;
        bool any = false;
        if (xml_rest(t, st->used) == (int)sizeof FN_CLOSE - 1 && lit_prefix(st->lit, st->n_lit, FN_CLOSE, "", 0, "", &whole)) {
            if (whole) {
                st->stage = CS_DONE;
                return true;
            }
            any = true;
        }
        for (int p = 0; p < t->n_params; p++) {
            if ((st->used >> p & 1) || !lit_prefix(st->lit, st->n_lit, PARAM_OPEN, t->params[p], t->param_len[p], ">\n", &whole))
                continue;
            any = true;
            if (whole) {
                st->used |= 1ull << p;
                st->stage = CS_XML_VALUE;
                st->n_tail = 0;
                st->n_lit = 0;
                return true;
            }
        }
        return any;
    }
    case CS_XML_VALUE:
        if (!c) return false;
        if (st->n_tail == sizeof st->tail) {
            memmove(st->tail, st->tail + 1, sizeof st->tail - 1);
            st->n_tail--;
        }
        st->tail[st->n_tail++] = c;
        for (int k = 0; VALUE_BAD[k]; k++)
            if (ends_with(st->tail, st->n_tail, VALUE_BAD[k])) return false;
        if (ends_with(st->tail, st->n_tail, PARAM_CLOSE)) st->stage = CS_XML_NL;
        else if (ends_with(st->tail, st->n_tail, "</parameter>")) return false; /* not on a line of its own */
        return true;
    case CS_XML_NL:
        if (c != '\n') return false;
        st->stage = CS_XML_TAG;
        st->n_lit = 0;
        return true;
    case CS_FORCED: /* tokens, not text */
    case CS_JSON:   /* the JSON matcher's */
    case CS_DONE: return false;
    }
    return false;
}

int srv_call_matcher_try(const struct srv_call_matcher *m, const char *s, size_t n) {
    if (m->st.stage == CS_JSON) return srv_json_matcher_try(m->tools[m->st.tool].args, s, n);
    struct call_state st = m->st;
    for (size_t i = 0; i < n; i++)
        if (st.stage == CS_JSON || !st_byte(m, &st, s[i])) return -1; /* no token crosses into the JSON */
    return st_dist(m, &st);
}

bool srv_call_matcher_feed(struct srv_call_matcher *m, const char *s, size_t n) {
    if (m->st.stage == CS_JSON) return srv_json_matcher_feed(m->tools[m->st.tool].args, s, n);
    struct call_state st = m->st;
    for (size_t i = 0; i < n; i++)
        if (st.stage == CS_JSON || !st_byte(m, &st, s[i])) return false;
    m->st = st;
    return true;
}

int srv_call_matcher_dist(const struct srv_call_matcher *m) { return st_dist(m, &m->st); }

int32_t srv_call_matcher_forced(const struct srv_call_matcher *m) {
    return m->st.stage == CS_FORCED ? m->forced[m->st.n_forced_done] : -1;
}

void srv_call_matcher_take_forced(struct srv_call_matcher *m) {
    if (m->st.stage != CS_FORCED) return;
    if (++m->st.n_forced_done == m->n_forced) m->st.stage = CS_JSON;
}

int32_t srv_call_matcher_end(const struct srv_call_matcher *m) { return m->end_id; }

void srv_call_matcher_free(struct srv_call_matcher *m) {
    if (!m) return;
    for (int k = 0; k < m->n_tools; k++) {
        free(m->tools[k].name);
        srv_json_matcher_free(m->tools[k].args);
        for (int p = 0; p < m->tools[k].n_params; p++) free(m->tools[k].params[p]);
    }
    free(m);
}

/* The name (or a parameter's) usable in the grammar: no NUL, at most CALL_MAX_NAME bytes. */
static bool name_ok(const char *s, size_t n) { return n && n <= CALL_MAX_NAME && !memchr(s, 0, n); }

/* One tool into the matcher; false and *e when it cannot be called under the grammar. */
static bool add_tool(struct srv_call_matcher *m, json_t *fn, struct srv_error *e) {
    struct call_tool *t = &m->tools[m->n_tools];
    json_t *jn = json_object_get(fn, "name"), *params = json_object_get(fn, "parameters");
    const char *name = json_string_value(jn);
    const size_t len = json_string_length(jn);
    if (!name_ok(name, len) || memchr(name, ' ', len) || memchr(name, '>', len)) {
        srv_error_set(e, 400, "tools", "a forced call needs function names of 1 to %d bytes without spaces, '>' or "
                      "NUL", CALL_MAX_NAME);
        return false;
    }
    if (!(t->name = strndup(name, len))) goto oom;
    t->name_len = len;
    m->n_tools++;
    if (m->xml) {
        json_t *props = json_object_get(params, "properties"), *req = json_object_get(params, "required"), *v;
        const char *key;
        json_object_foreach(props, key, v) {
            const size_t kl = strlen(key);
            if (t->n_params == CALL_MAX_PARAMS || !name_ok(key, kl) || strchr(key, '>') || strchr(key, '\n')) {
                srv_error_set(e, 400, "tools", "a forced call of '%.80s' needs at most %d parameters with names of 1 to %d "
                              "bytes without '>' or newlines", name, CALL_MAX_PARAMS, CALL_MAX_NAME);
                return false;
            }
            if (!(t->params[t->n_params] = strdup(key))) goto oom;
            t->param_len[t->n_params] = kl;
            for (size_t i = 0; i < json_array_size(req); i++)
                if (json_is_string(json_array_get(req, i)) && strcmp(json_string_value(json_array_get(req, i)), key) == 0)
                    t->required |= 1ull << t->n_params;
            t->n_params++;
        }
        t->tail = xml_rest(t, 0);
    } else {
        /* a parameters schema outside the JSON grammar's subset: any object */
        struct srv_error ignored = {0};
        json_t *any = json_pack("{s:s}", "type", "object");
        if (json_is_object(params)) t->args = srv_json_matcher_new(params, &ignored);
        if (!t->args) t->args = srv_json_matcher_new(any, e);
        json_decref(any);
        if (!t->args) return false;
        t->tail = m->n_forced + srv_json_matcher_dist(t->args);
    }
    return true;
oom:
    srv_error_set(e, 500, NULL, "out of memory");
    return false;
}

struct srv_call_matcher *srv_call_matcher_new(const struct hmoe_vocab *v, enum hmoe_toolcall_format fmt, json_t *tools,
                                              const char *want, struct srv_error *e) {
    struct srv_call_matcher *m = calloc(1, sizeof *m);
    if (!m) {
        srv_error_set(e, 500, NULL, "out of memory");
        return NULL;
    }
    m->xml = fmt != HMOE_TOOLCALL_HARMONY;
    m->term = m->xml ? ">\n" : " ";
    m->st.tool = -1;
    m->end_id = v->n_eog ? v->eog_ids[0] : -1;
    if (!m->xml) {
        static const char HEAD[] = "<|constrain|>json<|message|>";
        int32_t *ids = NULL;
        size_t n = 0;
        struct hmoe_err err = {0};
        if (hmoe_tokenize(v, HEAD, sizeof HEAD - 1, false, true, &ids, &n, &err) || n == 0 || n > CALL_MAX_FORCED) {
            free(ids);
            srv_error_set(e, 500, NULL, "cannot tokenize the harmony call header");
            goto fail;
        }
        memcpy(m->forced, ids, n * sizeof *ids);
        m->n_forced = (int)n;
        free(ids);
        /* the call ends with <|call|> where the vocabulary has it as an end of generation */
        const int32_t call = hmoe_vocab_find(v, "<|call|>", 8);
        if (call != HMOE_TOKEN_NONE && hmoe_vocab_is_eog(v, call)) m->end_id = call;
    }
    for (size_t k = 0; k < json_array_size(tools); k++) {
        json_t *fn = json_object_get(json_array_get(tools, k), "function");
        const char *name = json_string_value(json_object_get(fn, "name"));
        if (!name || (want && strcmp(name, want) != 0)) continue;
        if (m->n_tools == CALL_MAX_TOOLS) {
            srv_error_set(e, 400, "tools", "a forced call chooses among at most %d tools", CALL_MAX_TOOLS);
            goto fail;
        }
        if (!add_tool(m, fn, e)) goto fail;
    }
    if (!m->n_tools) {
        srv_error_set(e, 400, "tool_choice", "tool_choice names the function '%.80s', which is not in 'tools'",
                      want ? want : "");
        goto fail;
    }
    return m;
fail:
    srv_call_matcher_free(m);
    return NULL;
}

bool srv_call_matcher_lead(struct srv_call_matcher *m, const struct hmoe_vocab *v, struct srv_buf *out) {
    if (m->n_tools == 1 && m->st.stage == CS_NAME && m->st.n_lit == 0) {
        const struct call_tool *t = &m->tools[0];
        srv_buf_add(out, t->name, t->name_len);
        srv_buf_add(out, m->term, strlen(m->term));
        if (!srv_call_matcher_feed(m, t->name, t->name_len) || !srv_call_matcher_feed(m, m->term, strlen(m->term)))
            return false;
    }
    while (m->st.stage == CS_FORCED) {
        const int32_t id = srv_call_matcher_forced(m);
        size_t len = 0;
        const char *p = hmoe_token_to_piece(v, id, true, &len);
        srv_buf_add(out, p, len);
        srv_call_matcher_take_forced(m);
    }
    return !out->oom;
}
