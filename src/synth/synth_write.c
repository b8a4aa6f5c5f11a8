/* synth_write.c — plan a synthetic model (tensor list, types, sizes, vocabulary source) and
 * write it in one streaming pass through the GGUF writer. Metadata keys and tensor order
 * follow gguf_synth.py (same tensor infos, offsets included). Matrix data comes from a pool
 * of random blocks per type (synth_blocks.c), each tensor at its own pool phase; norms and
 * routers are F32 like the converter writes them (1 ± 0.02, router N(0, 0.05)). A zipf
 * routing file additionally patches embeddings, norms and a few rows (synth_route.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hmoe/fp16.h"
#include "synth_impl.h"

#define ALIGN 32u
#define CHUNK_BYTES (4u << 20)

enum hmoe_status hmoe_synth_plan_init(struct hmoe_synth_plan *plan, const struct hmoe_synth_opts *o,
                                      struct hmoe_err *err) {
    memset(plan, 0, sizeof *plan);
    const struct hmoe_synth_preset *p = hmoe_synth_find_preset(o->preset);
    if (!p)
        return HMOE_RAISE(err, HMOE_ERR_ARG, "unknown preset '%s' (valid: %s)", o->preset ? o->preset : "",
                          hmoe_synth_preset_names());
    const char *mix_name = o->mix ? o->mix : p->default_mix ? p->default_mix : "q4_k_m";
    if (hmoe_synth_mix_is_rules(mix_name)) {
        enum hmoe_status st = hmoe_synth_rules_parse(mix_name, &plan->rules, &plan->mix, err);
        if (st) return st;
    } else {
        plan->mix = hmoe_synth_find_mix(mix_name);
    }
    if (!plan->mix)
        return HMOE_RAISE(err, HMOE_ERR_ARG, "unknown mix '%s' (valid: %s, a rule preset: %s, or REGEX=TYPE,...)",
                          mix_name, hmoe_synth_mix_names(), hmoe_synth_rule_preset_names());
    plan->preset = *p;
    if (o->n_layers > 0) {
        if (o->n_layers > 4096) return HMOE_RAISE(err, HMOE_ERR_ARG, "--layers %u is out of range (1..4096)", o->n_layers);
        plan->preset.n_layer = o->n_layers;
    }
    plan->routing = o->routing;
    plan->seed = o->seed;
    if (o->vocab_path) {
        enum hmoe_status st = hmoe_gguf_open(o->vocab_path, &plan->vocab_src, err);
        if (st != HMOE_OK) return st;
        const struct hmoe_gguf_kv *toks = hmoe_gguf_find_kv(plan->vocab_src, "tokenizer.ggml.tokens");
        if (!toks || toks->type != HMOE_GGUF_ARRAY || toks->arr_type != HMOE_GGUF_STRING || toks->arr_n == 0 ||
            toks->arr_n > INT32_MAX) {
            hmoe_synth_plan_free(plan);
            return HMOE_RAISE(err, HMOE_ERR_FORMAT,
                              "%s: no tokenizer.ggml.tokens string array, so it cannot serve as --vocab", o->vocab_path);
        }
        plan->preset.n_vocab = (uint32_t)toks->arr_n; /* token_embd and output follow the vocabulary */
    }
    const struct hmoe_synth_arch *arch = plan->preset.arch;
    size_t max = arch->max_tensors(&plan->preset);
    plan->tensors = calloc(max, sizeof *plan->tensors);
    if (!plan->tensors) {
        hmoe_synth_plan_free(plan);
        return HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory planning %zu tensors", max);
    }
    plan->n_tensors = arch->list_tensors(&plan->preset, plan->tensors, max);
    for (size_t i = 0; i < plan->n_tensors; i++) {
        struct hmoe_synth_tensor *t = &plan->tensors[i];
        t->type = hmoe_synth_type_for_tensor(&plan->preset, plan->mix, t->name, t->layer, t->n_dims, t->ne[0]);
        if (plan->rules) hmoe_synth_rules_apply(plan->rules, t->name, t->n_dims, t->ne[0], &t->type);
        uint64_t rows = (uint64_t)t->ne[1] * (uint64_t)t->ne[2] * (uint64_t)t->ne[3];
        if (!hmoe_synth_can_fill(t->type) || !hmoe_mul_u64(hmoe_row_bytes(t->type, t->ne[0]), rows, &t->n_bytes)) {
            enum hmoe_type ty = t->type;
            char name[64];
            memcpy(name, t->name, sizeof name);
            hmoe_synth_plan_free(plan);
            return HMOE_RAISE(err, HMOE_ERR_UNSUPPORTED, "synth cannot write tensor %s as %s", name, hmoe_type_name(ty));
        }
        plan->data_bytes += (t->n_bytes + ALIGN - 1) / ALIGN * ALIGN;
    }
    if (plan->rules && hmoe_synth_rules_check_used(plan->rules, err)) {
        hmoe_synth_plan_free(plan);
        return HMOE_ERR_ARG;
    }
    if (plan->routing.kind == HMOE_SYNTH_ROUTING_ZIPF) {
        /* fail before writing anything if the file cannot carry the routing channel */
        enum hmoe_type et = plan->tensors[0].type;
        struct hmoe_synth_channel ch;
        enum hmoe_status st = hmoe_synth_routing_channel(plan->preset.n_embd, et, &ch, err);
        if (st == HMOE_OK && !hmoe_type_info[et].dequant_ref)
            st = HMOE_RAISE(err, HMOE_ERR_UNSUPPORTED, "zipf routing needs the %s dequantizer, missing from this build",
                            hmoe_type_name(et));
        if (st != HMOE_OK) {
            hmoe_synth_plan_free(plan);
            return st;
        }
    }
    return HMOE_OK;
}

void hmoe_synth_plan_free(struct hmoe_synth_plan *plan) {
    hmoe_gguf_free(plan->vocab_src);
    hmoe_synth_rules_free(plan->rules);
    free(plan->tensors);
    memset(plan, 0, sizeof *plan);
}

/* ---- writing ----------------------------------------------------------------------------- */

struct wctx {
    const struct hmoe_synth_plan *plan;
    struct hmoe_gguf_writer *w;
    struct synth_pool pools[HMOE_TYPE_COUNT];
    bool zipf;
    struct synth_route route;
    uint8_t *buf;   /* CHUNK_BYTES of scratch */
    uint8_t *zeros; /* CHUNK_BYTES of zeros */
    hmoe_synth_progress_fn progress;
    void *progress_ctx;
    uint64_t done;
    struct hmoe_err *err;
};

static enum hmoe_status emit(struct wctx *c, const void *data, size_t n) {
    enum hmoe_status st = hmoe_gguf_writer_write(c->w, data, n, c->err);
    if (st != HMOE_OK) return st;
    c->done += n;
    if (c->progress && !c->progress(c->progress_ctx, c->done, c->plan->data_bytes))
        return HMOE_RAISE(c->err, HMOE_ERR_ARG, "cancelled; the partial file was removed");
    return HMOE_OK;
}

static enum hmoe_status emit_zeros(struct wctx *c, uint64_t n) {
    while (n > 0) {
        size_t k = n < CHUNK_BYTES ? (size_t)n : CHUNK_BYTES;
        enum hmoe_status st = emit(c, c->zeros, k);
        if (st != HMOE_OK) return st;
        n -= k;
    }
    return HMOE_OK;
}

static enum hmoe_status get_pool(struct wctx *c, enum hmoe_type t, struct synth_pool **out) {
    struct synth_pool *pool = &c->pools[t];
    if (!pool->data) {
        enum hmoe_status st = synth_pool_init(pool, t, c->plan->seed, c->err);
        if (st != HMOE_OK) return st;
    }
    *out = pool;
    return HMOE_OK;
}

/* n_blocks consecutive pool blocks starting at pool phase `phase` (wrapping around). */
static enum hmoe_status emit_pool(struct wctx *c, const struct synth_pool *pool, uint64_t phase, uint64_t n_blocks) {
    phase %= pool->n_blocks;
    while (n_blocks > 0) {
        uint64_t k = n_blocks < pool->n_blocks ? n_blocks : pool->n_blocks; /* contiguous: the pool is stored twice */
        enum hmoe_status st = emit(c, pool->data + phase * pool->block_bytes, (size_t)(k * pool->block_bytes));
        if (st != HMOE_OK) return st;
        phase = (phase + k) % pool->n_blocks;
        n_blocks -= k;
    }
    return HMOE_OK;
}

/* The value of one F32 parameter element: norms 1 ± 0.02, routers N(0, 0.05); the qwen35moe
 * DeltaNet parameters (qwen35moe.md §3-§5.2) as a trained model has them in sign and scale:
 * ssm_a = -exp(N(0, 0.5)) < 0 (a positive one would make the state grow every token),
 * dt bias N(0, 0.1), conv taps N(0, 0.3). */
static float f32_value(int role, double z) {
    switch (role) {
    case SYNTH_FFN_ROUTER:
    case SYNTH_SHEXP_GATE_INP: return (float)(0.05 * z);
    case SYNTH_SSM_A: return (float)-exp(0.5 * z);
    case SYNTH_SSM_DT: return (float)(0.1 * z);
    case SYNTH_SSM_CONV: return (float)(0.3 * z);
    case SYNTH_BIAS:
    case SYNTH_RESID_BIAS: return (float)(0.02 * z);
    default: return (float)(1.0 + 0.02 * z);
    }
}

/* Norms, routers and the other float parameters (f32_value; the zipf router), as F32, or F16 /
 * BF16 where a --mix rule asks for it (rounded from the same F32 values). */
static enum hmoe_status emit_f32(struct wctx *c, const struct hmoe_synth_tensor *t, size_t index) {
    const struct hmoe_synth_preset *p = &c->plan->preset;
    uint64_t n = (uint64_t)t->ne[0] * (uint64_t)t->ne[1] * (uint64_t)t->ne[2];
    const size_t eb = t->type == HMOE_TYPE_F32 ? 4 : 2;
    if (t->role == SYNTH_FFN_ROUTER && c->zipf) {
        synth_route_router(&c->route, t->layer, c->route.router);
        if (eb == 4) return emit(c, c->route.router, (size_t)n * sizeof(float));
        uint16_t *h = (uint16_t *)c->buf; /* (a router is far smaller than the chunk buffer) */
        for (uint64_t j = 0; j < n; j++)
            h[j] = t->type == HMOE_TYPE_BF16 ? hmoe_f32_to_bf16(c->route.router[j]) : hmoe_f32_to_fp16(c->route.router[j]);
        return emit(c, h, (size_t)n * 2);
    }
    struct synth_rng rng;
    synth_rng_init(&rng, c->plan->seed, 0x7e500000u + index);
    float *f = (float *)c->buf;
    const size_t per_chunk = CHUNK_BYTES / sizeof(float);
    for (uint64_t i0 = 0; i0 < n; i0 += per_chunk) {
        size_t k = (size_t)HMOE_MIN((uint64_t)per_chunk, n - i0);
        for (size_t j = 0; j < k; j++) {
            uint32_t dim = (uint32_t)((i0 + j) % (uint64_t)t->ne[0]);
            double z = synth_rng_normal(&rng);
            float v = f32_value(t->role, z);
            if (c->zipf && dim < p->n_embd && synth_route_is_channel(&c->route, dim)) {
                /* attention and the output head never read the routing channel; the router does */
                if (t->role == SYNTH_ATTN_NORM || t->role == SYNTH_OUTPUT_NORM) v = 0.0f;
                if (t->role == SYNTH_FFN_NORM) v = 1.0f;
                if (t->role == SYNTH_RESID_BIAS) v = 0.0f; /* no block writes the channel */
            }
            f[j] = v;
        }
        if (eb == 2) { /* narrow in place: element j is read before slot j is written */
            uint16_t *h = (uint16_t *)f;
            for (size_t j = 0; j < k; j++) h[j] = t->type == HMOE_TYPE_BF16 ? hmoe_f32_to_bf16(f[j]) : hmoe_f32_to_fp16(f[j]);
        }
        enum hmoe_status st = emit(c, f, k * eb);
        if (st != HMOE_OK) return st;
    }
    return HMOE_OK;
}

/* token_embd of a zipf file: every row starts with the same common blocks. */
static enum hmoe_status emit_zipf_embd(struct wctx *c, const struct hmoe_synth_tensor *t, const struct synth_pool *pool,
                                       uint64_t phase) {
    size_t nb = (size_t)(t->ne[0] / hmoe_type_info[t->type].blck), row_bytes = nb * pool->block_bytes;
    size_t n_common = c->route.ch.ch1 / (uint32_t)hmoe_type_info[t->type].blck, rows_per_chunk = CHUNK_BYTES / row_bytes;
    if (rows_per_chunk == 0)
        return HMOE_RAISE(c->err, HMOE_ERR_UNSUPPORTED, "zipf routing: token_embd rows of %zu bytes are too long", row_bytes);
    for (int64_t r0 = 0; r0 < t->ne[1]; r0 += (int64_t)rows_per_chunk) {
        size_t k = (size_t)HMOE_MIN((int64_t)rows_per_chunk, t->ne[1] - r0);
        for (size_t r = 0; r < k; r++) {
            uint8_t *dst = c->buf + r * row_bytes;
            uint64_t ph = (phase + ((uint64_t)r0 + r) * nb) % pool->n_blocks;
            if (nb <= pool->n_blocks) memcpy(dst, pool->data + ph * pool->block_bytes, row_bytes);
            else memset(dst, 0, row_bytes); /* cannot happen for real shapes; keeps the bound honest */
            memcpy(dst, c->route.common_block, n_common * pool->block_bytes);
        }
        enum hmoe_status st = emit(c, c->buf, k * row_bytes);
        if (st != HMOE_OK) return st;
    }
    return HMOE_OK;
}

/* attn_output / ffn_down_exps of a zipf file: rows of channel dims are zero (no block
 * writes the routing channel); other rows come from the pool as usual. */
static enum hmoe_status emit_zipf_rows(struct wctx *c, const struct hmoe_synth_tensor *t, const struct synth_pool *pool,
                                       uint64_t phase) {
    uint64_t nb = (uint64_t)(t->ne[0] / hmoe_type_info[t->type].blck);
    for (int64_t e = 0; e < t->ne[2]; e++) {
        int64_t r = 0;
        while (r < t->ne[1]) {
            bool ch = synth_route_is_channel(&c->route, (uint32_t)r);
            int64_t r1 = r + 1;
            while (r1 < t->ne[1] && synth_route_is_channel(&c->route, (uint32_t)r1) == ch) r1++;
            uint64_t first_block = ((uint64_t)e * (uint64_t)t->ne[1] + (uint64_t)r) * nb;
            enum hmoe_status st = ch ? emit_zeros(c, (uint64_t)(r1 - r) * nb * pool->block_bytes)
                                     : emit_pool(c, pool, phase + first_block, (uint64_t)(r1 - r) * nb);
            if (st != HMOE_OK) return st;
            r = r1;
        }
    }
    return HMOE_OK;
}

static enum hmoe_status emit_tensor(struct wctx *c, size_t index) {
    const struct hmoe_synth_tensor *t = &c->plan->tensors[index];
    const bool float_type = t->type == HMOE_TYPE_F32 || t->type == HMOE_TYPE_F16 || t->type == HMOE_TYPE_BF16;
    bool is_f32_param =
        float_type && (t->n_dims == 1 || t->role == SYNTH_FFN_ROUTER || t->role == SYNTH_SSM_CONV ||
                       t->role == SYNTH_SSM_A || t->role == SYNTH_NORM || t->role == SYNTH_BIAS ||
                       t->role == SYNTH_RESID_BIAS); /* {1, H}, {n, G} vectors, {n, E} biases */
    if (is_f32_param) return emit_f32(c, t, index);
    struct synth_pool *pool;
    enum hmoe_status st = get_pool(c, t->type, &pool);
    if (st != HMOE_OK) return st;
    /* Each tensor starts at its own pseudo-random pool phase. */
    uint64_t x = c->plan->seed * 0x9e3779b97f4a7c15ull + index;
    uint64_t phase = synth_splitmix(&x) % pool->n_blocks;
    if (c->zipf && t->role == SYNTH_TOKEN_EMBD) return emit_zipf_embd(c, t, pool, phase);
    /* Everything that writes the residual stream leaves the routing channel alone. */
    if (c->zipf && (t->role == SYNTH_ATTN_OUTPUT || t->role == SYNTH_FFN_DOWN_EXPS || t->role == SYNTH_SSM_OUT ||
                    t->role == SYNTH_FFN_DOWN_SHEXP))
        return emit_zipf_rows(c, t, pool, phase);
    return emit_pool(c, pool, phase, t->n_bytes / pool->block_bytes);
}

/* tokenizer.* keys: copied from --vocab, or the generated vocabulary (tokenizer.md §1). */
static enum hmoe_status add_tokenizer(struct hmoe_gguf_writer *w, const struct hmoe_synth_plan *plan,
                                      struct hmoe_err *err) {
    enum hmoe_status st = HMOE_OK;
    if (plan->vocab_src) {
        for (uint64_t i = 0; st == HMOE_OK && i < plan->vocab_src->n_kv; i++)
            if (strncmp(plan->vocab_src->kv[i].key, "tokenizer.", 10) == 0)
                st = hmoe_gguf_writer_copy_kv(w, &plan->vocab_src->kv[i], err);
        return st;
    }
    struct hmoe_synth_vocab v;
    st = hmoe_synth_vocab_init(&v, plan->preset.n_vocab, err);
    if (st != HMOE_OK) return st;
    st = hmoe_gguf_writer_add_str(w, "tokenizer.ggml.model", "gpt2", err);
    /* the pre-tokenizer this architecture's files use (its table entry, arch.h) */
    const char *pre = hmoe_arch_find(plan->preset.arch->name)->tokenizer_pre;
    if (st == HMOE_OK) st = hmoe_gguf_writer_add_str(w, "tokenizer.ggml.pre", pre, err);
    if (st == HMOE_OK) st = hmoe_gguf_writer_add_arr_str(w, "tokenizer.ggml.tokens", v.tokens, v.n_tokens, err);
    if (st == HMOE_OK)
        st = hmoe_gguf_writer_add_arr(w, "tokenizer.ggml.token_type", HMOE_GGUF_I32, v.token_type, v.n_tokens, err);
    if (st == HMOE_OK) st = hmoe_gguf_writer_add_arr_str(w, "tokenizer.ggml.merges", v.merges, v.n_merges, err);
    if (st == HMOE_OK) st = hmoe_gguf_writer_add_u32(w, "tokenizer.ggml.eos_token_id", v.eos_id, err);
    if (st == HMOE_OK) st = hmoe_gguf_writer_add_u32(w, "tokenizer.ggml.padding_token_id", v.pad_id, err);
    if (st == HMOE_OK) st = hmoe_gguf_writer_add_u32(w, "tokenizer.ggml.bos_token_id", v.bos_id, err);
    if (st == HMOE_OK) st = hmoe_gguf_writer_add_bool(w, "tokenizer.ggml.add_bos_token", false, err);
    if (st == HMOE_OK && plan->preset.arch->qwen3_template)
        st = hmoe_gguf_writer_add_str(w, "tokenizer.chat_template", hmoe_synth_qwen3_chat_template(), err);
    hmoe_synth_vocab_free(&v);
    return st;
}

static enum hmoe_status add_metadata(struct hmoe_gguf_writer *w, const struct hmoe_synth_plan *plan,
                                     struct hmoe_err *err) {
    const struct hmoe_synth_preset *p = &plan->preset;
    char name[128], routing[64];
    snprintf(name, sizeof name, "synthetic %s %s", p->name,
             plan->rules ? hmoe_synth_rules_label(plan->rules) : hmoe_synth_mix_name(plan->mix));
    if (plan->routing.kind == HMOE_SYNTH_ROUTING_ZIPF) snprintf(routing, sizeof routing, "zipf:%g", plan->routing.zipf_s);
    else snprintf(routing, sizeof routing, "uniform");
    enum hmoe_status st = hmoe_gguf_writer_add_str(w, "general.architecture", p->arch->name, err);
    if (st == HMOE_OK) st = hmoe_gguf_writer_add_str(w, "general.name", name, err);
    if (st == HMOE_OK) st = hmoe_gguf_writer_add_u32(w, "general.alignment", ALIGN, err);
    if (st == HMOE_OK) st = p->arch->add_hparams(w, p, err);
    if (st == HMOE_OK) st = hmoe_gguf_writer_add_u32(w, "general.file_type", hmoe_synth_mix_file_type(plan->mix), err);
    /* required when any tensor is quantized (gguf.md §10.1); gguf_synth.py omits it */
    if (st == HMOE_OK) st = hmoe_gguf_writer_add_u32(w, "general.quantization_version", 2, err);
    /* how the file was made (engines ignore unknown keys; benches read them) */
    if (st == HMOE_OK) st = hmoe_gguf_writer_add_str(w, "hmoe.synth.routing", routing, err);
    if (st == HMOE_OK) st = hmoe_gguf_writer_add_u64(w, "hmoe.synth.seed", plan->seed, err);
    if (st == HMOE_OK) st = add_tokenizer(w, plan, err);
    for (size_t i = 0; st == HMOE_OK && i < plan->n_tensors; i++) {
        const struct hmoe_synth_tensor *t = &plan->tensors[i];
        st = hmoe_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, err);
    }
    return st;
}

enum hmoe_status hmoe_synth_write(const struct hmoe_synth_plan *plan, const char *path, hmoe_synth_progress_fn progress,
                                  void *progress_ctx, struct hmoe_err *err) {
    struct wctx c = {.plan = plan, .progress = progress, .progress_ctx = progress_ctx, .err = err};
    c.zipf = plan->routing.kind == HMOE_SYNTH_ROUTING_ZIPF;
    c.buf = malloc(CHUNK_BYTES);
    c.zeros = calloc(1, CHUNK_BYTES);
    enum hmoe_status st = c.buf && c.zeros ? HMOE_OK : HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory writing %s", path);
    if (st == HMOE_OK) st = hmoe_gguf_writer_init(&c.w, ALIGN, err);
    if (st == HMOE_OK) st = add_metadata(c.w, plan, err);
    if (st == HMOE_OK && c.zipf) {
        struct synth_pool *embd_pool;
        st = get_pool(&c, plan->tensors[0].type, &embd_pool); /* token_embd comes first (synth_preset.c) */
        if (st == HMOE_OK) st = synth_route_init(&c.route, plan, embd_pool, err);
    }
    if (st == HMOE_OK) st = hmoe_gguf_writer_open(c.w, path, err);
    for (size_t i = 0; st == HMOE_OK && i < plan->n_tensors; i++) st = emit_tensor(&c, i);
    if (st == HMOE_OK) st = hmoe_gguf_writer_finish(c.w, err);
    hmoe_gguf_writer_free(c.w); /* removes the partial file after any failure */
    if (c.zipf) synth_route_free(&c.route);
    for (int t = 0; t < HMOE_TYPE_COUNT; t++) synth_pool_free(&c.pools[t]);
    free(c.buf);
    free(c.zeros);
    return st;
}
