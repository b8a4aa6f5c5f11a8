/* types.c — hmoe_type_info[]: name, block geometry, activation pairing and the
 * reference kernels of every ggml type (quants.md §1, §8). The block sizes and
 * bytes per block here are the only place in hmoe that states them; the kernels are
 * the scalar references of src/kernels/{dequant,quant,vecdot}_*.c. */
#include "hmoe/types.h"

#include <strings.h>

#include "kernels/quant_ref_impl.h"

/* ROW(id, name, elements per block, bytes per block, is_quantized, VDT(activation type), kernels...) */
#define ROW(id, nm, b, sz, q, ...) [id] = {.name = nm, .blck = b, .type_size = sz, .is_quantized = q, __VA_ARGS__}
#define VDT(t) .vec_dot_type = HMOE_TYPE_##t
#define DEQ(t) .dequant_ref = hmoe_ref_dequant_##t
#define ACT(t) .quantize_ref = hmoe_ref_quantize_##t
#define DOT(t) .vec_dot_ref = hmoe_ref_vec_dot_##t
#define WQ(t) .quantize_weight_ref = hmoe_ref_quantize_weight_##t

const struct hmoe_type_info hmoe_type_info[HMOE_TYPE_COUNT] = {
    ROW(HMOE_TYPE_F32, "F32", 1, 4, false, VDT(F32), DEQ(f32), ACT(f32), DOT(f32)),
    ROW(HMOE_TYPE_F16, "F16", 1, 2, false, VDT(F16), DEQ(f16), ACT(f16), DOT(f16)),
    ROW(HMOE_TYPE_Q4_0, "Q4_0", 32, 18, true, VDT(Q8_0), DEQ(q4_0), DOT(q4_0), WQ(q4_0)),
    ROW(HMOE_TYPE_Q4_1, "Q4_1", 32, 20, true, VDT(Q8_1), DEQ(q4_1), DOT(q4_1), WQ(q4_1)),
    ROW(HMOE_TYPE_Q5_0, "Q5_0", 32, 22, true, VDT(Q8_0), DEQ(q5_0), DOT(q5_0), WQ(q5_0)),
    ROW(HMOE_TYPE_Q5_1, "Q5_1", 32, 24, true, VDT(Q8_1), DEQ(q5_1), DOT(q5_1), WQ(q5_1)),
    ROW(HMOE_TYPE_Q8_0, "Q8_0", 32, 34, true, VDT(Q8_0), DEQ(q8_0), ACT(q8_0), DOT(q8_0), WQ(q8_0)),
    ROW(HMOE_TYPE_Q8_1, "Q8_1", 32, 36, true, VDT(Q8_1), DEQ(q8_1), ACT(q8_1)),
    ROW(HMOE_TYPE_Q2_K, "Q2_K", 256, 84, true, VDT(Q8_K), DEQ(q2_k), DOT(q2_k)),
    ROW(HMOE_TYPE_Q3_K, "Q3_K", 256, 110, true, VDT(Q8_K), DEQ(q3_k), DOT(q3_k)),
    ROW(HMOE_TYPE_Q4_K, "Q4_K", 256, 144, true, VDT(Q8_K), DEQ(q4_k), DOT(q4_k)),
    ROW(HMOE_TYPE_Q5_K, "Q5_K", 256, 176, true, VDT(Q8_K), DEQ(q5_k), DOT(q5_k)),
    ROW(HMOE_TYPE_Q6_K, "Q6_K", 256, 210, true, VDT(Q8_K), DEQ(q6_k), DOT(q6_k)),
    ROW(HMOE_TYPE_Q8_K, "Q8_K", 256, 292, true, VDT(Q8_K), DEQ(q8_k), ACT(q8_k)),
    ROW(HMOE_TYPE_IQ2_XXS, "IQ2_XXS", 256, 66, true, VDT(Q8_K), DEQ(iq2_xxs), DOT(iq2_xxs)),
    ROW(HMOE_TYPE_IQ2_XS, "IQ2_XS", 256, 74, true, VDT(Q8_K), DEQ(iq2_xs), DOT(iq2_xs)),
    ROW(HMOE_TYPE_IQ3_XXS, "IQ3_XXS", 256, 98, true, VDT(Q8_K), DEQ(iq3_xxs), DOT(iq3_xxs)),
    ROW(HMOE_TYPE_IQ1_S, "IQ1_S", 256, 50, true, VDT(Q8_K), DEQ(iq1_s), DOT(iq1_s)),
    ROW(HMOE_TYPE_IQ4_NL, "IQ4_NL", 32, 18, true, VDT(Q8_0), DEQ(iq4_nl), DOT(iq4_nl), WQ(iq4_nl)),
    ROW(HMOE_TYPE_IQ3_S, "IQ3_S", 256, 110, true, VDT(Q8_K), DEQ(iq3_s), DOT(iq3_s)),
    ROW(HMOE_TYPE_IQ2_S, "IQ2_S", 256, 82, true, VDT(Q8_K), DEQ(iq2_s), DOT(iq2_s)),
    ROW(HMOE_TYPE_IQ4_XS, "IQ4_XS", 256, 136, true, VDT(Q8_K), DEQ(iq4_xs), DOT(iq4_xs), WQ(iq4_xs)),
    ROW(HMOE_TYPE_I8, "I8", 1, 1, false, VDT(I8)),
    ROW(HMOE_TYPE_I16, "I16", 1, 2, false, VDT(I16)),
    ROW(HMOE_TYPE_I32, "I32", 1, 4, false, VDT(I32)),
    ROW(HMOE_TYPE_I64, "I64", 1, 8, false, VDT(I64)),
    ROW(HMOE_TYPE_F64, "F64", 1, 8, false, VDT(F64)),
    ROW(HMOE_TYPE_IQ1_M, "IQ1_M", 256, 56, true, VDT(Q8_K), DEQ(iq1_m), DOT(iq1_m)),
    ROW(HMOE_TYPE_BF16, "BF16", 1, 2, false, VDT(BF16), DEQ(bf16), ACT(bf16), DOT(bf16)),
    /* TQ1_0 / TQ2_0: sizes only; quants.md §7 does not specify their element order. */
    ROW(HMOE_TYPE_TQ1_0, "TQ1_0", 256, 54, true, VDT(Q8_K)),
    ROW(HMOE_TYPE_TQ2_0, "TQ2_0", 256, 66, true, VDT(Q8_K)),
    ROW(HMOE_TYPE_MXFP4, "MXFP4", 32, 17, true, VDT(Q8_0), DEQ(mxfp4), DOT(mxfp4), WQ(mxfp4)),
    ROW(HMOE_TYPE_NVFP4, "NVFP4", 64, 36, true, VDT(Q8_0), DEQ(nvfp4), DOT(nvfp4)),
    ROW(HMOE_TYPE_Q1_0, "Q1_0", 128, 18, true, VDT(Q8_0), DEQ(q1_0), DOT(q1_0)),
    ROW(HMOE_TYPE_Q2_0, "Q2_0", 64, 18, true, VDT(Q8_0), DEQ(q2_0), DOT(q2_0)),
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
