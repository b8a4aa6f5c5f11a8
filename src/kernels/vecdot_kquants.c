/* vecdot_kquants.c — reference dot products of the K-quants with Q8_K activations
 * (quants.md §8.3, table of §8.4): Q2_K, Q3_K, Q4_K, Q5_K, Q6_K.
 * Per super-block, the integer sums are those of llama.cpp: Σ_sub scale·(Σ q·a) and,
 * for the types with mins, Σ_sub min·bsum from the activation's bsums. The float part
 * (dw·da·isum - dmin·da·imin, summed over blocks) is done in double. Quants are walked
 * byte by byte here (dequant_kquants.c walks element by element), so the two codings of
 * each layout check each other in tests/test_quant_props.c. */
#include "kernels/quant_ref_impl.h"

float hmoe_ref_vec_dot_q2_k(int64_t n, const void *w_row, const void *act_row) {
    const struct hmoe_block_q2_k *w = w_row;
    const struct hmoe_block_q8_k *a = act_row;
    double sum = 0.0;
    for (int64_t i = 0; i < n / HMOE_QK_K; i++) {
        int sub[16] = {0};
        /* byte qs[32h + l] holds elements 128h + 32s + l in bit pair s */
        for (int h = 0; h < 2; h++)
            for (int s = 0; s < 4; s++)
                for (int l = 0; l < 32; l++) {
                    int e = 128 * h + 32 * s + l;
                    sub[e / 16] += ((w[i].qs[32 * h + l] >> (2 * s)) & 3) * a[i].qs[e];
                }
        int isum = 0, imin = 0;
        for (int b = 0; b < 16; b++) {
            isum += (w[i].scales[b] & 0xF) * sub[b];
            imin += (w[i].scales[b] >> 4) * a[i].bsums[b];
        }
        sum += (double)hmoe_fp16_to_f32(w[i].d) * a[i].d * isum - (double)hmoe_fp16_to_f32(w[i].dmin) * a[i].d * imin;
    }
    return (float)sum;
}

float hmoe_ref_vec_dot_q3_k(int64_t n, const void *w_row, const void *act_row) {
    const struct hmoe_block_q3_k *w = w_row;
    const struct hmoe_block_q8_k *a = act_row;
    double sum = 0.0;
    for (int64_t i = 0; i < n / HMOE_QK_K; i++) {
        int sub[16] = {0};
        for (int h = 0; h < 2; h++)
            for (int s = 0; s < 4; s++)
                for (int l = 0; l < 32; l++) {
                    int e = 128 * h + 32 * s + l;
                    int low = (w[i].qs[32 * h + l] >> (2 * s)) & 3;
                    int high = (w[i].hmask[l] >> (4 * h + s)) & 1; /* bit e/32 of byte e%32 */
                    sub[e / 16] += (high ? low : low - 4) * a[i].qs[e];
                }
        int isum = 0;
        for (int b = 0; b < 16; b++) isum += hmoe_q3k_scale(w[i].scales, b) * sub[b];
        sum += (double)hmoe_fp16_to_f32(w[i].d) * a[i].d * isum;
    }
    return (float)sum;
}

/* Q4_K and Q5_K share everything but the 5th bit; qh == NULL for Q4_K. */
static double q45k_block(float d, float dmin, const uint8_t scales[12], const uint8_t qs[128], const uint8_t *qh,
                         const struct hmoe_block_q8_k *a) {
    int sub[8] = {0};
    /* byte qs[32p + l]: low nibble = element 64p + l, high nibble = element 64p + 32 + l */
    for (int p = 0; p < 4; p++)
        for (int l = 0; l < 32; l++) {
            int e_lo = 64 * p + l, e_hi = e_lo + 32;
            int q_lo = qs[32 * p + l] & 0xF, q_hi = qs[32 * p + l] >> 4;
            if (qh) {
                q_lo += 16 * ((qh[l] >> (2 * p)) & 1);
                q_hi += 16 * ((qh[l] >> (2 * p + 1)) & 1);
            }
            sub[2 * p] += q_lo * a->qs[e_lo];
            sub[2 * p + 1] += q_hi * a->qs[e_hi];
        }
    int isum = 0, imin = 0;
    for (int j = 0; j < 8; j++) {
        int sc, mn;
        hmoe_kq_scale_min(scales, j, &sc, &mn);
        isum += sc * sub[j];
        imin += mn * (a->bsums[2 * j] + a->bsums[2 * j + 1]);
    }
    return (double)d * a->d * isum - (double)dmin * a->d * imin;
}

float hmoe_ref_vec_dot_q4_k(int64_t n, const void *w_row, const void *act_row) {
    const struct hmoe_block_q4_k *w = w_row;
    const struct hmoe_block_q8_k *a = act_row;
    double sum = 0.0;
    for (int64_t i = 0; i < n / HMOE_QK_K; i++)
        sum += q45k_block(hmoe_fp16_to_f32(w[i].d), hmoe_fp16_to_f32(w[i].dmin), w[i].scales, w[i].qs, NULL, &a[i]);
    return (float)sum;
}

float hmoe_ref_vec_dot_q5_k(int64_t n, const void *w_row, const void *act_row) {
    const struct hmoe_block_q5_k *w = w_row;
    const struct hmoe_block_q8_k *a = act_row;
    double sum = 0.0;
    for (int64_t i = 0; i < n / HMOE_QK_K; i++)
        sum += q45k_block(hmoe_fp16_to_f32(w[i].d), hmoe_fp16_to_f32(w[i].dmin), w[i].scales, w[i].qs, w[i].qh, &a[i]);
    return (float)sum;
}

float hmoe_ref_vec_dot_q6_k(int64_t n, const void *w_row, const void *act_row) {
    const struct hmoe_block_q6_k *w = w_row;
    const struct hmoe_block_q8_k *a = act_row;
    double sum = 0.0;
    for (int64_t i = 0; i < n / HMOE_QK_K; i++) {
        int sub[16] = {0};
        for (int h = 0; h < 2; h++)
            for (int l = 0; l < 32; l++) {
                uint8_t ql0 = w[i].ql[64 * h + l], ql1 = w[i].ql[64 * h + 32 + l], qh = w[i].qh[32 * h + l];
                int base = 128 * h + l;
                int q0 = ((ql0 & 0xF) | (((qh >> 0) & 3) << 4)) - 32; /* element base      */
                int q1 = ((ql1 & 0xF) | (((qh >> 2) & 3) << 4)) - 32; /* element base + 32 */
                int q2 = ((ql0 >> 4) | (((qh >> 4) & 3) << 4)) - 32;  /* element base + 64 */
                int q3 = ((ql1 >> 4) | (((qh >> 6) & 3) << 4)) - 32;  /* element base + 96 */
                sub[base / 16] += q0 * a[i].qs[base];
                sub[(base + 32) / 16] += q1 * a[i].qs[base + 32];
                sub[(base + 64) / 16] += q2 * a[i].qs[base + 64];
                sub[(base + 96) / 16] += q3 * a[i].qs[base + 96];
            }
        int isum = 0;
        for (int b = 0; b < 16; b++) isum += w[i].scales[b] * sub[b];
        sum += (double)hmoe_fp16_to_f32(w[i].d) * a[i].d * isum;
    }
    return (float)sum;
}
