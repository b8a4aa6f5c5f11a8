/* cuda_kv_codec.cuh — private to src/kernels: the KV cache row formats of the GPU (F32, F16, BF16,
 * Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL; quants.md §0, §3, §5.8), one codec struct per type:
 *   BB                      bytes per 32 elements (a block; the float types use 32 elements too)
 *   load<N>(row, c, x)      elements c .. c+N-1 of a row as f32 (N = 1, 2, 4 or 8, c % N == 0),
 *                           bit-identical to the type's dequant_ref (every scale x quant product
 *                           is exact in f32, so FMA contraction changes nothing)
 *   store(v, blk, st)       one warp, lane = element of a 32-element block: quantizes the block
 *                           as the CPU cache store does (hmoe_cpu_attn_kv_store: the activation
 *                           quantizer for F16 / BF16 / Q8_0, the weight quantizer for the 4- and
 *                           5-bit types), writes it to blk when st, and returns the value a reader
 *                           decodes
 * Attention kernels take a codec through a template parameter: kv_with<T>(type, f) calls f with
 * codec T, or (T == HMOE_KV_ANY) switches on the run-time type once, outside the loop over a tile.
 * Rows start at multiples of BB * head_dim / 32 bytes from a 16-byte aligned base: F16 / BF16 /
 * F32 rows are 16-byte aligned, Q4_1 / Q5_1 4-byte, Q8_0 / Q4_0 / Q5_0 / IQ4_NL 2-byte.
 */
#ifndef HMOE_KERNELS_CUDA_KV_CODEC_CUH
#define HMOE_KERNELS_CUDA_KV_CODEC_CUH

#include <cuda_bf16.h>

#include "kernels/cuda_impl.cuh"
#include "kernels/iq_tables.h"

#define HMOE_KV_ANY (-1)

/* Whether the GPU cache takes this type (host and device). */
HMOE_HD bool hmoe_cu_kv_type_ok(int t) {
    return t == HMOE_TYPE_F32 || t == HMOE_TYPE_F16 || t == HMOE_TYPE_BF16 || t == HMOE_TYPE_Q8_0 || t == HMOE_TYPE_Q4_0 ||
           t == HMOE_TYPE_Q4_1 || t == HMOE_TYPE_Q5_0 || t == HMOE_TYPE_Q5_1 || t == HMOE_TYPE_IQ4_NL;
}
/* Bytes per 32 elements (0: not a cache type). */
HMOE_HD int hmoe_cu_kv_block_bytes(int t) {
    switch (t) {
    case HMOE_TYPE_F32: return 128;
    case HMOE_TYPE_F16:
    case HMOE_TYPE_BF16: return 64;
    case HMOE_TYPE_Q8_0: return 34;
    case HMOE_TYPE_Q4_0:
    case HMOE_TYPE_IQ4_NL: return 18;
    case HMOE_TYPE_Q4_1: return 20;
    case HMOE_TYPE_Q5_0: return 22;
    case HMOE_TYPE_Q5_1: return 24;
    default: return 0;
    }
}
HMOE_HD size_t hmoe_cu_kv_row_bytes(int t, int D) { return (size_t)(D / 32) * (size_t)hmoe_cu_kv_block_bytes(t); }

#ifdef __CUDACC__

/* N consecutive bytes (N = 1, 2, 4, 8) from a 2-byte aligned address (4-byte when a4) as words. */
template <int N, bool A4>
__device__ __forceinline__ void kvc_bytes(const uint8_t *p, uint32_t (&w)[2]) {
    if constexpr (N == 8) {
        w[0] = A4 ? hmoe_cu_ld_u32a4(p) : hmoe_cu_ld_u32a2(p);
        w[1] = A4 ? hmoe_cu_ld_u32a4(p + 4) : hmoe_cu_ld_u32a2(p + 4);
    } else if constexpr (N == 4) {
        w[0] = A4 ? hmoe_cu_ld_u32a4(p) : hmoe_cu_ld_u32a2(p), w[1] = 0;
    } else if constexpr (N == 2) {
        w[0] = hmoe_cu_ld_u16(p), w[1] = 0;
    } else {
        w[0] = hmoe_cu_ld_u8(p), w[1] = 0;
    }
}
__device__ __forceinline__ uint32_t kvc_byte(const uint32_t (&w)[2], int i) { return (w[i >> 2] >> (8 * (i & 3))) & 0xffu; }

/* Signed value of the element with the largest |v| of the warp's block, the first one on ties and
 * +0 when all are zero (the scalar quantizers' loop with a strict >). */
__device__ __forceinline__ float kvc_signed_absmax(float v) {
    const float a = hmoe_warp_max(fabsf(v));
    if (a == 0.0f) return 0.0f;
    const unsigned first = __ffs(__ballot_sync(0xffffffffu, fabsf(v) == a)) - 1;
    return __shfl_sync(0xffffffffu, v, (int)first);
}
/* Block minimum and maximum as the scalar loop finds them (first equal element on ties, which
 * only matters for the sign of a zero). */
__device__ __forceinline__ void kvc_min_max(float v, float &mn, float &mx) {
    float lo = v, hi = v;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        lo = fminf(lo, __shfl_xor_sync(0xffffffffu, lo, o));
        hi = fmaxf(hi, __shfl_xor_sync(0xffffffffu, hi, o));
    }
    mn = __shfl_sync(0xffffffffu, v, (int)__ffs(__ballot_sync(0xffffffffu, v == lo)) - 1);
    mx = __shfl_sync(0xffffffffu, v, (int)__ffs(__ballot_sync(0xffffffffu, v == hi)) - 1);
}
/* Write the block's 4-bit codes q (one per lane) in nibble order: byte j = element j (low) and
 * element j + 16 (high). */
__device__ __forceinline__ void kvc_put_nibbles(int q, uint8_t *qs, bool st) {
    const int lane = threadIdx.x & 31;
    const int hi = __shfl_down_sync(0xffffffffu, q, 16);
    if (st && lane < 16) qs[lane] = (uint8_t)((q & 0xF) | ((hi & 0xF) << 4));
}
/* The fifth bits of 5-bit codes: bit e of the u32le at qh is element e. */
__device__ __forceinline__ void kvc_put_high_bits(int q, uint8_t *qh, bool st) {
    const int lane = threadIdx.x & 31;
    const unsigned h = __ballot_sync(0xffffffffu, (q >> 4) & 1);
    if (st && lane < 4) qh[lane] = (uint8_t)(h >> (8 * lane));
}
__device__ __forceinline__ void kvc_put_f16(uint8_t *p, __half h) { *(__half *)p = h; }

/* Symmetric code round(v / d) + bias clamped to 0..qmax, d == 0 giving the bias (quant_weight.c). */
__device__ __forceinline__ int kvc_quant_sym(float v, float d, int bias, int qmax) {
    return d == 0.0f ? bias : max(0, min(qmax, __float2int_rn(v / d) + bias));
}

template <int T>
struct kv_codec;

template <>
struct kv_codec<HMOE_TYPE_F32> {
    static constexpr int BB = 128;
    template <int N>
    static __device__ __forceinline__ void load(const uint8_t *row, int c, float (&x)[N]) {
        const float *p = (const float *)row + c;
        if constexpr (N >= 4) {
#pragma unroll
            for (int i = 0; i < N; i += 4) {
                const float4 f = *(const float4 *)(p + i);
                x[i] = f.x, x[i + 1] = f.y, x[i + 2] = f.z, x[i + 3] = f.w;
            }
        } else if constexpr (N == 2) {
            const float2 f = *(const float2 *)p;
            x[0] = f.x, x[1] = f.y;
        } else {
            x[0] = p[0];
        }
    }
    static __device__ __forceinline__ float store(float v, uint8_t *blk, bool st) {
        if (st) ((float *)blk)[threadIdx.x & 31] = v;
        return v;
    }
};

template <>
struct kv_codec<HMOE_TYPE_F16> {
    static constexpr int BB = 64;
    template <int N>
    static __device__ __forceinline__ void load(const uint8_t *row, int c, float (&x)[N]) {
        if constexpr (N == 8) {
            uint4 kk = *(const uint4 *)(row + 2 * c);
            const __half2 *h2 = (const __half2 *)&kk;
#pragma unroll
            for (int i = 0; i < 4; i++) {
                float2 f = __half22float2(h2[i]);
                x[2 * i] = f.x, x[2 * i + 1] = f.y;
            }
        } else if constexpr (N == 1) {
            x[0] = __half2float(((const __half *)row)[c]);
        } else {
            const __half *hp = (const __half *)row + c;
#pragma unroll
            for (int j = 0; j < N; j += 2) {
                const float2 f = __half22float2(*(const __half2 *)(hp + j));
                x[j] = f.x, x[j + 1] = f.y;
            }
        }
    }
    static __device__ __forceinline__ float store(float v, uint8_t *blk, bool st) {
        const __half hv = __float2half_rn(v);
        if (st) ((__half *)blk)[threadIdx.x & 31] = hv;
        return __half2float(hv);
    }
};

template <>
struct kv_codec<HMOE_TYPE_BF16> {
    static constexpr int BB = 64;
    template <int N>
    static __device__ __forceinline__ void load(const uint8_t *row, int c, float (&x)[N]) {
        const uint8_t *p = row + 2 * c;
        uint32_t w[4];
        if constexpr (N == 8) {
            const uint4 u = *(const uint4 *)p;
            w[0] = u.x, w[1] = u.y, w[2] = u.z, w[3] = u.w;
        } else if constexpr (N == 4) {
            const uint2 u = *(const uint2 *)p;
            w[0] = u.x, w[1] = u.y;
        } else if constexpr (N == 2) {
            w[0] = *(const uint32_t *)p;
        } else {
            w[0] = *(const uint16_t *)p;
        }
#pragma unroll
        for (int i = 0; i < N; i++) x[i] = __uint_as_float(i & 1 ? w[i / 2] & 0xffff0000u : w[i / 2] << 16);
    }
    /* round to nearest even on the dropped 16 bits; NaN truncated and made quiet (hmoe_f32_to_bf16) */
    static __device__ __forceinline__ float store(float v, uint8_t *blk, bool st) {
        const uint32_t u = __float_as_uint(v);
        const uint16_t b = (u & 0x7fffffffu) > 0x7f800000u ? (uint16_t)((u >> 16) | 0x40u)
                                                           : (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
        if (st) ((uint16_t *)blk)[threadIdx.x & 31] = b;
        return __uint_as_float((uint32_t)b << 16);
    }
};

template <>
struct kv_codec<HMOE_TYPE_Q8_0> {
    static constexpr int BB = 34;
    template <int N>
    static __device__ __forceinline__ void load(const uint8_t *row, int c, float (&x)[N]) {
        const uint8_t *blk = row + (c / 32) * 34;
        const float d = hmoe_cu_h2f((uint16_t)hmoe_cu_ld_u16(blk));
        if constexpr (N == 8) {
            uint32_t w0 = hmoe_cu_ld_u32a2(blk + 2 + (c % 32)), w1 = hmoe_cu_ld_u32a2(blk + 6 + (c % 32));
#pragma unroll
            for (int i = 0; i < 8; i++) x[i] = d * (float)(int8_t)(((i < 4 ? w0 : w1) >> (8 * (i & 3))) & 0xff);
        } else {
            const uint8_t *qp = blk + 2 + c % 32;
#pragma unroll
            for (int j = 0; j < N; j++) x[j] = d * (float)(int8_t)hmoe_cu_ld_u8(qp + j);
        }
    }
    /* multiplier 127/amax, round half to even, fp16 d (hmoe_ref_quantize_q8_0) */
    static __device__ __forceinline__ float store(float v, uint8_t *blk, bool st) {
        const int lane = threadIdx.x & 31;
        const float amax = hmoe_warp_max(fabsf(v));
        const float d = amax / 127.0f, id = amax != 0.0f ? 127.0f / amax : 0.0f;
        const int q = max(-128, min(127, __float2int_rn(v * id)));
        const __half dh = __float2half_rn(d);
        if (st) {
            blk[2 + lane] = (uint8_t)(int8_t)q;
            if (lane == 0) kvc_put_f16(blk, dh);
        }
        return __half2float(dh) * (float)q;
    }
};

/* Q4_0 / Q5_0 / IQ4_NL / Q4_1 / Q5_1: the 32 codes of a block sit in 16 bytes qs (nibble order),
 * 5-bit types add the fifth bits qh; N <= 8 elements starting at c % 32 lie in one half. */
template <>
struct kv_codec<HMOE_TYPE_Q4_0> {
    static constexpr int BB = 18;
    template <int N>
    static __device__ __forceinline__ void load(const uint8_t *row, int c, float (&x)[N]) {
        const uint8_t *blk = row + (c / 32) * BB;
        const int e = c % 32, sh = e >= 16 ? 4 : 0;
        const float d = hmoe_cu_h2f((uint16_t)hmoe_cu_ld_u16(blk));
        uint32_t w[2];
        kvc_bytes<N, false>(blk + 2 + (e & 15), w);
#pragma unroll
        for (int i = 0; i < N; i++) x[i] = (float)((int)((kvc_byte(w, i) >> sh) & 0xF) - 8) * d;
    }
    static __device__ __forceinline__ float store(float v, uint8_t *blk, bool st) {
        const __half dh = __float2half_rn(kvc_signed_absmax(v) / -8.0f); /* extreme -> -8 */
        const float d = __half2float(dh);
        const int q = kvc_quant_sym(v, d, 8, 15);
        kvc_put_nibbles(q, blk + 2, st);
        if (st && (threadIdx.x & 31) == 0) kvc_put_f16(blk, dh);
        return (float)(q - 8) * d;
    }
};

template <>
struct kv_codec<HMOE_TYPE_Q5_0> {
    static constexpr int BB = 22;
    template <int N>
    static __device__ __forceinline__ void load(const uint8_t *row, int c, float (&x)[N]) {
        const uint8_t *blk = row + (c / 32) * BB;
        const int e = c % 32, sh = e >= 16 ? 4 : 0;
        const float d = hmoe_cu_h2f((uint16_t)hmoe_cu_ld_u16(blk));
        const uint32_t qh = hmoe_cu_ld_u32a2(blk + 2) >> e;
        uint32_t w[2];
        kvc_bytes<N, false>(blk + 6 + (e & 15), w);
#pragma unroll
        for (int i = 0; i < N; i++)
            x[i] = (float)((int)(((kvc_byte(w, i) >> sh) & 0xF) | (((qh >> i) & 1u) << 4)) - 16) * d;
    }
    static __device__ __forceinline__ float store(float v, uint8_t *blk, bool st) {
        const __half dh = __float2half_rn(kvc_signed_absmax(v) / -16.0f); /* extreme -> -16 */
        const float d = __half2float(dh);
        const int q = kvc_quant_sym(v, d, 16, 31);
        kvc_put_high_bits(q, blk + 2, st);
        kvc_put_nibbles(q, blk + 6, st);
        if (st && (threadIdx.x & 31) == 0) kvc_put_f16(blk, dh);
        return (float)(q - 16) * d;
    }
};

/* Affine types: m = block minimum, d = range / qmax, code round((v - m) / d) (quant_weight.c). */
template <int QMAX>
__device__ __forceinline__ int kvc_affine(float v, __half &dh, __half &mh, float &d, float &m) {
    float mn, mx;
    kvc_min_max(v, mn, mx);
    dh = __float2half_rn((mx - mn) / (float)QMAX);
    mh = __float2half_rn(mn);
    d = __half2float(dh), m = __half2float(mh);
    return d == 0.0f ? 0 : max(0, min(QMAX, __float2int_rn((v - m) / d)));
}

template <>
struct kv_codec<HMOE_TYPE_Q4_1> {
    static constexpr int BB = 20;
    template <int N>
    static __device__ __forceinline__ void load(const uint8_t *row, int c, float (&x)[N]) {
        const uint8_t *blk = row + (c / 32) * BB;
        const int e = c % 32, sh = e >= 16 ? 4 : 0;
        const uint32_t dm = hmoe_cu_ld_u32a4(blk);
        const float d = hmoe_cu_h2f((uint16_t)dm), m = hmoe_cu_h2f((uint16_t)(dm >> 16));
        uint32_t w[2];
        kvc_bytes<N, true>(blk + 4 + (e & 15), w);
#pragma unroll
        for (int i = 0; i < N; i++) x[i] = (float)((kvc_byte(w, i) >> sh) & 0xF) * d + m;
    }
    static __device__ __forceinline__ float store(float v, uint8_t *blk, bool st) {
        __half dh, mh;
        float d, m;
        const int q = kvc_affine<15>(v, dh, mh, d, m);
        kvc_put_nibbles(q, blk + 4, st);
        if (st && (threadIdx.x & 31) == 0) kvc_put_f16(blk, dh), kvc_put_f16(blk + 2, mh);
        return (float)q * d + m;
    }
};

template <>
struct kv_codec<HMOE_TYPE_Q5_1> {
    static constexpr int BB = 24;
    template <int N>
    static __device__ __forceinline__ void load(const uint8_t *row, int c, float (&x)[N]) {
        const uint8_t *blk = row + (c / 32) * BB;
        const int e = c % 32, sh = e >= 16 ? 4 : 0;
        const uint32_t dm = hmoe_cu_ld_u32a4(blk);
        const float d = hmoe_cu_h2f((uint16_t)dm), m = hmoe_cu_h2f((uint16_t)(dm >> 16));
        const uint32_t qh = hmoe_cu_ld_u32a4(blk + 4) >> e;
        uint32_t w[2];
        kvc_bytes<N, true>(blk + 8 + (e & 15), w);
#pragma unroll
        for (int i = 0; i < N; i++) x[i] = (float)(((kvc_byte(w, i) >> sh) & 0xF) | (((qh >> i) & 1u) << 4)) * d + m;
    }
    static __device__ __forceinline__ float store(float v, uint8_t *blk, bool st) {
        __half dh, mh;
        float d, m;
        const int q = kvc_affine<31>(v, dh, mh, d, m);
        kvc_put_high_bits(q, blk + 4, st);
        kvc_put_nibbles(q, blk + 8, st);
        if (st && (threadIdx.x & 31) == 0) kvc_put_f16(blk, dh), kvc_put_f16(blk + 2, mh);
        return (float)q * d + m;
    }
};

template <>
struct kv_codec<HMOE_TYPE_IQ4_NL> {
    static constexpr int BB = 18;
    /* entry q (0..15) of the code book, from its four packed words */
    static __device__ __forceinline__ int value(uint32_t q) {
        constexpr int8_t book[16] = {HMOE_KVALUES_IQ4NL_DATA};
        constexpr uint32_t t0 = (uint8_t)book[0] | (uint8_t)book[1] << 8 | (uint8_t)book[2] << 16 | (uint32_t)(uint8_t)book[3] << 24;
        constexpr uint32_t t1 = (uint8_t)book[4] | (uint8_t)book[5] << 8 | (uint8_t)book[6] << 16 | (uint32_t)(uint8_t)book[7] << 24;
        constexpr uint32_t t2 = (uint8_t)book[8] | (uint8_t)book[9] << 8 | (uint8_t)book[10] << 16 | (uint32_t)(uint8_t)book[11] << 24;
        constexpr uint32_t t3 = (uint8_t)book[12] | (uint8_t)book[13] << 8 | (uint8_t)book[14] << 16 | (uint32_t)(uint8_t)book[15] << 24;
        const uint32_t b = q & 8u ? __byte_perm(t2, t3, q & 7u) : __byte_perm(t0, t1, q & 7u);
        return (int)(int8_t)(b & 0xffu);
    }
    template <int N>
    static __device__ __forceinline__ void load(const uint8_t *row, int c, float (&x)[N]) {
        const uint8_t *blk = row + (c / 32) * BB;
        const int e = c % 32, sh = e >= 16 ? 4 : 0;
        const float d = hmoe_cu_h2f((uint16_t)hmoe_cu_ld_u16(blk));
        uint32_t w[2];
        kvc_bytes<N, false>(blk + 2 + (e & 15), w);
#pragma unroll
        for (int i = 0; i < N; i++) x[i] = d * (float)value((kvc_byte(w, i) >> sh) & 0xFu);
    }
    /* scale from the extreme (-> code 0, value -127), then the nearest entry (first one on ties) */
    static __device__ __forceinline__ float store(float v, uint8_t *blk, bool st) {
        const __half dh = __float2half_rn(kvc_signed_absmax(v) / -127.0f);
        const float d = __half2float(dh);
        int q = 8;
        if (d != 0.0f) {
            const float t = v / d;
            float best = fabsf(t - (float)value(0));
            q = 0;
#pragma unroll
            for (int k = 1; k < 16; k++) {
                const float err = fabsf(t - (float)value((uint32_t)k));
                if (err < best) best = err, q = k;
            }
        }
        kvc_put_nibbles(q, blk + 2, st);
        if (st && (threadIdx.x & 31) == 0) kvc_put_f16(blk, dh);
        return d * (float)value((uint32_t)q);
    }
};

/* f(kv_codec<T>{}), or with T == HMOE_KV_ANY the codec of the run-time type (a warp-uniform
 * switch; types the cache does not take do nothing: the launchers refuse them). */
template <int T, typename F>
__device__ __forceinline__ void kv_with(int type, F &&f) {
    if constexpr (T != HMOE_KV_ANY) {
        (void)type;
        f(kv_codec<T>{});
    } else {
        switch (type) {
        case HMOE_TYPE_F32: f(kv_codec<HMOE_TYPE_F32>{}); break;
        case HMOE_TYPE_F16: f(kv_codec<HMOE_TYPE_F16>{}); break;
        case HMOE_TYPE_BF16: f(kv_codec<HMOE_TYPE_BF16>{}); break;
        case HMOE_TYPE_Q8_0: f(kv_codec<HMOE_TYPE_Q8_0>{}); break;
        case HMOE_TYPE_Q4_0: f(kv_codec<HMOE_TYPE_Q4_0>{}); break;
        case HMOE_TYPE_Q4_1: f(kv_codec<HMOE_TYPE_Q4_1>{}); break;
        case HMOE_TYPE_Q5_0: f(kv_codec<HMOE_TYPE_Q5_0>{}); break;
        case HMOE_TYPE_Q5_1: f(kv_codec<HMOE_TYPE_Q5_1>{}); break;
        case HMOE_TYPE_IQ4_NL: f(kv_codec<HMOE_TYPE_IQ4_NL>{}); break;
        default: break;
        }
    }
}

#endif /* __CUDACC__ */

#endif
