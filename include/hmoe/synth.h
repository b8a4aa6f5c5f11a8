/* synth.h — random-weight GGUF files with the exact layout, hyperparameters and quant-type
 * mix of a real MoE model, for speed benchmarks (`hmoe synth`).
 *
 * A file is described by a plan (preset × mix × layers × vocabulary × routing), then
 * written in one streaming pass. Weights are random but numerically sane (weights of std
 * ≈ 0.02, finite fp16 scales), drawn from a pool of random blocks per type so that writing
 * 17 GB is bound by the disk; each tensor starts at its own pool phase and the pool length
 * is prime, so no two experts share bytes. Everything is deterministic in the seed.
 * Reference: ../shared/tools/gguf_synth.py (the file peers were measured on), quants.md §9
 * (llama-quantize type mixes), qwen3moe.md §1, §2, §8, tokenizer.md §1–§3.
 */
#ifndef HMOE_SYNTH_H
#define HMOE_SYNTH_H

#include "hmoe/common.h"
#include "hmoe/gguf.h"
#include "hmoe/types.h"

/* ---- presets (model shapes) --------------------------------------------------------- */

struct hmoe_synth_arch; /* private: tensor list and hparam keys of one architecture */

struct hmoe_synth_preset {
    const char *name;                       /* "qwen3-30b-a3b" */
    const struct hmoe_synth_arch *arch;     /* qwen3moe (qwen3moe.md §2), qwen35moe (qwen35moe.md §3), ... */
    uint32_t n_layer, n_embd, n_head, n_head_kv, head_dim;   /* n_layer: main layers (--layers) */
    uint32_t n_expert, n_expert_used, n_ff_exp;
    uint32_t n_ff;                          /* {arch}.feed_forward_length (unused by the graph; 0 = not written) */
    uint32_t n_vocab, n_ctx;
    float rope_freq_base, rms_eps;
    /* qwen35moe only (qwen35moe.md §2); zero for qwen3moe. */
    uint32_t n_nextn;                       /* MTP blocks written after the main layers (block_count = n_layer + n_nextn) */
    uint32_t full_attn_interval, n_ff_shexp, n_rot;
    uint32_t rope_sections[4];
    uint32_t ssm_conv_kernel, ssm_state_size, ssm_group_count, ssm_time_step_rank;
    /* nemotron_h_moe only (nemotron_h_moe.md §1-§2): one character per main layer, M Mamba-2,
     * '*' attention, E MoE (repeated past its end); the Mamba-2 inner size. NULL / 0 elsewhere. */
    const char *layer_pattern;
    uint32_t ssm_inner_size;
    /* gpt-oss only (gpt-oss.md): attention.sliding_window of the even layers. */
    uint32_t swa_window;
    const char *default_mix;                /* the mix without --mix; NULL = q4_k_m */
};

/* The preset called `name`, or NULL. */
const struct hmoe_synth_preset *hmoe_synth_find_preset(const char *name);
/* "qwen3-30b-a3b, qwen3-235b-a22b, tiny, qwen3.6-35b-a3b, qwen35-tiny" (for help and error messages). */
const char *hmoe_synth_preset_names(void);
/* nemotron_h_moe presets: the kind character of main layer i (synth_nemotron.c). */
char hmoe_synth_layer_kind(const struct hmoe_synth_preset *p, int i);

/* ---- mixes (which tensor gets which type; quants.md §9) ----------------------------- */

struct hmoe_synth_mix; /* private: one row of the rule table */

const struct hmoe_synth_mix *hmoe_synth_find_mix(const char *name);
const char *hmoe_synth_mix_names(void);
const char *hmoe_synth_mix_name(const struct hmoe_synth_mix *mix);
/* general.file_type (llama_ftype) the preset records (gguf.md §10.1). */
uint32_t hmoe_synth_mix_file_type(const struct hmoe_synth_mix *mix);

/* Per-tensor rule lists (--mix 'REGEX=TYPE,...', llama-quantize's --tensor-type spelling, or a
 * named rule preset: ud-q4_k_xl). Items are separated by commas; the first rule whose POSIX
 * extended regex (\d \w \s accepted) is found in a tensor's name gives its type; one item that
 * names a mix gives the types of the tensors no rule matches (default q4_k_m, *base). Tensors
 * kept in float (norms, routers, vectors) are not quantizable: only float-type rules (f32, f16,
 * bf16) apply to them. A quantized type whose blocks do not divide the rows falls back as
 * llama-quantize does. A rule of the user's own list that types no tensor is an error. */
struct hmoe_synth_rules;
bool hmoe_synth_mix_is_rules(const char *spec);
const char *hmoe_synth_rule_preset_names(void);
enum hmoe_status hmoe_synth_rules_parse(const char *spec, struct hmoe_synth_rules **out,
                                        const struct hmoe_synth_mix **base, struct hmoe_err *err);
void hmoe_synth_rules_free(struct hmoe_synth_rules *r);
const char *hmoe_synth_rules_label(const struct hmoe_synth_rules *r);
/* *type holds the mix's type for the tensor on entry; the first applicable rule replaces it.
 * After every tensor: check_used. */
void hmoe_synth_rules_apply(struct hmoe_synth_rules *r, const char *name, uint32_t n_dims, int64_t ne0,
                            enum hmoe_type *type);
enum hmoe_status hmoe_synth_rules_check_used(const struct hmoe_synth_rules *r, struct hmoe_err *err);

/* The type llama-quantize gives tensor `name` under `mix` (quants.md §9.1–§9.2), for a model
 * with the preset's block_count, head counts and expert count. `index` is the position the
 * rules count: the layer number for blk.N tensors (qwen3moe has one attn_v and one ffn_down
 * per layer, qwen35moe one attn_v-like tensor — attn_v or the DeltaNet's attn_qkv — so the
 * running counts of §9.1 equal the layer; n counts the MTP blocks too); -1 for global tensors.
 * n_dims/ne0: the tensor's dimensions and row length (1-D tensors are never quantized; rows
 * that do not fit the block size fall back as in §9.1). */
enum hmoe_type hmoe_synth_type_for_tensor(const struct hmoe_synth_preset *p, const struct hmoe_synth_mix *mix,
                                          const char *name, int index, uint32_t n_dims, int64_t ne0);

/* ---- random blocks ------------------------------------------------------------------ */

/* True when synth can generate blocks of type t. */
bool hmoe_synth_can_fill(enum hmoe_type t);
/* Fill n_blocks random, numerically sane blocks of type t (std ≈ 0.02 after dequantization;
 * every fp16 scale finite and positive). Deterministic in `seed`. */
enum hmoe_status hmoe_synth_fill_blocks(enum hmoe_type t, uint64_t seed, void *dst, size_t n_blocks,
                                        struct hmoe_err *err);

/* ---- generated vocabulary (tokenizer.md §1–§3) -------------------------------------- */

struct hmoe_synth_vocab {
    uint32_t n_tokens;               /* = n_vocab */
    struct hmoe_gguf_str *tokens;    /* byte-level BPE text (GPT-2 byte→unicode form) */
    int32_t *token_type;             /* 1 normal, 3 control, 4 user-defined, 5 unused */
    uint32_t n_merges;
    struct hmoe_gguf_str *merges;    /* "a b"; merge k creates token 256 + k */
    uint32_t bos_id, eos_id, pad_id;
    char *arena;                     /* backing store of every string */
};

/* A valid byte-level BPE vocabulary of n_vocab tokens, the same for every call: the 256
 * byte tokens (ids in GPT-2 order, as Qwen3), merges of existing tokens, the 26 Qwen3
 * added tokens (at their real ids 151643.. when n_vocab allows, else at the end) and
 * [PADn] fillers. n_vocab must be at least 282. */
enum hmoe_status hmoe_synth_vocab_init(struct hmoe_synth_vocab *v, uint32_t n_vocab, struct hmoe_err *err);
void hmoe_synth_vocab_free(struct hmoe_synth_vocab *v);
/* The Qwen3 chat template (fixtures/chat/qwen3-template.jinja, verbatim). */
const char *hmoe_synth_qwen3_chat_template(void);

/* ---- routing ------------------------------------------------------------------------ */

enum hmoe_synth_routing_kind {
    HMOE_SYNTH_ROUTING_UNIFORM, /* random router N(0, 0.05), as gguf_synth.py */
    HMOE_SYNTH_ROUTING_ZIPF,    /* expert popularity ∝ 1/rank^s per layer, see synth_route.c */
};

struct hmoe_synth_routing {
    enum hmoe_synth_routing_kind kind;
    double zipf_s;
};

/* Parse "uniform" or "zipf:S" (S > 0, e.g. zipf:1.0). */
enum hmoe_status hmoe_synth_parse_routing(const char *text, struct hmoe_synth_routing *out, struct hmoe_err *err);

/* The residual-stream dimensions that carry routing in a zipf file: [ch0, ch0 + n_ch0) hold a
 * value common to every token (the popularity bias), dims ch1 + j*stride1 (j < n_ch1) a
 * per-token random part (the noise; spread over the row so that no single block's scale
 * decides it). Attention and the output head never read them and no block writes them, so
 * they keep the embedding's values in every layer. Fails (UNSUPPORTED) when token_embd has
 * a single block per row (e.g. --preset tiny with a 256-element block type). */
struct hmoe_synth_channel {
    uint32_t ch0, n_ch0, ch1, n_ch1, stride1;
};
enum hmoe_status hmoe_synth_routing_channel(uint32_t n_embd, enum hmoe_type embd_type, struct hmoe_synth_channel *out,
                                            struct hmoe_err *err);

/* ---- plan and write ----------------------------------------------------------------- */

struct hmoe_synth_opts {
    const char *preset;          /* required */
    const char *mix;             /* NULL = "q4_k_m" */
    uint32_t n_layers;           /* 0 = the preset's */
    struct hmoe_synth_routing routing;
    uint64_t seed;
    const char *vocab_path;      /* NULL = generated vocabulary; else copy tokenizer.* keys from this GGUF */
};

struct hmoe_synth_tensor {
    char name[64];
    int layer;                   /* -1 for token_embd, output_norm, output */
    int role;                    /* private (synth_impl.h) */
    uint32_t n_dims;
    int64_t ne[4];
    enum hmoe_type type;
    uint64_t n_bytes;
};

struct hmoe_synth_plan {
    struct hmoe_synth_preset preset;       /* n_layer and n_vocab as written */
    const struct hmoe_synth_mix *mix;
    struct hmoe_synth_rules *rules;        /* --mix REGEX=TYPE rules over mix, or NULL */
    struct hmoe_synth_routing routing;
    uint64_t seed;
    struct hmoe_gguf *vocab_src;           /* --vocab file, or NULL */
    size_t n_tensors;
    struct hmoe_synth_tensor *tensors;     /* in file order */
    uint64_t data_bytes;                   /* tensor data, each tensor padded to 32 */
};

enum hmoe_status hmoe_synth_plan_init(struct hmoe_synth_plan *plan, const struct hmoe_synth_opts *opts,
                                      struct hmoe_err *err);
void hmoe_synth_plan_free(struct hmoe_synth_plan *plan);

/* Called after every chunk written; return false to cancel (the partial file is removed). */
typedef bool (*hmoe_synth_progress_fn)(void *ctx, uint64_t done_bytes, uint64_t total_bytes);

/* Write the planned file to `path`. On any failure or cancel the partial file is removed. */
enum hmoe_status hmoe_synth_write(const struct hmoe_synth_plan *plan, const char *path, hmoe_synth_progress_fn progress,
                                  void *progress_ctx, struct hmoe_err *err);

/* ---- routing statistics --------------------------------------------------------------- */

/* Which experts a file's routers pick, computed from token embeddings alone: for token t and
 * layer l, top-k of router_l · (ffn_norm_l ⊙ rmsnorm(token_embd[t])). Exact for every layer of
 * a zipf file (its routing channel keeps the embedding values through all layers). For other
 * files it ignores attention, which dominates the hidden state of random-weight models: a
 * real forward pass routes a "uniform" file far more skewed and with far more reuse between
 * consecutive tokens than this estimate says (see synth_route.c). */
struct hmoe_synth_route_stats {
    uint32_t n_layer, n_expert, n_used;
    uint64_t n_tokens;
    uint64_t *count;  /* [n_layer][n_expert]: times expert e was among the top-k */
    double *reuse;    /* [n_layer]: mean fraction of token t's experts that token t-1 also used */
};

/* Statistics over the token sequence tokens[0..n_tokens) (ids < n_vocab). Needs the
 * dequantizer of the token_embd type; routers and ffn_norm must be F32. */
enum hmoe_status hmoe_synth_route_stats_init(struct hmoe_synth_route_stats *s, const struct hmoe_gguf *g,
                                             const int32_t *tokens, uint64_t n_tokens, struct hmoe_err *err);
void hmoe_synth_route_stats_free(struct hmoe_synth_route_stats *s);
/* Share of all selections in `layer` that went to its `top_n` most selected experts. */
double hmoe_synth_route_top_share(const struct hmoe_synth_route_stats *s, uint32_t layer, uint32_t top_n);
/* Entropy (bits) of the expert-selection distribution of `layer` (log2(n_expert) = uniform). */
double hmoe_synth_route_entropy_bits(const struct hmoe_synth_route_stats *s, uint32_t layer);
/* The most selected expert of `layer`. */
uint32_t hmoe_synth_route_hottest(const struct hmoe_synth_route_stats *s, uint32_t layer);

#endif
