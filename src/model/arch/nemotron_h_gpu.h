/* nemotron_h_gpu.h — private to the nemotron_h GPU files: what the GPU backend keeps for a
 * nemotron_h / nemotron_h_moe model beyond the shared pieces of gpu_impl.h (nemotron_h_moe.md
 * §3-§7): per layer the Mamba-2 projections, conv taps and bias, dt bias, A, D and the norm
 * weight; the FFN's shared expert (or dense ReLU² MLP), latent projections and selection bias;
 * the recurrent state of every Mamba layer in VRAM (the [slot][...] layout of recurrent.c, so
 * checkpoints copy straight across); and the micro-batch buffers, behind hmoe_gpu.arch_state.
 * Filled by nemotron_h_gpu_init.c, used by nemotron_h_gpu.c. Attention weights, KV cache,
 * router and routed experts are gpu_init.c's (hmoe_gpu_layer).
 */
#ifndef HMOE_MODEL_ARCH_NEMOTRON_H_GPU_H
#define HMOE_MODEL_ARCH_NEMOTRON_H_GPU_H

#include "model/gpu_impl.h"
#include "model/arch/nemotron_h.h"

struct hmoe_gpu_nem_layer {
    struct hmoe_cuda_buf buf;          /* every weight below, one allocation */
    /* Mamba-2 */
    struct hmoe_gpu_mat in, out;       /* ssm_in [z | x B C | dt], ssm_out */
    const float *conv_w, *conv_b, *dt_bias, *a, *d, *norm;
    float *conv_state, *ssm;           /* this layer's live state (in hmoe_gpu_nem.state) */
    /* FFN: shared expert (MoE layers) or the dense MLP (nemotron_h), both up -> ReLU² -> down */
    struct hmoe_gpu_mat ff_up, ff_down;
    bool has_ff;
    struct hmoe_gpu_mat lat_down, lat_up; /* latent projections (moe_latent > 0) */
    const float *sel_bias;             /* exp_probs_b, or NULL */
};

struct hmoe_gpu_nem {
    struct hmoe_gpu_nem_layer *L;      /* [n_layer] */
    struct hmoe_cuda_buf state;        /* conv [n_rec][K-1][conv_dim] then ssm [n_rec][H][P][N], f32 */
    struct hmoe_cuda_buf act;          /* the buffers below */
    int64_t dip;                       /* ssm_in row width: d_inner + conv_dim + n_head */
    int64_t ff_w;                      /* widest FFN hidden (shared expert / dense) */
    int64_t m;                         /* routed experts' input width: moe_latent or d */
    float *proj;                       /* [n_ub][dip] */
    float *y;                          /* [n_ub][conv_dim] conv + SiLU */
    float *o;                          /* [n_ub][d_inner] scan output, then gated norm */
    uint16_t *o16;
    void *oq;
    float *ff;                         /* [n_ub][ff_w] FFN hidden */
    uint16_t *ff16;
    void *ffq;
    float *lat;                        /* [n_ub][m] latent input of the experts */
    uint16_t *lat16;
    void *latq;
    float *lat_out;                    /* [n_ub][m] weighted sum of the latent experts */
    float *zeros;                      /* [n_ub][m] never written: clears lat_out inside a graph */
    float *ez;                         /* [n_ub * k][F] expert hidden rows, f32 */
    uint16_t *ez16;                    /* f16 rows of ez (f16 GEMM) */
    void *ezq;                         /* q8_1 rows of ez */
    /* Streamed prefill of RAM layers (micro-batches of at least --stream-min tokens): each staging
     * buffer holds one layer's up and down stacks. With two, the stacks of the next RAM layer copy
     * on copy_stream from its page-locked range while the compute stream runs this one; a layer
     * that is not page-locked copies on the compute stream when it is needed. A buffer keeps its
     * layer across micro-batches. */
    struct hmoe_cuda_buf stage[2];
    int n_stage;                       /* 0 (no streaming planned), 1 or 2 */
    int stage_layer[2];                /* the layer the buffer holds or is receiving; -1: none */
    void *copy_stream;
    void *ev_copied[2];                /* on copy_stream: the buffer's last copy is done */
    void *ev_free[2];                  /* on the compute stream: the last kernels reading the buffer are done */
    struct hmoe_sched_pinned *pinned;  /* the RAM layers' page-locked expert ranges (sched.h) */
    /* -v: streamed layer steps, copies made (of them ahead on copy_stream), bytes copied */
    uint64_t n_staged, n_copies, n_staged_async, bytes_staged;
    uint64_t weight_bytes;
    /* Layers with experts in RAM (-v): wall seconds waiting for the GPU's queued work and the
     * download, on the CPU threads, and uploading the sum; per call. */
    double t_wait, t_cpu, t_up;
    uint64_t n_cpu_calls, n_cpu_tokens;
    struct hmoe_rec_state *rec;        /* the context's state bookkeeping (recurrent.c) */
};

#endif
