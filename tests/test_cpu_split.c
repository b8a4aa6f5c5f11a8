/* test_cpu_split.c — hmoe_cpu_split_* (cpu.h): row ranges cut into long items and a tail of
 * short ones. Expected item counts and boundaries are worked out by hand below from the
 * definition (big items first, at least tail_rows left for small ones); every case also checks
 * that the items tile [0, rows) in order with no gap or overlap.
 */
#include "harness.h"

#include "hmoe/cpu.h"

struct want {
    int64_t rows, big, small, tail;
    int64_t n_big, n_items;
    int64_t last_r0; /* first row of the last item */
};

/* Items tile [0, rows) in order: each starts where the previous ended, none is empty, the
 * first n_big have `big` rows and the rest at most `small`. */
static int tiles(const struct hmoe_cpu_split *s, char *why, size_t cap) {
    int64_t at = 0;
    for (int64_t it = 0; it < s->n_items; it++) {
        int64_t r0, r1;
        hmoe_cpu_split_item(s, it, &r0, &r1);
        const int64_t len = r1 - r0, want_max = it < s->n_big ? s->big : s->small;
        if (r0 != at || len <= 0 || len > want_max || (it < s->n_big && len != s->big)) {
            snprintf(why, cap, "item %lld is [%lld, %lld) after row %lld (max %lld rows)", (long long)it,
                     (long long)r0, (long long)r1, (long long)at, (long long)want_max);
            return 0;
        }
        at = r1;
    }
    snprintf(why, cap, "items end at row %lld of %lld", (long long)at, (long long)s->rows);
    return at == s->rows;
}

int main(void) {
    static const struct want cases[] = {
        /* LM head of Qwen3 at 2 threads: 151936 rows, 1024-row items, 2048-row tail of 256:
         * 146 big items end at 149504, the remaining 2432 rows are 10 items (last 128 rows). */
        {151936, 1024, 256, 2048, 146, 156, 151936 - 128},
        /* Decode MoE down: 8 experts of 2048 rows end to end, the last expert in quarters. */
        {8 * 2048, 2048, 512, 2048, 7, 11, 8 * 2048 - 512},
        /* No tail: plain chunks, the last one short (1000 = 3 * 300 + 100). */
        {1000, 300, 300, 0, 3, 4, 900},
        /* Tail larger than the range: everything small (100 rows of 16: 6 full + 4). */
        {100, 64, 16, 500, 0, 7, 96},
        /* Exact multiple, tail of one item: 4 big + the last 256 rows in 4 of 64. */
        {1280, 256, 64, 256, 4, 8, 1216},
        /* Empty range. */
        {0, 16, 16, 32, 0, 0, 0},
    };
    char name[160], why[200];
    for (size_t i = 0; i < HMOE_ARRAY_LEN(cases); i++) {
        const struct want *c = &cases[i];
        struct hmoe_cpu_split s;
        hmoe_cpu_split_init(&s, c->rows, c->big, c->small, c->tail);
        int64_t r0 = 0, r1 = 0;
        if (s.n_items > 0) hmoe_cpu_split_item(&s, s.n_items - 1, &r0, &r1);
        snprintf(name, sizeof name, "split %lld rows, big %lld, small %lld, tail %lld: counts", (long long)c->rows,
                 (long long)c->big, (long long)c->small, (long long)c->tail);
        t_check(s.n_big == c->n_big && s.n_items == c->n_items && (c->n_items == 0 || r0 == c->last_r0), name,
                "n_big %lld (want %lld), n_items %lld (want %lld), last item starts at %lld (want %lld)",
                (long long)s.n_big, (long long)c->n_big, (long long)s.n_items, (long long)c->n_items, (long long)r0,
                (long long)c->last_r0);
        snprintf(name, sizeof name, "split %lld rows, big %lld, small %lld, tail %lld: items tile the rows",
                 (long long)c->rows, (long long)c->big, (long long)c->small, (long long)c->tail);
        t_check(tiles(&s, why, sizeof why), name, "%s", why);
    }
    /* Out-of-range arguments are clamped, not trusted: small > big acts as big, a negative tail
     * as none (10 rows of 4: 2 big + one of 2). */
    struct hmoe_cpu_split s;
    hmoe_cpu_split_init(&s, 10, 4, 9, -5);
    t_check(s.small == 4 && s.n_big == 2 && s.n_items == 3 && tiles(&s, why, sizeof why),
            "split clamps small to big and a negative tail to 0", "small %lld, n_big %lld, n_items %lld; %s",
            (long long)s.small, (long long)s.n_big, (long long)s.n_items, why);
    return t_summary();
}
