/* split.c — row ranges cut into work items with a fine tail (cpu.h, hmoe_cpu_split_*): long
 * items for the bulk of a job, short ones for its end, so the threads of hmoe_cpu_parallel()
 * finish close together. Pure arithmetic on row counts; callers keep the mapping
 * item -> rows in their own job description.
 */
#include "hmoe/cpu.h"

void hmoe_cpu_split_init(struct hmoe_cpu_split *s, int64_t rows, int64_t big, int64_t small, int64_t tail_rows) {
    if (rows < 0) rows = 0;
    if (big < 1) big = 1;
    if (small < 1) small = 1;
    if (small > big) small = big;
    if (tail_rows < 0) tail_rows = 0;
    if (tail_rows > rows) tail_rows = rows;
    s->rows = rows;
    s->big = big;
    s->small = small;
    s->n_big = (rows - tail_rows) / big; /* rounds the tail up to what the big items leave */
    const int64_t rest = rows - s->n_big * big;
    s->n_items = s->n_big + (rest + small - 1) / small;
}

void hmoe_cpu_split_item(const struct hmoe_cpu_split *s, int64_t item, int64_t *r0, int64_t *r1) {
    if (item < s->n_big) {
        *r0 = item * s->big;
        *r1 = *r0 + s->big;
        return;
    }
    *r0 = s->n_big * s->big + (item - s->n_big) * s->small;
    *r1 = *r0 + s->small < s->rows ? *r0 + s->small : s->rows;
}
