/* attention.c — causal GQA self-attention over the KV cache (qwen3moe.md §4.3 steps 6-9, §6).
 * The batch's K/V rows are stored first (converted to the cache type: f32 copy, or the
 * cpu.h activation quantizer for f16/bf16/q8_0, whose output format is the type itself),
 * then each work item (token, KV head, slice of its query heads) scores its queries
 * against the cached keys with the cpu.h dot products (the queries converted to the K
 * type's partner format, as llama.cpp does) and applies softmax in f32 (sum in double).
 * V of f32/f16/bf16 caches is stored transposed, [Hkv][Dv][n_ctx], so the weighted sum
 * over positions is one more cpu.h product with the probabilities as activations (split
 * into two 16-bit parts for 16-bit V, see below); q8_0 V stays in rows (its blocks run
 * along head_dim) and is accumulated row by row in f32. One parallel region per layer.
 */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "hmoe/cpu.h"
#include "model/model_impl.h"

static void kv_store(enum hmoe_type t, const float *src, void *dst, int64_t n) {
    if (t == HMOE_TYPE_F32) memcpy(dst, src, (size_t)n * sizeof(float));
    else hmoe_cpu_quantize_act(t, src, dst, n);
}

/* Softmax of n scores in place after scaling, as ggml's soft_max (max-subtracted, f32
 * exponentials, their sum in double, one multiply by the inverse). */
static void softmax_scaled(float *s, int n, float scale) {
    float mx = -INFINITY;
    for (int i = 0; i < n; i++) {
        s[i] *= scale;
        mx = s[i] > mx ? s[i] : mx;
    }
    double sum = 0.0;
    for (int i = 0; i < n; i++) {
        s[i] = expf(s[i] - mx);
        sum += (double)s[i];
    }
    const float inv = (float)(1.0 / sum);
    for (int i = 0; i < n; i++) s[i] *= inv;
}

void hmoe_model_attention(struct hmoe_ctx *c, int il, int n) {
    const struct hmoe_model_config *cfg = &c->m->cfg;
    struct hmoe_run_state *rs = &c->rs;
    const int H = cfg->n_head, Hkv = cfg->n_head_kv, G = H / Hkv, D = cfg->head_dim, Dv = cfg->head_dim_v;
    const enum hmoe_type tk = c->p.type_k, tv = c->p.type_v;
    uint8_t *kc = rs->k_cache[il], *vc = rs->v_cache[il];
    const size_t krow = c->k_row_bytes, vrow = c->v_row_bytes;
    const size_t kpos = (size_t)Hkv * krow, vpos = (size_t)Hkv * vrow; /* bytes per cached position */
    const size_t ves = (size_t)hmoe_type_info[tv].type_size;          /* transposed V: bytes per element */
    const float scale = 1.0f / sqrtf((float)D);
    const size_t n_ctx = (size_t)c->p.n_ctx;
    /* Split a KV head's G query heads into slices when there are too few (token, KV head)
     * pairs to keep every thread busy (one-token decode). */
    const int nt = c->p.n_threads;
    int n_slice = 1;
    if (n * Hkv < 2 * nt) n_slice = HMOE_MIN(G, (2 * nt + n * Hkv - 1) / (n * Hkv));
    const int per_slice = (G + n_slice - 1) / n_slice;
    const int n_items = n * Hkv * n_slice;
    const bool q_f32 = hmoe_type_info[tk].vec_dot_type == HMOE_TYPE_F32;

#pragma omp parallel num_threads(nt)
    {
        const int tid = omp_get_thread_num();
        float *scores = rs->att_scores + (size_t)tid * (size_t)G * n_ctx;
        uint8_t *qq = rs->att_q + (size_t)tid * (size_t)G * rs->att_q_bytes;
        float *vtmp = rs->att_v + (size_t)tid * (size_t)Dv;
        uint8_t *pq = rs->att_p + (c->v_trans ? (size_t)tid * 2 * (size_t)G * rs->att_p_bytes : 0);
        float *ores = rs->att_o + (size_t)tid * rs->att_o_floats;

        /* 1. K and V of the batch into the cache, at each token's position. */
#pragma omp for schedule(static)
        for (int i = 0; i < n * Hkv; i++) {
            const int t = i / Hkv, g = i % Hkv;
            const size_t p = (size_t)rs->pos[t];
            kv_store(tk, rs->k + ((size_t)t * Hkv + g) * D, kc + p * kpos + (size_t)g * krow, D);
            const float *vsrc = rs->v + ((size_t)t * Hkv + g) * Dv;
            if (!c->v_trans) {
                kv_store(tv, vsrc, vc + p * vpos + (size_t)g * vrow, Dv);
                continue;
            }
            uint8_t *tmp = (uint8_t *)vtmp; /* Dv elements of type_v, then scattered to [g][e][p] */
            kv_store(tv, vsrc, tmp, Dv);
            for (int e = 0; e < Dv; e++) memcpy(vc + (((size_t)g * Dv + e) * n_ctx + p) * ves, tmp + (size_t)e * ves, ves);
        }
        /* 2. Every query over cached positions 0..pos (causal, inclusive). */
#pragma omp for schedule(dynamic, 1)
        for (int it = 0; it < n_items; it++) {
            const int t = it / (Hkv * n_slice), g = (it / n_slice) % Hkv, sl = it % n_slice;
            const int j0 = g * G + sl * per_slice, j1 = HMOE_MIN(g * G + G, j0 + per_slice);
            if (j0 >= j1) continue;
            const int nh = j1 - j0, n_kv = rs->pos[t] + 1;
            const float *q = rs->q + ((size_t)t * H + j0) * D; /* nh heads, contiguous */
            const void *xq = q;
            size_t xq_stride = (size_t)D * sizeof(float);
            if (!q_f32) {
                for (int h = 0; h < nh; h++)
                    hmoe_cpu_quantize_act(tk, q + (size_t)h * D, qq + (size_t)h * rs->att_q_bytes, D);
                xq = qq;
                xq_stride = rs->att_q_bytes;
            }
            const uint8_t *kbase = kc + (size_t)g * krow;
            if (nh == 1) hmoe_cpu_gemv(tk, D, kbase, kpos, 0, n_kv, xq, scores);
            else hmoe_cpu_gemm(tk, D, kbase, kpos, 0, n_kv, xq, xq_stride, nh, scores, n_ctx);
            for (int h = 0; h < nh; h++) softmax_scaled(scores + (size_t)h * n_ctx, n_kv, scale);

            float *o = rs->attn + ((size_t)t * H + j0) * Dv;
            if (c->v_trans) {
                /* o[h][e] = sum_p V^T[g][e][p] * prob[h][p]: Dv rows of n_kv, nh activation rows.
                 * Rows are read to a multiple of 16 positions (inside n_ctx) with zero
                 * probabilities past n_kv, so the SIMD kernels need no scalar tail. */
                const uint8_t *vbase = vc + (size_t)g * Dv * n_ctx * ves;
                const int n_vk = (int)HMOE_MIN(n_ctx, ((size_t)n_kv + 15) / 16 * 16);
                for (int h = 0; h < nh; h++)
                    for (int p = n_kv; p < n_vk; p++) scores[(size_t)h * n_ctx + p] = 0.0f;
                if (tv == HMOE_TYPE_F32) {
                    if (nh == 1) hmoe_cpu_gemv(tv, n_vk, vbase, n_ctx * ves, 0, Dv, scores, o);
                    else hmoe_cpu_gemm(tv, n_vk, vbase, n_ctx * ves, 0, Dv, scores, n_ctx * sizeof(float), nh, o, Dv);
                    continue;
                }
                /* 16-bit V takes 16-bit activations. Rounding the probabilities to 16 bits (as
                 * llama.cpp's non-flash path does) costs visible accuracy, so each row goes in
                 * twice: p_hi = round(p) and p_lo = round(p - p_hi), and o = V p_hi + V p_lo
                 * is as good as f32 probabilities for twice the (small) arithmetic. */
                const size_t pb = rs->att_p_bytes;
                for (int h = 0; h < nh; h++) {
                    float *ph = scores + (size_t)h * n_ctx;
                    uint8_t *hi = pq + (size_t)h * pb, *lo = pq + (size_t)(nh + h) * pb;
                    hmoe_cpu_quantize_act(tv, ph, hi, n_vk);
                    hmoe_type_info[tv].dequant_ref(hi, ores, n_vk);
                    for (int p = 0; p < n_vk; p++) ores[p] = ph[p] - ores[p];
                    hmoe_cpu_quantize_act(tv, ores, lo, n_vk);
                }
                hmoe_cpu_gemm(tv, n_vk, vbase, n_ctx * ves, 0, Dv, pq, pb, 2 * nh, ores, (size_t)Dv);
                for (int h = 0; h < nh; h++)
                    for (int e = 0; e < Dv; e++)
                        o[(size_t)h * Dv + e] = ores[(size_t)h * Dv + e] + ores[(size_t)(nh + h) * Dv + e];
                continue;
            }
            memset(o, 0, (size_t)nh * Dv * sizeof(float));
            for (int p = 0; p < n_kv; p++) {
                const uint8_t *vr = vc + (size_t)p * vpos + (size_t)g * vrow;
                hmoe_type_info[tv].dequant_ref(vr, vtmp, Dv);
                for (int h = 0; h < nh; h++) {
                    const float w = scores[(size_t)h * n_ctx + p];
                    float *oh = o + (size_t)h * Dv;
                    for (int e = 0; e < Dv; e++) oh[e] += w * vtmp[e];
                }
            }
        }
    }
}
