/* cpu_kernel_table.c — which SIMD kernels exist for which type and path. hmoe_cpu_init()
 * starts from the type table's scalar references and applies these rows in order for
 * every path up to the one it picked, so a later (wider) row overrides an earlier one.
 * Adding a type = its kernel files + one row per path here (cpu_impl.h).
 */
#include "amx_impl.h"
#include "cpu_impl.h"

#define ACT(type_, path_, name)                                                                                        \
    { .type = type_, .path = path_, .k = {.quantize = hmoe_cpu_quantize_##name} }
#define WEIGHT(type_, path_, name)                                                                                     \
    { .type = type_, .path = path_, .k = {.gemv = hmoe_cpu_gemv_##name, .gemm = hmoe_cpu_gemm_##name} }
/* AVX2 kernels that also need AVX-VNNI: applied on the AVX2 and AVX-512 paths when the CPU
 * has it (the AVX-512 rows below still override them) */
#define GEMV_VNNI(type_, name)                                                                                         \
    { .type = type_, .path = HMOE_CPU_AVX2, .vnni = true, .k = {.gemv = hmoe_cpu_gemv_##name} }
#define WEIGHT_VNNI(type_, name)                                                                                       \
    {                                                                                                                  \
        .type = type_, .path = HMOE_CPU_AVX2, .vnni = true,                                                            \
        .k = {.gemv = hmoe_cpu_gemv_##name, .gemm = hmoe_cpu_gemm_##name}                                              \
    }

const struct hmoe_cpu_kernel_row hmoe_cpu_kernel_rows[] = {
    /* AVX2 (+FMA, F16C) */
    ACT(HMOE_TYPE_Q8_K, HMOE_CPU_AVX2, q8_k_avx2),
    ACT(HMOE_TYPE_Q8_0, HMOE_CPU_AVX2, q8_0_avx2),
    ACT(HMOE_TYPE_F16, HMOE_CPU_AVX2, f16_avx2),
    ACT(HMOE_TYPE_BF16, HMOE_CPU_AVX2, bf16_avx2),
    WEIGHT(HMOE_TYPE_Q2_K, HMOE_CPU_AVX2, q2_k_avx2),
    WEIGHT(HMOE_TYPE_Q3_K, HMOE_CPU_AVX2, q3_k_avx2),
    WEIGHT(HMOE_TYPE_Q4_K, HMOE_CPU_AVX2, q4_k_avx2),
    WEIGHT(HMOE_TYPE_Q5_K, HMOE_CPU_AVX2, q5_k_avx2),
    WEIGHT(HMOE_TYPE_Q6_K, HMOE_CPU_AVX2, q6_k_avx2),
    WEIGHT(HMOE_TYPE_Q8_0, HMOE_CPU_AVX2, q8_0_avx2),
    WEIGHT(HMOE_TYPE_Q5_0, HMOE_CPU_AVX2, q5_0_avx2),
    WEIGHT(HMOE_TYPE_Q4_0, HMOE_CPU_AVX2, q4_0_avx2),
    WEIGHT(HMOE_TYPE_Q4_1, HMOE_CPU_AVX2, q4_1_avx2), /* also the AVX-512 path's */
    WEIGHT(HMOE_TYPE_Q5_1, HMOE_CPU_AVX2, q5_1_avx2), /* also the AVX-512 path's */
    WEIGHT(HMOE_TYPE_F32, HMOE_CPU_AVX2, f32_avx2),
    WEIGHT(HMOE_TYPE_F16, HMOE_CPU_AVX2, f16_avx2),
    WEIGHT(HMOE_TYPE_BF16, HMOE_CPU_AVX2, bf16_avx2),
    WEIGHT(HMOE_TYPE_IQ2_XXS, HMOE_CPU_AVX2, iq2_xxs_avx2),
    WEIGHT(HMOE_TYPE_IQ2_XS, HMOE_CPU_AVX2, iq2_xs_avx2),
    WEIGHT(HMOE_TYPE_IQ2_S, HMOE_CPU_AVX2, iq2_s_avx2),
    WEIGHT(HMOE_TYPE_IQ3_XXS, HMOE_CPU_AVX2, iq3_xxs_avx2),
    WEIGHT(HMOE_TYPE_IQ3_S, HMOE_CPU_AVX2, iq3_s_avx2),
    WEIGHT(HMOE_TYPE_IQ4_XS, HMOE_CPU_AVX2, iq4_xs_avx2),
    WEIGHT(HMOE_TYPE_IQ4_NL, HMOE_CPU_AVX2, iq4_nl_avx2),
    WEIGHT(HMOE_TYPE_IQ1_S, HMOE_CPU_AVX2, iq1_s_avx2), /* also the AVX-512 path's */
    WEIGHT(HMOE_TYPE_IQ1_M, HMOE_CPU_AVX2, iq1_m_avx2),
    WEIGHT(HMOE_TYPE_MXFP4, HMOE_CPU_AVX2, mxfp4_avx2),
#if HMOE_HAVE_AVXVNNI
    /* AVX2 + AVX-VNNI */
    WEIGHT_VNNI(HMOE_TYPE_Q4_K, q4_k_avxvnni),
    WEIGHT_VNNI(HMOE_TYPE_Q5_K, q5_k_avxvnni),
    WEIGHT_VNNI(HMOE_TYPE_Q6_K, q6_k_avxvnni),
    WEIGHT_VNNI(HMOE_TYPE_Q8_0, q8_0_avxvnni),
    WEIGHT_VNNI(HMOE_TYPE_Q5_0, q5_0_avxvnni),
    WEIGHT_VNNI(HMOE_TYPE_MXFP4, mxfp4_avxvnni),
    GEMV_VNNI(HMOE_TYPE_IQ4_XS, iq4_xs_avxvnni),
#endif
    /* AVX-512 F/BW/VL/DQ + VNNI */
    ACT(HMOE_TYPE_Q8_K, HMOE_CPU_AVX512, q8_k_avx512),
    ACT(HMOE_TYPE_Q8_0, HMOE_CPU_AVX512, q8_0_avx512),
    ACT(HMOE_TYPE_F16, HMOE_CPU_AVX512, f16_avx512),
    ACT(HMOE_TYPE_BF16, HMOE_CPU_AVX512, bf16_avx512),
    WEIGHT(HMOE_TYPE_Q2_K, HMOE_CPU_AVX512, q2_k_avx512),
    WEIGHT(HMOE_TYPE_Q3_K, HMOE_CPU_AVX512, q3_k_avx512),
    WEIGHT(HMOE_TYPE_Q4_K, HMOE_CPU_AVX512, q4_k_avx512),
    WEIGHT(HMOE_TYPE_Q5_K, HMOE_CPU_AVX512, q5_k_avx512),
    WEIGHT(HMOE_TYPE_Q6_K, HMOE_CPU_AVX512, q6_k_avx512),
    WEIGHT(HMOE_TYPE_Q8_0, HMOE_CPU_AVX512, q8_0_avx512),
    WEIGHT(HMOE_TYPE_Q5_0, HMOE_CPU_AVX512, q5_0_avx512),
    WEIGHT(HMOE_TYPE_F32, HMOE_CPU_AVX512, f32_avx512),
    WEIGHT(HMOE_TYPE_F16, HMOE_CPU_AVX512, f16_avx512),
    WEIGHT(HMOE_TYPE_BF16, HMOE_CPU_AVX512, bf16_avx512),
    WEIGHT(HMOE_TYPE_IQ2_XXS, HMOE_CPU_AVX512, iq2_xxs_avx512),
    WEIGHT(HMOE_TYPE_IQ2_XS, HMOE_CPU_AVX512, iq2_xs_avx512),
    WEIGHT(HMOE_TYPE_IQ2_S, HMOE_CPU_AVX512, iq2_s_avx512),
    WEIGHT(HMOE_TYPE_IQ3_XXS, HMOE_CPU_AVX512, iq3_xxs_avx512),
    WEIGHT(HMOE_TYPE_IQ3_S, HMOE_CPU_AVX512, iq3_s_avx512),
    WEIGHT(HMOE_TYPE_IQ4_XS, HMOE_CPU_AVX512, iq4_xs_avx512),
    WEIGHT(HMOE_TYPE_IQ4_NL, HMOE_CPU_AVX512, iq4_nl_avx512),
    WEIGHT(HMOE_TYPE_MXFP4, HMOE_CPU_AVX512, mxfp4_avx512),
};
const int hmoe_cpu_kernel_row_count = (int)(sizeof hmoe_cpu_kernel_rows / sizeof hmoe_cpu_kernel_rows[0]);

/* AMX int8 (AMX-TILE + AMX-INT8, on top of the AVX-512 path): the Q4_K_M expert types. */
const struct hmoe_cpu_amx_row hmoe_cpu_amx_rows[] = {
    {HMOE_TYPE_Q4_K, hmoe_cpu_gemm_q4_k_amx, hmoe_cpu_gemm_q4_k_amxemu},
    {HMOE_TYPE_Q6_K, hmoe_cpu_gemm_q6_k_amx, hmoe_cpu_gemm_q6_k_amxemu},
};
const int hmoe_cpu_amx_row_count = (int)(sizeof hmoe_cpu_amx_rows / sizeof hmoe_cpu_amx_rows[0]);
