/* tokprof decoder: streaming reader of a capture (docs/FORMAT.md).
 *
 *     struct tkp_reader *r;
 *     struct tkp_record rec;
 *     int err = tkp_reader_open(path, &r);      // checks the 16-byte header
 *     while ((err = tkp_reader_next(r, &rec)) == 1)
 *         use(&rec);                            // rec valid until the next call
 *     // err == 0: clean end; err < 0: stopped at a bad or torn chunk, see tkp_reader_error(r)
 *     tkp_reader_close(r);
 *
 * Memory is bounded by one chunk (its compressed and raw bytes, at most 64 MiB each) plus the
 * tables of names and threads, whatever the file holds. Chunks are all-or-nothing: a chunk is
 * validated completely before its first record is delivered, so a caller sees exactly the
 * records of the whole, good chunks before the first bad one. */
#ifndef TKP_READER_H
#define TKP_READER_H

#include <stdint.h>
#include <stdio.h>

#include "tokprof/format.h"

/* Bounds against hostile input (none is reached by a real capture). */
#define TKP_NAME_MAX 4096               /* a longer string is truncated to TKP_NAME_MAX-1 bytes */
#define TKP_NAMES_MAX_BYTES (64u << 20) /* past this, new names are not stored: they read "?" */
#define TKP_THREAD_NONE 0xffffffffu   /* LOSS of threads without a ring */
#define TKP_GRAPH_UNKNOWN UINT64_MAX  /* GRAPH_LAUNCH of a graph whose topology was never seen */
#define TKP_THREADS_MAX 65536         /* a `thread` index at or above this is a malformed record */
#define TKP_GRAPH_MAX_NODES 65536     /* per GRAPH record */
#define TKP_GRAPH_MAX_DEPS (1u << 20) /* all dependency edges of one GRAPH record */
#define TKP_HEADER_MAX (1u << 20)     /* a header_len above this is refused */
#define TKP_STACK_MAX_FRAMES 1024     /* per STACK record */

/* The string a name or thread resolves to when its chunk did not define it. */
#define TKP_NAME_MISSING "?"

struct tkp_graph_node {
    uint64_t node;
    uint32_t type; /* enum tkp_graph_node_type */
    uint64_t name_id;
    const char *name; /* resolved; TKP_NAME_MISSING when undefined */
    uint32_t grid[3], block[3];
    uint32_t ndeps;
    const uint64_t *deps;
};

/* META: the known scalar keys decoded (0 or "" when absent or of the wrong type), and the whole
 * map as msgpack bytes for generic printing. */
struct tkp_meta {
    const char *program, *hostname, *tokprof_version;
    uint64_t pid, ppid, start_realtime_ns, start_monotonic_ns;
    uint64_t cuda_runtime_version, cuda_driver_version;
    const uint8_t *map; /* msgpack map, valid until the next call */
    size_t map_len;
};

/* One decoded record. `host_ns` is absolute (CLOCK_MONOTONIC) and valid for the types that carry
 * `dt` (tkp_record_has_time()). `thread` is the capture-local index, `tid` the OS thread id its
 * chunk's THREAD record gave (0 when the chunk did not map it; counted in tkp_reader_stats).
 * Strings are NUL-terminated; they and `nodes` are valid until the next tkp_reader_next() call,
 * except name strings, which live until tkp_reader_close(). */
/* The decoded struct of a fixed-layout record type (records.def). */
#define TKP_CTYPE_u32 uint32_t
#define TKP_CTYPE_u64 uint64_t
#define TKP_CTYPE_i64 int64_t
#define TKP_CTYPE_dim3 uint32_t
#define TKP_CTYPE_cenum int32_t
#define TKP_DIMS_cenum
#define TKP_DIMS_u32
#define TKP_DIMS_u64
#define TKP_DIMS_i64
#define TKP_DIMS_dim3 [3]
#define TKP_STRUCT_F(kind, name, wire) TKP_CTYPE_##kind name TKP_DIMS_##kind;
#define TKP_STRUCT_X(ctype, name) ctype name;
#define TKP_STRUCT_R(T, member, head, fields, extra)                                              \
    struct {                                                                                       \
        fields extra                                                                               \
    } member;
#include "tokprof/records.def"

struct tkp_record {
    enum tkp_rec type;
    uint64_t offset; /* file offset of the chunk this record came from */
    uint64_t host_ns;
    uint32_t thread;
    uint32_t tid;
    uint64_t pid;  /* the process: its capture's META pid (0 before the META record) */
    uint64_t step; /* segment index on the thread (LAUNCH..MARKER, STEP) */
    union {
        struct {
            uint64_t seq, base_ns;
        } chunk;
        struct {
            uint64_t id;
            const char *str;
        } name;
        struct tkp_meta meta;
        /* THREAD: `thread` and `tid` above */
        struct {
            uint64_t id;
            uint32_t n;
            const uint64_t *pcs; /* innermost first; return addresses: symbolise pc - 1 */
        } stack;
        struct {
            uint64_t id;
            const char *path, *build_id; /* build_id: lowercase hex, "" when the ELF had none */
            uint64_t base, size; /* load bias (pc - base = ELF address); spans [base, base+size) */
        } module;
        struct {
            uint64_t graph, stream;
            uint32_t via;
        } graph_launch;
        struct {
            uint64_t graph;
            uint32_t nnodes;
            const struct tkp_graph_node *nodes;
        } graph;
        /* LAUNCH (launch: via is an enum tkp_via, maybe | TKP_VIA_PTSZ; call, the library call
         * (LIB_CALL.call, same thread) it is part of, 0 none; stack, its sampled host call stack
         * (STACK id), 0 none), COPY, SYNC, EVENT_RECORD, STREAM_WAIT, STEP (step_rec), NVTX,
         * MARKER, LIB_CALL (lib_call: lib an enum tkp_lib, flags TKP_LIBF_*, op "cublasGemmEx",
         * ...; m..batch 0 unknown; atype..transb CUDA enums, -1 unknown; call_ns the host time
         * inside the call), LOSS (loss.dropped: cumulative for the thread): one struct each,
         * generated from include/tokprof/records.def (its fields in wire order, then its extra
         * members) */
        TKP_RECORDS_FIXED(TKP_STRUCT_R, TKP_STRUCT_F, TKP_STRUCT_X)
        /* GPU_KERNEL and GPU_COPY: `thread` above is the joined host thread (its `tid` the
         * last mapping seen), TKP_GPU_THREAD_NONE when not joined; `step` its segment. */
        struct {
            uint64_t start_ns, end_ns;
            uint64_t name_id;
            const char *name; /* kernels; "memcpy"/"memset" for copies */
            uint32_t stream, correlation, join, index; /* CUPTI stream id; enum tkp_gpu_join */
            uint64_t graph, node; /* TKP_GRAPH_UNKNOWN when not a graph node */
            uint32_t grid[3], block[3];
            uint32_t kind, dir; /* copies: enum tkp_copy_kind, tkp_copy_dir */
            uint64_t bytes;
        } gpu;
        struct {
            uint32_t status; /* enum tkp_gpu_status */
            const char *mode, *reason, *clock; /* valid until the next call */
            uint64_t records, dropped, bad_time, unjoined, filtered, buffer_bytes_peak;
        } gpu_info;
    };
};

/* Why the reader stopped early. */
struct tkp_reader_err {
    int code;        /* TKP_ERR_TORN (incomplete last chunk) or TKP_ERR_CHUNK/RECORD/IO/NOMEM */
    uint64_t offset; /* file offset of the bad chunk's header */
    char msg[192];   /* the reason, e.g. "incomplete chunk", "seq 3, expected 2" */
};

struct tkp_reader_stats {
    uint64_t chunks;          /* whole chunks delivered */
    uint64_t records;         /* records delivered, of known types */
    uint64_t unknown_records; /* skipped: types this reader does not know */
    uint64_t missing_names;   /* name uses their chunk did not define */
    uint64_t missing_threads; /* thread uses their chunk did not map */
};

struct tkp_reader;

/* Opens a capture and checks its header. "-" reads stdin. On failure *r is NULL, and *why (when
 * not NULL) gets a one-line reason, e.g. "not a tokprof capture (bad magic)".
 * Returns 0, TKP_ERR_IO, TKP_ERR_NOT_CAPTURE, TKP_ERR_VERSION, TKP_ERR_HEADER or TKP_ERR_NOMEM. */
int tkp_reader_open(const char *path, struct tkp_reader **r, char *why, size_t whylen);
/* The same over an open stream, which the reader closes (fmemopen() serves tests). */
int tkp_reader_open_stream(FILE *f, struct tkp_reader **r, char *why, size_t whylen);

/* Delivers the next record into *rec. Returns 1 for a record, 0 at the clean end of the file,
 * or the negative code of tkp_reader_error() once stopped at a bad chunk (and again on every
 * later call). */
int tkp_reader_next(struct tkp_reader *r, struct tkp_record *rec);

/* Launches in bulk. Most of a capture's records are LAUNCHes delivered from RUNs (FORMAT.md
 * "Runs"); a pass that needs of them only their time, thread, step and name id (the fleet
 * tables) takes them a batch at a time for a fraction of tkp_reader_next()'s cost per record.
 * tkp_reader_peek_launches() fills *b with the next records while they are LAUNCHes of one thread
 * from a RUN, their templates resolved, and returns how many (at most TKP_LAUNCH_BULK; 0 when the
 * next record is anything else, or r merges several captures: read it with tkp_reader_next()).
 * It consumes nothing: tkp_reader_take() then consumes the first k (1 <= k <= the count peeked,
 * no other call on r in between), counting them in the stats; they are not delivered again. */
#define TKP_LAUNCH_BULK 64
struct tkp_launch_bulk {
    uint32_t thread;
    uint64_t step;
    uint64_t host_ns[TKP_LAUNCH_BULK], name_id[TKP_LAUNCH_BULK];
};
size_t tkp_reader_peek_launches(struct tkp_reader *r, struct tkp_launch_bulk *b);
void tkp_reader_take(struct tkp_reader *r, const struct tkp_launch_bulk *b, size_t k);
/* Templates (FORMAT.md "Templates"): what a LAUNCH_T / LIB_CALL_T stands for; `gen` is the
 * chunk (the decoder's) that defined it, so that a use is checked against its own chunk.
 * `resolved` and `tid` belong to the reader: when `resolved` is 1 + its count of definitions
 * that changed a meaning, the template's name (launch.name, lib.op) and tid are still valid. */
struct tkp_launch_tmpl {
    uint32_t thread, tid; /* side by side, as in struct tkp_record: one move for both */
    uint64_t resolved;    /* 0: resolve at each use */
    uint32_t gen;
    __typeof__(((struct tkp_record *)0)->launch) launch; /* call and stack 0 */
};
struct tkp_lib_tmpl {
    uint32_t thread, tid;
    uint64_t resolved; /* 0: resolve at each use */
    uint32_t gen;
    __typeof__(((struct tkp_record *)0)->lib_call) lib; /* call and call_ns 0 */
};

/* A RUN's records in bulk with every field (summary's model, check's monitor, the bulk reader
 * benchmark): tkp_reader_peek_full() fills *b with the next records while they are LAUNCHes and
 * LIB_CALLs of one thread from a RUN whose templates are resolved, and returns how many (at most
 * TKP_LAUNCH_BULK; 0 when the next record is anything else, or r merges several captures).
 * Record i is what tkp_reader_next() would deliver: b's offset, pid, thread, tid and step,
 * host_ns[i]; when kind[i] is 0 a LAUNCH, launch = lt[tmpl[i]].launch (tkp_run_launch) with
 * launch.call = call[i], else a LIB_CALL, lib_call = ct[tmpl[i]].lib (tkp_run_lib) with
 * lib_call.call = call[i] and lib_call.call_ns = call_ns[i]. The columns kind, host_ns, tmpl,
 * call and call_ns are the reader's decoded batch in place, and the templates the reader's own:
 * all valid until the next call on r. tkp_reader_take_full() then consumes the first k, as
 * tkp_reader_take() does. (A pass that reads of a library call only its template's fields, as
 * summary's, ignores call and call_ns: they cost it nothing.) */
struct tkp_run_full {
    uint32_t thread, tid;
    uint64_t step, pid, offset;
    const uint8_t *kind;
    const uint64_t *host_ns, *call_ns;
    const uint32_t *call, *tmpl;
    const struct tkp_launch_tmpl *lt; /* by template id */
    const struct tkp_lib_tmpl *ct;
};
static inline const __typeof__(((struct tkp_record *)0)->launch) *
tkp_run_launch(const struct tkp_run_full *b, size_t i)
{
    return &b->lt[b->tmpl[i]].launch;
}
static inline const __typeof__(((struct tkp_record *)0)->lib_call) *
tkp_run_lib(const struct tkp_run_full *b, size_t i)
{
    return &b->ct[b->tmpl[i]].lib;
}
size_t tkp_reader_peek_full(struct tkp_reader *r, struct tkp_run_full *b);
void tkp_reader_take_full(struct tkp_reader *r, const struct tkp_run_full *b, size_t k);

/* NULL while nothing went wrong; else why and where the reader stopped (owned by r). */
const struct tkp_reader_err *tkp_reader_error(const struct tkp_reader *r);
const struct tkp_reader_stats *tkp_reader_stats(const struct tkp_reader *r);
uint32_t tkp_reader_flags(const struct tkp_reader *r); /* TKP_FILE_STREAM | TKP_FILE_SNAPSHOT */
void tkp_reader_close(struct tkp_reader *r);           /* accepts NULL */

/* Whether the writer of a capture file may still write it, by the shared lock the shim holds on
 * a file it writes (header flag TKP_FILE_LOCKED): 1 held, 0 let go (the file closed, the writer
 * ended however it ended), -1 when the file does not say (no flag: an older shim; not a capture)
 * or it cannot be told (the file gone, a file system without locks). Never waits. */
int tkp_file_writer_active(const char *path);

/* For a file that may still grow (follow.h): after tkp_reader_next() returned 0 or TKP_ERR_TORN at
 * the end of what was written, forgets that end, so that the next call reads again from the first
 * chunk not yet delivered (a torn chunk is read again whole). Returns 0, or the error of a bad
 * chunk, which is not retried (as for a merged reader or stdin, nothing is then done). */
int tkp_reader_retry(struct tkp_reader *r);

/* Several captures or directories merged into one reader: multireader.h. */

/* 1 for the record types whose host_ns comes from a dt field (inline: every consumer asks it of
 * every record). */
#define TKP_TIMED_TYPES                                                                            \
    (1u << TKP_REC_LAUNCH | 1u << TKP_REC_GRAPH_LAUNCH | 1u << TKP_REC_COPY | 1u << TKP_REC_SYNC | \
     1u << TKP_REC_EVENT_RECORD | 1u << TKP_REC_STREAM_WAIT | 1u << TKP_REC_NVTX |                \
     1u << TKP_REC_MARKER | 1u << TKP_REC_LIB_CALL)
static inline int tkp_record_has_time(enum tkp_rec type)
{
    return (unsigned)type < 32 && (TKP_TIMED_TYPES >> type & 1u);
}

/* ---- readers over other readers (multireader.c merges several captures into one) ----
 * A reader made by tkp_reader_new_over() forwards next/error/stats/flags to ops with impl and
 * frees impl with ops->free on tkp_reader_close(); every other reader.h call works on it
 * unchanged. This keeps the dependency one-way: multireader.c uses the plain reader, the plain
 * reader knows only this table. */
struct tkp_reader_ops {
    int (*next)(void *impl, struct tkp_record *rec);
    const struct tkp_reader_err *(*error)(const void *impl);
    const struct tkp_reader_stats *(*stats)(const void *impl);
    uint32_t (*flags)(const void *impl);
    void (*free)(void *impl);
};
/* A reader over impl (owned by it from now on). NULL when out of memory (impl not freed). */
struct tkp_reader *tkp_reader_new_over(const struct tkp_reader_ops *ops, void *impl);
/* The impl of a reader made with these ops; NULL for a plain reader or other ops. */
void *tkp_reader_impl(const struct tkp_reader *r, const struct tkp_reader_ops *ops);
/* Ends a plain reader's reading (next calls return 0 or its error): closes its file, frees its
 * chunk buffers, keeps the name strings it handed out, which live until tkp_reader_close(). */
void tkp_reader_release(struct tkp_reader *r);

#endif
