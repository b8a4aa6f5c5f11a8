/* gen_gguf_corpus.c — writes the GGUF test corpus: tests/data/gguf-bad/<case>.gguf with a
 * one-line <case>.expect sidecar (a substring the loader's error must contain: the byte
 * offset and the field, as gguf.md §11 asks), and valid files under tests/data/gguf-good/.
 * Each bad case breaks one rule of gguf.md §11 in the §12 worked example (or a small
 * variant built here); offsets in the expectations are the §12 table's. The outputs are
 * committed, so `make test` does not need this program. Regenerate with:
 *   cc -std=c11 -O1 -Wall -Wextra -Itests -o build/gen_gguf_corpus tools/gen_gguf_corpus.c
 *   ./build/gen_gguf_corpus tests/data
 */
#include <errno.h>
#include <stdarg.h>
#include <sys/stat.h>

#include "gguf_build.h"

static const char *out_dir;
static int n_written;

static void write_file(const char *sub, const char *name, const char *ext, const void *d, size_t n) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s/%s%s", out_dir, sub, name, ext);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(d, 1, n, f) != n || fclose(f) != 0) {
        fprintf(stderr, "gen_gguf_corpus: cannot write %s: %s\n", path, strerror(errno));
        exit(1);
    }
    n_written++;
}

/* A malformed file and the substring its error message must contain. */
static void bad(const char *name, const struct gguf_build *b, size_t len, const char *expect_fmt, ...) {
    char expect[512];
    va_list ap;
    va_start(ap, expect_fmt);
    vsnprintf(expect, sizeof expect, expect_fmt, ap);
    va_end(ap);
    size_t el = strlen(expect);
    expect[el++] = '\n';
    write_file("gguf-bad", name, ".gguf", b->d, len);
    write_file("gguf-bad", name, ".expect", expect, el);
}

static void good(const char *name, const struct gguf_build *b) { write_file("gguf-good", name, ".gguf", b->d, b->n); }

static struct gguf_build example(void) {
    struct gguf_build b = {0};
    gguf_build_worked_example(&b);
    return b;
}

/* Worked example with one little-endian field overwritten. */
static void bad_patch(const char *name, size_t off, uint64_t v, int bytes, const char *expect_fmt, ...) {
    struct gguf_build b = example();
    gb_patch(&b, off, v, bytes);
    char expect[512];
    va_list ap;
    va_start(ap, expect_fmt);
    vsnprintf(expect, sizeof expect, expect_fmt, ap);
    va_end(ap);
    bad(name, &b, b.n, "%s", expect);
    free(b.d);
}

/* Field offsets of the §12 worked example. */
enum {
    WE_VERSION = 4, WE_NTENSORS = 8, WE_NKV = 16, WE_KEY0_LEN = 24, WE_KEY0 = 32, WE_KEY0_TYPE = 52,
    WE_STR0_LEN = 56, WE_ALIGN_TYPE = 94, WE_ALIGN_VAL = 98, WE_SCORES_TYPE = 131, WE_ARR_ETYPE = 135,
    WE_ARR_COUNT = 139, WE_A_NAME_LEN = 155, WE_A_NAME = 163, WE_A_NDIMS = 171, WE_A_NE0 = 175, WE_A_NE1 = 183,
    WE_A_TYPE = 191, WE_A_OFFSET = 195, WE_B_NAME_LEN = 203, WE_B_NDIMS = 217, WE_B_NE0 = 221, WE_B_TYPE = 245,
    WE_B_OFFSET = 249, WE_END_INFOS = 257, WE_DATA_START = 288, WE_B_DATA = 320, WE_B_END = 388, WE_SIZE = 416
};

static void truncations(void) {
    struct gguf_build b = example();
    struct { size_t at; const char *expect; } cut[] = {
        {0, "offset 0: magic: the file has only 0 bytes"},
        {3, "offset 0: magic: the file has only 3 bytes"},
        {4, "offset 4: version: needs 4 bytes"},
        {8, "offset 8: tensor_count: needs 8 bytes"},
        {16, "offset 16: kv_count: needs 8 bytes"},
        /* §11 #3: with 3 records of >= 14 bytes and 2 of >= 25 announced, a short file
         * fails the early count check before any record is read. */
        {24, "offset 16: kv_count: 3 metadata records need at least 14 bytes each"},
        {65, "offset 16: kv_count: 3 metadata records"},
        {66, "offset 8: tensor_count: 2 tensor-info records"},
        {115, "offset 8: tensor_count: 2 tensor-info records"},
        {116, "offset 102: metadata record 2: key length 21 runs past the end of the file (6 bytes left"},
        {131, "offset 131: key 'tokenizer.ggml.scores': value type: needs 4 bytes"},
        {135, "offset 135: key 'tokenizer.ggml.scores': array element type: needs 4 bytes"},
        {139, "offset 139: key 'tokenizer.ggml.scores': array count: needs 8 bytes"},
        {147, "offset 139: key 'tokenizer.ggml.scores': array of 2 f32 needs at least 8 bytes but only 0 remain"},
        {151, "offset 139: key 'tokenizer.ggml.scores': array of 2 f32 needs at least 8 bytes but only 4 remain"},
        {155, "offset 155: tensor-info record 0 of 2: name length: needs 8 bytes"},
        {163, "offset 163: tensor-info record 0: name: needs 8 bytes"},
        {171, "offset 171: tensor 'a.weight': n_dims: needs 4 bytes"},
        {175, "offset 175: tensor 'a.weight': ne[0]: needs 8 bytes"},
        {183, "offset 183: tensor 'a.weight': ne[1]: needs 8 bytes"},
        {191, "offset 191: tensor 'a.weight': type: needs 4 bytes"},
        {195, "offset 195: tensor 'a.weight': offset: needs 8 bytes"},
        {203, "offset 203: tensor-info record 1 of 2: name length: needs 8 bytes"},
        {217, "offset 217: tensor 'b.exps': n_dims: needs 4 bytes"},
        {245, "offset 245: tensor 'b.exps': type: needs 4 bytes"},
        {249, "offset 249: tensor 'b.exps': offset: needs 8 bytes"},
        {257, "offset 257: data section: starts at byte 288"},
        {287, "offset 257: data section: starts at byte 288"},
        {288, "offset 155: tensor 'a.weight': data ends at byte 312"},
        {311, "offset 155: tensor 'a.weight': data ends at byte 312"},
        {312, "offset 203: tensor 'b.exps': data ends at byte 388"},
        {320, "offset 203: tensor 'b.exps': data ends at byte 388"},
        {354, "offset 203: tensor 'b.exps': data ends at byte 388"},
        {387, "offset 203: tensor 'b.exps': data ends at byte 388 but the file has only 387 bytes"},
    };
    for (size_t i = 0; i < sizeof cut / sizeof cut[0]; i++) {
        char name[64];
        snprintf(name, sizeof name, "trunc-%03zu", cut[i].at);
        bad(name, &b, cut[i].at, "%s", cut[i].expect);
    }
    free(b.d);
}

static void header_and_metadata(void) {
    struct gguf_build b = example();
    b.d[3] = 'G';
    bad("bad-magic", &b, b.n, "offset 0: magic: first bytes are 'GGUG'");
    free(b.d);
    bad_patch("version-0", WE_VERSION, 0, 4, "offset 4: version: 0 is not a GGUF version");
    bad_patch("version-1", WE_VERSION, 1, 4, "offset 4: version: 1 is GGUF v1, which hmoe cannot read");
    bad_patch("version-4", WE_VERSION, 4, 4, "offset 4: version: 4 is newer than the GGUF v3");
    bad_patch("version-byteswapped", WE_VERSION, 0x03000000, 4, "offset 4: version: 0x03000000 looks byte-swapped");
    bad_patch("tensor-count-negative", WE_NTENSORS, (uint64_t)1 << 63, 8, "offset 8: tensor_count: 0x8000000000000000 is negative");
    bad_patch("kv-count-negative", WE_NKV, ~(uint64_t)0, 8, "offset 16: kv_count: 0xffffffffffffffff is negative");
    bad_patch("kv-count-absurd", WE_NKV, 1000000000000ull, 8, "offset 16: kv_count: 1000000000000 metadata records");
    bad_patch("tensor-count-absurd", WE_NTENSORS, 1000000000000ull, 8, "offset 8: tensor_count: 1000000000000 tensor-info records");
    bad_patch("tensor-count-mul-overflow", WE_NTENSORS, (uint64_t)1 << 62, 8, "offset 8: tensor_count: 4611686018427387904 tensor-info");
    bad_patch("kv-count-too-many", WE_NKV, 30, 8, "offset 16: kv_count: 30 metadata records need at least 14 bytes each, but only 392 bytes");
    bad_patch("key-empty", WE_KEY0_LEN, 0, 8, "offset 24: metadata record 0: key is empty");
    bad_patch("key-len-2p40", WE_KEY0_LEN, (uint64_t)1 << 40, 8, "offset 24: metadata record 0: key length 1099511627776 exceeds the 1 GiB");
    bad_patch("key-len-past-eof", WE_KEY0_LEN, 5000, 8, "offset 24: metadata record 0: key length 5000 runs past the end of the file");
    bad_patch("key-nul-byte", WE_KEY0 + 7, 0, 1, "offset 39: metadata record 0: key contains a NUL byte");
    bad_patch("value-type-13", WE_KEY0_TYPE, 13, 4, "offset 52: key 'general.architecture': value type 13 is not a GGUF value type");
    bad_patch("value-type-huge", WE_KEY0_TYPE, 0xFFFFFFFFu, 4, "offset 52: key 'general.architecture': value type 4294967295 is not");
    bad_patch("string-len-past-eof", WE_STR0_LEN, 100000, 8, "offset 56: key 'general.architecture': string length 100000 runs past the end");
    bad_patch("string-len-2p31", WE_STR0_LEN, (uint64_t)1 << 31, 8, "offset 56: key 'general.architecture': string length 2147483648 exceeds the 1 GiB");
    bad_patch("string-len-max", WE_STR0_LEN, ~(uint64_t)0, 8, "offset 56: key 'general.architecture': string length 18446744073709551615 exceeds");
    bad_patch("array-nested", WE_ARR_ETYPE, 9, 4, "offset 135: key 'tokenizer.ggml.scores': array of arrays is not supported");
    bad_patch("array-elem-type-13", WE_ARR_ETYPE, 13, 4, "offset 135: key 'tokenizer.ggml.scores': array element type 13 is not");
    bad_patch("array-count-2p30-plus-1", WE_ARR_COUNT, ((uint64_t)1 << 30) + 1, 8, "offset 139: key 'tokenizer.ggml.scores': array count 1073741825 exceeds the 2^30");
    bad_patch("array-count-mul-overflow", WE_ARR_COUNT, (uint64_t)1 << 62, 8, "offset 139: key 'tokenizer.ggml.scores': array count 4611686018427387904 exceeds");
    bad_patch("array-count-past-eof", WE_ARR_COUNT, 1000, 8, "offset 139: key 'tokenizer.ggml.scores': array of 1000 f32 needs at least 4000 bytes");
    bad_patch("alignment-zero", WE_ALIGN_VAL, 0, 4, "offset 69: key 'general.alignment': 0 is not a non-zero power of two");
    bad_patch("alignment-48", WE_ALIGN_VAL, 48, 4, "offset 69: key 'general.alignment': 48 is not a non-zero power of two");
    bad_patch("alignment-i32", WE_ALIGN_TYPE, 5, 4, "offset 69: key 'general.alignment': stored as i32, but GGUF requires u32");
    bad_patch("alignment-f32", WE_ALIGN_TYPE, 6, 4, "offset 69: key 'general.alignment': stored as f32");
    /* A 64-byte alignment makes b.exps' offset 32 misaligned. */
    bad_patch("alignment-64-misaligned", WE_ALIGN_VAL, 64, 4, "offset 249: tensor 'b.exps': data offset 32 is not a multiple of the alignment 64");

    /* general.alignment as UINT64 (8 value bytes: a different layout, so built afresh). */
    b = (struct gguf_build){0};
    gb_header(&b, 3, 0, 2);
    gb_kv_str(&b, "general.architecture", "llama");
    gb_str(&b, "general.alignment");
    gb_u32(&b, 10);
    gb_u64(&b, 32);
    bad("alignment-u64", &b, b.n, "offset 69: key 'general.alignment': stored as u64, but GGUF requires u32");
    free(b.d);

    /* Duplicate key: the second record is the one reported. */
    b = (struct gguf_build){0};
    gb_header(&b, 3, 0, 3);
    gb_kv_str(&b, "general.architecture", "llama");
    gb_kv_u32(&b, "general.alignment", 32);
    size_t dup_off = b.n;
    gb_kv_str(&b, "general.architecture", "qwen3moe");
    bad("key-duplicate", &b, b.n, "offset %zu: key 'general.architecture': duplicate key (first defined at offset 24)", dup_off);
    free(b.d);

    /* An empty key that is not the first record. */
    b = (struct gguf_build){0};
    gb_header(&b, 3, 0, 2);
    gb_kv_str(&b, "general.architecture", "llama");
    size_t empty_off = b.n;
    gb_kv_str(&b, "", "x");
    bad("key-empty-second", &b, b.n, "offset %zu: metadata record 1: key is empty", empty_off);
    free(b.d);

    /* String arrays: the count needs 8 bytes per element before anything is allocated,
     * and each element's length is checked against the bytes left. */
    b = (struct gguf_build){0};
    gb_header(&b, 3, 0, 1);
    gb_str(&b, "tokenizer.ggml.tokens");
    gb_u32(&b, 9);
    gb_u32(&b, 8);
    size_t cnt_off = b.n;
    gb_u64(&b, 1000);
    gb_str(&b, "a");
    gb_str(&b, "b");
    bad("string-array-count-past-eof", &b, b.n, "offset %zu: key 'tokenizer.ggml.tokens': array of 1000 string needs at least 8000 bytes", cnt_off);
    gb_patch(&b, cnt_off, 2, 8);
    size_t el1 = cnt_off + 8 + 9;
    gb_patch(&b, el1, 1u << 20, 8);
    bad("string-array-elem-past-eof", &b, b.n, "offset %zu: key 'tokenizer.ggml.tokens': array element 1 length 1048576 runs past the end", el1);
    gb_patch(&b, el1, (uint64_t)1 << 40, 8);
    bad("string-array-elem-2p40", &b, b.n, "offset %zu: key 'tokenizer.ggml.tokens': array element 1 length 1099511627776 exceeds the 1 GiB", el1);
    free(b.d);

    /* A truncated scalar value (u64 needs 8 bytes, 3 present). */
    b = (struct gguf_build){0};
    gb_header(&b, 3, 0, 1);
    gb_str(&b, "general.some_count");
    gb_u32(&b, 10);
    size_t v_off = b.n;
    gb_u64(&b, 7);
    bad("scalar-truncated", &b, b.n - 5, "offset %zu: key 'general.some_count': u64 value: needs 8 bytes", v_off);
    free(b.d);
}

static void tensor_infos(void) {
    bad_patch("tensor-name-empty", WE_A_NAME_LEN, 0, 8, "offset 155: tensor-info record 0: tensor name is empty");
    bad_patch("tensor-name-64", WE_A_NAME_LEN, 64, 8, "offset 155: tensor-info record 0: tensor name length 64 is too long");
    bad_patch("tensor-name-2p40", WE_A_NAME_LEN, (uint64_t)1 << 40, 8, "offset 155: tensor-info record 0: tensor name length 1099511627776 is too long");
    bad_patch("tensor-name-nul", WE_A_NAME + 1, 0, 1, "offset 155: tensor-info record 0: tensor name contains a NUL byte");
    bad_patch("n-dims-5", WE_A_NDIMS, 5, 4, "offset 171: tensor 'a.weight': n_dims = 5 exceeds the maximum of 4");
    bad_patch("n-dims-huge", WE_A_NDIMS, 0xFFFFFFFFu, 4, "offset 171: tensor 'a.weight': n_dims = 4294967295 exceeds");
    bad_patch("ne-negative", WE_A_NE1, ((uint64_t)1 << 63) | 2, 8, "offset 183: tensor 'a.weight': ne[1] = 0x8000000000000002 is negative");
    /* ne0 * ne1 = 2^64: not representable in int64. */
    struct gguf_build b = example();
    gb_patch(&b, WE_A_NE0, (uint64_t)1 << 32, 8);
    gb_patch(&b, WE_A_NE1, (uint64_t)1 << 32, 8);
    bad("ne-product-overflow", &b, b.n, "offset 155: tensor 'a.weight': element count overflows int64");
    /* 2^61 x 2 F32 elements: the count fits int64, the 2^64 bytes do not. */
    gb_patch(&b, WE_A_NE0, (uint64_t)1 << 61, 8);
    gb_patch(&b, WE_A_NE1, 2, 8);
    bad("byte-size-overflow", &b, b.n, "offset 155: tensor 'a.weight': byte size overflows");
    free(b.d);
    bad_patch("type-retired-4", WE_A_TYPE, 4, 4, "offset 191: tensor 'a.weight': type id 4 is a retired ggml type");
    bad_patch("type-retired-33", WE_A_TYPE, 33, 4, "offset 191: tensor 'a.weight': type id 33 is a retired ggml type");
    bad_patch("type-unknown-43", WE_A_TYPE, 43, 4, "offset 191: tensor 'a.weight': type id 43 is not a known ggml type");
    bad_patch("type-unknown-huge", WE_A_TYPE, 0xFFFFFFFFu, 4, "offset 191: tensor 'a.weight': type id 4294967295 is not a known");
    bad_patch("ne0-not-block-multiple", WE_B_NE0, 48, 8, "offset 203: tensor 'b.exps': ne[0] = 48 is not a multiple of the Q8_0 block size 32");
    bad_patch("offset-misaligned", WE_B_OFFSET, 33, 8, "offset 249: tensor 'b.exps': data offset 33 is not a multiple of the alignment 32");
    bad_patch("offset-overflow", WE_B_OFFSET, 0xFFFFFFFFFFFFFFE0ull, 8, "offset 203: tensor 'b.exps': data offset 18446744073709551584 + size 68 overflows");
    bad_patch("tensor-past-eof", WE_B_OFFSET, 64, 8, "offset 203: tensor 'b.exps': data ends at byte 420 but the file has only 416 bytes");
    bad_patch("tensor-overlap", WE_B_OFFSET, 0, 8, "offset 203: tensor 'b.exps': data [0, 68) overlaps tensor 'a.weight' [0, 24)");
    b = example();
    gb_patch(&b, WE_A_OFFSET, 32, 8);
    gb_patch(&b, WE_B_OFFSET, 0, 8);
    bad("tensor-overlap-inside", &b, b.n, "offset 155: tensor 'a.weight': data [32, 56) overlaps tensor 'b.exps' [0, 68)");
    free(b.d);

    /* Duplicate tensor names. */
    b = (struct gguf_build){0};
    gb_header(&b, 3, 2, 0);
    gb_tensor_info(&b, "x.weight", 1, (const uint64_t[]){8}, 0, 0);
    size_t second = b.n;
    gb_tensor_info(&b, "x.weight", 1, (const uint64_t[]){8}, 0, 32);
    gb_pad(&b, 32);
    gb_zeros(&b, 64);
    bad("tensor-name-duplicate", &b, b.n, "offset %zu: tensor 'x.weight': duplicate tensor name (first defined at offset 24)", second);
    free(b.d);

    /* n_dims 5 with all five ne values present (the parser must stop at n_dims). */
    b = (struct gguf_build){0};
    gb_header(&b, 3, 1, 0);
    gb_tensor_info(&b, "five.d", 5, (const uint64_t[]){1, 1, 1, 1, 1}, 0, 0);
    gb_pad(&b, 32);
    gb_zeros(&b, 32);
    bad("n-dims-5-full", &b, b.n, "offset 38: tensor 'five.d': n_dims = 5 exceeds");
    free(b.d);

    /* 63 bytes is the longest legal name; 64 is rejected (llama.cpp's GGML_MAX_NAME). */
    char n64[65];
    memset(n64, 'n', 64);
    n64[64] = 0;
    b = (struct gguf_build){0};
    gb_header(&b, 3, 1, 0);
    gb_tensor_info(&b, n64, 1, (const uint64_t[]){8}, 0, 0);
    gb_pad(&b, 32);
    gb_zeros(&b, 32);
    bad("tensor-name-64-full", &b, b.n, "offset 24: tensor-info record 0: tensor name length 64 is too long");
    free(b.d);
}

/* Valid files: seeds for the fuzzer and positive cases for the tests. */
static void good_files(void) {
    struct gguf_build b = example();
    good("worked-example", &b);
    gb_patch(&b, WE_VERSION, 2, 4);
    good("worked-example-v2", &b);
    gb_patch(&b, WE_VERSION, 3, 4);
    /* Aligned but not packed, second tensor first: llama.cpp rejects this (gguf.md §7),
     * hmoe accepts it because nothing overlaps and everything is inside the file. */
    gb_patch(&b, WE_A_OFFSET, 96, 8);
    gb_patch(&b, WE_B_OFFSET, 0, 8);
    good("unpacked-order", &b);
    free(b.d);
    /* Alignment 1: data_start = 257, no padding anywhere. */
    b = example();
    gb_patch(&b, WE_ALIGN_VAL, 1, 4);
    good("alignment-1", &b);
    /* No trailing padding after the last tensor (gguf.md §7: not required). */
    b.n = WE_B_END;
    gb_patch(&b, WE_ALIGN_VAL, 32, 4);
    good("no-trailing-padding", &b);
    free(b.d);

    /* Every value type, arrays of each, odd but legal tensors, alignment 64. */
    b = (struct gguf_build){0};
    gb_header(&b, 3, 7, 21);
    gb_kv_str(&b, "general.architecture", "testarch");
    gb_kv_str(&b, "general.name", "");
    gb_kv_u32(&b, "general.alignment", 64);
    gb_str(&b, "testarch.u8"); gb_u32(&b, 0); gb_u8(&b, 200);
    gb_str(&b, "testarch.i8"); gb_u32(&b, 1); gb_u8(&b, (uint8_t)-5);
    gb_str(&b, "testarch.u16"); gb_u32(&b, 2); gb_u16(&b, 60000);
    gb_str(&b, "testarch.i16"); gb_u32(&b, 3); gb_u16(&b, (uint16_t)-30000);
    gb_str(&b, "testarch.i32"); gb_u32(&b, 5); gb_u32(&b, (uint32_t)-2000000000);
    gb_str(&b, "testarch.f32"); gb_u32(&b, 6); gb_f32(&b, 1e-6f);
    gb_str(&b, "testarch.bool_true"); gb_u32(&b, 7); gb_u8(&b, 1);
    gb_str(&b, "testarch.bool_two"); gb_u32(&b, 7); gb_u8(&b, 2); /* §11 #10: non-zero = true */
    gb_str(&b, "testarch.u64"); gb_u32(&b, 10); gb_u64(&b, 18446744073709551615ull);
    gb_str(&b, "testarch.i64"); gb_u32(&b, 11); gb_u64(&b, (uint64_t)-9000000000ll);
    gb_str(&b, "testarch.f64"); gb_u32(&b, 12); gb_f64(&b, -2.5e300);
    gb_str(&b, "testarch.arr_i16"); gb_u32(&b, 9); gb_u32(&b, 3); gb_u64(&b, 3);
    gb_u16(&b, 1); gb_u16(&b, (uint16_t)-2); gb_u16(&b, 32767);
    gb_str(&b, "testarch.arr_u8"); gb_u32(&b, 9); gb_u32(&b, 0); gb_u64(&b, 2); gb_u8(&b, 255); gb_u8(&b, 0);
    gb_str(&b, "testarch.arr_i32"); gb_u32(&b, 9); gb_u32(&b, 5); gb_u64(&b, 4);
    for (int i = 0; i < 4; i++) gb_u32(&b, (uint32_t)(i * 7 - 10));
    gb_str(&b, "testarch.arr_f64"); gb_u32(&b, 9); gb_u32(&b, 12); gb_u64(&b, 2); gb_f64(&b, 0.25); gb_f64(&b, -1e10);
    gb_str(&b, "testarch.arr_bool"); gb_u32(&b, 9); gb_u32(&b, 7); gb_u64(&b, 3); gb_u8(&b, 0); gb_u8(&b, 1); gb_u8(&b, 7);
    gb_str(&b, "testarch.arr_empty"); gb_u32(&b, 9); gb_u32(&b, 4); gb_u64(&b, 0);
    gb_str(&b, "tokenizer.ggml.tokens"); gb_u32(&b, 9); gb_u32(&b, 8); gb_u64(&b, 4);
    gb_str(&b, "a"); gb_str(&b, ""); gb_str(&b, "\xc4\xa0the"); gb_strn(&b, "x\0y", 3);
    /* Tensors: offsets packed at 64-byte alignment. */
    uint64_t off = 0;
    gb_tensor_info(&b, "scalar.n_dims0", 0, NULL, 0, off);                      /* 1 F32 element */
    off += 64;
    gb_tensor_info(&b, "empty.ne1_0", 2, (const uint64_t[]){4, 0}, 0, off);      /* 0 bytes */
    gb_tensor_info(&b, "f16.4d", 4, (const uint64_t[]){2, 3, 1, 2}, 1, off);     /* 24 bytes */
    off += 64;
    gb_tensor_info(&b, "q4k.trailing1", 3, (const uint64_t[]){256, 2, 1}, 12, off); /* 288 bytes */
    off += 320;
    gb_tensor_info(&b, "iq2xs.row", 1, (const uint64_t[]){256}, 17, off);        /* 74 bytes */
    off += 128;
    gb_tensor_info(&b, "bf16.v", 1, (const uint64_t[]){5}, 30, off);             /* 10 bytes */
    off += 64;
    gb_tensor_info(&b, "blk.0.ffn_down_exps.weight", 3, (const uint64_t[]){32, 2, 3}, 8, off); /* 204 bytes */
    off += 256;
    gb_pad(&b, 64);
    for (uint64_t i = 0; i < off; i++) gb_u8(&b, (uint8_t)(i * 37 + 11));
    good("all-types", &b);
    free(b.d);

    /* Vocab-only style: metadata, no tensors, no padding at the end (data_start > size). */
    b = (struct gguf_build){0};
    gb_header(&b, 3, 0, 2);
    gb_kv_str(&b, "general.architecture", "qwen3moe");
    gb_kv_str(&b, "tokenizer.ggml.model", "gpt2");
    good("no-tensors", &b);
    free(b.d);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: gen_gguf_corpus OUT_DIR   (writes OUT_DIR/gguf-bad and OUT_DIR/gguf-good)\n");
        return 2;
    }
    out_dir = argv[1];
    char p[1024];
    snprintf(p, sizeof p, "%s/gguf-bad", out_dir);
    mkdir(out_dir, 0777);
    mkdir(p, 0777);
    snprintf(p, sizeof p, "%s/gguf-good", out_dir);
    mkdir(p, 0777);
    truncations();
    header_and_metadata();
    tensor_infos();
    good_files();
    printf("gen_gguf_corpus: wrote %d files under %s\n", n_written, out_dir);
    return 0;
}
