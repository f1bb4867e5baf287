/* tokprof decoder: live figures of running processes — what `tokprof top` draws and `tokprof
 * serve` exports, fed record by record from the follow reader (follow.h), in bounded memory.
 *
 *     struct tkp_live *l;
 *     tkp_live_new(classes, &l);
 *     while (...) tkp_live_add(l, &rec);              // records of any number of processes
 *     tkp_live_exited(l, pid);                        // the follow reader said it ended
 *     struct tkp_lwin w;
 *     tkp_live_window(l, tkp_live_proc(l, 0), TKP_LIVE_ALL, 10, &w);   // the last 10 s
 *     tkp_live_free(l);
 *
 * Two kinds of figures per process (keyed by META pid):
 *   - counters since the process started (serve): tokens, token steps, steps, launches, dropped
 *     records, GPU busy and per class GPU time, a histogram of token-step durations;
 *   - a window over the last seconds (top): tokens/s, steps/s, inter-token latency p50/p99, GPU
 *     busy share and idle split, top classes and kernels by GPU time, the worst step and why,
 *     a per-second history of tokens/s.
 *
 * The rules (the same as the offline commands', simplified where a full pass would be needed):
 *   - A step is a STEP record; token steps (kind token) make tokens. Its tokens are the largest
 *     `n` of its executed unbatched GEMMs (libcalls.h's rule with the row-major token dimension:
 *     the capture-wide vote of the offline model needs the whole run), else the sequences (`n` of
 *     the last GEMM) of the thread's previous step with shapes, else 1 (a capture without
 *     library calls: a batch-1 decode loop, as `tokprof steps` assumes).
 *   - Inter-token latency: the time between the ends of two consecutive token steps of a thread;
 *     the token-step duration (the histogram) is a step's own end - begin.
 *   - GPU time: kernels (GPU_KERNEL) by class; busy time is per step the union of its kernels'
 *     intervals, swept in arrival order (CUPTI hands them over in completion order: exact for one
 *     stream, a slight undercount of overlap across streams otherwise); kernels not joined to a
 *     step count their duration.
 *   - A step without GPU records (not timed: TOKPROF_GPU=window:N/M or trigger, or its records
 *     not yet handed over) is unknown: busy share, idle split and verdict are over the window's
 *     timed steps alone, never diluted by zeros.
 *   - Idle split: per window step, GPU idle inside its kernels' span (the GPU waited for launches)
 *     and outside it (the host did other work between forwards).
 *   - Verdict: figures.h's one rule over the window's token steps (their time split into the host
 *     waiting on the GPU in syncs, in launch calls, in its own code), the launch cost the
 *     smallest gap between two consecutive launches of one of those steps: on a whole capture
 *     the word summary says.
 *   - Windows are on the capture's clock: they end at the newest time the process wrote.
 *
 * Memory per process: TKP_LIVE_RING recent steps per thread (at most TKP_LIVE_THREADS threads),
 * TKP_LIVE_SECONDS one-second buckets, and per kernel name (at most TKP_LIVE_NAMES, the rest
 * lumped as "(other kernels)") its GPU time per bucket. Percentiles are over the window's steps
 * still in the ring (the last TKP_LIVE_RING per thread). */
#ifndef TKP_LIVE_H
#define TKP_LIVE_H

#include <stddef.h>
#include <stdint.h>

#include "model/classes.h"
#include "model/figures.h"

struct tkp_record;

#define TKP_LIVE_RING 1024   /* recent steps kept per thread */
#define TKP_LIVE_THREADS 256 /* threads per process followed (capture-local indices below) */
#define TKP_LIVE_SECONDS 64  /* one-second buckets kept: windows up to 60 s */
#define TKP_LIVE_NAMES 512   /* kernel names tracked per process */
#define TKP_LIVE_HIST 15     /* token-step duration histogram buckets, +Inf included */
#define TKP_LIVE_TOP 5       /* classes and kernels a window lists */
#define TKP_LIVE_SPARK 30    /* seconds of tokens/s history */
#define TKP_LIVE_ALL UINT32_MAX

/* The histogram's upper bounds in seconds; the last bucket is +Inf. */
extern const double tkp_live_hist_le[TKP_LIVE_HIST - 1];

struct tkp_live_proc; /* internal */

/* A process's counters since it started (read-only for callers). */
struct tkp_lcount {
    uint64_t pid;
    char program[64];
    int ended;   /* the follow reader reported its end */
    int has_gpu; /* GPU records seen */
    uint64_t tokens, token_steps, steps, launches, dropped, gpu_dropped, kernels;
    uint64_t busy_ns; /* GPU busy (see above) */
    uint64_t timed_ns; /* host duration of the token steps with GPU records: busy_ns over it is
                          the busy share, whatever share of the steps was timed (window:N/M) */
    uint64_t cls_ns[TKP_CLASSES_MAX];
    uint64_t hist[TKP_LIVE_HIST]; /* token-step durations, per bucket (not cumulative) */
    uint64_t dur_sum_ns;
    uint64_t now_ns; /* the newest capture time seen */
};

struct tkp_lwin {
    unsigned window_s;
    uint64_t steps; /* token steps ending in the window (in the ring) */
    double tok_s, steps_s;
    uint64_t itl_p50, itl_p99; /* ns */
    int has_gpu;
    uint64_t timed_steps; /* of steps, those with GPU records: the busy and idle shares and the
                             verdict are over them alone (TOKPROF_GPU=window:N/M, trigger) */
    double busy_share, launch_idle_share, host_idle_share;
    struct tkp_verdict v; /* figures.h */
    const char *verdict;  /* v.word: "gpu-bound", "launch-bound", "host-bound", "unknown" */
    int ncls;
    int cls[TKP_LIVE_TOP];
    uint64_t cls_ns[TKP_LIVE_TOP];
    int nnames;
    const char *names[TKP_LIVE_TOP]; /* owned by the live state, valid until tkp_live_free */
    uint64_t name_ns[TKP_LIVE_TOP];
    uint64_t gpu_ns; /* all kernel time in the window */
    int has_worst;
    uint32_t worst_tid;
    uint64_t worst_seg, worst_ns, worst_busy_ns;
    int worst_timed; /* it has GPU records (else its busy time is unknown) */
    int worst_cls;                /* its top class, -1 none */
    const char *worst_cause;      /* why it was slow: "no GPU time", "unknown (GPU not timed)",
                                     "host (GPU mostly idle)" (busy under half its duration) or
                                     its top class's name */
    double spark[TKP_LIVE_SPARK]; /* tokens/s per second, oldest first (all threads) */
};

struct tkp_live;

/* cl: the kernel classes (not owned; must outlive l). Returns 0 or TKP_ERR_NOMEM. */
int tkp_live_new(const struct tkp_classes *cl, struct tkp_live **out);
void tkp_live_free(struct tkp_live *l); /* accepts NULL */
/* Feeds one record (its pid says the process). Returns 0 or TKP_ERR_NOMEM. */
int tkp_live_add(struct tkp_live *l, const struct tkp_record *rec);
/* Marks process pid ended (it stays listed until tkp_live_forget). */
void tkp_live_exited(struct tkp_live *l, uint64_t pid);
/* Drops process pid and its state. */
void tkp_live_forget(struct tkp_live *l, uint64_t pid);

size_t tkp_live_nprocs(const struct tkp_live *l);
/* The i-th process (in order of first record), NULL past the end; valid until the next add or
 * forget. */
const struct tkp_lcount *tkp_live_proc(const struct tkp_live *l, size_t i);
/* The window figures of process i over its last window_s seconds (1..60), for one thread (its
 * capture-local index, as tkp_live_thread_list gives) or TKP_LIVE_ALL. */
void tkp_live_window(const struct tkp_live *l, size_t i, uint32_t thread, unsigned window_s,
                     struct tkp_lwin *w);
/* The capture-local thread indices of process i that have steps: up to max of them into idx,
 * their OS tids into tid. Returns how many. */
size_t tkp_live_thread_list(const struct tkp_live *l, size_t i, uint32_t *idx, uint32_t *tid,
                            size_t max);

#endif
