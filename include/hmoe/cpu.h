/* cpu.h — CPU matrix kernels, chosen once at startup (house style 9).
 *
 * Weights are rows of `ncols` elements in their GGUF type (row r at w + r*row_bytes).
 * Activations are first quantized to the weight type's vec_dot_type (quants.md §8:
 * Q8_K for K/I-quants, Q8_0 for Q8_0/Q4_0/IQ4_NL, F16 for F16, ...), once per matrix
 * and token, then every output is an integer-heavy dot product of one weight row with
 * that quantized row. The kernels themselves are single-threaded work units over a row
 * range; callers (model, sched) split rows (or experts) across OpenMP threads, so no
 * parallel region is hidden in here except in hmoe_cpu_matmul(); hmoe_cpu_parallel() is
 * the thread team the engine splits that work with.
 * The kernels trust their arguments (hot path): ncols must be a multiple of the type's block
 * size and the type must pass hmoe_cpu_supports(); the loader validates both once.
 * Results match the type table's vec_dot_ref to ~1e-7 relative (integer block sums, double
 * accumulation), i.e. llama.cpp's vec_dot to its own float rounding.
 */
#ifndef HMOE_CPU_H
#define HMOE_CPU_H

#include "hmoe/common.h"
#include "hmoe/types.h"

#include <stdatomic.h>

enum hmoe_cpu_path { HMOE_CPU_SCALAR = 0, HMOE_CPU_AVX2 = 1, HMOE_CPU_AVX512 = 2 };

/* Detect the CPU (cpuid + XGETBV) and pick kernels; idempotent and thread-safe to call
 * before any parallel work. The environment variable HMOE_CPU=scalar|avx2-novnni|avx2|avx512
 * forces a path (capped at what the CPU supports) so one machine can test every path;
 * avx2-novnni is the AVX2 path without the AVX-VNNI kernels. */
void hmoe_cpu_init(void);
enum hmoe_cpu_path hmoe_cpu_path(void);
const char *hmoe_cpu_path_name(enum hmoe_cpu_path p);
/* True when the AVX-VNNI (VEX vpdpbusd) kernels are in use: the CPU has them (Alder Lake and
 * later, Zen 5) and HMOE_CPU is not scalar or avx2-novnni. */
bool hmoe_cpu_vnni(void);
/* The path in use in words, with AVX-VNNI named on the AVX2 path: "scalar", "avx2",
 * "avx2+vnni" or "avx512". */
const char *hmoe_cpu_isa_name(void);

/* True when batched Q4_K / Q6_K gemm calls run on AMX int8 tiles (AVX-512 path and the CPU
 * passed a run-time AMX check; on by default, HMOE_AMX=0 forces it off; batches of at least
 * 16 tokens). hmoe_cpu_amx_status() says the
 * same in words for -v / bench output, with the reason when AMX is unusable. */
bool hmoe_cpu_amx(void);
const char *hmoe_cpu_amx_status(void);

/* Number of physical cores (default for -t). */
int hmoe_cpu_physical_cores(void);

/* True when this build has kernels for weight type `wtype` (a reference dot product and
 * an activation quantizer); the loader should reject a model with an unsupported type
 * before calling the kernels, which do not check. */
bool hmoe_cpu_supports(enum hmoe_type wtype);

/* Bytes needed to hold `n` activations quantized for weight type `wtype`. */
size_t hmoe_cpu_act_bytes(enum hmoe_type wtype, int64_t n);

/* Quantize one activation row of n floats for weight type `wtype` into `dst`
 * (hmoe_cpu_act_bytes(wtype, n) bytes). Bit-identical to the type table's quantize_ref. */
void hmoe_cpu_quantize_act(enum hmoe_type wtype, const float *x, void *dst, int64_t n);

/* y[r - r0] = dot(row r of W, xq) for r in [r0, r1). Single-threaded. */
void hmoe_cpu_gemv(enum hmoe_type wtype, int64_t ncols, const void *w, size_t row_bytes, int64_t r0, int64_t r1,
                   const void *xq, float *y);

/* Several activation rows at once (prefill): for t in [0, ntok), r in [r0, r1):
 *   y[t * y_stride + (r - r0)] = dot(row r of W, xq + t * xq_stride_bytes).
 * Single-threaded; loads each weight block once for all ntok activations. */
void hmoe_cpu_gemm(enum hmoe_type wtype, int64_t ncols, const void *w, size_t row_bytes, int64_t r0, int64_t r1,
                   const void *xq, size_t xq_stride_bytes, int64_t ntok, float *y, size_t y_stride);

/* Attention's weighted sum over a transposed V (rows of positions): for h < n_h, e < n_rows
 *   o[h * o_stride + e] = Σ_{p < n_pos} prob[h * p_stride + p] · V(e, p),
 * V(e, p) the element of type vt (F32, F16 or BF16) at v + e * row_bytes + p * type_size.
 * Products of the exact binary32 values, summed in binary32 (the AVX-512 / AVX2 paths in 16 / 8
 * lanes of positions added in a tree at the end, the portable loop in blocks of 256 positions).
 * Reads no position at or past n_pos. Single-threaded. */
void hmoe_cpu_attn_wsum(enum hmoe_type vt, int64_t n_pos, const void *v, size_t row_bytes, int64_t n_rows,
                        const float *prob, size_t p_stride, int n_h, float *o, size_t o_stride);

/* Attention's scores: for h < n_h, p < n_pos
 *   s[h * s_stride + p] = dot(K row p at k + p * k_stride, query h at q + h * q_stride),
 * K rows of D elements of type kt, queries in kt's activation format (hmoe_cpu_quantize_act),
 * as the gemm/gemv kernels take them. F32/F16/BF16 K with D <= HMOE_CPU_ATTN_MAX_DIM on
 * AVX-512: one pass over K for 8 heads at a time, products of the exact binary32 values
 * summed in binary32; otherwise the type table's gemm/gemv. Single-threaded. */
#define HMOE_CPU_ATTN_MAX_DIM 512
void hmoe_cpu_attn_scores(enum hmoe_type kt, int64_t D, const void *k, size_t k_stride, int64_t n_pos, const void *q,
                          size_t q_stride, int n_h, float *s, size_t s_stride);

/* One K or V row of n floats (a multiple of t's block size) into KV cache type t at dst
 * (hmoe_row_bytes(t, n) bytes): a copy for F32, the activation quantizer for F16/BF16/Q8_0
 * (bit-identical), the type table's weight quantizer for Q4_0/Q4_1/Q5_0/Q5_1/IQ4_NL.
 * hmoe_cpu_attn_kv_type_ok says whether this build has everything attention needs for t
 * as a cache type (the store, the read-back, the dot product with its activation format). */
bool hmoe_cpu_attn_kv_type_ok(enum hmoe_type t);
void hmoe_cpu_attn_kv_store(enum hmoe_type t, const float *src, void *dst, int64_t n);

/* Softmax of n scores in place after scaling by `scale`, as ggml's soft_max: max-subtracted,
 * binary32 exponentials (the AVX-512 path within 2 ulp of expf), their sum in double, one
 * multiply by the inverse. */
void hmoe_cpu_softmax_scaled(float *s, int64_t n, float scale);
/* The same with an attention sink: one extra logit (not scaled) in the maximum and the
 * denominator only, so the n probabilities sum to less than one (gpt-oss.md). */
void hmoe_cpu_softmax_scaled_sink(float *s, int64_t n, float scale, float sink);

/* The gated MLP's activation over n elements in place: g[i] = g[i] / (1 + e^-g[i]) · u[i]
 * (SwiGLU; the AVX2 path's exponential within 2 ulp of expf). */
void hmoe_cpu_swiglu(float *g, const float *u, int64_t n);

/* Convenience for dense matrices: quantize x (ntok rows of ncols floats, x_stride floats
 * apart) and compute y = W·x for all nrows rows with the OpenMP threads available.
 * `scratch` must hold ntok * hmoe_cpu_act_bytes(wtype, ncols) bytes. */
void hmoe_cpu_matmul(enum hmoe_type wtype, int64_t ncols, int64_t nrows, const void *w, size_t row_bytes,
                     const float *x, size_t x_stride, int64_t ntok, float *y, size_t y_stride, void *scratch);

/* ---- persistent thread team (pool.c) ----
 * fn(arg, item, tid) runs once for every item in [0, n_items), on up to n_threads threads: the
 * caller (tid 0) and pool workers (tid 1 .. n_threads-1), each claiming the next item in
 * increasing order; returns when all have finished. tid is unique among the threads running
 * this job, so it may index per-thread scratch of n_threads entries. The caller never waits
 * for a thread to arrive, only for items already claimed: if the machine is busy and the
 * workers do not get a core, the caller runs the items itself. Calls from inside an item run
 * serially on the calling thread with its tid; jobs from several threads take turns.
 * Idle workers spin for HMOE_SPIN_US microseconds (default 200) after a job, then sleep. */
typedef void (*hmoe_cpu_task_fn)(void *arg, int64_t item, int tid);
void hmoe_cpu_parallel(int n_threads, int64_t n_items, hmoe_cpu_task_fn fn, void *arg);

/* ---- work items with a fine tail (split.c) ----
 * Rows [0, rows) cut into work items for hmoe_cpu_parallel(): items of `big` rows first, then
 * the last rows (at least tail_rows; the big part is whole items) in items of `small` rows.
 * Why: the threads claim items dynamically, so a job ends up to one item apart on its threads;
 * with small items at the end the last thread finishes within a small item of the others,
 * while the bulk keeps long runs (each item starts its weight stream cold). big >= 1,
 * 1 <= small <= big, tail_rows >= 0 (clamped to rows); rows >= 0. */
struct hmoe_cpu_split {
    int64_t rows, big, small;
    int64_t n_big;   /* items of `big` rows, covering [0, n_big * big) */
    int64_t n_items; /* all items */
};
void hmoe_cpu_split_init(struct hmoe_cpu_split *s, int64_t rows, int64_t big, int64_t small, int64_t tail_rows);
/* Rows [*r0, *r1) of item `item` (0 <= item < s->n_items). */
void hmoe_cpu_split_item(const struct hmoe_cpu_split *s, int64_t item, int64_t *r0, int64_t *r1);

/* ---- items in per-thread lanes (lanes.c) ----
 * Items [0, n) in n_lanes contiguous lanes; thread tid takes items from the front of lane
 * tid % n_lanes in order, then steals the back items of the fullest other lane. For decode
 * jobs whose items are consecutive weight rows: each thread then reads one contiguous run
 * instead of every n_threads-th item. Run the job as hmoe_cpu_parallel(nt, n, fn, arg) with
 * fn taking its item from hmoe_cpu_lanes_next(lanes, tid) (the pool makes exactly n calls, so
 * each returns an item; -1 only when called more often than there are items). */
#define HMOE_CPU_LANES_MAX 64
struct hmoe_cpu_lanes {
    int n_lanes;
    struct {
        _Alignas(64) _Atomic uint64_t w; /* back << 32 | front: items [front, back) are left */
    } lane[HMOE_CPU_LANES_MAX];
};
void hmoe_cpu_lanes_init(struct hmoe_cpu_lanes *l, int64_t n_items, int n_lanes);
int64_t hmoe_cpu_lanes_next(struct hmoe_cpu_lanes *l, int tid);

#endif
