/* tokprof capture format v5: REP records (docs/FORMAT.md "Repeats"), the rules the writer
 * (shim/writer/rep.c) and the reader (decoder/capture/rep.c) share. Header only.
 *
 * A decode loop's step writes the same few host records every step (an end copy, an event
 * record, the sync, the STEP, the next step's input copy, a graph launch and the launches around
 * it) with the same fields but the step and the times. A REP stands for n such records: each has
 * the type and element count of the groupable record `back` records before it in the chunk,
 * and each of its values is that record's plus a difference. */
#ifndef TOKPROF_REP_H
#define TOKPROF_REP_H

#include <stdint.h>

#include "tokprof/format.h"

#define TKP_REC_REP 33    /* [33, n, back, times, others] */
#define TKP_REC_REP_SHADOW 34 /* [34, bin]: TOKPROF_TEST_REP=shadow's copy of a REP's records */
#define TKP_REP_MAX 64u    /* records in one REP, and how far back it may refer */
#define TKP_REP_NEL 16u    /* elements of a groupable record at most, its type included */
#define TKP_REP_TIMES 32u  /* host times a STEP time may be written against (its ref) */
#define TKP_REP_REF_BITS 5 /* a STEP's refs value: begin | mark << 5 | end << 10 */

/* The element positions (after the type: 1 is the first) that are times, as a bit mask, for a
 * type whose records are groupable; 0 for any other type. Element 1 of every groupable type but
 * STEP is its dt. STEP's begin_ns, mark_ns and end_ns (4, 5, 6) are absolute: a REP writes
 * each against one of the chunk's recent host times (its ref). */
static inline uint32_t tkp_rep_times(uint64_t type)
{
    switch (type) {
    case TKP_REC_COPY:
    case TKP_REC_EVENT_RECORD:
    case TKP_REC_STREAM_WAIT:
    case TKP_REC_GRAPH_LAUNCH:
    case TKP_REC_MARKER:
    case TKP_REC_LAUNCH_T:
        return 1u << 1;
    case TKP_REC_SYNC: /* dt, wait_ns */
        return 1u << 1 | 1u << 6;
    case TKP_REC_LIB_CALL_T: /* dt, host_ns */
        return 1u << 1 | 1u << 5;
    case TKP_REC_STEP: /* begin_ns, mark_ns, end_ns */
        return 1u << 4 | 1u << 5 | 1u << 6;
    default:
        return 0;
    }
}

/* Element 1 is a dt: the record moves the dt chain (FORMAT.md "Time"). */
static inline int tkp_rep_timed(uint64_t type)
{
    return type != TKP_REC_STEP;
}

/* LEB128 of zigzag, as RUN and COLS columns */
static inline uint64_t tkp_rep_zz(uint64_t d)
{
    return (d << 1) ^ (uint64_t)((int64_t)d >> 63);
}
static inline uint64_t tkp_rep_unzz(uint64_t v)
{
    return (v >> 1) ^ (0 - (v & 1));
}

#endif
