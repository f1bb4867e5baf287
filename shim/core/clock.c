/* The launch path's clock.
 *
 * Every record needs a timestamp, and clock_gettime(CLOCK_MONOTONIC) through the vDSO costs
 * 15-20 ns on bare metal and 40 ns on some VMs: the largest single cost of a launch record. Where
 * the kernel itself trusts the TSC (clocksource "tsc", constant and nonstop TSC), records carry raw
 * TSC ticks instead (~8 ns), and the writer converts them to CLOCK_MONOTONIC ns before they reach
 * the capture, so the format and every reader see nanoseconds as before.
 *
 * Conversion: the writer takes a (tsc, ns) anchor pair at every cycle; a stamp converts as
 * anchor_ns + (stamp - anchor_tsc) * rate, where rate is measured from the first anchor to the
 * latest (a baseline that grows with the capture, so its error shrinks). Stamps are at most one
 * writer period away from the anchor, so the error is far below a microsecond.
 * TOKPROF_CLOCK=monotonic forces clock_gettime. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <x86intrin.h>

#include "core/clock.h"
#include "core/config.h"

int tkp_clock_tsc;

static struct {
    uint64_t tsc0, ns0;  /* first anchor */
    uint64_t tsc, ns;    /* latest anchor */
    uint64_t mult;       /* ns per tick << 32 */
} anchor;

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
    pair(&anchor.tsc0, &anchor.ns0);
    anchor.tsc = anchor.tsc0;
    anchor.ns = anchor.ns0;
    /* a first rate over ~1 ms, refined by every anchor */
    uint64_t t, n;
    do pair(&t, &n); while (n - anchor.ns0 < 1000000);
    anchor.mult = (uint64_t)(((unsigned __int128)(n - anchor.ns0) << 32) / (t - anchor.tsc0));
}

void tkp_clock_anchor(void)
{
    if (!tkp_clock_tsc) return;
    uint64_t t, n;
    pair(&t, &n);
    if (t <= anchor.tsc0 || n <= anchor.ns0) return;
    anchor.mult = (uint64_t)(((unsigned __int128)(n - anchor.ns0) << 32) / (t - anchor.tsc0));
    anchor.tsc = t;
    anchor.ns = n;
}

uint64_t tkp_stamp_ns(uint64_t stamp)
{
    if (!tkp_clock_tsc || !stamp) return stamp;
    int64_t d = (int64_t)(stamp - anchor.tsc);
    __int128 off = ((__int128)d * (__int128)anchor.mult) >> 32;
    return (uint64_t)((__int128)anchor.ns + off);
}

uint64_t tkp_stamp_dur_ns(uint64_t ticks)
{
    if (!tkp_clock_tsc) return ticks;
    return (uint64_t)(((unsigned __int128)ticks * anchor.mult) >> 32);
}
