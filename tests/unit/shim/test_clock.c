/* The stamp conversion (shim/core/clock.c): a TSC stamp converts to the same ns whenever the
 * writer converts it, however many anchors came between (a step's begin, written when the step is
 * reported, is its first launch's stamp, written cycles earlier), the conversion never goes back,
 * and it stays near CLOCK_MONOTONIC. On a machine whose kernel does not trust the TSC the stamps
 * are ns already: skipped. */
#include <criterion/criterion.h>
#include <time.h>
#include <x86intrin.h>

#include "core/clock.h"
#include "core/config.h"

#define ROUNDS 40
#define PER 8

static void sleep_ms(long ms)
{
    struct timespec ts = {0, ms * 1000000L};
    while (nanosleep(&ts, &ts)) {
    }
}

Test(clock, a_stamp_converts_the_same_after_any_number_of_anchors)
{
    tkp_cfg.clock = TKP_CLOCK_AUTO;
    tkp_clock_init();
    if (!tkp_clock_tsc) cr_skip_test("the kernel's clocksource is not the TSC: stamps are ns");
    static uint64_t stamp[ROUNDS * PER], first[ROUNDS * PER];
    int n = 0;
    for (int r = 0; r < ROUNDS; r++) {
        for (int i = 0; i < PER; i++) {
            stamp[n] = __rdtsc();
            first[n] = tkp_stamp_ns(stamp[n]); /* as the writer would, this cycle */
            n++;
        }
        sleep_ms(r % 3 == 0 ? 1 : 6); /* some cycles too close for a new segment */
        tkp_clock_anchor();
    }
    for (int k = 0; k < n; k++) {
        cr_assert_eq(tkp_stamp_ns(stamp[k]), first[k],
                     "stamp %d converted to %llu at first, %llu after %d more anchors", k,
                     (unsigned long long)first[k], (unsigned long long)tkp_stamp_ns(stamp[k]),
                     ROUNDS - k / PER);
        if (k) cr_assert_geq(first[k], first[k - 1], "the conversion went back at stamp %d", k);
    }
    /* near the clock it stands for (loose: a preempted pair read is tens of microseconds) */
    uint64_t ns = tkp_now_ns(), conv = tkp_stamp_ns(__rdtsc());
    int64_t gap = (int64_t)(conv - ns);
    cr_assert(gap > -50000000 && gap < 50000000, "a stamp %lld ns from CLOCK_MONOTONIC",
              (long long)gap);
}

Test(clock, the_conversion_never_goes_back_across_new_segments)
{
    tkp_cfg.clock = TKP_CLOCK_AUTO;
    tkp_clock_init();
    if (!tkp_clock_tsc) cr_skip_test("the kernel's clocksource is not the TSC: stamps are ns");
    for (int r = 0; r < 10; r++) {
        uint64_t before = __rdtsc();
        sleep_ms(6);
        tkp_clock_anchor(); /* a segment starts between before and after */
        uint64_t after = __rdtsc();
        uint64_t prev = tkp_stamp_ns(before);
        /* every 1/64 of the interval, and the ticks next to each */
        for (uint64_t t = before; t < after; t += (after - before) / 64 + 1)
            for (uint64_t u = t; u < t + 3; u++) {
                uint64_t v = tkp_stamp_ns(u);
                cr_assert_geq(v, prev, "tick %llu converts below the tick before it",
                              (unsigned long long)u);
                prev = v;
            }
    }
}
