/* tokprof decoder: the follow reader — records of captures that are still being written, as they
 * are written (tokprof top, serve, check --follow).
 *
 *     struct tkp_follow *f;
 *     struct tkp_follow_opts o = {.until_exit = 1};
 *     int err = tkp_follow_open("run/", &o, &f, why, sizeof why);   // a directory or a capture
 *     for (;;) {
 *         int k = tkp_follow_next(f, &rec, 1000);   // waits at most 1000 ms for a record
 *         if (k == TKP_FOLLOW_RECORD) use(&rec);    // valid until the next call (names: below)
 *         else if (k == TKP_FOLLOW_EXITED) ...      // process rec.pid ended, all of it was read
 *         else if (k == TKP_FOLLOW_END) break;      // until_exit: every process ended
 *         else if (k < 0) fail(k);                  // out of memory only
 *         // TKP_FOLLOW_IDLE: nothing new yet (refresh a screen, answer a scrape)
 *     }
 *     tkp_follow_close(f);
 *
 * What is followed: a capture file and the rotated files that continue it (TOKPROF_MAX_MB:
 * `<program>.<pid>.tokprof`, then `<program>.<pid>.1.tokprof`, ...), or, given a directory, every
 * process's capture in it, those that appear later included (a server's forked or spawned
 * workers). Each process is read on its own (no merge by time: consumers key by `pid`, and the
 * `thread` of a record is that of its process), one file after the other; a process's records
 * come in file order.
 *
 * Whole chunks only: a chunk is delivered once all of it is on disk (the reader checks it whole,
 * reader.h); a partly written one is waited on and read again (tkp_reader_retry). Waiting is on
 * inotify (the directory's writes and new files), with a poll every `poll_ms` as the fallback and
 * as the clock of what inotify cannot see (a writer's exit).
 *
 * When a file is complete: its process went on to the next rotated file (the shim writes a file's
 * last chunk before it creates the next), or the process ended: the shim's shared lock on the file
 * can be taken (TKP_FILE_LOCKED: the shim locks its stream files while it may write them, so this
 * holds across PID namespaces and container host names), else (older files) its META pid is gone
 * from /proc, a zombie, or another process with a different start time. Then the file is read once more to its
 * end and the next is opened, or the process is reported EXITED. A torn or bad last chunk (a writer
 * killed mid-chunk) ends the file there, with a warning (tkp_follow_warning). A file deleted under
 * the reader (TOKPROF_KEEP) stays readable through its open descriptor. A writer on another host
 * (META hostname) without the lock cannot be checked: it is followed until Ctrl-C.
 *
 * Names: a record's strings (kernel names, library ops, NVTX names) are interned by the follow
 * reader and live until tkp_follow_close(), across rotations (the reader's own go with it at
 * each file's end; consumers such as the spec monitor key on the pointers).
 *
 * Memory: per followed process, one reader (one chunk, reader.h) and its names; the interned
 * names (distinct names, at most TKP_NAMES_MAX_BYTES); in directory mode the names of the
 * directory's files at the last scan. Nothing grows with the run: ended processes and finished
 * files are freed, and rotated files repeat the same names. */
#ifndef TKP_FOLLOW_H
#define TKP_FOLLOW_H

#include <stddef.h>
#include <stdint.h>

#include "capture/reader.h"

#define TKP_FOLLOW_PROCS_MAX 1024 /* processes followed at once; later ones are warned about */
#define TKP_FOLLOW_POLL_MS 200    /* the default poll period (the shim's default flush period) */
#define TKP_FOLLOW_BATCH 4096     /* records of one process before the next gets its turn */

enum tkp_follow_status {
    TKP_FOLLOW_IDLE = 0,   /* nothing new within the timeout */
    TKP_FOLLOW_RECORD = 1, /* *rec holds a record */
    TKP_FOLLOW_EXITED =
        2, /* process rec->pid ended and its last whole chunk was read (only pid set) */
    TKP_FOLLOW_END = 3, /* until_exit: every process followed has ended */
};

struct tkp_follow_opts {
    unsigned poll_ms; /* 0: TKP_FOLLOW_POLL_MS */
    int until_exit; /* report TKP_FOLLOW_END once every process seen ended (else follow forever) */
    int no_inotify; /* poll only (tests of the fallback) */
    int no_snapshots; /* leave flight-recorder snapshots out (complete files: read them whole) */
};

struct tkp_follow_stats {
    uint64_t files;     /* capture files opened */
    uint64_t rotations; /* moves to a process's next rotated file */
    uint64_t processes; /* processes followed so far */
    uint64_t exited;    /* of which ended */
    uint64_t retries;   /* ends of data waited on (a partly written chunk or nothing new) */
    uint64_t warnings;
};

struct tkp_follow;

/* Starts following `path`, a capture or a directory. On failure *f is NULL and why gets one line
 * ("run/: No such file or directory", "x.txt: not a tokprof capture (bad magic)"). A capture file
 * that is still empty (just created) is accepted and waited on. Returns 0 or a TKP_ERR_* code. */
int tkp_follow_open(const char *path, const struct tkp_follow_opts *opts, struct tkp_follow **f,
                    char *why, size_t whylen);
/* The next record, waiting at most timeout_ms (0: only what is already there). Returns an enum
 * tkp_follow_status or TKP_ERR_NOMEM. */
int tkp_follow_next(struct tkp_follow *f, struct tkp_record *rec, int timeout_ms);
/* A descriptor that becomes readable when a followed directory changes (for a caller's own
 * poll(2) next to sockets), -1 when polling only. */
int tkp_follow_fd(const struct tkp_follow *f);
/* The oldest warning not yet taken ("PATH: torn tail at byte N: followed up to there"), NULL when
 * none; valid until the next call into f. Warnings beyond a few pending are counted, not kept. */
const char *tkp_follow_warning(struct tkp_follow *f);
const struct tkp_follow_stats *tkp_follow_stats(const struct tkp_follow *f);
/* The followed process the last RECORD or EXITED came from: 1, 2, ... in the order processes
 * were first seen, never reused. Two captures with the same META pid (a recycled pid; servers in
 * containers, each pid 1 in its own namespace) are two sources; key per-capture state by it. */
uint64_t tkp_follow_source(const struct tkp_follow *f);
/* The caller wants nothing more of a source (ingest: its capture is stored whole already): the
 * rest of its files is not read, and at its next turn it is reported EXITED, as if it had ended
 * there. A rotated file of it that appears later would be followed as a new source. Returns 0, or
 * -1 when no such source is followed. */
int tkp_follow_skip(struct tkp_follow *f, uint64_t source);
/* The number of processes followed now. */
size_t tkp_follow_nprocs(const struct tkp_follow *f);
void tkp_follow_close(struct tkp_follow *f); /* accepts NULL */

#endif
