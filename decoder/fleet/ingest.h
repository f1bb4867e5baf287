/* tokprof decoder: continuous ingest of captures into ClickHouse over HTTP, each row once, across
 * restarts (tokprof ingest).
 *
 * Unit of work: a *batch* — some rows of one capture (a process's files, or a snapshot: table.h)
 * for one table, sent in one INSERT into the Distributed table, gzip'd, with
 * insert_distributed_sync=1 (the reply comes once the shard stored them) and a
 * max_insert_block_size above the row count (one block: one part per shard, stored whole or not at
 * all; a capture's rows all go to one shard, since they share a host). Its rows carry
 * ingest_batch = the batch's number in its capture (1, 2, ...).
 *
 * Captures given as arguments, and snapshots in a watched directory, are read whole once no file
 * of theirs changed for `settle_s` seconds: batch 1 holds all their rows. A streamed capture in the
 * watched directory is followed chunk by chunk (capture/follow.h: a growing file, its rotated
 * continuations) and each record is read once; the rows of a step are due once the step model
 * closed the step (table_rows.h: tkp_tab_tail). A batch is cut when the reader has read every
 * whole chunk on disk (at most one per capture every `batch_s` seconds), before a chunk once
 * TKP_INGEST_BATCH_RECORDS records have been read since the last cut, and when the writer is gone
 * (the last batch: the rest of the steps, and kernels, calls and moe, which are per capture).
 *
 * Exactly once: the state file (text, append-only, fsync'd after each line) says
 *     begin CAPTURE_ID TABLE ROWS BATCH AT    before the INSERT is sent
 *     done  CAPTURE_ID TABLE ROWS BATCH AT    after the server said 200
 * where AT is the number of the capture's records read when the batch was cut (0 for a whole
 * capture; lines without BATCH AT, from earlier versions, are batch 1). A batch's rows are a
 * function of the records before AT, so after a restart the capture is read again from its start
 * (the step model must be rebuilt: nothing is sent while it is) and each batch the state file
 * names is cut again at its AT — a done one only advances what was sent, a `begin` without its
 * `done` (killed in between, or no reply) is settled by asking the server:
 * SELECT count() ... WHERE capture_id = X AND ingest_batch = B — ROWS: done; 0: send again;
 * anything else is refused (rows were written by someone else). So a SIGKILL at any point, or a
 * server that went away before or after it stored the rows, neither loses nor repeats a row.
 *
 * Retries: a refused or reset connection, or a server error that says a shard cannot be reached
 * (ClickHouse codes 159, 209, 210, 279), is retried after 0.5 s, doubling up to 30 s, with one
 * line saying what it waits for; any other server error stops the ingest with the server's
 * text. */
#ifndef TKP_INGEST_H
#define TKP_INGEST_H

#include <stddef.h>
#include <stdint.h>

#include "base/http.h"
#include "fleet/table.h"

#define TKP_INGEST_BACKOFF_MAX_MS 30000
#define TKP_INGEST_INPUTS_MAX 256 /* capture arguments (a directory counts once) */
#define TKP_INGEST_BATCH_RECORDS (1u << 20) /* records read before a followed capture's batch is cut */

struct tkp_ingest {
    struct tkp_url url;
    const char *db;            /* database of the Distributed tables */
    const char *state;         /* the state file */
    const char *const *inputs; /* captures or directories */
    size_t ninputs;
    const char *watch;  /* a directory to follow, NULL: ingest the inputs once */
    double settle_s;    /* see above */
    double batch_s;     /* with watch: at least this long between a capture's batches */
    int exit_when_idle; /* with watch: stop after a round with nothing left to do */
    double poll_s;      /* with watch: time between rounds */
    const struct tkp_classes *cl;
    const struct tkp_tab_ident *id;
    /* says what happens (one line, no newline): waits, skipped inputs; warn = 1 for problems */
    void (*say)(void *arg, int warn, const char *line);
    void *arg;
    /* results; stored: captures found stored whole already (by the state file), not read on */
    uint64_t captures, rows, skipped, stored;
};

/* Runs the ingest. Returns 0 (some inputs may have been skipped: in->skipped), or a tkp_err with
 * why (a server error's text, an unwritable state file). */
int tkp_ingest_run(struct tkp_ingest *in, char *why, size_t whylen);

#endif
