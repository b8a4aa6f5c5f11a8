/* harmony_stream.c — which part of a gpt-oss answer each generated token belongs to
 * (chat-templates.md §3), for showing the reasoning dimmed or hidden while it streams: the
 * header tokens (<|start|>, the role, <|channel|>, the channel name, <|constrain|>, <|message|>)
 * and the message ends (<|end|>, <|return|>, <|call|>) are structure; the text after
 * <|message|> belongs to the channel its header named. Works on token ids, so text that only
 * looks like a header tag is plain text. */
#include <string.h>

#include "hmoe/text.h"

static int32_t find(const struct hmoe_vocab *v, const char *t) { return hmoe_vocab_find(v, t, strlen(t)); }

void hmoe_harmony_stream_init(struct hmoe_harmony_stream *h, const struct hmoe_vocab *v) {
    memset(h, 0, sizeof *h);
    h->start = find(v, "<|start|>");
    h->channel = find(v, "<|channel|>");
    h->message = find(v, "<|message|>");
    h->constrain = find(v, "<|constrain|>");
    h->end = find(v, "<|end|>");
    h->ret = find(v, "<|return|>");
    h->call = find(v, "<|call|>");
    /* The generation prompt is "<|start|>assistant": the model goes on with the rest of the
     * header; text before any header is shown as the answer. */
    h->in_header = false;
    h->part = HMOE_HARMONY_FINAL;
}

static bool is(int32_t id, int32_t tok) { return tok != HMOE_TOKEN_NONE && id == tok; }

enum hmoe_harmony_part hmoe_harmony_stream_push(struct hmoe_harmony_stream *h, const struct hmoe_vocab *v, int32_t id) {
    if (is(id, h->start) || is(id, h->end) || is(id, h->ret) || is(id, h->call) || is(id, h->constrain)) {
        h->in_header = true;
        h->naming = false;
        return HMOE_HARMONY_HEADER;
    }
    if (is(id, h->channel)) {
        h->in_header = true;
        h->naming = true; /* the channel name follows */
        h->name_len = 0;
        return HMOE_HARMONY_HEADER;
    }
    if (is(id, h->message)) {
        h->name[h->name_len] = 0;
        h->part = strncmp(h->name, "analysis", 8) == 0 ? HMOE_HARMONY_ANALYSIS
                  : strncmp(h->name, "final", 5) == 0  ? HMOE_HARMONY_FINAL
                                                       : HMOE_HARMONY_OTHER;
        h->in_header = h->naming = false;
        return HMOE_HARMONY_HEADER;
    }
    if (!h->in_header) return h->part;
    if (h->naming) {
        /* The name is what comes before a space ("commentary json", " to=..."). */
        size_t n;
        const char *p = hmoe_token_to_piece(v, id, false, &n);
        for (size_t i = 0; i < n && h->name_len + 1 < sizeof h->name; i++) {
            if (p[i] == ' ' && h->name_len > 0) {
                h->naming = false;
                break;
            }
            if (p[i] != ' ') h->name[h->name_len++] = p[i];
        }
    }
    return HMOE_HARMONY_HEADER;
}
