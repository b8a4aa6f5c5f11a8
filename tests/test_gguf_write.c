/* test_gguf_write.c — the GGUF writer against the worked example of gguf.md §12 (a file
 * llama.cpp's reader accepted, given there byte by byte), plus its error paths: bad keys,
 * names and shapes, short or long tensor data, unwritable paths and a full disk (/dev/full).
 */
#include "harness.h"

#include <sys/stat.h>
#include <unistd.h>

#include "hmoe/gguf.h"
#include "hmoe/gguf_write.h"

static char tmp_path[256];

static long file_size(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 ? (long)sb.st_size : -1;
}

static unsigned char *slurp(const char *path, long *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    *n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *p = malloc((size_t)*n + 1);
    if (fread(p, 1, (size_t)*n, f) != (size_t)*n) { free(p); p = NULL; }
    fclose(f);
    return p;
}

/* gguf.md §12, row by row (file offsets in the comments). */
static const char *const example_hex[] = {
    "47475546", "03000000", "0200000000000000", "0300000000000000",                   /* 0: header */
    "1400000000000000", "67656e6572616c2e617263686974656374757265", "08000000",      /* 24: general.architecture */
    "0500000000000000", "6c6c616d61",                                                 /* 56: "llama" */
    "1100000000000000", "67656e6572616c2e616c69676e6d656e74", "04000000", "20000000", /* 69: general.alignment = 32 */
    "1500000000000000", "746f6b656e697a65722e67676d6c2e73636f726573",                /* 102: tokenizer.ggml.scores */
    "09000000", "06000000", "0200000000000000", "00000000", "0000c0bf",               /* 131: f32[2] = 0, -1.5 */
    "0800000000000000", "612e776569676874", "02000000",                               /* 155: a.weight, 2 dims */
    "0300000000000000", "0200000000000000", "00000000", "0000000000000000",           /* ne 3x2, F32, offset 0 */
    "0600000000000000", "622e65787073", "03000000",                                   /* 203: b.exps, 3 dims */
    "2000000000000000", "0100000000000000", "0200000000000000", "08000000",           /* ne 32x1x2, Q8_0 */
    "2000000000000000",                                                               /* offset 32 */
    NULL};

static size_t hex_to_bytes(unsigned char *out) {
    size_t n = 0;
    for (int i = 0; example_hex[i]; i++) {
        const char *h = example_hex[i];
        for (size_t k = 0; h[k]; k += 2) {
            unsigned v;
            sscanf(h + k, "%2x", &v);
            out[n++] = (unsigned char)v;
        }
    }
    return n;
}

/* The whole 416-byte file of §12. */
static size_t expected_example(unsigned char *out) {
    size_t n = hex_to_bytes(out);                /* ends at 257 */
    while (n < 288) out[n++] = 0;                /* padding to data_start */
    for (int i = 1; i <= 6; i++) {               /* a.weight = 1..6 */
        float f = (float)i;
        memcpy(out + n, &f, 4);
        n += 4;
    }
    while (n < 320) out[n++] = 0;
    for (int e = 0; e < 2; e++) {                /* two Q8_0 blocks: d = 0.5 / 1.0, qs = -16..15 */
        out[n++] = 0x00;
        out[n++] = e == 0 ? 0x38 : 0x3c;
        for (int q = -16; q < 16; q++) out[n++] = (unsigned char)(signed char)q;
    }
    while (n < 416) out[n++] = 0;
    return n;
}

/* Builds the §12 writer; returns NULL (and reports) on failure. */
static struct hmoe_gguf_writer *example_writer(struct hmoe_err *err) {
    struct hmoe_gguf_writer *w;
    if (hmoe_gguf_writer_init(&w, 32, err) != HMOE_OK) return NULL;
    float scores[2] = {0.0f, -1.5f};
    int64_t ne_a[2] = {3, 2}, ne_b[3] = {32, 1, 2};
    if (hmoe_gguf_writer_add_str(w, "general.architecture", "llama", err) != HMOE_OK ||
        hmoe_gguf_writer_add_u32(w, "general.alignment", 32, err) != HMOE_OK ||
        hmoe_gguf_writer_add_arr(w, "tokenizer.ggml.scores", HMOE_GGUF_F32, scores, 2, err) != HMOE_OK ||
        hmoe_gguf_writer_add_tensor(w, "a.weight", HMOE_TYPE_F32, 2, ne_a, err) != HMOE_OK ||
        hmoe_gguf_writer_add_tensor(w, "b.exps", HMOE_TYPE_Q8_0, 3, ne_b, err) != HMOE_OK) {
        hmoe_gguf_writer_free(w);
        return NULL;
    }
    return w;
}

static void test_example(int piece_bytes) {
    char name[96];
    snprintf(name, sizeof name, "gguf.md §12 example written in %d-byte pieces", piece_bytes);
    unsigned char expect[512], data[24 + 68];
    size_t n_expect = expected_example(expect);
    memcpy(data, expect + 288, 24);
    memcpy(data + 24, expect + 320, 68);
    struct hmoe_err err = {0};
    struct hmoe_gguf_writer *w = example_writer(&err);
    if (!w) { t_check(0, name, "setup: %s", err.msg); return; }
    enum hmoe_status st = hmoe_gguf_writer_open(w, tmp_path, &err);
    /* one tensor at a time (a piece may not straddle two tensors), in pieces */
    const size_t bounds[3] = {0, 24, sizeof data};
    for (int t = 0; t < 2; t++)
        for (size_t off = bounds[t]; st == HMOE_OK && off < bounds[t + 1]; off += (size_t)piece_bytes) {
            size_t k = HMOE_MIN((size_t)piece_bytes, bounds[t + 1] - off);
            st = hmoe_gguf_writer_write(w, data + off, k, &err);
        }
    if (st == HMOE_OK) st = hmoe_gguf_writer_finish(w, &err);
    uint64_t off1 = hmoe_gguf_writer_tensor_offset(w, 1), data_bytes = hmoe_gguf_writer_data_bytes(w);
    hmoe_gguf_writer_free(w);
    if (st != HMOE_OK) { t_check(0, name, "%s", err.msg); return; }
    long n;
    unsigned char *got = slurp(tmp_path, &n);
    long first = -1;
    for (long i = 0; got && i < n && i < (long)n_expect; i++)
        if (got[i] != expect[i]) { first = i; break; }
    t_check(got && n == (long)n_expect && first < 0 && off1 == 32 && data_bytes == 128, name,
            "size %ld (want %zu), first differing byte %ld (got %02x want %02x), offset[1] %llu, data %llu", n, n_expect,
            first, first >= 0 ? got[first] : 0, first >= 0 ? expect[first] : 0, (unsigned long long)off1,
            (unsigned long long)data_bytes);
    free(got);
    unlink(tmp_path);
}

static void expect_fail(int ok_status, const struct hmoe_err *err, const char *name, const char *needle) {
    t_check(!ok_status && strstr(err->msg, needle) != NULL, name, "status ok=%d, message '%s' (want '%s')", ok_status,
            err->msg, needle);
}

static void test_bad_metadata(void) {
    struct hmoe_err err = {0};
    struct hmoe_gguf_writer *w;
    hmoe_gguf_writer_init(&w, 32, &err);
    hmoe_gguf_writer_add_u32(w, "a.b", 1, &err);
    expect_fail(hmoe_gguf_writer_add_u32(w, "a.b", 2, &err) == HMOE_OK, &err, "duplicate key is refused", "duplicate metadata key");
    expect_fail(hmoe_gguf_writer_add_str(w, "", "x", &err) == HMOE_OK, &err, "empty key is refused", "empty metadata key");
    int x = 0;
    expect_fail(hmoe_gguf_writer_add_arr(w, "arr", HMOE_GGUF_STRING, &x, 1, &err) == HMOE_OK, &err,
                "string array through add_arr is refused", "cannot be written");
    expect_fail(hmoe_gguf_writer_add_u64(w, "general.alignment", 32, &err) == HMOE_OK, &err,
                "general.alignment as u64 is refused", "must be a u32");
    hmoe_gguf_writer_free(w);

    hmoe_gguf_writer_init(&w, 64, &err);
    expect_fail(hmoe_gguf_writer_open(w, tmp_path, &err) == HMOE_OK, &err,
                "alignment 64 without general.alignment is refused", "declare alignment 32");
    hmoe_gguf_writer_free(w);
    t_check(file_size(tmp_path) < 0, "refused open leaves no file", "%s exists", tmp_path);
    expect_fail(hmoe_gguf_writer_init(&w, 24, &err) == HMOE_OK, &err, "alignment 24 is refused", "power of two");
}

static void test_bad_tensors(void) {
    struct hmoe_err err = {0};
    struct hmoe_gguf_writer *w;
    hmoe_gguf_writer_init(&w, 32, &err);
    int64_t ne[2] = {256, 4};
    hmoe_gguf_writer_add_tensor(w, "t", HMOE_TYPE_Q4_K, 2, ne, &err);
    expect_fail(hmoe_gguf_writer_add_tensor(w, "t", HMOE_TYPE_F32, 2, ne, &err) == HMOE_OK, &err,
                "duplicate tensor name is refused", "duplicate tensor name");
    char long_name[80];
    memset(long_name, 'x', 64);
    long_name[64] = 0;
    expect_fail(hmoe_gguf_writer_add_tensor(w, long_name, HMOE_TYPE_F32, 2, ne, &err) == HMOE_OK, &err,
                "64-byte tensor name is refused", "1..63 bytes");
    long_name[63] = 0;
    t_check(hmoe_gguf_writer_add_tensor(w, long_name, HMOE_TYPE_F32, 2, ne, &err) == HMOE_OK,
            "63-byte tensor name is accepted", "%s", err.msg);
    int64_t odd[2] = {300, 1};
    expect_fail(hmoe_gguf_writer_add_tensor(w, "odd", HMOE_TYPE_Q4_K, 2, odd, &err) == HMOE_OK, &err,
                "row of 300 Q4_K elements is refused", "not a multiple");
    expect_fail(hmoe_gguf_writer_add_tensor(w, "d5", HMOE_TYPE_F32, 5, ne, &err) == HMOE_OK, &err,
                "5 dimensions are refused", "dimensions");
    expect_fail(hmoe_gguf_writer_add_tensor(w, "ret", (enum hmoe_type)4, 2, ne, &err) == HMOE_OK, &err,
                "retired type id 4 is refused", "unknown type");
    int64_t huge[4] = {INT64_MAX / 2, 4, 1, 1};
    expect_fail(hmoe_gguf_writer_add_tensor(w, "huge", HMOE_TYPE_F32, 2, huge, &err) == HMOE_OK, &err,
                "element count overflow is refused", "overflow");
    hmoe_gguf_writer_free(w);
}

static void test_bad_data(void) {
    struct hmoe_err err = {0};
    unsigned char buf[128] = {0};
    struct hmoe_gguf_writer *w = example_writer(&err);
    hmoe_gguf_writer_open(w, tmp_path, &err);
    expect_fail(hmoe_gguf_writer_write(w, buf, 25, &err) == HMOE_OK, &err, "write past the end of a tensor is refused",
                "run past the end");
    hmoe_gguf_writer_write(w, buf, 24, &err);
    expect_fail(hmoe_gguf_writer_finish(w, &err) == HMOE_OK, &err, "finish with a tensor missing data fails",
                "incomplete");
    hmoe_gguf_writer_free(w);
    t_check(file_size(tmp_path) < 0, "incomplete file is removed", "%s still exists", tmp_path);

    w = example_writer(&err);
    hmoe_gguf_writer_open(w, tmp_path, &err);
    hmoe_gguf_writer_write(w, buf, 10, &err);
    hmoe_gguf_writer_free(w); /* abandoned, e.g. after Ctrl-C */
    t_check(file_size(tmp_path) < 0, "abandoned file is removed by free", "%s still exists", tmp_path);

    w = example_writer(&err);
    expect_fail(hmoe_gguf_writer_open(w, "/nonexistent-dir/x.gguf", &err) == HMOE_OK, &err,
                "unwritable path gives a clear error", "cannot create the output file");
    hmoe_gguf_writer_free(w);
}

/* /dev/full fails every write with ENOSPC; data bigger than the 4 MiB stage forces a write. */
static void test_disk_full(void) {
    struct hmoe_err err = {0};
    struct hmoe_gguf_writer *w;
    hmoe_gguf_writer_init(&w, 32, &err);
    int64_t ne[1] = {3 << 20};
    hmoe_gguf_writer_add_tensor(w, "big", HMOE_TYPE_F32, 1, ne, &err);
    enum hmoe_status st = hmoe_gguf_writer_open(w, "/dev/full", &err);
    float *data = calloc((size_t)ne[0], sizeof *data);
    if (st == HMOE_OK) st = hmoe_gguf_writer_write(w, data, (size_t)ne[0] * 4, &err);
    if (st == HMOE_OK) st = hmoe_gguf_writer_finish(w, &err);
    expect_fail(st == HMOE_OK, &err, "full disk gives a 'disk full' error", "disk full");
    hmoe_gguf_writer_free(w);
    free(data);
    struct stat sb;
    t_check(stat("/dev/full", &sb) == 0 && S_ISCHR(sb.st_mode), "a failed write never removes a device node",
            "/dev/full is gone");
}

/* A tensor larger than the stage is written directly; its bytes must land in order. */
static void test_big_tensor(void) {
    struct hmoe_err err = {0};
    struct hmoe_gguf_writer *w;
    hmoe_gguf_writer_init(&w, 32, &err);
    int64_t ne_small[1] = {3}, ne_big[1] = {(5 << 20) / 2 + 1};
    hmoe_gguf_writer_add_tensor(w, "small", HMOE_TYPE_F32, 1, ne_small, &err);
    hmoe_gguf_writer_add_tensor(w, "big", HMOE_TYPE_F16, 1, ne_big, &err);
    size_t n_big = (size_t)ne_big[0] * 2;
    unsigned char *big = malloc(n_big);
    for (size_t i = 0; i < n_big; i++) big[i] = (unsigned char)(i * 7 + 3);
    float small[3] = {1, 2, 3};
    enum hmoe_status st = hmoe_gguf_writer_open(w, tmp_path, &err);
    if (st == HMOE_OK) st = hmoe_gguf_writer_write(w, small, sizeof small, &err);
    if (st == HMOE_OK) st = hmoe_gguf_writer_write(w, big, n_big, &err);
    if (st == HMOE_OK) st = hmoe_gguf_writer_finish(w, &err);
    uint64_t off_big = hmoe_gguf_writer_tensor_offset(w, 1), data_bytes = hmoe_gguf_writer_data_bytes(w);
    hmoe_gguf_writer_free(w);
    long n = 0;
    unsigned char *got = st == HMOE_OK ? slurp(tmp_path, &n) : NULL;
    /* data_start = file size - data section; big starts off_big bytes into the section */
    long data_start = n - (long)data_bytes;
    bool ok = got && off_big == 32 && data_bytes == 32 + ((n_big + 31) / 32 * 32) && data_start > 0 &&
              data_start % 32 == 0 && memcmp(got + data_start + off_big, big, n_big) == 0 &&
              memcmp(got + data_start, small, sizeof small) == 0;
    t_check(ok, "tensor larger than the stage lands intact", "%s; size %ld, data %llu", err.msg, n,
            (unsigned long long)data_bytes);
    free(big);
    free(got);
    unlink(tmp_path);
}


/* Every value type, arrays of each (strings, empty and non-ASCII ones included), empty
 * arrays, and tensors of several types and ranks, read back with the GGUF reader; then the
 * same metadata copied record by record with copy_kv must read back identical again. */
static enum hmoe_status write_all_types(const char *path, struct hmoe_err *err) {
    struct hmoe_gguf_writer *w;
    enum hmoe_status st = hmoe_gguf_writer_init(&w, 32, err);
    if (st != HMOE_OK) return st;
    uint8_t a_u8[3] = {0, 7, 255};
    int16_t a_i16[2] = {-32768, 32767};
    int32_t a_i32[4] = {-1, 0, 1, 2147483647};
    uint64_t a_u64[2] = {0, UINT64_MAX};
    float a_f32[2] = {0.5f, -1e30f};
    double a_f64[1] = {3.141592653589793};
    uint8_t a_bool[2] = {1, 0};
    struct hmoe_gguf_str a_str[3] = {{"", 0}, {"h\xc3\xa9llo w\xc3\xb6rld", 13}, {"a b", 3}};
    if (st == HMOE_OK) st = hmoe_gguf_writer_add_u8(w, "t.u8", 200, err);
    if (st == HMOE_OK) st = hmoe_gguf_writer_add_i8(w, "t.i8", -100, err);
    if (st == HMOE_OK) st = hmoe_gguf_writer_add_u16(w, "t.u16", 60000, err);
    if (st == HMOE_OK) st = hmoe_gguf_writer_add_i16(w, "t.i16", -30000, err);
    if (st == HMOE_OK) st = hmoe_gguf_writer_add_u32(w, "t.u32", 4000000000u, err);
    if (st == HMOE_OK) st = hmoe_gguf_writer_add_i32(w, "t.i32", -2000000000, err);
    if (st == HMOE_OK) st = hmoe_gguf_writer_add_f32(w, "t.f32", 1e-6f, err);
    if (st == HMOE_OK) st = hmoe_gguf_writer_add_bool(w, "t.bool", true, err);
    if (st == HMOE_OK) st = hmoe_gguf_writer_add_str(w, "t.str", "qwen3moe", err);
    if (st == HMOE_OK) st = hmoe_gguf_writer_add_strn(w, "t.str_empty", "", 0, err);
    if (st == HMOE_OK) st = hmoe_gguf_writer_add_u64(w, "t.u64", 18446744073709551615ull, err);
    if (st == HMOE_OK) st = hmoe_gguf_writer_add_i64(w, "t.i64", INT64_MIN, err);
    if (st == HMOE_OK) st = hmoe_gguf_writer_add_f64(w, "t.f64", -2.5e300, err);
    if (st == HMOE_OK) st = hmoe_gguf_writer_add_arr(w, "a.u8", HMOE_GGUF_U8, a_u8, 3, err);
    if (st == HMOE_OK) st = hmoe_gguf_writer_add_arr(w, "a.i16", HMOE_GGUF_I16, a_i16, 2, err);
    if (st == HMOE_OK) st = hmoe_gguf_writer_add_arr(w, "a.i32", HMOE_GGUF_I32, a_i32, 4, err);
    if (st == HMOE_OK) st = hmoe_gguf_writer_add_arr(w, "a.u64", HMOE_GGUF_U64, a_u64, 2, err);
    if (st == HMOE_OK) st = hmoe_gguf_writer_add_arr(w, "a.f32", HMOE_GGUF_F32, a_f32, 2, err);
    if (st == HMOE_OK) st = hmoe_gguf_writer_add_arr(w, "a.f64", HMOE_GGUF_F64, a_f64, 1, err);
    if (st == HMOE_OK) st = hmoe_gguf_writer_add_arr(w, "a.bool", HMOE_GGUF_BOOL, a_bool, 2, err);
    if (st == HMOE_OK) st = hmoe_gguf_writer_add_arr(w, "a.empty", HMOE_GGUF_I32, a_i32, 0, err);
    if (st == HMOE_OK) st = hmoe_gguf_writer_add_arr_str(w, "a.str", a_str, 3, err);
    int64_t ne_f32[2] = {5, 3}, ne_q8[3] = {64, 2, 3}, ne_q4k[2] = {512, 2}, ne_f16[1] = {7}, ne_empty[2] = {0, 4};
    if (st == HMOE_OK) st = hmoe_gguf_writer_add_tensor(w, "t.f32", HMOE_TYPE_F32, 2, ne_f32, err);
    if (st == HMOE_OK) st = hmoe_gguf_writer_add_tensor(w, "t.empty", HMOE_TYPE_F32, 2, ne_empty, err);
    if (st == HMOE_OK) st = hmoe_gguf_writer_add_tensor(w, "blk.0.ffn_down_exps.weight", HMOE_TYPE_Q8_0, 3, ne_q8, err);
    if (st == HMOE_OK) st = hmoe_gguf_writer_add_tensor(w, "t.q4k", HMOE_TYPE_Q4_K, 2, ne_q4k, err);
    if (st == HMOE_OK) st = hmoe_gguf_writer_add_tensor(w, "t.f16", HMOE_TYPE_F16, 1, ne_f16, err);
    if (st == HMOE_OK) st = hmoe_gguf_writer_open(w, path, err);
    for (uint64_t i = 0; st == HMOE_OK && i < hmoe_gguf_writer_n_tensors(w); i++) {
        uint64_t n = hmoe_gguf_writer_tensor_bytes(w, i);
        unsigned char *d = malloc(n + 1);
        for (uint64_t k = 0; k < n; k++) d[k] = (unsigned char)(k * 31 + i); /* pattern: tensor i, byte k */
        st = hmoe_gguf_writer_write(w, d, n, err);
        free(d);
    }
    if (st == HMOE_OK) st = hmoe_gguf_writer_finish(w, err);
    hmoe_gguf_writer_free(w);
    return st;
}

static bool kv_equal(const struct hmoe_gguf_kv *a, const struct hmoe_gguf_kv *b) {
    if (strcmp(a->key, b->key) || a->type != b->type) return false;
    if (a->type == HMOE_GGUF_STRING) return a->v.str.len == b->v.str.len && !memcmp(a->v.str.ptr, b->v.str.ptr, a->v.str.len);
    if (a->type != HMOE_GGUF_ARRAY) return a->v.u64 == b->v.u64 || (a->type == HMOE_GGUF_BOOL && a->v.b == b->v.b);
    if (a->arr_type != b->arr_type || a->arr_n != b->arr_n) return false;
    for (uint64_t i = 0; i < a->arr_n; i++) {
        if (a->arr_type == HMOE_GGUF_STRING) {
            if (a->arr_str[i].len != b->arr_str[i].len || memcmp(a->arr_str[i].ptr, b->arr_str[i].ptr, a->arr_str[i].len))
                return false;
        } else if (hmoe_gguf_arr_i64(a, i) != hmoe_gguf_arr_i64(b, i) || hmoe_gguf_arr_f64(a, i) != hmoe_gguf_arr_f64(b, i))
            return false;
    }
    return true;
}

static void test_round_trip(void) {
    struct hmoe_err err = {0};
    struct hmoe_gguf *g = NULL;
    if (write_all_types(tmp_path, &err) != HMOE_OK || hmoe_gguf_open(tmp_path, &g, &err) != HMOE_OK) {
        t_check(0, "all-types file writes and our reader opens it", "%s", err.msg);
        return;
    }
    const struct hmoe_gguf_kv *kv;
    bool scalars = g->n_kv == 22 && hmoe_gguf_get_u32_or(g, "t.u8", 0) == 200 &&
                   (kv = hmoe_gguf_find_kv(g, "t.i8")) && kv->type == HMOE_GGUF_I8 && kv->v.i64 == -100 &&
                   (kv = hmoe_gguf_find_kv(g, "t.u16")) && kv->type == HMOE_GGUF_U16 && kv->v.u64 == 60000 &&
                   (kv = hmoe_gguf_find_kv(g, "t.i16")) && kv->type == HMOE_GGUF_I16 && kv->v.i64 == -30000 &&
                   (kv = hmoe_gguf_find_kv(g, "t.u32")) && kv->type == HMOE_GGUF_U32 && kv->v.u64 == 4000000000u &&
                   (kv = hmoe_gguf_find_kv(g, "t.i32")) && kv->type == HMOE_GGUF_I32 && kv->v.i64 == -2000000000 &&
                   (kv = hmoe_gguf_find_kv(g, "t.f32")) && kv->type == HMOE_GGUF_F32 && kv->v.f64 == (double)1e-6f &&
                   (kv = hmoe_gguf_find_kv(g, "t.bool")) && kv->type == HMOE_GGUF_BOOL && kv->v.b &&
                   (kv = hmoe_gguf_find_kv(g, "t.str")) && kv->type == HMOE_GGUF_STRING && kv->v.str.len == 8 &&
                   !memcmp(kv->v.str.ptr, "qwen3moe", 8) && (kv = hmoe_gguf_find_kv(g, "t.str_empty")) &&
                   kv->v.str.len == 0 && (kv = hmoe_gguf_find_kv(g, "t.u64")) && kv->type == HMOE_GGUF_U64 &&
                   kv->v.u64 == UINT64_MAX && (kv = hmoe_gguf_find_kv(g, "t.i64")) && kv->type == HMOE_GGUF_I64 &&
                   kv->v.i64 == INT64_MIN && (kv = hmoe_gguf_find_kv(g, "t.f64")) && kv->type == HMOE_GGUF_F64 &&
                   kv->v.f64 == -2.5e300;
    t_check(scalars, "round trip: every scalar type reads back with its type and value", "%s", err.msg);
    bool arrays = (kv = hmoe_gguf_find_kv(g, "a.u8")) && kv->arr_type == HMOE_GGUF_U8 && kv->arr_n == 3 &&
                  hmoe_gguf_arr_i64(kv, 2) == 255 && (kv = hmoe_gguf_find_kv(g, "a.i16")) && hmoe_gguf_arr_i64(kv, 0) == -32768 &&
                  (kv = hmoe_gguf_find_kv(g, "a.i32")) && kv->arr_n == 4 && hmoe_gguf_arr_i64(kv, 3) == 2147483647 &&
                  (kv = hmoe_gguf_find_kv(g, "a.u64")) && (uint64_t)hmoe_gguf_arr_i64(kv, 1) == UINT64_MAX &&
                  (kv = hmoe_gguf_find_kv(g, "a.f32")) && hmoe_gguf_arr_f64(kv, 1) == (double)-1e30f &&
                  (kv = hmoe_gguf_find_kv(g, "a.f64")) && hmoe_gguf_arr_f64(kv, 0) == 3.141592653589793 &&
                  (kv = hmoe_gguf_find_kv(g, "a.bool")) && kv->arr_type == HMOE_GGUF_BOOL && hmoe_gguf_arr_i64(kv, 0) == 1 &&
                  (kv = hmoe_gguf_find_kv(g, "a.empty")) && kv->arr_n == 0 && (kv = hmoe_gguf_find_kv(g, "a.str")) &&
                  kv->arr_type == HMOE_GGUF_STRING && kv->arr_n == 3 && kv->arr_str[0].len == 0 &&
                  kv->arr_str[1].len == 13 && !memcmp(kv->arr_str[1].ptr, "h\xc3\xa9llo w\xc3\xb6rld", 13) &&
                  kv->arr_str[2].len == 3;
    t_check(arrays, "round trip: arrays of every element type, strings and empty arrays", "mismatch");
    bool tensors = g->n_tensors == 5;
    static const char *names[5] = {"t.f32", "t.empty", "blk.0.ffn_down_exps.weight", "t.q4k", "t.f16"};
    static const uint64_t bytes[5] = {60, 0, 6 * 68, 2 * 288, 14};
    for (uint64_t i = 0; tensors && i < 5; i++) {
        const struct hmoe_gguf_tensor *t = hmoe_gguf_find_tensor(g, names[i]);
        tensors = t && t->n_bytes == bytes[i] && t->offset % 32 == 0;
        for (uint64_t k = 0; tensors && k < t->n_bytes; k++) tensors = ((const unsigned char *)t->data)[k] == (unsigned char)(k * 31 + i);
    }
    const struct hmoe_gguf_tensor *q8 = hmoe_gguf_find_tensor(g, names[2]);
    tensors = tensors && q8->ne[0] == 64 && q8->ne[1] == 2 && q8->ne[2] == 3 && q8->nb[2] == 136;
    t_check(tensors, "round trip: tensors (F32, empty, 3-D Q8_0, Q4_K, F16) with their bytes", "mismatch");

    /* copy every record into a second file; it must read back identical */
    char path2[300];
    snprintf(path2, sizeof path2, "%s.copy", tmp_path);
    struct hmoe_gguf_writer *w;
    enum hmoe_status st = hmoe_gguf_writer_init(&w, 32, &err);
    for (uint64_t i = 0; st == HMOE_OK && i < g->n_kv; i++) st = hmoe_gguf_writer_copy_kv(w, &g->kv[i], &err);
    if (st == HMOE_OK) st = hmoe_gguf_writer_open(w, path2, &err);
    if (st == HMOE_OK) st = hmoe_gguf_writer_finish(w, &err);
    hmoe_gguf_writer_free(w);
    struct hmoe_gguf *g2 = NULL;
    bool same = st == HMOE_OK && hmoe_gguf_open(path2, &g2, &err) == HMOE_OK && g2->n_kv == g->n_kv;
    for (uint64_t i = 0; same && i < g->n_kv; i++) same = kv_equal(&g->kv[i], &g2->kv[i]);
    t_check(same, "copy_kv: every record copied reads back identical", "%s", err.msg);
    hmoe_gguf_free(g2);
    hmoe_gguf_free(g);
    unlink(path2);
    unlink(tmp_path);
}

int main(void) {
    snprintf(tmp_path, sizeof tmp_path, "/tmp/hmoe-test-gguf-write-%d.gguf", (int)getpid());
    test_example(1 << 20);
    test_example(1);
    test_example(7);
    test_bad_metadata();
    test_bad_tensors();
    test_bad_data();
    test_disk_full();
    test_big_tensor();
    test_round_trip();
    unlink(tmp_path);
    return t_summary();
}
