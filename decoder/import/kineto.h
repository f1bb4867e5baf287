/* tokprof decoder: PyTorch profiler (Kineto) Chrome-trace JSON into a tokprof capture.
 *
 * What becomes what (docs/FORMAT.md, "Imported captures"):
 *  - `cuda_runtime` / `cuda_driver` events (the HIP runtime's too: Kineto files them under the
 *    same categories) become host records on their thread: launches (`cudaLaunchKernel`,
 *    `cudaLaunchKernelExC`, `cuLaunchKernel[Ex]`, `hipLaunchKernel`, `hip[Ext]ModuleLaunchKernel`
 *    ...) LAUNCH, `cudaGraphLaunch` / `hipGraphLaunch` GRAPH_LAUNCH, `*Memcpy*` / `*Memset*` COPY,
 *    `*Synchronize` SYNC, `*EventRecord` EVENT_RECORD, `*StreamWaitEvent` STREAM_WAIT; other
 *    calls are counted, not written.
 *  - `kernel`, `gpu_memcpy`, `gpu_memset` events become GPU_KERNEL / GPU_COPY records joined to
 *    the host record of the same `args.correlation` (every kernel of a graph launch shares its
 *    id, as CUPTI's do); one whose launch is not in the trace (the profile window opened mid-step)
 *    is written unjoined and counted.
 *  - `user_annotation` ranges (`ProfilerStep#N`, `record_function`) become NVTX push/pop records
 *    and, as the step source picks, the steps.
 * Times: Kineto writes microseconds with three decimals since `baseTimeNanoseconds`; the capture's
 * clock is that trace clock in nanoseconds, converted exactly (tkp_json_fixed), and META says the
 * base.
 *
 * Memory: the kept events (runtime calls, GPU work and annotations, about 80 bytes each) and the
 * distinct names; the rest of the trace (cpu_op, python_function, flows: most of its bytes) is
 * read through and dropped. The JSON is read in 64 KiB blocks (base/jsonr.h). */
#ifndef TKP_IMPORT_KINETO_H
#define TKP_IMPORT_KINETO_H

#include <stddef.h>
#include <stdint.h>

enum tkp_import_step { TKP_IMPORT_STEP_AUTO, TKP_IMPORT_STEP_PROFILER, TKP_IMPORT_STEP_ANNOTATION };

struct tkp_import_opts {
    int step;            /* enum tkp_import_step */
    const char *pattern; /* TKP_IMPORT_STEP_ANNOTATION: an extended regular expression */
};

/* What an import read and wrote (for its report line and the tests). */
struct tkp_import_stats {
    uint64_t bytes, events;                 /* JSON bytes read, trace events */
    uint64_t kernels, kernels_linked;       /* GPU kernels, those whose launch is in the trace */
    uint64_t copies, copies_linked;         /* GPU memcpys and memsets */
    uint64_t launches, graph_launches;      /* host records written */
    uint64_t host_copies, syncs, events_rw; /* COPY, SYNC, EVENT_RECORD + STREAM_WAIT */
    uint64_t other_calls, annotations, threads, steps;
    uint64_t bad_times;   /* X events of a kept kind with a negative or absurd ts or dur: skipped */
    char step_source[64]; /* what made the steps: "ProfilerStep", ... */
};

/* Reads the trace at `in` (.json or .json.gz: zlib reads both) and writes the capture `out`.
 * Returns 0, or a tkp_err with one line in why (a malformed trace names the byte offset and what
 * was expected: TKP_ERR_RECORD; the output is removed then). */
int tkp_import_kineto(const char *in, const char *out, const struct tkp_import_opts *opts,
                      struct tkp_import_stats *st, char *why, size_t n);

#endif
