/* bench_cuda_decode.c — one synthetic Qwen3-30B-A3B decode step (qwen3moe.md §3-§4, §8, §9) run
 * with this library's kernels only, captured into one CUDA graph: an estimate of tg tok/s and of
 * the fraction of the HBM roofline, before the real forward pass exists (follow-up task).
 *
 * Build: make bench (a CUDA build).
 * Run: ./build/bench/bench_cuda_decode [--mix iq2_xxs] [--pos N] [--router-split] [--mode unfused|fused] [--quick]
 * --quick: no per-class ablation. Modes (both by default): "fused" is the forward pass's
 * single-token step (qk-norm + rope + KV store + attention in one launch, norm + router + top-k in
 * one, then gate/up, quantize, down as three launches); "unfused" is the launch-per-operation step
 * below (the step of layers the fused launchers do not take).
 * Per layer (11-12 launches): rmsnorm->q8_1, one q|k|v matvec (q, k, v weights back to back; v
 * separate where its type differs), qk-norm+rope+KV store, flash-decoding attention writing q8_1,
 * o matvec + residual, rmsnorm->f32+q8_1, router + top-k (one launch), fused gate+up of the 8
 * experts, quantize, down + weights + residual; then the final norm and the LM head. Type mix: Q4_K_M (attn_v / ffn_down Q6_K in the "more bits" layers, §9.1) or the IQ2_XXS
 * mix of baselines.md (IQ2_XXS, IQ3_XXS for v/down in more-bits layers, Q6_K output).
 * Weights are random bytes (speed does not depend on them); 48 distinct attention weight sets
 * and 16 distinct expert sets (5+ GB: the 60 MB L2 cannot serve a later layer). Reported:
 * median graph time, tok/s, bytes read per token (weights + KV) and % of the copy roofline, then
 * the share of each kernel class (the step captured again without that class).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hmoe/cuda.h"
#include "hmoe/types.h"

enum { L = 48, DM = 2048, NH = 32, NKV = 4, HD = 128, NE = 128, NK = 8, FF = 768, NV = 151936, NSET = 16, NSPLIT = 64 };

static struct hmoe_cuda_ctx *ctx;
static void *stream;
static uint64_t g_seed = 1;

static void *dmalloc_fill(size_t bytes, int fill) {
    struct hmoe_cuda_buf b;
    struct hmoe_err e = {0};
    bytes = (bytes + 15) / 16 * 16;
    if (hmoe_cuda_buf_alloc(ctx, bytes, &b, &e) != HMOE_OK) {
        fprintf(stderr, "%s\n", e.msg);
        exit(1);
    }
    if (fill) hmoe_cuda_fill_random(b.ptr, bytes, g_seed++, stream, &e);
    return b.ptr; /* freed with the context at exit */
}

static void check(enum hmoe_status st, const struct hmoe_err *e, const char *what) {
    if (st != HMOE_OK) {
        fprintf(stderr, "%s: %s\n", what, e->msg);
        exit(1);
    }
}

static int more_bits(int i) { return i < L / 8 || i >= 7 * L / 8 || (i - L / 8) % 3 == 2; } /* qwen3moe.md §9.1 */

struct layer {
    enum hmoe_type tq, tv, tgu, tdn;
    void *wq, *wk, *wv, *wo;
    float *router, *norm1, *norm2, *qn, *kn;
    struct hmoe_cuda_experts gate, up, down;
    struct hmoe_cuda_kv kv;
};

int main(int argc, char **argv) {
    int iq2 = 0, pos = 64, router_split = 0, mode_only = -1, quick = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--router-split")) router_split = 1;
        else if (!strcmp(argv[i], "--mode") && i + 1 < argc) {
            ++i;
            mode_only = !strcmp(argv[i], "unfused") ? 0 : !strcmp(argv[i], "fused") ? 1 : -2;
        }
        else if (!strcmp(argv[i], "--quick")) quick = 1;
        else if (!strcmp(argv[i], "--mix") && i + 1 < argc) iq2 = !strcmp(argv[++i], "iq2_xxs");
        else if (!strcmp(argv[i], "--pos") && i + 1 < argc) pos = atoi(argv[++i]);
    }
    struct hmoe_err err = {0};
    if (!hmoe_cuda_available() || hmoe_cuda_ctx_init(&ctx, 0, &err) != HMOE_OK) {
        printf("bench_cuda_decode: no CUDA device (%s)\n", err.msg);
        return 0;
    }
    stream = hmoe_cuda_ctx_stream(ctx);
    const int n_ctx = pos + 256;

    /* roofline */
    double roof;
    {
        const size_t cb = (size_t)1 << 30;
        void *a = dmalloc_fill(cb, 1), *b = dmalloc_fill(cb, 0);
        double t[5];
        for (int i = -1; i < 5; i++) {
            double ms;
            check(hmoe_cuda_timer_start(ctx, &err), &err, "timer");
            hmoe_cuda_copy(b, a, cb, stream, &err);
            check(hmoe_cuda_timer_stop(ctx, &ms, &err), &err, "timer");
            if (i >= 0) t[i] = ms;
        }
        double best = t[0];
        for (int i = 1; i < 5; i++) best = t[i] < best ? t[i] : best;
        roof = 2.0 * cb / (best * 1e-3) / 1e9;
    }

    /* weights */
    static struct layer ly[L];
    struct hmoe_cuda_experts sets_gu[NSET][2], sets_dn[NSET][2]; /* [set][normal/more-bits down type] */
    const enum hmoe_type t_attn = iq2 ? HMOE_TYPE_IQ2_XXS : HMOE_TYPE_Q4_K;
    const enum hmoe_type t_more = iq2 ? HMOE_TYPE_IQ3_XXS : HMOE_TYPE_Q6_K;
    const enum hmoe_type t_dn_normal = iq2 ? HMOE_TYPE_IQ2_XXS : HMOE_TYPE_Q4_K;
    const size_t gu_rb = hmoe_row_bytes(t_attn, DM);
    for (int s = 0; s < NSET; s++) {
        for (int m = 0; m < 2; m++) {
            sets_gu[s][m] = (struct hmoe_cuda_experts){.type = t_attn, .w = dmalloc_fill(gu_rb * FF * NE, 1), .row_bytes = gu_rb,
                                                       .expert_stride_bytes = gu_rb * FF, .nrows = FF, .ncols = DM, .n_expert = NE};
            const enum hmoe_type td = m ? t_more : t_dn_normal;
            const size_t rb = hmoe_row_bytes(td, FF);
            sets_dn[s][m] = (struct hmoe_cuda_experts){.type = td, .w = dmalloc_fill(rb * DM * NE, 1), .row_bytes = rb,
                                                       .expert_stride_bytes = rb * DM, .nrows = DM, .ncols = FF, .n_expert = NE};
        }
    }
    double bytes_tok = 0;
    for (int i = 0; i < L; i++) {
        struct layer *y = &ly[i];
        y->tq = t_attn;
        y->tv = more_bits(i) ? t_more : (iq2 ? HMOE_TYPE_IQ2_XXS : HMOE_TYPE_Q4_K);
        /* q, k (and v when it has the same type) stored back to back: one matvec launch covers them */
        const size_t rbq = hmoe_row_bytes(y->tq, DM);
        y->wq = dmalloc_fill(rbq * (NH + 2 * NKV) * HD, 1);
        y->wk = (uint8_t *)y->wq + rbq * NH * HD;
        y->wv = y->tv == y->tq ? (uint8_t *)y->wk + rbq * NKV * HD : dmalloc_fill(hmoe_row_bytes(y->tv, DM) * NKV * HD, 1);
        y->wo = dmalloc_fill(hmoe_row_bytes(y->tq, NH * HD) * DM, 1);
        y->router = dmalloc_fill((size_t)NE * DM * 4, 1);
        y->norm1 = dmalloc_fill(DM * 4, 1), y->norm2 = dmalloc_fill(DM * 4, 1);
        y->qn = dmalloc_fill(HD * 4, 1), y->kn = dmalloc_fill(HD * 4, 1);
        y->gate = sets_gu[i % NSET][0];
        y->up = sets_gu[i % NSET][1];
        y->down = sets_dn[i % NSET][more_bits(i)];
        const size_t kvb = hmoe_cuda_kv_bytes(HMOE_TYPE_F16, n_ctx, NKV, HD);
        y->kv = (struct hmoe_cuda_kv){.type_k = HMOE_TYPE_F16, .type_v = HMOE_TYPE_F16, .k = dmalloc_fill(kvb, 1), .v = dmalloc_fill(kvb, 1), .n_ctx = n_ctx,
                                      .n_head_kv = NKV, .head_dim = HD};
        bytes_tok += (double)hmoe_row_bytes(y->tq, DM) * (NH + NKV) * HD + (double)hmoe_row_bytes(y->tv, DM) * NKV * HD +
                     (double)hmoe_row_bytes(y->tq, NH * HD) * DM + (double)NE * DM * 4 + 2.0 * DM * 4 +
                     NK * (2.0 * gu_rb * FF + (double)y->down.row_bytes * DM) + 2.0 * (pos + 1) * NKV * HD * 2;
    }
    void *w_out = dmalloc_fill(hmoe_row_bytes(HMOE_TYPE_Q6_K, DM) * NV, 1);
    float *out_norm = dmalloc_fill(DM * 4, 1);
    bytes_tok += (double)hmoe_row_bytes(HMOE_TYPE_Q6_K, DM) * NV;

    /* activations */
    const size_t qd = hmoe_cuda_q8_1_row_bytes(DM), qo = hmoe_cuda_q8_1_row_bytes(NH * HD), qf = hmoe_cuda_q8_1_row_bytes(FF);
    float *x = dmalloc_fill(DM * 4, 0), *hf = dmalloc_fill(DM * 4, 0), *q = dmalloc_fill((NH + 2 * NKV) * HD * 4, 0);
    float *k = q + NH * HD, *v = k + NKV * HD; /* one output row for the fused q|k|v matvec */
    float *logits = dmalloc_fill(NE * 4, 0), *wts = dmalloc_fill(NK * 4, 0), *z = dmalloc_fill(NK * FF * 4, 0);
    float *lm = dmalloc_fill((size_t)NV * 4, 0);
    void *hq = dmalloc_fill(qd, 0), *oq = dmalloc_fill(qo, 0), *zq = dmalloc_fill(NK * qf, 0);
    int32_t *ids = dmalloc_fill(NK * 4, 0), *d_pos = dmalloc_fill(4, 0);
    unsigned int *counter = dmalloc_fill(1024, 0);
    check(hmoe_cuda_memset(ctx, counter, 0, 1024, &err), &err, "memset");
    void *scratch = dmalloc_fill(hmoe_cuda_attn_decode_scratch_bytes(NH, HD, NSPLIT), 0);
    check(hmoe_cuda_memset(ctx, x, 0, DM * 4, &err), &err, "memset");
    check(hmoe_cuda_upload(ctx, d_pos, &pos, 4, &err), &err, "upload");
    check(hmoe_cuda_sync(ctx, &err), &err, "fill");

    /* capture the step; `skip` drops one class of launches (the ablation below) */
    static const char *cls_name[] = {"rmsnorm x2 (+final)", "q/k/v matvecs", "qk-norm+rope+KV store", "attention (+q8_1 out)",
                                     "o matvec + residual", "router (+ top-k if fused)", "top-k", "experts gate+up", "quantize z",
                                     "experts down + residual", "LM head"};
    enum { NCLS = 11 };
    if (mode_only == -2) {
        fprintf(stderr, "bench_cuda_decode: --mode takes unfused or fused\n");
        return 2;
    }
    static const char *mode_name[] = {"unfused", "fused"};
    for (int mode = 0; mode < 2; mode++) {
    if (mode_only >= 0 && mode != mode_only) continue;
    const int fused = mode == 1;
    double t_full = 0.0;
    for (int skip = -1; skip < (quick ? 0 : NCLS); skip++) {
        if (skip == 6 && (!router_split || fused)) continue; /* top-k is fused into the router launch */
        if (skip == 2 && fused) continue; /* qk-norm+rope in attention */
        struct hmoe_cuda_graph *g = NULL;
        check(hmoe_cuda_graph_capture_begin(ctx, &err), &err, "capture");
        int launches = 0;
#define GO(c, call) (c == skip ? 0 : (check((call), &err, #call), launches++))
        for (int i = 0; i < L; i++) {
            struct layer *y = &ly[i];
            struct hmoe_cuda_rmsnorm_args n1 = {.x = x, .x_stride = DM, .w = y->norm1, .eps = 1e-6f, .nrows = 1, .n = DM, .out_q8_1 = hq};
            GO(0, hmoe_cuda_rmsnorm(&n1, stream, &err));
            const int fused_v = y->tv == y->tq;
            struct hmoe_cuda_mmv_args m = {.type = y->tq, .w = y->wq, .row_bytes = hmoe_row_bytes(y->tq, DM),
                                           .nrows = (NH + (fused_v ? 2 : 1) * NKV) * HD, .ncols = DM, .x = hq, .x_stride_bytes = qd,
                                           .ntok = 1, .y = q, .y_stride = (NH + 2 * NKV) * HD};
            GO(1, hmoe_cuda_mmv(&m, stream, &err));
            if (!fused_v) {
                m.type = y->tv, m.w = y->wv, m.row_bytes = hmoe_row_bytes(y->tv, DM), m.nrows = NKV * HD, m.y = v;
                GO(1, hmoe_cuda_mmv(&m, stream, &err));
            }
            struct hmoe_cuda_qkv_args qa = {.q = q, .k = k, .v = v, .q_stride = NH * HD, .kv_stride = NKV * HD, .ntok = 1, .n_head = NH,
                                            .n_head_kv = NKV, .head_dim = HD, .q_norm = y->qn, .k_norm = y->kn, .eps = 1e-6f, .pos = d_pos,
                                            .rope = {.n_rot = HD, .freq_base = 1e6f, .freq_scale = 1.0f, .mscale = 1.0f}, .kv = y->kv};
            if (fused)
                GO(3, hmoe_cuda_attn_decode_qkv(&qa, 0.08838834764831845f, 32, scratch, counter + 64, NULL, oq, stream, &err));
            else
                GO(2, hmoe_cuda_qk_norm_rope_store(&qa, stream, &err));
            if (!fused)
                GO(3, hmoe_cuda_attn_decode(q, &y->kv, d_pos, NH, 0.08838834764831845f, NSPLIT, scratch, NULL, oq, stream, &err));
            struct hmoe_cuda_mmv_args mo = {.type = y->tq, .w = y->wo, .row_bytes = hmoe_row_bytes(y->tq, NH * HD), .nrows = DM,
                                            .ncols = NH * HD, .x = oq, .x_stride_bytes = qo, .ntok = 1, .y = x, .y_stride = DM, .add = x,
                                            .add_stride = DM};
            GO(4, hmoe_cuda_mmv(&mo, stream, &err));
            if (fused) {
                const struct hmoe_cuda_router_norm_args ra = {.x = x, .norm_w = y->norm2, .eps = 1e-6f, .n = DM, .router = y->router,
                                                              .n_expert = NE, .k = NK, .logits = logits, .ids = ids, .weights = wts,
                                                              .counter = counter, .out_f32 = hf, .out_q8_1 = hq};
                GO(5, hmoe_cuda_moe_router_norm_topk(&ra, stream, &err));
                GO(7, hmoe_cuda_moe_gate_up(&y->gate, &y->up, ids, NK, NK, hq, qd, z, FF, stream, &err));
                GO(8, hmoe_cuda_quantize_q8_1(z, FF, NK, FF, zq, stream, &err));
                GO(9, hmoe_cuda_moe_down(&y->down, ids, wts, 1, NK, zq, qf, x, DM, stream, &err));
                continue;
            }
            struct hmoe_cuda_rmsnorm_args n2 = {.x = x, .x_stride = DM, .w = y->norm2, .eps = 1e-6f, .nrows = 1, .n = DM, .out_f32 = hf,
                                                .out_q8_1 = hq};
            GO(0, hmoe_cuda_rmsnorm(&n2, stream, &err));
            if (router_split) {
                struct hmoe_cuda_mmv_args mr = {.type = HMOE_TYPE_F32, .w = y->router, .row_bytes = DM * 4, .nrows = NE, .ncols = DM,
                                                .x = hf, .x_stride_bytes = DM * 4, .ntok = 1, .y = logits, .y_stride = NE};
                GO(5, hmoe_cuda_mmv(&mr, stream, &err));
                GO(6, hmoe_cuda_moe_topk(logits, NULL, HMOE_CUDA_GATING_SOFTMAX, 1, NE, NK, ids, wts, stream, &err));
            } else {
                GO(5, hmoe_cuda_moe_router_topk(y->router, NULL, HMOE_CUDA_GATING_SOFTMAX, hf, DM, NE, NK, logits, ids, wts, counter, stream, &err));
            }
            GO(7, hmoe_cuda_moe_gate_up(&y->gate, &y->up, ids, NK, NK, hq, qd, z, FF, stream, &err));
            GO(8, hmoe_cuda_quantize_q8_1(z, FF, NK, FF, zq, stream, &err));
            GO(9, hmoe_cuda_moe_down(&y->down, ids, wts, 1, NK, zq, qf, x, DM, stream, &err));
        }
        struct hmoe_cuda_rmsnorm_args nf = {.x = x, .x_stride = DM, .w = out_norm, .eps = 1e-6f, .nrows = 1, .n = DM, .out_q8_1 = hq};
        GO(0, hmoe_cuda_rmsnorm(&nf, stream, &err));
        struct hmoe_cuda_mmv_args ml = {.type = HMOE_TYPE_Q6_K, .w = w_out, .row_bytes = hmoe_row_bytes(HMOE_TYPE_Q6_K, DM), .nrows = NV,
                                        .ncols = DM, .x = hq, .x_stride_bytes = qd, .ntok = 1, .y = lm, .y_stride = NV};
        GO(10, hmoe_cuda_mmv(&ml, stream, &err));
#undef GO
        check(hmoe_cuda_graph_capture_end(ctx, &g, &err), &err, "capture end");
        double t[9];
        for (int r = -2; r < 9; r++) {
            double ms;
            check(hmoe_cuda_timer_start(ctx, &err), &err, "timer");
            check(hmoe_cuda_graph_launch(ctx, g, &err), &err, "graph launch");
            check(hmoe_cuda_timer_stop(ctx, &ms, &err), &err, "timer");
            if (r >= 0) t[r] = ms;
        }
        for (int i = 0; i < 9; i++)
            for (int j = i + 1; j < 9; j++)
                if (t[j] < t[i]) {
                    double tmp = t[i];
                    t[i] = t[j], t[j] = tmp;
                }
        const double ms = t[4];
        if (skip < 0) {
            t_full = ms;
            printf("[%s] synthetic Qwen3-30B-A3B decode step, %s mix, KV depth %d, router %s, one CUDA graph of %d launches:\n",
                   mode_name[mode], iq2 ? "IQ2_XXS" : "Q4_K_M", pos + 1, router_split ? "matvec + top-k" : "fused", launches);
            printf("  %.3f ms/token = %.0f tok/s; %.2f GB read per token -> %.0f GB/s = %.1f%% of the %.0f GB/s copy roofline\n", ms,
                   1e3 / ms, bytes_tok / 1e9, bytes_tok / (ms * 1e-3) / 1e9, 100.0 * bytes_tok / (ms * 1e-3) / 1e9 / roof, roof);
            printf("  time per token by kernel class (full step minus the step without that class):\n");
        } else {
            printf("    %-26s %7.1f us/token  (%5.1f us per layer)\n", cls_name[skip], (t_full - ms) * 1e3,
                   (t_full - ms) * 1e3 / (skip == 10 ? 1 : L));
        }
        hmoe_cuda_graph_free(g);
    }
    }
    hmoe_cuda_ctx_free(ctx);
    return 0;
}
