/* REP records (docs/FORMAT.md "Repeats", include/tokprof/rep.h): the writer's groups. Host records
 * that repeat step after step (COPY, SYNC, EVENT_RECORD, STREAM_WAIT, STEP, GRAPH_LAUNCH, MARKER,
 * and LAUNCH_T / LIB_CALL_T of a short run) are packed into a group, not into the chunk; when the
 * group ends it goes into the chunk as one REP, which refers to the same records of the step
 * before, or as the records themselves. Writer thread only. */
#ifndef TKP_WRITER_REP_H
#define TKP_WRITER_REP_H

#include <msgpack.h>
#include <stdint.h>

/* mode: 0 REPs, 1 none (records as they are), 2 each REP followed by the records it stands for
 * in a record of type 34 (TOKPROF_TEST_REP); out: the chunk's packer. */
void tkp_wrep_init(msgpack_packer *out, int mode);
/* 0 when groups are off: the caller packs into the chunk as before. */
int tkp_wrep_on(void);
/* A chunk begins: no record before to refer to. The group is empty (tkp_wrep_flush). */
void tkp_wrep_chunk(void);
/* Where the next groupable record is packed; after it, tkp_wrep_added(). */
msgpack_packer *tkp_wrep_packer(void);
/* The record just packed: chain is the dt chain after it (its host time; a STEP's: the time of
 * the record before it). The group goes into the chunk at TKP_REP_MAX records (or when the
 * writer packs another record: tkp_wrep_flush); a record that cannot be grouped goes in right
 * after the group before it. */
void tkp_wrep_added(uint64_t chain);
/* The group into the chunk (as a REP or as its records); the history of the chunk grows. */
void tkp_wrep_flush(void);
/* The child after fork: nothing of the parent's. */
void tkp_wrep_reset(void);

#endif
