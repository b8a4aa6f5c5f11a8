/* model.h — load a MoE model from GGUF, run its forward pass (CPU threads, or the GPU backend
 * with hmoe_ctx_params.gpu: all on the GPU, or hybrid with experts in RAM), sample tokens.
 *
 * Three structs name the problem (style-examples.md §1): hmoe_model_config (hyper-parameters
 * read and validated from the GGUF metadata), hmoe_model_weights (views into the file
 * mapping, one shape comment per field, ggml order: ne0 contiguous) and the run state of a
 * context (src/model/model_impl.h: every scratch buffer and the KV cache, allocated once by
 * hmoe_ctx_init; decoding allocates nothing). The supported architectures are the entries
 * of the architecture table (arch.h, src/model/arch/). Sampling follows llama.cpp's default
 * sampler chain.
 */
#ifndef HMOE_MODEL_H
#define HMOE_MODEL_H

#include "hmoe/common.h"
#include "hmoe/gguf.h"
#include "hmoe/sched.h"
#include "hmoe/types.h"

/* --- configuration ---------------------------------------------------------------- */

enum hmoe_rope_scaling {
    HMOE_ROPE_SCALING_NONE = 0,   /* also "linear" with factor 1 */
    HMOE_ROPE_SCALING_LINEAR = 1, /* theta *= freq_scale (qwen3moe.md §5.1) */
    HMOE_ROPE_SCALING_YARN = 2,   /* qwen3moe.md §5.2 */
};

struct hmoe_arch; /* the architecture's table entry (arch.h) */

struct hmoe_model_config {
    char arch[32];          /* general.architecture ("qwen3moe", "qwen35moe") */
    const struct hmoe_arch *arch_entry; /* its entry in the architecture table (arch.h) */
    int n_layer;            /* main layers: {arch}.block_count - nextn_predict_layers */
    int n_embd;             /* d: {arch}.embedding_length */
    int n_head;             /* H: {arch}.attention.head_count */
    int n_head_kv;          /* Hkv: {arch}.attention.head_count_kv (default H) */
    int head_dim;           /* D of Q and K: {arch}.attention.key_length (NOT d/H for Qwen3) */
    int head_dim_v;         /* D of V: {arch}.attention.value_length (default key_length) */
    int n_rot;              /* rotated dims per head: rope.dimension_count, default head_dim */
    int n_expert;           /* E: {arch}.expert_count */
    int n_expert_used;      /* k: {arch}.expert_used_count */
    int n_ff_exp;           /* F: {arch}.expert_feed_forward_length (else feed_forward_length / k) */
    int n_vocab;            /* V: length of tokenizer.ggml.tokens (else token_embd ne1) */
    int n_ctx_train;        /* {arch}.context_length */
    float rms_eps;          /* {arch}.attention.layer_norm_rms_epsilon (required) */
    float rope_freq_base;   /* {arch}.rope.freq_base (default 10000) */
    enum hmoe_rope_scaling rope_scaling;
    float rope_freq_scale;  /* 1 / rope.scaling.factor (1 = no scaling) */
    int rope_n_ctx_orig;    /* YaRN original context (default context_length) */
    float rope_attn_factor; /* rope.scaling.attn_factor (default 1) */
    bool tied_output;       /* no output.weight: the LM head reuses token_embd */
    /* qwen35moe only (qwen35moe.md §1-§2); 0 for qwen3moe. */
    int n_nextn;            /* {arch}.nextn_predict_layers: MTP blocks after the main layers (drafts of --spec mtp) */
    int full_attn_interval; /* layer i is full attention iff (i+1) % interval == 0 (default 4) */
    int n_ff_shexp;         /* Fs: {arch}.expert_shared_feed_forward_length */
    int rope_sections[4];   /* {arch}.rope.dimension_sections, in rotation pairs (t, h, w, e) */
    int ssm_conv_kernel;    /* K: {arch}.ssm.conv_kernel */
    int ssm_head_dim;       /* Dk = Dv: {arch}.ssm.state_size */
    int ssm_n_k_head;       /* Hk: {arch}.ssm.group_count (q/k heads of Gated DeltaNet) */
    int ssm_n_v_head;       /* Hv: {arch}.ssm.time_step_rank (value heads) */
    /* nemotron_h / nemotron_h_moe only (nemotron_h_moe.md §2); 0 elsewhere. Layer kinds come
     * from the per-layer arrays and live in hmoe_layer_weights (mamba / ffn_only). */
    int ssm_d_inner;        /* d_inner = n_ssm_head * P: {arch}.ssm.inner_size */
    int ssm_d_state;        /* N: {arch}.ssm.state_size */
    int ssm_n_group;        /* G: {arch}.ssm.group_count (B/C groups = gated-norm groups) */
    int ssm_n_head;         /* Mamba heads: {arch}.ssm.time_step_rank */
    int n_ff_dense;         /* widest dense FFN layer (nemotron_h), 0 without dense layers */
    int moe_latent;         /* m: {arch}.moe_latent_size (latent routed experts), 0 = none */
    bool exp_w_norm;        /* {arch}.expert_weights_norm: renormalise the top-k weights */
    float exp_w_scale;      /* {arch}.expert_weights_scale (0 or 1: none) */
    int exp_n_group, exp_n_group_used; /* {arch}.expert_group_count / _used_count (1 / 1: no groups) */
    /* Sliding-window attention (gpt-oss.md); 0 = every layer attends the whole causal prefix. */
    int swa_window;         /* {arch}.attention.sliding_window: key t is seen from p iff p - t < window */
    int swa_period;         /* layer i uses the window iff i % period < period - 1 (gpt-oss: 2, even layers) */
};

/* Load-time overrides (0 / NONE-with-has_rope_scaling=false keep the file's values):
 * the equivalent of llama.cpp's --rope-scaling/--rope-scale/--yarn-orig-ctx/--rope-freq-base. */
struct hmoe_model_params {
    bool has_rope_scaling;          /* use rope_scaling below instead of the file's */
    enum hmoe_rope_scaling rope_scaling;
    float rope_scale;               /* factor s (> 0), 0 = file */
    int yarn_orig_ctx;              /* 0 = file */
    float rope_freq_base;           /* 0 = file */
    bool no_mmap;                   /* read the file into huge-page RAM instead of mapping it (hmoe_gguf_open_ram) */
    bool mlock;                     /* keep the weights in RAM (mlock): never evicted, never swapped */
};

/* --- weights: views into the GGUF mapping ------------------------------------------ */

/* Gated DeltaNet mixer of a qwen35moe linear-attention layer (qwen35moe.md §3, §5.2).
 * key_dim = Hk*Dk, value_dim = Hv*Dv, conv_dim = 2*key_dim + value_dim. */
struct hmoe_gdn_weights {
    struct hmoe_mat qkv;          /* attn_qkv   {d, conv_dim}: [q | k | v] */
    struct hmoe_mat gate;         /* attn_gate  {d, value_dim}: z, the output-gate input */
    struct hmoe_mat alpha;        /* ssm_alpha  {d, Hv}: decay input */
    struct hmoe_mat beta;         /* ssm_beta   {d, Hv}: beta input */
    const float *conv1d;          /* ssm_conv1d {K, conv_dim} F32: K taps per channel, tap K-1 = current token */
    const float *dt_bias;         /* ssm_dt.bias {Hv} F32 */
    const float *a;               /* ssm_a {Hv} F32, = -exp(A_log) (already negative) */
    const float *norm;            /* ssm_norm {Dv} F32, no +1 folded in */
    struct hmoe_mat out;          /* ssm_out    {value_dim, d} */
};

/* Shared expert of a qwen35moe layer (qwen35moe.md §7): always active, scaled by
 * sigmoid(gate_inp · h2). */
struct hmoe_shexp_weights {
    struct hmoe_mat gate_inp;     /* ffn_gate_inp_shexp {d} F32, viewed as a {d, 1} matrix */
    struct hmoe_mat gate;         /* ffn_gate_shexp {d, Fs} */
    struct hmoe_mat up;           /* ffn_up_shexp   {d, Fs} */
    struct hmoe_mat down;         /* ffn_down_shexp {Fs, d} */
};

/* Mamba-2 mixer of a nemotron_h layer (nemotron_h_moe.md §3-§4). d_in_proj = 2*d_inner +
 * 2*G*N + n_head, conv_dim = d_inner + 2*G*N. */
struct hmoe_mamba2_weights {
    struct hmoe_mat in;           /* ssm_in {d, d_in_proj}: [z | x B C (conv_dim) | dt] */
    const float *conv1d;          /* ssm_conv1d {K, conv_dim} F32: K taps per channel, tap K-1 = current token */
    const float *conv_bias;       /* ssm_conv1d.bias {conv_dim} F32, or NULL */
    const float *dt_bias;         /* ssm_dt.bias {n_head} */
    const float *a;               /* ssm_a {n_head}: A = -exp(A_log), already negative */
    const float *d;               /* ssm_d {n_head}: skip coefficient */
    const float *norm;            /* ssm_norm {d_inner/G, G}: gated-RMSNorm weight per channel */
    struct hmoe_mat out;          /* ssm_out {d_inner, d} */
};

/* Inputs of a multi-token-prediction block (qwen35moe.md §8): the projection of the joined
 * [normed embedding | normed hidden state] back to d, and the two norms. Bound only on the
 * MTP block's layer (mtp.c); zero-sized views elsewhere. */
struct hmoe_nextn_weights {
    struct hmoe_mat eh_proj;      /* nextn.eh_proj {2d, d}: embedding half first */
    const float *enorm;           /* nextn.enorm {d} F32 */
    const float *hnorm;           /* nextn.hnorm {d} F32 */
};

struct hmoe_layer_weights {
    bool recurrent;               /* recurrent mixer (qwen35moe Gated DeltaNet, nemotron_h Mamba-2): no KV cache */
    bool ffn_only;                /* nemotron_h FFN layer: one pre-norm, no mixer, no KV cache */
    const float *attn_norm;       /* {d} F32 */
    struct hmoe_mat attn_q;       /* {d, H*D}   (a row range of attn_qkv when the file fuses Q/K/V);
                                     qwen35moe: {d, 2*H*D}, per head [query D | gate D] */
    struct hmoe_mat attn_k;       /* {d, Hkv*D} */
    struct hmoe_mat attn_v;       /* {d, Hkv*Dv} */
    const float *attn_q_bias;     /* {H*D} F32, or NULL (official Qwen3 files have none) */
    const float *attn_k_bias;     /* {Hkv*D} or NULL */
    const float *attn_v_bias;     /* {Hkv*Dv} or NULL */
    const float *attn_q_norm;     /* {D} F32, shared by every Q head */
    const float *attn_k_norm;     /* {D} F32, shared by every K head */
    struct hmoe_mat attn_output;  /* {H*Dv, d} */
    const float *attn_output_bias; /* {d} F32 or NULL (gpt-oss, nemotron_h) */
    const float *attn_sinks;      /* {H} F32 or NULL: one extra softmax logit per query head, no value (gpt-oss) */
    int attn_window;              /* sliding window of this layer in positions, 0 = full causal */
    const float *ffn_norm;        /* {d} F32 (qwen35moe, gpt-oss: post_attention_norm) */
    struct hmoe_moe_weights moe;  /* router {d,E} F32, gate/up {d,F,E}, down {F,d,E} */
    struct hmoe_gdn_weights gdn;  /* qwen35moe, recurrent layers */
    struct hmoe_shexp_weights shexp; /* qwen35moe; nemotron_h_moe: up/down only (ReLU², no gate) */
    struct hmoe_mamba2_weights mamba; /* nemotron_h Mamba-2 layers */
    struct hmoe_mat ffn_up, ffn_down; /* nemotron_h dense FFN {d, F} / {F, d} (ReLU², no gate) */
    const float *ffn_up_bias, *ffn_down_bias; /* {F} / {d} or NULL */
    struct hmoe_mat latent_down, latent_up; /* nemotron_h_moe latent MoE: {d, m} / {m, d}; n_in 0 = none */
    struct hmoe_nextn_weights nextn; /* the MTP block's inputs (mtp.c), n_in 0 on main layers */
};

struct hmoe_model_weights {
    struct hmoe_mat token_embd;        /* {d, V}: rows dequantized on lookup */
    const float *output_norm;          /* {d} F32 */
    struct hmoe_mat output;            /* {d, V}: LM head (token_embd when tied) */
    struct hmoe_layer_weights *layers; /* [n_layer] */
};

/* A vector stored in 16 bits in the file, widened to F32 at load (norms of "dynamic" quants). */
struct hmoe_model_vec {
    struct hmoe_model_vec *next;
    float v[];
};

struct hmoe_model {
    struct hmoe_gguf *gguf;            /* owns the mapping every weight view points into */
    struct hmoe_model_config cfg;
    struct hmoe_model_weights w;
    uint64_t weight_bytes;             /* bytes of all tensors bound as weights */
    struct hmoe_model_vec *widened;    /* the F16/BF16 vectors' F32 copies (freed with the model) */
};

/* Open `path`, check the architecture (an unsupported one is named, with the supported
 * list), read and validate the hyper-parameters, and bind every tensor with its expected
 * shape ("tensor blk.3.ffn_down_exps.weight has shape [..] but qwen3moe needs [..]") and a
 * type that has CPU kernels. params may be NULL. Weights stay in the mapping. */
enum hmoe_status hmoe_model_load(const char *path, const struct hmoe_model_params *params, struct hmoe_model **out,
                                 struct hmoe_err *err);
/* Same on an already-open GGUF. On success the model owns `g` (freed by hmoe_model_free);
 * on failure `g` stays the caller's. */
enum hmoe_status hmoe_model_load_gguf(struct hmoe_gguf *g, const struct hmoe_model_params *params,
                                      struct hmoe_model **out, struct hmoe_err *err);
void hmoe_model_free(struct hmoe_model *m);

/* Comma-separated list of supported architectures (for messages and --help). */
const char *hmoe_model_supported_archs(void);

/* --- context: run state + KV cache ------------------------------------------------- */

/* Which backend runs the forward pass. AUTO: the GPU when this build has CUDA and a device
 * answers, else the CPU. ON: the GPU or an error. */
enum hmoe_gpu_mode { HMOE_GPU_OFF = 0, HMOE_GPU_AUTO = 1, HMOE_GPU_ON = 2 };
bool hmoe_gpu_mode_from_name(const char *name, enum hmoe_gpu_mode *out); /* auto|on|off */

struct hmoe_ctx_params {
    int n_ctx;              /* KV cache positions of all sequences together (default 4096); each of the
                               n_seq sequences gets n_ctx / n_seq of them (llama-server's -c with -np) */
    int n_seq;              /* sequences the context holds, 1 .. HMOE_MAX_SEQ (default 1; -np) */
    enum hmoe_type type_k;  /* KV cache types: F32, F16 (default), BF16 or Q8_0 */
    enum hmoe_type type_v;
    int n_threads;          /* OpenMP threads (default: physical cores) */
    int n_ubatch;           /* tokens per forward micro-batch (default 512) */
    enum hmoe_gpu_mode gpu; /* backend: OFF (the library default), AUTO or ON (--gpu) */
    int gpu_device;         /* CUDA device index (default 0) */
    struct hmoe_sched_gpu_params sched; /* VRAM budget, expert placement and cache (sched.h) */
    bool verbose;           /* time every GPU step and keep per-layer statistics (hmoe_ctx_report) */
};
void hmoe_ctx_params_default(struct hmoe_ctx_params *p);

/* Parse a KV cache type name (one of HMOE_KV_TYPE_NAMES, case-insensitive), as llama.cpp's
 * -ctk/-ctv spell them. */
#define HMOE_KV_TYPE_NAMES "f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1 or iq4_nl"
bool hmoe_kv_type_from_name(const char *name, enum hmoe_type *out);

struct hmoe_ctx;

/* Most sequences one context holds (hmoe_ctx_params.n_seq). */
#define HMOE_MAX_SEQ 64

/* Allocate the run state and the KV cache for `m` (which must outlive the context). One
 * pool holds the KV cache of every sequence: sequence s owns the positions of a cache of
 * n_ctx / n_seq positions carved from it (a fixed split, as llama-server without
 * --kv-unified); the GPU backend splits its VRAM KV cache the same way. An architecture with
 * recurrent state (qwen35moe, nemotron) is kept on the GPU for one sequence: n_seq > 1 with
 * --gpu on is HMOE_ERR_UNSUPPORTED, with --gpu auto it runs on the CPU (with a note). */
enum hmoe_status hmoe_ctx_init(const struct hmoe_model *m, const struct hmoe_ctx_params *p, struct hmoe_ctx **out,
                               struct hmoe_err *err);
void hmoe_ctx_free(struct hmoe_ctx *c);

enum hmoe_logits {
    HMOE_LOGITS_NONE = 0, /* fill the KV cache only */
    HMOE_LOGITS_LAST = 1, /* logits_out: n_vocab floats for the last token */
    HMOE_LOGITS_ALL = 2,  /* logits_out: n × n_vocab floats, row i = after ids[0..i] */
};

/* Run n tokens at positions pos0 .. pos0+n-1 (split into micro-batches of n_ubatch), adding
 * them to the KV cache. pos0 may be at most hmoe_ctx_n_past(): positions from pos0 on are
 * replaced (this is how a chat rewinds). HMOE_ERR_RANGE, with the size needed and the flag
 * to raise, when pos0 + n exceeds the context; bad token ids are HMOE_ERR_RANGE too. */
enum hmoe_status hmoe_ctx_decode(struct hmoe_ctx *c, const int32_t *ids, int n, int pos0, enum hmoe_logits which,
                                 float *logits_out, struct hmoe_err *err);

int hmoe_ctx_n_past(const struct hmoe_ctx *c);  /* positions held in the KV cache */
int hmoe_ctx_n_ctx(const struct hmoe_ctx *c);   /* capacity of one sequence */

/* --- several sequences in one context ---------------------------------------------- */

int hmoe_ctx_n_seq(const struct hmoe_ctx *c);
/* Make sequence s (0 .. n_seq-1) the one that the single-sequence calls act on:
 * hmoe_ctx_decode, _n_past, _truncate, _reset, _shift, _checkpoint. A new context uses 0. */
enum hmoe_status hmoe_ctx_use_seq(struct hmoe_ctx *c, int s, struct hmoe_err *err);
int hmoe_ctx_cur_seq(const struct hmoe_ctx *c);

/* One sequence's share of a batched step: n tokens at positions pos0 .. pos0+n-1 of
 * sequence seq, with the rules of hmoe_ctx_decode (pos0 <= its n_past rewinds it). */
struct hmoe_seq_tokens {
    int seq;
    const int32_t *ids;
    int n;
    int pos0;
    bool logits;            /* logits after its last token */
};

/* One step of several sequences (each at most once): their rows go through the model as
 * micro-batches of up to n_ubatch rows in which the dense matmuls, the router and the MoE
 * (rows grouped by expert, each routed expert read once per micro-batch) serve every row
 * at once, while attention and the recurrent state run per sequence over its own cache.
 * A sequence's decode token and another's prefill chunk mix freely; a share longer than
 * the room left in a micro-batch continues in the next. logits_out gets n_vocab floats
 * per share with logits, in the order of `seqs`. The selected sequence (hmoe_ctx_use_seq)
 * is unchanged. On the GPU a single share goes through hmoe_ctx_decode on its sequence (a
 * decode token replays that sequence's graph); several shares are one eager step. */
enum hmoe_status hmoe_ctx_decode_batch(struct hmoe_ctx *c, const struct hmoe_seq_tokens *seqs, int n_seqs,
                                       float *logits_out, struct hmoe_err *err);
const struct hmoe_ctx_params *hmoe_ctx_get_params(const struct hmoe_ctx *c);
size_t hmoe_ctx_kv_bytes(const struct hmoe_ctx *c);
/* "cpu", "cuda" (everything on the GPU) or "cuda+cpu" (hybrid: some experts in RAM). */
const char *hmoe_ctx_backend(const struct hmoe_ctx *c);
/* Human-readable report of the GPU backend, owned by the context (valid until the next call):
 * the placement plan and VRAM breakdown (weights by group, KV cache, buffers, expert cache),
 * the real peak, and with verbose the step statistics (GPU ms/token, hit rates per layer, CPU
 * expert ms/token, handoff waits, PCIe traffic). "" on the CPU backend. */
const char *hmoe_ctx_report(struct hmoe_ctx *c);

/* Numbers for `hmoe bench` (zeros where not applicable). */
struct hmoe_ctx_stats {
    uint64_t vram_budget_bytes, vram_peak_bytes, vram_used_bytes;
    /* the VRAM plan of the load (gpu_init.c) and the process's measured use of the device as
     * nvidia-smi counts it (context included) */
    uint64_t vram_plan_bytes, vram_context_bytes, vram_reserve_bytes, vram_kv_bytes, vram_resident_bytes,
        vram_cache_bytes, vram_buffers_bytes, vram_device_peak_bytes, vram_device_used_bytes;
    int vram_cache_slots;
    uint64_t decode_tokens;      /* single-token steps since the last reset of the statistics */
    double gpu_ms_per_token;     /* device time of a decode step (verbose only) */
    double cpu_expert_ms_per_token; /* CPU time spent on missed experts per decode step */
    double cache_hit_rate;       /* expert hits / expert uses (1 when all resident; without an expert cache
                                    the share of MoE layers whose experts are resident) */
    double pcie_gbps;            /* expert bytes copied host->device / wall time of the steps */
    double h2d_gbps_probe;       /* pinned host->device bandwidth measured at init (hybrid) */
    uint64_t pinned_bytes;       /* host memory page-locked for the device (hybrid RAM layers) */
    double gpu_wait_us_per_layer; /* GPU waiting for the CPU's result, per hybrid layer and token */
    uint64_t ram_experts;        /* experts of the layers kept in RAM (hybrid) */
    uint64_t cached_experts;     /* of those, in a VRAM cache slot now */
    uint64_t prefill_streamed_experts; /* expert copies made by streamed prefill since the last reset */
    uint64_t xfer_experts;       /* decode misses read over PCIe and computed by the GPU (--moe-miss transfer) */
    uint64_t prefetch_pred, prefetch_correct, prefetch_fills; /* next-layer prefetch (--prefetch on) */
    double cpu_expert_gbps;      /* hybrid decode: missed-expert bytes / CPU expert phase time (0: none) */
    double handoff_in_us, handoff_out_us; /* hybrid decode, per layer with CPU misses (sched.h) */
};
void hmoe_ctx_get_stats(const struct hmoe_ctx *c, struct hmoe_ctx_stats *out);
/* The CPU MoE's expert reads since the last call (sched.h hmoe_sched_moe_reads; zeros on the
 * GPU backend and for models without MoE layers), then reset. */
void hmoe_ctx_take_moe_reads(struct hmoe_ctx *c, struct hmoe_sched_moe_reads *out);
void hmoe_ctx_reset_stats(struct hmoe_ctx *c);

/* Forget positions >= n_keep (n_keep <= n_past); hmoe_ctx_reset() is hmoe_ctx_truncate(c, 0).
 * Models with recurrent state (Gated DeltaNet, Mamba-2 layers) cannot rewind that state to
 * any position: it goes back to the newest checkpoint at or before n_keep (or to the empty
 * state), and the next hmoe_ctx_decode first re-runs the remembered tokens from there to
 * n_keep, transparently.
 * So truncate stays cheap, n_past becomes n_keep as always, and a rewind costs at most a
 * re-prefill from the last checkpoint (recurrent.c). */
void hmoe_ctx_truncate(struct hmoe_ctx *c, int n_keep);
/* llama.cpp's context shift: drop the cached positions [n_keep, n_keep + n_discard) and move
 * the later ones down by n_discard (K re-rotated to its new position), so n_past falls by
 * n_discard and decoding continues at the new n_past. CPU caches of models without
 * recurrent layers only: a GPU context or a recurrent model is HMOE_ERR_UNSUPPORTED with a
 * message; bad bounds (n_discard < 1, n_keep + n_discard > n_past) are HMOE_ERR_ARG. */
enum hmoe_status hmoe_ctx_shift(struct hmoe_ctx *c, int n_keep, int n_discard, struct hmoe_err *err);
void hmoe_ctx_reset(struct hmoe_ctx *c);
/* Remember the recurrent state at the current n_past (a few slots, oldest replaced) so a
 * later truncate to this position or after it is cheap. Call it where a rewind is expected
 * (chat: before the generation prompt; bench: after the depth prefill). No-op for models
 * without recurrent state. */
void hmoe_ctx_checkpoint(struct hmoe_ctx *c);
/* Bytes of recurrent state (conv + delta-rule matrices, f32) of the context, without the
 * checkpoint copies; 0 for attention-only models. */
size_t hmoe_ctx_state_bytes(const struct hmoe_ctx *c);

/* --- self-speculative decoding with the MTP block (src/model/mtp.c, spec.c) ----------- */

/* Most tokens one speculative step drafts (--draft-max). */
#define HMOE_SPEC_DRAFT_MAX 16

struct hmoe_spec;

/* Counters of a speculative decoder since its creation (or hmoe_spec_reset_stats). */
struct hmoe_spec_stats {
    uint64_t steps;         /* verification passes of the main model */
    uint64_t drafted;       /* tokens the MTP block proposed */
    uint64_t accepted;      /* of those, tokens the sampler picked as well */
    uint64_t replayed;      /* tokens re-run to rewind the recurrent state after a rejection */
    double draft_s, verify_s, replay_s; /* wall time of drafting, verification, replays */
};

/* A speculative decoder on context c for up to n_draft (1 .. HMOE_SPEC_DRAFT_MAX) drafts per
 * step: the model's first MTP block drafts them (from the main model's last hidden state and
 * the sampled token, chained), one pass of the main model verifies them. Needs a model with
 * an MTP block whose entry runs it (else HMOE_ERR_UNSUPPORTED naming the model) and one
 * sequence. From here on every forward pass of c keeps its rows' final normed hidden states
 * (the GPU backend copies them to the host) and the MTP block's own KV cache in step (a prompt
 * prefill runs the block on each of its positions); the block runs on CPU threads. */
enum hmoe_status hmoe_spec_init(struct hmoe_ctx *c, int n_draft, struct hmoe_spec **out, struct hmoe_err *err);
void hmoe_spec_free(struct hmoe_spec *s);
/* The drop-in for hmoe_ctx_decode(c, &id, 1, pos, HMOE_LOGITS_LAST, ...): token id at
 * position pos (<= n_past), *logits = the n_vocab logits after it (valid until the next
 * call). When id is the draft that the last verification pass already ran at pos, the
 * logits come from that pass and nothing runs; otherwise the context is rewound to pos
 * (KV, recurrent state, the MTP block's KV), up to n_draft tokens are drafted and
 * [id, drafts] run in one pass. Every returned row is the main model's logits for exactly
 * the tokens before it, so any sampler that picks from them produces what plain decoding
 * produces (at temperature 0 the same tokens; with sampling the same distribution, and the
 * same tokens for a seed, since the sampler runs once per token as without drafts). The
 * context may hold positions past pos + 1 afterwards (drafts not yet confirmed). */
enum hmoe_status hmoe_spec_decode(struct hmoe_spec *s, int32_t id, int pos, const float **logits,
                                  struct hmoe_err *err);
/* The drafts of the last pass not yet confirmed, in order, into out (up to
 * HMOE_SPEC_DRAFT_MAX); returns how many. */
int hmoe_spec_pending(const struct hmoe_spec *s, int32_t *out);
void hmoe_spec_get_stats(const struct hmoe_spec *s, struct hmoe_spec_stats *out);
void hmoe_spec_reset_stats(struct hmoe_spec *s);
/* Bench probe: the MTP block's drafting for token id after the current n_past: n drafts
 * (greedy, chained) into out, and the first draft's logits into logits (n_vocab, or NULL). */
enum hmoe_status hmoe_spec_draft(struct hmoe_spec *s, int32_t id, int n, int32_t *out, float *logits,
                                 struct hmoe_err *err);

/* --- sampling (src/model/sampling.c) ------------------------------------------------ */

/* llama.cpp's default chain: penalties -> top_k -> top_p -> min_p -> temperature -> dist.
 * temp <= 0 is greedy (argmax, lowest id on ties). A filter is off at top_k <= 0,
 * top_p >= 1, min_p <= 0, repeat_penalty == 1. */
struct hmoe_sampler_params {
    float temp;            /* default 0.8 */
    int top_k;             /* default 40 */
    float top_p;           /* default 0.95 */
    float min_p;           /* default 0.05 */
    float repeat_penalty;  /* default 1.0 (off) */
    int repeat_last_n;     /* window of accepted tokens the penalty looks at (default 64) */
    uint64_t seed;         /* RNG seed */
};
void hmoe_sampler_params_default(struct hmoe_sampler_params *p);

struct hmoe_sampler;
enum hmoe_status hmoe_sampler_init(const struct hmoe_sampler_params *p, int n_vocab, struct hmoe_sampler **out,
                                   struct hmoe_err *err);
void hmoe_sampler_free(struct hmoe_sampler *s);
/* Record a token (prompt or generated) in the repeat-penalty history. */
void hmoe_sampler_accept(struct hmoe_sampler *s, int32_t id);
/* Pick the next token from n_vocab logits (not modified). */
int32_t hmoe_sampler_sample(struct hmoe_sampler *s, const float *logits);

/* Index of the largest of n values, lowest index on ties. */
int32_t hmoe_argmax(const float *x, int n);

#endif
