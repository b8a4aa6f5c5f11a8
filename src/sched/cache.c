/* cache.c — bookkeeping of the VRAM expert cache (sched.h "Expert cache"): per layer, which
 * expert sits in which slot, which slots are static (the hot set from routing counts) and which
 * follow the replacement policy: LFU = routing counts decayed by 0.9 per token (a slot goes to a
 * missed expert whose score beats the weakest dynamic slot's), LRU = the dynamic slot whose
 * expert was routed to longest ago. A planned copy invalidates its slot at once and validates
 * the new expert at commit, so the GPU never reads a slot being written. No device calls.
 */
#include <stdlib.h>
#include <string.h>

#include "hmoe/sched.h"

#define LFU_DECAY 0.9f

struct cache_layer {
    int n_slots, n_static;
    int32_t *slot_of;    /* [E] valid slot or -1 */
    int32_t *expert_in;  /* [n_slots] assigned expert (valid or pending) or -1 */
    uint8_t *pending;    /* [n_slots] copy in flight */
    float *score;        /* [E] decayed counts */
    uint64_t *last_use;  /* [E] token of the last routing */
    int32_t missed[64];  /* this token's routed experts without a valid or pending slot */
    int n_missed;
};

struct hmoe_sched_cache {
    int n_layer, n_expert;
    enum hmoe_cache_policy policy;
    uint64_t token;
    int next_layer;      /* round robin start of the next plan, so every layer gets copies */
    struct cache_layer *L;
};

enum hmoe_status hmoe_sched_cache_init(int n_layer, int n_expert, const int *n_slots, enum hmoe_cache_policy policy,
                                       struct hmoe_sched_cache **out, struct hmoe_err *err) {
    *out = NULL;
    struct hmoe_sched_cache *c = calloc(1, sizeof *c);
    if (!c || !(c->L = calloc((size_t)n_layer, sizeof *c->L))) {
        free(c);
        return HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory");
    }
    c->n_layer = n_layer;
    c->n_expert = n_expert;
    c->policy = policy;
    for (int l = 0; l < n_layer; l++) {
        struct cache_layer *L = &c->L[l];
        L->n_slots = n_slots ? HMOE_MIN(n_slots[l], n_expert) : 0;
        L->slot_of = malloc((size_t)n_expert * sizeof *L->slot_of);
        L->expert_in = malloc((size_t)(L->n_slots + 1) * sizeof *L->expert_in);
        L->pending = calloc((size_t)L->n_slots + 1, 1);
        L->score = calloc((size_t)n_expert, sizeof *L->score);
        L->last_use = calloc((size_t)n_expert, sizeof *L->last_use);
        if (!L->slot_of || !L->expert_in || !L->pending || !L->score || !L->last_use) {
            hmoe_sched_cache_free(c);
            return HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory");
        }
        for (int e = 0; e < n_expert; e++) L->slot_of[e] = -1;
        for (int s = 0; s < L->n_slots; s++) L->expert_in[s] = -1;
    }
    *out = c;
    return HMOE_OK;
}

void hmoe_sched_cache_free(struct hmoe_sched_cache *c) {
    if (!c) return;
    for (int l = 0; c->L && l < c->n_layer; l++) {
        free(c->L[l].slot_of);
        free(c->L[l].expert_in);
        free(c->L[l].pending);
        free(c->L[l].score);
        free(c->L[l].last_use);
    }
    free(c->L);
    free(c);
}

static bool assigned(const struct cache_layer *L, int e) {
    for (int s = 0; s < L->n_slots; s++)
        if (L->expert_in[s] == e) return true;
    return false;
}

static void put(struct cache_layer *L, int layer, int s, int e, struct hmoe_sched_cache_fill *f) {
    const int old = L->expert_in[s];
    if (old >= 0) L->slot_of[old] = -1;
    L->expert_in[s] = e;
    L->pending[s] = 1;
    *f = (struct hmoe_sched_cache_fill){.layer = layer, .expert = e, .slot = s, .old_expert = old};
}

int hmoe_sched_cache_seed(struct hmoe_sched_cache *c, const uint64_t *counts, double static_frac,
                          struct hmoe_sched_cache_fill *out, int max) {
    int n = 0;
    uint8_t *want = malloc((size_t)c->n_expert);
    int32_t *order = malloc((size_t)c->n_expert * sizeof *order);
    if (!want || !order) {
        free(want);
        free(order);
        return 0;
    }
    for (int l = 0; l < c->n_layer; l++) {
        struct cache_layer *L = &c->L[l];
        const uint64_t *cnt = counts + (size_t)l * (size_t)c->n_expert;
        L->n_static = (int)(static_frac * L->n_slots);
        /* the n_slots hottest experts, hottest first (lowest index on ties) */
        memset(want, 0, (size_t)c->n_expert);
        int nw = 0;
        for (; nw < L->n_slots; nw++) {
            int best = -1;
            for (int e = 0; e < c->n_expert; e++)
                if (!want[e] && (best < 0 || cnt[e] > cnt[best])) best = e;
            if (best < 0) break;
            want[best] = 1;
            order[nw] = best;
        }
        /* A slot that already holds a wanted expert keeps it (a re-seed over a pre-filled cache
         * copies only what changed); the missing ones, hottest first, take the other slots in order. */
        int s = 0;
        for (int i = 0; i < nw; i++) {
            const int e = order[i];
            if (assigned(L, e)) {
                L->score[e] = (float)cnt[e];
                continue;
            }
            while (s < L->n_slots && L->expert_in[s] >= 0 && want[L->expert_in[s]]) s++;
            if (s >= L->n_slots) break;
            if (n >= max) goto done;
            put(L, l, s, e, &out[n++]);
            L->score[e] = (float)cnt[e];
            s++;
        }
    }
done:
    free(want);
    free(order);
    return n;
}

int hmoe_sched_cache_n_valid(const struct hmoe_sched_cache *c) {
    int n = 0;
    for (int l = 0; l < c->n_layer; l++)
        for (int s = 0; s < c->L[l].n_slots; s++) n += c->L[l].expert_in[s] >= 0 && !c->L[l].pending[s];
    return n;
}

void hmoe_sched_cache_touch(struct hmoe_sched_cache *c, int layer, const int32_t *ids, int k) {
    struct cache_layer *L = &c->L[layer];
    for (int j = 0; j < k; j++) {
        const int e = ids[j];
        if (e < 0 || e >= c->n_expert) continue;
        L->score[e] += 1.0f;
        L->last_use[e] = c->token + 1;
        if (L->slot_of[e] < 0 && !assigned(L, e) && L->n_missed < (int)HMOE_ARRAY_LEN(L->missed))
            L->missed[L->n_missed++] = e;
    }
}

/* The dynamic slot to give up in layer L, or -1 (all pending / none). Empty slots first. */
static int victim(const struct hmoe_sched_cache *c, const struct cache_layer *L) {
    int v = -1;
    for (int s = L->n_static; s < L->n_slots; s++) {
        if (L->pending[s]) continue;
        const int e = L->expert_in[s];
        if (e < 0) return s;
        if (v < 0) {
            v = s;
            continue;
        }
        const int ev = L->expert_in[v];
        if (c->policy == HMOE_CACHE_LRU ? L->last_use[e] < L->last_use[ev] : L->score[e] < L->score[ev]) v = s;
    }
    return v;
}

int hmoe_sched_cache_plan(struct hmoe_sched_cache *c, struct hmoe_sched_cache_fill *out, int max) {
    int n = 0;
    for (int i = 0; i < c->n_layer; i++) {
        const int l = (c->next_layer + i) % c->n_layer;
        struct cache_layer *L = &c->L[l];
        for (int m = 0; m < L->n_missed && n < max; m++) {
            const int e = L->missed[m];
            const int s = victim(c, L);
            if (s < 0) break;
            const int old = L->expert_in[s];
            if (old >= 0 && c->policy == HMOE_CACHE_LFU && !(L->score[e] > L->score[old])) continue;
            put(L, l, s, e, &out[n++]);
        }
    }
    /* end of the token: forget this token's misses, decay the scores */
    for (int l = 0; l < c->n_layer; l++) {
        struct cache_layer *L = &c->L[l];
        L->n_missed = 0;
        if (c->policy == HMOE_CACHE_LFU)
            for (int e = 0; e < c->n_expert; e++) L->score[e] *= LFU_DECAY;
    }
    c->next_layer = (c->next_layer + 1) % c->n_layer;
    c->token++;
    return n;
}

void hmoe_sched_cache_commit(struct hmoe_sched_cache *c, const struct hmoe_sched_cache_fill *f) {
    struct cache_layer *L = &c->L[f->layer];
    if (f->slot < 0 || f->slot >= L->n_slots || L->expert_in[f->slot] != f->expert) return; /* replaced since */
    L->pending[f->slot] = 0;
    L->slot_of[f->expert] = f->slot;
}

int hmoe_sched_cache_slot_of(const struct hmoe_sched_cache *c, int layer, int expert) {
    return c->L[layer].slot_of[expert];
}

int hmoe_sched_cache_victims(const struct hmoe_sched_cache *c, int layer, int32_t *slots, int32_t *experts, int max) {
    const struct cache_layer *L = &c->L[layer];
    uint8_t taken[1024] = {0};
    int n = 0;
    while (n < max) {
        /* victim() over the slots not yet listed: mark listed ones pending for the search */
        int v = -1;
        for (int s = L->n_static; s < L->n_slots && s < 1024; s++) {
            if (L->pending[s] || taken[s]) continue;
            const int e = L->expert_in[s];
            if (e < 0) {
                v = s;
                break;
            }
            if (v < 0) {
                v = s;
                continue;
            }
            const int ev = L->expert_in[v];
            if (c->policy == HMOE_CACHE_LRU ? L->last_use[e] < L->last_use[ev] : L->score[e] < L->score[ev]) v = s;
        }
        if (v < 0) break;
        taken[v] = 1;
        slots[n] = v;
        experts[n] = L->expert_in[v];
        n++;
    }
    return n;
}

void hmoe_sched_cache_install(struct hmoe_sched_cache *c, int layer, int expert, int slot) {
    if (layer < 0 || layer >= c->n_layer || expert < 0 || expert >= c->n_expert) return;
    struct cache_layer *L = &c->L[layer];
    if (slot < L->n_static || slot >= L->n_slots || L->pending[slot]) return;
    const int old = L->expert_in[slot];
    if (old >= 0) L->slot_of[old] = -1;
    const int prev = L->slot_of[expert]; /* (not expected: the prefetch only fills missing experts) */
    if (prev >= 0 && prev != slot) L->expert_in[prev] = -1;
    L->expert_in[slot] = expert;
    L->slot_of[expert] = slot;
}

const int32_t *hmoe_sched_cache_map(const struct hmoe_sched_cache *c, int layer) { return c->L[layer].slot_of; }
