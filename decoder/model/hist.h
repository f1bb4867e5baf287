/* tokprof decoder: durations of one kernel name or class as a histogram of log-spaced buckets
 * (1.02 apart: percentiles within 1%), in O(buckets) memory whatever the count. */
#ifndef TKP_HIST_H
#define TKP_HIST_H

#include <stdint.h>
#include <stdlib.h>

#include "base/err.h"

#define TKP_HIST_BUCKETS 1600 /* 1.02^1600 ns > 5e13 ns: every real duration */

/* Durations of one kernel name or class. */
struct tkp_dist {
    uint64_t count, total_ns, min_ns, max_ns;
    uint32_t *hist; /* TKP_HIST_BUCKETS, allocated on first duration */
};

/* Percentile p (0..1) of a distribution: exact count rank, bucket midpoint (<= 1% error). */
uint64_t tkp_dist_pct(const struct tkp_dist *d, double p);
/* The histogram bucket of a duration: floor(ln ns / ln 1.02) + 1 (0 for 0, at most
 * TKP_HIST_BUCKETS - 1), from a table instead of a log() per kernel. */
uint32_t tkp_hist_bucket(uint64_t ns);
/* Adds a duration ns of bucket b (tkp_hist_bucket(ns)): 0 or TKP_ERR_NOMEM (the histogram is
 * allocated on the first). Inline: the model adds one per kernel. */
static inline int tkp_dist_add(struct tkp_dist *d, uint64_t ns, uint32_t b)
{
    if (!d->hist && !(d->hist = calloc(TKP_HIST_BUCKETS, sizeof(*d->hist)))) return TKP_ERR_NOMEM;
    if (!d->count || ns < d->min_ns) d->min_ns = ns;
    if (ns > d->max_ns) d->max_ns = ns;
    d->count++;
    d->total_ns += ns;
    d->hist[b]++;
    return 0;
}

/* Adds every duration of `from` to `to` (as tkp_dist_add of each would): 0 or TKP_ERR_NOMEM. */
int tkp_dist_merge(struct tkp_dist *to, const struct tkp_dist *from);

#endif
