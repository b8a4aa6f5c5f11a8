/* cmd_logits.c — `hmoe logits -m FILE --ids 1,2,3 [-o out.f32] [--top N]`: one prefill of
 * the given token ids with logits at every position. -o writes them as raw little-endian
 * float32, row-major [n_pos][n_vocab] (the layout of the fixtures/golden .f32 files); --top prints
 * the N best ids per position for people. Used by tests and reviewers.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "hmoe/json.h"

static const char *usage = "hmoe logits -m FILE (--ids 1,2,3 | --ids-file FILE) [-o out.f32] [--top N] [options]";

/* The n best (logit, id) of one row, descending, lowest id first on ties. */
static void print_top(int pos, int32_t id, const float *row, int n_vocab, int n) {
    printf("pos %4d  id %6d |", pos, id);
    int32_t best[64];
    int nb = 0;
    for (int k = 0; k < n && k < n_vocab && k < 64; k++) {
        int32_t b = -1;
        for (int32_t v = 0; v < n_vocab; v++) {
            bool taken = false;
            for (int i = 0; i < nb; i++) taken |= best[i] == v;
            if (!taken && (b < 0 || row[v] > row[b])) b = v;
        }
        best[nb++] = b;
        printf(" %6d %9.6f", b, row[b]);
    }
    printf("\n");
}

int hmoe_cmd_logits(int argc, char **argv) {
    struct hmoe_cli_model_opts mo;
    hmoe_cli_model_opts_default(&mo);
    mo.n_ctx = 0; /* default: exactly the number of ids */
    const char *ids_text = NULL, *ids_file = NULL, *out_path = NULL;
    int top = -1; /* not given */
    bool verbose = false;
    const struct hmoe_opt opts[] = {
        {"--ids", NULL, "LIST", "token ids, comma-separated (\"1,2,3\" or \"[1, 2, 3]\")", HMOE_OPT_STR, &ids_text},
        {"--ids-file", NULL, "FILE", "read the token ids from FILE (same syntax, whitespace allowed)", HMOE_OPT_STR,
         &ids_file},
        {"--output", "-o", "FILE", "write all logits as raw little-endian float32 [n_pos][n_vocab]", HMOE_OPT_STR,
         &out_path},
        {"--top", NULL, "N", "print the N best ids and logits per position (default 5 when no -o)", HMOE_OPT_INT,
         &top},
        {"--verbose", "-v", NULL, "print load information", HMOE_OPT_FLAG, &verbose},
        HMOE_CLI_MODEL_OPTS(mo),
        {NULL, NULL, NULL, NULL, 0, NULL},
    };
    const char *pos[1];
    int n_pos = 0;
    int rc = hmoe_opts_parse(usage, opts, argc, argv, pos, 0, &n_pos);
    if (rc) return rc < 0 ? HMOE_EXIT_OK : rc;
    if ((rc = hmoe_cli_compat_apply("logits", &mo))) return rc;
    if (verbose) hmoe_log_level = HMOE_LOG_INFO;
    if (!!ids_text == !!ids_file) {
        fprintf(stderr, "hmoe: give exactly one of --ids LIST or --ids-file FILE\nusage: %s\n", usage);
        return HMOE_EXIT_USAGE;
    }
    if (top < -1 || top > 64 || (top == 0 && !out_path)) {
        fprintf(stderr, "hmoe: invalid --top %d: must be 1..64 (0, printing nothing, only with -o FILE)\n", top);
        return HMOE_EXIT_USAGE;
    }
    if (top < 0) top = out_path ? 0 : 5;

    struct hmoe_err err = {0};
    char *file_text = NULL;
    if (ids_file) {
        size_t len;
        if (hmoe_read_file(ids_file, &file_text, &len, &err)) return hmoe_cli_fail(&err);
        ids_text = file_text;
    }
    int32_t *ids = NULL;
    int n = 0;
    rc = hmoe_cli_parse_ids(ids_text, &ids, &n);
    free(file_text);
    if (rc) return rc;
    if (mo.n_ctx == 0) mo.n_ctx = n;

    double t0 = hmoe_time_s();
    struct hmoe_model *model = NULL;
    struct hmoe_ctx *ctx = NULL;
    rc = hmoe_cli_model_open(&mo, &model, &ctx);
    if (rc) {
        free(ids);
        return rc;
    }
    double t1 = hmoe_time_s();
    const int V = model->cfg.n_vocab;
    float *logits = malloc((size_t)n * (size_t)V * sizeof(float));
    if (!logits) {
        fprintf(stderr, "hmoe: out of memory for %d x %d logits\n", n, V);
        rc = HMOE_EXIT_ERROR;
        goto done;
    }
    if (hmoe_ctx_decode(ctx, ids, n, 0, HMOE_LOGITS_ALL, logits, &err)) {
        rc = hmoe_cli_fail(&err);
        goto done;
    }
    double t2 = hmoe_time_s();
    HMOE_INFO("load %.1f ms, %d tokens in %.1f ms (%.2f tokens/s), %d threads", (t1 - t0) * 1e3, n, (t2 - t1) * 1e3,
              n / (t2 - t1), hmoe_ctx_get_params(ctx)->n_threads);
    if (out_path) {
        /* Raw float32 in host order: every platform hmoe builds on (x86-64) is little-endian. */
        FILE *f = fopen(out_path, "wb");
        if (!f || fwrite(logits, sizeof(float), (size_t)n * V, f) != (size_t)n * V || fclose(f) != 0) {
            fprintf(stderr, "hmoe: cannot write %s\n", out_path);
            rc = HMOE_EXIT_ERROR;
            goto done;
        }
    }
    for (int t = 0; t < n && top > 0; t++) print_top(t, ids[t], logits + (size_t)t * V, V, top);
    rc = hmoe_cli_stdout_check(rc);
done:
    free(logits);
    free(ids);
    hmoe_ctx_free(ctx);
    hmoe_model_free(model);
    return rc;
}
