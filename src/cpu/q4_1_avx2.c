/* q4_1_avx2.c — Q4_1 × Q8_1 dot products with AVX2 (quants.md §3; the scores of a q4_1 K cache,
 * whose queries are quantized to Q8_1): legmin_avx2_impl.h with 4-bit codes.
 * Compiled with -mavx2 -mfma -mf16c (Makefile); only called after the run-time check.
 */
#define LEGMIN_NAME q4_1_avx2
#define LEGMIN_BLOCK struct hmoe_block_q4_1
#define LEGMIN_FIVE 0
#define LEGMIN_QH(blk) NULL
#include "legmin_avx2_impl.h"
