/* The launch path's clock.
 *
 * Every record needs a timestamp, and clock_gettime(CLOCK_MONOTONIC) through the vDSO costs
 * 15-20 ns on bare metal and 40 ns on some VMs: the largest single cost of a launch record. Where
 * the kernel itself trusts the TSC (clocksource "tsc", constant and nonstop TSC), records carry raw
 * TSC ticks instead (~8 ns), and the writer converts them to CLOCK_MONOTONIC ns before they reach
 * the capture, so the format and every reader see nanoseconds as before.
 *
 * Conversion: a stamp converts through a continuous, piecewise-linear function of the tick count,
 * the same whenever it is converted. The writer reads a (tsc, ns) pair at every cycle (at most one
 * every 5 ms) and starts a segment there: at the value the previous segment gives at that tick (so
 * a tick converted before and after the new segment gives the same ns: a step's begin, written
 * when the step is reported, equals its first launch's time, written a cycle earlier), with a rate
 * measured from the first pair to the latest (a baseline that grows with the capture) plus a
 * steering term that closes the gap to the pair read within one period, at most 0.1 % of the rate
 * (so the function never decreases). A stamp takes the segment it falls in, found among the last
 * TKP_SEGS (at 5 ms or more each, at least 5 s back; older stamps take the oldest). Stamps are at
 * most one writer period from the pair that steered their segment: the error against
 * CLOCK_MONOTONIC is far below a microsecond. TOKPROF_CLOCK=monotonic forces clock_gettime. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <x86intrin.h>

#include "core/clock.h"
#include "core/config.h"

int tkp_clock_tsc;

/* Segments of the conversion, a ring: [latest] is the newest, each starts at (tsc, ns) with mult
 * ns per tick << 32. Written and read by the writer thread only (capture start excepted). */
#define TKP_SEGS 1024
#define TKP_SEG_MIN_NS 5000000 /* a new segment at most every 5 ms */
static struct seg {
    uint64_t tsc, ns, mult;
} segs[TKP_SEGS];
static unsigned nsegs, latest;
static uint64_t tsc0, ns0, rate; /* the first pair; the baseline's rate, ns per tick << 32 */

static uint64_t seg_ns(const struct seg *g, uint64_t stamp)
{
    int64_t d = (int64_t)(stamp - g->tsc);
    __int128 off = ((__int128)d * (__int128)g->mult) >> 32;
    return (uint64_t)((__int128)g->ns + off);
}

/* The segment a stamp falls in: the newest whose start is at or before it, else the oldest. */
static const struct seg *seg_of(uint64_t stamp)
{
    const struct seg *g = &segs[latest];
    if (TKP_LIKELY(stamp >= g->tsc || nsegs == 1)) return g;
    const struct seg *p = &segs[(latest + TKP_SEGS - 1) % TKP_SEGS];
    if (stamp >= p->tsc) return p; /* stamped in the last cycle, drained in this one */
    unsigned lo = 0, hi = nsegs - 1; /* by age: 0 the oldest; [hi] is after the stamp */
    unsigned first = (latest + TKP_SEGS + 1 - nsegs) % TKP_SEGS;
    if (stamp < segs[first].tsc) return &segs[first];
    while (hi - lo > 1) { /* segs[first + lo] <= stamp < segs[first + hi] */
        unsigned mid = lo + (hi - lo) / 2;
        if (segs[(first + mid) % TKP_SEGS].tsc <= stamp) lo = mid;
        else hi = mid;
    }
    return &segs[(first + lo) % TKP_SEGS];
}

static int file_has(const char *path, const char *word, int whole_line)
{
    FILE *f = fopen(path, "re");
    if (!f) return 0;
    char line[4096];
    int found = 0;
    while (!found && fgets(line, sizeof line, f)) {
        if (whole_line) {
            line[strcspn(line, "\n")] = 0;
            found = !strcmp(line, word);
        } else if (!strncmp(line, "flags", 5)) {
            char pat[64];
            snprintf(pat, sizeof pat, " %s", word);
            char *p = strstr(line, pat);
            found = p && (p[strlen(pat)] == ' ' || p[strlen(pat)] == '\n');
            break; /* the first CPU's flags are enough */
        }
    }
    fclose(f);
    return found;
}

/* One (tsc, ns) pair read as close together as we can: the tightest of a few tries. */
static void pair(uint64_t *tsc, uint64_t *ns)
{
    uint64_t best = UINT64_MAX;
    for (int i = 0; i < 3; i++) {
        uint64_t a = __rdtsc();
        uint64_t n = tkp_now_ns();
        uint64_t b = __rdtsc();
        if (b - a < best) {
            best = b - a;
            *tsc = a + (b - a) / 2;
            *ns = n;
        }
    }
}

void tkp_clock_init(void)
{
    tkp_clock_tsc =
        tkp_cfg.clock != TKP_CLOCK_MONOTONIC &&
        file_has("/sys/devices/system/clocksource/clocksource0/current_clocksource", "tsc", 1) &&
        file_has("/proc/cpuinfo", "constant_tsc", 0) && file_has("/proc/cpuinfo", "nonstop_tsc", 0);
    if (!tkp_clock_tsc) return;
    pair(&tsc0, &ns0);
    /* a first rate over ~1 ms, refined by every pair */
    uint64_t t, n;
    do pair(&t, &n); while (n - ns0 < 1000000);
    rate = (uint64_t)(((unsigned __int128)(n - ns0) << 32) / (t - tsc0));
    segs[0] = (struct seg){tsc0, ns0, rate};
    nsegs = 1, latest = 0;
}

void tkp_clock_anchor(void)
{
    if (!tkp_clock_tsc) return;
    uint64_t t, n;
    pair(&t, &n);
    const struct seg *g = &segs[latest];
    if (t <= g->tsc || n <= ns0) return;
    uint64_t at = seg_ns(g, t); /* where the function is at t: the new segment starts there */
    if (at < g->ns + TKP_SEG_MIN_NS) return;
    rate = (uint64_t)(((unsigned __int128)(n - ns0) << 32) / (t - tsc0));
    /* steer: reach the clock's value one more such interval on */
    __int128 corr = ((__int128)((int64_t)(n - at)) << 32) / (__int128)(t - g->tsc);
    __int128 cap = rate / 1000;
    if (corr > cap) corr = cap;
    if (corr < -cap) corr = -cap;
    latest = (latest + 1) % TKP_SEGS;
    segs[latest] = (struct seg){t, at, (uint64_t)((__int128)rate + corr)};
    if (nsegs < TKP_SEGS) nsegs++;
}

uint64_t tkp_stamp_ns(uint64_t stamp)
{
    if (!tkp_clock_tsc || !stamp) return stamp;
    return seg_ns(seg_of(stamp), stamp);
}

uint64_t tkp_stamp_dur_ns(uint64_t ticks)
{
    if (!tkp_clock_tsc) return ticks;
    return (uint64_t)(((unsigned __int128)ticks * rate) >> 32);
}
