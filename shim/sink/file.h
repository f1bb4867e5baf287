/* The write path every capture file shares (file.c): stream files and flight snapshots. Writer
 * thread, except at start (the thread that starts the capture) and at exit. */
#ifndef TKP_SINK_FILE_H
#define TKP_SINK_FILE_H

#include <stddef.h>
#include <stdint.h>

/* Creates TOKPROF_OUT when missing (the last component only, mode 0700) and clears a previous
 * failure. 0, or -1 after one warning line (capture off). */
int tkp_file_open_dir(void);
/* Opens `path` for a new capture (0600, O_TRUNC) and writes the file header with `flags`.
 * Returns the fd, or -1 with errno set. */
int tkp_file_create(const char *path, unsigned flags);
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
/* Fork child: the parent's failure is not the child's. */
void tkp_file_reset(void);
/* "<out>/<program>.<pid>" into buf. */
void tkp_file_stem(char *buf, size_t cap);
/* TOKPROF_TEST_WRITER_DELAY_MS: a slow disk, for tests only. */
void tkp_file_test_delay(void);

#endif
