/* cuda_moe_impl.cuh — private: the byte layout of a prefill expert plan (cuda.h
 * hmoe_cuda_moe_plan_build), shared by cuda_moe.cu (writes it) and cuda_mmq.cu (reads it).
 * All fields int32:
 *   [0] ntiles (written on the device)  [1] n_expert  [2] nrows = ntok * k  [3] max_tiles
 *   offsets[n_expert + 1]   first plan row of each expert (offsets[E] = nrows)
 *   rows[nrows]             plan row -> slot (t * k + j), rows of one expert in slot order
 *   row_of_slot[nrows]      slot -> plan row (-1 if its expert id was out of range)
 *   tiles[max_tiles][4]     {expert, first plan row, row count (<= HMOE_CUDA_MOE_TILE), 0}
 */
#ifndef HMOE_KERNELS_CUDA_MOE_IMPL_CUH
#define HMOE_KERNELS_CUDA_MOE_IMPL_CUH

#include "kernels/cuda_impl.cuh"

struct hmoe_moe_plan_view {
    int32_t *hdr, *offsets, *rows, *row_of_slot, *tiles;
};

HMOE_HD int64_t hmoe_moe_plan_max_tiles(int64_t nrows, int n_expert) {
    return (nrows + HMOE_CUDA_MOE_TILE - 1) / HMOE_CUDA_MOE_TILE + n_expert;
}

HMOE_HD size_t hmoe_moe_plan_ints(int64_t nrows, int n_expert) {
    size_t n = 4 + (size_t)n_expert + 1 + 2 * (size_t)nrows;
    n = (n + 3) / 4 * 4; /* tiles start 16-byte aligned */
    return n + 4 * (size_t)hmoe_moe_plan_max_tiles(nrows, n_expert);
}

HMOE_HD struct hmoe_moe_plan_view hmoe_moe_plan_map(void *plan, int64_t nrows, int n_expert) {
    struct hmoe_moe_plan_view v;
    int32_t *p = (int32_t *)plan;
    v.hdr = p;
    v.offsets = p + 4;
    v.rows = v.offsets + n_expert + 1;
    v.row_of_slot = v.rows + nrows;
    size_t t = 4 + (size_t)n_expert + 1 + 2 * (size_t)nrows;
    v.tiles = p + (t + 3) / 4 * 4;
    return v;
}

#endif
