/* Where finished chunks go: one interface, two implementations (stream.c, flight.c), as redis's
 * rio.h puts one writer over several targets. The writer calls a sink only through this table,
 * on the writer thread, except open() (the thread that starts the capture) and close() (the
 * exiting thread, after the writer thread has stopped). shim/init.c picks the sink. */
#ifndef TKP_SINK_SINK_H
#define TKP_SINK_SINK_H

#include <msgpack.h>
#include <stddef.h>
#include <stdint.h>

/* The writer's payload of CHUNK (seq 0) + META alone, for a file that starts mid-capture (a
 * flight snapshot). Returns a malloc'ed buffer the caller frees, or NULL. */
typedef void *(*tkp_meta_payload_fn)(size_t *len);

struct tkp_sink {
    const char *mode; /* META's config.mode */
    /* Makes the output ready (the directory, the first file). `meta` is how the sink gets a META
     * chunk of its own. 0, or -1 after one warning line (capture off). */
    int (*open)(tkp_meta_payload_fn meta);
    /* A chunk is beginning: returns the seq its CHUNK record must carry. *first is set to 1 when
     * it is the first chunk of a file (the writer then puts META in it). `gseq` is the writer's
     * own chunk counter, increasing over the process lifetime. */
    uint32_t (*chunk_begin)(uint32_t gseq, int *first);
    /* The exit's last chunk comes next (its records and GPU_INFO): it goes into the current
     * file, passing TOKPROF_MAX_MB by one small chunk, rather than starting a file that would
     * hold little but META and, under TOKPROF_KEEP, push out one that holds the run. */
    void (*last_chunk)(void);
    /* A finished chunk: `frame` is its zstd frame of `zn` bytes, `raw` the payload size,
     * `t_begin` and `t_end` when it was opened and closed. The bytes are copied or written
     * before return. 0, or -1 when the capture had to stop (one warning line, tkp_state -1). */
    int (*put)(const void *frame, size_t zn, uint32_t raw, uint64_t t_begin, uint64_t t_end);
    /* Every writer cycle: triggers and snapshot state. NULL: nothing to do. */
    void (*poll)(uint64_t now);
    /* Before each chunk: 1 when the output's free space less `need` is under the floor
     * (TOKPROF_MIN_FREE_MB/_PCT), after one warning line ending "<what>, the program is
     * unaffected"; the writer then ends the capture with that chunk. NULL: no floor (flight mode
     * applies it to its snapshots itself). */
    int (*low_space)(uint64_t need, const char *what);
    /* After low_space said stop: 1 when the capture's last chunk, `n` bytes, still fits above
     * the floor; else the writer puts only the LOSS that counts its records. NULL: it fits. */
    int (*fits)(uint64_t n);
    /* The writer encoded a STEP record (a slow one may be a trigger). NULL: not wanted. */
    void (*on_step)(int kind, uint64_t begin_ns, uint64_t end_ns);
    /* Closes every file (the final chunk has been put). */
    void (*close)(void);
    /* The current file (or the output directory), for messages. */
    const char *(*path)(void);
    /* Top-level META keys the sink adds (a snapshot's description): how many, and their packing.
     * NULL: none. */
    int (*meta_keys)(void);
    void (*meta_pack)(msgpack_packer *pk);
};

#endif
