/* simgpu driver internals: the state shared by the files of the fake libcuda.so.1.
 *
 * __CUDA_API_VERSION_INTERNAL makes cuda.h declare every exported name literally (cuMemAlloc_v2,
 * cuLaunchKernel_ptsz, ...) instead of #defining the public names onto them, so each definition
 * below is checked against the real prototype of the symbol it exports. */
#ifndef SIMGPU_SIM_H
#define SIMGPU_SIM_H

#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "simgpu_ext.h"

typedef int64_t simtime_t; /* ns on CLOCK_MONOTONIC */

/* Object tags, so a stale or foreign handle is answered with CUDA_ERROR_INVALID_HANDLE rather
 * than a crash in the common cases. */
enum {
    MAGIC_STREAM = 0x5354524d,
    MAGIC_EVENT = 0x45564e54,
    MAGIC_FUNC = 0x46554e43,
    MAGIC_MODULE = 0x4d4f444c,
    MAGIC_GRAPH = 0x47525048,
    MAGIC_NODE = 0x4e4f4445,
    MAGIC_GEXEC = 0x47455845,
    MAGIC_CTX = 0x43545854,
};

struct sim_module;

struct sim_func { /* CUfunction and CUkernel are the same object */
    uint32_t magic;
    char *name;
    struct sim_module *mod;
    int family; /* cost family index, cached; -1 = not classified yet */
    int max_dyn_shmem;
    struct sim_func *next;
};

struct sim_module { /* CUmodule and CUlibrary */
    uint32_t magic;
    struct sim_func *funcs;
};

struct sim_node;
struct sim_capture {
    uint64_t id;
    struct sim_graph *graph;
    struct sim_stream *origin;
    struct sim_capture *next; /* all captures ever begun (kept: events may point at them) */
};

enum { STREAM_CREATED = 0, STREAM_LEGACY = 1, STREAM_PER_THREAD = 2 };

struct sim_stream {
    uint32_t magic;
    int id;  /* truth-log id: 0 legacy, then 1, 2, ... in creation order */
    int kind;
    unsigned flags;
    int priority;
    simtime_t tail; /* end of the last op enqueued */
    struct sim_capture *cap;   /* non-NULL while capturing */
    struct sim_node **deps;    /* capture: the nodes the next captured op depends on */
    size_t ndeps, capdeps;
    struct sim_stream *next;   /* all live streams */
};

struct sim_event {
    uint32_t magic;
    unsigned flags;
    int recorded;
    simtime_t time;
    struct sim_capture *cap; /* recorded during a capture: fork/join point */
    struct sim_node **deps;
    size_t ndeps;
};

enum sim_copy_dir { DIR_HTOD = 0, DIR_DTOH = 1, DIR_DTOD = 2, DIR_HTOH = 3 };

/* One SIMGPU_WRITES effect of a kernel (writes.c): COUNT elements of VALUE at DST. */
#define SIM_MAX_WRITES 4
struct sim_write {
    void *dst;
    size_t count;
    unsigned elemsize;
    unsigned char value[8];
};

struct sim_node {
    uint32_t magic;
    uint64_t id;
    CUgraphNodeType type; /* KERNEL, MEMCPY, MEMSET or EMPTY */
    struct sim_graph *graph;
    struct sim_node **deps;
    size_t ndeps;
    /* kernel */
    struct sim_func *func;
    unsigned grid[3], block[3], shmem;
    struct simgpu_launch_info info;
    struct sim_write writes[SIM_MAX_WRITES]; /* SIMGPU_WRITES, resolved at capture */
    int nwrites;
    /* memcpy / memset */
    void *dst;
    const void *src;
    size_t bytes;
    int dir, pinned;
    unsigned value, elemsize;
};

struct sim_graph {
    uint32_t magic;
    uint64_t id;
    struct sim_node **nodes;
    size_t n, cap;
};

struct sim_gexec {
    uint32_t magic;
    uint64_t id;
    struct sim_node *nodes; /* copies, in topological order */
    size_t **dep_idx;       /* per node: indices (into nodes) of its dependencies */
    size_t n;
};

/* One op as the truth log and the timeline see it. */
struct sim_op {
    int kind; /* 0 kernel, 1 copy, 2 memset */
    const char *name;
    struct sim_stream *stream;
    CUstream handle;
    simtime_t start, end;
    int via; /* enum simgpu_via, or 3 = graph */
    uint64_t graph_node, graph_exec; /* 0 = null */
    unsigned grid[3], block[3];
    double flops, bytes;
    int dir, pinned;
    int faulted;
};
#define SIM_VIA_GRAPH 3

/* ---- core.c ---- */
extern pthread_mutex_t sim_lock;
void sim_ensure_init(void); /* idempotent; reads the environment once */
simtime_t sim_now(void);
void sim_wait_until(simtime_t t); /* never call with sim_lock held */
int sim_zero(void);
uint64_t sim_next_id(void);       /* process-unique ids for graphs, nodes, execs, captures */
void *sim_grow(void *p, size_t *cap, size_t need, size_t elem);
/* Takes (and clears) the calling thread's simgpuSetLaunchInfo. */
struct simgpu_launch_info sim_take_launch_info(void);
CUresult simgpuSetLaunchInfo(const struct simgpu_launch_info *info);
/* The fake CUPTI's observer (simgpu_ext.h): sim_api around every work-enqueuing driver call,
 * sim_observe for every executed op (from tlog_write). */
CUresult simgpuSetObserver(const struct simgpu_observer *obs);
CUresult simgpuNodeId(CUgraphNode node, unsigned long long *id);
void sim_api(int site, const char *func);
void sim_observe(const struct sim_op *op);

/* ---- cost.c ---- */
void cost_init(void); /* reads SIMGPU_COST, SIMGPU_ZERO, SIMGPU_JITTER, SIMGPU_SLOW, SIMGPU_STALL */
simtime_t cost_latency(void);
simtime_t cost_api_ns(void); /* SIMGPU_API_NS: a launch call's least host time */
/* Kernel duration including SLOW/JITTER faults; *stall_ns gets the STALL delay. Counts the
 * execution for the fault knobs, so call exactly once per executed kernel. */
simtime_t cost_kernel(struct sim_func *f, const unsigned grid[3], const struct simgpu_launch_info *li,
                      simtime_t *stall_ns, int *faulted);
simtime_t cost_copy(size_t bytes, int dir, int pinned);
simtime_t cost_memset(size_t bytes);

/* ---- timeline.c ---- */
struct sim_stream *tl_legacy(void);
/* Resolves a caller's CUstream: NULL/CU_STREAM_LEGACY -> legacy (or per-thread when ptsz),
 * CU_STREAM_PER_THREAD -> the thread's stream. NULL result = invalid handle. */
struct sim_stream *tl_resolve(CUstream h, int ptsz);
/* Earliest start of a new op on s (FIFO + legacy-stream rules), not before `earliest`. */
simtime_t tl_ready(struct sim_stream *s, simtime_t earliest);
void tl_commit(struct sim_stream *s, simtime_t end);
simtime_t tl_all_tails(void); /* the latest tail of every stream (context synchronize) */
/* Executes (times, logs) one op on a non-capturing stream; start is computed here. */
void tl_exec(struct sim_op *op);
struct sim_stream *tl_new_stream(int kind, unsigned flags, int priority);
void tl_unlink_stream(struct sim_stream *s);
void tl_end_capture(struct sim_capture *cap);

/* ---- truthlog.c ---- */
void tlog_init(void);
void tlog_write(const struct sim_op *op);
void tlog_flush(void);

/* ---- memory.c ---- */
int mem_is_pinned(const void *p);
size_t mem_total(void);
void ctx_primary_retained(int delta); /* extra.c: primary-context reference count */
void mem_register(void *p, size_t size);
void mem_unregister(void *p);
void mem_register_host(void *p, size_t size);
int mem_unregister_host(void *p);
CUresult mem_copy2d(const CUDA_MEMCPY2D *c, CUstream h, int ptsz, int sync);
int mem_is_device(const void *p);
int mem_fits(const void *p, size_t bytes); /* [p, p+bytes) lies inside one known allocation */
void mem_do_copy(void *dst, const void *src, size_t bytes);
void mem_do_set(void *dst, unsigned value, unsigned elemsize, size_t count);

/* ---- writes.c ---- */
void writes_init(void); /* reads SIMGPU_WRITES */
/* The rules matching KERNEL, their destinations read from its kernelParams (NULL: none), into
 * out[SIM_MAX_WRITES]; returns how many. Takes no simulator lock. */
int writes_resolve(const char *kernel, void **params, const unsigned grid[3], struct sim_write *out);
void writes_apply(const struct sim_write *w, int n);

/* ---- graph.c ---- */
/* Called with sim_lock held for a stream that is capturing: appends a node depending on the
 * stream's current capture dependencies and makes it the new dependency. */
struct sim_node *graph_capture_node(struct sim_stream *s, CUgraphNodeType type);
struct sim_node *graph_new_node(struct sim_graph *g, CUgraphNodeType type, const CUgraphNode *deps,
                                size_t ndeps);
/* cuGraphInstantiate and cuGraphExecDestroy for the driver's own use (graph_update.c), so that a
 * preloaded profiler's wrappers of the exported names never see the driver's internal calls. */
CUresult graph_instantiate(CUgraphExec *out, CUgraph hGraph);
CUresult graph_exec_destroy(CUgraphExec hExec);

/* ---- module.c ---- */
struct sim_func *mod_func(CUfunction f); /* validates */

/* ---- gpa.c ---- */
struct simgpu_proc_entry {
    const char *name;    /* the name callers ask for (no _v2 suffix) */
    int version;         /* first CUDA version this variant answers */
    void *fn;            /* default/legacy-stream variant */
    void *fn_ptsz;       /* per-thread-default-stream variant, or NULL */
    const char *sym;     /* exported symbol of fn */
    const char *sym_ptsz;
};

CUresult simgpuGetProcTable(const struct simgpu_proc_entry **t, size_t *n);

#define SIM_EXPORT __attribute__((visibility("default")))

#endif
