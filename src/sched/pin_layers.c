/* pin_layers.c — the pin pass of hybrid_pin.c for a backend that streams its RAM layers itself
 * (sched.h, "page-locked expert ranges"): a scheduler state holding only what that pass reads and
 * writes (the layers' views, which of them to pin, the thread count, the device, the driver
 * calls), so the same bounded, logged pass serves both without a second copy of it.
 */
#include <stdlib.h>
#include <string.h>

#include "sched/hybrid_impl.h"

struct hmoe_sched_pinned {
    struct hmoe_sched_hybrid h; /* the pass's fields only; the rest stays zero */
};

enum hmoe_status hmoe_sched_pin_layers(const struct hmoe_sched_pin_params *p, struct hmoe_sched_pinned **out,
                                       struct hmoe_err *err) {
    *out = NULL;
    if (p->n_layer <= 0 || !p->moe || !p->want)
        return HMOE_RAISE(err, HMOE_ERR_ARG, "pinning: %d layers, views %p, mask %p", p->n_layer,
                          (const void *)p->moe, (const void *)p->want);
    struct hmoe_sched_pinned *s = calloc(1, sizeof *s);
    struct hmoe_sched_hybrid *h = s ? &s->h : NULL;
    if (h) {
        h->moe = malloc((size_t)p->n_layer * sizeof *h->moe);
        h->L = calloc((size_t)p->n_layer, sizeof *h->L);
    }
    if (!h || !h->moe || !h->L) {
        if (h) free(h->moe), free(h->L);
        free(s);
        return HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory");
    }
    memcpy(h->moe, p->moe, (size_t)p->n_layer * sizeof *h->moe); /* HMOE_PIN=copy repoints these */
    h->cu = p->cu;
    h->n_layer = p->n_layer;
    h->nt = p->n_threads > 0 ? p->n_threads : 1;
    h->file_in_ram = p->file_in_ram;
    h->pin_register = p->reg;
    h->pin_unregister = p->unreg;
    for (int l = 0; l < p->n_layer; l++) {
        h->L[l].ram = p->want[l] && p->moe[l].up.data;
        h->n_ram += h->L[l].ram;
    }
    if (h->n_ram) hmoe_hyb_pin(h, p->file_base, p->file_size);
    *out = s;
    return HMOE_OK;
}

const struct hmoe_moe_weights *hmoe_sched_pinned_layer(const struct hmoe_sched_pinned *s, int l) {
    if (!s || l < 0 || l >= s->h.n_layer || !s->h.L[l].pinned) return NULL;
    return &s->h.moe[l];
}

void hmoe_sched_pinned_info(const struct hmoe_sched_pinned *s, struct hmoe_sched_pin_info *out) {
    *out = (struct hmoe_sched_pin_info){.notes = ""};
    if (!s) return;
    const struct hmoe_sched_hybrid *h = &s->h;
    *out = (struct hmoe_sched_pin_info){.layers = h->pin_layers, .tried = h->pin_tried, .bytes = h->pin_bytes,
                                        .read_s = h->touch_s, .pin_s = h->pin_s, .notes = h->notes};
}

void hmoe_sched_unpin_layers(struct hmoe_sched_pinned *s) {
    if (!s) return;
    hmoe_hyb_unpin(&s->h);
    free(s->h.moe);
    free(s->h.L);
    free(s);
}
