/* q8_0_avx512.c — Q8_0 × Q8_0 dot products on the AVX-512 path (quants.md §3.5, §8.4): the
 * bodies of leg32_avx2_impl.h built with the AVX-512 flags, so each block sum is one EVEX
 * vpdpbusd (AVX512-VNNI + VL): in the decode and the group gemm of the unsigned codes w + 128
 * (w XOR 0x80) with the activations as they are, onto the block's -128·Σa (the activations are
 * -127..127); in the 1-row tiles of |w| (as u8; -128 becomes 128, which the format allows) with
 * the activations carrying w's sign; the compiler has 32 vector registers for the tiles. A block
 * is exactly one YMM of activations; the 4-row streaming decode of leg32_avx2_impl.h reads
 * 30 GB/s in cache on one core of the dev VM, a 1-row body 16.6 (bench/cpu_avx2.md).
 * Compiled with the AVX-512 flags (Makefile); only called after cpu_dispatch.c checked the CPU.
 */
#define LEG32_VNNI 1
#include "leg32_avx2_impl.h"

LEG32_DEFINE_U(q8_0_avx512, q80512, sizeof(struct hmoe_block_q8_0), leg32_unpack_q8_0, leg32_unpack_u_q8_0, 128,
               leg32_scale_fp16, leg32_scales4_fp16)
