/* weights.c — bind a GGUF's tensors to struct hmoe_model_weights: the global tensors
 * (embedding, output norm, LM head or tied embedding) here, each main layer by the
 * architecture entry's bind_layer with the helpers below. Each tensor is looked up by name,
 * its shape checked against the hyper-parameters ("tensor X has shape [..] but <arch> needs
 * [..]") and its type against the kernels this build has (types.h). The views point into the
 * mapping; nothing is copied. Also hmoe_model_load / hmoe_model_free.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hmoe/cpu.h"
#include "hmoe/fp16.h"
#include "model/model_impl.h"

static void fmt_shape(char *buf, size_t cap, const int64_t *ne, int n_dims) {
    size_t o = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < n_dims && o < cap; i++)
        o += (size_t)snprintf(buf + o, cap - o, "%s%lld", i ? ", " : "", (long long)ne[i]);
    if (o < cap) snprintf(buf + o, cap - o, "]");
}

/* Find `name` and check its shape is exactly want[0..n_want-1] (remaining dims 1).
 * Absent: NULL with HMOE_OK when optional, else an error naming the tensor and shape. */
static enum hmoe_status find_shaped(const struct hmoe_gguf *g, const char *arch, const char *name, const int64_t *want,
                                    int n_want, bool required, const struct hmoe_gguf_tensor **out,
                                    struct hmoe_err *err) {
    *out = NULL;
    char ws[96], hs[96];
    fmt_shape(ws, sizeof ws, want, n_want);
    const struct hmoe_gguf_tensor *t = hmoe_gguf_find_tensor(g, name);
    if (!t) {
        if (!required) return HMOE_OK;
        return HMOE_RAISE(err, HMOE_ERR_NOT_FOUND, "%s: tensor %s is missing (%s needs it, shape %s)", g->path, name,
                          arch, ws);
    }
    bool ok = true;
    for (int i = 0; i < 4; i++) ok = ok && t->ne[i] == (i < n_want ? want[i] : 1);
    if (!ok) {
        int shown = (int)t->n_dims > n_want ? (int)t->n_dims : n_want;
        fmt_shape(hs, sizeof hs, t->ne, shown > 4 ? 4 : shown);
        return HMOE_RAISE(err, HMOE_ERR_FORMAT, "%s: tensor %s has shape %s but %s needs %s", g->path, name, hs, arch,
                          ws);
    }
    *out = t;
    return HMOE_OK;
}

/* A matrix multiplied on the CPU: cpu.h must have its dot product and activation format. */
static enum hmoe_status check_matmul_type(const struct hmoe_gguf *g, const struct hmoe_gguf_tensor *t,
                                          struct hmoe_err *err) {
    if (hmoe_type_get(t->type) && hmoe_cpu_supports(t->type)) return HMOE_OK;
    /* Name what would work: the weight types this build multiplies (the type table's order). */
    char list[256] = "";
    size_t n = 0;
    for (uint32_t ty = 0; ty < HMOE_TYPE_COUNT && n < sizeof list; ty++)
        if (hmoe_type_get(ty) && hmoe_cpu_supports((enum hmoe_type)ty))
            n += (size_t)snprintf(list + n, sizeof list - n, "%s%s", n ? ", " : "", hmoe_type_name(ty));
    return HMOE_RAISE(err, HMOE_ERR_UNSUPPORTED,
                      "%s: tensor %s has type %s, which has no CPU dot-product kernel in this build (missing kernel; "
                      "supported weight types: %s)",
                      g->path, t->name, hmoe_type_name(t->type), list);
}

static void mat_from_tensor(const struct hmoe_gguf_tensor *t, struct hmoe_mat *m) {
    m->data = t->data;
    m->type = t->type;
    m->n_in = t->ne[0];
    m->n_out = t->ne[1];
    m->n_mat = t->ne[2];
    m->row_bytes = (size_t)t->nb[1];
    m->mat_bytes = (size_t)t->nb[2];
    m->name = t->name;
}

/* Bind a matrix (or expert stack) with shape want[] and a CPU-multipliable type. */
static enum hmoe_status bind_mat(struct hmoe_model *md, const char *name, const int64_t *want, int n_want,
                                 struct hmoe_mat *m, struct hmoe_err *err) {
    const struct hmoe_gguf_tensor *t;
    enum hmoe_status st = find_shaped(md->gguf, md->cfg.arch, name, want, n_want, true, &t, err);
    if (st) return st;
    if ((st = check_matmul_type(md->gguf, t, err))) return st;
    mat_from_tensor(t, m);
    md->weight_bytes += t->n_bytes;
    return HMOE_OK;
}

/* Bind an F32 vector of n values (norm weights, biases). */
static enum hmoe_status bind_vec(struct hmoe_model *md, const char *name, int64_t n, bool required, const float **v,
                                 struct hmoe_err *err) {
    const struct hmoe_gguf_tensor *t;
    *v = NULL;
    enum hmoe_status st = find_shaped(md->gguf, md->cfg.arch, name, &n, 1, required, &t, err);
    if (st || !t) return st;
    if (t->type == HMOE_TYPE_F16 || t->type == HMOE_TYPE_BF16) {
        /* a "dynamic" quantization may store norms in 16 bits: widened once to the F32 the
         * kernels read, kept with the model */
        struct hmoe_model_vec *cv = malloc(sizeof *cv + (size_t)t->n_elements * sizeof(float));
        if (!cv) return HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory widening %s", name);
        const uint8_t *src = t->data;
        for (uint64_t i = 0; i < t->n_elements; i++) {
            uint16_t h;
            memcpy(&h, src + 2 * i, 2);
            cv->v[i] = t->type == HMOE_TYPE_BF16 ? hmoe_bf16_to_f32(h) : hmoe_fp16_to_f32(h);
        }
        cv->next = md->widened;
        md->widened = cv;
        *v = cv->v;
        md->weight_bytes += t->n_bytes;
        return HMOE_OK;
    }
    if (t->type != HMOE_TYPE_F32)
        return HMOE_RAISE(err, HMOE_ERR_UNSUPPORTED,
                          "%s: tensor %s has type %s; hmoe expects F32 (or F16 / BF16) for this vector",
                          md->gguf->path, name, hmoe_type_name(t->type));
    if ((uintptr_t)t->data % sizeof(float) != 0)
        return HMOE_RAISE(err, HMOE_ERR_UNSUPPORTED, "%s: tensor %s is not 4-byte aligned in the file (alignment %u)",
                          md->gguf->path, name, md->gguf->alignment);
    *v = t->data;
    md->weight_bytes += t->n_bytes;
    return HMOE_OK;
}

enum hmoe_status hmoe_model_bind_mat(struct hmoe_model *md, const char *name, const int64_t *want, int n_want,
                                     struct hmoe_mat *m, struct hmoe_err *err) {
    return bind_mat(md, name, want, n_want, m, err);
}

enum hmoe_status hmoe_model_bind_vec(struct hmoe_model *md, const char *name, int64_t n, bool required,
                                     const float **v, struct hmoe_err *err) {
    return bind_vec(md, name, n, required, v, err);
}

enum hmoe_status hmoe_model_bind_f32(struct hmoe_model *md, const char *name, const int64_t *want, int n_want,
                                     bool required, const float **out, struct hmoe_err *err) {
    const struct hmoe_gguf_tensor *t;
    *out = NULL;
    enum hmoe_status st = find_shaped(md->gguf, md->cfg.arch, name, want, n_want, required, &t, err);
    if (st || !t) return st;
    if (t->type != HMOE_TYPE_F32 || (uintptr_t)t->data % sizeof(float) != 0)
        return HMOE_RAISE(err, HMOE_ERR_UNSUPPORTED, "%s: tensor %s has type %s; hmoe expects 4-byte aligned F32",
                          md->gguf->path, name, hmoe_type_name(t->type));
    *out = t->data;
    md->weight_bytes += t->n_bytes;
    return HMOE_OK;
}

enum hmoe_status hmoe_model_bind_qkv(struct hmoe_model *md, int il, struct hmoe_layer_weights *L,
                                     struct hmoe_err *err) {
    const struct hmoe_model_config *c = &md->cfg;
    const int64_t d = c->n_embd, nq = (int64_t)c->n_head * c->head_dim, nk = (int64_t)c->n_head_kv * c->head_dim,
                  nv = (int64_t)c->n_head_kv * c->head_dim_v;
    char name[96];
    enum hmoe_status st;
    snprintf(name, sizeof name, "blk.%d.attn_qkv.weight", il);
    if (!hmoe_gguf_find_tensor(md->gguf, name)) {
        const struct { const char *nm; int64_t n; struct hmoe_mat *m; const float **b; } parts[3] = {
            {"q", nq, &L->attn_q, &L->attn_q_bias}, {"k", nk, &L->attn_k, &L->attn_k_bias},
            {"v", nv, &L->attn_v, &L->attn_v_bias}};
        for (int i = 0; i < 3; i++) {
            snprintf(name, sizeof name, "blk.%d.attn_%s.weight", il, parts[i].nm);
            if ((st = bind_mat(md, name, (int64_t[]){d, parts[i].n}, 2, parts[i].m, err))) return st;
            snprintf(name, sizeof name, "blk.%d.attn_%s.bias", il, parts[i].nm);
            if ((st = bind_vec(md, name, parts[i].n, false, parts[i].b, err))) return st;
        }
        return HMOE_OK;
    }
    struct hmoe_mat fused;
    if ((st = bind_mat(md, name, (int64_t[]){d, nq + nk + nv}, 2, &fused, err))) return st;
    L->attn_q = L->attn_k = L->attn_v = fused;
    L->attn_q.n_out = nq;
    L->attn_k.n_out = nk;
    L->attn_k.data = (const uint8_t *)fused.data + (size_t)nq * fused.row_bytes;
    L->attn_v.n_out = nv;
    L->attn_v.data = (const uint8_t *)fused.data + (size_t)(nq + nk) * fused.row_bytes;
    const float *bias;
    snprintf(name, sizeof name, "blk.%d.attn_qkv.bias", il);
    if ((st = bind_vec(md, name, nq + nk + nv, false, &bias, err))) return st;
    if (bias) {
        L->attn_q_bias = bias;
        L->attn_k_bias = bias + nq;
        L->attn_v_bias = bias + nq + nk;
    }
    return HMOE_OK;
}

/* A bound layer carries only the MoE pieces its entry declares (arch.h hmoe_arch_moe), with
 * the entry's routing rule: the scheduler and the GPU checks rely on the entry saying so. */
static enum hmoe_status check_layer_moe(const struct hmoe_model *md, int il, struct hmoe_err *err) {
    const struct hmoe_arch_moe *am = &md->cfg.arch_entry->moe;
    const struct hmoe_layer_weights *L = &md->w.layers[il];
    const struct hmoe_moe_weights *w = &L->moe;
    const char *bad = NULL;
    if (w->router.data && (w->gating != am->gating || w->act != am->act)) bad = "another routing rule or activation";
    else if (!am->expert_bias && (w->router_bias || w->gate_bias || w->up_bias || w->down_bias)) bad = "expert biases";
    else if (!am->shared_expert && (L->shexp.up.data || L->shexp.down.data)) bad = "a shared expert";
    else if (!am->latent && (L->latent_down.data || L->latent_up.data)) bad = "a latent projection";
    if (!bad) return HMOE_OK;
    return HMOE_RAISE(err, HMOE_ERR_INTERNAL, "%s: layer %d of %s was bound with %s, which its architecture entry does not "
                      "declare", md->gguf->path, il, md->cfg.arch, bad);
}

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

static enum hmoe_status bind_weights(struct hmoe_model *md, struct hmoe_err *err) {
    struct hmoe_gguf *g = md->gguf;
    struct hmoe_model_config *c = &md->cfg;
    enum hmoe_status st;
    /* NVFP4 checkpoints carry per-tensor ".scale" multipliers (qwen3moe.md §2); ignoring
     * them would silently give wrong logits. */
    for (uint64_t i = 0; i < g->n_tensors; i++)
        if (ends_with(g->tensors[i].name, ".scale"))
            return HMOE_RAISE(err, HMOE_ERR_UNSUPPORTED, "%s: tensor %s: per-tensor scale tensors are not supported",
                              g->path, g->tensors[i].name);

    const struct hmoe_gguf_tensor *te = hmoe_gguf_find_tensor(g, "token_embd.weight");
    if (!te) return HMOE_RAISE(err, HMOE_ERR_NOT_FOUND, "%s: tensor token_embd.weight is missing", g->path);
    if (c->n_vocab == 0) {
        if (te->ne[1] <= 0 || te->ne[1] > (1 << 24))
            return HMOE_RAISE(err, HMOE_ERR_FORMAT, "%s: token_embd.weight has %lld rows", g->path,
                              (long long)te->ne[1]);
        c->n_vocab = (int)te->ne[1];
    }
    const int64_t d = c->n_embd, V = c->n_vocab;
    if ((st = find_shaped(g, c->arch, "token_embd.weight", (int64_t[]){d, V}, 2, true, &te, err))) return st;
    const struct hmoe_type_info *ti = hmoe_type_get(te->type);
    if (!ti || !ti->dequant_ref)
        return HMOE_RAISE(err, HMOE_ERR_UNSUPPORTED,
                          "%s: tensor token_embd.weight has type %s, which has no dequantizer in this build "
                          "(missing kernel)",
                          g->path, hmoe_type_name(te->type));
    mat_from_tensor(te, &md->w.token_embd);
    md->weight_bytes += te->n_bytes;
    if ((st = bind_vec(md, "output_norm.weight", d, true, &md->w.output_norm, err))) return st;
    if (hmoe_gguf_find_tensor(g, "output.weight")) {
        if ((st = bind_mat(md, "output.weight", (int64_t[]){d, V}, 2, &md->w.output, err))) return st;
    } else {
        /* Tied embeddings: the LM head is token_embd (qwen3moe.md §4.5). */
        if ((st = check_matmul_type(g, te, err))) return st;
        md->w.output = md->w.token_embd;
        c->tied_output = true;
    }
    md->w.layers = calloc((size_t)c->n_layer, sizeof *md->w.layers);
    if (!md->w.layers) return HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory for %d layers", c->n_layer);
    for (int il = 0; il < c->n_layer; il++)
        if ((st = c->arch_entry->bind_layer(md, il, err)) || (st = check_layer_moe(md, il, err)))
            return st;
    return HMOE_OK;
}

enum hmoe_status hmoe_model_load_gguf(struct hmoe_gguf *g, const struct hmoe_model_params *params,
                                      struct hmoe_model **out, struct hmoe_err *err) {
    *out = NULL;
    struct hmoe_model *md = calloc(1, sizeof *md);
    if (!md) return HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory");
    md->gguf = g;
    enum hmoe_status st = hmoe_model_read_config(g, params, &md->cfg, err);
    if (!st) st = bind_weights(md, err);
    if (st) {
        md->gguf = NULL; /* still the caller's */
        hmoe_model_free(md);
        return st;
    }
    if (md->cfg.n_nextn > 0)
        HMOE_INFO("%s: %d MTP block(s) (blk.%d.*) present: run only to draft tokens with --spec mtp",
                  g->path, md->cfg.n_nextn, md->cfg.n_layer);
    *out = md;
    return HMOE_OK;
}

enum hmoe_status hmoe_model_load(const char *path, const struct hmoe_model_params *params, struct hmoe_model **out,
                                 struct hmoe_err *err) {
    *out = NULL;
    struct hmoe_gguf *g = NULL;
    enum hmoe_status st = params && params->no_mmap ? hmoe_gguf_open_ram(path, &g, err) : hmoe_gguf_open(path, &g, err);
    if (st) return st;
    st = hmoe_model_load_gguf(g, params, out, err);
    if (st) {
        hmoe_gguf_free(g);
        return st;
    }
    if (params && params->mlock) {
        /* as llama.cpp's --mlock: a lock the system refuses is a warning, the model still runs */
        struct hmoe_err e = {0};
        if (hmoe_gguf_mlock(g, &e)) HMOE_WARN("%s", e.msg);
    }
    return HMOE_OK;
}

void hmoe_model_free(struct hmoe_model *m) {
    if (!m) return;
    free(m->w.layers);
    for (struct hmoe_model_vec *cv = m->widened; cv;) {
        struct hmoe_model_vec *next = cv->next;
        free(cv);
        cv = next;
    }
    hmoe_gguf_free(m->gguf);
    free(m);
}
