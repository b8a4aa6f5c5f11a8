/* gguf_build.h — a byte-level GGUF writer for tests and the corpus generator.
 *
 * Appends little-endian fields exactly as gguf.md §2–§7 lays them out, with no checks:
 * it must be able to write malformed files too. gguf_build_worked_example() writes the
 * 416-byte example of gguf.md §12 byte for byte; tests compare its bytes with that table.
 * Header-only (static functions) so the tests and tools/gen_gguf_corpus.c share it.
 */
#ifndef HMOE_TEST_GGUF_BUILD_H
#define HMOE_TEST_GGUF_BUILD_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct gguf_build {
    uint8_t *d;
    size_t n, cap;
};

static inline void gb_raw(struct gguf_build *b, const void *p, size_t n) {
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n) cap *= 2;
        uint8_t *d = realloc(b->d, cap);
        if (!d) { fprintf(stderr, "gguf_build: out of memory\n"); exit(1); }
        b->d = d;
        b->cap = cap;
    }
    if (n) memcpy(b->d + b->n, p, n);
    b->n += n;
}
static inline void gb_uint(struct gguf_build *b, uint64_t v, int bytes) {
    uint8_t t[8];
    for (int i = 0; i < bytes; i++) t[i] = (uint8_t)(v >> (8 * i));
    gb_raw(b, t, (size_t)bytes);
}
static inline void gb_u8(struct gguf_build *b, uint8_t v) { gb_uint(b, v, 1); }
static inline void gb_u16(struct gguf_build *b, uint16_t v) { gb_uint(b, v, 2); }
static inline void gb_u32(struct gguf_build *b, uint32_t v) { gb_uint(b, v, 4); }
static inline void gb_u64(struct gguf_build *b, uint64_t v) { gb_uint(b, v, 8); }
static inline void gb_f32(struct gguf_build *b, float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    gb_u32(b, u);
}
static inline void gb_f64(struct gguf_build *b, double f) {
    uint64_t u;
    memcpy(&u, &f, 8);
    gb_u64(b, u);
}
/* GGUF string: u64 length + bytes (no NUL). */
static inline void gb_strn(struct gguf_build *b, const char *s, size_t n) {
    gb_u64(b, n);
    gb_raw(b, s, n);
}
static inline void gb_str(struct gguf_build *b, const char *s) { gb_strn(b, s, strlen(s)); }
static inline void gb_zeros(struct gguf_build *b, size_t n) {
    for (size_t i = 0; i < n; i++) gb_u8(b, 0);
}
/* Zero bytes up to the next multiple of `align` (absolute offset). */
static inline void gb_pad(struct gguf_build *b, size_t align) {
    while (b->n % align) gb_u8(b, 0);
}
/* Patch an already written field (little-endian). */
static inline void gb_patch(struct gguf_build *b, size_t off, uint64_t v, int bytes) {
    for (int i = 0; i < bytes && off + (size_t)i < b->n; i++) b->d[off + (size_t)i] = (uint8_t)(v >> (8 * i));
}

static inline void gb_header(struct gguf_build *b, uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    gb_raw(b, "GGUF", 4);
    gb_u32(b, version);
    gb_u64(b, n_tensors);
    gb_u64(b, n_kv);
}
/* Metadata records (value type ids of gguf.md §5). */
static inline void gb_kv_str(struct gguf_build *b, const char *key, const char *val) {
    gb_str(b, key);
    gb_u32(b, 8);
    gb_str(b, val);
}
static inline void gb_kv_u32(struct gguf_build *b, const char *key, uint32_t v) {
    gb_str(b, key);
    gb_u32(b, 4);
    gb_u32(b, v);
}
/* Tensor-info record (gguf.md §6); ne has n_dims entries. */
static inline void gb_tensor_info(struct gguf_build *b, const char *name, uint32_t n_dims, const uint64_t *ne, uint32_t type,
                           uint64_t offset) {
    gb_str(b, name);
    gb_u32(b, n_dims);
    for (uint32_t j = 0; j < n_dims; j++) gb_u64(b, ne[j]);
    gb_u32(b, type);
    gb_u64(b, offset);
}

/* gguf.md §12: three metadata pairs and two tensors, 416 bytes, data_start 288. */
static inline void gguf_build_worked_example(struct gguf_build *b) {
    gb_header(b, 3, 2, 3);
    gb_kv_str(b, "general.architecture", "llama");
    gb_kv_u32(b, "general.alignment", 32);
    gb_str(b, "tokenizer.ggml.scores");
    gb_u32(b, 9); /* ARRAY */
    gb_u32(b, 6); /* of FLOAT32 */
    gb_u64(b, 2);
    gb_f32(b, 0.0f);
    gb_f32(b, -1.5f);
    gb_tensor_info(b, "a.weight", 2, (const uint64_t[]){3, 2}, 0, 0);
    gb_tensor_info(b, "b.exps", 3, (const uint64_t[]){32, 1, 2}, 8, 32);
    gb_pad(b, 32);
    for (int i = 1; i <= 6; i++) gb_f32(b, (float)i);
    gb_pad(b, 32);
    for (int e = 0; e < 2; e++) {
        gb_u16(b, e == 0 ? 0x3800 : 0x3c00); /* fp16 d = 0.5, 1.0 */
        for (int q = -16; q < 16; q++) gb_u8(b, (uint8_t)(int8_t)q);
    }
    gb_pad(b, 32);
}

#endif
