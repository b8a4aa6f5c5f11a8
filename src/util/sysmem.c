/* sysmem.c — /proc/meminfo and /proc/self/status readers (sysmem.h). Both files are small text
 * tables of "Key:  value kB" lines; a missing file (not Linux, a sandbox) reads as zeros, and the
 * callers treat zero as unknown rather than as no memory. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hmoe/sysmem.h"

static size_t slurp(const char *path, char *buf, size_t cap) {
    FILE *f = fopen(path, "r");
    if (!f) {
        buf[0] = 0;
        return 0;
    }
    const size_t n = fread(buf, 1, cap - 1, f);
    fclose(f);
    buf[n] = 0;
    return n;
}

bool hmoe_sysmem_parse_kb(const char *text, const char *key, uint64_t *bytes) {
    const size_t kl = strlen(key);
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        if (strncmp(p, key, kl) || p[kl] != ':') continue;
        char *end = NULL;
        const unsigned long long v = strtoull(p + kl + 1, &end, 10);
        if (end == p + kl + 1) return false;
        while (*end == ' ' || *end == '\t') end++;
        /* the tables give kB; a line without a unit (HugePages_Total) is a count, not bytes */
        *bytes = strncmp(end, "kB", 2) ? (uint64_t)v : (uint64_t)v * 1024u;
        return true;
    }
    return false;
}

void hmoe_sysmem_read(struct hmoe_sysmem *out) {
    memset(out, 0, sizeof *out);
    char buf[8192];
    if (slurp("/proc/meminfo", buf, sizeof buf)) {
        hmoe_sysmem_parse_kb(buf, "MemAvailable", &out->mem_available);
        hmoe_sysmem_parse_kb(buf, "MemTotal", &out->mem_total);
        hmoe_sysmem_parse_kb(buf, "Dirty", &out->dirty);
        hmoe_sysmem_parse_kb(buf, "Writeback", &out->writeback);
    }
    const char *env = getenv("HMOE_MEM_AVAILABLE_MIB");
    if (env && *env) out->mem_available = (uint64_t)strtoull(env, NULL, 10) << 20;
}

static uint64_t status_field(const char *key) {
    char buf[8192];
    uint64_t v = 0;
    if (slurp("/proc/self/status", buf, sizeof buf)) hmoe_sysmem_parse_kb(buf, key, &v);
    return v;
}

uint64_t hmoe_sysmem_rss_peak(void) { return status_field("VmHWM"); }
uint64_t hmoe_sysmem_rss(void) { return status_field("VmRSS"); }
uint64_t hmoe_sysmem_locked(void) { return status_field("VmLck"); }
