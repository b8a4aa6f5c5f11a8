/* amx_detect.c — may this process use AMX? cpuid leaf 7 (EDX bit 24 AMX-TILE, bit 25
 * AMX-INT8), then Linux's permission for the tile data state (arch_prctl
 * ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA = 18; Documentation/arch/x86/xstate.rst), XCR0
 * bits 17-18 (TILECFG, TILEDATA) enabled by the OS, and last a tile product checked against
 * scalar code with SIGILL / SIGSEGV caught — AMX has faulted in some VMs that advertise it.
 * The permission is per process, so one successful call covers every thread.
 */
#define _GNU_SOURCE
#include <cpuid.h>
#include <setjmp.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "amx_impl.h"

#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18

static sigjmp_buf amx_jump;
static void amx_on_signal(int sig) { siglongjmp(amx_jump, sig); }

/* The self-test with SIGILL / SIGSEGV turned into a "no"; the old handlers come back. */
static bool guarded_selftest(const char **why) {
    struct sigaction sa, old_ill, old_segv;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = amx_on_signal;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGILL, &sa, &old_ill) != 0) {
        *why = "cannot install a SIGILL handler for the self-test";
        return false;
    }
    if (sigaction(SIGSEGV, &sa, &old_segv) != 0) {
        sigaction(SIGILL, &old_ill, NULL);
        *why = "cannot install a SIGSEGV handler for the self-test";
        return false;
    }
    bool ok = false;
    volatile int sig = sigsetjmp(amx_jump, 1);
    if (sig == 0) {
        ok = hmoe_cpu_amx_selftest();
        *why = ok ? NULL : "the tile self-test gave wrong sums";
    } else {
        *why = sig == SIGILL ? "the tile self-test raised SIGILL" : "the tile self-test raised SIGSEGV";
    }
    sigaction(SIGILL, &old_ill, NULL);
    sigaction(SIGSEGV, &old_segv, NULL);
    return ok;
}

bool hmoe_cpu_amx_detect(const char **why) {
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(d & (1u << 24)) || !(d & (1u << 25))) {
        *why = "the CPU has no AMX-TILE / AMX-INT8";
        return false;
    }
    if (syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) != 0) {
        *why = "the kernel refused the tile data permission (arch_prctl)";
        return false;
    }
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    (void)hi;
    if ((lo & (3u << 17)) != (3u << 17)) {
        *why = "the OS has not enabled the tile state (XCR0 bits 17-18)";
        return false;
    }
    return guarded_selftest(why);
}
