/* The flight recorder (flight.c), the second sink: in flight mode (TOKPROF_MODE=flight) the
 * writer encodes and compresses chunks as in stream mode, and this sink keeps the last
 * TOKPROF_FLIGHT_BEFORE_S seconds of them (at most TOKPROF_FLIGHT_MB) in memory. A trigger
 * (trigger.c) writes a snapshot file: a META chunk, the retained chunks, then the chunks of the
 * next TOKPROF_FLIGHT_AFTER_S seconds. Writer thread only. */
#ifndef TKP_SINK_FLIGHT_H
#define TKP_SINK_FLIGHT_H

#include "sink/sink.h"

extern const struct tkp_sink tkp_flight_sink;
/* Fork child: forget the parent's chunks, snapshot and pending triggers. */
void tkp_flight_after_fork(void);

#endif
