/* synth_impl.h — private to src/model/synth*.c: tensor roles, the architecture descriptor
 * behind a preset, and the small deterministic random number generator every part shares.
 */
#ifndef HMOE_SYNTH_IMPL_H
#define HMOE_SYNTH_IMPL_H

#include <math.h>

#include "hmoe/arch.h"
#include "hmoe/gguf_write.h"
#include "hmoe/synth.h"

/* What a tensor is, for filling it (norm, router, matrix) and for routing skew. */
enum synth_role {
    SYNTH_TOKEN_EMBD,
    SYNTH_OUTPUT_NORM,
    SYNTH_OUTPUT,
    SYNTH_ATTN_NORM,
    SYNTH_ATTN_Q,
    SYNTH_ATTN_K,
    SYNTH_ATTN_V,
    SYNTH_ATTN_OUTPUT,
    SYNTH_ATTN_Q_NORM,
    SYNTH_ATTN_K_NORM,
    SYNTH_FFN_NORM,
    SYNTH_FFN_ROUTER,
    SYNTH_FFN_GATE_EXPS,
    SYNTH_FFN_UP_EXPS,
    SYNTH_FFN_DOWN_EXPS,
    /* qwen35moe (qwen35moe.md §3) */
    SYNTH_MATRIX,          /* a plain matrix nothing else needs to know about (attn_gate, ssm_alpha, ...) */
    SYNTH_NORM,            /* another RMSNorm weight (ssm_norm, MTP norms): 1 +- 0.02 */
    SYNTH_SSM_CONV,        /* ssm_conv1d {K, conv_dim} F32 taps */
    SYNTH_SSM_DT,          /* ssm_dt.bias */
    SYNTH_SSM_A,           /* ssm_a = -exp(A_log): negative, or the state grows without bound */
    SYNTH_SSM_OUT,         /* ssm_out: writes the residual stream like attn_output */
    SYNTH_SHEXP_GATE_INP,  /* ffn_gate_inp_shexp {d}: a router-like vector */
    SYNTH_FFN_DOWN_SHEXP,  /* writes the residual stream like ffn_down_exps */
    /* gpt-oss (gpt-oss.md "Tensors") */
    SYNTH_BIAS,            /* a bias or sink logit: N(0, 0.02), F32 */
    SYNTH_RESID_BIAS,      /* a bias added to the residual stream (attn_output, ffn_down_exps) */
};

/* One architecture: its tensor list (names, shapes, roles, file order) and its hparam keys. */
struct hmoe_synth_arch {
    const char *name; /* general.architecture */
    bool qwen3_template;        /* write the Qwen3 chat template (qwen35moe: none; the CLI picks Qwen3.5 by pre) */
    /* Fill out[] (capacity max) with the tensors of preset p, types left unset; returns the
     * count, or 0 if max is too small. */
    size_t (*list_tensors)(const struct hmoe_synth_preset *p, struct hmoe_synth_tensor *out, size_t max);
    size_t (*max_tensors)(const struct hmoe_synth_preset *p);
    enum hmoe_status (*add_hparams)(struct hmoe_gguf_writer *w, const struct hmoe_synth_preset *p, struct hmoe_err *err);
};

extern const struct hmoe_synth_arch hmoe_synth_arch_qwen3moe;
extern const struct hmoe_synth_arch hmoe_synth_arch_qwen35moe; /* synth_qwen35.c */
extern const struct hmoe_synth_arch hmoe_synth_arch_nemotron_h_moe; /* synth_nemotron.c */
extern const struct hmoe_synth_arch hmoe_synth_arch_gptoss;         /* synth_gptoss.c */
#define HMOE_SYNTH_GPTOSS_N_PRESETS 3
extern const struct hmoe_synth_preset hmoe_synth_gptoss_presets[HMOE_SYNTH_GPTOSS_N_PRESETS];

/* Fill a tensor descriptor (synth_preset.c): blk.N.name when layer >= 0. */
void hmoe_synth_put_tensor(struct hmoe_synth_tensor *t, const char *name, int layer, int role, uint32_t n_dims,
                           int64_t ne0, int64_t ne1, int64_t ne2);

/* ---- splitmix64 / xoshiro256**: fast, deterministic, good enough for test data -------- */

struct synth_rng {
    uint64_t s[4];
};

static inline uint64_t synth_splitmix(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Seed from a seed and a stream id (tensor index, type id, ...): independent streams. */
static inline void synth_rng_init(struct synth_rng *r, uint64_t seed, uint64_t stream) {
    uint64_t x = seed ^ (stream * 0xd1b54a32d192ed03ull);
    for (int i = 0; i < 4; i++) r->s[i] = synth_splitmix(&x);
}

static inline uint64_t synth_rng_u64(struct synth_rng *r) {
    uint64_t *s = r->s;
    uint64_t x = s[1] * 5;
    uint64_t result = ((x << 7) | (x >> 57)) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = (s[3] << 45) | (s[3] >> 19);
    return result;
}

/* Uniform in [0, 1). */
static inline double synth_rng_uniform(struct synth_rng *r) { return (double)(synth_rng_u64(r) >> 11) * 0x1.0p-53; }

/* Uniform integer in [0, n). */
static inline uint64_t synth_rng_below(struct synth_rng *r, uint64_t n) { return synth_rng_u64(r) % n; }

/* Standard normal (Box–Muller; one value per call is plenty fast here). */
static inline double synth_rng_normal(struct synth_rng *r) {
    double u1 = synth_rng_uniform(r), u2 = synth_rng_uniform(r);
    if (u1 < 1e-300) u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* Pool of random blocks of one type (synth_blocks.c): 2 * n_blocks blocks, the second
 * half a copy of the first, so that any window of n_blocks blocks is contiguous. */
struct synth_pool {
    enum hmoe_type type;
    size_t block_bytes, n_blocks;
    uint8_t *data;
};
enum hmoe_status synth_pool_init(struct synth_pool *pool, enum hmoe_type t, uint64_t seed, struct hmoe_err *err);
void synth_pool_free(struct synth_pool *pool);

/* Routing skew (synth_route.c): what makes a zipf file route with skew. */
struct synth_route {
    struct hmoe_synth_channel ch;
    const uint8_t *common_block; /* the ch.ch1 / blck blocks that start every token_embd row */
    float common[32];            /* their values on [ch0, ch0 + n_ch0) */
    double common_sq;            /* |c|^2 */
    double sigma_emb;            /* rms of one embedding element */
    uint32_t n_expert, n_embd;
    double zipf_s;
    uint64_t seed;
    float *router;               /* scratch: one layer's router, [n_expert][n_embd] */
    uint32_t *perm;              /* scratch: popularity rank of each expert */
};
enum hmoe_status synth_route_init(struct synth_route *r, const struct hmoe_synth_plan *plan,
                                  const struct synth_pool *embd_pool, struct hmoe_err *err);
void synth_route_free(struct synth_route *r);
/* Fill r->router with the router of `layer`. */
void synth_route_router(struct synth_route *r, int layer, float *out);
/* True if residual dimension i is a routing channel dimension. */
bool synth_route_is_channel(const struct synth_route *r, uint32_t i);

#endif
