/* test_rope_yarn.c — YaRN for long contexts as the command line sets it up
 * (--rope-scaling yarn --rope-scale 4 --yarn-orig-ctx 32768, qwen3moe.md §5.2):
 *   - the load-time overrides reach the model's config (factor 1/4, original context
 *     32768, YaRN), and a context of 131072 positions is kept (the scaled span);
 *   - the RoPE table at positions up to 131071, for head sizes 32 and 128, against the
 *     same formulas evaluated in float64 here: theta_extrap = p base^(-2i/n_rot), theta_interp
 *     = theta_extrap / s, ramp over [floor(corr(32)), ceil(corr(1))] with corr(b) = n_rot
 *     ln(orig / (2 pi b)) / (2 ln base), mix = interp (1 - ramp) + extrap ramp, and both
 *     cos and sin times attn_factor (1 + 0.1 ln s).
 *     Tolerance, derived: the table builds angles as ggml does, by repeated binary32
 *     multiplication, so pair i's angle carries a relative error of at most (i + 2) 2^-23
 *     (one rounding of theta_scale, times i, plus one per multiply, plus the mix); cos and
 *     sin then move by at most mscale |theta| (i + 2) 2^-23, plus 2^-22 mscale for cosf/sinf
 *     and the product with mscale.
 */
#include <math.h>

#include "harness.h"
#include "model/model_impl.h"

static void expect(const struct hmoe_model_config *c, int p, int i, double *theta, double *mscale) {
    const double base = c->rope_freq_base, s = 1.0 / c->rope_freq_scale, orig = c->rope_n_ctx_orig;
    const double te = p * pow(base, -2.0 * i / c->n_rot);
    double lo = floor(c->n_rot * log(orig / (32 * 2 * M_PI)) / (2 * log(base)));
    double hi = ceil(c->n_rot * log(orig / (1 * 2 * M_PI)) / (2 * log(base)));
    lo = fmax(lo, 0);
    hi = fmin(hi, c->n_rot - 1);
    const double y = (i - lo) / fmax(0.001, hi - lo), ramp = 1 - fmin(1, fmax(0, y));
    *theta = te / s * (1 - ramp) + te * ramp;
    *mscale = c->rope_attn_factor * (1 + 0.1 * log(s));
}

static void table_case(const struct hmoe_model_config *c, const char *name) {
    const int32_t pos[] = {0, 1, 4095, 32767, 32768, 65535, 100003, 131071};
    enum { NP = sizeof pos / sizeof pos[0] };
    const int half = c->n_rot / 2;
    float co[NP * 64], si[NP * 64];
    hmoe_model_rope_table(c, pos, NP, co, si);
    double worst = 0;
    for (int t = 0; t < NP; t++)
        for (int i = 0; i < half; i++) {
            double th, m;
            expect(c, pos[t], i, &th, &m);
            const double tol = m * (fabs(th) * (i + 2) * ldexp(1, -23) + ldexp(1, -22));
            const double d = fmax(fabs(co[t * half + i] - m * cos(th)), fabs(si[t * half + i] - m * sin(th)));
            worst = fmax(worst, d / tol);
            if (d != d) worst = INFINITY;
        }
    char full[256];
    snprintf(full, sizeof full, "%s (worst %.3f of the tolerance)", name, worst);
    t_check(worst <= 1.0, full, "worst error %.2f x tolerance", worst);
}

int main(void) {
    char path[8192];
    snprintf(path, sizeof path, "%s", t_shared("fixtures/models/tiny-qwen3moe-A-mini-F32.gguf"));
    struct hmoe_model_params mp = {.has_rope_scaling = true, .rope_scaling = HMOE_ROPE_SCALING_YARN, .rope_scale = 4,
                                   .yarn_orig_ctx = 32768};
    struct hmoe_err err = {0};
    struct hmoe_model *m = NULL;
    hmoe_model_load(path, &mp, &m, &err);
    t_check(m && m->cfg.rope_scaling == HMOE_ROPE_SCALING_YARN && m->cfg.rope_freq_scale == 0.25f &&
                m->cfg.rope_n_ctx_orig == 32768 && m->cfg.rope_attn_factor == 1.0f,
            "--rope-scaling yarn --rope-scale 4 --yarn-orig-ctx 32768 reach the model config", "%s",
            m ? "config differs" : err.msg);
    if (m) {
        table_case(&m->cfg, "YaRN table of the mini model (32 dims, base 1e6) at positions to 131071 vs float64");
        struct hmoe_model_config c = m->cfg;
        c.n_rot = 128; /* the Qwen3-30B head */
        table_case(&c, "YaRN table for 128 dims (Qwen3-30B) at positions to 131071 vs float64");
        c.rope_freq_base = 1e7f; /* Qwen3.6's base, 262144 native */
        c.rope_n_ctx_orig = 262144;
        table_case(&c, "YaRN table for 128 dims, base 1e7 over 262144 vs float64");
        struct hmoe_ctx_params cp;
        hmoe_ctx_params_default(&cp);
        cp.n_ctx = 131072;
        cp.n_threads = 1;
        cp.n_ubatch = 32;
        struct hmoe_ctx *ctx = NULL;
        hmoe_ctx_init(m, &cp, &ctx, &err);
        t_check(ctx && hmoe_ctx_n_ctx(ctx) == 131072, "-c 131072 with YaRN x4 over 32768 is kept", "%s",
                ctx ? "n_ctx differs" : err.msg);
        hmoe_ctx_free(ctx);
    }
    hmoe_model_free(m);
    return t_summary();
}
