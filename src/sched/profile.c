/* profile.c — the routing profile of a model file (sched.h): how often each expert of each layer
 * was selected, summed over runs, so the next run can put the hot set in VRAM before the first
 * token. Stored as text in <dir>/<hash>.routing:
 *     hmoe-routing-profile 1
 *     layers <L> experts <E>
 *     <E counts of layer 0>
 *     ...
 * The hash (FNV-1a 64 over the file size and the first MiB: header, metadata, tensor table)
 * names the file without reading 17 GB. Writes go to a temporary file renamed over the old one.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hmoe/sched.h"

enum hmoe_status hmoe_sched_profile_path(const char *dir, const void *file_base, uint64_t file_size, char *out,
                                         size_t cap, struct hmoe_err *err) {
    char d[4096];
    if (dir && *dir) snprintf(d, sizeof d, "%s", dir);
    else if (getenv("XDG_CACHE_HOME") && *getenv("XDG_CACHE_HOME")) snprintf(d, sizeof d, "%s/hmoe", getenv("XDG_CACHE_HOME"));
    else if (getenv("HOME") && *getenv("HOME")) snprintf(d, sizeof d, "%s/.cache/hmoe", getenv("HOME"));
    else return HMOE_RAISE(err, HMOE_ERR_NOT_FOUND, "no cache directory: set HOME or XDG_CACHE_HOME, or use --no-profile");
    uint64_t h = 0xcbf29ce484222325ull;
    for (int i = 0; i < 8; i++) h = (h ^ ((file_size >> (8 * i)) & 0xff)) * 0x100000001b3ull;
    const uint8_t *p = file_base;
    const uint64_t n = file_size < (1u << 20) ? file_size : (1u << 20);
    for (uint64_t i = 0; p && i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    if ((size_t)snprintf(out, cap, "%s/%016" PRIx64 ".routing", d, h) >= cap)
        return HMOE_RAISE(err, HMOE_ERR_RANGE, "routing profile path too long");
    return HMOE_OK;
}

enum hmoe_status hmoe_sched_profile_load(const char *path, int n_layer, int n_expert, uint64_t *counts,
                                         struct hmoe_err *err) {
    FILE *f = fopen(path, "r");
    if (!f) return HMOE_RAISE(err, HMOE_ERR_NOT_FOUND, "%s: no routing profile yet", path);
    int version = 0, L = 0, E = 0;
    enum hmoe_status st = HMOE_OK;
    if (fscanf(f, "hmoe-routing-profile %d layers %d experts %d", &version, &L, &E) != 3 || version != 1)
        st = HMOE_RAISE(err, HMOE_ERR_FORMAT, "%s: not a version-1 hmoe routing profile", path);
    else if (L != n_layer || E != n_expert)
        st = HMOE_RAISE(err, HMOE_ERR_FORMAT, "%s: profile is for %d layers x %d experts, the model has %d x %d", path, L,
                        E, n_layer, n_expert);
    for (int l = 0; !st && l < L; l++)
        for (int e = 0; !st && e < E; e++) {
            uint64_t v;
            if (fscanf(f, "%" SCNu64, &v) != 1)
                st = HMOE_RAISE(err, HMOE_ERR_FORMAT, "%s: layer %d: expected %d counts", path, l, E);
            else counts[(size_t)l * (size_t)E + (size_t)e] = v;
        }
    fclose(f);
    return st;
}

static int mkdir_p(const char *dir) {
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s", dir);
    for (char *p = tmp + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            if (mkdir(tmp, 0755) && errno != EEXIST) return -1;
            *p = '/';
        }
    return mkdir(tmp, 0755) && errno != EEXIST ? -1 : 0;
}

enum hmoe_status hmoe_sched_profile_save(const char *path, int n_layer, int n_expert, const uint64_t *counts,
                                         struct hmoe_err *err) {
    char dir[4096], tmp[4200];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash && slash != dir) {
        *slash = 0;
        if (mkdir_p(dir))
            return HMOE_RAISE(err, HMOE_ERR_IO, "cannot create %s: %s (use --no-profile)", dir, strerror(errno));
    }
    snprintf(tmp, sizeof tmp, "%s.tmp%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) return HMOE_RAISE(err, HMOE_ERR_IO, "cannot write %s: %s (use --no-profile)", tmp, strerror(errno));
    fprintf(f, "hmoe-routing-profile 1\nlayers %d experts %d\n", n_layer, n_expert);
    for (int l = 0; l < n_layer; l++)
        for (int e = 0; e < n_expert; e++)
            fprintf(f, "%" PRIu64 "%c", counts[(size_t)l * (size_t)n_expert + (size_t)e], e + 1 < n_expert ? ' ' : '\n');
    if (fclose(f) || rename(tmp, path)) {
        remove(tmp);
        return HMOE_RAISE(err, HMOE_ERR_IO, "cannot write %s: %s", path, strerror(errno));
    }
    return HMOE_OK;
}
