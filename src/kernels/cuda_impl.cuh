/* cuda_impl.cuh — private to the .cu files of src/kernels: error wrapping, launch checks and the small
 * device helpers every kernel family shares (warp reductions, fp16 conversion, the
 * integer intrinsics with host twins so the per-type math in cuda_types.cuh can also be
 * compiled and checked on a CPU).
 * Relies on cuda.h (public API) and quant_blocks.h; host twins follow the PTX ISA semantics of
 * dp4a / vsub4 / byte_perm (byte selectors 0-7 only).
 */
#ifndef HMOE_KERNELS_CUDA_IMPL_CUH
#define HMOE_KERNELS_CUDA_IMPL_CUH

#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <string.h>

extern "C" {
#include "hmoe/cuda.h"
#include "hmoe/fp16.h"
#include "hmoe/quant_blocks.h"
}

#define HMOE_HD __host__ __device__ __forceinline__
#define HMOE_D __device__ __forceinline__
/* "#pragma unroll" for code that the host compiler sees too (it does not know the pragma). */
#ifdef __CUDA_ARCH__
#define HMOE_UNROLL _Pragma("unroll")
#else
#define HMOE_UNROLL
#endif

/* Report the last launch error (cudaGetLastError is capture-safe: it does not touch the stream). */
#define HMOE_CUDA_LAUNCH_CHECK(err, what)                                                                     \
    do {                                                                                                      \
        cudaError_t e_ = cudaGetLastError();                                                                  \
        if (e_ != cudaSuccess)                                                                                \
            return HMOE_RAISE(err, HMOE_ERR_DEVICE, "%s: kernel launch failed: %s", what, cudaGetErrorString(e_)); \
    } while (0)

#define HMOE_CUDA_TRY(err, call)                                                                              \
    do {                                                                                                      \
        cudaError_t e_ = (call);                                                                              \
        if (e_ != cudaSuccess)                                                                                \
            return HMOE_RAISE(err, HMOE_ERR_DEVICE, "%s failed: %s", #call, cudaGetErrorString(e_));          \
    } while (0)

/* Precondition of a launcher: HMOE_ERR_ARG naming the function and the rule. */
#define HMOE_CUDA_REQUIRE(err, cond, ...)                                                                     \
    do {                                                                                                      \
        if (!(cond)) return HMOE_RAISE(err, HMOE_ERR_ARG, __VA_ARGS__);                                       \
    } while (0)

static inline cudaStream_t hmoe_cu_stream(void *s) { return (cudaStream_t)s; }
static inline bool hmoe_cu_aligned(const void *p, size_t a) { return ((uintptr_t)p % a) == 0; }
static inline int64_t hmoe_cu_div_up(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* ---- scalar conversions usable on host and device ---- */
HMOE_HD float hmoe_cu_h2f(uint16_t h) {
#ifdef __CUDA_ARCH__
    return __half2float(__ushort_as_half(h)); /* exact, subnormals included (cvt.f32.f16) */
#else
    return hmoe_fp16_to_f32(h);
#endif
}

HMOE_HD uint16_t hmoe_cu_f2h(float f) {
#ifdef __CUDA_ARCH__
    return __half_as_ushort(__float2half_rn(f));
#else
    return hmoe_f32_to_fp16(f);
#endif
}

HMOE_HD float hmoe_cu_bits_f(uint32_t u) {
#ifdef __CUDA_ARCH__
    return __uint_as_float(u);
#else
    return hmoe_f32_from_bits(u);
#endif
}

/* ---- loads from packed blocks: 2-byte aligned (most blocks), 4-byte, 16-byte ---- */
HMOE_HD uint32_t hmoe_cu_ld_u8(const uint8_t *p) {
#ifdef __CUDA_ARCH__
    return __ldg(p);
#else
    return *p;
#endif
}
HMOE_HD uint32_t hmoe_cu_ld_u16(const uint8_t *p) {
#ifdef __CUDA_ARCH__
    return __ldg((const unsigned short *)p);
#else
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
#endif
}
/* 32 bits from a 2-byte aligned address. */
HMOE_HD uint32_t hmoe_cu_ld_u32a2(const uint8_t *p) { return hmoe_cu_ld_u16(p) | (hmoe_cu_ld_u16(p + 2) << 16); }
/* 32 bits from a 4-byte aligned address. */
HMOE_HD uint32_t hmoe_cu_ld_u32a4(const uint8_t *p) {
#ifdef __CUDA_ARCH__
    return __ldg((const unsigned int *)p);
#else
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
#endif
}
/* A 17-byte MXFP4 block at any address: its scale byte and its 16 code bytes as four words.
 * On the device five aligned 32-bit loads and funnel shifts instead of seventeen byte loads:
 * the block's bytes lie in the five aligned words from its address rounded down (its last byte
 * at offset r + 16 <= 19); the last word may reach 3 bytes past the block, inside the buffer
 * because device buffers are whole 16-byte words (hmoe_cuda_buf_alloc) and an expert stack or
 * matrix ends on a 16-byte boundary or is followed by more of its buffer. */
HMOE_HD void hmoe_cu_ld_block17(const uint8_t *b, uint32_t *scale_byte, uint32_t q[4]) {
#ifdef __CUDA_ARCH__
    const uintptr_t a = (uintptr_t)b;
    const unsigned int *p = (const unsigned int *)(a & ~(uintptr_t)3);
    const unsigned r = (unsigned)(a & 3);
    uint32_t w[5];
#pragma unroll
    for (int i = 0; i < 5; i++) w[i] = __ldg(p + i);
    *scale_byte = (w[0] >> (8 * r)) & 0xff;
    /* code word i starts at byte r + 1 + 4i of the window: word (r + 1) / 4 + i, shifted by (r + 1) % 4 bytes */
    const bool next = r == 3;
    const unsigned sh = 8 * ((r + 1) & 3);
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const uint32_t lo = next ? w[i + 1] : w[i];
        const uint32_t hi = next ? (i < 3 ? w[i + 2] : 0u) : w[i + 1];
        q[i] = __funnelshift_r(lo, hi, sh);
    }
#else
    *scale_byte = b[0];
    memcpy(q, b + 1, 16);
#endif
}
/* 16 bytes from a 16-byte aligned address, as four little-endian words. */
HMOE_HD void hmoe_cu_ld_u128(const uint8_t *p, uint32_t v[4]) {
#ifdef __CUDA_ARCH__
    int4 t = __ldg((const int4 *)p);
    v[0] = (uint32_t)t.x, v[1] = (uint32_t)t.y, v[2] = (uint32_t)t.z, v[3] = (uint32_t)t.w;
#else
    memcpy(v, p, 16);
#endif
}
/* Activation quants: rows are 16-byte aligned and offsets multiples of 4/8/16. */
HMOE_HD int hmoe_cu_act1(const int8_t *a, int off) {
#ifdef __CUDA_ARCH__
    return *(const int *)(a + off);
#else
    int v;
    memcpy(&v, a + off, 4);
    return v;
#endif
}
HMOE_HD void hmoe_cu_act2(const int8_t *a, int off, int v[2]) {
#ifdef __CUDA_ARCH__
    int2 t = *(const int2 *)(a + off);
    v[0] = t.x, v[1] = t.y;
#else
    memcpy(v, a + off, 8);
#endif
}
HMOE_HD void hmoe_cu_act4(const int8_t *a, int off, int v[4]) {
#ifdef __CUDA_ARCH__
    int4 t = *(const int4 *)(a + off);
    v[0] = t.x, v[1] = t.y, v[2] = t.z, v[3] = t.w;
#else
    memcpy(v, a + off, 16);
#endif
}

/* ---- SIMD-in-a-word integer ops ---- */
/* c + sum of the four signed byte products of a and b. */
HMOE_HD int hmoe_cu_dp4a(int a, int b, int c) {
#ifdef __CUDA_ARCH__
    return __dp4a(a, b, c);
#else
    for (int i = 0; i < 4; i++) c += (int)(int8_t)(a >> (8 * i)) * (int)(int8_t)(b >> (8 * i));
    return c;
#endif
}
/* Per-byte a - b modulo 256. */
HMOE_HD uint32_t hmoe_cu_vsub4(uint32_t a, uint32_t b) {
#ifdef __CUDA_ARCH__
    return __vsub4(a, b);
#else
    uint32_t r = 0;
    for (int i = 0; i < 4; i++) r |= (((a >> (8 * i)) - (b >> (8 * i))) & 0xffu) << (8 * i);
    return r;
#endif
}
/* Bytes of the 8-byte value {hi:lo} picked by the selector nibbles of s (values 0-7 only). */
HMOE_HD uint32_t hmoe_cu_byte_perm(uint32_t lo, uint32_t hi, uint32_t s) {
#ifdef __CUDA_ARCH__
    return __byte_perm(lo, hi, s);
#else
    uint64_t v = ((uint64_t)hi << 32) | lo;
    uint32_t r = 0;
    for (int i = 0; i < 4; i++) r |= (uint32_t)((v >> (8 * ((s >> (4 * i)) & 7))) & 0xff) << (8 * i);
    return r;
#endif
}
HMOE_HD int hmoe_cu_popc(uint32_t x) {
#ifdef __CUDA_ARCH__
    return __popc(x);
#else
    return __builtin_popcount(x);
#endif
}

/* Four bits -> four bytes of 0x00 / 0xff (bit i -> byte i). */
HMOE_HD uint32_t hmoe_cu_expand4(uint32_t b4) { return ((b4 * 0x00204081u) & 0x01010101u) * 0xffu; }
/* Four bits -> four bytes of 0 / 1. */
HMOE_HD uint32_t hmoe_cu_spread4(uint32_t b4) { return (b4 * 0x00204081u) & 0x01010101u; }

/* Apply 8 signs (bit k set -> negate byte k) to 8 unsigned magnitudes (< 128) in two words. */
HMOE_HD void hmoe_cu_apply_signs(uint32_t sign8, uint32_t *lo, uint32_t *hi) {
    uint32_t m0 = hmoe_cu_expand4(sign8 & 0xf), m1 = hmoe_cu_expand4((sign8 >> 4) & 0xf);
    *lo = hmoe_cu_vsub4(*lo ^ m0, m0);
    *hi = hmoe_cu_vsub4(*hi ^ m1, m1);
}

/* 8 nibbles -> 8 signed bytes through a 16-entry int8 table held as 4 words (t[0] = entries
 * 0-3, ...). q holds one nibble per byte in bits 0-3 (already masked with 0x0f0f0f0f). */
HMOE_HD uint32_t hmoe_cu_lut16(uint32_t q, const uint32_t t[4]) {
    uint32_t q3 = q & 0x07070707u;
    uint32_t sel = (q3 & 0x7u) | ((q3 >> 4) & 0x70u) | ((q3 >> 8) & 0x700u) | ((q3 >> 12) & 0x7000u);
    uint32_t v_lo = hmoe_cu_byte_perm(t[0], t[1], sel), v_hi = hmoe_cu_byte_perm(t[2], t[3], sel);
    uint32_t m = ((q >> 3) & 0x01010101u) * 0xffu;
    return (v_lo & ~m) | (v_hi & m);
}

/* ---- warp helpers (device only) ---- */
#ifdef __CUDACC__
__device__ __forceinline__ float hmoe_warp_sum(float v) {
HMOE_UNROLL
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float hmoe_warp_max(float v) {
HMOE_UNROLL
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
/* The gated activation of an expert's gate / up values (cuda.h HMOE_CUDA_ACT_*): silu(g) * u,
 * or the clamped form g' sigmoid(1.702 g') (u' + 1) with g' = min(g, 7), u' = clamp(u, -7, 7)
 * (same operations as the CPU experts). */
__device__ __forceinline__ float hmoe_cu_glu(int act, float g, float u) {
    if (act == HMOE_CUDA_ACT_SWIGLU_OAI) {
        const float x = g < 7.0f ? g : 7.0f, y = u < -7.0f ? -7.0f : u > 7.0f ? 7.0f : u;
        return x / (1.0f + expf(-1.702f * x)) * (y + 1.0f);
    }
    return g / (1.0f + expf(-g)) * u;
}
/* Quantize the 32 values held one per lane; lane 0 writes the {d, s} pair. Used by the
 * activation quantizer and the norm / attention kernels that emit q8_1 directly. */
__device__ __forceinline__ void hmoe_cu_q8_1_warp(float v, int8_t *qs_block, float2 *ds_block) {
    const int lane = threadIdx.x & 31;
    float amax = hmoe_warp_max(fabsf(v));
    float d = amax / 127.0f, id = amax > 0.0f ? 127.0f / amax : 0.0f;
    int q = __float2int_rn(v * id);
    q = max(-127, min(127, q));
    qs_block[lane] = (int8_t)q;
    int sum = q;
HMOE_UNROLL
    for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    if (lane == 0) *ds_block = make_float2(d, d * (float)sum);
}
#endif

/* q8_1 row layout (cuda.h): quants first, then {d, s} float pairs, padded to 16 bytes. */
HMOE_HD size_t hmoe_cu_q8_1_row_bytes(int64_t n) { return (size_t)(((n + 8 * (n / 32)) + 15) / 16 * 16); }

#ifdef __CUDACC__
/* ---- fused decode helpers (cuda.h "Fused decode launchers") ---- */

/* Last block done: every thread of the block calls this after its global writes. True in the
 * one block that arrives last of the `nblocks` sharing *cnt; that block resets *cnt to 0 (so a
 * graph replays) and may read the others' writes through L2 (__ldcg: never through L1). The
 * barrier orders the block's writes before thread 0's fence, which publishes them all (a fence
 * in every thread cost microseconds per launch). */
__device__ __forceinline__ bool hmoe_cu_last_block(unsigned int *cnt, unsigned int nblocks) {
    __shared__ bool s_last;
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence();
        const bool last = atomicAdd(cnt, 1u) == nblocks - 1;
        if (last) atomicExch(cnt, 0u);
        s_last = last;
    }
    __syncthreads();
    const bool last = s_last;
    if (last) __threadfence();
    return last;
}

/* Launch kernel k (one place for every launcher of the decode chain). */
template <typename... KArgs, typename... Args>
static inline void hmoe_cu_launch(void (*k)(KArgs...), dim3 grid, dim3 block, size_t smem, cudaStream_t st,
                                  Args... args) {
    k<<<grid, block, smem, st>>>(args...);
}
#endif

#endif
