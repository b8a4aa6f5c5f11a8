/* ops.c — the small numeric building blocks of the forward pass: RMSNorm (qwen3moe.md
 * §4.2), the RoPE angle table and NEOX rotation (§5, §5.1, §5.2), and dense matmuls that
 * share one input, quantized once per activation type and split by row chunks into one job
 * of the cpu.h thread team (cpu.h does the dot products too).
 */
#include <math.h>
#include <string.h>

#include "hmoe/cpu.h"
#include "model/model_impl.h"

/* GNU vector types for the norm's loops: -O2's cheap vectoriser leaves them scalar. */
typedef float v8f __attribute__((vector_size(32)));
typedef double v8d __attribute__((vector_size(64)));

void hmoe_model_rmsnorm(float *y, const float *x, const float *w, int64_t n, float eps) {
    /* Sum of squares in double in 8 lanes, then the lanes in a fixed tree: one chain of
     * dependent scalar adds plus the scalar scaling took 2.1 µs per 2048-wide row and 5.1 µs
     * per token's 36 Q/K heads, all on the decode's serial path. The squares are
     * exact in double; only the order of the double adds changed, which moves the f32 mean
     * by at most one unit in its last place and only when the sum lies within ~n·2^-53 of a
     * rounding boundary. The scaling is the same f32 (x * scale) * w per element. */
    v8d acc = {0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        v8f xv;
        memcpy(&xv, x + i, sizeof xv);
        const v8d xd = __builtin_convertvector(xv, v8d);
        acc += xd * xd;
    }
    double sum = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    for (; i < n; i++) sum += (double)x[i] * (double)x[i];
    const float mean = (float)(sum / (double)n);
    const float scale = 1.0f / sqrtf(mean + eps);
    i = 0;
    for (; i + 8 <= n; i += 8) {
        v8f xv, wv;
        memcpy(&xv, x + i, sizeof xv);
        memcpy(&wv, w + i, sizeof wv);
        const v8f yv = (xv * scale) * wv;
        memcpy(y + i, &yv, sizeof yv);
    }
    for (; i < n; i++) y[i] = (x[i] * scale) * w[i];
}

/* YaRN correction dimension for a given number of rotations beta (qwen3moe.md §5.2). */
static float yarn_corr_dim(int n_rot, int n_ctx_orig, float beta, float base) {
    return (float)n_rot * logf((float)n_ctx_orig / (beta * 2.0f * (float)M_PI)) / (2.0f * logf(base));
}

void hmoe_model_rope_table(const struct hmoe_model_config *c, const int32_t *pos, int n, float *cos_out,
                           float *sin_out) {
    const int half = c->n_rot / 2;
    const float theta_scale = powf(c->rope_freq_base, -2.0f / (float)c->n_rot);
    const float freq_scale = c->rope_freq_scale;
    const bool yarn = c->rope_scaling == HMOE_ROPE_SCALING_YARN;
    float low = 0.0f, high = 0.0f, mscale = c->rope_attn_factor;
    if (yarn) {
        /* beta_fast = 32, beta_slow = 1: the GGUF keys are not read for qwen3moe (§1). */
        low = floorf(yarn_corr_dim(c->n_rot, c->rope_n_ctx_orig, 32.0f, c->rope_freq_base));
        high = ceilf(yarn_corr_dim(c->n_rot, c->rope_n_ctx_orig, 1.0f, c->rope_freq_base));
        low = low > 0.0f ? low : 0.0f;
        high = high < (float)(c->n_rot - 1) ? high : (float)(c->n_rot - 1);
        mscale *= 1.0f + 0.1f * logf(1.0f / freq_scale);
    }
    for (int t = 0; t < n; t++) {
        /* Angles by repeated f32 multiplication, as ggml builds its rope cache. */
        float theta = (float)pos[t];
        float *co = cos_out + (size_t)t * half, *si = sin_out + (size_t)t * half;
        for (int i = 0; i < half; i++) {
            const float th_extrap = theta, th_interp = freq_scale * th_extrap;
            float th = th_interp;
            if (yarn) {
                float y = ((float)i - low) / fmaxf(0.001f, high - low);
                float ramp = 1.0f - fminf(1.0f, fmaxf(0.0f, y));
                th = th_interp * (1.0f - ramp) + th_extrap * ramp;
            }
            co[i] = cosf(th) * mscale;
            si[i] = sinf(th) * mscale;
            theta *= theta_scale;
        }
    }
}

void hmoe_model_rope_neox(float *x, int n_rot, const float *cos_t, const float *sin_t) {
    const int half = n_rot / 2;
    for (int i = 0; i < half; i++) {
        const float x0 = x[i], x1 = x[i + half];
        x[i] = x0 * cos_t[i] - x1 * sin_t[i];
        x[i + half] = x0 * sin_t[i] + x1 * cos_t[i];
    }
}

/* Rows [r0, r1) of W times ntok activation rows: the one-token case is a plain gemv. */
static void mm_rows(const struct hmoe_mat *w, const void *xq, size_t xq_stride, int ntok, int64_t r0, int64_t r1,
                    float *y, size_t y_stride) {
    if (ntok == 1) hmoe_cpu_gemv(w->type, w->n_in, w->data, w->row_bytes, r0, r1, xq, y);
    else hmoe_cpu_gemm(w->type, w->n_in, w->data, w->row_bytes, r0, r1, xq, xq_stride, ntok, y, y_stride);
}

enum { MM_MAX_JOBS = 4 };

/* One hmoe_model_matmul call as the pool's work items see it. */
struct mm_call {
    const struct hmoe_mm_job *jobs;
    const float *x;
    size_t x_stride;
    int ntok, n_slots;
    enum hmoe_type slot_wtype[MM_MAX_JOBS];
    int job_slot[MM_MAX_JOBS];          /* activation slot of each job, -1: F32 reads x */
    int64_t first_item[MM_MAX_JOBS + 1];
    int64_t chunk;                      /* rows per item */
    uint8_t *act;                       /* slot s, token t at act + s * slot_bytes + t * arb */
    size_t arb, slot_bytes;
    struct hmoe_cpu_lanes *lanes;       /* decode: items taken per thread lane (NULL: item order) */
};

static void task_quantize(void *arg, int64_t i, int tid) {
    (void)tid;
    const struct mm_call *m = arg;
    const int s = (int)(i / m->ntok), t = (int)(i % m->ntok);
    hmoe_cpu_quantize_act(m->slot_wtype[s], m->x + (size_t)t * m->x_stride,
                          m->act + s * m->slot_bytes + (size_t)t * m->arb, m->jobs[0].w->n_in);
}

/* One row chunk of one job for all tokens, plus its bias. */
static void task_rows(void *arg, int64_t it, int tid) {
    const struct mm_call *m = arg;
    if (m->lanes) it = hmoe_cpu_lanes_next(m->lanes, tid);
    int j = 0;
    while (it >= m->first_item[j + 1]) j++;
    const struct hmoe_mm_job *jb = &m->jobs[j];
    const int64_t r0 = (it - m->first_item[j]) * m->chunk;
    const int64_t r1 = r0 + m->chunk < jb->w->n_out ? r0 + m->chunk : jb->w->n_out;
    const int s = m->job_slot[j];
    const void *xq = s < 0 ? (const void *)m->x : (const void *)(m->act + s * m->slot_bytes);
    const size_t xq_stride = s < 0 ? m->x_stride * sizeof(float) : m->arb;
    mm_rows(jb->w, xq, xq_stride, m->ntok, r0, r1, jb->y + r0, jb->y_stride);
    if (jb->bias)
        for (int t = 0; t < m->ntok; t++) {
            float *y = jb->y + (size_t)t * jb->y_stride;
            for (int64_t r = r0; r < r1; r++) y[r] += jb->bias[r];
        }
}

void hmoe_model_matmul(struct hmoe_ctx *c, const struct hmoe_mm_job *jobs, int n_jobs, const float *x,
                       size_t x_stride, int ntok) {
    struct hmoe_run_state *rs = &c->rs;
    const int nt = c->p.n_threads;
    struct mm_call m = {.jobs = jobs, .x = x, .x_stride = x_stride, .ntok = ntok, .act = rs->act,
                        .arb = rs->act_row_bytes, .slot_bytes = (size_t)c->p.n_ubatch * rs->act_row_bytes};
    /* One quantized copy of x per distinct activation type; F32 partners read x directly. */
    int64_t total_rows = 0;
    for (int j = 0; j < n_jobs; j++) {
        enum hmoe_type vdt = hmoe_type_info[jobs[j].w->type].vec_dot_type;
        m.job_slot[j] = -1;
        if (vdt != HMOE_TYPE_F32) {
            for (int s = 0; s < m.n_slots; s++)
                if (hmoe_type_info[m.slot_wtype[s]].vec_dot_type == vdt) m.job_slot[j] = s;
            if (m.job_slot[j] < 0) {
                m.slot_wtype[m.n_slots] = jobs[j].w->type;
                m.job_slot[j] = m.n_slots++;
            }
        }
        total_rows += jobs[j].w->n_out;
    }
    /* Row chunks: ~8 per thread so the dynamic hand-out evens out, 16..256 rows each; up to
     * 1024 for a decoded token. Why: every decode item starts its stream cold (first look-ahead
     * burst) and drains at its end (look-ahead clamped to the item), and with the page
     * look-ahead (tile_impl.h) the LM head's 594 items of 256 rows lost that per item: its
     * phase took 4-7 % less time with 1024-row items (149 of 1.7 MB) in tokens alternated
     * within one run. */
    int64_t chunk = total_rows / ((int64_t)nt * 8);
    const int64_t chunk_max = ntok == 1 ? 1024 : 256;
    m.chunk = chunk < 16 ? 16 : chunk > chunk_max ? chunk_max : (chunk + 15) / 16 * 16;
    m.first_item[0] = 0;
    for (int j = 0; j < n_jobs; j++) m.first_item[j + 1] = m.first_item[j] + (jobs[j].w->n_out + m.chunk - 1) / m.chunk;

    /* A decoded token's row is quantized by the caller: a job would cost more than the work. */
    const int64_t n_quant = (int64_t)m.n_slots * ntok;
    hmoe_cpu_parallel(n_quant >= 4 ? nt : 1, n_quant, task_quantize, &m);
    /* A decoded token's items in per-thread lanes (cpu.h): each thread reads one contiguous
     * run of rows instead of every nt-th item (qkv 5 %, wo 3-4 % less time). */
    struct hmoe_cpu_lanes lanes;
    if (ntok == 1 && nt > 1) {
        hmoe_cpu_lanes_init(&lanes, m.first_item[n_jobs], nt);
        m.lanes = &lanes;
    }
    hmoe_cpu_parallel(nt, m.first_item[n_jobs], task_rows, &m);
}

/* Embedding: row ids[t] of token_embd, dequantized; no scaling (qwen3moe.md §4.1). */
struct embed_call {
    struct hmoe_ctx *c;
    const int32_t *ids;
};

static void task_embed(void *arg, int64_t t, int tid) {
    (void)tid;
    const struct embed_call *a = arg;
    const struct hmoe_mat *e = &a->c->m->w.token_embd;
    const int64_t d = a->c->m->cfg.n_embd;
    hmoe_type_info[e->type].dequant_ref((const uint8_t *)e->data + (size_t)a->ids[t] * e->row_bytes, a->c->rs.x + t * d,
                                        d);
}

void hmoe_model_embed(struct hmoe_ctx *c, const int32_t *ids, int n) {
    struct embed_call a = {.c = c, .ids = ids};
    hmoe_cpu_parallel(n >= 4 ? c->p.n_threads : 1, n, task_embed, &a);
}

/* x += add (when given), then xn = RMSNorm(x) * w, for n rows of d. */
struct norm_call {
    float *x, *xn;
    const float *add, *w;
    int64_t d;
    float eps;
};

static void task_add_norm(void *arg, int64_t t, int tid) {
    (void)tid;
    const struct norm_call *m = arg;
    float *x = m->x + t * m->d;
    if (m->add) {
        const float *a = m->add + t * m->d;
        for (int64_t i = 0; i < m->d; i++) x[i] += a[i];
    }
    hmoe_model_rmsnorm(m->xn + t * m->d, x, m->w, m->d, m->eps);
}

void hmoe_model_add_rmsnorm(struct hmoe_ctx *c, float *x, const float *add, float *xn, const float *w, int n) {
    const struct hmoe_model_config *cfg = &c->m->cfg;
    struct norm_call m = {.x = x, .xn = xn, .add = add, .w = w, .d = cfg->n_embd, .eps = cfg->rms_eps};
    hmoe_cpu_parallel(n >= 4 ? c->p.n_threads : 1, n, task_add_norm, &m);
}
