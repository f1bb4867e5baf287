/* tokprof decoder: the calls table streamed (table_rows.c's pass 1) — library calls summed per
 * (hour, lib, op, shape, types, transposes), with the GPU time of the kernels each launched.
 *
 * GPU time: a GPU_KERNEL names its launch by (thread, step, ordinal of the LAUNCH in the step)
 * and a LAUNCH names its library call (LIB_CALL.call, same thread). Kept for the join: per
 * thread the launches' call ids of its last TKP_TCALLS_STEPS steps and the last TKP_TCALLS_CALLS
 * calls' rows. A GPU record later than that (CUPTI hands them over within a few flush periods)
 * is counted in `late` and its time is not added.
 *
 * Memory: O(distinct rows) plus that window per thread — never O(calls). */
#ifndef TKP_TABLE_CALLS_H
#define TKP_TABLE_CALLS_H

#include <stddef.h>
#include <stdint.h>

#include "model/columns.h" /* struct tkp_callrow: a row */

#define TKP_TCALLS_STEPS 256  /* steps per thread whose launches are kept */
#define TKP_TCALLS_CALLS 4096 /* calls per thread whose rows are kept */

struct tkp_record;

struct tkp_tcalls;

int tkp_tcalls_new(struct tkp_tcalls **out); /* 0 or NOMEM */
void tkp_tcalls_free(struct tkp_tcalls *c);  /* accepts NULL */
/* Feeds a LIB_CALL (hour_ns: the epoch hour of its host time), LAUNCH or GPU_KERNEL record;
 * others are ignored. Returns 0 or NOMEM. */
int tkp_tcalls_add(struct tkp_tcalls *c, const struct tkp_record *r, uint64_t hour_ns);
/* The rows, sorted by (hour, lib, op, m, n, k, batch, types, transposes); valid until free. */
const struct tkp_callrow *tkp_tcalls_rows(struct tkp_tcalls *c, size_t *n);
/* GPU records whose launch or call had left the window. */
uint64_t tkp_tcalls_late(const struct tkp_tcalls *c);

#endif
