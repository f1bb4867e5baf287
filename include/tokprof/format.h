/* tokprof capture format v5: the constants shared by the writer (shim/) and the reader (decoder/).
 * docs/FORMAT.md is the normative description; this header only names its numbers. */
#ifndef TOKPROF_FORMAT_H
#define TOKPROF_FORMAT_H

#include <stdint.h>

/* File header: 16 bytes. The magic is PNG-style: a high byte, the name, CR LF, ^Z, LF, so that
 * transfers that mangle text are detected. */
#define TKP_FILE_MAGIC "\x89TKP\r\n\x1a\n"
#define TKP_FILE_MAGIC_LEN 8
#define TKP_FORMAT_VERSION 6     /* what the shim writes */
#define TKP_FORMAT_VERSION_MIN 1 /* the oldest a reader accepts: v1 has no templates, v2 no runs,
                                    v3 no repeating runs, v4 no REP, v5 no GPU templates */
#define TKP_FILE_HEADER_LEN 16

/* File header flags */
#define TKP_FILE_STREAM 0x1u   /* written incrementally while the program ran */
#define TKP_FILE_SNAPSHOT 0x2u /* a flight-recorder snapshot */
#define TKP_FILE_LOCKED 0x4u   /* the writer holds a shared flock(2) on the file while it writes */

/* Chunk header: 16 bytes, then one zstd frame of `compressed_len` bytes. */
#define TKP_CHUNK_MAGIC 0x43504b54u /* "TKPC" little-endian */
#define TKP_CHUNK_HEADER_LEN 16
#define TKP_CHUNK_MAX_RAW (64u << 20)        /* readers refuse larger chunks */
#define TKP_CHUNK_MAX_COMPRESSED (64u << 20) /* ditto */

/* Template ids (TMPL, LIB_TMPL) are below this; a writer past it writes full records. */
#define TKP_TMPL_MAX 65536u
/* Records in one RUN: a writer starts another past it; readers refuse more. */
#define TKP_RUN_MAX 65536u
/* Records in one COLS: likewise. */
#define TKP_COLS_MAX 65536u
/* GPU template ids (GPU_TMPL) are below this; a writer past it writes COLS of GPU_KERNEL. */
#define TKP_GPU_TMPL_MAX 4096u
/* Records in one GPU_RUN: as a COLS. */
#define TKP_GPU_RUN_MAX 65536u

/* Record types: the first element of every msgpack array in a chunk. */
enum tkp_rec {
    TKP_REC_CHUNK = 0,         /* [0, seq, base_ns] first record of every chunk */
    TKP_REC_NAME = 1,          /* [1, id, "string"] */
    TKP_REC_META = 2,          /* [2, {map}] */
    TKP_REC_THREAD = 3,        /* [3, thread, os_tid] */
    TKP_REC_LAUNCH = 10,       /* [10, dt, thread, step, name, stream, via, gx, gy, gz, bx, by, bz, smem] */
    TKP_REC_GRAPH_LAUNCH = 11, /* [11, dt, thread, step, graph, stream, via] */
    TKP_REC_GRAPH = 12,        /* [12, graph, [[node, type, name, gx, gy, gz, bx, by, bz, [deps]], ...]] */
    TKP_REC_LAUNCH_T = 13,     /* [13, dt, step, tmpl] [, call [, stack]]: a LAUNCH by template */
    TKP_REC_COPY = 14,         /* [14, dt, thread, step, kind, dir, bytes, stream, flags] */
    TKP_REC_SYNC = 15,         /* [15, dt, thread, step, kind, handle, wait_ns] */
    TKP_REC_EVENT_RECORD = 16, /* [16, dt, thread, step, event, stream] */
    TKP_REC_STREAM_WAIT = 17,  /* [17, dt, thread, step, stream, event] */
    TKP_REC_STEP = 18,         /* [18, step, thread, kind, begin_ns, mark_ns, end_ns, closed_by,
                                   launches, graph_launches, copies] */
    TKP_REC_NVTX = 19,         /* [19, dt, thread, step, kind, name, range_id] */
    TKP_REC_LOSS = 20,         /* [20, thread, dropped_total] */
    TKP_REC_MARKER = 21,       /* [21, dt, thread, step, kind, value] */
    TKP_REC_LIB_CALL = 22,     /* [22, dt, thread, step, call, lib, op, m, n, k, batch, atype,
                                   btype, ctype, compute, transa, transb, stream, a_ptr, host_ns,
                                   status, flags]; LAUNCH gets a trailing `call` inside one */
    TKP_REC_STACK = 23,        /* [23, stack, [pc, ...]] a sampled host call stack, innermost
                                   first (return addresses); LAUNCH gets trailing `call, stack` */
    TKP_REC_MODULE = 24,       /* [24, module, path, build_id, base, size] a loaded ELF object */
    TKP_REC_TMPL = 25,         /* [25, tmpl, thread, name, stream, via, gx, gy, gz, bx, by, bz,
                                   smem] a launch configuration, defined per chunk before use */
    TKP_REC_LIB_CALL_T = 26,   /* [26, dt, step, call, tmpl, host_ns]: a LIB_CALL by template */
    TKP_REC_LIB_TMPL = 27,     /* [27, tmpl, thread, lib, op, m, n, k, batch, atype, btype, ctype,
                                   compute, transa, transb, stream, a_ptr, status, flags] */
    TKP_REC_RUN = 28,          /* [28, step, n, call, kinds, dts, tmpls, calls, host_ns]: n LAUNCH_T
                                   / LIB_CALL_T of one step as columns (bins of LEB128 varints);
                                   kinds and tmpls nil: it repeats the chunk's last RUN (v4) */
    TKP_REC_COLS = 29,         /* [29, type, n, nfields, col_1 .. col_nfields]: n records of an
                                   all-integer type (GPU_KERNEL, GPU_COPY) as columns of
                                   zigzag deltas (bins of LEB128 varints) */
    /* 33 REP [33, n, back, times, others]: n records of the types of the groupable records
       `back` before them, as differences (v5; TKP_REC_REP in include/tokprof/rep.h, outside
       this enum: the reader expands it before the record decoder sees it) */
    /* 35 GPU_TMPL [35, gtmpl, name, stream, thread, join, graph, node, gx, gy, gz, bx, by, bz]
       and 36 GPU_RUN [36, n, tmpls, starts, durs, joins]: GPU_KERNEL records by template (v6;
       TKP_REC_GPU_TMPL, TKP_REC_GPU_RUN below, outside this enum: never delivered) */
    /* Tier 2, GPU time (CUPTI). Times are absolute CLOCK_MONOTONIC ns (no dt); thread
     * 4294967295, graph -1 and node -1 mean "not joined" (docs/FORMAT.md, "GPU records"). */
    TKP_REC_GPU_KERNEL = 30, /* [30, start_ns, end_ns, name, stream, correlation, thread, step,
                                 join, index, graph, node, gx, gy, gz, bx, by, bz] */
    TKP_REC_GPU_COPY = 31,   /* [31, start_ns, end_ns, kind, dir, bytes, stream, correlation,
                                 thread, step, join, index, graph, node] */
    TKP_REC_GPU_INFO = 32,   /* [32, status, mode, reason, clock, records, dropped, bad_time,
                                 unjoined, filtered, buffer_bytes_peak] */
};

/* GPU kernel templates (format v6, docs/FORMAT.md "GPU templates"): a GPU_TMPL defines the fields
 * a kernel's records share, a GPU_RUN holds n GPU_KERNEL records as template ids and columns. */
#define TKP_REC_GPU_TMPL 35
#define TKP_REC_GPU_RUN 36
/* GPU_RUN tmpls: tmpl << 2 | mode, mode: how correlation, step, index follow the previous
 * record's (c, s, i): */
enum tkp_gpu_run_mode {
    TKP_GMODE_NEXT = 0,  /* c + 1, s, i + 1: the next launch of the thread's step */
    TKP_GMODE_SAME = 1,  /* c, s, i: another node of the same graph launch */
    TKP_GMODE_CORR = 2,  /* c + 1, s, i: the next unjoined record */
    TKP_GMODE_JOINS = 3, /* given in the joins column */
};

/* LAUNCH.via: how the launch reached us; TKP_VIA_PTSZ is or-ed in for per-thread-stream forms. */
enum tkp_via {
    TKP_VIA_RUNTIME = 1,    /* __cudaLaunchKernel, cudaLaunchKernel (nvcc <<<>>> stubs) */
    TKP_VIA_RUNTIME_EX = 2, /* cudaLaunchKernelExC */
    TKP_VIA_DRIVER = 3,     /* cuLaunchKernel */
    TKP_VIA_DRIVER_EX = 4,  /* cuLaunchKernelEx */
    TKP_VIA_GRAPH_RT = 5,   /* cudaGraphLaunch */
    TKP_VIA_GRAPH_DRV = 6,  /* cuGraphLaunch */
    TKP_VIA_PTSZ = 0x10,
};

enum tkp_copy_kind { TKP_COPY_MEMCPY = 0, TKP_COPY_MEMSET = 1 };
enum tkp_copy_dir {
    TKP_DIR_HTOH = 0, TKP_DIR_HTOD = 1, TKP_DIR_DTOH = 2, TKP_DIR_DTOD = 3, TKP_DIR_DEFAULT = 4,
};
#define TKP_COPY_ASYNC 0x1u  /* COPY.flags: an *Async call */
#define TKP_COPY_PINNED 0x2u /* host side is page-locked memory we saw allocated */

enum tkp_sync_kind {
    TKP_SYNC_STREAM = 0, TKP_SYNC_EVENT = 1, TKP_SYNC_DEVICE = 2, TKP_SYNC_CTX = 3,
    TKP_SYNC_EVENT_QUERY = 4, /* a cudaEventQuery/cuEventQuery that answered "ready" */
    TKP_SYNC_MEMCPY = 5,      /* a blocking copy: the host waited for it */
};

/* WARMUP is never written: the decoder's learned step definition gives it to a token step whose
 * end is not the steady state's (docs/FORMAT.md "Steps") */
enum tkp_step_kind { TKP_STEP_TOKEN = 0, TKP_STEP_OUTSIDE = 1, TKP_STEP_WARMUP = 2, TKP_STEP_PART = 3 };
enum tkp_closed_by {
    TKP_CLOSE_EVENT_SYNC = 0, TKP_CLOSE_STREAM_SYNC = 1, TKP_CLOSE_DEVICE_SYNC = 2,
    TKP_CLOSE_BLOCKING_COPY = 3, TKP_CLOSE_NEXT_STEP = 4, TKP_CLOSE_NVTX = 5,
    TKP_CLOSE_MARKER = 6, TKP_CLOSE_EXIT = 7, TKP_CLOSE_EVENT_QUERY = 8,
};

enum tkp_graph_node_type { TKP_NODE_KERNEL = 0, TKP_NODE_MEMCPY = 1, TKP_NODE_MEMSET = 2,
                           TKP_NODE_OTHER = 3 };

enum tkp_nvtx_kind { TKP_NVTX_PUSH = 0, TKP_NVTX_POP = 1, TKP_NVTX_MARK = 2,
                     TKP_NVTX_RANGE_START = 3, TKP_NVTX_RANGE_END = 4 };

enum tkp_marker_kind { TKP_MARK_STEP_BEGIN = 0, TKP_MARK_STEP_END = 1 };

/* GPU_KERNEL/GPU_COPY.join: the kind of host record the GPU work came from; `index` is its
 * ordinal among the records of that type with the same thread and step. */
enum tkp_gpu_join { TKP_JOIN_NONE = 0, TKP_JOIN_LAUNCH = 1, TKP_JOIN_GRAPH_LAUNCH = 2,
                    TKP_JOIN_COPY = 3 };
/* GPU_INFO.status: why GPU time is (not) in the capture. */
enum tkp_gpu_status { TKP_GPU_ON = 0, TKP_GPU_OFF = 1, TKP_GPU_NO_CUPTI = 2,
                      TKP_GPU_BUSY = 3 /* another CUPTI subscriber (nsys, torch.profiler) */,
                      TKP_GPU_NO_DEVICE = 4, TKP_GPU_ERROR = 5 };
#define TKP_GPU_THREAD_NONE 0xffffffffu

/* LIB_CALL.lib; types are the CUDA enum values (cudaDataType, cublasComputeType_t,
 * cublasOperation_t), -1 when unknown; m, n, k, batch 0 when unknown. */
enum tkp_lib { TKP_LIB_CUBLAS = 1, TKP_LIB_CUBLASLT = 2, TKP_LIB_CUDNN = 3 };
#define TKP_LIBF_CAPTURED 0x1u /* LIB_CALL.flags: its stream was capturing a graph (not run now) */

#endif
