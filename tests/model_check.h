/* model_check.h — shared by the model tests: read a golden sidecar and its logits files
 * (fixtures/README.md §4), and compare logit rows the way §5.4 suggests (max |Δ|, cosine,
 * relative RMS, top-1). Everything expected comes from the fixtures (llama.cpp).
 */
#ifndef HMOE_TEST_MODEL_CHECK_H
#define HMOE_TEST_MODEL_CHECK_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hmoe/json.h"
#include "hmoe/model.h"

/* Read a raw little-endian float32 file of exactly n floats (NULL if missing or short). */
static inline float *mc_read_f32(const char *path, size_t n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    float *v = malloc(n * sizeof(float) + 1);
    size_t got = v ? fread(v, sizeof(float), n + 1, f) : 0;
    fclose(f);
    if (got != n) {
        free(v);
        return NULL;
    }
    return v;
}

/* JSON array of numbers -> malloc'd int32 array. */
static inline int32_t *mc_ids(const struct hmoe_json *arr, int *n) {
    *n = arr ? (int)arr->n : 0;
    int32_t *v = malloc((size_t)(*n ? *n : 1) * sizeof *v);
    for (int i = 0; i < *n; i++) v[i] = (int32_t)arr->items[i]->num;
    return v;
}

/* Row statistics of ours vs ref over n values. */
struct mc_row {
    double max_abs, cos, sq_diff, sq_ref;
};
static inline struct mc_row mc_compare_row(const float *ours, const float *ref, int n) {
    struct mc_row r = {0, 0, 0, 0};
    double dot = 0, n1 = 0, n2 = 0;
    for (int i = 0; i < n; i++) {
        double a = ours[i], b = ref[i], d = fabs(a - b);
        if (d != d) d = INFINITY; /* a NaN must fail every threshold */
        if (d > r.max_abs) r.max_abs = d;
        dot += a * b;
        n1 += a * a;
        n2 += b * b;
        r.sq_diff += (a - b) * (a - b);
        r.sq_ref += b * b;
    }
    r.cos = dot / (sqrt(n1) * sqrt(n2));
    return r;
}

static inline int mc_argmax(const float *x, int n) { return hmoe_argmax(x, n); }

#endif
