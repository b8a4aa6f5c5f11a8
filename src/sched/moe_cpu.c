/* moe_cpu.c — the MoE FFN of a micro-batch on CPU threads (qwen3moe.md §4.4, §6).
 * Route every token, sort the (token, expert) pairs by expert so each expert's gate/up/down
 * weights stream from memory once for all tokens routed to it, then run the experts as
 * jobs of the cpu.h thread team: router, gate/up by (expert, row chunk) with SwiGLU and the
 * down-activation quantization fused in, down by output-row chunk over all experts with the
 * weighted sum fused in (a decoded token: down by (expert, row chunk), the sum after the
 * job; a decoded token runs gate/up and down as one job, task_gate_up_down) — router and
 * experts in two jobs for a decoded token. Activations are quantized once per
 * token per weight type (cpu.h); the k partial results of a token are summed in selection
 * order, as llama.cpp's graph does. All buffers come from init.
 * hmoe_sched_moe_ffn_subset runs the same jobs for routing decided elsewhere (the GPU's, in
 * hybrid prefill) restricted to a subset of the experts: the (token, rank) pairs of other
 * experts are left out of the grouping and of the weighted sum.
 * Batches: the token rows are gathered (subset: quantized straight into their grouped slots) by
 * a job instead of one thread, and down runs as (expert, row chunk) items followed by a sum job,
 * so each gemm call prepares an expert's activations for hundreds of rows instead of 32 (with
 * 32-row calls about a third of an AMX call went to preparing activations). Batched calls keep
 * phase times (a few clock reads per call) for the verbose hybrid report.
 */
#include "hmoe/sched.h"

#include <math.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hmoe/cpu.h"

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
    float *probs;      /* [max_tok][2E] router scratch (softmax; sigmoid + selection scores) */
    uint8_t *xq_gate;  /* [max_tok][act_gate] x quantized for the gate type (RELU2: the up type), per token */
    uint8_t *xq_up;    /* [max_tok][act_up]   same for the up type (unused when types match) */
    uint8_t *xg_gate;  /* [max_tok * k][act_gate] the same rows gathered in expert order */
    uint8_t *xg_up;    /* [max_tok * k][act_up] */
    float *g;          /* [max_tok * k][F] gate outputs, then silu(g) * u */
    float *u;          /* [max_tok * k][F] up outputs */
    uint8_t *zq;       /* [max_tok * k][act_down] silu(g) * u quantized for the down type */
    float *y;          /* [max_tok * k][d] down outputs per (token, expert) */
    int32_t *active;   /* [E] experts with at least one token, ascending */
    int32_t *slot_tok; /* [max_tok * k] token of each grouped slot */
    _Atomic int32_t *gu_done; /* [E] decode: gate/up items finished per active expert */
    struct hmoe_sched_moe_item *items; /* [max_items] decode: the work items of the call (moe_plan.c) */
    int max_items;
    uint64_t *thr_items, *thr_bytes;   /* [n_threads] decode: items run and bytes read per thread */
    struct hmoe_sched_moe_chunks chunks; /* work-item sizes (defaults at init; tests change them) */
    struct hmoe_sched_moe_times times;
    struct hmoe_sched_moe_reads reads;
};

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

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

/* Best two of n scores (group score of the DeepSeek-V3 rule); n >= 1. */
static float top2_sum(const float *v, int n) {
    float a = -INFINITY, b = -INFINITY;
    for (int i = 0; i < n; i++) {
        if (v[i] > a) b = a, a = v[i];
        else if (v[i] > b) b = v[i];
    }
    return n > 1 ? a + b : a;
}

void hmoe_sched_route_sigmoid(const struct hmoe_moe_weights *w, const float *logits, float *probs, int32_t *sel,
                              float *wsel) {
    const int E = (int)w->router.n_out, k = w->n_expert_used;
    float *p = probs, *score = probs + E;
    for (int e = 0; e < E; e++) {
        p[e] = 1.0f / (1.0f + expf(-logits[e]));
        score[e] = w->sel_bias ? p[e] + w->sel_bias[e] : p[e];
    }
    if (w->n_group > 1 && E % w->n_group == 0 && w->n_group_used < w->n_group) {
        /* Keep the n_group_used groups with the best top-2 sums; the rest cannot be chosen. */
        const int ng = w->n_group, per = E / ng;
        float gs[256];
        for (int g = 0; g < ng && g < 256; g++) gs[g] = top2_sum(score + g * per, per);
        for (int r = 0; r < ng - w->n_group_used; r++) { /* drop the worst group, ng - used times */
            int worst = -1;
            for (int g = 0; g < ng && g < 256; g++)
                if (gs[g] != INFINITY && (worst < 0 || gs[g] < gs[worst])) worst = g;
            gs[worst] = INFINITY; /* marked dropped */
            for (int e = worst * per; e < (worst + 1) * per; e++) score[e] = -INFINITY;
        }
    }
    /* Top-k by score, descending; strict '>' keeps the lowest index on ties; chosen ones are
     * marked NaN (never greater than anything). */
    for (int i = 0; i < k; i++) {
        int best = -1;
        for (int e = 0; e < E; e++)
            if (score[e] == score[e] && (best < 0 || score[e] > score[best])) best = e;
        if (best < 0) best = 0; /* only NaN scores left: a broken router; stay in range */
        sel[i] = best;
        wsel[i] = p[best];
        score[best] = NAN;
    }
    if (!w->no_renorm) {
        double wsum = 0.0;
        for (int i = 0; i < k; i++) wsum += (double)wsel[i];
        float den = (float)wsum;
        if (den < 6.103515625e-5f) den = 6.103515625e-5f;
        for (int i = 0; i < k; i++) wsel[i] /= den;
    }
    if (w->w_scale != 0.0f && w->w_scale != 1.0f)
        for (int i = 0; i < k; i++) wsel[i] *= w->w_scale;
}

void hmoe_sched_route_topk_softmax(const float *logits, int n_expert, int k, int32_t *sel, float *w) {
    /* k linear scans over the logits; a chosen expert is skipped by index, so any logit value
     * (also -inf) stays selectable and NaN never wins a comparison. */
    for (int i = 0; i < k; i++) {
        int best = -1;
        for (int e = 0; e < n_expert; e++) {
            bool taken = false;
            for (int j = 0; j < i; j++) taken |= sel[j] == e;
            if (!taken && (best < 0 || logits[e] > logits[best])) best = e;
        }
        sel[i] = best;
    }
    const float mx = logits[sel[0]];
    double sum = 0.0;
    for (int i = 0; i < k; i++) {
        w[i] = expf(logits[sel[i]] - mx);
        sum += (double)w[i];
    }
    const float inv = (float)(1.0 / sum);
    for (int i = 0; i < k; i++) w[i] *= inv;
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
        if (!w->router.data) continue; /* a layer without experts (nemotron_h mixers, dense FFN) */
        if (w->n_expert_used <= 0 || w->n_expert_used > w->router.n_out) {
            free(s);
            return HMOE_RAISE(err, HMOE_ERR_ARG, "MoE layer %d: expert_used_count %d must be in 1..%lld", l,
                              w->n_expert_used, (long long)w->router.n_out);
        }
        s->max_k = HMOE_MAX(s->max_k, w->n_expert_used);
        s->max_expert = HMOE_MAX(s->max_expert, (int)w->router.n_out);
        const struct hmoe_mat *in1 = w->act == HMOE_MOE_RELU2 ? &w->up : &w->gate;
        s->max_embd = HMOE_MAX(s->max_embd, w->up.n_in);
        s->max_ff = HMOE_MAX(s->max_ff, w->up.n_out);
        s->act_gate_bytes = HMOE_MAX(s->act_gate_bytes, act_bytes(in1->type, in1->n_in));
        s->act_up_bytes = HMOE_MAX(s->act_up_bytes, act_bytes(w->up.type, w->up.n_in));
        s->act_down_bytes = HMOE_MAX(s->act_down_bytes, act_bytes(w->down.type, w->down.n_in));
    }
    const size_t nt = (size_t)max_tok, ns = nt * (size_t)s->max_k, E = (size_t)s->max_expert;
    const size_t F = (size_t)s->max_ff, d = (size_t)s->max_embd;
    s->count = calloc(E, sizeof *s->count);
    s->offset = calloc(E + 1, sizeof *s->offset);
    s->sel = calloc(ns, sizeof *s->sel);
    s->wsel = calloc(ns, sizeof *s->wsel);
    s->tok_slot = calloc(ns, sizeof *s->tok_slot);
    s->logits = calloc(nt * E, sizeof *s->logits);
    s->probs = calloc(nt * 2 * E, sizeof *s->probs); /* sigmoid routing: probabilities + scores */
    s->xq_gate = calloc(nt, s->act_gate_bytes);
    s->xq_up = calloc(nt, s->act_up_bytes);
    s->xg_gate = calloc(ns, s->act_gate_bytes);
    s->xg_up = calloc(ns, s->act_up_bytes);
    s->g = calloc(ns * F, sizeof *s->g);
    s->u = calloc(ns * F, sizeof *s->u);
    s->zq = calloc(ns, s->act_down_bytes);
    s->y = calloc(ns * d, sizeof *s->y);
    s->active = calloc(E, sizeof *s->active);
    s->slot_tok = calloc(ns, sizeof *s->slot_tok);
    s->gu_done = calloc(E, sizeof *s->gu_done);
    s->max_items = hmoe_sched_moe_plan_max_items(s->max_embd, s->max_ff, s->max_k);
    s->items = calloc((size_t)HMOE_MAX(1, s->max_items), sizeof *s->items);
    s->thr_items = calloc((size_t)n_threads, sizeof *s->thr_items);
    s->thr_bytes = calloc((size_t)n_threads, sizeof *s->thr_bytes);
    hmoe_sched_moe_chunks_default(&s->chunks);
    if (!s->slot_tok || !s->count || !s->offset || !s->sel || !s->wsel || !s->tok_slot || !s->logits || !s->probs ||
        !s->xq_gate || !s->xq_up || !s->xg_gate || !s->xg_up || !s->g || !s->u || !s->zq || !s->y || !s->active ||
        !s->gu_done || !s->items || !s->thr_items || !s->thr_bytes) {
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
    free(s->active);
    free(s->slot_tok);
    free((void *)s->gu_done);
    free(s->items);
    free(s->thr_items);
    free(s->thr_bytes);
    free(s);
}

const int32_t *hmoe_sched_moe_last_selection(const struct hmoe_sched_moe *s) { return s->sel; }

void hmoe_sched_moe_thread_work(const struct hmoe_sched_moe *s, int n, uint64_t *items, uint64_t *bytes) {
    for (int t = 0; t < n && t < s->n_threads; t++) items[t] = s->thr_items[t], bytes[t] = s->thr_bytes[t];
}

/* Rows [r0, r1) of one matrix for ntok activation rows; one token is a plain gemv. */
static void mm_rows(enum hmoe_type t, int64_t ncols, const void *w, size_t row_bytes, int64_t r0, int64_t r1,
                    const void *xq, size_t xq_stride, int ntok, float *y, size_t y_stride) {
    if (ntok == 1) hmoe_cpu_gemv(t, ncols, w, row_bytes, r0, r1, xq, y);
    else hmoe_cpu_gemm(t, ncols, w, row_bytes, r0, r1, xq, xq_stride, ntok, y, y_stride);
}

/* Rows per work item: about `per_thread` items per thread so the dynamic hand-out evens out,
 * a multiple of 16 rows in [16, max_rows], at most the whole matrix. */
static int64_t chunk_rows(int64_t rows, int64_t n_units, int n_threads, int per_thread, int64_t max_rows) {
    int64_t r = rows * n_units / ((int64_t)n_threads * per_thread);
    r = r < 16 ? 16 : r > max_rows ? max_rows : r;
    r = (r + 15) / 16 * 16;
    return r < rows ? r : rows;
}

/* Everything the work items of one call read (the pool hands them a pointer to it). */
struct moe_call {
    struct hmoe_sched_moe *s;
    const struct hmoe_moe_weights *w;
    const struct hmoe_mat *in1;   /* the first hidden matrix: gate (SWIGLU) or up (RELU2) */
    const float *xr;              /* router input: n_tok rows of router.n_in floats */
    const float *x;
    float *out;
    int64_t d, F;
    int E, k, n_tok;
    bool same_act;
    size_t ag, au, ad;
    uint8_t *xq_up, *xg_up;
    int64_t chunk_f, chunk_d;     /* rows per gate/up item, per down item */
    bool quant_in_item;           /* gate/up items quantize their own rows of z (chunk_f on block bounds) */
    int n_active;                 /* experts with tokens, listed in s->active */
    const uint8_t *mask;          /* subset call: mask[e] != 0 for the experts computed here; NULL: all */
    int n_pairs;                  /* (token, rank) pairs grouped: n_tok * k unless a mask drops some */
    int64_t items_per_expert;     /* gate/up items of one expert */
    bool batch;                   /* n_tok > 1: gather job, down by expert, then a sum job */
    const struct hmoe_sched_moe_item *items; /* decode: the items of task_gate_up_down (moe_plan.c) */
    int64_t router_rows;          /* router rows per item */
    struct hmoe_cpu_lanes *lanes; /* decode router: items in per-thread lanes (NULL: item order) */
    int64_t chunk_sum;            /* tokens (rows of out) per item of the sum job (batch) */
};

/* Router logits for router_rows experts, all tokens (F32 x F32, no activation quantization, as llama.cpp). */
static void task_router(void *arg, int64_t it, int tid) {
    const struct moe_call *m = arg;
    if (m->lanes) it = hmoe_cpu_lanes_next(m->lanes, tid);
    const int64_t r0 = it * m->router_rows, r1 = HMOE_MIN(r0 + m->router_rows, (int64_t)m->E);
    const int64_t dr = m->w->router.n_in;
    mm_rows(m->w->router.type, dr, m->w->router.data, m->w->router.row_bytes, r0, r1, m->xr, (size_t)dr * sizeof(float),
            m->n_tok, m->s->logits + r0, (size_t)m->E);
}

/* One token: route, and quantize its row once per activation type. */
static void task_route(void *arg, int64_t t, int tid) {
    (void)tid;
    const struct moe_call *m = arg;
    struct hmoe_sched_moe *s = m->s;
    float *lg = s->logits + (size_t)t * m->E;
    if (m->w->router_bias)
        for (int e = 0; e < m->E; e++) lg[e] += m->w->router_bias[e];
    if (m->w->gating == HMOE_MOE_SIGMOID)
        hmoe_sched_route_sigmoid(m->w, lg, s->probs + (size_t)t * 2 * m->E, s->sel + (size_t)t * m->k,
                                 s->wsel + (size_t)t * m->k);
    else if (m->w->gating == HMOE_MOE_TOPK_SOFTMAX)
        hmoe_sched_route_topk_softmax(lg, m->E, m->k, s->sel + (size_t)t * m->k, s->wsel + (size_t)t * m->k);
    else
        hmoe_sched_route(lg, m->E, m->k, s->probs + (size_t)t * 2 * m->E, s->sel + (size_t)t * m->k,
                         s->wsel + (size_t)t * m->k);
    act_quantize(m->in1->type, m->x + (size_t)t * m->d, s->xq_gate + (size_t)t * m->ag, m->d);
    if (!m->same_act) act_quantize(m->w->up.type, m->x + (size_t)t * m->d, m->xq_up + (size_t)t * m->au, m->d);
}

/* Quantize elements [r0, r1) of one z row into its quantized row: activation blocks are
 * independent, so a range on block boundaries lands at its own byte offset. */
static void z_quantize(const struct moe_call *m, int slot, int64_t r0, int64_t r1) {
    const enum hmoe_type dt = m->w->down.type, vdt = hmoe_type_info[dt].vec_dot_type;
    uint8_t *dst = m->s->zq + (size_t)slot * m->ad + hmoe_row_bytes(vdt, r0);
    act_quantize(dt, m->s->g + (size_t)slot * (size_t)m->F + r0, dst, r1 - r0);
}

/* gpt-oss's clamped SwiGLU (gpt-oss.md, MoE differences): the gate is clamped from above
 * only, the up value on both sides and offset by one; alpha = 1.702 and the limit 7 are fixed
 * constants of the model family. g = g' * sigmoid(alpha * g') * (u' + 1), in place over n. */
void hmoe_sched_swiglu_oai(float *g, const float *u, int64_t n) {
    const float alpha = 1.702f, limit = 7.0f;
    for (int64_t j = 0; j < n; j++) {
        const float x = g[j] < limit ? g[j] : limit;
        const float y = u[j] < -limit ? -limit : u[j] > limit ? limit : u[j];
        g[j] = x / (1.0f + expf(-alpha * x)) * (y + 1.0f);
    }
}

/* Rows [r0, r1) of one expert's gate and up matrices for all of its tokens (the weights
 * stream from memory once), then z = silu(gate) * up on those rows, quantized for the down
 * matrix when the rows are whole activation blocks. */
static void gate_up_rows(const struct moe_call *m, int e, int64_t r0, int64_t r1) {
    struct hmoe_sched_moe *s = m->s;
    const struct hmoe_moe_weights *w = m->w;
    const int32_t off = s->offset[e], cnt = s->count[e];
    const uint8_t *wu = (const uint8_t *)w->up.data + (size_t)e * w->up.mat_bytes;
    if (w->act == HMOE_MOE_RELU2) {
        /* Ungated expert: z = relu(up x)^2, computed in place of the gate output. */
        mm_rows(w->up.type, m->d, wu, w->up.row_bytes, r0, r1, s->xg_gate + (size_t)off * m->ag, m->ag, cnt,
                s->g + (size_t)off * m->F + r0, (size_t)m->F);
        for (int32_t i = off; i < off + cnt; i++) {
            float *g = s->g + (size_t)i * m->F;
            for (int64_t j = r0; j < r1; j++) g[j] = g[j] > 0.0f ? g[j] * g[j] : 0.0f;
            if (m->quant_in_item) z_quantize(m, i, r0, r1);
        }
        return;
    }
    const uint8_t *wg = (const uint8_t *)w->gate.data + (size_t)e * w->gate.mat_bytes;
    mm_rows(w->gate.type, m->d, wg, w->gate.row_bytes, r0, r1, s->xg_gate + (size_t)off * m->ag, m->ag, cnt,
            s->g + (size_t)off * m->F + r0, (size_t)m->F);
    mm_rows(w->up.type, m->d, wu, w->up.row_bytes, r0, r1, m->xg_up + (size_t)off * m->au, m->au, cnt,
            s->u + (size_t)off * m->F + r0, (size_t)m->F);
    const float *bg = w->gate_bias ? w->gate_bias + (size_t)e * (size_t)m->F : NULL;
    const float *bu = w->up_bias ? w->up_bias + (size_t)e * (size_t)m->F : NULL;
    for (int32_t i = off; i < off + cnt; i++) {
        float *g = s->g + (size_t)i * m->F, *u = s->u + (size_t)i * m->F;
        if (bg)
            for (int64_t j = r0; j < r1; j++) g[j] += bg[j];
        if (bu)
            for (int64_t j = r0; j < r1; j++) u[j] += bu[j];
        if (w->act == HMOE_MOE_SWIGLU_OAI) hmoe_sched_swiglu_oai(g + r0, u + r0, r1 - r0);
        else
            hmoe_cpu_swiglu(g + r0, u + r0, r1 - r0);
        if (m->quant_in_item) z_quantize(m, i, r0, r1);
    }
}

static void task_gate_up(void *arg, int64_t it, int tid) {
    (void)tid;
    const struct moe_call *m = arg;
    const int64_t r0 = (it % m->items_per_expert) * m->chunk_f;
    gate_up_rows(m, m->s->active[it / m->items_per_expert], r0, HMOE_MIN(r0 + m->chunk_f, m->F));
}

static void task_z_quantize(void *arg, int64_t slot, int tid) {
    (void)tid;
    const struct moe_call *m = arg;
    z_quantize(m, (int)slot, 0, m->F);
}

/* Rows [r0, r1) of expert e's down matrix for its tokens, into their y slots. */
static void down_rows(const struct moe_call *m, int e, int64_t r0, int64_t r1) {
    const struct hmoe_sched_moe *s = m->s;
    const struct hmoe_moe_weights *w = m->w;
    const int32_t off = s->offset[e], cnt = s->count[e];
    const uint8_t *wd = (const uint8_t *)w->down.data + (size_t)e * w->down.mat_bytes;
    mm_rows(w->down.type, m->F, wd, w->down.row_bytes, r0, r1, s->zq + (size_t)off * m->ad, m->ad, cnt,
            s->y + (size_t)off * (size_t)m->d + r0, (size_t)m->d);
    if (!w->down_bias) return;
    const float *b = w->down_bias + (size_t)e * (size_t)m->d;
    for (int32_t i = off; i < off + cnt; i++) {
        float *y = s->y + (size_t)i * (size_t)m->d;
        for (int64_t j = r0; j < r1; j++) y[j] += b[j];
    }
}

/* o = w * y and o += w * y over n floats, 8 lanes at a time (GNU vector extension; -O2's
 * cheap vectoriser leaves the plain loops scalar: 0.36 % of decode CPU samples).
 * Every element gets the same single-precision product and sum as the scalar loop. */
typedef float v8f __attribute__((vector_size(32)));

static void sum_first(float *o, const float *y, float w, int64_t n) {
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
        v8f v;
        memcpy(&v, y + j, sizeof v);
        v = v * w;
        memcpy(o + j, &v, sizeof v);
    }
    for (; j < n; j++) o[j] = w * y[j];
}

static void sum_next(float *o, const float *y, float w, int64_t n) {
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
        v8f v, a;
        memcpy(&v, y + j, sizeof v);
        memcpy(&a, o + j, sizeof a);
        a = a + v * w;
        memcpy(o + j, &a, sizeof a);
    }
    for (; j < n; j++) o[j] += w * y[j];
}

/* Rows [r0, r1) of out for tokens [t0, t1): the weighted sum of each token's k expert results
 * in selection order, out = w0*y0 + w1*y1 + ... (llama.cpp adds the weighted expert outputs
 * one after another in this order). */
static void down_sum(const struct moe_call *m, int t0, int t1, int64_t r0, int64_t r1) {
    const struct hmoe_sched_moe *s = m->s;
    const int64_t d = m->d;
    for (int t = t0; t < t1; t++) {
        float *o = m->out + (size_t)t * d;
        const float *wt = s->wsel + (size_t)t * m->k;
        const int32_t *slots = s->tok_slot + (size_t)t * m->k;
        int i0 = 0;
        while (i0 < m->k && slots[i0] < 0) i0++; /* pairs of experts outside a subset are -1 */
        if (i0 == m->k) {
            for (int64_t j = r0; j < r1; j++) o[j] = 0.0f;
            continue;
        }
        const float *y0 = s->y + (size_t)slots[i0] * d;
        sum_first(o + r0, y0 + r0, wt[i0], r1 - r0);
        for (int i = i0 + 1; i < m->k; i++)
            if (slots[i] >= 0) sum_next(o + r0, s->y + (size_t)slots[i] * d + r0, wt[i], r1 - r0);
    }
}

/* Decode: one item = rows [r0, r0 + chunk_d) of one active expert, so an item streams one
 * long contiguous run of its down matrix. Split by output rows over all experts, an item
 * streams 8 runs of 80 KB (d = 2048, Q6_K), each starting cold; down takes 1.8-2.1 ms of a
 * 12.5 ms token that way against 1.4 ms by expert. The weighted sum
 * follows the job on the caller (d x k multiply-adds; the same values in the same order). */
static void task_down_expert(void *arg, int64_t it, int tid) {
    (void)tid;
    const struct moe_call *m = arg;
    const int64_t per = (m->d + m->chunk_d - 1) / m->chunk_d;
    const int64_t r0 = (it % per) * m->chunk_d, r1 = HMOE_MIN(r0 + m->chunk_d, m->d);
    down_rows(m, m->s->active[it / per], r0, r1);
}

/* Decode, gate/up and down in one job over the items of hmoe_sched_moe_plan_decode (gate/up
 * items of every active expert, then the down items, the last expert's finer).
 * A down item of expert a first waits until a's gate/up items are done. That wait cannot
 * deadlock: items are claimed in increasing order, so every gate/up item is claimed (and
 * running or done) before any down item is; and it is short, because expert a's gate/up was
 * claimed well before (the down items of the experts before a lie between). */
static void task_gate_up_down(void *arg, int64_t it, int tid) {
    const struct moe_call *m = arg;
    const struct hmoe_sched_moe_item *item = &m->items[it];
    m->s->thr_items[tid]++;
    m->s->thr_bytes[tid] += item->bytes;
    if (!item->down) {
        gate_up_rows(m, m->s->active[item->a], item->r0, item->r1);
        atomic_fetch_add_explicit(&m->s->gu_done[item->a], 1, memory_order_release);
        return;
    }
    for (unsigned i = 0; atomic_load_explicit(&m->s->gu_done[item->a], memory_order_acquire) < m->items_per_expert;
         i++) {
        if (i < 20000) {
#if defined(__x86_64__) || defined(__i386__)
            __builtin_ia32_pause();
#endif
        } else {
            sched_yield(); /* the thread running a's gate/up may share our core */
        }
    }
    down_rows(m, m->s->active[item->a], item->r0, item->r1);
}

/* Serial step between routing and the experts (cheap next to them): group the (token, rank)
 * pairs by expert with a counting sort, gather each slot's quantized token row into expert
 * order (a batch leaves that to task_gather: one thread copied ~0.4 ms per 1024 pairs on the
 * H200 host), list the active experts. Pairs of experts outside m->mask get slot -1. */
static void group_by_expert(struct moe_call *m) {
    struct hmoe_sched_moe *s = m->s;
    const int E = m->E, k = m->k, n_slots = m->n_tok * k;
    memset(s->count, 0, (size_t)E * sizeof *s->count);
    for (int i = 0; i < n_slots; i++)
        if (!m->mask || m->mask[s->sel[i]]) s->count[s->sel[i]]++;
    s->offset[0] = 0;
    m->n_active = 0;
    for (int e = 0; e < E; e++) {
        s->offset[e + 1] = s->offset[e] + s->count[e];
        if (s->count[e] > 0) s->active[m->n_active++] = e;
    }
    m->n_pairs = s->offset[E];
    for (int e = 0; e < E; e++) s->count[e] = 0;
    for (int i = 0; i < n_slots; i++) {
        if (m->mask && !m->mask[s->sel[i]]) {
            s->tok_slot[i] = -1;
            continue;
        }
        const int e = s->sel[i], t = i / k, slot = s->offset[e] + s->count[e]++;
        s->tok_slot[i] = slot;
        s->slot_tok[slot] = t;
        if (m->batch) continue; /* task_gather fills the slots */
        memcpy(s->xg_gate + (size_t)slot * m->ag, s->xq_gate + (size_t)t * m->ag, m->ag);
        if (!m->same_act) memcpy(m->xg_up + (size_t)slot * m->au, m->xq_up + (size_t)t * m->au, m->au);
    }
}

/* Batch: the rows of grouped slots [it*64, it*64+64): a subset call quantizes x straight into the
 * slot (a token has ~k*n/E of its pairs in an n-expert subset, so that costs about one
 * quantization per token and saves the copy); a full call copies the row quantized per token. */
static void task_gather(void *arg, int64_t it, int tid) {
    (void)tid;
    const struct moe_call *m = arg;
    struct hmoe_sched_moe *s = m->s;
    const int32_t i1 = (int32_t)HMOE_MIN((it + 1) * 64, (int64_t)m->n_pairs);
    for (int32_t slot = (int32_t)(it * 64); slot < i1; slot++) {
        const int t = s->slot_tok[slot];
        uint8_t *dg = s->xg_gate + (size_t)slot * m->ag, *du = m->xg_up + (size_t)slot * m->au;
        if (m->mask) {
            act_quantize(m->in1->type, m->x + (size_t)t * m->d, dg, m->d);
            if (!m->same_act) act_quantize(m->w->up.type, m->x + (size_t)t * m->d, du, m->d);
        } else {
            memcpy(dg, s->xq_gate + (size_t)t * m->ag, m->ag);
            if (!m->same_act) memcpy(du, m->xq_up + (size_t)t * m->au, m->au);
        }
    }
}

/* Batch: the weighted sum after the down items, item = chunk_sum whole rows of out (tokens):
 * each token's k y rows and its out row are contiguous runs (a split by output columns read
 * 512 tokens x k short pieces per item). Same additions in the same order either way. */
static void task_sum(void *arg, int64_t it, int tid) {
    (void)tid;
    const struct moe_call *m = arg;
    down_sum(m, (int)(it * m->chunk_sum), (int)HMOE_MIN((it + 1) * m->chunk_sum, (int64_t)m->n_tok), 0, m->d);
}

/* Subset call, per token: take the given routing and quantize the row once per activation type
 * when at least one of its experts is in the subset (the others are never read). */
static void task_take_route(void *arg, int64_t t, int tid) {
    (void)tid;
    const struct moe_call *m = arg;
    struct hmoe_sched_moe *s = m->s;
    bool any = false;
    for (int i = 0; i < m->k; i++) any |= m->mask[s->sel[(size_t)t * m->k + (size_t)i]] != 0;
    if (!any) return;
    act_quantize(m->in1->type, m->x + (size_t)t * m->d, s->xq_gate + (size_t)t * m->ag, m->d);
    if (!m->same_act) act_quantize(m->w->up.type, m->x + (size_t)t * m->d, m->xq_up + (size_t)t * m->au, m->d);
}

/* Both entry points: route here (sel == NULL) or take sel/wsel, then the experts of the subset
 * `mask` (NULL: all). */
static enum hmoe_status moe_run(struct hmoe_sched_moe *s, const struct hmoe_moe_weights *w, const float *xr,
                                const float *x, int n_tok, const int32_t *sel, const float *wsel, const uint8_t *mask, float *out,
                                struct hmoe_err *err) {
    const int64_t d = w->up.n_in, F = w->up.n_out;
    const int E = (int)w->router.n_out, k = w->n_expert_used;
    if (n_tok <= 0 || n_tok > s->max_tok || k > s->max_k || E > s->max_expert || d > s->max_embd ||
        F > s->max_ff || w->down.n_out > s->max_embd)
        return HMOE_RAISE(err, HMOE_ERR_INTERNAL, "MoE FFN: %d tokens / shape exceed the workspace (max %d tokens)",
                          n_tok, s->max_tok);
    const int nt = s->n_threads;
    struct moe_call m = {.s = s, .w = w, .xr = xr, .x = x, .out = out, .d = d, .F = F, .E = E, .k = k, .n_tok = n_tok,
                         .mask = mask};
    m.in1 = w->act == HMOE_MOE_RELU2 ? &w->up : &w->gate;
    m.same_act = hmoe_type_info[m.in1->type].vec_dot_type == hmoe_type_info[w->up.type].vec_dot_type;
    m.ag = act_bytes(m.in1->type, d);
    m.au = act_bytes(w->up.type, d);
    m.ad = act_bytes(w->down.type, F);
    m.xq_up = m.same_act ? s->xq_gate : s->xq_up;
    m.xg_up = m.same_act ? s->xg_gate : s->xg_up;

    m.batch = n_tok > 1;
    const bool timed = m.batch;
    const struct hmoe_sched_moe_chunks *ch = &s->chunks;
    double t[HMOE_MOE_PH_COUNT + 1] = {0};
    if (timed) t[0] = now_ms();

    /* 1. Router logits; 2. per token: route and quantize (one token: no job; a batched subset
     *    call quantizes in the gather instead). */
    if (sel) {
        memcpy(s->sel, sel, (size_t)n_tok * (size_t)k * sizeof *sel);
        memcpy(s->wsel, wsel, (size_t)n_tok * (size_t)k * sizeof *wsel);
        if (!m.batch) hmoe_cpu_parallel(n_tok >= 4 ? nt : 1, n_tok, task_take_route, &m);
    } else {
        /* a decoded token's router rows in per-thread lanes: one contiguous run per thread */
        /* a decoded token: about one item per thread (8 rows of 128 experts on 16 threads), at
         * least 4 rows; a batch: 16 rows an item */
        m.router_rows = n_tok == 1 ? HMOE_MAX(4, (E + nt - 1) / nt + 3) / 4 * 4 : 16;
        const int64_t n_rt = (E + m.router_rows - 1) / m.router_rows;
        struct hmoe_cpu_lanes lanes;
        if (n_tok == 1 && nt > 1) {
            hmoe_cpu_lanes_init(&lanes, n_rt, nt);
            m.lanes = &lanes;
        }
        hmoe_cpu_parallel(nt, n_rt, task_router, &m);
        m.lanes = NULL;
        hmoe_cpu_parallel(n_tok >= 4 ? nt : 1, n_tok, task_route, &m);
    }
    if (timed) t[1 + HMOE_MOE_PH_ROUTE] = now_ms();
    /* 3. Group by expert (serial counting sort; a batch gathers the rows in a job). */
    group_by_expert(&m);
    /* Expert weights this call reads (each active expert once) against what one read per
     * (token, rank) pair would be: the sharing of a batch of rows. */
    const uint64_t eb = (uint64_t)(w->gate.data ? w->gate.mat_bytes : 0) + w->up.mat_bytes + w->down.mat_bytes;
    s->reads.calls++;
    s->reads.experts += (uint64_t)m.n_active;
    s->reads.pairs += (uint64_t)m.n_pairs;
    s->reads.bytes += (uint64_t)m.n_active * eb;
    s->reads.pair_bytes += (uint64_t)m.n_pairs * eb;
    if (m.batch && m.n_pairs > 0) hmoe_cpu_parallel(nt, (m.n_pairs + 63) / 64, task_gather, &m);
    if (timed) t[1 + HMOE_MOE_PH_GROUP] = now_ms();
    /* 4+5 for a decoded token in one job (task_gate_up_down) over the items of
     *    hmoe_sched_moe_plan_decode, then the weighted sum on this thread. */
    const int64_t qb = hmoe_type_info[hmoe_type_info[w->down.type].vec_dot_type].blck;
    if (n_tok == 1 && F % qb == 0 && m.n_active > 0) {
        const struct hmoe_sched_moe_shape sh = {
            .d = d, .F = F, .qb = qb, .down_row_bytes = w->down.row_bytes, .n_active = m.n_active, .n_threads = nt,
            .per_thread = 4, .tail = ch->dn_tail_items,
            .hidden_row_bytes = w->up.row_bytes + (w->act == HMOE_MOE_RELU2 ? 0 : w->gate.row_bytes)};
        int gu = 0;
        const int n_items = hmoe_sched_moe_plan_decode(&sh, s->items, s->max_items, &gu);
        if (n_items < 0) return HMOE_RAISE(err, HMOE_ERR_INTERNAL, "MoE FFN: decode work items exceed the workspace");
        m.items = s->items;
        m.items_per_expert = gu;
        m.quant_in_item = true;
        memset(s->thr_items, 0, (size_t)nt * sizeof *s->thr_items);
        memset(s->thr_bytes, 0, (size_t)nt * sizeof *s->thr_bytes);
        for (int a = 0; a < m.n_active; a++) atomic_store_explicit(&s->gu_done[a], 0, memory_order_relaxed);
        hmoe_cpu_parallel(nt, n_items, task_gate_up_down, &m);
        down_sum(&m, 0, 1, 0, d);
        return HMOE_OK;
    }
    /* 4. Gate/up rows of every active expert, SwiGLU and (on block bounds) quantization of z.
     *    Items: (expert, row chunk), chunks->gu_per_thread items per thread, at most
     *    chunks->gu_max_rows rows each; a chunk is rounded to whole activation blocks of the
     *    down matrix when that keeps enough items, else z is quantized in a job of its own. */
    m.chunk_f = chunk_rows(F, m.n_active, nt, n_tok == 1 ? 4 : ch->gu_per_thread, n_tok == 1 ? F : ch->gu_max_rows);
    const int64_t chunk_q = (m.chunk_f + qb - 1) / qb * qb;
    m.quant_in_item = F % qb == 0 && chunk_q <= 2 * m.chunk_f;
    if (m.quant_in_item) m.chunk_f = HMOE_MIN(chunk_q, F);
    m.items_per_expert = (F + m.chunk_f - 1) / m.chunk_f;
    hmoe_cpu_parallel(nt, (int64_t)m.n_active * m.items_per_expert, task_gate_up, &m);
    if (timed) t[1 + HMOE_MOE_PH_GATE_UP] = now_ms();
    if (!m.quant_in_item) hmoe_cpu_parallel(m.n_pairs >= 4 ? nt : 1, m.n_pairs, task_z_quantize, &m);
    if (timed) t[1 + HMOE_MOE_PH_Z] = now_ms();
    /* 5. Down rows of every active expert and the weighted sum: (expert, row chunk) items (a
     *    decoded token whose F is not whole activation blocks: ~4 per thread; a batch: chunks of
     *    up to chunks->dn_max_rows rows, ~chunks->dn_per_thread items per thread), then the sum
     *    (a batch: by token chunks of out). */
    if (n_tok == 1) {
        m.chunk_d = chunk_rows(d, m.n_active, nt, 4, d);
        hmoe_cpu_parallel(nt, (int64_t)m.n_active * ((d + m.chunk_d - 1) / m.chunk_d), task_down_expert, &m);
        down_sum(&m, 0, 1, 0, d);
        return HMOE_OK;
    }
    m.chunk_d = chunk_rows(d, m.n_active, nt, ch->dn_per_thread, ch->dn_max_rows);
    if (m.n_active > 0)
        hmoe_cpu_parallel(nt, (int64_t)m.n_active * ((d + m.chunk_d - 1) / m.chunk_d), task_down_expert, &m);
    if (timed) t[1 + HMOE_MOE_PH_DOWN] = now_ms();
    m.chunk_sum = HMOE_MAX(1, n_tok / (4 * nt)); /* ~4 items per thread */
    hmoe_cpu_parallel(nt, (n_tok + m.chunk_sum - 1) / m.chunk_sum, task_sum, &m);
    t[1 + HMOE_MOE_PH_SUM] = now_ms();
    struct hmoe_sched_moe_times *a = &s->times;
    a->calls++;
    a->experts += (uint64_t)m.n_active;
    a->pairs += (uint64_t)m.n_pairs;
    for (int p = 0; p < HMOE_MOE_PH_TOTAL; p++) a->ms[p] += t[1 + p] - t[p];
    a->ms[HMOE_MOE_PH_TOTAL] += t[1 + HMOE_MOE_PH_SUM] - t[0];
    return HMOE_OK;
}

enum hmoe_status hmoe_sched_moe_ffn(struct hmoe_sched_moe *s, const struct hmoe_moe_weights *w, const float *x,
                                    int n_tok, float *out, struct hmoe_err *err) {
    return moe_run(s, w, x, x, n_tok, NULL, NULL, NULL, out, err);
}

enum hmoe_status hmoe_sched_moe_ffn_split(struct hmoe_sched_moe *s, const struct hmoe_moe_weights *w,
                                          const float *x_route, const float *x, int n_tok, float *out,
                                          struct hmoe_err *err) {
    return moe_run(s, w, x_route, x, n_tok, NULL, NULL, NULL, out, err);
}

enum hmoe_status hmoe_sched_moe_ffn_subset(struct hmoe_sched_moe *s, const struct hmoe_moe_weights *w,
                                           const float *x, int n_tok, const int32_t *sel, const float *wsel,
                                           const uint8_t *mask, float *out, struct hmoe_err *err) {
    const int E = (int)w->router.n_out, k = w->n_expert_used;
    if (!sel || !wsel || !mask) return HMOE_RAISE(err, HMOE_ERR_ARG, "MoE FFN subset: routing or expert mask missing");
    for (int64_t i = 0; n_tok > 0 && n_tok <= s->max_tok && i < (int64_t)n_tok * k; i++)
        if (sel[i] < 0 || sel[i] >= E)
            return HMOE_RAISE(err, HMOE_ERR_ARG,
                              "MoE FFN subset: token %lld, rank %lld routed to expert %d, outside 0..%d (bad routing "
                              "input)",
                              (long long)(i / k), (long long)(i % k), sel[i], E - 1);
    return moe_run(s, w, x, x, n_tok, sel, wsel, mask, out, err);
}

const float *hmoe_sched_moe_last_weights(const struct hmoe_sched_moe *s) { return s->wsel; }

void hmoe_sched_moe_chunks_default(struct hmoe_sched_moe_chunks *c) {
    *c = (struct hmoe_sched_moe_chunks){.gu_per_thread = 8, .gu_max_rows = 256, .dn_per_thread = 4, .dn_max_rows = 512,
                                        .dn_tail_items = 4};
}

enum hmoe_status hmoe_sched_moe_set_chunks(struct hmoe_sched_moe *s, const struct hmoe_sched_moe_chunks *c,
                                           struct hmoe_err *err) {
    if (c->gu_per_thread < 1 || c->gu_per_thread > 64 || c->gu_max_rows < 16 || c->dn_per_thread < 1 ||
        c->dn_per_thread > 64 || c->dn_max_rows < 16 || c->dn_tail_items < 1 || c->dn_tail_items > 64)
        return HMOE_RAISE(err, HMOE_ERR_ARG,
                          "MoE work items: per-thread counts must be 1..64, chunks at least 16 rows, tail 1..64 items");
    s->chunks = *c;
    return HMOE_OK;
}

void hmoe_sched_moe_reads_take(struct hmoe_sched_moe *s, struct hmoe_sched_moe_reads *out) {
    *out = s->reads;
    memset(&s->reads, 0, sizeof s->reads);
}

void hmoe_sched_moe_times_take(struct hmoe_sched_moe *s, struct hmoe_sched_moe_times *out) {
    *out = s->times;
    memset(&s->times, 0, sizeof s->times);
}

const char *hmoe_sched_moe_phase_name(int phase) {
    static const char *const names[HMOE_MOE_PH_COUNT] = {"route", "group", "gate_up", "z", "down", "sum", "total"};
    return phase >= 0 && phase < HMOE_MOE_PH_COUNT ? names[phase] : "?";
}
