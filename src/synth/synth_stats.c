/* synth_stats.c — expert-selection statistics of a (synthetic) qwen3moe file from its
 * embeddings, routers and ffn_norm (synth.h): top-k per token and layer as llama.cpp's router
 * takes it (qwen3moe.md §4.4: softmax is monotonic, so top-k of the logits), counts per
 * expert, and how many experts consecutive tokens share. Uses the reader (gguf.h) and the
 * reference dequantizer of the token_embd type (types.h).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "synth_impl.h"

static const float *f32_tensor(const struct hmoe_gguf *g, const char *name, int64_t ne0, int64_t ne1,
                               struct hmoe_err *err) {
    const struct hmoe_gguf_tensor *t = hmoe_gguf_find_tensor(g, name);
    if (!t || t->type != HMOE_TYPE_F32 || t->ne[0] != ne0 || t->ne[1] != ne1) {
        HMOE_RAISE(err, HMOE_ERR_FORMAT, "%s: tensor %s is missing or not F32 [%lld, %lld]", g->path, name,
                   (long long)ne0, (long long)ne1);
        return NULL;
    }
    return t->data;
}

enum hmoe_status hmoe_synth_route_stats_init(struct hmoe_synth_route_stats *s, const struct hmoe_gguf *g,
                                             const int32_t *tokens, uint64_t n_tokens, struct hmoe_err *err) {
    memset(s, 0, sizeof *s);
    uint32_t n_layer, n_embd, n_expert, n_used;
    if (hmoe_gguf_get_u32(g, "qwen3moe.block_count", &n_layer, err) != HMOE_OK ||
        hmoe_gguf_get_u32(g, "qwen3moe.embedding_length", &n_embd, err) != HMOE_OK ||
        hmoe_gguf_get_u32(g, "qwen3moe.expert_count", &n_expert, err) != HMOE_OK ||
        hmoe_gguf_get_u32(g, "qwen3moe.expert_used_count", &n_used, err) != HMOE_OK)
        return err ? err->code : HMOE_ERR_FORMAT;
    const struct hmoe_gguf_tensor *emb = hmoe_gguf_find_tensor(g, "token_embd.weight");
    if (!emb || emb->ne[0] != n_embd || n_used == 0 || n_used > n_expert || n_expert > 4096)
        return HMOE_RAISE(err, HMOE_ERR_FORMAT, "%s: not a qwen3moe file with token_embd [%u, n_vocab]", g->path, n_embd);
    hmoe_dequant_row_fn deq = hmoe_type_info[emb->type].dequant_ref;
    if (!deq) return HMOE_RAISE(err, HMOE_ERR_UNSUPPORTED, "%s: no dequantizer for %s", g->path, hmoe_type_name(emb->type));
    for (uint64_t i = 0; i < n_tokens; i++)
        if (tokens[i] < 0 || tokens[i] >= emb->ne[1])
            return HMOE_RAISE(err, HMOE_ERR_RANGE, "token id %d is outside the vocabulary (%lld)", tokens[i],
                              (long long)emb->ne[1]);
    const float **router = calloc(n_layer, sizeof *router), **norm = calloc(n_layer, sizeof *norm);
    s->count = calloc((size_t)n_layer * n_expert, sizeof *s->count);
    s->reuse = calloc(n_layer, sizeof *s->reuse);
    float *h = malloc(((size_t)n_embd + n_expert) * sizeof *h);
    uint32_t *sel = malloc(2 * (size_t)n_layer * n_used * sizeof *sel); /* previous and current token */
    enum hmoe_status st = router && norm && s->count && s->reuse && h && sel
                              ? HMOE_OK
                              : HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory for routing statistics");
    for (uint32_t l = 0; st == HMOE_OK && l < n_layer; l++) {
        char name[64];
        snprintf(name, sizeof name, "blk.%u.ffn_gate_inp.weight", l);
        router[l] = f32_tensor(g, name, n_embd, n_expert, err);
        snprintf(name, sizeof name, "blk.%u.ffn_norm.weight", l);
        norm[l] = f32_tensor(g, name, n_embd, 1, err);
        if (!router[l] || !norm[l]) st = err ? err->code : HMOE_ERR_FORMAT;
    }
    float *x = h, *logit = h + n_embd;
    float *row = st == HMOE_OK ? malloc((size_t)n_embd * sizeof *row) : NULL;
    if (st == HMOE_OK && !row) st = HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory for routing statistics");
    for (uint64_t t = 0; st == HMOE_OK && t < n_tokens; t++) {
        deq((const uint8_t *)emb->data + (uint64_t)tokens[t] * emb->nb[1], row, n_embd);
        double ss = 0;
        for (uint32_t i = 0; i < n_embd; i++) ss += (double)row[i] * row[i];
        float inv_rms = (float)(1.0 / sqrt(ss / n_embd + 1e-6));
        for (uint32_t l = 0; l < n_layer; l++) {
            for (uint32_t i = 0; i < n_embd; i++) x[i] = row[i] * inv_rms * norm[l][i];
            for (uint32_t e = 0; e < n_expert; e++) {
                const float *w = router[l] + (size_t)e * n_embd;
                float acc = 0;
                for (uint32_t i = 0; i < n_embd; i++) acc += w[i] * x[i];
                logit[e] = acc;
            }
            uint32_t *cur = sel + ((t & 1) * n_layer + l) * n_used, *prev = sel + ((~t & 1) * n_layer + l) * n_used;
            for (uint32_t k = 0; k < n_used; k++) { /* k-th largest, lowest id first on ties */
                uint32_t best = 0;
                float bv = -INFINITY;
                for (uint32_t e = 0; e < n_expert; e++)
                    if (logit[e] > bv) {
                        bv = logit[e];
                        best = e;
                    }
                cur[k] = best;
                logit[best] = -INFINITY;
                s->count[(size_t)l * n_expert + best]++;
            }
            if (t > 0) {
                uint32_t shared = 0;
                for (uint32_t a = 0; a < n_used; a++)
                    for (uint32_t b = 0; b < n_used; b++) shared += cur[a] == prev[b];
                s->reuse[l] += (double)shared / n_used;
            }
        }
    }
    for (uint32_t l = 0; st == HMOE_OK && n_tokens > 1 && l < n_layer; l++) s->reuse[l] /= (double)(n_tokens - 1);
    free(row);
    free(h);
    free(sel);
    free(router);
    free(norm);
    if (st != HMOE_OK) {
        hmoe_synth_route_stats_free(s);
        return st;
    }
    s->n_layer = n_layer;
    s->n_expert = n_expert;
    s->n_used = n_used;
    s->n_tokens = n_tokens;
    return HMOE_OK;
}

void hmoe_synth_route_stats_free(struct hmoe_synth_route_stats *s) {
    free(s->count);
    free(s->reuse);
    memset(s, 0, sizeof *s);
}

static int cmp_desc(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

double hmoe_synth_route_top_share(const struct hmoe_synth_route_stats *s, uint32_t layer, uint32_t top_n) {
    uint64_t *c = malloc(s->n_expert * sizeof *c), total = 0, top = 0;
    if (!c) return 0;
    memcpy(c, s->count + (size_t)layer * s->n_expert, s->n_expert * sizeof *c);
    qsort(c, s->n_expert, sizeof *c, cmp_desc);
    for (uint32_t e = 0; e < s->n_expert; e++) {
        total += c[e];
        if (e < top_n) top += c[e];
    }
    free(c);
    return total ? (double)top / (double)total : 0;
}

double hmoe_synth_route_entropy_bits(const struct hmoe_synth_route_stats *s, uint32_t layer) {
    const uint64_t *c = s->count + (size_t)layer * s->n_expert;
    uint64_t total = 0;
    for (uint32_t e = 0; e < s->n_expert; e++) total += c[e];
    double h = 0;
    for (uint32_t e = 0; e < s->n_expert; e++)
        if (c[e]) {
            double p = (double)c[e] / (double)total;
            h -= p * log2(p);
        }
    return h;
}

uint32_t hmoe_synth_route_hottest(const struct hmoe_synth_route_stats *s, uint32_t layer) {
    const uint64_t *c = s->count + (size_t)layer * s->n_expert;
    uint32_t best = 0;
    for (uint32_t e = 1; e < s->n_expert; e++)
        if (c[e] > c[best]) best = e;
    return best;
}
