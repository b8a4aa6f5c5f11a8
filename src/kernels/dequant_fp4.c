/* dequant_fp4.c — reference dequantizers of the microscaling FP4 formats MXFP4
 * (quants.md §6.1: E8M0 scale, decoded halved) and NVFP4 (§6.2: four halved UE4M3
 * scales per 64 elements). Codes index the doubled E2M1 table kvalues_mxfp4. An E8M0
 * scale of 0 or 1 is a binary32 subnormal; this code needs no FTZ/DAZ (§0.1). */
#include "kernels/iq_tables.h"
#include "kernels/quant_ref_impl.h"

void hmoe_ref_dequant_mxfp4(const void *src, float *dst, int64_t n) {
    const struct hmoe_block_mxfp4 *b = src;
    for (int64_t i = 0; i < n / HMOE_QK_LEGACY; i++, b++, dst += HMOE_QK_LEGACY) {
        float scale = hmoe_e8m0_to_f32_half(b->e);
        for (int j = 0; j < 16; j++) {
            dst[j] = (float)hmoe_kvalues_mxfp4[b->qs[j] & 0xF] * scale;
            dst[j + 16] = (float)hmoe_kvalues_mxfp4[b->qs[j] >> 4] * scale;
        }
    }
}

void hmoe_ref_dequant_nvfp4(const void *src, float *dst, int64_t n) {
    const struct hmoe_block_nvfp4 *b = src;
    for (int64_t i = 0; i < n / HMOE_QK_NVFP4; i++, b++, dst += HMOE_QK_NVFP4) {
        for (int s = 0; s < 4; s++) {
            float scale = hmoe_ue4m3_to_f32_half(b->d[s]);
            for (int j = 0; j < 8; j++) {
                dst[16 * s + j] = (float)hmoe_kvalues_mxfp4[b->qs[8 * s + j] & 0xF] * scale;
                dst[16 * s + 8 + j] = (float)hmoe_kvalues_mxfp4[b->qs[8 * s + j] >> 4] * scale;
            }
        }
    }
}
