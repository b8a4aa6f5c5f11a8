/* q45_k_avx2.c — Q4_K and Q5_K × Q8_K dot products with AVX2 (quants.md §4.3-§4.5, §8.4):
 * the prefill gemm of q45_k_gemm_avx2_impl.h and the 4-row decode kernel on a prepared activation row of
 * q45_k_dec_avx2_impl.h with vpmaddubsw + vpmaddwd (its AVX-VNNI twin is q45_k_avxvnni.c).
 * Exact integer sums per block, scaled and accumulated in double like the AVX-512 version
 * (q45_k_avx512.c).
 * Compiled with -mavx2 -mfma -mf16c (Makefile); only called after the run-time check.
 */
#define HMOE_K45D_VNNI 0
#include "q45_k_dec_avx2_impl.h"

K45D_DEFINE(avx2)
