/* test_cpu_lanes.c — hmoe_cpu_lanes_* (cpu.h): items in per-thread lanes with stealing from
 * the back. Serial cases are worked out by hand from the definition (lane i = items
 * [n*i/L, n*(i+1)/L), the owner takes its front, a thread with an empty lane takes the back of
 * the fullest lane); the threaded case runs real pool jobs whose items take their number from
 * the lanes and checks that every item ran exactly once, for many jobs in a row.
 */
#include <stdatomic.h>
#include <string.h>

#include "harness.h"

#include "hmoe/cpu.h"

/* Take `count` items as thread `tid`, into got[]; returns how many were not -1. */
static int take_n(struct hmoe_cpu_lanes *l, int tid, int count, int64_t *got) {
    int ok = 0;
    for (int i = 0; i < count; i++) {
        got[i] = hmoe_cpu_lanes_next(l, tid);
        ok += got[i] >= 0;
    }
    return ok;
}

static int same(const int64_t *a, const int64_t *b, int n) {
    for (int i = 0; i < n; i++)
        if (a[i] != b[i]) return 0;
    return 1;
}

struct pool_job {
    struct hmoe_cpu_lanes lanes;
    _Atomic int runs[1000];
    _Atomic int bad;
};

static void task_mark(void *arg, int64_t it, int tid) {
    (void)it;
    struct pool_job *j = arg;
    const int64_t mine = hmoe_cpu_lanes_next(&j->lanes, tid);
    if (mine < 0 || mine >= 1000) {
        atomic_fetch_add(&j->bad, 1);
        return;
    }
    atomic_fetch_add(&j->runs[mine], 1);
}

int main(void) {
    hmoe_cpu_init();
    struct hmoe_cpu_lanes l;
    int64_t got[16];

    /* 10 items, 2 lanes: [0,5) and [5,10). Thread 0 takes its lane in order. */
    hmoe_cpu_lanes_init(&l, 10, 2);
    take_n(&l, 0, 3, got);
    t_check(same(got, (const int64_t[]){0, 1, 2}, 3), "lanes: the owner takes its lane front to back", "got %lld %lld %lld",
            (long long)got[0], (long long)got[1], (long long)got[2]);
    /* Thread 1 takes 5, 6; thread 0 then 3, 4, and with its lane empty steals 9, 8, 7 from the back
     * of lane 1; then everything is gone. */
    take_n(&l, 1, 2, got);
    t_check(same(got, (const int64_t[]){5, 6}, 2), "lanes: thread 1 starts at the middle", "got %lld %lld",
            (long long)got[0], (long long)got[1]);
    int n = take_n(&l, 0, 6, got);
    t_check(n == 5 && same(got, (const int64_t[]){3, 4, 9, 8, 7, -1}, 6),
            "lanes: an empty lane steals the other's last items, back to front", "got %lld %lld %lld %lld %lld %lld",
            (long long)got[0], (long long)got[1], (long long)got[2], (long long)got[3], (long long)got[4],
            (long long)got[5]);
    t_check(hmoe_cpu_lanes_next(&l, 1) == -1, "lanes: -1 once every item is taken", "an item came back");

    /* 7 items, 3 lanes: [0,2), [2,4), [4,7). Thread 1 empties lane 1, then steals from the
     * fullest (lane 2, 3 left) its back item 6; then lanes 0 and 2 have 2 each: the first fullest
     * in lane order (lane 0) gives its back item 1. */
    hmoe_cpu_lanes_init(&l, 7, 3);
    take_n(&l, 1, 4, got);
    t_check(same(got, (const int64_t[]){2, 3, 6, 1}, 4), "lanes: steal from the fullest lane", "got %lld %lld %lld %lld",
            (long long)got[0], (long long)got[1], (long long)got[2], (long long)got[3]);
    /* tid beyond the lane count wraps: tid 5 owns lane 5 % 3 = 2, whose front is 4 */
    t_check(hmoe_cpu_lanes_next(&l, 5) == 4, "lanes: tid wraps to lane tid % n_lanes", "front of lane 2 is not 4");

    /* More lanes than items: empty lanes steal; 2 items over 4 lanes = lanes 1 and 3 hold one. */
    hmoe_cpu_lanes_init(&l, 2, 4);
    n = take_n(&l, 0, 3, got);
    t_check(n == 2 && got[2] == -1 && ((got[0] == 1 && got[1] == 0) || (got[0] == 0 && got[1] == 1)),
            "lanes: more lanes than items", "took %d: %lld %lld %lld", n, (long long)got[0], (long long)got[1],
            (long long)got[2]);
    hmoe_cpu_lanes_init(&l, 0, 2);
    t_check(hmoe_cpu_lanes_next(&l, 0) == -1, "lanes: no items", "an item came out of an empty set");

    /* Threaded: pool jobs of n items, 4 threads, each item run exactly once. */
    static struct pool_job job;
    int all_once = 1, bad = 0;
    long first_bad = -1;
    for (int rep = 0; rep < 300 && all_once; rep++) {
        const int items = 1 + (rep * 37) % 1000;
        memset(&job, 0, sizeof job);
        hmoe_cpu_lanes_init(&job.lanes, items, 4);
        hmoe_cpu_parallel(4, items, task_mark, &job);
        bad += atomic_load(&job.bad);
        for (int i = 0; i < items; i++)
            if (atomic_load(&job.runs[i]) != 1) {
                all_once = 0;
                first_bad = rep;
                break;
            }
    }
    t_check(all_once && bad == 0, "lanes: 300 pool jobs on 4 threads run every item exactly once",
            "job %ld: an item ran twice or never; %d calls found no item", first_bad, bad);
    return t_summary();
}
