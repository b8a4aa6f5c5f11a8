/* gpu_test_graph.c — the decode kernels are CUDA-graph capturable (cuda.h contract: no host
 * syncs, allocations or host reads inside launchers; per-token data through device memory).
 *
 * One Qwen3-MoE decode layer (qwen3moe.md §3-§4, tiny shapes) is launched eagerly, then the same
 * launch sequence is captured into a graph and replayed. The replay must reproduce the eager
 * result bit for bit (the kernels are deterministic), also after the position is changed in
 * device memory between replays (the graph reads it at run time). The layer's numerics are
 * covered by the other gpu_test_* programs; this test pins capture and replay.
 */
#include "harness.h"
#include "gpu_util.h"

enum { DM = 256, H = 8, HKV = 2, HD = 64, E = 16, K = 4, F = 256, NCTX = 64 }; /* F: whole Q6_K blocks */

struct layer {
    float *x0, *x, *hf, *q, *k, *v, *o, *logits, *z, *wts, *nw, *qn, *kn, *router;
    void *hq, *oq, *zq, *wq, *wk, *wv, *wo, *gate, *up, *down, *scratch;
    int32_t *pos, *ids;
    unsigned int *counter;
    struct hmoe_cuda_kv kv;
};

static void *rand_weights(enum hmoe_type t, int64_t rows, int64_t cols) {
    if (cols % hmoe_type_info[t].blck) {
        printf("test setup ... FAIL: %lld columns are not whole %s blocks\n", (long long)cols, hmoe_type_name(t));
        exit(1);
    }
    size_t b = hmoe_row_bytes(t, cols) * (size_t)rows;
    uint8_t *h = malloc(b);
    rand_blocks(t, h, rows * cols);
    void *d = dup_dev(h, b);
    free(h);
    return d;
}

static float *rand_f32(int64_t n, float mul, float add) {
    float *h = malloc((size_t)n * 4);
    for (int64_t i = 0; i < n; i++) h[i] = add + mul * rng_normal();
    float *d = dup_dev(h, (size_t)n * 4);
    free(h);
    return d;
}

/* The layer's launches, in order; every one goes to g_stream. */
static enum hmoe_status run_layer(struct layer *L, struct hmoe_err *err) {
    enum hmoe_status st;
    const size_t qd = hmoe_cuda_q8_1_row_bytes(DM), qo = hmoe_cuda_q8_1_row_bytes(H * HD), qf = hmoe_cuda_q8_1_row_bytes(F);
#define TRY(call) \
    if ((st = (call)) != HMOE_OK) return st
    TRY(hmoe_cuda_copy(L->x, L->x0, DM * 4, g_stream, err));
    struct hmoe_cuda_rmsnorm_args rn = {.x = L->x, .x_stride = DM, .w = L->nw, .eps = 1e-6f, .nrows = 1, .n = DM, .out_q8_1 = L->hq};
    TRY(hmoe_cuda_rmsnorm(&rn, g_stream, err));
    struct hmoe_cuda_mmv_args m = {.type = HMOE_TYPE_Q4_K, .w = L->wq, .row_bytes = hmoe_row_bytes(HMOE_TYPE_Q4_K, DM),
                                   .nrows = H * HD, .ncols = DM, .x = L->hq, .x_stride_bytes = qd, .ntok = 1, .y = L->q, .y_stride = H * HD};
    TRY(hmoe_cuda_mmv(&m, g_stream, err));
    m.w = L->wk, m.nrows = HKV * HD, m.y = L->k, m.y_stride = HKV * HD;
    TRY(hmoe_cuda_mmv(&m, g_stream, err));
    m.type = HMOE_TYPE_Q6_K, m.w = L->wv, m.row_bytes = hmoe_row_bytes(HMOE_TYPE_Q6_K, DM), m.y = L->v;
    TRY(hmoe_cuda_mmv(&m, g_stream, err));
    struct hmoe_cuda_qkv_args qa = {.q = L->q, .k = L->k, .v = L->v, .q_stride = H * HD, .kv_stride = HKV * HD, .ntok = 1,
                                    .n_head = H, .n_head_kv = HKV, .head_dim = HD, .q_norm = L->qn, .k_norm = L->kn,
                                    .eps = 1e-6f, .pos = L->pos,
                                    .rope = {.n_rot = HD, .freq_base = 1e6f, .freq_scale = 1.0f, .mscale = 1.0f}, .kv = L->kv};
    TRY(hmoe_cuda_qk_norm_rope_store(&qa, g_stream, err));
    TRY(hmoe_cuda_attn_decode(L->q, &L->kv, L->pos, H, 0.125f, 8, L->scratch, L->o, L->oq, g_stream, err));
    struct hmoe_cuda_mmv_args mo = {.type = HMOE_TYPE_Q4_K, .w = L->wo, .row_bytes = hmoe_row_bytes(HMOE_TYPE_Q4_K, H * HD),
                                    .nrows = DM, .ncols = H * HD, .x = L->oq, .x_stride_bytes = qo, .ntok = 1, .y = L->x,
                                    .y_stride = DM, .add = L->x, .add_stride = DM};
    TRY(hmoe_cuda_mmv(&mo, g_stream, err));
    struct hmoe_cuda_rmsnorm_args rn2 = {.x = L->x, .x_stride = DM, .w = L->nw, .eps = 1e-6f, .nrows = 1, .n = DM, .out_f32 = L->hf,
                                         .out_q8_1 = L->hq};
    TRY(hmoe_cuda_rmsnorm(&rn2, g_stream, err));
    TRY(hmoe_cuda_moe_router_topk(L->router, NULL, HMOE_CUDA_GATING_SOFTMAX, L->hf, DM, E, K, L->logits, L->ids, L->wts, L->counter, g_stream, err));
    const size_t gb = hmoe_row_bytes(HMOE_TYPE_Q4_K, DM), db = hmoe_row_bytes(HMOE_TYPE_Q6_K, F);
    struct hmoe_cuda_experts g = {.type = HMOE_TYPE_Q4_K, .w = L->gate, .row_bytes = gb, .expert_stride_bytes = gb * F,
                                  .nrows = F, .ncols = DM, .n_expert = E};
    struct hmoe_cuda_experts u = g;
    u.w = L->up;
    struct hmoe_cuda_experts dn = {.type = HMOE_TYPE_Q6_K, .w = L->down, .row_bytes = db, .expert_stride_bytes = db * DM,
                                   .nrows = DM, .ncols = F, .n_expert = E};
    TRY(hmoe_cuda_moe_gate_up(&g, &u, L->ids, K, K, L->hq, qd, L->z, F, g_stream, err));
    TRY(hmoe_cuda_quantize_q8_1(L->z, F, K, F, L->zq, g_stream, err));
    TRY(hmoe_cuda_moe_down(&dn, L->ids, L->wts, 1, K, L->zq, qf, L->x, DM, g_stream, err));
#undef TRY
    return HMOE_OK;
}

int main(void) {
    if (!gpu_open_or_skip("gpu_test_graph")) return t_summary();
    rng_seed(5150);
    struct layer L;
    L.x0 = rand_f32(DM, 1.0f, 0.0f);
    L.x = dalloc(DM * 4), L.hf = dalloc(DM * 4), L.q = dalloc(H * HD * 4), L.k = dalloc(HKV * HD * 4), L.v = dalloc(HKV * HD * 4);
    L.o = dalloc(H * HD * 4), L.logits = dalloc(E * 4), L.z = dalloc(K * F * 4), L.wts = dalloc(K * 4), L.ids = dalloc(K * 4);
    L.nw = rand_f32(DM, 0.1f, 1.0f), L.qn = rand_f32(HD, 0.1f, 1.0f), L.kn = rand_f32(HD, 0.1f, 1.0f);
    L.router = rand_f32((int64_t)E * DM, 1.0f, 0.0f);
    L.hq = dalloc(hmoe_cuda_q8_1_row_bytes(DM)), L.oq = dalloc(hmoe_cuda_q8_1_row_bytes(H * HD)), L.zq = dalloc(K * hmoe_cuda_q8_1_row_bytes(F));
    L.wq = rand_weights(HMOE_TYPE_Q4_K, H * HD, DM), L.wk = rand_weights(HMOE_TYPE_Q4_K, HKV * HD, DM);
    L.wv = rand_weights(HMOE_TYPE_Q6_K, HKV * HD, DM), L.wo = rand_weights(HMOE_TYPE_Q4_K, DM, H * HD);
    L.gate = rand_weights(HMOE_TYPE_Q4_K, (int64_t)E * F, DM), L.up = rand_weights(HMOE_TYPE_Q4_K, (int64_t)E * F, DM);
    L.down = rand_weights(HMOE_TYPE_Q6_K, (int64_t)E * DM, F);
    L.scratch = dalloc(hmoe_cuda_attn_decode_scratch_bytes(H, HD, 8));
    L.pos = dalloc(4);
    L.counter = dalloc(16);
    hmoe_cuda_memset(g_ctx, L.counter, 0, 16, &(struct hmoe_err){0});
    const size_t kvb = hmoe_cuda_kv_bytes(HMOE_TYPE_F16, NCTX, HKV, HD);
    uint16_t *kvh = malloc(kvb);
    for (size_t i = 0; i < kvb / 2; i++) kvh[i] = hmoe_f32_to_fp16(rng_normal());
    L.kv = (struct hmoe_cuda_kv){.type_k = HMOE_TYPE_F16, .type_v = HMOE_TYPE_F16, .k = dup_dev(kvh, kvb), .v = dup_dev(kvh, kvb), .n_ctx = NCTX,
                                 .n_head_kv = HKV, .head_dim = HD};
    float eager[DM], replay[DM];
    struct hmoe_err err = {0};
    struct hmoe_cuda_graph *gr = NULL;
    const char *name = "decode layer captured into a CUDA graph";
    int32_t pos = 5;
    to_dev(L.pos, &pos, 4);
    if (!launched(run_layer(&L, &err), &err, "decode layer, eager") || !from_dev(eager, L.x, sizeof eager, name)) goto out;
    if (!launched(hmoe_cuda_graph_capture_begin(g_ctx, &err), &err, name)) goto out;
    enum hmoe_status st = run_layer(&L, &err);
    struct hmoe_err err2 = {0};
    enum hmoe_status st2 = hmoe_cuda_graph_capture_end(g_ctx, &gr, &err2);
    if (!launched(st, &err, name) || !launched(st2, &err2, name)) goto out;
    t_check(1, name, "%s", "");
    for (int rep = 0; rep < 2; rep++) {
        char nm[120];
        pos = rep == 0 ? 5 : 9;
        snprintf(nm, sizeof nm, "graph replay at position %d == eager launches, bit for bit", pos);
        to_dev(L.pos, &pos, 4);
        if (rep == 1 && (!launched(run_layer(&L, &err), &err, nm) || !from_dev(eager, L.x, sizeof eager, nm))) break;
        if (!launched(hmoe_cuda_graph_launch(g_ctx, gr, &err), &err, nm) || !from_dev(replay, L.x, sizeof replay, nm)) break;
        int bad = -1;
        for (int i = 0; i < DM && bad < 0; i++)
            if (memcmp(&eager[i], &replay[i], 4) != 0 || isnan(eager[i])) bad = i;
        t_check(bad < 0, nm, "x[%d]: replay %.9g, eager %.9g", bad, bad >= 0 ? replay[bad] : 0.0, bad >= 0 ? eager[bad] : 0.0);
    }
out:
    hmoe_cuda_graph_free(gr);
    free(kvh);
    gpu_close();
    return t_summary();
}
