/* tokprof decoder: several captures read as one timeline (a multi-process run, a rotated
 * capture, a directory of captures).
 *
 *     struct tkp_reader *r;
 *     const char *paths[] = {"run/", "other.4242.tokprof"};
 *     int err = tkp_reader_open_many(paths, 2, &r, why, sizeof(why));
 *     while (tkp_reader_next(r, &rec) == 1) ...   // the reader.h calls work unchanged
 *     tkp_reader_close(r);
 *
 * Inputs: a directory stands for all its `*.tokprof` files. Files are grouped by process from
 * their names (docs/FORMAT.md "Files"): `<program>.<pid>.tokprof` and its rotated continuations
 * `<program>.<pid>.<K>.tokprof` form one group, read one after the other in K order; every other
 * file (a snapshot `...snap<K>.tokprof`, a renamed capture) is a group of its own.
 *
 * Merge: the groups' records are merged by host time (a k-way merge on each record's host_ns).
 * A record without time (CHUNK, NAME, THREAD, STEP, GPU records, ...) takes its predecessor's
 * time in its group (0 before the first), so it keeps its place in its file: per group, file
 * order is never changed, and a NAME or THREAD definition still comes before its use. Ties go to
 * the earlier group. Within a file host_ns is not monotonic (threads interleave in a chunk, and
 * GPU records come chunks late), so the merge is by time only as far as each file is.
 *
 * Identity: every record carries `pid` (its group's META pid; reader.h sets it for a single
 * file too). With more than one group, `thread` is renumbered so that each (group, capture-local
 * thread) pair gets its own index (consumers key threads by `thread`; `tid` and `pid` are left
 * as they are), and graph ids (capture-local too) get the group's ordinal in bits 48 and up;
 * with one group, nothing is renumbered, so one capture reads exactly as before. STACK, MODULE
 * and LIB_CALL-pointer identities are per process and are not renumbered: commands built on
 * them (stacks, moe) refuse a merge of several processes (tkp_reader_is_merged).
 *
 * Memory: one open reader per group (one chunk each, reader.h), plus per file its path, a copy
 * of its error and counts for the warnings, and, once read, its name table (name strings live
 * until tkp_reader_close(), reader.h) — never O(records). */
#ifndef TKP_MULTIREADER_H
#define TKP_MULTIREADER_H

#include <stddef.h>
#include <stdint.h>

#include "capture/reader.h"

#define TKP_INPUTS_MAX 4096 /* capture files after expanding directories */

/* Opens the inputs (files or directories; "-" is stdin, alone). With one input that is not a
 * directory, the plain reader of tkp_reader_open(). On failure *r is NULL and *why says which
 * input and why ("DIR: no *.tokprof file in it", "PATH: not a tokprof capture (bad magic)").
 * Returns 0 or the failing input's TKP_ERR_* code. */
int tkp_reader_open_many(const char *const *paths, size_t n, struct tkp_reader **r, char *why,
                         size_t whylen);

/* The files behind r: 1 for a plain reader. For i < that count, *path gets the i-th file's path
 * (owned by r), and the result is its error, NULL when it decoded to a clean end or was not
 * reached (a plain reader: tkp_reader_error(r)); *stats (when not NULL) its counts. */
size_t tkp_reader_nfiles(const struct tkp_reader *r);
const struct tkp_reader_err *tkp_reader_file(const struct tkp_reader *r, size_t i,
                                             const char **path,
                                             const struct tkp_reader_stats **stats);
/* 1 when r merges several groups (records then carry a renumbered `thread`). */
int tkp_reader_is_merged(const struct tkp_reader *r);
/* The groups (processes) behind r: 1 for a plain reader. Group g < that count is the files
 * [*first, *first + *n) of tkp_reader_file()'s numbering (a process's rotated files in order). */
size_t tkp_reader_ngroups(const struct tkp_reader *r);
void tkp_reader_group(const struct tkp_reader *r, size_t g, size_t *first, size_t *n);

#endif
