/* simgpu private extension: what a fake library tells the simulated driver about its next launch.
 *
 * The real stack has no such call; the fakes need it so that the truth log can say how a kernel
 * was launched ("runtime", "library") and so that library kernels' durations can follow their
 * shapes (roofline). A fake obtains it exactly as it obtains every driver entry point:
 *
 *     cuGetProcAddress_v2("simgpuSetLaunchInfo", &pfn, 13000, 0, NULL)
 *
 * It returns CUDA_ERROR_NOT_FOUND (and a NULL pfn) on a real driver, so the fakes keep working
 * (without shape-driven costs) if a real libcuda is ever found first. */
#ifndef SIMGPU_EXT_H
#define SIMGPU_EXT_H

#include <cuda.h>

enum simgpu_via {
    SIMGPU_VIA_DRIVER = 0,  /* default: a cuLaunchKernel[Ex] called by the program itself */
    SIMGPU_VIA_RUNTIME = 1, /* the fake libcudart launching for <<<>>> / cudaLaunchKernel* */
    SIMGPU_VIA_LIBRARY = 2, /* a fake cuBLAS / cuBLASLt / cuDNN launching its own kernel */
};

struct simgpu_launch_info {
    int via;      /* enum simgpu_via */
    double flops; /* library kernels: work, for the roofline; 0 = use the name/grid cost model */
    double bytes; /* library kernels: bytes moved, for the roofline */
};

/* Applies to the next launch made by the calling thread only, then is cleared. Accepts NULL
 * (clears). Never fails on simgpu. */
typedef CUresult (*simgpu_set_launch_info_fn)(const struct simgpu_launch_info *info);

#define SIMGPU_SET_LAUNCH_INFO_NAME "simgpuSetLaunchInfo"

/* ---- observer: what the fake libcupti.so.13 (tests/simgpu/cupti) sees ------------------------
 * A real CUPTI is fed by the driver itself; the fake gets the same facts through this hook:
 * every driver call that enqueues work (entry and exit, in the calling thread, without the
 * simulator's lock) and every op that executes, with its simulated times (under the lock: the
 * observer must not call the driver). Obtained with cuGetProcAddress("simgpuSetObserver"). */
struct simgpu_op_view {
    int kind; /* 0 kernel, 1 copy, 2 memset */
    const char *name;
    int stream_id;                   /* the truth log's small stream id */
    long long start_ns, end_ns;      /* simulated, CLOCK_MONOTONIC */
    unsigned long long graph_node;   /* 0 unless a graph node (the id simgpuNodeId answers) */
    unsigned long long graph_exec;   /* 0 unless a graph node */
    unsigned grid[3], block[3];
    unsigned long long bytes;        /* copies and memsets */
    int dir;                         /* copies: 0 HtoD, 1 DtoH, 2 DtoD, 3 HtoH */
};
struct simgpu_observer {
    void (*api)(int site /* 0 enter, 1 exit */, const char *func /* exported name */);
    void (*op)(const struct simgpu_op_view *op);
};
/* Installs (or, with NULL, removes) the observer. */
typedef CUresult (*simgpu_set_observer_fn)(const struct simgpu_observer *obs);
#define SIMGPU_SET_OBSERVER_NAME "simgpuSetObserver"
/* The process-unique id of a graph node (the truth log's graph_node). */
typedef CUresult (*simgpu_node_id_fn)(CUgraphNode node, unsigned long long *id);
#define SIMGPU_NODE_ID_NAME "simgpuNodeId"

#endif
