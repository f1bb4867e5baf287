/* The duration histograms' bucket (decoder/model/model.c) comes from a table instead of a log() per
 * kernel: it must agree with the formula it replaces for every duration, at every bucket edge. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "model/model.h"

static uint32_t by_log(uint64_t d)
{
    if (!d) return 0;
    double b = floor(log((double)d) / log(1.02)) + 1;
    return b >= TKP_HIST_BUCKETS - 1 ? TKP_HIST_BUCKETS - 1 : (uint32_t)b;
}

Test(hist, small_durations_one_by_one)
{
    for (uint64_t d = 0; d < 2000000; d++)
        cr_assert_eq(tkp_hist_bucket(d), by_log(d), "%llu", (unsigned long long)d);
}

Test(hist, every_power_of_two_and_its_neighbours)
{
    for (int k = 0; k < 64; k++)
        for (int64_t e = -2; e <= 2; e++) {
            uint64_t d = (1ull << k) + (uint64_t)e;
            cr_assert_eq(tkp_hist_bucket(d), by_log(d), "%llu", (unsigned long long)d);
        }
    cr_assert_eq(tkp_hist_bucket(UINT64_MAX), by_log(UINT64_MAX));
}

Test(hist, every_bucket_edge)
{
    /* the least duration of each bucket the formula reaches, found by bisection on it */
    uint64_t lo = 1;
    for (uint32_t b = 1; b < TKP_HIST_BUCKETS; b++) {
        if (by_log(UINT64_MAX) < b) break;
        uint64_t l = lo, h = UINT64_MAX;
        while (l < h) {
            uint64_t m = l + (h - l) / 2;
            if (by_log(m) >= b) h = m;
            else l = m + 1;
        }
        cr_assert_eq(tkp_hist_bucket(l), by_log(l), "edge of bucket %u: %llu", b,
                     (unsigned long long)l);
        if (l > 1)
            cr_assert_eq(tkp_hist_bucket(l - 1), by_log(l - 1), "below bucket %u", b);
        lo = l;
    }
}

Test(hist, random_durations_of_every_magnitude)
{
    uint64_t x = 88172645463325252ull;
    for (int i = 0; i < 5000000; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        uint64_t d = x >> (x & 63);
        cr_assert_eq(tkp_hist_bucket(d), by_log(d), "%llu", (unsigned long long)d);
    }
}

/* A class's figures are the sum of its names' (model.c: tkp_model_finish merges them): merging
 * distributions gives what adding every duration to one gives, the least duration of the first
 * one merged into an empty one included. */
Test(hist, merged_distributions_are_one_distribution)
{
    struct tkp_dist all = {0}, part[4] = {{0}}, merged = {0};
    uint64_t s = 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < 5000; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        uint64_t d = 1000 + (s >> 20) % 1000000; /* none is 0: the empty one's min must go */
        uint32_t b = tkp_hist_bucket(d);
        cr_assert_eq(tkp_dist_add(&all, d, b), 0);
        cr_assert_eq(tkp_dist_add(&part[i % 3], d, b), 0); /* part[3] stays empty */
    }
    for (int k = 3; k >= 0; k--) cr_assert_eq(tkp_dist_merge(&merged, &part[k]), 0);
    cr_assert_eq(merged.count, all.count);
    cr_assert_eq(merged.total_ns, all.total_ns);
    cr_assert_eq(merged.min_ns, all.min_ns, "min %llu, one %llu", (unsigned long long)merged.min_ns,
                 (unsigned long long)all.min_ns);
    cr_assert_eq(merged.max_ns, all.max_ns);
    cr_assert_arr_eq(merged.hist, all.hist, TKP_HIST_BUCKETS * sizeof(*all.hist));
    struct tkp_dist none = {0};
    cr_assert_eq(tkp_dist_merge(&none, &part[3]), 0);
    cr_assert(!none.count && !none.hist, "an empty one merged allocates nothing");
    free(all.hist), free(merged.hist);
    for (int k = 0; k < 4; k++) free(part[k].hist);
}
