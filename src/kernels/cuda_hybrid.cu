/* cuda_hybrid.cu — the GPU half of the per-layer CPU/GPU handoff of a hybrid decode step
 * (cuda.h "Hybrid CPU+GPU handoff"; the CPU half is src/sched/hybrid_cpu.c).
 *  publish    one block: map the token's k experts to GPU cache slots (-1 = miss), and when
 *             anything misses copy the normalised hidden state into the layer's mapped host
 *             buffer; every writer fences (system scope) before the block barrier, then one
 *             thread writes the sequence flag, so the CPU never sees the flag before the data.
 *  wait_add   one block: skip when nothing missed; else one thread spins on the CPU's flag in
 *             mapped memory (globaltimer bounds the wait), then the block adds the CPU's result
 *             vector to the residual stream with uncached loads; the wait statistics are
 *             written last (off the critical path).
 *  clock      the ping-pong that calibrates globaltimer against the host clock, so the stamps
 *             of publish and wait_add give the handoff latency in each direction.
 * Both read the per-token sequence number from device memory so the graph never changes.
 *  xfer_copy  --moe-miss transfer: the missed experts read from the pinned mapping over PCIe into
 *             scratch slots 1..k (the GPU then computes them like hits; slot 0 stays all zeros
 *             and stands for the selections that are not transferred).
 *  prefetch   plan (one warp: top-k of the next layer's router logits, victims under the layer's
 *             lock) and copy (many blocks; the last one enters the copied experts in the map).
 */
#include "kernels/cuda_impl.cuh"

__device__ __forceinline__ uint64_t hyb_globaltimer(void) {
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

#define PUBLISH_THREADS 256
#define WAIT_THREADS 512

__device__ __forceinline__ void hyb_lock(int32_t *lock) {
    while (atomicCAS(lock, 0, 1) != 0) {}
    __threadfence();
}
__device__ __forceinline__ void hyb_unlock(int32_t *lock) {
    __threadfence();
    atomicExch(lock, 0);
}

__global__ void __launch_bounds__(PUBLISH_THREADS)
    hybrid_publish_kernel(const int32_t *__restrict__ ids, const float *__restrict__ wts, int k, const float *__restrict__ h,
                          int64_t n, const int32_t *slot_of, int E, const uint32_t *__restrict__ seq,
                          int32_t *gids, int32_t *nmiss, struct hmoe_cuda_mailbox *mb, float *h_host,
                          struct hmoe_cuda_publish_opts o) {
    __shared__ int s_nmiss;
    const int tid = threadIdx.x;
    if (tid == 0) {
        s_nmiss = 0;
        if (o.lock) { /* a prefetch may be changing this layer's map: read it under the lock */
            hyb_lock(o.lock);
            *(volatile int32_t *)o.closed = (int32_t)*seq;
        }
    }
    __syncthreads();
    if (tid < k) {
        const int e = ids[tid];
        const int s = (e >= 0 && e < E) ? ((volatile const int32_t *)slot_of)[e] : -1;
        gids[tid] = s;
        mb->ids[tid] = e;
        mb->wts[tid] = wts[tid];
        mb->miss[tid] = s < 0 && !o.transfer;
        /* miss j -> scratch slot j + 1; a hit (or a bad id) names the zero slot 0, never -1: the
         * expert kernels read the slot an id names even at weight 0, and stale bytes there can be
         * Inf/NaN scales (0 x NaN = NaN) */
        if (o.transfer) o.xfer_gids[tid] = s < 0 && e >= 0 && e < E ? tid + 1 : 0;
        if (s < 0) atomicAdd(&s_nmiss, 1);
    }
    __syncthreads();
    if (tid == 0 && o.lock) hyb_unlock(o.lock);
    const int nm = s_nmiss;
    if (nm > 0 && !o.transfer)
        for (int64_t i = tid; i < n; i += PUBLISH_THREADS) h_host[i] = h[i];
    if (o.h_snap)
        for (int64_t i = tid; i < n; i += PUBLISH_THREADS) o.h_snap[i] = h[i];
    uint64_t t_pub = 0;
    if (tid == 0) {
        *nmiss = o.transfer ? 0 : nm;
        mb->n_miss = o.transfer ? 0 : nm;
        mb->n_xfer = o.transfer ? nm : 0;
        mb->k = k;
        t_pub = hyb_globaltimer(); /* (the fence and the barrier are part of the handoff) */
    }
    __threadfence_system();
    __syncthreads();
    if (tid == 0) {
        *(volatile uint32_t *)&mb->gpu_seq = *seq;
        mb->t_pub_ns = t_pub; /* read by the host after the step, not with the flag */
    }
}

__global__ void __launch_bounds__(WAIT_THREADS)
    hybrid_wait_add_kernel(const int32_t *__restrict__ nmiss, const uint32_t *__restrict__ seq,
                           struct hmoe_cuda_mailbox *mb, const float *res, float *__restrict__ x, int64_t n,
                           uint64_t timeout_ns) {
    __shared__ int s_ok;
    if (*nmiss == 0) return;
    const int tid = threadIdx.x;
    uint64_t t0 = 0, t_seen = 0;
    if (tid == 0) {
        const uint32_t want = *seq;
        const volatile uint32_t *flag = &mb->cpu_seq;
        t0 = hyb_globaltimer();
        uint64_t t = t0;
        while (*flag != want) {
            t = hyb_globaltimer();
            if (t - t0 > timeout_ns) break;
        }
        const int ok = *flag == want;
        t_seen = hyb_globaltimer();
        /* acquire: the result is read after the flag. The statistics are written after the add
         * (read by the host after the step), so no host write is pending at this fence. */
        __threadfence_system();
        s_ok = ok;
    }
    __syncthreads();
    if (!s_ok) {
        if (tid == 0) {
            mb->gpu_wait_ns = t_seen - t0;
            mb->timed_out = 1;
        }
        return;
    }
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
    if (tid == 0) {
        mb->gpu_wait_ns = t_seen - t0;
        mb->t_seen_ns = t_seen;
    }
}

__global__ void hybrid_clock_kernel(struct hmoe_cuda_clock_sync *cs, int rounds, uint64_t timeout_ns) {
    if (threadIdx.x != 0) return;
    volatile uint32_t *ping = &cs->ping, *pong = &cs->pong;
    const uint64_t t0 = hyb_globaltimer();
    for (uint32_t i = 1; i <= (uint32_t)rounds; i++) {
        while (*ping != i)
            if (hyb_globaltimer() - t0 > timeout_ns) return;
        *(volatile uint64_t *)&cs->gpu_ns = hyb_globaltimer();
        __threadfence_system();
        *pong = i;
    }
}

extern "C" enum hmoe_status hmoe_cuda_hybrid_clock_probe(struct hmoe_cuda_clock_sync *cs, int n_rounds, int timeout_ms,
                                                         void *stream, struct hmoe_err *err) {
    HMOE_CUDA_REQUIRE(err, cs && n_rounds > 0 && timeout_ms > 0, "hybrid_clock_probe: bad arguments");
    hybrid_clock_kernel<<<1, 32, 0, hmoe_cu_stream(stream)>>>(cs, n_rounds, (uint64_t)timeout_ms * 1000000ull);
    HMOE_CUDA_LAUNCH_CHECK(err, "hybrid_clock_probe");
    return HMOE_OK;
}

extern "C" enum hmoe_status hmoe_cuda_hybrid_publish_ex(const int32_t *d_ids, const float *d_wts, int k, const float *d_h,
                                                        int64_t n, const int32_t *d_slot_of, int n_expert,
                                                        const uint32_t *d_seq, int32_t *d_gids, int32_t *d_nmiss,
                                                        struct hmoe_cuda_mailbox *mb, float *h_host,
                                                        const struct hmoe_cuda_publish_opts *o, void *stream,
                                                        struct hmoe_err *err) {
    HMOE_CUDA_REQUIRE(err, k >= 1 && k <= HMOE_CUDA_MAILBOX_MAX_K && n > 0 && n_expert > 0,
                      "hybrid_publish: bad k (1..%d), n or n_expert", HMOE_CUDA_MAILBOX_MAX_K);
    HMOE_CUDA_REQUIRE(err, d_ids && d_wts && d_h && d_slot_of && d_seq && d_gids && d_nmiss && mb && h_host,
                      "hybrid_publish: missing buffer");
    struct hmoe_cuda_publish_opts oo = {};
    if (o) oo = *o;
    HMOE_CUDA_REQUIRE(err, (!oo.transfer || oo.xfer_gids) && (!oo.lock == !oo.closed),
                      "hybrid_publish: transfer needs xfer_gids, lock needs closed");
    hybrid_publish_kernel<<<1, PUBLISH_THREADS, 0, hmoe_cu_stream(stream)>>>(d_ids, d_wts, k, d_h, n, d_slot_of, n_expert,
                                                                            d_seq, d_gids, d_nmiss, mb, h_host, oo);
    HMOE_CUDA_LAUNCH_CHECK(err, "hybrid_publish");
    return HMOE_OK;
}

extern "C" enum hmoe_status hmoe_cuda_hybrid_publish(const int32_t *d_ids, const float *d_wts, int k, const float *d_h,
                                                     int64_t n, const int32_t *d_slot_of, int n_expert,
                                                     const uint32_t *d_seq, int32_t *d_gids, int32_t *d_nmiss,
                                                     struct hmoe_cuda_mailbox *mb, float *h_host, void *stream,
                                                     struct hmoe_err *err) {
    return hmoe_cuda_hybrid_publish_ex(d_ids, d_wts, k, d_h, n, d_slot_of, n_expert, d_seq, d_gids, d_nmiss, mb, h_host,
                                       NULL, stream, err);
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

/* One block: clear, then scatter (a map is one-to-one, so no two experts write one entry). */
__global__ void moe_invert_map_kernel(const int32_t *__restrict__ map, int E, int32_t *__restrict__ inv, int n_inv) {
    for (int i = threadIdx.x; i < n_inv; i += blockDim.x) inv[i] = -1;
    __syncthreads();
    for (int e = threadIdx.x; e < E; e += blockDim.x) {
        const int i = map[e];
        if (i >= 0 && i < n_inv) inv[i] = e;
    }
}

extern "C" enum hmoe_status hmoe_cuda_moe_invert_map(const int32_t *d_map, int n_expert, int32_t *d_inv, int n_inv,
                                                     void *stream, struct hmoe_err *err) {
    HMOE_CUDA_REQUIRE(err, n_expert > 0 && n_inv >= 0 && d_map && d_inv, "moe_invert_map: bad arguments");
    if (n_inv == 0) return HMOE_OK;
    moe_invert_map_kernel<<<1, 256, 0, hmoe_cu_stream(stream)>>>(d_map, n_expert, d_inv, n_inv);
    HMOE_CUDA_LAUNCH_CHECK(err, "moe_invert_map");
    return HMOE_OK;
}

/* --- transfer and prefetch copies ------------------------------------------------------------- */

#define COPY_BLOCKS 48
#define COPY_THREADS 256

/* dst[0, bytes) = src[0, bytes) by the whole grid; 16-byte units (both 16-byte aligned), 4 loads
 * in flight per thread so the PCIe reads overlap. */
__device__ __forceinline__ void hyb_grid_copy(uint8_t *dst, const uint8_t *src, size_t bytes) {
    const int4 *s4 = (const int4 *)src;
    int4 *d4 = (int4 *)dst;
    const size_t n = bytes / 16, stride = (size_t)gridDim.x * blockDim.x;
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    for (; i + 3 * stride < n; i += 4 * stride) {
        const int4 a = __ldcv(s4 + i), b = __ldcv(s4 + i + stride), c = __ldcv(s4 + i + 2 * stride),
                   d = __ldcv(s4 + i + 3 * stride);
        d4[i] = a, d4[i + stride] = b, d4[i + 2 * stride] = c, d4[i + 3 * stride] = d;
    }
    for (; i < n; i += stride) d4[i] = __ldcv(s4 + i);
    if (blockIdx.x == 0)
        for (size_t j = n * 16 + threadIdx.x; j < bytes; j += blockDim.x) dst[j] = src[j];
}

__global__ void __launch_bounds__(COPY_THREADS)
    hybrid_xfer_copy_kernel(const int32_t *__restrict__ ids, const int32_t *__restrict__ gids, int k, int n_expert,
                            struct hmoe_cuda_expert_src src, uint8_t *d0, uint8_t *d1, uint8_t *d2) {
    uint8_t *dst[3] = {d0, d1, d2};
    for (int j = 0; j < k; j++) {
        if (gids[j] >= 0) continue;
        const int e = ids[j];
        if (e < 0 || e >= n_expert) continue; /* never read outside the layer's experts */
        for (int p = 0; p < 3; p++)
            hyb_grid_copy(dst[p] + (size_t)j * src.bytes[p], src.base[p] + (size_t)e * src.bytes[p], src.bytes[p]);
    }
}

extern "C" enum hmoe_status hmoe_cuda_hybrid_xfer_copy(const int32_t *d_ids, const int32_t *d_gids, int k, int n_expert,
                                                       const struct hmoe_cuda_expert_src *src, uint8_t *const dst[3],
                                                       void *stream, struct hmoe_err *err) {
    HMOE_CUDA_REQUIRE(err, d_ids && d_gids && src && dst && dst[0] && dst[1] && dst[2] && k >= 1 && k <= 32 && n_expert > 0,
                      "hybrid_xfer_copy: missing buffer, bad k or n_expert");
    for (int p = 0; p < 3; p++)
        HMOE_CUDA_REQUIRE(err, src->base[p] && hmoe_cu_aligned(src->base[p], 16) && src->bytes[p] % 16 == 0 &&
                                   hmoe_cu_aligned(dst[p], 16),
                          "hybrid_xfer_copy: sources and slots must be 16-byte aligned");
    hybrid_xfer_copy_kernel<<<COPY_BLOCKS, COPY_THREADS, 0, hmoe_cu_stream(stream)>>>(d_ids, d_gids, k, n_expert, *src,
                                                                                     dst[0], dst[1], dst[2]);
    HMOE_CUDA_LAUNCH_CHECK(err, "hybrid_xfer_copy");
    return HMOE_OK;
}

/* One warp. */
__global__ void hybrid_prefetch_plan_kernel(struct hmoe_cuda_prefetch_args a) {
    __shared__ int32_t s_pred[HMOE_CUDA_MAILBOX_MAX_K];
    __shared__ unsigned char s_taken[512];
    const int lane = threadIdx.x;
    for (int e = lane; e < a.n_expert; e += 32) s_taken[e] = 0;
    __syncwarp();
    /* top k by repeated arg-max (lowest index on ties, like the router) */
    for (int j = 0; j < a.k; j++) {
        float best = -INFINITY;
        int bi = 0x7fffffff;
        for (int e = lane; e < a.n_expert; e += 32) {
            const float v = a.logits[e];
            if (!s_taken[e] && (v > best || (v == best && e < bi))) best = v, bi = e;
        }
        for (int off = 16; off; off >>= 1) {
            const float ov = __shfl_xor_sync(0xffffffffu, best, off);
            const int oi = __shfl_xor_sync(0xffffffffu, bi, off);
            if (ov > best || (ov == best && oi < bi)) best = ov, bi = oi;
        }
        if (lane == 0) {
            const int e = bi < a.n_expert ? bi : 0;
            s_pred[j] = e;
            s_taken[e] = 1;
        }
        __syncwarp();
    }
    if (lane != 0) return;
    const uint32_t seq = *a.seq;
    int nf = 0;
    hyb_lock(a.lock);
    if (*(volatile int32_t *)a.closed != (int32_t)seq) {
        int c = 0;
        for (int j = 0; j < a.k && nf < a.max_fill; j++) {
            const int e = s_pred[j];
            if (((volatile int32_t *)a.map)[e] >= 0) continue;
            bool queued = false;
            for (int q = 0; q < nf; q++) queued |= a.d_queue[1 + 2 * q] == e;
            if (queued) continue;
            while (c < a.n_cand && a.cand_slot[c] >= 0 && a.cand_expert[c] >= 0 && s_taken[a.cand_expert[c]]) c++;
            if (c >= a.n_cand || a.cand_slot[c] < 0) break; /* (slot -1 ends the list) */
            const int s = a.cand_slot[c], v = a.cand_expert[c];
            c++;
            if (v >= 0 && ((volatile int32_t *)a.map)[v] == s) ((volatile int32_t *)a.map)[v] = -1;
            a.d_queue[1 + 2 * nf] = e;
            a.d_queue[2 + 2 * nf] = s;
            a.rec->expert[nf] = e;
            a.rec->slot[nf] = s;
            a.rec->victim[nf] = v;
            nf++;
        }
    }
    a.d_queue[0] = nf;
    hyb_unlock(a.lock);
    for (int j = 0; j < a.k; j++) a.rec->pred[j] = s_pred[j];
    a.rec->n_pred = a.k;
    a.rec->n_fill = nf;
    __threadfence_system();
    *(volatile uint32_t *)&a.rec->seq = seq;
}

extern "C" enum hmoe_status hmoe_cuda_hybrid_prefetch_plan(const struct hmoe_cuda_prefetch_args *a, void *stream,
                                                           struct hmoe_err *err) {
    HMOE_CUDA_REQUIRE(err, a && a->logits && a->map && a->lock && a->closed && a->seq && a->rec && a->d_queue &&
                               a->n_expert > 0 && a->n_expert <= 512 && a->k >= 1 && a->k <= HMOE_CUDA_MAILBOX_MAX_K &&
                               a->k <= a->n_expert && a->max_fill >= 0 && a->max_fill <= HMOE_CUDA_PREFETCH_MAX &&
                               a->n_cand >= 0 && (a->n_cand == 0 || (a->cand_slot && a->cand_expert)),
                      "hybrid_prefetch_plan: bad arguments");
    hybrid_prefetch_plan_kernel<<<1, 32, 0, hmoe_cu_stream(stream)>>>(*a);
    HMOE_CUDA_LAUNCH_CHECK(err, "hybrid_prefetch_plan");
    return HMOE_OK;
}

__global__ void __launch_bounds__(COPY_THREADS)
    hybrid_prefetch_copy_kernel(const int32_t *__restrict__ queue, struct hmoe_cuda_expert_src src, uint8_t *d0,
                                uint8_t *d1, uint8_t *d2, int32_t *map, unsigned int *counter) {
    const int n = queue[0];
    if (n <= 0) return;
    uint8_t *dst[3] = {d0, d1, d2};
    for (int q = 0; q < n; q++) {
        const int e = queue[1 + 2 * q], s = queue[2 + 2 * q];
        if (e < 0 || s < 0) continue; /* (the plan only queues valid pairs) */
        for (int p = 0; p < 3; p++)
            hyb_grid_copy(dst[p] + (size_t)s * src.bytes[p], src.base[p] + (size_t)e * src.bytes[p], src.bytes[p]);
    }
    /* the last block to finish enters the experts in the map */
    __threadfence();
    __syncthreads();
    __shared__ bool s_last;
    if (threadIdx.x == 0) s_last = atomicAdd(counter, 1u) == gridDim.x - 1;
    __syncthreads();
    if (!s_last) return;
    if (threadIdx.x == 0) {
        __threadfence();
        for (int q = 0; q < n; q++) ((volatile int32_t *)map)[queue[1 + 2 * q]] = queue[2 + 2 * q];
        __threadfence();
        *counter = 0;
    }
}

extern "C" enum hmoe_status hmoe_cuda_hybrid_prefetch_copy(const int32_t *d_queue, const struct hmoe_cuda_expert_src *src,
                                                           uint8_t *const dst[3], int32_t *map, unsigned int *counter,
                                                           void *stream, struct hmoe_err *err) {
    HMOE_CUDA_REQUIRE(err, d_queue && src && dst && dst[0] && dst[1] && dst[2] && map && counter,
                      "hybrid_prefetch_copy: missing buffer");
    for (int p = 0; p < 3; p++)
        HMOE_CUDA_REQUIRE(err, src->base[p] && hmoe_cu_aligned(src->base[p], 16) && src->bytes[p] % 16 == 0 &&
                                   hmoe_cu_aligned(dst[p], 16),
                          "hybrid_prefetch_copy: sources and slots must be 16-byte aligned");
    hybrid_prefetch_copy_kernel<<<COPY_BLOCKS, COPY_THREADS, 0, hmoe_cu_stream(stream)>>>(d_queue, *src, dst[0], dst[1],
                                                                                         dst[2], map, counter);
    HMOE_CUDA_LAUNCH_CHECK(err, "hybrid_prefetch_copy");
    return HMOE_OK;
}
