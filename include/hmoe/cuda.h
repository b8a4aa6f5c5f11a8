/* cuda.h — the GPU backend as seen from C (the .cu files in src/kernels). Every function exists in
 * every build: without CUDA (make CUDA=0) they report that no GPU is available (cuda_none.c).
 *
 * Conventions of every launcher below:
 *  - Pointers named d_* / documented "device" are device memory; the call only enqueues work on
 *    `stream` (a cudaStream_t passed as void *, NULL = the legacy default stream) and returns.
 *    Nothing here synchronises, allocates or reads device data on the host, so a sequence of
 *    launches can be captured into a CUDA graph. Data that changes per token (the position,
 *    the chosen experts) is passed through device memory for that reason.
 *  - Shapes are checked before anything is launched: a violated precondition returns
 *    HMOE_ERR_ARG with the rule that was broken; a launch failure returns HMOE_ERR_DEVICE.
 *  - Weight matrices are rows of `ncols` elements in their GGUF type, row r at w + r*row_bytes,
 *    16-byte aligned base (cudaMalloc'd tensors and GGUF data offsets satisfy this). Expert tensors
 *    are n_expert such matrices, expert e at w + e*expert_stride_bytes (quants.md, qwen3moe.md §0).
 *  - Quantized weights multiply "q8_1 rows": activations quantized per 32 values (int8 + f32
 *    scale and f32 sum), made by hmoe_cuda_quantize_q8_1. F32/F16/BF16 weights take f32 rows.
 */
#ifndef HMOE_CUDA_H
#define HMOE_CUDA_H

#include "hmoe/common.h"
#include "hmoe/types.h"

struct hmoe_cuda_device_info {
    char name[256];
    int cc_major, cc_minor;     /* compute capability */
    int n_sm;
    uint64_t total_bytes;       /* device memory */
    uint64_t free_bytes;        /* free right now */
};

/* True when this build has CUDA and at least one device answers. */
bool hmoe_cuda_available(void);

/* Properties of device `dev`. HMOE_ERR_DEVICE with the CUDA message on failure,
 * HMOE_ERR_UNSUPPORTED in a CPU-only build. */
enum hmoe_status hmoe_cuda_device_info(int dev, struct hmoe_cuda_device_info *out, struct hmoe_err *err);

/* Host-to-device copy bandwidth of device `dev` from pinned host memory in GB/s (1e9 B/s):
 * best of several copies of `bytes` after one untimed copy (src/kernels/cuda_probe.cu).
 * The PCIe roofline `hmoe bench` reports expert streaming against. HMOE_ERR_UNSUPPORTED in
 * a CPU-only build. */
enum hmoe_status hmoe_cuda_probe_h2d_gbps(int dev, size_t bytes, double *gbps, struct hmoe_err *err);
/* Device-to-device copy rate of device `dev` in GB/s of HBM traffic: 2 x `bytes` (each byte
 * read and written) over the best of several copies after one untimed copy
 * (src/kernels/cuda_probe.cu). The HBM roofline `hmoe bench` reports the GPU part of decode
 * against. HMOE_ERR_UNSUPPORTED in a CPU-only build. */
enum hmoe_status hmoe_cuda_probe_d2d_gbps(int dev, size_t bytes, double *gbps, struct hmoe_err *err);

/* ------------------------------------------------------------------------------------------
 * Context and device memory (cuda_device.cu)
 * ------------------------------------------------------------------------------------------ */

/* One device, one non-blocking stream, a cuBLAS handle (created on first use) and the byte
 * count of everything allocated through it (the VRAM budget of the scheduler). Opaque. */
struct hmoe_cuda_ctx;

enum hmoe_status hmoe_cuda_ctx_init(struct hmoe_cuda_ctx **out, int dev, struct hmoe_err *err);
void hmoe_cuda_ctx_free(struct hmoe_cuda_ctx *ctx);
/* The context's stream as a cudaStream_t. */
void *hmoe_cuda_ctx_stream(const struct hmoe_cuda_ctx *ctx);
/* Bytes currently allocated through hmoe_cuda_buf_alloc (each rounded to HMOE_CUDA_ALLOC_GRANULE),
 * and the high-water mark. */
uint64_t hmoe_cuda_ctx_used_bytes(const struct hmoe_cuda_ctx *ctx);
/* The device index of ctx, and making a device current on the calling thread (the runtime keeps
 * the current device per thread: a worker thread that calls the driver must pick ctx's first). */
int hmoe_cuda_ctx_device(const struct hmoe_cuda_ctx *ctx);
void hmoe_cuda_use_device(int dev);
uint64_t hmoe_cuda_ctx_peak_bytes(const struct hmoe_cuda_ctx *ctx);

/* A device allocation and its size (the size is what the accounting subtracts on free). */
struct hmoe_cuda_buf {
    void *ptr;
    size_t bytes;
};

/* cudaMalloc `bytes` (256-byte aligned). On failure says how much was asked and how much is free. */
enum hmoe_status hmoe_cuda_buf_alloc(struct hmoe_cuda_ctx *ctx, size_t bytes, struct hmoe_cuda_buf *out,
                                     struct hmoe_err *err);
/* Free and zero *buf; a zeroed buf is a no-op. Waits for the device (cudaFree does). */
void hmoe_cuda_buf_free(struct hmoe_cuda_ctx *ctx, struct hmoe_cuda_buf *buf);

/* ------------------------------------------------------------------------------------------
 * Device memory as nvidia-smi counts it (cuda_mem.cu)
 * ------------------------------------------------------------------------------------------ */

/* The allocator hands out device memory in 2 MiB granules: the accounting of hmoe_cuda_buf_alloc
 * and the VRAM plan count every allocation rounded up to one. */
#define HMOE_CUDA_ALLOC_GRANULE ((uint64_t)2 << 20)
static inline uint64_t hmoe_cuda_alloc_cost(uint64_t bytes) {
    return (bytes + HMOE_CUDA_ALLOC_GRANULE - 1) / HMOE_CUDA_ALLOC_GRANULE * HMOE_CUDA_ALLOC_GRANULE;
}
/* The context's size where NVML cannot say what the device had free before it (an H200 context
 * with CUDA 13 takes about 0.5 GiB). */
#define HMOE_CUDA_CONTEXT_ESTIMATE_BYTES ((uint64_t)576 << 20)

/* The process's own use of the device: the free bytes before its context (NVML) minus free now. */
struct hmoe_cuda_device_mem {
    uint64_t used_now, peak;  /* peak: highest of the samples taken (every allocation, every report) */
    uint64_t context;         /* the CUDA context right after creation */
    bool context_measured;    /* false: NVML unavailable, context = HMOE_CUDA_CONTEXT_ESTIMATE_BYTES */
    uint64_t cublas;          /* cuBLAS handle + workspace (0 until created) */
    uint64_t free_now;        /* device free bytes now */
};
void hmoe_cuda_ctx_device_mem(struct hmoe_cuda_ctx *ctx, struct hmoe_cuda_device_mem *out);
/* Take one sample now (updates the peak); returns the own use. */
uint64_t hmoe_cuda_ctx_sample(struct hmoe_cuda_ctx *ctx);
/* Create the cuBLAS handle and its workspace now (else on first use), so the plan can count them. */
enum hmoe_status hmoe_cuda_ctx_cublas_init(struct hmoe_cuda_ctx *ctx, struct hmoe_err *err);

/* Test hook: the nth device allocation from now (1 = the next) fails as out of memory; 0 turns it
 * off. Counted: hmoe_cuda_buf_alloc, the cuBLAS handle's workspace, graph instantiation.
 * hmoe_cuda_alloc_calls: allocations counted since the last hmoe_cuda_fail_alloc_at. */
void hmoe_cuda_fail_alloc_at(int n);
int hmoe_cuda_alloc_calls(void);

/* Host <-> device copies on the context's stream; they return when the copy is done. */
enum hmoe_status hmoe_cuda_upload(struct hmoe_cuda_ctx *ctx, void *d_dst, const void *src, size_t bytes,
                                  struct hmoe_err *err);
enum hmoe_status hmoe_cuda_download(struct hmoe_cuda_ctx *ctx, void *dst, const void *d_src, size_t bytes,
                                    struct hmoe_err *err);
enum hmoe_status hmoe_cuda_memset(struct hmoe_cuda_ctx *ctx, void *d_dst, int byte, size_t bytes,
                                  struct hmoe_err *err);
/* Wait for everything queued on the context's stream; reports errors of earlier launches. */
enum hmoe_status hmoe_cuda_sync(struct hmoe_cuda_ctx *ctx, struct hmoe_err *err);

/* Device-to-device copy and a pseudo-random byte fill (benchmarks: values are arbitrary, not
 * valid quant blocks), both enqueued on `stream`. */
enum hmoe_status hmoe_cuda_copy(void *d_dst, const void *d_src, size_t bytes, void *stream, struct hmoe_err *err);
enum hmoe_status hmoe_cuda_fill_random(void *d_dst, size_t bytes, uint64_t seed, void *stream, struct hmoe_err *err);

/* Event timer on the context's stream: start, then stop returns the device time in between. */
enum hmoe_status hmoe_cuda_timer_start(struct hmoe_cuda_ctx *ctx, struct hmoe_err *err);
enum hmoe_status hmoe_cuda_timer_stop(struct hmoe_cuda_ctx *ctx, double *ms, struct hmoe_err *err);

/* CUDA graphs: everything launched on the context's stream between capture_begin and
 * capture_end is recorded (not run) and replayed by graph_launch (one launch for the whole
 * decode step). Launchers of this header are capture-safe; host syncs / copies are not. */
struct hmoe_cuda_graph;
enum hmoe_status hmoe_cuda_graph_capture_begin(struct hmoe_cuda_ctx *ctx, struct hmoe_err *err);
enum hmoe_status hmoe_cuda_graph_capture_end(struct hmoe_cuda_ctx *ctx, struct hmoe_cuda_graph **out,
                                             struct hmoe_err *err);
enum hmoe_status hmoe_cuda_graph_launch(struct hmoe_cuda_ctx *ctx, struct hmoe_cuda_graph *g, struct hmoe_err *err);
void hmoe_cuda_graph_free(struct hmoe_cuda_graph *g);

/* ------------------------------------------------------------------------------------------
 * Types (cuda_types.cuh holds the one type -> kernel switch)
 * ------------------------------------------------------------------------------------------ */

/* True for the weight types the GPU kernels handle: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1,
 * Q8_0, Q2_K..Q6_K, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M, IQ4_NL, IQ4_XS, MXFP4. */
bool hmoe_cuda_type_supported(enum hmoe_type type);

/* Dequantize n elements (whole blocks; a multiple of 8 for F32/F16/BF16) of a tensor to f32 or
 * to f16. The f32 result is bit-identical to the type table's dequant_ref (quants.md §0.1); the
 * f16 result is that value rounded to nearest even. (cuda_dequant.cu) */
enum hmoe_status hmoe_cuda_dequant_f32(enum hmoe_type type, const void *d_src, int64_t n, float *d_dst, void *stream,
                                       struct hmoe_err *err);
enum hmoe_status hmoe_cuda_dequant_f16(enum hmoe_type type, const void *d_src, int64_t n, uint16_t *d_dst,
                                       void *stream, struct hmoe_err *err);

/* ------------------------------------------------------------------------------------------
 * Activations (cuda_quant_act.cu)
 * ------------------------------------------------------------------------------------------ */

/* Bytes of one q8_1 row of `ncols` values (ncols % 32 == 0): ncols int8 quants, then one
 * {f32 d, f32 s} pair per 32 values (d = amax/127, q = round-half-even(x * 127/amax),
 * s = d * sum(q)), padded to a multiple of 16 bytes. */
size_t hmoe_cuda_q8_1_row_bytes(int64_t ncols);

/* Quantize nrows rows of ncols floats (row i at x + i*x_stride floats) to q8_1 rows
 * (row i at xq + i*hmoe_cuda_q8_1_row_bytes(ncols)). */
enum hmoe_status hmoe_cuda_quantize_q8_1(const float *d_x, int64_t x_stride, int64_t nrows, int64_t ncols, void *d_xq,
                                         void *stream, struct hmoe_err *err);

/* f32 -> f16 (round to nearest even) for n values. */
enum hmoe_status hmoe_cuda_convert_f16(const float *d_x, int64_t n, uint16_t *d_y, void *stream,
                                       struct hmoe_err *err);

/* ------------------------------------------------------------------------------------------
 * Matrix-vector products for decode (cuda_mmv.cu)
 * ------------------------------------------------------------------------------------------ */

struct hmoe_cuda_mmv_args {
    enum hmoe_type type;   /* weight type */
    const void *w;         /* device, nrows rows of ncols, row_bytes apart */
    size_t row_bytes;
    int64_t nrows, ncols;  /* ncols % 32 == 0 for quantized types, % 8 for F32/F16/BF16 */
    const void *x;         /* device: q8_1 rows (quantized types) or f32 rows (F32/F16/BF16) */
    size_t x_stride_bytes; /* between activation rows (tokens) */
    int64_t ntok;          /* activation rows; any count (processed 8 at a time, weights reread) */
    float *y;              /* device, y[t*y_stride + r] */
    int64_t y_stride;
    const float *add;      /* optional, added to the result: y = W·x + add (add may equal y) */
    int64_t add_stride;
    const float *bias;     /* optional device F32 [nrows]: added to every token's row (y = W·x + bias + add) */
    /* optional device F32 [ncols] (quantized weights, ntok 1): x is one f32 row and the product
     * takes its RMSNorm times norm_w (eps norm_eps) quantized to q8_1, as hmoe_cuda_rmsnorm's
     * out_q8_1 would give it: one launch instead of two in a decode step */
    const float *norm_w;
    float norm_eps;
};
#define HMOE_CUDA_MMV_NORM_MAX_COLS 16384

/* y[t][r] = sum_c W[r][c] * x[t][c] (+ bias[r]) (+ add[t][r]) for r < nrows, t < ntok. */
enum hmoe_status hmoe_cuda_mmv(const struct hmoe_cuda_mmv_args *a, void *stream, struct hmoe_err *err);

/* ------------------------------------------------------------------------------------------
 * Mixture of experts (cuda_moe.cu)
 * ------------------------------------------------------------------------------------------ */

/* Routing rules of the router launchers (the values of sched.h's enum hmoe_moe_gating). */
#define HMOE_CUDA_GATING_SOFTMAX 0      /* softmax over all experts, top-k, renormalised */
#define HMOE_CUDA_GATING_TOPK_SOFTMAX 2 /* top-k of the logits, softmax over those k only */

/* Router on the device (qwen3moe.md §4.4): for each of ntok rows of n_expert logits (plus
 * bias[e] when d_bias is set: F32 [n_expert], the router's own bias), the k largest
 * (descending; equal logits -> lower index first). Weights by `gating`: SOFTMAX: softmax over
 * all experts, p_sel / max(sum p_sel, 6.103515625e-5); TOPK_SOFTMAX: softmax over the k
 * chosen logits. Writes ids[t*k + j] (int32) and weights[t*k + j]. n_expert <= 512,
 * 1 <= k <= min(n_expert, 32). One warp per token. */
enum hmoe_status hmoe_cuda_moe_topk(const float *d_logits, const float *d_bias, int gating, int64_t ntok, int n_expert,
                                    int k, int32_t *d_ids, float *d_weights, void *stream, struct hmoe_err *err);

/* Decode router in one launch: logits = W (n_expert rows of ncols F32, the GGUF ffn_gate_inp) · x
 * (f32, one token), then the top-k of hmoe_cuda_moe_topk. d_counter: one device uint32 that is
 * 0 before the first call (hmoe_cuda_memset); the kernel leaves it 0 again (graph replays). */
enum hmoe_status hmoe_cuda_moe_router_topk(const float *d_w, const float *d_bias, int gating, const float *d_x,
                                           int64_t ncols, int n_expert, int k, float *d_logits, int32_t *d_ids,
                                           float *d_weights, unsigned int *d_counter, void *stream,
                                           struct hmoe_err *err);

/* Expert activations of a gate/up pair (the values of sched.h's enum hmoe_moe_act). */
#define HMOE_CUDA_ACT_SWIGLU 0     /* silu(g) * u */
#define HMOE_CUDA_ACT_SWIGLU_OAI 2 /* g' = min(g, 7), u' = clamp(u, -7, 7): g' * sigmoid(1.702 g') * (u' + 1) */

/* Expert weights as stored in GGUF: n_expert matrices of nrows x ncols, expert_stride_bytes apart.
 * The zero value of the last three fields is a plain SiLU-gated stack without biases. */
struct hmoe_cuda_experts {
    enum hmoe_type type;
    const void *w;
    size_t row_bytes, expert_stride_bytes;
    int64_t nrows, ncols, n_expert;
    const float *bias;        /* optional device F32 [bias expert][nrows]: added to expert e's products */
    const int32_t *bias_ids;  /* decode kernels: when set, slot s's bias is that of expert bias_ids[s] (the ids
                                 given to the launcher name cache slots, these the experts); else ids[s] */
    int act;                  /* the gate stack of a gate/up pair: HMOE_CUDA_ACT_* */
};

/* Decode, gate and up fused: for every slot s < nslot (slot s belongs to token s / k),
 * e = ids[s] (device), z[s*z_stride + f] = act(gate_e[f]·x + bg, up_e[f]·x + bu) for f < F
 * (gate->act; the biases of gate->bias / up->bias when set),
 * with x the q8_1 row of token s / k (x_stride_bytes apart). gate and up must have the same
 * type and shape. Expert ids outside [0, n_expert) produce zeros (and are a caller bug). */
enum hmoe_status hmoe_cuda_moe_gate_up(const struct hmoe_cuda_experts *gate, const struct hmoe_cuda_experts *up,
                                       const int32_t *d_ids, int64_t nslot, int k, const void *d_x,
                                       size_t x_stride_bytes, float *d_z, int64_t z_stride, void *stream,
                                       struct hmoe_err *err);

/* Decode, down projection, routing weights and residual add in one pass: for t < ntok,
 *   y[t*y_stride + r] += sum_{j<k} weights[t*k+j] * (down_{ids[t*k+j]}[r] · zq[t*k+j] + bd)
 * (bd: down->bias of that expert's row r, when set)
 * with zq the q8_1 rows of z (zq_stride_bytes apart). Deterministic (no atomics). */
enum hmoe_status hmoe_cuda_moe_down(const struct hmoe_cuda_experts *down, const int32_t *d_ids,
                                    const float *d_weights, int64_t ntok, int k, const void *d_zq,
                                    size_t zq_stride_bytes, float *d_y, int64_t y_stride, void *stream,
                                    struct hmoe_err *err);

/* Prefill grouping. A "plan" is a device buffer of hmoe_cuda_moe_plan_bytes() that
 * hmoe_cuda_moe_plan_build fills from the router's ids: the ntok*k (token, slot) rows sorted by
 * expert (rows of one expert in increasing slot order), the inverse map, and the list of
 * GEMM tiles (expert, first row, row count) of at most HMOE_CUDA_MOE_TILE rows each. */
#define HMOE_CUDA_MOE_TILE 64
size_t hmoe_cuda_moe_plan_bytes(int64_t ntok, int k, int n_expert);
enum hmoe_status hmoe_cuda_moe_plan_build(const int32_t *d_ids, int64_t ntok, int k, int n_expert, void *d_plan,
                                          void *stream, struct hmoe_err *err);

/* Prefill combine + residual: y[t][c] += sum_j weights[t*k+j] * ye[row(t*k+j)][c], where ye
 * holds the down projections in the plan's row order (ye_stride floats apart). */
enum hmoe_status hmoe_cuda_moe_combine(const void *d_plan, const float *d_ye, int64_t ye_stride,
                                       const float *d_weights, int64_t ntok, int k, int n_expert, int64_t ncols,
                                       float *d_y, int64_t y_stride, void *stream, struct hmoe_err *err);

/* ------------------------------------------------------------------------------------------
 * Matrix-matrix products for prefill (cuda_mmq.cu)
 * ------------------------------------------------------------------------------------------ */

/* Y = X · W^T on the tensor cores, weights unpacked tile by tile in shared memory. Two paths:
 *  int8 (xq set): q8_1 activations (hmoe_cuda_quantize_q8_1 / rmsnorm out_q8_1) times the
 *     weights' int8 codes (mma.sync m16n8k32 / m16n8k16 s8 -> s32), scales and offsets applied
 *     per 16/32 in f32; every quantized type except IQ1_M. The fast path.
 *  f16 (x set): f16 activations times weights dequantized to f16 (mma.sync m16n8k16, f32
 *     accumulate); any supported type (the F32/F16/BF16 and IQ1_M path).
 *  dense:   plan == NULL: rows t < ntok of X (x_stride halves apart) times expert 0 of w.
 *  experts: plan from hmoe_cuda_moe_plan_build: plan row i (token i/k... via the plan) is
 *           multiplied by its expert; X rows are gathered through the plan when x_gather is
 *           true (X = per-token activations), else X row i is plan row i (X already grouped).
 *           Output row i = plan row i.
 *  w_up != NULL: gate/up fused, out = act(X·W^T + w.bias, X·Wup^T + up_bias) (w.act).
 *  w.bias (optional): the bias of the tile's expert (0 for dense) added to every product.
 * Output: y_f32 (optionally + add, add may equal y_f32), y_f16, or (int8 path, nrows % 32 == 0)
 * y_q8_1 rows as hmoe_cuda_quantize_q8_1 would write them from the f32 result: exactly one.
 * The int8 path stages 256-column groups of the weights in shared memory when ncols % 256 == 0
 * and they fit (else it unpacks from global memory); the token tile is 64 from ~24 plan rows per
 * expert or 64 dense tokens on, else 32. */
struct hmoe_cuda_gemm_args {
    struct hmoe_cuda_experts w;     /* dense: n_expert = 1, expert_stride_bytes = 0 */
    const void *w_up;               /* optional second matrix for the fused gate/up */
    const float *up_bias;           /* optional device F32 [n_expert][nrows]: the up matrix's bias */
    const int32_t *bias_expert;     /* plan only, optional: expert x of w takes the bias rows of expert
                                       bias_expert[x] (w is a renumbered subset; -1: no bias); NULL: x */
    const uint16_t *x;              /* f16 activations (f16 path) ... */
    int64_t x_stride;               /* halves; multiple of 8 */
    const void *xq;                 /* ... or q8_1 activation rows (int8 path): exactly one of x, xq */
    size_t xq_stride_bytes;         /* multiple of 16, >= hmoe_cuda_q8_1_row_bytes(ncols) */
    int64_t ntok;                   /* tokens (dense) */
    const void *plan;               /* optional expert plan */
    int k;                          /* experts per token (plan only) */
    bool x_gather;                  /* plan only: X rows are tokens (true) or plan rows (false) */
    float *y_f32;
    uint16_t *y_f16;
    int64_t y_stride;               /* floats or halves */
    const float *add;               /* optional residual for y_f32, add_stride floats apart */
    int64_t add_stride;
    void *y_q8_1;                   /* q8_1 output rows (int8 path only) ... */
    size_t y_q8_1_stride_bytes;     /* ... multiple of 16, >= hmoe_cuda_q8_1_row_bytes(nrows) */
};
enum hmoe_status hmoe_cuda_gemm(const struct hmoe_cuda_gemm_args *a, void *stream, struct hmoe_err *err);

/* The cuBLAS alternative for dense matrices: dequantize W to f16 into `scratch` (nrows*ncols
 * halves) and run cublasGemmEx (f16 in, f32 accumulate, f32 out) on the context's stream. */
enum hmoe_status hmoe_cuda_gemm_cublas(struct hmoe_cuda_ctx *ctx, const struct hmoe_cuda_gemm_args *a,
                                       uint16_t *d_scratch, struct hmoe_err *err);

/* F32 product through cuBLAS in full FP32 (no TF32: the MoE router, whose top-k must keep
 * matching the CPU): y[t][r] = sum_c w[r][c] * x[t][c] for t < ntok, r < nrows; rows of w and x
 * are ncols floats, y rows y_stride floats apart. Runs on the context's stream. */
enum hmoe_status hmoe_cuda_gemm_f32_cublas(struct hmoe_cuda_ctx *ctx, const float *d_w, int64_t nrows, int64_t ncols,
                                           const float *d_x, int64_t ntok, float *d_y, int64_t y_stride,
                                           struct hmoe_err *err);

/* ------------------------------------------------------------------------------------------
 * Norms, RoPE, elementwise (cuda_norm_rope.cu)
 * ------------------------------------------------------------------------------------------ */

/* For each of nrows rows of n floats: if `add` is set, x += add first (written back to x);
 * then h = x / sqrt(mean(x^2) + eps) * w (qwen3moe.md §4.2), written to whichever of out_f32,
 * out_f16, out_q8_1 are non-NULL (q8_1 needs n % 32 == 0; row strides: out_f32/out_f16 n
 * values, out_q8_1 hmoe_cuda_q8_1_row_bytes(n)). x rows are x_stride floats apart. */
struct hmoe_cuda_rmsnorm_args {
    float *x;
    int64_t x_stride;
    const float *add;
    int64_t add_stride;
    const float *w;
    float eps;
    int64_t nrows, n;
    float *out_f32;
    uint16_t *out_f16;
    void *out_q8_1;
};
enum hmoe_status hmoe_cuda_rmsnorm(const struct hmoe_cuda_rmsnorm_args *a, void *stream, struct hmoe_err *err);

/* RoPE parameters (qwen3moe.md §5): NEOX pairs (i, i + n_rot/2) over the first n_rot dims,
 * theta_e = pos * freq_base^(-2i/n_rot), theta_i = freq_scale * theta_e (linear scaling; 1 = none);
 * with ext_factor > 0 (YaRN, §5.2) theta = theta_i (1 - r) + theta_e r, r = ext_factor *
 * (1 - clamp((i - corr_low) / max(0.001, corr_high - corr_low), 0, 1)); cos and sin times mscale. */
struct hmoe_cuda_rope {
    int n_rot;           /* even, <= head_dim */
    float freq_base;     /* theta base, 1e6 for Qwen3 */
    float freq_scale;    /* 1 / scaling factor; 1 = none */
    float ext_factor;    /* 0 = no YaRN ramp, 1 = YaRN */
    float corr_low, corr_high; /* YaRN ramp dims */
    float mscale;        /* multiplies cos and sin (YaRN: 1 + 0.1 ln(1/freq_scale)); 1 otherwise */
};
/* Fill corr_low / corr_high for YaRN the way llama.cpp derives them (qwen3moe.md §5.2). */
void hmoe_cuda_rope_yarn_corr(struct hmoe_cuda_rope *r, int n_ctx_orig, float beta_fast, float beta_slow);

/* KV cache of one layer in device memory, head-major: K[h][pos][head_dim] and V likewise,
 * each K row (one head at one position) in type_k, each V row in type_v; either type is one of
 * F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL (head_dim % 32 == 0). Rows are stored as
 * the CPU cache stores them (hmoe_cpu_attn_kv_store: same bytes). */
struct hmoe_cuda_kv {
    enum hmoe_type type_k, type_v;
    void *k, *v;
    int64_t n_ctx;       /* positions allocated */
    int n_head_kv, head_dim;
    /* How the layer's attention reads it (zero: plain causal softmax). */
    int window;          /* > 0: a query at position p sees keys t with p - t < window */
    const float *sinks;  /* optional device F32 [n_head]: one logit per query head in the softmax
                            denominator only (unscaled, no value row) */
};
/* Bytes of one of the two tensors (K or V, in `type`) of a layer; 0 for a type the GPU cache does
 * not take. */
size_t hmoe_cuda_kv_bytes(enum hmoe_type type, int64_t n_ctx, int n_head_kv, int head_dim);
/* Whether the GPU KV cache takes `t` for K or V (the list above; any build, no device needed). */
bool hmoe_cuda_kv_type_ok(enum hmoe_type t);

/* Per token t < ntok at position pos[t] (device int32): RMS-normalise every q head (H of them,
 * q_norm weights) and k head (Hkv, k_norm weights) over head_dim with eps (qwen3moe.md §4.3),
 * rotate both with NEOX RoPE, write q back in place (q row t at q + t*q_stride) and store the
 * roped k and the raw v (rows k + t*kv_stride, v + t*kv_stride) into the cache at pos[t].
 * q_norm / k_norm may be NULL (no norm, for models without QK-norm). head_dim <= 256. */
struct hmoe_cuda_qkv_args {
    float *q;
    const float *k, *v;
    int64_t q_stride, kv_stride, ntok;
    int n_head, n_head_kv, head_dim;
    const float *q_norm, *k_norm;
    float eps;
    const int32_t *pos;
    struct hmoe_cuda_rope rope;
    struct hmoe_cuda_kv kv;
};
enum hmoe_status hmoe_cuda_qk_norm_rope_store(const struct hmoe_cuda_qkv_args *a, void *stream,
                                              struct hmoe_err *err);

/* z = silu(g) * u elementwise over nrows rows of n (strides in floats). */
enum hmoe_status hmoe_cuda_swiglu(const float *d_g, const float *d_u, int64_t in_stride, int64_t nrows, int64_t n,
                                  float *d_z, int64_t z_stride, void *stream, struct hmoe_err *err);
/* y[t*stride + i] += b[i] for t < ntok, i < n (a bias on every row). */
enum hmoe_status hmoe_cuda_add_bias(float *d_y, int64_t stride, const float *d_b, int64_t ntok, int64_t n, void *stream,
                                    struct hmoe_err *err);
/* y = a + b for n floats (y may alias a or b). */
enum hmoe_status hmoe_cuda_add(const float *d_a, const float *d_b, int64_t n, float *d_y, void *stream,
                               struct hmoe_err *err);

/* ------------------------------------------------------------------------------------------
 * Attention (cuda_attn.cu)
 * ------------------------------------------------------------------------------------------ */

/* Decode: one query token at position *pos (device int32) attends over cache positions
 * 0..*pos of `kv` (GQA: q head h uses kv head h / (n_head / n_head_kv)); kv.window and
 * kv.sinks apply here, in the fused decode launchers and in every prefill kernel. The cache is split in
 * n_split ranges done in parallel and combined (flash-decoding); `scratch` holds
 * hmoe_cuda_attn_decode_scratch_bytes() bytes. Output: f32 [n_head * head_dim] (d_out) and/or
 * the same row as q8_1 (d_out_q8_1, hmoe_cuda_q8_1_row_bytes(n_head * head_dim) bytes: the o
 * projection's input without a separate quantize launch); either may be NULL, not both.
 * head_dim in {32, 64, 128, 256}; n_head / n_head_kv <= 16. n_split 0 = 64. */
size_t hmoe_cuda_attn_decode_scratch_bytes(int n_head, int head_dim, int n_split);
enum hmoe_status hmoe_cuda_attn_decode(const float *d_q, const struct hmoe_cuda_kv *kv, const int32_t *d_pos,
                                       int n_head, float scale, int n_split, void *d_scratch, float *d_out,
                                       void *d_out_q8_1, void *stream, struct hmoe_err *err);

/* Prefill: ntok query rows (q + t*q_stride, positions pos[t]) attend causally over cache
 * positions 0..pos[t] (the batch's own K/V already stored). Output rows out + t*out_stride as
 * f32 (out_f32) and/or f16 (out_f16). */
enum hmoe_status hmoe_cuda_attn_prefill(const float *d_q, int64_t q_stride, int64_t ntok, const int32_t *d_pos,
                                        const struct hmoe_cuda_kv *kv, int n_head, float scale, float *d_out_f32,
                                        uint16_t *d_out_f16, int64_t out_stride, void *stream,
                                        struct hmoe_err *err);

/* The two prefill kernels behind hmoe_cuda_attn_prefill (same arguments and results):
 *  - MMA (cuda_attn_prefill.cu): tensor cores, flash-attention-2 style; q and the softmax
 *    probabilities rounded to f16 (f32 accumulation and softmax), so results differ from the
 *    exact attention by f16 rounding (~1e-3 relative), like llama.cpp's flash attention. Takes
 *    f16 / q8_0 caches (K and V of the same type), head_dim 64 / 128 / 256, even q / output
 *    strides; sm_80 or newer.
 *  - OLD (cuda_attn.cu): CUDA cores, f32 throughout; every shape and KV type attn_decode takes.
 * AUTO picks MMA (4 warps, one head per block) where it takes the call, else OLD; AUTO_F32
 * picks OLD. */
enum hmoe_cuda_attn_prefill_kind {
    HMOE_CUDA_ATTN_PREFILL_AUTO,
    HMOE_CUDA_ATTN_PREFILL_AUTO_F32,
    HMOE_CUDA_ATTN_PREFILL_OLD,
    HMOE_CUDA_ATTN_PREFILL_MMA
};
enum hmoe_status hmoe_cuda_attn_prefill_with(enum hmoe_cuda_attn_prefill_kind kind, const float *d_q, int64_t q_stride,
                                             int64_t ntok, const int32_t *d_pos, const struct hmoe_cuda_kv *kv, int n_head,
                                             float scale, float *d_out_f32, uint16_t *d_out_f16, int64_t out_stride,
                                             void *stream, struct hmoe_err *err);
enum hmoe_status hmoe_cuda_attn_prefill_old(const float *d_q, int64_t q_stride, int64_t ntok, const int32_t *d_pos,
                                            const struct hmoe_cuda_kv *kv, int n_head, float scale, float *d_out_f32,
                                            uint16_t *d_out_f16, int64_t out_stride, void *stream, struct hmoe_err *err);
/* MMA with explicit tuning: warps 4 or 8 (16 query rows each per block), heads_per_block 1 or a
 * divisor of n_head / n_head_kv (rows of one block = tokens x heads sharing one kv head). */
enum hmoe_status hmoe_cuda_attn_prefill_mma(const float *d_q, int64_t q_stride, int64_t ntok, const int32_t *d_pos,
                                            const struct hmoe_cuda_kv *kv, int n_head, float scale, int warps,
                                            int heads_per_block, float *d_out_f32, uint16_t *d_out_f16,
                                            int64_t out_stride, void *stream, struct hmoe_err *err);

/* ------------------------------------------------------------------------------------------
 * Fused decode launchers: the single-token step with fewer, right-sized launches. Each does what
 * the launchers named in its comment do in sequence, with the same results up to f32 rounding
 * order. "Counters" are device unsigned ints that the caller zeroes once; the kernels leave them
 * at zero again (the last block to finish a unit of work resets its counter), so a captured
 * graph replays. Blocks publish partial results with a fence and an atomic; the last one
 * finishes the work (no second launch).
 * ------------------------------------------------------------------------------------------ */

/* hmoe_cuda_attn_decode in one launch (cuda_attn.cu): one block per query head and range; the
 * positions the query sees (0..*pos, or the last kv.window of them) are cut into ranges of at
 * least 128 positions, at most max_split of them (the grid
 * is n_head x max_split; blocks past the last range exit at once), so up to 128 positions each
 * head's block computes and writes its result; with several ranges the last block of each head
 * merges them; a sink logit joins that final normalisation. d_scratch:
 * hmoe_cuda_attn_decode_scratch_bytes(n_head, head_dim, max_split) bytes;
 * d_counters: n_head counters. max_split in 1..1024 (0 = 32). */
enum hmoe_status hmoe_cuda_attn_decode_fused(const float *d_q, const struct hmoe_cuda_kv *kv, const int32_t *d_pos,
                                             int n_head, float scale, int max_split, void *d_scratch,
                                             unsigned int *d_counters, float *d_out, void *d_out_q8_1, void *stream,
                                             struct hmoe_err *err);

/* hmoe_cuda_qk_norm_rope_store for one token (a->ntok == 1) followed by
 * hmoe_cuda_attn_decode_fused, in one launch: every block normalises and rotates its own q head
 * (a->q is read, not written back); the blocks of the range holding the new position compute the
 * new k row (normalised, rotated) and take k and v at the precision the cache stores them, the
 * first block of each kv group stores them at a->pos[0]. */
enum hmoe_status hmoe_cuda_attn_decode_qkv(const struct hmoe_cuda_qkv_args *a, float scale, int max_split,
                                           void *d_scratch, unsigned int *d_counters, float *d_out, void *d_out_q8_1,
                                           void *stream, struct hmoe_err *err);

/* RMSNorm of one residual row + router + top-k (cuda_moe.cu): hmoe_cuda_rmsnorm (no add) followed
 * by hmoe_cuda_moe_router_topk on its f32 output. Every block normalises the row itself (it is
 * n floats, read from L2), computes two router logits and writes its share of the normalised row
 * (out_f32 and/or out_q8_1, both optional); the last block runs the top-k. */
struct hmoe_cuda_router_norm_args {
    const float *x;            /* device, n floats: the residual row */
    const float *norm_w;       /* device, n floats */
    float eps;
    int64_t n;                 /* n % 32 == 0, n <= 4096 */
    const float *router;       /* device F32 [n_expert][n] */
    const float *router_bias;  /* optional device F32 [n_expert] */
    int gating;                /* HMOE_CUDA_GATING_* */
    int n_expert, k;
    float *logits;             /* device [n_expert] */
    int32_t *ids;              /* device [k] */
    float *weights;            /* device [k] */
    unsigned int *counter;     /* one counter */
    float *out_f32;            /* optional [n] */
    void *out_q8_1;            /* optional, hmoe_cuda_q8_1_row_bytes(n) bytes */
};
enum hmoe_status hmoe_cuda_moe_router_norm_topk(const struct hmoe_cuda_router_norm_args *a, void *stream,
                                                struct hmoe_err *err);


/* ------------------------------------------------------------------------------------------
 * Host memory, streams and events (cuda_host.cu) — what the forward pass and the hybrid
 * scheduler need around the kernels: page-locked buffers (copies from them are DMA, capturable
 * into a graph, and "mapped" ones are readable/writable by kernels over PCIe), pinning of an
 * existing range (the mmap'd GGUF), a second stream for background copies, and events.
 * Streams and events are passed as void * (cudaStream_t / cudaEvent_t).
 * ------------------------------------------------------------------------------------------ */

/* Page-locked host memory of `bytes`, zeroed. mapped: also addressable from kernels (with unified
 * addressing the host pointer is the device pointer; hmoe_cuda_host_alloc checks that). */
enum hmoe_status hmoe_cuda_host_alloc(size_t bytes, bool mapped, void **out, struct hmoe_err *err);
/* Page-locked, portable and mapped like host_alloc(mapped), not zeroed (the caller fills it). */
enum hmoe_status hmoe_cuda_host_alloc_uninit(size_t bytes, uint8_t **out, struct hmoe_err *err);
void hmoe_cuda_host_free(void *p);
/* Page-lock an existing host range (page-aligned start, whole pages); read_only for PROT_READ
 * mappings. Fails cleanly (HMOE_ERR_DEVICE) where the driver refuses; callers fall back. */
enum hmoe_status hmoe_cuda_host_register(void *p, size_t bytes, bool read_only, struct hmoe_err *err);
void hmoe_cuda_host_unregister(void *p);

/* Copy `bytes` in any direction (host memory must be page-locked for the copy to be
 * asynchronous and capturable) on `stream`. */
enum hmoe_status hmoe_cuda_memcpy_async(void *dst, const void *src, size_t bytes, void *stream, struct hmoe_err *err);

enum hmoe_status hmoe_cuda_stream_create(void **out, struct hmoe_err *err); /* non-blocking stream */
void hmoe_cuda_stream_destroy(void *stream);
enum hmoe_status hmoe_cuda_stream_sync(void *stream, struct hmoe_err *err);

enum hmoe_status hmoe_cuda_event_create(void **out, struct hmoe_err *err);
void hmoe_cuda_event_destroy(void *ev);
enum hmoe_status hmoe_cuda_event_record(void *ev, void *stream, struct hmoe_err *err);
/* Work queued on `stream` after this call waits for `ev`. */
enum hmoe_status hmoe_cuda_stream_wait_event(void *stream, void *ev, struct hmoe_err *err);
/* 1: the event's work is done, 0: still pending, -1: an error (reported by the next sync). */
int hmoe_cuda_event_query(void *ev);
enum hmoe_status hmoe_cuda_event_sync(void *ev, struct hmoe_err *err);
/* Milliseconds between two recorded, completed events. */
enum hmoe_status hmoe_cuda_event_elapsed_ms(void *start, void *stop, double *ms, struct hmoe_err *err);
/* Run fn(arg) on a host thread of the CUDA runtime once the work queued on `stream` before this
 * call is done; work queued on `stream` after it waits until fn returns. fn must not call CUDA
 * (hybrid prefill: CPU experts computed in stream order while the calling thread queues on). */
typedef void (*hmoe_cuda_host_fn)(void *arg);
enum hmoe_status hmoe_cuda_launch_host_fn(void *stream, hmoe_cuda_host_fn fn, void *arg, struct hmoe_err *err);

/* ------------------------------------------------------------------------------------------
 * Hybrid CPU+GPU handoff (cuda_hybrid.cu): per layer of a decode step the GPU publishes the
 * token's routing and normalised hidden state into a mailbox in mapped host memory, the CPU
 * computes the experts the GPU does not hold, and the GPU waits (spinning on a flag, no host
 * round trip, so the whole step stays one CUDA graph) and adds the CPU's result.
 * ------------------------------------------------------------------------------------------ */

#define HMOE_CUDA_MAILBOX_MAX_K 32

/* One per layer, in mapped page-locked memory. Sequence numbers (per token, never 0 once used)
 * say which token the contents belong to: the writer fills everything else first. */
struct hmoe_cuda_mailbox {
    uint32_t gpu_seq;                        /* GPU -> CPU: ids/wts/miss/h of token `seq` are valid */
    uint32_t cpu_seq;                        /* CPU -> GPU: the result of token `seq` is valid */
    int32_t n_miss;                          /* experts of this token that the CPU computes */
    int32_t k;
    int32_t ids[HMOE_CUDA_MAILBOX_MAX_K];    /* selected experts, selection order */
    int32_t miss[HMOE_CUDA_MAILBOX_MAX_K];   /* 1: computed by the CPU, 0: by the GPU */
    float wts[HMOE_CUDA_MAILBOX_MAX_K];      /* renormalised routing weights */
    uint64_t gpu_wait_ns;                    /* how long the GPU waited for the CPU (globaltimer) */
    uint32_t timed_out;                      /* the GPU gave up waiting (CPU side failed) */
    int32_t n_xfer;                          /* misses copied over PCIe and computed by the GPU (transfer) */
    uint64_t t_pub_ns;                       /* globaltimer when publish had written its data (before its fence) */
    uint64_t t_seen_ns;                      /* globaltimer when wait_add saw cpu_seq (steps with misses) */
    uint32_t pad[8];
};

/* For one token: gids[j] = slot_of[ids[j]] (-1 when the expert has no GPU slot), *d_nmiss = the
 * number of -1s; the mailbox gets ids, wts, miss flags, n_miss, and (only when n_miss > 0) the
 * n floats of d_h copied to h_host; gpu_seq = *d_seq is written last (after a system fence).
 * slot_of: device int32 [n_expert]. k <= HMOE_CUDA_MAILBOX_MAX_K. One small block. */
enum hmoe_status hmoe_cuda_hybrid_publish(const int32_t *d_ids, const float *d_wts, int k, const float *d_h, int64_t n,
                                          const int32_t *d_slot_of, int n_expert, const uint32_t *d_seq,
                                          int32_t *d_gids, int32_t *d_nmiss, struct hmoe_cuda_mailbox *mb,
                                          float *h_host, void *stream, struct hmoe_err *err);

/* Options of a publish beyond the plain handoff (zero-initialised = the plain handoff).
 * transfer: misses go to the GPU instead of the CPU: d_nmiss and mb->n_miss become 0 (the CPU
 *   skips the layer, wait_add adds nothing), mb->n_xfer counts them, and xfer_gids[j] = j + 1 for
 *   a missed selection j (its scratch slot: hmoe_cuda_hybrid_xfer_copy gets slot 1 as dst), 0 for a
 *   hit or a bad id: the caller keeps scratch slot 0 all zeros (the expert kernels read the slot an
 *   id names even at weight 0, so stale bytes there could turn 0 x NaN into NaN).
 * lock/closed: the layer's prefetch guard (hmoe_cuda_hybrid_prefetch_plan): the map is read
 *   under the lock and closed = seq afterwards, so a late prefetch for this token gives up.
 * h_snap: also copy d_h there (the prefetch of the next layer reads it from its own stream). */
struct hmoe_cuda_publish_opts {
    bool transfer;
    int32_t *xfer_gids;
    int32_t *lock, *closed;
    float *h_snap;
};
enum hmoe_status hmoe_cuda_hybrid_publish_ex(const int32_t *d_ids, const float *d_wts, int k, const float *d_h,
                                             int64_t n, const int32_t *d_slot_of, int n_expert, const uint32_t *d_seq,
                                             int32_t *d_gids, int32_t *d_nmiss, struct hmoe_cuda_mailbox *mb,
                                             float *h_host, const struct hmoe_cuda_publish_opts *o, void *stream,
                                             struct hmoe_err *err);

/* Where the three matrices of expert e of one layer are: base + e * stride for gate, up, down, in
 * page-locked host memory that kernels can read (the pinned GGUF mapping, unified addressing). */
struct hmoe_cuda_expert_src {
    const uint8_t *base[3];
    size_t bytes[3]; /* one expert's matrix = the stride */
};

/* Transfer of a decode step's misses: for each j < k with gids[j] < 0, expert ids[j] is copied
 * from `src` (host, read by the kernel over PCIe) into slot j of the device stacks dst[3] (slot
 * stride = src.bytes[p]). Many blocks; grid-stride 16-byte loads. */
enum hmoe_status hmoe_cuda_hybrid_xfer_copy(const int32_t *d_ids, const int32_t *d_gids, int k, int n_expert,
                                            const struct hmoe_cuda_expert_src *src, uint8_t *const dst[3], void *stream,
                                            struct hmoe_err *err);

/* Next-layer prefetch, run on a side stream forked from the step. From the router logits of the
 * next layer (computed from this layer's hidden state) take the top k as the prediction; under the
 * layer's lock, unless the layer was already published for this token (closed == seq), each
 * predicted expert without a slot (map[e] < 0) takes the next candidate slot (cand_slot[i], whose
 * expert cand_expert[i] is not predicted; at most max_fill): the victim leaves the map at once, the
 * copy is queued. hmoe_cuda_hybrid_prefetch_copy then copies the queued experts and enters them in
 * the map when complete. The record (mapped host memory) tells the host what happened. */
#define HMOE_CUDA_PREFETCH_MAX 8
struct hmoe_cuda_prefetch_rec {
    uint32_t seq;
    int32_t n_pred, n_fill;
    int32_t pred[HMOE_CUDA_MAILBOX_MAX_K];
    int32_t expert[HMOE_CUDA_PREFETCH_MAX], slot[HMOE_CUDA_PREFETCH_MAX], victim[HMOE_CUDA_PREFETCH_MAX];
};
struct hmoe_cuda_prefetch_args {
    const float *logits;           /* [n_expert] router logits of the next layer */
    int n_expert, k, max_fill;
    int32_t *map;                  /* the next layer's slot map [n_expert] (device) */
    const int32_t *cand_slot, *cand_expert; /* [n_cand] victims in eviction order (-1 expert: empty slot;
                                                  -1 slot: end of the list, so the host can change it) */
    int n_cand;
    int32_t *lock, *closed;        /* that layer's guard words (device) */
    const uint32_t *seq;
    struct hmoe_cuda_prefetch_rec *rec; /* mapped host memory */
    int32_t *d_queue;              /* device [1 + 2 * HMOE_CUDA_PREFETCH_MAX]: count, (expert, slot) pairs */
};
enum hmoe_status hmoe_cuda_hybrid_prefetch_plan(const struct hmoe_cuda_prefetch_args *a, void *stream,
                                                struct hmoe_err *err);
/* Copies the queued (expert, slot) pairs from src into dst[p] + slot * src.bytes[p], then map[e] =
 * slot for each (after a fence). counter: one device word, 0 between launches. */
enum hmoe_status hmoe_cuda_hybrid_prefetch_copy(const int32_t *d_queue, const struct hmoe_cuda_expert_src *src,
                                                uint8_t *const dst[3], int32_t *map, unsigned int *counter,
                                                void *stream, struct hmoe_err *err);
/* Device pointer of page-locked host memory (registered or allocated); NULL when not addressable. */
void *hmoe_cuda_host_device_ptr(void *p);

/* Clock calibration for the handoff statistics: the kernel answers n_rounds pings from the host
 * (ping = 1, 2, ...): on seeing ping i it stores its %globaltimer in gpu_ns, fences, and sets
 * pong = i. The host stamps its clock around each ping; the sample with the shortest round trip
 * gives globaltimer - host clock to within half that round trip. Gives up after timeout_ms.
 * cs: mapped page-locked host memory, ping = pong = 0 before the launch. One thread. */
struct hmoe_cuda_clock_sync {
    uint32_t ping, pong;
    uint64_t gpu_ns;
    uint32_t pad[12];
};
enum hmoe_status hmoe_cuda_hybrid_clock_probe(struct hmoe_cuda_clock_sync *cs, int n_rounds, int timeout_ms,
                                              void *stream, struct hmoe_err *err);

/* When *d_nmiss > 0: wait until mb->cpu_seq == *d_seq, then d_x[i] += res_host[i] for i < n.
 * Gives up after timeout_ms (sets mb->timed_out, adds nothing) so a failed CPU side cannot hang
 * the device. */
enum hmoe_status hmoe_cuda_hybrid_wait_add(const int32_t *d_nmiss, const uint32_t *d_seq, struct hmoe_cuda_mailbox *mb,
                                           const float *res_host, float *d_x, int64_t n, int timeout_ms, void *stream,
                                           struct hmoe_err *err);

/* The inverse of an expert map (hmoe_cuda_moe_map_ids): inv[i] = e for the e < n_expert with
 * map[e] == i, -1 for the i < n_inv no expert maps to (bias rows of a renumbered subset). */
enum hmoe_status hmoe_cuda_moe_invert_map(const int32_t *d_map, int n_expert, int32_t *d_inv, int n_inv, void *stream,
                                          struct hmoe_err *err);

/* out[i] = map[ids[i]] for i < n (ids outside [0, n_expert) give -1): expert ids of a routed batch
 * renumbered into a subset of experts held somewhere else (cache slots, a streamed chunk); -1
 * rows are skipped by the plan, the GEMMs and the combine. */
enum hmoe_status hmoe_cuda_moe_map_ids(const int32_t *d_ids, int64_t n, const int32_t *d_map, int n_expert,
                                       int32_t *d_out, void *stream, struct hmoe_err *err);

/* ------------------------------------------------------------------------------------------
 * qwen35moe mixers (cuda_deltanet.cu): Gated DeltaNet and gated attention (qwen35moe.md §5, §7).
 * Rows of a micro-batch are `stride` floats apart; every launcher is capture-safe.
 * ------------------------------------------------------------------------------------------ */

/* In place for t < ntok, h < n_head: alpha = softplus(alpha + dt_bias[h]) * a[h] (the log decay,
 * <= 0; softplus(x) = x above 20), beta = sigmoid(beta). */
enum hmoe_status hmoe_cuda_gdn_gates(float *d_alpha, float *d_beta, int64_t stride, const float *d_dt_bias,
                                     const float *d_a, int64_t ntok, int n_head, void *stream, struct hmoe_err *err);

/* Causal depthwise conv over time with state (§5.2-§5.3): for channel c < n_ch and token t,
 * y[t][c] = silu(sum_j w[c*K + j] * win[t + j][c]) with win = [state rows 0..K-2 | x rows];
 * afterwards state (K-1 rows of n_ch floats, oldest first) holds the last K-1 raw rows of win.
 * 2 <= K <= 8. */
enum hmoe_status hmoe_cuda_gdn_conv(const float *d_x, int64_t x_stride, float *d_state, const float *d_w, int K,
                                    int64_t n_ch, int64_t ntok, float *d_y, int64_t y_stride, void *stream,
                                    struct hmoe_err *err);

/* For t < ntok, j < n_vec: v = x + t*stride + j*len; v *= s / max(||v||_2, eps) with s = scale for
 * j < n_scaled, else 1 (q heads carry the 1/sqrt(Dk) scale, k heads not). */
enum hmoe_status hmoe_cuda_gdn_l2norm(float *d_x, int64_t stride, int64_t ntok, int n_vec, int len, int n_scaled,
                                      float scale, float eps, void *stream, struct hmoe_err *err);

/* The delta-rule scan over ntok tokens (§5.2), every value head h < n_v_head in parallel, tokens
 * in order: S_h = exp(g) S_h; u = S_h k; S_h += outer(beta (v - u), k); o = S_h q. q and k of v head
 * h are head h % n_k_head (the tiled GGUF order) at q/k + t*qk_stride + (h % n_k_head)*dim; v and
 * o at + t*stride + h*dim; g (log decay) and beta at + t*gb_stride + h. S: device f32
 * [n_v_head][dim value rows][dim key cols], updated in place. dim <= 256. */
struct hmoe_cuda_gdn_args {
    float *S;
    int dim, n_k_head, n_v_head;
    int64_t ntok;
    const float *q, *k;
    int64_t qk_stride;
    const float *v;
    int64_t v_stride;
    const float *g, *beta;
    int64_t gb_stride;
    float *o;
    int64_t o_stride;
};
enum hmoe_status hmoe_cuda_gdn_recurrent(const struct hmoe_cuda_gdn_args *a, void *stream, struct hmoe_err *err);

/* Per token t and head h: o_h = o_h / sqrt(mean(o_h^2) + eps) * w * silu(z_h) over dim values. */
enum hmoe_status hmoe_cuda_gdn_gated_norm(float *d_o, int64_t o_stride, const float *d_z, int64_t z_stride,
                                          const float *d_w, int64_t ntok, int n_head, int dim, float eps,
                                          void *stream, struct hmoe_err *err);

/* Gated attention (§5.1): qg rows hold per head [query (head_dim) | gate (head_dim)].
 * qg_split copies the queries to q rows (head j at q + t*q_stride + j*head_dim); sigmoid_gate
 * multiplies attention output rows o (same head layout) by sigmoid(gate). */
enum hmoe_status hmoe_cuda_qg_split(const float *d_qg, int64_t qg_stride, int64_t ntok, int n_head, int head_dim,
                                    float *d_q, int64_t q_stride, void *stream, struct hmoe_err *err);
enum hmoe_status hmoe_cuda_sigmoid_gate(float *d_o, int64_t o_stride, const float *d_qg, int64_t qg_stride,
                                        int64_t ntok, int n_head, int head_dim, void *stream, struct hmoe_err *err);

/* Shared expert (§7): x[t][c] += sigmoid(gamma[t*gamma_stride]) * s[t][c] for c < n. */
enum hmoe_status hmoe_cuda_gated_add(float *d_x, int64_t x_stride, const float *d_s, int64_t s_stride,
                                     const float *d_gamma, int64_t gamma_stride, int64_t ntok, int64_t n, void *stream,
                                     struct hmoe_err *err);

/* ------------------------------------------------------------------------------------------
 * Mamba-2 mixers (cuda_mamba2.cu; nemotron_h_moe.md §4). Rows of a micro-batch are `stride`
 * floats apart; every launcher is capture-safe.
 * ------------------------------------------------------------------------------------------ */

/* Causal depthwise conv over time with state: for channel c < n_ch and token t,
 * y[t][c] = silu(sum_j w[c*K + j] * win[t + j][c] (+ bias[c])) with win = [state rows 0..K-2 | x
 * rows]; afterwards state (K-1 rows of n_ch floats, oldest first) holds the last K-1 raw rows of
 * win. bias may be NULL. 2 <= K <= 16. */
enum hmoe_status hmoe_cuda_mamba2_conv(const float *d_x, int64_t x_stride, float *d_state, const float *d_w,
                                       const float *d_bias, int K, int64_t n_ch, int64_t ntok, float *d_y,
                                       int64_t y_stride, void *stream, struct hmoe_err *err);

/* The selective scan over ntok tokens, every head h < n_head in parallel, tokens in order:
 * delta = softplus(dt + dt_bias[h]) (x above 20), a = exp(delta A[h]);
 * S_h = a S_h + delta outer(x_h, B_g); y_h = S_h C_g + D[h] x_h (the updated state), with
 * g = h / (n_head / n_group). x / y head h at + t*stride + h*P, B / C group g at + t*bc_stride + g*N,
 * dt at + t*dt_stride + h. S: device f32 [n_head][P][N], updated in place. N <= 256. */
struct hmoe_cuda_mamba2_scan_args {
    float *S;
    int n_head, P, N, n_group;
    int64_t ntok;
    const float *x;
    int64_t x_stride;
    const float *B, *C;
    int64_t bc_stride;
    const float *dt;
    int64_t dt_stride;
    const float *dt_bias, *A, *D; /* [n_head] each */
    float *y;
    int64_t y_stride;
};
enum hmoe_status hmoe_cuda_mamba2_scan(const struct hmoe_cuda_mamba2_scan_args *a, void *stream, struct hmoe_err *err);

/* Grouped gated RMSNorm in place: per token t and group j < n_group of group_size channels,
 * v = y * silu(z), then y = v / sqrt(mean(v^2) + eps) * w (w per channel, n_group * group_size). */
enum hmoe_status hmoe_cuda_mamba2_gated_norm(float *d_y, int64_t y_stride, const float *d_z, int64_t z_stride,
                                             const float *d_w, int64_t ntok, int n_group, int group_size, float eps,
                                             void *stream, struct hmoe_err *err);

/* x = relu(x)^2 in place over nrows rows of n floats, stride floats apart. */
enum hmoe_status hmoe_cuda_relu2(float *d_x, int64_t stride, int64_t nrows, int64_t n, void *stream,
                                 struct hmoe_err *err);

/* ------------------------------------------------------------------------------------------
 * Sigmoid-routed, ungated experts (cuda_moe_ungated.cu; nemotron_h_moe.md §6.1)
 * ------------------------------------------------------------------------------------------ */

/* Router for ntok rows of logits: p = sigmoid(logit), the k largest p + sel_bias (NULL: none;
 * descending, equal scores -> lower index first), weights the unbiased p of the chosen ones,
 * divided by max(sum, 6.103515625e-5) when renorm, then times scale unless it is 0 or 1.
 * n_expert <= 512, 1 <= k <= min(n_expert, 32). One warp per token. */
struct hmoe_cuda_topk_sigmoid_args {
    const float *logits;
    int64_t logits_stride, ntok;
    int n_expert, k;
    const float *sel_bias;
    bool renorm;
    float scale;
    int32_t *ids;      /* [ntok][k] */
    float *weights;    /* [ntok][k] */
};
enum hmoe_status hmoe_cuda_moe_topk_sigmoid(const struct hmoe_cuda_topk_sigmoid_args *a, void *stream,
                                            struct hmoe_err *err);

/* Decode up projection of ungated experts: for every slot s < nslot (token s / k), e = ids[s],
 * z[s*z_stride + f] = relu(up_e[f] · x)^2 with x the q8_1 row of token s / k. Quantized up only;
 * the down projection is hmoe_cuda_moe_down. Bad expert ids produce zeros. */
enum hmoe_status hmoe_cuda_moe_up_relu2(const struct hmoe_cuda_experts *up, const int32_t *d_ids, int64_t nslot, int k,
                                        const void *d_x, size_t x_stride_bytes, float *d_z, int64_t z_stride,
                                        void *stream, struct hmoe_err *err);

/* F32 or F16 expert tensors (any width), f32 activations: up + ReLU² per slot as above (x rows per
 * token, x_stride floats apart), and down: y[t][r] += sum_j weights[t*k+j] (down_{ids[t*k+j]}[r] ·
 * z[t*k+j]) with z rows per slot. Deterministic. */
enum hmoe_status hmoe_cuda_moe_f32_up_relu2(const struct hmoe_cuda_experts *up, const int32_t *d_ids, int64_t nslot,
                                            int k, const float *d_x, int64_t x_stride, float *d_z, int64_t z_stride,
                                            void *stream, struct hmoe_err *err);
enum hmoe_status hmoe_cuda_moe_f32_down(const struct hmoe_cuda_experts *down, const int32_t *d_ids,
                                        const float *d_weights, int64_t ntok, int k, const float *d_z, int64_t z_stride,
                                        float *d_y, int64_t y_stride, void *stream, struct hmoe_err *err);

#endif
