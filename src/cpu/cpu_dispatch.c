/* cpu_dispatch.c — the entry points of cpu.h: detect the CPU once (cpuid + XGETBV),
 * pick a path (scalar / AVX2 / AVX-512+VNNI, HMOE_CPU overrides downwards) and whether the
 * VEX-coded AVX-VNNI kernels may run (AVX2 and AVX-512 paths; HMOE_CPU=avx2-novnni turns
 * them off), fill the per-type kernel table from the type table's scalar references and
 * then from the SIMD rows of cpu_kernel_table.c; on the AVX-512 path, when AMX passed its run-time
 * check (amx_detect.c) and HMOE_AMX allows it, batched gemm calls of the AMX types go to
 * the AMX kernels. Every call goes through that table: no switch on the type anywhere.
 * Kernels are single-threaded; only hmoe_cpu_matmul() opens a parallel region.
 */
#include "amx_impl.h"
#include "cpu_impl.h"

#include <cpuid.h>
#include <dirent.h>
#include <omp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int init_done;                             /* 1 once the table below is valid */
static enum hmoe_cpu_path cpu_best = HMOE_CPU_SCALAR;    /* what the hardware + OS allow */
static enum hmoe_cpu_path cpu_path = HMOE_CPU_SCALAR;    /* what we run */
static bool vnni_best;                                   /* the CPU has AVX-VNNI (VEX vpdpbusd) */
static bool vnni_want = true;                            /* HMOE_CPU / test hook allow it */
static bool vnni_on;                                     /* the AVX-VNNI rows are in the table */
static struct hmoe_cpu_kernels kernels[HMOE_TYPE_COUNT]; /* indexed by type id */

/* AMX: the check runs once (amx_checked); the mode in effect and the token threshold are
 * set with the path. On by default wherever the run-time check passes (validated on a
 * Sapphire Rapids Xeon); HMOE_AMX=0 turns it off. The threshold: AMX loses to
 * the VNNI kernels at 8 tokens and wins from 16 (bench_cpu_gemm_amx). */
#ifndef HMOE_AMX_DEFAULT
#define HMOE_AMX_DEFAULT HMOE_CPU_AMX_ON
#endif
#define AMX_MIN_TOK_DEFAULT 16
static bool amx_checked, amx_ok;
static const char *amx_why = "not checked";
static enum hmoe_cpu_amx_mode amx_want = HMOE_CPU_AMX_OFF; /* asked for (HMOE_AMX, test hook) */
static enum hmoe_cpu_amx_mode amx_mode = HMOE_CPU_AMX_OFF; /* in effect on the current path */
static int amx_min_tok = AMX_MIN_TOK_DEFAULT;

static uint64_t read_xcr0(void) {
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

/* The best path this CPU and OS support. AVX-512 needs F+BW+VL+DQ, VNNI (the kernels
 * use vpdpwssd/vpdpbusd), VBMI, BITALG and GFNI (the I-quant kernels use vpermb/vpermi2b/
 * vpmultishiftqb/vpshufbitqmb/vgf2p8affineqb; the *_avx512.c files are built with those
 * flags, Ice Lake / Zen 4 and later have them) plus ZMM state saved by the OS (XCR0 bits 5-7); without
 * them we fall back to AVX2. AMX is an extra on top of this path (set_amx_locked). */
static enum hmoe_cpu_path detect_path(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return HMOE_CPU_SCALAR;
    bool osxsave = c & (1u << 27), avx = c & (1u << 28), fma = c & (1u << 12), f16c = c & (1u << 29);
    if (!osxsave || !avx) return HMOE_CPU_SCALAR;
    uint64_t xcr0 = read_xcr0();
    if ((xcr0 & 0x6) != 0x6) return HMOE_CPU_SCALAR; /* XMM + YMM state */
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return HMOE_CPU_SCALAR;
    bool avx2 = b & (1u << 5), bmi2 = b & (1u << 8);
    if (!(avx2 && fma && f16c && bmi2)) return HMOE_CPU_SCALAR;
    bool f = b & (1u << 16), dq = b & (1u << 17), bw = b & (1u << 30), vl = b & (1u << 31);
    bool vnni = c & (1u << 11), vbmi = c & (1u << 1), bitalg = c & (1u << 12), gfni = c & (1u << 8);
    if (f && dq && bw && vl && vnni && vbmi && bitalg && gfni && (xcr0 & 0xe0) == 0xe0) return HMOE_CPU_AVX512;
    return HMOE_CPU_AVX2;
}

/* AVX-VNNI: CPUID leaf 7 subleaf 1, EAX bit 4 (Alder Lake and later, Sapphire Rapids,
 * Zen 5). Only asked on a CPU that passed the AVX2 check: its kernels are
 * AVX2 kernels with vpmaddubsw + vpmaddwd pairs replaced by vpdpbusd. The compiler must
 * know -mavxvnni for them to exist at all (HMOE_HAVE_AVXVNNI, Makefile). */
static bool detect_avxvnni(enum hmoe_cpu_path best) {
#if HMOE_HAVE_AVXVNNI
    unsigned a, b, c, d;
    if (best < HMOE_CPU_AVX2 || !__get_cpuid_count(7, 0, &a, &b, &c, &d) || a < 1) return false;
    if (!__get_cpuid_count(7, 1, &a, &b, &c, &d)) return false;
    return a & (1u << 4);
#else
    (void)best;
    return false;
#endif
}

static void fill_table(enum hmoe_cpu_path path, bool vnni) {
    for (int t = 0; t < HMOE_TYPE_COUNT; t++) kernels[t] = (struct hmoe_cpu_kernels){0};
    for (int t = 0; t < HMOE_TYPE_COUNT; t++) kernels[t].quantize = hmoe_type_info[t].quantize_ref;
    /* Rows are ordered by path, so a later (wider) row overrides an earlier one. */
    for (int i = 0; i < hmoe_cpu_kernel_row_count; i++) {
        const struct hmoe_cpu_kernel_row *row = &hmoe_cpu_kernel_rows[i];
        if (row->path > path || (row->vnni && !vnni)) continue;
        struct hmoe_cpu_kernels *k = &kernels[row->type];
        if (row->k.quantize) k->quantize = row->k.quantize;
        if (row->k.gemv) k->gemv = row->k.gemv;
        if (row->k.gemm) k->gemm = row->k.gemm;
    }
}

/* The path HMOE_CPU asks for (capped at `best`); *vnni says whether it allows AVX-VNNI. */
static enum hmoe_cpu_path path_from_env(enum hmoe_cpu_path best, bool *vnni) {
    const char *e = getenv("HMOE_CPU");
    *vnni = true;
    if (!e || !*e) return best;
    enum hmoe_cpu_path want = best;
    if (!strcasecmp(e, "scalar"))
        want = HMOE_CPU_SCALAR;
    else if (!strcasecmp(e, "avx2"))
        want = HMOE_CPU_AVX2;
    else if (!strcasecmp(e, "avx2-novnni")) {
        want = HMOE_CPU_AVX2;
        *vnni = false;
    } else if (!strcasecmp(e, "avx512"))
        want = HMOE_CPU_AVX512;
    else
        HMOE_WARN("HMOE_CPU=%s is not one of scalar, avx2-novnni, avx2, avx512; using %s\n", e,
                  hmoe_cpu_path_name(best));
    if (want > best) HMOE_WARN("HMOE_CPU=%s: this CPU only supports %s; using that\n", e, hmoe_cpu_path_name(best));
    return want < best ? want : best;
}

/* The AMX mode to use given the wish (HMOE_AMX or a test hook) and what the CPU passed.
 * The hardware check runs on the first wish for real AMX, never on an AMX-less path. */
static enum hmoe_cpu_amx_mode amx_resolve_locked(enum hmoe_cpu_amx_mode want, enum hmoe_cpu_path p) {
    if (p != HMOE_CPU_AVX512 || want == HMOE_CPU_AMX_OFF) return HMOE_CPU_AMX_OFF;
    if (want == HMOE_CPU_AMX_EMULATED) return want;
    if (!amx_checked) {
        amx_ok = hmoe_cpu_amx_detect(&amx_why);
        amx_checked = true;
    }
    return amx_ok ? HMOE_CPU_AMX_ON : HMOE_CPU_AMX_OFF;
}

static enum hmoe_cpu_amx_mode amx_from_env(void) {
    const char *e = getenv("HMOE_AMX");
    if (!e || !*e) return HMOE_AMX_DEFAULT;
    if (!strcmp(e, "0") || !strcasecmp(e, "off")) return HMOE_CPU_AMX_OFF;
    if (!strcmp(e, "1") || !strcasecmp(e, "on")) return HMOE_CPU_AMX_ON;
    if (!strcasecmp(e, "emu")) return HMOE_CPU_AMX_EMULATED;
    HMOE_WARN("HMOE_AMX=%s is not one of 0, 1, emu; AMX stays %s\n", e, HMOE_AMX_DEFAULT ? "on" : "off");
    return HMOE_AMX_DEFAULT;
}

static void set_amx_locked(enum hmoe_cpu_amx_mode mode) {
    amx_mode = mode;
    for (int t = 0; t < HMOE_TYPE_COUNT; t++) kernels[t].gemm_amx = NULL;
    if (mode == HMOE_CPU_AMX_OFF) return;
    for (int i = 0; i < hmoe_cpu_amx_row_count; i++) {
        const struct hmoe_cpu_amx_row *row = &hmoe_cpu_amx_rows[i];
        kernels[row->type].gemm_amx = mode == HMOE_CPU_AMX_ON ? row->amx : row->emulated;
    }
}

static void set_path_locked(enum hmoe_cpu_path p) {
    cpu_path = p;
    vnni_on = vnni_best && vnni_want && p >= HMOE_CPU_AVX2;
    fill_table(p, vnni_on);
    set_amx_locked(amx_resolve_locked(amx_want, p));
    atomic_store_explicit(&init_done, 1, memory_order_release);
}

void hmoe_cpu_init(void) {
    pthread_mutex_lock(&init_lock);
    cpu_best = detect_path();
    vnni_best = detect_avxvnni(cpu_best);
    amx_want = amx_from_env();
    const enum hmoe_cpu_path p = path_from_env(cpu_best, &vnni_want);
    set_path_locked(p);
    pthread_mutex_unlock(&init_lock);
}

enum hmoe_cpu_amx_mode hmoe_cpu_force_amx(enum hmoe_cpu_amx_mode want, int min_tok) {
    if (!atomic_load_explicit(&init_done, memory_order_acquire)) hmoe_cpu_init();
    pthread_mutex_lock(&init_lock);
    if (min_tok > 0) amx_min_tok = min_tok;
    amx_want = want;
    set_amx_locked(amx_resolve_locked(want, cpu_path));
    enum hmoe_cpu_amx_mode got = amx_mode;
    pthread_mutex_unlock(&init_lock);
    return got;
}

bool hmoe_cpu_amx(void) {
    if (!atomic_load_explicit(&init_done, memory_order_acquire)) hmoe_cpu_init();
    return amx_mode == HMOE_CPU_AMX_ON;
}

const char *hmoe_cpu_amx_status(void) {
    if (!atomic_load_explicit(&init_done, memory_order_acquire)) hmoe_cpu_init();
    pthread_mutex_lock(&init_lock);
    /* say what the hardware can do even when the mode is off, if it was checked */
    static char buf[160];
    if (amx_mode == HMOE_CPU_AMX_ON)
        snprintf(buf, sizeof buf, "amx int8 (Q4_K, Q6_K gemm from %d tokens)", amx_min_tok);
    else if (amx_mode == HMOE_CPU_AMX_EMULATED)
        snprintf(buf, sizeof buf, "amx emulated (tests only, from %d tokens)", amx_min_tok);
    else if (amx_checked && amx_ok)
        snprintf(buf, sizeof buf, "amx off (usable; HMOE_AMX=0 was given)");
    else if (amx_checked)
        snprintf(buf, sizeof buf, "amx off (%s)", amx_why);
    else
        snprintf(buf, sizeof buf, "amx off");
    pthread_mutex_unlock(&init_lock);
    return buf;
}

enum hmoe_cpu_path hmoe_cpu_force_path(enum hmoe_cpu_path want) {
    pthread_mutex_lock(&init_lock);
    cpu_best = detect_path();
    vnni_best = detect_avxvnni(cpu_best);
    set_path_locked(want < cpu_best ? want : cpu_best);
    pthread_mutex_unlock(&init_lock);
    return cpu_path;
}

bool hmoe_cpu_force_vnni(bool want) {
    if (!atomic_load_explicit(&init_done, memory_order_acquire)) hmoe_cpu_init();
    pthread_mutex_lock(&init_lock);
    vnni_want = want;
    set_path_locked(cpu_path);
    const bool got = vnni_on;
    pthread_mutex_unlock(&init_lock);
    return got;
}

bool hmoe_cpu_vnni(void) {
    if (!atomic_load_explicit(&init_done, memory_order_acquire)) hmoe_cpu_init();
    return vnni_on;
}

const char *hmoe_cpu_isa_name(void) {
    const enum hmoe_cpu_path p = hmoe_cpu_path();
    if (p == HMOE_CPU_AVX2) return vnni_on ? "avx2+vnni" : "avx2";
    return hmoe_cpu_path_name(p);
}

/* Engine code may call the kernels without hmoe_cpu_init(): the first call initialises. */
static inline void ensure_init(void) {
    if (!atomic_load_explicit(&init_done, memory_order_acquire)) hmoe_cpu_init();
}

enum hmoe_cpu_path hmoe_cpu_path(void) {
    ensure_init();
    return cpu_path;
}

const char *hmoe_cpu_path_name(enum hmoe_cpu_path p) {
    static const char *const names[] = {"scalar", "avx2", "avx512"};
    return (unsigned)p < 3 ? names[p] : "?";
}

/* Physical cores = distinct core ids in sysfs (SMT siblings share one), capped by the
 * CPUs this process may run on; falls back to the online CPU count. */
int hmoe_cpu_physical_cores(void) {
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    int cores = 0;
    for (int cpu = 0; cpu < 4096; cpu++) {
        char path[128], buf[64];
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/thread_siblings_list", cpu);
        FILE *f = fopen(path, "r");
        if (!f) {
            if (cpu >= online) break;
            continue;
        }
        /* A core is counted once: by the sibling whose number is listed first. */
        if (fgets(buf, sizeof buf, f) && atoi(buf) == cpu) cores++;
        fclose(f);
    }
    if (cores <= 0) cores = online > 0 ? (int)online : 1;
    int avail = omp_get_num_procs();
    return avail > 0 && avail < cores ? avail : cores;
}

bool hmoe_cpu_supports(enum hmoe_type wtype) {
    if ((unsigned)wtype >= HMOE_TYPE_COUNT) return false;
    const struct hmoe_type_info *ti = &hmoe_type_info[wtype];
    const struct hmoe_type_info *ai = &hmoe_type_info[ti->vec_dot_type];
    return ti->blck > 0 && ti->vec_dot_ref && ai->quantize_ref;
}

size_t hmoe_cpu_act_bytes(enum hmoe_type wtype, int64_t n) {
    return hmoe_row_bytes(hmoe_type_info[wtype].vec_dot_type, n);
}

void hmoe_cpu_quantize_act(enum hmoe_type wtype, const float *x, void *dst, int64_t n) {
    ensure_init();
    kernels[hmoe_type_info[wtype].vec_dot_type].quantize(x, dst, n);
}

static void gemv_ref(enum hmoe_type wtype, int64_t ncols, const char *w, size_t row_bytes, int64_t nrows,
                     const void *xq, float *y) {
    hmoe_vec_dot_fn dot = hmoe_type_info[wtype].vec_dot_ref;
    for (int64_t r = 0; r < nrows; r++) y[r] = dot(ncols, w + (size_t)r * row_bytes, xq);
}

void hmoe_cpu_gemv(enum hmoe_type wtype, int64_t ncols, const void *w, size_t row_bytes, int64_t r0, int64_t r1,
                   const void *xq, float *y) {
    ensure_init();
    if (r1 <= r0) return;
    const char *w0 = (const char *)w + (size_t)r0 * row_bytes;
    if (kernels[wtype].gemv)
        kernels[wtype].gemv(ncols, w0, row_bytes, r1 - r0, xq, y);
    else
        gemv_ref(wtype, ncols, w0, row_bytes, r1 - r0, xq, y);
}

void hmoe_cpu_gemm(enum hmoe_type wtype, int64_t ncols, const void *w, size_t row_bytes, int64_t r0, int64_t r1,
                   const void *xq, size_t xq_stride_bytes, int64_t ntok, float *y, size_t y_stride) {
    ensure_init();
    if (r1 <= r0 || ntok <= 0) return;
    const char *w0 = (const char *)w + (size_t)r0 * row_bytes;
    if (kernels[wtype].gemm_amx && ntok >= amx_min_tok) {
        kernels[wtype].gemm_amx(ncols, w0, row_bytes, r1 - r0, xq, xq_stride_bytes, ntok, y, y_stride);
        return;
    }
    if (kernels[wtype].gemm) {
        kernels[wtype].gemm(ncols, w0, row_bytes, r1 - r0, xq, xq_stride_bytes, ntok, y, y_stride);
        return;
    }
    for (int64_t t = 0; t < ntok; t++) {
        const void *xt = (const char *)xq + (size_t)t * xq_stride_bytes;
        float *yt = y + (size_t)t * y_stride;
        if (kernels[wtype].gemv)
            kernels[wtype].gemv(ncols, w0, row_bytes, r1 - r0, xt, yt);
        else
            gemv_ref(wtype, ncols, w0, row_bytes, r1 - r0, xt, yt);
    }
}

void hmoe_cpu_matmul(enum hmoe_type wtype, int64_t ncols, int64_t nrows, const void *w, size_t row_bytes,
                     const float *x, size_t x_stride, int64_t ntok, float *y, size_t y_stride, void *scratch) {
    ensure_init();
    size_t act_bytes = hmoe_cpu_act_bytes(wtype, ncols);
#pragma omp parallel
    {
#pragma omp for schedule(static)
        for (int64_t t = 0; t < ntok; t++)
            hmoe_cpu_quantize_act(wtype, x + (size_t)t * x_stride, (char *)scratch + (size_t)t * act_bytes, ncols);
        /* Equal contiguous row ranges per thread (a multiple of 16 rows) so each thread
         * streams one stretch of weight memory and gemm can tile rows inside it. */
        int nt = omp_get_num_threads(), id = omp_get_thread_num();
        int64_t per = ((nrows + nt - 1) / nt + 15) & ~(int64_t)15;
        int64_t r0 = per * id, r1 = HMOE_MIN(nrows, r0 + per);
        if (r0 < r1) {
            if (ntok == 1)
                hmoe_cpu_gemv(wtype, ncols, w, row_bytes, r0, r1, scratch, y + r0);
            else
                hmoe_cpu_gemm(wtype, ncols, w, row_bytes, r0, r1, scratch, act_bytes, ntok, y + r0, y_stride);
        }
    }
}
