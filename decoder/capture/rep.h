/* tokprof decoder: REP records (format v5; docs/FORMAT.md "Repeats", include/tokprof/rep.h).
 * Internal to the reader.
 *
 * A REP stands for n records of the types of the groupable records before it. The reader expands
 * it into those records' values. The first pass checks the values of a fixed-layout record or a
 * GRAPH_LAUNCH against its fields' ranges (generated from records.def, as the record decoder's
 * checks are); a LAUNCH_T or LIB_CALL_T (templates), and any record that fails, is packed as
 * msgpack exactly as a writer would have written it and checked by the record decoder, which
 * says why it is bad: whatever a REP stands for obeys every rule of the records themselves. The
 * delivering pass stores a fixed-layout record's values straight into the record (the values
 * the first pass checked) and decodes the others from their msgpack. Each pass over a chunk keeps its
 * own history of the chunk's groupable records, which a REP's values are differences to. */
#ifndef TKP_CAPTURE_REP_H
#define TKP_CAPTURE_REP_H

#include <stddef.h>
#include <stdint.h>

#include "base/mp.h"
#include "capture/record.h"
#include "tokprof/rep.h"

struct tkp_rep_rec {
    uint8_t type, nel;
    uint64_t v[TKP_REP_NEL]; /* v[k]: element k; a STEP's times against their refs, v[0] refs */
};

struct tkp_rep {
    struct tkp_rep_rec h[TKP_REP_MAX]; /* the chunk's last groupable records, a ring */
    uint32_t nh;
    uint64_t t[TKP_REP_TIMES]; /* the chunk's last host times, a ring */
    uint32_t nt;
    uint64_t wait; /* the last timed groupable record's wait_ns if it is a SYNC, else 0 */
    /* the records of the REP being delivered: x[i] its elements' values (a STEP's times
     * absolute), in the history at nh - xn + i; xi the next */
    uint64_t x[TKP_REP_MAX][TKP_REP_NEL];
    uint32_t xn, xi;
    /* record xi - 1 packed as msgpack (tkp_rep_pack_next) in out up to cur.end - TKP_REP_PAD:
     * the record decoder's fast path wants room for a record's widest encoding past it */
    struct tkp_mp cur;
    uint8_t out[1 + TKP_REP_NEL * 9 + 256];
};
#define TKP_REP_PAD 256

/* A chunk's pass begins: no groupable record before. */
void tkp_rep_chunk(struct tkp_rep *u);

/* Records of a REP are left to deliver. */
static inline int tkp_rep_pending(const struct tkp_rep *u)
{
    return u->xi < u->xn;
}

/* The record at c is a REP. */
int tkp_rep_is(const struct tkp_mp *c);

/* Reads the REP at c (the cursor moves past it) into the records it stands for (pending), which
 * join the history. chain: the dt chain before it (the host time of the record before it; a pass
 * that does not resolve times may pass 0: only a STEP's times depend on it). Returns 0, or
 * TKP_ERR_RECORD with why set. */
int tkp_rep_expand(struct tkp_rep *u, struct tkp_mp *c, uint64_t chain, char *why, size_t whylen);

/* The next pending record packed as a writer would have written it, at u->cur (for the record
 * decoder: the check of the first pass, and the records with templates). */
void tkp_rep_pack_next(struct tkp_rep *u);

/* The first pass's check of the next pending record from its values, for the fixed-layout types
 * and GRAPH_LAUNCH: 1 it is good (taken), -1 a value is out of its field's range, 0 another type
 * (LAUNCH_T, LIB_CALL_T); on 0 and -1 nothing is taken: the caller packs it
 * (tkp_rep_pack_next) for the record decoder, which checks it and says why it is bad. */
int tkp_rep_check_next(struct tkp_rep *u);

/* The next pending record stored into r and b->dt as tkp_record_decode_fast() would (names
 * unresolved), if it is of a fixed-layout type or a GRAPH_LAUNCH, which the first pass has
 * checked; 0 (nothing taken) for LAUNCH_T and LIB_CALL_T (tkp_rep_pack_next). */
int tkp_rep_store_next(struct tkp_rep *u, struct tkp_record *r, struct tkp_decode_buf *b);

/* A record delivered from the payload itself, at [p, end): if it is groupable, into the history.
 * chain: the dt chain after it. */
void tkp_rep_note(struct tkp_rep *u, const uint8_t *p, const uint8_t *end, uint64_t chain);

#endif
