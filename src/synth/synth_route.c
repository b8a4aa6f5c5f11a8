/* synth_route.c — routing skew for synthetic qwen3moe files (`--routing zipf:S`) with no
 * extra tensors: a plain qwen3moe file that any engine runs. Builds the routers, and says
 * which residual dimensions the embeddings, norms and output rows must keep private.
 * Relies on the token_embd type's reference dequantizer (types.h) and on the forward pass
 * of qwen3moe.md §3–§4.
 *
 * Mechanism ("private routing channel"). A random router sees nothing common to all
 * tokens, so it routes uniformly. To make expert e of layer l popular with probability
 * p ∝ 1/rank^S (rank = a per-layer permutation of e), a few residual dimensions C carry
 * only embedding values, untouched by every layer, and the routers read only them:
 *   - token_embd: the first K blocks of every row are the same bytes, so dims [0, 32) hold
 *     a vector c common to every token; n_ch1 dims spread over the rest of the row (every
 *     stride1-th from ch1) are ordinary random per-token values r_t;
 *   - attn_norm and output_norm are 0 on C (attention and the output head never read C);
 *     ffn_norm is 1 on C; rows C of attn_output and of every expert's ffn_down are zero
 *     (no block writes C). So x[C] = token_embd[t][C] in every layer, exactly.
 *   - router row e of layer l: κ·β_e·c/|c|² on [0, 32), κ·σ_g·z_e/(√n_ch1·σ_emb) on the
 *     noise dims (z ~ N(0,1)), 0 elsewhere. Its logit is (√n_embd·κ/|x|)·(β_e + σ_g·ε_e(t))
 *     with ε ≈ N(0,1) per token, so top-k picks expert e about as often as Gumbel top-k
 *     sampling with weights p_e would (β = log p, σ_g see NOISE_SD); the positive factor
 *     in front changes no top-k.
 * Routing is then a fixed function of the token id (the same in every engine): repeated
 * tokens reuse experts; beyond that there is no temporal locality. κ = σ_emb puts layer-0
 * router logits at the usual O(1) scale. Needs at least 2 blocks per embedding row.
 * Checked: a float64 forward pass (fixtures/moe-tiny/ref_numpy.py) routes every token of
 * such a file, in every layer, to exactly the experts predicted from its embedding.
 * By contrast a "uniform" file (random router, gguf_synth.py's design) is not uniform in a
 * forward pass: attention output dominates the residual stream of a random-weight model and
 * changes slowly, so from layer 1 on the same float64 forward (30B shapes, 120 random ids)
 * puts 63-78 % of selections on 10 of 128 experts and consecutive tokens share 54-73 % of
 * their experts.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "synth_impl.h"

#define N_COMMON_DIMS 32u
#define MAX_NOISE_DIMS 128u
#define MIN_NOISE_DIMS 16u
/* Noise spread: a Gaussian ε with 1.3 times the Gumbel standard deviation (π/√6) makes top-8
 * of 128 agree with Gumbel top-k sampling of p ∝ 1/rank^S (top-10 share within ±0.01 for
 * S = 0.8..1.2, simulated); with exactly π/√6 the light Gaussian tails over-concentrate. */
#define NOISE_SD (1.3 * 1.2825498301618641)

enum hmoe_status hmoe_synth_parse_routing(const char *text, struct hmoe_synth_routing *out, struct hmoe_err *err) {
    memset(out, 0, sizeof *out);
    if (!text || strcmp(text, "uniform") == 0) return HMOE_OK;
    if (strncmp(text, "zipf:", 5) == 0) {
        char *end = NULL;
        errno = 0;
        double s = strtod(text + 5, &end);
        if (errno == 0 && end != text + 5 && *end == 0 && s > 0 && s <= 100) {
            out->kind = HMOE_SYNTH_ROUTING_ZIPF;
            out->zipf_s = s;
            return HMOE_OK;
        }
    }
    return HMOE_RAISE(err, HMOE_ERR_ARG, "unknown routing '%s': use uniform or zipf:S with 0 < S <= 100 (e.g. zipf:1.0)",
                      text);
}

enum hmoe_status hmoe_synth_routing_channel(uint32_t n_embd, enum hmoe_type embd_type, struct hmoe_synth_channel *out,
                                            struct hmoe_err *err) {
    uint32_t blck = (uint32_t)hmoe_type_info[embd_type].blck;
    uint32_t common = (N_COMMON_DIMS + blck - 1) / blck * blck; /* whole blocks holding dims [0, 32) */
    if (common + MIN_NOISE_DIMS > n_embd)
        return HMOE_RAISE(err, HMOE_ERR_UNSUPPORTED,
                          "zipf routing needs at least two %s blocks per token_embd row, but a row has %u elements "
                          "(try a larger preset, or --mix q8_0, whose 32-element blocks fit)",
                          hmoe_type_name(embd_type), n_embd);
    out->ch0 = 0;
    out->n_ch0 = N_COMMON_DIMS;
    out->ch1 = common;
    out->n_ch1 = HMOE_MIN(MAX_NOISE_DIMS, n_embd - common);
    out->stride1 = (n_embd - common) / out->n_ch1;
    return HMOE_OK;
}

bool synth_route_is_channel(const struct synth_route *r, uint32_t i) {
    const struct hmoe_synth_channel *c = &r->ch;
    if (i >= c->ch0 && i < c->ch0 + c->n_ch0) return true;
    return i >= c->ch1 && (i - c->ch1) % c->stride1 == 0 && (i - c->ch1) / c->stride1 < c->n_ch1;
}

enum hmoe_status synth_route_init(struct synth_route *r, const struct hmoe_synth_plan *plan,
                                  const struct synth_pool *embd_pool, struct hmoe_err *err) {
    memset(r, 0, sizeof *r);
    const struct hmoe_synth_preset *p = &plan->preset;
    enum hmoe_type t = embd_pool->type;
    enum hmoe_status st = hmoe_synth_routing_channel(p->n_embd, t, &r->ch, err);
    if (st != HMOE_OK) return st;
    const struct hmoe_type_info *ti = &hmoe_type_info[t];
    if (!ti->dequant_ref)
        return HMOE_RAISE(err, HMOE_ERR_UNSUPPORTED,
                          "zipf routing needs the %s dequantizer to know the embedding values, and this build has none",
                          ti->name);
    uint32_t blck = (uint32_t)ti->blck;
    r->common_block = embd_pool->data; /* pool blocks 0..K-1 start every token_embd row */

    /* c = the common values on [0, 32); σ_emb = rms of an embedding element (whole pool). */
    size_t n_pool = embd_pool->n_blocks * blck;
    float *vals = malloc(n_pool * sizeof *vals);
    r->router = malloc((size_t)p->n_expert * p->n_embd * sizeof *r->router);
    r->perm = malloc((size_t)p->n_expert * sizeof *r->perm);
    if (!vals || !r->router || !r->perm) {
        free(vals);
        synth_route_free(r);
        return HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory setting up zipf routing");
    }
    ti->dequant_ref(embd_pool->data, vals, (int64_t)n_pool);
    double ss = 0, cc = 0;
    for (size_t i = 0; i < n_pool; i++) ss += (double)vals[i] * vals[i];
    for (uint32_t i = 0; i < N_COMMON_DIMS; i++) {
        r->common[i] = vals[i];
        cc += (double)vals[i] * vals[i];
    }
    free(vals);
    r->sigma_emb = sqrt(ss / (double)n_pool);
    r->common_sq = cc;
    if (!(cc > 0) || !(r->sigma_emb > 0)) {
        synth_route_free(r);
        return HMOE_RAISE(err, HMOE_ERR_INTERNAL, "zipf routing: the common embedding block is zero");
    }
    r->n_expert = p->n_expert;
    r->n_embd = p->n_embd;
    r->zipf_s = plan->routing.zipf_s;
    r->seed = plan->seed;
    return HMOE_OK;
}

/* Router of layer l, [n_expert][n_embd] floats (ne0 = n_embd, one row per expert). */
void synth_route_router(struct synth_route *r, int layer, float *out) {
    struct synth_rng rng;
    synth_rng_init(&rng, r->seed, 0x70757465ull + (uint64_t)layer);
    uint32_t n_e = r->n_expert;
    /* popularity rank of expert e in this layer: a random permutation (Fisher–Yates) */
    for (uint32_t e = 0; e < n_e; e++) r->perm[e] = e;
    for (uint32_t e = n_e - 1; e > 0; e--) {
        uint32_t k = (uint32_t)synth_rng_below(&rng, (uint64_t)e + 1), tmp = r->perm[e];
        r->perm[e] = r->perm[k];
        r->perm[k] = tmp;
    }
    double kappa = r->sigma_emb;
    double noise = kappa * NOISE_SD / (sqrt((double)r->ch.n_ch1) * r->sigma_emb);
    memset(out, 0, (size_t)n_e * r->n_embd * sizeof *out);
    for (uint32_t e = 0; e < n_e; e++) {
        float *row = out + (size_t)e * r->n_embd;
        double beta = -r->zipf_s * log(1.0 + r->perm[e]); /* log p_rank - log p_0 */
        for (uint32_t i = 0; i < r->ch.n_ch0; i++) row[r->ch.ch0 + i] = (float)(kappa * beta * r->common[i] / r->common_sq);
        for (uint32_t j = 0; j < r->ch.n_ch1; j++)
            row[r->ch.ch1 + j * r->ch.stride1] = (float)(noise * synth_rng_normal(&rng));
    }
}

void synth_route_free(struct synth_route *r) {
    free(r->router);
    free(r->perm);
    r->router = NULL;
    r->perm = NULL;
}
