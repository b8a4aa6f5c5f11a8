/* gguf_write.h — streaming GGUF v3 writer (gguf.md §2–§7).
 *
 * Usage: init, add metadata records and tensor infos (in file order), open the output
 * (writes header, metadata, tensor infos and the padding up to ALIGN), then stream every
 * tensor's bytes in order with hmoe_gguf_writer_write() — in as many pieces as you like —
 * and call hmoe_gguf_writer_finish(). Offsets are the packed running sum llama.cpp requires
 * (gguf.md §7); the writer pads after each tensor by itself. Freeing a writer that was
 * opened but not finished (an error, a cancel) closes and removes the partial file.
 */
#ifndef HMOE_GGUF_WRITE_H
#define HMOE_GGUF_WRITE_H

#include "hmoe/common.h"
#include "hmoe/gguf.h"
#include "hmoe/types.h"

struct hmoe_gguf_writer;

/* `alignment` must be a power of two; 32 is what every llama.cpp tool writes. A file with
 * another alignment must also carry the key general.alignment (u32) with that value. */
enum hmoe_status hmoe_gguf_writer_init(struct hmoe_gguf_writer **out, uint32_t alignment, struct hmoe_err *err);
/* Also removes the output file if it was opened and not finished. NULL is fine. */
void hmoe_gguf_writer_free(struct hmoe_gguf_writer *w);

/* --- metadata (gguf.md §5): keys must be non-empty and unique ------------------------ */
enum hmoe_status hmoe_gguf_writer_add_u8(struct hmoe_gguf_writer *w, const char *key, uint8_t v, struct hmoe_err *err);
enum hmoe_status hmoe_gguf_writer_add_i8(struct hmoe_gguf_writer *w, const char *key, int8_t v, struct hmoe_err *err);
enum hmoe_status hmoe_gguf_writer_add_u16(struct hmoe_gguf_writer *w, const char *key, uint16_t v, struct hmoe_err *err);
enum hmoe_status hmoe_gguf_writer_add_i16(struct hmoe_gguf_writer *w, const char *key, int16_t v, struct hmoe_err *err);
enum hmoe_status hmoe_gguf_writer_add_u32(struct hmoe_gguf_writer *w, const char *key, uint32_t v, struct hmoe_err *err);
enum hmoe_status hmoe_gguf_writer_add_i32(struct hmoe_gguf_writer *w, const char *key, int32_t v, struct hmoe_err *err);
enum hmoe_status hmoe_gguf_writer_add_u64(struct hmoe_gguf_writer *w, const char *key, uint64_t v, struct hmoe_err *err);
enum hmoe_status hmoe_gguf_writer_add_i64(struct hmoe_gguf_writer *w, const char *key, int64_t v, struct hmoe_err *err);
enum hmoe_status hmoe_gguf_writer_add_f32(struct hmoe_gguf_writer *w, const char *key, float v, struct hmoe_err *err);
enum hmoe_status hmoe_gguf_writer_add_f64(struct hmoe_gguf_writer *w, const char *key, double v, struct hmoe_err *err);
enum hmoe_status hmoe_gguf_writer_add_bool(struct hmoe_gguf_writer *w, const char *key, bool v, struct hmoe_err *err);
/* A string of `len` bytes (may contain any byte); _add_str takes a NUL-terminated one. */
enum hmoe_status hmoe_gguf_writer_add_strn(struct hmoe_gguf_writer *w, const char *key, const char *s, uint64_t len,
                                           struct hmoe_err *err);
enum hmoe_status hmoe_gguf_writer_add_str(struct hmoe_gguf_writer *w, const char *key, const char *s,
                                          struct hmoe_err *err);
/* Array of a numeric or bool element type: `n` elements packed little-endian at `data`
 * (e.g. an int32_t[] for HMOE_GGUF_I32). STRING and ARRAY element types are refused. */
enum hmoe_status hmoe_gguf_writer_add_arr(struct hmoe_gguf_writer *w, const char *key, enum hmoe_gguf_vtype elem_type,
                                          const void *data, uint64_t n, struct hmoe_err *err);
/* Array of `n` strings (each pointer + length; the same struct the reader returns). */
enum hmoe_status hmoe_gguf_writer_add_arr_str(struct hmoe_gguf_writer *w, const char *key,
                                              const struct hmoe_gguf_str *strs, uint64_t n, struct hmoe_err *err);
/* Copy one record as the reader returned it (same key, type and value), e.g. to carry
 * tokenizer.* keys from another GGUF. */
enum hmoe_status hmoe_gguf_writer_copy_kv(struct hmoe_gguf_writer *w, const struct hmoe_gguf_kv *kv,
                                          struct hmoe_err *err);

/* --- tensor infos (gguf.md §6): in the order their data will be written -------------- */

/* Add a tensor of `n_dims` (1..4) dimensions ne[0..n_dims-1] (ne[0] contiguous, a multiple
 * of the type's block size). Names are unique and at most 63 bytes (llama.cpp's limit). */
enum hmoe_status hmoe_gguf_writer_add_tensor(struct hmoe_gguf_writer *w, const char *name, enum hmoe_type type,
                                             uint32_t n_dims, const int64_t *ne, struct hmoe_err *err);
uint64_t hmoe_gguf_writer_n_tensors(const struct hmoe_gguf_writer *w);
/* Bytes of tensor i (unpadded) and its offset relative to the data section. */
uint64_t hmoe_gguf_writer_tensor_bytes(const struct hmoe_gguf_writer *w, uint64_t i);
uint64_t hmoe_gguf_writer_tensor_offset(const struct hmoe_gguf_writer *w, uint64_t i);
/* Size of the data section (every tensor padded to ALIGN). */
uint64_t hmoe_gguf_writer_data_bytes(const struct hmoe_gguf_writer *w);

/* --- output ------------------------------------------------------------------------- */

/* Create (or truncate) `path` and write everything before the tensor data. No add_* after. */
enum hmoe_status hmoe_gguf_writer_open(struct hmoe_gguf_writer *w, const char *path, struct hmoe_err *err);
/* Append `n_bytes` of the current tensor's data. A call may not run past the end of the
 * current tensor; when a tensor is complete the writer pads and moves to the next one. */
enum hmoe_status hmoe_gguf_writer_write(struct hmoe_gguf_writer *w, const void *data, size_t n_bytes,
                                        struct hmoe_err *err);
/* Index of the tensor the next write belongs to (== n_tensors when all are written). */
uint64_t hmoe_gguf_writer_current_tensor(const struct hmoe_gguf_writer *w);
/* Bytes written to the file so far (header included). */
uint64_t hmoe_gguf_writer_file_offset(const struct hmoe_gguf_writer *w);
/* Check that every tensor is complete, flush and close. On any failure the partial file is
 * removed. The writer must still be freed. */
enum hmoe_status hmoe_gguf_writer_finish(struct hmoe_gguf_writer *w, struct hmoe_err *err);

#endif
