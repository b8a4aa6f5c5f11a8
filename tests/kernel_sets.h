/* kernel_sets.h — the CPU kernel sets a test runs every kernel on: each path, and the AVX2
 * path with and without AVX-VNNI, through the test hooks of src/cpu/cpu_impl.h. */
#ifndef HMOE_TESTS_KERNEL_SETS_H
#define HMOE_TESTS_KERNEL_SETS_H

#include <stdbool.h>
#include <stdio.h>

#include "hmoe/cpu.h"

enum hmoe_cpu_path hmoe_cpu_force_path(enum hmoe_cpu_path want); /* test hooks, src/cpu/cpu_impl.h */
bool hmoe_cpu_force_vnni(bool want);

/* The kernel sets one machine can run: each path, and the AVX2 path with and without AVX-VNNI. */
static const struct {
    const char *name;
    enum hmoe_cpu_path path;
    bool vnni;
} kernel_sets[] = {{"scalar", HMOE_CPU_SCALAR, false},
                   {"avx2-novnni", HMOE_CPU_AVX2, false},
                   {"avx2+vnni", HMOE_CPU_AVX2, true},
                   {"avx512", HMOE_CPU_AVX512, true}};

/* Select kernel set k; 0 (with the reason printed) when this CPU cannot run it. */
static inline int select_kernel_set(size_t k, const char *what) {
    const enum hmoe_cpu_path got = hmoe_cpu_force_path(kernel_sets[k].path);
    if (got != kernel_sets[k].path) {
        printf("[%s] %s ... skipped: this CPU only supports %s\n", kernel_sets[k].name, what, hmoe_cpu_path_name(got));
        return 0;
    }
    const bool vnni = hmoe_cpu_force_vnni(kernel_sets[k].vnni);
    if (kernel_sets[k].vnni && !vnni && got == HMOE_CPU_AVX2) {
        printf("[%s] %s ... skipped: this CPU (or compiler) has no AVX-VNNI\n", kernel_sets[k].name, what);
        return 0;
    }
    return 1;
}

#endif
