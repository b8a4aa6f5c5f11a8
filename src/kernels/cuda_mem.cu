/* cuda_mem.cu — the process's device memory as the driver counts it (cuda.h "Device memory as
 * nvidia-smi counts it") and the test hook that fails the Nth device allocation.
 * What nvidia-smi shows for a process is its CUDA context, every allocation rounded up to the
 * allocator's granule, cuBLAS handles and workspaces, instantiated graphs and the code of the
 * kernels loaded so far. The free bytes of the device before this process made its context come
 * from NVML (loaded with dlopen, so a machine without it still runs): afterwards, the process's
 * own use is that number minus the free bytes now (cudaMemGetInfo). Without NVML the context is
 * taken as HMOE_CUDA_CONTEXT_ESTIMATE_BYTES.
 */
#include <dlfcn.h>
#include <stdio.h>

#include "kernels/cuda_ctx_impl.cuh"

#define MAX_DEV 64

struct baseline {
    bool taken, nvml;
    uint64_t free_before; /* NVML free bytes before our context (valid when nvml) */
};
static struct baseline g_base[MAX_DEV];

typedef int (*nvml_init_fn)(void);
typedef int (*nvml_by_bus_fn)(const char *, void **);
typedef int (*nvml_mem_fn)(void *, unsigned long long *);

/* NVML's memory struct: total, free, used (unsigned long long each). */
static bool nvml_free_bytes(int dev, uint64_t *free_b) {
    char bus[64];
    if (cudaDeviceGetPCIBusId(bus, sizeof bus, dev) != cudaSuccess) {
        cudaGetLastError();
        return false;
    }
    void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return false;
    nvml_init_fn init = (nvml_init_fn)dlsym(lib, "nvmlInit_v2");
    nvml_by_bus_fn by_bus = (nvml_by_bus_fn)dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2");
    nvml_mem_fn mem = (nvml_mem_fn)dlsym(lib, "nvmlDeviceGetMemoryInfo");
    int (*shutdown)(void) = (int (*)(void))dlsym(lib, "nvmlShutdown");
    bool ok = false;
    void *h = NULL;
    unsigned long long m[3] = {0, 0, 0};
    if (init && by_bus && mem && init() == 0) {
        ok = by_bus(bus, &h) == 0 && mem(h, m) == 0 && m[1] > 0;
        if (shutdown) shutdown();
    }
    dlclose(lib);
    if (ok) *free_b = m[1];
    return ok;
}

/* Called before anything of this process can create device dev's context (device_info, ctx_init,
 * the bandwidth probe): the first call records the free bytes. */
extern "C" void hmoe_cu_mem_baseline(int dev) {
    if (dev < 0 || dev >= MAX_DEV || g_base[dev].taken) return;
    g_base[dev].taken = true;
    g_base[dev].nvml = nvml_free_bytes(dev, &g_base[dev].free_before);
}

/* The process's use of the device now, and free/total (ctx's device current). */
static uint64_t own_use(struct hmoe_cuda_ctx *ctx, uint64_t *free_out) {
    size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) {
        cudaGetLastError();
        if (free_out) *free_out = 0;
        return ctx->dev_peak;
    }
    if (free_out) *free_out = free_b;
    return ctx->free_before > free_b ? ctx->free_before - free_b : 0;
}

/* At context creation: what the context took, measured or estimated. */
extern "C" void hmoe_cu_mem_ctx_start(struct hmoe_cuda_ctx *ctx) {
    size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) cudaGetLastError();
    const struct baseline *b = ctx->dev < MAX_DEV ? &g_base[ctx->dev] : NULL;
    /* a context below 32 MiB or above 4 GiB means NVML and the runtime disagree about free */
    if (b && b->nvml && b->free_before > free_b + ((uint64_t)32 << 20) && b->free_before - free_b < ((uint64_t)4 << 30)) {
        ctx->free_before = b->free_before;
        ctx->context_measured = true;
    } else {
        ctx->free_before = free_b + HMOE_CUDA_CONTEXT_ESTIMATE_BYTES;
        ctx->context_measured = false;
    }
    ctx->context_bytes = ctx->free_before - free_b;
    ctx->dev_peak = ctx->context_bytes;
}

extern "C" uint64_t hmoe_cuda_ctx_sample(struct hmoe_cuda_ctx *ctx) {
    if (!ctx) return 0;
    const uint64_t u = own_use(ctx, NULL);
    if (u > ctx->dev_peak) ctx->dev_peak = u;
    return u;
}

extern "C" void hmoe_cuda_ctx_device_mem(struct hmoe_cuda_ctx *ctx, struct hmoe_cuda_device_mem *out) {
    memset(out, 0, sizeof *out);
    if (!ctx) return;
    uint64_t free_b = 0;
    out->used_now = own_use(ctx, &free_b);
    if (out->used_now > ctx->dev_peak) ctx->dev_peak = out->used_now;
    out->peak = ctx->dev_peak;
    out->context = ctx->context_bytes;
    out->context_measured = ctx->context_measured;
    out->cublas = ctx->cublas_bytes;
    out->free_now = free_b;
}

/* ---- the allocation fault hook ---- */
static int g_fail_at, g_calls;

extern "C" void hmoe_cuda_fail_alloc_at(int n) {
    g_fail_at = n > 0 ? n : 0;
    g_calls = 0;
}
extern "C" int hmoe_cuda_alloc_calls(void) { return g_calls; }

extern "C" bool hmoe_cu_alloc_should_fail(void) {
    g_calls++;
    return g_fail_at > 0 && g_calls == g_fail_at;
}
