/* test_qwen35.c — qwen35moe (Gated DeltaNet + gated attention + shared expert) on the CPU
 * against llama.cpp: fixtures/moe-tiny/qwen35moe-tiny.gguf (d 64, layers 0-2 DeltaNet, 3
 * full attention, tiled v-head mapping, n_rot 16 of 64, 8 experts top-3 + shared expert)
 * with the 70 ids of tokens.txt, compared with *-prefill.f32 (one batch) and *-decode.f32
 * (one token per call): max |Δ| < 1e-3 and identical argmax at every position with an F32
 * KV cache (moe-tiny/README.md: the NumPy reference agrees to 2.6e-4). Then the same
 * reference through micro-batches of 1, 7, 16 and 70 tokens and the chunked DeltaNet form,
 * prefill-then-decode, rewinds (truncate with and without checkpoints), the chunked form
 * against the recurrence on random data, load errors and the architectures still
 * unsupported, and the synth presets (qwen35moe.md §3, §9).
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "hmoe/arch.h"
#include "hmoe/cpu.h"
#include "hmoe/synth.h"
#include "model/deltanet_impl.h"
#include "model_check.h"

enum { N_TOK = 70, N_VOCAB = 256 };

static int32_t ids[N_TOK];
static float *ref_prefill, *ref_decode;

/* Worst |Δ| over all positions and argmax flips of out[0..n_pos) vs ref rows from `first`. */
static double compare(const float *out, const float *ref, int n_pos, int *flips, int *worst_pos) {
    double worst = 0;
    *flips = 0;
    *worst_pos = -1;
    for (int p = 0; p < n_pos; p++) {
        struct mc_row r = mc_compare_row(out + (size_t)p * N_VOCAB, ref + (size_t)p * N_VOCAB, N_VOCAB);
        if (r.max_abs > worst) worst = r.max_abs, *worst_pos = p;
        if (mc_argmax(out + (size_t)p * N_VOCAB, N_VOCAB) != mc_argmax(ref + (size_t)p * N_VOCAB, N_VOCAB)) (*flips)++;
    }
    return worst;
}

static void check_rows(const char *name, enum hmoe_status st, const struct hmoe_err *err, const float *out,
                       const float *ref, int n_pos, double tol) {
    int flips = 0, wp = -1;
    double worst = st ? INFINITY : compare(out, ref, n_pos, &flips, &wp);
    char full[256];
    snprintf(full, sizeof full, "%s (max |d| %.2g)", name, worst);
    t_check(!st && worst < tol && flips == 0, full, "%s worst at position %d (limit %g), %d argmax flips",
            st ? err->msg : "", wp, tol, flips);
}

/* Two threads only where the threading is under test: on a busy 2-core machine the spin
 * barriers of tiny parallel loops cost seconds, and one thread gives the same results. */
static struct hmoe_ctx *new_ctx(struct hmoe_model *m, enum hmoe_type kv, int n_ubatch, int n_threads) {
    struct hmoe_ctx_params cp;
    hmoe_ctx_params_default(&cp);
    cp.n_ctx = 128;
    cp.type_k = cp.type_v = kv;
    cp.n_threads = n_threads;
    cp.n_ubatch = n_ubatch;
    struct hmoe_ctx *c = NULL;
    struct hmoe_err err = {0};
    if (hmoe_ctx_init(m, &cp, &c, &err)) t_check(0, "context", "%s", err.msg);
    return c;
}

/* Prefill and token-by-token decode vs llama.cpp for one KV type. */
static void vs_llamacpp(struct hmoe_model *m, enum hmoe_type kv, double tol) {
    struct hmoe_ctx *c = new_ctx(m, kv, 512, kv == HMOE_TYPE_F32 ? 2 : 1);
    if (!c) return;
    float *out = malloc(sizeof(float) * N_TOK * N_VOCAB);
    struct hmoe_err err = {0};
    char name[128];
    enum hmoe_status st = hmoe_ctx_decode(c, ids, N_TOK, 0, HMOE_LOGITS_ALL, out, &err);
    snprintf(name, sizeof name, "qwen35moe-tiny %s KV: 70-token prefill vs llama.cpp", hmoe_type_name(kv));
    check_rows(name, st, &err, out, ref_prefill, N_TOK, tol);
    hmoe_ctx_reset(c);
    st = HMOE_OK;
    for (int i = 0; i < N_TOK && !st; i++)
        st = hmoe_ctx_decode(c, &ids[i], 1, i, HMOE_LOGITS_LAST, out + (size_t)i * N_VOCAB, &err);
    snprintf(name, sizeof name, "qwen35moe-tiny %s KV: token-by-token decode vs llama.cpp", hmoe_type_name(kv));
    check_rows(name, st, &err, out, ref_decode, N_TOK, tol);
    hmoe_ctx_free(c);
    free(out);
}

/* The same prefill split into micro-batches of n_ubatch tokens (the DeltaNet state and the
 * conv window cross batch borders). */
static void ubatch_sizes(struct hmoe_model *m) {
    static const int sizes[] = {1, 7, 16, 70};
    float *out = malloc(sizeof(float) * N_TOK * N_VOCAB);
    for (size_t i = 0; i < HMOE_ARRAY_LEN(sizes); i++) {
        struct hmoe_ctx *c = new_ctx(m, HMOE_TYPE_F32, sizes[i], 1);
        if (!c) continue;
        struct hmoe_err err = {0};
        enum hmoe_status st = hmoe_ctx_decode(c, ids, N_TOK, 0, HMOE_LOGITS_ALL, out, &err);
        char name[128];
        snprintf(name, sizeof name, "qwen35moe-tiny: prefill in micro-batches of %d vs llama.cpp decode", sizes[i]);
        check_rows(name, st, &err, out, ref_decode, N_TOK, 1e-3);
        hmoe_ctx_free(c);
    }
    free(out);
}

/* Prefill 40 tokens, then decode the remaining 30 one by one: rows 39..69 vs the whole
 * prefill's rows; then rewinds: to 0 (reset), to n_past (no-op), to a checkpoint, and to a
 * position with no checkpoint (replayed from the remembered tokens). */
static void prefill_then_decode(struct hmoe_model *m) {
    struct hmoe_ctx *c = new_ctx(m, HMOE_TYPE_F32, 512, 1);
    if (!c) return;
    float *out = malloc(sizeof(float) * N_TOK * N_VOCAB);
    struct hmoe_err err = {0};
    enum hmoe_status st = hmoe_ctx_decode(c, ids, 40, 0, HMOE_LOGITS_ALL, out, &err);
    for (int i = 40; i < N_TOK && !st; i++)
        st = hmoe_ctx_decode(c, &ids[i], 1, i, HMOE_LOGITS_LAST, out + (size_t)i * N_VOCAB, &err);
    check_rows("qwen35moe-tiny: prefill 40 then decode 30 vs llama.cpp prefill", st, &err, out, ref_prefill, N_TOK, 1e-3);

    /* No checkpoint yet: truncate keeps n_past at 50, the next decode replays 0..49 first. */
    hmoe_ctx_truncate(c, 50);
    const int kept = hmoe_ctx_n_past(c);
    if (!st) st = hmoe_ctx_decode(c, &ids[50], 20, 50, HMOE_LOGITS_ALL, out + (size_t)50 * N_VOCAB, &err);
    t_check(kept == 50, "qwen35moe-tiny: truncate(50) leaves n_past 50 (the state is replayed later)", "n_past %d",
            kept);
    check_rows("qwen35moe-tiny: rewind to 50 without checkpoint, decode 20 vs llama.cpp prefill", st, &err,
               out + (size_t)50 * N_VOCAB, ref_prefill + (size_t)50 * N_VOCAB, 20, 1e-3);
    /* A current checkpoint at 50, then rewinds around it. */
    static const struct {
        int keep;
        const char *what;
    } rewinds[] = {{55, "to 55 (checkpoint at 50, replay 5)"},
                   {50, "to 50 (exactly the checkpoint)"},
                   {20, "to 20 (before the checkpoint: replay from 0)"},
                   {70, "to n_past (kept)"},
                   {0, "to 0 (reset)"}};
    hmoe_ctx_reset(c);
    st = hmoe_ctx_decode(c, ids, 50, 0, HMOE_LOGITS_NONE, NULL, &err);
    hmoe_ctx_checkpoint(c);
    if (!st) st = hmoe_ctx_decode(c, &ids[50], 20, 50, HMOE_LOGITS_NONE, NULL, &err);
    for (size_t i = 0; i < HMOE_ARRAY_LEN(rewinds) && !st; i++) {
        const int k = rewinds[i].keep;
        hmoe_ctx_truncate(c, k);
        const int n_past = hmoe_ctx_n_past(c);
        if (k < N_TOK) st = hmoe_ctx_decode(c, &ids[k], N_TOK - k, k, HMOE_LOGITS_ALL, out + (size_t)k * N_VOCAB, &err);
        char name[160];
        snprintf(name, sizeof name, "qwen35moe-tiny: rewind %s, then decode to 70 vs llama.cpp prefill", rewinds[i].what);
        if (k < N_TOK) check_rows(name, st, &err, out + (size_t)k * N_VOCAB, ref_prefill + (size_t)k * N_VOCAB, N_TOK - k, 1e-3);
        else t_check(n_past == N_TOK, name, "n_past %d", n_past);
    }
    free(out);
    hmoe_ctx_free(c);
}

/* The chunked DeltaNet (§5.3) equals the recurrence (§5.2) on random data, across chunk
 * borders and with a non-zero entering state. */
static void chunked_vs_recurrent(void) {
    enum { DIM = 32, N = 150 };
    const size_t stride = 3 * DIM, gbs = 2;
    float *qkv = malloc(sizeof(float) * N * stride), *gb = malloc(sizeof(float) * N * gbs);
    float *S1 = malloc(sizeof(float) * DIM * DIM), *S2 = malloc(sizeof(float) * DIM * DIM);
    float *o1 = malloc(sizeof(float) * N * DIM), *o2 = malloc(sizeof(float) * N * DIM);
    float *scratch = malloc(sizeof(float) * hmoe_gdn_chunk_scratch_floats(DIM));
    uint64_t x = 12345;
#define RND() ((float)((x = x * 6364136223846793005ull + 1442695040888963407ull) >> 40) / (float)(1u << 24) - 0.5f)
    for (size_t i = 0; i < N * stride; i++) qkv[i] = RND();
    for (int t = 0; t < N; t++) {
        hmoe_gdn_l2norm(qkv + t * stride, DIM, 1e-6f, 1.0f / sqrtf(DIM));
        hmoe_gdn_l2norm(qkv + t * stride + DIM, DIM, 1e-6f, 1.0f);
        gb[t * gbs] = -0.3f * (RND() + 0.5f); /* log decay <= 0 */
        gb[t * gbs + 1] = RND() + 0.5f;       /* beta in [0, 1) */
    }
    for (int i = 0; i < DIM * DIM; i++) S1[i] = S2[i] = RND();
#undef RND
    hmoe_gdn_recurrent(S1, DIM, N, qkv, qkv + DIM, stride, qkv + 2 * DIM, stride, gb, gb + 1, gbs, o1, DIM);
    hmoe_gdn_chunked(S2, DIM, N, qkv, qkv + DIM, stride, qkv + 2 * DIM, stride, gb, gb + 1, gbs, o2, DIM, scratch);
    double wo = 0, ws = 0;
    for (int i = 0; i < N * DIM; i++) wo = fmax(wo, fabs((double)o1[i] - o2[i]));
    for (int i = 0; i < DIM * DIM; i++) ws = fmax(ws, fabs((double)S1[i] - S2[i]));
    t_check(wo < 1e-4 && ws < 1e-4, "deltanet: chunked form equals the recurrence (150 tokens, 3 chunks)",
            "max |d| outputs %.3g, state %.3g", wo, ws);
    free(qkv), free(gb), free(S1), free(S2), free(o1), free(o2), free(scratch);
}

/* Offset just past the GGUF string `s` (u64 length + bytes) in buf, or 0 if absent. */
static size_t find_gguf_str(const unsigned char *buf, size_t n, const char *s) {
    size_t len = strlen(s);
    for (size_t i = 0; i + 8 + len <= n; i++) {
        uint64_t l;
        memcpy(&l, buf + i, 8);
        if (l == len && memcmp(buf + i + 8, s, len) == 0) return i + 8 + len;
    }
    return 0;
}

static enum hmoe_status load_bytes(const unsigned char *buf, size_t n, struct hmoe_err *err) {
    struct hmoe_gguf *g = NULL;
    struct hmoe_model *m = NULL;
    enum hmoe_status st = hmoe_gguf_open_memory(buf, n, "patched.gguf", &g, err);
    if (st) return st;
    st = hmoe_model_load_gguf(g, NULL, &m, err);
    if (st) hmoe_gguf_free(g);
    hmoe_model_free(m);
    return st;
}

/* Patched copies of the fixture: a DeltaNet tensor with swapped dims, a missing ssm key,
 * missing rope sections, the unsupported architectures of moe-tiny. */
static void load_errors(const char *path) {
    FILE *f = fopen(path, "rb");
    unsigned char *orig = NULL;
    size_t n = 0;
    if (f) {
        fseek(f, 0, SEEK_END);
        n = (size_t)ftell(f);
        fseek(f, 0, SEEK_SET);
        orig = malloc(n);
        if (!orig || fread(orig, 1, n, f) != n) n = 0;
        fclose(f);
    }
    unsigned char *buf = malloc(n ? n : 1);
    struct hmoe_err err = {0};
    if (n) {
        memcpy(buf, orig, n);
        size_t o = find_gguf_str(buf, n, "blk.1.ssm_conv1d.weight");
        uint64_t ne0 = 0, ne1 = 0;
        if (o) {
            memcpy(&ne0, buf + o + 4, 8);
            memcpy(&ne1, buf + o + 12, 8);
            memcpy(buf + o + 4, &ne1, 8);
            memcpy(buf + o + 12, &ne0, 8);
        }
        enum hmoe_status st = load_bytes(buf, n, &err);
        t_check(o && st == HMOE_ERR_FORMAT &&
                    strstr(err.msg, "tensor blk.1.ssm_conv1d.weight has shape [128, 4] but qwen35moe needs [4, 128]"),
                "qwen35moe: wrong DeltaNet tensor shape named with the shape needed", "status %d: %s", st, err.msg);
        static const char *const keys[] = {"qwen35moe.ssm.state_size", "qwen35moe.rope.dimension_sections",
                                           "qwen35moe.expert_shared_feed_forward_length"};
        for (size_t i = 0; i < HMOE_ARRAY_LEN(keys); i++) {
            memcpy(buf, orig, n);
            o = find_gguf_str(buf, n, keys[i]);
            if (o) buf[o - 1] = 'X';
            st = load_bytes(buf, n, &err);
            char name[160], want[160];
            snprintf(name, sizeof name, "qwen35moe: missing %s is named", keys[i]);
            snprintf(want, sizeof want, "'%s' is missing", keys[i]);
            t_check(o && st == HMOE_ERR_NOT_FOUND && strstr(err.msg, want), name, "status %d: %s", st, err.msg);
        }
    }
    t_check(n > 0, "qwen35moe-tiny bytes read", "cannot read %s", path);
    static const char *const others[] = {"deepseek2"};
    for (size_t i = 0; i < HMOE_ARRAY_LEN(others); i++) {
        char p2[256], want[160], name[160];
        snprintf(p2, sizeof p2, "fixtures/moe-tiny/%s-tiny.gguf", others[i]);
        struct hmoe_model *m = NULL;
        enum hmoe_status st = hmoe_model_load(t_shared(p2), NULL, &m, &err);
        snprintf(want, sizeof want, "unsupported architecture '%s' (supported: qwen3moe, qwen35moe", others[i]);
        snprintf(name, sizeof name, "%s-tiny: clear unsupported-architecture error", others[i]);
        t_check(st == HMOE_ERR_UNSUPPORTED && !m && strstr(err.msg, want), name, "status %d: %s", st, err.msg);
        hmoe_model_free(m);
    }
    free(buf);
    free(orig);
}

/* The qwen3.6-35b-a3b preset against qwen35moe.md §3 and §9: 733 tensors, the Q4_K_M mix
 * (attn_qkv like attn_v, ffn_down_shexp like ffn_down, conv1d F32), ~21.2 GB, 1.98 GB read
 * per token (stack 1,558.5 MB + LM head 417.2 MB). */
static void synth_preset_35b(void) {
    struct hmoe_synth_plan p;
    struct hmoe_err err = {0};
    struct hmoe_synth_opts o = {.preset = "qwen3.6-35b-a3b"};
    if (hmoe_synth_plan_init(&p, &o, &err)) {
        t_check(0, "synth qwen3.6-35b-a3b plan", "%s", err.msg);
        return;
    }
    double active = 0;
    for (size_t i = 0; i < p.n_tensors; i++) {
        const struct hmoe_synth_tensor *t = &p.tensors[i];
        if (t->ne[2] > 1) active += (double)t->n_bytes / (double)t->ne[2] * 8; /* 8 of 256 experts */
        else if (strcmp(t->name, "token_embd.weight") == 0) active += (double)t->n_bytes / (double)t->ne[1];
        else active += (double)t->n_bytes;
    }
    t_check(p.n_tensors == 733 && fabs(p.data_bytes / 1e9 - 21.2) < 0.1 && fabs(active / 1e6 - 1975.7) < 1.0,
            "synth qwen3.6-35b-a3b: 733 tensors, ~21.2 GB, 1975.7 MB per token (qwen35moe.md §9)",
            "%zu tensors, %.3f GB, %.1f MB per token", p.n_tensors, p.data_bytes / 1e9, active / 1e6);
    static const struct {
        const char *name;
        enum hmoe_type type;
    } want[] = {
        {"token_embd.weight", HMOE_TYPE_Q4_K},          {"output.weight", HMOE_TYPE_Q6_K},
        {"blk.0.attn_qkv.weight", HMOE_TYPE_Q6_K},      {"blk.5.attn_qkv.weight", HMOE_TYPE_Q4_K},
        {"blk.7.attn_v.weight", HMOE_TYPE_Q6_K},        {"blk.11.attn_v.weight", HMOE_TYPE_Q4_K},
        {"blk.10.ffn_down_shexp.weight", HMOE_TYPE_Q6_K}, {"blk.6.ffn_down_shexp.weight", HMOE_TYPE_Q4_K},
        {"blk.34.ffn_down_exps.weight", HMOE_TYPE_Q6_K}, {"blk.33.ffn_down_exps.weight", HMOE_TYPE_Q4_K},
        {"blk.0.ssm_conv1d.weight", HMOE_TYPE_F32},     {"blk.0.ssm_alpha.weight", HMOE_TYPE_Q4_K},
        {"blk.0.ssm_beta.weight", HMOE_TYPE_Q4_K},      {"blk.0.attn_gate.weight", HMOE_TYPE_Q4_K},
        {"blk.0.ssm_out.weight", HMOE_TYPE_Q4_K},       {"blk.0.ffn_gate_inp_shexp.weight", HMOE_TYPE_F32},
        {"blk.0.ssm_a", HMOE_TYPE_F32},                 {"blk.3.attn_q.weight", HMOE_TYPE_Q4_K},
    };
    int bad = -1;
    for (size_t k = 0; k < HMOE_ARRAY_LEN(want) && bad < 0; k++) {
        bool found = false;
        for (size_t i = 0; i < p.n_tensors; i++)
            if (strcmp(p.tensors[i].name, want[k].name) == 0) found = p.tensors[i].type == want[k].type;
        if (!found) bad = (int)k;
    }
    t_check(bad < 0, "synth qwen3.6-35b-a3b: Q4_K_M types of qwen35moe.md §9", "%s is not %s",
            bad >= 0 ? want[bad].name : "", bad >= 0 ? hmoe_type_name(want[bad].type) : "");
    hmoe_synth_plan_free(&p);
}

/* qwen35-tiny written, loaded (its MTP block not run) and run: a prefill and token-by-token
 * decoding of the same ids agree, and the logits are finite. */
static void synth_tiny_runs(void) {
    char path[] = "/tmp/hmoe-q35-XXXXXX";
    int fd = mkstemp(path);
    if (fd >= 0) close(fd);
    struct hmoe_synth_plan p;
    struct hmoe_err err = {0};
    struct hmoe_synth_opts o = {.preset = "qwen35-tiny", .seed = 7};
    enum hmoe_status st = fd < 0 ? HMOE_ERR_IO : hmoe_synth_plan_init(&p, &o, &err);
    if (!st) {
        st = hmoe_synth_write(&p, path, NULL, NULL, &err);
        hmoe_synth_plan_free(&p);
    }
    struct hmoe_model *m = NULL;
    if (!st) st = hmoe_model_load(path, NULL, &m, &err);
    t_check(!st && m->cfg.n_layer == 4 && m->cfg.n_nextn == 1 && !m->w.layers[3].recurrent &&
                m->w.layers[2].recurrent && m->w.layers[2].gdn.qkv.type == HMOE_TYPE_Q6_K &&
                m->w.layers[0].gdn.qkv.type == HMOE_TYPE_Q4_K,
            "synth qwen35-tiny loads: 4 main layers, 1 MTP block not bound, Q4_K_M types", "%s", err.msg);
    if (!st) {
        enum { N = 24 };
        const int V = m->cfg.n_vocab;
        int32_t tok[N];
        for (int i = 0; i < N; i++) tok[i] = (int32_t)((i * 37 + 11) % V);
        float *a = malloc(sizeof(float) * N * V), *b = malloc(sizeof(float) * N * V);
        struct hmoe_ctx *c = new_ctx(m, HMOE_TYPE_F16, 512, 2);
        st = c ? hmoe_ctx_decode(c, tok, N, 0, HMOE_LOGITS_ALL, a, &err) : HMOE_ERR_NOMEM;
        hmoe_ctx_reset(c);
        for (int i = 0; !st && i < N; i++) st = hmoe_ctx_decode(c, &tok[i], 1, i, HMOE_LOGITS_LAST, b + (size_t)i * V, &err);
        double worst = 0, amax = 0;
        bool finite = true;
        for (size_t i = 0; !st && i < (size_t)N * V; i++) {
            finite &= isfinite(a[i]) && isfinite(b[i]);
            worst = fmax(worst, fabs((double)a[i] - b[i]));
            amax = fmax(amax, fabs((double)a[i]));
        }
        t_check(!st && finite && amax > 0 && worst < 1e-2 * amax,
                "synth qwen35-tiny runs: 24-token prefill matches token-by-token decoding",
                "%s max |d| %.3g of |logit| %.3g", st ? err.msg : "", worst, amax);
        hmoe_ctx_free(c);
        free(a);
        free(b);
    }
    hmoe_model_free(m);
    remove(path);
}

int main(void) {
    char path[8192];
    struct hmoe_err err = {0};
    hmoe_cpu_init();
    snprintf(path, sizeof path, "%s", t_shared("fixtures/moe-tiny/tokens.txt"));
    FILE *f = fopen(path, "r");
    int n = 0;
    while (f && n < N_TOK && fscanf(f, "%d", &ids[n]) == 1) n++;
    if (f) fclose(f);
    t_check(n == N_TOK, "tokens.txt has 70 ids", "read %d", n);
    snprintf(path, sizeof path, "%s", t_shared("fixtures/moe-tiny/qwen35moe-tiny.llamacpp-prefill.f32"));
    ref_prefill = mc_read_f32(path, (size_t)N_TOK * N_VOCAB);
    snprintf(path, sizeof path, "%s", t_shared("fixtures/moe-tiny/qwen35moe-tiny.llamacpp-decode.f32"));
    ref_decode = mc_read_f32(path, (size_t)N_TOK * N_VOCAB);
    t_check(ref_prefill && ref_decode, "qwen35moe-tiny reference logits present", "missing .f32 files");

    struct hmoe_model *m = NULL;
    snprintf(path, sizeof path, "%s", t_shared("fixtures/moe-tiny/qwen35moe-tiny.gguf"));
    enum hmoe_status st = hmoe_model_load(path, NULL, &m, &err);
    t_check(!st, "qwen35moe-tiny load", "%s", err.msg);
    if (!st && n == N_TOK && ref_prefill && ref_decode) {
        const struct hmoe_model_config *c = &m->cfg;
        t_check(!strcmp(c->arch, "qwen35moe") && c->arch_entry == hmoe_arch_find("qwen35moe") && c->n_layer == 4 && c->n_rot == 16 && c->head_dim == 64 &&
                    c->ssm_n_k_head == 2 && c->ssm_n_v_head == 4 && c->ssm_head_dim == 16 && c->n_ff_shexp == 32 &&
                    c->full_attn_interval == 4 && c->rope_sections[0] == 3 && c->rope_sections[2] == 2 &&
                    m->w.layers[0].recurrent && !m->w.layers[3].recurrent,
                "qwen35moe-tiny hyper-parameters and layer pattern",
                "layers %d n_rot %d D %d Hk %d Hv %d Dk %d Fs %d", c->n_layer, c->n_rot, c->head_dim, c->ssm_n_k_head,
                c->ssm_n_v_head, c->ssm_head_dim, c->n_ff_shexp);
        /* The GPU path (tests/gpu_test_qwen35.c): without a usable GPU, --gpu on is a clear error
         * and auto runs on the CPU. With one, auto falls back to the CPU too: this model's 24-wide
         * experts are not GPU-able unless --cpu-moe keeps them in RAM. */
        struct hmoe_ctx_params cp;
        hmoe_ctx_params_default(&cp);
        cp.n_ctx = 64;
        cp.n_threads = 1;
        cp.gpu = HMOE_GPU_ON;
        struct hmoe_ctx *gc = NULL;
        st = hmoe_ctx_init(m, &cp, &gc, &err);
        t_check(st != HMOE_OK && !gc && (strstr(err.msg, "CUDA") || strstr(err.msg, "expert FFN")),
                "qwen35moe-tiny with --gpu on: clear error (no GPU, or experts not GPU-sized)", "status %d: %s", st,
                err.msg);
        hmoe_ctx_free(gc);
        gc = NULL;
        cp.gpu = HMOE_GPU_AUTO;
        st = hmoe_ctx_init(m, &cp, &gc, &err);
        t_check(!st && gc && strcmp(hmoe_ctx_backend(gc), "cpu") == 0, "qwen35moe-tiny with --gpu auto runs on the CPU",
                "status %d: %s", st, err.msg);
        hmoe_ctx_free(gc);
        vs_llamacpp(m, HMOE_TYPE_F32, 1e-3);
        vs_llamacpp(m, HMOE_TYPE_F16, 1e-2);
        ubatch_sizes(m);
        prefill_then_decode(m);
    }
    hmoe_model_free(m);
    load_errors(path);
    chunked_vs_recurrent();
    synth_preset_35b();
    synth_tiny_runs();
    free(ref_prefill);
    free(ref_decode);
    return t_summary();
}
