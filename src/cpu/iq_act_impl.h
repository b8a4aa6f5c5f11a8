/* iq_act_impl.h — private to src/cpu: Q8_K activations (quants.md §8.3) re-laid once per call
 * for the AVX-512 256-element I-quant kernels. Slice g holds group g (8 elements) of each
 * chunk, so a vpdpbusd over a slice keeps chunks apart (dwords 2c, 2c+1) and one vpmulld
 * applies a block's chunk scales; corr = -offset·Σa per chunk (or half) removes the +offset
 * that makes signed weights unsigned. Integer sums are unchanged. */
#ifndef HMOE_CPU_IQ_ACT_IMPL_H
#define HMOE_CPU_IQ_ACT_IMPL_H

#include <stddef.h>
#include <stdint.h>

struct hmoe_cpu_iq_act {
    int8_t qs[256];      /* slice g at qs[64g]: byte 8c + k = activation 32c + 8g + k */
    int32_t corr[2][16]; /* dword 2c: -offset·Σa over chunk c ([0], split 0) or its halves ([0], [1]); odd dwords 0 */
    double d;            /* the Q8_K block scale (binary32 value), as the double the kernels multiply by */
    double pad[7];
};
_Static_assert(sizeof(struct hmoe_cpu_iq_act) == 448, "iq act block size");

/* Re-lay `nb` Q8_K blocks of each of `ntok` activation rows (src row t at src + t·src_stride)
 * into dst[t·nb + i] (AVX-512; iq_act_avx512.c). */
void hmoe_cpu_iq_act_avx512(const void *src, size_t src_stride, int64_t ntok, int64_t nb, int offset, int split,
                            struct hmoe_cpu_iq_act *dst);

/* A per-thread scratch of at least `bytes` bytes, 64-byte aligned, kept for the thread's
 * lifetime (grows, never shrinks); NULL if memory runs out. */
void *hmoe_cpu_iq_scratch(size_t bytes);

#endif
