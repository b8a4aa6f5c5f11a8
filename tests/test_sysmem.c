/* test_sysmem.c — the /proc table readers (src/util/sysmem.c): the "Key: N kB" parser on a
 * fixed text (exact key match, units, a missing key, a count without unit), and the live values
 * of this process against what it just did (a touched allocation raises VmHWM by at least its
 * size; an mlock'ed page shows in VmLck when the limit allows one).
 */
#include <stdint.h>
#include <sys/mman.h>

#include "harness.h"
#include "hmoe/sysmem.h"

int main(void) {
    const char *tab = "MemTotal:       131072000 kB\nMemFree:         1000 kB\nMemAvailable:   64000000 kB\n"
                      "Dirty:              12 kB\nWriteback:           0 kB\nHugePages_Total:       4\n";
    uint64_t v = 0;
    t_check(hmoe_sysmem_parse_kb(tab, "MemAvailable", &v) && v == 64000000ull * 1024, "sysmem: MemAvailable in bytes",
            "%llu", (unsigned long long)v);
    t_check(hmoe_sysmem_parse_kb(tab, "Dirty", &v) && v == 12 * 1024, "sysmem: Dirty", "%llu", (unsigned long long)v);
    t_check(hmoe_sysmem_parse_kb(tab, "Writeback", &v) && v == 0, "sysmem: a zero value", "%llu",
            (unsigned long long)v);
    t_check(hmoe_sysmem_parse_kb(tab, "HugePages_Total", &v) && v == 4, "sysmem: a count without unit stays a count",
            "%llu", (unsigned long long)v);
    t_check(!hmoe_sysmem_parse_kb(tab, "Mem", &v) && !hmoe_sysmem_parse_kb(tab, "SwapTotal", &v) &&
                !hmoe_sysmem_parse_kb("", "Dirty", &v) && !hmoe_sysmem_parse_kb("Dirty: x kB\n", "Dirty", &v),
            "sysmem: a prefix, a missing key, an empty table and a non-number are not found", "%s", "found");

    struct hmoe_sysmem sm;
    hmoe_sysmem_read(&sm);
    t_check(sm.mem_total > 0, "sysmem: MemTotal of this machine is read", "0");

    const uint64_t before = hmoe_sysmem_rss_peak();
    const size_t n = (size_t)64 << 20;
    volatile uint8_t *buf = malloc(n);
    for (size_t i = 0; buf && i < n; i += 4096) buf[i] = (uint8_t)i;
    const uint64_t rss = hmoe_sysmem_rss(), after = hmoe_sysmem_rss_peak(); /* (in this order: rss <= peak) */
    t_check(buf && before > 0 && after >= before + n - ((size_t)4 << 20) && rss <= after,
            "sysmem: a touched 64 MiB allocation raises the peak RSS by its size", "before %llu after %llu rss %llu",
            (unsigned long long)before, (unsigned long long)after, (unsigned long long)rss);
    free((void *)buf);

#if defined(__SANITIZE_ADDRESS__)
    /* AddressSanitizer replaces mlock with a no-op, so there is nothing to see */
    return t_summary();
#endif
    static uint8_t page[4096] __attribute__((aligned(4096)));
    page[0] = 1;
    if (mlock(page, sizeof page) == 0) {
        const uint64_t lck = hmoe_sysmem_locked();
        munlock(page, sizeof page);
        t_check(lck >= 4096, "sysmem: an mlock'ed page shows in VmLck", "%llu", (unsigned long long)lck);
    } else {
        t_check(hmoe_sysmem_locked() == 0, "sysmem: nothing locked when mlock is not allowed", "%s", "locked");
    }
    return t_summary();
}
