/* attn_kv_store.c — hmoe_cpu_attn_kv_store (cpu.h): one K or V row of floats into the KV
 * cache's type. F32 is a copy; the activation formats (F16, BF16, Q8_0) go through the
 * activation quantizer, whose output is the type itself; the 4- and 5-bit cache types
 * (Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL) have no activation quantizer (nothing multiplies into
 * them) and use the type table's weight quantizer: a block scale from the block's extreme
 * (symmetric types) or its range (Q4_1, Q5_1), then the nearest code, as llama.cpp's
 * reference row quantizers do for a cache it fills.
 */
#include <string.h>

#include "cpu_impl.h"

bool hmoe_cpu_attn_kv_type_ok(enum hmoe_type t) {
    if ((unsigned)t >= HMOE_TYPE_COUNT) return false;
    const struct hmoe_type_info *ti = &hmoe_type_info[t];
    if (t == HMOE_TYPE_F32) return ti->vec_dot_ref != NULL;
    return hmoe_cpu_supports(t) && ti->dequant_ref && (ti->quantize_ref || ti->quantize_weight_ref);
}

void hmoe_cpu_attn_kv_store(enum hmoe_type t, const float *src, void *dst, int64_t n) {
    const struct hmoe_type_info *ti = &hmoe_type_info[t];
    if (t == HMOE_TYPE_F32) memcpy(dst, src, (size_t)n * sizeof(float));
    else if (ti->quantize_ref && ti->vec_dot_type == t) hmoe_cpu_quantize_act(t, src, dst, n);
    else ti->quantize_weight_ref(src, dst, n);
}
