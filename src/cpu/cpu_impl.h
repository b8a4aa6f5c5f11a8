/* cpu_impl.h — private to src/cpu: the per-type kernel table that hmoe_cpu_init() fills,
 * and the prototypes of every SIMD kernel. Each *_avx2.c / *_avx512.c file is compiled
 * with its own -m flags, so nothing here may be called before the run-time CPU check
 * (cpu_dispatch.c) picked that path. Adding a type's SIMD kernels = write them in a new
 * or existing *_avx2.c / *_avx512.c file, declare them here and add one row per path to
 * hmoe_cpu_kernel_rows[] (cpu_kernel_table.c).
 */
#ifndef HMOE_CPU_IMPL_H
#define HMOE_CPU_IMPL_H

#include "hmoe/cpu.h"

/* y[r] = dot(row r of W, xq) for r in [0, nrows); w points at row 0. */
typedef void (*hmoe_cpu_gemv_fn)(int64_t ncols, const void *w, size_t row_bytes, int64_t nrows, const void *xq,
                                 float *y);
/* y[t * y_stride + r] = dot(row r of W, xq + t * xq_stride) for t < ntok, r < nrows. */
typedef void (*hmoe_cpu_gemm_fn)(int64_t ncols, const void *w, size_t row_bytes, int64_t nrows, const void *xq,
                                 size_t xq_stride, int64_t ntok, float *y, size_t y_stride);

/* The kernels of one type on the chosen path. For an activation type only `quantize`
 * matters; for a weight type `gemv` and `gemm`. A NULL entry means "use the scalar
 * reference loop" (cpu_dispatch.c). */
struct hmoe_cpu_kernels {
    hmoe_quant_row_fn quantize;
    hmoe_cpu_gemv_fn gemv;
    hmoe_cpu_gemm_fn gemm;
    hmoe_cpu_gemm_fn gemm_amx; /* batched gemm from amx_min_tok tokens on (NULL: none / AMX off) */
};

/* One row of the registration table: the kernels of `type` that need at least `path`,
 * and AVX-VNNI too when `vnni` is set (the *_avxvnni.c files). */
struct hmoe_cpu_kernel_row {
    enum hmoe_type type;
    enum hmoe_cpu_path path;
    bool vnni;
    struct hmoe_cpu_kernels k;
};
extern const struct hmoe_cpu_kernel_row hmoe_cpu_kernel_rows[];
extern const int hmoe_cpu_kernel_row_count;

/* Test hook (declared again in tests): pick `want`, capped at what this CPU supports;
 * returns the path now in effect. Not for engine code — use HMOE_CPU instead. */
enum hmoe_cpu_path hmoe_cpu_force_path(enum hmoe_cpu_path want);
/* Test hook: allow (true) or forbid the AVX-VNNI kernels on the current path; returns
 * whether they are in use now (false on a CPU without them). hmoe_cpu_init() resets it. */
bool hmoe_cpu_force_vnni(bool want);

/* Batched (prefill) kernels that take a type's gemm calls of at least `min_tok` tokens
 * when AMX is in use (amx_impl.h): the real one and its tile-emulator twin (tests). */
struct hmoe_cpu_amx_row {
    enum hmoe_type type;
    hmoe_cpu_gemm_fn amx, emulated;
};
extern const struct hmoe_cpu_amx_row hmoe_cpu_amx_rows[];
extern const int hmoe_cpu_amx_row_count;

/* Test / bench hook (declared again there): AMX kernels off, on (real, only if the CPU
 * passed the run-time check) or emulated (scalar tile emulator, any AVX-512 CPU; for
 * tests), with the AVX-512 gemm below `min_tok` tokens (<= 0: keep the current
 * threshold). Returns the mode now in effect. Not for engine code — use HMOE_AMX. */
enum hmoe_cpu_amx_mode { HMOE_CPU_AMX_OFF = 0, HMOE_CPU_AMX_ON = 1, HMOE_CPU_AMX_EMULATED = 2 };
enum hmoe_cpu_amx_mode hmoe_cpu_force_amx(enum hmoe_cpu_amx_mode want, int min_tok);

/* ---- SIMD kernels (defined in the *_avx2.c / *_avx512.c files) ---- */
#define HMOE_CPU_DECLARE_WEIGHT(name)                                                                                  \
    void hmoe_cpu_gemv_##name(int64_t ncols, const void *w, size_t row_bytes, int64_t nrows, const void *xq,           \
                              float *y);                                                                               \
    void hmoe_cpu_gemm_##name(int64_t ncols, const void *w, size_t row_bytes, int64_t nrows, const void *xq,           \
                              size_t xq_stride, int64_t ntok, float *y, size_t y_stride);

#define HMOE_CPU_DECLARE_WEIGHT_GEMM(name)                                                                             \
    void hmoe_cpu_gemm_##name(int64_t ncols, const void *w, size_t row_bytes, int64_t nrows, const void *xq,           \
                              size_t xq_stride, int64_t ntok, float *y, size_t y_stride);

#define HMOE_CPU_DECLARE_GEMV(name)                                                                                    \
    void hmoe_cpu_gemv_##name(int64_t ncols, const void *w, size_t row_bytes, int64_t nrows, const void *xq,           \
                              float *y);

/* activation quantizers (bit-identical to the type table's quantize_ref) */
void hmoe_cpu_quantize_q8_k_avx512(const float *src, void *dst, int64_t n);
void hmoe_cpu_quantize_q8_0_avx512(const float *src, void *dst, int64_t n);
void hmoe_cpu_quantize_f16_avx512(const float *src, void *dst, int64_t n);
void hmoe_cpu_quantize_bf16_avx512(const float *src, void *dst, int64_t n);
void hmoe_cpu_quantize_q8_k_avx2(const float *src, void *dst, int64_t n);
void hmoe_cpu_quantize_q8_0_avx2(const float *src, void *dst, int64_t n);
void hmoe_cpu_quantize_f16_avx2(const float *src, void *dst, int64_t n);
void hmoe_cpu_quantize_bf16_avx2(const float *src, void *dst, int64_t n);

HMOE_CPU_DECLARE_WEIGHT(q2_k_avx512)
HMOE_CPU_DECLARE_WEIGHT(q3_k_avx512)
HMOE_CPU_DECLARE_WEIGHT(q4_k_avx512)
HMOE_CPU_DECLARE_WEIGHT(q5_k_avx512)
HMOE_CPU_DECLARE_WEIGHT(q6_k_avx512)
HMOE_CPU_DECLARE_WEIGHT(q8_0_avx512)
HMOE_CPU_DECLARE_WEIGHT(q5_0_avx512)
HMOE_CPU_DECLARE_WEIGHT(f32_avx512)
HMOE_CPU_DECLARE_WEIGHT(f16_avx512)
HMOE_CPU_DECLARE_WEIGHT(bf16_avx512)
HMOE_CPU_DECLARE_WEIGHT(iq2_xxs_avx512)
HMOE_CPU_DECLARE_WEIGHT(iq2_xs_avx512)
HMOE_CPU_DECLARE_WEIGHT(iq2_s_avx512)
HMOE_CPU_DECLARE_WEIGHT(iq3_xxs_avx512)
HMOE_CPU_DECLARE_WEIGHT(iq3_s_avx512)
HMOE_CPU_DECLARE_WEIGHT(iq4_xs_avx512)
HMOE_CPU_DECLARE_WEIGHT(iq4_nl_avx512)
HMOE_CPU_DECLARE_WEIGHT(mxfp4_avx512)
HMOE_CPU_DECLARE_WEIGHT(iq2_xxs_avx2)
HMOE_CPU_DECLARE_WEIGHT(iq2_xs_avx2)
HMOE_CPU_DECLARE_WEIGHT(iq2_s_avx2)
HMOE_CPU_DECLARE_WEIGHT(iq3_xxs_avx2)
HMOE_CPU_DECLARE_WEIGHT(iq3_s_avx2)
HMOE_CPU_DECLARE_WEIGHT(iq4_xs_avx2)
HMOE_CPU_DECLARE_WEIGHT(iq4_nl_avx2)
HMOE_CPU_DECLARE_WEIGHT(iq1_s_avx2)
HMOE_CPU_DECLARE_WEIGHT(iq1_m_avx2)
HMOE_CPU_DECLARE_WEIGHT(q2_k_avx2)
HMOE_CPU_DECLARE_WEIGHT(q3_k_avx2)
HMOE_CPU_DECLARE_WEIGHT(q4_k_avx2)
HMOE_CPU_DECLARE_WEIGHT(q5_k_avx2)
HMOE_CPU_DECLARE_WEIGHT(q6_k_avx2)
HMOE_CPU_DECLARE_WEIGHT(q8_0_avx2)
HMOE_CPU_DECLARE_WEIGHT(q5_0_avx2)
HMOE_CPU_DECLARE_WEIGHT(q4_0_avx2)
HMOE_CPU_DECLARE_WEIGHT(q4_1_avx2)
HMOE_CPU_DECLARE_WEIGHT(q5_1_avx2)
HMOE_CPU_DECLARE_WEIGHT(f32_avx2)
HMOE_CPU_DECLARE_WEIGHT(f16_avx2)
HMOE_CPU_DECLARE_WEIGHT(bf16_avx2)
HMOE_CPU_DECLARE_WEIGHT(mxfp4_avx2)
/* the AVX2 tiles' own gemv, which the decode kernels hand remainder rows to */
HMOE_CPU_DECLARE_GEMV(q4_k_avx2_tiles)
HMOE_CPU_DECLARE_GEMV(q5_k_avx2_tiles)
HMOE_CPU_DECLARE_GEMV(q6_k_avx2_tiles)
HMOE_CPU_DECLARE_GEMV(q4_k_avxvnni_tiles)
HMOE_CPU_DECLARE_GEMV(q5_k_avxvnni_tiles)
HMOE_CPU_DECLARE_GEMV(q6_k_avxvnni_tiles)
HMOE_CPU_DECLARE_GEMV(mxfp4_avx2_tiles)
HMOE_CPU_DECLARE_GEMV(mxfp4_avxvnni_tiles)
HMOE_CPU_DECLARE_GEMV(mxfp4_avx512_tiles)
HMOE_CPU_DECLARE_GEMV(iq4_xs_avx2_tiles)
/* the AVX2 Q6_K tiles' gemm, which the group gemm hands rows too long for it to */
HMOE_CPU_DECLARE_WEIGHT_GEMM(q6_k_avx2_long)
HMOE_CPU_DECLARE_WEIGHT_GEMM(q6_k_avxvnni_long)
/* AVX2 + AVX-VNNI (the *_avxvnni.c files; HMOE_HAVE_AVXVNNI) */
HMOE_CPU_DECLARE_WEIGHT(q4_k_avxvnni)
HMOE_CPU_DECLARE_WEIGHT(q5_k_avxvnni)
HMOE_CPU_DECLARE_WEIGHT(q6_k_avxvnni)
HMOE_CPU_DECLARE_WEIGHT(q8_0_avxvnni)
HMOE_CPU_DECLARE_WEIGHT(q5_0_avxvnni)
HMOE_CPU_DECLARE_WEIGHT(mxfp4_avxvnni)
HMOE_CPU_DECLARE_GEMV(iq4_xs_avxvnni)

/* The SwiGLU activation (swiglu_avx2.c; cpu.h hmoe_cpu_swiglu). */
void hmoe_cpu_swiglu_avx2(float *g, const float *u, int64_t n);

/* The attention's weighted sum over transposed V (attn_wsum_avx512.c, attn_wsum_avx2.c; cpu.h
 * hmoe_cpu_attn_wsum). */
void hmoe_cpu_attn_wsum_avx2(enum hmoe_type vt, int64_t n_pos, const void *v, size_t row_bytes, int64_t n_rows,
                             const float *prob, size_t p_stride, int n_h, float *o, size_t o_stride);
void hmoe_cpu_attn_wsum_avx512(enum hmoe_type vt, int64_t n_pos, const void *v, size_t row_bytes, int64_t n_rows,
                               const float *prob, size_t p_stride, int n_h, float *o, size_t o_stride);
/* The attention's scores and softmax (attn_scores_avx2.c, attn_scores_avx512.c, softmax_avx2.c,
 * softmax_avx512.c; cpu.h). */
void hmoe_cpu_attn_scores_avx2(enum hmoe_type kt, int64_t D, const void *k, size_t k_stride, int64_t n_pos,
                               const void *q, size_t q_stride, int n_h, float *s, size_t s_stride);
void hmoe_cpu_attn_scores_avx512(enum hmoe_type kt, int64_t D, const void *k, size_t k_stride, int64_t n_pos,
                                 const void *q, size_t q_stride, int n_h, float *s, size_t s_stride);
/* sink: one more logit in the maximum and the denominator only (-INFINITY: none) */
void hmoe_cpu_softmax_scaled_avx512(float *s, int64_t n, float scale, float sink);
void hmoe_cpu_softmax_scaled_avx2(float *s, int64_t n, float scale, float sink);

#endif
