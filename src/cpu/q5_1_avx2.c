/* q5_1_avx2.c — Q5_1 × Q8_1 dot products with AVX2 (quants.md §3; the scores of a q5_1 K cache,
 * whose queries are quantized to Q8_1): legmin_avx2_impl.h with the fifth bits of qh.
 * Compiled with -mavx2 -mfma -mf16c (Makefile); only called after the run-time check.
 */
#define LEGMIN_NAME q5_1_avx2
#define LEGMIN_BLOCK struct hmoe_block_q5_1
#define LEGMIN_FIVE 1
#define LEGMIN_QH(blk) (blk)->qh
#include "legmin_avx2_impl.h"
