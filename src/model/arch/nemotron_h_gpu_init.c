/* nemotron_h_gpu_init.c — the nemotron_h part of the GPU backend's setup (nemotron_h_gpu.h):
 * checks of what the kernels take, the VRAM it needs (for placement under the budget), the upload
 * of each layer's Mamba-2, shared-expert / dense-FFN and latent weights, the recurrent state in
 * VRAM (zeroed; recurrent.c moves it for rewinds and checkpoints), and the buffers for the
 * largest micro-batch. nemotron_h_moe.md §3-§7; attention weights, KV cache, router and routed
 * experts are gpu_init.c's; these are the entry's gpu hooks (arch.h).
 */
#include <stdio.h>
#include <stdlib.h>

#include "model/arch/nemotron_h_gpu.h"

static size_t align256(size_t n) { return (n + 255) / 256 * 256; }
static size_t mat_bytes(const struct hmoe_mat *m) { return (size_t)m->n_out * m->row_bytes; }

static enum hmoe_status check_mat(const struct hmoe_mat *m, struct hmoe_err *err) {
    if (!m->data) return HMOE_OK;
    if (!hmoe_cuda_type_supported(m->type))
        return HMOE_RAISE(err, HMOE_ERR_UNSUPPORTED, "tensor %s: type %s has no GPU kernels; use --gpu off", m->name,
                          hmoe_type_name(m->type));
    if (hmoe_type_info[m->type].is_quantized && m->n_in % 32)
        return HMOE_RAISE(err, HMOE_ERR_UNSUPPORTED,
                          "tensor %s: quantized with %lld columns, the GPU needs a multiple of 32; use --gpu off", m->name,
                          (long long)m->n_in);
    if (!hmoe_type_info[m->type].is_quantized && m->n_in % 8)
        return HMOE_RAISE(err, HMOE_ERR_UNSUPPORTED,
                          "tensor %s: %lld columns, the GPU float kernels need a multiple of 8; use --gpu off", m->name,
                          (long long)m->n_in);
    return HMOE_OK;
}

enum hmoe_status hmoe_gpu_nem_check(const struct hmoe_model *m, struct hmoe_err *err) {
    const struct hmoe_model_config *cfg = &m->cfg;
    if (cfg->ssm_d_state > 256)
        return HMOE_RAISE(err, HMOE_ERR_UNSUPPORTED, "GPU Mamba-2 needs ssm.state_size <= 256 (model: %d); use --gpu off",
                          cfg->ssm_d_state);
    if (cfg->n_expert > 0 && cfg->exp_n_group > 1 && cfg->exp_n_group_used < cfg->exp_n_group)
        return HMOE_RAISE(err, HMOE_ERR_UNSUPPORTED,
                          "the GPU router has no group-limited choice (expert_group_count %d, used %d); use --gpu off",
                          cfg->exp_n_group, cfg->exp_n_group_used);
    for (int il = 0; il < cfg->n_layer; il++) {
        const struct hmoe_layer_weights *L = &m->w.layers[il];
        const struct hmoe_mat *all[] = {&L->mamba.in, &L->mamba.out, &L->shexp.up, &L->shexp.down, &L->ffn_up,
                                        &L->ffn_down, &L->latent_down, &L->latent_up};
        for (size_t i = 0; i < HMOE_ARRAY_LEN(all); i++) {
            enum hmoe_status st = check_mat(all[i], err);
            if (st) return st;
        }
        if (L->attn_output_bias || L->ffn_up_bias || L->ffn_down_bias)
            return HMOE_RAISE(err, HMOE_ERR_UNSUPPORTED,
                              "layer %d has attention-output or dense-FFN biases, which the GPU path does not apply; use "
                              "--gpu off",
                              il);
        const struct hmoe_moe_weights *X = &L->moe;
        if (!X->up.data) continue;
        const bool quant = hmoe_type_info[X->up.type].is_quantized && hmoe_type_info[X->down.type].is_quantized;
        const bool flt = X->up.type == X->down.type && (X->up.type == HMOE_TYPE_F32 || X->up.type == HMOE_TYPE_F16);
        if (!quant && !flt)
            return HMOE_RAISE(err, HMOE_ERR_UNSUPPORTED,
                              "layer %d: the GPU expert kernels take quantized, or both F32 / both F16, up/down experts "
                              "(file: %s / %s); use "
                              "--gpu off",
                              il, hmoe_type_name(X->up.type), hmoe_type_name(X->down.type));
        if (quant && (X->up.n_in % 32 || X->down.n_in % 32))
            return HMOE_RAISE(err, HMOE_ERR_UNSUPPORTED,
                              "layer %d: quantized experts need widths that are multiples of 32 (%lld, %lld); use --gpu off",
                              il, (long long)X->up.n_in, (long long)X->down.n_in);
    }
    return HMOE_OK;
}

/* One matrix at *off (base NULL: sizes only), uploaded when base is set. */
static enum hmoe_status put_mat(struct hmoe_gpu *g, uint8_t *base, size_t *off, const struct hmoe_mat *m,
                                struct hmoe_gpu_mat *dst, struct hmoe_err *err) {
    if (!m->data) return HMOE_OK;
    const size_t start = align256(*off), bytes = mat_bytes(m);
    *off = start + bytes;
    if (!base) return HMOE_OK;
    *dst = (struct hmoe_gpu_mat){.type = m->type, .w = base + start, .row_bytes = m->row_bytes, .nrows = m->n_out,
                                 .ncols = m->n_in};
    return hmoe_cuda_upload(g->cu, base + start, m->data, bytes, err);
}

static enum hmoe_status put_vec(struct hmoe_gpu *g, uint8_t *base, size_t *off, const float *src, size_t n,
                                const float **dst, struct hmoe_err *err) {
    if (!src) return HMOE_OK;
    const size_t start = align256(*off);
    *off = start + n * 4;
    if (!base) return HMOE_OK;
    *dst = (const float *)(base + start);
    return hmoe_cuda_upload(g->cu, base + start, src, n * 4, err);
}

/* One layer's weights from base (NULL: sizes only); the bytes used in *bytes. */
static enum hmoe_status layer_weights(struct hmoe_ctx *c, int il, uint8_t *base, size_t *bytes, struct hmoe_err *err) {
    struct hmoe_gpu *g = c->gpu;
    const struct hmoe_model_config *cfg = &c->m->cfg;
    const struct hmoe_layer_weights *W = &c->m->w.layers[il];
    struct hmoe_gpu_nem_layer tmp, *L = base ? &((struct hmoe_gpu_nem *)g->arch_state)->L[il] : &tmp;
    const int64_t di = cfg->ssm_d_inner, H = cfg->ssm_n_head, cd = di + 2 * (int64_t)cfg->ssm_n_group * cfg->ssm_d_state;
    size_t off = 0;
    enum hmoe_status st;
    const struct hmoe_mamba2_weights *M = &W->mamba;
    const struct hmoe_mat *ff_up = W->shexp.up.data ? &W->shexp.up : &W->ffn_up;
    const struct hmoe_mat *ff_down = W->shexp.up.data ? &W->shexp.down : &W->ffn_down;
    if ((st = put_mat(g, base, &off, &M->in, &L->in, err)) || (st = put_mat(g, base, &off, &M->out, &L->out, err)) ||
        (st = put_mat(g, base, &off, ff_up, &L->ff_up, err)) || (st = put_mat(g, base, &off, ff_down, &L->ff_down, err)) ||
        (st = put_mat(g, base, &off, &W->latent_down, &L->lat_down, err)) ||
        (st = put_mat(g, base, &off, &W->latent_up, &L->lat_up, err)))
        return st;
    if (W->recurrent &&
        ((st = put_vec(g, base, &off, M->conv1d, (size_t)(cfg->ssm_conv_kernel * cd), &L->conv_w, err)) ||
         (st = put_vec(g, base, &off, M->conv_bias, (size_t)cd, &L->conv_b, err)) ||
         (st = put_vec(g, base, &off, M->dt_bias, (size_t)H, &L->dt_bias, err)) ||
         (st = put_vec(g, base, &off, M->a, (size_t)H, &L->a, err)) ||
         (st = put_vec(g, base, &off, M->d, (size_t)H, &L->d, err)) ||
         (st = put_vec(g, base, &off, M->norm, (size_t)di, &L->norm, err))))
        return st;
    if ((st = put_vec(g, base, &off, W->moe.sel_bias, (size_t)cfg->n_expert, &L->sel_bias, err))) return st;
    if (base) L->has_ff = ff_up->data != NULL;
    *bytes = align256(off);
    return HMOE_OK;
}

static size_t q8_row(int64_t n) { return hmoe_cuda_q8_1_row_bytes((n + 31) / 32 * 32); }

/* Buffers carved from base (0: sizes only). */
static size_t act_layout(struct hmoe_ctx *c, struct hmoe_gpu_nem *N, uintptr_t base) {
    const struct hmoe_model_config *cfg = &c->m->cfg;
    const size_t ub = (size_t)c->p.n_ubatch, d = (size_t)cfg->n_embd, di = (size_t)cfg->ssm_d_inner;
    const size_t cd = di + 2 * (size_t)cfg->ssm_n_group * (size_t)cfg->ssm_d_state;
    const size_t k = (size_t)cfg->n_expert_used, F = (size_t)cfg->n_ff_exp;
    N->dip = (int64_t)(di + cd + (size_t)cfg->ssm_n_head);
    N->ff_w = HMOE_MAX((int64_t)cfg->n_ff_shexp, (int64_t)cfg->n_ff_dense);
    N->m = cfg->moe_latent ? cfg->moe_latent : (int64_t)d;
    const size_t ff = (size_t)N->ff_w, m = (size_t)N->m;
    uintptr_t p = base;
#define PIECE(field, type, bytes)  \
    do {                           \
        N->field = (type)p;        \
        p += align256(bytes);      \
    } while (0)
    PIECE(proj, float *, ub * (size_t)N->dip * 4);
    PIECE(y, float *, ub * cd * 4);
    PIECE(o, float *, ub * di * 4);
    PIECE(o16, uint16_t *, ub * di * 2);
    PIECE(oq, void *, ub * q8_row((int64_t)di));
    PIECE(ff, float *, ub * ff * 4);
    PIECE(ff16, uint16_t *, ub * ff * 2);
    PIECE(ffq, void *, ub * q8_row((int64_t)ff));
    PIECE(lat, float *, ub * m * 4);
    PIECE(lat16, uint16_t *, ub * m * 2);
    PIECE(latq, void *, ub * q8_row((int64_t)m));
    PIECE(lat_out, float *, ub * m * 4);
    PIECE(zeros, float *, ub * m * 4);
    PIECE(ez, float *, ub * k * F * 4);
    PIECE(ez16, uint16_t *, ub * k * F * 2);
    PIECE(ezq, void *, ub * k * q8_row((int64_t)F));
#undef PIECE
    return (size_t)(p - base);
}

/* Streamed prefill of the RAM layers: the plan's staging room (gpu_init.c: g->stream_bufs buffers
 * of the widest layer's stacks) when some layer is in RAM. The RAM layers' expert ranges are
 * page-locked first (sched.h); with at least one locked, each buffer is allocated and the next
 * layer's stacks copy ahead on a copy stream; with none (refused, HMOE_PIN=0), one buffer and
 * every copy on the compute stream when its layer runs. */
static enum hmoe_status stage_init(struct hmoe_ctx *c, struct hmoe_gpu_nem *N, struct hmoe_err *err) {
    struct hmoe_gpu *g = c->gpu;
    const struct hmoe_model *m = c->m;
    const int n_layer = m->cfg.n_layer;
    N->stage_layer[0] = N->stage_layer[1] = -1;
    if (!g->bytes_stream || g->stream_bufs < 1 || g->stream_bufs > 2) return HMOE_OK;
    bool *want = calloc((size_t)n_layer, sizeof *want);
    if (!want) return HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory");
    int n_ram = 0;
    for (int il = 0; il < n_layer; il++) {
        want[il] = m->w.layers[il].moe.up.data && !g->L[il].resident;
        n_ram += want[il];
    }
    const struct hmoe_sched_pin_params pp = {.cu = g->cu, .moe = g->moe, .want = want, .n_layer = n_layer,
                                             .n_threads = c->p.n_threads, .file_base = m->gguf->base,
                                             .file_size = m->gguf->file_size, .file_in_ram = m->gguf->in_ram};
    enum hmoe_status st = hmoe_sched_pin_layers(&pp, &N->pinned, err);
    free(want);
    if (st) return st;
    struct hmoe_sched_pin_info pi;
    hmoe_sched_pinned_info(N->pinned, &pi);
    const size_t per = (size_t)(g->bytes_stream / (uint64_t)g->stream_bufs);
    N->n_stage = pi.layers > 0 ? g->stream_bufs : 1;
    for (int b = 0; b < N->n_stage && !st; b++) st = hmoe_cuda_buf_alloc(g->cu, per, &N->stage[b], err);
    if (!st && pi.layers > 0) {
        st = hmoe_cuda_stream_create(&N->copy_stream, err);
        for (int b = 0; b < N->n_stage && !st; b++) {
            st = hmoe_cuda_event_create(&N->ev_copied[b], err);
            if (!st) st = hmoe_cuda_event_create(&N->ev_free[b], err);
        }
    }
    const double MiB = 1048576.0;
    HMOE_INFO("nemotron GPU: prefill streaming of %d RAM layers: %d staging buffer%s of %.0f MiB, experts page-locked "
              "for %d of %d layers (%.0f MiB: read %.1f s, locked %.1f s): %s%s%s",
              n_ram, N->n_stage, N->n_stage > 1 ? "s" : "", (double)per / MiB, pi.layers, pi.tried,
              (double)pi.bytes / MiB, pi.read_s, pi.pin_s,
              pi.layers ? "the next layer's stacks copy while this one computes"
                        : "copies through the driver's staging on the compute stream",
              pi.notes[0] ? "; note: " : "", pi.notes);
    return st;
}

static size_t state_bytes(const struct hmoe_rec_state *r) {
    return (size_t)r->n_rec * (r->conv_floats + r->ssm_floats) * sizeof(float);
}

uint64_t hmoe_gpu_nem_bytes(const struct hmoe_ctx *c) {
    struct hmoe_ctx *cc = (struct hmoe_ctx *)c; /* sizing passes write nothing */
    uint64_t total = 0;
    for (int il = 0; il < c->m->cfg.n_layer; il++) {
        size_t b = 0;
        struct hmoe_err e = {0};
        layer_weights(cc, il, NULL, &b, &e);
        total += b;
    }
    struct hmoe_gpu_nem tmp;
    return total + align256(state_bytes(c->rs.rec)) + act_layout(cc, &tmp, 0);
}

enum hmoe_status hmoe_gpu_nem_init(struct hmoe_ctx *c, struct hmoe_err *err) {
    struct hmoe_gpu *g = c->gpu;
    struct hmoe_rec_state *r = c->rs.rec;
    const int n_layer = c->m->cfg.n_layer;
    /* Layers whose experts stay in RAM run them on CPU threads with synchronous copies around them
     * (nemotron_h_gpu.c), which a graph cannot hold: such a context decodes eagerly. */
    for (int il = 0; il < n_layer; il++)
        if (c->m->w.layers[il].moe.up.data && !g->L[il].resident) {
            if (!c->rs.moe)
                return HMOE_RAISE(err, HMOE_ERR_INTERNAL, "layer %d: experts in RAM but no CPU expert scheduler", il);
            g->no_graph = true;
        }
    struct hmoe_gpu_nem *N = calloc(1, sizeof *N);
    if (!N) return HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory");
    g->arch_state = N;
    N->rec = r;
    N->L = calloc((size_t)n_layer, sizeof *N->L);
    if (!N->L) return HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory");
    enum hmoe_status st = HMOE_OK;
    for (int il = 0; il < n_layer && !st; il++) {
        size_t b = 0;
        if ((st = layer_weights(c, il, NULL, &b, err))) break;
        if (b == 0) continue;
        if ((st = hmoe_cuda_buf_alloc(g->cu, b, &N->L[il].buf, err))) break;
        st = layer_weights(c, il, N->L[il].buf.ptr, &b, err);
        N->weight_bytes += b;
    }
    if (st) return st;
    /* The live recurrent state, zero = the start of a sequence (§7). */
    if ((st = hmoe_cuda_buf_alloc(g->cu, align256(state_bytes(r)), &N->state, err)) ||
        (st = hmoe_cuda_memset(g->cu, N->state.ptr, 0, N->state.bytes, err)))
        return st;
    float *conv = N->state.ptr, *ssm = conv + (size_t)r->n_rec * r->conv_floats;
    for (int il = 0; il < n_layer; il++)
        if (r->slot[il] >= 0) {
            N->L[il].conv_state = conv + (size_t)r->slot[il] * r->conv_floats;
            N->L[il].ssm = ssm + (size_t)r->slot[il] * r->ssm_floats;
        }
    hmoe_rec_attach_device(r, g->cu, conv, ssm);
    if ((st = stage_init(c, N, err))) return st;
    if ((st = hmoe_cuda_buf_alloc(g->cu, act_layout(c, N, 0), &N->act, err))) return st;
    act_layout(c, N, (uintptr_t)N->act.ptr);
    return hmoe_cuda_memset(g->cu, N->act.ptr, 0, N->act.bytes, err);
}

void hmoe_gpu_nem_free(struct hmoe_gpu *g, int n_layer) {
    struct hmoe_gpu_nem *N = g->arch_state;
    if (!N) return;
    hmoe_rec_attach_device(N->rec, NULL, NULL, NULL); /* the CPU owns the state again */
    for (int i = 0; N->L && i < n_layer; i++) hmoe_cuda_buf_free(g->cu, &N->L[i].buf);
    free(N->L);
    hmoe_cuda_buf_free(g->cu, &N->state);
    hmoe_cuda_buf_free(g->cu, &N->act);
    /* no copy may still read the page-locked ranges or write the buffers when they go */
    if (N->copy_stream) hmoe_cuda_stream_sync(N->copy_stream, NULL);
    hmoe_cuda_stream_sync(hmoe_cuda_ctx_stream(g->cu), NULL);
    for (int b = 0; b < 2; b++) {
        hmoe_cuda_event_destroy(N->ev_copied[b]);
        hmoe_cuda_event_destroy(N->ev_free[b]);
        hmoe_cuda_buf_free(g->cu, &N->stage[b]);
    }
    hmoe_cuda_stream_destroy(N->copy_stream);
    hmoe_sched_unpin_layers(N->pinned);
    free(N);
    g->arch_state = NULL;
}

/* The VRAM report's line for the mixers, FFN weights and recurrent state. */
void hmoe_gpu_nem_report(const struct hmoe_gpu *g, char *buf, size_t cap) {
    const struct hmoe_gpu_nem *N = g->arch_state;
    const double MiB = 1048576.0;
    int o = snprintf(buf, cap, "  Mamba-2 + shared / dense FFN + latent %7.1f MiB, recurrent state %.1f MiB, mixer buffers %.1f MiB\n",
                     (double)N->weight_bytes / MiB, (double)N->state.bytes / MiB, (double)N->act.bytes / MiB);
    if (N->n_stage && o > 0 && (size_t)o < cap) {
        struct hmoe_sched_pin_info pi;
        hmoe_sched_pinned_info(N->pinned, &pi);
        o += snprintf(buf + o, cap - (size_t)o,
                      "  prefill streaming: %d staging buffer%s of %.1f MiB, %s; page-locked experts of %d of %d RAM "
                      "layers, %.1f MiB pinned; %llu layer steps streamed, %llu layer copies (%llu ahead on the copy "
                      "stream; a buffer keeps its layer across micro-batches), %.1f MiB copied\n",
                      N->n_stage, N->n_stage > 1 ? "s" : "", (double)N->stage[0].bytes / MiB,
                      N->copy_stream ? "copies overlap compute" : "copies on the compute stream", pi.layers, pi.tried,
                      (double)pi.bytes / MiB, (unsigned long long)N->n_staged, (unsigned long long)N->n_copies,
                      (unsigned long long)N->n_staged_async, (double)N->bytes_staged / MiB);
        if (pi.notes[0] && o > 0 && (size_t)o < cap) o += snprintf(buf + o, cap - (size_t)o, "  note: %s\n", pi.notes);
    }
    if (N->n_cpu_calls && o > 0 && (size_t)o < cap) {
        const double per = 1e3 / (double)N->n_cpu_calls;
        snprintf(buf + o, cap - (size_t)o,
                 "  experts in RAM: %llu layer calls (%.1f tokens each); ms per call: waiting for the GPU + download %.3f, "
                 "CPU threads %.3f, upload %.3f\n",
                 (unsigned long long)N->n_cpu_calls, (double)N->n_cpu_tokens / (double)N->n_cpu_calls, N->t_wait * per,
                 N->t_cpu * per, N->t_up * per);
    }
}
