/* moe_cpu.c — the MoE FFN of a micro-batch on CPU threads (qwen3moe.md §4.4, §6).
 * Route every token, sort the (token, expert) pairs by expert so each expert's gate/up/down
 * weights stream from memory once for all tokens routed to it, then run the experts as
 * (expert, row-chunk) work items inside ONE OpenMP parallel region per call. Activations
 * are quantized once per token per weight type (cpu.h); the k partial results of a token
 * are summed in selection order, as llama.cpp's graph does. All buffers come from init.
 */
#include "hmoe/sched.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "hmoe/cpu.h"

/* One unit of expert work: rows [r0, r1) of expert e's matrix, for all its tokens. */
struct moe_item {
    int32_t e, r0, r1;
};

struct hmoe_sched_moe {
    int n_threads, max_tok, max_k, max_expert;
    int64_t max_embd, max_ff;
    size_t act_gate_bytes, act_up_bytes, act_down_bytes; /* per row, maxima over layers */
    int32_t *count;    /* [E] tokens routed to each expert */
    int32_t *offset;   /* [E+1] first grouped slot of each expert */
    int32_t *sel;      /* [max_tok * k] expert of (token, rank) */
    float *wsel;       /* [max_tok * k] renormalised weight of (token, rank) */
    int32_t *tok_slot; /* [max_tok * k] grouped slot of (token, rank) */
    float *logits;     /* [max_tok][E] router logits */
    float *probs;      /* [max_tok][E] router softmax scratch */
    uint8_t *xq_gate;  /* [max_tok][act_gate] x quantized for the gate type, per token */
    uint8_t *xq_up;    /* [max_tok][act_up]   same for the up type (unused when types match) */
    uint8_t *xg_gate;  /* [max_tok * k][act_gate] the same rows gathered in expert order */
    uint8_t *xg_up;    /* [max_tok * k][act_up] */
    float *g;          /* [max_tok * k][F] gate outputs, then silu(g) * u */
    float *u;          /* [max_tok * k][F] up outputs */
    uint8_t *zq;       /* [max_tok * k][act_down] silu(g) * u quantized for the down type */
    float *y;          /* [max_tok * k][d] down outputs per (token, expert) */
    struct moe_item *items; /* work list, rebuilt per phase */
    size_t max_items;
};

/* Activation bytes of one row of n values for weight type t (F32 weights take F32 rows). */
static size_t act_bytes(enum hmoe_type t, int64_t n) { return hmoe_cpu_act_bytes(t, n); }

/* Convert one activation row for weight type t: quantize, or copy when the partner is F32. */
static void act_quantize(enum hmoe_type t, const float *x, void *dst, int64_t n) {
    if (hmoe_type_info[t].vec_dot_type == HMOE_TYPE_F32) memcpy(dst, x, (size_t)n * sizeof(float));
    else hmoe_cpu_quantize_act(t, x, dst, n);
}

void hmoe_sched_route(const float *logits, int n_expert, int k, float *probs, int32_t *sel, float *w) {
    /* Softmax over all experts in f32 with the sum accumulated in double (ggml's soft_max). */
    float mx = -INFINITY;
    for (int e = 0; e < n_expert; e++) mx = logits[e] > mx ? logits[e] : mx;
    double sum = 0.0;
    for (int e = 0; e < n_expert; e++) {
        probs[e] = expf(logits[e] - mx);
        sum += (double)probs[e];
    }
    const float inv = (float)(1.0 / sum);
    for (int e = 0; e < n_expert; e++) probs[e] *= inv;
    /* Top-k by probability, descending; strict '>' keeps the lowest index on ties. k is
     * small (8 of 128), so k linear scans beat a sort. Chosen entries are marked with -1. */
    for (int i = 0; i < k; i++) {
        int best = -1;
        for (int e = 0; e < n_expert; e++)
            if (!(probs[e] < 0.0f) && (best < 0 || probs[e] > probs[best])) best = e; /* NaN-safe */
        sel[i] = best;
        w[i] = probs[best];
        probs[best] = -1.0f;
    }
    /* Renormalise over the selected set; the clamp only guards a zero sum (§4.4 step 5). */
    double wsum = 0.0;
    for (int i = 0; i < k; i++) wsum += (double)w[i];
    float den = (float)wsum;
    if (den < 6.103515625e-5f) den = 6.103515625e-5f;
    for (int i = 0; i < k; i++) w[i] /= den;
}

enum hmoe_status hmoe_sched_moe_init(const struct hmoe_moe_weights *layers, int n_layer, int max_tok,
                                     int n_threads, struct hmoe_sched_moe **out, struct hmoe_err *err) {
    *out = NULL;
    if (n_layer <= 0 || max_tok <= 0 || n_threads <= 0)
        return HMOE_RAISE(err, HMOE_ERR_ARG, "MoE workspace: bad sizes (layers %d, tokens %d, threads %d)", n_layer,
                          max_tok, n_threads);
    struct hmoe_sched_moe *s = calloc(1, sizeof *s);
    if (!s) return HMOE_RAISE(err, HMOE_ERR_NOMEM, "MoE workspace: out of memory");
    s->n_threads = n_threads;
    s->max_tok = max_tok;
    for (int l = 0; l < n_layer; l++) {
        const struct hmoe_moe_weights *w = &layers[l];
        if (w->n_expert_used <= 0 || w->n_expert_used > w->router.n_out) {
            free(s);
            return HMOE_RAISE(err, HMOE_ERR_ARG, "MoE layer %d: expert_used_count %d must be in 1..%lld", l,
                              w->n_expert_used, (long long)w->router.n_out);
        }
        s->max_k = HMOE_MAX(s->max_k, w->n_expert_used);
        s->max_expert = HMOE_MAX(s->max_expert, (int)w->router.n_out);
        s->max_embd = HMOE_MAX(s->max_embd, w->gate.n_in);
        s->max_ff = HMOE_MAX(s->max_ff, w->gate.n_out);
        s->act_gate_bytes = HMOE_MAX(s->act_gate_bytes, act_bytes(w->gate.type, w->gate.n_in));
        s->act_up_bytes = HMOE_MAX(s->act_up_bytes, act_bytes(w->up.type, w->up.n_in));
        s->act_down_bytes = HMOE_MAX(s->act_down_bytes, act_bytes(w->down.type, w->down.n_in));
    }
    const size_t nt = (size_t)max_tok, ns = nt * (size_t)s->max_k, E = (size_t)s->max_expert;
    const size_t F = (size_t)s->max_ff, d = (size_t)s->max_embd;
    /* Room for both work lists: every expert split into 16-row chunks of F and of d rows. */
    s->max_items = E * ((F + 15) / 16 + (d + 15) / 16);
    s->count = calloc(E, sizeof *s->count);
    s->offset = calloc(E + 1, sizeof *s->offset);
    s->sel = calloc(ns, sizeof *s->sel);
    s->wsel = calloc(ns, sizeof *s->wsel);
    s->tok_slot = calloc(ns, sizeof *s->tok_slot);
    s->logits = calloc(nt * E, sizeof *s->logits);
    s->probs = calloc(nt * E, sizeof *s->probs);
    s->xq_gate = calloc(nt, s->act_gate_bytes);
    s->xq_up = calloc(nt, s->act_up_bytes);
    s->xg_gate = calloc(ns, s->act_gate_bytes);
    s->xg_up = calloc(ns, s->act_up_bytes);
    s->g = calloc(ns * F, sizeof *s->g);
    s->u = calloc(ns * F, sizeof *s->u);
    s->zq = calloc(ns, s->act_down_bytes);
    s->y = calloc(ns * d, sizeof *s->y);
    s->items = calloc(s->max_items, sizeof *s->items);
    if (!s->count || !s->offset || !s->sel || !s->wsel || !s->tok_slot || !s->logits || !s->probs ||
        !s->xq_gate || !s->xq_up || !s->xg_gate || !s->xg_up || !s->g || !s->u || !s->zq || !s->y || !s->items) {
        hmoe_sched_moe_free(s);
        return HMOE_RAISE(err, HMOE_ERR_NOMEM, "MoE workspace: out of memory for %d tokens x %d experts", max_tok,
                          s->max_k);
    }
    *out = s;
    return HMOE_OK;
}

void hmoe_sched_moe_free(struct hmoe_sched_moe *s) {
    if (!s) return;
    free(s->count);
    free(s->offset);
    free(s->sel);
    free(s->wsel);
    free(s->tok_slot);
    free(s->logits);
    free(s->probs);
    free(s->xq_gate);
    free(s->xq_up);
    free(s->xg_gate);
    free(s->xg_up);
    free(s->g);
    free(s->u);
    free(s->zq);
    free(s->y);
    free(s->items);
    free(s);
}

const int32_t *hmoe_sched_moe_last_selection(const struct hmoe_sched_moe *s) { return s->sel; }

/* Rows [r0, r1) of one matrix for ntok activation rows; one token is a plain gemv. */
static void mm_rows(enum hmoe_type t, int64_t ncols, const void *w, size_t row_bytes, int64_t r0, int64_t r1,
                    const void *xq, size_t xq_stride, int ntok, float *y, size_t y_stride) {
    if (ntok == 1) hmoe_cpu_gemv(t, ncols, w, row_bytes, r0, r1, xq, y);
    else hmoe_cpu_gemm(t, ncols, w, row_bytes, r0, r1, xq, xq_stride, ntok, y, y_stride);
}

/* Rows per work item: big enough to amortise the call, small enough that the items of a
 * one-token decode (k experts) still spread over all threads. Multiple of 16 rows. */
static int64_t chunk_rows(int64_t rows_per_expert, int n_active, int n_threads) {
    int64_t target = rows_per_expert * n_active / ((int64_t)n_threads * 8);
    int64_t r = target < 16 ? 16 : target > 128 ? 128 : target;
    r = (r + 15) / 16 * 16;
    return r < rows_per_expert ? r : rows_per_expert;
}

/* Fill items[] with (expert, row chunk) pairs for every expert that has tokens. */
static size_t build_items(const struct hmoe_sched_moe *s, struct moe_item *items, int n_expert, int64_t rows,
                          int n_active) {
    const int64_t r = chunk_rows(rows, n_active, s->n_threads);
    size_t n = 0;
    for (int e = 0; e < n_expert; e++) {
        if (s->count[e] == 0) continue;
        for (int64_t r0 = 0; r0 < rows; r0 += r)
            items[n++] = (struct moe_item){e, (int32_t)r0, (int32_t)(r0 + r < rows ? r0 + r : rows)};
    }
    return n;
}

enum hmoe_status hmoe_sched_moe_ffn(struct hmoe_sched_moe *s, const struct hmoe_moe_weights *w, const float *x,
                                    int n_tok, float *out, struct hmoe_err *err) {
    const int64_t d = w->gate.n_in, F = w->gate.n_out;
    const int E = (int)w->router.n_out, k = w->n_expert_used;
    if (n_tok <= 0 || n_tok > s->max_tok || k > s->max_k || E > s->max_expert || d > s->max_embd ||
        F > s->max_ff)
        return HMOE_RAISE(err, HMOE_ERR_INTERNAL, "MoE FFN: %d tokens / shape exceed the workspace (max %d tokens)",
                          n_tok, s->max_tok);
    const bool same_act = hmoe_type_info[w->gate.type].vec_dot_type == hmoe_type_info[w->up.type].vec_dot_type;
    const size_t ag = act_bytes(w->gate.type, d), au = act_bytes(w->up.type, d), ad = act_bytes(w->down.type, F);
    uint8_t *xq_up = same_act ? s->xq_gate : s->xq_up, *xg_up = same_act ? s->xg_gate : s->xg_up;
    const int n_slots = n_tok * k;
    size_t n_items = 0, n_items_down = 0;
    const int64_t router_chunk = 16;

#pragma omp parallel num_threads(s->n_threads)
    {
        /* 1. Router logits (F32 x F32, no activation quantization: llama.cpp does the same). */
#pragma omp for schedule(static)
        for (int64_t r0 = 0; r0 < E; r0 += router_chunk) {
            int64_t r1 = r0 + router_chunk < E ? r0 + router_chunk : E;
            mm_rows(w->router.type, d, w->router.data, w->router.row_bytes, r0, r1, x, (size_t)d * sizeof(float), n_tok,
                    s->logits + r0, (size_t)E);
        }
        /* 2. Per token: route, and quantize x once per activation type. */
#pragma omp for schedule(static)
        for (int t = 0; t < n_tok; t++) {
            hmoe_sched_route(s->logits + (size_t)t * E, E, k, s->probs + (size_t)t * E, s->sel + (size_t)t * k,
                             s->wsel + (size_t)t * k);
            act_quantize(w->gate.type, x + (size_t)t * d, s->xq_gate + (size_t)t * ag, d);
            if (!same_act) act_quantize(w->up.type, x + (size_t)t * d, xq_up + (size_t)t * au, d);
        }
        /* 3. One serial step (cheap next to the experts): group the (token, rank) pairs by
         *    expert with a counting sort, gather each slot's quantized token row into expert
         *    order, and build both work lists. */
#pragma omp single
        {
            memset(s->count, 0, (size_t)E * sizeof *s->count);
            for (int i = 0; i < n_slots; i++) s->count[s->sel[i]]++;
            s->offset[0] = 0;
            int n_active = 0;
            for (int e = 0; e < E; e++) {
                s->offset[e + 1] = s->offset[e] + s->count[e];
                n_active += s->count[e] > 0;
            }
            for (int e = 0; e < E; e++) s->count[e] = 0;
            for (int i = 0; i < n_slots; i++) {
                const int e = s->sel[i], t = i / k, slot = s->offset[e] + s->count[e]++;
                s->tok_slot[i] = slot;
                memcpy(s->xg_gate + (size_t)slot * ag, s->xq_gate + (size_t)t * ag, ag);
                if (!same_act) memcpy(xg_up + (size_t)slot * au, xq_up + (size_t)t * au, au);
            }
            n_items = build_items(s, s->items, E, F, n_active);
            n_items_down = build_items(s, s->items + n_items, E, d, n_active);
        }
        /* 4. Gate and up rows: each item streams a row chunk of one expert once for all of
         *    its tokens. */
#pragma omp for schedule(dynamic, 1)
        for (size_t it = 0; it < n_items; it++) {
            const struct moe_item m = s->items[it];
            const int32_t off = s->offset[m.e], cnt = s->count[m.e];
            const uint8_t *wg = (const uint8_t *)w->gate.data + (size_t)m.e * w->gate.mat_bytes;
            const uint8_t *wu = (const uint8_t *)w->up.data + (size_t)m.e * w->up.mat_bytes;
            mm_rows(w->gate.type, d, wg, w->gate.row_bytes, m.r0, m.r1, s->xg_gate + (size_t)off * ag, ag, cnt,
                    s->g + (size_t)off * F + m.r0, (size_t)F);
            mm_rows(w->up.type, d, wu, w->up.row_bytes, m.r0, m.r1, xg_up + (size_t)off * au, au, cnt,
                    s->u + (size_t)off * F + m.r0, (size_t)F);
        }
        /* 5. z = silu(gate) * up, quantized once per slot for the down matrix. */
#pragma omp for schedule(static)
        for (int i = 0; i < n_slots; i++) {
            float *g = s->g + (size_t)i * F;
            const float *u = s->u + (size_t)i * F;
            for (int64_t j = 0; j < F; j++) g[j] = g[j] / (1.0f + expf(-g[j])) * u[j];
            act_quantize(w->down.type, g, s->zq + (size_t)i * ad, F);
        }
        /* 6. Down rows, same (expert, row chunk) scheme over the d output rows. */
#pragma omp for schedule(dynamic, 1)
        for (size_t it = 0; it < n_items_down; it++) {
            const struct moe_item m = s->items[n_items + it];
            const int32_t off = s->offset[m.e], cnt = s->count[m.e];
            const uint8_t *wd = (const uint8_t *)w->down.data + (size_t)m.e * w->down.mat_bytes;
            mm_rows(w->down.type, F, wd, w->down.row_bytes, m.r0, m.r1, s->zq + (size_t)off * ad, ad, cnt,
                    s->y + (size_t)off * d + m.r0, (size_t)d);
        }
        /* 7. Weighted sum in selection order: out = w0*y0 + w1*y1 + ... (llama.cpp adds the
         *    weighted expert outputs one after another in this order). */
#pragma omp for schedule(static)
        for (int t = 0; t < n_tok; t++) {
            float *o = out + (size_t)t * d;
            const float *wt = s->wsel + (size_t)t * k;
            const int32_t *slots = s->tok_slot + (size_t)t * k;
            const float *y0 = s->y + (size_t)slots[0] * d;
            for (int64_t j = 0; j < d; j++) o[j] = wt[0] * y0[j];
            for (int i = 1; i < k; i++) {
                const float *yi = s->y + (size_t)slots[i] * d;
                for (int64_t j = 0; j < d; j++) o[j] += wt[i] * yi[j];
            }
        }
    }
    return HMOE_OK;
}
