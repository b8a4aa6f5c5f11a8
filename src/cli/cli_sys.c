/* cli_sys.c — facts about this machine the CLI needs for its checks and reports: memory
 * available to a new allocation (/proc/meminfo, capped by a cgroup v2 limit), free disk
 * space, the CPU's name and last-level cache size (sysfs). Linux only; every function
 * answers "unknown" (0 or "") elsewhere rather than failing.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>

#include "cli.h"
#include "hmoe/sysmem.h"

/* A file holding one number (or "max"); 0 when absent or "max". */
static uint64_t read_number(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char buf[64] = "";
    if (!fgets(buf, sizeof buf, f)) buf[0] = 0;
    fclose(f);
    if (buf[0] < '0' || buf[0] > '9') return 0;
    return strtoull(buf, NULL, 10);
}

uint64_t hmoe_cli_mem_available_bytes(void) {
    const char *env = getenv("HMOE_MEM_AVAILABLE_MIB");
    struct hmoe_sysmem sm;
    hmoe_sysmem_read(&sm); /* MemAvailable, or the override */
    if (env && *env) return sm.mem_available;
    uint64_t avail = sm.mem_available;
    /* cgroup v2: a container's limit is not visible in /proc/meminfo. */
    uint64_t max = read_number("/sys/fs/cgroup/memory.max"), cur = read_number("/sys/fs/cgroup/memory.current");
    if (max && max > cur && (avail == 0 || max - cur < avail)) avail = max - cur;
    return avail;
}

uint64_t hmoe_cli_disk_free_bytes(const char *dir) {
    struct statvfs s;
    if (statvfs(dir, &s) != 0) return 0;
    return (uint64_t)s.f_bavail * (uint64_t)s.f_frsize;
}

void hmoe_cli_cpu_name(char *buf, size_t size) {
    buf[0] = 0;
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) != 0) continue;
        const char *p = strchr(line, ':');
        if (!p) break;
        p++;
        while (*p == ' ' || *p == '\t') p++;
        snprintf(buf, size, "%s", p);
        size_t n = strlen(buf);
        while (n && (buf[n - 1] == '\n' || buf[n - 1] == ' ')) buf[--n] = 0;
        break;
    }
    fclose(f);
}

uint64_t hmoe_cli_llc_bytes(void) {
    uint64_t best = 0;
    for (int i = 0; i < 8; i++) {
        char path[128], buf[64] = "";
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        if (fgets(buf, sizeof buf, f)) {
            char *end;
            uint64_t v = strtoull(buf, &end, 10);
            if (*end == 'K') v <<= 10;
            else if (*end == 'M') v <<= 20;
            if (v > best) best = v;
        }
        fclose(f);
    }
    return best;
}

const char *hmoe_cli_fmt_bytes(char *buf, size_t size, uint64_t bytes) {
    if (bytes >= (uint64_t)1 << 30) snprintf(buf, size, "%.2f GiB", (double)bytes / (1024.0 * 1024.0 * 1024.0));
    else snprintf(buf, size, "%.1f MiB", (double)bytes / (1024.0 * 1024.0));
    return buf;
}
