/* The writer thread (writer.c): drains the rings, encodes, compresses, hands chunks to a sink.
 * Called by shim/init.c only. */
#ifndef TKP_WRITER_WRITER_H
#define TKP_WRITER_WRITER_H

#include "sink/sink.h"

/* Opens the sink and starts the thread. 0, or -1 after one warning line (capture off). */
int tkp_writer_start(const struct tkp_sink *sink);
void tkp_writer_stop(void);       /* final drain and close */
void tkp_writer_after_fork(void); /* child: forget the parent's file and thread */

#endif
