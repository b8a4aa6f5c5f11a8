/* cuda_host_check.cu — developer tool: compiles the per-type GPU code of src/kernels/cuda_types.cuh
 * for the CPU (every function there is __host__ __device__, the intrinsics have host twins in
 * cuda_impl.cuh) and checks it against the type table's references, without a GPU:
 *   dequant8  bit-exact with dequant_ref on random blocks (sane scales, tests/gpu_util.h)
 *   q8chunk   int8 codes * scale + offset bit-exact with dequant_ref (the int8 GEMM's unpacker)
 *   vdot      the matvec slices with q8_1 activations within 1e-5 of the float64 dot
 * Build and run (from the repository root, after make CUDA=0):
 *   nvcc -std=c++17 -O1 -Iinclude -Isrc -Itests --expt-relaxed-constexpr -c tools/cuda_host_check.cu -o /tmp/chk.o
 *   nvcc /tmp/chk.o build/libhmoe.a -Xcompiler -fopenmp -o /tmp/chk && /tmp/chk
 * Last line "0 failures". Used to catch layout mistakes before spending GPU time.
 */
#include "kernels/cuda_types.cuh"
extern "C" {
#include "gpu_util.h"
}
#include <vector>
static int fails = 0;
template <class TR> void check(const char *name, int64_t n) {
    enum hmoe_type t = TR::type;
    const struct hmoe_type_info *ti = &hmoe_type_info[t];
    if (!TR::is_float && (TR::blck != ti->blck || TR::bytes != ti->type_size)) { printf("%s geometry mismatch\n", name); fails++; }
    for (int rep = 0; rep < 20; rep++) {
        std::vector<uint8_t> w(hmoe_row_bytes(t, n) + 64);
        rand_blocks(t, w.data(), n);
        std::vector<float> ref(n), got(n);
        ti->dequant_ref(w.data(), ref.data(), n);
        int64_t nb = n / TR::blck;
        for (int64_t b = 0; b < nb; b++)
            for (int g = 0; g < TR::blck / 8; g++) TR::dequant8(w.data() + b * TR::bytes, g, got.data() + b * TR::blck + 8 * g);
        for (int64_t i = 0; i < n; i++) {
            if (memcmp(&ref[i], &got[i], 4) != 0 && !(std::isnan(ref[i]) && std::isnan(got[i]))) {
                printf("%s dequant mismatch at %ld: %g vs %g\n", name, (long)i, got[i], ref[i]); fails++; break;
            }
        }
        if constexpr (TR::q8) {
            for (int64_t b = 0; b < nb; b++)
                for (int c = 0; c < TR::blck / 32; c++) {
                    uint32_t q[8]; float sc[2], of[2];
                    TR::q8chunk(w.data() + b * TR::bytes, c, q, sc, of);
                    for (int e = 0; e < 32; e++) {
                        float v = sc[e / 16] * (float)(int8_t)(q[e / 4] >> (8 * (e % 4))) + of[e / 16];
                        float r = ref[b * TR::blck + 32 * c + e];
                        if (v != r && !(std::isnan(v) && std::isnan(r))) { printf("%s q8chunk mismatch blk %ld chunk %d e %d: %g vs %g\n", name, (long)b, c, e, v, r); fails++; b = nb; break; }
                    }
                }
        }
        if (TR::is_float) continue;
        std::vector<float> x(n);
        for (auto &v : x) v = rng_normal();
        std::vector<uint8_t> xq(ref_q8_1_row_bytes(n));
        ref_quantize_q8_1(x.data(), n, xq.data());
        double exact = 0, mag = 0;
        for (int64_t i = 0; i < n; i++) { double a = ref_q8_1_value(xq.data(), n, i); exact += (double)ref[i] * a; mag += fabs((double)ref[i] * a); }
        double sum = 0;
        const int8_t *aq = (const int8_t *)xq.data();
        const float2 *ad = (const float2 *)(xq.data() + n);
        for (int64_t b = 0; b < nb; b++)
            for (int s = 0; s < TR::ns; s++) sum += TR::vdot(w.data() + b * TR::bytes, s, aq + b * TR::blck, ad + b * TR::blck / 32);
        if (fabs(sum - exact) > 1e-5 * mag + 1e-30) { printf("%s vdot mismatch: %.9g vs %.9g (mag %g)\n", name, sum, exact, mag); fails++; break; }
    }
    printf("%s checked\n", name);
}
int main() {
    hmoe_cuda_type_dispatch(HMOE_TYPE_F32, [](auto tr){ check<decltype(tr)>("F32", 512); });
#define C(T) hmoe_cuda_type_dispatch(HMOE_TYPE_##T, [](auto tr){ check<decltype(tr)>(#T, 1024); });
    C(F16) C(BF16) C(Q4_0) C(Q4_1) C(Q5_0) C(Q5_1) C(Q8_0) C(Q2_K) C(Q3_K) C(Q4_K) C(Q5_K) C(Q6_K)
    C(IQ2_XXS) C(IQ2_XS) C(IQ2_S) C(IQ3_XXS) C(IQ3_S) C(IQ1_S) C(IQ1_M) C(IQ4_NL) C(IQ4_XS) C(MXFP4)
    printf("%d failures\n", fails);
    return fails != 0;
}
