/* q6_k_avx2.c — Q6_K × Q8_K dot products with AVX2 (quants.md §4.6, §8.4): the prefill
 * tiles and the 4-row streaming decode kernel of q6_k_dec_avx2_impl.h with vpmaddwd +
 * vpaddd (its AVX-VNNI twin is q6_k_avxvnni.c).
 * Compiled with -mavx2 -mfma -mf16c (Makefile); only called after the run-time check.
 */
#define HMOE_Q6KD_VNNI 0
#include "q6_k_dec_avx2_impl.h"

Q6KD_DEFINE(avx2)
