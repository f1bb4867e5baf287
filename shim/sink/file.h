/* The write path every capture file shares (file.c): stream files and flight snapshots. Writer
 * thread, except at start (the thread that starts the capture) and at exit. */
#ifndef TKP_SINK_FILE_H
#define TKP_SINK_FILE_H

#include <stddef.h>
#include <stdint.h>

/* Opens and checks TOKPROF_OUT once (file.c's comment: not a symbolic link, ours or root's with
 * the sticky bit, not writable by others without the sticky bit), creating it when missing (the
 * last component only, mode 0700), and clears a previous failure. 0, or -1 after one warning
 * line (capture off). */
int tkp_file_open_dir(void);
/* 0 when the checked output directory can be written, else -1 with errno. */
int tkp_file_dir_writable(void);
enum tkp_out_kind { TKP_OUT_STREAM = 0, TKP_OUT_SNAPSHOT = 1 };
/* Creates capture file `index` of `kind` in the output directory, "<program>.<pid>[.K |
 * .snapK].tokprof", mode 0600, and writes the file header with `flags`. Never opens an existing
 * name (O_EXCL | O_NOFOLLOW): a taken one gets ".alt<N>" before ".tokprof". Under TOKPROF_KEEP,
 * removes this process's file `index - keep` of the same kind. The path (for messages) goes into
 * `path`, also on failure. Returns the fd, or -1 with errno set. */
int tkp_file_create(int kind, unsigned index, unsigned flags, char *path, size_t cap);
/* Bytes kept above the floor for the chunk that ends a capture stopped by it. */
#define TKP_FLOOR_RESERVE (256u << 10)
/* 1 when the output filesystem's free space less `need` bytes (in whole blocks) and
 * TKP_FLOOR_RESERVE is under the floor (TOKPROF_MIN_FREE_MB, or TOKPROF_MIN_FREE_PCT of its
 * size, whichever is larger); the first time,
 * one warning line ending "<what>, the program is unaffected". One fstatvfs: writer thread,
 * chunk rate, never a launch. 0 when it cannot tell (the write will say). */
int tkp_file_low_space(uint64_t need, const char *what);
/* 1 when `n` bytes (in whole blocks) can still be written without crossing the floor; 1 when
 * it cannot tell. No warning. */
int tkp_file_fits(uint64_t n);
/* write(2) of all n bytes: EINTR retried; RLIMIT_FSIZE's SIGXFSZ never reaches the program (the
 * signal is blocked around the write and consumed if the write raised it). 0, or -1 with errno. */
int tkp_file_write(int fd, const void *buf, size_t n);
/* The chunk header for a frame. */
void tkp_file_chunk_header(unsigned char hdr[16], uint32_t zn, uint32_t raw, uint32_t seq);
/* Stops the capture after a failed write of `path`: one warning line (the first failure only),
 * tkp_state -1. */
void tkp_file_fail(const char *path, int err);
/* 1 once a write failed (the capture stopped): nothing more is written. */
int tkp_file_failed(void);
/* Fork child: the parent's directory, files to remove and failure are not the child's. */
void tkp_file_reset(void);
/* TOKPROF_TEST_WRITER_DELAY_MS: a slow disk, for tests only. */
void tkp_file_test_delay(void);

#endif
