/* attn1_model.h — a one-layer qwen3moe model where attention is all that matters, and its
 * logits in float64, for the long-context tests.
 *
 * a1_write() cuts the tiny F32 fixture (fixtures/models/tiny-qwen3moe-A-mini-F32.gguf:
 * d 64, head_dim 32, vocab 4101) down to one layer with 2 query heads sharing 1 KV head
 * (rows 0..63 of attn_q, 0..31 of attn_k / attn_v, the first 64 inputs of attn_output),
 * QK-norm weights times 3 so that the softmax is sharp (scores up to ~30, not a near-uniform
 * average over 32k positions), expert down projections of zero (the MoE block adds exactly
 * 0, so the residual after attention goes straight to the output norm and head), and a
 * context_length of the caller's choice. Everything else is copied from the fixture.
 *
 * a1_ref_logits() computes the logits of chosen rows in float64 from the written file's
 * tensors (read with the GGUF reader, not through hmoe's model code): embedding, RMSNorm,
 * Q/K/V, QK-norm, NEOX RoPE, causal softmax attention over every earlier position, output
 * projection, residual, output norm, LM head. The RoPE cos/sin come from
 * hmoe_model_rope_table, which builds its angles in binary32 as ggml does (test_rope_yarn.c
 * checks that table against float64): at position 32768 a float64 angle differs from that
 * binary32 one by up to ~1e-3 rad, which would move the scores by more than everything this
 * compares.
 */
#ifndef HMOE_TEST_ATTN1_MODEL_H
#define HMOE_TEST_ATTN1_MODEL_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hmoe/gguf.h"
#include "hmoe/gguf_write.h"
#include "model/model_impl.h"

enum { A1_D = 64, A1_HD = 32, A1_H = 2 };

static int a1_skip_key(const char *k) {
    return !strcmp(k, "qwen3moe.block_count") || !strcmp(k, "qwen3moe.context_length") ||
           !strcmp(k, "qwen3moe.attention.head_count") || !strcmp(k, "qwen3moe.attention.head_count_kv");
}

/* Write `tensor` of the fixture, cut to `rows` rows of its first `cols` elements (scaled). */
static enum hmoe_status a1_put(struct hmoe_gguf_writer *w, const struct hmoe_gguf_tensor *t, int64_t cols,
                               int64_t rows, float mul, int zero, struct hmoe_err *err) {
    const float *src = t->data;
    float *row = malloc((size_t)cols * sizeof(float));
    enum hmoe_status st = row ? HMOE_OK : HMOE_ERR_NOMEM;
    for (int64_t r = 0; !st && r < rows; r++) {
        for (int64_t c = 0; c < cols; c++) row[c] = zero ? 0.0f : src[r * t->ne[0] + c] * mul;
        st = hmoe_gguf_writer_write(w, row, (size_t)cols * sizeof(float), err);
    }
    free(row);
    return st;
}

static enum hmoe_status a1_write(const char *fixture, const char *out, uint32_t ctx_len, struct hmoe_err *err) {
    struct hmoe_gguf *g = NULL;
    struct hmoe_gguf_writer *w = NULL;
    enum hmoe_status st = hmoe_gguf_open(fixture, &g, err);
    if (!st) st = hmoe_gguf_writer_init(&w, 32, err);
    for (uint64_t i = 0; !st && i < g->n_kv; i++)
        if (!a1_skip_key(g->kv[i].key)) st = hmoe_gguf_writer_copy_kv(w, &g->kv[i], err);
    if (!st) st = hmoe_gguf_writer_add_u32(w, "qwen3moe.block_count", 1, err);
    if (!st) st = hmoe_gguf_writer_add_u32(w, "qwen3moe.context_length", ctx_len, err);
    if (!st) st = hmoe_gguf_writer_add_u32(w, "qwen3moe.attention.head_count", A1_H, err);
    if (!st) st = hmoe_gguf_writer_add_u32(w, "qwen3moe.attention.head_count_kv", 1, err);
    static const struct {
        const char *name;
        int64_t cols, rows, e2; /* kept shape: ne0 = cols, ne1 = rows (1 for vectors), ne2 experts */
        float mul;
        int zero;
    } keep[] = {
        {"token_embd.weight", 64, 4101, 0, 1, 0},          {"blk.0.attn_norm.weight", 64, 1, 0, 1, 0},
        {"blk.0.attn_q.weight", 64, 64, 0, 1, 0},          {"blk.0.attn_k.weight", 64, 32, 0, 1, 0},
        {"blk.0.attn_v.weight", 64, 32, 0, 1, 0},          {"blk.0.attn_output.weight", 64, 64, 0, 1, 0},
        {"blk.0.attn_q_norm.weight", 32, 1, 0, 3, 0},      {"blk.0.attn_k_norm.weight", 32, 1, 0, 3, 0},
        {"blk.0.ffn_norm.weight", 64, 1, 0, 1, 0},         {"blk.0.ffn_gate_inp.weight", 64, 8, 0, 1, 0},
        {"blk.0.ffn_gate_exps.weight", 64, 64, 8, 1, 0},   {"blk.0.ffn_up_exps.weight", 64, 64, 8, 1, 0},
        {"blk.0.ffn_down_exps.weight", 64, 64, 8, 1, 1},   {"output_norm.weight", 64, 1, 0, 1, 0},
        {"output.weight", 64, 4101, 0, 1, 0},
    };
    const struct hmoe_gguf_tensor *src[sizeof keep / sizeof keep[0]];
    for (size_t i = 0; !st && i < sizeof keep / sizeof keep[0]; i++) {
        src[i] = hmoe_gguf_find_tensor(g, keep[i].name);
        if (!src[i] || src[i]->type != HMOE_TYPE_F32) {
            st = HMOE_RAISE(err, HMOE_ERR_FORMAT, "%s: tensor %s missing or not F32", fixture, keep[i].name);
            break;
        }
        const int64_t ne[3] = {keep[i].cols, keep[i].rows, keep[i].e2};
        st = hmoe_gguf_writer_add_tensor(w, keep[i].name, HMOE_TYPE_F32, keep[i].e2 ? 3 : keep[i].rows > 1 ? 2 : 1, ne,
                                         err);
    }
    if (!st) st = hmoe_gguf_writer_open(w, out, err);
    for (size_t i = 0; !st && i < sizeof keep / sizeof keep[0]; i++)
        st = a1_put(w, src[i], keep[i].cols, keep[i].rows * (keep[i].e2 ? keep[i].e2 : 1), keep[i].mul, keep[i].zero,
                    err);
    if (!st) st = hmoe_gguf_writer_finish(w, err);
    hmoe_gguf_writer_free(w);
    hmoe_gguf_free(g);
    return st;
}

static const float *a1_t(const struct hmoe_gguf *g, const char *name) {
    const struct hmoe_gguf_tensor *t = hmoe_gguf_find_tensor(g, name);
    return t ? (const float *)t->data : NULL;
}

static void a1_rms(double *y, const double *x, const float *w, int n, double eps) {
    double s = 0;
    for (int i = 0; i < n; i++) s += x[i] * x[i];
    const double r = 1.0 / sqrt(s / n + eps);
    for (int i = 0; i < n; i++) y[i] = x[i] * r * w[i];
}

static void a1_matvec(double *y, const float *w, const double *x, int rows, int cols) {
    for (int r = 0; r < rows; r++) {
        double s = 0;
        for (int c = 0; c < cols; c++) s += (double)w[(size_t)r * cols + c] * x[c];
        y[r] = s;
    }
}

static void a1_rope(double *x, const float *co, const float *si) {
    for (int i = 0; i < A1_HD / 2; i++) {
        const double a = x[i], b = x[i + A1_HD / 2];
        x[i] = a * co[i] - b * si[i];
        x[i + A1_HD / 2] = a * si[i] + b * co[i];
    }
}

/* Logits (n_vocab doubles per row) of rows[0..n_rows) (ascending positions < n) for the
 * token ids ids[0..n), of the model in `path` loaded as `m` (for its RoPE settings). */
static int a1_ref_logits(const char *path, const struct hmoe_model *m, const int32_t *ids, int n, const int *rows,
                         int n_rows, double *out) {
    struct hmoe_gguf *g = NULL;
    struct hmoe_err err = {0};
    if (hmoe_gguf_open(path, &g, &err)) return -1;
    const float *E = a1_t(g, "token_embd.weight"), *an = a1_t(g, "blk.0.attn_norm.weight"),
                *wq = a1_t(g, "blk.0.attn_q.weight"), *wk = a1_t(g, "blk.0.attn_k.weight"),
                *wv = a1_t(g, "blk.0.attn_v.weight"), *wo = a1_t(g, "blk.0.attn_output.weight"),
                *qn = a1_t(g, "blk.0.attn_q_norm.weight"), *kn = a1_t(g, "blk.0.attn_k_norm.weight"),
                *on = a1_t(g, "output_norm.weight"), *wout = a1_t(g, "output.weight");
    const double eps = m->cfg.rms_eps;
    const int V = m->cfg.n_vocab;
    double *K = malloc((size_t)n * A1_HD * sizeof(double)), *Vv = malloc((size_t)n * A1_HD * sizeof(double));
    double *sc = malloc((size_t)n * sizeof(double));
    float co[A1_HD / 2], si[A1_HD / 2];
    int rc = (E && an && wq && wk && wv && wo && qn && kn && on && wout && K && Vv && sc) ? 0 : -1;
    for (int p = 0; !rc && p < n; p++) {
        double x[A1_D], xn[A1_D], k[A1_HD];
        for (int i = 0; i < A1_D; i++) x[i] = E[(size_t)ids[p] * A1_D + i];
        a1_rms(xn, x, an, A1_D, eps);
        a1_matvec(k, wk, xn, A1_HD, A1_D);
        a1_rms(K + (size_t)p * A1_HD, k, kn, A1_HD, eps);
        const int32_t pos = p;
        hmoe_model_rope_table(&m->cfg, &pos, 1, co, si);
        a1_rope(K + (size_t)p * A1_HD, co, si);
        a1_matvec(Vv + (size_t)p * A1_HD, wv, xn, A1_HD, A1_D);
    }
    for (int r = 0; !rc && r < n_rows; r++) {
        const int t = rows[r];
        double x[A1_D], xn[A1_D], q[A1_H * A1_HD], att[A1_H * A1_HD], h[A1_D], hn[A1_D];
        for (int i = 0; i < A1_D; i++) x[i] = E[(size_t)ids[t] * A1_D + i];
        a1_rms(xn, x, an, A1_D, eps);
        a1_matvec(q, wq, xn, A1_H * A1_HD, A1_D);
        const int32_t pos = t;
        hmoe_model_rope_table(&m->cfg, &pos, 1, co, si);
        for (int hh = 0; hh < A1_H; hh++) {
            double *qh = q + hh * A1_HD, tmp[A1_HD];
            a1_rms(tmp, qh, qn, A1_HD, eps);
            memcpy(qh, tmp, sizeof tmp);
            a1_rope(qh, co, si);
            double mx = -INFINITY, z = 0;
            for (int p = 0; p <= t; p++) {
                double s = 0;
                for (int d = 0; d < A1_HD; d++) s += qh[d] * K[(size_t)p * A1_HD + d];
                sc[p] = s / sqrt((double)A1_HD);
                mx = fmax(mx, sc[p]);
            }
            for (int p = 0; p <= t; p++) z += (sc[p] = exp(sc[p] - mx));
            for (int d = 0; d < A1_HD; d++) {
                double s = 0;
                for (int p = 0; p <= t; p++) s += sc[p] * Vv[(size_t)p * A1_HD + d];
                att[hh * A1_HD + d] = s / z;
            }
        }
        a1_matvec(h, wo, att, A1_D, A1_H * A1_HD);
        for (int i = 0; i < A1_D; i++) h[i] += x[i];
        a1_rms(hn, h, on, A1_D, eps);
        a1_matvec(out + (size_t)r * V, wout, hn, V, A1_D);
    }
    free(K);
    free(Vv);
    free(sc);
    hmoe_gguf_free(g);
    return rc;
}

#endif
