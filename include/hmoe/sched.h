/* sched.h — the MoE feed-forward block as one call: route every token of a micro-batch,
 * group the tokens by expert so each expert's weights stream from memory once, and run
 * the SwiGLU experts (qwen3moe.md §4.4) on CPU threads (src/sched/moe_cpu.c); and for the
 * GPU backend: where experts live under a VRAM budget (place.c, override.c), the VRAM expert
 * cache (cache.c), the routing profile (profile.c) and the hybrid CPU+GPU runtime
 * (hybrid*.c: decode handoff through mapped mailboxes, streamed prefill).
 *
 * Weights are views into the GGUF mapping, described by struct hmoe_mat (shape in ggml
 * order, ne0 contiguous; an expert stack {n_in, n_out, n_mat} is n_mat matrices back to
 * back, qwen3moe.md §0). Matrix products go through include/hmoe/cpu.h.
 */
#ifndef HMOE_SCHED_H
#define HMOE_SCHED_H

#include "hmoe/common.h"
#include "hmoe/cuda.h"
#include "hmoe/types.h"

/* A weight matrix {n_in, n_out}, or a stack of n_mat of them {n_in, n_out, n_mat}. */
struct hmoe_mat {
    const void *data;  /* row 0 of matrix 0, inside the mapping */
    enum hmoe_type type;
    int64_t n_in;      /* ne0: elements per row */
    int64_t n_out;     /* ne1: rows per matrix */
    int64_t n_mat;     /* ne2: matrices (experts); 1 for a plain matrix */
    size_t row_bytes;  /* bytes of one row of n_in elements */
    size_t mat_bytes;  /* n_out * row_bytes: distance between two experts */
    const char *name;  /* tensor name, for messages (points into the gguf's tensor table) */
};

/* How router logits become expert choices and weights. */
enum hmoe_moe_gating {
    HMOE_MOE_SOFTMAX = 0,      /* softmax over all E, top-k of the probabilities, renormalised (qwen3moe.md §4.4) */
    HMOE_MOE_SIGMOID = 1,      /* sigmoid; top-k of sigmoid + sel_bias; weights the unbiased sigmoids
                                  (nemotron_h_moe.md §6.1), optionally renormalised, then scaled */
    HMOE_MOE_TOPK_SOFTMAX = 2, /* top-k of the logits, softmax over those k only (gpt-oss.md) */
};

/* What an expert computes from its hidden rows. */
enum hmoe_moe_act {
    HMOE_MOE_SWIGLU = 0,      /* down(silu(gate x) * up x) */
    HMOE_MOE_RELU2 = 1,       /* down(relu(up x)^2): ungated, gate is unused (data NULL) */
    HMOE_MOE_SWIGLU_OAI = 2,  /* g' = min(g, 7), u' = clamp(u, -7, 7): g' * sigmoid(1.702 g') * (u' + 1) */
};

/* HMOE_MOE_SWIGLU_OAI in place over n values: g = g' * sigmoid(1.702 g') * (u' + 1). */
void hmoe_sched_swiglu_oai(float *g, const float *u, int64_t n);

/* The weights of one MoE block (no shared expert: qwen3moe.md §2). A layer without experts has
 * router.data NULL. The zero value of the gating / activation / bias fields is qwen3moe's block. */
struct hmoe_moe_weights {
    struct hmoe_mat router; /* ffn_gate_inp   {d, E}     F32 */
    struct hmoe_mat gate;   /* ffn_gate_exps  {d, F, E}  (SWIGLU only) */
    struct hmoe_mat up;     /* ffn_up_exps    {d, F, E}  */
    struct hmoe_mat down;   /* ffn_down_exps  {F, d, E}  */
    int n_expert_used;      /* k */
    enum hmoe_moe_gating gating;
    enum hmoe_moe_act act;
    const float *sel_bias;  /* SIGMOID: exp_probs_b {E}, added for the choice only; NULL = none */
    bool no_renorm;         /* SIGMOID: keep the chosen sigmoids as they are (expert_weights_norm false) */
    float w_scale;          /* SIGMOID: weights multiplied by this after renormalising (0 or 1: none) */
    int n_group, n_group_used; /* SIGMOID: group-limited choice (DeepSeek-V3 rule); <= 1 = none */
    const float *router_bias; /* ffn_gate_inp.bias   {E} F32, added to the logits, or NULL */
    const float *gate_bias;   /* ffn_gate_exps.bias  {F, E} F32 or NULL */
    const float *up_bias;     /* ffn_up_exps.bias    {F, E} */
    const float *down_bias;   /* ffn_down_exps.bias  {d, E}: inside each expert's output, so it is weighted */
};

/* Router: softmax over all n_expert logits (f32, max-subtracted, sum in double), the k
 * largest probabilities in descending order (lowest expert index first on ties), then
 * renormalised: w_i = p_i / max(sum_j p_j, 6.103515625e-5) (qwen3moe.md §4.4 steps 3-5).
 * `probs` is scratch of n_expert floats. Writes sel[k] and w[k]. */
void hmoe_sched_route(const float *logits, int n_expert, int k, float *probs, int32_t *sel, float *w);
/* Router of HMOE_MOE_TOPK_SOFTMAX: the k largest logits in descending order (lowest
 * index first on ties), w = softmax over those k (f32, max-subtracted, sum in double); no
 * renormalisation (gpt-oss.md, MoE differences). */
void hmoe_sched_route_topk_softmax(const float *logits, int n_expert, int k, int32_t *sel, float *w);

/* Sigmoid router (nemotron_h_moe.md §6.1): p = sigmoid(logits); choose the k largest of
 * p + w->sel_bias (group-limited when w->n_group > 1: keep the n_group_used groups of
 * consecutive experts with the largest sum of their two best scores), in descending order,
 * lowest index first on ties; weights p[sel], renormalised unless w->no_renorm
 * (clamped sum 6.103515625e-5), then times w->w_scale. probs: 2 * n_expert floats of scratch. */
void hmoe_sched_route_sigmoid(const struct hmoe_moe_weights *w, const float *logits, float *probs, int32_t *sel,
                              float *wsel);

/* CPU workspace for hmoe_sched_moe_ffn, sized once for every layer of a model and the
 * largest micro-batch, so the forward pass allocates nothing. */
struct hmoe_sched_moe;

/* `layers` are the MoE weights of all n_layer layers (their types may differ per layer);
 * max_tok is the largest micro-batch that will be passed; n_threads the OpenMP threads. */
enum hmoe_status hmoe_sched_moe_init(const struct hmoe_moe_weights *layers, int n_layer, int max_tok,
                                     int n_threads, struct hmoe_sched_moe **out, struct hmoe_err *err);
void hmoe_sched_moe_free(struct hmoe_sched_moe *s);

/* out[t] = sum_i w_i * down_e(silu(gate_e · x[t]) * (up_e · x[t])) for the k experts e
 * routed for token t (qwen3moe.md §4.4 steps 2-7; RELU2 experts: down_e(relu(up_e · x[t])^2),
 * routing by w->gating). x: n_tok rows of d floats (already
 * RMS-normalised), out: n_tok rows of d floats (overwritten). The experts' partial
 * results are summed in selection order, as llama.cpp does. */
enum hmoe_status hmoe_sched_moe_ffn(struct hmoe_sched_moe *s, const struct hmoe_moe_weights *w, const float *x,
                                    int n_tok, float *out, struct hmoe_err *err);

/* The same with the router reading other rows than the experts (a latent MoE: the router on
 * the d-wide normed state, the experts on its m-wide projection, nemotron_h_moe.md §6.1):
 * x_route has router.n_in floats per token, x and out up.n_in = down.n_out. */
enum hmoe_status hmoe_sched_moe_ffn_split(struct hmoe_sched_moe *s, const struct hmoe_moe_weights *w,
                                          const float *x_route, const float *x, int n_tok, float *out,
                                          struct hmoe_err *err);

/* Routing decisions of the last hmoe_sched_moe_ffn call: sel[t*k + i] (for tests and the
 * future expert-cache statistics). Valid until the next call. */
const int32_t *hmoe_sched_moe_last_selection(const struct hmoe_sched_moe *s);
/* The renormalised weights of those decisions, w[t*k + i]. Valid until the next call. */
const float *hmoe_sched_moe_last_weights(const struct hmoe_sched_moe *s);

/* The same FFN for routing decided elsewhere (the GPU router in hybrid prefill; never re-routed
 * here, so a token keeps exactly its k experts) restricted to a subset of the experts:
 * out[t] = sum over the ranks i with mask[sel[t*k+i]] != 0 of wsel[t*k+i] * expert(x[t]), in
 * selection order; a token with none of its experts in the subset gets zeros. sel/wsel: n_tok*k
 * (expert ids must be in 0..n_expert-1, else HMOE_ERR_ARG), mask: n_expert bytes. Summing the
 * outputs of a partition of the experts gives hmoe_sched_moe_ffn's output up to float rounding. */
enum hmoe_status hmoe_sched_moe_ffn_subset(struct hmoe_sched_moe *s, const struct hmoe_moe_weights *w,
                                           const float *x, int n_tok, const int32_t *sel, const float *wsel,
                                           const uint8_t *mask, float *out, struct hmoe_err *err);

/* The work items of a decoded token's experts (moe_plan.c), in the order the team claims them:
 * every gate/up item (rows [r0, r1) of active expert a's gate and up matrices, their z rows
 * quantized in the item), expert by expert, then the down items (rows of a's down matrix), each
 * item about total / (n_threads * per_thread) bytes and the last expert's down items `tail` times
 * finer; gate/up chunks are multiples of qb rows (the down activation's block, at least 16), down
 * chunks of 16. bytes = the weight bytes an item reads. hidden_row_bytes: one row of gate + up
 * (up alone for ungated experts). */
struct hmoe_sched_moe_shape {
    int64_t d, F, qb;
    size_t hidden_row_bytes, down_row_bytes;
    int n_active, n_threads, per_thread, tail;
};
struct hmoe_sched_moe_item {
    int32_t a, r0, r1;
    bool down;
    uint64_t bytes;
};
/* An upper bound of the items of n_active experts of these shapes. */
int hmoe_sched_moe_plan_max_items(int64_t d, int64_t F, int n_active);
/* Fills items (at most max) and returns their count, -1 if max is too small; *gu_per_expert is
 * the gate/up items of one expert. */
int hmoe_sched_moe_plan_decode(const struct hmoe_sched_moe_shape *sh, struct hmoe_sched_moe_item *items, int max,
                               int *gu_per_expert);
/* Work of the last decoded-token call per thread of the team: items run and weight bytes read by
 * thread tid < n (n at most the workspace's threads; the rest of the arrays is left alone). */
void hmoe_sched_moe_thread_work(const struct hmoe_sched_moe *s, int n, uint64_t *items, uint64_t *bytes);

/* Phase times of the batched (n_tok > 1) calls since the last take: route (routing or taking
 * it, per-token quantization), group (counting sort + row gather), gate_up, z (its own
 * quantization job, when not fused), down, sum (the weighted sum), total; experts and pairs
 * summed over the calls. take copies and resets. */
enum { HMOE_MOE_PH_ROUTE, HMOE_MOE_PH_GROUP, HMOE_MOE_PH_GATE_UP, HMOE_MOE_PH_Z, HMOE_MOE_PH_DOWN, HMOE_MOE_PH_SUM,
       HMOE_MOE_PH_TOTAL, HMOE_MOE_PH_COUNT };
struct hmoe_sched_moe_times {
    uint64_t calls, experts, pairs;
    double ms[HMOE_MOE_PH_COUNT];
};
/* Work-item sizes of the CPU MoE jobs. A batch: gate/up items per thread and largest chunk
 * (rows), down items per thread and largest chunk; a decoded token: the down items of the job's
 * last thread-share of bytes dn_tail_items times finer (hmoe_sched_moe_plan_decode's tail). The layout changes which thread computes a row,
 * never the bits of a result; tests set finer chunks to run items across experts and threads. */
struct hmoe_sched_moe_chunks {
    int gu_per_thread, gu_max_rows, dn_per_thread, dn_max_rows, dn_tail_items;
};
void hmoe_sched_moe_chunks_default(struct hmoe_sched_moe_chunks *c);
/* ERR_ARG when a count is outside 1..64 or a chunk under 16 rows. */
enum hmoe_status hmoe_sched_moe_set_chunks(struct hmoe_sched_moe *s, const struct hmoe_sched_moe_chunks *c,
                                           struct hmoe_err *err);
void hmoe_sched_moe_times_take(struct hmoe_sched_moe *s, struct hmoe_sched_moe_times *out);
/* Expert reads of every call (decode and batch) since the last take: calls, active experts
 * (each read once per call), (token, rank) pairs, and their bytes (gate + up + down of one
 * expert per active expert, and per pair). bytes / pair_bytes is the sharing of a batch.
 * take copies and resets. */
struct hmoe_sched_moe_reads {
    uint64_t calls, experts, pairs, bytes, pair_bytes;
};
void hmoe_sched_moe_reads_take(struct hmoe_sched_moe *s, struct hmoe_sched_moe_reads *out);
const char *hmoe_sched_moe_phase_name(int phase);

/* --- GPU placement, expert cache and hybrid CPU+GPU scheduling ------------------------------ */

/* Who computes an expert that has no GPU copy during decode (--moe-miss). */
enum hmoe_moe_miss {
    HMOE_MOE_MISS_CPU = 0,      /* CPU threads, at the same time as the GPU computes the hits */
    HMOE_MOE_MISS_TRANSFER = 1, /* the GPU reads it over PCIe (pinned mapping) into scratch and computes it */
    HMOE_MOE_MISS_AUTO = 2,     /* transfer where the transfer kernel's read rate measured at start beats
                                   the CPU threads' RAM read rate x their expert-phase efficiency, else
                                   cpu (page-locked layers only; nothing is pinned for it) */
};
bool hmoe_moe_miss_from_name(const char *name, enum hmoe_moe_miss *out);

/* Expert-cache replacement policy for the dynamic slots (--cache-policy). */
enum hmoe_cache_policy {
    HMOE_CACHE_LFU = 0, /* routing counts with exponential decay: replace the coldest slot */
    HMOE_CACHE_LRU = 1, /* replace the slot whose expert was routed to longest ago */
};

/* Settings of the GPU backend's placement (what lives in VRAM) and of the hybrid scheduler. */
struct hmoe_sched_gpu_params {
    int64_t vram_budget_mib;   /* the process on the GPU as nvidia-smi counts it; 0 = the card's free share - max(1 GiB, 4 %) */
    bool cpu_moe;              /* --cpu-moe: every expert tensor stays in RAM, computed by the CPU */
    int n_cpu_moe;             /* --n-cpu-moe N: the experts of the first N layers stay in RAM */
    const char *const *override_tensor; /* -ot REGEX=CPU|GPU (llama.cpp syntax), first match wins */
    int n_override_tensor;
    enum hmoe_moe_miss moe_miss;
    enum hmoe_cache_policy cache_policy;
    int cache_fills_per_token; /* expert copies started after each decoded token; -1 = auto, 0 = static */
    bool no_profile;           /* neither read nor write the routing profile */
    const char *profile_dir;   /* NULL: $XDG_CACHE_HOME/hmoe, else ~/.cache/hmoe */
    int stream_min_tokens;     /* hybrid prefill streams expert weights to the GPU for micro-batches of at
                                  least this many tokens (below: CPU threads); 0 = default */
    bool prefetch;             /* --prefetch on: predict layer L+1's experts from layer L's state and copy
                                  the uncached ones into dynamic slots on a side stream during the token */
    int prefetch_max;          /* copies per layer and token (0 = default 2) */
    double prefill_cpu_share;  /* hybrid prefill split: 0 = CPU threads' part planned from measured costs
                                  (the default); x in (0, 1] = that share of each streamed layer's
                                  uncached experts; negative = no CPU part (experts without tokens are
                                  still skipped) */
    int stream_chunk_experts;  /* experts per streamed prefill chunk; 0 = HMOE_SCHED_STREAM_CHUNK_EXPERTS
                                  (tests use fewer to get several chunks per layer on tiny models) */
};
void hmoe_sched_gpu_params_default(struct hmoe_sched_gpu_params *p);

/* -ot / --override-tensor "REGEX=CPU|GPU" (also CUDA0.. as GPU), POSIX extended regex searched
 * anywhere in the tensor name, with \d \w \s accepted as in llama.cpp's ECMAScript regexes. */
struct hmoe_sched_override {
    void *re;       /* compiled regex_t */
    bool to_gpu;    /* false: keep in RAM (CPU) */
    char text[128]; /* as given, for messages */
};
enum hmoe_status hmoe_sched_override_parse(const char *spec, struct hmoe_sched_override *out, struct hmoe_err *err);
void hmoe_sched_override_free(struct hmoe_sched_override *o);
/* Index of the first rule matching `name`, or -1. */
int hmoe_sched_override_match(const struct hmoe_sched_override *rules, int n_rules, const char *name);
/* The same regex dialect for other per-tensor rule lists (synth --mix): the first len bytes of
 * pat compiled (a heap regex_t), or NULL with regerror's text in why; search anywhere in s. */
void *hmoe_sched_regex_compile(const char *pat, size_t len, char *why, size_t why_cap);
bool hmoe_sched_regex_search(const void *re, const char *s);
void hmoe_sched_regex_free(void *re);

/* Placement: given what one expert of each layer costs and what must live on the GPU anyway,
 * decide per layer whether its experts are resident (all of them in VRAM) or stay in RAM with
 * n_slots VRAM cache slots (0 = computed by the CPU only), and whether hybrid prefill gets a
 * streaming buffer. Pure arithmetic (tests/test_sched_place.c). */
enum hmoe_place { HMOE_PLACE_GPU = 0, HMOE_PLACE_RAM = 1 };

struct hmoe_sched_place_req {
    int n_layer, n_expert;
    const uint64_t *expert_bytes;     /* [n_layer] gate+up+down bytes of ONE expert */
    uint64_t fixed_bytes;             /* attention, norms, router, LM head, KV cache, buffers */
    uint64_t stream_bytes;            /* VRAM for hybrid prefill streaming (0 = none wanted) */
    uint64_t budget_bytes;
    bool cpu_moe;
    int n_cpu_moe;
    const struct hmoe_sched_override *ot; /* rules applied to blk.N.ffn_{gate,up,down}_exps.weight */
    int n_ot;
    bool whole_layers; /* no expert cache behind the plan: automatic placement makes whole layers resident */
};

struct hmoe_sched_plan {
    int n_layer, n_expert;
    enum hmoe_place *where;  /* [n_layer] */
    int *n_slots;            /* [n_layer] cache slots of RAM layers */
    bool explicit_placement; /* --cpu-moe / --n-cpu-moe / -ot decided the layers (no automatic cache) */
    bool stream;             /* a streaming buffer of stream_bytes is reserved */
    uint64_t resident_bytes; /* experts of GPU layers */
    uint64_t cache_bytes;    /* all cache slots */
    uint64_t total_bytes;    /* fixed + resident + cache + stream */
    char notes[512];         /* -ot rules that were ignored, why the cache is off, ... */
};
enum hmoe_status hmoe_sched_place(const struct hmoe_sched_place_req *req, struct hmoe_sched_plan *out,
                                  struct hmoe_err *err);
void hmoe_sched_plan_free(struct hmoe_sched_plan *p);
/* One line per group of layers: "layers 0-23: RAM, 12 cache slots each (...)". */
void hmoe_sched_plan_describe(const struct hmoe_sched_plan *p, const uint64_t *expert_bytes, char *buf, size_t cap);

/* Expert cache bookkeeping (cache.c): which expert occupies which VRAM slot of each layer, and
 * which copies to start. Slots [0, n_static) hold the hot set chosen from routing counts and are
 * never replaced; the others follow the policy. A planned copy makes its slot invalid at once
 * (the old expert is gone) and the new expert valid only at commit (its copy has finished). Pure
 * host logic: tests/test_sched_cache.c. */
struct hmoe_sched_cache;
struct hmoe_sched_cache_fill {
    int layer, expert, slot, old_expert; /* old_expert -1: the slot was empty */
};
enum hmoe_status hmoe_sched_cache_init(int n_layer, int n_expert, const int *n_slots, enum hmoe_cache_policy policy,
                                       struct hmoe_sched_cache **out, struct hmoe_err *err);
void hmoe_sched_cache_free(struct hmoe_sched_cache *c);
/* Assign the slots of every layer to its n_slots hottest experts by counts[n_layer][n_expert]
 * (lowest index on ties, so all-zero counts give experts 0..n_slots-1); the first static_frac of
 * each layer's slots become static. Experts already in a slot stay where they are, so seeding over
 * a filled cache copies only the difference. Writes the copies to make (up to max). */
int hmoe_sched_cache_seed(struct hmoe_sched_cache *c, const uint64_t *counts, double static_frac,
                          struct hmoe_sched_cache_fill *out, int max);
/* Slots of all layers holding a committed expert. */
int hmoe_sched_cache_n_valid(const struct hmoe_sched_cache *c);
/* One token's k routed experts of a layer (updates the recency / decayed-count scores). */
void hmoe_sched_cache_touch(struct hmoe_sched_cache *c, int layer, const int32_t *ids, int k);
/* After a token: at most max replacements where a routed-but-uncached expert of this token beats
 * the weakest replaceable slot (LFU) or takes the least recently used one (LRU). */
int hmoe_sched_cache_plan(struct hmoe_sched_cache *c, struct hmoe_sched_cache_fill *out, int max);
void hmoe_sched_cache_commit(struct hmoe_sched_cache *c, const struct hmoe_sched_cache_fill *f);
/* Valid slot of (layer, expert) or -1; the whole map of a layer ([n_expert]). */
int hmoe_sched_cache_slot_of(const struct hmoe_sched_cache *c, int layer, int expert);
/* The replaceable slots of a layer in the order the policy would give them up (empty ones first,
 * then the weakest dynamic slot; static and pending slots never): slots[i] and the expert in it
 * (-1 empty). Returns how many (at most max). */
int hmoe_sched_cache_victims(const struct hmoe_sched_cache *c, int layer, int32_t *slots, int32_t *experts, int max);
/* Someone else (the device-side prefetch) put `expert` into `slot` of `layer`: record it as valid
 * (the slot's previous expert is gone). Ignored for static or pending slots and bad indices. */
void hmoe_sched_cache_install(struct hmoe_sched_cache *c, int layer, int expert, int slot);
const int32_t *hmoe_sched_cache_map(const struct hmoe_sched_cache *c, int layer);

/* Routing profile (profile.c): counts[n_layer][n_expert] of expert selections for one model file,
 * kept in <dir>/<hash>.routing (text), hash = FNV-1a of the file size and its first MiB. */
enum hmoe_status hmoe_sched_profile_path(const char *dir, const void *file_base, uint64_t file_size, char *out,
                                         size_t cap, struct hmoe_err *err);
/* HMOE_ERR_NOT_FOUND when there is no profile; HMOE_ERR_FORMAT (with the line) when it is damaged
 * or belongs to another shape. */
enum hmoe_status hmoe_sched_profile_load(const char *path, int n_layer, int n_expert, uint64_t *counts,
                                         struct hmoe_err *err);
/* Creates the directory if needed; writes a temporary file and renames it over the old one. */
enum hmoe_status hmoe_sched_profile_save(const char *path, int n_layer, int n_expert, const uint64_t *counts,
                                         struct hmoe_err *err);

/* --- page-locked expert ranges for a backend that streams RAM layers itself (pin_layers.c) ---
 * The hybrid scheduler's pin pass (hybrid_pin.c) over the layers a caller names: each layer's
 * expert range of the mapping is read into the page cache, then registered with the driver on a
 * worker thread, bounded in time (HMOE_PIN_BUDGET_S) and by a RAM reserve; HMOE_PIN=0 pins
 * nothing, HMOE_PIN=copy page-locks a copy of each layer instead. A copy from a page-locked
 * range is DMA and asynchronous; from any other range it goes through the driver's staging. */
struct hmoe_sched_pin_params {
    struct hmoe_cuda_ctx *cu;           /* the device the worker makes current; NULL: leave it */
    const struct hmoe_moe_weights *moe; /* [n_layer] views into the mapping */
    const bool *want;                   /* [n_layer] layers whose experts to page-lock */
    int n_layer, n_threads;             /* n_threads: the HMOE_PIN=copy memcpy team */
    const void *file_base;              /* the GGUF mapping */
    uint64_t file_size;
    bool file_in_ram;                   /* file_base is an anonymous copy (--no-mmap): never discard its pages */
    /* the driver calls; NULL: hmoe_cuda_host_register / unregister (tests inject others) */
    enum hmoe_status (*reg)(void *p, size_t bytes, bool read_only, struct hmoe_err *err);
    void (*unreg)(void *p);
};
struct hmoe_sched_pinned;
/* Runs the pass; refusals are no error (those layers stay unpinned, the notes say why). */
enum hmoe_status hmoe_sched_pin_layers(const struct hmoe_sched_pin_params *p, struct hmoe_sched_pinned **out,
                                       struct hmoe_err *err);
/* Layer l's expert views inside its page-locked range (the mapping, or the HMOE_PIN=copy copy),
 * or NULL when layer l is not page-locked. */
const struct hmoe_moe_weights *hmoe_sched_pinned_layer(const struct hmoe_sched_pinned *s, int l);
struct hmoe_sched_pin_info {
    int layers, tried;      /* layers page-locked, of those attempted */
    uint64_t bytes;         /* host bytes page-locked */
    double read_s, pin_s;   /* reading the ranges into the page cache; registering (or copying) them */
    const char *notes;      /* "" or one line: why layers stay unpinned ("...; " separated) */
};
void hmoe_sched_pinned_info(const struct hmoe_sched_pinned *s, struct hmoe_sched_pin_info *out);
/* Undoes every registration, frees the copies; NULL is a no-op. */
void hmoe_sched_unpin_layers(struct hmoe_sched_pinned *s);

/* --- the hybrid runtime (hybrid.c, GPU builds) ---------------------------------------------- */

/* Inputs of the hybrid scheduler: the MoE weights of every layer (views into the mapping), the
 * placement, and the CPU workspace used for prefill on CPU threads. */
struct hmoe_sched_hybrid_params {
    struct hmoe_cuda_ctx *cu;
    const struct hmoe_moe_weights *moe; /* [n_layer] */
    int n_layer, n_embd, n_ub, n_threads;
    const struct hmoe_sched_plan *plan;
    const struct hmoe_sched_gpu_params *sched;
    const void *file_base;              /* the GGUF mapping (pinning, profile hash) */
    uint64_t file_size;
    bool file_in_ram;                   /* file_base is an anonymous copy (--no-mmap): never discard its pages */
    struct hmoe_sched_moe *cpu_moe;     /* CPU workspace for n_ub tokens */
    const float *const *d_router;       /* [n_layer] each layer's router on the device (prefetch), or NULL */
    /* [n_layer] each layer's expert biases on the device ({F, E}, {F, E}, {d, E} as in
     * hmoe_moe_weights), or NULL: the GPU's share of a biased MoE block adds them */
    const float *const *d_gate_bias, *const *d_up_bias, *const *d_down_bias;
    int stream_chunk_experts;           /* experts per streamed prefill chunk (0: the default, 32) */
};
struct hmoe_sched_hybrid;

/* Experts per streamed prefill chunk unless the budget asks for fewer. */
#define HMOE_SCHED_STREAM_CHUNK_EXPERTS 32
/* VRAM the streaming prefill wants (two chunks of chunk_experts experts of the largest layer). */
uint64_t hmoe_sched_hybrid_stream_bytes(const struct hmoe_moe_weights *moe, int n_layer, int n_ub, int chunk_experts);
enum hmoe_status hmoe_sched_hybrid_init(const struct hmoe_sched_hybrid_params *p, struct hmoe_sched_hybrid **out,
                                        struct hmoe_err *err);
/* Saves the routing profile (unless disabled) and frees everything. */
void hmoe_sched_hybrid_free(struct hmoe_sched_hybrid *h);

/* Decode, inside the step's graph capture, for a RAM layer after the router wrote d_ids/d_wts and
 * the normalised state is in d_h (f32) and d_hq (q8_1): publish to the mailbox, compute the cached
 * experts into d_x, wait for the CPU's share and add it. d_z / d_zq: k rows of F (f32 / q8_1),
 * d_gids: k ints, d_nmiss: this layer's int, d_seq: the step's sequence number. */
enum hmoe_status hmoe_sched_hybrid_enqueue_decode(struct hmoe_sched_hybrid *h, int il, const int32_t *d_ids,
                                                  const float *d_wts, const float *d_h, const void *d_hq,
                                                  size_t hq_stride, float *d_z, void *d_zq, int32_t *d_gids,
                                                  int32_t *d_nmiss, const uint32_t *d_seq, float *d_x, void *stream,
                                                  struct hmoe_err *err);
/* The CPU half of one decode step (call right after launching it): every RAM layer in order,
 * wait for the GPU's mailbox, compute the missed experts on the thread team, answer. */
enum hmoe_status hmoe_sched_hybrid_cpu_step(struct hmoe_sched_hybrid *h, uint32_t seq, struct hmoe_err *err);
/* Between tokens (the step has finished): statistics, routing counts, cache copies to start on the
 * fill stream, finished copies made visible (slot maps updated on `stream`). */
enum hmoe_status hmoe_sched_hybrid_after_step(struct hmoe_sched_hybrid *h, void *stream, struct hmoe_err *err);

/* Device scratch the caller (the GPU forward) lends to hybrid prefill. */
struct hmoe_sched_moe_bufs {
    const int32_t *ids;    /* [n][k] routed experts */
    const float *wts;      /* [n][k] */
    const float *hf;       /* [n][d] normalised input, f32 */
    const uint16_t *h16;   /* [n][d] the same in f16 */
    float *x;              /* [n][d] residual stream (+= MoE output) */
    void *plan;            /* hmoe_cuda_moe_plan_bytes(n_ub, k, n_expert) */
    int32_t *ids_mapped;   /* [n][k] */
    uint16_t *z16;         /* [n*k][F] */
    float *ye;             /* [n*k][d] */
};
/* Prefill of RAM layer il for n tokens: the experts stream to the GPU in double-buffered chunks
 * (micro-batches of at least the break-even size, when a streaming buffer was planned), else CPU
 * threads compute the MoE from hf. Either way the result is added to x on `stream`. In a streamed
 * micro-batch the call reads the layer's routing back after its router (it waits for it): experts
 * without tokens are neither copied nor computed, and CPU threads take the lightest of the others
 * (hmoe_sched_split_by_count; the params' prefill_cpu_share forces their share) for the GPU's
 * routing, as a host function on a side stream, so the call returns without waiting for them. */
enum hmoe_status hmoe_sched_hybrid_prefill(struct hmoe_sched_hybrid *h, int il, int n, const struct hmoe_sched_moe_bufs *b,
                                           void *stream, struct hmoe_err *err);


/* The prefill split by token count (split_count.c): after a streamed layer's
 * router, of the m candidate experts (uncached, not in the chunk prefetched before the routing)
 * those without tokens are skipped, CPU threads take the lightest (fewest tokens) while their
 * predicted end, start + job + sum of (expert + pair * tokens), stays margin_ms before the GPU's,
 * gpu + copy * (streamed candidates); the GPU streams the rest, heaviest first. */
#define HMOE_SCHED_COUNT_MAX 512
struct hmoe_sched_count_model {
    double start_ms;    /* router done -> the CPU job starts */
    double job_ms;      /* CPU job: fixed part (gather, sum) */
    double expert_ms;   /* CPU job: per expert with tokens (its weights read and unpacked) */
    double pair_ms;     /* CPU job: per (token, expert) pair */
    double gpu_ms;      /* GPU after the router with no candidate streamed (prefetched chunk, cached group) */
    double copy_ms;     /* GPU time one streamed candidate adds: its copy */
    double add_ms;      /* GPU: adding the CPU's sum */
    double margin_ms;   /* the CPU aims to end this much before the GPU */
    double min_gain_ms; /* copies saved - add_ms must reach this, else no CPU part */
    int max_cpu;        /* at most this many on the CPU (< 0: no cap) */
    int force_cpu;      /* >= 0: exactly min(force_cpu, used) lightest on the CPU, no cost model */
};
struct hmoe_sched_count_split {
    int n_skip, n_cpu, n_gpu;   /* candidates without tokens; on the CPU; streamed */
    uint64_t cpu_pairs;         /* (token, expert) pairs of the CPU's experts */
    double cpu_end_ms, gpu_end_ms; /* the model's prediction (from the router's end) */
};
/* cand[0..m) (m <= HMOE_SCHED_COUNT_MAX), tok[expert] tokens: cpu[0..n_cpu) lightest first,
 * gpu[0..n_gpu) heaviest first. */
void hmoe_sched_split_by_count(const struct hmoe_sched_count_model *p, const int *cand, int m, const uint32_t *tok,
                               int *cpu, int *gpu, struct hmoe_sched_count_split *out);
/* Online fit of the CPU job's time: ms = th[0] + th[1] * experts + th[2] * pairs (recursive least
 * squares with forgetting, started from a prior with standard deviations prior_sd). */
struct hmoe_sched_cost_fit {
    double th[3], P[3][3];
    int n;
};
void hmoe_sched_cost_fit_init(struct hmoe_sched_cost_fit *f, const double prior[3], const double prior_sd[3]);
void hmoe_sched_cost_fit_add(struct hmoe_sched_cost_fit *f, double experts, double pairs, double ms, double lambda);
/* The parameters, each at least floor_[i]. */
void hmoe_sched_cost_fit_get(const struct hmoe_sched_cost_fit *f, const double floor_[3], double out[3]);

struct hmoe_sched_hybrid_stats {
    double hit_rate;                 /* expert uses served by the GPU / all uses, RAM layers */
    double cpu_expert_ms_per_token;  /* CPU threads computing missed experts */
    double gpu_wait_us_per_layer;    /* GPU spinning for the CPU's result, per RAM layer with misses */
    double cpu_wait_us_per_layer;    /* CPU spinning for the GPU's mailbox, per RAM layer */
    double pcie_gbps;                /* cache copies: bytes / wall time between the first and last step */
    double h2d_gbps_probe;           /* measured at init: page-locked host -> device */
    uint64_t fills, steps;
    int prefill_stream_min;          /* micro-batches streamed from this size on */
    uint64_t ram_experts;            /* experts of the RAM layers (n_expert per RAM layer) */
    uint64_t cached_experts;         /* of those, held by a VRAM cache slot now */
    uint64_t prefill_streamed_experts; /* expert copies made by streamed prefill since init / reset */
    uint64_t prefill_streamed_bytes;
    bool pinned;                     /* the expert ranges of the mapping are page-locked */
    uint64_t pinned_bytes;           /* host bytes page-locked for the RAM layers (mapping or copy) */
    uint64_t xfer_experts;           /* decode misses read over PCIe and computed by the GPU (transfer) */
    uint64_t prefetch_pred, prefetch_correct; /* next-layer predictions, and those the router then chose */
    uint64_t prefetch_fills;         /* experts the prefetch copied into slots */
    uint64_t prefetch_used;          /* of those, chosen by the router in the same token */
    int n_transfer_layers;           /* RAM layers whose misses the GPU computes */
    /* prefill split: streamed layers since init / reset */
    uint64_t prefill_split_layers;   /* RAM layers of streamed micro-batches that were timed */
    uint64_t prefill_cpu_experts;    /* uncached experts CPU threads computed instead of streaming */
    double prefill_split_cpu_ms;     /* CPU threads on those experts */
    double prefill_split_gpu_ms;     /* GPU cached + streamed groups of those layers (events) */
    /* CPU expert phase: from the first CPU thread seeing a layer's mailbox to the result's release,
     * over the layers with CPU misses; missed-expert bytes / that time */
    double cpu_phase_gbps, cpu_phase_us_per_layer;
    double ram_probe_gbps;           /* the same thread team reading one resident expert range (init) */
    /* Handoff per layer with misses (target <= 30 us): GPU publish -> the CPU sees it (counted
     * where the CPU was already waiting), CPU release -> the GPU sees it (where the GPU was already
     * waiting), from GPU %globaltimer stamps and a host clock calibrated against it (+- clock_rtt_us
     * / 2); their sum needs no calibration (layers where both sides waited). 0 = no such layer. */
    double handoff_in_us, handoff_out_us, handoff_rt_us, clock_rtt_us, clock_drift_ppm;
};
void hmoe_sched_hybrid_get_stats(const struct hmoe_sched_hybrid *h, struct hmoe_sched_hybrid_stats *out);
void hmoe_sched_hybrid_reset_stats(struct hmoe_sched_hybrid *h);
/* Placement, cache and, once tokens ran, per-layer hit rates and timings, as text. */
void hmoe_sched_hybrid_report(const struct hmoe_sched_hybrid *h, char *buf, size_t cap);

#endif
