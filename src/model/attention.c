/* attention.c — causal GQA self-attention over the KV cache (qwen3moe.md §4.3 steps 6-9, §6).
 * The batch's K/V rows are stored first (converted to the cache type by cpu.h
 * hmoe_cpu_attn_kv_store: f32 copy, activation quantizer for f16/bf16/q8_0, weight quantizer
 * for q4_0/q4_1/q5_0/q5_1/iq4_nl), then each work item (token, KV head, slice of its query heads) scores its queries
 * against the cached keys (cpu.h hmoe_cpu_attn_scores, the queries converted to the K
 * type's partner format, as llama.cpp does) and applies softmax in f32 (sum in double,
 * hmoe_cpu_softmax_scaled). K is stored head-major, [Hkv][n_ctx] rows of head_dim, so a
 * KV head's keys are one contiguous run (position-major rows of all heads put 3/4 of every
 * 1 KB stride between the rows a head reads). V of f32/f16/bf16 caches is stored transposed,
 * [Hkv][Dv][n_ctx], so the weighted sum over positions is cpu.h's hmoe_cpu_attn_wsum with
 * the probabilities in f32; a V of a block type (q8_0, q4_*, q5_*, iq4_nl) stays in rows
 * (its blocks run along head_dim) and is accumulated row by row in f32. Two jobs of the cpu.h thread team per layer (the cache
 * store runs on the caller for a decoded token). At 4000 cached positions these score and
 * sum kernels make decode 1.45x as fast as a scalar dot product per position (58 against
 * 40 tok/s on an AVX-512 desktop).
 * A layer may have a sliding window (only the last `window` positions are attended: the
 * scores start at the first visible key) and per-head sink logits that enter the softmax
 * denominator only (gpt-oss.md).
 */
#include <math.h>
#include <string.h>

#include "hmoe/cpu.h"
#include "model/model_impl.h"

static void kv_store(enum hmoe_type t, const float *src, void *dst, int64_t n) { hmoe_cpu_attn_kv_store(t, src, dst, n); }

/* One hmoe_model_attention call as the pool's work items see it. */
struct att_call {
    struct hmoe_ctx *c;
    int il, n, H, Hkv, G, D, Dv, n_slice, per_slice;
    enum hmoe_type tk, tv;
    uint8_t *kc, *vc;
    size_t krow, vrow, vpos, ves, n_ctx;
    float scale;
    bool q_f32;
    int window;          /* sliding window in positions (0: the whole causal prefix) */
    const float *sinks;  /* [H] one extra softmax logit per query head, or NULL */
    int tok; /* tokens per item of task_attend_chunk */
};

/* K and V of one (token, KV head) into the cache, at the token's position. */
static void task_kv_store(void *arg, int64_t i, int tid) {
    const struct att_call *a = arg;
    const struct hmoe_run_state *rs = &a->c->rs;
    const int t = (int)(i / a->Hkv), g = (int)(i % a->Hkv), D = a->D, Dv = a->Dv;
    const size_t p = (size_t)rs->pos[t];
    kv_store(a->tk, rs->k + ((size_t)t * a->Hkv + g) * D, a->kc + ((size_t)g * a->n_ctx + p) * a->krow, D);
    const float *vsrc = rs->v + ((size_t)t * a->Hkv + g) * Dv;
    if (!a->c->v_trans) {
        kv_store(a->tv, vsrc, a->vc + p * a->vpos + (size_t)g * a->vrow, Dv);
        return;
    }
    uint8_t *tmp = (uint8_t *)(rs->att_v + (size_t)tid * (size_t)Dv); /* Dv elements of type_v, then scattered */
    kv_store(a->tv, vsrc, tmp, Dv);
    for (int e = 0; e < Dv; e++)
        memcpy(a->vc + (((size_t)g * Dv + e) * a->n_ctx + p) * a->ves, tmp + (size_t)e * a->ves, a->ves);
}

/* First cached position a query at `pos` sees: 0, or with a sliding window the last
 * `window` positions up to itself (gpt-oss.md: key t is seen iff pos - t < window). */
static int first_visible(const struct att_call *a, int pos) {
    return a->window > 0 && pos >= a->window ? pos - a->window + 1 : 0;
}

/* Softmax of one head's scores, with the head's sink logit when the layer has sinks. */
static void softmax_row(const struct att_call *a, float *s, int64_t n, int head) {
    if (a->sinks) hmoe_cpu_softmax_scaled_sink(s, n, a->scale, a->sinks[head]);
    else hmoe_cpu_softmax_scaled(s, n, a->scale);
}

/* The queries of one (token, KV head, slice of its query heads) over cached positions
 * lo..pos (causal, inclusive; lo = 0 without a sliding window). */
static void task_attend(void *arg, int64_t it, int tid) {
    const struct att_call *a = arg;
    struct hmoe_run_state *rs = &a->c->rs;
    const int H = a->H, Hkv = a->Hkv, G = a->G, D = a->D, Dv = a->Dv, n_slice = a->n_slice;
    const enum hmoe_type tk = a->tk, tv = a->tv;
    const size_t n_ctx = a->n_ctx, ves = a->ves;
    float *scores = rs->att_scores + (size_t)tid * (size_t)G * n_ctx;
    uint8_t *qq = rs->att_q + (size_t)tid * (size_t)G * rs->att_q_bytes;
    float *vtmp = rs->att_v + (size_t)tid * (size_t)Dv;

    const int t = (int)(it / (Hkv * n_slice)), g = (int)((it / n_slice) % Hkv), sl = (int)(it % n_slice);
    const int j0 = g * G + sl * a->per_slice, j1 = HMOE_MIN(g * G + G, j0 + a->per_slice);
    if (j0 >= j1) return;
    const int lo = first_visible(a, rs->pos[t]), nh = j1 - j0, n_kv = rs->pos[t] + 1 - lo;
    const float *q = rs->q + ((size_t)t * H + j0) * D; /* nh heads, contiguous */
    const void *xq = q;
    size_t xq_stride = (size_t)D * sizeof(float);
    if (!a->q_f32) {
        for (int h = 0; h < nh; h++) hmoe_cpu_quantize_act(tk, q + (size_t)h * D, qq + (size_t)h * rs->att_q_bytes, D);
        xq = qq;
        xq_stride = rs->att_q_bytes;
    }
    const uint8_t *kbase = a->kc + ((size_t)g * n_ctx + (size_t)lo) * a->krow;
    hmoe_cpu_attn_scores(tk, D, kbase, a->krow, n_kv, xq, xq_stride, nh, scores, n_ctx);
    for (int h = 0; h < nh; h++) softmax_row(a, scores + (size_t)h * n_ctx, n_kv, j0 + h);

    float *o = rs->attn + ((size_t)t * H + j0) * Dv;
    if (a->c->v_trans) {
        /* o[h][e] = sum_p V^T[g][e][p] * prob[h][p] over the n_kv cached positions, with the
         * probabilities in f32 (cpu.h; llama.cpp's non-flash path rounds them to 16 bits). */
        hmoe_cpu_attn_wsum(tv, n_kv, a->vc + ((size_t)g * Dv * n_ctx + (size_t)lo) * ves, n_ctx * ves, Dv, scores,
                           n_ctx, nh, o, Dv);
        return;
    }
    memset(o, 0, (size_t)nh * Dv * sizeof(float));
    for (int p = 0; p < n_kv; p++) {
        const uint8_t *vr = a->vc + (size_t)(lo + p) * a->vpos + (size_t)g * a->vrow;
        hmoe_type_info[tv].dequant_ref(vr, vtmp, Dv);
        for (int h = 0; h < nh; h++) {
            const float w = scores[(size_t)h * n_ctx + p];
            float *oh = o + (size_t)h * Dv;
            for (int e = 0; e < Dv; e++) oh[e] += w * vtmp[e];
        }
    }
}

/* A batch with a transposed V: the queries of up to a->tok consecutive tokens and one KV
 * head in one item, so each K row and V row read from the cache serves all of them (one
 * token per item read the cache again for every token: at 4000 cached positions, 8 MB per
 * layer per token). The scores run to the chunk's last position; each row's softmax covers
 * its own token's positions and the rest of the row is zeroed, so the weighted sum adds
 * exact zeros past a token's end: the same values as one token per item. */
static void task_attend_chunk(void *arg, int64_t it, int tid) {
    const struct att_call *a = arg;
    struct hmoe_run_state *rs = &a->c->rs;
    const int H = a->H, Hkv = a->Hkv, G = a->G, D = a->D, Dv = a->Dv, tok = a->tok;
    const size_t n_ctx = a->n_ctx, qb = rs->att_q_bytes;
    const int t0 = (int)(it / Hkv) * tok, g = (int)(it % Hkv), t1 = HMOE_MIN(a->n, t0 + tok);
    const int rows = (t1 - t0) * G;
    float *scores = rs->att_scores + (size_t)tid * (size_t)tok * (size_t)G * (n_ctx + 32);
    uint8_t *qq = rs->att_q + (size_t)tid * (size_t)tok * (size_t)G * qb;
    float *ob = rs->att_o + (size_t)tid * (size_t)tok * (size_t)G * (size_t)Dv;
    /* positions lo .. n_kv_max-1 cover every query of the chunk (positions ascend in a batch) */
    const int lo = first_visible(a, rs->pos[t0]);
    int n_kv_max = 0;
    for (int t = t0; t < t1; t++) {
        n_kv_max = HMOE_MAX(n_kv_max, rs->pos[t] + 1);
        for (int j = 0; j < G; j++) {
            const float *q = rs->q + ((size_t)t * H + (size_t)g * G + j) * D;
            uint8_t *dst = qq + (size_t)((t - t0) * G + j) * qb;
            if (a->q_f32) memcpy(dst, q, (size_t)D * sizeof(float));
            else hmoe_cpu_quantize_act(a->tk, q, dst, D);
        }
    }
    /* rows of scores packed at the chunk's length (+16 floats, so that rows do not all fall in
     * the same L1 sets as rows n_ctx apart would: 32 rows 16 KB apart took pp512 from 392 to
     * 348 t/s) */
    const int span = n_kv_max - lo;
    const size_t ss = ((size_t)span + 15) / 16 * 16 + 16;
    hmoe_cpu_attn_scores(a->tk, D, a->kc + ((size_t)g * n_ctx + (size_t)lo) * a->krow, a->krow, span, qq, qb, rows,
                         scores, ss);
    for (int r = 0; r < rows; r++) {
        float *sr = scores + (size_t)r * ss;
        const int pos = rs->pos[t0 + r / G], b = first_visible(a, pos) - lo, e = pos + 1 - lo;
        memset(sr, 0, (size_t)b * sizeof(float)); /* before a windowed row's first key */
        softmax_row(a, sr + b, e - b, g * G + r % G);
        memset(sr + e, 0, (size_t)(span - e) * sizeof(float));
    }
    hmoe_cpu_attn_wsum(a->tv, span, a->vc + ((size_t)g * Dv * n_ctx + (size_t)lo) * a->ves, n_ctx * a->ves, Dv, scores,
                       ss, rows, ob, (size_t)Dv);
    for (int r = 0; r < rows; r++) {
        const int t = t0 + r / G, j = r % G;
        memcpy(rs->attn + ((size_t)t * H + (size_t)g * G + j) * Dv, ob + (size_t)r * Dv, (size_t)Dv * sizeof(float));
    }
}

/* The rows of one sequence over its own cache. */
static void attention_seq(struct hmoe_ctx *c, int il, int n) {
    const struct hmoe_model_config *cfg = &c->m->cfg;
    struct hmoe_run_state *rs = &c->rs;
    struct att_call a = {.c = c, .il = il, .n = n, .H = cfg->n_head, .Hkv = cfg->n_head_kv, .D = cfg->head_dim,
                         .Dv = cfg->head_dim_v, .tk = c->p.type_k, .tv = c->p.type_v, .kc = rs->k_cache[il],
                         .vc = rs->v_cache[il], .krow = c->k_row_bytes, .vrow = c->v_row_bytes,
                         .n_ctx = (size_t)c->p.n_ctx};
    a.G = a.H / a.Hkv;
    a.vpos = (size_t)a.Hkv * a.vrow;
    a.ves = (size_t)hmoe_type_info[a.tv].type_size; /* transposed V: bytes per element */
    a.scale = 1.0f / sqrtf((float)a.D);
    a.q_f32 = hmoe_type_info[a.tk].vec_dot_type == HMOE_TYPE_F32;
    a.window = c->m->w.layers[il].attn_window;
    a.sinks = c->m->w.layers[il].attn_sinks;
    /* Split a KV head's G query heads into slices when there are too few (token, KV head)
     * pairs to keep every thread busy (one-token decode). */
    const int nt = c->p.n_threads;
    a.n_slice = 1;
    if (n * a.Hkv < 2 * nt) a.n_slice = HMOE_MIN(a.G, (2 * nt + n * a.Hkv - 1) / (n * a.Hkv));
    a.per_slice = (a.G + a.n_slice - 1) / a.n_slice;

    /* 1. The batch's K and V into the cache (a decoded token's few rows: by the caller). */
    hmoe_cpu_parallel(n >= 4 ? nt : 1, (int64_t)n * a.Hkv, task_kv_store, &a);
    /* 2. Every query over the cache: a batch by chunks of tokens (transposed V) when that still
     *    gives every thread two items, else one (token, KV head, slice) per item. */
    a.tok = c->rs.att_tok;
    if (n >= 2 && a.tok > 1 && c->v_trans && (int64_t)((n + a.tok - 1) / a.tok) * a.Hkv >= 2 * nt)
        hmoe_cpu_parallel(nt, (int64_t)((n + a.tok - 1) / a.tok) * a.Hkv, task_attend_chunk, &a);
    else
        hmoe_cpu_parallel(nt, (int64_t)n * a.Hkv * a.n_slice, task_attend, &a);
}

void hmoe_model_attention(struct hmoe_ctx *c, int il, int n) { hmoe_model_per_seq(c, il, n, attention_seq); }
