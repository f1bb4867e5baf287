/* The launch path's clock.
 *
 * Every record needs a timestamp, and clock_gettime(CLOCK_MONOTONIC) through the vDSO costs
 * 15-20 ns on bare metal and 40 ns on some VMs: the largest single cost of a launch record. Where
 * the kernel itself trusts the TSC (clocksource "tsc", constant and nonstop TSC), records carry raw
 * TSC ticks instead (~8 ns), and the writer converts them to CLOCK_MONOTONIC ns before they reach
 * the capture, so the format and every reader see nanoseconds as before.
 *
 * Conversion: through the (tsc, ns) pairs the writer reads (anchors), a stamp between two of them
 * interpolated linearly, so that it converts to the same ns whenever it is converted (a step's
 * begin, written when the step is reported, is its first launch's stamp, written cycles earlier)
 * and within the pairs' own jitter of CLOCK_MONOTONIC. A stamp newer than the latest anchor (one
 * stamped while the writer drains) takes a new anchor first: every stamp lies between two. The
 * writer reads a pair at every cycle; the last TKP_ANCHORS are kept (a stamp older than them, a
 * step begun that many cycles ago, takes the oldest two). The pairs' clock values never go back
 * against their ticks (a pair read out of order is moved up to keep at least half the rate).
 * TOKPROF_CLOCK=monotonic forces clock_gettime. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <x86intrin.h>

#include "core/clock.h"
#include "core/config.h"

int tkp_clock_tsc;

/* The anchors, a ring: [latest] the newest; tsc and ns both increase. Written and read by the
 * writer thread only (capture start excepted). */
#define TKP_ANCHORS 4096
static struct anchor {
    uint64_t tsc, ns;
} anchors[TKP_ANCHORS];
static unsigned nanchors, latest;
static uint64_t rate; /* ns per tick << 32, from the first anchor to the latest */

/* t's ns on the line through anchors a and b (a before b; b == a: a's tick at the rate) */
static uint64_t on_line(const struct anchor *a, const struct anchor *b, uint64_t t)
{
    int64_t d = (int64_t)(t - a->tsc);
    if (b->tsc == a->tsc) return (uint64_t)((__int128)a->ns + (((__int128)d * rate) >> 32));
    __int128 off = (__int128)d * (__int128)(b->ns - a->ns) / (__int128)(b->tsc - a->tsc);
    return (uint64_t)((__int128)a->ns + off);
}

static const struct anchor *at_age(unsigned age) /* 0 the newest */
{
    return &anchors[(latest + TKP_ANCHORS - age) % TKP_ANCHORS];
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

static void add_anchor(void)
{
    uint64_t t, n;
    pair(&t, &n);
    const struct anchor *g = at_age(0);
    if (nanchors) {
        if (t <= g->tsc) return; /* cannot happen with a constant TSC; keep what we have */
        uint64_t least = g->ns + (uint64_t)((((unsigned __int128)(t - g->tsc)) * (rate / 2)) >> 32);
        if (n < least) n = least;
        latest = (latest + 1) % TKP_ANCHORS;
    }
    anchors[latest] = (struct anchor){t, n};
    if (nanchors < TKP_ANCHORS) nanchors++;
    const struct anchor *o = at_age(nanchors - 1);
    if (nanchors > 1 && t > o->tsc && n > o->ns)
        rate = (uint64_t)(((unsigned __int128)(n - o->ns) << 32) / (t - o->tsc));
}

void tkp_clock_init(void)
{
    tkp_clock_tsc =
        tkp_cfg.clock != TKP_CLOCK_MONOTONIC &&
        file_has("/sys/devices/system/clocksource/clocksource0/current_clocksource", "tsc", 1) &&
        file_has("/proc/cpuinfo", "constant_tsc", 0) && file_has("/proc/cpuinfo", "nonstop_tsc", 0);
    if (!tkp_clock_tsc) return;
    nanchors = 0, latest = 0;
    uint64_t t0, n0, t, n;
    pair(&t0, &n0);
    /* a first rate over ~1 ms, for a stamp older than the first anchor */
    do pair(&t, &n); while (n - n0 < 1000000);
    rate = (uint64_t)(((unsigned __int128)(n - n0) << 32) / (t - t0));
    anchors[0] = (struct anchor){t0, n0};
    anchors[1] = (struct anchor){t, n};
    latest = 1, nanchors = 2;
}

void tkp_clock_anchor(void)
{
    if (tkp_clock_tsc) add_anchor();
}

uint64_t tkp_stamp_ns(uint64_t stamp)
{
    if (!tkp_clock_tsc || !stamp) return stamp;
    const struct anchor *b = at_age(0);
    if (TKP_UNLIKELY(stamp > b->tsc)) { /* stamped after the latest anchor: read a new one */
        add_anchor();
        b = at_age(0);
        if (stamp > b->tsc) return on_line(b, b, stamp); /* another CPU's TSC ahead: at the rate */
    }
    const struct anchor *a = at_age(1);
    if (TKP_LIKELY(stamp >= a->tsc)) return on_line(a, b, stamp);
    /* older: the two anchors around it (by age: [lo] at or before the stamp, [hi] after it) */
    unsigned lo = nanchors - 1, hi = 1;
    if (stamp < at_age(lo)->tsc) return on_line(at_age(lo), at_age(lo - 1), stamp);
    while (lo - hi > 1) {
        unsigned mid = hi + (lo - hi) / 2;
        if (at_age(mid)->tsc <= stamp) lo = mid;
        else hi = mid;
    }
    return on_line(at_age(lo), at_age(hi), stamp);
}

uint64_t tkp_stamp_dur_ns(uint64_t ticks)
{
    if (!tkp_clock_tsc) return ticks;
    return (uint64_t)(((unsigned __int128)ticks * rate) >> 32);
}
