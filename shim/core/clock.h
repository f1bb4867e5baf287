/* The clocks (clock.c): CLOCK_MONOTONIC through the vDSO, and the stamps records carry. */
#ifndef TKP_CORE_CLOCK_H
#define TKP_CORE_CLOCK_H

#include <stdint.h>
#include <time.h>

#include "core/base.h"

/* CLOCK_MONOTONIC through the vDSO: no syscall. */
static inline uint64_t tkp_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Records carry stamps: raw TSC ticks where the kernel trusts the TSC, else CLOCK_MONOTONIC ns.
 * The writer turns them into ns (tkp_stamp_ns); everything in a capture is ns. */
extern int tkp_clock_tsc;
static inline uint64_t tkp_stamp(void)
{
    if (TKP_LIKELY(tkp_clock_tsc)) return __builtin_ia32_rdtsc();
    return tkp_now_ns();
}
void tkp_clock_init(void);                 /* at capture start, before any record */
void tkp_clock_anchor(void);               /* writer: a new segment of the conversion, each cycle */
uint64_t tkp_stamp_ns(uint64_t stamp);     /* writer: a stamp as CLOCK_MONOTONIC ns */
uint64_t tkp_stamp_dur_ns(uint64_t ticks); /* writer: a difference of stamps as ns */

#endif
