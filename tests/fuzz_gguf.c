/* fuzz_gguf.c — libFuzzer target for the GGUF loader (house style 11, gguf.md §11).
 * Parses the input with hmoe_gguf_open_memory, then walks every accessor on what it
 * returns (getters of each type on every key, every array element, every string byte,
 * every tensor's first and last byte) and traps if an accepted file breaks an invariant
 * of tests/gguf_check.h. Build and run (Makefile `fuzz` target, clang + ASan/UBSan):
 *   make fuzz && mkdir -p build/fuzz/corpus && ./build/fuzz/fuzz_gguf -max_total_time=600 \
 *       -dict=tests/data/fuzz_gguf.dict build/fuzz/corpus tests/data/gguf-good tests/data/gguf-bad
 */
#include <stdio.h>
#include <stdlib.h>

#include "gguf_check.h"

static volatile uint64_t sink; /* keeps the reads below from being optimised away */

static void walk(const struct hmoe_gguf *g) {
    struct hmoe_err err;
    for (uint64_t i = 0; i < g->n_kv; i++) {
        const struct hmoe_gguf_kv *kv = &g->kv[i];
        uint32_t u32;
        uint64_t u64;
        int64_t i64;
        float f;
        bool b;
        struct hmoe_gguf_str s;
        const struct hmoe_gguf_kv *arr;
        sink += hmoe_gguf_get_u32(g, kv->key, &u32, &err) + hmoe_gguf_get_u64(g, kv->key, &u64, &err) +
                hmoe_gguf_get_i64(g, kv->key, &i64, &err) + hmoe_gguf_get_f32(g, kv->key, &f, &err) +
                hmoe_gguf_get_bool(g, kv->key, &b, &err) + hmoe_gguf_get_str(g, kv->key, &s, &err) +
                hmoe_gguf_get_arr(g, kv->key, &arr, &err);
        sink += hmoe_gguf_get_u32_or(g, kv->key, 1) + (hmoe_gguf_get_f32_or(g, kv->key, 1.0f) > 0.5f) +
                hmoe_gguf_get_bool_or(g, kv->key, true);
        sink += strlen(hmoe_gguf_vtype_name(kv->type));
        if (kv->type == HMOE_GGUF_STRING)
            for (uint64_t k = 0; k < kv->v.str.len; k++) sink += (uint8_t)kv->v.str.ptr[k];
        if (kv->type != HMOE_GGUF_ARRAY) continue;
        for (uint64_t j = 0; j <= kv->arr_n; j++) { /* j == arr_n: out of range, must return 0 */
            sink += (uint64_t)hmoe_gguf_arr_i64(kv, j);
            double d = hmoe_gguf_arr_f64(kv, j);
            sink += d == d;
            if (kv->arr_type == HMOE_GGUF_STRING && j < kv->arr_n)
                for (uint64_t k = 0; k < kv->arr_str[j].len; k++) sink += (uint8_t)kv->arr_str[j].ptr[k];
        }
    }
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const struct hmoe_gguf_tensor *t = &g->tensors[i];
        sink += strlen(hmoe_type_name(t->type));
        if (t->n_bytes) sink += ((const uint8_t *)t->data)[0] + ((const uint8_t *)t->data)[t->n_bytes - 1];
    }
    sink += hmoe_gguf_find_kv(g, "general.architecture") != NULL;
    sink += hmoe_gguf_find_tensor(g, "token_embd.weight") != NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    struct hmoe_err err = {0};
    struct hmoe_gguf *g = NULL;
    enum hmoe_status st = hmoe_gguf_open_memory(data, size, "fuzz.gguf", &g, &err);
    if (st == HMOE_OK) {
        const char *why = gguf_check_invariants(g, data, size);
        if (why) {
            fprintf(stderr, "fuzz_gguf: accepted file violates an invariant: %s\n", why);
            __builtin_trap();
        }
        walk(g);
    } else if (g != NULL || err.msg[0] == 0 ||
               (st == HMOE_ERR_FORMAT && strncmp(err.msg, "fuzz.gguf: offset ", 18) != 0)) {
        fprintf(stderr, "fuzz_gguf: bad failure report: status %d, out %p, message '%s'\n", (int)st, (void *)g, err.msg);
        __builtin_trap();
    }
    hmoe_gguf_free(g);
    return 0;
}
