/* jj_api.c — the public entry points of jinja.h: compile (lex + parse into the template's
 * own arena), render with JSON variables, and the chat render that sets up the variables
 * transformers' apply_chat_template passes.
 */
#include <stdlib.h>
#include <string.h>

#include "hmoe/jinja.h"
#include "hmoe/json.h"
#include "text/jinja/jinja_impl.h"

enum hmoe_status hmoe_jinja_compile(const char *src, size_t len, struct hmoe_jinja **out, struct hmoe_err *err) {
    *out = NULL;
    struct hmoe_jinja *t = calloc(1, sizeof *t);
    if (!t) return HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory compiling the chat template");
    struct jj_fail f = {0};
    if (setjmp(f.jb)) {
        jj_arena_free(&t->arena);
        free(t);
        return HMOE_RAISE(err, f.code, "chat template: %s", f.msg);
    }
    size_t n_tok;
    struct jt *toks = jj_lex(&t->arena, &f, src ? src : "", src ? len : 0, &n_tok);
    t->root = jj_parse(&t->arena, &f, toks, n_tok);
    *out = t;
    return HMOE_OK;
}

void hmoe_jinja_free(struct hmoe_jinja *t) {
    if (!t) return;
    jj_arena_free(&t->arena);
    free(t);
}

/* The variables, then the template; runs under the ctx's error escape. */
static void set_vars_and_run(struct jj_ctx *c, const struct hmoe_jinja *t, const struct hmoe_jinja_chat *chat,
                             const struct hmoe_json *vars) {
    struct jj_frame *g = jj_frame_new(c, NULL);
    c->globals = g;
    if (chat) {
        jj_frame_set(c, g, "messages", 8, chat->messages ? jv_from_json(c, chat->messages) : jv_new_list(c, 0));
        if (chat->tools) jj_frame_set(c, g, "tools", 5, jv_from_json(c, chat->tools));
        jj_frame_set(c, g, "add_generation_prompt", 21, jv_bool(chat->add_generation_prompt));
        jj_frame_set(c, g, "enable_thinking", 15, jv_bool(chat->enable_thinking));
        if (chat->bos_token) jj_frame_set(c, g, "bos_token", 9, jv_str(chat->bos_token, strlen(chat->bos_token)));
        if (chat->eos_token) jj_frame_set(c, g, "eos_token", 9, jv_str(chat->eos_token, strlen(chat->eos_token)));
        vars = chat->kwargs;
    }
    if (vars && vars->kind == HMOE_JSON_OBJECT)
        for (size_t i = 0; i < vars->n; i++)
            jj_frame_set(c, g, vars->keys[i], strlen(vars->keys[i]), jv_from_json(c, vars->items[i]));
    /* The template's top-level scope is a child of the variables: a top-level `set`
     * shadows a variable in a scope of its own, as Jinja's template context does. */
    struct jj_frame *top = jj_frame_new(c, g);
    c->frame = top;
    jj_exec_body(c, t->root, top);
}

struct run_args { const struct hmoe_jinja *t; const struct hmoe_jinja_chat *chat; const struct hmoe_json *vars; };

/* setjmp in a function of its own whose locals never change after it (no clobbering). */
static bool run_protected(struct jj_ctx *c, const struct run_args *ra) {
    if (setjmp(c->fail.jb)) return false;
    set_vars_and_run(c, ra->t, ra->chat, ra->vars);
    return true;
}

static enum hmoe_status render(const struct hmoe_jinja *t, const struct hmoe_jinja_chat *chat, const struct hmoe_json *vars,
                               const struct hmoe_jinja_render_opts *opts, char **out, size_t *out_len, struct hmoe_err *err) {
    *out = NULL;
    if (out_len) *out_len = 0;
    if (!t || !t->root) return HMOE_RAISE(err, HMOE_ERR_ARG, "no chat template to render");
    struct jj_ctx *c = calloc(1, sizeof *c);
    if (!c) return HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory rendering the chat template");
    static const struct hmoe_jinja_render_opts dflt = {0};
    const struct hmoe_jinja_render_opts *o = opts ? opts : &dflt;
    c->lim = o->limits;
    if (!c->lim.max_depth) c->lim.max_depth = 500;
    if (!c->lim.max_iterations) c->lim.max_iterations = 1000000;
    if (!c->lim.max_output) c->lim.max_output = 64u << 20;
    if (!(c->lim.max_seconds > 0)) c->lim.max_seconds = 10;
    c->deadline = hmoe_time_s() + c->lim.max_seconds;
    c->now = o->now ? o->now : time(NULL);
    c->line = c->col = 1;
    struct run_args ra = {t, chat, vars};
    if (!run_protected(c, &ra)) {
        enum hmoe_status st = HMOE_RAISE(err, c->fail.code, "chat template: %s", c->fail.msg);
        free(c->out.s);
        for (struct jj_saved_out *so = c->saved; so; so = so->prev) free(so->buf.s);
        jj_arena_free(&c->arena);
        free(c);
        return st;
    }
    size_t n = c->out.n;
    char *s = c->out.s ? c->out.s : calloc(1, 1);
    c->out.s = NULL;
    jj_arena_free(&c->arena);
    free(c);
    if (!s) return HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory rendering the chat template");
    *out = s;
    if (out_len) *out_len = n;
    return HMOE_OK;
}

enum hmoe_status hmoe_jinja_render(const struct hmoe_jinja *t, const struct hmoe_json *vars,
                                   const struct hmoe_jinja_render_opts *opts, char **out, size_t *out_len,
                                   struct hmoe_err *err) {
    return render(t, NULL, vars, opts, out, out_len, err);
}

enum hmoe_status hmoe_jinja_render_chat(const struct hmoe_jinja *t, const struct hmoe_jinja_chat *chat,
                                        const struct hmoe_jinja_render_opts *opts, char **out, struct hmoe_err *err) {
    if (!chat) return HMOE_RAISE(err, HMOE_ERR_ARG, "no conversation to render");
    return render(t, chat, NULL, opts, out, NULL, err);
}
