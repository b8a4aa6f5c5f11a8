/* test_spec.c — self-speculative decoding with the MTP block (qwen35moe.md §8; model.h
 * hmoe_spec_*) on synth qwen35-tiny files (4 main layers + 1 MTP block):
 *  - the block's logits for 6 chained entries against a float64 re-computation of §8 written
 *    here from the file's tensors (dequantized by the reference row decoders);
 *  - exactness: greedy tokens with drafts equal the tokens without, for several prompts and
 *    --draft-max 1, 2, 4 and 7; and a chooser that takes the pending draft at random (so
 *    drafts are accepted, rejected and rewound) gets at every position the logits that a plain
 *    context decoding the same tokens gets;
 *  - refusals: a file without an MTP block, a block missing a tensor, a bad --draft-max.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "hmoe/arch.h"
#include "hmoe/cpu.h"
#include "hmoe/synth.h"
#include "model/mtp_impl.h"

/* Write qwen35-tiny (mix, seed) to a temp path; drop: remove the tensor of that name
 * ("" = every MTP tensor, NULL = none). */
static enum hmoe_status write_tiny(char *path, const char *mix, const char *drop, struct hmoe_err *err) {
    strcpy(path, "/tmp/hmoe-spec-XXXXXX");
    int fd = mkstemp(path);
    if (fd < 0) return HMOE_RAISE(err, HMOE_ERR_IO, "mkstemp failed");
    close(fd);
    struct hmoe_synth_plan p;
    struct hmoe_synth_opts o = {.preset = "qwen35-tiny", .mix = mix, .seed = 11};
    enum hmoe_status st = hmoe_synth_plan_init(&p, &o, err);
    if (st) return st;
    if (drop) {
        size_t w = 0;
        for (size_t i = 0; i < p.n_tensors; i++) {
            const bool gone = drop[0] ? strcmp(p.tensors[i].name, drop) == 0 : p.tensors[i].layer >= (int)p.preset.n_layer;
            if (gone) p.data_bytes -= (p.tensors[i].n_bytes + 31) / 32 * 32;
            else p.tensors[w++] = p.tensors[i];
        }
        p.n_tensors = w;
        if (!drop[0]) p.preset.n_nextn = 0;
    }
    st = hmoe_synth_write(&p, path, NULL, NULL, err);
    hmoe_synth_plan_free(&p);
    return st;
}

static struct hmoe_ctx *new_ctx(const struct hmoe_model *m, int n_threads) {
    struct hmoe_ctx_params cp;
    hmoe_ctx_params_default(&cp);
    cp.n_ctx = 256;
    cp.type_k = cp.type_v = HMOE_TYPE_F32;
    cp.n_threads = n_threads;
    struct hmoe_ctx *c = NULL;
    struct hmoe_err err = {0};
    if (hmoe_ctx_init(m, &cp, &c, &err)) t_check(0, "context", "%s", err.msg);
    return c;
}

/* --- float64 reference of the MTP block (qwen35moe.md §8, §5.1, §7) ------------------- */

/* A tensor of the file as double rows of ne0 (all rows of all matrices). */
static double *tensor(const struct hmoe_model *m, const char *name, int64_t *n_in) {
    const struct hmoe_gguf_tensor *t = hmoe_gguf_find_tensor(m->gguf, name);
    if (!t) return NULL;
    const int64_t ne0 = t->ne[0], rows = (int64_t)(t->n_elements / (uint64_t)ne0);
    double *out = malloc(sizeof(double) * (size_t)t->n_elements);
    float *row = malloc(sizeof(float) * (size_t)ne0);
    for (int64_t r = 0; r < rows; r++) {
        hmoe_type_info[t->type].dequant_ref((const uint8_t *)t->data + (size_t)r * t->nb[1], row, ne0);
        for (int64_t i = 0; i < ne0; i++) out[r * ne0 + i] = row[i];
    }
    free(row);
    if (n_in) *n_in = ne0;
    return out;
}

static double *blk(const struct hmoe_model *m, int il, const char *suffix) {
    char name[96];
    snprintf(name, sizeof name, "blk.%d.%s", il, suffix);
    return tensor(m, name, NULL);
}

static void mv(const double *W, const double *x, int64_t n_in, int64_t n_out, double *y) {
    for (int64_t o = 0; o < n_out; o++) {
        double s = 0;
        for (int64_t i = 0; i < n_in; i++) s += W[o * n_in + i] * x[i];
        y[o] = s;
    }
}

static void rms(double *y, const double *x, const double *w, int64_t n, double eps) {
    double ss = 0;
    for (int64_t i = 0; i < n; i++) ss += x[i] * x[i];
    const double r = 1.0 / sqrt(ss / (double)n + eps);
    for (int64_t i = 0; i < n; i++) y[i] = x[i] * r * w[i];
}

static double sigm(double x) { return 1.0 / (1.0 + exp(-x)); }
static double silu(double x) { return x * sigm(x); }

/* NEOX rotation of the first n_rot dims (pairs s, s + n_rot/2), theta = pos * base^(-2s/n_rot). */
static void rope(double *v, int n_rot, int pos, double base) {
    const int half = n_rot / 2;
    for (int s = 0; s < half; s++) {
        const double th = pos * pow(base, -2.0 * s / n_rot), c = cos(th), sn = sin(th);
        const double a = v[s], b = v[s + half];
        v[s] = a * c - b * sn;
        v[s + half] = a * sn + b * c;
    }
}

/* The block over rows 0..n-1 (position i = row i), logits of the last row into out. */
static void mtp_reference(const struct hmoe_model *m, const float *hidden, const int32_t *ids, int n, double *out) {
    const struct hmoe_model_config *c = &m->cfg;
    const int il = c->n_layer, d = c->n_embd, H = c->n_head, Hkv = c->n_head_kv, D = c->head_dim,
              E = c->n_expert, K = c->n_expert_used, F = c->n_ff_exp, Fs = c->n_ff_shexp, V = c->n_vocab;
    const double eps = c->rms_eps;
    double *emb = tensor(m, "token_embd.weight", NULL), *head = tensor(m, "output.weight", NULL);
    if (!head) head = emb;
    double *hnorm = blk(m, il, "nextn.shared_head_norm.weight");
    if (!hnorm) hnorm = tensor(m, "output_norm.weight", NULL);
    double *eh = blk(m, il, "nextn.eh_proj.weight"), *en = blk(m, il, "nextn.enorm.weight"),
           *hn = blk(m, il, "nextn.hnorm.weight"), *an = blk(m, il, "attn_norm.weight"),
           *wq = blk(m, il, "attn_q.weight"), *wk = blk(m, il, "attn_k.weight"), *wv = blk(m, il, "attn_v.weight"),
           *qn = blk(m, il, "attn_q_norm.weight"), *kn = blk(m, il, "attn_k_norm.weight"),
           *wo = blk(m, il, "attn_output.weight"), *pn = blk(m, il, "post_attention_norm.weight"),
           *rt = blk(m, il, "ffn_gate_inp.weight"), *ge = blk(m, il, "ffn_gate_exps.weight"),
           *ue = blk(m, il, "ffn_up_exps.weight"), *de = blk(m, il, "ffn_down_exps.weight"),
           *sgi = blk(m, il, "ffn_gate_inp_shexp.weight"), *sg = blk(m, il, "ffn_gate_shexp.weight"),
           *su = blk(m, il, "ffn_up_shexp.weight"), *sd = blk(m, il, "ffn_down_shexp.weight");
    double *Kc = calloc((size_t)n * Hkv * D, sizeof(double)), *Vc = calloc((size_t)n * Hkv * D, sizeof(double));
    double *cat = malloc(sizeof(double) * 2 * d), *x = malloc(sizeof(double) * d), *xn = malloc(sizeof(double) * d),
           *t = malloc(sizeof(double) * d), *qg = malloc(sizeof(double) * 2 * H * D),
           *q = malloc(sizeof(double) * D), *o = malloc(sizeof(double) * H * D), *a = malloc(sizeof(double) * d),
           *p = malloc(sizeof(double) * (size_t)(n > E ? n : E)), *g = malloc(sizeof(double) * (F > Fs ? F : Fs)),
           *u = malloc(sizeof(double) * (F > Fs ? F : Fs));
    for (int r = 0; r < n; r++) {
        for (int i = 0; i < d; i++) t[i] = emb[(size_t)ids[r] * d + i];
        rms(cat, t, en, d, eps);
        for (int i = 0; i < d; i++) t[i] = hidden[(size_t)r * d + i];
        rms(cat + d, t, hn, d, eps);
        mv(eh, cat, 2 * d, d, x);
        rms(xn, x, an, d, eps);
        mv(wq, xn, d, 2 * H * D, qg);
        mv(wk, xn, d, Hkv * D, Kc + (size_t)r * Hkv * D);
        mv(wv, xn, d, Hkv * D, Vc + (size_t)r * Hkv * D);
        for (int j = 0; j < Hkv; j++) {
            double *kj = Kc + (size_t)r * Hkv * D + (size_t)j * D;
            rms(kj, kj, kn, D, eps);
            rope(kj, c->n_rot, r, c->rope_freq_base);
        }
        for (int h = 0; h < H; h++) {
            rms(q, qg + (size_t)h * 2 * D, qn, D, eps);
            rope(q, c->n_rot, r, c->rope_freq_base);
            const int kh = h / (H / Hkv);
            double mx = -INFINITY, sum = 0;
            for (int s = 0; s <= r; s++) {
                double dot = 0;
                for (int i = 0; i < D; i++) dot += q[i] * Kc[(size_t)s * Hkv * D + (size_t)kh * D + i];
                p[s] = dot / sqrt((double)D);
                mx = fmax(mx, p[s]);
            }
            for (int s = 0; s <= r; s++) sum += p[s] = exp(p[s] - mx);
            for (int i = 0; i < D; i++) {
                double acc = 0;
                for (int s = 0; s <= r; s++) acc += p[s] / sum * Vc[(size_t)s * Hkv * D + (size_t)kh * D + i];
                o[h * D + i] = acc * sigm(qg[(size_t)h * 2 * D + D + i]);
            }
        }
        mv(wo, o, H * D, d, a);
        for (int i = 0; i < d; i++) x[i] += a[i];
        rms(xn, x, pn, d, eps);
        /* routed experts: softmax over all, top K, renormalised */
        mv(rt, xn, d, E, p);
        double mx = -INFINITY, sum = 0;
        for (int e = 0; e < E; e++) mx = fmax(mx, p[e]);
        for (int e = 0; e < E; e++) sum += p[e] = exp(p[e] - mx);
        for (int e = 0; e < E; e++) p[e] /= sum;
        int sel[64];
        double wsel[64], wsum = 0;
        for (int k = 0; k < K; k++) {
            int best = -1;
            for (int e = 0; e < E; e++) {
                bool used = false;
                for (int j = 0; j < k; j++) used |= sel[j] == e;
                if (!used && (best < 0 || p[e] > p[best])) best = e;
            }
            sel[k] = best;
            wsum += wsel[k] = p[best];
        }
        for (int i = 0; i < d; i++) a[i] = 0;
        for (int k = 0; k < K; k++) {
            const size_t e = (size_t)sel[k];
            mv(ge + e * F * d, xn, d, F, g);
            mv(ue + e * F * d, xn, d, F, u);
            for (int i = 0; i < F; i++) g[i] = silu(g[i]) * u[i];
            mv(de + e * d * F, g, F, d, t);
            for (int i = 0; i < d; i++) a[i] += wsel[k] / wsum * t[i];
        }
        double gam = 0;
        for (int i = 0; i < d; i++) gam += sgi[i] * xn[i];
        mv(sg, xn, d, Fs, g);
        mv(su, xn, d, Fs, u);
        for (int i = 0; i < Fs; i++) g[i] = silu(g[i]) * u[i];
        mv(sd, g, Fs, d, t);
        for (int i = 0; i < d; i++) x[i] += a[i] + sigm(gam) * t[i];
    }
    rms(xn, x, hnorm, d, eps);
    mv(head, xn, d, V, out);
    double *all[] = {emb, head == emb ? NULL : head, hnorm, eh, en, hn, an, wq, wk, wv, qn, kn, wo, pn, rt, ge, ue, de,
                     sgi, sg, su, sd, Kc, Vc, cat, x, xn, t, qg, q, o, a, p, g, u};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]);
}

/* The block's logits for n entries of random hidden states and tokens vs the reference. */
static void block_vs_reference(const struct hmoe_model *m, const char *mix, double tol) {
    enum { N = 6 };
    const int d = m->cfg.n_embd, V = m->cfg.n_vocab;
    struct hmoe_ctx *c = new_ctx(m, 1);
    struct hmoe_spec *s = NULL;
    struct hmoe_err err = {0};
    enum hmoe_status st = c ? hmoe_spec_init(c, 2, &s, &err) : HMOE_ERR_NOMEM;
    float *hid = malloc(sizeof(float) * N * d), *lg = malloc(sizeof(float) * V), *cat = malloc(sizeof(float) * N * 2 * d);
    double *ref = malloc(sizeof(double) * V);
    int32_t tok[N];
    uint64_t r = 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < N * d; i++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        hid[i] = (float)((double)(r >> 11) / 9007199254740992.0 * 4.0 - 2.0);
    }
    for (int i = 0; i < N; i++) tok[i] = (int32_t)((i * 131 + 7) % V);
    if (!st) st = m->cfg.arch_entry->mtp->forward(c->mtp->mc, hid, tok, N, 0, cat, lg, NULL, &err);
    double worst = 0, amax = 0;
    if (!st) {
        mtp_reference(m, hid, tok, N, ref);
        for (int i = 0; i < V; i++) {
            worst = fmax(worst, fabs(lg[i] - ref[i]));
            amax = fmax(amax, fabs(ref[i]));
        }
    }
    char name[160];
    snprintf(name, sizeof name, "MTP block (%s weights): logits of 6 chained entries vs float64 reference (max |d| %.2g of %.2g)",
             mix, worst, amax);
    t_check(!st && amax > 0 && worst < tol * amax, name, "%s", st ? err.msg : "beyond tolerance");
    free(hid);
    free(lg);
    free(cat);
    free(ref);
    hmoe_spec_free(s);
    hmoe_ctx_free(c);
}

/* --- exactness ------------------------------------------------------------------------ */

/* Greedy generation of n tokens after the prompt, with or without a speculative decoder. */
static enum hmoe_status greedy(const struct hmoe_model *m, const int32_t *prompt, int np, int n_draft, int n,
                               int32_t *out, struct hmoe_spec_stats *stats, struct hmoe_err *err) {
    const int V = m->cfg.n_vocab;
    struct hmoe_ctx *c = new_ctx(m, 2);
    struct hmoe_spec *s = NULL;
    float *buf = malloc(sizeof(float) * V);
    enum hmoe_status st = c ? HMOE_OK : HMOE_ERR_NOMEM;
    if (!st && n_draft) st = hmoe_spec_init(c, n_draft, &s, err);
    if (!st) st = hmoe_ctx_decode(c, prompt, np, 0, HMOE_LOGITS_LAST, buf, err);
    const float *lg = buf;
    for (int i = 0; !st && i < n; i++) {
        out[i] = hmoe_argmax(lg, V);
        if (s) st = hmoe_spec_decode(s, out[i], np + i, &lg, err);
        else st = hmoe_ctx_decode(c, &out[i], 1, np + i, HMOE_LOGITS_LAST, buf, err);
    }
    if (s && stats) hmoe_spec_get_stats(s, stats);
    free(buf);
    hmoe_spec_free(s);
    hmoe_ctx_free(c);
    return st;
}

static void greedy_exact(const struct hmoe_model *m) {
    enum { NP = 3, NG = 24 };
    const int V = m->cfg.n_vocab;
    static const int drafts[] = {1, 2, 4, 7};
    for (int pr = 0; pr < NP; pr++) {
        int32_t prompt[40];
        const int np = 5 + 13 * pr;
        for (int i = 0; i < np; i++) prompt[i] = (int32_t)((i * 97 + pr * 331 + 3) % V);
        int32_t ref[NG];
        struct hmoe_err err = {0};
        enum hmoe_status st = greedy(m, prompt, np, 0, NG, ref, NULL, &err);
        for (size_t k = 0; k < sizeof drafts / sizeof drafts[0]; k++) {
            int32_t got[NG];
            struct hmoe_spec_stats ss = {0};
            if (!st) st = greedy(m, prompt, np, drafts[k], NG, got, &ss, &err);
            int first = -1;
            for (int i = 0; !st && i < NG && first < 0; i++)
                if (got[i] != ref[i]) first = i;
            char name[160];
            snprintf(name, sizeof name,
                     "greedy with --spec mtp --draft-max %d, prompt %d (%d ids): same %d tokens (%llu/%llu drafts "
                     "accepted)",
                     drafts[k], pr, np, NG, (unsigned long long)ss.accepted, (unsigned long long)ss.drafted);
            t_check(!st && first < 0 && ss.steps > 0 && ss.drafted > 0, name, "%s first difference at %d",
                    st ? err.msg : "", first);
        }
    }
}

/* A chooser that takes the pending draft with probability 1/2 (else the argmax): every row
 * the decoder returns equals what a plain context decoding the chosen tokens returns. */
static void follow_drafts(const struct hmoe_model *m, int n_draft) {
    enum { NP = 9, NG = 40 };
    const int V = m->cfg.n_vocab;
    struct hmoe_ctx *c = new_ctx(m, 2), *plain = new_ctx(m, 2);
    struct hmoe_spec *s = NULL;
    struct hmoe_err err = {0};
    float *buf = malloc(sizeof(float) * V), *pb = malloc(sizeof(float) * V);
    int32_t prompt[NP];
    for (int i = 0; i < NP; i++) prompt[i] = (int32_t)((i * 53 + 5) % V);
    enum hmoe_status st = c && plain ? hmoe_spec_init(c, n_draft, &s, &err) : HMOE_ERR_NOMEM;
    if (!st) st = hmoe_ctx_decode(c, prompt, NP, 0, HMOE_LOGITS_LAST, buf, &err);
    if (!st) st = hmoe_ctx_decode(plain, prompt, NP, 0, HMOE_LOGITS_LAST, pb, &err);
    const float *lg = buf;
    double worst = 0, amax = 0;
    uint64_t r = 12345;
    for (int i = 0; !st && i < NG; i++) {
        int32_t pend[HMOE_SPEC_DRAFT_MAX];
        const int np = hmoe_spec_pending(s, pend);
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        const int32_t id = np > 0 && (r >> 40) % 2 ? pend[0] : hmoe_argmax(lg, V);
        if ((st = hmoe_spec_decode(s, id, NP + i, &lg, &err))) break;
        if ((st = hmoe_ctx_decode(plain, &id, 1, NP + i, HMOE_LOGITS_LAST, pb, &err))) break;
        for (int j = 0; j < V; j++) {
            worst = fmax(worst, fabs((double)lg[j] - pb[j]));
            amax = fmax(amax, fabs((double)pb[j]));
        }
    }
    struct hmoe_spec_stats ss = {0};
    if (s) hmoe_spec_get_stats(s, &ss);
    char name[200];
    snprintf(name, sizeof name,
             "--draft-max %d, drafts taken at random: %d rows equal plain decoding (max |d| %.2g of %.2g; %llu "
             "accepted, %llu tokens re-run)",
             n_draft, NG, worst, amax, (unsigned long long)ss.accepted, (unsigned long long)ss.replayed);
    t_check(!st && amax > 0 && worst <= 1e-4 * amax && ss.accepted > 0 && ss.accepted < ss.drafted, name, "%s",
            st ? err.msg : "rows differ or no draft was accepted and rejected");
    free(buf);
    free(pb);
    hmoe_spec_free(s);
    hmoe_ctx_free(c);
    hmoe_ctx_free(plain);
}

/* From an empty context: the first token has no hidden state to draft from, the next ones do. */
static void from_empty(const struct hmoe_model *m) {
    enum { NG = 12 };
    const int V = m->cfg.n_vocab;
    struct hmoe_ctx *c = new_ctx(m, 1), *plain = new_ctx(m, 1);
    struct hmoe_spec *s = NULL;
    struct hmoe_err err = {0};
    float *pb = malloc(sizeof(float) * V);
    enum hmoe_status st = c && plain ? hmoe_spec_init(c, 2, &s, &err) : HMOE_ERR_NOMEM;
    int32_t id = 5;
    double worst = 0;
    const float *lg = NULL;
    for (int i = 0; !st && i < NG; i++) {
        if ((st = hmoe_spec_decode(s, id, i, &lg, &err)) ||
            (st = hmoe_ctx_decode(plain, &id, 1, i, HMOE_LOGITS_LAST, pb, &err)))
            break;
        for (int j = 0; j < V; j++) worst = fmax(worst, fabs((double)lg[j] - pb[j]));
        id = hmoe_argmax(lg, V);
    }
    struct hmoe_spec_stats ss = {0};
    if (s) hmoe_spec_get_stats(s, &ss);
    t_check(!st && worst == 0 && ss.drafted > 0, "--spec from an empty context: the plain rows, drafts after token 0",
            "%s max |d| %g, %llu drafted", st ? err.msg : "", worst, (unsigned long long)ss.drafted);
    free(pb);
    hmoe_spec_free(s);
    hmoe_ctx_free(c);
    hmoe_ctx_free(plain);
}

/* --- refusals ------------------------------------------------------------------------- */

static void refusals(const struct hmoe_model *m) {
    struct hmoe_err err = {0};
    struct hmoe_ctx *c = new_ctx(m, 1);
    struct hmoe_spec *s = NULL;
    enum hmoe_status st = hmoe_spec_init(c, 0, &s, &err);
    t_check(st == HMOE_ERR_ARG && !s && strstr(err.msg, "--draft-max"), "--draft-max 0 is refused", "%d %s", st,
            err.msg);
    st = hmoe_spec_init(c, HMOE_SPEC_DRAFT_MAX + 1, &s, &err);
    t_check(st == HMOE_ERR_ARG && !s, "--draft-max 17 is refused", "%d %s", st, err.msg);
    hmoe_ctx_free(c);

    char path[64];
    struct hmoe_model *m2 = NULL;
    st = write_tiny(path, NULL, "", &err);
    if (!st) st = hmoe_model_load(path, NULL, &m2, &err);
    if (!st) {
        c = new_ctx(m2, 1);
        st = hmoe_spec_init(c, 2, &s, &err);
        t_check(st == HMOE_ERR_UNSUPPORTED && !s && strstr(err.msg, "MTP block"),
                "a file without an MTP block: --spec mtp refused naming it", "%d %s", st, err.msg);
        hmoe_ctx_free(c);
    } else t_check(0, "file without an MTP block", "%s", err.msg);
    hmoe_model_free(m2);
    remove(path);

    static const char *missing[] = {"blk.4.nextn.eh_proj.weight", "blk.4.nextn.hnorm.weight", "blk.4.attn_q.weight",
                                    "blk.4.ffn_down_exps.weight"};
    for (size_t i = 0; i < sizeof missing / sizeof missing[0]; i++) {
        m2 = NULL;
        s = NULL;
        st = write_tiny(path, NULL, missing[i], &err);
        if (!st) st = hmoe_model_load(path, NULL, &m2, &err); /* the main layers are complete */
        char name[160];
        snprintf(name, sizeof name, "MTP block without %s: the model loads, --spec mtp is refused naming it", missing[i]);
        if (!st) {
            c = new_ctx(m2, 1);
            st = hmoe_spec_init(c, 2, &s, &err);
            t_check(st != HMOE_OK && !s && strstr(err.msg, missing[i]), name, "%d %s", st, err.msg);
            hmoe_ctx_free(c);
        } else t_check(0, name, "%s", err.msg);
        hmoe_model_free(m2);
        remove(path);
    }
}

int main(void) {
    hmoe_cpu_init();
    static const struct {
        const char *mix;
        double tol;
    } mixes[] = {{"f16", 2e-3}, {"q4_k_m", 3e-2}};
    for (size_t k = 0; k < sizeof mixes / sizeof mixes[0]; k++) {
        char path[64];
        struct hmoe_err err = {0};
        struct hmoe_model *m = NULL;
        enum hmoe_status st = write_tiny(path, mixes[k].mix, NULL, &err);
        if (!st) st = hmoe_model_load(path, NULL, &m, &err);
        t_check(!st && m->cfg.n_nextn == 1, "synth qwen35-tiny with an MTP block loads", "%s", err.msg);
        if (!st) {
            block_vs_reference(m, mixes[k].mix, mixes[k].tol);
            if (k == 1) {
                greedy_exact(m);
                follow_drafts(m, 1);
                follow_drafts(m, 3);
                from_empty(m);
                refusals(m);
            }
        }
        hmoe_model_free(m);
        remove(path);
    }
    return t_summary();
}
