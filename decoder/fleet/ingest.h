/* tokprof decoder: continuous ingest of captures into ClickHouse over HTTP, each capture's rows
 * once, across restarts (tokprof ingest).
 *
 * Unit of work: one capture (a process's files, or a snapshot: table.h) and one table: its rows
 * go in one INSERT into the Distributed table, gzip'd, with insert_distributed_sync=1 (the reply
 * comes once the shard stored them) and a max_insert_block_size above the row count (one block:
 * one part per shard, stored whole or not at all; a capture's rows all go to one shard, since
 * they share a host). Every row of it carries ingest_batch = 1.
 *
 * Exactly once: the state file (text, append-only, fsync'd after each line) says
 *     begin CAPTURE_ID TABLE ROWS     before the INSERT is sent
 *     done  CAPTURE_ID TABLE ROWS     after the server said 200
 * A `begin` without its `done` (killed in between, or no reply) is settled by asking the server:
 * SELECT count() ... WHERE capture_id = X AND ingest_batch = 1 — ROWS: done; 0: send again;
 * anything else is refused (rows were written by someone else). So a SIGKILL at any point, or a
 * server that went away before or after it stored the rows, neither loses nor repeats a row.
 *
 * Readiness: a capture is taken once none of its files has changed for `settle_s` seconds (a
 * running program's capture is still growing); one that grows after it was ingested is named
 * in a warning and not ingested again (its new rows are not sent: run with a settle time
 * longer than the program's life, or ingest rotated files of finished processes).
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

struct tkp_ingest {
    struct tkp_url url;
    const char *db;            /* database of the Distributed tables */
    const char *state;         /* the state file */
    const char *const *inputs; /* captures or directories */
    size_t ninputs;
    const char *watch;  /* a directory to follow, NULL: ingest the inputs once */
    double settle_s;    /* see above */
    int exit_when_idle; /* with watch: stop after a round with nothing left to do */
    double poll_s;      /* with watch: time between rounds */
    const struct tkp_classes *cl;
    const struct tkp_tab_ident *id;
    /* says what happens (one line, no newline): waits, skipped inputs; warn = 1 for problems */
    void (*say)(void *arg, int warn, const char *line);
    void *arg;
    /* results */
    uint64_t captures, rows, skipped;
};

/* Runs the ingest. Returns 0 (some inputs may have been skipped: in->skipped), or a tkp_err with
 * why (a server error's text, an unwritable state file). */
int tkp_ingest_run(struct tkp_ingest *in, char *why, size_t whylen);

#endif
