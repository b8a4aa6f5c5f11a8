/* bench_batched.c — `hmoe bench -npl`: parallel sequences with llama-batched-bench's
 * conventions. For every (-npp PP, -ntg TG, -npl B): a context of B sequences with PP + TG
 * positions each; the B prompts of PP random tokens go in as one batched step (timed: T_PP,
 * S_PP = B*PP / T_PP), then TG steps of one token per sequence (T_TG, S_TG = B*TG / T_TG);
 * T and S over both. One uncounted warm-up step runs first. Beyond llama-batched-bench: the
 * per-sequence decode speed (S_TG / B), the expert bytes the MoE read per decode step
 * against one read per (token, expert) pair — the measured sharing of the batch — and the
 * RAM traffic of a decode step (dense weights once, the distinct experts, every sequence's
 * KV) times the step rate against the RAM read bandwidth probed at start (roofline).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_impl.h"
#include "hmoe/cpu.h"
#include "info_impl.h"

struct batched_row {
    int pp, tg, pl, n_kv;
    double t_pp, s_pp, t_tg, s_tg, t, s, s_tg_seq;
    double expert_mib_step, pair_mib_step, sharing; /* decode steps: distinct / per-pair expert bytes */
    double ram_gbps, roofline_pct;
};

static uint64_t rng_next(uint64_t *r) {
    *r ^= *r >> 12;
    *r ^= *r << 25;
    *r ^= *r >> 27;
    return *r * 0x2545f4914f6cdd1dull >> 33;
}

static void print_begin(enum hmoe_bench_format f) {
    if (f == HMOE_BENCH_MD) {
        printf("|    PP |     TG |    B |   N_KV |   T_PP s | S_PP t/s |   T_TG s | S_TG t/s | S_TG/B t/s |      T s |    S t/s "
               "| expert MiB/step | per-pair MiB | sharing | RAM GB/s | roofline |\n");
        printf("|-------|--------|------|--------|----------|----------|----------|----------|------------|----------|----------"
               "|-----------------|--------------|---------|----------|----------|\n");
    } else if (f == HMOE_BENCH_CSV) {
        printf("n_kv_max,n_ubatch,n_threads,pp,tg,pl,n_kv,t_pp,speed_pp,t_tg,speed_tg,speed_tg_per_seq,t,speed,"
               "expert_mib_per_step,pair_mib_per_step,expert_sharing,ram_read_gbps,ram_gbps,roofline_pct\n");
    } else if (f == HMOE_BENCH_JSON) {
        printf("[");
    }
}

static void print_row(enum hmoe_bench_format f, const struct batched_row *r, int n_kv_max, int n_ubatch,
                      int n_threads, double ram_read, bool first) {
    if (f == HMOE_BENCH_MD) {
        printf("| %5d | %6d | %4d | %6d | %8.3f | %8.2f | %8.3f | %8.2f | %10.2f | %8.3f | %8.2f | %15.1f | %12.1f | "
               "%6.2fx | %8.1f | %7.1f%% |\n",
               r->pp, r->tg, r->pl, r->n_kv, r->t_pp, r->s_pp, r->t_tg, r->s_tg, r->s_tg_seq, r->t, r->s,
               r->expert_mib_step, r->pair_mib_step, r->sharing, r->ram_gbps, r->roofline_pct);
        return;
    }
    if (f == HMOE_BENCH_CSV) {
        printf("%d,%d,%d,%d,%d,%d,%d,%.6f,%.3f,%.6f,%.3f,%.3f,%.6f,%.3f,%.3f,%.3f,%.4f,%.2f,%.3f,%.2f\n", n_kv_max,
               n_ubatch, n_threads, r->pp, r->tg, r->pl, r->n_kv, r->t_pp, r->s_pp, r->t_tg, r->s_tg, r->s_tg_seq,
               r->t, r->s, r->expert_mib_step, r->pair_mib_step, r->sharing, ram_read, r->ram_gbps, r->roofline_pct);
        return;
    }
    if (f == HMOE_BENCH_JSON) printf("%s\n  ", first ? "" : ",");
    printf("{\"n_kv_max\": %d, \"n_ubatch\": %d, \"n_threads\": %d, \"pp\": %d, \"tg\": %d, \"pl\": %d, \"n_kv\": %d, "
           "\"t_pp\": %.6f, \"speed_pp\": %.3f, \"t_tg\": %.6f, \"speed_tg\": %.3f, \"speed_tg_per_seq\": %.3f, "
           "\"t\": %.6f, \"speed\": %.3f, \"expert_mib_per_step\": %.3f, \"pair_mib_per_step\": %.3f, "
           "\"expert_sharing\": %.4f, \"ram_read_gbps\": %.2f, \"ram_gbps\": %.3f, \"roofline_pct\": %.2f}",
           n_kv_max, n_ubatch, n_threads, r->pp, r->tg, r->pl, r->n_kv, r->t_pp, r->s_pp, r->t_tg, r->s_tg,
           r->s_tg_seq, r->t, r->s, r->expert_mib_step, r->pair_mib_step, r->sharing, ram_read, r->ram_gbps,
           r->roofline_pct);
    if (f == HMOE_BENCH_JSONL) printf("\n");
}

/* One (pp, tg, pl) test on a fresh context of pl sequences. */
static int run_one(const struct hmoe_cli_model_opts *mo0, const struct hmoe_model *model, double dense_bytes,
                   int pp, int tg, int pl, uint64_t *rng, struct batched_row *r, int *threads, double *ram_read) {
    struct hmoe_cli_model_opts mo = *mo0;
    mo.n_seq = pl;
    mo.n_ctx = pl * (pp + tg + 1);
    struct hmoe_ctx *c = NULL;
    int rc = hmoe_cli_ctx_open(&mo, model, &c);
    if (rc) return rc;
    *threads = hmoe_ctx_get_params(c)->n_threads;
    if (*ram_read == 0) {
        uint64_t buf = 0;
        *ram_read = hmoe_bench_probe_ram_gbps(*threads, &buf);
    }
    const int V = model->cfg.n_vocab;
    struct hmoe_err err = {0};
    int32_t *ids = malloc((size_t)pl * (size_t)(pp + tg + 1) * sizeof *ids);
    float *lg = malloc((size_t)pl * (size_t)V * sizeof *lg);
    struct hmoe_seq_tokens *sh = malloc((size_t)pl * sizeof *sh);
    if (!ids || !lg || !sh) {
        fprintf(stderr, "hmoe: out of memory\n");
        rc = HMOE_EXIT_ERROR;
        goto out;
    }
    const int stride = pp + tg + 1;
    for (int i = 0; i < pl * stride; i++) ids[i] = (int32_t)(rng_next(rng) % (uint64_t)V);
    /* warm-up: one token per sequence, then forgotten */
    for (int q = 0; q < pl; q++) sh[q] = (struct hmoe_seq_tokens){.seq = q, .ids = ids + q * stride, .n = 1, .logits = true};
    if (hmoe_ctx_decode_batch(c, sh, pl, lg, &err)) goto fail;
    struct hmoe_sched_moe_reads rd;
    hmoe_ctx_take_moe_reads(c, &rd);
    const double t0 = hmoe_time_s();
    for (int q = 0; q < pl; q++)
        sh[q] = (struct hmoe_seq_tokens){.seq = q, .ids = ids + q * stride, .n = pp, .pos0 = 0, .logits = true};
    if (pp > 0 && hmoe_ctx_decode_batch(c, sh, pl, lg, &err)) goto fail;
    const double t1 = hmoe_time_s();
    hmoe_ctx_take_moe_reads(c, &rd);
    for (int g = 0; g < tg; g++) {
        for (int q = 0; q < pl; q++)
            sh[q] = (struct hmoe_seq_tokens){.seq = q, .ids = ids + q * stride + pp + g, .n = 1, .pos0 = pp + g,
                                             .logits = true};
        if (hmoe_ctx_decode_batch(c, sh, pl, lg, &err)) goto fail;
    }
    const double t2 = hmoe_time_s();
    hmoe_ctx_take_moe_reads(c, &rd);
    *r = (struct batched_row){.pp = pp, .tg = tg, .pl = pl, .n_kv = pl * (pp + tg)};
    r->t_pp = t1 - t0;
    r->t_tg = t2 - t1;
    r->t = t2 - t0;
    r->s_pp = r->t_pp > 0 ? pl * pp / r->t_pp : 0;
    r->s_tg = r->t_tg > 0 ? pl * tg / r->t_tg : 0;
    r->s_tg_seq = r->s_tg / pl;
    r->s = r->t > 0 ? r->n_kv / r->t : 0;
    if (tg > 0) {
        r->expert_mib_step = (double)rd.bytes / tg / 1048576.0;
        r->pair_mib_step = (double)rd.pair_bytes / tg / 1048576.0;
        r->sharing = rd.bytes ? (double)rd.pair_bytes / (double)rd.bytes : 0;
        /* a decode step reads the dense weights once, each distinct expert once, and every
         * sequence's KV up to its mean position */
        const double kv_pos = (double)hmoe_ctx_kv_bytes(c) / ((double)hmoe_ctx_n_ctx(c) * pl);
        const double step_bytes = dense_bytes + (double)rd.bytes / tg + kv_pos * pl * (pp + (tg - 1) / 2.0) +
                                  2.0 * (double)hmoe_ctx_state_bytes(c) * pl;
        r->ram_gbps = step_bytes * (tg / r->t_tg) / 1e9;
        r->roofline_pct = *ram_read > 0 ? r->ram_gbps / *ram_read * 100 : 0;
    }
    goto out;
fail:
    rc = hmoe_cli_fail(&err);
out:
    free(ids);
    free(lg);
    free(sh);
    hmoe_ctx_free(c);
    return rc;
}

int hmoe_bench_batched(const struct hmoe_cli_model_opts *mo, const char *path, const int *npp, int n_npp,
                       const int *ntg, int n_ntg, const int *npl, int n_npl, enum hmoe_bench_format fmt, bool quiet) {
    struct hmoe_model *model = NULL;
    struct hmoe_cli_model_opts o = *mo;
    o.model_path = path;
    int rc = hmoe_cli_model_load(&o, &model);
    if (rc) return rc;
    hmoe_cli_model_preload(model, false);
    /* Dense bytes of a decode step: everything a token reads except its routed experts (the
     * measured expert reads are added per test). */
    struct hmoe_info_stats st;
    struct hmoe_err err = {0};
    double dense = 0;
    if (hmoe_info_stats_init(&st, model->gguf, &err) == HMOE_OK && st.active_bytes_per_token >= 0) {
        double routed = 0;
        for (int il = 0; il < model->cfg.n_layer; il++) {
            const struct hmoe_moe_weights *w = &model->w.layers[il].moe;
            if (!w->router.data) continue;
            routed += (double)w->n_expert_used *
                      (double)((w->gate.data ? w->gate.mat_bytes : 0) + w->up.mat_bytes + w->down.mat_bytes);
        }
        dense = HMOE_MAX(0.0, (double)st.active_bytes_per_token - routed);
    }
    hmoe_info_stats_free(&st);
    uint64_t rng = 0x9e3779b97f4a7c15ull;
    int threads = 0, n_kv_max = 0;
    double ram_read = 0;
    for (int i = 0; i < n_npl; i++)
        for (int a = 0; a < n_npp; a++)
            for (int b = 0; b < n_ntg; b++) n_kv_max = HMOE_MAX(n_kv_max, npl[i] * (npp[a] + ntg[b]));
    print_begin(fmt);
    bool first = true;
    for (int a = 0; !rc && a < n_npp; a++)
        for (int b = 0; !rc && b < n_ntg; b++)
            for (int i = 0; !rc && i < n_npl; i++) {
                struct batched_row r = {0};
                rc = run_one(&o, model, dense, npp[a], ntg[b], npl[i], &rng, &r, &threads, &ram_read);
                if (rc) break;
                if (first && !quiet)
                    fprintf(stderr, "bench: RAM read %.1f GB/s with %d thread%s; CPU kernels %s\n", ram_read, threads,
                            threads > 1 ? "s" : "", hmoe_cpu_path_name(hmoe_cpu_path()));
                print_row(fmt, &r, n_kv_max, o.n_ubatch, threads, ram_read, first);
                first = false;
                fflush(stdout);
            }
    if (fmt == HMOE_BENCH_JSON) printf("\n]\n");
    if (fmt == HMOE_BENCH_MD && !quiet && !rc)
        printf("\nS_TG/B: decode t/s of one sequence; expert MiB/step: expert weights the MoE read per decode step "
               "(each routed expert once for all rows), per-pair: what one read per (token, expert) would be, "
               "sharing: their ratio; RAM GB/s: a step's dense weights + distinct experts + KV x steps/s; roofline: "
               "that / RAM read bandwidth.\n");
    hmoe_model_free(model);
    return rc;
}
