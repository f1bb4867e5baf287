/* The stream sink (stream.c): chunks appended to capture files as they are made. */
#ifndef TKP_SINK_STREAM_H
#define TKP_SINK_STREAM_H

#include "sink/sink.h"

extern const struct tkp_sink tkp_stream_sink;
/* Fork child: forget the parent's file. */
void tkp_stream_after_fork(void);

#endif
