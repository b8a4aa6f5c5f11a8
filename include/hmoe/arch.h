/* arch.h — the architecture interface: one table entry per model family that hmoe runs.
 *
 * Everything that differs between architectures is reached through an entry: how the
 * hyper-parameters beyond the common set are read, how a layer's tensors are bound, the CPU
 * forward pass, the GPU layer step (or none), the recurrent state's shape, the chat-template
 * family and pre-tokenizer its files use, and what the MoE scheduler must know about its
 * blocks. The entries live in src/model/arch/<name>.c and are listed once, in
 * src/model/arch/arch_table.c; nothing outside src/model/arch tests for an architecture, it
 * asks the entry (or the per-layer weights the entry's binder filled).
 */
#ifndef HMOE_ARCH_H
#define HMOE_ARCH_H

#include "hmoe/common.h"
#include "hmoe/gguf.h"
#include "hmoe/model.h"
#include "hmoe/sched.h"
#include "hmoe/text.h"

struct hmoe_ctx;
struct hmoe_gpu;
struct hmoe_rec_dims;

#define HMOE_ARCH_MAX_NAMES 2

/* The GPU backend's hooks for an architecture. The shared backend (src/model/gpu_*.c) uploads
 * the attention weights, KV cache, experts and LM head, embeds, and runs the head; the entry
 * adds what only it has and steps a layer. */
struct hmoe_arch_gpu {
    /* Shapes and types the architecture's own GPU kernels accept; NULL: nothing beyond the
     * shared checks. Errors say what does not fit and to use --gpu off. */
    enum hmoe_status (*check)(const struct hmoe_model *m, struct hmoe_err *err);
    /* VRAM the architecture's own buffers take (for the placement plan); NULL: 0. */
    uint64_t (*vram_bytes)(const struct hmoe_ctx *c);
    /* Upload the architecture's own weights and state after the shared ones; NULL: none. */
    enum hmoe_status (*init)(struct hmoe_ctx *c, struct hmoe_err *err);
    void (*free)(struct hmoe_gpu *g, int n_layer);
    /* Append the architecture's lines to the VRAM report (buf, cap); NULL: none. */
    void (*report)(const struct hmoe_gpu *g, char *buf, size_t cap);
    /* One layer for n tokens whose residual rows are in the GPU's x (decode: the single-token
     * step that is captured into a graph). */
    enum hmoe_status (*layer)(struct hmoe_ctx *c, int il, int64_t n, bool decode, struct hmoe_err *err);
    /* The fused single-token launchers (attention + routed experts + next norm in few kernels)
     * compute this architecture's layer exactly. */
    bool fused_decode;
    /* The layer step routes and runs its routed experts with its own launches (sigmoid routing,
     * ungated experts: cuda.h), so the shared rules of the softmax + SwiGLU expert kernels do
     * not apply to it, and it runs the experts of layers kept in RAM itself (no hybrid scheduler). */
    bool own_experts;
};

/* The multi-token-prediction block of an architecture (self-speculative decoding, mtp.c). The
 * block runs in a context of its own over a one-layer view of the model whose layer 0 is the
 * block and whose LM head and final norm are the block's. */
struct hmoe_arch_mtp {
    /* Bind the block stored as file layer il into view->w.layers[0] and, where the block has
     * its own, view->w.token_embd / output_norm / output (they start as the main model's).
     * A missing or misshapen tensor is an error naming it. */
    enum hmoe_status (*bind)(struct hmoe_model *view, int il, struct hmoe_err *err);
    /* n rows through the block in context mc (the view's): row i joins the main model's
     * final normed hidden state hidden[i] (n_embd floats) with the embedding of token ids[i],
     * at position pos0 + i of the block's own KV cache; cat: scratch of n * 2 * n_embd floats.
     * Logits of the last row into logits (n_vocab, or NULL: none), and with logits that row's
     * normed output (the next chained draft's hidden) into hidden_out (n_embd, or NULL). */
    enum hmoe_status (*forward)(struct hmoe_ctx *mc, const float *hidden, const int32_t *ids, int n, int pos0,
                                float *cat, float *logits, float *hidden_out, struct hmoe_err *err);
};

/* What the MoE scheduler and the memory planner need to know about the routed blocks. The
 * binder copies gating / activation into each layer's hmoe_moe_weights; the flags describe
 * which extra tensors a layer may carry. */
struct hmoe_arch_moe {
    enum hmoe_moe_gating gating;   /* routing rule of the router logits (sched.h) */
    enum hmoe_moe_act act;         /* expert activation (sched.h) */
    bool expert_bias;              /* router / expert biases (gate_b, up_b, down_b) */
    bool shared_expert;            /* an always-active expert beside the routed ones */
    bool latent;                   /* experts run on a projected (latent) width */
};

struct hmoe_arch {
    const char *names[HMOE_ARCH_MAX_NAMES]; /* general.architecture values it reads; [0] is its name */
    const char *summary;           /* one line for --help and messages */
    const char *doc;               /* the reference document (docs/...) */

    /* --- loading (model.h) --- */
    /* The layer kinds come from per-layer arrays: the common reader skips head_count_kv, the
     * expert keys and the FFN widths, which read_config then reads itself. */
    bool own_layer_keys;
    /* Keys beyond the common set, after it (NULL: none). May change n_layer (MTP blocks). */
    enum hmoe_status (*read_config)(const struct hmoe_gguf *g, struct hmoe_model_config *c, struct hmoe_err *err);
    /* Bind main layer il's tensors into md->w.layers[il] (views into the mapping). */
    enum hmoe_status (*bind_layer)(struct hmoe_model *md, int il, struct hmoe_err *err);

    /* --- running --- */
    /* One micro-batch through the whole model on CPU threads. */
    enum hmoe_status (*forward_cpu)(struct hmoe_ctx *c, const int32_t *ids, int n, int pos0, enum hmoe_logits which,
                                    float *logits, struct hmoe_err *err);
    /* Shapes of the recurrent state and scratch; NULL: attention only (no state, KV cache rewinds). */
    void (*rec_dims)(const struct hmoe_model_config *c, struct hmoe_rec_dims *out);
    /* NULL: no GPU path (the context says "no GPU path for <name>" and runs on the CPU). */
    const struct hmoe_arch_gpu *gpu;
    /* NULL: MTP blocks of its files are skipped and --spec mtp is refused. */
    const struct hmoe_arch_mtp *mtp;
    struct hmoe_arch_moe moe;

    /* --- text --- */
    /* Chat format of this architecture's files when they carry no tokenizer.chat_template;
     * HMOE_CHAT_TEMPLATE_UNKNOWN: none implied (plain ChatML with a warning). */
    enum hmoe_chat_template chat_family;
    /* tokenizer.ggml.pre its files use (synthetic vocabularies are written with it). */
    const char *tokenizer_pre;
};

/* The entry whose names include `name` (general.architecture), or NULL. */
const struct hmoe_arch *hmoe_arch_find(const char *name);
/* The same for a GGUF string (not NUL-terminated). */
const struct hmoe_arch *hmoe_arch_find_str(struct hmoe_gguf_str name);
/* The entry of an open file's general.architecture, or NULL (absent or unsupported). */
const struct hmoe_arch *hmoe_arch_of_gguf(const struct hmoe_gguf *g);
/* Entry i of the table (0 .. hmoe_arch_count()-1). */
size_t hmoe_arch_count(void);
const struct hmoe_arch *hmoe_arch_get(size_t i);
/* The model's entry (set by hmoe_model_load). */
const struct hmoe_arch *hmoe_model_arch(const struct hmoe_model *m);
/* The chat format a file without a template speaks: the entry's family, else UNKNOWN. */
enum hmoe_chat_template hmoe_arch_default_chat_family(const struct hmoe_gguf *g);

#endif
