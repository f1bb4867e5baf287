/* tokprof decoder: the fast path of tkp_record_decode() for the frequent record types.
 * Internal to the reader.
 *
 * A capture is mostly LAUNCH and LIB_CALL records whose integers use the encodings the shim
 * picks; decoding them field by field through the general cursor costs ten times what zstd
 * does. tkp_record_decode_fast() reads those records inline, from a range it has checked once,
 * and declines everything else: another type, an encoding it does not read (a non-negative
 * value written as a signed int, a GRAPH_LAUNCH of graph -1), a value out of range, a record
 * near the end of the payload. A declined record goes to tkp_record_decode(), which keeps the
 * last word: what the fast path accepts, the general decoder accepts with the same result, so
 * every check and every error message stays where it was. */
#ifndef TKP_RECORD_FAST_H
#define TKP_RECORD_FAST_H

#include "capture/record.h"

/* Decodes the record at the cursor as tkp_record_decode() would (names unresolved, tid 0,
 * host_ns 0, dt in b->dt; only the fields of the record's type are set, the rest of the union
 * is left as it was). Returns 1 for a decoded record, or 0 when it declined: the cursor has not
 * moved and tkp_record_decode() must be called. A RUN (TKP_DECODE_RUN) is only opened in b->run,
 * its columns unchecked: the reader's first pass has checked it with tkp_record_decode(). */
int tkp_record_decode_fast(struct tkp_mp *c, struct tkp_record *r, struct tkp_decode_buf *b);

/* The same check without the values, for the reader's validating pass: returns the record's
 * type (never TKP_REC_CHUNK) with the cursor past a record tkp_record_decode() would accept,
 * or -1 when it declined (the cursor has not moved). */
int tkp_record_check_fast(struct tkp_mp *c, const struct tkp_decode_buf *b);

/* Decodes the next batch of the RUN open in b->run (b->run.left > 0) into its arrays, the host
 * times from ns, the time of the record before the batch. The run was checked whole when it was
 * opened. */
void tkp_record_run_batch(struct tkp_decode_buf *b, uint64_t ns);

/* Decodes the next batch of the COLS open in b->cols (b->cols.left > 0) into b->cols.bv. The
 * COLS was checked whole when it was opened. */
void tkp_record_cols_batch(struct tkp_decode_buf *b);

#endif
