/* tokprof decoder: duration histograms (hist.h): log-spaced buckets and percentiles from them. */
#include "model/hist.h"

#include <math.h>
#include <stdint.h>

/* The histogram bucket of a duration: floor(ln d / ln 1.02) + 1, 0 for 0. */
static uint32_t bucket_log(uint64_t d)
{
    if (!d) return 0;
    double b = floor(log((double)d) / log(1.02)) + 1;
    return b >= TKP_HIST_BUCKETS - 1 ? TKP_HIST_BUCKETS - 1 : (uint32_t)b;
}

/* The same without a log() per kernel: first[b] is the least duration in bucket b, found once
 * from 1.02^(b-1) and moved until bucket_log itself (monotonic) agrees, so the two agree
 * exactly; a duration's bucket is then searched among those of its power of two. */
static uint64_t bucket_first[TKP_HIST_BUCKETS];
static uint32_t bucket_pow2[65]; /* the bucket of 2^k */

static void bucket_init(void)
{
    uint32_t top = bucket_log(UINT64_MAX);
    for (uint32_t b = 1; b < TKP_HIST_BUCKETS; b++) {
        if (b > top) {
            bucket_first[b] = UINT64_MAX; /* no duration reaches it */
            continue;
        }
        double g = ceil(pow(1.02, (double)b - 1));
        uint64_t c = g < 1 ? 1 : g >= 0x1p63 ? 1ull << 63 : (uint64_t)g;
        while (c > 1 && bucket_log(c - 1) >= b)
            c--;
        while (bucket_log(c) < b)
            c++;
        bucket_first[b] = c;
    }
    for (int k = 0; k < 64; k++) bucket_pow2[k] = bucket_log(1ull << k);
    bucket_pow2[64] = top;
}

uint32_t tkp_hist_bucket(uint64_t d)
{
    if (!d) return 0;
    if (__builtin_expect(!bucket_first[1], 0)) bucket_init(); /* the first duration */
    int k = 63 - __builtin_clzll(d);
    uint32_t lo = bucket_pow2[k], hi = bucket_pow2[k + 1]; /* bucket(d) in [lo, hi]: ~35 */
    while (lo < hi) { /* the last b with first[b] <= d */
        uint32_t mid = (lo + hi + 1) / 2;
        if (bucket_first[mid] <= d) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

uint64_t tkp_dist_pct(const struct tkp_dist *d, double p)
{
    if (!d->count || !d->hist) return 0;
    uint64_t rank = (uint64_t)ceil(p * (double)d->count), seen = 0;
    if (rank < 1) rank = 1;
    if (rank >= d->count) return d->max_ns;
    for (uint32_t b = 0; b < TKP_HIST_BUCKETS; b++) {
        seen += d->hist[b];
        if (seen < rank) continue;
        double mid = b ? pow(1.02, (double)b - 0.5) : 0;
        uint64_t v = (uint64_t)floor(mid + 0.5);
        return v < d->min_ns ? d->min_ns : v > d->max_ns ? d->max_ns : v;
    }
    return d->max_ns;
}

int tkp_dist_merge(struct tkp_dist *to, const struct tkp_dist *from)
{
    if (!from->count) return 0;
    if (!to->hist && !(to->hist = calloc(TKP_HIST_BUCKETS, sizeof(*to->hist)))) return TKP_ERR_NOMEM;
    if (!to->count || from->min_ns < to->min_ns) to->min_ns = from->min_ns;
    if (from->max_ns > to->max_ns) to->max_ns = from->max_ns;
    to->count += from->count;
    to->total_ns += from->total_ns;
    for (uint32_t b = 0; b < TKP_HIST_BUCKETS; b++)
        to->hist[b] += from->hist[b];
    return 0;
}
