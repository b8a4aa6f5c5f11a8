/* types.c — hmoe_type_info[]: name, block geometry, activation pairing and the
 * reference kernels of every ggml type (quants.md §1, §8). The block sizes and
 * bytes per block here are the only place in hmoe that states them. */
#include "hmoe/types.h"

#include <strings.h>

#define ROW(id, nm, b, sz, q, vdt) [id] = {.name = nm, .blck = b, .type_size = sz, .is_quantized = q, .vec_dot_type = vdt}

const struct hmoe_type_info hmoe_type_info[HMOE_TYPE_COUNT] = {
    ROW(HMOE_TYPE_F32, "F32", 1, 4, false, HMOE_TYPE_F32),
    ROW(HMOE_TYPE_F16, "F16", 1, 2, false, HMOE_TYPE_F16),
    ROW(HMOE_TYPE_Q4_0, "Q4_0", 32, 18, true, HMOE_TYPE_Q8_0),
    ROW(HMOE_TYPE_Q4_1, "Q4_1", 32, 20, true, HMOE_TYPE_Q8_1),
    ROW(HMOE_TYPE_Q5_0, "Q5_0", 32, 22, true, HMOE_TYPE_Q8_0),
    ROW(HMOE_TYPE_Q5_1, "Q5_1", 32, 24, true, HMOE_TYPE_Q8_1),
    ROW(HMOE_TYPE_Q8_0, "Q8_0", 32, 34, true, HMOE_TYPE_Q8_0),
    ROW(HMOE_TYPE_Q8_1, "Q8_1", 32, 36, true, HMOE_TYPE_Q8_1),
    ROW(HMOE_TYPE_Q2_K, "Q2_K", 256, 84, true, HMOE_TYPE_Q8_K),
    ROW(HMOE_TYPE_Q3_K, "Q3_K", 256, 110, true, HMOE_TYPE_Q8_K),
    ROW(HMOE_TYPE_Q4_K, "Q4_K", 256, 144, true, HMOE_TYPE_Q8_K),
    ROW(HMOE_TYPE_Q5_K, "Q5_K", 256, 176, true, HMOE_TYPE_Q8_K),
    ROW(HMOE_TYPE_Q6_K, "Q6_K", 256, 210, true, HMOE_TYPE_Q8_K),
    ROW(HMOE_TYPE_Q8_K, "Q8_K", 256, 292, true, HMOE_TYPE_Q8_K),
    ROW(HMOE_TYPE_IQ2_XXS, "IQ2_XXS", 256, 66, true, HMOE_TYPE_Q8_K),
    ROW(HMOE_TYPE_IQ2_XS, "IQ2_XS", 256, 74, true, HMOE_TYPE_Q8_K),
    ROW(HMOE_TYPE_IQ3_XXS, "IQ3_XXS", 256, 98, true, HMOE_TYPE_Q8_K),
    ROW(HMOE_TYPE_IQ1_S, "IQ1_S", 256, 50, true, HMOE_TYPE_Q8_K),
    ROW(HMOE_TYPE_IQ4_NL, "IQ4_NL", 32, 18, true, HMOE_TYPE_Q8_0),
    ROW(HMOE_TYPE_IQ3_S, "IQ3_S", 256, 110, true, HMOE_TYPE_Q8_K),
    ROW(HMOE_TYPE_IQ2_S, "IQ2_S", 256, 82, true, HMOE_TYPE_Q8_K),
    ROW(HMOE_TYPE_IQ4_XS, "IQ4_XS", 256, 136, true, HMOE_TYPE_Q8_K),
    ROW(HMOE_TYPE_I8, "I8", 1, 1, false, HMOE_TYPE_I8),
    ROW(HMOE_TYPE_I16, "I16", 1, 2, false, HMOE_TYPE_I16),
    ROW(HMOE_TYPE_I32, "I32", 1, 4, false, HMOE_TYPE_I32),
    ROW(HMOE_TYPE_I64, "I64", 1, 8, false, HMOE_TYPE_I64),
    ROW(HMOE_TYPE_F64, "F64", 1, 8, false, HMOE_TYPE_F64),
    ROW(HMOE_TYPE_IQ1_M, "IQ1_M", 256, 56, true, HMOE_TYPE_Q8_K),
    ROW(HMOE_TYPE_BF16, "BF16", 1, 2, false, HMOE_TYPE_BF16),
    ROW(HMOE_TYPE_TQ1_0, "TQ1_0", 256, 54, true, HMOE_TYPE_Q8_K),
    ROW(HMOE_TYPE_TQ2_0, "TQ2_0", 256, 66, true, HMOE_TYPE_Q8_K),
    ROW(HMOE_TYPE_MXFP4, "MXFP4", 32, 17, true, HMOE_TYPE_Q8_0),
    ROW(HMOE_TYPE_NVFP4, "NVFP4", 64, 36, true, HMOE_TYPE_Q8_0),
    ROW(HMOE_TYPE_Q1_0, "Q1_0", 128, 18, true, HMOE_TYPE_Q8_0),
    ROW(HMOE_TYPE_Q2_0, "Q2_0", 64, 18, true, HMOE_TYPE_Q8_0),
};

const struct hmoe_type_info *hmoe_type_get(uint32_t type_id) {
    if (type_id >= HMOE_TYPE_COUNT || hmoe_type_info[type_id].blck == 0) return 0;
    return &hmoe_type_info[type_id];
}

const char *hmoe_type_name(uint32_t type_id) {
    const struct hmoe_type_info *ti = hmoe_type_get(type_id);
    return ti ? ti->name : "?";
}

bool hmoe_type_from_name(const char *name, enum hmoe_type *out) {
    for (int i = 0; i < HMOE_TYPE_COUNT; i++) {
        if (hmoe_type_info[i].name && strcasecmp(hmoe_type_info[i].name, name) == 0) {
            *out = (enum hmoe_type)i;
            return true;
        }
    }
    return false;
}
