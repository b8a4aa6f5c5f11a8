/* ctx.c — a decoding context: parameters with their defaults, the run state and KV cache
 * allocated once (model_impl.h), and hmoe_ctx_decode, which checks positions and token
 * ids, splits the tokens into micro-batches and runs the architecture's forward pass.
 * KV cache layout per layer: K as [n_ctx][Hkv] rows of head_dim elements in the cache type
 * (q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl: blocks of 32 along head_dim, quants.md §3); V the
 * same for the block types, transposed to [Hkv][head_dim][n_ctx] for f32/f16/bf16
 * (attention.c says why). Only attention layers
 * have a KV cache; recurrent layers keep their state in rs.rec (recurrent.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "hmoe/cpu.h"
#include "hmoe/cuda.h"
#include "model/gpu_impl.h"
#include "model/mtp_impl.h"
#include "model/recurrent_impl.h"

void hmoe_ctx_params_default(struct hmoe_ctx_params *p) {
    p->n_ctx = 4096;
    p->n_seq = 1;
    p->type_k = HMOE_TYPE_F16;
    p->type_v = HMOE_TYPE_F16;
    p->n_threads = 0; /* physical cores */
    p->n_ubatch = 512;
    p->gpu = HMOE_GPU_OFF;
    p->gpu_device = 0;
    hmoe_sched_gpu_params_default(&p->sched);
    p->verbose = false;
}

bool hmoe_gpu_mode_from_name(const char *name, enum hmoe_gpu_mode *out) {
    static const struct {
        const char *name;
        enum hmoe_gpu_mode mode;
    } modes[] = {{"auto", HMOE_GPU_AUTO}, {"on", HMOE_GPU_ON}, {"off", HMOE_GPU_OFF}};
    for (size_t i = 0; i < HMOE_ARRAY_LEN(modes); i++)
        if (strcasecmp(name, modes[i].name) == 0) {
            *out = modes[i].mode;
            return true;
        }
    return false;
}

static const struct {
    const char *name;
    enum hmoe_type type;
} kv_types[] = {{"f32", HMOE_TYPE_F32},   {"f16", HMOE_TYPE_F16},   {"bf16", HMOE_TYPE_BF16},
                {"q8_0", HMOE_TYPE_Q8_0}, {"q4_0", HMOE_TYPE_Q4_0}, {"q4_1", HMOE_TYPE_Q4_1},
                {"q5_0", HMOE_TYPE_Q5_0}, {"q5_1", HMOE_TYPE_Q5_1}, {"iq4_nl", HMOE_TYPE_IQ4_NL}};

bool hmoe_kv_type_from_name(const char *name, enum hmoe_type *out) {
    for (size_t i = 0; i < HMOE_ARRAY_LEN(kv_types); i++)
        if (strcasecmp(name, kv_types[i].name) == 0) {
            *out = kv_types[i].type;
            return true;
        }
    return false;
}

/* A cache type must be one of kv_types, store rows of n elements (block multiple) and have
 * the kernels attention uses (cpu.h hmoe_cpu_attn_kv_type_ok): store, read back, dot. */
static enum hmoe_status check_kv_type(enum hmoe_type t, const char *which, int n, struct hmoe_err *err) {
    bool listed = false;
    for (size_t i = 0; i < HMOE_ARRAY_LEN(kv_types); i++) listed |= kv_types[i].type == t;
    if (!listed)
        return HMOE_RAISE(err, HMOE_ERR_UNSUPPORTED,
                          "KV cache type %s for %s is not supported (use " HMOE_KV_TYPE_NAMES ")", hmoe_type_name(t),
                          which);
    const struct hmoe_type_info *ti = &hmoe_type_info[t];
    if (n % ti->blck != 0)
        return HMOE_RAISE(err, HMOE_ERR_UNSUPPORTED,
                          "KV cache type %s for %s needs the head size (%d) to be a multiple of %d; use f16", ti->name,
                          which, n, ti->blck);
    if (!hmoe_cpu_attn_kv_type_ok(t))
        return HMOE_RAISE(err, HMOE_ERR_UNSUPPORTED,
                          "KV cache type %s for %s: this build lacks its kernels (missing kernel); use f16", ti->name,
                          which);
    return HMOE_OK;
}

static void free_run_state(struct hmoe_run_state *rs, int n_layer) {
    free(rs->x);
    free(rs->xn);
    free(rs->q);
    free(rs->k);
    free(rs->v);
    free(rs->attn);
    free(rs->out);
    free(rs->rope_cos);
    free(rs->rope_sin);
    free(rs->pos);
    free(rs->act);
    free(rs->att_scores);
    free(rs->att_q);
    free(rs->att_v);
    free(rs->att_o);
    for (int i = 0; rs->k_cache && i < n_layer; i++) free(rs->k_cache[i]);
    for (int i = 0; rs->v_cache && i < n_layer; i++) free(rs->v_cache[i]);
    free(rs->k_cache);
    free(rs->v_cache);
    hmoe_sched_moe_free(rs->moe);
    hmoe_rec_free(rs->rec);
}

/* The sequences beyond 0; sequence 0's cache pointers are the pool itself (freed with the
 * run state), so the mirrored fields go back to it first. */
static void free_seqs(struct hmoe_ctx *c) {
    if (!c->seqs) return;
    for (int s = 1; s < c->p.n_seq; s++) {
        free(c->seqs[s].k_cache);
        free(c->seqs[s].v_cache);
        hmoe_rec_free(c->seqs[s].rec);
    }
    c->rs.k_cache = c->seqs[0].k_cache;
    c->rs.v_cache = c->seqs[0].v_cache;
    c->rs.rec = c->seqs[0].rec;
    free(c->seqs);
    c->seqs = NULL;
}

void hmoe_ctx_free(struct hmoe_ctx *c) {
    if (!c) return;
    hmoe_mtp_free(c->mtp);
    hmoe_gpu_free(c->gpu, c->m->cfg.n_layer);
    free_seqs(c);
    free_run_state(&c->rs, c->m->cfg.n_layer);
    free(c);
}

/* Largest quantized-activation row any dense matmul of the model needs. */
static size_t max_act_row_bytes(const struct hmoe_model *m) {
    size_t mx = 0;
#define ACT(mat) mx = HMOE_MAX(mx, hmoe_cpu_act_bytes((mat).type, (mat).n_in))
    ACT(m->w.output);
    for (int il = 0; il < m->cfg.n_layer; il++) {
        const struct hmoe_layer_weights *L = &m->w.layers[il];
        ACT(L->attn_q);
        ACT(L->attn_k);
        ACT(L->attn_v);
        ACT(L->attn_output);
        ACT(L->gdn.qkv); /* Gated DeltaNet layers (zero-sized views elsewhere) */
        ACT(L->gdn.out);
        ACT(L->shexp.gate);
        ACT(L->shexp.up);
        ACT(L->shexp.down);
        ACT(L->mamba.in); /* Mamba-2 layers */
        ACT(L->mamba.out);
        ACT(L->ffn_up);
        ACT(L->ffn_down);
        ACT(L->latent_down);
        ACT(L->latent_up);
        ACT(L->nextn.eh_proj); /* an MTP block's view (mtp.c) */
    }
#undef ACT
    return mx;
}

/* Every sequence's view of the KV pool (sequence s: the slice of positions s * n_ctx ..
 * (s+1) * n_ctx - 1 in the cache layout, so each slice is a whole cache of n_ctx positions)
 * and its recurrent state; sequence 0 is the run state's own. */
static enum hmoe_status alloc_seqs(struct hmoe_ctx *c, struct hmoe_err *err) {
    const int L = c->m->cfg.n_layer, n_seq = c->p.n_seq;
    const size_t rows = (size_t)c->p.n_ctx * (size_t)c->m->cfg.n_head_kv;
    c->seqs = calloc((size_t)n_seq, sizeof *c->seqs);
    if (!c->seqs) return HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory");
    c->seqs[0] = (struct hmoe_seq){.k_cache = c->rs.k_cache, .v_cache = c->rs.v_cache, .rec = c->rs.rec};
    for (int s = 1; s < n_seq; s++) {
        struct hmoe_seq *q = &c->seqs[s];
        q->k_cache = calloc((size_t)L, sizeof *q->k_cache);
        q->v_cache = calloc((size_t)L, sizeof *q->v_cache);
        if (!q->k_cache || !q->v_cache) return HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory");
        for (int il = 0; il < L; il++) {
            if (!c->rs.k_cache[il]) continue;
            q->k_cache[il] = c->rs.k_cache[il] + (size_t)s * rows * c->k_row_bytes;
            q->v_cache[il] = c->rs.v_cache[il] + (size_t)s * rows * c->v_row_bytes;
        }
        if (c->rs.rec) {
            enum hmoe_status st = hmoe_rec_init_seq(c->rs.rec, c->p.n_ctx, &q->rec, err);
            if (st) return st;
        }
    }
    return HMOE_OK;
}

static enum hmoe_status alloc_run_state(struct hmoe_ctx *c, struct hmoe_err *err) {
    const struct hmoe_model_config *cfg = &c->m->cfg;
    struct hmoe_run_state *rs = &c->rs;
    const size_t ub = (size_t)c->p.n_ubatch, d = (size_t)cfg->n_embd, H = (size_t)cfg->n_head,
                 Hkv = (size_t)cfg->n_head_kv, D = (size_t)cfg->head_dim, Dv = (size_t)cfg->head_dim_v,
                 G = H / Hkv, nt = (size_t)c->p.n_threads, n_ctx = (size_t)c->p.n_ctx, L = (size_t)cfg->n_layer,
                 n_seq = (size_t)c->p.n_seq;
    rs->x = calloc(ub * d, sizeof(float));
    rs->xn = calloc(ub * d, sizeof(float));
    rs->q = calloc(ub * H * D, sizeof(float));
    rs->k = calloc(ub * Hkv * D, sizeof(float));
    rs->v = calloc(ub * Hkv * Dv, sizeof(float));
    rs->attn = calloc(ub * H * Dv, sizeof(float));
    rs->out = calloc(ub * d, sizeof(float));
    const size_t half = (size_t)HMOE_MAX(1, cfg->n_rot / 2); /* 1: no RoPE, still a valid pointer */
    rs->rope_cos = calloc(ub * half, sizeof(float));
    rs->rope_sin = calloc(ub * half, sizeof(float));
    rs->pos = calloc(ub, sizeof(int32_t));
    rs->act_row_bytes = (max_act_row_bytes(c->m) + 63) / 64 * 64;
    rs->act = calloc(3 * ub, rs->act_row_bytes ? rs->act_row_bytes : 1);
    rs->att_q_bytes = (hmoe_cpu_act_bytes(c->p.type_k, (int64_t)D) + 63) / 64 * 64;
    /* A batch's attention items take up to 4 tokens (attention.c), as long as their scores
     * stay within 8 MiB per thread; a one-token micro-batch needs one. */
    size_t tok = ub > 1 ? 4 : 1;
    while (tok > 1 && tok * G * n_ctx * sizeof(float) > ((size_t)8 << 20)) tok /= 2;
    rs->att_tok = (int)tok;
    rs->att_scores = calloc(nt * tok * G * (n_ctx + 32), sizeof(float)); /* rows of a chunk: up to n_ctx + 32 apart */
    rs->att_q = calloc(nt * tok * G, rs->att_q_bytes);
    rs->att_v = calloc(nt * HMOE_MAX(D, Dv), sizeof(float)); /* also a K row of a context shift (kv_shift.c) */
    rs->att_o = calloc(nt * tok * G * Dv, sizeof(float));
    rs->k_cache = calloc(L, sizeof *rs->k_cache);
    rs->v_cache = calloc(L, sizeof *rs->v_cache);
    if (!rs->x || !rs->xn || !rs->q || !rs->k || !rs->v || !rs->attn || !rs->out || !rs->rope_cos || !rs->rope_sin ||
        !rs->pos || !rs->act || !rs->att_scores || !rs->att_q || !rs->att_v || !rs->att_o || !rs->k_cache || !rs->v_cache)
        return HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory for the run state (%zu-token micro-batch)", ub);
    /* calloc: the OS hands out zero pages lazily, so RSS grows only with positions used. One
     * pool per layer for all sequences, each sequence's cache a contiguous slice (alloc_seqs). */
    for (size_t il = 0; il < L; il++) {
        if (c->m->w.layers[il].recurrent || c->m->w.layers[il].ffn_only) continue; /* no KV cache */
        rs->k_cache[il] = calloc(n_seq * n_ctx * Hkv, c->k_row_bytes);
        rs->v_cache[il] = calloc(n_seq * n_ctx * Hkv, c->v_row_bytes);
        if (!rs->k_cache[il] || !rs->v_cache[il])
            return HMOE_RAISE(err, HMOE_ERR_NOMEM,
                              "out of memory for the KV cache (%zu MiB for %d positions); lower -c/--ctx-size or use "
                              "-ctk/-ctv q8_0",
                              c->kv_bytes >> 20, c->p.n_ctx);
    }
    struct hmoe_moe_weights *moe = malloc(L * sizeof *moe);
    if (!moe) return HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory");
    bool any_moe = false;
    for (size_t il = 0; il < L; il++) {
        moe[il] = c->m->w.layers[il].moe;
        any_moe |= moe[il].router.data != NULL;
    }
    enum hmoe_status st =
        any_moe ? hmoe_sched_moe_init(moe, (int)L, c->p.n_ubatch, c->p.n_threads, &rs->moe, err) : HMOE_OK;
    free(moe);
    if (!st && cfg->arch_entry->rec_dims) {
        struct hmoe_rec_dims dm;
        cfg->arch_entry->rec_dims(cfg, &dm);
        st = hmoe_rec_init(c, &dm, err);
    }
    return st ? st : alloc_seqs(c, err);
}

/* --gpu auto|on: the GPU backend, or (auto only) the CPU with a note when there is no GPU or
 * the model/settings need something the GPU path lacks. */
static enum hmoe_status init_gpu(struct hmoe_ctx *c, struct hmoe_err *err) {
    if (!c->m->cfg.arch_entry->gpu) {
        if (c->p.gpu == HMOE_GPU_ON)
            return HMOE_RAISE(err, HMOE_ERR_UNSUPPORTED,
                              "--gpu on: no GPU path for %s; use --gpu off (the CPU runs it)", c->m->cfg.arch);
        HMOE_INFO("no GPU path for %s: running on the CPU", c->m->cfg.arch);
        c->p.gpu = HMOE_GPU_OFF;
        return HMOE_OK;
    }
    if (!hmoe_cuda_available()) {
        if (c->p.gpu == HMOE_GPU_ON)
            return HMOE_RAISE(err, HMOE_ERR_DEVICE, "--gpu on: %s",
                              HMOE_HAVE_CUDA ? "no CUDA device found (is the NVIDIA driver loaded?)"
                                             : "this hmoe was built without CUDA (rebuild with nvcc on PATH)");
        HMOE_INFO("no usable GPU: running on the CPU");
        c->p.gpu = HMOE_GPU_OFF;
        return HMOE_OK;
    }
    struct hmoe_err e2 = {0};
    enum hmoe_status st = hmoe_gpu_init(c, c->p.gpu == HMOE_GPU_ON ? err : &e2);
    if (st == HMOE_OK) return HMOE_OK;
    hmoe_gpu_free(c->gpu, c->m->cfg.n_layer);
    c->gpu = NULL;
    if (c->p.gpu == HMOE_GPU_ON) return st;
    HMOE_WARN("GPU not used (%s); running on the CPU", e2.msg);
    c->p.gpu = HMOE_GPU_OFF;
    return HMOE_OK;
}

enum hmoe_status hmoe_ctx_init(const struct hmoe_model *m, const struct hmoe_ctx_params *params,
                               struct hmoe_ctx **out, struct hmoe_err *err) {
    *out = NULL;
    hmoe_cpu_init();
    struct hmoe_ctx_params p;
    hmoe_ctx_params_default(&p);
    if (params) p = *params;
    const struct hmoe_model_config *cfg = &m->cfg;
    if (p.n_ctx <= 0) p.n_ctx = 4096;
    if (p.n_seq <= 0) p.n_seq = 1;
    if (p.n_seq > HMOE_MAX_SEQ)
        return HMOE_RAISE(err, HMOE_ERR_ARG, "%d parallel sequences (-np) is more than the %d a context holds",
                          p.n_seq, HMOE_MAX_SEQ);
    if (p.n_ctx / p.n_seq < 1)
        return HMOE_RAISE(err, HMOE_ERR_ARG,
                          "a context of %d positions cannot hold %d sequences; raise -c/--ctx-size (it is the total "
                          "of all -np sequences)",
                          p.n_ctx, p.n_seq);
    p.n_ctx /= p.n_seq; /* from here on: one sequence's capacity */
    /* The GPU backend holds several sequences' KV caches; recurrent state (Gated DeltaNet,
     * Mamba-2) it keeps for one sequence only. */
    if (p.n_seq > 1 && p.gpu != HMOE_GPU_OFF && cfg->arch_entry->rec_dims) {
        if (p.gpu == HMOE_GPU_ON)
            return HMOE_RAISE(err, HMOE_ERR_UNSUPPORTED,
                              "--gpu on with %d parallel sequences: the GPU backend holds the recurrent state of one "
                              "sequence of %s; use -np 1 or --gpu off",
                              p.n_seq, cfg->arch);
        HMOE_INFO("%d parallel sequences of %s run on the CPU (the GPU backend holds one sequence's recurrent state)",
                  p.n_seq, cfg->arch);
        p.gpu = HMOE_GPU_OFF;
    }
    /* As llama.cpp: a context past what the model was trained for is allowed with a warning
     * (quality may fall, nothing breaks); with RoPE scaling the trained span is the original
     * context times the factor. */
    const int n_ctx_scaled = cfg->rope_scaling != HMOE_ROPE_SCALING_NONE && cfg->rope_freq_scale > 0.0f
                                 ? (int)HMOE_MIN(2147483647.0, (double)cfg->rope_n_ctx_orig / cfg->rope_freq_scale)
                                 : 0;
    if (p.n_ctx > HMOE_MAX(cfg->n_ctx_train, n_ctx_scaled))
        HMOE_WARN("context size %d exceeds the model's context_length %d: possible training context overflow "
                  "(YaRN: --rope-scaling yarn --rope-scale S --yarn-orig-ctx N with S x N >= %d; Qwen3: 4 and 32768)",
                  p.n_ctx, cfg->n_ctx_train, p.n_ctx);
    if (p.n_threads <= 0) p.n_threads = hmoe_cpu_physical_cores();
    if (p.n_threads > 1024) p.n_threads = 1024;
    if (p.n_ubatch <= 0) p.n_ubatch = 512;
    if (p.n_ubatch > p.n_ctx * p.n_seq) p.n_ubatch = p.n_ctx * p.n_seq; /* a micro-batch may hold rows of every sequence */
    enum hmoe_status st = check_kv_type(p.type_k, "K (-ctk)", cfg->head_dim, err);
    if (!st) st = check_kv_type(p.type_v, "V (-ctv)", cfg->head_dim_v, err);
    if (st) return st;

    struct hmoe_ctx *c = calloc(1, sizeof *c);
    if (!c) return HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory");
    c->m = m;
    c->p = p;
    c->k_row_bytes = hmoe_row_bytes(p.type_k, cfg->head_dim);
    c->v_row_bytes = hmoe_row_bytes(p.type_v, cfg->head_dim_v);
    c->v_trans = hmoe_type_info[p.type_v].blck == 1;
    int n_kv_layers = 0;
    for (int il = 0; il < cfg->n_layer; il++) n_kv_layers += !m->w.layers[il].recurrent && !m->w.layers[il].ffn_only;
    c->kv_bytes = (size_t)n_kv_layers * (size_t)p.n_seq * (size_t)p.n_ctx * (size_t)cfg->n_head_kv *
                  (c->k_row_bytes + c->v_row_bytes);
    st = alloc_run_state(c, err);
    if (!st && p.gpu != HMOE_GPU_OFF) st = init_gpu(c, err);
    if (st) {
        hmoe_ctx_free(c);
        return st;
    }
    *out = c;
    return HMOE_OK;
}

int hmoe_ctx_n_past(const struct hmoe_ctx *c) { return c->n_past; }
int hmoe_ctx_n_seq(const struct hmoe_ctx *c) { return c->p.n_seq; }
int hmoe_ctx_cur_seq(const struct hmoe_ctx *c) { return c->cur_seq; }

enum hmoe_status hmoe_ctx_use_seq(struct hmoe_ctx *c, int s, struct hmoe_err *err) {
    if (s < 0 || s >= c->p.n_seq)
        return HMOE_RAISE(err, HMOE_ERR_RANGE, "sequence %d does not exist: the context holds %d (-np)", s,
                          c->p.n_seq);
    struct hmoe_seq *cur = &c->seqs[c->cur_seq], *to = &c->seqs[s];
    cur->n_past = c->n_past;
    c->cur_seq = s;
    c->n_past = to->n_past;
    c->rs.k_cache = to->k_cache;
    c->rs.v_cache = to->v_cache;
    c->rs.rec = to->rec;
    return HMOE_OK;
}
int hmoe_ctx_n_ctx(const struct hmoe_ctx *c) { return c->p.n_ctx; }
const struct hmoe_ctx_params *hmoe_ctx_get_params(const struct hmoe_ctx *c) { return &c->p; }
size_t hmoe_ctx_kv_bytes(const struct hmoe_ctx *c) { return c->kv_bytes; }

const char *hmoe_ctx_backend(const struct hmoe_ctx *c) {
    if (!c->gpu) return "cpu";
    return c->gpu->hyb ? "cuda+cpu" : "cuda";
}

const char *hmoe_ctx_report(struct hmoe_ctx *c) { return c->gpu ? hmoe_gpu_report(c) : ""; }

void hmoe_ctx_get_stats(const struct hmoe_ctx *c, struct hmoe_ctx_stats *out) {
    memset(out, 0, sizeof *out);
    const struct hmoe_gpu *g = c->gpu;
    if (!g) return;
    out->vram_budget_bytes = g->budget_bytes;
    out->vram_peak_bytes = hmoe_cuda_ctx_peak_bytes(g->cu);
    out->vram_used_bytes = hmoe_cuda_ctx_used_bytes(g->cu);
    struct hmoe_cuda_device_mem dm;
    hmoe_cuda_ctx_device_mem(g->cu, &dm);
    out->vram_device_peak_bytes = dm.peak;
    out->vram_device_used_bytes = dm.used_now;
    out->vram_plan_bytes = g->plan_bytes;
    out->vram_context_bytes = g->bytes_context;
    out->vram_reserve_bytes = g->bytes_reserve + g->bytes_cublas + g->bytes_pad;
    out->vram_kv_bytes = g->bytes_kv;
    out->vram_resident_bytes = g->bytes_experts;
    out->vram_cache_bytes = g->bytes_cache;
    out->vram_buffers_bytes = g->act_bytes_total + g->bytes_stream;
    out->vram_cache_slots = g->cache_slots;
    out->decode_tokens = g->n_steps;
    out->gpu_ms_per_token = g->n_timed ? g->gpu_ms_sum / (double)g->n_timed : 0.0;
    /* without the hybrid scheduler (all resident, or an entry that runs its RAM layers itself): every
     * MoE layer uses k experts per token, so the share of resident MoE layers is the hit rate */
    int moe_layers = 0, resident = 0;
    for (int il = 0; il < c->m->cfg.n_layer; il++)
        if (c->m->w.layers[il].moe.up.data) moe_layers++, resident += g->L[il].resident;
    out->cache_hit_rate = moe_layers ? (double)resident / moe_layers : 1.0;
    if (g->hyb) {
        struct hmoe_sched_hybrid_stats hs;
        hmoe_sched_hybrid_get_stats(g->hyb, &hs);
        out->cpu_expert_ms_per_token = hs.cpu_expert_ms_per_token;
        out->cache_hit_rate = hs.hit_rate;
        out->pcie_gbps = hs.pcie_gbps;
        out->h2d_gbps_probe = hs.h2d_gbps_probe;
        out->pinned_bytes = hs.pinned_bytes;
        out->gpu_wait_us_per_layer = hs.gpu_wait_us_per_layer;
        out->ram_experts = hs.ram_experts;
        out->cached_experts = hs.cached_experts;
        out->prefill_streamed_experts = hs.prefill_streamed_experts;
        out->xfer_experts = hs.xfer_experts;
        out->prefetch_pred = hs.prefetch_pred;
        out->prefetch_correct = hs.prefetch_correct;
        out->prefetch_fills = hs.prefetch_fills;
        out->cpu_expert_gbps = hs.cpu_phase_gbps;
        out->handoff_in_us = hs.handoff_in_us;
        out->handoff_out_us = hs.handoff_out_us;
    }
}

void hmoe_ctx_take_moe_reads(struct hmoe_ctx *c, struct hmoe_sched_moe_reads *out) {
    memset(out, 0, sizeof *out);
    if (!c->gpu && c->rs.moe) hmoe_sched_moe_reads_take(c->rs.moe, out);
}

void hmoe_ctx_reset_stats(struct hmoe_ctx *c) {
    struct hmoe_gpu *g = c->gpu;
    if (!g) return;
    g->n_steps = g->n_timed = 0;
    g->gpu_ms_sum = 0;
    g->prof_tokens = 0;
    memset(g->prof_ms, 0, sizeof g->prof_ms);
    if (g->hyb) hmoe_sched_hybrid_reset_stats(g->hyb);
}

void hmoe_ctx_truncate(struct hmoe_ctx *c, int n_keep) {
    if (n_keep < 0) n_keep = 0;
    if (n_keep < c->n_past) c->n_past = n_keep;
    if (c->rs.rec) hmoe_rec_truncate(c->rs.rec, c->n_past);
}

void hmoe_ctx_reset(struct hmoe_ctx *c) { hmoe_ctx_truncate(c, 0); }

void hmoe_ctx_checkpoint(struct hmoe_ctx *c) {
    if (c->rs.rec) hmoe_rec_checkpoint(c->rs.rec, c->n_past);
}

size_t hmoe_ctx_state_bytes(const struct hmoe_ctx *c) { return hmoe_rec_state_bytes(c->rs.rec); }

enum hmoe_status hmoe_ctx_forward(struct hmoe_ctx *c, const int32_t *ids, int n, int pos0, enum hmoe_logits which,
                                  float *logits, struct hmoe_err *err) {
    if (c->mtp) {
        /* The MTP block's entries of the positions this pass confirms (mtp_impl.h). */
        enum hmoe_status st = hmoe_mtp_sync(c, ids[0], pos0, err);
        if (st) return st;
    }
    enum hmoe_status st = c->gpu ? hmoe_gpu_forward(c, ids, n, pos0, which, logits, err)
                                 : c->m->cfg.arch_entry->forward_cpu(c, ids, n, pos0, which, logits, err);
    if (!st && c->mtp) hmoe_mtp_kept(c, c->batch ? 0 : n, pos0); /* a batched pass keeps no hidden states */
    return st;
}

enum hmoe_status hmoe_ctx_decode(struct hmoe_ctx *c, const int32_t *ids, int n, int pos0, enum hmoe_logits which,
                                 float *logits_out, struct hmoe_err *err) {
    const int V = c->m->cfg.n_vocab;
    if (n <= 0 || !ids) return HMOE_RAISE(err, HMOE_ERR_ARG, "decode: no tokens given");
    if (which != HMOE_LOGITS_NONE && !logits_out)
        return HMOE_RAISE(err, HMOE_ERR_ARG, "decode: logits requested but no output buffer given");
    if (pos0 < 0 || pos0 > c->n_past)
        return HMOE_RAISE(err, HMOE_ERR_ARG, "decode: position %d is past the %d positions in the KV cache", pos0,
                          c->n_past);
    if ((int64_t)pos0 + n > c->p.n_ctx)
        return HMOE_RAISE(err, HMOE_ERR_RANGE,
                          "context full: %d tokens at position %d need a context of %lld positions but it holds %d; "
                          "raise -c/--ctx-size (the model's context_length is %d)",
                          n, pos0, (long long)pos0 + n, c->p.n_ctx, c->m->cfg.n_ctx_train);
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= V)
            return HMOE_RAISE(err, HMOE_ERR_RANGE, "token id %d (at index %d) is out of range: the vocabulary has %d ids",
                              ids[i], i, V);
    hmoe_ctx_truncate(c, pos0);
    if (c->rs.rec) {
        /* After a rewind the recurrent state may lag behind pos0: replay to it (recurrent.c). */
        enum hmoe_status st = hmoe_rec_prepare(c, ids, n, pos0, err);
        if (st) return st;
    }
    for (int off = 0; off < n; off += c->p.n_ubatch) {
        const int m = HMOE_MIN(c->p.n_ubatch, n - off);
        enum hmoe_logits w = which;
        float *lo = logits_out;
        if (which == HMOE_LOGITS_ALL) lo = logits_out + (size_t)off * (size_t)V;
        else if (which == HMOE_LOGITS_LAST && off + m < n) w = HMOE_LOGITS_NONE;
        enum hmoe_status st = hmoe_ctx_forward(c, ids + off, m, pos0 + off, w, lo, err);
        if (st) return st;
        c->n_past = pos0 + off + m;
        if (c->rs.rec) c->rs.rec->n_state = c->n_past;
    }
    return HMOE_OK;
}
