/* cuda_mmv_impl.cuh — private: the thread layout shared by the decode matvec (cuda_mmv.cu) and
 * the decode expert kernels (cuda_moe.cu). A block of 128 threads holds 128/TPR "row groups";
 * the TPR threads of a group split one row's slices (TPR = 32, 64 or 128, picked so each thread
 * has one or two slices), each thread carries RPT rows, so a thread's weight loads for all its
 * rows and slices are independent and issued back to back: the whole matvec costs about one
 * memory latency instead of one per loop trip. Per-row sums: warp shuffles, then shared memory
 * across the TPR/32 warps of a group.
 */
#ifndef HMOE_KERNELS_CUDA_MMV_IMPL_CUH
#define HMOE_KERNELS_CUDA_MMV_IMPL_CUH

#include "kernels/cuda_impl.cuh"

#define HMOE_MMV_THREADS 128

/* Threads per row for a row of `units` slices: 32, 64 or 128. */
static inline int hmoe_mmv_tpr(int64_t units) { return units > 64 ? 128 : units > 32 ? 64 : 32; }

/* Sum the N values v[] over the TPR threads of each row group. The result is valid in the
 * group's first thread (tl == 0). Every thread of the block must call this (it may sync). */
template <int TPR, int N>
__device__ __forceinline__ void hmoe_mmv_group_sum(float (&v)[N], float (*red)[N]) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
    for (int i = 0; i < N; i++) v[i] = hmoe_warp_sum(v[i]);
    if (TPR > 32) {
        if (lane == 0)
#pragma unroll
            for (int i = 0; i < N; i++) red[warp][i] = v[i];
        __syncthreads();
        if ((threadIdx.x % TPR) == 0) {
            constexpr int NW = TPR / 32;
#pragma unroll
            for (int i = 0; i < N; i++) {
                float s = 0.0f;
#pragma unroll
                for (int w = 0; w < NW; w++) s += red[warp + w][i];
                v[i] = s;
            }
        }
    }
}

#endif
