/* tokprof check: a reader's records into the monitor, a RUN's in bulk (bulk.c). */
#ifndef TKP_CHECK_BULK_H
#define TKP_CHECK_BULK_H

#include <stddef.h>

#include "capture/reader.h"
#include "check/monitor.h"

/* The k records of b (a RUN's, tkp_reader_peek_full), judged as tkp_mon_feed would judge them
 * one by one; those of a planned shape are taken from b's columns (bulk.c), the record decoded
 * only where the plan or a witness reads it. 0 or a negative tkp_err. */
int tkp_mon_feed_run(struct tkp_mon *m, const struct tkp_run_full *b, size_t k);
/* Feeds every record of r (RUNs' launches and library calls through tkp_mon_feed_run); returns
 * what the last tkp_reader_next returned (0 at the clean end, a negative code), or
 * tkp_mon_feed's error. */
int tkp_mon_read(struct tkp_mon *m, struct tkp_reader *r);

#endif
