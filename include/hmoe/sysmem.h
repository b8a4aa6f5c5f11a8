/* sysmem.h — what the host's memory holds, for notes and reports (src/util/sysmem.c): the page
 * cache's Dirty and Writeback bytes from /proc/meminfo (pages that lock slowly), this process's
 * peak and current resident set and mlock'ed bytes from /proc/self/status. Linux only; zeros
 * elsewhere, which callers read as unknown. (The CLI's hmoe_cli_mem_available_bytes adds a
 * container's cgroup cap to mem_available.)
 */
#ifndef HMOE_SYSMEM_H
#define HMOE_SYSMEM_H

#include <stdbool.h>
#include <stdint.h>

struct hmoe_sysmem {
    uint64_t mem_available; /* MemAvailable, or HMOE_MEM_AVAILABLE_MIB when set (tests, odd accounting) */
    uint64_t mem_total;
    uint64_t dirty, writeback; /* page cache not yet on disk: such pages lock slowly */
};

/* Fills *out from /proc/meminfo and the override; never fails (unknown fields stay 0). */
void hmoe_sysmem_read(struct hmoe_sysmem *out);

/* This process: peak resident set (VmHWM), resident set (VmRSS) and mlock'ed bytes (VmLck), or 0. */
uint64_t hmoe_sysmem_rss_peak(void);
uint64_t hmoe_sysmem_rss(void);
uint64_t hmoe_sysmem_locked(void);

/* Value in bytes of the "Key:   N kB" line `key` in text, or false (parsing helper, tested directly). */
bool hmoe_sysmem_parse_kb(const char *text, const char *key, uint64_t *bytes);

#endif
