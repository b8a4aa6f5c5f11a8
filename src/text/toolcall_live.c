/* toolcall_live.c — the call being written, as a stream shows it (text.h's hmoe_toolcall_piece):
 * its start (id and name) once the name is known, then what its arguments text gained. What was
 * sent is always the start of the arguments the call closes with (the format parsers hand over
 * only such prefixes), so a client's sum of a call's pieces is the final call. A call whose start
 * went out and that then fails keeps what was sent; it is no call in the final message. */
#include <string.h>

#include "text/toolcall_impl.h"

/* Room for one more piece; false (and oom) when there is none. */
static bool piece_room(struct hmoe_toolcall_stream *s) {
    if (s->n_pieces < s->cap_pieces) return true;
    size_t cap = s->cap_pieces ? s->cap_pieces * 2 : 4;
    struct tc_piece *p = realloc(s->pieces, cap * sizeof *p);
    if (!p) {
        s->oom = true;
        return false;
    }
    s->pieces = p;
    struct hmoe_toolcall_piece *o = realloc(s->out_pieces, cap * sizeof *o);
    if (!o) {
        s->oom = true;
        return false;
    }
    s->out_pieces = o;
    s->cap_pieces = cap;
    return true;
}

/* Text into the delta's piece text, NUL-ended; its offset. */
static size_t piece_add(struct hmoe_toolcall_stream *s, const char *p, size_t n) {
    size_t at = s->piece_text.n;
    hmoe_strbuf_addn(&s->piece_text, n ? p : "", n);
    hmoe_strbuf_addn(&s->piece_text, "", 1);
    return at;
}

static void send_start(struct hmoe_toolcall_stream *s, const char *name, size_t name_len) {
    if (!piece_room(s)) return;
    struct tc_piece *pc = &s->pieces[s->n_pieces++];
    pc->index = s->live.index;
    pc->first = true;
    pc->id = piece_add(s, s->live.id, strlen(s->live.id));
    pc->name = piece_add(s, name, name_len);
    pc->args = piece_add(s, "", 0);
    pc->args_len = 0;
}

static void send_args(struct hmoe_toolcall_stream *s, const char *p, size_t n) {
    struct tc_piece *last = s->n_pieces ? &s->pieces[s->n_pieces - 1] : NULL;
    if (last && last->index == s->live.index && last->args + last->args_len + 1 == s->piece_text.n) {
        /* the same call's piece ends the text: it grows (its NUL moves to the new end) */
        s->piece_text.n--;
        hmoe_strbuf_addn(&s->piece_text, p, n);
        hmoe_strbuf_addn(&s->piece_text, "", 1);
        last->args_len += n;
        return;
    }
    if (!piece_room(s)) return;
    struct tc_piece *pc = &s->pieces[s->n_pieces++];
    pc->index = s->live.index;
    pc->first = false;
    pc->id = pc->name = 0;
    pc->args = piece_add(s, p, n);
    pc->args_len = n;
}

void hmoe_tc_live_update(struct hmoe_toolcall_stream *s, const char *name, size_t name_len, const char *args,
                         size_t args_len) {
    if (!name || s->oom) return;
    if (!s->live.on) {
        hmoe_tc_next_id(s, s->live.id);
        s->live.on = true;
        s->live.index = s->n_begun++;
        s->live.sent.n = 0;
        send_start(s, name, name_len);
    }
    /* A piece ends on a whole UTF-8 character (clients get each piece as a JSON string). */
    args_len = hmoe_utf8_complete_prefix(args ? args : "", args_len);
    struct hmoe_strbuf *sent = &s->live.sent;
    if (args_len <= sent->n || (sent->n && memcmp(args, sent->s, sent->n) != 0)) return;
    send_args(s, args + sent->n, args_len - sent->n);
    hmoe_strbuf_addn(sent, args + sent->n, args_len - sent->n);
}

void hmoe_tc_live_close(struct hmoe_toolcall_stream *s, const char *name, size_t name_len, const char *args) {
    /* hmoe_tc_live_update holds back a broken UTF-8 tail; the final text goes out whole */
    hmoe_tc_live_update(s, name, name_len, args, 0);
    struct hmoe_strbuf *sent = &s->live.sent;
    const size_t n = strlen(args);
    if (n > sent->n && !s->oom) send_args(s, args + sent->n, n - sent->n);
    hmoe_tc_add_call(s, name, name_len, args);
    hmoe_tc_live_reset(s);
}

void hmoe_tc_live_drop(struct hmoe_toolcall_stream *s, bool begun) {
    if (!s->live.on && begun) {
        char id[30];
        hmoe_tc_next_id(s, id);
    }
    hmoe_tc_live_reset(s);
}

void hmoe_tc_live_reset(struct hmoe_toolcall_stream *s) {
    struct tc_live *l = &s->live;
    l->on = false;
    l->sent.n = 0;
    if (l->scan_on) hmoe_tc_json_scan_free(&l->scan);
    l->scan_on = false;
    l->xml.named = l->xml.in_value = false;
    l->xml.json.n = 0;
}

void hmoe_tc_pieces_begin(struct hmoe_toolcall_stream *s) {
    s->n_pieces = 0;
    s->piece_text.n = 0;
}

void hmoe_tc_pieces_end(struct hmoe_toolcall_stream *s) {
    for (size_t i = 0; i < s->n_pieces; i++) {
        const struct tc_piece *pc = &s->pieces[i];
        struct hmoe_toolcall_piece *o = &s->out_pieces[i];
        o->index = pc->index;
        o->id = pc->first ? s->piece_text.s + pc->id : NULL;
        o->name = pc->first ? s->piece_text.s + pc->name : NULL;
        o->args = s->piece_text.s + pc->args;
        o->args_len = pc->args_len;
    }
}
