/* gguf_split.c — the shard names of a split model (gguf.md §10.2: llama.cpp's gguf-split
 * writes PREFIX-00001-of-0000N.gguf, five digits each, shard numbers from 1), and the bytes on
 * disk of all shards, for memory checks made before anything is opened.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "gguf_impl.h"

bool hmoe_gguf_split_name(const char *path, size_t *prefix_len, int *no, int *count) {
    const size_t n = strlen(path);
    static const char tail[] = "-00000-of-00000.gguf";
    const size_t tl = sizeof tail - 1;
    if (n < tl) return false;
    const char *t = path + n - tl;
    for (size_t i = 0; i < tl; i++) {
        const bool digit = tail[i] == '0';
        if (digit ? (t[i] < '0' || t[i] > '9') : t[i] != tail[i]) return false;
    }
    const int a = atoi(t + 1), b = atoi(t + 10);
    if (a < 1 || b < 1 || a > b) return false;
    *prefix_len = n - tl, *no = a, *count = b;
    return true;
}

void hmoe_gguf_split_path(char *out, size_t cap, const char *path, size_t prefix_len, int no, int count) {
    snprintf(out, cap, "%.*s-%05d-of-%05d.gguf", (int)prefix_len, path, no, count);
}

uint64_t hmoe_gguf_split_total_bytes(const char *path, uint64_t first_bytes) {
    size_t pl;
    int no, count;
    if (!hmoe_gguf_split_name(path, &pl, &no, &count) || no != 1 || count == 1) return first_bytes;
    uint64_t total = first_bytes;
    char *p = malloc(pl + 32);
    if (!p) return first_bytes;
    for (int i = 2; i <= count; i++) {
        struct stat st;
        hmoe_gguf_split_path(p, pl + 32, path, pl, i, count);
        if (stat(p, &st) == 0) total += (uint64_t)st.st_size;
    }
    free(p);
    return total;
}
