/* types.h — the one table that describes every ggml tensor data type.
 *
 * Indexed by the GGUF/ggml type id (quants.md §1). Every other module asks this
 * table for block sizes, names and kernels; nothing else switches on a type id
 * (house style 5). A row whose `type_size` is 0 is a retired or unknown id.
 */
#ifndef HMOE_TYPES_H
#define HMOE_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum hmoe_type {
    HMOE_TYPE_F32 = 0,
    HMOE_TYPE_F16 = 1,
    HMOE_TYPE_Q4_0 = 2,
    HMOE_TYPE_Q4_1 = 3,
    HMOE_TYPE_Q5_0 = 6,
    HMOE_TYPE_Q5_1 = 7,
    HMOE_TYPE_Q8_0 = 8,
    HMOE_TYPE_Q8_1 = 9,
    HMOE_TYPE_Q2_K = 10,
    HMOE_TYPE_Q3_K = 11,
    HMOE_TYPE_Q4_K = 12,
    HMOE_TYPE_Q5_K = 13,
    HMOE_TYPE_Q6_K = 14,
    HMOE_TYPE_Q8_K = 15,
    HMOE_TYPE_IQ2_XXS = 16,
    HMOE_TYPE_IQ2_XS = 17,
    HMOE_TYPE_IQ3_XXS = 18,
    HMOE_TYPE_IQ1_S = 19,
    HMOE_TYPE_IQ4_NL = 20,
    HMOE_TYPE_IQ3_S = 21,
    HMOE_TYPE_IQ2_S = 22,
    HMOE_TYPE_IQ4_XS = 23,
    HMOE_TYPE_I8 = 24,
    HMOE_TYPE_I16 = 25,
    HMOE_TYPE_I32 = 26,
    HMOE_TYPE_I64 = 27,
    HMOE_TYPE_F64 = 28,
    HMOE_TYPE_IQ1_M = 29,
    HMOE_TYPE_BF16 = 30,
    HMOE_TYPE_TQ1_0 = 34,
    HMOE_TYPE_TQ2_0 = 35,
    HMOE_TYPE_MXFP4 = 39,
    HMOE_TYPE_NVFP4 = 40,
    HMOE_TYPE_Q1_0 = 41,
    HMOE_TYPE_Q2_0 = 42,
    HMOE_TYPE_COUNT = 43 /* GGML_TYPE_COUNT of the Aug 2026 snapshot; ids >= this are unknown */
};

/* Convert n elements of one row from the type's storage to float32. n is a
 * multiple of the block size. Exact: matches ggml's to_float bit for bit. */
typedef void (*hmoe_dequant_row_fn)(const void *src, float *dst, int64_t n);

/* Quantize n float32 values into this (activation) type, as llama.cpp's CPU
 * backend does before a dot product (quants.md §8). n is a multiple of the block size. */
typedef void (*hmoe_quant_row_fn)(const float *src, void *dst, int64_t n);

/* Dot product of one weight row (n elements, weight type) with one activation row
 * already quantized to the weight type's vec_dot_type. The references form llama.cpp's
 * integer partial sums exactly (quants.md §8.4) and do the float part in double. */
typedef float (*hmoe_vec_dot_fn)(int64_t n, const void *w_row, const void *act_row);

struct hmoe_type_info {
    const char *name;        /* ggml spelling: "Q4_K", "IQ2_XS", "F32", ... */
    int32_t blck;            /* elements per block (1 for plain scalars); 0 = retired/unknown id */
    int32_t type_size;       /* bytes per block */
    bool is_quantized;       /* a block format (not a plain scalar) */
    enum hmoe_type vec_dot_type;     /* activation format for the CPU dot product (quants.md §1) */
    hmoe_dequant_row_fn dequant_ref; /* scalar reference dequantizer; NULL = no kernels for this type */
    hmoe_quant_row_fn quantize_ref;  /* set for activation formats (F32, F16, BF16, Q8_0, Q8_1, Q8_K) */
    hmoe_vec_dot_fn vec_dot_ref;     /* scalar reference dot product with vec_dot_type activations */
    /* Simple weight quantizer (nearest code for a block scale picked from the block's
     * largest value; no error search, no importance matrix), so NOT llama-quantize's
     * output: for tests and synthetic models only. Set for Q4_0, Q4_1, Q5_0, Q5_1, Q8_0,
     * IQ4_NL, IQ4_XS, MXFP4; NULL elsewhere. */
    hmoe_quant_row_fn quantize_weight_ref;
};

/* The table itself (src/kernels/types.c). Index with hmoe_type_get() when the id
 * comes from a file: it bounds-checks. */
extern const struct hmoe_type_info hmoe_type_info[HMOE_TYPE_COUNT];

/* Row of the table for a type id read from a file, or NULL if the id is out of range
 * or retired (block size 0). */
const struct hmoe_type_info *hmoe_type_get(uint32_t type_id);

/* Name of a type id, "?" for unknown ids. */
const char *hmoe_type_name(uint32_t type_id);

/* Look a type up by its ggml name (case-insensitive). Returns false if unknown. */
bool hmoe_type_from_name(const char *name, enum hmoe_type *out);

/* Bytes of a row of n elements; n must be a multiple of the block size. */
static inline size_t hmoe_row_bytes(enum hmoe_type t, int64_t n) {
    return (size_t)(n / hmoe_type_info[t].blck) * (size_t)hmoe_type_info[t].type_size;
}

#endif
