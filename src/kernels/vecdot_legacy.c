/* vecdot_legacy.c — reference dot products of the weight types whose activations are
 * Q8_0 or Q8_1 blocks of 32 (quants.md §8.1, §8.2, table of §8.4): Q4_0, Q5_0, Q8_0,
 * IQ4_NL, MXFP4, NVFP4, Q1_0, Q2_0 with Q8_0; Q4_1, Q5_1 with Q8_1.
 * Per 32 elements the integer sum Σ q·a is exact (as in llama.cpp); the scaling and the
 * sum over blocks are done in double. Weight quants are decoded here independently of
 * dequant_*.c so the two codings check each other (tests/test_quant_props.c). */
#include "kernels/iq_tables.h"
#include "kernels/quant_ref_impl.h"

/* 4-bit code of element e (0..31) in Q4_0 nibble order. */
static int nib32(const uint8_t qs[16], int e) { return e < 16 ? (qs[e] & 0xF) : (qs[e - 16] >> 4); }

float hmoe_ref_vec_dot_q4_0(int64_t n, const void *w_row, const void *act_row) {
    const struct hmoe_block_q4_0 *w = w_row;
    const struct hmoe_block_q8_0 *a = act_row;
    double sum = 0.0;
    for (int64_t i = 0; i < n / 32; i++) {
        int sumi = 0;
        for (int e = 0; e < 32; e++) sumi += (nib32(w[i].qs, e) - 8) * a[i].qs[e];
        sum += (double)hmoe_fp16_to_f32(w[i].d) * hmoe_fp16_to_f32(a[i].d) * sumi;
    }
    return (float)sum;
}

float hmoe_ref_vec_dot_q5_0(int64_t n, const void *w_row, const void *act_row) {
    const struct hmoe_block_q5_0 *w = w_row;
    const struct hmoe_block_q8_0 *a = act_row;
    double sum = 0.0;
    for (int64_t i = 0; i < n / 32; i++) {
        uint32_t h = hmoe_ld_u32le(w[i].qh);
        int sumi = 0;
        for (int e = 0; e < 32; e++) sumi += ((nib32(w[i].qs, e) | (int)(((h >> e) & 1) << 4)) - 16) * a[i].qs[e];
        sum += (double)hmoe_fp16_to_f32(w[i].d) * hmoe_fp16_to_f32(a[i].d) * sumi;
    }
    return (float)sum;
}

float hmoe_ref_vec_dot_q8_0(int64_t n, const void *w_row, const void *act_row) {
    const struct hmoe_block_q8_0 *w = w_row, *a = act_row;
    double sum = 0.0;
    for (int64_t i = 0; i < n / 32; i++) {
        int sumi = 0;
        for (int e = 0; e < 32; e++) sumi += w[i].qs[e] * a[i].qs[e];
        sum += (double)hmoe_fp16_to_f32(w[i].d) * hmoe_fp16_to_f32(a[i].d) * sumi;
    }
    return (float)sum;
}

/* Q4_1 / Q5_1: dw·da·Σq·a + m·s, where s is the activation block's stored fp16 of d·Σa
 * (§8.2), which is what llama.cpp uses for the offset term. */
float hmoe_ref_vec_dot_q4_1(int64_t n, const void *w_row, const void *act_row) {
    const struct hmoe_block_q4_1 *w = w_row;
    const struct hmoe_block_q8_1 *a = act_row;
    double sum = 0.0;
    for (int64_t i = 0; i < n / 32; i++) {
        int sumi = 0;
        for (int e = 0; e < 32; e++) sumi += nib32(w[i].qs, e) * a[i].qs[e];
        sum += (double)hmoe_fp16_to_f32(w[i].d) * hmoe_fp16_to_f32(a[i].d) * sumi +
               (double)hmoe_fp16_to_f32(w[i].m) * hmoe_fp16_to_f32(a[i].s);
    }
    return (float)sum;
}

float hmoe_ref_vec_dot_q5_1(int64_t n, const void *w_row, const void *act_row) {
    const struct hmoe_block_q5_1 *w = w_row;
    const struct hmoe_block_q8_1 *a = act_row;
    double sum = 0.0;
    for (int64_t i = 0; i < n / 32; i++) {
        uint32_t h = hmoe_ld_u32le(w[i].qh);
        int sumi = 0;
        for (int e = 0; e < 32; e++) sumi += (nib32(w[i].qs, e) | (int)(((h >> e) & 1) << 4)) * a[i].qs[e];
        sum += (double)hmoe_fp16_to_f32(w[i].d) * hmoe_fp16_to_f32(a[i].d) * sumi +
               (double)hmoe_fp16_to_f32(w[i].m) * hmoe_fp16_to_f32(a[i].s);
    }
    return (float)sum;
}

float hmoe_ref_vec_dot_iq4_nl(int64_t n, const void *w_row, const void *act_row) {
    const struct hmoe_block_iq4_nl *w = w_row;
    const struct hmoe_block_q8_0 *a = act_row;
    double sum = 0.0;
    for (int64_t i = 0; i < n / 32; i++) {
        int sumi = 0;
        for (int e = 0; e < 32; e++) sumi += hmoe_kvalues_iq4nl[nib32(w[i].qs, e)] * a[i].qs[e];
        sum += (double)hmoe_fp16_to_f32(w[i].d) * hmoe_fp16_to_f32(a[i].d) * sumi;
    }
    return (float)sum;
}

float hmoe_ref_vec_dot_mxfp4(int64_t n, const void *w_row, const void *act_row) {
    const struct hmoe_block_mxfp4 *w = w_row;
    const struct hmoe_block_q8_0 *a = act_row;
    double sum = 0.0;
    for (int64_t i = 0; i < n / 32; i++) {
        int sumi = 0;
        for (int e = 0; e < 32; e++) sumi += hmoe_kvalues_mxfp4[nib32(w[i].qs, e)] * a[i].qs[e];
        sum += (double)hmoe_fp16_to_f32(a[i].d) * hmoe_e8m0_to_f32_half(w[i].e) * sumi;
    }
    return (float)sum;
}

/* NVFP4: 64 elements = two Q8_0 blocks; each 16-element sub-block s has its own scale
 * and lies in activation block s/2. */
float hmoe_ref_vec_dot_nvfp4(int64_t n, const void *w_row, const void *act_row) {
    const struct hmoe_block_nvfp4 *w = w_row;
    const struct hmoe_block_q8_0 *a = act_row;
    double sum = 0.0;
    for (int64_t i = 0; i < n / 64; i++) {
        for (int s = 0; s < 4; s++) {
            const struct hmoe_block_q8_0 *ab = &a[2 * i + s / 2];
            int off = 16 * (s % 2), sumi = 0;
            for (int j = 0; j < 8; j++) {
                sumi += hmoe_kvalues_mxfp4[w[i].qs[8 * s + j] & 0xF] * ab->qs[off + j];
                sumi += hmoe_kvalues_mxfp4[w[i].qs[8 * s + j] >> 4] * ab->qs[off + 8 + j];
            }
            sum += (double)hmoe_fp16_to_f32(ab->d) * hmoe_ue4m3_to_f32_half(w[i].d[s]) * sumi;
        }
    }
    return (float)sum;
}

/* Q1_0: 128 elements = four Q8_0 blocks; element j is +1 (bit set) or -1 times d. */
float hmoe_ref_vec_dot_q1_0(int64_t n, const void *w_row, const void *act_row) {
    const struct hmoe_block_q1_0 *w = w_row;
    const struct hmoe_block_q8_0 *a = act_row;
    double sum = 0.0;
    for (int64_t i = 0; i < n / 128; i++) {
        for (int k = 0; k < 4; k++) {
            const struct hmoe_block_q8_0 *ab = &a[4 * i + k];
            int sumi = 0;
            for (int e = 0; e < 32; e++) {
                int j = 32 * k + e;
                sumi += (((w[i].qs[j / 8] >> (j % 8)) & 1) ? 1 : -1) * ab->qs[e];
            }
            sum += (double)hmoe_fp16_to_f32(w[i].d) * hmoe_fp16_to_f32(ab->d) * sumi;
        }
    }
    return (float)sum;
}

/* Q2_0: 64 elements = two Q8_0 blocks; element j is (2-bit q - 1) times d. */
float hmoe_ref_vec_dot_q2_0(int64_t n, const void *w_row, const void *act_row) {
    const struct hmoe_block_q2_0 *w = w_row;
    const struct hmoe_block_q8_0 *a = act_row;
    double sum = 0.0;
    for (int64_t i = 0; i < n / 64; i++) {
        for (int k = 0; k < 2; k++) {
            const struct hmoe_block_q8_0 *ab = &a[2 * i + k];
            int sumi = 0;
            for (int e = 0; e < 32; e++) {
                int j = 32 * k + e;
                sumi += (((w[i].qs[j / 4] >> (2 * (j % 4))) & 3) - 1) * ab->qs[e];
            }
            sum += (double)hmoe_fp16_to_f32(w[i].d) * hmoe_fp16_to_f32(ab->d) * sumi;
        }
    }
    return (float)sum;
}
