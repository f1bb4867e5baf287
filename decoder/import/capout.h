/* tokprof decoder: a capture writer for captures made from other tools' traces (tokprof import).
 * It writes docs/FORMAT.md's plain records (no templates, runs or columns: an imported trace is
 * written once and small next to its source) in self-contained chunks of about 1 MiB of msgpack,
 * each one zstd frame, and re-defines in every chunk the names and threads its records use.
 *
 *     tkp_capout_open(&w, path, why, sizeof why);
 *     tkp_capout_chunk(w, ns);                  // before each record: may start a new chunk
 *     tkp_capout_name(w, id, "kernel");         // then the definitions the record needs
 *     pk = tkp_capout_host(w, TKP_REC_LAUNCH, 13, ns, thread, step); ... pack the rest ...
 *     err = tkp_capout_close(w, why, sizeof why);
 *
 * The shim's writer (shim/writer) cannot serve: the decoder and the shim share only
 * include/tokprof/ (DESIGN.md section 1). */
#ifndef TKP_CAPOUT_H
#define TKP_CAPOUT_H

#include <msgpack.h>
#include <stddef.h>
#include <stdint.h>

struct tkp_capout;

/* Creates `path` and writes the file header. Returns 0 or TKP_ERR_IO / NOMEM with why set. */
int tkp_capout_open(struct tkp_capout **w, const char *path, char *why, size_t n);
/* Before each record: ends the current chunk when it is full and starts one (its CHUNK base_ns
 * is ns) when none is open. Returns 0 or a tkp_err (an earlier write error). */
int tkp_capout_chunk(struct tkp_capout *w, uint64_t ns);
/* Defines name `id` (a NAME record) in the current chunk unless it already is. Strings longer
 * than 4095 bytes are cut at a UTF-8 boundary (FORMAT.md). */
int tkp_capout_name(struct tkp_capout *w, uint64_t id, const char *s);
/* Defines capture thread `thread` (below 65536) as OS thread `tid` in the current chunk. */
int tkp_capout_thread(struct tkp_capout *w, uint32_t thread, uint64_t tid);
/* Packs the head of a host record [type, dt, thread, step, ...] of `nfields` fields after the type
 * (head included) and returns the packer for the rest; dt is ns against the chunk's time chain. */
msgpack_packer *tkp_capout_host(struct tkp_capout *w, int type, uint32_t nfields, uint64_t ns,
                                uint32_t thread, uint64_t step);
/* Packs [type, ...] of `nfields` fields after the type and returns the packer for them. */
msgpack_packer *tkp_capout_rec(struct tkp_capout *w, int type, uint32_t nfields);
/* Packs a string (msgpack str) of at most 4095 bytes, cut at a UTF-8 boundary. */
void tkp_capout_str(msgpack_packer *pk, const char *s);
/* Ends the last chunk and closes the file. Returns 0 or a tkp_err with why set; frees w. */
int tkp_capout_close(struct tkp_capout *w, char *why, size_t n);
/* Closes and removes the file after an error elsewhere; frees w (accepts NULL). */
void tkp_capout_abort(struct tkp_capout *w);

#endif
