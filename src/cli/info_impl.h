/* info_impl.h — private to `hmoe info` (cmd_info.c, info_stats.c, info_text.c, info_json.c):
 * the numbers derived from a GGUF's tensor list (type histogram, expert bytes per layer,
 * bytes that must stay resident without experts, bytes read per token) and the two
 * printers. Architecture knowledge is limited to gguf.md's naming conventions: layer
 * tensors are "blk.N.*", expert tensors contain "_exps" with the expert index outermost
 * (gguf.md §9), "{arch}.expert_count" / "{arch}.expert_used_count", and the MTP blocks of
 * "{arch}.nextn_predict_layers" at the end (qwen35moe.md §8).
 */
#ifndef HMOE_CLI_INFO_IMPL_H
#define HMOE_CLI_INFO_IMPL_H

#include <stdio.h>

#include "hmoe/gguf.h"

#define HMOE_INFO_MAX_LAYERS 65536 /* "blk.N." with a larger N is not counted as a layer */

struct hmoe_info_stats {
    char *arch;                        /* general.architecture (NUL-terminated copy) or NULL */
    uint64_t total_tensor_bytes;
    uint64_t type_count[HMOE_TYPE_COUNT];
    uint64_t type_bytes[HMOE_TYPE_COUNT];
    int64_t n_vocab;                   /* length of tokenizer.ggml.tokens, -1 if absent */

    /* Mixture of experts (is_moe: at least one tensor name contains "_exps"). */
    bool is_moe;
    uint32_t n_layer;                  /* 1 + highest N of "blk.N." tensor names, 0 if none */
    int64_t n_expert;                  /* {arch}.expert_count, else the largest expert dim; -1 unknown */
    int64_t n_expert_used;             /* {arch}.expert_used_count; -1 unknown */
    uint64_t *expert_bytes_per_layer;  /* [n_layer]: all experts of that layer */
    uint64_t *bytes_per_expert_per_layer; /* [n_layer]: gate+up+down (+biases) of one expert */
    uint64_t expert_bytes_total;
    uint64_t non_expert_bytes;         /* everything else: what must fit in VRAM without experts */
    bool tied_output;                  /* no output.weight: token_embd also serves as the output matrix */
    uint64_t token_embd_row_bytes;     /* one row of token_embd.weight (0 if absent) */
    int64_t active_bytes_per_token;    /* -1 when n_expert_used is unknown; MTP blocks not counted */

    /* Multi-token-prediction blocks ({arch}.nextn_predict_layers, qwen35moe.md §8): the last
     * n_mtp "blk.N." layers, which hmoe loads but never runs. */
    uint32_t n_mtp;
    uint64_t mtp_bytes;
};

enum hmoe_status hmoe_info_stats_init(struct hmoe_info_stats *s, const struct hmoe_gguf *g, struct hmoe_err *err);
void hmoe_info_stats_free(struct hmoe_info_stats *s);

/* llama_ftype preset name of general.file_type (gguf.md §10.1), "retired" or "unknown". */
const char *hmoe_info_ftype_name(uint64_t ftype);

void hmoe_info_print_text(FILE *f, const struct hmoe_gguf *g, const struct hmoe_info_stats *s);
void hmoe_info_print_json(FILE *f, const struct hmoe_gguf *g, const struct hmoe_info_stats *s);

#endif
