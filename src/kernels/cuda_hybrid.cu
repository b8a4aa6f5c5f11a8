/* cuda_hybrid.cu — the GPU half of the per-layer CPU/GPU handoff of a hybrid decode step
 * (cuda.h "Hybrid CPU+GPU handoff"; the CPU half is src/sched/hybrid_cpu.c).
 *  publish    one block: map the token's k experts to GPU cache slots (-1 = miss), and when
 *             anything misses copy the normalised hidden state into the layer's mapped host
 *             buffer; every writer fences (system scope) before the block barrier, then one
 *             thread writes the sequence flag, so the CPU never sees the flag before the data.
 *  wait_add   one block: skip when nothing missed; else one thread spins on the CPU's flag in
 *             mapped memory (globaltimer bounds the wait), then the block adds the CPU's result
 *             vector to the residual stream with uncached loads.
 * Both read the per-token sequence number from device memory so the graph never changes.
 */
#include "kernels/cuda_impl.cuh"

__device__ __forceinline__ uint64_t hyb_globaltimer(void) {
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

#define PUBLISH_THREADS 256
#define WAIT_THREADS 512

__global__ void __launch_bounds__(PUBLISH_THREADS)
    hybrid_publish_kernel(const int32_t *__restrict__ ids, const float *__restrict__ wts, int k, const float *__restrict__ h,
                          int64_t n, const int32_t *__restrict__ slot_of, int E, const uint32_t *__restrict__ seq,
                          int32_t *gids, int32_t *nmiss, struct hmoe_cuda_mailbox *mb, float *h_host) {
    __shared__ int s_nmiss;
    const int tid = threadIdx.x;
    if (tid == 0) s_nmiss = 0;
    __syncthreads();
    if (tid < k) {
        const int e = ids[tid];
        const int s = (e >= 0 && e < E) ? slot_of[e] : -1;
        gids[tid] = s;
        mb->ids[tid] = e;
        mb->wts[tid] = wts[tid];
        mb->miss[tid] = s < 0;
        if (s < 0) atomicAdd(&s_nmiss, 1);
    }
    __syncthreads();
    const int nm = s_nmiss;
    if (nm > 0)
        for (int64_t i = tid; i < n; i += PUBLISH_THREADS) h_host[i] = h[i];
    if (tid == 0) {
        *nmiss = nm;
        mb->n_miss = nm;
        mb->k = k;
    }
    __threadfence_system();
    __syncthreads();
    if (tid == 0) *(volatile uint32_t *)&mb->gpu_seq = *seq;
}

__global__ void __launch_bounds__(WAIT_THREADS)
    hybrid_wait_add_kernel(const int32_t *__restrict__ nmiss, const uint32_t *__restrict__ seq,
                           struct hmoe_cuda_mailbox *mb, const float *res, float *__restrict__ x, int64_t n,
                           uint64_t timeout_ns) {
    __shared__ int s_ok;
    if (*nmiss == 0) return;
    const int tid = threadIdx.x;
    if (tid == 0) {
        const uint32_t want = *seq;
        const volatile uint32_t *flag = &mb->cpu_seq;
        const uint64_t t0 = hyb_globaltimer();
        uint64_t t = t0;
        while (*flag != want) {
            t = hyb_globaltimer();
            if (t - t0 > timeout_ns) break;
        }
        const int ok = *flag == want;
        mb->gpu_wait_ns = hyb_globaltimer() - t0;
        if (!ok) mb->timed_out = 1;
        __threadfence_system();
        s_ok = ok;
    }
    __syncthreads();
    if (!s_ok) return;
    if (n % 4 == 0 && ((uintptr_t)res % 16) == 0 && ((uintptr_t)x % 16) == 0) {
        const float4 *r4 = (const float4 *)res;
        float4 *x4 = (float4 *)x;
        for (int64_t i = tid; i < n / 4; i += WAIT_THREADS) {
            const float4 r = __ldcv(r4 + i);
            float4 v = x4[i];
            v.x += r.x, v.y += r.y, v.z += r.z, v.w += r.w;
            x4[i] = v;
        }
    } else {
        for (int64_t i = tid; i < n; i += WAIT_THREADS) x[i] += __ldcv(res + i);
    }
}

extern "C" enum hmoe_status hmoe_cuda_hybrid_publish(const int32_t *d_ids, const float *d_wts, int k, const float *d_h,
                                                     int64_t n, const int32_t *d_slot_of, int n_expert,
                                                     const uint32_t *d_seq, int32_t *d_gids, int32_t *d_nmiss,
                                                     struct hmoe_cuda_mailbox *mb, float *h_host, void *stream,
                                                     struct hmoe_err *err) {
    HMOE_CUDA_REQUIRE(err, k >= 1 && k <= HMOE_CUDA_MAILBOX_MAX_K && n > 0 && n_expert > 0,
                      "hybrid_publish: bad k (1..%d), n or n_expert", HMOE_CUDA_MAILBOX_MAX_K);
    HMOE_CUDA_REQUIRE(err, d_ids && d_wts && d_h && d_slot_of && d_seq && d_gids && d_nmiss && mb && h_host,
                      "hybrid_publish: missing buffer");
    hybrid_publish_kernel<<<1, PUBLISH_THREADS, 0, hmoe_cu_stream(stream)>>>(d_ids, d_wts, k, d_h, n, d_slot_of, n_expert,
                                                                            d_seq, d_gids, d_nmiss, mb, h_host);
    HMOE_CUDA_LAUNCH_CHECK(err, "hybrid_publish");
    return HMOE_OK;
}

extern "C" enum hmoe_status hmoe_cuda_hybrid_wait_add(const int32_t *d_nmiss, const uint32_t *d_seq,
                                                      struct hmoe_cuda_mailbox *mb, const float *res_host, float *d_x,
                                                      int64_t n, int timeout_ms, void *stream, struct hmoe_err *err) {
    HMOE_CUDA_REQUIRE(err, d_nmiss && d_seq && mb && res_host && d_x && n > 0 && timeout_ms > 0,
                      "hybrid_wait_add: missing buffer or bad size");
    hybrid_wait_add_kernel<<<1, WAIT_THREADS, 0, hmoe_cu_stream(stream)>>>(d_nmiss, d_seq, mb, res_host, d_x, n,
                                                                          (uint64_t)timeout_ms * 1000000ull);
    HMOE_CUDA_LAUNCH_CHECK(err, "hybrid_wait_add");
    return HMOE_OK;
}

__global__ void moe_map_ids_kernel(const int32_t *__restrict__ ids, int64_t n, const int32_t *__restrict__ map, int E,
                                   int32_t *__restrict__ out) {
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const int e = ids[i];
    out[i] = (e >= 0 && e < E) ? map[e] : -1;
}

extern "C" enum hmoe_status hmoe_cuda_moe_map_ids(const int32_t *d_ids, int64_t n, const int32_t *d_map, int n_expert,
                                                  int32_t *d_out, void *stream, struct hmoe_err *err) {
    HMOE_CUDA_REQUIRE(err, n >= 0 && n_expert > 0 && d_ids && d_map && d_out, "moe_map_ids: bad arguments");
    if (n == 0) return HMOE_OK;
    moe_map_ids_kernel<<<(unsigned)hmoe_cu_div_up(n, 256), 256, 0, hmoe_cu_stream(stream)>>>(d_ids, n, d_map, n_expert,
                                                                                           d_out);
    HMOE_CUDA_LAUNCH_CHECK(err, "moe_map_ids");
    return HMOE_OK;
}
