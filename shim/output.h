/* Where finished chunks go (output.c), and the production settings that decide it: stream mode
 * (files with a size cap, rotation and a keep count) or flight mode (a bounded in-memory ring of
 * chunks, written out as snapshots when a trigger fires; flight.c). Internal to the shim.
 *
 * Who calls what: config.c calls tkp_prod_config_load(); writer.c calls everything else, always
 * on the writer thread, except tkp_out_open() (the thread that starts the capture) and
 * tkp_out_close() (the exiting thread, after the writer thread has stopped). */
#ifndef TKP_OUTPUT_H
#define TKP_OUTPUT_H

#include <msgpack.h>
#include <stddef.h>
#include <stdint.h>

#include "shim.h"

/* The disk bounds a process gets when nothing is set (docs/OPERATIONS.md argues them). */
#define TKP_DEFAULT_MAX_MB 256
#define TKP_DEFAULT_KEEP 4
#define TKP_DEFAULT_MIN_FREE_MB 1024
#define TKP_DEFAULT_MIN_FREE_PCT 5

struct tkp_prod_config {
    int flight;              /* TOKPROF_MODE=flight */
    uint64_t max_bytes;      /* TOKPROF_MAX_MB: stream files rotate before this; 0 no cap */
    unsigned keep;           /* TOKPROF_KEEP: newest files kept per process; 0 all */
    uint64_t min_free_bytes; /* TOKPROF_MIN_FREE_MB: stop writing under this much free space */
    unsigned min_free_pct;   /* TOKPROF_MIN_FREE_PCT: ... or under this % of the filesystem */
    uint64_t flight_bytes;   /* TOKPROF_FLIGHT_MB: compressed chunks the flight ring may hold */
    uint64_t before_ns;      /* TOKPROF_FLIGHT_BEFORE_S */
    uint64_t after_ns;       /* TOKPROF_FLIGHT_AFTER_S */
    uint64_t min_gap_ns;     /* TOKPROF_TRIGGER_MIN_S */
    int step_trigger;        /* 0 none, 1 absolute (step_ns), 2 relative (step_factor x p50) */
    uint64_t step_ns;
    double step_factor;
    int signal;              /* TOKPROF_TRIGGER_SIGNAL, 0 none */
    char trigger_file[512];  /* TOKPROF_TRIGGER_FILE, "" none */
    unsigned test_delay_ms;  /* TOKPROF_TEST_WRITER_DELAY_MS: a slow disk, for tests only */
};
extern struct tkp_prod_config tkp_prod;
/* Reads the production TOKPROF_* variables (README.md); a bad value gets one warning and the
 * default. Called by tkp_config_load(). */
void tkp_prod_config_load(void);

/* ---- files (output.c) ---------------------------------------------------------------------- */
/* Opens and checks TOKPROF_OUT (output.c's comment: not a symbolic link, ours or root's with
 * the sticky bit, not writable by others without the sticky bit), creating it when missing (the
 * last component only, mode 0700), and, in stream mode, creates the first capture file. Returns
 * 0, or -1 after one warning line (capture off). */
int tkp_out_open(void);
/* A chunk is beginning: returns the seq its CHUNK record must carry. *first is set to 1 when it
 * is the first chunk of a file (the writer then puts META in it). `gseq` is the writer's own
 * chunk counter, increasing over the process lifetime. */
uint32_t tkp_out_chunk_begin(uint32_t gseq, int *first);
/* The exit's last chunk comes next (its records and GPU_INFO): it goes into the current file,
 * passing TOKPROF_MAX_MB by one small chunk, rather than starting a file that would hold little
 * but META and, under TOKPROF_KEEP, push out one that holds the run. */
void tkp_out_last_chunk(void);
/* A finished chunk: `frame` is its zstd frame of `zn` bytes, `raw` the payload size, `t_begin`
 * and `t_end` when it was opened and closed. The bytes are copied or written before return.
 * Returns 0, or -1 when the capture had to stop (one warning line was printed, tkp_state is -1). */
int tkp_out_chunk_put(const void *frame, size_t zn, uint32_t raw, uint64_t t_begin,
                      uint64_t t_end);
/* Writer thread, every cycle: triggers and snapshot state (flight mode; no-op otherwise). */
void tkp_out_poll(uint64_t now);
/* Closes every file (the final chunk has been put). */
void tkp_out_close(void);
/* Fork child: forget the parent's files and memory. */
void tkp_out_after_fork(void);
/* The current stream file (or the output directory in flight mode), for messages. */
const char *tkp_out_path(void);

/* Shared helpers for flight.c. */
enum tkp_out_kind { TKP_OUT_STREAM = 0, TKP_OUT_SNAPSHOT = 1 };
/* Creates capture file `index` of `kind` in the output directory, "<program>.<pid>[.K |
 * .snapK].tokprof", mode 0600, and writes the file header with `flags`. Never opens an existing
 * name (O_EXCL | O_NOFOLLOW): a taken one gets ".alt<N>" before ".tokprof". Under TOKPROF_KEEP,
 * removes this process's file `index - keep` of the same kind. The path (for messages) goes into
 * `path`, also on failure. Returns the fd, or -1 with errno set. */
int tkp_out_create(int kind, unsigned index, unsigned flags, char *path, size_t cap);
/* 1 when the output filesystem's free space less `need` bytes is under the floor
 * (TOKPROF_MIN_FREE_MB, or TOKPROF_MIN_FREE_PCT of its size, whichever is larger); the first time,
 * one warning line ending "<what>, the program is unaffected". One fstatvfs: writer thread,
 * chunk rate, never a launch. 0 when it cannot tell (the write will say). */
int tkp_out_low_space(uint64_t need, const char *what);
/* write(2) of all n bytes: EINTR retried; RLIMIT_FSIZE's SIGXFSZ never reaches the program (the
 * signal is blocked around the write and consumed if the write raised it). 0, or -1 with errno. */
int tkp_out_write(int fd, const void *buf, size_t n);
/* The chunk header for a frame. */
void tkp_out_chunk_header(unsigned char hdr[16], uint32_t zn, uint32_t raw, uint32_t seq);
/* Stops the capture after a failed write of `path`: one warning line (the first failure only),
 * tkp_state -1. */
void tkp_out_fail(const char *path, int err);

/* ---- META extras (writer.c's emit_meta asks) ---------------------------------------------- */
/* Top-level META keys added by the output side (the snapshot description): how many, and the
 * packing of them. */
int tkp_out_meta_keys(void);
void tkp_out_meta_pack(msgpack_packer *pk);

/* writer.c: a payload of CHUNK (seq 0) + META alone, for a file that starts mid-capture (a flight
 * snapshot). Returns a malloc'ed buffer the caller frees, or NULL. */
void *tkp_writer_meta_payload(size_t *len);

#endif
