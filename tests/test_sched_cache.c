/* test_sched_cache.c — expert-cache bookkeeping (src/sched/cache.c) and the routing profile file
 * (src/sched/profile.c): the hot set is the most-routed experts, static slots are never replaced,
 * LRU evicts the least recently routed expert, LFU keeps a hotter expert, a copy in flight is not
 * visible until committed, the per-token copy limit holds, and a profile survives a round trip
 * (damaged or mismatched files are rejected with a message). Expectations are the documented
 * policies (sched.h), not this code's output.
 */
#include <unistd.h>

#include "harness.h"
#include "hmoe/sched.h"

static void commit_all(struct hmoe_sched_cache *c, const struct hmoe_sched_cache_fill *f, int n) {
    for (int i = 0; i < n; i++) hmoe_sched_cache_commit(c, &f[i]);
}

static void test_seed_and_lru(void) {
    struct hmoe_err err = {0};
    struct hmoe_sched_cache *c = NULL;
    const int slots[2] = {4, 0};
    if (hmoe_sched_cache_init(2, 8, slots, HMOE_CACHE_LRU, &c, &err)) {
        t_check(0, "cache init", "%s", err.msg);
        return;
    }
    /* layer 0 counts: experts 5, 2, 7, 0 hottest (in that order) */
    const uint64_t counts[16] = {10, 1, 30, 0, 2, 50, 3, 20, /* layer 1 */ 1, 1, 1, 1, 1, 1, 1, 1};
    struct hmoe_sched_cache_fill f[16];
    int n = hmoe_sched_cache_seed(c, counts, 0.5, f, 16);
    t_check(n == 4 && f[0].expert == 5 && f[1].expert == 2 && f[2].expert == 7 && f[3].expert == 0 && f[0].layer == 0,
            "seed: the 4 slots get the 4 most-routed experts, hottest first", "n %d, experts %d %d %d %d", n, f[0].expert,
            f[1].expert, f[2].expert, f[3].expert);
    t_check(hmoe_sched_cache_slot_of(c, 0, 5) == -1, "a seeded expert is not visible before its copy is committed",
            "slot %d", hmoe_sched_cache_slot_of(c, 0, 5));
    commit_all(c, f, n);
    t_check(hmoe_sched_cache_slot_of(c, 0, 5) == 0 && hmoe_sched_cache_slot_of(c, 0, 0) == 3 &&
                hmoe_sched_cache_slot_of(c, 0, 1) == -1 && hmoe_sched_cache_slot_of(c, 1, 0) == -1,
            "after commit: slot map of the hot set; a layer without slots maps nothing", "%s", "wrong map");
    /* tokens: expert 7 (slot 2, dynamic) used at token 0, expert 0 (slot 3) never; token 1 routes
     * expert 1 (miss): LRU evicts the dynamic slot used longest ago = slot 3 (expert 0) */
    const int32_t t0[2] = {7, 5};
    hmoe_sched_cache_touch(c, 0, t0, 2);
    n = hmoe_sched_cache_plan(c, f, 4);
    t_check(n == 0, "no miss, no copy", "%d copies", n);
    const int32_t t1[2] = {1, 5};
    hmoe_sched_cache_touch(c, 0, t1, 2);
    n = hmoe_sched_cache_plan(c, f, 4);
    t_check(n == 1 && f[0].expert == 1 && f[0].slot == 3 && f[0].old_expert == 0 &&
                hmoe_sched_cache_slot_of(c, 0, 0) == -1 && hmoe_sched_cache_slot_of(c, 0, 1) == -1,
            "LRU: a miss replaces the least recently routed dynamic slot; the victim leaves the map at once",
            "n %d slot %d old %d", n, n ? f[0].slot : -1, n ? f[0].old_expert : -1);
    commit_all(c, f, n);
    t_check(hmoe_sched_cache_slot_of(c, 0, 1) == 3, "the new expert is visible after commit", "%s", "not visible");
    /* static slots (0, 1: experts 5, 2) are never victims: fill every dynamic slot with misses */
    const int32_t t2[4] = {3, 4, 6, 2};
    hmoe_sched_cache_touch(c, 0, t2, 4);
    n = hmoe_sched_cache_plan(c, f, 8);
    bool static_kept = true;
    for (int i = 0; i < n; i++) static_kept &= f[i].slot >= 2;
    t_check(n == 2 && static_kept && hmoe_sched_cache_slot_of(c, 0, 5) == 0 && hmoe_sched_cache_slot_of(c, 0, 2) == 1,
            "static slots are never replaced; only the 2 dynamic ones take misses", "n %d", n);
    commit_all(c, f, n);
    /* per-token limit */
    const int32_t t3[3] = {0, 7, 1};
    hmoe_sched_cache_touch(c, 0, t3, 3);
    n = hmoe_sched_cache_plan(c, f, 1);
    t_check(n == 1, "at most the per-token number of copies is planned", "n %d", n);
    hmoe_sched_cache_free(c);
}

static void test_lfu(void) {
    struct hmoe_err err = {0};
    struct hmoe_sched_cache *c = NULL;
    const int slots[1] = {2};
    if (hmoe_sched_cache_init(1, 8, slots, HMOE_CACHE_LFU, &c, &err)) {
        t_check(0, "cache init (LFU)", "%s", err.msg);
        return;
    }
    const uint64_t zero[8] = {0};
    struct hmoe_sched_cache_fill f[8];
    int n = hmoe_sched_cache_seed(c, zero, 0.0, f, 8); /* all dynamic: experts 0, 1 */
    commit_all(c, f, n);
    /* expert 0 routed on 5 tokens: hot; expert 1 never; then expert 6 once: LFU evicts 1, not 0 */
    for (int t = 0; t < 5; t++) {
        const int32_t ids[1] = {0};
        hmoe_sched_cache_touch(c, 0, ids, 1);
        hmoe_sched_cache_plan(c, f, 0);
    }
    const int32_t ids6[1] = {6};
    hmoe_sched_cache_touch(c, 0, ids6, 1);
    n = hmoe_sched_cache_plan(c, f, 4);
    t_check(n == 1 && f[0].old_expert == 1 && f[0].expert == 6, "LFU: a miss replaces the coldest slot, not the hot one",
            "n %d old %d", n, n ? f[0].old_expert : -1);
    commit_all(c, f, n);
    /* expert 3 once: its score (1) beats expert 6's decayed 0.9 but not expert 0's (about 3.3):
     * exactly one replacement, of expert 6 */
    const int32_t ids3[1] = {3};
    hmoe_sched_cache_touch(c, 0, ids3, 1);
    n = hmoe_sched_cache_plan(c, f, 4);
    t_check(n == 1 && f[0].old_expert == 6 && hmoe_sched_cache_slot_of(c, 0, 0) >= 0,
            "LFU keeps the frequently routed expert", "n %d old %d", n, n ? f[0].old_expert : -1);
    hmoe_sched_cache_free(c);
}

static void test_profile(void) {
    struct hmoe_err err = {0};
    char dir[] = "/tmp/hmoe_prof_XXXXXX";
    if (!mkdtemp(dir)) {
        t_check(0, "profile temp dir", "mkdtemp failed");
        return;
    }
    char sub[256], path[512];
    snprintf(sub, sizeof sub, "%s/a/b", dir);
    const char file[] = "GGUF fake header bytes";
    enum hmoe_status st = hmoe_sched_profile_path(sub, file, sizeof file, path, sizeof path, &err);
    char path2[512];
    hmoe_sched_profile_path(sub, file, sizeof file - 1, path2, sizeof path2, &err);
    t_check(!st && strstr(path, "/a/b/") && strstr(path, ".routing") && strcmp(path, path2) != 0,
            "profile path: <dir>/<hash>.routing, the hash depends on the file", "%s vs %s", path, path2);
    uint64_t counts[2 * 3] = {1, 2, 3, 4000000000000ull, 0, 7}, back[6] = {0};
    st = hmoe_sched_profile_load(path, 2, 3, back, &err);
    t_check(st == HMOE_ERR_NOT_FOUND, "no profile yet: NOT_FOUND", "status %d", (int)st);
    st = hmoe_sched_profile_save(path, 2, 3, counts, &err);
    if (!st) st = hmoe_sched_profile_load(path, 2, 3, back, &err);
    t_check(!st && memcmp(counts, back, sizeof counts) == 0, "profile round trip (directories created, 64-bit counts)",
            "%s", err.msg);
    st = hmoe_sched_profile_load(path, 3, 3, back, &err);
    t_check(st == HMOE_ERR_FORMAT && strstr(err.msg, "2 layers"), "a profile of another shape is rejected", "%s",
            err.msg);
    FILE *f = fopen(path, "w");
    if (f) {
        fputs("hmoe-routing-profile 1\nlayers 2 experts 3\n1 2\n", f);
        fclose(f);
    }
    st = hmoe_sched_profile_load(path, 2, 3, back, &err);
    t_check(st == HMOE_ERR_FORMAT && strstr(err.msg, "layer"), "a truncated profile is rejected with the layer", "%s",
            err.msg);
    remove(path);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd)) {}
}

/* Load time without a profile: all-zero counts fill the slots with experts 0..n_slots-1; a later
 * seed from real counts keeps the wanted experts already in place and copies only the others. */
static void test_reseed(void) {
    struct hmoe_err err = {0};
    struct hmoe_sched_cache *c = NULL;
    const int slots[1] = {4};
    if (hmoe_sched_cache_init(1, 8, slots, HMOE_CACHE_LFU, &c, &err)) {
        t_check(0, "cache init (re-seed)", "%s", err.msg);
        return;
    }
    const uint64_t zero[8] = {0};
    struct hmoe_sched_cache_fill f[8];
    int n = hmoe_sched_cache_seed(c, zero, 1.0, f, 8);
    commit_all(c, f, n);
    t_check(n == 4 && hmoe_sched_cache_n_valid(c) == 4 && hmoe_sched_cache_slot_of(c, 0, 0) == 0 &&
                hmoe_sched_cache_slot_of(c, 0, 3) == 3 && hmoe_sched_cache_slot_of(c, 0, 4) == -1,
            "seed without counts: experts 0..3 in slots 0..3", "n %d valid %d", n, hmoe_sched_cache_n_valid(c));
    /* hottest: 7, 2, 5, then 0 (lowest index among the zeros): 2 and 0 stay, 7 and 5 replace 1 and 3 */
    const uint64_t counts[8] = {0, 0, 9, 0, 0, 1, 0, 10};
    n = hmoe_sched_cache_seed(c, counts, 0.5, f, 8);
    t_check(n == 2 && f[0].expert == 7 && f[0].slot == 1 && f[0].old_expert == 1 && f[1].expert == 5 && f[1].slot == 3 &&
                f[1].old_expert == 3,
            "re-seed over a filled cache copies only the missing hot experts into the unwanted slots",
            "n %d, first %d->slot %d (old %d)", n, n ? f[0].expert : -1, n ? f[0].slot : -1, n ? f[0].old_expert : -1);
    commit_all(c, f, n);
    t_check(hmoe_sched_cache_slot_of(c, 0, 2) == 2 && hmoe_sched_cache_slot_of(c, 0, 0) == 0 &&
                hmoe_sched_cache_slot_of(c, 0, 7) == 1 && hmoe_sched_cache_slot_of(c, 0, 5) == 3 &&
                hmoe_sched_cache_slot_of(c, 0, 1) == -1 && hmoe_sched_cache_n_valid(c) == 4,
            "after the re-seed: kept experts did not move", "%s", "wrong map");
    hmoe_sched_cache_free(c);
}

/* What the device-side prefetch is offered (victims in eviction order, never static or pending
 * slots) and how its copies are recorded (install: the new expert valid, the old one gone). */
static void test_victims_install(void) {
    struct hmoe_err err = {0};
    struct hmoe_sched_cache *c = NULL;
    const int slots[1] = {5};
    if (hmoe_sched_cache_init(1, 16, slots, HMOE_CACHE_LRU, &c, &err)) {
        t_check(0, "cache init (victims)", "%s", err.msg);
        return;
    }
    const uint64_t counts[16] = {50, 40, 30, 20, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    struct hmoe_sched_cache_fill f[8];
    int n = hmoe_sched_cache_seed(c, counts, 0.4, f, 8); /* 2 static (0, 1), dynamic 2, 3 + slot 4 expert 4 */
    commit_all(c, f, n);
    /* routing: expert 3 at token 0, expert 2 at token 1, expert 4 never */
    const int32_t a[1] = {3}, b[1] = {2};
    hmoe_sched_cache_touch(c, 0, a, 1);
    hmoe_sched_cache_plan(c, f, 0);
    hmoe_sched_cache_touch(c, 0, b, 1);
    hmoe_sched_cache_plan(c, f, 0);
    int32_t vs[8], ve[8];
    n = hmoe_sched_cache_victims(c, 0, vs, ve, 8);
    t_check(n == 3 && vs[0] == 4 && ve[0] == 4 && vs[1] == 3 && ve[1] == 3 && vs[2] == 2 && ve[2] == 2,
            "victims: dynamic slots only, least recently routed first", "n %d: slot %d (e %d), %d (e %d), %d (e %d)", n,
            n > 0 ? vs[0] : -1, n > 0 ? ve[0] : -1, n > 1 ? vs[1] : -1, n > 1 ? ve[1] : -1, n > 2 ? vs[2] : -1,
            n > 2 ? ve[2] : -1);
    n = hmoe_sched_cache_victims(c, 0, vs, ve, 1);
    t_check(n == 1 && vs[0] == 4, "victims: at most max", "n %d", n);
    hmoe_sched_cache_install(c, 0, 9, 4);
    t_check(hmoe_sched_cache_slot_of(c, 0, 9) == 4 && hmoe_sched_cache_slot_of(c, 0, 4) == -1 &&
                hmoe_sched_cache_n_valid(c) == 5,
            "install: the prefetched expert is valid in its slot, the victim left the map", "slot of 9: %d, of 4: %d",
            hmoe_sched_cache_slot_of(c, 0, 9), hmoe_sched_cache_slot_of(c, 0, 4));
    hmoe_sched_cache_install(c, 0, 11, 0);
    t_check(hmoe_sched_cache_slot_of(c, 0, 11) == -1 && hmoe_sched_cache_slot_of(c, 0, 0) == 0,
            "install into a static slot is ignored", "slot of 11: %d", hmoe_sched_cache_slot_of(c, 0, 11));
    /* a slot with a copy in flight is neither offered nor overwritten */
    const int32_t m[1] = {12};
    hmoe_sched_cache_touch(c, 0, m, 1);
    n = hmoe_sched_cache_plan(c, f, 1);
    const int pend = n == 1 ? f[0].slot : -1;
    n = hmoe_sched_cache_victims(c, 0, vs, ve, 8);
    bool offered = false;
    for (int i = 0; i < n; i++) offered |= vs[i] == pend;
    hmoe_sched_cache_install(c, 0, 13, pend);
    t_check(pend >= 2 && !offered && hmoe_sched_cache_slot_of(c, 0, 13) == -1,
            "a pending slot is not offered to the prefetch and not overwritten", "pending slot %d, offered %d", pend,
            offered);
    hmoe_sched_cache_free(c);
}

int main(void) {
    test_victims_install();
    test_seed_and_lru();
    test_reseed();
    test_lfu();
    test_profile();
    return t_summary();
}
