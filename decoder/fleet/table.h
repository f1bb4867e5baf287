/* tokprof decoder: captures as rows of five tables (steps, step_classes, kernels, calls, moe) for
 * a column store, with the identity of every row, and the ClickHouse schema that holds them.
 * docs/FLEET.md documents the columns; tkp_tab_cols() is their one description (the encoders,
 * the DDL and `tokprof table --columns` all read it).
 *
 *     struct tkp_tab_ident id = {...labels...};
 *     struct tkp_tab_out *outs[TKP_TAB_COUNT] = {[TKP_TAB_STEPS] = o};   // NULL: not wanted
 *     err = tkp_tab_capture(files, nfiles, cl, &id, outs, &info, why, sizeof why); // table_rows.h
 *
 * One capture at a time: a process's file and its rotated continuations (or a snapshot), read as
 * one by the multi-capture reader. Identity columns, first in every table:
 *   host        META hostname, unless --label host=... gives one ("" when neither)
 *   model       --label model=... ("" when not given)
 *   label_keys, label_values   the other --label pairs, in command-line order
 *   capture_id  FNV-1a 64 of (META hostname, pid, start_realtime_ns) (and, for a flight-recorder
 *               snapshot, the seq of its first recorder chunk): the same for a capture and its
 *               rotated files and on every reading, so a second ingest is recognisable
 *   pid         META pid (0 when the capture has no META)
 *   tid         the OS thread of the row (0 for per-capture rows: kernels, calls)
 *   version     tokprof's version that made the row
 *   ingest_batch   0 from `tokprof table`; the batch number from `tokprof ingest`
 * Times are epoch ns: host_ns - META start_monotonic_ns + start_realtime_ns (monotonic when the
 * capture has no META). One kind of NULL: a GPU figure of a step that was not timed (steps'
 * GPU columns are Nullable: model.h, tkp_mstep_timed; 0 would read as an idle GPU). Other unknown
 * numbers are 0, an unknown token index -1, unknown words "".
 *
 * Memory: the step model's (model.h: O(steps x classes) of one capture), the distinct rows of
 * kernels and calls (calls streamed: table_calls.h) and GEMM weights; for moe, when the capture
 * may hold per-expert GEMMs (table_rows.c: the hint), a second pass with the library-call model
 * (libcalls.h: O(library calls) of one capture). */
#ifndef TKP_TABLE_H
#define TKP_TABLE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "fleet/table_out.h"

struct tkp_classes;

enum tkp_tab_id {
    TKP_TAB_STEPS,
    TKP_TAB_STEP_CLASSES,
    TKP_TAB_KERNELS,
    TKP_TAB_CALLS,
    TKP_TAB_MOE,
    TKP_TAB_COUNT
};

#define TKP_TAB_LABELS_MAX 16
#define TKP_TAB_IDENT_COLS 9 /* host .. ingest_batch */
/* moe's second pass: a capture whose library-call model would hold more records than half this
 * is read by windows of a thread's steps of at most this many records (table_rows.c) */
#define TKP_TAB_MOE_WINDOW (1u << 20)

struct tkp_tab_ident {
    const char *host, *model; /* from --label; NULL: not given */
    const char *keys[TKP_TAB_LABELS_MAX], *values[TKP_TAB_LABELS_MAX]; /* the other labels */
    size_t nlabels;
    uint64_t batch; /* ingest_batch */
    /* not an identity, how moe's second pass reads: records per window (0: the default,
     * TKP_TAB_MOE_WINDOW; UINT64_MAX: the whole capture at once) */
    uint64_t moe_window;
};

/* Parses one --label KEY=VALUE into id (host and model go to their own columns). KEY is
 * [A-Za-z_][A-Za-z0-9_]* (at most 64 bytes), VALUE any bytes; a repeated key is refused. Returns
 * 0 or TKP_ERR_USAGE with the reason in why. `kv` must outlive id. */
int tkp_tab_label(struct tkp_tab_ident *id, char *kv, char *why, size_t whylen);

/* A table's name ("steps", ...) and its id (-1 unknown). */
const char *tkp_tab_name(int table);
int tkp_tab_find(const char *name);
/* The columns of a table (identity columns first); *n gets their count. */
const struct tkp_tab_col *tkp_tab_cols(int table, int *n);
/* The column list "host, model, ..." for INSERT INTO t (...) (18.16 matches TSV by position). */
void tkp_tab_print_columns(FILE *f, int table);

/* The CREATE statements of the schema, for ClickHouse 18.16 and later: database `db`, per table
 * a local MergeTree `<name>_local` partitioned by day and a Distributed `<name>` over `cluster`
 * sharded by cityHash64(host). Statements end with ";\n". */
void tkp_tab_ddl_clickhouse(FILE *f, const char *db, const char *cluster);

struct tkp_tab_info {
    char host[256]; /* the host column's value */
    uint64_t capture_id, pid;
    uint64_t rows[TKP_TAB_COUNT];
    size_t nfiles;      /* files read */
    int torn;           /* a file stopped at a torn or bad chunk (decoded up to there) */
    char torn_why[256]; /* "PATH: torn tail at byte N (...)" */
};

/* The captures among inputs (files or directories), as groups of files: a process's rotated
 * files form one group, in rotation order (multireader.h). On success *files (owned, free with
 * tkp_tab_groups_free) holds every path and *first[g]..*first[g+1] the group g's, g < *ngroups.
 * An input that is not a capture or cannot be read is not fatal: it is named in *bad (a
 * malloc'd, newline-separated list; NULL when none). Returns 0 or a tkp_err (with why). */
struct tkp_tab_groups {
    char **files;
    size_t nfiles;
    size_t *first; /* ngroups + 1 */
    size_t ngroups;
    char *bad;
    size_t badcap;
};
int tkp_tab_groups(const char *const *inputs, size_t n, struct tkp_tab_groups *g, char *why,
                   size_t whylen);
void tkp_tab_groups_free(struct tkp_tab_groups *g);

#endif
