/* cli_model.c — what `logits`, `run` (and later `chat`, `bench`) share: turning the
 * llama.cpp-style context flags (-c, -t, -ctk, -ctv, -ub, --rope-*) into model and context
 * parameters, loading both with one message per failure, and parsing token-id lists.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

void hmoe_cli_model_opts_default(struct hmoe_cli_model_opts *o) {
    memset(o, 0, sizeof *o);
    o->n_ctx = 4096;
    o->n_ubatch = 512;
    o->cache_type_k = "f16";
    o->cache_type_v = "f16";
}

int hmoe_cli_model_open(const struct hmoe_cli_model_opts *o, struct hmoe_model **model, struct hmoe_ctx **ctx) {
    *model = NULL;
    *ctx = NULL;
    struct hmoe_err err = {0};
    if (!o->model_path) {
        fprintf(stderr, "hmoe: -m/--model FILE is required\n");
        return HMOE_EXIT_USAGE;
    }
    struct hmoe_ctx_params cp;
    hmoe_ctx_params_default(&cp);
    if (!hmoe_kv_type_from_name(o->cache_type_k, &cp.type_k) || !hmoe_kv_type_from_name(o->cache_type_v, &cp.type_v)) {
        fprintf(stderr, "hmoe: unknown KV cache type '%s' (use f32, f16, bf16 or q8_0 with -ctk/-ctv)\n",
                hmoe_kv_type_from_name(o->cache_type_k, &cp.type_k) ? o->cache_type_v : o->cache_type_k);
        return HMOE_EXIT_USAGE;
    }
    if (o->n_ctx < 0 || o->n_threads < 0 || o->n_ubatch < 0) {
        fprintf(stderr, "hmoe: -c, -t and -ub must not be negative\n");
        return HMOE_EXIT_USAGE;
    }
    cp.n_ctx = o->n_ctx;
    cp.n_threads = o->n_threads;
    cp.n_ubatch = o->n_ubatch;
    struct hmoe_model_params mp = {0};
    if (o->rope_scaling) {
        mp.has_rope_scaling = true;
        if (strcmp(o->rope_scaling, "none") == 0) mp.rope_scaling = HMOE_ROPE_SCALING_NONE;
        else if (strcmp(o->rope_scaling, "linear") == 0) mp.rope_scaling = HMOE_ROPE_SCALING_LINEAR;
        else if (strcmp(o->rope_scaling, "yarn") == 0) mp.rope_scaling = HMOE_ROPE_SCALING_YARN;
        else {
            fprintf(stderr, "hmoe: unknown --rope-scaling '%s' (use none, linear or yarn)\n", o->rope_scaling);
            return HMOE_EXIT_USAGE;
        }
    }
    mp.rope_scale = o->rope_scale;
    mp.yarn_orig_ctx = o->yarn_orig_ctx;
    mp.rope_freq_base = o->rope_freq_base;
    if (hmoe_model_load(o->model_path, &mp, model, &err)) return hmoe_cli_fail(&err);
    if (hmoe_ctx_init(*model, &cp, ctx, &err)) {
        hmoe_model_free(*model);
        *model = NULL;
        return hmoe_cli_fail(&err);
    }
    return HMOE_EXIT_OK;
}

int hmoe_cli_parse_ids(const char *text, int32_t **ids, int *n) {
    *ids = NULL;
    *n = 0;
    size_t cap = 16, cnt = 0;
    int32_t *v = malloc(cap * sizeof *v);
    if (!v) return HMOE_EXIT_ERROR;
    const char *p = text;
    for (;;) {
        while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r' || *p == ',' || *p == '[' || *p == ']') p++;
        if (!*p) break;
        char *end;
        errno = 0;
        long x = strtol(p, &end, 10);
        if (end == p || errno || x < 0 || x > INT32_MAX) {
            fprintf(stderr, "hmoe: bad token id at '%.20s' (expected non-negative integers separated by commas)\n", p);
            free(v);
            return HMOE_EXIT_USAGE;
        }
        if (cnt == cap) {
            int32_t *nv = realloc(v, (cap *= 2) * sizeof *v);
            if (!nv) {
                free(v);
                return HMOE_EXIT_ERROR;
            }
            v = nv;
        }
        v[cnt++] = (int32_t)x;
        p = end;
    }
    if (cnt == 0 || cnt > INT32_MAX / 2) {
        fprintf(stderr, "hmoe: no token ids given\n");
        free(v);
        return HMOE_EXIT_USAGE;
    }
    *ids = v;
    *n = (int)cnt;
    return HMOE_EXIT_OK;
}
