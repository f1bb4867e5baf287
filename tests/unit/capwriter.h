/* Test-only capture writer: builds captures per docs/FORMAT.md with msgpack-c and zstd, written
 * from the spec alone (independent of shim/), including deliberately broken ones. Everything
 * goes to a memory buffer; aborts on out-of-memory (a test helper, not product code). */
#ifndef CAPWRITER_H
#define CAPWRITER_H

#include <msgpack.h>
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

struct capw;

/* A new capture whose 16-byte file header (version 1, flags 0) is already written;
 * capw_new_bare() writes nothing, for tests of bad headers (use capw_bytes). */
struct capw *capw_new(void);
struct capw *capw_new_bare(void);
void capw_free(struct capw *w);

/* Raw bytes appended to the file as they are. */
void capw_bytes(struct capw *w, const void *p, size_t n);
const uint8_t *capw_data(const struct capw *w, size_t *len);
int capw_write_file(const struct capw *w, const char *path); /* 0 or -1 */
/* The capture in a temporary file, rewound (deleted when closed). */
FILE *capw_tmpfile(const struct capw *w);

/* Starts a chunk: its payload begins with [0, seq, base_ns]. capw_chunk_open() starts one with
 * an empty payload (to test a missing CHUNK record). */
void capw_chunk_begin(struct capw *w, uint64_t base_ns);
void capw_chunk_open(struct capw *w);
/* The packer of the current chunk's payload, to write any object at all. */
msgpack_packer *capw_pk(struct capw *w);
/* The current chunk's payload so far, writable (to flip bytes in it). */
uint8_t *capw_payload(struct capw *w, size_t *len);
/* Raw bytes appended to the current chunk's payload (hand-made msgpack). */
void capw_payload_bytes(struct capw *w, const void *p, size_t n);

/* Corruptions capw_chunk_end_ex() can apply to the chunk it writes. */
enum {
    CAPW_BAD_MAGIC = 1,        /* chunk magic "TKPX" */
    CAPW_BAD_RAWLEN = 2,       /* raw_len one more than the payload */
    CAPW_SEQ_SKIP = 4,         /* header seq one past the expected value */
    CAPW_BAD_ZSTD = 8,         /* a byte in the middle of the frame flipped */
    CAPW_NO_CONTENT_SIZE = 16, /* frame written without its content size */
    CAPW_HUGE_LEN = 32,        /* compressed_len 64 MiB + 1 */
};
/* Compresses and appends the chunk; returns the file offset of its header. */
size_t capw_chunk_end(struct capw *w);
size_t capw_chunk_end_ex(struct capw *w, unsigned corrupt);

/* One function per record type, arguments in FORMAT.md order after the type. */
void capw_name(struct capw *w, uint64_t id, const char *s);
void capw_meta(struct capw *w, const char *program, uint64_t pid);
void capw_thread(struct capw *w, uint32_t thread, uint32_t os_tid);
void capw_launch(struct capw *w, int64_t dt, uint32_t thread, uint64_t step, uint64_t name,
                 uint64_t stream, uint32_t via, const uint32_t grid[3], const uint32_t block[3],
                 uint32_t smem);
void capw_graph_launch(struct capw *w, int64_t dt, uint32_t thread, uint64_t step, uint64_t graph,
                       uint64_t stream, uint32_t via);
struct capw_node {
    uint64_t node;
    uint32_t type;
    uint64_t name;
    uint32_t grid[3], block[3];
    uint32_t ndeps;
    uint64_t deps[4];
};
void capw_graph(struct capw *w, uint64_t graph, uint32_t n, const struct capw_node *nodes);
void capw_copy(struct capw *w, int64_t dt, uint32_t thread, uint64_t step, uint32_t kind,
               uint32_t dir, uint64_t bytes, uint64_t stream, uint32_t flags);
void capw_sync(struct capw *w, int64_t dt, uint32_t thread, uint64_t step, uint32_t kind,
               uint64_t handle, uint64_t wait_ns);
void capw_event_record(struct capw *w, int64_t dt, uint32_t thread, uint64_t step, uint64_t event,
                       uint64_t stream);
void capw_stream_wait(struct capw *w, int64_t dt, uint32_t thread, uint64_t step, uint64_t stream,
                      uint64_t event);
void capw_step(struct capw *w, uint64_t step, uint32_t thread, uint32_t kind, uint64_t begin_ns,
               uint64_t mark_ns, uint64_t end_ns, uint32_t closed_by, uint64_t launches,
               uint64_t graph_launches, uint64_t copies);
void capw_nvtx(struct capw *w, int64_t dt, uint32_t thread, uint64_t step, uint32_t kind,
               uint64_t name, uint64_t range_id);
void capw_loss(struct capw *w, uint32_t thread, uint64_t dropped_total);
void capw_marker(struct capw *w, int64_t dt, uint32_t thread, uint64_t step, uint32_t kind,
                 int64_t value);

/* GPU records (tier 2). A GPU_KERNEL's fields after the type: graph and node -1 when
 * not a graph node (pass UINT64_MAX). */
struct capw_gpu_kernel {
    uint64_t start_ns, end_ns, name, stream, correlation;
    uint32_t thread;
    uint64_t step;
    uint32_t join, index;
    uint64_t graph, node;
    uint32_t grid[3], block[3];
};
void capw_gpu_kernel(struct capw *w, const struct capw_gpu_kernel *k);
/* GPU_INFO: status, mode, reason, clock "monotonic", records, then zero counts. */
void capw_gpu_info(struct capw *w, uint32_t status, const char *mode, const char *reason,
                   uint64_t records);

/* Templates (version 2) and runs (version 3). */
void capw_tmpl(struct capw *w, uint32_t id, uint32_t thread, uint64_t name, uint64_t stream,
               uint32_t via, const uint32_t grid[3], const uint32_t block[3], uint32_t smem);
/* LAUNCH_T with ntail of its optional fields (0: none, 1: call, 2: call and stack). */
void capw_launch_t(struct capw *w, int64_t dt, uint64_t step, uint32_t tmpl, int ntail,
                   uint32_t call, uint32_t stack);
struct capw_lib { /* the fields of a LIB_TMPL after tmpl and thread */
    uint32_t lib;
    uint64_t op, m, n, k, batch;
    int32_t atype, btype, ctype, compute, transa, transb;
    uint64_t stream, a_ptr;
    uint32_t status, flags;
};
void capw_lib_tmpl(struct capw *w, uint32_t id, uint32_t thread, const struct capw_lib *c);
void capw_lib_call_t(struct capw *w, int64_t dt, uint64_t step, uint32_t call, uint32_t tmpl,
                     uint64_t host_ns);
/* RUN [28, step, n, call, kinds, dts, tmpls, calls, host_ns] from the columns' bytes as they are,
 * then `extra` elements (the string "x"); column `str_col` (0..4) written as a str instead of a
 * bin, or -1; a column of length CAPW_NIL written as nil (a repeating RUN's kinds and tmpls). */
#define CAPW_NIL ((size_t)-1)
void capw_run(struct capw *w, uint64_t step, uint64_t n, uint64_t call, const uint8_t *const col[5],
              const size_t len[5], int extra, int str_col);

#endif
