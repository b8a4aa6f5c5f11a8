/* qwen35moe_gpu.h — private to the qwen35moe GPU files: what the GPU backend keeps for a
 * qwen35moe model beyond the shared pieces of gpu_impl.h (qwen35moe.md §3, §5, §7): per layer the Gated
 * DeltaNet projections (uploaded back to back so matrices of one type form one product), conv
 * taps, gates and norm, the shared expert; the recurrent state of every DeltaNet layer in VRAM
 * (the same [layer][...] layout as recurrent.c, so checkpoints copy straight across); and the
 * micro-batch buffers of the mixers, behind hmoe_gpu.arch_state. Filled by qwen35moe_gpu_init.c,
 * used by qwen35moe_gpu.c.
 */
#ifndef HMOE_MODEL_ARCH_QWEN35MOE_GPU_H
#define HMOE_MODEL_ARCH_QWEN35MOE_GPU_H

#include "model/gpu_impl.h"

/* Matrices that share an input, one product per group: output rows of group i start at
 * column off[i] of a row of `width` floats. */
#define HMOE_Q35_MAX_GROUPS 4
struct hmoe_gpu_q35_proj {
    int n;
    struct hmoe_gpu_mat w[HMOE_Q35_MAX_GROUPS];
    int64_t off[HMOE_Q35_MAX_GROUPS];
};

struct hmoe_gpu_q35_layer {
    struct hmoe_cuda_buf buf;          /* every weight below, one allocation */
    /* Gated DeltaNet (recurrent layers): [qkv | z | alpha | beta] per token */
    struct hmoe_gpu_q35_proj proj;
    struct hmoe_gpu_mat out;           /* ssm_out */
    const float *conv_w, *dt_bias, *a, *norm;
    float *conv_state, *ssm;           /* this layer's live state (in hmoe_gpu_q35.state) */
    /* shared expert: [gate | up] per token, down, the sigmoid gate's vector as a 1-row matrix */
    struct hmoe_gpu_q35_proj sh_gu;
    struct hmoe_gpu_mat sh_down, sh_gate_inp;
};

struct hmoe_gpu_q35 {
    struct hmoe_gpu_q35_layer *L;      /* [n_layer] */
    struct hmoe_cuda_buf state;        /* conv [n_rec][K-1][conv_dim] then ssm [n_rec][Hv][dim][dim], f32 */
    struct hmoe_cuda_buf act;          /* the buffers below */
    int64_t P;                         /* proj row width: conv_dim + value_dim + 2 Hv */
    int64_t qg_w;                      /* gated attention q|gate|k|v row width: 2 H D + 2 Hkv D */
    float *proj;                       /* [n_ub][P] */
    float *y;                          /* [n_ub][conv_dim] conv + SiLU, then L2-normed q, k */
    float *o;                          /* [n_ub][value_dim] head outputs, then gated norm */
    uint16_t *o16;
    void *oq;
    float *qg;                         /* [n_ub][qg_w] */
    float *sh_gu;                      /* [n_ub][2 Fs] */
    float *sh_z;                       /* [n_ub][Fs] silu(gate) * up */
    uint16_t *sh_z16;
    void *sh_zq;
    float *sh_out;                     /* [n_ub][d] */
    float *sh_gamma;                   /* [n_ub] */
    uint64_t weight_bytes;
    struct hmoe_rec_state *rec;        /* the context's state bookkeeping (recurrent.c) */
};

#endif
