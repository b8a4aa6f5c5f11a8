/* test_hyb_cpu.c — the CPU half of a hybrid decode step (src/sched/hybrid_cpu.c) without a GPU:
 * mailboxes filled as the GPU's publish would fill them (tests/hyb_fake.h), then every RAM layer's
 * result vector against the scalar references of the type table (qwen3moe.md §4.4: SwiGLU experts,
 * weighted sum in selection order), for 0..k missed experts per layer, several team sizes
 * (splits that leave threads without items, chunks across experts), Q4_K/Q6_K and IQ4_XS/Q8_0
 * experts, 1-3 work items per thread and phase, and that the release
 * flag is set exactly for the layers with misses. Tolerance: the SIMD kernels match the references
 * to ~1e-7 relative per dot product (cpu.h); 1e-4 of the largest |value| allows the summation order.
 */
#include <omp.h>

#include "harness.h"
#include "hyb_fake.h"

static uint64_t rng = 88172645463325252ull;
static uint32_t next_u32(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint32_t)(rng >> 11);
}

static void run_case(const char *label, enum hmoe_type tg, enum hmoe_type td, int d, int F, int nt, int items) {
    const int n_layer = 6, E = 16, k = 8;
    struct hyb_fake f;
    char name[256];
    snprintf(name, sizeof name, "hybrid CPU step %s, %d threads, work items (%d per thread)", label, nt, items);
    if (hyb_fake_init(&f, n_layer, d, F, E, k, nt, tg, td, 7)) {
        t_check(0, name, "set-up failed");
        hyb_fake_free(&f);
        return;
    }
    f.h.cpu_items = items;
    float *x = malloc((size_t)d * sizeof *x), *ref = malloc((size_t)d * sizeof *ref);
    double worst = 0;
    int bad_layer = -1, bad_flag = -1;
    for (uint32_t seq = 1; seq <= 3; seq++) {
        for (int l = 0; l < n_layer; l++) {
            int ids[8], miss[8];
            float wts[8], sum = 0;
            for (int j = 0; j < k; j++) {
                int e;
                bool dup;
                do { /* distinct experts, as the router picks them */
                    e = (int)(next_u32() % (uint32_t)E);
                    dup = false;
                    for (int q = 0; q < j; q++) dup |= ids[q] == e;
                } while (dup);
                ids[j] = e;
                wts[j] = 0.1f + (float)(next_u32() % 1000) / 1000.0f;
                sum += wts[j];
            }
            for (int j = 0; j < k; j++) wts[j] /= sum;
            /* layer l of step seq misses (l + seq) % (k + 1) experts: 0..k over the steps */
            const int nm = (l + (int)seq) % (k + 1);
            for (int j = 0; j < k; j++) miss[j] = 0;
            for (int c = 0; c < nm;) {
                const int j = (int)(next_u32() % (uint32_t)k);
                if (!miss[j]) miss[j] = 1, c++;
            }
            for (int i = 0; i < d; i++) x[i] = ((float)(next_u32() % 2001) - 1000.0f) / 500.0f;
            hyb_fake_publish(&f, l, seq, ids, wts, miss, x);
        }
        struct hmoe_err err = {0};
        if (hmoe_hyb_cpu_step(&f.h, seq, &err)) {
            t_check(0, name, "step %u: %s", seq, err.msg);
            goto out;
        }
        for (int l = 0; l < n_layer; l++) {
            const bool any = f.mb[l].n_miss > 0;
            if ((f.mb[l].cpu_seq == seq) != any && bad_flag < 0) bad_flag = l;
            if (!any) continue;
            hyb_fake_reference(&f, l, ref);
            const float *got = f.h.res_host + (size_t)l * (size_t)d;
            double amax = 0, dmax = 0;
            for (int i = 0; i < d; i++) amax = fmax(amax, fabs(ref[i]));
            for (int i = 0; i < d; i++) dmax = fmax(dmax, fabs((double)got[i] - ref[i]));
            const double rel = amax > 0 ? dmax / amax : dmax;
            if (!(rel <= worst)) worst = rel;
            if (!(rel <= 1e-4) && bad_layer < 0) bad_layer = l;
        }
    }
    t_check(bad_layer < 0 && bad_flag < 0, name, "layer %d off by %.3g of max |value| (limit 1e-4); release flag wrong on layer %d",
            bad_layer, worst, bad_flag);
out:
    free(x), free(ref);
    hyb_fake_free(&f);
}

int main(void) {
    hmoe_cpu_init();
    omp_set_dynamic(0);
    /* Q4_K_M's expert types; d and F as small as the 256-element blocks allow */
    const int nts[] = {1, 2, 3, 5};
    for (size_t i = 0; i < HMOE_ARRAY_LEN(nts); i++) {
        run_case("Q4_K/Q6_K d=512 F=256", HMOE_TYPE_Q4_K, HMOE_TYPE_Q6_K, 512, 256, nts[i], 2);
    }
    run_case("Q4_K/Q6_K d=512 F=256", HMOE_TYPE_Q4_K, HMOE_TYPE_Q6_K, 512, 256, 3, 1);
    run_case("Q4_K/Q6_K d=512 F=256", HMOE_TYPE_Q4_K, HMOE_TYPE_Q6_K, 512, 256, 3, 3);
    /* other activation formats: Q8_K for gate/up, Q8_0 for down; F = 96 rows (chunks of 16) */
    run_case("IQ4_XS/Q8_0 d=256 F=96", HMOE_TYPE_IQ4_XS, HMOE_TYPE_Q8_0, 256, 96, 4, 2);
    return t_summary();
}
